"""Measurement on Dask (einc/tune/cluster.py, einc/tune/dask_worker.py): a LocalCluster of two
worker processes started here (the one `--runner dask-local` starts) gives the records the local
runner gives; a worker that dies mid-tune costs only its candidate; the device resource keeps a
candidate off a worker of another device; bad `--runner` values and an unreachable scheduler are
located errors, not tracebacks or hangs."""

from __future__ import annotations

import functools
import os
import signal
import sqlite3
import time
from collections.abc import Iterator, Mapping
from pathlib import Path

import pytest
from distributed import Client, LocalCluster

from einc.cli import main
from einc.errors import RuntimeMissingError, UsageError
from einc.tune import cluster as cluster_module
from einc.tune.cluster import DaskRunner, _workers_with, parse_runner, start_local_cluster
from einc.tune.dask_worker import device_resource, local_device, measure_candidate
from einc.tune.measure import LocalRunner
from einc.tune.records import RecordDB
from einc.tune.search import make_policy
from einc.tune.space import SearchSpace
from einc.tune.tuner import TuneResult, tune
from einc.tune.types import Candidate, MeasureResult, Point, Status, TuneTask

MATMUL = """# a small matmul
input input0: float32[32, 48]
input input1: float32[48, 40]

output0[N, M] +=! input0[N, K] * input1[K, M]
"""
FAST = {"repeats": 3, "min_repeat_s": 0.005}
TRIAL = "json_extract(extra, '$.final') IS NULL"


@pytest.fixture(scope="module")
def task(tmp_path_factory: pytest.TempPathFactory) -> TuneTask:
    path = tmp_path_factory.mktemp("dask") / "mm.ein"
    path.write_text(MATMUL)
    return TuneTask.from_file(path)


@pytest.fixture(scope="module")
def cluster() -> Iterator[LocalCluster]:
    local = start_local_cluster(2)
    try:
        yield local
    finally:
        local.close()


@pytest.fixture(scope="module")
def client(cluster: LocalCluster) -> Iterator[Client]:
    with Client(cluster, set_as_default=False) as c:
        yield c


def address(cluster: LocalCluster) -> str:
    return "dask://" + cluster.scheduler_address.removeprefix("tcp://")


def template(seed: int = 3) -> LocalRunner:
    return LocalRunner(threads=1, seed=seed, repeats=3, min_repeat_s=0.005)


def capable(client: Client, device: str) -> list[str]:
    """The workers advertising `device`, once both workers are up and advertise it (the plugin
    runs on a restarted worker as it joins)."""
    resource = device_resource(device)
    deadline = time.monotonic() + 60
    while True:
        found = sorted(client.run_on_scheduler(_workers_with, resource))
        if len(found) == 2 or time.monotonic() > deadline:
            return found
        time.sleep(0.1)


def trials(db: Path) -> list[tuple[str, str, str, str | None]]:
    with sqlite3.connect(db) as conn:
        return conn.execute(f"SELECT sketch, knobs, status, json_extract(extra, '$.worker') FROM records WHERE {TRIAL} "
                            "ORDER BY id").fetchall()  # fmt: skip


def bests(db: Path) -> list[tuple[str, str]]:
    with sqlite3.connect(db) as conn:
        return conn.execute("SELECT sketch, json_extract(extra, '$.decision') FROM records "
                            "WHERE json_extract(extra, '$.best')").fetchall()  # fmt: skip


