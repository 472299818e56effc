"""`einc tune`: the command-line job (argument parsing is in einc.cli)."""

from __future__ import annotations

import re
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from einc.errors import RuntimeMissingError, SourceLocation, UsageError

if TYPE_CHECKING:
    from einc.compiler.tasks import ProgramTask
    from einc.perfmodel.devices import Device
    from einc.tune.cluster import RunnerSpec
    from einc.tune.program import ProgramResult
    from einc.tune.tuner import TuneResult
    from einc.tune.types import TuneTask

POLICIES = ("bayes", "random")


def parse_duration(text: str, loc: SourceLocation) -> float:
    """`120`, `120s`, `2m`, `1.5h` -> seconds (UsageError at the option otherwise)."""
    match = re.fullmatch(r"\s*(\d+(?:\.\d*)?)\s*(s|m|h)?\s*", text)
    if match is None or float(match.group(1)) <= 0:
        raise UsageError(f"--time-budget takes a positive duration such as 120s, 2m or 1h, not '{text}'", loc)
    return float(match.group(1)) * {"s": 1, "m": 60, "h": 3600}[match.group(2) or "s"]


def tune_file_command(
    path: str,
    target: str,
    trials: int,
    db_path: str | None,
    output: str | None = None,
    time_budget_s: float | None = None,
    workers: int | None = None,
    threads: int | None = None,
    policy: str = "bayes",
    resume: bool = False,
    seed: int = 0,
    report: str | None = None,
    progress: bool = True,
    runner: str = "local",
    runner_at: SourceLocation | None = None,
    early_stop: float | None = None,
    early_stop_at: SourceLocation | None = None,
    transfer: bool = True,
    model: str | None = None,
    model_at: SourceLocation | None = None,
) -> TuneResult | ProgramResult:
    from contextlib import ExitStack

    from einc.tune.cluster import make_runner, parse_runner
    from einc.tune.measure import LocalRunner, check_early_stop
    from einc.tune.types import EARLY_STOP
    from einc.tune.records import RecordDB
    from einc.compiler.records import default_db_path
    from einc.tune.tuner import tune
    from einc.tune.types import TuneTask
    from einc.targets import get_target

    target_class = get_target(target, SourceLocation(path, 1, 1))  # an unknown target before any work
    spec = parse_runner(runner, runner_at)
    device = None
    if model is not None:  # an unknown device, or one for a CPU target, before any work
        from einc.perfmodel import get_device

        device = get_device(model, model_at)
        if target_class.limits is None:
            raise UsageError(f"--model ranks device kernels by the performance model; {target} kernels are "
                             "measured here (tune without --model)", model_at)  # fmt: skip
        if spec.dask:
            raise UsageError("--model needs no device to measure on: it models on this machine (no --runner)",
                             runner_at)  # fmt: skip
    early_stop = EARLY_STOP if early_stop is None else early_stop
    if why := check_early_stop(early_stop):
        raise UsageError(f"--early-stop: {why}", early_stop_at)
    task = TuneTask.from_file(path, target)
    # A program error, or a target that cannot run here (no toolchain or device: HIP, CUDA
    # without a GPU), before any search: the default kernel is built and loaded once.
    kernel = task.compilation(None).kernel()
    if kernel.unavailable is not None and device is None:  # compiled (source, manifest), but nothing runs it here
        why = kernel.unavailable
        why = why if "cannot run here" in why else f"{target} kernels cannot run here: {why}"
        raise RuntimeMissingError(f"{why}; nothing to time, so nothing to tune (--model DEVICE ranks candidates "
                                  "by the performance model instead)", SourceLocation(path, 1, 1))  # fmt: skip
    db_file = Path(db_path) if db_path else default_db_path()
    from einc.tune.program import split_tasks

    split = split_tasks(task)
    if len(split) > 1:
        if resume or report is not None:
            raise UsageError(f"{'--resume' if resume else '--report'} tunes one kernel; {path} has "
                             f"{sum(len(k) for _, k in split)} kernels, tuned as tasks (every trial of a task, "
                             "earlier ones too, counts in its final rounds)")  # fmt: skip
        return tune_program_command(task, split, db_file, db_path, trials, output, time_budget_s, workers, threads,
                                    policy, seed, progress, spec, runner_at, early_stop, transfer, device)  # fmt: skip
    with RecordDB(db_file) as db, ExitStack() as stack:
        db.require_writable("record tuning results in")  # before any search: no result is lost
        cluster = None
        if spec.dask:  # reached, with a worker of this device, before any search; shared by --report's run
            template = LocalRunner(threads=threads, seed=seed)
            cluster = stack.enter_context(make_runner(spec, workers=workers, template=template, where=runner_at))
            cluster.start(task)
            print(f"einc: measuring on {cluster.name}: {cluster.parallelism} worker"
                  f"{'s' if cluster.parallelism > 1 else ''} of this device", file=sys.stderr)  # fmt: skip

        def run(policy: str, resume: bool = False, decide: bool = True) -> TuneResult:
            return tune(task, policy=policy, resume=resume, trials=trials, time_budget_s=time_budget_s,
                        workers=None if cluster else workers, threads=threads, db=db, seed=seed, progress=progress,
                        decide_best=decide, builder=cluster, runner=cluster, early_stop=early_stop,
                        transfer=transfer, model=device)  # fmt: skip

        result = run(policy, resume)
        print(result.summary())
        results = {policy: result}
        if report is not None and result.stopped != "interrupted":
            other = "random" if policy == "bayes" else "bayes"
            print(f"einc: the same budget with {other} search, for the report's comparison (its trials are "
                  f"recorded; the best stays the one {policy} search decided)", file=sys.stderr)  # fmt: skip
            results[other] = run(other, decide=False)
            print(results[other].summary())
    if result.best is not None:
        text = result.best.candidate.schedule
        which = "the default schedule, kept," if result.kept_default else "the best schedule"
        if output:
            try:
                Path(output).write_text(text if text.endswith("\n") else text + "\n")
            except OSError as err:
                raise UsageError(f"cannot write the schedule: {err.strerror or err}", SourceLocation(output, 1, 1)) from None
            print(f"einc: {which} is in {output}")
        else:
            print(text)
        print(f"einc: records in {db_file}; `einc compile {path} --target {target}"
              + (f" --db {db_path}" if db_path else "") + "` uses the best")  # fmt: skip
    if report is not None and len(results) > 1:
        from einc.tune.report import plot_convergence

        plot_convergence(results, report, title=f"{Path(path).stem} on {target}")
        print(f"einc: convergence plot in {report}")
    return result


