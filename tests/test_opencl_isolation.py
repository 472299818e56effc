"""A crash of the OpenCL device's kernel compiler is a located toolchain error, never the end of
the process, nor a wrong result (einc/runtime/opencl_isolate.py).

PoCL compiles a kernel's work-group function at its first launch, and an assertion there
(`ParallelRegion.cc:346`, met once on a random 1-d convolution schedule: tile by 1, thread.x,
a shared `cache_read`) aborts the launching process. einc builds and launches every program
with a barrier for one work-group in a helper process first. The abort is injected here
(`$EINC_OPENCL_HELPER_ABORT`: the helper calls abort() where PoCL's assertion would): the
error names the kernel and is located at its statement; the process goes on and the next
program runs right; the tuner records such a candidate as a failure (internal-error, its
reason the crash) beside the others.

The schedule of that report (the 1-d convolution, N tiled by 1 on block.x / thread.x, the
input's window staged in shared memory at the reduction loop, double buffered) is pinned on
every executable device target and the egpu interpreter (CUDA, HIP): right numbers, or on
Poplar (no shared memory) a located refusal. On PoCL 3.1 here it does not abort (nor did
any variant of it tried: tile sizes 1/2/16, the reduction tiled by 1/2/4, either input staged
at any loop, double buffered or not, unrolled or not); the exploration's reproducer was lost
with its process.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path

import numpy as np
import pytest

from einc.compiler.driver import Compilation
from einc.errors import ScheduleError, TargetError, ToolchainError
from einc.runtime.opencl_isolate import ABORT_ENV
from tests.test_device_differential import run_on_device, script
from tests.test_device_targets import require, require_run

CONV1D = "output0[N] +=! input0[N + K] * input1[K] where N in 16"
CONV1D_INPUTS = {"input0": {"dtype": "float32", "shape": [19]}, "input1": {"dtype": "float32", "shape": [4]}}
TILE1_SHARED = [
    '%n = transform.einc.match stmt "output0" axis "N" in %root',
    "%no, %ni = transform.einc.tile %n by 1",
    'transform.einc.bind %no to "block.x"',
    'transform.einc.bind %ni to "thread.x"',
    '%k = transform.einc.match stmt "output0" axis "K" in %root',
    '%b = transform.einc.cache_read "input0" at %k in "shared"',
    "transform.einc.double_buffer %b",
]
"""The schedule of the report: N tiled by 1 (block.x, thread.x), the input's window staged in
shared memory at the reduction loop and double buffered."""


def _inputs(seed: int) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    return {"input0": rng.uniform(-1, 1, 19).astype(np.float32), "input1": rng.uniform(-1, 1, 4).astype(np.float32)}


def _expected(a: dict[str, np.ndarray]) -> np.ndarray:
    x, w = a["input0"].astype(np.float64), a["input1"].astype(np.float64)
    return np.array([x[n:n + 4] @ w for n in range(16)])


@pytest.mark.parametrize("target", [pytest.param(t, marks=getattr(pytest.mark, t, ())) for t in ("opencl", "hlsl", "sycl")])
def test_tile1_shared_conv1d_matches_numpy(target: str) -> None:
    require_run(target)
    comp = Compilation(CONV1D, "<conv1d>", CONV1D_INPUTS, None, target, script(TILE1_SHARED))
    comp.run_until("source")
    assert "barrier" in comp.results["source"] or target == "hlsl"  # HLSL spells it GroupMemoryBarrier...
    inputs = _inputs(5)
    np.testing.assert_allclose(run_on_device(comp, inputs)["output0"], _expected(inputs), rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("target", ["cuda", "hip"])
def test_tile1_shared_conv1d_on_the_egpu_interpreter(target: str) -> None:
    """CUDA and HIP (no GPU here): the lowered kernels on the egpu interpreter, which checks
    every barrier is reached by all work-items of a block and every shared read is fenced."""
    from einc.semantics.egpu import run_lowered

    comp = Compilation(CONV1D, "<conv1d>", CONV1D_INPUTS, None, target, script(TILE1_SHARED))
    comp.run_until("target")
    inputs = _inputs(6)
    out = run_lowered(comp.results["target"], inputs, target=target)["output0"]
    np.testing.assert_allclose(out, _expected(inputs), rtol=1e-5, atol=1e-6)


def test_tile1_shared_conv1d_on_poplar_is_a_located_refusal() -> None:
    comp = Compilation(CONV1D, "<conv1d>", CONV1D_INPUTS, None, "poplar", script(TILE1_SHARED))
    with pytest.raises((ScheduleError, TargetError), match="no shared memory") as err:
        comp.run_until("source")
    assert "<schedule>:" in str(err.value)


@pytest.mark.opencl
def test_a_crash_of_the_device_compiler_is_a_located_toolchain_error(monkeypatch: pytest.MonkeyPatch) -> None:
    require("opencl")
    inputs = {"input0": {"dtype": "float32", "shape": [21]}, "input1": {"dtype": "float32", "shape": [4]}}
    program = "output0[N] +=! input0[N + K] * input1[K] where N in 18"  # a program no other test builds
    comp = Compilation(program, "<crash>", inputs, None, "opencl", script(TILE1_SHARED))
    monkeypatch.setenv(ABORT_ENV, "kernel_output0_1")
    with pytest.raises(ToolchainError) as err:
        comp.kernel()
    text = str(err.value)
    assert "crashed (killed by SIGABRT) launching kernel 'kernel_output0_1'" in text, text
    assert "a toolchain failure, not a wrong result" in text
    assert text.startswith("<crash>:1:1: error:"), text  # the statement the kernel computes
    assert "<schedule>:4:5: note: in the code this schedule op made" in text, text
    monkeypatch.delenv(ABORT_ENV)
    kernel = comp.kernel()  # the process, and a new helper, go on: the same program now runs right
    a = {"input0": np.random.default_rng(7).uniform(-1, 1, 21).astype(np.float32), "input1": np.ones(4, np.float32)}
    want = np.array([a["input0"][n:n + 4].astype(np.float64).sum() for n in range(18)])
    np.testing.assert_allclose(kernel(**a)["output0"], want, rtol=1e-5, atol=1e-6)


@pytest.mark.opencl
def test_the_tuner_records_a_compiler_crash_as_a_failed_candidate(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """Every candidate whose program has a barrier crashes the helper (injected); the tune
    finishes, records every trial, those as internal-error with the crash as their reason,
    and crowns a candidate that ran."""
    require("opencl")
    from einc.tune.measure import LocalBuilder, LocalRunner
    from einc.tune.tuner import tune
    from einc.tune.types import TuneTask

    monkeypatch.setenv(ABORT_ENV, ",".join(["kernel_output0", *(f"kernel_output0_{i}" for i in range(1, 4))]))
    task = TuneTask("output0[N] +=! input0[N + K] * input1[K] where N in 30", target="opencl",
                    input_dict={"input0": {"dtype": "float32", "shape": [33]}, "input1": {"dtype": "float32", "shape": [4]}})  # fmt: skip
    db = tmp_path / "t.db"
    with LocalBuilder(workers=1) as builder, LocalRunner(timeout_s=20.0, threads=1) as runner:
        result = tune(task, policy="random", trials=6, batch=6, builder=builder, runner=runner, db=db, seed=2,
                      runner_options={"repeats": 3, "min_repeat_s": 0.01})  # fmt: skip
    statuses = [t.result.status.value for t in result.history]
    crashed = [t.result for t in result.history if "crashed (killed by SIGABRT)" in t.result.reason]
    assert crashed, statuses
    assert all(r.status.value == "internal-error" for r in crashed)
    with sqlite3.connect(db) as conn:
        recorded = conn.execute("SELECT status FROM records WHERE json_extract(extra, '$.final') IS NULL").fetchall()
    assert len(recorded) == len(result.history) == 6, (recorded, statuses)
    assert result.best is not None and result.best.ok
