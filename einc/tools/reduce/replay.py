"""Replaying a reproducer: its pipeline run step by step, stopping at the first failure.

    outcome = replay(repro)               # every step checked (a numerics walk when the
                                          #   failure is numeric): outcome.failure, .report
    outcome = replay(repro, fast=True)    # only what tells whether it fails the same way

`mode: compile` runs what einc compile runs: the frontend, the stage hooks, convert-ein-to-affine,
the schedule one transform op at a time, the target's checks and pipeline (or the reproducer's
`target-pipeline`), the printer, and (for a numeric failure found there) the printed source on
the target's runtime. `mode: opt` runs einc-opt's pipeline over the program or IR, verifying
after each pass, then `-t TARGET`'s printer.

A numeric failure is replayed two ways. In full, every step is executed and compared with the
float64 oracle as `--check-numerics` does (einc.tools.numerics.walk.Walk: the report prints the same),
stopping after the first step that differs. Fast (the reducer's test), only the failing step is
looked at: the module before it is executed and must agree with the oracle, the module after it
must not. A crash, an error or a verifier failure executes nothing either way.
"""

from __future__ import annotations

import re
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
from xdsl.context import Context
from xdsl.dialects import transform
from xdsl.dialects.builtin import ModuleOp
from xdsl.interpreter import Interpreter, PythonValues
from xdsl.ir import Operation
from xdsl.passes import ModulePass, PassPipeline
from xdsl.utils.exceptions import DiagnosticException

from einc.errors import EincError, InternalCompilerError, SourceLocation, UsageError
from einc.ir.pass_statistics import pass_scope
from einc.tools.numerics.types import LevelRun, NumericsReport, PipelineStep
from einc.tools.reduce.reproducer import Failure, Plugin, Reproducer, same_way

if TYPE_CHECKING:
    from einc.frontend import Program
    from einc.tools.numerics.walk import Walk

# ---- plugins ----------------------------------------------------------------------------------


def load_plugins(repro: Reproducer) -> list[str]:
    """Register the reproducer's plugin passes: each from its path when the file is there,
    else from the copy the reproducer carries (written to a temporary folder, under the same
    file name); notes on what was loaded from where."""
    from einc.compiler.registry import load_pass_plugin

    notes: list[str] = []
    for plugin in repro.plugins:
        path = Path(plugin.path)
        if path.is_file():
            current = Plugin.read(plugin.path)
            if plugin.source and current.source != plugin.source:
                notes.append(f"plugin {plugin.path} changed since the reproducer was written: replaying the file as it is now")
            load_pass_plugin(plugin.path, SourceLocation(plugin.path, 1, 1))
            continue
        if not plugin.source:
            raise UsageError(f"the plugin {plugin.path} is not there and the reproducer has no copy of it",
                             SourceLocation(plugin.path, 1, 1))  # fmt: skip
        folder = Path(tempfile.gettempdir()) / "einc-reproducer-plugins" / plugin.digest
        folder.mkdir(parents=True, exist_ok=True)
        copy = folder / path.name
        if not copy.exists() or copy.read_text() != plugin.source:
            copy.write_text(plugin.source)
        notes.append(f"plugin {plugin.path} is not there: replaying the reproducer's copy ({copy})")
        load_pass_plugin(str(copy), SourceLocation(plugin.path, 1, 1))
    return notes


# ---- failures ---------------------------------------------------------------------------------


def step_key(kind: str, name: str) -> str:
    """What identifies a step across reductions: a pass's name without its options, a
    transform op's name (with the pass a `transform.apply_registered_pass` applies),
    `frontend`, `printer`."""
    if kind == "transform":
        found = re.search(r"(transform\.[\w.]+)", name)
        if found is None:
            return name
        key = found.group(1)
        if key == "transform.apply_registered_pass":
            passed = re.search(r'apply_registered_pass\s+"([^"]+)"', name)
            key += f' "{passed.group(1)}"' if passed else ""
        return key
    return name.split("{")[0].strip()