def tune_program_command(
    task: TuneTask, split: list[tuple[TuneTask, list[ProgramTask]]], db_file: Path, db_path: str | None, trials: int,
    output: str | None, time_budget_s: float | None, workers: int | None, threads: int | None, policy: str,
    seed: int, progress: bool, spec: RunnerSpec, runner_at: SourceLocation | None, early_stop: float,
    transfer: bool = True, model: Device | None = None,
) -> ProgramResult:
    """`einc tune` of a program of several kernels: its tasks tuned by the gradient task
    scheduler (einc.tune.program), the per-task table and the whole program before and after."""
    import os
    from contextlib import ExitStack

    from einc.tune.cluster import make_runner
    from einc.tune.measure import LocalBuilder, LocalRunner
    from einc.tune.program import tune_program
    from einc.tune.records import RecordDB

    kernels = sum(len(k) for _, k in split)
    print(f"einc: {task.filename}: {kernels} kernels, {len(split)} distinct tasks; {trials} trials spread over them "
          "by the gradient task scheduler", file=sys.stderr)  # fmt: skip
    context = None
    with RecordDB(db_file) as db, ExitStack() as stack:
        db.require_writable("record tuning results in")  # before any search: no result is lost
        if model is not None:
            import functools

            from einc.compiler.records import model_context
            from einc.targets import get_target
            from einc.tune.modelled import ModelRunner, model_candidate

            builder = stack.enter_context(LocalBuilder(workers=workers or min(4, os.cpu_count() or 1),
                                                       job=functools.partial(model_candidate, device=model)))  # fmt: skip
            runner = ModelRunner(model, parallelism=builder.workers)
            context = model_context(get_target(task.target), model)
        elif spec.dask:
            template = LocalRunner(threads=threads, seed=seed)
            cluster = stack.enter_context(make_runner(spec, workers=workers, template=template, where=runner_at))
            cluster.start(split[0][0])
            builder, runner = cluster, cluster
        else:
            builder = stack.enter_context(LocalBuilder(workers=workers or min(4, os.cpu_count() or 1)))
            runner = stack.enter_context(LocalRunner(threads=threads, seed=seed))
        result = tune_program(task, trials, builder, runner, db, policy=policy, seed=seed, progress=progress,
                              early_stop=early_stop, split=split, time_budget_s=time_budget_s,
                              transfer=transfer, device=context)  # fmt: skip
    print(result.summary())
    if result.tuned_schedule and output:
        try:
            Path(output).write_text(result.tuned_schedule)
        except OSError as err:
            raise UsageError(f"cannot write the schedule: {err.strerror or err}", SourceLocation(output, 1, 1)) from None
        print(f"einc: the whole program's schedule (the tasks' records merged) is in {output}")
    print(f"einc: records in {db_file}, one task each (`einc records list`); `einc compile {task.filename} "
          f"--target {task.target}" + (f" --db {db_path}" if db_path else "") + "` uses them")  # fmt: skip
    return result
