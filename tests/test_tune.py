"""The tuning loop end to end on C: a tiny search, faults that never win, records that survive
a killed tuner and two tuners at once, and the `einc tune` command line."""

from __future__ import annotations

import os
import re
import signal
import sqlite3
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pytest

from einc.compiler.records import RecordContext
from einc.cli import main
from einc.schedule.script import Schedule
from einc.tune.decide import rounds_needed
from einc.tune.measure import LocalBuilder, LocalRunner
from einc.tune.records import RecordDB
from einc.tune.space import SearchSpace
from einc.tune.tuner import tune
from einc.tune.types import EARLY_STOP, BuildResult, Candidate, MeasureResult, Point, Status, TuneTask
from tests.test_tune_measure import doctored

ROOT = Path(__file__).resolve().parent.parent

MATMUL = """# a small matmul
input input0: float32[64, 96]
input input1: float32[96, 80]

output0[N, M] +=! input0[N, K] * input1[K, M]
"""


@pytest.fixture
def program(tmp_path: Path) -> Path:
    path = tmp_path / "mm.ein"
    path.write_text(MATMUL)
    return path


TRIAL = "json_extract(extra, '$.final') IS NULL"
"""A search's trial (not a finalist's paired re-measurement)."""


def _records(db: Path) -> list[tuple[str, str, str]]:
    with sqlite3.connect(db) as conn:
        return conn.execute(f"SELECT sketch, knobs, status FROM records WHERE {TRIAL} ORDER BY id").fetchall()


FAST = {"repeats": 3, "min_repeat_s": 0.01}
"""Runner settings for tests: shorter measurements (the decision's rounds, not the repeats, make
it sound)."""


def test_tiny_tune_finds_a_correct_kernel_and_records_every_trial(program: Path, tmp_path: Path) -> None:
    task = TuneTask.from_file(program)
    with RecordDB(tmp_path / "t.db") as db:
        result = tune(task, trials=6, workers=2, threads=1, db=db, seed=3, runner_options=FAST)
        assert result.trials == 6
        assert result.default is not None and result.default.ok, result.default
        assert result.decision is not None and result.best is not None and result.best.ok, result.summary()
        # crowned only when faster than the default in the same rounds; else the default is kept
        verdict = result.best.extra.get("verdict")
        assert result.kept_default or (isinstance(verdict, dict) and verdict["speedup"] > 1 and verdict["p"] <= 0.05)
        assert result.kept_default or (result.verified is not None and result.verified.ok)
        rows = db.trials(task.key, "c", _device(db, task))
        assert len(rows) == 6
        best = db.best(task.key, "c", _device(db, task))
        assert best is not None and best.is_decision and best.decision == result.decision.reason
        assert best.point() == result.best.candidate.point and best.median_s == pytest.approx(result.best.median_s)
        # the final rounds: the default first, every finalist measured as often as the default
        assert result.finals[0].candidate.point == SearchSpace.from_task(task).default_point()
        if len(result.finals) > 1:
            assert len(result.finals[0].times) >= rounds_needed(len(result.finals) - 1)
            assert all(f.extra["final"] == result.finals[0].extra["final"] for f in result.finals)
    # the best schedule is an ordinary script that compiles to the right numbers
    kernel = task.compilation(Schedule.parse(result.best.candidate.schedule)).kernel()
    rng = np.random.default_rng(0)
    a = rng.uniform(0.5, 2, (64, 96)).astype(np.float32)
    b = rng.uniform(0.5, 2, (96, 80)).astype(np.float32)
    np.testing.assert_allclose(kernel(input0=a, input1=b)["output0"], a.astype(np.float64) @ b, rtol=1e-4)


def _device(db: RecordDB, task: TuneTask) -> RecordContext:
    from einc.compiler.records import record_context
    from einc.targets import get_target

    return record_context(get_target(task.target))


# ---- faults never win ------------------------------------------------------------------------
SEGFAULT = "  *(volatile int *)0 = 1;"
FOREVER = "  volatile int spin = 1;\n  while (spin) {}"
NOTHING = "  (void)output0;"  # the fastest kernel of all, and wrong: outputs never written
LIAR = "  for (int i = 0; i < 64 * 80; i++) output0[i] = 1.0f;"  # fast, wrong numbers


