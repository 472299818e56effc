"""`einc-unswitch`: guards whose condition a loop does not change are tested once before it,
the loop versioned (einc.transforms.unswitch.unswitch_loop).

`unroll` of a partial tile's loop (einc.transforms.loop_transforms._unroll_clipped) leaves
each copy the last tile may lack under `if (k < 499 - N_o)`; with the tile loops inside
the reduction loop K (a register tile), those guards are tested in every iteration of K
although they depend only on the tile's position. A guard is an `scf.if`: one without
results, or a padded read's `.when` (it yields the element or the padding), whose condition
a loop may change only in part: a convolution's row test `ho + kh - 1 >= 0 & ... < H` is
invariant in the loop over output columns, its column test is not. The loop is versioned on
the invariant part (`invariant_part`); the row-inside version keeps the column test, the
other reads nothing. Each guard is taken at its nearest
enclosing `affine.for`; of a loop's guards whose condition is invariant there, the one
that decides the most others first (`3 < v` true makes `1 < v` and `2 < v` true), so
the first version, all its guards true, is the whole tile's loop without a condition
(the version every tile but the last along each axis runs). Versions are then unswitched
in turn, the all-true one first and the others breadth-first, until a loop has
`max-versions` versions (each a copy of the loop) or none has a guard left; a guard that
cannot be hoisted (`unswitch_loop`'s Failure: its condition changes in the loop, a
barrier inside, a loop over MAX_UNSWITCH_OPS ops) stays where it is.

Run by the C pipeline and the device pipelines after `convert-affine-to-egpu` (a point
loop is gone by then, so no condition comes between the loops a target maps). C and Poplar
run it with `when` (a padded convolution read directly: 1.04-1.07x on C, 1.05-1.19x on
Poplar's harness, benchmarks/unswitch_when.py); OpenCL, SYCL, CUDA, HIP and HLSL without
(`einc-unswitch{when=false}`: on PoCL 0.96-1.02x for OpenCL and 0.90-0.93x for SYCL, the
doubled loop nest for a test a work-group takes uniformly; the GPU targets are not measured
here and keep the code they had). A schedule
applies the same policy to the loops it names with `transform.einc.unswitch`
(`unswitch_guards`: the versions, or a Failure the op reports at its location).
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass

from xdsl.context import Context
from xdsl.dialects import affine, scf
from xdsl.dialects.builtin import ModuleOp
from xdsl.ir import Operation, SSAValue
from xdsl.passes import ModulePass

from einc.transforms.loop_build import Failure, describe
from einc.transforms.unswitch import implied, invariant_part, invariant_slice, unswitch_loop


def _nearest_loop(op: Operation) -> affine.ForOp | None:
    parent = op.parent_op()
    while parent is not None and not isinstance(parent, affine.ForOp):
        parent = parent.parent_op()
    return parent


def invariant_guards(loop: affine.ForOp, when: bool = True) -> list[tuple[scf.IfOp, SSAValue]]:
    """The `scf.if`s (guards that skip work and `.when` reads that pick a value) whose nearest
    enclosing loop is `loop`, each with the part of its condition `loop` does not change
    (`invariant_part`: the whole condition, or a conjunct); those with no such part are left
    out. Without `when`, only guards without results, on their whole condition."""
    found = []
    for op in loop.walk():
        if isinstance(op, scf.IfOp) and _nearest_loop(op) is loop and (when or not op.results):
            part = invariant_part(op.cond, loop) if when else op.cond if invariant_slice(op.cond, loop) is not None else None
            if part is not None:
                found.append((op, part))
    return found


def strongest(guards: list[tuple[scf.IfOp, SSAValue]]) -> tuple[scf.IfOp, SSAValue]:
    """The guard whose hoisted condition, true, decides the most of the others' (the first on
    ties)."""
    return max(guards, key=lambda g: sum(implied(g[1], True, h[1]) is not None for h in guards))


MAX_VERSIONS = 8
"""The pass's and `transform.einc.unswitch`'s default `max-versions`."""


def unswitch_guards(loop: affine.ForOp, max_versions: int, when: bool = True) -> list[affine.ForOp] | Failure:
    """Unswitch `loop`'s invariant guards (the module docstring's order) into at most
    `max_versions` versions; returns the versions in program order (the first, every
    hoisted guard true, is `loop` itself), or a Failure, the IR unchanged, when not even
    one guard could be hoisted (none is invariant in `loop`, or the last `unswitch_loop`
    refusal)."""
    versions, queue = [loop], deque([loop])
    refused: Failure | None = None
    outer: Operation | None = None  # the scf.if the first unswitch put in loop's place
    while queue and len(versions) < max_versions:
        made = _unswitch_one(queue.popleft(), when)
        if isinstance(made, Failure):
            refused = refused or made
            continue
        outer = outer or made[0].parent_op()
        versions.append(made[1])
        queue.appendleft(made[0])
        queue.append(made[1])
    if outer is None:
        return refused or _no_guard(loop)
    order = {op: i for i, op in enumerate(outer.walk())}
    return sorted(versions, key=order.__getitem__)


def _no_guard(loop: affine.ForOp) -> Failure:
    return Failure(f"cannot unswitch {describe(loop)}: no guard in its body (an if outside any "
                   "inner loop) has a condition the loop does not change, in whole or in a conjunct: nothing to hoist")  # fmt: skip


def _unswitch_one(loop: affine.ForOp, when: bool) -> tuple[affine.ForOp, affine.ForOp] | Failure:
    """`loop` unswitched on its strongest invariant guard that can be hoisted; else the
    first refusal (a Failure, with the IR unchanged)."""
    guards = invariant_guards(loop, when)
    refused: Failure | None = None
    while guards:
        guard = strongest(guards)
        made = unswitch_loop(loop, *guard)
        if not isinstance(made, Failure):
            return made
        refused = refused or made
        guards.remove(guard)
    return refused or _no_guard(loop)


@dataclass(frozen=True)
class UnswitchPass(ModulePass):
    name = "einc-unswitch"

    max_versions: int = MAX_VERSIONS
    """The most versions one loop becomes (1: none unswitched)."""

    when: bool = True
    """Whether `.when` reads (guards with results) and invariant conjuncts are unswitched too
    (false: only guards without results, on their whole condition: what the pass did before)."""

    def __post_init__(self) -> None:
        if self.max_versions < 1:
            raise ValueError(f"max-versions must be at least 1, got {self.max_versions}")

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        loops = [loop for loop in op.walk() if isinstance(loop, affine.ForOp)]
        for loop in reversed(loops):  # inner loops first: an outer loop's copies take theirs
            if loop.parent is not None and invariant_guards(loop, self.when):
                unswitch_guards(loop, self.max_versions, self.when)


__all__ = ["MAX_VERSIONS", "UnswitchPass", "invariant_guards", "strongest", "unswitch_guards"]
