"""Tuning records (einc/compiler/records.py): the SQLite database under concurrent writers and a
killed writer, JSON-lines sharing, and their use by `einc compile`, `einc run`, `einc.compile`."""

from __future__ import annotations

import dataclasses
import io
import json
import os
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

import einc
from einc.schedule.default import SPACE_VERSIONS
from einc.targets import get_target
from einc.cli import main
from einc.compiler.driver import Compilation
from einc.schedule.script import Schedule
from einc.compiler.records import (Record, RecordContext, RecordError, default_db_path, device_fingerprint, find_record,
                                   record_context, show_lines)
from einc.tune.records import RecordDB
from einc.tune.types import Candidate, MeasureResult, Point, Status, TuneTask

ROOT = Path(__file__).resolve().parent.parent
MATMUL = ROOT / "examples" / "matmul.ein"
SMALL = "input a: float32[8, 4]\ninput b: float32[4, 6]\n\noutput0[N, M] +=! a[N, K] * b[K, M]\n"
TUNED = {"output0.tile_i": 4, "output0.tile_j": 32, "output0.tile_k": 128}  # default: 8, 64, 256
DEV = RecordContext("dev", "avx2 fma", "", "cc 1.0", "-O3", f"cpu.{SPACE_VERSIONS['cpu']}")
"""A made-up context (records that no compile on this machine uses)."""


def matmul_task(target: str = "c") -> TuneTask:
    return TuneTask(MATMUL.read_text(), target, str(MATMUL))


def default_schedule(task: TuneTask) -> Schedule:
    comp = task.compilation()
    comp.run_until("scheduled")
    assert comp.schedule_text is not None
    return Schedule.parse(comp.schedule_text)


def tuned_candidate(task: TuneTask) -> Candidate:
    default = default_schedule(task)
    assert {k: v.selected for k, v in default.knobs().items()} != TUNED  # the record must differ
    return Candidate(Point.of("ssrsrs", TUNED), str(default.with_values(TUNED)))


def result(candidate: Candidate, status: Status = Status.OK, times: tuple[float, ...] = (2e-3, 1e-3, 3e-3),
           reason: str = "") -> MeasureResult:  # fmt: skip
    return MeasureResult(candidate, status, reason, times, build_s=0.25)


def small_candidate(i: int) -> Candidate:
    return Candidate(Point.of("s", {"k": i}), f"// schedule {i}")


# ---- the database ------------------------------------------------------------------------------
def test_add_trials_best_round_trip(tmp_path: Path) -> None:
    task = TuneTask(SMALL)
    with RecordDB(tmp_path / "t.db") as db:
        ids = [db.add(task, DEV, result(small_candidate(i), times=(t,)), tuner="test")
               for i, t in enumerate([3e-3, 1e-3, 2e-3])]  # fmt: skip
        trials = db.trials(task.key, "c", DEV)
        assert [r.id for r in trials] == ids
        assert [r.median_s for r in trials] == [3e-3, 1e-3, 2e-3]
        best = db.best(task.key, "c", DEV)
        assert best is not None and best.id == ids[1]
        assert best.point() == Point.of("s", {"k": 1}) and best.schedule == "// schedule 1"
        assert (best.program, best.tuner, best.build_s, best.status) == (task.normalized, "test", 0.25, "ok")
        assert db.best(task.key, "c", dataclasses.replace(DEV, device="other device")) is None
        assert db.best(task.key, "opencl", DEV) is None
    with RecordDB(tmp_path / "t.db", create=False) as db:  # reopened: everything is there
        assert [r.id for r in db.trials(task.key, "c", DEV)] == ids
        [row] = db.tasks()
        assert (row["trials"], row["ok"], row["best_s"], row["best_id"]) == (3, 3, 1e-3, ids[1])
        assert row["summary"] == "output0[N, M] +=! a[N, K] * b[K, M]"


def test_failures_are_never_best(tmp_path: Path) -> None:
    task = TuneTask(SMALL)
    with RecordDB(tmp_path / "t.db") as db:
        for i, status in enumerate([Status.WRONG, Status.CRASHED, Status.TIMEOUT, Status.NOISY]):
            db.add(task, DEV, result(small_candidate(i), status, times=(1e-9,), reason=status.value))
        assert db.best(task.key, "c", DEV) is None
        ok = db.add(task, DEV, result(small_candidate(9), times=(5.0,)))
        best = db.best(task.key, "c", DEV)
        assert best is not None and best.id == ok
        failed = [r for r in db.trials(task.key, "c", DEV) if not r.ok]
        assert len(failed) == 4 and all(r.median_s == float("inf") for r in failed)
        assert failed[0].reason == "wrong" and failed[0].times == (1e-9,)
        [row] = db.tasks()
        assert (row["trials"], row["ok"]) == (5, 1)


def test_export_import_round_trip_skips_duplicates(tmp_path: Path) -> None:
    task, other = TuneTask(SMALL), TuneTask(SMALL.replace("8, 4", "16, 4"))
    with RecordDB(tmp_path / "a.db") as a:
        for i in range(3):
            a.add(task, DEV, result(small_candidate(i), times=(i + 1.0,)))
        a.add(task, DEV, result(small_candidate(7), Status.CRASHED, times=(), reason="SIGSEGV"))
        a.add(other, DEV, result(small_candidate(0)))
        text = io.StringIO()
        assert a.export_jsonl(text) == 5
        only = io.StringIO()
        assert a.export_jsonl(only, task_key=other.key) == 1
        originals = a.trials(task.key, "c", DEV)
    with RecordDB(tmp_path / "b.db") as b:
        assert b.import_jsonl(io.StringIO(text.getvalue())) == 5
        assert b.import_jsonl(io.StringIO(text.getvalue())) == 0  # every line a duplicate
        assert len(b) == 5
        copies = b.trials(task.key, "c", DEV)
        strip = lambda r: {k: v for k, v in r.__dict__.items() if k != "id"}
        assert [strip(r) for r in copies] == [strip(r) for r in originals]
        assert copies[3].reason == "SIGSEGV" and copies[3].median_s == float("inf")
        assert b.tasks()[0]["summary"] == "output0[N, M] +=! a[N, K] * b[K, M]"
    assert json.loads(only.getvalue())["task_key"] == other.key


