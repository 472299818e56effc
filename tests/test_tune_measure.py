"""The tuner's builder and runner (einc.tune.measure, einc.tune.worker): a real candidate builds
and measures; an illegal schedule is refused with its location; C kernels doctored to segfault,
hang, abort, write wrong numbers, leave their outputs unwritten, go wrong after their first
run, write into an input or past an output are CRASHED, TIMEOUT or WRONG, and the runner goes on (a batch gets one result per build, in
order); a build worker that dies is INTERNAL. The noise verdicts are checked on made-up timings.
Timings on this machine are noisy: only their plausibility is asserted, never a speed.
"""

from __future__ import annotations

import dataclasses
import os
import re
import signal
import time
from pathlib import Path

import pytest

from einc.runtime.signature import KernelSignature
from einc.tune.measure import (
    CArtifact,
    LocalBuilder,
    LocalRunner,
    RebuildArtifact,
    build_candidate,
    c_artifact,
)
from einc.tune.timing import NoiseLimits, Timing
from einc.tune.types import BuildResult, Candidate, Point, Status, TuneTask
from tests.test_device_targets import require

ROOT = Path(__file__).resolve().parent.parent
SMALL = {"[256, 512]": "[16, 32]", "[512, 256]": "[32, 8]"}
"""examples/matmul.ein made small: output0 is float32[16, 8]."""

LENIENT = NoiseLimits(hopeless_spread=float("inf"), hopeless_cpu=0.0)
"""Never NOISY: this machine's load must not decide a test (noisy timings stay OK, flagged)."""


def matmul_task(target: str = "c") -> TuneTask:
    text = (ROOT / "examples" / "matmul.ein").read_text()
    for big, small in SMALL.items():
        text = text.replace(big, small)
    return TuneTask(text, target, "matmul_small.ein")


def default_candidate(task: TuneTask) -> Candidate:
    comp = task.compilation(None)
    comp.run_until("scheduled")
    return Candidate(Point("default"), comp.schedule_text or "default")  # a target without a default schedule


def runner(**kwargs: object) -> LocalRunner:
    settings: dict[str, object] = {"repeats": 3, "min_repeat_s": 0.005, "max_retries": 1, "noise": LENIENT}
    settings.update(kwargs)
    return LocalRunner(**settings)  # type: ignore[arg-type]


@pytest.fixture(scope="module")
def task() -> TuneTask:
    return matmul_task()


@pytest.fixture(scope="module")
def builder():
    with LocalBuilder(workers=2, timeout_s=60) as b:
        yield b


def doctored(task: TuneTask, body: str, name: str, keep: bool = False) -> BuildResult:
    """A build of the default kernel's C source with its body replaced by `body` (or, with
    `keep`, with `body` added at its end)."""
    comp = task.compilation(None)
    source = comp.source_text()
    match = re.search(r"void kernel\([^)]*\) \{\n(.*)\}\s*$", source, re.DOTALL)
    assert match is not None, source
    inner = match.group(1) + body if keep else body
    source = "#include <stdio.h>\n" + source[: match.start(1)] + inner + "\n}\n"
    artifact = c_artifact(source, KernelSignature.from_module(comp.module("target")))
    return BuildResult(Candidate(Point(name), f"// {name}"), Status.OK, artifact=artifact)


SEGFAULT = "  *(volatile int *)0 = 1;"
FOREVER = "  volatile int spin = 1;\n  while (spin) {}"
WRONG = "  for (int i = 0; i < 16 * 8; i++) output0[i] = 1.0f;"
UNTOUCHED = "  (void)output0;"
ABORT = '  fprintf(stderr, "einc test: giving up\\n");\n  abort();'  # its last words are kept
DRIFT = "  static int runs = 0;\n  if (runs++ > 0) output0[3] += 1.0f;"  # right once, then wrong
CLOBBER = "  ((float *)input0)[5] = 0.0f;"  # right outputs, but the input changed under the caller
OVERRUN = "  output0[16 * 8] = 1.0f;"  # right outputs, and one float written past the end


