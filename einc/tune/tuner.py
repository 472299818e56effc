"""The tuning loop: propose points, build them in parallel, measure them one by one in an
isolated worker, record every result, and keep the best that computed the right numbers.

    result = tune(TuneTask.from_file("mm.ein"), trials=64, db=RecordDB(path))
    result.best.candidate.schedule        # the best script (text), checked against NumPy

Each batch is recorded as its results arrive (a killed tuner loses only the batch in
flight); `resume=True` feeds a task's earlier trials to the search and counts them towards
`trials`. Ctrl-C ends the loop after the candidate in flight, with every record kept. The
winner is measured once more on fresh inputs (another seed) before it is reported.
"""

from __future__ import annotations

import dataclasses
import math
import os
import time
import uuid
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from einc.errors import EincError
from einc.tune.types import BuildResult, Candidate, MeasureResult, Point, Status, TuneTask
from einc.tune.workload import throughput

if TYPE_CHECKING:
    from einc.tune.measure import Builder, Runner
    from einc.tune.records import RecordDB
    from einc.tune.search import SearchPolicy
    from einc.tune.space import SearchSpace


@dataclass
class Trial:
    """One measured (or failed) candidate: its index in the search, when it ended (seconds
    since the search began), and what it gave."""

    index: int
    elapsed_s: float
    result: MeasureResult


@dataclass
class TuneResult:
    task: TuneTask
    policy: str
    best: MeasureResult | None = None
    default: MeasureResult | None = None
    history: list[Trial] = field(default_factory=list)
    resumed: int = 0  # trials read back from the database
    seconds: float = 0.0
    stopped: str = "trials"  # trials | time | exhausted | interrupted
    verified: MeasureResult | None = None  # the best, measured again on fresh inputs
    finals: list[MeasureResult] = field(default_factory=list)  # the finalists' paired rounds

    @property
    def trials(self) -> int:
        return len(self.history)

    @property
    def failures(self) -> Counter[str]:
        return Counter(t.result.status.value for t in self.history if not t.result.ok)

    def best_so_far(self) -> list[tuple[int, float, float]]:
        """(trial, elapsed seconds, best median seconds so far) after each trial."""
        best, curve = math.inf, []
        for t in self.history:
            if t.result.ok:
                best = min(best, t.result.median_s)
            curve.append((t.index, t.elapsed_s, best))
        return curve

    def reached(self, fraction: float = 0.9) -> tuple[int, float] | None:
        """The first (trial, seconds) at which the best-so-far throughput was `fraction` of
        the final best's (time <= final / fraction)."""
        searched = [t.result.median_s for t in self.history if t.result.ok]
        if self.best is None or not searched:
            return None
        goal = min(searched) / fraction  # the search's own best (finalists are re-measured apart)
        for index, elapsed, best in self.best_so_far():
            if best <= goal:
                return index, elapsed
        return None

    def summary(self) -> str:
        lines = [f"{self.policy}: {self.trials} trials in {self.seconds:.1f} s ({self.stopped})"]
        if self.resumed:
            lines[0] += f", {self.resumed} earlier trials resumed"
        fails = self.failures
        if fails:
            lines.append("  failed: " + ", ".join(f"{n} {s}" for s, n in sorted(fails.items())))
        if self.default is not None and self.default.ok:
            lines.append(f"  default schedule: {_speed(self.task, self.default.median_s)}")
        if self.best is None:
            lines.append("  no candidate computed the right numbers")
            return "\n".join(lines)
        line = f"  best: {_speed(self.task, self.best.median_s)}  {self.best.candidate.point.describe()}"
        if self.default is not None and self.default.ok:
            line += f"  ({self.default.median_s / self.best.median_s:.2f}x the default)"
        lines.append(line)
        if (hit := self.reached()) is not None:
            lines.append(f"  90% of the best after {hit[0] + 1} trials, {hit[1]:.1f} s")
        if self.finals:
            lines.append(f"  final ranking: {len(self.finals)} finalists (the default among them) re-measured "
                         f"{self.finals[0].extra.get('rounds')} times in turn")  # fmt: skip
        if self.verified is not None:
            lines.append(
                "  re-checked on fresh inputs: "
                + (_speed(self.task, self.verified.median_s) if self.verified.ok else self.verified.reason)
            )
        return "\n".join(lines)


def _speed(task: TuneTask, seconds: float) -> str:
    value, unit = throughput(task, seconds)
    return f"{seconds * 1e3:.3f} ms, {value:.1f} {unit}"


def _refused(candidate: Candidate, message: str) -> MeasureResult:
    return MeasureResult(candidate, Status.REFUSED, message)


def _from_build(build: BuildResult) -> MeasureResult:
    return MeasureResult(build.candidate, build.status, build.reason, build_s=build.seconds)


