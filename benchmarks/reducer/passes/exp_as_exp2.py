"""`exp-as-exp2`: lowers `math.exp` to `math.exp2` (a wrong table entry: programs with
`exp`, softmax in a BERT layer, are wrong; the others are not)."""

from dataclasses import dataclass

from xdsl.dialects import math
from xdsl.passes import ModulePass
from xdsl.rewriter import Rewriter


@dataclass(frozen=True)
class ExpAsExp2(ModulePass):
    """Rewrite math.exp as math.exp2 (wrong on purpose)."""

    name = "exp-as-exp2"

    def apply(self, ctx, op):
        for e in list(op.walk()):
            if isinstance(e, math.ExpOp):
                Rewriter.replace_op(e, math.Exp2Op(e.operand))
