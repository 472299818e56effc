"""The tuning loop: propose points, build them in parallel, measure them one by one in an
isolated worker, record every result, then decide in final rounds whether any is the best.

    result = tune(TuneTask.from_file("mm.ein"), trials=64, db=RecordDB(path))
    result.best.candidate.schedule        # the best script (text), checked against NumPy
    result.decision.reason                # why it is the best, or why the default was kept

Each batch is recorded as its results arrive (a killed tuner loses only the batch in
flight); `resume=True` feeds a task's earlier trials to the search and counts them towards
`trials`. Ctrl-C ends the loop after the candidate in flight, with every record kept and
nothing decided.

A search's trials are measured once each, maybe while the machine was busy: the fastest trial is
no more than a finalist. The best is decided in final rounds (`einc.tune.decide`): the default
schedule and the fastest few trials measured again, in turn, in paired rounds; a finalist is the
best only when it beat the default beyond the noise and the load in enough rounds to be
significant, else the default schedule is kept and the decision says why. The best is measured
once more on fresh inputs (another seed) before it is recorded. The decision is recorded with
the final rounds (`extra["best"]` on the record of the kept or crowned schedule), and that one
record is what the summary, the progress bar, `einc records list`, a compile and the report's
plot all name as the best.
"""

from __future__ import annotations

import dataclasses
import math
import os
import time
import uuid
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from einc.errors import EincError, UsageError
from einc.tune.decide import ALPHA, SECOND_LOOK, SECOND_ROUNDS, Decision, Pair, Sample, Verdict, decide, judge, rounds_needed
from einc.tune.types import EARLY_STOP, BuildResult, Candidate, MeasureResult, Point, Status, TuneTask
from einc.tune.workload import throughput

