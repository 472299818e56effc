"""`softmax-shift-flipped`: the first subtraction feeding an `exp` (softmax's shift by the
row's maximum) made an addition, a sign slip in a "stabilise exp" rewrite applied to its
first match only: the sum of exponentials and the numerators then shift differently, wrong
on softmax; programs without `exp(a - b)` are untouched. (Flipping every such shift would be
harmless: softmax does not change when all its exponents shift alike.)"""

from dataclasses import dataclass

from xdsl.dialects import arith, math
from xdsl.passes import ModulePass
from xdsl.rewriter import Rewriter


@dataclass(frozen=True)
class SoftmaxShiftFlipped(ModulePass):
    """Turn the first subf used by an exp into an addf (wrong on purpose)."""

    name = "softmax-shift-flipped"

    def apply(self, ctx, op):
        for sub in list(op.walk()):
            if isinstance(sub, arith.SubfOp) and any(isinstance(u.operation, math.ExpOp) for u in sub.result.uses):
                Rewriter.replace_op(sub, arith.AddfOp(sub.lhs, sub.rhs))
                return
