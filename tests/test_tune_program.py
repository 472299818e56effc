"""Whole programs tuned task by task (issue 23 item 1): a program split into the kernels of its
default schedule (identical tasks once), the gradient task scheduler's allocation, a record per
task, compiles that apply the tasks' records (numbers checked against NumPy), and `einc tune`
of a program of several kernels end to end."""

from __future__ import annotations

import math
import os
import re
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

import einc
from einc.cli import main
from einc.compiler.driver import Compilation
from einc.compiler.records import record_context
from einc.compiler.tasks import ProgramTask, merge_schedules, split_program, task_of
from einc.schedule.choice import ScheduleChoice
from einc.semantics.compare import max_error, random_inputs, tolerance
from einc.semantics.reference import run_reference
from einc.targets import get_target
from einc.tune.program import split_tasks
from einc.tune.records import RecordDB
from einc.tune.scheduler import GradientScheduler, TaskState
from einc.tune.space import SearchSpace
from einc.tune.types import Candidate, MeasureResult, Status, TuneTask

ROOT = Path(__file__).resolve().parent.parent

SMALL = """# two dense layers of one shape: 4 kernels, 3 distinct tasks
input x: float32[16, 32]
input w0: float32[32, 32]
input b0: float32[32]
input w1: float32[32, 32]
input b1: float32[32]
h0[N, M] +=! x[N, K] * w0[K, M]
a0[N, M] = (h0[N, M] + b0[M]).call(`max`, [0.0])
h1[N, M] +=! a0[N, K] * w1[K, M]
out[N, M] = h1[N, M] + b1[M]
"""