if TYPE_CHECKING:
    from einc.compiler.records import RecordContext
    from einc.perfmodel.devices import Device
    from einc.tune.measure import Builder, Runner
    from einc.tune.records import RecordDB
    from einc.tune.search import SearchPolicy
    from einc.tune.space import SearchSpace
    from einc.tune.transfer import TransferPlan


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
    """The decision's schedule, as the final rounds measured it: the crowned finalist, or the
    default schedule kept. None before a decision (interrupted, or `decide=False`)."""
    default: MeasureResult | None = None
    """The default schedule: its final rounds once decided, else its search trial."""
    fastest: MeasureResult | None = None
    """The fastest trial of the search (measured once: a finalist, not the best)."""
    decision: Decision | None = None
    history: list[Trial] = field(default_factory=list)
    earlier: list[MeasureResult] = field(default_factory=list)  # trials read back from the database
    seconds: float = 0.0
    stopped: str = "trials"  # trials | time | exhausted | interrupted
    verified: MeasureResult | None = None  # the crowned finalist, measured again on fresh inputs
    finals: list[MeasureResult] = field(default_factory=list)  # the final rounds (the default first)
    decided_s: float = 0.0  # seconds of the final rounds
    transfer: TransferPlan | None = None  # what other programs' records gave (None: transfer off)

    @property
    def resumed(self) -> int:
        return len(self.earlier)

    @property
    def trials(self) -> int:
        return len(self.history)

    @property
    def stopped_early(self) -> int:
        """Trials not timed past their first runs (over the early-stop factor times the best)."""
        return sum(stopped_early(t.result) for t in self.history)

    @property
    def failures(self) -> Counter[str]:
        return Counter(t.result.status.value for t in self.history if not t.result.ok)

    @property
    def kept_default(self) -> bool:
        return self.decision is not None and self.decision.kept_default

    def best_so_far(self) -> list[tuple[int, float, float]]:
        """(trial, elapsed seconds, fastest trial's median seconds so far) after each trial."""
        best, curve = math.inf, []
        for t in self.history:
            if t.result.ok:
                best = min(best, t.result.median_s)
            curve.append((t.index, t.elapsed_s, best))
        return curve

    def reached(self, fraction: float = 0.9) -> tuple[int, float] | None:
        """The first (trial, seconds) at which the fastest trial so far had `fraction` of the
        speed of the search's fastest (time <= fastest / fraction)."""
        searched = [t.result.median_s for t in self.history if t.result.ok]
        if not searched:
            return None
        goal = min(searched) / fraction
        for index, elapsed, best in self.best_so_far():
            if best <= goal:
                return index, elapsed
        return None

    def best_line(self) -> str:
        """The best in words (what the summary and the progress bar say)."""
        if self.best is None or self.decision is None:
            return "none decided"
        if self.decision.kept_default:
            speed = f"{_speed(self.task, self.best.median_s)}, " if self.best.ok else ""
            return f"the default schedule ({speed}kept)"
        return f"{_speed(self.task, self.best.median_s)}  {self.best.candidate.point.describe()}"

    @property
    def modelled(self) -> str:
        """The device the candidates were modelled on (`tune(model=...)`), "" when measured."""
        for m in [*(t.result for t in self.history), *self.finals, *self.earlier]:
            if isinstance(device := m.extra.get("modelled"), str):
                return device
        return ""

    def summary(self) -> str:
        lines = [f"{self.policy}: {self.trials} trials in {self.seconds:.1f} s ({self.stopped})"]
        if self.modelled:
            lines[0] += f", ranked by the performance model of {self.modelled} (times modelled, not measured)"
        if self.resumed:
            lines[0] += f", {self.resumed} earlier trials resumed"
        if self.transfer is not None:
            lines += ["  " + line for line in self.transfer.describe()]
            if self.transfer.seeds:
                seeds = set(self.transfer.seeds)
                tried = [t.result for t in self.history if t.result.candidate.point in seeds]
                if tried:
                    fastest = min((m.median_s for m in tried if m.ok), default=math.inf)
                    speed = f", the fastest {_speed(self.task, fastest)}" if math.isfinite(fastest) else ""
                    lines.append(f"  seeds measured: {len(tried)}, {sum(m.ok for m in tried)} ok{speed}")
        fails = self.failures
        if fails:
            lines.append("  failed: " + ", ".join(f"{n} {s}" for s, n in sorted(fails.items())))
        if self.stopped_early:
            lines.append(f"  stopped early: {self.stopped_early} (their first runs were over the early-stop factor "
                         "times the fastest trial then)")  # fmt: skip
        if self.fastest is not None:
            lines.append(f"  fastest trial: {_speed(self.task, self.fastest.median_s)}  "
                         f"{self.fastest.candidate.point.describe()} ({'modelled' if self.modelled else 'measured once'})")  # fmt: skip
            if (hit := self.reached()) is not None:
                lines.append(f"  90% of its speed after {hit[0] + 1} trials, {hit[1]:.1f} s")
        if len(self.finals) > 1 and not self.modelled:
            rounds = max(_int(f.extra.get("rounds")) for f in self.finals)
            lines.append(f"  final rounds: the default and {len(self.finals) - 1} finalist"
                         f"{'s' if len(self.finals) > 2 else ''} measured in turn, {rounds} rounds, "
                         f"{self.decided_s:.1f} s")  # fmt: skip
        if self.default is not None and self.default.ok:
            lines.append(f"  default schedule: {_speed(self.task, self.default.median_s)}")
        if self.decision is None:
            if self.stopped == "interrupted":
                lines.append("  best: none decided (interrupted; every trial is recorded: --resume goes on)")
            elif self.fastest is None:
                lines.append("  no candidate computed the right numbers")
            else:
                lines.append("  best: none decided")
            return "\n".join(lines)
        lines.append(f"  best: {self.best_line()}")
        lines.append(f"    because {self.decision.reason}")
        if self.verified is not None:
            lines.append("  re-checked on fresh inputs: "
                         + ("right numbers" if self.verified.ok else f"{self.verified.status.value}: {self.verified.reason}"))  # fmt: skip
        return "\n".join(lines)


