"""Deliberately wrong passes, for trying `--check-numerics` (docs/RESEARCH.md).

    einc-opt examples/softmax.ein --load-pass-plugin examples/plugins/wrong_pass.py \
        --pass-pipeline='convert-ein-to-affine,canonicalize,flip-subf,cse' --check-numerics

`flip-subf` turns the first `arith.subf` into an `arith.addf` (a sign slip in a rewrite);
`shorten-reduction` makes the innermost loop of the first reduction stop one iteration early
(an off-by-one bound). Both leave IR that verifies: only the numbers are wrong.
"""

from __future__ import annotations

from dataclasses import dataclass

from xdsl.context import Context
from xdsl.dialects import affine, arith
from xdsl.dialects.builtin import AffineMapAttr, ModuleOp
from xdsl.ir.affine import AffineConstantExpr, AffineMap
from xdsl.passes import ModulePass
from xdsl.rewriter import Rewriter


@dataclass(frozen=True)
class FlipSubfPass(ModulePass):
    """Rewrite the first arith.subf into arith.addf (wrong on purpose)."""

    name = "flip-subf"

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        for sub in op.walk():
            if isinstance(sub, arith.SubfOp):
                Rewriter.replace_op(sub, arith.AddfOp(sub.lhs, sub.rhs))
                return


@dataclass(frozen=True)
class ShortenReductionPass(ModulePass):
    """Stop the innermost loop of the first reduction one iteration early (wrong on purpose):
    a loop with a constant upper bound that has an `einc.axis` the statement reduces over."""

    name = "shorten-reduction"

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        for loop in op.walk():
            if not isinstance(loop, affine.ForOp) or "einc.init" in loop.attributes:
                continue
            if any(isinstance(inner, affine.ForOp) for inner in loop.body.walk()):
                continue  # not innermost
            (bound,) = loop.upperBoundMap.data.results
            if isinstance(bound, AffineConstantExpr) and bound.value > 1 and _reduces(loop):
                loop.upperBoundMap = AffineMapAttr(AffineMap(0, 0, (AffineConstantExpr(bound.value - 1),)))
                return


def _reduces(loop: affine.ForOp) -> bool:
    """The loop's body accumulates: it stores into something its induction variable does
    not index."""
    iv = loop.body.block.args[0]
    for store in loop.body.walk():
        if isinstance(store, affine.StoreOp) and iv not in store.indices:
            return True
    return False
