"""The command-line side of reproducers: writing one for a failure `einc` or `einc-opt`
reported, replaying one (`einc-opt --run-reproducer FILE`), and `einc reduce FILE`.

    einc compile p.ein --load-pass-plugin my.py --pipeline-hook loops=my-pass \
        --check-numerics --reproducer r.txt          # a wrong number found: r.txt written
    einc reduce r.txt -o small.txt                   # shrunk while it fails the same way
    einc-opt --run-reproducer small.txt              # does it still? (exit status 0: yes)

An internal error always writes one (`einc-crash-<hash>.txt`, in $EINC_REPRO_DIR or the
current directory, or the `--reproducer` file). Before a reproducer is written its failure is
replayed once, in this process, so that it names the step that failed (a crash's pass, found
by running it) exactly as a later replay will; when that replay does not show the failure
(an error in building or running the kernel, not in compiling it) the failure is written as
reported, and the file says so.
"""

from __future__ import annotations

import dataclasses
import re
import sys
import traceback
from collections.abc import Sequence
from pathlib import Path

from einc.errors import EincError, InternalCompilerError, SourceLocation, UsageError
from einc.tools.numerics.types import NumericsReport
from einc.tools.reduce.replay import crash_failure, error_failure, numerics_failure, replay
from einc.tools.reduce.reproducer import Failure, Plugin, Reproducer, same_way, written_name

_STAGES = {"schedule": "scheduled", "build": "source", "parse": "ein"}
"""An internal error's stage as the replay names it."""


def format_traceback(exc: BaseException) -> str:
    """The traceback of an internal error's cause, without xDSL's IR dumps (exception notes)."""
    while isinstance(exc, InternalCompilerError) and exc.__cause__ is not None:
        exc = exc.__cause__
    frames = "".join(traceback.format_tb(exc.__traceback__))
    only = "".join(traceback.format_exception_only(type(exc), exc))
    only = only.split("\n", 1)[0] + "\n" if getattr(exc, "__notes__", None) else only
    return f"Traceback (most recent call last):\n{frames}{only}"


def provisional_failure(exc: BaseException, stage: str | None = None) -> Failure:
    """A failure as the tool met it (before a replay names its step)."""
    if isinstance(exc, EincError):
        return error_failure(_STAGES.get(stage or "", stage), None, exc)
    ice_stage = exc.stage if isinstance(exc, InternalCompilerError) else stage
    return crash_failure(_STAGES.get(ice_stage or "", ice_stage), None, exc)


def settled(repro: Reproducer) -> Reproducer:
    """`repro` with the failure its replay shows, when that is the failure it records (then
    every field is the replay's, so a later replay compares equal); else as it is."""
    want = repro.failure
    try:
        got = replay(repro, fast=True).failure
    except Exception:  # noqa: BLE001 - a replay that cannot run: keep what was reported
        return repro
    if got is None or not same_way(got, dataclasses.replace(want, stage=got.stage if want.stage is None else want.stage),
                                   loose=False, stage=repro.mode == "compile"):  # fmt: skip
        return repro
    return repro.with_failure(dataclasses.replace(got, detail=got.detail or want.detail))


# ---- building reproducers ---------------------------------------------------------------------


def _schedule_text(path: str, text: str, target: str, schedule: str | None, use_records: bool,
                   db: str | None, known: str | None) -> str | None:  # fmt: skip
    """The schedule the compilation applied (`known`, else found again: the file's, a
    tuning record's, the target's default), or None (`none`, or a failure before it)."""
    from einc.compiler.driver import Compilation
    from einc.schedule.choice import ScheduleChoice

    if known is not None:
        return known
    if schedule is not None and schedule not in ScheduleChoice.WORDS:
        try:
            return Path(schedule).read_text()
        except (OSError, UnicodeDecodeError):
            return None
    choice = ScheduleChoice.read(schedule)  # BEST, DEFAULT or NONE: no file read
    if choice is ScheduleChoice.NONE:
        return None
    comp: Compilation | None = None
    try:
        comp = Compilation(text, path, target=target, schedule=choice, use_records=use_records, db=db)
        comp.run_until("scheduled")
    except Exception:  # noqa: BLE001 - whatever it applied before failing is what we want
        pass
    return comp.schedule_text if comp is not None else None


