"""The compiler driver: an ordered table of named stages, each one printable on its own.

    parse      .ein / Antares text -> checked program (frontend)
    ein        -> `ein` dialect module (einsum meaning)
    loops      -> affine/scf loops on memrefs (`convert-ein-to-affine`)
    scheduled  -> the loops with a schedule applied (identity without a schedule)
    target     -> the target's legalized IR (its own pass pipeline)
    source     -> the target's source text (its printer)

`einc compile --dump-after=STAGE` prints the program after a stage; `lower_to_stage` returns it.
"""

from __future__ import annotations

import gc
import threading
import time
from collections.abc import Callable, Generator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, TypeVar, cast

import numpy as np
from xdsl.dialects.builtin import ModuleOp
from xdsl.passes import ModulePass

from einc.dialects.context import make_context
from einc.errors import (
    EincError,
    InternalCompilerError,
    RuntimeMissingError,
    SourceLocation,
    TargetError,
    UsageError,
)
from einc.compiler import registry
from einc.compiler.registry import load_pass_plugin, run_pipeline
from einc.passes.pipeline import LOOPS_PIPELINE, did_you_mean, parse_passes
from einc.schedule.checks import check_schedule, check_scheduled
from einc.ir.depth import allow_deep_nests
from einc.schedule.choice import Kind, ScheduleChoice
from einc.schedule.script import Schedule

from einc.targets.descriptions import KernelError
from einc.compiler.kernel import Kernel, MissingRuntime

if TYPE_CHECKING:
    from einc.compiler.records import Record
    from einc.compiler.tasks import ProgramTask
    from einc.targets.clike import CLikeTarget

Runner = Callable[[Mapping[str, np.ndarray], Mapping[str, np.ndarray]], object]
StageResult = ModuleOp | str
"""What a stage gives: a module, or the source text (`source`)."""
T = TypeVar("T")
R = TypeVar("R")

STAGES = ("ein", "loops", "scheduled", "target", "source")
HOOK_STAGES = ("ein", "loops", "scheduled", "target")
"""The stages that take extra passes at their end (`extra_passes`, `--pipeline-hook`)."""


def check_extra_passes(extra: object) -> dict[str, list[tuple[ModulePass, ...]]]:
    """`extra_passes` parsed: stage -> the passes of each pipeline text. An unknown stage, a
    pipeline given as one string instead of a list, an unknown pass or a bad option: a
    UsageError (in the text `extra_passes['loops']`)."""
    where = SourceLocation("<extra_passes argument>", 1, 1)
    if not isinstance(extra, Mapping):
        raise UsageError(f"extra_passes= maps a stage name to pipeline texts, not {type(extra).__name__}", where)
    hooks: dict[str, list[tuple[ModulePass, ...]]] = {}
    for stage, texts in cast("Mapping[object, object]", extra).items():
        if not isinstance(stage, str) or stage not in HOOK_STAGES:
            raise UsageError(
                f"extra_passes: unknown stage {stage!r}{did_you_mean(str(stage), HOOK_STAGES)} "
                f"(stages: {', '.join(HOOK_STAGES)})", where,
            )  # fmt: skip
        if isinstance(texts, str) or not isinstance(texts, Sequence):
            raise UsageError(f"extra_passes[{stage!r}] is a list of pipeline texts, e.g. [{texts!r}]", where)
        pipelines = cast("Sequence[object]", texts)
        hooks[stage] = [parse_passes(str(text), registry.get_all_passes(), f"extra_passes[{stage!r}]") for text in pipelines]
    return hooks

YOUNG_COLLECTION_THRESHOLD = 200_000
"""Allocations between two collections of Python's youngest generation while a stage runs
(CPython's default: 700). A stage builds IR that lives on, a dozen container objects per
op: with the default, the collector scans the growing module's new objects over and over (a
third of the compile time of a 2,000-statement program), and with 50,000 still promotes
enough of them for the middle generation's collections to rescan them within the stage (its
cost per statement growing with the program). Garbage is still collected, less often; the
peak memory of a 2,000-statement compile is the same 217 MB (benchmarks/compile_scaling.py)."""