def _int(value: object) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) else 0


def _speed(task: TuneTask, seconds: float) -> str:
    value, unit = throughput(task, seconds)
    return f"{seconds * 1e3:.3f} ms, {value:.3g} {unit}"


def stopped_early(measured: MeasureResult) -> bool:
    """Whether `measured` was timed by its first runs only (`LocalRunner.set_best`): it is
    recorded with them, marked `cut`, and is never the fastest trial or a finalist."""
    return measured.extra.get("cut") is True


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
    runner: Runner | str | None = None,
    db: RecordDB | str | Path | None = None,
    device: RecordContext | None = None,
    resume: bool = False,
    seed: int = 0,
    progress: bool = False,
    verify: bool = True,
    runner_options: dict | None = None,
    finalists: int = 3,
    rounds: int = 5,
    decide_best: bool = True,
    on_trial: Callable[[Trial], None] | None = None,
    early_stop: float = EARLY_STOP,
    transfer: bool = True,
    model: str | Device | None = None,
) -> TuneResult:
    """Search `task`'s schedule space for `trials` candidates (or `time_budget_s` seconds), then
    decide the best in final rounds: the default schedule and the `finalists` fastest trials,
    at least `rounds` rounds (more where the finalists need them to be significant; see
    `einc.tune.decide`). `decide_best=False` searches only (nothing is crowned or recorded as
    the best).

    `transfer`: a search with a database learns from the records of every other program on
    the target under the same context (`einc.tune.transfer`): the Bayesian search's cost
    model is warm-started from their trials before the first measurement, and its first
    batch is seeded with the best schedules of the nearest programs (the same program but for
    its sizes) re-fitted to this one's shape and checked legal. Records keep what this needs
    (`extra["transfer"]`) whatever `transfer` is.

    `early_stop`: a trial whose first runs each take over this many times the fastest trial
    so far is not timed further; it is recorded with its first runs, marked `cut`, and never
    becomes a finalist (0: every trial timed in full). The final rounds time every candidate
    in full.

    `policy`: "bayes", "random" or a SearchPolicy. Builder and runner default to a local
    process pool of `workers` and an isolated worker running the kernel on `threads`
    threads (`runner="local"`); `runner="dask-local"` measures on a Dask LocalCluster of
    `workers` processes (2 by default), `runner="dask://HOST:PORT"` on the workers of a running
    Dask scheduler (`einc.tune.cluster`), each candidate built and measured on one worker of
    the device. Every result is added to `db` (a RecordDB, or the path of one: opened here, and
    refused before any measurement when it cannot be) as it arrives (keyed by the task and
    context `device`, by default this machine's `record_context` for the target), the decision with its
    final rounds.

    `model`: a device of the performance model (`h100`, a JSON file, an einc.perfmodel Device):
    candidates are ranked by their modelled time on it instead of being measured, for a device
    that is not here (`einc.tune.modelled`); records are made under its `model_context`."""
    from einc.tune.measure import LocalBuilder, LocalRunner, check_early_stop
    from einc.tune.records import RecordDB
    from einc.tune.search import make_policy
    from einc.tune.space import SearchSpace

    if isinstance(db, str | Path):
        with RecordDB(db) as opened:
            return tune(task, policy=policy, trials=trials, time_budget_s=time_budget_s, workers=workers,
                        threads=threads, batch=batch, space=space, builder=builder, runner=runner, db=opened,
                        device=device, resume=resume, seed=seed, progress=progress, verify=verify,
                        runner_options=runner_options, finalists=finalists, rounds=rounds, decide_best=decide_best,
                        on_trial=on_trial, early_stop=early_stop, transfer=transfer, model=model)  # fmt: skip
    if db is not None and not isinstance(db, RecordDB):
        raise TypeError(f"tune(db=...) takes a RecordDB or a path, not {type(db).__name__}")
    if why := check_early_stop(early_stop):
        raise UsageError(why)
    start = time.perf_counter()
    if db is not None:
        db.require_writable("record tuning results in")  # before any work: no result is lost
    space = space or SearchSpace.from_task(task)
    if isinstance(policy, str):
        policy = make_policy(policy, space, seed=seed)
    owned: list[object] = []  # what this call made, and closes
    if model is not None:
        import functools

        from einc.compiler.records import model_context
        from einc.perfmodel import get_device
        from einc.targets import get_target
        from einc.tune.modelled import ModelRunner, model_candidate

        modelled = get_device(model)
        if get_target(task.target).limits is None:
            raise UsageError(f"the performance model covers device targets; {task.target} kernels are measured "
                             "(tune without --model)")  # fmt: skip
        if device is None:
            device = model_context(get_target(task.target), modelled)
        if builder is None:
            builder = LocalBuilder(workers=workers or min(4, os.cpu_count() or 1),
                                   job=functools.partial(model_candidate, device=modelled))  # fmt: skip
            owned.append(builder)
        runner = ModelRunner(modelled, parallelism=getattr(builder, "workers", 1))
    if db is not None and device is None:
        from einc.compiler.records import record_context
        from einc.targets import get_target

        device = record_context(get_target(task.target))
    if isinstance(runner, str):
        from einc.tune.cluster import make_runner, parse_runner
        from einc.tune.dask_worker import context_name

        spec = parse_runner(runner)
        template = LocalRunner(threads=threads, seed=seed, **(runner_options or {}))
        where = context_name(device) if device is not None else None
        cluster = make_runner(spec, workers=workers, template=template, device=where) if spec.dask else None
        runner = cluster
        if cluster is not None:
            try:
                cluster.start(task)  # the cluster reached, with a worker of the device, before any search
            except BaseException:
                cluster.close()
                raise
            owned.append(cluster)
            builder = builder or cluster
    workers = workers or min(4, os.cpu_count() or 1)
    if builder is None:
        builder = LocalBuilder(workers=workers)
        owned.append(builder)
    if runner is None:
        runner = LocalRunner(threads=threads, seed=seed, **(runner_options or {}))
        owned.append(runner)
    tuner_id = f"{policy.name}-{uuid.uuid4().hex[:8]}"
    result = TuneResult(task, policy.name)
    default_point = space.default_point()

    def record(results: Sequence[MeasureResult]) -> None:
        if db is not None:
            assert device is not None
            db.add_many(task, device, [_with_transfer_info(task, space, m) for m in results], tuner=tuner_id)

    learns = hasattr(policy, "warm_start") or hasattr(policy, "add_seeds")
    if transfer and db is not None and learns and getattr(policy, "transfer", None) is None:
        # Once per policy: a policy searched in several calls (a whole program's task, round
        # after round) keeps what its first call transferred.
        from einc.tune.transfer import apply_transfer, plan_transfer

        assert device is not None
        result.transfer = plan_transfer(task, space, db, device)
        apply_transfer(policy, result.transfer)

    if resume and db is not None:
        assert device is not None
        earlier = [(r.point(), record_result(r)) for r in db.trials(task.key, task.target, device)]
        policy.observe(earlier)
        for point, measured in earlier:
            result.earlier.append(measured)
            _consider(result, point, measured, default_point)

    bar = _progress_bar(trials, result.resumed) if progress else None
    try:
        parallel: int = getattr(runner, "parallelism", workers)  # a DaskRunner's: the workers of the device
        batch = batch or max(2 * parallel, 4)
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
                    set_best(result.fastest.median_s if result.fastest is not None else None, early_stop)
                measured = measure_points(task, space, points, builder, runner)
                for point, m in zip(points, measured):
                    trial = Trial(result.resumed + result.trials, time.perf_counter() - start, m)
                    result.history.append(trial)
                    record([dataclasses.replace(m, extra={**m.extra, "trial": True})])
                    _consider(result, point, m, default_point)
                    if bar is not None:
                        _update_bar(bar, result)
                    if on_trial is not None:
                        on_trial(trial)
                policy.observe(list(zip(points, measured)))
        except KeyboardInterrupt:
            result.stopped = "interrupted"
        result.seconds = time.perf_counter() - start
        if decide_best and result.stopped != "interrupted" and getattr(runner, "modelled", False):
            _decide_modelled(task, result, space, builder, runner)
            record(result.finals)
        elif decide_best and result.stopped != "interrupted":
            try:
                _decide(task, result, space, builder, runner, finalists, rounds, bar, verify)
            except KeyboardInterrupt:  # nothing decided, nothing recorded but the trials
                result.stopped, result.best, result.decision, result.finals = "interrupted", None, None, []
            if result.decision is not None:
                record(result.finals)
    finally:
        if bar is not None:
            bar.set_description("tuned" if result.decision is not None else "tuning")
            bar.set_postfix(bar_postfix(result), refresh=True)
            bar.close()
        for part in owned:
            _close(part)
    return result


