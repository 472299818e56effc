"""`einc serve` (einc/tools/serve/app.py, einc/tools/serve/jobs.py): the real server, started with uvicorn in a
subprocess on 127.0.0.1 (a free port chosen by the system), asked over HTTP. Each answer is
compared with what the compiler gives in this process (the same source and manifest as
`einc compile`); malformed requests get located errors; a compile over the time limit is cut
off while the other worker keeps answering; tuning records are used and reported (with
`schedule_source`). Tuning through the service (`POST /tune`) is in test_serve_tune.py."""

from __future__ import annotations

import ctypes
import json
import os
import re
import socket
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pytest

from einc.targets import get_target
from einc.cli import main
from einc.compiler.driver import Compilation
from einc.semantics.compare import max_error, tolerance
from einc.targets import toolchains
from einc.runtime.c import CFLAGS, LIBS
from einc.runtime.finders import compiler
from einc.runtime.manifest import LaunchManifest
from einc.tools.serve.app import Answer
from einc.tools.serve.jobs import MAX_DEPTH, CompileRequest, RequestError, compile_job, parse_request
from einc.tune.records import RecordDB
from einc.compiler.records import record_context
from einc.tune.types import Candidate, MeasureResult, Point, Status, TuneTask

ROOT = Path(__file__).resolve().parent.parent
TIMEOUT_S = 6.0
"""The server's compile limit: far above any valid request's compile here (tenths of a second,
a few seconds on a loaded machine), far below the slow compile's (half a minute)."""
MAX_BODY = 64 << 10
LOCATED = re.compile(r"^<(request|ir|schedule)>:\d+:\d+: error: ")
ADD = {"ir": "output0[N] = input0[N] + input1[N]",
       "input_dict": {"input0": {"dtype": "float32", "shape": [1024]}, "input1": {"dtype": "float32", "shape": [1024]}}}  # fmt: skip
MATMUL = {"ir": "output0[N, M] +=! input0[N, K] * input1[K, M]",
          "input_dict": {"input0": {"dtype": "float32", "shape": [64, 32]}, "input1": {"dtype": "float32", "shape": [32, 16]}}}  # fmt: skip


@dataclass
class Server:
    url: str
    proc: subprocess.Popen[bytes]
    log: Path
    db: Path


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    folder = tmp_path_factory.mktemp("serve")
    log, db = folder / "server.log", folder / "records.db"
    env = {**os.environ, "PYTHONPATH": str(ROOT), "EINC_TUNING_DB": str(db)}
    command = [sys.executable, "-m", "einc.cli", "serve", "--host", "127.0.0.1", "--port", "0", "--workers", "2",
               "--timeout", str(TIMEOUT_S), "--max-body", str(MAX_BODY)]  # fmt: skip
    with open(log, "wb") as out:
        proc = subprocess.Popen(command, stdout=out, stderr=subprocess.STDOUT, env=env, cwd=folder)
    try:
        url = wait_until_listening(proc, log, deadline=time.monotonic() + 90)
        assert get(url + "/health")[0] == 200
        yield Server(url, proc, log, db)
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
    assert "Traceback" not in log.read_text(), log.read_text()


def wait_until_listening(proc: subprocess.Popen[bytes], log: Path, deadline: float) -> str:
    """The server's URL, from its `listening on` line (printed once its workers are warm)."""
    while time.monotonic() < deadline:
        found = re.search(r"listening on (http://[\d.]+:\d+)", log.read_text())
        if found:
            return found.group(1)
        if proc.poll() is not None:
            pytest.fail(f"einc serve exited with status {proc.returncode}:\n{log.read_text()}")
        time.sleep(0.1)
    pytest.fail(f"einc serve did not start in time:\n{log.read_text()}")


def request(url: str, data: bytes | None = None, method: str = "GET") -> tuple[int, dict[str, object]]:
    req = urllib.request.Request(url, data=data, method=method, headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=120) as answer:
            return answer.status, json.loads(answer.read())
    except urllib.error.HTTPError as err:
        return err.code, json.loads(err.read())


