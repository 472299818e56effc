"""Tuning through `einc serve` (einc/tools/serve/tuning.py): the real server, started on
127.0.0.1 as in test_serve.py, with a temporary `--db`, one build worker per job and a queue
of one. A job runs to done and `/compile` then applies its decision (and said `default`,
without waiting, while it ran); a second job waits behind the first, a third is refused with
429 and Retry-After; bad bodies are located 400s and an unknown id is 404; a tuning process
killed mid-job fails its job with the reason while the server keeps answering; a server told
to stop (SIGTERM) stops its running job with the trials it measured kept. Without a server:
a bug in einc inside a job's process is its last word (the internal error's text, the
reproducer for the log), and a job's reports make its progress and best."""

from __future__ import annotations

import json
import multiprocessing
import os
import re
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from multiprocessing.connection import Connection
from pathlib import Path

import pytest

from einc.targets import get_target
from einc.compiler.records import record_context
from einc.tools.serve.jobs import TuneRequest, parse_tune_request
from einc.tools.serve.tuning import TuneJob, tune_process
from einc.tune.records import RecordDB
from einc.tune.types import TuneTask
from tests.test_serve import ADD, MATMUL, Server, wait_until_listening

ROOT = Path(__file__).resolve().parent.parent
MAX_TRIALS = 20
DEADLINE_S = 180.0
"""The longest a test waits for a job (a few seconds each here; a loaded machine is slower)."""
SMALL_INPUTS = {"input0": {"dtype": "float32", "shape": [32, 16]}, "input1": {"dtype": "float32", "shape": [16, 8]}}
SMALL_MATMUL = {**MATMUL, "input_dict": SMALL_INPUTS}
SMALL_TASK = TuneTask(str(MATMUL["ir"]), "c", "<ir>", SMALL_INPUTS)


def start_server(folder: Path) -> Server:
    log, db = folder / "server.log", folder / "records.db"
    env = {**os.environ, "PYTHONPATH": str(ROOT), "EINC_TUNING_DB": str(folder / "unused.db")}
    command = [sys.executable, "-m", "einc.cli", "serve", "--host", "127.0.0.1", "--port", "0", "--workers", "2",
               "--db", str(db), "--tune-queue", "1", "--tune-workers", "1", "--max-trials", str(MAX_TRIALS)]  # fmt: skip
    with open(log, "wb") as out:
        proc = subprocess.Popen(command, stdout=out, stderr=subprocess.STDOUT, env=env, cwd=folder)
    url = wait_until_listening(proc, log, deadline=time.monotonic() + 90)
    return Server(url, proc, log, db)


def stop_server(server: Server) -> int:
    server.proc.terminate()
    try:
        return server.proc.wait(timeout=60)
    except subprocess.TimeoutExpired:
        server.proc.kill()
        server.proc.wait()
        pytest.fail(f"einc serve did not stop in 60 s:\n{server.log.read_text()}")


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    started = start_server(tmp_path_factory.mktemp("serve-tune"))
    try:
        yield started
    finally:
        stop_server(started)
    assert "Traceback" not in started.log.read_text(), started.log.read_text()


def http(url: str, body: dict[str, object] | bytes | None = None) -> tuple[int, dict[str, str], dict[str, object]]:
    """(status, headers, JSON answer) of a GET, or of a POST of `body`."""
    data = None if body is None else body if isinstance(body, bytes) else json.dumps(body).encode()
    req = urllib.request.Request(url, data=data, method="GET" if data is None else "POST")
    try:
        with urllib.request.urlopen(req, timeout=120) as answer:
            return answer.status, dict(answer.headers), json.loads(answer.read())
    except urllib.error.HTTPError as err:
        return err.code, dict(err.headers), json.loads(err.read())


def submit(server: Server, body: dict[str, object], trials: int) -> dict[str, object]:
    status, headers, answer = http(server.url + "/tune", {**body, "trials": trials})
    assert status == 202, answer
    assert headers["location"] == f"/tune/{answer['id']}" and answer["progress"] == {"done": 0, "total": trials, "failed": 0}
    return answer


def wait_for(server: Server, job_id: object, until: set[str], trials: int = 0) -> dict[str, object]:
    """The job's state once it is one of `until` (and, with `trials`, it has done that many)."""
    deadline = time.monotonic() + DEADLINE_S
    while True:
        status, _, job = http(f"{server.url}/tune/{job_id}")
        assert status == 200, job
        progress = job["progress"]
        assert isinstance(progress, dict)
        if job["state"] in until and progress["done"] >= trials:
            return job
        assert time.monotonic() < deadline, (job, server.log.read_text())
        time.sleep(0.2)