def compile_reproducer(
    path: str, target: str, failure: Failure, *, schedule: str | None = None, use_records: bool = True,
    db: str | None = None, hooks: Sequence[str] = (), plugins: Sequence[str] = (), seed: int = 0,
    shape_scale: float | None = 1.0, check_numerics: bool = False, command: str = "", trace: str = "",
    location: str = "", schedule_text: str | None = None, program: str | None = None,
) -> Reproducer:  # fmt: skip
    """A reproducer of `einc compile/run/check PATH -t TARGET` (their options as given)."""
    text = program if program is not None else Path(path).read_text()
    pairs = []
    for hook in hooks:
        stage, _, passes = hook.partition("=")
        pairs.append((stage.strip(), passes.strip()))
    schedule_used = _schedule_text(path, text, target, schedule, use_records, db, schedule_text)
    return Reproducer(
        "compile", path, text, failure, target=target, schedule=schedule_used, hooks=tuple(pairs),
        plugins=tuple(Plugin.read(p) for p in plugins), seed=seed, shape_scale=shape_scale,
        check_numerics=check_numerics, command=command, traceback=trace, location=location,
    )  # fmt: skip


def opt_reproducer(
    path: str, pipeline: str, failure: Failure, *, target: str | None = None, verify: bool = True,
    plugins: Sequence[str] = (), seed: int = 0, shape_scale: float | None = 1.0,
    check_numerics: bool = False, command: str = "", trace: str = "", location: str = "",
) -> Reproducer:  # fmt: skip
    """A reproducer of `einc-opt PATH -p PIPELINE [-t TARGET]`; a schedule file the pipeline
    names (`einc-apply-schedule{file=...}`) is carried too."""
    text = Path(path).read_text()
    schedule = None
    named = re.search(r"einc-apply-schedule\{[^}]*file\s*=\s*\"?([^\"\s,}]+)", pipeline)
    if named is not None:
        try:
            schedule = Path(named.group(1)).read_text()
        except (OSError, UnicodeDecodeError):
            schedule = None
    return Reproducer(
        "opt", path, text, failure, target=None if target in (None, "mlir") else target, schedule=schedule,
        pipeline=pipeline, verify=verify, plugins=tuple(Plugin.read(p) for p in plugins), seed=seed,
        shape_scale=shape_scale, check_numerics=check_numerics, command=command, traceback=trace, location=location,
    )  # fmt: skip


def report_failure(report: NumericsReport) -> Failure | None:
    """The failure of a `--check-numerics` report: its first bad step (a step whose pass
    raised is a crash, its step named; the replay fills in the exception)."""
    if report.first_bad is None:
        return None
    step = report.steps[report.first_bad]
    from einc.tools.reduce.replay import step_key

    check = step.check
    if check is not None and check.crashed and check.reason.startswith("the step raised "):
        words = check.reason.removeprefix("the step raised ")
        inner = re.search(r"\): (\w+): (.*)$", words) if words.startswith("PluginPassError") else None
        error, _, message = (f"{inner.group(1)}: {inner.group(2)}" if inner else words).partition(": ")
        return Failure("crash", step.stage, step_key(step.kind, step.name), error.strip(), message.strip())
    return numerics_failure(step)


def write(repro: Reproducer, path: str | None, tool: str) -> Path:
    """Write `repro` to `path` (an automatic name when None: einc.tools.reduce.reproducer.written_name)
    and say so on stderr; a UsageError when `path` cannot be written."""
    import tempfile

    if path is not None:
        try:
            out = repro.write(path)
        except OSError as err:
            raise UsageError(f"cannot write the reproducer: {err.strerror or err}", SourceLocation(path, 1, 1)) from None
    else:
        out = None
        for folder in (None, tempfile.gettempdir()):
            try:
                target = written_name(repro, folder)
                target.parent.mkdir(parents=True, exist_ok=True)
                out = repro.write(target)
                break
            except OSError:
                continue
        if out is None:
            raise OSError("no folder to write the reproducer in")
    print(f"{tool}: a reproducer is in {out} (replay: einc-opt --run-reproducer {out}; shrink: einc reduce {out})",
          file=sys.stderr)  # fmt: skip
    return out


# ---- replaying and reducing -------------------------------------------------------------------


