"""`rsqrt-as-sqrt`: lowers `math.rsqrt` to `math.sqrt` (the reciprocal forgotten: layer
normalisations are wrong, programs without `rsqrt` are not)."""

from dataclasses import dataclass

from xdsl.dialects import math
from xdsl.passes import ModulePass
from xdsl.rewriter import Rewriter


@dataclass(frozen=True)
class RsqrtAsSqrt(ModulePass):
    """Rewrite math.rsqrt as math.sqrt (wrong on purpose)."""

    name = "rsqrt-as-sqrt"

    def apply(self, ctx, op):
        for r in list(op.walk()):
            if isinstance(r, math.RsqrtOp):
                Rewriter.replace_op(r, math.SqrtOp(r.operand))
