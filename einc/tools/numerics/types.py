"""The vocabulary of `--check-numerics` and `einc explain`: a pipeline walked step by step,
each step's IR and, where the module can be executed at its level, its numbers against the
oracle.

    walk (einc.tools.numerics)  ->  NumericsReport(steps=[PipelineStep, ...])
                                 -> render() (terminal), einc explain (HTML)

Additive changes only: the HTML view and the CLI read these fields.
"""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True)
class OutputCheck:
    """One output of one execution against the oracle (float64 NumPy)."""

    name: str
    ok: bool
    max_abs: float
    max_rel: float
    tolerance: float
    first_bad_index: tuple[int, ...] | None = None
    """The first index (row-major) where the output is outside the tolerance; None when ok."""
    got: float | None = None
    want: float | None = None


@dataclass(frozen=True)
class LevelRun:
    """The module after one step, executed at its level, or why it was not."""

    level: str
    """"ein", "loops", "egpu", or "source:<target>" (the printed source on its real target)."""
    ran: bool
    reason: str = ""
    """Why it did not run (no runtime here, level without an interpreter), or the error it
    raised (then `ran` is True and `crashed` is True)."""
    crashed: bool = False
    outputs: tuple[OutputCheck, ...] = ()
    seconds: float = 0.0

    @property
    def ok(self) -> bool:
        return self.ran and not self.crashed and all(o.ok for o in self.outputs)


@dataclass
class PipelineStep:
    """One step of the pipeline: the frontend, a pass, a transform op of the schedule, or the
    printer."""

    index: int
    stage: str
    """The driver stage the step belongs to: ein, loops, scheduled, target, source."""
    name: str
    """The pass name (with options), the transform op as written, "frontend" or "printer"."""
    kind: str
    """"frontend", "pass", "plugin" (a pass from --load-pass-plugin), "transform", "printer"."""
    ir_after: str
    """The module after the step (generic MLIR text; the source text for the printer)."""
    seconds: float
    changed: bool
    location: str | None = None
    """`file:line:col` of the transform op in the schedule, or of the pipeline hook."""
    check: LevelRun | None = None


@dataclass
class NumericsReport:
    program: str
    """The program's file name."""
    target: str
    seed: int
    shape_scale: float
    steps: list[PipelineStep] = field(default_factory=list)
    first_bad: int | None = None
    """Index in `steps` of the first step whose execution differs from the oracle (or crashed)."""
    notes: list[str] = field(default_factory=list)
    """What the reader should know about the run: the shapes checked (scaled or not), a
    scale passed over, where the reference came from."""

    @property
    def ok(self) -> bool:
        return self.first_bad is None
