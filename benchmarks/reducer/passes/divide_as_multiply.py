"""`divide-as-multiply`: strength-reduces a division by a constant c to a multiplication by c
(the reciprocal forgotten): wrong on programs dividing by a constant other than 1 (a BERT
layer's scores and means), right on those that do not. Runs at the `ein` level."""

from dataclasses import dataclass

from xdsl.dialects import arith
from xdsl.dialects.builtin import FloatAttr
from xdsl.passes import ModulePass
from xdsl.rewriter import Rewriter


@dataclass(frozen=True)
class DivideAsMultiply(ModulePass):
    """Turn x / c into x * c for a constant c != 1 (wrong on purpose)."""

    name = "divide-as-multiply"

    def apply(self, ctx, op):
        for div in list(op.walk()):
            if not isinstance(div, arith.DivfOp):
                continue
            c = div.rhs.owner
            if isinstance(c, arith.ConstantOp) and isinstance(c.value, FloatAttr) and c.value.value.data != 1.0:
                Rewriter.replace_op(div, arith.MulfOp(div.lhs, div.rhs))