def op_key(op: Operation) -> str:
    if isinstance(op, transform.ApplyRegisteredPassOp):
        return f'{op.name} "{op.pass_name.data}"'
    return op.name


def _first_line(text: str) -> str:
    lines = [line for line in text.strip().splitlines() if line.strip()]
    return lines[0].strip() if lines else ""


def crash_failure(stage: str | None, step: str | None, exc: BaseException) -> Failure:
    """An unexpected exception (an internal error: the exception inside it) as a Failure."""
    while isinstance(exc, InternalCompilerError) and exc.__cause__ is not None:
        exc = exc.__cause__
    import traceback as tb

    detail = "".join(tb.format_exception_only(type(exc), exc))
    return Failure("crash", stage, step, type(exc).__name__, _first_line(str(exc)), detail)


def error_failure(stage: str | None, step: str | None, err: EincError) -> Failure:
    """A located error (einc-opt's InvalidIR: a verifier failure) as a Failure; a kernel's
    refusal is the TargetError the driver makes of it."""
    kind = "verifier" if type(err).__name__ == "InvalidIR" else "error"
    name = "TargetError" if type(err).__name__ == "KernelError" else type(err).__name__
    message = err.message
    if kind == "verifier":  # einc-opt's "Operation does not verify after pass 'X': why"
        message = re.sub(r"^Operation does not verify( after pass '[^']*')?: ", "", message)
    return Failure(kind, stage, step, name if kind == "error" else "verifier", _first_line(message),
                   err.render())  # fmt: skip


def numerics_failure(step: PipelineStep) -> Failure:
    """The first bad step of a numerics walk as a Failure."""
    check = step.check
    assert check is not None
    return Failure("numerics", step.stage, step_key(step.kind, step.name), *_run_words(check),
                   _detail(step.name, check))  # fmt: skip


def _run_words(run: LevelRun) -> tuple[str, str]:
    if run.crashed:
        return "execution crashed", _first_line(run.reason)
    worst = next((o for o in run.outputs if not o.ok), None)
    if worst is None:
        return "wrong numbers", ""
    return "wrong numbers", (f"{worst.name}: max abs error {worst.max_abs:.3e}, max rel error "
                             f"{worst.max_rel:.3e} (tolerance {worst.tolerance:g})")  # fmt: skip


def _detail(name: str, run: LevelRun) -> str:
    lines = [f"step {name}, executed at the {run.level} level:"]
    if run.crashed:
        lines.append(f"  the execution crashed: {run.reason}")
    for o in run.outputs:
        if not o.ok:
            where = f" at {list(o.first_bad_index)}: got {o.got:.7g}, want {o.want:.7g}" if o.first_bad_index else ""
            lines.append(f"  {o.name}: max abs error {o.max_abs:.3e}, max rel error {o.max_rel:.3e}{where}")
    return "\n".join(lines) + "\n"


# ---- probes: what the run looks at ---------------------------------------------------------------


class _Found(BaseException):
    """The failure is found inside a schedule: stop the interpreter (a BaseException passes
    the schedule's own handlers)."""

    def __init__(self, failure: Failure):
        super().__init__(failure.describe())
        self.failure = failure


@dataclass
class _Probe:
    """Nothing executed: a crash, an error or a verifier failure."""

    def start(self, ein: ModuleOp, program: Program | None, ctx: Context) -> None:
        return None

    def watching(self, stage: str, key: str) -> bool:
        return False

    def step(self, stage: str, key: str, name: str, kind: str, module: ModuleOp, before: ModuleOp | None,
             seconds: float, location: str | None = None, p: ModulePass | None = None) -> Failure | None:  # fmt: skip
        return None

    def crashed(self, stage: str, name: str, kind: str, module: ModuleOp, exc: BaseException, location: str | None) -> None:
        return None

    def printed(self, target: str, module: ModuleOp, source: str, seconds: float) -> Failure | None:
        return None


