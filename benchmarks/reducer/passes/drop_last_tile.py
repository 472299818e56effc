"""`drop-last-tile`: a loop-bounds "tightening" after tiling that drops the last tile of a
loop with a step above 1. Wrong on scheduled programs that tile (a convolution's filters),
right on untiled loops."""

from dataclasses import dataclass

from xdsl.dialects import affine
from xdsl.dialects.builtin import AffineMapAttr
from xdsl.ir.affine import AffineConstantExpr, AffineMap
from xdsl.passes import ModulePass


@dataclass(frozen=True)
class DropLastTile(ModulePass):
    """Stop loops with a step above 1 one step early (wrong on purpose)."""

    name = "drop-last-tile"

    def apply(self, ctx, op):
        for loop in list(op.walk()):
            if not isinstance(loop, affine.ForOp) or loop.step.value.data <= 1:
                continue
            lower, upper = loop.lowerBoundMap.data.results, loop.upperBoundMap.data.results
            if len(upper) == 1 and isinstance(upper[0], AffineConstantExpr) and len(lower) == 1 \
                    and isinstance(lower[0], AffineConstantExpr):
                step = loop.step.value.data
                if upper[0].value - lower[0].value >= step:
                    loop.upperBoundMap = AffineMapAttr(AffineMap(0, 0, (AffineConstantExpr(upper[0].value - step),)))