class FaultyBuilder:
    """A LocalBuilder whose first non-default candidates are replaced by kernels that crash,
    hang, write nothing or write wrong numbers (the candidate keeps its point and script)."""

    def __init__(self, inner: LocalBuilder, task: TuneTask, default: Point):
        self.inner, self.task, self.default = inner, task, default
        self.faults = [SEGFAULT, FOREVER, NOTHING, LIAR]
        self.faulted: list[Point] = []

    def build(self, task: TuneTask, candidates: Sequence[Candidate]) -> list[BuildResult]:
        builds = self.inner.build(task, candidates)
        out = []
        for build in builds:
            if build.status is Status.OK and build.candidate.point != self.default and self.faults:
                build = BuildResult(build.candidate, Status.OK, artifact=self._doctored(self.faults.pop(0)))
                self.faulted.append(build.candidate.point)
            out.append(build)
        return out

    def _doctored(self, body: str) -> object:
        return doctored(self.task, body, "fault").artifact


def test_crashing_hanging_and_wrong_candidates_never_become_the_best(program: Path, tmp_path: Path) -> None:
    task = TuneTask.from_file(program)
    space = SearchSpace.from_task(task)
    with LocalBuilder(workers=2) as inner, LocalRunner(timeout_s=3.0, threads=1) as runner, RecordDB(tmp_path / "f.db") as db:
        builder = FaultyBuilder(inner, task, space.default_point())
        result = tune(task, space=space, policy="random", trials=8, batch=8, builder=builder, runner=runner,
                      db=db, seed=1)  # fmt: skip
        assert len(builder.faulted) == 4, builder.faulted
        statuses = {t.result.candidate.point: t.result.status for t in result.history}
        assert [statuses[p] for p in builder.faulted] == [Status.CRASHED, Status.TIMEOUT, Status.WRONG, Status.WRONG]
        assert result.best is not None and result.best.candidate.point not in builder.faulted
        best = db.best(task.key, "c", _device(db, task))
        assert best is not None and best.point() not in builder.faulted
        recorded = {r.point(): r.status for r in db.trials(task.key, "c", _device(db, task))}
        assert {recorded[p] for p in builder.faulted} == {"crashed", "timeout", "wrong"}


class NoisyFinals:
    """A LocalRunner whose measurements in the final rounds are NOISY for every candidate but the
    default (the search itself is measured as usual)."""

    def __init__(self, inner: LocalRunner, default: Point):
        self.inner, self.default, self.searching, self.finals = inner, default, False, False
        self.spoiled = 0

    def set_best(self, best_s: float | None, factor: float = EARLY_STOP) -> None:
        # the search passes its fastest so far before each batch; the final rounds pass None
        self.finals = best_s is None and self.searching
        self.searching = self.searching or best_s is not None
        self.inner.set_best(best_s, factor)

    def run(self, task: TuneTask, builds: Sequence[BuildResult]) -> list[MeasureResult]:
        measured = self.inner.run(task, builds)
        if not self.finals:
            return measured
        self.spoiled += sum(b.candidate.point != self.default for b in builds)
        return [m if b.candidate.point == self.default else MeasureResult(b.candidate, Status.NOISY, "load")
                for b, m in zip(builds, measured)]  # fmt: skip


def test_finalists_noisy_in_the_final_rounds_are_not_crowned(program: Path, tmp_path: Path) -> None:
    task = TuneTask.from_file(program)
    space = SearchSpace.from_task(task)
    with LocalBuilder(workers=2) as builder, LocalRunner(threads=1, **FAST) as inner, RecordDB(tmp_path / "n.db") as db:
        runner = NoisyFinals(inner, space.default_point())
        result = tune(task, space=space, policy="random", trials=6, batch=3, builder=builder, runner=runner, db=db,
                      seed=2, verify=False)  # fmt: skip
        assert result.decision is not None and result.kept_default, result.summary()
        if runner.spoiled:  # a trial beat the default's: its final rounds were all noise
            assert "no finalist beat the default" in result.decision.reason and "not measured" in result.decision.reason
        best = db.best(task.key, "c", _device(db, task))
        assert best is not None and best.kept_default and best.point() == space.default_point()