def _with_transfer_info(task: TuneTask, space: SearchSpace, measured: MeasureResult) -> MeasureResult:
    """`measured` with what transfer needs in its record (`einc.tune.transfer.record_info`)."""
    from einc.tune.transfer import TRANSFER, record_info

    if TRANSFER in measured.extra or measured.candidate.point.sketch not in space.sketches:
        return measured
    return dataclasses.replace(measured, extra={**measured.extra, TRANSFER: record_info(task, space, measured.candidate.point)})


def record_result(record) -> MeasureResult:  # record: einc.compiler.records.Record
    """A database record as the measurement it was (for resuming a search)."""
    candidate = Candidate(record.point(), record.schedule)
    return MeasureResult(candidate, Status(record.status), record.reason, tuple(record.times), record.build_s,
                         extra=record.extra)  # fmt: skip


def _consider(result: TuneResult, point: Point, measured: MeasureResult, default_point: Point) -> None:
    if point == default_point and (result.default is None or not result.default.ok):
        result.default = measured
    if measured.ok and not stopped_early(measured) and (result.fastest is None or measured.median_s < result.fastest.median_s):
        result.fastest = measured


def _finalists(result: TuneResult, default_point: Point, top: int) -> list[MeasureResult]:
    """The `top` fastest distinct trials (earlier ones included) other than the default, each
    faster than the default's own trial where that was measured, within that trial's noise
    (`finalist_bar`), none stopped early (a partial measurement over the early-stop factor
    times the best: never the best)."""
    bar = finalist_bar(result.default)
    ranked = sorted((m for m in [*result.earlier, *(t.result for t in result.history)] if m.ok and not stopped_early(m)),
                    key=lambda m: m.median_s)  # fmt: skip
    chosen: list[MeasureResult] = []
    for m in ranked:
        if len(chosen) == top or m.median_s >= bar:
            break
        if m.candidate.point != default_point and all(m.candidate != c.candidate for c in chosen):
            chosen.append(m)
    return chosen