def get(url: str) -> tuple[int, dict[str, object]]:
    return request(url)


def post(server: Server, body: dict[str, object] | bytes) -> tuple[int, dict[str, object]]:
    data = body if isinstance(body, bytes) else json.dumps(body).encode()
    return request(server.url + "/compile", data, "POST")


def expected(body: dict[str, object], target: str) -> tuple[str, dict[str, object]]:
    """The source and manifest of `body` compiled here, as `einc compile -o OUT` writes them."""
    comp = Compilation(str(body["ir"]), "<ir>", body["input_dict"], target=target, use_records=False)
    manifest = comp.target_obj.manifest(comp.module("target"))
    assert manifest is not None
    return comp.source_text(), json.loads(manifest.to_json())


# ---- answers ---------------------------------------------------------------------------------
def test_health_and_targets(server: Server) -> None:
    status, health = get(server.url + "/health")
    assert status == 200 and health["status"] == "ok" and health["timeout_s"] == TIMEOUT_S
    status, targets = get(server.url + "/targets")
    assert status == 200 and {"c", "cuda", "opencl", "hip"} <= set(targets["targets"])


def test_concurrent_requests_get_the_compilers_source_and_manifest(server: Server) -> None:
    softmax = {"ir": (ROOT / "examples" / "softmax.ein").read_text(), "input_dict": None}  # a .ein program
    jobs = [(body, target) for body in (ADD, MATMUL) for target in ("c", "cuda", "opencl")]
    jobs += [(ADD, "hip"), (softmax, "opencl")]
    with ThreadPoolExecutor(len(jobs)) as threads:
        answers = list(threads.map(lambda job: post(server, {**job[0], "target": job[1]}), jobs))
    for (body, target), (status, answer) in zip(jobs, answers, strict=True):
        assert status == 200, answer
        assert answer["target"] == target and answer["record"] is None
        if target == "c":
            source = Compilation(str(body["ir"]), "<ir>", body["input_dict"], use_records=False).source_text()
            assert answer["source"] == source
            manifest = answer["manifest"]
            assert isinstance(manifest, dict)
            assert manifest["function"] == {
                "name": "kernel",
                "args": ["input0", "input1", "output0"],
                "prototype": "void kernel(const float* restrict input0, const float* restrict input1, "
                "float* restrict output0)",
            }
            assert [(b["name"], b["role"]) for b in manifest["buffers"]] == [
                ("input0", "input"), ("input1", "input"), ("output0", "output")]  # fmt: skip
        else:  # the device targets need no GPU or driver for source and manifest
            assert (answer["source"], answer["manifest"]) == expected(body, target)
            assert answer["manifest"]["kernels"][0]["block"][0] >= 1


def test_served_source_runs_from_its_manifest_alone(server: Server, tmp_path: Path) -> None:
    """What a client does with an answer: C built with cc and called through ctypes in the
    order of `manifest.function.args`; OpenCL launched from the manifest by einc's OpenCL
    runtime. Both against the float64 NumPy product."""
    rng = np.random.default_rng(7)
    arrays = {k: rng.uniform(0.5, 2.0, v["shape"]).astype(np.float32) for k, v in MATMUL["input_dict"].items()}
    want = arrays["input0"].astype(np.float64) @ arrays["input1"].astype(np.float64)
    status, answer = post(server, {**MATMUL, "target": "c"})
    assert status == 200, answer
    source, library = tmp_path / "kernel.c", tmp_path / "kernel.so"
    source.write_text(str(answer["source"]))
    subprocess.run([compiler(), *CFLAGS, str(source), "-o", str(library), *LIBS], check=True)
    function = answer["manifest"]["function"]
    buffers = {b["name"]: b for b in answer["manifest"]["buffers"]}
    out = np.full(buffers["output0"]["shape"], np.nan, np.float32)
    kernel = getattr(ctypes.CDLL(str(library)), function["name"])
    kernel(*(ctypes.c_void_p({**arrays, "output0": out}[name].ctypes.data) for name in function["args"]))
    assert max_error(out, want) <= tolerance("float32")

    require_opencl()
    from einc.runtime.opencl import load_opencl_kernel

    status, answer = post(server, {**MATMUL, "target": "opencl"})
    assert status == 200, answer
    launch = load_opencl_kernel(str(answer["source"]), LaunchManifest.from_json(json.dumps(answer["manifest"])))
    outputs = {"output0": np.full(want.shape, np.nan, np.float32)}
    launch(arrays, outputs)
    assert max_error(outputs["output0"], want) <= tolerance("float32")


