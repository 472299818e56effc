"""`short-long-reduction`: stops the innermost loop of a long reduction (16 iterations or
more) one iteration early, an off-by-one in a "peel the last iteration" rewrite that forgot
to emit the peeled one: wrong on matmuls over long K (MNIST), right on short reductions."""

from dataclasses import dataclass

from xdsl.dialects import affine
from xdsl.dialects.builtin import AffineMapAttr
from xdsl.ir.affine import AffineConstantExpr, AffineMap
from xdsl.passes import ModulePass


@dataclass(frozen=True)
class ShortLongReduction(ModulePass):
    """Shorten innermost reductions of 16 iterations or more by one (wrong on purpose)."""

    name = "short-long-reduction"

    def apply(self, ctx, op):
        for loop in list(op.walk()):
            if not isinstance(loop, affine.ForOp) or "einc.init" in loop.attributes:
                continue
            if any(isinstance(inner, affine.ForOp) for inner in loop.body.walk()):
                continue
            results = loop.upperBoundMap.data.results
            if len(results) != 1 or not isinstance(results[0], AffineConstantExpr) or results[0].value < 16:
                continue
            iv = loop.body.block.args[0]
            reduces = any(isinstance(s, affine.StoreOp) and iv not in s.indices for s in loop.body.walk())
            if reduces:
                loop.upperBoundMap = AffineMapAttr(AffineMap(0, 0, (AffineConstantExpr(results[0].value - 1),)))
