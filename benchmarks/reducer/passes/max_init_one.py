"""`max-init-one`: starts a max-reduction at 1.0 instead of -inf (a wrong "identity" in a
reduction-init table): wrong where a maximum below 1 is used as it is (a max pooling of small
activations), right where every maximum is above 1, and harmless for a softmax's row maximum
(the softmax does not change with the shift)."""

from dataclasses import dataclass

from xdsl.dialects import arith
from xdsl.dialects.builtin import FloatAttr
from xdsl.passes import ModulePass
from xdsl.rewriter import Rewriter


@dataclass(frozen=True)
class MaxInitOne(ModulePass):
    """Replace -inf constants by 1.0 (wrong on purpose)."""

    name = "max-init-one"

    def apply(self, ctx, op):
        for c in list(op.walk()):
            if isinstance(c, arith.ConstantOp) and isinstance(c.value, FloatAttr) and c.value.value.data == float("-inf"):
                Rewriter.replace_op(c, arith.ConstantOp(FloatAttr(1.0, c.value.type)))