def finalist_bar(default: MeasureResult | None) -> float:
    """The time a trial must beat to be a finalist: the default's own trial, widened by that
    trial's repeat spread ((p75 - p25) / median), so that a trial as fast as the default within
    the default's noise goes to the final rounds, which decide beyond the noise. (On PoCL the
    default's one trial in a search can spread 18%, its repeats slowing and speeding with the
    thread pool: a neighbour 0.04% slower than that trial, and 1.2x faster than the default in
    the final rounds of another search, was never measured again.) inf without a measured
    default."""
    if default is None or not default.ok:
        return math.inf
    spread = default.extra.get("spread")
    noise = float(spread) if isinstance(spread, int | float) and not isinstance(spread, bool) and math.isfinite(spread) else 0.0
    return default.median_s * (1.0 + max(0.0, noise))


def _decide(
    task: TuneTask, result: TuneResult, space: SearchSpace, builder: Builder, runner: Runner, top: int,
    rounds: int, bar, verify: bool,
) -> None:
    """The final rounds, the decision, and the crowned finalist checked on fresh inputs: sets
    `result.decision`, `best`, `default`, `finals` (the default's first; the record of the
    kept or crowned schedule carries `extra["best"]` and the reason)."""
    start = time.perf_counter()
    default_point = space.default_point()
    tag = f"final-{uuid.uuid4().hex[:8]}"
    challengers = _finalists(result, default_point, top)
    try:
        default = space.candidate(default_point)
    except EincError as err:
        default = None
        reason = f"the default schedule is not in the search space: {err.render()}"
    if default is None or not challengers:
        if default is not None:
            reason = ("no trial was faster than the default schedule's" if result.fastest is not None
                      else "no candidate computed the right numbers")  # fmt: skip
        base = result.default or MeasureResult(default or Candidate(default_point, ""), Status.REFUSED, reason)
        result.decision = Decision(None, {}, reason)
        result.finals = [_final(base, base.times if base.ok else (), tag, 0)]
        _crown(result)
        return
    with _final_settings(runner):
        _rounds(task, result, builder, runner, [default, *(c.candidate for c in challengers)], rounds, bar, tag)
    result.decided_s = time.perf_counter() - start
    _crown(result)
    if verify and not result.kept_default and result.best is not None:
        result.verified = _verify(task, result.best, builder, runner)
        if result.verified.status in DISQUALIFYING:  # a winner that fails on fresh inputs is no winner
            why = f"{result.best.candidate.point.describe()} failed on fresh inputs ({result.verified.reason})"
            assert result.decision is not None
            result.decision = Decision(None, result.decision.verdicts, why)
            _crown(result)


