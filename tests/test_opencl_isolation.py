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

The reproducer (found again by a random-schedule hunt, seed 1066 of the generator on this
1-d convolution, and reduced): N bound to thread.z, the output staged in shared memory at the
reduction loop (`cache_write ... in "shared"`), then N tiled by its extent, which puts the
staging loop (copy in, barrier, compute, barrier, copy out) inside an unbound loop over N.i.
The OpenCL it prints is valid and free of races (every work-item reaches every barrier; each
copies out exactly the elements it copied in), and PoCL 3.1 aborts on it (and on a hand-written
kernel of that shape, without einc: a loop holding a copy loop, a barrier, a statement, a
barrier and a copy loop); a barrier added after the copy-out does not help: it is PoCL's bug,
so the helper's error is the answer. The same schedule is pinned on HLSL, SYCL, the egpu
interpreter (CUDA, HIP: it checks every barrier is reached by the whole block and every shared
read is fenced) against NumPy, and refused, located, on Poplar (no shared memory).

On SYCL (Intel's runtime compiler, intel-sycl-rt 2026.2) this kernel computed zeros: the
device compiler's loop unroller miscompiles it. A hand-written kernel without einc shows it
(`HAND_WRITTEN`: one work-item; nested loops of 5 and 3 trips around a copy of a global array
into a `work_group_static` one, a barrier, `s[i] += 1`, a barrier, the copy back: the stores
are lost, the output stays zero; 4 x 3 trips are right, 5 x 3 and 4 x 4 wrong; a private
array, no barriers, `volatile` or `-fno-unroll-loops` make it right). The launch is right
(thread.z is SYCL dimension 0, the work-group is 1 x 1 x 1, as the manifest asks). einc's
SYCL printer puts `#pragma clang loop unroll(disable)` before every loop of a kernel holding
a barrier (`SYCLTarget.barrier_loop_pragma`; on the loops holding the barriers alone it is
not enough), so this schedule and the same one with thread.y and 6 outputs compute right.
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

CONV1D = "output0[N] +=! input0[N + K] * input1[K] where N in 5"
CONV1D_INPUTS = {"input0": {"dtype": "float32", "shape": [7]}, "input1": {"dtype": "float32", "shape": [3]}}
POCL_ABORT = [
    '%n = transform.einc.match stmt "output0" axis "N" in %root',
    'transform.einc.bind %n to "thread.z"',
    '%k = transform.einc.match stmt "output0" axis "K" in %root',
    '%w = transform.einc.cache_write "output0" at %k in "shared"',
    '%n2 = transform.einc.match stmt "output0" axis "N" in %root',
    "%no, %ni = transform.einc.tile %n2 by 5",
]
"""The schedule PoCL 3.1's work-group compiler aborts on (ParallelRegion.cc:346)."""
TILE1_SHARED = [
    '%n = transform.einc.match stmt "output0" axis "N" in %root',
    "%no, %ni = transform.einc.tile %n by 1",
    'transform.einc.bind %no to "block.x"',
    'transform.einc.bind %ni to "thread.x"',
    '%k = transform.einc.match stmt "output0" axis "K" in %root',
    '%b = transform.einc.cache_read "input0" at %k in "shared"',
    "transform.einc.double_buffer %b",
]
"""A schedule PoCL compiles (a 1-d convolution's input window staged in shared memory, double
buffered, a work-item per work-group), for the injected crash."""


def _inputs(seed: int) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    return {"input0": rng.uniform(-1, 1, 7).astype(np.float32), "input1": rng.uniform(-1, 1, 3).astype(np.float32)}


def _expected(a: dict[str, np.ndarray]) -> np.ndarray:
    x, w = a["input0"].astype(np.float64), a["input1"].astype(np.float64)
    return np.array([x[n:n + 3] @ w for n in range(5)])


@pytest.mark.opencl
def test_the_pocl_abort_reproducer_is_a_located_toolchain_error_or_right() -> None:
    """On PoCL 3.1 (this machine's) a CompilerCrash naming the kernel and PoCL's assertion,
    located at the statement; on a PoCL without the bug, right numbers. Never a dead process,
    never wrong numbers."""
    require_run("opencl")
    from einc.runtime.opencl import device_description

    comp = Compilation(CONV1D, "<conv1d>", CONV1D_INPUTS, None, "opencl", script(POCL_ABORT))
    inputs = _inputs(5)
    try:
        out = comp.kernel()(**inputs)["output0"]
    except ToolchainError as err:
        text = str(err)
        assert "crashed (killed by SIGABRT (Aborted)) launching kernel 'kernel_output0_1'" in text, text
        assert "ParallelRegion.cc" in text and text.startswith("<conv1d>:1:1: error:"), text
        return
    assert "PoCL 3.1" not in device_description(), "PoCL 3.1 aborted on this kernel: did einc's code change shape?"
    np.testing.assert_allclose(out, _expected(inputs), rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("target", [pytest.param("hlsl", marks=pytest.mark.hlsl),
                                    pytest.param("sycl", marks=pytest.mark.sycl)])  # fmt: skip
def test_the_pocl_abort_reproducer_matches_numpy(target: str) -> None:
    require_run(target)
    comp = Compilation(CONV1D, "<conv1d>", CONV1D_INPUTS, None, target, script(POCL_ABORT))
    source = comp.run_until("source")
    assert "barrier" in source.lower() or target == "hlsl"  # HLSL: GroupMemoryBarrierWithGroupSync
    if target == "sycl":  # every loop of the kernel with barriers: N.i, K and the two copy loops
        assert source.count("#pragma clang loop unroll(disable)\n") == 4, source
    inputs = _inputs(5)
    np.testing.assert_allclose(run_on_device(comp, inputs)["output0"], _expected(inputs), rtol=1e-5, atol=1e-6)


@pytest.mark.sycl
def test_the_staged_reduction_on_thread_y_matches_numpy_on_sycl() -> None:
    """The same miscompile met otherwise: N in 6 bound to thread.y (SYCL dimension 1), the
    output staged in shared memory at K, N tiled by 6 (zeros before the pragma)."""
    require_run("sycl")
    program = "output0[N] +=! input0[N + K] * input1[K] where N in 6"
    inputs_spec = {"input0": {"dtype": "float32", "shape": [8]}, "input1": {"dtype": "float32", "shape": [3]}}
    schedule = [line.replace("thread.z", "thread.y").replace("by 5", "by 6") for line in POCL_ABORT]
    comp = Compilation(program, "<conv1d-y>", inputs_spec, None, "sycl", script(schedule))
    assert "get_local_id(1)" in comp.run_until("source")
    rng = np.random.default_rng(7)
    a = {"input0": rng.uniform(-1, 1, 8).astype(np.float32), "input1": rng.uniform(-1, 1, 3).astype(np.float32)}
    x, w = a["input0"].astype(np.float64), a["input1"].astype(np.float64)
    expected = np.array([x[n : n + 3] @ w for n in range(6)])
    np.testing.assert_allclose(run_on_device(comp, a)["output0"], expected, rtol=1e-5, atol=1e-6)


HAND_WRITTEN = """#include <cstdint>
#include <sycl/group_barrier.hpp>
#include <sycl/ext/oneapi/free_function_queries.hpp>
#include <sycl/ext/oneapi/free_function_kernel_properties.hpp>
#include <sycl/ext/oneapi/work_group_static.hpp>
namespace syclext = sycl::ext::oneapi;
namespace syclexp = sycl::ext::oneapi::experimental;
extern "C" SYCL_EXT_ONEAPI_FUNCTION_PROPERTY((syclexp::nd_range_kernel<3>))
void zero(float* out) { out[syclext::this_work_item::get_nd_item<3>().get_global_id(2)] = 0.0f; }
extern "C" SYCL_EXT_ONEAPI_FUNCTION_PROPERTY((syclexp::nd_range_kernel<3>))
void staged(float* out) {
  syclexp::work_group_static<float[5]> s;
  PRAGMA for (int32_t i = 0; i < 5; i++) {
    PRAGMA for (int32_t k = 0; k < 3; k++) {
      PRAGMA for (int32_t e = 0; e < 5; e++) { s[e] = out[e]; }
      sycl::group_barrier(syclext::this_work_item::get_work_group<3>());
      s[i] = s[i] + 1.0f;
      sycl::group_barrier(syclext::this_work_item::get_work_group<3>());
      PRAGMA for (int32_t e = 0; e < 5; e++) { out[e] = s[e]; }
    }
  }
}
"""
"""Valid SYCL, without einc: one work-item adds 1 to each of 5 elements 3 times (expected 3s)."""


@pytest.mark.sycl
def test_the_hand_written_reproducer_of_the_sycl_miscompile() -> None:
    """Intel's runtime compiler loses the stores without the pragma (intel-sycl-rt 2026.2: if
    this starts to compute 3s, the runtime is fixed and `SYCLTarget.barrier_loop_pragma` may
    go); with the pragma einc prints it computes 3s."""
    require_run("sycl")
    from einc.runtime.manifest import Buffer, KernelLaunch, LaunchManifest
    from tests.test_device_differential import _build_and_run
    from tests.oracle.isolate import run_isolated

    manifest = LaunchManifest(
        target="sycl", buffers=(Buffer(name="out", dtype="float32", shape=(5,), role="output"),),
        kernels=(KernelLaunch(name="zero", args=("out",), grid=(1, 1, 1), block=(5, 1, 1), shared_bytes=0),
                 KernelLaunch(name="staged", args=("out",), grid=(1, 1, 1), block=(1, 1, 1), shared_bytes=0)),
    )  # fmt: skip
    from einc.targets.sycl import SYCLTarget

    results = {}
    for pragma in ("", SYCLTarget.barrier_loop_pragma or ""):
        source = HAND_WRITTEN.replace("PRAGMA ", pragma + "\n" if pragma else "")
        out = {"out": np.full(5, np.nan, np.float32)}
        results[pragma] = run_isolated(_build_and_run, "sycl", source, manifest.to_json(), {}, out, timeout=180.0)["out"]
    np.testing.assert_array_equal(results[SYCLTarget.barrier_loop_pragma], np.full(5, 3, np.float32))
    np.testing.assert_array_equal(results[""], np.zeros(5, np.float32))  # the runtime's miscompile


@pytest.mark.parametrize("target", ["cuda", "hip"])
def test_the_pocl_abort_reproducer_on_the_egpu_interpreter(target: str) -> None:
    """CUDA and HIP (no GPU here): the lowered kernels on the egpu interpreter, which checks
    every barrier is reached by all work-items of a block and every shared read is fenced."""
    from einc.semantics.egpu import run_lowered

    comp = Compilation(CONV1D, "<conv1d>", CONV1D_INPUTS, None, target, script(POCL_ABORT))
    comp.run_until("target")
    inputs = _inputs(6)
    out = run_lowered(comp.results["target"], inputs, target=target)["output0"]
    np.testing.assert_allclose(out, _expected(inputs), rtol=1e-5, atol=1e-6)


def test_the_pocl_abort_reproducer_on_poplar_is_a_located_refusal() -> None:
    comp = Compilation(CONV1D, "<conv1d>", CONV1D_INPUTS, None, "poplar", script(POCL_ABORT))
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
    assert "crashed (killed by SIGABRT (Aborted)) launching kernel 'kernel_output0_1'" in text, text
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
    crashed = [t.result for t in result.history if "crashed (killed by SIGABRT" in t.result.reason]
    assert crashed, statuses
    assert all(r.status.value == "internal-error" for r in crashed)
    with sqlite3.connect(db) as conn:
        recorded = conn.execute("SELECT status FROM records WHERE json_extract(extra, '$.final') IS NULL").fetchall()
    assert len(recorded) == len(result.history) == 6, (recorded, statuses)
    assert result.best is not None and result.best.ok