@dataclass
class _Numbers(_Probe):
    """The inputs (seeded, once) and the float64 oracle, as `--check-numerics` makes them."""

    repro: Reproducer
    inputs: dict[str, np.ndarray] = field(default_factory=dict)
    oracle: dict[str, np.ndarray] = field(default_factory=dict)
    tolerances: dict[str, float] = field(default_factory=dict)
    program: Program | None = None
    too_big: str | None = None
    report: NumericsReport | None = None

    def start(self, ein: ModuleOp, program: Program | None, ctx: Context) -> None:
        from einc.semantics.compare import tolerance
        from einc.semantics.reference import run_reference
        from einc.tools.numerics.check import _opt_walk, program_inputs, program_work
        from einc.tools.numerics.scale import interpreted_too_big

        self.program = program
        report = NumericsReport(self.repro.filename, self.repro.target or "mlir", self.repro.seed,
                                effective_scale(self.repro))  # fmt: skip
        if program is not None and self.repro.mode == "compile":
            self.inputs = program_inputs(program, np.random.default_rng(self.repro.seed))
            with np.errstate(all="ignore"):
                self.oracle = run_reference(ein, self.inputs)
            self.tolerances = {o.name: tolerance(o.dtype) for o in program.outputs}
            self.too_big = interpreted_too_big(program_work(program))
        else:
            walk = _opt_walk(report, ein, program)
            self.inputs, self.oracle = dict(walk.inputs), dict(walk.oracle)
            self.tolerances, self.too_big = dict(walk.tolerances), walk.too_big
        if self.repro.tolerance is not None:
            self.tolerances = dict.fromkeys(self.tolerances, self.repro.tolerance)
        self.report = report

    def run(self, module: ModuleOp) -> LevelRun:
        from einc.tools.numerics.execute import level_of, run_at_level

        if self.too_big is not None and level_of(module) != "ein":
            return LevelRun(level_of(module), ran=False, reason=self.too_big)
        return run_at_level(module, self.inputs, self.oracle, self.tolerances)


@dataclass
class _Fast(_Numbers):
    """Only the failing step: the module before it agrees with the oracle, after it not."""

    culprit: Failure | None = None
    compare_stage: bool = True

    def watching(self, stage: str, key: str) -> bool:
        c = self.culprit
        return c is not None and c.step == key and (not self.compare_stage or c.stage in (None, stage))

    def step(self, stage: str, key: str, name: str, kind: str, module: ModuleOp, before: ModuleOp | None,
             seconds: float, location: str | None = None, p: ModulePass | None = None) -> Failure | None:  # fmt: skip
        if before is None:
            return None
        earlier = self.run(before)
        if earlier.ran and not earlier.ok:  # an earlier step changed the numbers: another failure
            return Failure("numerics", stage, f"a step before {key}", *_run_words(earlier))
        after = self.run(module)
        if not after.ran or after.ok:
            return None
        return Failure("numerics", stage, key, *_run_words(after), _detail(name, after))

    def printed(self, target: str, module: ModuleOp, source: str, seconds: float) -> Failure | None:
        if not self.watching("source", "printer"):
            return None
        from einc.tools.numerics.check import source_level
        from einc.tools.numerics.walk import Walk
        from einc.targets import get_target

        earlier = self.run(module)
        if earlier.ran and not earlier.ok:
            return Failure("numerics", "source", "a step before printer", *_run_words(earlier))
        walk = Walk(NumericsReport("", target, 0, 1.0), self.inputs, self.oracle, self.tolerances, Context())
        after = source_level(target, get_target(target), source, module, walk, self.program)
        if not after.ran or after.ok:
            return None
        return Failure("numerics", "source", "printer", *_run_words(after), _detail("printer", after))