def _decide_modelled(task: TuneTask, result: TuneResult, space: SearchSpace, builder: Builder, runner: Runner) -> None:
    """The decision of a search ranked by the performance model (`einc.tune.modelled`): no
    noise, so no final rounds; the fastest modelled candidate is crowned when the model puts
    it more than MARGIN ahead of the default schedule."""
    from einc.tune.modelled import MARGIN

    default_point = space.default_point()
    tag = f"final-{uuid.uuid4().hex[:8]}"
    default = result.default
    if default is None:  # the default was not among the trials (a resumed or seeded search): model it now
        try:
            default = measure_points(task, space, [default_point], builder, runner)[0]
        except EincError as err:
            default = _refused(Candidate(default_point, ""), f"the default schedule is not in the search space: {err.render()}")
        result.default = default
    fastest = result.fastest
    if fastest is None or not default.ok or fastest.candidate.point == default_point \
            or fastest.median_s >= default.median_s * (1 - MARGIN):  # fmt: skip
        if fastest is None:
            reason = "no candidate computed the right numbers"
        elif not default.ok:
            reason = f"the default schedule could not be modelled ({default.status.value}: {default.reason})"
        elif fastest.candidate.point == default_point:
            reason = "the model ranks the default schedule fastest"
        else:
            reason = (f"the model puts no candidate {MARGIN:.0%} ahead of the default schedule (the closest, "
                      f"{fastest.candidate.point.describe()}, at {default.median_s / fastest.median_s:.2f}x)")  # fmt: skip
        result.decision = Decision(None, {}, reason)
        result.finals = [_final(default, default.times if default.ok else (), tag, 1, _modelled_extra(default))]
    else:
        speedup = default.median_s / fastest.median_s
        reason = (f"{fastest.candidate.point.describe()} is modelled {speedup:.2f}x faster than the default schedule "
                  f"on {getattr(runner, 'device').name} ({fastest.extra.get('bound', '?')}-bound; numbers "
                  f"{fastest.extra.get('numbers', 'not checked')})")  # fmt: skip
        result.decision = Decision(1, {}, reason)
        result.finals = [_final(default, default.times, tag, 1, _modelled_extra(default)),
                         _final(fastest, fastest.times, tag, 1, _modelled_extra(fastest))]  # fmt: skip
    _crown(result)