def test_a_real_candidate_builds_and_measures_ok(task: TuneTask, builder: LocalBuilder) -> None:
    [build] = builder.build(task, [default_candidate(task)])
    assert build.status is Status.OK, build.reason
    assert isinstance(build.artifact, CArtifact) and Path(build.artifact.library).exists()
    assert build.seconds > 0
    with runner(threads=1) as r:
        [result] = r.run(task, [build])
    assert result.status is Status.OK, result.reason
    assert len(result.times) == 3
    assert all(1e-8 < t < 1e-2 for t in result.times), result.times  # 4096 multiply-adds
    assert result.median_s in result.times
    for key in ("cpu_s", "wall_s", "spread", "retries", "threads"):
        assert key in result.extra
    assert result.extra["threads"] == 1 and result.extra["wall_s"] > 0 and result.extra["cpu_s"] > 0
    assert result.extra["copies"] > 1  # a tiny kernel rotates through copies of its data
    assert result.build_s == build.seconds and result.run_s > 0


def test_an_illegal_schedule_is_refused_with_its_location(task: TuneTask, builder: LocalBuilder) -> None:
    good = default_candidate(task)
    bad = Candidate(Point("bad"), good.schedule.replace("transform.yield", "transform.not_an_op", 1))
    [build] = builder.build(task, [bad])
    assert build.status is Status.REFUSED and build.artifact is None
    assert re.match(r"<candidate>:\d+:\d+: error: ", build.reason), build.reason
    with runner() as r:
        [result] = r.run(task, [build])
    assert result.status is Status.REFUSED and result.reason == build.reason and not result.times


