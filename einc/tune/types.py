"""What the tuner's parts exchange: a task, a point of its search space, and what building and
measuring a point gave. Every type here is picklable (it crosses process boundaries).

    TuneTask   one program on one target and device: what is tuned, and the database key
    Point      a sketch's name and a value for each of its knobs: one schedule of the space
               (with Status and program_key, einc.compiler.records' vocabulary: records hold them)
    Candidate  a point with its schedule text, ready to build
    BuildResult / MeasureResult   what the builder and the runner report, failures as values
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING, Mapping

from einc.compiler.records import Point, Status, program_key
from einc.schedule.choice import ScheduleChoice

if TYPE_CHECKING:
    from einc.compiler.driver import Compilation
    from einc.frontend import Program
    from einc.schedule.script import Schedule


EARLY_STOP = 1.5
"""The early-stop factor by default (`tune(early_stop=...)`, `einc tune --early-stop`,
`LocalRunner.set_best`): a candidate whose first runs each take over this many times the best
so far is not timed further (0 turns it off)."""


@dataclass(frozen=True)
class TuneTask:
    """A program to tune: its text (a `.ein` file or Antares IR with `input_dict`), the target,
    and where it came from (for located errors)."""

    source: str
    target: str = "c"
    filename: str = "<string>"
    input_dict: Mapping[str, Mapping[str, object]] | None = None
    extra_outputs: tuple[str, ...] | None = None
    """Intermediate tensors that are results too (einc.compile's `extra_outputs`)."""

    @classmethod
    def from_file(cls, path: str | Path, target: str = "c") -> TuneTask:
        from einc.compiler.driver import read_program

        return cls(read_program(str(path)), target, str(path))

    def compilation(self, schedule: ScheduleChoice | Schedule | str | None = None) -> Compilation:
        """A fresh Compilation of this task with `schedule` (as einc.compile takes it; None:
        the target's default schedule); tuning records are never consulted."""
        from einc.compiler.driver import Compilation

        choice = ScheduleChoice.DEFAULT if schedule is None else schedule
        return Compilation(self.source, self.filename, self.input_dict, self.extra_outputs, self.target, choice,
                           use_records=False)  # fmt: skip

    @cached_property
    def program(self) -> Program:
        comp = self.compilation(ScheduleChoice.NONE)
        comp.run_until("ein")
        return comp.program

    @cached_property
    def normalized(self) -> str:
        """The program as einc understands it (the printed `ein` module: names, shapes, dtypes
        and statements; no comments or spacing): two texts of one program share records."""
        return str(self.compilation(ScheduleChoice.NONE).module("ein"))

    @cached_property
    def key(self) -> str:
        """The database key of the program (`program_key` of `normalized`)."""
        return program_key(self.normalized)

    @cached_property
    def flops(self) -> int:
        """Floating-point (or integer) operations of one run: 2 per multiply-add, 1 per other
        arithmetic op, per iteration point of each statement."""
        from einc.tune.workload import count_flops

        return count_flops(self)

    @cached_property
    def bytes_moved(self) -> int:
        """Bytes of every input read once plus every output written once (the compulsory
        traffic: a memory-bound kernel's time is at least this over the stream bandwidth)."""
        from einc.tune.workload import count_bytes

        return count_bytes(self)


@dataclass(frozen=True)
class Candidate:
    """A point ready to build: its schedule as text (`Schedule.parse` reads it back)."""

    point: Point
    schedule: str


@dataclass(frozen=True)
class BuildResult:
    """What the builder made of a candidate. `artifact` is what a runner loads (target-specific,
    picklable); None when the build failed (status and reason say why)."""

    candidate: Candidate
    status: Status
    reason: str = ""
    artifact: object = None
    seconds: float = 0.0


@dataclass(frozen=True)
class MeasureResult:
    """What measuring a candidate gave: the run times (seconds, every repeat) when OK, and the
    reason otherwise. `median_s` is what a search ranks by."""

    candidate: Candidate
    status: Status
    reason: str = ""
    times: tuple[float, ...] = ()
    build_s: float = 0.0
    run_s: float = 0.0
    extra: Mapping[str, object] = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        return self.status is Status.OK

    @property
    def median_s(self) -> float:
        if not self.times:
            return float("inf")
        ordered = sorted(self.times)
        return ordered[len(ordered) // 2]