_collections_lock = threading.Lock()
_collections_users = 0
_collections_saved: tuple[int, int, int] | None = None


@contextmanager
def fewer_collections() -> Generator[None, None, None]:
    """Python's cyclic garbage collector runs less often inside (its youngest generation's
    threshold raised to YOUNG_COLLECTION_THRESHOLD, never lowered), and as before after the
    last of the threads inside leaves."""
    global _collections_users, _collections_saved
    with _collections_lock:
        if _collections_users == 0:
            saved = gc.get_threshold()
            if saved[0] and saved[0] < YOUNG_COLLECTION_THRESHOLD:
                _collections_saved = saved
                gc.set_threshold(YOUNG_COLLECTION_THRESHOLD, *saved[1:])
        _collections_users += 1
    try:
        yield
    finally:
        with _collections_lock:
            _collections_users -= 1
            if _collections_users == 0 and _collections_saved is not None:
                gc.set_threshold(*_collections_saved)
                _collections_saved = None


def resolve_target(name: str, loc: SourceLocation | None = None) -> type[CLikeTarget]:
    """The target class registered under `name`, or a TargetError listing the known ones."""
    from einc.targets import get_target

    return get_target(name, loc)


@dataclass
class Compilation:
    """One program on its way through the stages; each stage's result is kept."""

    source: str
    filename: str = "<string>"
    input_dict: Mapping[str, Mapping[str, object]] | None = None
    extra_outputs: Sequence[str] | None = None
    target: str = "c"
    schedule: ScheduleChoice | Schedule | str | None = None
    """The schedule= argument as given (`choice` is what it means)."""
    cflags: Sequence[str] = ()
    results: dict[str, StageResult] = field(default_factory=dict[str, StageResult])
    seconds: dict[str, float] = field(default_factory=dict[str, float])
    use_records: bool = True
    """Without a schedule, apply the best tuning record for this program and device, if any."""
    db: str | Path | None = None
    """The tuning database (default: `einc.compiler.records.default_db_path()`)."""
    extra_passes: Mapping[str, Sequence[str]] = field(default_factory=dict[str, Sequence[str]])
    """Stage name (ein, loops, scheduled, target) -> pass pipeline texts run at the end of
    that stage, after its own passes (plugin passes included: einc.compiler.registry)."""
    progress: Callable[[str, float], None] | None = None
    """Called after each stage with its name and its seconds (`einc compile --progress`)."""
    model: str | None = None
    """A device of the performance model (`h100`, a JSON file): on a device target, where no
    record measured here applies, the best record `einc tune --model` made for it is used
    (default: $EINC_MODEL_DEVICE, else the GPU here when the model knows it)."""

    def __post_init__(self) -> None:
        ScheduleChoice.of(self.schedule)  # a schedule= of the wrong type: refused before any work
        allow_deep_nests()  # a loop per axis: walks as deep as the program's rank
        self.hooks = check_extra_passes(self.extra_passes)
        """`extra_passes` parsed: stage -> the passes of each of its pipeline texts."""
        self.ctx = make_context()
        self.target_obj = resolve_target(self.target, SourceLocation(self.filename, 1, 1))
        self._schedule_text: str | None = None
        self._text_of: Schedule | None = None  # the schedule whose text it is, printed when asked
        self.record: Record | None = None
        """The tuning record whose schedule was applied, if one was."""
        self.record_db: Path | None = None
        self.task_count = 0
        """The program's distinct tasks, where their records were looked up."""
        self.task_records: list[tuple[ProgramTask, Record]] = []
        """The tuning records applied to the program's tasks (a whole program tuned task by
        task, `einc.compiler.tasks`), with their tasks; [] when none was."""
        self.applied_schedule: Schedule | None = None
        """The schedule applied (the target's default one included), once known."""
        self._table: list[tuple[str, Callable[[StageResult | None], StageResult]]] = [
            ("ein", self._ein),
            ("loops", self._loops),
            ("scheduled", self._scheduled),
            ("target", self._target),
            ("source", self._source),
        ]

    @property
    def schedule_text(self) -> str | None:
        """The text of the schedule applied (the target's default one included), once known
        (a schedule built in memory is printed when first asked: a default schedule has as
        many ops as the program has statements)."""
        if self._schedule_text is None and self._text_of is not None:
            self._schedule_text = str(self._text_of)
        return self._schedule_text

    @schedule_text.setter
    def schedule_text(self, text: str | None) -> None:
        self._schedule_text, self._text_of = text, None

    @property
    def choice(self) -> ScheduleChoice:
        """Which schedule to apply: a record (BEST), the default one, none, or the one given
        (read when the stage runs: `schedule` may be set after the Compilation is made)."""
        return ScheduleChoice.of(self.schedule)

    # ---- stages ------------------------------------------------------------------------------
    def _ein(self, _: StageResult | None) -> ModuleOp:
        from einc.frontend import build_module, parse_program

        # Only the usual forms are converted; anything else reaches the checker as it is,
        # which refuses it with a located error. A single string is one extra output's name.
        input_dict = dict(self.input_dict) if isinstance(self.input_dict, Mapping) else self.input_dict
        extra_outputs = self.extra_outputs
        if isinstance(extra_outputs, str):
            extra_outputs = [extra_outputs]
        elif isinstance(extra_outputs, list | tuple):
            extra_outputs = list(extra_outputs)
        self.program = parse_program(
            self.source, filename=self.filename, input_dict=input_dict, extra_outputs=extra_outputs
        )
        return build_module(self.program)

    def _loops(self, previous: StageResult | None) -> ModuleOp:
        module = _module(previous).clone()
        run_pipeline(self.ctx, module, LOOPS_PIPELINE)
        return module

    def _scheduled(self, previous: StageResult | None) -> ModuleOp:
        """The best tuning record's schedule (BEST, with `use_records`), else the choice's (the
        one given, the target's default one, or none), applied to a clone of the loops."""
        module = _module(previous)
        if self.choice.takes_records and self.use_records:
            scheduled = self._apply_record(module)
            if scheduled is not None:
                return scheduled
            default = self._apply(self.choice.resolve(self.target_obj, module), module)
            return self._apply_task_records(module, default)
        return self._apply(self.choice.resolve(self.target_obj, module), module)

    def _apply(self, schedule: Schedule | None, module: ModuleOp) -> ModuleOp:
        if schedule is None:
            return module
        self._schedule_text, self._text_of = schedule.source, schedule
        self.applied_schedule = schedule
        check_schedule(schedule, self.target_obj)
        # a default schedule: applied as it was built
        scheduled = schedule.take_applied(module, registry.get_all_passes())
        check_scheduled(schedule, scheduled, self.target_obj)
        return scheduled

    def _apply_record(self, module: ModuleOp) -> ModuleOp | None:
        """The loops scheduled by the best tuning record, or None (no record, or one whose
        schedule this einc refuses: a warning, and the target's default schedule is used)."""
        from einc.compiler.records import find_record, warn

        cflags = () if isinstance(self.cflags, str) else self.cflags  # a str is refused when building
        found = find_record(str(self.module("ein")), self.target_obj, self.db, cflags, self.model)
        if found is None:
            return None
        record, path = found
        try:
            scheduled = self._apply(Schedule.parse(record.schedule, f"<tuning record {record.id}>"), module)
        except EincError as err:
            self.schedule_text = None
            warn(f"tuning record {record.id} in {path} no longer applies, using the default schedule:\n{err}")
            return None
        self.record, self.record_db = record, path
        return scheduled

    def _apply_task_records(self, module: ModuleOp, default: ModuleOp) -> ModuleOp:
        """The loops scheduled by the tuning records of the program's tasks (the kernels of
        `default`, the loops with the target's default schedule: einc.compiler.tasks), each
        task without a record by its own default schedule; `default` when no task has a
        record (or the program is one task), or when the merged schedule does not apply (a
        warning)."""
        from einc.compiler.records import default_db_path, find_record, program_key, warn
        from einc.compiler.tasks import merge_schedules, split_program

        path = Path(self.db) if self.db is not None else default_db_path()
        if len(self.program.statements) < 2 or not path.exists():
            return default
        tasks = split_program(self.program, default)
        if len(tasks) < 2:
            return default
        cflags = () if isinstance(self.cflags, str) else self.cflags
        found: list[tuple[ProgramTask, Record]] = []
        parts: list[tuple[ProgramTask, str]] = []
        keys: list[str] = []
        looked: dict[str, tuple[str, Record | None, Compilation]] = {}  # a task's program -> what it has
        for task in tasks:
            if task.body not in looked:  # identical kernels (a chain's steps) are looked up once
                sub = Compilation(task.source, f"<task {task.index}>", target=self.target, cflags=self.cflags,
                                  schedule=ScheduleChoice.DEFAULT, use_records=False)  # fmt: skip
                normalized = str(sub.module("ein"))
                hit = find_record(normalized, self.target_obj, path, cflags, self.model)
                looked[task.body] = (program_key(normalized), hit[0] if hit is not None else None, sub)
            key, record, sub = looked[task.body]
            keys.append(key)
            if record is not None:
                found.append((task, record))
                parts.append((task, record.schedule))
            else:
                parts.append((task, ""))
        if not found:
            return default
        for i, (task, text) in enumerate(parts):
            if not text:  # a task without a record: its own default schedule
                sub = looked[task.body][2]
                sub.run_until("scheduled")
                parts[i] = (task, sub.schedule_text or "")
        kept = self._schedule_text, self._text_of, self.applied_schedule
        try:
            scheduled = self._apply(merge_schedules(module, parts), module)
        except EincError as err:
            self._schedule_text, self._text_of, self.applied_schedule = kept
            ids = ", ".join(str(r.id) for _, r in found)
            warn(f"tuning records {ids} of this program's tasks in {path} do not apply together, using the "
                 f"default schedule:\n{err}")  # fmt: skip
            return default
        self.task_records, self.record_db = found, path
        self.task_count = len(set(keys))
        return scheduled

    def _target(self, previous: StageResult | None) -> ModuleOp:
        from einc.frontend.target_check import check_program_dtypes

        check_program_dtypes(self.target_obj.limits, self.program)
        module = _module(previous).clone()
        try:
            run_pipeline(self.ctx, module, self.target_obj.pipeline, target=self.target_obj)
        except KernelError as err:
            raise self._at_statement(err) from None
        return module

    def _source(self, previous: StageResult | None) -> str:
        try:
            return self.target_obj.emit(_module(previous))
        except KernelError as err:
            raise self._at_statement(err) from None

    def sources(self) -> dict[str, str]:
        """The texts errors' locations point into: the program, the schedule (for the caret)."""
        given = cast(object, self.source)  # einc.compile may be handed anything: the frontend refuses it
        found = {self.filename: given} if isinstance(given, str) else {}
        schedule = self.applied_schedule
        if schedule is not None and schedule.source is not None:
            found.setdefault(schedule.filename, schedule.source)
        return found

    def _at_statement(self, err: KernelError) -> TargetError:
        """A kernel's refusal at its location (the statement it computes, a note at each
        schedule op that made its loops), else at the output of the statement writing the
        kernel's tensor."""
        from einc.frontend.diagnostics import SourceText

        if err.loc is not None and err.loc.file != "<target>":  # located at the kernel's op
            return TargetError(err.message, err.loc, err.notes).with_sources(self.sources())
        for statement in self.program.statements:
            if statement.output.name == err.tensor:
                text = SourceText(self.program.source, self.program.filename)
                return TargetError(err.message, text.location(statement.syntax.output_span))
        return err

    # ---- running -----------------------------------------------------------------------------
    def run_until(self, stage: str) -> StageResult:
        """Run the stages up to and including `stage` (those already run are reused)."""
        if stage not in STAGES:
            raise ValueError(f"unknown stage {stage!r}; stages: {', '.join(STAGES)}")
        value: StageResult | None = None
        for name, fn in self._table:
            if name in self.results:
                value = self.results[name]
            else:
                start = time.perf_counter()
                with fewer_collections():
                    value = self._guarded(name, fn, value)
                    if name in self.hooks:
                        value = self._guarded(name, self._hooked(name), value)
                self.seconds[name] = time.perf_counter() - start
                self.results[name] = value
                if self.progress is not None:
                    self.progress(name, self.seconds[name])
            if name == stage:
                assert value is not None
                return value
        raise AssertionError(stage)

    def _hooked(self, stage: str) -> Callable[[StageResult], ModuleOp]:
        """The stage's extra passes (`extra_passes[stage]`), run on a clone of its result."""

        def run(value: StageResult) -> ModuleOp:
            from xdsl.passes import PassPipeline

            module = _module(value).clone()
            for passes in self.hooks[stage]:
                PassPipeline(passes).apply(self.ctx, module)
            return module

        return run

    def module(self, stage: str) -> ModuleOp:
        """The module after `stage` (any stage but `source`)."""
        return _module(self.run_until(stage))

    def source_text(self) -> str:
        """The target's source text (the `source` stage)."""
        text = self.run_until("source")
        assert isinstance(text, str)
        return text

    def _guarded(self, stage: str, fn: Callable[[T], R], value: T) -> R:
        """`fn(value)`; an exception that is not an EincError is a bug in einc: raised as an
        InternalCompilerError naming the stage, with what reproduces it."""
        try:
            return fn(value)
        except EincError as err:
            raise err.with_sources(self.sources())  # an op's location has no text for the caret
        except Exception as exc:  # noqa: BLE001 - the boundary of a stage
            context = self.reproducer_context()
            pipeline = {"loops": LOOPS_PIPELINE, "target": self.target_obj.pipeline}.get(stage)
            if pipeline is not None:
                context["pipeline"] = pipeline
            if stage in self.hooks:
                context["extra passes"] = ",".join(self.extra_passes[stage])
            raise InternalCompilerError.wrap(exc, stage, **context)

    def reproducer_context(self) -> dict[str, str]:
        """What reproduces this compilation: the program, its inputs, the target, the schedule."""
        given = cast(object, self.source)
        context = {"program": given if isinstance(given, str) else repr(given),
                   "filename": self.filename, "target": self.target}  # fmt: skip
        if self.input_dict is not None:
            context["input_dict"] = repr(self.input_dict)
        if self.extra_outputs is not None:
            context["extra_outputs"] = repr(self.extra_outputs)
        if self.schedule_text is not None:
            context["schedule"] = self.schedule_text
        elif self.choice.kind is not Kind.BEST:
            context["schedule"] = str(self.choice)
        return context

    def kernel(self, *, debug: bool | None = None, allow_copy: bool = False) -> Kernel:
        """The compiled kernel (see einc.compiler.kernel); a target whose runtime is missing
        here gives a kernel that only raises, when called, what is missing."""
        source = self.source_text()
        start = time.perf_counter()
        if isinstance(self.cflags, str):
            raise TargetError(
                f"cflags is a list of flags, e.g. [{self.cflags!r}], not a string",
                SourceLocation(self.filename, 1, 1),
            )
        if self.cflags and not self.target_obj.takes_cflags:
            raise TargetError(
                f"cflags apply to the C target only, not '{self.target}'", SourceLocation(self.filename, 1, 1)
            )
        flags = {"cflags": tuple(self.cflags)} if self.cflags else {}
        runner: Runner | MissingRuntime
        try:
            runner = self._guarded(
                "build", lambda s: self.target_obj.build(s, self.module("target"), **flags), source
            )
        except RuntimeMissingError as err:  # the source is still wanted: calling it says what is missing
            runner = MissingRuntime(self.target, err.message)
        self.seconds["build"] = time.perf_counter() - start
        if self.progress is not None:
            self.progress("build", self.seconds["build"])
        return Kernel(source=source, program=self.program, runner=runner, target=self.target, record=self.record,
                      manifest=self.target_obj.manifest(self.module("target")),
                      compile_check=self.target_obj.compile_check,
                      debug=debug, allow_copy=allow_copy, task_records=[r for _, r in self.task_records],
                      lowered=self.module("target") if self.target_obj.limits is not None else None)  # fmt: skip


