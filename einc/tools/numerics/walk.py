"""The pipeline walked one step at a time, each step's module executed at its level.

`Walk` holds the inputs (random, seeded, generated once), the oracle (float64, computed once)
and the steps so far; `step()` records a module after a pass, a transform op or the printer,
executes it (einc.tools.numerics.execute) unless it is unchanged, and remembers the first step whose
numbers differ. `run_passes()` applies a pipeline pass by pass; `apply_schedule()` applies a
schedule op by op (an xDSL interpreter listener snapshots the payload after each top-level op).
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace

import numpy as np
from xdsl.context import Context
from xdsl.dialects import transform
from xdsl.dialects.builtin import ModuleOp
from xdsl.interpreter import Interpreter, PythonValues
from xdsl.ir import Operation
from xdsl.passes import ModulePass, PassPipeline
from xdsl.printer import Printer

from einc.errors import EincError
from einc.ir.pass_statistics import pass_scope
from einc.tools.numerics.execute import compare_all, run_at_level
from einc.tools.numerics.types import LevelRun, NumericsReport, PipelineStep

STAGE_OF_LEVEL = {"ein": "ein", "loops": "loops", "egpu": "target"}
"""The driver stage a module at each level belongs to (einc-opt's steps)."""

PassSpec = str | ModulePass
"""A pipeline element: pipeline text (`a,b{x=1}`) or a pass object."""


def generic_text(module: ModuleOp) -> str:
    """The module in MLIR's generic form (what PipelineStep.ir_after holds)."""
    import io

    out = io.StringIO()
    Printer(stream=out, print_generic_format=True).print_op(module)
    return out.getvalue() + "\n"


def custom_text(module: ModuleOp) -> str | None:
    """The module in MLIR's custom form, each op as its dialect prints it and the generic
    form for the others (as einc-opt prints; what PipelineStep.ir_custom holds), or None
    where a custom printer raises on it (a wrong pass may leave IR only the generic form
    can print)."""
    import io

    out = io.StringIO()
    try:
        Printer(stream=out).print_op(module)
    except Exception:  # noqa: BLE001 - the generic form is shown instead
        return None
    return out.getvalue() + "\n"


def parse_passes(pipeline: Sequence[PassSpec] | str) -> list[ModulePass]:
    """Pass objects from pipeline texts (parsed by xDSL's PassPipeline against einc's registry,
    which holds plugin passes once loaded) and pass objects."""
    import einc.compiler.registry

    items = [pipeline] if isinstance(pipeline, str) else list(pipeline)
    passes: list[ModulePass] = []
    for item in items:
        if isinstance(item, ModulePass):
            passes.append(item)
        elif item.strip():
            passes.extend(PassPipeline.parse_spec(einc.compiler.registry.get_all_passes(), item.strip()).passes)
    return passes


def pass_kind(p: ModulePass) -> str:
    """"pass" for einc's and xDSL's own passes, "plugin" for one defined elsewhere."""
    return "pass" if type(p).__module__.split(".")[0] in ("einc", "xdsl") else "plugin"


def pass_name(p: ModulePass) -> str:
    """The pass as a pipeline element (`name{opt=value}`)."""
    try:
        return str(p.pipeline_pass_spec())
    except Exception:  # noqa: BLE001 - a plugin pass whose options xDSL cannot print
        return p.name


@dataclass(frozen=True)
class _Executed:
    """A step executed without crashing: its outputs, whether they agreed with the oracle,
    and the step that introduced their difference (itself, or the one it inherits from)."""

    index: int
    values: Mapping[str, np.ndarray]
    ok: bool
    origin: int


class StepCrashed(Exception):
    """A pass or transform op raised something other than an EincError: the step's failure."""

    def __init__(self, exc: BaseException):
        super().__init__(str(exc))
        self.exc = exc


@dataclass
class Walk:
    report: NumericsReport
    inputs: Mapping[str, np.ndarray]
    oracle: Mapping[str, np.ndarray]
    tolerances: Mapping[str, float]
    ctx: Context
    execute: bool = True
    """Execute the modules (False: only record the steps, e.g. to try whether a scale fits)."""
    too_big: str | None = None
    """Why the interpreted levels (loops and below) are not executed: a program too large for
    einc's interpreters (einc.tools.numerics.scale.MAX_INTERPRETED_POINTS), or None."""
    _previous: str = ""
    _last: _Executed | None = None
    """The last step executed without crashing: what the next executed step is compared with."""

    @property
    def steps(self) -> list[PipelineStep]:
        return self.report.steps

    @property
    def failed(self) -> bool:
        return self.report.first_bad is not None

    def step(
        self, stage: str, name: str, kind: str, module: ModuleOp, seconds: float,
        location: str | None = None, check: Callable[[], LevelRun] | None = None,
    ) -> PipelineStep:  # fmt: skip
        """Record the module after a step; execute it when it changed (or `check` says how)."""
        return self.record(stage, name, kind, generic_text(module), seconds, location,
                           check or (lambda: self.run(module)), custom=custom_text(module))  # fmt: skip

    def record(
        self, stage: str, name: str, kind: str, text: str, seconds: float, location: str | None,
        check: Callable[[], LevelRun], always: bool = False, custom: str | None = None,
    ) -> PipelineStep:  # fmt: skip
        """A step whose check runs when the IR changed in a way an executor sees (`always`:
        whatever changed, e.g. a step that raised); `custom`: the module's custom form."""
        changed = text != self._previous
        step = PipelineStep(len(self.steps), stage, name, kind, text, seconds, changed, location, ir_custom=custom)
        if kind == "printer":
            step.changed = True
        elif always:
            pass
        elif not changed:
            step.check = LevelRun(self._level(), ran=False, reason="unchanged")
        elif _semantic(text) == _semantic(self._previous):
            step.check = LevelRun(self._level(), ran=False, reason="only attributes changed (no executor reads them)")
        if step.check is None and self.execute:
            step.check = self._against_previous(step.index, check())
            if not step.check.ok and step.check.ran and self.report.first_bad is None:
                self.report.first_bad = step.index
        self._previous = text if kind != "printer" else self._previous
        self.steps.append(step)
        return step

    def _against_previous(self, index: int, run: LevelRun) -> LevelRun:
        """`run` (of step `index`) also compared with the last executed step's outputs: where
        both differ from the oracle and this one's numbers are that step's, it inherits the
        difference (`inherits_from`: the step that introduced it) rather than adding one."""
        values, run = run.values, replace(run, values=None)
        if not run.ran or run.crashed or values is None:
            return run
        last = self._last
        origin = index
        if last is not None:
            against = compare_all(values, last.values, self.tolerances)
            same = bool(against) and all(o.ok for o in against)
            inherits = last.origin if same and not run.ok and not last.ok else None
            run = replace(run, previous_step=last.index, against_previous=against, inherits_from=inherits)
            origin = inherits if inherits is not None else index
        self._last = _Executed(index, values, run.ok, origin)
        return run

    def crashed(self, stage: str, name: str, kind: str, module: ModuleOp, seconds: float,
                error: BaseException, location: str | None = None) -> None:  # fmt: skip
        """A step whose pass or transform op raised a non-einc exception (an einc bug)."""
        from einc.tools.numerics.execute import describe

        text = generic_text(module)
        level = self._level()
        self.record(stage, name, kind, text, seconds, location,
                    lambda: LevelRun(level, ran=True, crashed=True, reason=f"the step raised {describe(error)}"),
                    always=True, custom=custom_text(module))  # fmt: skip
        if self.report.first_bad is None:
            self.report.first_bad = len(self.steps) - 1

    def run(self, module: ModuleOp) -> LevelRun:
        from einc.tools.numerics.execute import level_of

        if self.too_big is not None and level_of(module) != "ein":
            return LevelRun(level_of(module), ran=False, reason=self.too_big)
        return run_at_level(module, self.inputs, self.oracle, self.tolerances)

    def _level(self) -> str:
        for step in reversed(self.steps):
            if step.check is not None:
                return step.check.level
        return "ein"

    # ---- driving --------------------------------------------------------------------------
    def run_passes(self, module: ModuleOp, stage: str | None, passes: Sequence[ModulePass],
                   kind: str | None = None, location: str | None = None) -> bool:  # fmt: skip
        """Apply `passes` to `module` one at a time, a step each (of `stage`, or of the stage
        of the module's level after the pass); False when a pass crashed (the walk stops
        there). An EincError (a refusal, the user's to fix) propagates."""
        from einc.tools.numerics.execute import level_of

        for p in passes:
            before = module.clone() if self.execute and not self.failed else None  # to bisect its rewrites
            start = time.perf_counter()
            try:
                with pass_scope(p, module):  # --pass-statistics, --debug-counter
                    p.apply(self.ctx, module)
            except EincError:
                raise
            except Exception as exc:  # noqa: BLE001 - a pass bug: the step's failure
                self.crashed(stage or STAGE_OF_LEVEL[level_of(module)], pass_name(p), kind or pass_kind(p),
                             module, time.perf_counter() - start, exc, location)  # fmt: skip
                return False
            seconds = time.perf_counter() - start
            step = self.step(stage or STAGE_OF_LEVEL[level_of(module)], pass_name(p), kind or pass_kind(p), module,
                             seconds, location)  # fmt: skip
            if before is not None and self.report.first_bad == step.index and step.check is not None and not step.check.crashed:
                step.rewrite = self.first_rewrite(p, before)
        return True

    def first_rewrite(self, p: ModulePass, before: ModuleOp) -> str | None:
        """The first rewrite of `p` (on `before`) that changes the numbers, in words, or None
        (a pass that does not rewrite with xDSL's patterns)."""
        from einc.tools.reduce.bisect import bisect_rewrites

        def bad(module: ModuleOp) -> bool:
            run = self.run(module)
            return run.ran and not run.ok

        found = bisect_rewrites(p, before, self.ctx, bad)
        return found.describe() if found is not None else None

    def apply_schedule(self, module: ModuleOp, schedule: object, stage: str = "scheduled",
                       run: Callable[[ModuleOp, Sequence[Interpreter.Listener]], None] | None = None) -> bool:  # fmt: skip
        """Apply a Schedule to `module` in place, each top-level transform op a step; `run`
        applies it (default `schedule.apply_in_place`), e.g. with a target's checks."""
        import einc.compiler.registry
        from einc.schedule.script import Schedule

        assert isinstance(schedule, Schedule)
        listener = _OpListener(self, schedule, module, stage)
        start = time.perf_counter()
        try:
            if run is None:
                schedule.apply_in_place(module, einc.compiler.registry.get_all_passes(), (listener,))
            else:
                run(module, (listener,))
        except EincError:
            raise  # the schedule's refusal: the user's to fix, reported as einc reports it
        except Exception as exc:  # noqa: BLE001 - a transform bug (InternalCompilerError)
            cause = exc.__cause__ if exc.__cause__ is not None else exc
            self.crashed(stage, listener.current_name(), "transform", module,
                         time.perf_counter() - start, cause, listener.current_location())  # fmt: skip
            return False
        return True


_DISCARDABLE = re.compile(r"([)>]) \{[^{}]*\} :")


def _semantic(text: str) -> str:
    """The generic text without discardable attributes (`{einc.parallel, ...}`): the
    schedule's marks for the printers, which neither einc.semantics.reference nor the interpreters
    read, so a step that changes only them computes what the step before computed."""
    return _DISCARDABLE.sub(r"\1 :", text)


def op_text(schedule: object, op: Operation) -> str:
    """A schedule op as written (its source line) or as printed."""
    from einc.schedule.script import Schedule

    assert isinstance(schedule, Schedule)
    loc = schedule.locations.get(op)
    if loc is not None and schedule.source is not None:
        lines = schedule.source.splitlines()
        if 0 < loc.line <= len(lines):
            return lines[loc.line - 1].strip()
    return str(op).splitlines()[0].strip()


def op_location(schedule: object, op: Operation) -> str | None:
    from einc.schedule.script import Schedule

    assert isinstance(schedule, Schedule)
    loc = schedule.locations.get(op)
    if loc is None:
        return None
    return f"{loc.file}:{loc.line}:{loc.col}"


class _OpListener(Interpreter.Listener):
    """After each top-level op of the schedule's entry, a step with the payload as it is."""

    def __init__(self, walk: Walk, schedule: object, payload: ModuleOp, stage: str):
        from einc.schedule.script import Schedule

        assert isinstance(schedule, Schedule)
        self.walk = walk
        self.schedule = schedule
        self.payload = payload
        self.stage = stage
        self.block = schedule.entry().body.block
        self.started = time.perf_counter()
        self.op: Operation | None = None

    def will_interpret_op(self, op: Operation, args: PythonValues) -> None:
        if op.parent_block() is self.block:
            self.started = time.perf_counter()
            self.op = op

    def did_interpret_op(self, op: Operation, results: PythonValues) -> None:
        if op.parent_block() is not self.block or isinstance(op, transform.YieldOp):
            return
        seconds = time.perf_counter() - self.started
        self.walk.step(self.stage, op_text(self.schedule, op), "transform", self.payload, seconds,
                       op_location(self.schedule, op))  # fmt: skip

    def current_name(self) -> str:
        return op_text(self.schedule, self.op) if self.op is not None else "schedule"

    def current_location(self) -> str | None:
        return op_location(self.schedule, self.op) if self.op is not None else None