@pytest.fixture(scope="module")
def small(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("program") / "small.ein"
    path.write_text(SMALL)
    return path


def _kernels(comp: Compilation) -> list[ProgramTask]:
    """The kernels of a compilation's default schedule as tasks."""
    default = Compilation(comp.source, comp.filename, target=comp.target, schedule=ScheduleChoice.DEFAULT,
                          use_records=False)  # fmt: skip
    scheduled = default.module("scheduled")  # the ein stage first: the program is known
    return split_program(default.program, scheduled)


def _check(kernel: einc.Kernel, program_text: str, seed: int = 7) -> None:
    """The kernel's outputs against the float64 NumPy reference on fresh random inputs."""
    comp = Compilation(program_text, "<check>", use_records=False)
    module = comp.module("ein")
    inputs = random_inputs(comp.program, np.random.default_rng(seed))
    want = run_reference(module, inputs)
    got = kernel(**{k: v.copy() for k, v in inputs.items()})
    for out in comp.program.outputs:
        assert max_error(got[out.name], want[out.name]) <= tolerance(out.dtype), out.name


# ---- splitting ---------------------------------------------------------------------------------
def test_a_program_splits_into_its_kernels_and_identical_tasks_are_one(small: Path) -> None:
    task = TuneTask.from_file(small)
    kernels = _kernels(task.compilation(ScheduleChoice.DEFAULT))
    assert sorted(s for k in kernels for s in k.statements) == ["a0", "h0", "h1", "out"]  # each statement once
    split = split_tasks(task)
    by_kernels = {tuple(k.statements for k in kernels): sub for sub, kernels in split}
    assert (("h0",), ("h1",)) in by_kernels  # the two matmuls: one task, tuned once
    matmul = by_kernels[(("h0",), ("h1",))]
    assert "t0[N, M] +=! in0[N, K] * in1[K, M]" in matmul.source  # canonical names, axes kept
    assert "input in0: float32[16, 32]" in matmul.source and "input in1: float32[32, 32]" in matmul.source
    assert len({sub.key for sub, _ in split}) == len(split) < len(kernels)


def test_bert_layer_splits_with_its_projections_and_layer_norms_deduplicated() -> None:
    task = TuneTask.from_file(ROOT / "examples" / "bert_layer.ein")
    split = split_tasks(task)
    stmts = [[k.statements for k in kernels] for _, kernels in split]
    assert [("q_proj",), ("k_proj",), ("v_proj",)] in stmts  # one task for the three projections
    norms = next(s for s in stmts if any("mean1" in k for k in s))
    assert len(norms) == 2 and any("mean2" in k for k in norms)  # the two residual + layer norms
    assert sum(len(s) for s in stmts) > len(split)


def test_a_task_keeps_the_results_later_kernels_read() -> None:
    """A kernel whose intermediate a later kernel reads has it as a result too (`output`)."""
    text = "input x: float32[8, 8]\ny[N, M] = x[N, M] * 2.0\na[N, M] = y[N, M] + 1.0\nb[N, M] +=! a[N, K] * y[K, M]\n"
    comp = Compilation(text, "<t>", use_records=False)
    comp.run_until("ein")
    task = task_of(comp.program, ["y", "a"], 0)
    assert task.results == ("t0", "t1") and task.rename["t0"] == "y" and "output t0, t1" in task.source
    assert [o.name for o in TuneTask(task.source).program.outputs] == ["t0", "t1"]


# ---- the scheduler -----------------------------------------------------------------------------
def test_gradient_scheduler_warms_up_then_follows_the_formula() -> None:
    tasks = [TaskState(weight=2, flops=1e6, kind="mm"), TaskState(weight=1, flops=1e6, kind="mm"),
             TaskState(weight=1, flops=1e3, kind="add")]  # fmt: skip
    s = GradientScheduler(tasks, alpha=0.2, beta=2.0, window=3)
    for i, best in enumerate([4e-3, 1e-3, 1e-5]):  # the warm-up: each task once, in order
        assert s.next_task() == i
        s.observe(i, best, trials=1)
    # task 0: backward 0 (1 round); forward min(-g/t, beta * C / V_max - g) with V_max = 1e6 / 1e-3
    #   = min(-4e-3, 2e-3 - 4e-3) = -4e-3; weight 2, (1 - alpha): -6.4e-3
    assert s.gradient(0) == pytest.approx(2 * 0.8 * -4e-3)
    # task 1: the similar task 0 is slower: min(-1e-3, 2 * 1e6 / 1e9 - 1e-3) = -1e-3
    assert s.gradient(1) == pytest.approx(0.8 * -1e-3)
    assert s.gradient(2) == pytest.approx(0.8 * -1e-5)  # no similar task: -g/t alone
    assert s.next_task() == 0
    for best in (3e-3, 2.5e-3, 2.5e-3):
        s.observe(0, best, trials=4)
    # 4 rounds: backward (2.5e-3 - 4e-3) / 3; forward min(-2.5e-3 / 4, 2e-3 - 2.5e-3)
    backward, forward = (2.5e-3 - 4e-3) / 3, min(-2.5e-3 / 4, 2e-3 - 2.5e-3)
    assert s.gradient(0) == pytest.approx(2 * (0.2 * backward + 0.8 * forward))
    assert s.next_task() == 0  # still the most to gain (-1.6e-3 against task 1's -8e-4)
    assert s.tasks[0].trials == 13 and s.share(0) == pytest.approx(5e-3 / (5e-3 + 1e-3 + 1e-5))
    s.observe(0, math.inf, trials=4, exhausted=True)
    assert s.tasks[0].best == 2.5e-3 and s.tasks[0].done  # never worse; an exhausted task is left out
    assert s.next_task() == 1


def test_a_task_nothing_measured_right_for_gets_no_more_rounds() -> None:
    s = GradientScheduler([TaskState(), TaskState()])
    s.observe(0, math.inf, 1)
    s.observe(1, 1e-3, 1)
    assert s.gradient(0) == 0.0 and s.next_task() == 1
    s.observe(0, math.inf, 1)
    s.observe(0, math.inf, 1)
    assert s.tasks[0].done


# ---- records per task, compiles that use them ------------------------------------------------
def _tile_point(space: SearchSpace) -> Candidate:
    """A non-default schedule of the space that is legal (the first sketch other than the
    default, its knobs at their defaults)."""
    name = next(n for n in space.sketches if n != "default")
    return space.candidate(space.sketch_default(name))


@pytest.fixture(scope="module")
def recorded(small: Path, tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, list[TuneTask]]:
    """A database with a decision per distinct task of `small`: a tiling sketch for the matmul
    task, the default schedule kept for the others."""
    db = tmp_path_factory.mktemp("records") / "tasks.db"
    context = record_context(get_target("c"))
    subs = [sub for sub, _ in split_tasks(TuneTask.from_file(small))]
    with RecordDB(db) as store:
        for sub in subs:
            space = SearchSpace.from_task(sub)
            matmul = "+=!" in sub.source
            candidate = _tile_point(space) if matmul else space.candidate(space.default_point())
            decision = {"best": True, "kept_default": not matmul, "decision": "set by the test"}
            store.add(sub, context, MeasureResult(candidate, Status.OK, times=(1e-4,), extra=decision))
    return db, subs


def test_records_list_shows_a_row_per_task(recorded: tuple[Path, list[TuneTask]],
                                           capsys: pytest.CaptureFixture[str]) -> None:  # fmt: skip
    db, subs = recorded
    assert main(["records", "list", "--db", str(db)]) == 0
    out = capsys.readouterr().out
    for sub in subs:
        assert sub.key in out
    assert "t0[N, M] +=! in0[N, K] * in1[K, M]" in out


def test_compile_applies_each_tasks_record_and_computes_the_right_numbers(
    small: Path, recorded: tuple[Path, list[TuneTask]], capsys: pytest.CaptureFixture[str]
) -> None:
    db, subs = recorded
    text = small.read_text()
    kernel = einc.compile(text, None, target="c", db=db)
    assert len(kernel.task_records) == 4  # every kernel (the matmul task's record twice)
    assert sum(not r.kept_default for r in kernel.task_records) == 2
    _check(kernel, text)
    assert einc.compile(text, None, target="c", db=db, use_records=False).task_records == []
    assert main(["compile", str(small), "--db", str(db), "-o", str(db.parent / "small.c")]) == 0
    err = capsys.readouterr().err
    assert re.search(rf"using tuning records [\d, ]+ from {re.escape(str(db))} for 3 of the program's 3 distinct", err)


def test_the_service_says_which_task_records_a_compile_applied(small: Path, recorded: tuple[Path, list[TuneTask]]) -> None:
    from einc.tools.serve.jobs import schedule_source

    comp = Compilation(small.read_text(), str(small), db=recorded[0])
    comp.run_until("scheduled")
    assert re.fullmatch(r"records \d+, \d+, \d+ \(of 3 of the program's 3 tasks\)", schedule_source(comp))


def test_task_schedules_merge_into_one_the_whole_program_runs(small: Path) -> None:
    """Each task's tiling sketch renamed to the program's statements and joined: it applies to
    the whole program's loops and computes the right numbers."""
    comp = Compilation(small.read_text(), str(small), use_records=False)
    parts = []
    for k in _kernels(comp):
        sub = TuneTask(k.source)
        space = SearchSpace.from_task(sub)
        parts.append((k, _tile_point(space).schedule if len(space.sketches) > 1 else
                      space.candidate(space.default_point()).schedule))  # fmt: skip
    merged = merge_schedules(comp.module("loops"), parts)
    text = str(merged)
    assert 'stmt "h1"' in text and 'stmt "h0"' in text and 'stmt "t0"' not in text
    knobs = [k for k in merged.knobs()]
    assert any(k.startswith("h0.") for k in knobs) and any(k.startswith("h1.") for k in knobs)  # one task, two names
    _check(einc.compile(small.read_text(), None, target="c", schedule=text), small.read_text())


EDGE_PROGRAMS = {
    "a kernel reading no tensor": "input x: float32[8, 8]\ny[N, M] = (N * 8 + M).cast(`float32`) where N in 8, M in 8\n"
                                  "z[N, M] +=! y[N, K] * x[K, M]\nw[N, M] = z[N, M] + 1.0\n",
    "a scalar reduction (no default schedule)": "input x: float32[8, 8]\ns[] +=! x[N, M]\n"
                                                "y[N, M] +=! x[N, K] * x[K, M]\nz[N, M] = y[N, M] / s[]\n",
    "an intermediate output": "input x: float32[8, 8]\noutput y\ny[N, M] +=! x[N, K] * x[K, M]\nz[N, M] = y[N, M] + 1.0\n",
}


@pytest.mark.parametrize("text", EDGE_PROGRAMS.values(), ids=list(EDGE_PROGRAMS))
def test_the_tasks_default_schedules_merged_compute_the_program(text: str) -> None:
    comp = Compilation(text, "<edge>", use_records=False)
    parts = []
    for k in _kernels(comp):
        sub = Compilation(k.source, "<task>", schedule=ScheduleChoice.DEFAULT, use_records=False)
        sub.run_until("scheduled")
        parts.append((k, sub.schedule_text or ""))
    assert len(parts) > 1
    _check(einc.compile(text, None, target="c", schedule=str(merge_schedules(comp.module("loops"), parts))), text)


def test_a_program_with_a_scatter_is_not_split_and_compiles_with_records(recorded: tuple[Path, list[TuneTask]]) -> None:
    text = ("input data: float32[16, 8]\ninput idx: int32[4]\ninput upd: float32[4, 8]\nd2[N, M] = data[N, M] * 2.0\n"
            "s[M] +=! d2[N, M]\nd2[idx[B], M] +=. upd[B, M] + s[M]\nout[N, M] = d2[N, M] + 1.0\n")  # fmt: skip
    assert _kernels(Compilation(text, "<scatter>", use_records=False)) == []
    kernel = einc.compile(text, None, target="c", db=recorded[0])
    assert kernel.task_records == [] and kernel.record is None
    _check(kernel, text)


def test_a_task_record_that_does_not_fit_is_a_warning_and_the_default_is_used(
    small: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    db = tmp_path / "bad.db"
    sub = next(sub for sub, kernels in split_tasks(TuneTask.from_file(small)) if len(kernels) == 2)
    bad = ('builtin.module {\n  transform.named_sequence @__transform_main(%0: !transform.any_op) {\n'
           '    %1 = transform.einc.match stmt "t9" axis "N" in %0\n    transform.yield\n  }\n}\n')  # fmt: skip
    with RecordDB(db) as store:
        store.add(sub, record_context(get_target("c")),
                  MeasureResult(Candidate(SearchSpace.from_task(sub).default_point(), bad), Status.OK, times=(1e-4,),
                                extra={"best": True, "kept_default": False, "decision": "test"}))  # fmt: skip
    kernel = einc.compile(small.read_text(), None, target="c", db=db)
    assert kernel.task_records == []
    err = capsys.readouterr().err
    assert "do not apply together, using the default schedule" in err and "statement 't9'" in err
    _check(kernel, small.read_text())


# ---- einc tune, end to end ---------------------------------------------------------------------
def test_einc_tune_of_a_program_tunes_each_task_and_compile_uses_them(
    small: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    db, script = tmp_path / "e2e.db", tmp_path / "whole.mlir"
    code = main(["tune", str(small), "--trials", "6", "--db", str(db), "--threads", "1", "--workers", "2",
                 "--quiet", "-o", str(script)])  # fmt: skip
    captured = capsys.readouterr()
    assert code == 0, captured.out + captured.err
    out = captured.out
    assert "3 tasks (4 kernels)" in out and "6 trials" in out
    assert "| task | kernels | trials | default (ms) | fastest trial (ms) | best (ms) | decided |" in out
    rows = [line for line in out.splitlines() if re.match(r"\| \d+: ", line)]
    assert len(rows) == 3 and sum(int(r.split("|")[3]) for r in rows) == 6  # every trial in one task's row
    assert re.search(r"whole program \(4 kernels\): default schedule [\d.]+ ms, tuned [\d.]+ ms", out), out
    assert "3 of 3 tasks' records applied" in out
    with RecordDB(db) as store:
        tasks = store.tasks()
    assert len(tasks) == 3 and all(t["best_id"] is not None for t in tasks)  # a decision per task
    kernel = einc.compile(small.read_text(), None, target="c", db=db)
    assert len(kernel.task_records) == 4
    _check(kernel, small.read_text(), seed=11)
    _check(einc.compile(small.read_text(), None, target="c", schedule=script.read_text()), small.read_text())


def test_einc_tune_of_a_program_refuses_resume(small: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["tune", str(small), "--trials", "4", "--db", str(tmp_path / "r.db"), "--resume", "--quiet"]) == 1
    assert "--resume tunes one kernel" in capsys.readouterr().err


def test_a_killed_program_tune_keeps_every_finished_trial(small: Path, tmp_path: Path) -> None:
    """SIGKILL mid-search: every trial finished before the kill is in the database (each is
    recorded as it arrives, whichever task it belongs to), and the database is whole; a
    compile of the program still works (no decision yet: the default schedules)."""
    db = tmp_path / "k.db"
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    proc = subprocess.Popen([sys.executable, "-m", "einc.cli", "tune", str(small), "--trials", "200", "--db", str(db),
                             "--workers", "1", "--threads", "1", "--quiet"], env=env, cwd=ROOT,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)  # fmt: skip
    deadline, seen = time.monotonic() + 240, 0
    while seen < 4 and time.monotonic() < deadline and proc.poll() is None:
        time.sleep(0.2)
        seen = _trials(db)
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()
    assert seen >= 4 and _trials(db) >= seen
    with sqlite3.connect(db) as conn:
        assert conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
        tasks = conn.execute("SELECT count(DISTINCT task_key) FROM records").fetchone()[0]
    assert tasks >= 2  # the warm-up went from task to task
    _check(einc.compile(small.read_text(), None, target="c", db=db), small.read_text())


def _trials(db: Path) -> int:
    if not db.exists():
        return 0
    try:
        with sqlite3.connect(db, timeout=10) as conn:
            return int(conn.execute("SELECT count(*) FROM records").fetchone()[0])
    except sqlite3.OperationalError:  # no tables yet
        return 0