@dataclass
class _Full(_Numbers):
    """Every step executed and compared, as `--check-numerics` walks (the report kept)."""

    walk: Walk | None = None

    def start(self, ein: ModuleOp, program: Program | None, ctx: Context) -> None:
        from einc.tools.numerics.walk import Walk

        super().start(ein, program, ctx)
        assert self.report is not None
        if program is not None:
            from einc.tools.numerics.check import _shapes_note

            self.report.notes.append(_shapes_note(program, effective_scale(self.repro)))
        self.walk = Walk(self.report, self.inputs, self.oracle, self.tolerances, ctx, too_big=self.too_big)

    def _walk(self) -> Walk:
        assert self.walk is not None
        return self.walk

    def watching(self, stage: str, key: str) -> bool:
        return not self._walk().failed  # the module before each step: to bisect a pass by its rewrites

    def step(self, stage: str, key: str, name: str, kind: str, module: ModuleOp, before: ModuleOp | None,
             seconds: float, location: str | None = None, p: ModulePass | None = None) -> Failure | None:  # fmt: skip
        walk = self._walk()
        step = walk.step(stage, name, kind, module, seconds, location)
        if not walk.failed:
            return None
        if p is not None and before is not None and step.check is not None and not step.check.crashed:
            step.rewrite = walk.first_rewrite(p, before)
        return numerics_failure(step)

    def crashed(self, stage: str, name: str, kind: str, module: ModuleOp, exc: BaseException, location: str | None) -> None:
        self._walk().crashed(stage, name, kind, module, 0.0, exc, location)

    def printed(self, target: str, module: ModuleOp, source: str, seconds: float) -> Failure | None:
        from einc.tools.numerics.check import source_level
        from einc.targets import get_target

        walk = self._walk()
        program = self.program
        walk.record("source", "printer", "printer", source, seconds, None,
                    lambda: source_level(target, get_target(target), source, module, walk, program))  # fmt: skip
        return numerics_failure(walk.steps[-1]) if walk.failed else None


# ---- the run ----------------------------------------------------------------------------------


@dataclass
class Outcome:
    """A replay's result: the first failure (None: it ran through), the numerics report of a
    full numeric replay, notes (plugins loaded from the reproducer's copies), the seconds."""

    failure: Failure | None
    report: NumericsReport | None = None
    notes: list[str] = field(default_factory=list)
    seconds: float = 0.0


def effective_scale(repro: Reproducer) -> float:
    """The shape scale the replay runs at: the reproducer's, else (`auto`) the one
    `--check-numerics` would choose for a numeric check, else 1."""
    from einc.tools.numerics.scale import candidate_scales

    if repro.shape_scale is not None:
        return repro.shape_scale
    if not repro.filename.endswith(".ein") or not repro.check_numerics:
        return 1.0
    return candidate_scales(repro.program, repro.filename)[0]


def program_text(repro: Reproducer) -> str:
    """The program at the reproducer's shape scale (a `.ein` program scaled as `--check-numerics`
    scales it; other inputs as they are)."""
    from einc.tools.numerics.scale import scale_program

    if not repro.filename.endswith(".ein"):
        return repro.program
    scale = effective_scale(repro)
    return scale_program(repro.program, repro.filename, scale) if scale < 1.0 else repro.program


def replay(repro: Reproducer, fast: bool = False, expect: Failure | None = None) -> Outcome:
    """Run the reproducer; its first failure. `fast` (with `expect`, the failure it should
    show, default the reproducer's): execute only what tells whether it is that failure."""
    start = time.perf_counter()
    notes = load_plugins(repro)
    expect = expect or repro.failure
    probe: _Probe
    numeric = expect.kind == "numerics" or repro.check_numerics and expect.kind != "crash"
    if not numeric:
        probe = _Probe()
    elif fast and expect.kind == "numerics" and expect.step is not None:
        probe = _Fast(repro, culprit=expect, compare_stage=repro.mode == "compile")
    else:
        probe = _Full(repro)
    run = _compile_run if repro.mode == "compile" else _opt_run
    failure = run(repro, probe)
    report = probe.report if isinstance(probe, _Full) else None
    if report is not None and isinstance(probe, _Full) and failure is not None and failure.kind == "numerics":
        report.first_bad = next((s.index for s in report.steps if s.check is not None and s.check.ran and not s.check.ok), None)
    return Outcome(failure, report, notes, time.perf_counter() - start)