def _module(result: StageResult | None) -> ModuleOp:
    """A module stage's result (the stages before `source` give modules)."""
    assert isinstance(result, ModuleOp), type(result)
    return result


def compile(
    ir: str,
    input_dict: Mapping[str, Mapping[str, object]] | None = None,
    target: str = "c",
    extra_outputs: Sequence[str] | None = None,
    schedule: ScheduleChoice | Schedule | str | None = None,
    filename: str = "<string>",
    cflags: Sequence[str] = (),
    use_records: bool = True,
    db: str | Path | None = None,
    extra_passes: Mapping[str, Sequence[str]] | None = None,
    pass_plugins: Sequence[str] = (),
    debug: bool | None = None,
    allow_copy: bool = False,
    model: str | None = None,
) -> Kernel:
    """Compile Antares IR (with `input_dict`, Antares' form) or a `.ein` program text.
    `cflags`: extra flags for the C compiler (C target only; `$EINC_CFLAGS` adds more).
    Without a schedule, the best tuning record for the program on this device is applied
    (`Kernel.record`); `schedule="default"` or `use_records=False` keep the target's default.
    `db`: the tuning database (default `$EINC_TUNING_DB`, else ~/.cache/einc/tuning.db).
    `pass_plugins`: Python files whose ModulePass subclasses are registered (einc.compiler.registry);
    `extra_passes`: stage (ein, loops, scheduled, target) -> pipeline texts run at its end.
    `debug`: poison outputs before every run (default: `$EINC_DEBUG`); `allow_copy`: copy
    non-contiguous arrays instead of refusing them. `model`: a device of the performance model
    whose modelled records (`einc tune --model`) stand in where no measured one applies (device
    targets; default $EINC_MODEL_DEVICE, else the GPU here if the model knows it). A target whose runtime is missing here
    (no GPU driver, ...) still compiles: `.source`, `.manifest`, `.check()` work and only a
    call raises a ToolchainError (einc.compiler.kernel)."""
    for plugin in [pass_plugins] if isinstance(pass_plugins, str) else pass_plugins:
        load_pass_plugin(plugin, SourceLocation("<pass_plugins argument>", 1, 1))
    comp = Compilation(ir, filename, input_dict, extra_outputs, target, schedule, cflags=cflags,
                       use_records=use_records, db=db, extra_passes=extra_passes or {}, model=model)  # fmt: skip
    return comp.kernel(debug=debug, allow_copy=allow_copy)


def lower_to_stage(
    ir: str,
    input_dict: Mapping[str, Mapping[str, object]] | None = None,
    extra_outputs: Sequence[str] | None = None,
    stage: str = "loops",
    target: str = "c",
    filename: str = "<string>",
    schedule: ScheduleChoice | Schedule | str | None = None,
) -> StageResult:
    """The program after `stage`: an xDSL module, or the source text for `source`."""
    return Compilation(ir, filename, input_dict, extra_outputs, target, schedule).run_until(stage)


# ---- reading a program file ------------------------------------------------------------------------
def read_program(path: str) -> str:
    try:
        return Path(path).read_text()
    except (OSError, UnicodeDecodeError) as err:
        raise EincError(f"cannot read program: {err}", SourceLocation(path, 1, 1)) from None
