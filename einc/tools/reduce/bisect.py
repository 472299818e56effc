"""Bisecting a pass by its rewrites: which rewrite of a pattern-applying pass first changes
the numbers (`--check-numerics` names it under the failing step).

    found = bisect_rewrites(pass_, module_before, ctx, bad)
    found.describe()   # "rewrite 3 of 7 (pattern AddToSub, on arith.addf at prog.ein:5:1)"

The pass is applied to clones of the module as it was before it, with a debug counter
(einc.ir.pass_statistics) that lets only its first k rewrites through; `bad(module)` says
whether a module's numbers differ. A binary search finds the smallest k whose module is bad:
the k-th rewrite is the first that changes the numbers (given the k - 1 before it, which the
module with k - 1 rewrites shows to be harmless).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from xdsl.context import Context
from xdsl.dialects.builtin import ModuleOp
from xdsl.passes import ModulePass

from einc.ir.pass_statistics import DebugCounter, Rewrite, Statistics, instrumenting, pass_scope


@dataclass(frozen=True)
class RewriteBisection:
    pass_name: str
    rewrite: Rewrite
    number: int
    """Its number, from 1: the first `number` rewrites change the numbers, one fewer do not."""
    total: int
    tests: int

    def describe(self) -> str:
        from einc.ir.locations import statement_location

        where = statement_location(self.rewrite.location)
        at = f" at {where}" if where is not None else ""
        return (f"rewrite {self.number} of {self.total} (pattern {self.rewrite.pattern}, on {self.rewrite.op}{at}); "
                f"--debug-counter={self.pass_name}-count={self.number} reproduces the change, "
                f"{self.pass_name}-count={self.number - 1} does not")  # fmt: skip


def _apply(p: ModulePass, before: ModuleOp, ctx: Context, count: int) -> tuple[ModuleOp, Statistics]:
    module = before.clone()
    stats = Statistics({p.name: DebugCounter(0, count)}, record=True)
    with instrumenting(stats), pass_scope(p, module):
        p.apply(ctx, module)
    return module, stats


def bisect_rewrites(
    p: ModulePass, before: ModuleOp, ctx: Context, bad: Callable[[ModuleOp], bool], max_tests: int = 24
) -> RewriteBisection | None:
    """The first rewrite of `p` (applied to `before`) after which `bad` holds, or None when
    `p` makes no rewrite through xDSL's pattern rewriter, or no prefix of its rewrites is bad
    (the numbers change outside its patterns), or the pass fails under the counter."""
    try:
        _, whole = _apply(p, before, ctx, -1)
    except Exception:  # noqa: BLE001 - the pass behaves otherwise on a clone: no bisection
        return None
    rewrites = [r for r in whole.passes[p.name].rewrites if r.applied] if p.name in whole.passes else []
    total = len(rewrites)
    if total == 0:
        return None
    tests = 0
    low, high = 1, total
    try:
        while low < high and tests < max_tests:
            middle = (low + high) // 2
            tests += 1
            if bad(_apply(p, before, ctx, middle)[0]):
                high = middle
            else:
                low = middle + 1
        tests += 1
        if not bad(_apply(p, before, ctx, low)[0]):
            return None
    except Exception:  # noqa: BLE001 - a pass that fails with some rewrites held back
        return None
    return RewriteBisection(p.name, rewrites[low - 1], low, total, tests)