def job_pid(server: Server, job_id: object) -> int:
    """The process id of a running job (from the server's log)."""
    deadline = time.monotonic() + DEADLINE_S
    while (found := re.search(rf"tune job {job_id} started in process (\d+)", server.log.read_text())) is None:
        assert time.monotonic() < deadline, server.log.read_text()
        time.sleep(0.1)
    return int(found.group(1))


# ---- a job, the queue, and /compile -------------------------------------------------------------
def test_a_job_tunes_while_compile_answers_and_then_compile_applies_its_record(server: Server) -> None:
    first = submit(server, SMALL_MATMUL, 3)
    # /compile answers at once with the default schedule, naming the job tuning its program.
    status, _, compiled = http(server.url + "/compile", SMALL_MATMUL)
    assert status == 200 and compiled["schedule_source"] == "default" and compiled["record"] is None
    tuning = compiled["tuning"]
    assert isinstance(tuning, dict) and tuning["id"] == first["id"] and tuning["state"] in ("queued", "running")
    status, _, now = http(f"{server.url}/tune/{first['id']}")
    assert status == 200 and now["state"] in ("queued", "running"), now  # the compile did not wait for it
    # A second job waits behind the running one; a third finds the queue (of one) full.
    second = submit(server, ADD, 1)
    assert second["state"] == "queued" and second["queue_position"] == 1
    status, headers, full = http(server.url + "/tune", {**ADD, "trials": 1})
    assert status == 429, full
    assert int(headers["retry-after"]) >= 1 and full["retry_after_s"] == int(headers["retry-after"])
    assert "is full: a job is running and 1 wait (einc serve --tune-queue)" in str(full["error"])

    done = wait_for(server, first["id"], {"done", "failed"})
    assert done["state"] == "done", done
    assert done["progress"] == {"done": 3, "total": 3, "failed": 0}
    best = done["best"]
    assert isinstance(best, dict) and best["measured"] == "the final rounds"
    assert isinstance(best["time_s"], float) and best["time_s"] > 0 and isinstance(best["vs_default"], float)
    record = done["record"]
    assert isinstance(record, int) and done["db"] == str(server.db) and str(done["decision"])
    kind = "the default schedule, kept by the tuner" if done["kept_default"] else "tuned"
    assert done["schedule_source"] == f"record {record} ({kind})"
    # The job's records are the ones `einc compile` uses: its trials and its decision.
    with RecordDB(server.db) as db:
        assert len(db.trials(SMALL_TASK.key, "c", record_context(get_target("c")))) == 3
        decided = db.best(SMALL_TASK.key, "c", record_context(get_target("c")))
        assert decided is not None and decided.id == record
    status, _, compiled = http(server.url + "/compile", SMALL_MATMUL)
    assert status == 200 and compiled["schedule_source"] == done["schedule_source"] and "tuning" not in compiled
    assert isinstance(compiled["record"], dict) and compiled["record"]["id"] == record

    # The second job ran once the first was done.
    after = wait_for(server, second["id"], {"done", "failed"})
    assert after["state"] == "done" and after["progress"] == {"done": 1, "total": 1, "failed": 0}, after
    log = server.log.read_text()
    assert log.index(f"tune job {first['id']} done") < log.index(f"tune job {second['id']} started")