def require_opencl() -> None:
    ok, why = toolchains.available("opencl")
    if not ok:
        if toolchains.required("opencl"):
            pytest.fail(f"CI needs the opencl toolchain: {why}")
        pytest.skip(why)


# ---- malformed requests ------------------------------------------------------------------------
SCHEDULE_BAD = """transform.named_sequence @__transform_main(%root: !transform.any_op) {
  %n = transform.einc.match stmt "output7" axis "N" in %root
  transform.yield
}"""

MALFORMED = [
    ("not JSON", b'{"ir": "x",', "<request>:1:12: error: the request body is not JSON"),
    ("not an object", b'["output0[N] = input0[N]"]', "<request>:1:1: error: the request body is a JSON object"),
    ("no ir", json.dumps({"input_dict": {}, "target": "c"}).encode(), "<request>:1:1: error: the request has no 'ir'"),
    ("ir not a string", b'{"ir": 5, "target": "c"}', "<request>:1:2: error: 'ir' is a string, not a number"),
    ("unknown field", b'{"ir": "x", "targte": "c"}', "<request>:1:13: error: unknown field 'targte'"),
    ("unknown target", json.dumps({**ADD, "target": "cudax"}).encode(), "error: unknown target 'cudax' (available: c, "),
    ("IR syntax error", json.dumps({**ADD, "ir": "output0[N] = input0[N] +* input1[N]"}).encode(),
     "<ir>:1:25: error: expected an expression, found '*'\noutput0[N] = input0[N] +* input1[N]\n"
     "                        ^"),
    ("unknown tensor", json.dumps({**ADD, "ir": "output0[N] = input0[N] + input9[N]"}).encode(),
     "<ir>:1:26: error: unknown tensor 'input9'"),
    ("bad input_dict", json.dumps({**ADD, "input_dict": {"input0": 5}}).encode(),
     "<ir>:1:1: error: input_dict['input0'] must be a dict with 'dtype' and 'shape'"),
    ("illegal schedule", json.dumps({**ADD, "schedule": SCHEDULE_BAD}).encode(),
     "<schedule>:2:3: error: matched no operation"),
    # JSON the parser reads but a request cannot hold (each was a plain-text 500 with a traceback)
    ("arrays 30k deep", b'{"ir": ' + b"[" * 30_000 + b"]" * 30_000 + b"}",
     "<request>:1:39: error: the request nests arrays more than 32 deep (a compile request needs 4 levels)"),
    ("objects 5000 deep", b'{"ir": "x", "input_dict": ' + b'{"a": ' * 5000 + b"1" + b"}" * 5001,
     "<request>:1:213: error: the request nests objects more than 32 deep"),
    ("a 5001-digit integer", b'{"ir": "x", "input_dict": {"input0": {"shape": [' + b"7" * 5001 + b"]}}}",
     "<request>:1:49: error: the request has an integer of 5001 digits; the service reads integers of at most 4300"),
    ("unknown model device", json.dumps({**ADD, "target": "cuda", "model": "h900"}).encode(),
     "error: unknown device 'h900': the model knows "),
    ("a model file of the server's", json.dumps({**ADD, "target": "cuda", "model": "/etc/x.json"}).encode(),
     "error: 'model' names a built-in device (a100, a770, h100"),
    ("a lone surrogate", b'{"ir": "\\ud800", "target": "c"}',
     "<request>:1:9: error: 'ir' holds a lone surrogate \\ud800, which is no Unicode character"),
]  # fmt: skip


