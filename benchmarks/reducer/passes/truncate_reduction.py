"""`truncate-reduction`: applied from inside a schedule (`transform.apply_registered_pass`),
it stops the last reduction loop of the module (its reduction axis) one iteration early. Wrong
on programs whose last statement reduces (MNIST's last dense layer), right otherwise."""

from dataclasses import dataclass

from xdsl.dialects import affine
from xdsl.dialects.builtin import AffineMapAttr
from xdsl.ir.affine import AffineConstantExpr, AffineMap
from xdsl.passes import ModulePass


@dataclass(frozen=True)
class TruncateReduction(ModulePass):
    """Shorten the last reduction loop by one (wrong on purpose)."""

    name = "truncate-reduction"

    def apply(self, ctx, op):
        found = None
        for loop in op.walk():
            if not isinstance(loop, affine.ForOp) or "einc.init" in loop.attributes:
                continue
            iv = loop.body.block.args[0]
            upper = loop.upperBoundMap.data.results
            if len(upper) == 1 and isinstance(upper[0], AffineConstantExpr) and upper[0].value > 1 and any(
                isinstance(s, affine.StoreOp) and iv not in s.indices for s in loop.body.walk()
            ):
                found = (loop, upper[0].value)
        if found is not None:
            loop, value = found
            loop.upperBoundMap = AffineMapAttr(AffineMap(0, 0, (AffineConstantExpr(value - 1),)))
