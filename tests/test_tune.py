"""The tuning loop end to end on C: a tiny search, faults that never win, records that survive
a killed tuner and two tuners at once, and the `einc tune` command line."""

from __future__ import annotations

import os
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from einc.cli import main
from einc.schedule.script import Schedule
from einc.tune.measure import LocalBuilder, LocalRunner
from einc.tune.records import RecordDB
from einc.tune.space import SearchSpace
from einc.tune.tuner import tune
from einc.tune.types import BuildResult, Candidate, MeasureResult, Point, Status, TuneTask
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


def test_tiny_tune_finds_a_correct_kernel_and_records_every_trial(program: Path, tmp_path: Path) -> None:
    task = TuneTask.from_file(program)
    with RecordDB(tmp_path / "t.db") as db:
        result = tune(task, trials=6, workers=2, threads=1, db=db, seed=3)
        assert result.trials == 6
        assert result.default is not None and result.default.ok, result.default
        assert result.best is not None and result.best.ok
        assert result.best.median_s <= result.default.median_s
        assert result.verified is not None and result.verified.ok
        rows = db.trials(task.key, "c", _device(db, task))
        assert len(rows) == 6
        best = db.best(task.key, "c", _device(db, task))
        assert best is not None and best.median_s == pytest.approx(result.best.median_s)
        # the finalists (the default among them) were re-measured against each other, and the
        # records' best is the final ranking's winner
        assert len(result.finals) >= 2 and all(len(f.times) == 3 for f in result.finals)
        assert result.default in result.finals and result.best in result.finals
        assert result.best.median_s == min(f.median_s for f in result.finals)
        assert best.extra.get("final") == result.best.extra["final"] and best.point() == result.best.candidate.point
    # the best schedule is an ordinary script that compiles to the right numbers
    kernel = task.compilation(Schedule.parse(result.best.candidate.schedule)).kernel()
    rng = np.random.default_rng(0)
    a = rng.uniform(0.5, 2, (64, 96)).astype(np.float32)
    b = rng.uniform(0.5, 2, (96, 80)).astype(np.float32)
    np.testing.assert_allclose(kernel(input0=a, input1=b)["output0"], a.astype(np.float64) @ b, rtol=1e-4)


def _device(db: RecordDB, task: TuneTask) -> str:
    from einc.compiler.records import device_fingerprint
    from einc.targets import get_target

    return device_fingerprint(get_target(task.target))


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

    def build(self, task: TuneTask, candidates: list[Candidate]) -> list[BuildResult]:
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
    """A LocalRunner whose measurements in the final ranking are NOISY for every finalist but
    the first one it meets (the search itself is measured as usual)."""

    def __init__(self, inner: LocalRunner):
        self.inner, self.searching, self.finals = inner, False, False
        self.survivor: Candidate | None = None

    def set_best(self, best_s: float | None) -> None:
        # the search passes its best so far before each batch; the final ranking passes None
        self.finals = best_s is None and self.searching
        self.searching = self.searching or best_s is not None
        self.inner.set_best(best_s)

    def run(self, task: TuneTask, builds: list[BuildResult]) -> list[MeasureResult]:
        measured = self.inner.run(task, builds)
        if not self.finals:
            return measured
        self.survivor = self.survivor or builds[0].candidate
        return [m if b.candidate == self.survivor else MeasureResult(b.candidate, Status.NOISY, "load")
                for b, m in zip(builds, measured)]  # fmt: skip


def test_a_lone_surviving_finalist_does_not_replace_the_searchs_best(program: Path, tmp_path: Path) -> None:
    task = TuneTask.from_file(program)
    with LocalBuilder(workers=2) as builder, LocalRunner(threads=1) as inner, RecordDB(tmp_path / "n.db") as db:
        runner = NoisyFinals(inner)
        result = tune(task, policy="random", trials=4, batch=2, builder=builder, runner=runner, db=db, seed=2,
                      verify=False)  # fmt: skip
        assert runner.survivor is not None  # a final ranking was tried, and only one finalist got through
        searched = min((t.result for t in result.history if t.result.ok), key=lambda m: m.median_s)
        assert result.finals == [] and result.best == searched
        best = db.best(task.key, "c", _device(db, task))
        assert best is not None and "final" not in best.extra and best.point() == searched.candidate.point


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
    assert "bayes: 3 trials" in out and f"the best schedule is in {best}" in out
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