def still_fails(repro: Reproducer, loose: bool = True) -> bool:
    """The reducer's test: the fast replay fails the way the reproducer says."""
    outcome = replay(repro, fast=True)
    return same_way(outcome.failure, repro.failure, loose=loose, stage=repro.mode == "compile")


def _crash_or_error(stage: str, step: str, exc: BaseException, probe: _Probe, name: str, kind: str,
                    module: ModuleOp | None, location: str | None = None) -> Failure:  # fmt: skip
    if isinstance(exc, EincError):
        return error_failure(stage, step, exc)
    if isinstance(exc, _Found):
        return exc.failure
    if module is not None:
        probe.crashed(stage, name, kind, module, exc, location)
    return crash_failure(stage, step, exc)


def _verify_failure(module: ModuleOp, stage: str, step: str) -> Failure | None:
    """einc-opt's verification after a pass: the first op that does not verify on its own."""
    try:
        module.verify()
        return None
    except DiagnosticException as whole:
        message = _first_line(str(whole)) or "the module does not verify"
        for op in module.walk():
            try:
                op.verify(verify_nested_ops=False)
            except DiagnosticException as err:
                message = _first_line(str(err)) or message
                break
        message = re.sub(r"^Operation does not verify: ", "", message)
        return Failure("verifier", stage, step, "verifier", message)


def _run_pass(p: ModulePass, stage: str, module: ModuleOp, ctx: Context, probe: _Probe, kind: str,
              keep_locations: bool, verify: bool = False, location: str | None = None) -> Failure | None:  # fmt: skip
    from einc.ir.locations import keeping_locations
    from einc.tools.numerics.walk import pass_name

    key = p.name
    before = module.clone() if probe.watching(stage, key) else None
    start = time.perf_counter()
    try:
        if keep_locations:
            keeping_locations(PassPipeline((p,))).apply(ctx, module)
        else:
            with pass_scope(p, module):
                p.apply(ctx, module)
    except Exception as exc:  # noqa: BLE001 - the step's failure, whatever it is
        return _crash_or_error(stage, key, exc, probe, pass_name(p), kind, module, location)
    seconds = time.perf_counter() - start
    if verify:
        failed = _verify_failure(module, stage, key)
        if failed is not None:
            return failed
    return probe.step(stage, key, pass_name(p), kind, module, before, seconds, location, p)


def _run_passes(passes: Sequence[ModulePass], stage: str, module: ModuleOp, ctx: Context, probe: _Probe,
                kind: str | None, keep_locations: bool, location: str | None = None) -> Failure | None:  # fmt: skip
    from einc.tools.numerics.walk import pass_kind

    for p in passes:
        failed = _run_pass(p, stage, module, ctx, probe, kind or pass_kind(p), keep_locations, location=location)
        if failed is not None:
            return failed
    return None


class _ScheduleSteps(Interpreter.Listener):
    """Each top-level transform op of the schedule a step (the probe looks at it)."""

    def __init__(self, schedule: object, module: ModuleOp, probe: _Probe, stage: str = "scheduled"):
        from einc.schedule.script import Schedule

        assert isinstance(schedule, Schedule)
        self.schedule = schedule
        self.block = schedule.entry().body.block
        self.module = module
        self.probe = probe
        self.stage = stage
        self.op: Operation | None = None
        self.before: ModuleOp | None = None
        self.started = time.perf_counter()

    @property
    def key(self) -> str:
        return op_key(self.op) if self.op is not None else "schedule"

    def name(self) -> str:
        from einc.tools.numerics.walk import op_text

        return op_text(self.schedule, self.op) if self.op is not None else "schedule"

    def location(self) -> str | None:
        from einc.tools.numerics.walk import op_location

        return op_location(self.schedule, self.op) if self.op is not None else None

    def will_interpret_op(self, op: Operation, args: PythonValues) -> None:
        if op.parent_block() is self.block:
            self.op = op
            self.before = self.module.clone() if self.probe.watching(self.stage, op_key(op)) else None
            self.started = time.perf_counter()

    def did_interpret_op(self, op: Operation, results: PythonValues) -> None:
        if op.parent_block() is not self.block or isinstance(op, transform.YieldOp):
            return
        failed = self.probe.step(self.stage, op_key(op), self.name(), "transform", self.module, self.before,
                                 time.perf_counter() - self.started, self.location())  # fmt: skip
        self.before = None
        if failed is not None:
            raise _Found(failed)