@pytest.mark.parametrize(("what", "body", "error"), MALFORMED, ids=[m[0] for m in MALFORMED])
def test_malformed_requests_get_400_with_the_located_error(server: Server, what: str, body: bytes, error: str) -> None:
    status, answer = post(server, body)
    assert status == 400, (what, answer)
    text = answer["error"]
    assert isinstance(text, str) and LOCATED.match(text) and error in text, text
    assert "Traceback" not in text


def test_a_long_request_line_is_not_echoed_back(server: Server) -> None:
    body = json.dumps({**ADD, "target": ["c"] * 1000}).encode()  # one line of 6 kB
    status, answer = post(server, body)
    col = body.index(b'"target"') + 1
    assert status == 400 and answer["error"] == (
        f"<request>:1:{col}: error: 'target' is a string such as \"c\" or \"cuda\", not an array")


def test_oversize_body_gets_413_and_other_methods_405(server: Server) -> None:
    big = json.dumps({**ADD, "ir": "# " + "x" * MAX_BODY + "\n" + str(ADD["ir"])}).encode()
    status, answer = post(server, big)
    assert status == 413 and f"limit of {MAX_BODY} bytes" in str(answer["error"])
    assert get(server.url + "/compile") == (405, {"error": "Method Not Allowed"})
    assert post(server, ADD)[0] == 200  # and the next request is answered


@pytest.mark.parametrize("depth", [33, 900, 2000])
def test_nesting_past_the_limit_is_located_at_its_first_bracket(depth: int) -> None:
    """Past MAX_DEPTH, below and past Python's recursion limit (which the JSON parser meets)."""
    body = b'{"ir": "x", "input_dict": {"input0": {"shape": ' + b"[" * depth + b"]" * depth + b"}}}"
    with pytest.raises(RequestError) as info:
        parse_request(body)
    col = body.index(b"[") + 1 + MAX_DEPTH - 3  # the object's three levels count
    assert info.value.render().startswith(f"<request>:1:{col}: error: the request nests arrays more than {MAX_DEPTH} deep")
    parse_request(b'{"ir": "x", "input_dict": {"input0": {"shape": ' + b"[" * 29 + b"]" * 29 + b"}}}")  # at the limit


def test_surrogate_pairs_and_escaped_backslashes_are_not_lone_surrogates() -> None:
    assert parse_request(b'{"ir": "a\\ud83d\\ude00b"}').ir == "a\U0001f600b"
    assert parse_request(b'{"ir": "\\\\ud800"}').ir == "\\ud800"  # a backslash, then "ud800"
    with pytest.raises(RequestError, match=r"^<request>:1:30: error: 'input_dict' holds a lone surrogate \\ud800"):
        parse_request(b'{"ir": "x", "input_dict": {"a\\ud800\\u0041\\udc00": 1}}')


def test_an_answer_with_a_lone_surrogate_is_still_json() -> None:
    """The IR's error quotes its line: a surrogate there is written as its escape, never a 500."""
    result = compile_job(CompileRequest("\ud800", None, "c"), None)
    assert result.status == 400
    assert json.loads(Answer(result.body).body) == result.body


def test_a_rank_200_program_is_compiled(server: Server) -> None:
    axes = ", ".join(f"A{i}" for i in range(200))
    body = {"ir": f"output0[{axes}] = input0[{axes}] + 1.0",
            "input_dict": {"input0": {"dtype": "float32", "shape": [1] * 198 + [3, 2]}}}  # fmt: skip
    status, answer = post(server, body)
    assert status == 200, answer
    assert "A199" in str(answer["source"])