# ---- records survive a killed tuner and two tuners at once -----------------------------------
def _einc(*args: str, **kwargs) -> subprocess.Popen:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.Popen([sys.executable, "-m", "einc.cli", *args], env=env, cwd=ROOT,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, **kwargs)  # fmt: skip


def _count(db: Path, where: str = "1") -> int:
    if not db.exists():
        return 0
    try:
        with sqlite3.connect(db, timeout=10) as conn:
            return conn.execute(f"SELECT count(*) FROM records WHERE {where} AND {TRIAL}").fetchone()[0]
    except sqlite3.OperationalError:  # the tuner has not made its tables yet
        return 0


def test_sigkill_then_resume_keeps_every_finished_trial(program: Path, tmp_path: Path) -> None:
    db = tmp_path / "k.db"
    proc = _einc("tune", str(program), "--trials", "40", "--db", str(db), "--workers", "1", "--threads", "1",
                 "--quiet", start_new_session=True)  # fmt: skip
    deadline = time.monotonic() + 240
    while _count(db) < 3 and time.monotonic() < deadline and proc.poll() is None:
        time.sleep(0.2)
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()
    before = _records(db)
    assert len(before) >= 3, before
    with sqlite3.connect(db) as conn:
        assert conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
    total = len(before) + 3
    done = _einc("tune", str(program), "--trials", str(total), "--db", str(db), "--resume", "--workers", "1",
                 "--threads", "1", "--quiet")  # fmt: skip
    out, err = done.communicate(timeout=300)
    assert done.returncode == 0, err
    after = _records(db)
    assert after[: len(before)] == before  # every finished trial kept, untouched
    assert len(after) == total, (len(before), len(after), out)
    points = [(s, k) for s, k, _ in after]
    assert len(set(points)) == len(points)  # the resumed search measured nothing twice
    assert f"{len(before)} earlier trials resumed" in out


def _stat(pid: int) -> list[str] | None:
    """/proc/PID/stat's fields from the third (the state) on; None for no such process."""
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return text[text.rindex(")") + 2 :].split()


def _children(pid: int) -> dict[int, tuple[str, str]]:
    """The processes whose parent is `pid`: pid -> (start time, command line). The start time
    tells a process from a later one given the same pid."""
    found = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit() and (fields := _stat(int(entry.name))) is not None and int(fields[1]) == pid:
            try:
                command = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
            except OSError:
                continue
            found[int(entry.name)] = (fields[19], command)
    return found


def _alive(pid: int, start: str) -> bool:
    fields = _stat(pid)
    return fields is not None and fields[19] == start and fields[0] != "Z"


def test_kill_9_of_einc_tune_leaves_no_worker_behind(program: Path, tmp_path: Path) -> None:
    db = tmp_path / "k9.db"
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    proc = subprocess.Popen([sys.executable, "-m", "einc.cli", "tune", str(program), "--trials", "40", "--db", str(db),
                             "--workers", "2", "--threads", "1", "--quiet"], env=env, cwd=ROOT,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)  # (a survivor holds no pipe of ours)
    children: dict[int, tuple[str, str]] = {}
    try:
        deadline = time.monotonic() + 240
        while time.monotonic() < deadline and proc.poll() is None and _count(db) < 2:
            time.sleep(0.2)
        children = _children(proc.pid)
        assert proc.poll() is None, proc.returncode
        commands = " | ".join(c for _, c in children.values())
        # its build workers, their resource tracker and the runner's worker
        for part in ("multiprocessing.spawn", "multiprocessing.resource_tracker", "einc.tune.worker"):
            assert part in commands, commands
        proc.kill()  # SIGKILL to the tuner alone: none of its own clean-up runs
        proc.wait()
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and any(_alive(pid, start) for pid, (start, _) in children.items()):
            time.sleep(0.1)
        left = [command for pid, (start, command) in children.items() if _alive(pid, start)]
        assert not left, left
    finally:
        if proc.poll() is None:
            proc.kill()
        for pid, (start, _) in children.items():
            if _alive(pid, start):
                os.kill(pid, signal.SIGKILL)