def _modelled_extra(measured: MeasureResult) -> dict[str, object]:
    return {k: measured.extra[k] for k in ("modelled", "bound", "numbers") if k in measured.extra}


FINAL_REPEATS = 5
FINAL_MIN_REPEAT_S = 0.02
"""A LocalRunner's measurements in the final rounds: 5 repeats of at least 20 ms (or the
runner's own, where shorter). The rounds, each pairing the default and a finalist, carry the
statistics; a measurement need not be as long as a search's."""


@contextmanager
def _final_settings(runner: Runner) -> Iterator[None]:
    """`runner` set for the final rounds (every candidate timed in full, FINAL_REPEATS)."""
    from einc.tune.measure import LocalRunner

    if (set_best := getattr(runner, "set_best", None)) is not None:
        set_best(None)
    settings = runner if isinstance(runner, LocalRunner) else getattr(runner, "template", None)  # a DaskRunner's
    if not isinstance(settings, LocalRunner):
        yield
        return
    saved = settings.repeats, settings.min_repeat_s
    settings.repeats = min(FINAL_REPEATS, settings.repeats)
    settings.min_repeat_s = min(FINAL_MIN_REPEAT_S, settings.min_repeat_s)
    try:
        yield
    finally:
        settings.repeats, settings.min_repeat_s = saved


def _rounds(
    task: TuneTask, result: TuneResult, builder: Builder, runner: Runner, candidates: list[Candidate], rounds: int,
    bar, tag: str,
) -> None:
    """The final rounds of `candidates` (the default first) and the decision: sets
    `result.decision` and `result.finals` (the default's first, then the finalists')."""
    builds = builder.build(task, candidates)
    alive = [i for i, b in enumerate(builds) if b.status is Status.OK]
    measured: dict[int, list[MeasureResult]] = {i: [] for i in alive}
    failed: dict[int, MeasureResult] = {i: _from_build(b) for i, b in enumerate(builds) if b.status is not Status.OK}
    if 0 in failed:
        result.decision = Decision(None, {}, f"the default schedule failed to build for the final rounds: "
                                             f"{failed[0].reason}")  # fmt: skip
        result.finals = [_final(failed[0], (), tag, 0)]
        return
    others = [i for i in alive if i]
    total = max(rounds, rounds_needed(len(others)))

    def play(indices: list[int], count: int) -> None:
        for r in range(count):
            played = len(measured[indices[0]])
            for i in (indices[(played + k) % len(indices)] for k in range(len(indices))):  # a rotating order
                (m,) = runner.run(task, [builds[i]])
                measured[i].append(m)
            if bar is not None:
                bar.set_description("final rounds")
                bar.set_postfix_str(f"round {played + 1}", refresh=True)

    def verdicts(alpha: float = ALPHA) -> dict[int, Verdict]:
        return {i: judge([Pair(_sample(d), _sample(c)) for d, c in zip(measured[0], measured[i])], len(others),
                         alpha=alpha) for i in others}  # fmt: skip

    names = {i: candidates[i].point.describe() for i in alive}
    if others:
        play(alive, total)
        judged = verdicts()
        decision = decide(judged, names)
        # Load or a few jittery rounds may have cost the closest finalist its crown: where it
        # leads (won most rounds) or the machine was loaded, measure it against the default for
        # SECOND_ROUNDS times as many rounds again (once), and judge it on all of them at half
        # the level (einc.tune.decide: SECOND_LOOK).
        closest = max(others, key=lambda i: judged[i].speedup if math.isfinite(judged[i].speedup) else -math.inf)
        lead = judged[closest]
        if decision.kept_default and lead.speedup > 1.0 and (lead.loaded or lead.leads):
            play([0, closest], SECOND_ROUNDS * total)
            decision = decide({**judged, closest: verdicts(ALPHA * SECOND_LOOK)[closest]}, names)
    else:
        decision = Decision(None, {}, "no finalist built: " + "; ".join(f"{names.get(i, candidates[i].point.describe())}: "
                                                                      f"{failed[i].reason}" for i in failed))  # fmt: skip
    finals = []
    for i in [0, *others, *sorted(failed)]:
        runs = measured.get(i, [])
        times = tuple(m.median_s for m in runs if m.ok)
        base = failed.get(i) or (runs[-1] if not times else MeasureResult(candidates[i], Status.OK, build_s=builds[i].seconds))
        extra: dict[str, object] = {"loads": [round(_sample(m).load, 4) for m in runs],
                                    "quiet": [round(_sample(m).quiet_share, 4) for m in runs]}  # fmt: skip
        if i in decision.verdicts:
            extra["verdict"] = decision.verdicts[i].to_json()
        finals.append(_final(base, times, tag, len(runs), extra))
    result.finals = finals
    result.decision = decision if decision.crowned is None else Decision(others.index(decision.crowned) + 1,
                                                                          decision.verdicts, decision.reason)  # fmt: skip