def measure_points(
    task: TuneTask, space: SearchSpace, points: Sequence[Point], builder: Builder, runner: Runner
) -> list[MeasureResult]:
    """Build and measure `points`: one result per point, in order, failures as values."""
    results: dict[int, MeasureResult] = {}
    candidates: list[tuple[int, Candidate]] = []
    for i, point in enumerate(points):
        try:
            candidates.append((i, space.candidate(point)))
        except EincError as err:  # a point the space itself refuses (should be rare)
            results[i] = _refused(Candidate(point, ""), err.render())
    builds = builder.build(task, [c for _, c in candidates])
    ok = [(i, b) for (i, _), b in zip(candidates, builds) if b.status is Status.OK]
    for (i, _), b in zip(candidates, builds):
        if b.status is not Status.OK:
            results[i] = _from_build(b)
    if ok:
        for (i, b), measured in zip(ok, runner.run(task, [b for _, b in ok])):
            results[i] = measured
    return [results[i] for i in range(len(points))]


def tune(
    task: TuneTask,
    *,
    policy: str | SearchPolicy = "bayes",
    trials: int = 64,
    time_budget_s: float | None = None,
    workers: int | None = None,
    threads: int | None = None,
    batch: int | None = None,
    space: SearchSpace | None = None,
    builder: Builder | None = None,
    runner: Runner | None = None,
    db: RecordDB | str | Path | None = None,
    device: str | None = None,
    resume: bool = False,
    seed: int = 0,
    progress: bool = False,
    verify: bool = True,
    runner_options: dict | None = None,
    finalists: int = 3,
    rounds: int = 3,
    on_trial: Callable[[Trial], None] | None = None,
) -> TuneResult:
    """Search `task`'s schedule space for `trials` candidates (or `time_budget_s` seconds).

    `policy`: "bayes", "random" or a SearchPolicy. Builder and runner default to a local
    process pool of `workers` and an isolated worker running the kernel on `threads`
    threads. Every result is added to `db` (a RecordDB, or the path of one: opened here, and
    refused before any measurement when it cannot be) as it arrives (keyed by the task and
    `device`, by default this machine's fingerprint for the target)."""
    from einc.tune.measure import LocalBuilder, LocalRunner
    from einc.tune.records import RecordDB
    from einc.tune.search import make_policy
    from einc.tune.space import SearchSpace

    if isinstance(db, str | Path):
        with RecordDB(db) as opened:
            return tune(task, policy=policy, trials=trials, time_budget_s=time_budget_s, workers=workers,
                        threads=threads, batch=batch, space=space, builder=builder, runner=runner, db=opened,
                        device=device, resume=resume, seed=seed, progress=progress, verify=verify,
                        runner_options=runner_options, finalists=finalists, rounds=rounds, on_trial=on_trial)  # fmt: skip
    if db is not None and not isinstance(db, RecordDB):
        raise TypeError(f"tune(db=...) takes a RecordDB or a path, not {type(db).__name__}")
    start = time.perf_counter()
    space = space or SearchSpace.from_task(task)
    if isinstance(policy, str):
        policy = make_policy(policy, space, seed=seed)
    own_builder, own_runner = builder is None, runner is None
    workers = workers or min(4, os.cpu_count() or 1)
    builder = builder or LocalBuilder(workers=workers)
    runner = runner or LocalRunner(threads=threads, seed=seed, **(runner_options or {}))
    if db is not None and device is None:
        from einc.compiler.records import device_fingerprint
        from einc.targets import get_target

        device = device_fingerprint(get_target(task.target))
    tuner_id = f"{policy.name}-{uuid.uuid4().hex[:8]}"
    result = TuneResult(task, policy.name)
    default_point = space.default_point()

    if resume and db is not None:
        assert device is not None
        earlier = [(r.point(), record_result(r)) for r in db.trials(task.key, task.target, device)]
        policy.observe(earlier)
        result.resumed = len(earlier)
        for point, measured in earlier:
            _consider(result, point, measured, default_point)

    try:
        bar = _progress_bar(trials, result.resumed) if progress else None
        batch = batch or max(2 * workers, 4)
        try:
            while result.resumed + result.trials < trials:
                if time_budget_s is not None and time.perf_counter() - start >= time_budget_s:
                    result.stopped = "time"
                    break
                points = policy.propose(min(batch, trials - result.resumed - result.trials))
                if not points:
                    result.stopped = "exhausted"
                    break
                if (set_best := getattr(runner, "set_best", None)) is not None:
                    set_best(result.best.median_s if result.best is not None else None)
                measured = measure_points(task, space, points, builder, runner)
                for point, m in zip(points, measured):
                    trial = Trial(result.resumed + result.trials, time.perf_counter() - start, m)
                    result.history.append(trial)
                    if db is not None:
                        assert device is not None
                        db.add(task, device, m, tuner=tuner_id)
                    _consider(result, point, m, default_point)
                    if bar is not None:
                        _update_bar(bar, result)
                    if on_trial is not None:
                        on_trial(trial)
                policy.observe(list(zip(points, measured)))
        except KeyboardInterrupt:
            result.stopped = "interrupted"
        finally:
            if bar is not None:
                bar.close()
            result.seconds = time.perf_counter() - start
        if result.best is not None and result.stopped != "interrupted" and finalists > 1:
            _final_ranking(task, result, builder, runner, finalists, rounds,
                           lambda m: db.add(task, device, m, tuner=tuner_id) if db is not None and device else None)  # fmt: skip
        if verify and result.best is not None and result.stopped != "interrupted":
            result.verified = _verify(task, result.best, builder, runner)
            if result.verified.status in DISQUALIFYING:  # a winner that fails on fresh inputs is no winner
                result.best = None
                for trial in sorted(
                    (t for t in result.history if t.result.ok), key=lambda t: t.result.median_s
                ):
                    if trial.result.candidate != result.verified.candidate:
                        result.best = trial.result
                        break
    finally:
        if own_runner:
            _close(runner)
        if own_builder:
            _close(builder)
    return result


