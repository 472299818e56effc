"""Tuning by the performance model, where the device is absent: `einc tune FILE -t cuda --model
h100` (`tune(task, model="h100")`). Each candidate is compiled as for a measurement (the
target's compiler, where it builds for the device's architecture, reports its registers and
shared memory), refused when it does not fit the device (threads, shared memory, a block per
SM), and ranked by the model's roofline time (einc.perfmodel) instead of a timing. The
candidate's numbers are checked on this machine by the egpu interpreter (einc.semantics.egpu,
which also catches races and out-of-bounds accesses) where the program is small enough
(`CHECK_BUDGET`); above it the record says its numbers were not checked, as the device is not
here to run it.

A model has no noise: the decision needs no final rounds. The fastest modelled candidate is the
best when the model puts it more than `MARGIN` ahead of the default schedule (the model's
ranking is an estimate; a near tie keeps the default), else the default is kept and the
decision says why. Records are made under `einc.compiler.records.model_context` (the device
field `model: <device>`, the driver `modelled`): `einc records list` shows them as modelled, and a
compile for the device (`einc compile --model h100`, $EINC_MODEL_DEVICE, or a machine whose GPU
the model knows) uses them only where no measured record applies.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np
from xdsl.dialects.builtin import ModuleOp

from einc.errors import EincError, InternalCompilerError
from einc.perfmodel.devices import Device
from einc.schedule.choice import ScheduleChoice
from einc.tune.types import BuildResult, Candidate, MeasureResult, Status, TuneTask

if TYPE_CHECKING:
    from einc.tune.measure import TaskData

CHECK_BUDGET = 1 << 24
"""The most work-item-operations (the program's FLOPs, or its output elements where it has
none) whose numbers the interpreter checks for a modelled candidate: about a 256³ matmul,
a few seconds per candidate."""
MARGIN = 0.05
"""How much faster than the default's the model must put a candidate to crown it."""


@dataclass(frozen=True)
class Modelled:
    """A candidate's modelled time on the device, what bounds it, and how its numbers were
    checked (`interpreter`, or why not)."""

    seconds: float
    bound: str
    checked: str
    kernels: int


def model_candidate(task: TuneTask, candidate: Candidate, device: Device) -> BuildResult:
    """Compile one candidate and model it on `device` (a LocalBuilder job, run in a pool
    process): REFUSED for an illegal schedule or one the device cannot run, WRONG where the
    interpreter's outputs differ from the float64 reference, INTERNAL for an einc bug."""
    from einc.perfmodel import model_module

    start = time.perf_counter()

    def result(status: Status, reason: str = "", artifact: object = None) -> BuildResult:
        return BuildResult(candidate, status, reason, artifact, time.perf_counter() - start)

    try:
        comp = task.compilation(ScheduleChoice.of(candidate.schedule, "<candidate>"))
        module = comp.module("target")
        target = comp.target_obj
        manifest = target.manifest(module)
        report = model_module(module, device, target, source=comp.source_text(), manifest=manifest)
        if report.problems:
            return result(Status.REFUSED, f"does not run on {device.name}: " + "; ".join(report.problems))
        checked = _check_numbers(task, module)
        if checked.startswith("wrong:"):
            return result(Status.WRONG, checked[len("wrong: "):])
        return result(Status.OK, artifact=Modelled(report.time_s, report.bound, checked, len(report.kernels)))
    except (EincError, InternalCompilerError) as err:
        from einc.tune.measure import build_failure

        return result(*build_failure(err))


def _check_numbers(task: TuneTask, module: ModuleOp) -> str:
    """`interpreter` when the egpu interpreter's outputs of the lowered `module` match the
    float64 reference, `wrong: ...` when they do not, else why they were not checked."""
    from einc.semantics.compare import max_error
    from einc.semantics.egpu import KernelFault, UnsupportedIR, run_lowered

    work = task.flops or sum(int(np.prod(o.shape)) for o in task.program.outputs)
    if work > CHECK_BUDGET:
        return f"not checked: {work:.3g} operations, over the interpreter's budget ({CHECK_BUDGET:.3g})"
    data = _task_data(task)
    try:
        got = run_lowered(module, data.inputs, target=task.target)
    except KernelFault as fault:
        return f"wrong: {fault}"
    except UnsupportedIR as err:
        return f"not checked: the interpreter does not run {err}"
    for name, want in data.reference.items():
        error = max_error(got[name], want)
        if not error <= data.tolerances[name]:
            return f"wrong: output '{name}': max error {error:.3g} vs the float64 reference (tolerance {data.tolerances[name]:.1g})"
    return "interpreter"


_DATA: dict[str, TaskData] = {}
"""Per build process, each task's inputs and reference, by `task_identity` (as LocalRunner
keeps them: a task with an `input_dict` holds dicts, so it is no cache key itself)."""


def _task_data(task: TuneTask) -> TaskData:
    from einc.tune.measure import TaskData, task_identity

    identity = task_identity(task)
    if identity not in _DATA:
        _DATA[identity] = TaskData.of(task, 0)
    return _DATA[identity]


class ModelRunner:
    """A Runner that "measures" a build by its modelled time (`Modelled`): deterministic, so
    the tuner's decision needs no final rounds (`modelled = True`)."""

    modelled = True

    def __init__(self, device: Device, parallelism: int = 1):
        self.device = device
        self.parallelism = parallelism

    def run(self, task: TuneTask, builds: Sequence[BuildResult]) -> list[MeasureResult]:
        out = []
        for b in builds:
            m = b.artifact
            if b.status is not Status.OK or not isinstance(m, Modelled):  # a failed build: its result
                out.append(MeasureResult(b.candidate, b.status if b.status is not Status.OK else Status.INTERNAL,
                                         b.reason or f"not a modelled build: {type(m).__name__}", build_s=b.seconds))  # fmt: skip
                continue
            extra: dict[str, object] = {"modelled": self.device.key or self.device.name, "bound": m.bound,
                                        "numbers": m.checked}  # fmt: skip
            out.append(MeasureResult(b.candidate, Status.OK, "", (m.seconds,), b.seconds, extra=extra))
        return out

    def close(self) -> None:
        pass
