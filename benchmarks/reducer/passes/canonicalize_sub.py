"""`canonicalize-sub`: three rewrite patterns for subtractions, one of them wrong: `x - 0` to
`x` and `x * 1` to `x` are right; `a - b`, b broadcast from a lower-rank buffer, is "turned
around" to `-(b - a)` and the negation forgotten. Wrong on programs subtracting a row's
statistic (layer norm, softmax), right elsewhere. Its rewrites go through xDSL's pattern
rewriter, so `--check-numerics` names the first wrong rewrite."""

from dataclasses import dataclass

from xdsl.dialects import affine, arith
from xdsl.dialects.builtin import FloatAttr, MemRefType, UnitAttr
from xdsl.passes import ModulePass
from xdsl.pattern_rewriter import (
    GreedyRewritePatternApplier,
    PatternRewriter,
    PatternRewriteWalker,
    RewritePattern,
    op_type_rewrite_pattern,
)


def _constant(value, number):
    owner = value.owner
    return isinstance(owner, arith.ConstantOp) and isinstance(owner.value, FloatAttr) and owner.value.value.data == number


class SubZero(RewritePattern):
    @op_type_rewrite_pattern
    def match_and_rewrite(self, op: arith.SubfOp, rewriter: PatternRewriter) -> None:
        if _constant(op.rhs, 0.0):
            rewriter.replace(op, [], [op.lhs])


class MulOne(RewritePattern):
    @op_type_rewrite_pattern
    def match_and_rewrite(self, op: arith.MulfOp, rewriter: PatternRewriter) -> None:
        if _constant(op.rhs, 1.0):
            rewriter.replace(op, [], [op.lhs])


def _rank(value):
    owner = value.owner
    if isinstance(owner, affine.LoadOp) and isinstance(owner.memref.type, MemRefType):
        return len(owner.memref.type.get_shape())
    return None


class SubBroadcastTurned(RewritePattern):
    @op_type_rewrite_pattern
    def match_and_rewrite(self, op: arith.SubfOp, rewriter: PatternRewriter) -> None:
        lhs, rhs = _rank(op.lhs), _rank(op.rhs)
        if lhs is not None and rhs is not None and rhs < lhs and "turned" not in op.attributes:
            turned = arith.SubfOp(op.rhs, op.lhs)  # -(b - a), the negation forgotten
            turned.attributes["turned"] = UnitAttr()
            rewriter.replace(op, turned)


@dataclass(frozen=True)
class CanonicalizeSub(ModulePass):
    """Simplify subtractions and multiplications (one pattern wrong on purpose)."""

    name = "canonicalize-sub"

    def apply(self, ctx, op):
        patterns = GreedyRewritePatternApplier([SubZero(), MulOne(), SubBroadcastTurned()])
        PatternRewriteWalker(patterns).rewrite_module(op)