def _apply_schedule(schedule: object, module: ModuleOp, probe: _Probe,
                    run: Callable[[ModuleOp, Sequence[Interpreter.Listener]], None]) -> Failure | None:  # fmt: skip
    steps = _ScheduleSteps(schedule, module, probe)
    try:
        run(module, (steps,))
    except _Found as found:
        return found.failure
    except Exception as exc:  # noqa: BLE001 - the transform op's failure
        return _crash_or_error("scheduled", steps.key, exc, probe, steps.name(), "transform", module, steps.location())
    return None


def _compile_run(repro: Reproducer, probe: _Probe) -> Failure | None:
    """einc compile's pipeline (einc.compiler.driver.Compilation's stages), step by step."""
    from einc.compiler.driver import Compilation
    from einc.compiler.registry import get_all_passes
    from einc.frontend.target_check import check_program_dtypes
    from einc.passes.pipeline import LOOPS_PIPELINE, parse_passes
    from einc.passes.targeted import bind_target
    from einc.schedule.checks import check_schedule, check_scheduled
    from einc.schedule.choice import ScheduleChoice
    from einc.schedule.script import Schedule
    from einc.targets.descriptions import KernelError

    text = program_text(repro)
    try:
        comp = Compilation(text, repro.filename, target=repro.target or "c", schedule=ScheduleChoice.NONE,
                           use_records=False)  # fmt: skip
        ein = comp.module("ein").clone()
    except Exception as exc:  # noqa: BLE001 - the frontend's failure
        return _crash_or_error("ein", "frontend", exc, probe, "frontend", "frontend", None)
    ctx = comp.ctx
    probe.start(ein, comp.program, ctx)
    module = ein.clone()
    failed = probe.step("ein", "frontend", "frontend", "frontend", module, None, 0.0)
    if failed is not None:
        return failed
    hooks: dict[str, list[tuple[ModulePass, ...]]] = {}
    try:
        for stage, passes in repro.hooks:
            hooks.setdefault(stage, []).append(parse_passes(passes, get_all_passes(), f"hook {stage}"))
        target = comp.target_obj
        pipeline = repro.target_pipeline if repro.target_pipeline is not None else target.pipeline
        target_passes = bind_target(parse_passes(pipeline, get_all_passes(), "target-pipeline"), target) if pipeline else ()
        loops = parse_passes(LOOPS_PIPELINE, get_all_passes(), "loops")
    except EincError as err:
        return error_failure("ein", "pipeline", err)

    def hook(stage: str) -> Failure | None:
        for passes in hooks.get(stage, []):
            failed = _run_passes(passes, stage, module, ctx, probe, "plugin", False, f"after the {stage} stage")
            if failed is not None:
                return failed
        return None

    failed = hook("ein") or _run_passes(loops, "loops", module, ctx, probe, None, True) or hook("loops")
    if failed is not None:
        return failed
    if repro.schedule is not None:
        try:
            schedule = Schedule.parse(repro.schedule, "<schedule>")
            check_schedule(schedule, target)
        except Exception as exc:  # noqa: BLE001
            return _crash_or_error("scheduled", "schedule", exc, probe, "schedule", "transform", None)
        failed = _apply_schedule(schedule, module, probe, lambda m, ls: schedule.apply_in_place(m, get_all_passes(), ls))
        if failed is not None:
            return failed
        try:
            check_scheduled(schedule, module, target)
        except Exception as exc:  # noqa: BLE001
            return _crash_or_error("scheduled", "schedule", exc, probe, "schedule", "transform", None)
    failed = hook("scheduled")
    if failed is not None:
        return failed
    try:
        check_program_dtypes(target.limits, comp.program)
    except EincError as err:
        return error_failure("target", "dtypes", err)
    failed = _run_passes(target_passes, "target", module, ctx, probe, None, True) or hook("target")
    if failed is not None:
        return failed
    start = time.perf_counter()
    try:
        source = target.emit(module)
    except KernelError as err:
        return error_failure("source", "printer", comp._at_statement(err))
    except Exception as exc:  # noqa: BLE001
        return _crash_or_error("source", "printer", exc, probe, "printer", "printer", None)
    return probe.printed(comp.target, module, source, time.perf_counter() - start)


