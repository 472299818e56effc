"""`--check-numerics`: walk a pipeline step by step and find the first step that changes the
numbers.

    check_compilation(comp)                       einc compile's own pipeline
    check_pipeline(text, filename, "a,b,c")       einc-opt's pipeline on a .ein/.mlir input

The inputs are random (seeded), generated once; the oracle is the float64 NumPy reference
(einc.semantics.reference) of the program's `ein` module, computed once. Programs are scaled down first
(einc.tools.numerics.scale) unless `shape_scale` says otherwise; a scale at which the compilation is
refused (a schedule's tiles that do not fit) is passed over for the next larger one.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, TypeVar

import numpy as np
from xdsl.dialects.builtin import ModuleOp, TensorType
from xdsl.interpreter import Interpreter
from xdsl.passes import ModulePass

from einc.errors import EincError, SourceLocation, UsageError
from einc.tools.numerics.execute import NotExecutable, describe, level_of, run_source
from einc.tools.numerics.scale import candidate_scales, interpreted_too_big, scale_program
from einc.tools.numerics.types import LevelRun, NumericsReport
from einc.tools.numerics.walk import STAGE_OF_LEVEL, PassSpec, Walk, parse_passes

if TYPE_CHECKING:
    from einc.compiler.driver import Compilation
    from einc.frontend import Program
    from einc.schedule.script import Schedule
    from einc.targets.clike import CLikeTarget


T = TypeVar("T")


# ---- einc compile ---------------------------------------------------------------------------


def check_compilation(comp: Compilation, *, seed: int = 0, shape_scale: float | None = None) -> NumericsReport:
    """Walk `comp`'s pipeline (frontend, convert-ein-to-affine, each transform op of its
    schedule, each pass of its target's pipeline, the printer and the printed source on the
    real target), each step executed on the same inputs and compared with the oracle.
    An EincError of the compilation itself (the user's program or schedule) propagates."""
    from einc.compiler.driver import Compilation
    from einc.schedule.choice import ScheduleChoice

    comp.run_until("source")  # at its own shapes: which schedule applies; its errors as einc reports them
    schedule = applied_schedule(comp)
    extra = dict(getattr(comp, "extra_passes", {}) or {})
    source, input_dict = declared(comp)
    scalable = input_dict is None and isinstance(source, str)
    scales = _scales(source if scalable else "", comp.filename, shape_scale if scalable else 1.0)
    notes: list[str] = []
    if not scalable and shape_scale not in (None, 1.0):
        notes.append("shapes kept: this program's input_dict cannot be written as declarations to scale")

    def build(scale: float) -> Compilation:
        text = scale_program(source, comp.filename, scale) if scale < 1.0 else source
        return with_extra_passes(Compilation(text, comp.filename, input_dict, comp.extra_outputs, comp.target,
                                             schedule if schedule is not None else ScheduleChoice.NONE, cflags=comp.cflags,
                                             use_records=False), extra)  # fmt: skip

    scale, sc = _first_accepted(scales, build, lambda sc: sc.run_until("source"), notes)
    return _walk_compilation(comp, sc, schedule, scale, seed, notes, extra)


def declared(comp: Compilation) -> tuple[str, Mapping[str, Mapping[str, object]] | None]:
    """The program as `.ein` text with its inputs declared (so it can be scaled), and no
    input_dict; the source and input_dict as they are where that text is refused."""
    from einc.frontend import parse_program

    if comp.input_dict is None or not isinstance(comp.source, str):
        return comp.source, comp.input_dict
    lines = []
    for name, spec in comp.input_dict.items():
        dtype, shape = spec.get("dtype"), spec.get("shape")
        if not isinstance(dtype, str) or not isinstance(shape, list | tuple):
            return comp.source, comp.input_dict
        dims = [d for d in shape if isinstance(d, int) and not isinstance(d, bool)]
        if len(dims) != len(shape):
            return comp.source, comp.input_dict
        lines.append(f"input {name}: {dtype}[{', '.join(map(str, dims))}]")
    text = "\n".join(lines) + "\n" + comp.source
    try:
        parse_program(text, comp.filename, extra_outputs=comp.extra_outputs)
    except Exception:  # noqa: BLE001 - a text the frontend refuses (or cannot take)
        return comp.source, comp.input_dict
    return text, None


def with_extra_passes(comp: Compilation, extra: Mapping[str, Sequence[str]]) -> Compilation:
    """`comp` with `extra_passes` (the driver's stage hooks): a copy made with them where the
    driver has the field (its hooks are parsed on construction), else `comp` with them set."""
    import dataclasses

    if not extra:
        return comp
    if "extra_passes" in {f.name for f in dataclasses.fields(comp)}:
        return dataclasses.replace(comp, **{"extra_passes": dict(extra)})  # noqa: PIE804 - a field only some drivers have
    setattr(comp, "extra_passes", dict(extra))  # noqa: B010 - an attribute this driver lacks
    return comp


def applied_schedule(comp: Compilation) -> Schedule | None:
    """The schedule `comp` applied (after `run_until("scheduled")`): the user's, a tuning
    record's, the target's default one, or None."""
    from einc.schedule.script import Schedule

    if comp.record is not None:
        return Schedule.parse(comp.record.schedule, f"<tuning record {comp.record.id}>")
    return comp.choice.resolve(comp.target_obj, comp.module("loops"))


def _walk_compilation(
    comp: Compilation, sc: Compilation, schedule: Schedule | None, scale: float, seed: int,
    notes: list[str], extra: Mapping[str, Sequence[str]],
) -> NumericsReport:  # fmt: skip
    from einc.frontend import build_module
    from einc.frontend.target_check import check_program_dtypes
    from einc.passes.pipeline import LOOPS_PIPELINE
    from einc.schedule.checks import check_schedule, check_scheduled
    from einc.targets.descriptions import KernelError

    start = time.perf_counter()
    sc.module("ein")
    program = sc.program
    ein = build_module(program)  # the program's own: not an `ein` stage hook's (that is a step)
    report = NumericsReport(comp.filename, comp.target, seed, scale)
    report.notes = notes + [_shapes_note(program, scale)]
    walk = _start(report, program, ein, sc)
    module = ein.clone()
    walk.step("ein", "frontend", "frontend", module, time.perf_counter() - start)
    target = sc.target_obj

    def hook(stage: str) -> bool:
        passes = parse_passes(list(extra.get(stage, ())))
        return walk.run_passes(module, stage, passes, "plugin", f"after the {stage} stage")

    if not (hook("ein") and walk.run_passes(module, "loops", parse_passes(LOOPS_PIPELINE)) and hook("loops")):
        return report
    if schedule is not None:
        check_schedule(schedule, target)
        if not walk.apply_schedule(module, schedule):
            return report
        check_scheduled(schedule, module, target)
    if not hook("scheduled"):
        return report
    check_program_dtypes(sc.target_obj.limits, program)
    try:
        if not (walk.run_passes(module, "target", parse_passes(target.pipeline)) and hook("target")):
            return report
        start = time.perf_counter()
        source = target.emit(module)
    except KernelError as err:
        raise sc._at_statement(err) from None
    walk.record("source", "printer", "printer", source, time.perf_counter() - start, None,
                lambda: source_level(sc.target, target, source, module, walk, program))  # fmt: skip
    return report


def _start(report: NumericsReport, program: Program, ein: ModuleOp, sc: Compilation) -> Walk:
    from einc.semantics.compare import tolerance
    from einc.semantics.reference import run_reference

    inputs = program_inputs(program, np.random.default_rng(report.seed))
    with np.errstate(all="ignore"):
        oracle = run_reference(ein, inputs)
    tolerances = {o.name: tolerance(o.dtype) for o in program.outputs}
    return Walk(report, inputs, oracle, tolerances, sc.ctx, too_big=interpreted_too_big(program_work(program)))


def program_inputs(program: Program, rng: np.random.Generator) -> dict[str, np.ndarray]:
    """einc.semantics.compare.random_inputs (floats in ±[0.5, 2), integers in [1, 7]), with the integers
    folded into [1, d - 1] for the program's smallest dimension d > 1: valid as gather indices
    into any of its tensors, also once its shapes are scaled down."""
    from einc.semantics.compare import random_inputs

    arrays = random_inputs(program, rng)
    dims = [d for t in (*program.inputs, *program.outputs) for d in t.shape if d > 1]
    dims += [size for s in program.statements for _, size in s.axes if size > 1]
    high = max(1, min([7, *(d - 1 for d in dims)]))
    for name, array in arrays.items():
        if array.dtype.kind in "iu" and high < 7:
            arrays[name] = (1 + (array.astype(np.int64) - 1) % high).astype(array.dtype)
    return arrays


def source_level(
    name: str, target: type[CLikeTarget], source: str, module: ModuleOp, walk: Walk,
    program: Program | None,
) -> LevelRun:  # fmt: skip
    """The printed source built and run on the target's real runtime, or why it cannot be."""
    level = f"source:{name}"
    crashed = next((s for s in walk.steps if s.check is not None and s.check.crashed), None)
    if crashed is not None:  # native code that writes out of bounds could corrupt this process
        return LevelRun(level, ran=False, reason=f"not run: step {crashed.index} ({crashed.name}) crashed")
    why = target.cannot_run()
    if why is not None:
        return LevelRun(level, ran=False, reason=f"not run: {why}")
    start = time.perf_counter()
    try:
        runner = target.build(source, module)
    except Exception as exc:  # noqa: BLE001 - the printed source does not build: the printer's failure
        return LevelRun(level, ran=True, crashed=True, reason=f"the source does not build: {describe(exc)}",
                        seconds=time.perf_counter() - start)  # fmt: skip
    if program is not None:
        specs = {o.name: (tuple(o.shape), o.dtype) for o in program.outputs}
    else:
        from einc.runtime.signature import KernelSignature

        signature = KernelSignature.from_module(module)
        specs = {b.name: (b.shape, str(b.dtype)) for b in signature.outputs}
    run = run_source(runner, walk.inputs, walk.oracle, walk.tolerances, specs, level)
    return dataclasses.replace(run, seconds=time.perf_counter() - start)


def _first_accepted(
    scales: Sequence[float], build: Callable[[float], T], trial: Callable[[T], object], notes: list[str]
) -> tuple[float, T]:
    """The first of `scales` whose build `trial` accepts (the last one is taken untried), each
    refused one noted; a crash takes that scale (the walk finds the step that crashes)."""
    for i, scale in enumerate(scales):
        built = build(scale)
        if i + 1 < len(scales):
            try:
                trial(built)
            except EincError as err:
                notes.append(f"scale {_fraction(scale)} refused ({_first_line(err)}); trying a larger one")
                continue
            except Exception:  # noqa: BLE001 - a crash: the walk finds the step that crashes
                return scale, built
        return scale, built
    raise AssertionError(scales)  # pragma: no cover - the last scale is always taken


# ---- einc-opt ---------------------------------------------------------------------------------


def check_pipeline(
    text: str, filename: str, pipeline: str | Sequence[PassSpec], *, seed: int = 0,
    shape_scale: float | None = None, target: str | None = None,
) -> NumericsReport:  # fmt: skip
    """Walk `pipeline` (pipeline text, or texts and pass objects) over a `.ein` program or an
    MLIR module, one pass at a time (`einc-apply-schedule`: one transform op at a time), and
    with `target` print the result and run it there. An EincError propagates."""
    is_ein = Path(filename).suffix == ".ein"
    scales = _scales(text if is_ein else "", filename, shape_scale if is_ein else 1.0)
    notes = [] if is_ein or shape_scale in (None, 1.0) else ["shapes kept: an MLIR input is not scaled"]
    scale, (module, program) = _first_accepted(
        scales, lambda scale: _input_module(text, filename, scale, is_ein), lambda mp: _plain(mp[0].clone(), pipeline), notes
    )
    report = NumericsReport(filename, target or "mlir", seed, scale)
    report.notes = notes + ([_shapes_note(program, scale)] if program is not None else [])
    walk = _opt_walk(report, module, program)
    start = time.perf_counter()
    walk.step(STAGE_OF_LEVEL[level_of(module)], "frontend", "frontend", module, time.perf_counter() - start)
    for p in _passes(pipeline):
        from einc.schedule.apply_pass import ApplySchedulePass

        if isinstance(p, ApplySchedulePass):
            schedule = p.schedule_for(module)  # (an embedded one is taken out of the module)
            if not walk.apply_schedule(module, schedule, run=_applier(p, schedule)):
                return report
        elif not walk.run_passes(module, None, [p]):
            return report
    if target is not None:
        _print_and_run(walk, module, target, program)
    return report


def _applier(p: object, schedule: Schedule) -> Callable[[ModuleOp, Sequence[Interpreter.Listener]], None]:
    """`einc-apply-schedule`'s own application (its target's checks included), observed."""
    from einc.schedule.apply_pass import ApplySchedulePass

    assert isinstance(p, ApplySchedulePass)

    def run(payload: ModuleOp, listeners: Sequence[Interpreter.Listener]) -> None:
        p.run(payload, schedule, listeners)

    return run


def _passes(pipeline: str | Sequence[PassSpec]) -> list[ModulePass]:
    return parse_passes(pipeline)


def _plain(module: ModuleOp, pipeline: str | Sequence[PassSpec]) -> None:
    from einc.dialects.context import make_context

    ctx = make_context()
    for p in _passes(pipeline):
        p.apply(ctx, module)


def _input_module(text: str, filename: str, scale: float, is_ein: bool) -> tuple[ModuleOp, Program | None]:
    if is_ein:
        from einc.frontend import build_module, parse_program

        program = parse_program(scale_program(text, filename, scale), filename)
        return build_module(program), program
    from xdsl.utils.exceptions import ParseError as XdslParseError

    from einc.dialects.context import make_context
    from einc.errors import ParseError
    from einc.schedule.script import PARSED_AT, parse_with_locations

    try:
        module, locations = parse_with_locations(make_context(), text, filename)
    except XdslParseError as err:
        from einc.errors import span_location

        raise ParseError(err.msg, span_location(err.span)) from None
    PARSED_AT.update(locations)
    return module, None


def _opt_walk(report: NumericsReport, module: ModuleOp, program: Program | None) -> Walk:
    from einc.dialects.context import make_context
    from einc.semantics.compare import tolerance
    from einc.tools.numerics.execute import EXECUTORS

    rng = np.random.default_rng(report.seed)
    if program is not None:
        inputs = program_inputs(program, rng)
        tolerances = {o.name: tolerance(o.dtype) for o in program.outputs}
    else:
        specs, tolerances = _module_specs(module)
        inputs = _random(specs, rng)
    level = level_of(module)
    too_big = interpreted_too_big(program_work(program) if program is not None else loop_points(module))
    if level != "ein" and too_big is not None:
        raise UsageError(f"--check-numerics cannot interpret the input module for a reference: {too_big}; "
                         "start from the .ein program (scaled down automatically)",
                         SourceLocation(report.program, 1, 1))  # fmt: skip
    try:
        with np.errstate(all="ignore"):
            oracle = EXECUTORS[level](module.clone(), inputs)
    except NotExecutable as err:
        raise UsageError(f"--check-numerics cannot execute the input module for a reference: {err} "
                         "(start from the .ein program or a loop-level module)",
                         SourceLocation(report.program, 1, 1)) from None  # fmt: skip
    if level != "ein":
        report.notes.append(f"the reference is the input module itself, executed at the {level} level")
    return Walk(report, inputs, oracle, tolerances, make_context(), too_big=too_big)


def _module_specs(module: ModuleOp) -> tuple[dict[str, tuple[tuple[int, ...], str]], dict[str, float]]:
    """An MLIR input's inputs (name -> shape, dtype) and its outputs' tolerances."""
    from xdsl.dialects.builtin import StringAttr

    from einc.semantics.compare import tolerance
    from einc.runtime.signature import KernelSignature, kernel_function, numpy_dtype

    if level_of(module) != "ein":
        signature = KernelSignature.from_module(module)
        return ({b.name: (b.shape, str(b.dtype)) for b in signature.inputs},
                {b.name: tolerance(str(b.dtype)) for b in signature.outputs})  # fmt: skip
    kernel = kernel_function(module)
    specs: dict[str, tuple[tuple[int, ...], str]] = {}
    for arg, attrs in zip(kernel.body.block.args, kernel.arg_attrs.data if kernel.arg_attrs else []):
        name = attrs.data["ein.name"]
        assert isinstance(name, StringAttr) and isinstance(arg.type, TensorType)
        specs[name.data] = (tuple(arg.type.get_shape()), str(numpy_dtype(arg.type.get_element_type())))
    results = kernel.function_type.outputs.data
    tolerances = {f"output{i}": tolerance(str(numpy_dtype(t.get_element_type())))
                  for i, t in enumerate(results) if isinstance(t, TensorType)}  # fmt: skip
    return specs, tolerances


def _random(specs: Mapping[str, tuple[tuple[int, ...], str]], rng: np.random.Generator) -> dict[str, np.ndarray]:
    """The same data as einc.semantics.compare.random_inputs: floats in ±[0.5, 2), ints in [1, 7]."""
    arrays = {}
    for name, (shape, dtype) in specs.items():
        if np.dtype(dtype).kind == "f":
            mag = rng.uniform(0.5, 2.0, shape)
            arrays[name] = np.asarray(mag * rng.choice([-1.0, 1.0], shape), dtype=dtype)
        else:
            arrays[name] = np.asarray(rng.integers(1, 8, shape), dtype=dtype)
    return arrays


def _print_and_run(walk: Walk, module: ModuleOp, name: str, program: Program | None) -> None:
    from einc.targets import get_all_targets, get_target

    if name not in get_all_targets():
        return
    target = get_target(name)
    start = time.perf_counter()
    try:
        source = target.emit(module)
    except EincError as err:
        run = LevelRun(f"source:{name}", ran=False, reason=f"not printed: {_first_line(err)}")
        walk.record("source", "printer", "printer", "", time.perf_counter() - start, None, lambda: run)
        return
    walk.record("source", "printer", "printer", source, time.perf_counter() - start, None,
                lambda: source_level(name, target, source, module, walk, program))  # fmt: skip


# ---- helpers ----------------------------------------------------------------------------------


def _scales(text: str, filename: str, shape_scale: float | None) -> list[float]:
    if shape_scale is not None:
        return [shape_scale] if shape_scale >= 1.0 else [shape_scale, 1.0]
    return candidate_scales(text, filename)


def _fraction(scale: float) -> str:
    return "1" if scale >= 1.0 else f"1/{round(1 / scale)}" if (1 / scale).is_integer() else f"{scale:g}"


def _first_line(err: BaseException) -> str:
    return describe(err)


def program_work(program: Program) -> int:
    """Iteration points of all the program's statements."""
    import math

    return sum(math.prod(size for _, size in s.axes) for s in program.statements)


def loop_points(module: ModuleOp) -> int:
    """Iterations of the innermost loops of a loop-level module (constant bounds; others
    count 1): what interpreting it costs."""
    from xdsl.dialects import affine

    total = 0
    for loop in module.walk():
        if not isinstance(loop, affine.ForOp) or any(isinstance(o, affine.ForOp) for o in loop.body.walk()):
            continue
        points, op = 1, loop
        while op is not None:
            if isinstance(op, affine.ForOp):
                lower, upper = op.lowerBoundMap.data, op.upperBoundMap.data
                if not lower.num_dims + lower.num_symbols + upper.num_dims + upper.num_symbols:
                    span = min(upper.eval([], [])) - max(lower.eval([], []))
                    points *= max(0, -(-span // op.step.value.data))
            op = op.parent_op()
        total += points
    return total


def _shapes_note(program: Program, scale: float) -> str:
    shapes = ", ".join(f"{t.name}: {t.dtype}[{', '.join(map(str, t.shape))}]" for t in program.inputs)
    if scale >= 1.0:
        return f"shapes as written: {shapes}"
    return f"shapes scaled by {_fraction(scale)}: {shapes}"