# ---- time limit --------------------------------------------------------------------------------
def slow_request(statements: int = 3) -> dict[str, object]:
    """A valid program whose schedule unrolls each statement's loops into ~57k operations:
    half a minute of compiling (without a limit) on this machine."""
    ir = "".join(f"input a{i}: float32[64, 1024]\ninput b{i}: float32[1024, 64]\n" for i in range(statements))
    ir += "".join(f"output{i}[N, M] +=! a{i}[N, K] * b{i}[K, M]\n" for i in range(statements))
    lines = []
    for i in range(statements):
        lines += [f'  %m{i} = transform.einc.match stmt "output{i}" axis "M" in %root',
                  f'  %k{i} = transform.einc.match stmt "output{i}" axis "K" in %root',
                  f"  %kr{i} = transform.einc.unroll %k{i} by 1024", f"  %mr{i} = transform.einc.unroll %m{i} by 8"]  # fmt: skip
    schedule = "transform.named_sequence @__transform_main(%root: !transform.any_op) {\n" + "\n".join(lines)
    return {"ir": ir, "target": "c", "schedule": schedule + "\n  transform.yield\n}\n",
            "extra_outputs": [f"output{i}" for i in range(statements - 1)]}  # fmt: skip


def test_a_compile_over_the_limit_gets_504_and_does_not_block_others(server: Server) -> None:
    done: dict[str, tuple[float, int, dict[str, object]]] = {}

    def slow() -> None:
        status, answer = post(server, slow_request())
        done["slow"] = (time.monotonic(), status, answer)

    start = time.monotonic()
    thread = threading.Thread(target=slow)
    thread.start()
    time.sleep(0.5)  # the slow one is in a worker
    status, answer = post(server, {**ADD, "target": "cuda"})
    done["fast"] = (time.monotonic(), status, answer)
    thread.join(timeout=120)
    assert done["fast"][1] == 200, done["fast"]
    when, status, answer = done["slow"]
    assert status == 504, answer
    assert str(answer["error"]).startswith("<ir>:1:1: error: compiling took longer than the service's limit of 6 s")
    assert done["fast"][0] < when and when - start >= TIMEOUT_S
    # The killed worker was replaced: both workers answer again.
    with ThreadPoolExecutor(2) as threads:
        after = list(threads.map(lambda t: post(server, {**ADD, "target": t}), ("c", "opencl")))
    assert [s for s, _ in after] == [200, 200]
    assert get(server.url + "/health")[0] == 200
    assert "took longer than 6 s and was stopped" in server.log.read_text()


def test_a_client_that_goes_away_frees_its_worker(server: Server) -> None:
    req = urllib.request.Request(server.url + "/compile", data=json.dumps(slow_request()).encode(), method="POST")
    with pytest.raises(TimeoutError):
        urllib.request.urlopen(req, timeout=1.0)  # gives up (and closes the connection) after 1 s
    deadline = time.monotonic() + TIMEOUT_S - 1.5
    while "the client went away: its c compile was stopped" not in server.log.read_text():
        assert time.monotonic() < deadline, server.log.read_text()  # stopped before the time limit
        time.sleep(0.1)
    with ThreadPoolExecutor(2) as threads:
        after = list(threads.map(lambda t: post(server, {**ADD, "target": t}), ("c", "cuda")))
    assert [s for s, _ in after] == [200, 200]


# ---- tuning records ----------------------------------------------------------------------------
TUNED_SCHEDULE = """transform.named_sequence @__transform_main(%root: !transform.any_op) {
  %n = transform.einc.match stmt "output0" axis "N" in %root
  %m = transform.einc.match stmt "output0" axis "M" in %root
  %k = transform.einc.match stmt "output0" axis "K" in %root
  %n2, %k2, %m2 = transform.einc.reorder %n, %k, %m
  transform.einc.parallelize %n2
  transform.yield
}
"""