def test_two_tuners_on_one_database_lose_nothing(program: Path, tmp_path: Path) -> None:
    db = tmp_path / "two.db"
    procs = [
        _einc("tune", str(program), "--trials", "5", "--db", str(db), "--workers", "1", "--threads", "1",
              "--seed", str(seed), "--quiet")  # fmt: skip
        for seed in (1, 2)
    ]
    for p in procs:
        out, err = p.communicate(timeout=300)
        assert p.returncode == 0, err
    assert _count(db) == 10
    assert _count(db, "status = 'ok'") >= 2


# ---- the command line ------------------------------------------------------------------------
def test_einc_tune_writes_the_best_script_and_compile_uses_the_record(
    program: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    db, best = tmp_path / "c.db", tmp_path / "best.mlir"
    code = main(["tune", str(program), "--target", "c", "--trials", "3", "--db", str(db), "-o", str(best),
                 "--threads", "1", "--quiet"])  # fmt: skip
    out = capsys.readouterr().out
    assert code == 0, out
    assert "bayes: 3 trials" in out and f" is in {best}" in out
    assert re.search(r"einc: (the best schedule|the default schedule, kept,) is in", out), out
    Schedule.parse(best.read_text(), str(best))  # a script einc reads back
    assert main(["compile", str(program), "--db", str(db)]) == 0
    captured = capsys.readouterr()
    assert "einc: using tuning record" in captured.err and str(db) in captured.err
    assert main(["run", str(program), "--schedule", str(best)]) == 0
    assert "ok" in capsys.readouterr().out


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--trials", "0"], "--trials must be at least 1"),
        (["--time-budget", "soon"], "--time-budget takes a positive duration"),
        (["--strategy", "genetic"], "invalid choice"),
        (["--target", "fortran"], "fortran"),
        (["-o", "/no/such/dir/best.mlir"], "no directory"),
    ],
)
def test_einc_tune_refuses_bad_options_with_located_errors(
    program: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], args: list[str], message: str
) -> None:
    code = main(["tune", str(program), "--db", str(tmp_path / "x.db"), "--quiet", *args])
    err = capsys.readouterr().err
    assert code == 1, err
    assert message in err and ": error: " in err
    assert "Traceback" not in err


def test_einc_tune_of_a_bad_program_is_a_located_error(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    bad = tmp_path / "bad.ein"
    bad.write_text("input input0: float32[4]\noutput0[N] = input9[N]\n")
    code = main(["tune", str(bad), "--db", str(tmp_path / "x.db"), "--quiet"])
    err = capsys.readouterr().err
    assert code == 1 and f"{bad}:2:" in err, err


def test_einc_tune_report_plots_bayes_beside_random(program: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    png = tmp_path / "conv.png"
    code = main(["tune", str(program), "--trials", "2", "--db", str(tmp_path / "r.db"), "--report", str(png),
                 "--threads", "1", "--quiet"])  # fmt: skip
    out = capsys.readouterr().out
    assert code == 0, out
    assert "bayes: 2 trials" in out and "random: 2 trials" in out
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_ctrl_c_stops_cleanly_with_the_records_kept(program: Path, tmp_path: Path) -> None:
    db = tmp_path / "i.db"
    proc = _einc("tune", str(program), "--trials", "40", "--db", str(db), "--workers", "1", "--threads", "1",
                 "--quiet", start_new_session=True)  # fmt: skip
    deadline = time.monotonic() + 240
    while _count(db) < 2 and time.monotonic() < deadline and proc.poll() is None:
        time.sleep(0.2)
    os.killpg(proc.pid, signal.SIGINT)  # what a terminal's Ctrl-C does: the whole process group
    out, err = proc.communicate(timeout=60)
    assert proc.returncode in (0, 130), err
    assert "Traceback" not in err, err
    kept = _count(db)
    assert kept >= 2
    assert _count(db, "status = 'internal-error'") == 0, _records(db)
    if proc.returncode == 0:
        assert "(interrupted)" in out, out


def test_einc_tune_on_a_target_that_cannot_run_here_is_a_located_error(
    program: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    db = tmp_path / "h.db"
    code = main(["tune", str(program), "--target", "hip", "--db", str(db), "--quiet"])
    err = capsys.readouterr().err
    assert code == 1 and f"{program}:1:1: error: HIP kernels cannot run here" in err, err
    assert _count(db) == 0  # nothing measured, nothing recorded
