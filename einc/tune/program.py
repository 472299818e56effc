"""Tuning a whole program: its kernels as tasks (einc.compiler.tasks; identical tasks tuned
once), trials spread over them in rounds by the gradient task scheduler (einc.tune.scheduler),
then each task's best decided in its final rounds and recorded under the task's own key, and
the whole program measured with the target's default schedule and with the tasks' records.

    result = tune_program(TuneTask.from_file("examples/mnist.ein"), trials=64, db=RecordDB(path))
    print(result.table())          # per task: trials, default, best, share of the total
    result.before_s, result.after_s    # the whole program, default schedule vs the records

Every trial is recorded as it arrives (`tune` records each one): a killed tuner loses only the
candidate in flight; Ctrl-C stops after it, decides nothing, and keeps every record.
"""

from __future__ import annotations

import math
import statistics
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from einc.compiler.tasks import ProgramTask, split_program
from einc.schedule.choice import ScheduleChoice
from einc.tune.scheduler import GradientScheduler, TaskState
from einc.tune.types import EARLY_STOP, Candidate, MeasureResult, Point, Status, TuneTask

if TYPE_CHECKING:
    from einc.compiler.records import RecordContext
    from einc.tune.measure import Builder, Runner
    from einc.tune.records import RecordDB
    from einc.tune.search import SearchPolicy
    from einc.tune.space import SearchSpace
    from einc.tune.tuner import Trial, TuneResult

E2E_ROUNDS = 5
"""Rounds of the whole-program comparison: the default schedule and the tuned one, in turn."""


@dataclass
class TaskEntry:
    """One distinct task: the kernels of the program it stands for, and its search."""

    task: TuneTask
    kernels: list[ProgramTask]
    space: SearchSpace
    policy: SearchPolicy
    state: TaskState
    searched: list[TuneResult] = field(default_factory=list["TuneResult"])
    decided: TuneResult | None = None

    @property
    def name(self) -> str:
        return "; ".join(k.describe() for k in self.kernels)

    @property
    def default_s(self) -> float:
        d = self.decided.default if self.decided is not None else None
        if d is not None and d.ok:
            return d.median_s
        defaults = [r.default for r in self.searched if r.default is not None and r.default.ok]
        return defaults[0].median_s if defaults else math.inf

    @property
    def best_s(self) -> float:
        if self.decided is not None and self.decided.best is not None and self.decided.best.ok:
            return self.decided.best.median_s
        return self.default_s

    @property
    def fastest_s(self) -> float:
        """The search's fastest trial (measured once: a finalist, not the best)."""
        return min((r.fastest.median_s for r in self.searched if r.fastest is not None), default=math.inf)

    @property
    def verdict(self) -> str:
        """`tuned` (a finalist beat the default in the final rounds), `default kept`, or `-`."""
        if self.decided is None or self.decided.decision is None:
            return "-"
        return "default kept" if self.decided.kept_default else "tuned"

    @property
    def trials(self) -> int:
        return sum(r.trials for r in self.searched)


@dataclass
class ProgramResult:
    task: TuneTask
    entries: list[TaskEntry]
    kernels: int
    before: MeasureResult | None = None
    after: MeasureResult | None = None
    stopped: str = "trials"  # trials | time | exhausted | interrupted
    seconds: float = 0.0
    records_used: int = 0
    """How many tasks' records the tuned whole program applied."""
    tuned_schedule: str = ""
    """The whole program's schedule with the tasks' records (what `einc compile` applies)."""

    @property
    def before_s(self) -> float:
        return self.before.median_s if self.before is not None and self.before.ok else math.inf

    @property
    def after_s(self) -> float:
        return self.after.median_s if self.after is not None and self.after.ok else math.inf

    def table(self) -> str:
        """The per-task table (markdown): trials; the default's and the best's times (ms, the
        final rounds' medians), the search's fastest trial (measured once) and whether the
        final rounds crowned a finalist or kept the default; the weighted best's share of the
        tasks' total; then the whole program before and after."""
        total = sum(len(e.kernels) * e.best_s for e in self.entries if math.isfinite(e.best_s))
        rows = ["| task | kernels | trials | default (ms) | fastest trial (ms) | best (ms) | decided | speedup "
                "| share of total |", "|---|---|---|---|---|---|---|---|---|"]  # fmt: skip
        for i, e in enumerate(self.entries):
            share = len(e.kernels) * e.best_s / total if total > 0 and math.isfinite(e.best_s) else 0.0
            speedup = e.default_s / e.best_s if math.isfinite(e.default_s) and e.best_s > 0 else math.nan
            rows.append(f"| {i}: {_short(e.name)} | {len(e.kernels)} | {e.trials} | {_ms(e.default_s)} | "
                        f"{_ms(e.fastest_s)} | {_ms(e.best_s)} | {e.verdict} | {speedup:.2f}x | {share:.1%} |")  # fmt: skip
        lines = ["\n".join(rows)]
        if self.before is not None:
            lines.append(f"whole program ({self.kernels} kernels): default schedule {_ms(self.before_s)} ms, "
                         f"tuned {_ms(self.after_s)} ms"
                         + (f" ({self.before_s / self.after_s:.2f}x)" if math.isfinite(self.after_s) and self.after_s > 0
                            else "")
                         + f"; medians of {E2E_ROUNDS} rounds each"
                         + (f", {self.records_used} of {len(self.entries)} tasks' records applied"))  # fmt: skip
            for what, m in (("default", self.before), ("tuned", self.after)):
                if m is not None and not m.ok:
                    lines.append(f"  the {what} program: {m.status.value}: {m.reason}")
        return "\n".join(lines)

    def summary(self) -> str:
        trials = sum(e.trials for e in self.entries)
        head = (f"{len(self.entries)} tasks ({self.kernels} kernels) of {self.task.filename}: {trials} trials "
                f"in {self.seconds:.1f} s ({self.stopped})")  # fmt: skip
        return head + "\n" + self.table()


