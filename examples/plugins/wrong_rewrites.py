"""A pass of rewrite patterns with one wrong pattern among right ones, for trying
`--check-numerics`, `einc reduce` and `--debug-counter` (docs/RESEARCH.md).

    einc compile examples/layernorm.ein --load-pass-plugin examples/plugins/wrong_rewrites.py \
        --pipeline-hook loops=simplify-sub --check-numerics --reproducer ln.txt

`simplify-sub` applies three patterns with xDSL's pattern rewriter: `x - 0.0` to `x` and
`x * 1.0` to `x` are right; `a - b`, where `b` is loaded from a buffer of lower rank than
`a`'s (a row's mean, a row's maximum), is "turned around" to `-(b - a)` and the negation
forgotten. Programs that subtract a row's statistic (layer norm, softmax) get wrong numbers;
a matmul does not.
"""

from __future__ import annotations

from dataclasses import dataclass

from xdsl.context import Context
from xdsl.dialects import affine, arith
from xdsl.dialects.builtin import FloatAttr, MemRefType, ModuleOp, UnitAttr
from xdsl.ir import SSAValue
from xdsl.passes import ModulePass
from xdsl.pattern_rewriter import (
    GreedyRewritePatternApplier,
    PatternRewriter,
    PatternRewriteWalker,
    RewritePattern,
    op_type_rewrite_pattern,
)


def _is_constant(value: SSAValue, number: float) -> bool:
    owner = value.owner
    return isinstance(owner, arith.ConstantOp) and isinstance(owner.value, FloatAttr) and owner.value.value.data == number


def _loaded_rank(value: SSAValue) -> int | None:
    owner = value.owner
    if isinstance(owner, affine.LoadOp) and isinstance(owner.memref.type, MemRefType):
        return len(owner.memref.type.get_shape())
    return None


class SubZero(RewritePattern):
    """x - 0.0 -> x"""

    @op_type_rewrite_pattern
    def match_and_rewrite(self, op: arith.SubfOp, rewriter: PatternRewriter) -> None:
        if _is_constant(op.rhs, 0.0):
            rewriter.replace(op, [], [op.lhs])


class MulOne(RewritePattern):
    """x * 1.0 -> x"""

    @op_type_rewrite_pattern
    def match_and_rewrite(self, op: arith.MulfOp, rewriter: PatternRewriter) -> None:
        if _is_constant(op.rhs, 1.0):
            rewriter.replace(op, [], [op.lhs])


class TurnBroadcastSub(RewritePattern):
    """a - b -> -(b - a) for a broadcast b, written as b - a (wrong on purpose)."""

    @op_type_rewrite_pattern
    def match_and_rewrite(self, op: arith.SubfOp, rewriter: PatternRewriter) -> None:
        lhs, rhs = _loaded_rank(op.lhs), _loaded_rank(op.rhs)
        if lhs is None or rhs is None or rhs >= lhs or "turned" in op.attributes:
            return
        turned = arith.SubfOp(op.rhs, op.lhs)  # the negation forgotten
        turned.attributes["turned"] = UnitAttr()
        rewriter.replace(op, turned)


@dataclass(frozen=True)
class SimplifySubPass(ModulePass):
    """Simplify subtractions and multiplications (one of its three patterns is wrong on purpose)."""

    name = "simplify-sub"

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        patterns = GreedyRewritePatternApplier([SubZero(), MulOne(), TurnBroadcastSub()])
        PatternRewriteWalker(patterns).rewrite_module(op)
