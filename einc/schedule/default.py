"""The default schedule of a target, by the target's name: a thin entry point for callers
that want the script itself (the policies are in einc.schedule.policies, reached through the target's
`default_schedule`; einc.schedule.script.resolve_schedule applies them)."""

from __future__ import annotations

from xdsl.dialects.builtin import ModuleOp

from einc.schedule.script import Schedule


def default_schedule(target: str, module: ModuleOp) -> Schedule | None:
    """`target`'s default schedule of a loop-level module (None when the target has no
    default policy, or nothing to do)."""
    from einc.targets import get_target

    schedule = get_target(target).default_schedule(module)
    assert schedule is None or isinstance(schedule, Schedule), schedule
    return schedule


def default_schedule_text(target: str, module: ModuleOp) -> str | None:
    """The default schedule printed (for reading and debugging; never parsed back by einc)."""
    schedule = default_schedule(target, module)
    return None if schedule is None else str(schedule)


def register_tile() -> tuple[int, int]:
    """(vectors, rows) of the accumulator tile of a blocked matmul on this host's C target."""
    from einc.schedule.policies.cpu import register_tile as tile
    from einc.targets.c import CTarget

    return tile(CTarget.vector_lanes())
