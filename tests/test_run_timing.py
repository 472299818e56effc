"""`einc run`'s timing (einc/compiler/driver.py RunReport) and OpenMP's wait policy for einc's own timing
(einc/runtime/openmp.py): the spread and the rate are shown, noisy timings are warned about
(decided on made-up timings: nothing here asserts a speed), and the kernels einc times, in
`einc run` and in the tuner's worker, get OpenMP threads that sleep when they wait, as libgomp
itself reports (OMP_DISPLAY_ENV) - unless the user chose a policy."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from einc.tools.jobs import RunReport
from einc.runtime import openmp
from einc.tune.timing import NoiseLimits
from einc.tune.measure import build_candidate
from einc.tune.types import TuneTask
from tests.test_tune_measure import default_candidate, runner

ROOT = Path(__file__).resolve().parent.parent


def report(times: list[float], cpu_s: float, wall_s: float, wait_s: float | None) -> RunReport:
    return RunReport("k", "c", {"out": 0.0}, {"out": 1e-4}, times, 0.25, 1, rate=(7.5, "GB/s"), cpu_s=cpu_s,
                     wall_s=wall_s, wait_s=wait_s, wait_policy="passive")  # fmt: skip


def test_run_report_shows_the_spread_and_the_rate() -> None:
    times = [1.0e-4, 1.1e-4, 1.2e-4, 1.05e-4, 1.15e-4, 1.0e-4, 1.1e-4]
    text = report(times, cpu_s=7.7e-4, wall_s=7.7e-4, wait_s=0.0).render()
    assert "run 0.110 ms (median of 7; quartiles 0.103-0.113 ms, min 0.100, max 0.120), 7.50 GB/s" in text
    assert "warning" not in text and "note" not in text
    few = report([1e-4, 1e-4], cpu_s=2e-4, wall_s=2e-4, wait_s=0.0).render()
    assert "2 timed runs: too few for a spread (--repeat)" in few


@pytest.mark.parametrize(
    ("times", "cpu_s", "wall_s", "wait_s", "why"),
    [
        ([1e-4, 5e-4, 1e-4, 9e-4, 1e-4], 1.7e-3, 1.7e-3, 0.0, "repeats spread"),
        ([1e-4] * 5, 1.5e-4, 5e-4, None, "the process ran 30% of the wall time"),
        ([1e-4] * 5, 5e-4, 5e-4, 2e-4, "its threads waited 40% of the wall time for a core"),
    ],
)
def test_noisy_timings_are_a_warning(times: list[float], cpu_s: float, wall_s: float, wait_s: float | None,
                                     why: str) -> None:  # fmt: skip
    text = report(times, cpu_s, wall_s, wait_s).render()
    assert f"  warning: noisy timings ({why}" in text and "OpenMP threads wait: passive" in text
    assert why in NoiseLimits().noise(report(times, cpu_s, wall_s, wait_s).timing())


def test_the_passive_policy_unless_the_user_chose_one(monkeypatch: pytest.MonkeyPatch) -> None:
    assert openmp.timing_env({"PATH": "/bin"}) == {"PATH": "/bin", "OMP_WAIT_POLICY": "passive"}
    assert openmp.timing_env({"OMP_WAIT_POLICY": "active"})["OMP_WAIT_POLICY"] == "active"
    assert "OMP_WAIT_POLICY" not in openmp.timing_env({"GOMP_SPINCOUNT": "1000"})
    monkeypatch.setattr(openmp, "openmp_loaded", lambda: False)
    env: dict[str, str] = {"HOME": "/x"}
    with openmp.passive_while_loading(env) as policy:
        assert policy == "passive" and env["OMP_WAIT_POLICY"] == "passive"
    assert env == {"HOME": "/x"}  # put back: later child processes get the user's environment
    chosen = {"OMP_WAIT_POLICY": "ACTIVE"}
    with openmp.passive_while_loading(chosen) as policy:
        assert policy == "active (OMP_WAIT_POLICY)" and chosen == {"OMP_WAIT_POLICY": "ACTIVE"}
    monkeypatch.setattr(openmp, "openmp_loaded", lambda: True)
    with openmp.passive_while_loading(env) as policy:  # too late to choose: said so
        assert "OpenMP was loaded before einc" in policy and env == {"HOME": "/x"}


def _einc_run(program: str, **env: str) -> subprocess.CompletedProcess[str]:
    environment = {k: v for k, v in os.environ.items() if k not in ("OMP_WAIT_POLICY", "GOMP_SPINCOUNT")}
    environment.update(PYTHONPATH=str(ROOT), OMP_DISPLAY_ENV="true", **env)
    return subprocess.run([sys.executable, "-m", "einc.cli", "run", program, "--no-records", "--repeat", "6",
                           "--seed", "1"], capture_output=True, text=True, env=environment, cwd=ROOT, timeout=300)  # fmt: skip


def test_einc_run_times_with_sleeping_openmp_threads_and_shows_the_spread() -> None:
    done = _einc_run("examples/softmax.ein")
    assert done.returncode == 0, done.stderr
    assert "OMP_WAIT_POLICY = 'PASSIVE'" in done.stderr  # libgomp's own account of its settings
    assert "(median of 6; quartiles " in done.stdout and " GB/s" in done.stdout  # softmax: memory-bound
    user = _einc_run("examples/matmul.ein", OMP_WAIT_POLICY="active")
    assert user.returncode == 0, user.stderr
    assert "OMP_WAIT_POLICY = 'ACTIVE'" in user.stderr and " GFLOP/s" in user.stdout  # the user's choice stands


def test_the_tuners_worker_times_with_sleeping_openmp_threads(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("OMP_WAIT_POLICY", raising=False)
    monkeypatch.delenv("GOMP_SPINCOUNT", raising=False)
    monkeypatch.setenv("OMP_DISPLAY_ENV", "true")
    task = TuneTask.from_file(ROOT / "examples" / "softmax.ein")  # its default schedule runs rows in parallel
    build = build_candidate(task, default_candidate(task))
    with runner(threads=2) as r:
        [result] = r.run(task, [build])
        assert r._worker is not None
        log = r._worker.log.read_text()
    assert result.ok and result.extra["wait_policy"] == "passive", result
    assert "OMP_WAIT_POLICY = 'PASSIVE'" in log
    assert "OMP_WAIT_POLICY" not in os.environ  # the tuner's own process is left as it was