def verdict(repro: Reproducer, got: Failure | None) -> tuple[bool, str]:
    """Whether `got` (a replay's) is the reproducer's failure, in words."""
    want = repro.failure
    stage = repro.mode == "compile"
    if got is None:
        return False, f"no longer fails (it reported: {want.describe()})"
    if same_way(got, want, loose=False, stage=stage):
        exact = got.signature() == want.signature() and (
            not want.detail or got.detail.rstrip() == want.detail.rstrip() or want.kind == "numerics"
        )
        how = "identically" if exact else "the same way"
        return True, f"still fails {how}: {got.describe()}"
    if same_way(got, want, loose=True, stage=stage):
        return True, f"still fails the same way (its message's numbers or names differ): {got.describe()}"
    return False, f"fails otherwise: {got.describe()}\n  (it reported: {want.describe()})"


def run_reproducer_command(path: str, tool: str = "einc-opt") -> int:
    """`einc-opt --run-reproducer FILE`: replay it (a numeric failure walked as
    `--check-numerics` walks, its report printed); exit status 0 when it fails the same way."""
    from einc.tools.numerics.command import emit

    repro = Reproducer.read(path)
    outcome = replay(repro)
    for note in outcome.notes:
        print(f"{tool}: {note}", file=sys.stderr)
    if outcome.report is not None:
        emit(outcome.report)
    ok, words = verdict(repro, outcome.failure)
    print(f"{tool}: {path} {words}")
    return 0 if ok else 1


def summary(repro: Reproducer) -> str:
    """A reproducer as text to read: the failure, the program, the schedule, the pipeline."""
    lines = [f"failure: {repro.failure.describe()}"]
    if repro.mode == "compile":
        lines.append(f"target: {repro.target}")
        lines += [f"hook: {stage}={passes}" for stage, passes in repro.hooks]
        if repro.target_pipeline is not None:
            lines.append(f"target pipeline: {repro.target_pipeline or '(none)'}")
    else:
        lines.append(f"pipeline: {repro.pipeline}")
    lines += ["program:", *(f"  {line}" for line in repro.program.rstrip().splitlines())]
    if repro.schedule is not None:
        from einc.tools.reduce.schedule_edits import schedule_ops

        lines += ["schedule ops:", *(f"  {op.text.strip()}" for op in schedule_ops(repro.schedule))]
    return "\n".join(lines) + "\n"


def reduced_name(path: str) -> str:
    p = Path(path)
    return str(p.with_name(f"{p.stem}.reduced{p.suffix or '.txt'}"))


def reduce_command(path: str, output: str | None, budget_s: float, jobs: int | None, quiet: bool = False,
                   timeout: float | None = None, cpu_time: bool = False) -> int:  # fmt: skip
    """`einc reduce FILE`: say whether it still fails the same way, shrink it (progress on
    stderr), print the reduced reproducer and write it (`-o`, default FILE.reduced.txt)."""
    from einc.tools.reduce.reducer import reduce
    from einc.tools.reduce.tester import Budget, cpu_clock

    budget = Budget(budget_s, cpu_clock) if cpu_time else Budget(budget_s)
    repro = Reproducer.read(path)
    first = replay(repro, fast=True)
    for note in first.notes:
        print(f"einc reduce: {note}", file=sys.stderr)
    ok, words = verdict(repro, first.failure)
    print(f"einc reduce: {path} {words}", file=sys.stderr)
    if not ok:
        return 1

    def progress(line: str) -> None:
        if not quiet:
            print(f"einc reduce: {line}", file=sys.stderr, flush=True)

    result = reduce(repro, budget, jobs=jobs, progress=progress, timeout=timeout)
    out = output or reduced_name(path)
    try:
        result.repro.write(out)
    except OSError as err:
        raise UsageError(f"cannot write the reduced reproducer: {err.strerror or err}", SourceLocation(out, 1, 1)) from None
    sys.stdout.write(summary(result.repro))
    kept = "kept" if result.kept else "NOT kept (see above)"
    print(f"einc reduce: wrote {out} ({result.tests} tests in {result.seconds:.1f} s; the failure is {kept})",
          file=sys.stderr)  # fmt: skip
    return 0 if result.kept else 1


# ---- from the tools' arguments ----------------------------------------------------------------