# ---- bad requests ------------------------------------------------------------------------------
BAD = [
    ("no trials", ADD, "<request>:1:1: error: the tuning request has no 'trials' (how many candidates to measure: "
     f"a whole number from 1 to {MAX_TRIALS})"),
    ("zero trials", {**ADD, "trials": 0}, f"error: 'trials' must be from 1 to {MAX_TRIALS} (the server's --max-trials), got 0"),
    ("too many trials", {**ADD, "trials": MAX_TRIALS + 1}, f"must be from 1 to {MAX_TRIALS} (the server's --max-trials), "
     f"got {MAX_TRIALS + 1}"),
    ("trials a string", {**ADD, "trials": "3"}, f"error: 'trials' is a whole number from 1 to {MAX_TRIALS}, not a string"),
    ("trials a fraction", {**ADD, "trials": 2.5}, f"error: 'trials' is a whole number from 1 to {MAX_TRIALS}, not 2.5"),
    ("trials a boolean", {**ADD, "trials": True}, "not a boolean"),
    ("a schedule", {**ADD, "trials": 3, "schedule": "none"}, "error: a tuning request takes no 'schedule': the tuner "
     "searches the schedules"),
    ("use_records", {**ADD, "trials": 3, "use_records": False}, "error: a tuning request takes no 'use_records'"),
    ("unknown field", {**ADD, "trials": 3, "trails": 3}, "error: unknown field 'trails' (the fields are ir, input_dict, "
     "target, extra_outputs, trials)"),
    ("unknown target", {**ADD, "trials": 3, "target": "cudax"}, "error: unknown target 'cudax'"),
    ("a mistake in the program", {**ADD, "trials": 3, "ir": "output0[N] = input0[N] + input9[N]"},
     "<ir>:1:26: error: unknown tensor 'input9'"),
    ("not JSON", b'{"ir": ', "<request>:1:8: error: the request body is not JSON"),
]  # fmt: skip


@pytest.mark.parametrize(("what", "body", "error"), BAD, ids=[b[0] for b in BAD])
def test_bad_tuning_requests_get_located_400s(server: Server, what: str, body: dict[str, object] | bytes,
                                              error: str) -> None:  # fmt: skip
    status, _, answer = http(server.url + "/tune", body)
    assert status == 400, (what, answer)
    text = str(answer["error"])
    assert re.match(r"^<(request|ir)>:\d+:\d+: error: ", text) and error in text, text


def test_an_unknown_job_is_404(server: Server) -> None:
    status, _, answer = http(server.url + "/tune/0123456789abcdef")
    assert status == 404 and str(answer["error"]).startswith("no tuning job '0123456789abcdef'")
    assert http(server.url + "/tune")[0] == 405


# ---- failures and shutdown ----------------------------------------------------------------------
def test_a_killed_tuning_process_fails_its_job_and_the_server_keeps_answering(server: Server) -> None:
    job = submit(server, SMALL_MATMUL, 5)
    wait_for(server, job["id"], {"running"})
    os.kill(job_pid(server, job["id"]), signal.SIGKILL)
    failed = wait_for(server, job["id"], {"failed", "done"})
    assert failed["state"] == "failed", failed
    assert str(failed["reason"]).startswith("the tuning process ended before the job did (killed by SIGKILL")
    assert http(server.url + "/health")[0] == 200
    status, _, compiled = http(server.url + "/compile", {**ADD, "target": "opencl"})
    assert status == 200 and compiled["schedule_source"] == "default"
    # and the queue goes on
    assert wait_for(server, submit(server, ADD, 1)["id"], {"done", "failed"})["state"] == "done"


def test_stopping_the_server_stops_its_running_job_and_keeps_the_trials(tmp_path: Path) -> None:
    """SIGTERM (as a service manager stops it): the job's process is interrupted as Ctrl-C
    interrupts `einc tune`, once it has measured a batch (4 trials with one build worker)."""
    server = start_server(tmp_path)
    try:
        job = submit(server, SMALL_MATMUL, MAX_TRIALS)
        wait_for(server, job["id"], {"running"}, trials=1)
        pid = job_pid(server, job["id"])
    finally:
        stop_server(server)
    log = server.log.read_text()
    stopped = re.search(rf"tune job {job['id']} failed: stopped after (\d+) of {MAX_TRIALS} trials \(the server shut down\); "
                        rf"their records are kept in {re.escape(str(server.db))}", log)  # fmt: skip
    assert stopped and int(stopped.group(1)) >= 1, log
    assert "Traceback" not in log and "Application shutdown complete" in log
    with RecordDB(server.db) as db:
        assert len(db.trials(SMALL_TASK.key, "c", record_context(get_target("c")))) == int(stopped.group(1))
    status = Path(f"/proc/{pid}/status")
    assert not status.exists() or "State:\tZ" in status.read_text()  # the job's process is gone


# ---- the job's process and its reports, without a server ------------------------------------------
def broken_tune_process(request: TuneRequest, db: str, reports: Connection, lifeline: Connection) -> None:
    """`tune_process` with a bug in the tuner (in a spawned process: the patch is its own)."""
    from einc.tune import tuner

    def broken(*args: object, **kwargs: object) -> None:
        raise RuntimeError("a tuner bug")

    setattr(tuner, "tune", broken)
    tune_process(request, db, 1, reports, lifeline)


