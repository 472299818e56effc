"""The code device kernels get: register accumulators started at the reduction's identity
(`einc-init-accumulators`: no fill kernel, no read-back of the output) and 32-bit index
arithmetic where every index fits (`einc-index-width`).

Executed on OpenCL (PoCL), HLSL (lavapipe), SYCL and CUDA (where an NVIDIA GPU is) against a
float64 NumPy reference on fresh random inputs; compile-checked on CUDA (NVRTC) and HIP
(hipcc).
"""

from __future__ import annotations

import re
from pathlib import Path
from types import ModuleType

import numpy as np
import pytest

from einc.compiler.driver import Compilation
from tests.test_device_differential import run_on_device, script
from tests.test_device_local import TILES_16_BY_4, compile_check, f32, matmul, register_blocked, register_blocked_shared
from tests.test_device_schedules import random_inputs
from tests.test_device_targets import require, require_run
from tests.modules import load_module

RUNS = [pytest.param(t, marks=getattr(pytest.mark, t)) for t in ("opencl", "hlsl", "sycl", "cuda")]
COMPILES = [pytest.param(t, marks=getattr(pytest.mark, t)) for t in ("cuda", "hip")]


def reduction(op: str, n: int, m: int, k: int, target: str, at: str = "%d") -> Compilation:
    ir = f"output0[N, M] {op} input0[N, K] * input1[K, M]"
    inputs = {"input0": f32(n, k), "input1": f32(k, m)}
    lines = register_blocked(unroll=n % 16 == 0 and m % 16 == 0, at=at)
    return Compilation(ir, "<t>", inputs, None, target, script(lines))


def reference(op: str, a: np.ndarray, b: np.ndarray) -> np.ndarray:
    products = a.astype(np.float64)[:, :, None] * b.astype(np.float64)[None, :, :]
    return {"+=!": products.sum(axis=1), ">=!": products.max(axis=1), "<=!": products.min(axis=1)}[op]


@pytest.mark.parametrize("target", RUNS)
@pytest.mark.parametrize("op", ["+=!", ">=!"])
@pytest.mark.parametrize("n,m,k", [(32, 48, 20), (37, 45, 29)])
def test_register_tile_starts_at_the_identity(target: str, op: str, n: int, m: int, k: int) -> None:
    """A 4x4 register tile per thread (cache_write at the thread loop): the tile is set to
    the identity (0, -inf) in registers, no thread reads the output before writing it, and
    the fill kernel is gone: the tiles cover the output, partial tiles (bounds
    `min(16, 37 - N.o)`) included."""
    require_run(target)
    comp = reduction(op, n, m, k, target)
    comp.run_until("source")
    kernels = comp.target_obj.manifest(comp.results["target"]).kernels
    assert len(kernels) == 1
    reads = [o for o in comp.results["target"].walk() if o.name in ("affine.load", "egpu.vload")
             and o.operands[0].name_hint == "output0"]  # fmt: skip
    assert not reads
    inputs = random_inputs(comp)
    out = run_on_device(comp, inputs)["output0"]
    np.testing.assert_allclose(out, reference(op, inputs["input0"], inputs["input1"]), rtol=1e-4, atol=1e-5 * k)