def test_malformed_import_line_is_a_located_error(tmp_path: Path) -> None:
    with RecordDB(tmp_path / "a.db") as a:
        a.add(TuneTask(SMALL), DEV, result(small_candidate(0)))
        good = io.StringIO()
        a.export_jsonl(good)
    line = good.getvalue()
    edited = json.loads(line) | {"program": "something else"}
    cases = {
        "{not json": "not a JSON record",
        json.dumps(json.loads(line) | {"status": "fast"}): "unknown status 'fast'",
        json.dumps({k: v for k, v in json.loads(line).items() if k != "schedule"}): "no 'schedule'",
        json.dumps(json.loads(line) | {"times": []}): "an ok record has no times",
        json.dumps(edited): "task_key is not the key",
        "[1, 2]": "a record is a JSON object",
    }
    with RecordDB(tmp_path / "b.db") as b:
        for bad, message in cases.items():
            with pytest.raises(RecordError) as err:
                b.import_jsonl(io.StringIO(line + "\n" + bad + "\n"), "shared.jsonl")
            assert str(err.value.loc) == "shared.jsonl:3:1" and message in err.value.message
            assert len(b) == 0  # nothing of a bad file is imported


def test_unusable_database_paths(tmp_path: Path) -> None:
    with pytest.raises(RecordError, match="it is a directory") as err:
        RecordDB(tmp_path)
    assert err.value.loc is not None and err.value.loc.file == str(tmp_path)
    garbage = tmp_path / "garbage.db"
    garbage.write_bytes(b"this is not sqlite" * 100)
    with pytest.raises(RecordError, match="not a database"):
        RecordDB(garbage)
    with pytest.raises(RecordError, match="no tuning database"):
        RecordDB(tmp_path / "missing.db", create=False)
    assert not (tmp_path / "missing.db").exists()
    plain = tmp_path / "plain.db"
    sqlite3.connect(plain).execute("CREATE TABLE t (x)").connection.commit()
    with pytest.raises(RecordError, match="not an einc tuning database"):
        RecordDB(plain, create=False)


