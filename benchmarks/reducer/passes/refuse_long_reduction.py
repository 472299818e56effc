"""`refuse-long-reduction`: a target legalization that refuses reductions of 512 iterations or
more with a located error, a limit the target does not have (a refusal its user disputes):
MNIST's first layer (K = 784) is refused, shorter reductions are not."""

from dataclasses import dataclass

from xdsl.dialects import affine
from xdsl.ir.affine import AffineConstantExpr
from xdsl.passes import ModulePass

from einc.errors import TargetError
from einc.ir.locations import at_op


@dataclass(frozen=True)
class RefuseLongReduction(ModulePass):
    """Refuse reductions of 512 iterations or more (a limit that does not exist)."""

    name = "refuse-long-reduction"

    def apply(self, ctx, op):
        for loop in op.walk():
            if not isinstance(loop, affine.ForOp) or "einc.init" in loop.attributes:
                continue
            upper = loop.upperBoundMap.data.results
            iv = loop.body.block.args[0]
            reduces = any(isinstance(s, affine.StoreOp) and iv not in s.indices for s in loop.body.walk())
            if reduces and len(upper) == 1 and isinstance(upper[0], AffineConstantExpr) and upper[0].value >= 512:
                raise TargetError(f"reductions of {upper[0].value} iterations exceed this target's limit of 511",
                                  at_op(loop.location))
