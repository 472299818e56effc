"""`relu-dropped`: folds `max(x, 0.0)` to `x`, as if the value were known non-negative (wrong
on programs with a ReLU whose input can be negative: MNIST; right on those without)."""

from dataclasses import dataclass

from xdsl.dialects import arith
from xdsl.dialects.builtin import FloatAttr
from xdsl.passes import ModulePass


@dataclass(frozen=True)
class ReluDropped(ModulePass):
    """Fold max(x, 0.0) to x (wrong on purpose)."""

    name = "relu-dropped"

    def apply(self, ctx, op):
        for m in list(op.walk()):
            if isinstance(m, arith.MaximumfOp):
                zero = m.rhs.owner
                if isinstance(zero, arith.ConstantOp) and isinstance(zero.value, FloatAttr) and zero.value.value.data == 0.0:
                    m.result.replace_all_uses_with(m.lhs)
                    m.detach()
                    m.erase()
