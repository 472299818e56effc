"""`crash-in-pattern`: a rewrite pattern that folds `max(x, c)` for a constant c by looking c
up in a table of the constants it knows: an AttributeError on a ReLU (MNIST), where c is 0.0
and its table has no such entry; fine on programs without `max`. The crash happens inside
xDSL's pattern rewriter."""

from dataclasses import dataclass

from xdsl.dialects import arith
from xdsl.passes import ModulePass
from xdsl.pattern_rewriter import PatternRewriter, PatternRewriteWalker, RewritePattern, op_type_rewrite_pattern

KNOWN = {1.0: "one"}


class FoldMaxConstant(RewritePattern):
    @op_type_rewrite_pattern
    def match_and_rewrite(self, op: arith.MaximumfOp, rewriter: PatternRewriter) -> None:
        c = op.rhs.owner
        if isinstance(c, arith.ConstantOp):
            KNOWN.get(c.value.value.data).upper()  # None for 0.0: the bug


@dataclass(frozen=True)
class CrashInPattern(ModulePass):
    """Fold max with a known constant (crashes on unknown ones)."""

    name = "crash-in-pattern"

    def apply(self, ctx, op):
        PatternRewriteWalker(FoldMaxConstant()).rewrite_module(op)