def _ms(seconds: float) -> str:
    return f"{seconds * 1e3:.3f}" if math.isfinite(seconds) else "-"


def _short(text: str, width: int = 48) -> str:
    return text if len(text) <= width else text[: width - 3] + "..."


def split_tasks(task: TuneTask) -> list[tuple[TuneTask, list[ProgramTask]]]:
    """The distinct tasks of `task`'s program (a TuneTask each, in order of first kernel)
    with the kernels each stands for; one entry, `task` itself, for a program of one kernel."""
    comp = task.compilation(ScheduleChoice.DEFAULT)
    scheduled = comp.module("scheduled")  # the ein stage first: the program is known
    kernels = split_program(comp.program, scheduled)
    if len(kernels) < 2:
        return [(task, kernels)]
    found: dict[str, tuple[TuneTask, list[ProgramTask]]] = {}
    for k in kernels:
        sub = TuneTask(k.source, task.target, f"{task.filename} [task {k.index}]")
        found.setdefault(sub.key, (sub, []))[1].append(k)
    return list(found.values())


def kind(task: TuneTask) -> str:
    """What makes tasks similar (the scheduler's speed bound): each statement's combiner and
    numbers of parallel and reduction axes."""
    return ";".join(f"{s.combiner}:{s.num_parallel}:{len(s.axes) - s.num_parallel}" for s in task.program.statements)