def _opt_passes(spec: str) -> tuple[ModulePass, ...]:
    """An einc-opt pipeline: einc's passes, the plugins' and xDSL's."""
    from xdsl.universe import Universe

    from einc.compiler.registry import get_all_passes
    from einc.passes.pipeline import parse_passes, strip_module_wrapper

    available = dict(Universe.get_multiverse().all_passes)
    available.update(get_all_passes())
    return parse_passes(strip_module_wrapper(spec), available, "pass-pipeline") if spec.strip() else ()


def _opt_run(repro: Reproducer, probe: _Probe) -> Failure | None:
    """einc-opt's: the input parsed (a `.ein` program through the frontend), each pass of the
    pipeline (einc-apply-schedule one transform op at a time) verified after, then `-t`."""
    from einc.dialects.context import make_context
    from einc.tools.numerics.check import _input_module
    from einc.tools.numerics.execute import level_of
    from einc.tools.numerics.walk import STAGE_OF_LEVEL
    from einc.schedule.apply_pass import ApplySchedulePass
    from einc.schedule.script import Schedule

    text = program_text(repro)
    is_ein = repro.filename.endswith(".ein")
    try:
        module, program = _input_module(text, repro.filename, 1.0, is_ein)
        passes = _opt_passes(repro.pipeline)
    except Exception as exc:  # noqa: BLE001 - the input's (or the pipeline's) failure
        return _crash_or_error("ein", "frontend", exc, probe, "frontend", "frontend", None)
    ctx = make_context()
    probe.start(module, program, ctx)
    failed = probe.step(STAGE_OF_LEVEL.get(level_of(module), "loops"), "frontend", "frontend", "frontend", module, None, 0.0)
    if failed is not None:
        return failed
    if repro.verify:
        failed = _verify_failure(module, "ein", "frontend")
        if failed is not None:
            return failed
    for p in passes:
        stage = STAGE_OF_LEVEL.get(level_of(module), "loops")
        if isinstance(p, ApplySchedulePass):
            try:
                if p.file is not None and repro.schedule is not None:
                    schedule = Schedule.parse(repro.schedule, p.file)
                else:
                    schedule = p.schedule_for(module)
            except Exception as exc:  # noqa: BLE001
                return _crash_or_error(stage, p.name, exc, probe, p.name, "pass", module)
            failed = _apply_schedule(schedule, module, probe, lambda m, ls, p=p, s=schedule: p.run(m, s, ls))
            if failed is None and repro.verify:
                failed = _verify_failure(module, stage, p.name)
        else:
            from einc.tools.numerics.walk import pass_kind

            failed = _run_pass(p, stage, module, ctx, probe, pass_kind(p), True, verify=repro.verify)
        if failed is not None:
            return failed
    if repro.target is None or repro.target == "mlir":
        return None
    from einc.targets import get_all_targets, get_target

    if repro.target not in get_all_targets():
        return None
    start = time.perf_counter()
    try:
        source = get_target(repro.target).emit(module)
    except Exception as exc:  # noqa: BLE001
        return _crash_or_error("source", "printer", exc, probe, "printer", "printer", None)
    return probe.printed(repro.target, module, source, time.perf_counter() - start)