def test_tuning_records_are_used_and_reported(server: Server) -> None:
    body = {**MATMUL, "input_dict": {"input0": {"dtype": "float32", "shape": [48, 40]},
                                     "input1": {"dtype": "float32", "shape": [40, 24]}}}  # fmt: skip
    status, before = post(server, body)
    assert status == 200 and before["record"] is None and before["schedule_source"] == "default"
    task = TuneTask(str(body["ir"]), "c", "<ir>", body["input_dict"])
    with RecordDB(server.db) as db:
        candidate = Candidate(Point.of("hand", {}), TUNED_SCHEDULE)
        rid = db.add(task, record_context(get_target("c")), MeasureResult(candidate, Status.OK, times=(1e-3,)), tuner="test")
    status, answer = post(server, body)
    assert status == 200, answer
    record = answer["record"]
    assert isinstance(record, dict) and record["id"] == rid and record["db"] == str(server.db)
    assert record["sketch"] == "hand" and str(record["description"]).startswith(f"record {rid} (sketch hand")
    tuned = Compilation(str(body["ir"]), "<ir>", body["input_dict"], schedule=TUNED_SCHEDULE, use_records=False)
    assert answer["source"] == tuned.source_text() != before["source"]
    assert answer["schedule"] == TUNED_SCHEDULE and answer["schedule_source"] == f"record {rid} (tuned)"
    status, without = post(server, {**body, "use_records": False})
    assert status == 200 and without["record"] is None and without["source"] == before["source"]
    assert without["schedule_source"] == "default"
    for schedule, source in ((TUNED_SCHEDULE, "request"), ("none", "none"), ("default", "default")):
        status, given = post(server, {**body, "schedule": schedule})
        assert status == 200 and given["record"] is None and given["schedule_source"] == source, given


# ---- internal errors, in the worker's function ----------------------------------------------------
def test_an_internal_error_is_500_with_its_text_and_the_reproducer_is_for_the_log(monkeypatch: pytest.MonkeyPatch) -> None:
    def broken(self: Compilation) -> str:
        raise RuntimeError("a printer bug")

    monkeypatch.setattr(Compilation, "source_text", broken)
    result = compile_job(CompileRequest(str(ADD["ir"]), ADD["input_dict"], "c"), None)
    assert result.status == 500
    assert str(result.body["error"]).startswith("internal compiler error in stage 'serve': RuntimeError: a printer bug")
    assert "Traceback" not in str(result.body["error"])
    assert result.log is not None and "Traceback" in result.log and str(ADD["ir"]) in result.log


# ---- the command line ------------------------------------------------------------------------------
def test_serve_help(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_:
        main(["serve", "--help"])
    assert exit_.value.code == 0
    out = capsys.readouterr().out
    assert "POST /compile" in out and "--port" in out and "--timeout" in out and "--max-body" in out
    assert "POST /tune" in out and "--tune-queue" in out and "--max-trials" in out and "--tune-workers" in out


@pytest.mark.parametrize(
    ("args", "error"),
    [
        (["--port", "70000"], "<command line>:1:12: error: --port must be from 0 to 65535, got 70000"),
        (["--port", "http"], "<command line>:1:12: error: argument --port: invalid int value: 'http'"),
        (["--host", "256.0.0.1"], "<command line>:1:12: error: cannot listen on 256.0.0.1: "),
        (["--host", "192.0.2.1", "--port", "0"], "<command line>:1:12: error: cannot listen on 192.0.2.1:0: "),
        (["--timeout", "0"], "<command line>:1:12: error: --timeout must be more than 0 seconds, got 0"),
        (["--workers", "0"], "<command line>:1:12: error: --workers must be at least 1, got 0"),
        (["--tune-queue", "-1"], "<command line>:1:12: error: --tune-queue must be 0 or more, got -1"),
        (["--max-trials", "0"], "<command line>:1:12: error: --max-trials must be at least 1, got 0"),
        (["--tune-workers", "0"], "<command line>:1:12: error: --tune-workers must be at least 1, got 0"),
    ],
)
def test_bad_options_are_located_errors(args: list[str], error: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["serve", *args]) == 1
    err = capsys.readouterr().err
    assert err.startswith(error) and "Traceback" not in err


def test_a_port_in_use_is_the_ports_error(capsys: pytest.CaptureFixture[str]) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        assert main(["serve", "--host", "127.0.0.1", "--port", str(port)]) == 1
    err = capsys.readouterr().err
    assert err.startswith(f"<command line>:1:29: error: cannot listen on 127.0.0.1:{port}: Address already in use")