def tune_program(
    task: TuneTask,
    trials: int,
    builder: Builder,
    runner: Runner,
    db: RecordDB | None,
    device: RecordContext | None = None,
    policy: str = "bayes",
    seed: int = 0,
    progress: bool = True,
    early_stop: float = EARLY_STOP,
    round_size: int | None = None,
    finalists: int = 3,
    rounds: int = 5,
    split: list[tuple[TuneTask, list[ProgramTask]]] | None = None,
    time_budget_s: float | None = None,
    on_round: Callable[[int, TuneResult], None] | None = None,
    transfer: bool = True,
) -> ProgramResult:
    """Tune `task`'s program task by task: every distinct task first measures its default
    schedule, then rounds of `round_size` trials (by default up to 8, fewer for a small
    budget) go to the task the gradient scheduler picks, `trials` in all, the first round's
    included (or until `time_budget_s`); each task's best is then decided in final rounds
    (`tune`'s) and recorded (`transfer`: each task's search warm-started and seeded from the
    records of other programs, `tune`'s); last, the whole program is measured with the target's default
    schedule and with the tasks' records, in turn (`E2E_ROUNDS`). `split`: the distinct tasks
    and their kernels when already known (`split_tasks`)."""
    from einc.tune.search import make_policy
    from einc.tune.space import SearchSpace
    from einc.tune.tuner import tune

    start = time.perf_counter()
    split = split if split is not None else split_tasks(task)
    entries: list[TaskEntry] = []
    bar = _bar(trials, "tuning") if progress else None
    try:
        for i, (sub, kernels) in enumerate(split):
            if bar is not None:
                bar.set_description(f"search space of task {i + 1}/{len(split)}")
                bar.refresh()
            space = SearchSpace.from_task(sub)
            entries.append(TaskEntry(sub, kernels, space, make_policy(policy, space, seed=seed),
                                     TaskState(weight=len(kernels), flops=float(sub.flops), kind=kind(sub))))  # fmt: skip
    except BaseException:
        if bar is not None:
            bar.close()
        raise
    result = ProgramResult(task, entries, sum(len(e.kernels) for e in entries))
    scheduler = GradientScheduler([e.state for e in entries])
    parallel = int(getattr(runner, "parallelism", getattr(builder, "workers", 1)))
    size = round_size or max(1, min(max(2 * parallel, 4), (trials - len(entries)) // max(2 * len(entries), 1)))
    common = _Common(builder, runner, db, device, seed, early_stop)
    done = 0

    def tick(_: Trial) -> None:
        if bar is not None:
            bar.update(1)

    try:
        while done < trials:
            if time_budget_s is not None and time.perf_counter() - start >= time_budget_s:
                result.stopped = "time"
                break
            index = scheduler.next_task()
            if index is None:
                result.stopped = "exhausted"
                break
            entry = entries[index]
            count = 1 if entry.state.rounds == 0 else min(size, trials - done)  # the warm-up: its default
            if bar is not None:
                bar.set_description(f"task {index} ({_short(entry.name, 24)})")
            searched = tune(entry.task, policy=entry.policy, space=entry.space, trials=count, decide_best=False,
                            progress=False, on_trial=tick,
                            builder=builder, runner=runner, db=db, device=device, seed=seed,
                            early_stop=early_stop, transfer=transfer)  # fmt: skip
            entry.searched.append(searched)
            done += searched.trials
            best = min((r.fastest.median_s for r in entry.searched if r.fastest is not None), default=math.inf)
            scheduler.observe(index, best, searched.trials, exhausted=searched.stopped == "exhausted")
            if bar is not None and math.isfinite(best):
                bar.set_postfix_str(f"task {index} best {best * 1e3:.3f}ms", refresh=False)
            if on_round is not None:
                on_round(index, searched)
            if searched.stopped == "interrupted":
                result.stopped = "interrupted"
                break
        if result.stopped != "interrupted":
            _decide_all(result, bar, finalists, rounds, common)
        if result.stopped != "interrupted":
            if bar is not None:
                bar.set_description("the whole program, default and tuned")
                bar.refresh()
            _whole_program(result, builder, runner, db)
    except KeyboardInterrupt:
        result.stopped = "interrupted"
    finally:
        if bar is not None:
            bar.close()
    result.seconds = time.perf_counter() - start
    return result


@dataclass
class _Common:
    """What every `tune` call of a program's tasks shares."""

    builder: Builder
    runner: Runner
    db: RecordDB | None
    device: RecordContext | None
    seed: int
    early_stop: float


def _decide_all(result: ProgramResult, bar, finalists: int, rounds: int, common: _Common) -> None:
    """Each task's final rounds over all its recorded trials (`tune(resume=True, trials=0)`)."""
    from einc.tune.tuner import tune

    for i, entry in enumerate(result.entries):
        if bar is not None:
            bar.set_description(f"final rounds, task {i}")
            bar.refresh()
        decided = tune(entry.task, policy="random", space=entry.space, trials=0, resume=True, progress=False,
                       finalists=finalists, rounds=rounds, builder=common.builder, runner=common.runner,
                       db=common.db, device=common.device, seed=common.seed, early_stop=common.early_stop,
                       transfer=False)  # fmt: skip  (final rounds only: nothing is searched)
        if decided.stopped == "interrupted":
            result.stopped = "interrupted"
            return
        entry.decided = decided


def _whole_program(result: ProgramResult, builder: Builder, runner: Runner, db: RecordDB | None) -> None:
    """The whole program with the target's default schedule and with the tasks' records (as
    `einc compile` applies them), built once each and measured in turn, `E2E_ROUNDS` rounds;
    each also checked against NumPy (a wrong tuned program is reported, not ranked)."""
    from einc.tune.tuner import _final_settings

    from einc.compiler.driver import Compilation

    task = result.task
    default = task.compilation(ScheduleChoice.DEFAULT)
    default.run_until("scheduled")
    modelled = getattr(runner, "device", None)  # a ModelRunner's: the records it made are modelled ones
    tuned = Compilation(task.source, task.filename, task.input_dict, task.extra_outputs, task.target,
                        ScheduleChoice.BEST, use_records=True, db=db.path if db is not None else None,
                        model=getattr(modelled, "key", None) or None)  # fmt: skip
    tuned.run_until("scheduled")
    result.records_used = len({r.id for _, r in tuned.task_records}) or int(tuned.record is not None)
    result.tuned_schedule = tuned.schedule_text or ""
    # A device target's default mapping is made by its pipeline, not by a schedule script: "default".
    candidates = [Candidate(Point("default"), default.schedule_text or "default"),
                  Candidate(Point("tasks"), tuned.schedule_text or "default")]  # fmt: skip
    builds = builder.build(task, candidates)
    measured: list[list[MeasureResult]] = [[], []]
    with _final_settings(runner):
        for r in range(E2E_ROUNDS):
            for i in (0, 1) if r % 2 == 0 else (1, 0):
                (m,) = runner.run(task, [builds[i]])
                measured[i].append(m)
    out = []
    for i, runs in enumerate(measured):
        ok = [m.median_s for m in runs if m.ok]
        if len(ok) == len(runs):
            out.append(MeasureResult(candidates[i], Status.OK, times=(statistics.median(ok),), extra={"rounds": ok}))
        else:
            bad = next(m for m in runs if not m.ok)
            out.append(bad)
    result.before, result.after = out


def _bar(total: int, what: str):  # -> tqdm
    from tqdm import tqdm

    return tqdm(total=total, unit="trial", dynamic_ncols=True, desc=what, file=sys.stderr)
