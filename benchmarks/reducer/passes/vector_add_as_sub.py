"""`vector-add-as-sub`: a vector-level peephole that emits `subf` for `addf` on vectors. Wrong
on programs the target vectorized (the C target's dense layers), right where nothing is a
vector. Runs after the target's own passes."""

from dataclasses import dataclass

from xdsl.dialects import arith
from xdsl.dialects.builtin import VectorType
from xdsl.passes import ModulePass
from xdsl.rewriter import Rewriter


@dataclass(frozen=True)
class VectorAddAsSub(ModulePass):
    """Rewrite arith.addf on vectors as arith.subf (wrong on purpose)."""

    name = "vector-add-as-sub"

    def apply(self, ctx, op):
        for add in list(op.walk()):
            if isinstance(add, arith.AddfOp) and isinstance(add.result.type, VectorType):
                Rewriter.replace_op(add, arith.SubfOp(add.lhs, add.rhs))