# ---- the same records as the local runner -------------------------------------------------------
def test_a_dask_tune_measures_the_candidates_the_local_runner_measures(
    task: TuneTask, cluster: LocalCluster, client: Client, tmp_path: Path
) -> None:
    def run(runner: str, db: Path, workers: int | None = None) -> TuneResult:
        return tune(task, policy="random", trials=6, batch=3, threads=1, seed=3, runner_options=FAST, db=db,
                    runner=runner, workers=workers)  # fmt: skip

    local = run("local", tmp_path / "local.db", workers=2)
    dask = run(address(cluster), tmp_path / "dask.db")
    here, there = trials(tmp_path / "local.db"), trials(tmp_path / "dask.db")
    # the same candidates, in the same order, each measured (OK, or stopped early: OK and marked)
    assert [r[:2] for r in here] == [r[:2] for r in there] and len(there) == 6
    assert all(r[2] == "ok" for r in here + there), here + there
    workers = set(client.scheduler_info()["workers"])
    assert all(r[3] is None for r in here) and {r[3] for r in there} <= workers
    # one best, decided the same way: final rounds against the default, the decision recorded with it
    for result, db in ((local, tmp_path / "local.db"), (dask, tmp_path / "dask.db")):
        assert result.decision is not None and result.best is not None and result.best.ok, result.summary()
        assert result.finals[0].candidate.point == SearchSpace.from_task(task).default_point()
        [(sketch, decision)] = bests(db)
        assert sketch == result.best.candidate.point.sketch and decision == result.decision.reason
        assert result.kept_default or (result.verified is not None and result.verified.ok)


# ---- a worker that dies --------------------------------------------------------------------------
def killing(victim: Point, task: TuneTask, candidate: Candidate, settings: Mapping[str, object],
            build_timeout_s: float) -> MeasureResult:  # fmt: skip
    """`measure_candidate`, except that `victim` kills the Dask worker process measuring it."""
    if candidate.point == victim:
        os.kill(os.getpid(), signal.SIGKILL)
    return measure_candidate(task, candidate, settings, build_timeout_s)


def test_a_worker_killed_mid_tune_costs_only_its_candidate(
    task: TuneTask, cluster: LocalCluster, client: Client, tmp_path: Path
) -> None:
    space = SearchSpace.from_task(task)
    first = make_policy("random", space, seed=5).propose(3)
    victim = first[1]  # in the first batch, measured beside another candidate on the other worker
    runner = DaskRunner(cluster.scheduler_address, template=template(), job=functools.partial(killing, victim))
    with runner:
        result = tune(task, policy="random", trials=6, batch=3, seed=5, space=space, builder=runner, runner=runner,
                      db=tmp_path / "k.db", finalists=1, rounds=1)  # fmt: skip
    records = trials(tmp_path / "k.db")
    assert len(records) == 6 and result.trials == 6
    crashed = [t.result for t in result.history if t.result.status is Status.CRASHED]
    assert [m.candidate.point for m in crashed] == [victim], result.summary()
    assert "the Dask worker measuring it died" in crashed[0].reason
    assert sum(r[2] == "ok" for r in records) == 5  # every other candidate measured
    assert result.decision is not None and result.best is not None and result.best.ok, result.summary()
    assert result.best.candidate.point != victim
    assert len(capable(client, local_device("c"))) == 2  # the nanny restarted it, advertising its device again


# ---- a candidate runs only where its device is ---------------------------------------------------
async def _advertise(resources: dict[str, float], dask_worker) -> None:  # noqa: ANN001 - dask's Worker
    await dask_worker.set_resources(**resources)


def test_the_device_resource_keeps_candidates_off_a_worker_of_another_device(
    task: TuneTask, cluster: LocalCluster, client: Client, tmp_path: Path
) -> None:
    here = local_device("c")
    with DaskRunner(cluster.scheduler_address, template=template()) as runner:
        runner.start(task)  # the plugin advertises this machine's CPU on both workers
        a, b = capable(client, here)
        # b now says it is another machine: its resource is another device's
        other = device_resource("another CPU, 512-bit vectors, 64 cores")
        client.run(_advertise, {device_resource(here): 0.0, other: 1.0}, workers=[b])
        try:
            result = tune(task, policy="random", trials=4, batch=4, seed=7, builder=runner, runner=runner,
                          db=tmp_path / "r.db", decide_best=False)  # fmt: skip
        finally:
            client.run(_advertise, {device_resource(here): 1.0, other: 0.0}, workers=[b])
    assert result.trials == 4 and {r[3] for r in trials(tmp_path / "r.db")} == {a}
    # a device no worker has: refused before any measurement, the workers and their devices listed
    with DaskRunner(cluster.scheduler_address, device="a GPU nobody has", template=template()) as runner:
        with pytest.raises(RuntimeMissingError, match="no worker of the Dask cluster at tcp://.* measures on this "
                           "device: a GPU nobody has") as caught:  # fmt: skip
            runner.start(task)
    assert f"{a}: {here}" in str(caught.value)