def test_a_c_compiler_rejecting_the_source_is_internal(task: TuneTask, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("EINC_CFLAGS", "-fno-such-flag-einc")
    result = build_candidate(task, default_candidate(task))
    assert result.status is Status.INTERNAL and "the C compiler rejected" in result.reason


def dying_job(task: TuneTask, candidate: Candidate) -> BuildResult:
    """A build job that kills its worker for the candidate named 'die', sleeps for 'sleep'."""
    if candidate.point.sketch == "die":
        os.kill(os.getpid(), signal.SIGKILL)
    if candidate.point.sketch == "sleep":
        time.sleep(60)
    return build_candidate(task, candidate)


def test_a_dying_build_worker_is_internal_and_the_pool_recovers(task: TuneTask) -> None:
    good = default_candidate(task)
    die = Candidate(Point("die"), good.schedule)
    sleep = Candidate(Point("sleep"), good.schedule)
    with LocalBuilder(workers=2, timeout_s=8, job=dying_job) as b:
        results = b.build(task, [good, die, good, sleep])
        assert [r.status for r in results] == [Status.OK, Status.INTERNAL, Status.OK, Status.TIMEOUT]
        assert results[1].reason.startswith("build worker died") and "SIGKILL" in results[1].reason
        assert "ran past 8 s" in results[3].reason
        assert [r.candidate for r in results] == [good, die, good, sleep]
        [again] = b.build(task, [good])  # the recreated pool builds on
        assert again.status is Status.OK


def test_faulty_kernels_fail_with_reasons_and_the_runner_goes_on(task: TuneTask, builder: LocalBuilder) -> None:
    [good] = builder.build(task, [default_candidate(task)])
    [refused] = builder.build(task, [Candidate(Point("bad"), "not a schedule")])
    batch = [
        good,
        doctored(task, SEGFAULT, "segfault"),
        good,
        doctored(task, FOREVER, "forever"),
        good,
        doctored(task, WRONG, "wrong"),
        doctored(task, UNTOUCHED, "untouched"),
        refused,
        doctored(task, ABORT, "abort"),
        doctored(task, DRIFT, "drift", keep=True),
        doctored(task, CLOBBER, "clobber", keep=True),
        doctored(task, OVERRUN, "overrun", keep=True),
        good,
    ]
    with runner(timeout_s=1.0) as r:
        results = r.run(task, batch)
    assert [m.candidate for m in results] == [b.candidate for b in batch]
    expected = [Status.OK, Status.CRASHED, Status.OK, Status.TIMEOUT, Status.OK, Status.WRONG, Status.WRONG,
                Status.REFUSED, Status.CRASHED, Status.WRONG, Status.WRONG, Status.WRONG, Status.OK]  # fmt: skip
    assert [m.status for m in results] == expected, [(m.status, m.reason) for m in results]
    by_name = {m.candidate.point.sketch: m for m in results}
    assert "SIGSEGV" in by_name["segfault"].reason
    assert "SIGABRT" in by_name["abort"].reason and "einc test: giving up" in by_name["abort"].reason
    assert "giving up" not in by_name["segfault"].reason
    assert "time limit (1 s per run)" in by_name["forever"].reason
    assert by_name["forever"].run_s < 1.0 + 5.0  # the worker was warm: the limit, plus loading
    assert re.search(r"max error \d\S* vs the float64 reference", by_name["wrong"].reason)
    assert "128 of 128 elements are NaN" in by_name["untouched"].reason
    assert "after the warm-up" in by_name["drift"].reason
    assert "wrote into its input 'input0'" in by_name["clobber"].reason
    assert "wrote past the end of its output 'output0' after the first run" in by_name["overrun"].reason
    for m in results:
        assert bool(m.times) == m.ok


def test_noise_is_detected_from_timings() -> None:
    limits = NoiseLimits()
    clean = Timing((1.0, 1.01, 0.99, 1.0, 1.02), cpu_s=5.0, wall_s=5.0, wait_s=0.01)
    assert limits.noise(clean) == ""
    spread = Timing((1.1, 1.6, 1.0, 1.4, 1.1), cpu_s=6.2, wall_s=6.2)
    assert "repeats spread" in limits.noise(spread)
    starved = Timing((1.0, 1.0, 1.0), cpu_s=2.1, wall_s=3.0, wait_s=0.0)
    assert "ran 70% of the wall time" in limits.noise(starved)
    waiting = Timing((1.0, 1.0, 1.0), cpu_s=6.0, wall_s=3.0, wait_s=0.6)  # two threads, one preempted
    assert "waited 20%" in limits.noise(waiting)
    # the wait of the process's own threads for each other (a device runtime's pool) on a quiet
    # machine is not noise; only what other processes' CPU time can account for
    pool = Timing((1.0, 1.0, 1.0), cpu_s=6.0, wall_s=3.0, wait_s=0.6, others_s=0.03)
    assert limits.noise(pool) == "" and pool.foreign_wait_s == pytest.approx(0.03)
    assert "waited 10%" in limits.noise(dataclasses.replace(pool, others_s=0.3))
    # measure again while noisy, up to max_retries more times
    assert limits.retry([spread], 2) and limits.retry([spread, spread], 2)
    assert not limits.retry([spread, spread, spread], 2) and not limits.retry([clean], 2)
    # the clean measurement is kept even when a noisy one looks faster
    fast_noisy = Timing((0.5, 0.9, 0.4, 0.8), cpu_s=1.0, wall_s=2.6)
    best, why, hopeless = limits.verdict([fast_noisy, clean])
    assert best is clean and why == "" and not hopeless
    # all noisy: the fastest is kept and flagged; hopeless when the repeats are all over the place
    best, why, hopeless = limits.verdict([spread, starved])
    assert best is starved and "ran 70%" in why and not hopeless
    wild = Timing((1.0, 3.0, 0.5, 2.0), cpu_s=6.5, wall_s=6.5)
    best, why, hopeless = limits.verdict([wild])
    assert best is wild and hopeless


@pytest.mark.opencl
def test_noisy_timings_are_measured_again_then_flagged_or_refused(task: TuneTask, builder: LocalBuilder) -> None:
    [build] = builder.build(task, [default_candidate(task)])
    always_noisy = NoiseLimits(max_spread=-1.0, hopeless_spread=float("inf"), hopeless_cpu=0.0)
    with runner(noise=always_noisy, max_retries=1) as r:
        [flagged] = r.run(task, [build])
    assert flagged.status is Status.OK and flagged.times
    assert flagged.extra["retries"] == 1 and "repeats spread" in flagged.extra["noisy"]
    hopeless = NoiseLimits(max_spread=-1.0, hopeless_spread=-1.0)
    with runner(noise=hopeless, max_retries=2) as r:
        [refused] = r.run(task, [build])
    assert refused.status is Status.NOISY and not refused.times and refused.median_s == float("inf")
    assert refused.extra["retries"] == 2 and refused.reason.startswith("timings unreliable after 3 measurements")


def test_an_opencl_candidate_measures_ok() -> None:
    require("opencl")
    task = matmul_task("opencl")
    with LocalBuilder(workers=1, timeout_s=120) as b:
        [build] = b.build(task, [default_candidate(task)])
    assert build.status is Status.OK, build.reason
    assert isinstance(build.artifact, RebuildArtifact)
    with runner(timeout_s=30) as r:
        [result] = r.run(task, [build])
    assert result.status is Status.OK, result.reason
    assert len(result.times) == 3 and all(0 < t < 1.0 for t in result.times)



def test_a_candidate_far_slower_than_the_best_is_checked_and_timed_by_its_first_runs(
    task: TuneTask, builder: LocalBuilder
) -> None:
    [build] = builder.build(task, [default_candidate(task)])
    with runner(threads=1) as r:
        r.set_best(1e-12)  # every kernel is far slower than that
        [cut] = r.run(task, [build])
        r.set_best(None)
        [full] = r.run(task, [build])
    assert cut.status is Status.OK and cut.extra.get("cut") is True and cut.extra["cutoff_s"] == 1.5e-12, cut
    assert 1 <= len(cut.times) <= 3 and "runs_per_repeat" not in cut.extra  # its first runs: no repeats
    assert full.status is Status.OK and "cut" not in full.extra and len(full.times) == 3
    wrong = doctored(task, WRONG, "liar")
    with runner(threads=1) as r:
        r.set_best(1e-12)
        [lied] = r.run(task, [wrong])
    assert lied.status is Status.WRONG, lied  # a cut candidate is still checked


# ---- early stop: decided on the quickest of the first runs, on a fake clock ----------------------
class FakeClock:
    """`time` for einc.tune.worker: perf_counter and process_time advance only when a fake
    kernel runs."""

    def __init__(self) -> None:
        self.now = 0.0

    def perf_counter(self) -> float:
        return self.now

    process_time = perf_counter

    def monotonic(self) -> float:
        return self.now


class FakeJob:
    """A kernel whose runs take `seconds` each on `clock`, the first `cold` times as long."""

    def __init__(self, clock: FakeClock, seconds: float, cold: float = 1.0):
        self.clock, self.seconds, self.cold, self.calls = clock, seconds, cold, 0
        self.copies = 1
        self.data = type("Data", (), {"nbytes": 1 << 30})()  # no rotation: one copy

    def call(self, k: int) -> None:
        self.clock.now += self.seconds * (self.cold if self.calls == 0 else 1.0)
        self.calls += 1

    def add_copies(self, n: int) -> None:
        self.copies += n

    def check(self, copies: range, when: str) -> None:
        pass


def fake_measure(monkeypatch: pytest.MonkeyPatch, seconds: float, cutoff_s: float | None, cold: float = 1.0):
    from einc.tune import worker

    clock = FakeClock()
    monkeypatch.setattr(worker, "time", clock)
    monkeypatch.setattr(worker, "run_queue_wait", lambda: None)
    job = FakeJob(clock, seconds, cold)
    settings = {"repeats": 5, "min_repeat_s": 0.01, "check": True, "max_retries": 0, "noise": LENIENT,
                "cutoff_s": cutoff_s}  # fmt: skip
    attempts, runs = worker.measure(job, settings, lambda: None)  # type: ignore[arg-type]
    return attempts, runs, job


def test_a_candidate_over_the_cutoff_is_timed_by_its_first_runs_only(monkeypatch: pytest.MonkeyPatch) -> None:
    best = 1e-4
    # 1.6x the best, cut-off at 1.5x: three first runs (under 10 ms in all), then nothing more
    attempts, runs, job = fake_measure(monkeypatch, 1.6 * best, cutoff_s=1.5 * best)
    assert runs == 0 and job.calls == 3 and attempts[0].times == pytest.approx((1.6 * best,) * 3)
    # 1.4x: under the cut-off, timed in full (warm-up, calibration, 5 repeats of >= 10 ms)
    attempts, runs, job = fake_measure(monkeypatch, 1.4 * best, cutoff_s=1.5 * best)
    assert runs == 72 and len(attempts[0].times) == 5 and job.calls > 5 * 72
    # a first run 3x slower (a cold cache) does not stop a kernel as fast as the best: the
    # quickest of the first runs decides
    attempts, runs, job = fake_measure(monkeypatch, best, cutoff_s=1.5 * best, cold=3.0)
    assert runs > 0 and attempts[0].median == pytest.approx(best)
    # no cut-off (no best yet, or --early-stop 0): timed in full however slow
    attempts, runs, job = fake_measure(monkeypatch, 100 * best, cutoff_s=None)
    assert runs > 0 and len(attempts[0].times) == 5