def _sample(m: MeasureResult) -> Sample:
    return Sample.of(m.median_s, m.extra) if m.ok else Sample(math.inf)


def _final(base: MeasureResult, times: Sequence[float], tag: str, rounds: int,
           extra: dict[str, object] | None = None) -> MeasureResult:  # fmt: skip
    """A finalist's record of the final rounds: its medians, one per round it was measured in."""
    status, reason = (Status.OK, "") if times else (base.status if not base.ok else Status.NOISY, base.reason)
    return MeasureResult(base.candidate, status, reason, tuple(times), base.build_s,
                         extra={"final": tag, "rounds": rounds, **(extra or {})})  # fmt: skip


def _crown(result: TuneResult) -> None:
    """`best` and `default` from the decision: `finals[decision.crowned]` (the default's
    record, first, when kept), marked `best` with the reason; no other final is marked."""
    assert result.decision is not None and result.finals
    chosen = result.decision.crowned or 0
    marked = []
    for i, f in enumerate(result.finals):
        extra = {k: v for k, v in f.extra.items() if k not in ("best", "decision", "kept_default")}
        if i == chosen:
            extra.update(best=True, kept_default=result.decision.kept_default, decision=result.decision.reason)
        marked.append(dataclasses.replace(f, extra=extra))
    result.finals = marked
    result.best = marked[chosen]
    result.default = marked[0] if marked[0].ok or result.default is None else result.default


DISQUALIFYING = (Status.WRONG, Status.CRASHED, Status.TIMEOUT, Status.INTERNAL, Status.REFUSED)
"""What, on the winner's second measurement, takes its place away (NOISY does not)."""


def _verify(task: TuneTask, best: MeasureResult, builder: Builder, runner: Runner) -> MeasureResult:
    """The best candidate built and measured again; a LocalRunner's copy (a DaskRunner's
    `reseeded`) draws its inputs from the next seed (other runners measure on their own
    inputs again)."""
    from einc.tune.cluster import DaskRunner
    from einc.tune.measure import LocalRunner

    fresh: Runner = runner
    if isinstance(runner, LocalRunner):
        fresh = dataclasses.replace(runner, seed=runner.seed + 1, cutoff_s=None)
    elif isinstance(runner, DaskRunner):
        fresh = runner.reseeded(runner.template.seed + 1)
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
    if result.fastest is not None:
        postfix["fastest trial"] = f"{result.fastest.median_s * 1e3:.3f}ms"
    bar.set_postfix(postfix, refresh=False)


def bar_postfix(result: TuneResult) -> dict[str, str]:
    """What the progress bar shows when the tuner is done: the best as the summary names it."""
    if result.decision is None:
        fastest = f"{result.fastest.median_s * 1e3:.3f}ms" if result.fastest is not None else "none"
        return {"best": "none decided", "fastest trial": fastest}
    return {"best": result.best_line()}