def for_einc(args: object, argv: Sequence[str], failure: Failure, *, trace: str = "", location: str = "",
             schedule_text: str | None = None, shape_scale: float | None = 1.0) -> Reproducer:  # fmt: skip
    """The reproducer of an `einc compile/run/check` command line (its parsed `args`)."""
    options = vars(args)
    return compile_reproducer(
        options["file"], options.get("target") or "c", failure, schedule=options.get("schedule"),
        use_records=not options.get("no_records", False), db=options.get("db"),
        hooks=options.get("pipeline_hook") or (), plugins=options.get("load_pass_plugin") or (),
        seed=options.get("seed") or 0, shape_scale=shape_scale, check_numerics=bool(options.get("check_numerics")),
        command=" ".join(["einc", *argv]), trace=trace, location=location, schedule_text=schedule_text,
    )  # fmt: skip


def for_einc_opt(args: object, argv: Sequence[str], failure: Failure, *, trace: str = "", location: str = "",
                 shape_scale: float | None = 1.0) -> Reproducer:  # fmt: skip
    """The reproducer of an `einc-opt` command line (its parsed `args`)."""
    from einc.passes.pipeline import strip_module_wrapper

    options = vars(args)
    pipeline = options.get("pass_pipeline") or options.get("passes") or ""
    return opt_reproducer(
        options["input_file"], strip_module_wrapper(str(pipeline)), failure, target=options.get("target"),
        verify=not options.get("disable_verify", False), plugins=options.get("load_pass_plugin") or (),
        seed=options.get("seed") or 0, shape_scale=shape_scale, check_numerics=bool(options.get("check_numerics")),
        command=" ".join(["einc-opt", *argv]), trace=trace, location=location,
    )  # fmt: skip


def write_for_error(tool: str, args: object, argv: Sequence[str], exc: BaseException, path: str | None,
                    context: dict[str, str] | None = None) -> Path | None:  # fmt: skip
    """Write the reproducer of the error or internal error `exc` a tool met (`path`, or an
    automatic name); its path, or None when none could be made (the tool reports `exc` anyway)."""
    context = context or {}
    failure = provisional_failure(exc, exc.stage if isinstance(exc, InternalCompilerError) else None)
    trace = format_traceback(exc) if not isinstance(exc, EincError) else ""
    location = context.get("location", exc.context.get("location", "") if isinstance(exc, InternalCompilerError) else "")
    try:
        if tool == "einc-opt":
            repro = for_einc_opt(args, argv, failure, trace=trace, location=location)
        else:
            known = exc.context.get("schedule") if isinstance(exc, InternalCompilerError) else None
            repro = for_einc(args, argv, failure, trace=trace, location=location, schedule_text=known)
        repro = settled(repro)
        return write(repro, path, tool)
    except UsageError:
        raise
    except Exception:  # noqa: BLE001 - no reproducer: the caller falls back to the plain report
        return None


def write_for_report(tool: str, args: object, argv: Sequence[str], report: NumericsReport, path: str,
                     schedule_text: str | None = None) -> Path | None:  # fmt: skip
    """Write the reproducer of a failed `--check-numerics` walk (`report`) to `path`."""
    failure = report_failure(report)
    if failure is None:
        return None
    if tool == "einc-opt":
        repro = for_einc_opt(args, argv, failure, shape_scale=report.shape_scale)
    else:
        repro = for_einc(args, argv, failure, shape_scale=report.shape_scale, schedule_text=schedule_text)
    if failure.kind != "numerics":
        repro = settled(repro)
    return write(repro, path, tool)


def write_for_run(args: object, argv: Sequence[str], seed: int, mismatch: str, path: str) -> Path:
    """Write the reproducer of `einc run`'s mismatch: a numeric failure at a step the replay
    finds (`--check-numerics`' walk, at its default scale, on the same seed); when the walk
    does not find one, the mismatch as reported, at no step."""
    failure = Failure("numerics", None, None, "wrong numbers", mismatch)
    from einc.tools.reduce.replay import effective_scale

    repro = dataclasses.replace(for_einc(args, argv, failure, shape_scale=None), seed=seed, check_numerics=True)
    repro = dataclasses.replace(repro, shape_scale=effective_scale(repro))
    return write(settled(repro), path, "einc")