# ---- bad --runner values ---------------------------------------------------------------------
@pytest.mark.parametrize("text, message", [
    ("ssh://box", "the runner is local, dask-local or dask://HOST:PORT"),
    ("dask://box", "a dask:// runner is the scheduler's HOST:PORT"),
    ("dask://box:99999", "a dask:// runner is the scheduler's HOST:PORT"),
    ("dask-local:4", "the runner is local, dask-local or dask://HOST:PORT"),
])  # fmt: skip
def test_a_bad_runner_is_a_located_error(text: str, message: str, task: TuneTask,
                                         capsys: pytest.CaptureFixture[str]) -> None:  # fmt: skip
    assert main(["tune", task.filename, "--runner", text, "--trials", "1"]) == 1
    err = capsys.readouterr().err
    assert f"<command line>:1:" in err and message in err and "Traceback" not in err, err
    assert f"--runner {text}" in err  # the caret's line: the option on the command line
    with pytest.raises(UsageError, match=message.replace("(", r"\(")):
        parse_runner(text)


def test_an_unreachable_scheduler_is_an_error_in_bounded_time(task: TuneTask, capsys: pytest.CaptureFixture[str],
                                                             monkeypatch: pytest.MonkeyPatch) -> None:  # fmt: skip
    import socket

    with socket.socket() as s:  # a port nothing listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    monkeypatch.setattr(cluster_module, "CONNECT_TIMEOUT_S", 1.0)
    start = time.monotonic()
    assert main(["tune", task.filename, "--runner", f"dask://127.0.0.1:{port}", "--trials", "1"]) == 1
    err = capsys.readouterr().err
    assert f"cannot reach the Dask scheduler at tcp://127.0.0.1:{port} in 1 s" in err and "Traceback" not in err, err
    assert "<command line>:1:" in err
    assert time.monotonic() - start < 60  # bounded by the connect timeout, never a hang
    # --workers sizes a local cluster, not a running one
    assert main(["tune", task.filename, "--runner", f"dask://127.0.0.1:{port}", "--workers", "2"]) == 1
    assert "--workers sizes a local pool or a dask-local cluster" in capsys.readouterr().err
    # --early-stop: 0, or a factor of at least 1
    assert main(["tune", task.filename, "--early-stop", "0.5"]) == 1
    err = capsys.readouterr().err
    assert "--early-stop: the early-stop factor is 0 (off) or at least 1" in err and "<command line>:1:" in err


def test_einc_tune_on_a_dask_local_cluster(task: TuneTask, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    db = tmp_path / "cli.db"
    argv = ["tune", task.filename, "--runner", "dask-local", "--workers", "1", "--trials", "3", "--strategy", "random",
            "--threads", "1", "--db", str(db), "--quiet", "-o", str(tmp_path / "best.mlir")]  # fmt: skip
    assert main(argv) == 0
    out, err = capsys.readouterr()
    assert "einc: measuring on a local Dask cluster of 1 worker: 1 worker of this device" in err, err
    assert "random: 3 trials" in out and "best: " in out, out
    records = trials(db)
    assert len(records) == 3 and len({r[3] for r in records}) == 1 and all(r[3] for r in records)
    assert len(bests(db)) == 1 and (tmp_path / "best.mlir").read_text().startswith("builtin.module")