def test_default_db_path(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("EINC_TUNING_DB", str(tmp_path / "x.db"))
    assert default_db_path() == tmp_path / "x.db"
    monkeypatch.delenv("EINC_TUNING_DB")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    assert default_db_path() == tmp_path / "cache" / "einc" / "tuning.db"


def test_device_fingerprint_of_c_names_the_cpu_and_vector_width() -> None:
    from einc.runtime.c import native_vector_bits

    fingerprint = device_fingerprint(get_target("c"))
    assert f"{native_vector_bits()}-bit vectors" in fingerprint and fingerprint == device_fingerprint(get_target("c"))


def test_record_context_of_c_names_isa_compiler_flags_and_space(monkeypatch: pytest.MonkeyPatch) -> None:
    from einc.runtime.c import CFLAGS
    from einc.runtime.finders import compiler, compiler_identity

    context = record_context(get_target("c"))
    assert context.device == device_fingerprint(get_target("c")) and context.driver == ""
    assert context.compiler == compiler_identity(compiler()).splitlines()[0]
    assert context.flags == " ".join(CFLAGS) and context.space == f"cpu.{SPACE_VERSIONS['cpu']}"
    flags = next((ln for ln in open("/proc/cpuinfo") if ln.startswith(("flags", "Features"))), "")
    isa = context.isa.split()
    assert isa == sorted(isa) and set(isa) <= set(flags.split(":", 1)[-1].split())
    assert ("sse2" in isa or "asimd" in isa) and "smep" not in isa and "hypervisor" not in isa
    monkeypatch.setenv("EINC_CFLAGS", "-DX=1")  # a compile's cflags and $EINC_CFLAGS are flags too
    assert record_context(get_target("c"), ["-O1"]).flags == " ".join([*CFLAGS, "-O1", "-DX=1"])
    opencl = record_context(get_target("opencl"))
    assert opencl.isa == "" and opencl.driver and "PoCL" in opencl.compiler and opencl.space == f"gpu.{SPACE_VERSIONS['gpu']}"


# ---- several processes -------------------------------------------------------------------------
WRITER = f"""
import sys, time
from pathlib import Path
from einc.tune.records import RecordDB
from einc.tune.types import Candidate, MeasureResult, Point, Status, TuneTask
from einc.compiler.records import RecordContext
DEV = {DEV!r}
db_path, name, count, go = sys.argv[1], sys.argv[2], int(sys.argv[3]), Path(sys.argv[4])
task = TuneTask({SMALL!r})
task.key
db = RecordDB(db_path)
print("ready", flush=True)
while not go.exists():
    time.sleep(0.005)
i = 0
while count < 0 or i < count:
    c = Candidate(Point.of(name, {{"i": i}}), f"// {{name}} {{i}}")
    rid = db.add(task, DEV, MeasureResult(c, Status.OK, times=(1.0 + i,)), tuner=name)
    print(rid, flush=True)
    i += 1
"""


def writer(db: Path, name: str, count: int, go: Path) -> subprocess.Popen[str]:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    proc = subprocess.Popen([sys.executable, "-c", WRITER, str(db), name, str(count), str(go)],
                            stdout=subprocess.PIPE, text=True, env=env)  # fmt: skip
    assert proc.stdout is not None and proc.stdout.readline() == "ready\n"
    return proc


def test_two_writers_at_once_lose_nothing(tmp_path: Path) -> None:
    db, go = tmp_path / "t.db", tmp_path / "go"
    procs = [writer(db, name, 200, go) for name in ("first", "second")]
    go.touch()
    outs = [p.communicate(timeout=300)[0] for p in procs]
    assert [p.returncode for p in procs] == [0, 0]
    ids = [int(x) for out in outs for x in out.split()]
    assert len(ids) == len(set(ids)) == 400
    with RecordDB(db) as records:
        trials = records.trials(TuneTask(SMALL).key, "c", DEV)
        assert sorted(r.id for r in trials) == sorted(ids)
        for name in ("first", "second"):
            assert sorted(r.knobs["i"] for r in trials if r.tuner == name) == list(range(200))


def test_sigkilled_writer_keeps_every_committed_record(tmp_path: Path) -> None:
    db, go = tmp_path / "t.db", tmp_path / "go"
    go.touch()
    proc = writer(db, "killed", -1, go)
    assert proc.stdout is not None
    committed = [int(proc.stdout.readline()) for _ in range(100)]
    proc.send_signal(signal.SIGKILL)
    proc.wait(timeout=60)
    assert proc.returncode == -signal.SIGKILL
    assert sqlite3.connect(db).execute("PRAGMA integrity_check").fetchone() == ("ok",)
    with RecordDB(db) as records:
        found = {r.id for r in records.trials(TuneTask(SMALL).key, "c", DEV)}
        assert set(committed) <= found
        records.add(TuneTask(SMALL), DEV, result(small_candidate(0)))  # still writable
        assert len(records) == len(found) + 1


# ---- use by the compiler -----------------------------------------------------------------------
@pytest.fixture(scope="module")
def sources() -> dict[str, str]:
    """The C source of the matmul with its default schedule and with the tuned one."""
    task = matmul_task()
    tuned = Compilation(task.source, task.filename, schedule=tuned_candidate(task).schedule, use_records=False)
    return {"default": task.compilation().source_text(), "tuned": tuned.source_text()}


def tuned_db(path: Path, device: str | None = None, target: str = "c") -> Record:
    """A database holding one record of the matmul: the tuned C schedule (by default on this
    machine's CPU and the C target)."""
    task, context = matmul_task(target), record_context(get_target("c"))
    with RecordDB(path) as db:
        rid = db.add(task, dataclasses.replace(context, device=device or context.device), result(tuned_candidate(matmul_task())))
        record = db.get(rid)
    assert record is not None and record.context is not None
    return record


def test_compile_uses_the_best_record(tmp_path: Path, sources: dict[str, str], capsys: pytest.CaptureFixture[str]) -> None:
    assert sources["default"] != sources["tuned"]
    db = tmp_path / "t.db"
    record = tuned_db(db)
    assert main(["compile", str(MATMUL), "--db", str(db)]) == 0
    out, err = capsys.readouterr()
    assert out == sources["tuned"]
    day = time.strftime("%Y-%m-%d", time.localtime(record.created))
    assert err == f"einc: using tuning record {record.id} (sketch ssrsrs, 2.000 ms, tuned {day}) from {db}\n"
    assert main(["compile", str(MATMUL), "--db", str(db), "--no-records"]) == 0
    assert capsys.readouterr() == (sources["default"], "")
    assert main(["compile", str(MATMUL), "--db", str(db), "--schedule", "default"]) == 0
    assert capsys.readouterr() == (sources["default"], "")


def test_compile_uses_the_default_database(monkeypatch: pytest.MonkeyPatch, tmp_path: Path,
                                           sources: dict[str, str]) -> None:  # fmt: skip
    task = matmul_task()
    assert task.compilation().source_text() == sources["default"]  # conftest's fresh database
    monkeypatch.setenv("EINC_TUNING_DB", str(tmp_path / "env.db"))
    record = tuned_db(tmp_path / "env.db")
    comp = Compilation(task.source, task.filename)
    assert comp.source_text() == sources["tuned"] and comp.record == record
    assert Compilation(task.source, task.filename, use_records=False).source_text() == sources["default"]


def test_einc_compile_api_and_kernel_record(tmp_path: Path) -> None:
    db = tmp_path / "t.db"
    record = tuned_db(db)
    kernel = einc.compile(MATMUL.read_text(), db=db)
    assert kernel.record is not None and kernel.record.id == record.id
    rng = np.random.default_rng(13)
    a, b = rng.uniform(0.5, 2, (256, 512)).astype(np.float32), rng.uniform(0.5, 2, (512, 256)).astype(np.float32)
    want = a.astype(np.float64) @ b.astype(np.float64)
    np.testing.assert_allclose(kernel(input0=a, input1=b)["output0"], want, rtol=1e-4)
    assert einc.compile(MATMUL.read_text(), db=db, schedule="default").record is None
    assert einc.compile(MATMUL.read_text(), db=db, use_records=False).record is None


def test_run_says_which_record(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    db = tmp_path / "t.db"
    record = tuned_db(db)
    assert main(["run", str(MATMUL), "--db", str(db), "--repeat", "1", "--seed", "3"]) == 0
    out, err = capsys.readouterr()
    assert f"using tuning record {record.id} " in err and "output0: max error" in out and " ok" in out
    assert main(["run", str(MATMUL), "--db", str(db), "--repeat", "1", "--seed", "3", "--no-records"]) == 0
    assert "tuning record" not in capsys.readouterr().err


@pytest.mark.parametrize("device, target", [("another CPU, 256-bit vectors, 64 cores", "c"), (None, "opencl")])
def test_records_of_other_devices_and_targets_are_ignored(tmp_path: Path, sources: dict[str, str],
                                                          device: str | None, target: str) -> None:  # fmt: skip
    db = tmp_path / "t.db"
    tuned_db(db, device, target)
    comp = Compilation(MATMUL.read_text(), str(MATMUL), db=db)
    assert comp.source_text() == sources["default"] and comp.record is None


def test_a_stale_record_is_skipped_with_a_warning(tmp_path: Path, sources: dict[str, str],
                                                  capsys: pytest.CaptureFixture[str]) -> None:  # fmt: skip
    db, task = tmp_path / "t.db", matmul_task()
    stale = Candidate(Point.of("ssrsrs", TUNED), tuned_candidate(task).schedule.replace('axis "K"', 'axis "Q"'))
    with RecordDB(db) as records:
        rid = records.add(task, record_context(get_target("c")), result(stale))
    comp = Compilation(task.source, task.filename, db=db)
    assert comp.source_text() == sources["default"] and comp.record is None
    err = capsys.readouterr().err
    assert f"einc: warning: tuning record {rid} in {db} no longer applies, using the default schedule" in err
    assert f"<tuning record {rid}>:" in err and '"Q"' in err


def test_unreadable_database_is_a_warning_not_a_failure(tmp_path: Path, sources: dict[str, str],
                                                        capsys: pytest.CaptureFixture[str]) -> None:  # fmt: skip
    corrupt = tmp_path / "corrupt.db"
    corrupt.write_bytes(b"\x00garbage" * 512)
    assert main(["compile", str(MATMUL), "--db", str(corrupt)]) == 0
    out, err = capsys.readouterr()
    assert out == sources["default"]
    assert err.startswith(f"einc: warning: tuning records not used: {corrupt}:1:1: error: ") and "not a database" in err
    missing = tmp_path / "missing.db"
    assert main(["compile", str(MATMUL), "--db", str(missing)]) == 0
    out, err = capsys.readouterr()
    assert out == sources["default"] and "no tuning database" in err and not missing.exists()
    assert find_record("anything", get_target("c"), tmp_path) is None
    assert "it is a directory" in capsys.readouterr().err


# ---- `einc records` ----------------------------------------------------------------------------
def test_records_commands(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    db, copy, exported = tmp_path / "t.db", tmp_path / "copy.db", tmp_path / "records.jsonl"
    record = tuned_db(db)
    with RecordDB(db) as records:
        failed = records.add(matmul_task(), DEV, result(small_candidate(1), Status.CRASHED, (), "SIGSEGV"))
    assert main(["records", "list", "--db", str(db)]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0].split() == ["task", "target", "device", "program", "trials", "ok", "best", "ms", "best", "id", "best",
                              "applies"]  # fmt: skip
    rows = {line.split()[0] + " " + ("dev" if "  dev  " in line else "cpu"): line for line in out[1:-1]}
    key = record.task_key
    assert rows[f"{key} cpu"].split()[-6:] == ["1", "1", "2.000", str(record.id), "ssrsrs", "yes"]
    assert rows[f"{key} dev"].endswith("  no (device, isa, compiler, flags)")
    assert rows[f"{key} dev"].split()[-10:-5] == ["1", "0", "-", "-", "-"]
    assert "output0[N, M] +=! input0[N, K] * input1[K, M]" in out[1] and out[-1] == f"({db})"

    assert main(["records", "show", str(record.id), "--db", str(db)]) == 0
    shown = capsys.readouterr().out
    assert "ssrsrs(output0.tile_i=4, output0.tile_j=32, output0.tile_k=128)" in shown
    assert 'transform.einc.knob "output0.tile_k" = 128' in shown and "median    2.000 ms over 3 runs" in shown
    assert main(["records", "show", str(failed), "--db", str(db)]) == 0
    assert "status    crashed: SIGSEGV" in capsys.readouterr().out
    assert main(["records", "show", "999", "--db", str(db)]) == 1
    assert "<command line>:1:19: error: no record 999 in" in capsys.readouterr().err

    assert main(["records", "export", "--db", str(db)]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert [json.loads(x)["status"] for x in lines] == ["ok", "crashed"]
    assert main(["records", "export", "--db", str(db), "-o", str(exported), "--task", key]) == 0
    assert "exported 2 records" in capsys.readouterr().err
    assert main(["records", "import", str(exported), "--db", str(copy)]) == 0
    assert capsys.readouterr().out == f"einc: imported 2 new records into {copy}\n"
    assert main(["records", "import", str(exported), "--db", str(copy)]) == 0
    assert capsys.readouterr().out == f"einc: imported 0 new records into {copy}\n"

    exported.write_text(exported.read_text() + "{}\n")
    assert main(["records", "import", str(exported), "--db", str(copy)]) == 1
    assert capsys.readouterr().err.startswith(f"{exported}:3:1: error: not an einc tuning record")
    assert main(["records", "import", str(exported), "--db", str(tmp_path / "new.db")]) == 1
    assert not (tmp_path / "new.db").exists()  # a bad file creates no database
    capsys.readouterr()
    assert main(["records", "list", "--db", str(tmp_path / "none.db")]) == 0
    assert "does not exist" in capsys.readouterr().out
    assert main(["records", "list", "--db", str(tmp_path)]) == 1
    assert "it is a directory" in capsys.readouterr().err



def test_best_follows_the_latest_final_ranking_and_finalists_are_no_trials(tmp_path: Path) -> None:
    task = TuneTask(SMALL)

    def final(i: int, t: float, tag: str) -> MeasureResult:
        return MeasureResult(small_candidate(i), Status.OK, "", (t, t, t), extra={"final": tag, "rounds": 3})

    with RecordDB(tmp_path / "f.db") as db:
        trial_ids = [db.add(task, DEV, result(small_candidate(i), times=(t,))) for i, t in enumerate([1e-3, 2e-3])]
        best = db.best(task.key, "c", DEV)
        assert best is not None and best.id == trial_ids[0]  # no final ranking yet: the least median
        # the finalists re-measured against each other: candidate 1 is the faster one after all
        db.add(task, DEV, final(0, 1.6e-3, "final-a"))
        won = db.add(task, DEV, final(1, 1.5e-3, "final-a"))
        best = db.best(task.key, "c", DEV)
        assert best is not None and best.id == won
        assert [r.id for r in db.trials(task.key, "c", DEV)] == trial_ids  # finalists are no trials
        # a later final ranking replaces it
        later = db.add(task, DEV, final(0, 1.7e-3, "final-b"))
        db.add(task, DEV, final(1, 1.9e-3, "final-b"))
        best = db.best(task.key, "c", DEV)
        assert best is not None and best.id == later


def test_a_decision_is_the_best_and_a_search_trial_never_is(tmp_path: Path) -> None:
    task = TuneTask(SMALL)

    def trial(i: int, t: float) -> MeasureResult:
        return MeasureResult(small_candidate(i), Status.OK, "", (t,), extra={"trial": True})

    def final(i: int, t: float, tag: str, **decision: object) -> MeasureResult:
        return MeasureResult(small_candidate(i), Status.OK, "", (t, t), extra={"final": tag, "rounds": 2, **decision})

    with RecordDB(tmp_path / "d.db") as db:
        db.add(task, DEV, trial(0, 1e-3))
        db.add(task, DEV, trial(1, 0.1e-3))  # fast once, maybe a fluke: not the best by itself
        assert db.best(task.key, "c", DEV) is None
        [row] = db.tasks()
        assert (row["best_id"], row["best_s"], row["best_note"]) == (None, None, "")
        # a decision that kept the default, though a finalist's median looks faster
        kept = db.add(task, DEV, final(0, 1e-3, "final-a", best=True, kept_default=True, decision="the machine was busy"))
        db.add(task, DEV, final(1, 0.5e-3, "final-a"))
        best = db.best(task.key, "c", DEV)
        assert best is not None and best.id == kept and best.kept_default and best.decision == "the machine was busy"
        assert best.describe().startswith(f"record {kept} (the default schedule, kept by the tuner, tuned ")
        [row] = db.tasks()
        assert (row["best_id"], row["best_note"]) == (kept, "default kept") and row["best_s"] == 1e-3
        assert "decision  the best is the default schedule, kept: the machine was busy" in "\n".join(show_lines(best))
        # a later decision replaces it: the crowned finalist (not the fastest record of all)
        crowned = db.add(task, DEV, final(1, 0.8e-3, "final-b", best=True, kept_default=False, decision="1.25x"))
        db.add(task, DEV, final(0, 1e-3, "final-b"))
        best = db.best(task.key, "c", DEV)
        assert best is not None and best.id == crowned and not best.kept_default and best.decision == "1.25x"
        assert db.tasks()[0]["best_note"] == "s"
        assert [r.id for r in db.trials(task.key, "c", DEV)] == [1, 2]  # finals are no trials


# ---- a database einc cannot write ---------------------------------------------------------------
READER = """
import json, sys
from pathlib import Path
from einc.cli import main
from einc.compiler.records import RecordContext, RecordError, find_record
from einc.targets import get_target
from einc.tune.records import RecordDB
from einc.tune.types import Candidate, MeasureResult, Point, Status, TuneTask
path, program = Path(sys.argv[1]), sys.argv[2]
from einc.schedule.default import SPACE_VERSIONS
DEV = RecordContext("dev", "avx2 fma", "", "cc 1.0", "-O3", f"cpu.{SPACE_VERSIONS['cpu']}")
out = {}
with RecordDB(path, create=False) as db:
    out["writable"], out["why"] = db.writable, db.readonly_reason
    out["tasks"] = [(t["best_id"], t["best_note"]) for t in db.tasks()]
    try:
        db.add(TuneTask(program), DEV, MeasureResult(Candidate(Point("s"), "// s"), Status.OK, times=(1.0,)))
        out["add"] = "written"
    except RecordError as err:
        out["add"] = err.render()
found = find_record(TuneTask(program).normalized, get_target("c"), path)
out["found"] = None if found is None else found[0].id
out["list"] = main(["records", "list", "--db", str(path)])
out["tune"] = main(["tune", sys.argv[3], "--db", str(path), "--trials", "1", "--quiet"])
out["new"] = main(["records", "import", sys.argv[4], "--db", str(path.parent / "new.db")])
print("RESULT " + json.dumps(out))
"""


def _without_dac_override() -> None:
    """In the child before exec: drop CAP_DAC_OVERRIDE and CAP_DAC_READ_SEARCH from the bounding
    set, so a process of root (who may write anywhere) meets file permissions like anyone."""
    import ctypes

    libc = ctypes.CDLL(None, use_errno=True)
    for cap in (1, 2):  # CAP_DAC_OVERRIDE, CAP_DAC_READ_SEARCH
        if libc.prctl(24, cap, 0, 0, 0) != 0:  # PR_CAPBSET_DROP
            os._exit(97)


def read_only_reader(db: Path, program: Path, jsonl: Path) -> tuple[dict, str]:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    done = subprocess.run([sys.executable, "-c", READER, str(db), program.read_text(), str(program), str(jsonl)],
                          capture_output=True, text=True, env=env, timeout=300,
                          preexec_fn=_without_dac_override if os.geteuid() == 0 else None)  # fmt: skip
    assert done.returncode == 0 and "RESULT " in done.stdout, (done.returncode, done.stdout, done.stderr)
    return json.loads(done.stdout.split("RESULT ", 1)[1]), done.stdout + done.stderr


@pytest.mark.parametrize("what", ["folder", "file"])
def test_a_read_only_database_is_read_and_refuses_writes_with_the_reason(tmp_path: Path, what: str) -> None:
    folder = tmp_path / "shared"
    folder.mkdir()
    db, program, jsonl = folder / "t.db", tmp_path / "mm.ein", tmp_path / "records.jsonl"
    program.write_text(MATMUL.read_text())
    task = matmul_task()
    with RecordDB(db) as records:  # WAL mode: a reader would need to make -shm beside it
        decided = records.add(task, record_context(get_target("c")), MeasureResult(
            tuned_candidate(task), Status.OK, times=(1e-3,),
            extra={"final": "final-x", "best": True, "kept_default": False, "decision": "faster"}))  # fmt: skip
        with open(jsonl, "w") as out:
            records.export_jsonl(out)
    assert not Path(f"{db}-wal").exists()  # checkpointed when the last connection closed
    os.chmod(db, 0o444) if what == "file" else os.chmod(folder, 0o555)
    try:
        out, text = read_only_reader(db, program, jsonl)
    finally:
        os.chmod(folder, 0o755)
        os.chmod(db, 0o644)
    why = "the file is read-only" if what == "file" else f"its folder {folder} is read-only"
    assert out["writable"] is False and out["why"] == why, text
    assert out["tasks"] == [[decided, "ssrsrs"]] and out["found"] == decided, text
    assert out["add"] == (f"{db}:1:1: error: cannot write records to the tuning database: {why} (it can be read, "
                          "not written; give a writable one with --db or $EINC_TUNING_DB)"), text  # fmt: skip
    assert out["list"] == 0 and f"{decided}  ssrsrs" in text
    assert out["tune"] == 1 and f"{db}:1:1: error: cannot record tuning results in the tuning database: {why}" in text
    if what == "folder":
        assert out["new"] == 1 and f"new.db:1:1: error: cannot create a tuning database here: {why}" in text
    assert "attempt to write a readonly database" not in text and "Traceback" not in text
    with RecordDB(db) as records:  # nothing was written, and nothing lost
        assert len(records) == 1


# ---- records that never go stale: every key field --------------------------------------------
def _stale(monkeypatch: pytest.MonkeyPatch, field: str) -> None:
    """Change one key field of this machine's context, through the part of einc that knows it."""
    import einc.compiler.records as records

    if field == "device":
        monkeypatch.setattr(records, "device_fingerprint", lambda target: "Another CPU, 256-bit vectors, 8 cores")
    elif field == "isa":  # e.g. the same model name with AVX-512 turned off
        real = records.isa_fingerprint()
        fewer = " ".join(f for f in real.split() if not f.startswith("avx512"))
        monkeypatch.setattr(records, "isa_fingerprint", lambda: fewer if fewer != real else "sse2")
    elif field == "driver":
        monkeypatch.setattr(records, "driver_fingerprint", lambda target: "PoCL 99.0")
    elif field == "compiler":  # the C compiler's `--version`, as einc.runtime.c asks it
        monkeypatch.setattr("einc.runtime.c.compiler_identity", lambda cc: "gcc (Debian 99.1.0-1) 99.1.0\nCopyright\n")
    elif field == "flags":
        monkeypatch.setenv("EINC_CFLAGS", "-O1")
    elif field == "space":  # the CPU sketch family's search space changed
        monkeypatch.setattr("einc.schedule.default.SPACE_VERSIONS", {"cpu": 99, "gpu": 99, "": 99})


STALE_NOTES = {
    "device": "(this is Another CPU, 256-bit vectors, 8 cores)",
    "isa": "made for other ISA flags (here ",
    "driver": "made with driver ",
    "compiler": "(now gcc (Debian 99.1.0-1) 99.1.0)",
    "flags": "made with other compiler flags (here +-O1)",
    "space": "made by search space ",
}


@pytest.mark.parametrize("field", list(STALE_NOTES))
def test_a_record_whose_key_field_changed_is_not_used_and_noted(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                                capsys: pytest.CaptureFixture[str], field: str) -> None:  # fmt: skip
    """Each field of the key changed once (the rest this machine's): the record is not used
    (`find_record`, what `einc compile` and `einc.compile` ask), a one-line note says why,
    once, and `einc records list` names the field."""
    target = get_target("opencl" if field == "driver" else "c")  # a driver is a device target's
    db, task = tmp_path / "t.db", matmul_task(target.name)
    with RecordDB(db) as records:
        rid = records.add(task, record_context(target), result(tuned_candidate(matmul_task())))
    found = find_record(task.normalized, target, db)
    assert found is not None and found[0].id == rid and capsys.readouterr().err == ""  # it applies here
    _stale(monkeypatch, field)
    assert find_record(task.normalized, target, db) is None
    assert find_record(task.normalized, target, db) is None
    [line] = capsys.readouterr().err.splitlines()  # once per program, target, database and context
    assert line.startswith(f"einc: note: 1 tuning record of this program for target {target.name} was made ")
    assert STALE_NOTES[field] in line and line.endswith(": not used; re-tune (`einc tune`)")
    assert main(["records", "list", "--db", str(db)]) == 0
    assert capsys.readouterr().out.splitlines()[1].endswith(f"  no ({field})")
    monkeypatch.undo()
    found = find_record(task.normalized, target, db)
    assert found is not None and found[0].id == rid


def test_compile_skips_a_stale_record_with_one_note(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                    sources: dict[str, str], capsys: pytest.CaptureFixture[str]) -> None:  # fmt: skip
    db = tmp_path / "t.db"
    record = tuned_db(db)
    assert record.context is not None
    monkeypatch.setattr("einc.runtime.c.compiler_identity", lambda cc: "gcc (Debian 99.1.0-1) 99.1.0\n")
    assert main(["compile", str(MATMUL), "--db", str(db)]) == 0
    out, err = capsys.readouterr()
    assert out == sources["default"]
    assert err == (f"einc: note: 1 tuning record of this program for target c was made with {record.context.compiler}"
                   " (now gcc (Debian 99.1.0-1) 99.1.0): not used; re-tune (`einc tune`)\n")  # fmt: skip
    assert einc.compile(MATMUL.read_text(), db=db, cflags=["-O1"]).record is None  # another compile's flags
    assert "made with other compiler flags (here +-O1)" in capsys.readouterr().err
    assert main(["records", "show", str(record.id), "--db", str(db)]) == 0
    shown = capsys.readouterr().out
    assert f"  compiler  {record.context.compiler}\n" in shown and f"  space     cpu.{SPACE_VERSIONS['cpu']}\n" in shown
    assert "  applies   no: made with " in shown
    monkeypatch.undo()
    assert main(["records", "show", str(record.id), "--db", str(db)]) == 0
    assert "  applies   yes" in capsys.readouterr().out


# ---- a database of an einc before contexts (schema version 1) ------------------------------------
SCHEMA_V1 = """
CREATE TABLE schema_version (version INTEGER NOT NULL);
CREATE TABLE programs (task_key TEXT PRIMARY KEY, program TEXT NOT NULL, summary TEXT NOT NULL DEFAULT '');
CREATE TABLE records (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    task_key TEXT NOT NULL REFERENCES programs(task_key), target TEXT NOT NULL,
    device TEXT NOT NULL, sketch TEXT NOT NULL, knobs TEXT NOT NULL, schedule TEXT NOT NULL,
    status TEXT NOT NULL, reason TEXT NOT NULL, times TEXT NOT NULL, median_s REAL,
    build_s REAL NOT NULL, created REAL NOT NULL, tuner TEXT NOT NULL, extra TEXT NOT NULL,
    digest TEXT NOT NULL UNIQUE);
CREATE INDEX records_by_task ON records (task_key, target, device, status, median_s);
INSERT INTO schema_version VALUES (1);
"""
"""The schema of einc's main before record contexts (einc.compiler.records at SCHEMA_VERSION 1)."""


def old_database(path: Path) -> int:
    """A version 1 database holding the matmul's tuned record on this machine's device, decided
    the best, as an einc before contexts wrote it; its id."""
    task = matmul_task()
    candidate = tuned_candidate(task)
    conn = sqlite3.connect(path, isolation_level=None)
    conn.executescript(SCHEMA_V1)
    conn.execute("PRAGMA journal_mode = WAL")
    conn.execute("INSERT INTO programs VALUES (?, ?, ?)", (task.key, task.normalized, "output0 = ..."))
    extra = {"final": "final-x", "best": True, "kept_default": False, "decision": "faster"}
    cursor = conn.execute(
        "INSERT INTO records (task_key, target, device, sketch, knobs, schedule, status, reason, times, median_s,"
        " build_s, created, tuner, extra, digest) VALUES (?, 'c', ?, 'ssrsrs', ?, ?, 'ok', '', '[0.001]', 0.001,"
        " 0.2, 1.0e9, 'bayes-0', ?, 'v1')",
        (task.key, device_fingerprint(get_target("c")), json.dumps(TUNED), candidate.schedule, json.dumps(extra)),
    )  # fmt: skip
    conn.close()
    assert cursor.lastrowid is not None
    return cursor.lastrowid


def test_an_old_database_is_migrated_and_its_records_are_never_used(tmp_path: Path, sources: dict[str, str],
                                                                    capsys: pytest.CaptureFixture[str]) -> None:  # fmt: skip
    db = tmp_path / "old.db"
    rid = old_database(db)
    assert main(["compile", str(MATMUL), "--db", str(db)]) == 0  # opened (and migrated): not used
    out, err = capsys.readouterr()
    assert out == sources["default"]
    assert err == ("einc: note: 1 tuning record of this program for target c was made by an einc that did not "
                   "record the compiler, flags and search space: not used; re-tune (`einc tune`)\n")  # fmt: skip
    assert sqlite3.connect(db).execute("SELECT max(version) FROM schema_version").fetchone() == (2,)
    task = matmul_task()
    with RecordDB(db) as records:
        old = records.get(rid)
        assert old is not None and old.context is None and old.is_decision and old.schedule
        assert records.best(task.key, "c", record_context(get_target("c"))) is None
        [row] = records.tasks()
        assert row["context"] is None and row["best_id"] == rid  # listed as it was, never used
        new = records.add(task, record_context(get_target("c")), result(tuned_candidate(task)))
    assert main(["records", "list", "--db", str(db)]) == 0
    listing = capsys.readouterr().out.splitlines()
    assert listing[1].endswith("  no (before keys)") and listing[2].endswith("  yes")
    assert main(["compile", str(MATMUL), "--db", str(db)]) == 0  # the new record is used
    out, err = capsys.readouterr()
    assert out == sources["tuned"] and err.startswith(f"einc: using tuning record {new} ")
    exported = io.StringIO()
    with RecordDB(db) as records:
        records.export_jsonl(exported)
    lines = [json.loads(x) for x in exported.getvalue().splitlines()]
    assert [x["compiler"] is None for x in lines] == [True, False]  # an old record exports no key


def test_an_old_database_einc_cannot_write_is_read_as_it_is(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                            sources: dict[str, str], capsys: pytest.CaptureFixture[str]) -> None:  # fmt: skip
    """A version 1 database opened read-only (not migrated: SQLite's `mode=ro`) is listed and
    shown, and its records are never used."""
    db = tmp_path / "old.db"
    rid = old_database(db)
    monkeypatch.setattr("einc.compiler.records.readonly_reason", lambda path: "the file is read-only")
    task = matmul_task()
    with RecordDB(db, create=False) as records:
        assert records.version == 1 and not records.writable
        assert records.best(task.key, "c", record_context(get_target("c"))) is None
        assert records.trials(task.key, "c", record_context(get_target("c"))) == []
        assert records.others(task.key, "c", record_context(get_target("c"))) == [(None, 1)]
        [row] = records.tasks()
        assert row["context"] is None and row["best_id"] == rid
        old = records.get(rid)
        assert old is not None and old.context is None
    assert main(["compile", str(MATMUL), "--db", str(db)]) == 0
    out, err = capsys.readouterr()
    assert out == sources["default"] and "made by an einc that did not record the compiler" in err
    assert main(["records", "list", "--db", str(db)]) == 0
    assert capsys.readouterr().out.splitlines()[1].endswith("  no (before keys)")
    assert sqlite3.connect(db).execute("SELECT max(version) FROM schema_version").fetchone() == (1,)


def test_imported_records_of_the_old_format_are_never_used(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    task = matmul_task()
    with RecordDB(tmp_path / "a.db") as a:
        a.add(task, record_context(get_target("c")), result(tuned_candidate(task)))
        text = io.StringIO()
        a.export_jsonl(text)
    line = json.loads(text.getvalue())
    assert line["format"] == "einc-tuning-record/2" and line["space"] == f"cpu.{SPACE_VERSIONS['cpu']}"
    old = {k: v for k, v in line.items() if k not in ("isa", "driver", "compiler", "flags", "space")}
    old["format"] = "einc-tuning-record/1"
    with RecordDB(tmp_path / "b.db") as b:
        assert b.import_jsonl(io.StringIO(json.dumps(old) + "\n")) == 1
        assert b.import_jsonl(io.StringIO(json.dumps(line) + "\n")) == 1  # another record: it has a context
        [first, second] = b.others(task.key, "c", RecordContext("x", "", "", "", "", ""))
        assert {first[0] is None, second[0] is None} == {True, False}
        best = b.best(task.key, "c", record_context(get_target("c")))
        assert best is not None and best.context == record_context(get_target("c"))
        with pytest.raises(RecordError, match="all null or all set"):
            b.import_jsonl(io.StringIO(json.dumps(line | {"driver": None}) + "\n"))


# ---- a lookup among 100,000 records ----------------------------------------------------------------
def test_lookups_search_the_indexes_among_100k_records(tmp_path: Path) -> None:
    """Every query of `best`, `trials`, `others` and `has_task` is a search of an index on the
    program, target and context, never a scan of the records (benchmarks/records_lookup.py
    times them: well under 50 ms with 100,000 records)."""
    task, here = TuneTask(SMALL), record_context(get_target("c"))
    other = dataclasses.replace(here, compiler="gcc 1.0")
    with RecordDB(tmp_path / "t.db") as db:
        db.add(task, here, result(small_candidate(0), times=(1e-3,), ))
        db.add(task, here, MeasureResult(small_candidate(1), Status.OK, "", (9e-4,),
                                         extra={"final": "f", "best": True, "decision": "faster"}))  # fmt: skip
        n = 100_000
        fields, trial, keys = (here.isa, here.driver, here.compiler, here.flags, here.space), '{"trial": true}', (other.key, here.key)
        rows = [(f"{i % 1000:016x}", "c", here.device, "s", "{}", "// s", "ok", "", "[0.001]", 1e-3 + i * 1e-9, 0.1,
                 1.0, "t", trial, f"d{i}", *fields, keys[i % 2]) for i in range(n)]  # fmt: skip
        with db._transaction():
            db.conn.executemany("INSERT INTO records (task_key, target, device, sketch, knobs, schedule, status, reason,"
                                " times, median_s, build_s, created, tuner, extra, digest, isa, driver, compiler, flags,"
                                " space, context) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                                rows)  # fmt: skip
        assert len(db) == n + 2
        statements: list[str] = []
        db.conn.set_trace_callback(statements.append)  # the SQL as run, its arguments bound
        best = db.best(task.key, "c", here)
        assert best is not None and best.median_s == 9e-4
        db.best("0000000000000007", "c", here)  # no decision: the final ranking, then the ranked records
        db.trials(task.key, "c", here)
        db.others(task.key, "c", here)
        db.has_task(task.key, "c")
        db.conn.set_trace_callback(None)
        assert len(statements) >= 7
        indexes, used = ("records_by_context", "records_decisions", "records_finals", "records_ranked"), set()
        for sql in statements:
            plan = [row[3] for row in db.conn.execute(f"EXPLAIN QUERY PLAN {sql}")]
            searches = [step for step in plan if step.startswith(("SEARCH r ", "SEARCH records "))]
            assert searches and not any(step.startswith(("SCAN r", "SCAN records")) for step in plan), (sql, plan)
            assert all("(task_key=? AND target=?" in step for step in searches), (sql, plan)
            used |= {i for step in searches for i in indexes if f" INDEX {i} " in step}
        assert used == set(indexes)  # the decision, the final ranking, the ranked records, trials


# ---- the search space's version ------------------------------------------------------------------
SPACE_DIGESTS = {"cpu": (24, "37f12d3661ee226e"), "gpu": (16, "27a6c9309bfaeddf")}
"""Per schedule family: its SPACE_VERSIONS number and the digest of `einc sketches` of the
reference programs (SPACE_PROGRAMS) on a target of the family, 512-bit C vectors."""
SPACE_PROGRAMS = ("matmul.ein", "mnist.ein", "softmax.ein", "layernorm.ein", "conv2d_pad.ein")
SPACE_TARGETS = {"cpu": "c", "gpu": "opencl"}


@pytest.mark.parametrize("family", list(SPACE_DIGESTS))
def test_the_space_version_changes_when_the_space_does(family: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """A change to a family's sketch rules or default policy that changes what a search tries
    must bump its version (einc.schedule.default.SPACE_VERSIONS), so that the records of the
    old space stop applying."""
    import hashlib

    from einc.schedule.default import SPACE_VERSIONS
    from einc.tune.space import describe_sketches

    monkeypatch.setenv("EINC_C_VECTOR_BITS", "512")
    text = "".join(describe_sketches(str(ROOT / "examples" / p), SPACE_TARGETS[family]) for p in SPACE_PROGRAMS)
    digest = hashlib.sha256(text.encode()).hexdigest()[:16]
    version, known = SPACE_DIGESTS[family]
    assert (SPACE_VERSIONS[family], digest) == (version, known), (
        f"the {family} search space changed (digest {digest}): bump SPACE_VERSIONS[{family!r}] in "
        "einc/schedule/default.py (tuning records of the old space then stop applying) and set "
        f"SPACE_DIGESTS[{family!r}] here; a change that leaves every record valid updates the digest only")
