"""The default schedule: what einc applies to the loops when the user gives none, chosen by the
schedule layer from the target's facts (its schedule family, `sketches`), not by the target.
`policies/cpu.py` for a CPU target (C), `policies/gpu.py` for a device target (what it leaves
unscheduled is mapped by `convert-affine-to-egpu`).

    default_schedule(get_target("c"), loops)   # a Schedule built as ops, or None
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING

from xdsl.dialects.builtin import ModuleOp

from einc.schedule.policies import cpu, gpu
from einc.schedule.script import Schedule

if TYPE_CHECKING:
    from einc.targets.clike import CLikeTarget

Policy = Callable[["type[CLikeTarget]", ModuleOp], Schedule | None]

POLICIES: Mapping[str, Policy] = {"cpu": cpu.default_schedule, "gpu": gpu.default_schedule}
"""Default policy by schedule family (`CLikeTarget.sketches`); a family missing here has none."""


SPACE_VERSIONS: Mapping[str, int] = {"cpu": 24, "gpu": 16, "": 1}
"""The version of each schedule family's search space (`CLikeTarget.sketches`): what the
family's default policy (above) and the tuner's sketch rules for it (einc.tune.sketches) make
of a program. Every tuning record is keyed by it (`space_version`): a record made by a search
of another version is not used, and `einc tune` searches again. Bump a family's number when
a change to its rules or policy changes the sketches, knobs or options a search tries or the
default it is compared with; tests/test_tune_records.py holds a digest of the family's
spaces for reference programs and fails, naming the family, when they change without a bump
(a change that leaves every record valid, e.g. a renamed description, updates the digest
only)."""


def space_version(target: type[CLikeTarget]) -> str:
    """`cpu.8`: the target's schedule family (`none` without one) and its space's version."""
    return f"{target.sketches or 'none'}.{SPACE_VERSIONS.get(target.sketches, 1)}"


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
