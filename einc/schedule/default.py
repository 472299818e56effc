"""The default schedule: what einc applies to the loops when the user gives none, chosen by the
schedule layer from the target's facts (its schedule family, `sketches`), not by the target.
`policies/cpu.py` for a CPU target (C); device targets have no default policy (their loops are
mapped by `convert-affine-to-egpu`).

    default_schedule(get_target("c"), loops)   # a Schedule built as ops, or None
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING

from xdsl.dialects.builtin import ModuleOp

from einc.schedule.policies import cpu
from einc.schedule.script import Schedule

if TYPE_CHECKING:
    from einc.targets.clike import CLikeTarget

Policy = Callable[["type[CLikeTarget]", ModuleOp], Schedule | None]

POLICIES: Mapping[str, Policy] = {"cpu": cpu.default_schedule}
"""Default policy by schedule family (`CLikeTarget.sketches`); a family missing here has none."""


def default_schedule(target: type[CLikeTarget], module: ModuleOp) -> Schedule | None:
    """`target`'s default schedule of a loop-level module (None when its family has no default
    policy, or there is nothing to do). `module` is not modified."""
    policy = POLICIES.get(target.sketches)
    return None if policy is None else policy(target, module)


def default_schedule_text(target: type[CLikeTarget], module: ModuleOp) -> str | None:
    """The default schedule printed (for reading and debugging; never parsed back by einc)."""
    schedule = default_schedule(target, module)
    return None if schedule is None else str(schedule)


def register_tile() -> tuple[int, int]:
    """(vectors, rows) of the accumulator tile of a blocked matmul on this host's C target."""
    from einc.targets.c import CTarget

    return cpu.register_tile(CTarget.vector_lanes())