def record_result(record) -> MeasureResult:  # record: einc.compiler.records.Record
    """A database record as the measurement it was (for resuming a search)."""
    candidate = Candidate(record.point(), record.schedule)
    return MeasureResult(candidate, Status(record.status), record.reason, tuple(record.times), record.build_s)


def _consider(result: TuneResult, point: Point, measured: MeasureResult, default_point: Point) -> None:
    if point == default_point and result.default is None:
        result.default = measured
    if measured.ok and (result.best is None or measured.median_s < result.best.median_s):
        result.best = measured


def _final_ranking(
    task: TuneTask, result: TuneResult, builder: Builder, runner: Runner, top: int, rounds: int,
    record: Callable[[MeasureResult], object],
) -> None:
    """The best `top` candidates and the default, measured again against each other: `rounds`
    rounds, each measuring every finalist once in turn (a rotating order), so that load
    drifting during the search does not decide between near-equal kernels. The winner has the
    least median over the rounds; each finalist's rounds are recorded (`extra["final"]`), and
    the records' best follows the latest final ranking."""
    ranked = sorted((t.result for t in result.history if t.result.ok), key=lambda m: m.median_s)
    chosen: list[MeasureResult] = []
    for m in ranked:
        if all(m.candidate != c.candidate for c in chosen):
            chosen.append(m)
        if len(chosen) == top:
            break
    if result.default is not None and result.default.ok and all(result.default.candidate != c.candidate for c in chosen):
        chosen.append(result.default)
    if len(chosen) < 2:
        return
    if (set_best := getattr(runner, "set_best", None)) is not None:
        set_best(None)  # every finalist timed in full
    builds = builder.build(task, [c.candidate for c in chosen])
    medians: list[list[float]] = [[] for _ in chosen]
    for r in range(rounds):
        order = [(r + k) % len(chosen) for k in range(len(chosen))]
        for k in order:
            if builds[k].status is Status.OK:
                (m,) = runner.run(task, [builds[k]])
                if m.ok:
                    medians[k].append(m.median_s)
    tag = f"final-{uuid.uuid4().hex[:8]}"
    finals = [
        MeasureResult(c.candidate, Status.OK, times=tuple(times), build_s=c.build_s, extra={"final": tag, "rounds": rounds})
        for c, times in zip(chosen, medians)
        if len(times) == rounds  # a finalist that failed a round is out
    ]
    # A ranking needs two finalists: a lone survivor (the others noisy or failed) was compared
    # with nothing, and the search's best stands (nothing recorded as a final).
    if len(finals) >= 2:
        for final in finals:
            record(final)
        result.finals = finals
        result.best = min(finals, key=lambda m: m.median_s)
        default = next((f for f in finals if result.default is not None and f.candidate == result.default.candidate), None)
        if default is not None:
            result.default = default


DISQUALIFYING = (Status.WRONG, Status.CRASHED, Status.TIMEOUT, Status.INTERNAL, Status.REFUSED)
"""What, on the winner's second measurement, takes its place away (NOISY does not)."""


def _verify(task: TuneTask, best: MeasureResult, builder: Builder, runner: Runner) -> MeasureResult:
    """The best candidate built and measured again; a LocalRunner's copy draws its inputs
    from the next seed (other runners measure on their own inputs again)."""
    from einc.tune.measure import LocalRunner

    fresh = dataclasses.replace(runner, seed=runner.seed + 1, cutoff_s=None) if isinstance(runner, LocalRunner) else runner
    try:
        (build,) = builder.build(task, [best.candidate])
        if build.status is not Status.OK:
            return _from_build(build)
        (measured,) = fresh.run(task, [build])
        return measured
    finally:
        if fresh is not runner:
            _close(fresh)


def _close(part: object) -> None:
    close = getattr(part, "close", None)
    if close is not None:
        close()


def _progress_bar(total: int, done: int):  # -> tqdm
    from tqdm import tqdm

    return tqdm(total=total, initial=done, unit="trial", dynamic_ncols=True, desc="tuning")


def _update_bar(bar, result: TuneResult) -> None:
    bar.update(1)
    postfix: dict[str, object] = {"failed": sum(result.failures.values())}
    if result.best is not None:
        value, unit = throughput(result.task, result.best.median_s)
        postfix["best"] = f"{result.best.median_s * 1e3:.3f}ms"
        postfix[unit] = f"{value:.1f}"
    bar.set_postfix(postfix, refresh=False)