def test_a_bug_in_einc_fails_the_job_with_the_internal_errors_text_and_its_reproducer(tmp_path: Path) -> None:
    context = multiprocessing.get_context("spawn")
    reports, report_end = context.Pipe(duplex=False)
    lifeline_end, lifeline = context.Pipe(duplex=False)
    request = parse_tune_request(json.dumps({**SMALL_MATMUL, "trials": 2}).encode(), MAX_TRIALS)
    process = context.Process(target=broken_tune_process, args=(request, str(tmp_path / "r.db"), report_end, lifeline_end))
    process.start()
    report_end.close()
    lifeline_end.close()
    messages = []
    while reports.poll(DEADLINE_S):
        try:
            messages.append(reports.recv())
        except EOFError:
            break
    process.join(timeout=DEADLINE_S)
    lifeline.close()
    assert process.exitcode == 0 and len(messages) == 1, messages
    kind, body, reproducer = messages[0]
    assert kind == "failed" and body["reason"].startswith("internal compiler error in stage 'tune': RuntimeError: a tuner bug")
    assert "Traceback" not in body["reason"] and "Traceback" in reproducer and str(MATMUL["ir"]) in reproducer


def test_a_jobs_reports_make_its_progress_and_best() -> None:
    request = parse_tune_request(json.dumps({**ADD, "trials": 4}).encode(), MAX_TRIALS)
    job = TuneJob.new(request, {"task_key": "k", "device": "d"})
    assert job.to_json(1) == {"id": job.id, "state": "queued", "target": "c", "device": "d", "task_key": "k",
                              "progress": {"done": 0, "total": 4, "failed": 0}, "best": None, "queue_position": 1}
    job.state, job.started = "running", time.time()
    job.apply(("trial", {"time_s": None, "default": False, "schedule": "tile()", "status": "wrong"}))
    job.apply(("trial", {"time_s": 2e-3, "default": True, "schedule": "default()", "status": "ok"}))
    job.apply(("trial", {"time_s": 1e-3, "default": False, "schedule": "tile(k=4)", "status": "ok"}))
    job.apply(("trial", {"time_s": 3e-3, "default": False, "schedule": "tile(k=8)", "status": "ok"}))
    answer = job.to_json()
    assert answer["progress"] == {"done": 4, "total": 4, "failed": 1}
    assert answer["best"] == {"time_s": 1e-3, "default_s": 2e-3, "vs_default": 2.0, "schedule": "tile(k=4)",
                              "measured": "a search trial, measured once"}  # fmt: skip
    job.apply(("done", {"decision": "d", "kept_default": False, "record": 7, "schedule_source": "record 7 (tuned)",
                        "db": "x.db", "summary": "s", "best_s": 1.5e-3, "default_s": 2e-3, "schedule": "tile(k=4)"}))  # fmt: skip
    answer = job.to_json()
    assert answer["state"] == "done" and answer["record"] == 7 and answer["schedule_source"] == "record 7 (tuned)"
    assert answer["best"] == {"time_s": 1.5e-3, "default_s": 2e-3, "vs_default": 1.3333, "schedule": "tile(k=4)",
                              "measured": "the final rounds"}  # fmt: skip
    assert "best_s" not in answer and "reason" not in answer


def test_a_stop_whose_interrupt_was_lost_still_stops_the_job(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A SIGINT's KeyboardInterrupt raised inside a finalizer (a weakref callback the collector
    ran just then) is printed and dropped by Python; the stop it meant is still seen at the
    next trial report, and the job ends stopped with its trials kept (it once went on and
    answered `done`)."""
    from einc.tools.serve import tuning

    monkeypatch.setattr(tuning, "_STOP", type(tuning._STOP)())
    tuning._STOP.set()  # the signal came; its exception was lost
    request = parse_tune_request(json.dumps({**SMALL_MATMUL, "trials": 4}).encode(), MAX_TRIALS)
    sent: list[object] = []
    db = tmp_path / "records.db"
    word, body = tuning._tune(request, db, 1, sent.append)
    assert word == "stopped" and "stopped after 1 of 4 trials" in str(body["reason"]), (word, body)
    assert [m[0] for m in sent] == ["trial"]
    with RecordDB(db) as records:
        assert len(records.trials(SMALL_TASK.key, "c", record_context(get_target("c")))) == 1