@pytest.mark.parametrize("target", RUNS)
def test_register_tiles_of_several_nests_start_at_the_identity(target: str) -> None:
    """The block loop peeled after the staging (two nests, two kernels, each thread's 4x4
    tile staged in each): the tiles of both nests are disjoint and cover the output, so
    every tile starts at zero in registers, no thread reads the output, and the fill
    kernel is gone (issue 26: a transposed convolution's phase nests on C)."""
    require_run(target)
    lines = [*register_blocked(unroll=False), "%p, %q = transform.einc.peel %a by 1"]
    comp = matmul(37, 45, 29, target, lines)
    comp.run_until("source")
    assert len(comp.target_obj.manifest(comp.results["target"]).kernels) == 2
    reads = [o for o in comp.results["target"].walk() if o.name in ("affine.load", "egpu.vload")
             and o.operands[0].name_hint == "output0"]  # fmt: skip
    assert not reads
    inputs = random_inputs(comp)
    out = run_on_device(comp, inputs)["output0"]
    np.testing.assert_allclose(out, reference("+=!", inputs["input0"], inputs["input1"]), rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("target", RUNS)
def test_tile_staged_inside_the_reduction_still_reads_the_output(target: str) -> None:
    """The tile staged at K (inside the reduction loop) is copied in at each K iteration and
    must see what the previous one wrote: the fill stays and the copy-in reads output0."""
    require_run(target)
    comp = reduction("+=!", 32, 48, 20, target, at="%e")
    comp.run_until("source")
    assert len(comp.target_obj.manifest(comp.results["target"]).kernels) == 2
    inputs = random_inputs(comp)
    out = run_on_device(comp, inputs)["output0"]
    np.testing.assert_allclose(out, reference("+=!", inputs["input0"], inputs["input1"]), rtol=1e-4, atol=1e-4)


INDEX_SPELLING = {"opencl": ("int", "long"), "sycl": ("int32_t", "int64_t"), "cuda": ("int", "long long"), "hip": ("int32_t", "int64_t")}


@pytest.mark.parametrize("target", list(INDEX_SPELLING))
def test_small_kernels_index_in_32_bits_and_huge_ones_in_64(target: str) -> None:
    """A 64x64 matmul's indices fit 32 bits: `int`. A row sum over a 65536 x 40000 int8
    input (2.6e9 elements) keeps 64-bit indices: the flat index would overflow `int`."""
    narrow, wide = INDEX_SPELLING[target]
    small = Compilation("output0[N, M] +=! input0[N, K] * input1[K, M]", "<t>",
                        {"input0": f32(64, 64), "input1": f32(64, 64)}, None, target, script(TILES_16_BY_4))  # fmt: skip
    source = small.run_until("source")
    assert re.search(rf"\b{narrow} N_o\b", source) and not re.search(rf"\b{wide} [A-Za-z_]+ = ", source)
    big = Compilation("output0[N] +=! input0[N, C]", "<t>", {"input0": {"dtype": "int8", "shape": [65536, 40000]}},
                      None, target, "none")  # fmt: skip
    source = big.run_until("source")
    assert re.search(rf"\b{wide} [A-Za-z_]+ = ", source)


SGEMM = [
    *[f'%{a} = transform.einc.match stmt "output0" axis "{a.upper()}" in %root' for a in "nmk"],
    "%no, %ni = transform.einc.tile %n by 128",
    "%mo, %mi = transform.einc.tile %m by 128",
    "%nt, %nr = transform.einc.tile %ni by 8",
    "%mt, %mr = transform.einc.tile %mi by 8",
    "%ko, %ki = transform.einc.tile %k by 8",
    "%a, %b, %c, %d, %e, %f, %g, %h = transform.einc.reorder %no, %mo, %nt, %mt, %ko, %ki, %nr, %mr",
    'transform.einc.bind %a to "block.y"',
    'transform.einc.bind %b to "block.x"',
    'transform.einc.bind %c to "thread.y"',
    'transform.einc.bind %d to "thread.x"',
    '%w = transform.einc.cache_write "output0" at %d in "local"',
    '%s0 = transform.einc.cache_read "input0" at %e in "shared"',
    '%s1 = transform.einc.cache_read "input1" at %e in "shared"',
    "transform.einc.unroll %h by 8",
    "transform.einc.unroll %g by 8",
]
"""The classic SGEMM schedule: 128x128 block tiles of 16x16 threads, an 8x8 register tile
per thread, K tiles of 8 with both inputs in shared memory."""


def sgemm(n: int, target: str, extra: list[str] | None = None) -> Compilation:
    return Compilation("output0[N, M] +=! input0[N, K] * input1[K, M]", "<t>",
                       {"input0": f32(n, n), "input1": f32(n, n)}, None, target, script(SGEMM + (extra or [])))  # fmt: skip


@pytest.mark.parametrize("target", COMPILES)
def test_sgemm_is_one_kernel_with_32_bit_indices(target: str) -> None:
    """The SGEMM schedule at 1024^3 compiles (NVRTC sm_80, hipcc gfx90a) without spills, as
    one kernel with 32-bit indices (no 64-bit integer type in the source) and its block size
    as launch bounds (without them hipcc caps a thread at 128 VGPRs: 55 spilled)."""
    require(target)
    comp = sgemm(1024, target)
    compile_check(comp)
    source = comp.results["source"]
    assert source.count("__global__") == 1 and re.search(r"int(32_t)? thread_x = \(int\)threadIdx.x;", source)
    assert "long long" not in source and "int64_t" not in source
    assert "void __launch_bounds__(256) kernel_output0(" in source


@pytest.mark.parametrize("target", RUNS)
def test_sgemm_matches_numpy(target: str) -> None:
    """The SGEMM schedule at 256^3 (2x2 blocks) on the device against NumPy."""
    require_run(target)
    comp = sgemm(256, target)
    comp.run_until("source")
    inputs = random_inputs(comp)
    out = run_on_device(comp, inputs)["output0"]
    np.testing.assert_allclose(out, inputs["input0"].astype(np.float64) @ inputs["input1"], rtol=1e-4, atol=1e-3)


def code_shape() -> ModuleType:
    """benchmarks/cuda_code_shape.py: NVRTC's PTX and its counts per kernel and loop."""
    return load_module(Path("benchmarks") / "cuda_code_shape.py")


# ---- double buffering of shared tiles (transform.einc.double_buffer) -------------------------------

DOUBLE_BUFFER = ["transform.einc.double_buffer %s0", "transform.einc.double_buffer %s1"]


@pytest.mark.parametrize("target", RUNS)
def test_double_buffered_tiles_match_numpy(target: str) -> None:
    """Both input tiles of the shared register-blocked matmul double buffered at K.o: the
    prologue copies tile 0, each iteration prefetches tile k + 8 into the other slot (K = 29:
    the last tile partial, no prefetch after it) and computes on its own, one barrier per
    iteration; against NumPy on partial block, thread and K tiles."""
    require_run(target)
    comp = matmul(37, 45, 29, target, register_blocked_shared() + DOUBLE_BUFFER)
    comp.run_until("source")
    kernel = comp.results["target"]
    shapes = [op.results[0].type.get_shape() for op in kernel.walk() if op.name == "egpu.alloc_shared"]
    assert sorted(shapes) == [(2, 8, 16), (2, 16, 12)]  # A's rows padded by 4 (einc-pad-shared)
    barriers = [op for op in kernel.walk() if op.name == "egpu.barrier"]
    in_loops = [b for b in barriers if b.parent_op().name in ("affine.for", "scf.for")]
    assert len(barriers) == 2 and len(in_loops) == 1  # the prologue's, one per K.o iteration
    inputs = random_inputs(comp)
    out = run_on_device(comp, inputs)["output0"]
    np.testing.assert_allclose(out, inputs["input0"].astype(np.float64) @ inputs["input1"], rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("target", COMPILES)
def test_double_buffered_sgemm_compiles_with_one_barrier_per_k_tile(target: str) -> None:
    """The SGEMM schedule with both tiles double buffered compiles (NVRTC sm_80, hipcc
    gfx90a) without spills; in NVIDIA's PTX the K-tile loop around the FMA loop has one
    bar.sync (two without double buffering), its tile copies are cp.async and neither loop
    has a global load."""
    require(target)
    comp = sgemm(256, target, DOUBLE_BUFFER)
    compile_check(comp)
    if target == "cuda":
        shape = code_shape()
        text = shape.ptx(comp.results["source"], "compute_80")
        ((_, found, hot, around),) = shape.kernel_shapes(text)
        assert hot is not None and around is not None
        assert around["bar.sync"] == 1 and found["bar.sync"] == 2 and hot["ld.global"] == 0
        # the tiles' copies are cp.async (sm_80, the target description's): no global load
        # in the K-tile loop, 8 copies per thread and tile pair in flight under the compute
        assert around["ld.global"] == 0 and "cp.async.ca.shared.global" in text and "cp.async.wait_group 0" in text
    else:  # HIP: no cp.async (its description has no compute capability)
        assert "cp_async" not in comp.results["source"]


@pytest.mark.parametrize("target", ["c", pytest.param("opencl", marks=pytest.mark.opencl)])
def test_double_buffer_is_refused_with_its_location(target: str) -> None:
    """A local buffer (the only staging C has) and a shared tile staged at a loop over output
    rows are refused at the double_buffer op, not dropped."""
    from einc.errors import ScheduleError

    lines = [*TILES_16_BY_4, '%s = transform.einc.cache_read "input0" at %k in "local"', "transform.einc.double_buffer %s"]
    if target != "c":
        lines = [*register_blocked_shared()[:-2], '%s = transform.einc.cache_read "input1" at %g in "shared"',
                 "transform.einc.double_buffer %s"]  # fmt: skip
    with pytest.raises(ScheduleError) as err:
        matmul(32, 48, 24, target, lines).run_until("source")
    assert err.value.loc is not None and err.value.loc.line == len(lines) + 2
    assert ("not a reduction loop" if target != "c" else "not staged in shared memory") in err.value.message


# ---- bank-conflict padding of shared tiles (einc-pad-shared, cache_read ... pad N) -------------

COLUMNS = [
    *[f'%{a} = transform.einc.match stmt "output0" axis "{a.upper()}" in %root' for a in "nmk"],
    "%no, %ni = transform.einc.tile %n by 8",
    "%mo, %mi = transform.einc.tile %m by 32",
    "%ko, %ki = transform.einc.tile %k by 32",
    "%a, %b, %c, %d, %e, %f = transform.einc.reorder %no, %mo, %ni, %mi, %ko, %ki",
    'transform.einc.bind %a to "block.y"',
    'transform.einc.bind %b to "block.x"',
    'transform.einc.bind %c to "thread.y"',
    'transform.einc.bind %d to "thread.x"',
]
"""`output0[N, M] +=! input0[K, N] * input1[M, K]` with M on thread.x and input1's 32x32 tile
in shared memory: lane x reads row x of the tile (`input1_shared[x][k]`), a column: with
rows of 32 words all in one bank."""


COLUMN_IR = "output0[N, M] +=! input0[K, N] * input1[M, K]"
COLUMN_INPUTS = {"input0": f32(40, 16), "input1": f32(48, 40)}


def columns_script(pad: str) -> str:
    return script([*COLUMNS, f'%s = transform.einc.cache_read "input1" at %e in "shared"{pad}'])


def columns(target: str, pad: str) -> Compilation:
    return Compilation(COLUMN_IR, "<t>", COLUMN_INPUTS, None, target, columns_script(pad))


@pytest.fixture(scope="module")
def column_conflicts() -> dict[str, float]:
    """The performance model's bank conflicts (H100) of the column reads per pad."""
    import einc

    found = {}
    for pad in ("", " pad 0", " pad 1"):
        kernel = einc.compile(COLUMN_IR, COLUMN_INPUTS, target="cuda", schedule=columns_script(pad))
        (model,) = [k for k in kernel.model("h100").kernels if k.shared_bytes]
        found[pad] = model.counts.bank_conflicts
    return found


PADS = [
    *(pytest.param(t, "", 36, marks=getattr(pytest.mark, t)) for t in ("opencl", "hlsl", "sycl", "cuda")),
    pytest.param("opencl", " pad 1", 33, marks=pytest.mark.opencl),
]


@pytest.mark.parametrize("target,pad,row", PADS)
def test_padded_shared_tile_matches_numpy(target: str, pad: str, row: int) -> None:
    """The column-read tile padded by default (the target's 32 banks: 4 elements, which
    keeps rows 16-byte aligned) and by the schedule's `pad 1`; partial tiles (40 = 32 + 8)."""
    require_run(target)
    comp = columns(target, pad)
    comp.run_until("source")
    (shape,) = [op.results[0].type.get_shape() for op in comp.results["target"].walk() if op.name == "egpu.alloc_shared"]
    assert shape == (32, row)
    inputs = random_inputs(comp)
    out = run_on_device(comp, inputs)["output0"]
    reference = inputs["input0"].astype(np.float64).T @ inputs["input1"].astype(np.float64).T
    np.testing.assert_allclose(out, reference, rtol=1e-4, atol=1e-4)


def test_padding_removes_the_column_conflicts(column_conflicts: dict[str, float]) -> None:
    """Modelled on an H100 (no GPU needed): unpadded (`pad 0`) the column reads conflict
    32 ways; the default pad of 4 leaves 4 ways, `pad 1` none."""
    unpadded, default, one = column_conflicts[" pad 0"], column_conflicts[""], column_conflicts[" pad 1"]
    assert unpadded > 0 and one == 0 and 0 < default < unpadded / 4


# ---- asynchronous global -> shared copies on CUDA sm_80+ (einc-async-copies) --------------------


def test_cuda_async_copies_on_the_warp_emulator_match_numpy(tmp_path: Path) -> None:
    """No NVIDIA GPU here: the double-buffered shared matmul's CUDA kernel (its tile copies
    as `einc_cp_async_4`, a wait before each barrier) runs on the host's g++ through the
    warp emulator of tests/test_cross_thread_reduce.py (the helper's copy without `cp.async`
    there: `__CUDA_ARCH__` is not defined), partial tiles included, against NumPy."""
    import subprocess

    from tests.oracle.isolate import run_isolated
    from tests.test_cross_thread_reduce import EMULATOR, LAUNCHER, _emulate
    from tests.test_device_differential import poisoned

    comp = matmul(37, 45, 29, "cuda", register_blocked_shared() + DOUBLE_BUFFER)
    source = comp.run_until("source")
    assert source.count("einc_cp_async_4(&") == 4 and source.count("einc_cp_async_wait();") == 2
    manifest = comp.target_obj.manifest(comp.results["target"])
    text = EMULATOR + source.replace('extern "C" ', "")
    for launch in manifest.kernels:
        text += LAUNCHER.replace("NAME", launch.name).replace("ARGS", str(len(launch.args)))
    (tmp_path / "k.cpp").write_text(text)
    subprocess.run(["g++", "-std=c++20", "-O0", "-shared", "-fPIC", "-pthread", str(tmp_path / "k.cpp"),
                    "-o", str(tmp_path / "k.so")], check=True, capture_output=True)  # fmt: skip
    inputs = random_inputs(comp)
    buffers = {b.name: inputs[b.name].copy() if b.name in inputs else poisoned(b.shape, b.dtype) for b in manifest.buffers}
    launches = [(k.name, k.args, k.grid, k.block) for k in manifest.kernels]
    out = run_isolated(_emulate, str(tmp_path / "k.so"), launches, buffers, timeout=120.0)["output0"]
    np.testing.assert_allclose(out, inputs["input0"].astype(np.float64) @ inputs["input1"], rtol=1e-4, atol=1e-4)
