"""The vocabulary of `--check-numerics` and `einc explain`: a pipeline walked step by step,
each step's IR and, where the module can be executed at its level, its numbers against the
oracle.

    walk (einc.tools.numerics)  ->  NumericsReport(steps=[PipelineStep, ...])
                                 -> render() (terminal), einc explain (HTML)

Additive changes only: the HTML view and the CLI read these fields.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import numpy as np


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
    previous_step: int | None = None
    """The index of the last step before this one that was executed (its outputs are what
    `against_previous` compares with); None for the first, or when this one did not run."""
    against_previous: tuple[OutputCheck, ...] = ()
    """Each output against the outputs of `previous_step` (same tolerance as the oracle's)."""
    inherits_from: int | None = None
    """Set when this step's outputs differ from the oracle but are those of `previous_step`,
    which differed already: the index of the step that introduced the difference (the
    culprit, the first of a run of such steps); this step added no difference of its own."""
    values: Mapping[str, np.ndarray] | None = field(default=None, compare=False, repr=False)
    """The outputs themselves, for the walk to compare the next step with (the walk drops
    them from the step it records)."""

    @property
    def ok(self) -> bool:
        return self.ran and not self.crashed and all(o.ok for o in self.outputs)

    @property
    def inherited(self) -> bool:
        """Wrong numbers, but only those of an earlier step (downstream of the culprit)."""
        return self.inherits_from is not None and not self.ok


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
    """The module after the step (generic MLIR text, what `changed` compares; the source
    text for the printer)."""
    seconds: float
    changed: bool
    location: str | None = None
    """`file:line:col` of the transform op in the schedule, or of the pipeline hook."""
    check: LevelRun | None = None
    ir_custom: str | None = None
    """The module after the step in MLIR's custom form, each op as its dialect prints it (as
    einc-opt prints modules; several times shorter than the generic form); None where the
    custom printer failed on the module, and for the printer step."""

    rewrite: str | None = None
    """For the first bad step of a pass that rewrites with xDSL's patterns: the first of its
    rewrites that changes the numbers, found by a debug counter (einc.tools.reduce.bisect)."""

    @property
    def ir_shown(self) -> str:
        """The text to show a reader: the custom form where there is one, else `ir_after`."""
        return self.ir_custom if self.ir_custom is not None else self.ir_after


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
