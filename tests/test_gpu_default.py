"""The device default schedules (einc/schedule/policies/gpu.py) and the device search space's
`tile` sketches (einc/tune/sketches/gpu.py).

Every kind of nest the policy schedules (contractions with shapes that divide the tiles and
shapes that divide nothing, batch matmul, transposed operands, a convolution, row and column
reductions, softmax, elementwise nests of two and of four axes) is compiled with the default
schedule and with the `tile.shared` variant (both inputs staged in shared memory, the shape
CUDA and HIP get by default), run on each executable device target (OpenCL on PoCL, SYCL on
Intel's CPU runtime, HLSL on lavapipe) on fresh random inputs and compared with a float64
NumPy reference; CUDA's and HIP's defaults (staged, double buffered, tiles with their
register-tile axis innermost; float16/bfloat16 contractions on tensor cores where the tiles
fit 16x16) run on the egpu interpreter. On CUDA (NVRTC, no GPU needed) the PTX hot loop of
every default contraction kernel (matmul, batch matmul, transposed operands, 2-d and 1-d
convolution) reads shared memory only, at least 8 FMAs per shared load. The sketches' knobs are bounded by the target, and a point
past a limit is refused when the schedule is applied, before any launch.
"""

from __future__ import annotations

import itertools

import re
from typing import Any

import numpy as np
import pytest

from einc.compiler.driver import Compilation
from einc.errors import TargetError
from einc.schedule.choice import ScheduleChoice
from einc.schedule.policies import gpu as policy
from einc.targets import get_target
from tests.test_device_differential import run_on_device
from tests.test_device_schedules import random_inputs
from tests.test_device_targets import require, require_run

MATMUL = "output0[N, M] +=! input0[N, K] * input1[K, M]"
CONV = ("output0[N, F, HO, WO] +=! input0[N, C, HO + KH, WO + KW] * input1[F, C, KH, KW] "
        "where HO in 6, WO in 10")  # fmt: skip
SOFTMAX = ("temp0[N] >=! input0[N, C]; temp1[N] +=! (input0[N, C] - temp0[N]).call(`exp`); "
           "output0[N, C] = (input0[N, C] - temp0[N]).call(`exp`) / temp1[N]")  # fmt: skip


def _softmax(x: np.ndarray) -> np.ndarray:
    e = np.exp(x - x.max(axis=1, keepdims=True))
    return e / e.sum(axis=1, keepdims=True)


def _conv(x: np.ndarray, w: np.ndarray) -> np.ndarray:
    n, c, h, wd = x.shape
    f, _, kh, kw = w.shape
    out = np.zeros((n, f, h - kh + 1, wd - kw + 1))
    for i in range(kh):
        for j in range(kw):
            out += np.einsum("nchw,fc->nfhw", x[:, :, i:i + h - kh + 1, j:j + wd - kw + 1], w[:, :, i, j])
    return out


CASES: dict[str, tuple[str, dict[str, list[int]], Any]] = {
    "matmul": (MATMUL, {"input0": [64, 48], "input1": [48, 80]}, lambda a, b: a @ b),
    "matmul_odd": (MATMUL, {"input0": [37, 19], "input1": [19, 23]}, lambda a, b: a @ b),
    "bmm": ("output0[B, N, M] +=! input0[B, N, K] * input1[B, K, M]", {"input0": [3, 20, 16], "input1": [3, 16, 24]},
            lambda a, b: a @ b),
    "matmul_tb": ("output0[N, M] +=! input0[N, K] * input1[M, K]", {"input0": [33, 40], "input1": [24, 40]},
                  lambda a, b: a @ b.T),
    "conv": (CONV, {"input0": [2, 5, 8, 12], "input1": [12, 5, 3, 3]}, _conv),
    "rowsum": ("output0[N] +=! input0[N, C]", {"input0": [10, 100]}, lambda a: a.sum(axis=1)),
    "colsum": ("output0[C] +=! input0[N, C]", {"input0": [50, 70]}, lambda a: a.sum(axis=0)),
    "softmax": (SOFTMAX, {"input0": [9, 130]}, _softmax),
    "scale": ("output0[N, C] = input0[N, C] * 3.0 + input1[N, C]", {"input0": [7, 300], "input1": [7, 300]},
              lambda a, b: a * 3.0 + b),
    "rank4": ("output0[A, B, C, D] = input0[A, B, C, D] - 1.0", {"input0": [2, 3, 5, 9]}, lambda a: a - 1.0),
}  # fmt: skip

DEVICES = [pytest.param(t, marks=getattr(pytest.mark, t)) for t in ("opencl", "sycl", "hlsl", "cuda")]


def _inputs(case: str) -> dict[str, dict[str, object]]:
    return {k: {"dtype": "float32", "shape": v} for k, v in CASES[case][1].items()}


def _loops(case: str, target: str) -> Any:
    return Compilation(CASES[case][0], f"<{case}>", _inputs(case), None, target, ScheduleChoice.NONE).module("loops")


def _check(comp: Compilation, case: str) -> None:
    inputs = random_inputs(comp)
    out = run_on_device(comp, inputs)["output0"]
    expected = CASES[case][2](*(inputs[k].astype(np.float64) for k in sorted(CASES[case][1])))
    np.testing.assert_allclose(out, expected, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("target", DEVICES)
@pytest.mark.parametrize("case", list(CASES))
def test_default_schedule_matches_numpy(target: str, case: str) -> None:
    require_run(target)
    comp = Compilation(CASES[case][0], f"<{case}>", _inputs(case), None, target, "default")
    comp.run_until("source")
    # every case but a nest of four axes (left to the default mapping) is scheduled
    assert (comp.applied_schedule is None) == (case == "rank4")
    _check(comp, case)


@pytest.mark.parametrize("target", ["cuda", "hip"])
@pytest.mark.parametrize("case", ["matmul_odd", "bmm", "matmul_tb", "conv"])
def test_cuda_and_hip_defaults_interpreted_match_numpy(target: str, case: str) -> None:
    """CUDA's and HIP's defaults (staged in shared memory, a convolution's filter staged
    with its output channels innermost, cp.async on CUDA) executed by the egpu interpreter
    (no GPU here): the kernels as printed, after the target's whole pipeline."""
    from einc.semantics.egpu import run_lowered

    comp = Compilation(CASES[case][0], f"<{case}>", _inputs(case), None, target, "default")
    comp.run_until("target")
    assert 'in "shared"' in str(comp.applied_schedule)
    inputs = random_inputs(comp)
    out = run_lowered(comp.results["target"], inputs, target=target)["output0"]
    expected = CASES[case][2](*(inputs[k].astype(np.float64) for k in sorted(CASES[case][1])))
    np.testing.assert_allclose(out, expected, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("target", DEVICES)
@pytest.mark.parametrize("case", ["matmul", "matmul_odd", "bmm", "conv"])
def test_staged_contraction_matches_numpy(target: str, case: str) -> None:
    """The `tile.shared` sketch at its default knobs: the CUDA default's shape, executed."""
    require_run(target)
    schedule = policy.build(get_target(target), _loops(case, target), frozenset({"input0", "input1"}))
    assert schedule is not None and "in \"shared\"" in str(schedule)
    comp = Compilation(CASES[case][0], f"<{case}>", _inputs(case), None, target, schedule)
    comp.run_until("source")
    assert "egpu.barrier" in str(comp.results["target"])
    _check(comp, case)


def test_default_contraction_shape_on_cuda() -> None:
    """CUDA's default matmul: a 128x128 work-group tile of 16x16 work-items, an 8x8 register
    tile in a private array, both inputs staged in shared memory at a K tile of 8, double
    buffered (two slots of 8 KiB each: the 16 KiB a single K tile of 16 took)."""
    loops = Compilation(MATMUL, "<m>", {"input0": {"dtype": "float32", "shape": [1024, 1024]},
                                        "input1": {"dtype": "float32", "shape": [1024, 1024]}},
                        None, "cuda", ScheduleChoice.NONE).module("loops")  # fmt: skip
    schedule = policy.default_schedule(get_target("cuda"), loops)
    assert schedule is not None
    knobs = {k: v.selected for k, v in schedule.knobs().items()}
    assert knobs == {"output0.M.reg": 8, "output0.M.threads": 16, "output0.N.reg": 8, "output0.N.threads": 16,
                     "output0.K.ktile": 8}  # fmt: skip
    text = str(schedule)
    assert text.count('in "shared"') == 2 and 'cache_write "output0"' in text
    assert text.count("transform.einc.double_buffer") == 2


def _knobs(case: str, target: str, variant: policy.Variant | None = None) -> dict[str, int]:
    schedule = policy.build(get_target(target), _loops(case, target), variant=variant)
    assert schedule is not None
    return {k: v.selected for k, v in schedule.knobs().items()}


def test_one_column_contractions_where_work_items_are_vector_lanes() -> None:
    """Intel's SYCL CPU device runs work-items as vector lanes (`items_vectorized`): its default
    matmul, batch matmul and transposed matmul take a work-item per output column (x register
    tile 1, 128 work-items along x, a y register tile up to 16 on 16 work-items); a
    convolution (several reductions) keeps the 8x8 plan, PoCL (not vectorized across
    work-items) its tall tile (`test_tall_register_tiles_on_pocl`), and `Variant(columns=False)`
    turns it off."""
    assert get_target("sycl").limits.items_vectorized and not get_target("opencl").limits.items_vectorized
    column = {"output0.M.reg": 1, "output0.M.threads": 128, "output0.N.reg": 16, "output0.N.threads": 4}
    assert _knobs("matmul", "sycl") == column  # 64 x 80: 4 x 16 rows, 128 work-items over 80 columns
    assert _knobs("bmm", "sycl") == {**column, "output0.M.threads": 32, "output0.N.reg": 10, "output0.N.threads": 2}
    assert _knobs("matmul_tb", "sycl")["output0.M.reg"] == 1
    classic = {"output0.M.reg": 8, "output0.M.threads": 8, "output0.N.reg": 8, "output0.N.threads": 8}
    assert _knobs("matmul", "sycl", policy.Variant(columns=False)) == classic
    conv = _knobs("conv", "sycl")
    assert conv == _knobs("conv", "sycl", policy.Variant(columns=False)) and conv["output0.WO.reg"] > 1


def test_tall_register_tiles_on_pocl() -> None:
    """PoCL (`loop_barriers`, work-items not vector lanes, shared memory not on chip): a
    two-axis contraction with one reduction, nothing staged, has a register tile 2 * REGISTER
    rows tall (16 x 8, `tall_rows`); staged (`tile.shared`), a convolution, lavapipe (HLSL,
    no loop barriers) and Intel's SYCL device (work-items as lanes) do not."""
    d = get_target("opencl").limits
    assert d.loop_barriers and not d.items_vectorized and not d.shared_on_chip
    tall = {"output0.M.reg": 8, "output0.M.threads": 8, "output0.N.reg": 16, "output0.N.threads": 4}
    assert _knobs("matmul", "opencl") == tall  # 64 x 80: 64 rows are 4 work-items of 16
    assert _knobs("bmm", "opencl")["output0.N.reg"] == 10  # 20 rows: the largest divisor up to 16
    assert _knobs("matmul_tb", "opencl")["output0.N.reg"] == 11  # 33 rows: 11
    staged = _knobs("matmul", "opencl", policy.Variant(frozenset({"input0", "input1"})))
    assert staged["output0.N.reg"] == policy.REGISTER
    assert max(v for k, v in _knobs("conv", "opencl").items() if k.endswith(".reg")) <= policy.REGISTER
    assert _knobs("matmul", "hlsl")["output0.N.reg"] == policy.REGISTER
    assert _knobs("matmul", "sycl", policy.Variant(columns=False))["output0.N.reg"] == policy.REGISTER


def _ptx(source: str) -> str:
    from einc.runtime.cuda import _nvrtc, cuda_include_dirs

    nvrtc = _nvrtc()
    flags = ["--gpu-architecture=compute_80", "--std=c++17", *(f"--include-path={d}" for d in cuda_include_dirs())]
    err, program = nvrtc.nvrtcCreateProgram(source.encode(), b"kernel.cu", 0, [], [])
    try:
        (err,) = nvrtc.nvrtcCompileProgram(program, len(flags), [f.encode() for f in flags])
        assert err == nvrtc.nvrtcResult.NVRTC_SUCCESS, err
        err, size = nvrtc.nvrtcGetPTXSize(program)
        buffer = b" " * size
        nvrtc.nvrtcGetPTX(program, buffer)
    finally:
        nvrtc.nvrtcDestroyProgram(program)
    return buffer.rstrip(b"\0").decode()


def hot_loop(ptx: str) -> dict[str, int]:
    """Counts in the PTX loop (a label and the backward branch to it) with the most FMAs."""
    lines = ptx.splitlines()
    labels: dict[str, int] = {}
    best = {"fma": 0, "ld.global": 0, "ld.shared": 0}
    for i, line in enumerate(lines):
        if m := re.match(r"\s*(\$\w+):", line):
            labels[m.group(1)] = i
        if (m := re.search(r"bra(?:\.uni)?\s+(\$\w+);", line)) and m.group(1) in labels:
            body = lines[labels[m.group(1)]:i]
            counts = {k: sum(1 for x in body if re.search(rf"\b{re.escape(k)}", x)) for k in ("ld.global", "ld.shared")}
            counts["fma"] = sum(1 for x in body if re.search(r"\bfma\.rn\.f32", x))
            if counts["fma"] > best["fma"]:
                best = counts
    return best


CONTRACTIONS = {
    "matmul": (MATMUL, {"input0": [512, 512], "input1": [512, 512]}),
    "bmm": ("output0[B, N, M] +=! input0[B, N, K] * input1[B, K, M]", {"input0": [4, 256, 128], "input1": [4, 128, 256]}),
    "matmul_ta": ("output0[N, M] +=! input0[K, N] * input1[K, M]", {"input0": [256, 256], "input1": [256, 256]}),
    "matmul_tb": ("output0[N, M] +=! input0[N, K] * input1[M, K]", {"input0": [256, 256], "input1": [256, 256]}),
    "matmul_tab": ("output0[N, M] +=! input0[K, N] * input1[M, K]", {"input0": [256, 256], "input1": [256, 256]}),
    "conv": ("output0[N, F, HO, WO] +=! input0[N, C, HO + KH, WO + KW] * input1[F, C, KH, KW] where HO in 32, WO in 32",
             {"input0": [4, 64, 34, 34], "input1": [128, 64, 3, 3]}),
    "conv1d": ("output0[N, F, WO] +=! input0[N, C, WO + KW] * input1[F, C, KW] where WO in 128",
               {"input0": [4, 64, 130], "input1": [128, 64, 3]}),
}  # fmt: skip


TRANSPOSED_STAGING = {"matmul", "bmm", "matmul_tb", "matmul_tab"}
"""The CONTRACTIONS whose tiles are all staged with a permuted layout or copied with cp.async:
no 4-byte copies left (a convolution's filter, [F, C, 3, 3] staged [C, 3, 3, F], is not
read 4 consecutive elements at a time along its tile's rows)."""


@pytest.mark.cuda
@pytest.mark.parametrize("case", list(CONTRACTIONS))
def test_cuda_default_contraction_hot_loop_reads_shared_memory_only(case: str) -> None:
    """NVRTC's PTX of the default kernel (one compile per case): the hot loop has no global
    load and an 8x8 register tile's 64 FMAs per reduction step (a multiple with the K tile
    or the window unrolled), at least 8 FMAs per shared load: the register tile's operands
    are read with vector shared loads whatever the operands' global layout (each tile staged
    with its register-tile axis innermost: a transposed operand, a convolution's filter; a
    convolution's window KW unrolled)."""
    require("cuda")
    ir, shapes = CONTRACTIONS[case]
    comp = Compilation(ir, f"<{case}>", {k: {"dtype": "float32", "shape": v} for k, v in shapes.items()}, None,
                       "cuda", "default")  # fmt: skip
    ptx = _ptx(comp.run_until("source"))
    counts = hot_loop(ptx)
    assert counts["ld.global"] == 0, counts
    assert counts["fma"] >= 64 and counts["fma"] >= 8 * counts["ld.shared"], counts
    if case in TRANSPOSED_STAGING:
        # a tile staged transposed (A[N, K] as [K, N]) is read from global memory 16 bytes
        # at a time and written to shared memory as four scalar stores down its column
        # (cp.async cannot transpose: the copy goes through registers), not element by element
        assert re.search(r"ld\.global\.nc\.v4\.f32", ptx) and "st.shared.f32" in ptx
        assert not re.search(r"cp\.async\.ca\.shared\.global \[%r\d+\], \[%rd\d+\], 4;", ptx)


HALF_MATMUL = "output0[N, M] +=! input0[N, K].cast(`float32`) * input1[K, M].cast(`float32`)"
HALF_BMM = "output0[B, N, M] +=! input0[B, N, K].cast(`float32`) * input1[B, M, K].cast(`float32`)"
HALF_CASES = {
    "fits": (HALF_MATMUL, {"input0": [32, 48], "input1": [48, 16]}, True),
    "bmm_tb": (HALF_BMM, {"input0": [2, 16, 32], "input1": [2, 32, 32]}, True),
    "blocks": (HALF_MATMUL, {"input0": [64, 128], "input1": [128, 96]}, True),
    "odd": (HALF_MATMUL, {"input0": [20, 32], "input1": [32, 16]}, False),
    "short_k": (HALF_MATMUL, {"input0": [16, 24], "input1": [24, 16]}, False),
}  # fmt: skip


@pytest.mark.parametrize(("case", "dtype", "target"), [
    *(("fits", d, t) for d in ("float16", "bfloat16") for t in ("cuda", "hip")),
    ("bmm_tb", "float16", "cuda"), ("bmm_tb", "bfloat16", "hip"),
    ("blocks", "float16", "cuda"), ("blocks", "bfloat16", "hip"),
    ("odd", "float16", "cuda"), ("short_k", "bfloat16", "hip"),
])  # fmt: skip
def test_half_contractions_use_tensor_cores_where_tiles_fit(target: str, dtype: str, case: str) -> None:
    """A float16/bfloat16 contraction accumulated in float32 gets tensor cores by default on
    CUDA and HIP (`tensorize`) where its output axes and reduction are multiples of 16, the
    scalar register-tiled plan elsewhere (never a refusal); the egpu interpreter (each lane's
    fragment elements modelled) agrees with NumPy either way. Where the tiles fit, a block of
    warps stages A's and B's tiles (float16/bfloat16, rows padded) in shared memory, each
    warp's float32 accumulator in its lanes' registers, zeroed there: one kernel, no fill
    ("blocks": 2 x 3 warps on CUDA, two reduction tiles)."""
    import ml_dtypes

    from einc.semantics.egpu import run_lowered

    ir, shapes, fits = HALF_CASES[case]
    comp = Compilation(ir, f"<{case}>", {k: {"dtype": dtype, "shape": v} for k, v in shapes.items()}, None, target,
                       "default")  # fmt: skip
    comp.run_until("target")
    assert ("transform.einc.tensorize" in str(comp.applied_schedule)) == fits, comp.applied_schedule
    if fits:
        assert str(comp.applied_schedule).count('in "shared"') == 2, comp.applied_schedule
        manifest = comp.kernel().manifest
        assert manifest is not None and len(manifest.kernels) == 1, manifest
    rng = np.random.default_rng(3)
    storage = np.float16 if dtype == "float16" else ml_dtypes.bfloat16
    inputs = {k: rng.uniform(-2, 2, v).astype(storage) for k, v in shapes.items()}
    out = run_lowered(comp.results["target"], inputs, target=target)["output0"]
    a, b = (inputs[k].astype(np.float64) for k in ("input0", "input1"))
    expected = a @ (b if ir == HALF_MATMUL else b.transpose(0, 2, 1))
    np.testing.assert_allclose(out, expected, rtol=0, atol=1e-5 * np.abs(expected).max())


def mma_loop(ptx: str) -> dict[str, int]:
    """Counts in the innermost PTX loop holding `mma.sync` (empty where none does)."""
    lines = ptx.splitlines()
    labels: dict[str, int] = {}
    best: dict[str, int] = {}
    for i, line in enumerate(lines):
        if m := re.match(r"\s*(\$\w+):", line):
            labels[m.group(1)] = i
        if (m := re.search(r"bra(?:\.uni)?\s+(\$\w+);", line)) and m.group(1) in labels:
            body = lines[labels[m.group(1)]:i]
            counts = {k: sum(1 for x in body if re.search(rf"\b{re.escape(k)}", x)) for k in ("mma.sync", "ld.global", "ld.shared", "st.global", "ldmatrix")}
            if counts["mma.sync"] and (not best or len(body) < best["lines"]):
                best = {**counts, "lines": len(body)}
    return best


@pytest.mark.cuda
def test_cuda_default_half_matmul_is_mma_sync_from_shared_memory() -> None:
    """The default float16 matmul's PTX (NVRTC, sm_80): tensor-core `mma.sync` instructions
    in a loop that reads shared memory only (the staged tiles, by `ldmatrix`) and stores nothing to global
    memory; one kernel (the accumulator zeroed in registers, no fill kernel), held in
    registers (no local memory) and written once after the loop."""
    require("cuda")
    f16 = {"dtype": "float16", "shape": [256, 256]}
    comp = Compilation(HALF_MATMUL, "<h>", {"input0": f16, "input1": f16}, None, "cuda", "default")
    ptx = _ptx(comp.run_until("source"))
    assert "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32" in ptx
    counts = mma_loop(ptx)
    assert counts and counts["ld.global"] == 0 and counts["st.global"] == 0, counts
    # the fragments by ldmatrix (einc-ldmatrix): one x4 for A's 16 x 16, one x4.trans for
    # B's, per 16-wide k step and mma.sync pair; no element-wise shared loads left
    assert counts["ldmatrix"] == counts["mma.sync"] and counts["ld.shared"] == 0, counts
    assert "ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16" in ptx
    assert ptx.count(".entry") == 1 and ".local" not in ptx
    assert ptx.count("st.global.f32") == 8, "each lane writes its 8 accumulator elements once"


def test_row_reductions_share_rows_by_the_targets_facts() -> None:
    """A row reduction's work-items per row, from the target's facts: on a GPU (shared memory
    on chip) the default work-group (256: eight warps, coalesced); on a CPU runtime whose
    barriers are compile-time splits of the work-item loop and work-items vector lanes, one
    vector of them (SYCL: 16); a row per work-item with a private accumulator on
    lavapipe (HLSL), whose barriers switch coroutines, and on PoCL, which does not run
    work-items as vector lanes (`vector_rows`: the row read in vectors, vector partial
    sums); never more work-items than the row has elements (a power of two)."""
    expected = {"cuda": 256, "hip": 256, "sycl": 16}
    for target, threads in expected.items():
        knobs = _knobs("softmax", target)  # 130 columns: at most 128 work-items
        assert (knobs["temp0.C.threads"], knobs["temp1.C.threads"]) == (min(threads, 128),) * 2, (target, knobs)
        assert _knobs("rowsum", target) == {"output0.C.threads": min(threads, 64)}, target  # 100 columns
    for target in ("hlsl", "opencl"):
        rows = _knobs("softmax", target)
        assert (rows["temp0.N.threads"], rows["temp1.N.threads"]) == (16, 16), target  # a row per work-item: 9 rows
    assert _knobs("rowsum", "opencl") == {"output0.N.threads": 16}  # 10 rows
    assert policy.vector_rows(get_target("opencl").limits, policy.Facts.of(get_target("opencl").limits))
    assert not any(policy.vector_rows(get_target(t).limits, policy.Facts.of(get_target(t).limits))
                   for t in ("sycl", "hlsl", "cuda", "hip"))  # fmt: skip
    assert _knobs("colsum", "sycl") == {"output0.C.threads": 64}  # a column read at stride: one per work-item
    barriers = {t: getattr(get_target(t).limits, "loop_barriers", None) for t in ("opencl", "sycl", "hlsl")}
    assert barriers == {"opencl": True, "sycl": True, "hlsl": False}


def test_poplar_default_register_tiles_contractions_only() -> None:
    """Poplar's grid is one MultiVertex (its printer spreads points over tiles): its default
    binds nothing; a contraction (64 x 128 outputs: 16 x 16 tiles of 4 x 8; 64 x 80: 10
    columns of tiles, not a power of two, since gpu.13's clipped boxes) gets 4 x 8 register
    tiles of private accumulators (a float16 one too), and nothing else is scheduled (a
    softmax)."""
    poplar = get_target("poplar")
    tiled = Compilation(MATMUL, "<m>", {"input0": {"dtype": "float32", "shape": [64, 32]},
                                        "input1": {"dtype": "float32", "shape": [32, 128]}},
                        None, "poplar", ScheduleChoice.NONE).module("loops")  # fmt: skip
    schedule = policy.default_schedule(poplar, tiled)
    assert schedule is not None
    text = str(schedule.module)
    assert 'cache_write "output0"' in text and "bind" not in text and "by 4" in text and "by 8" in text
    other = policy.default_schedule(poplar, _loops("matmul", "poplar"))
    assert other is not None and 'cache_write "output0"' in str(other.module)
    assert policy.default_schedule(poplar, _loops("softmax", "poplar")) is None
    # a float16 output's register tile is held as float32 (einc-widen-narrow-buffers): tiled too
    half = Compilation(MATMUL, "<m>", {"input0": {"dtype": "float16", "shape": [64, 32]},
                                       "input1": {"dtype": "float16", "shape": [32, 128]}},
                       None, "poplar", ScheduleChoice.NONE).module("loops")  # fmt: skip
    half_schedule = policy.default_schedule(poplar, half)
    assert half_schedule is not None and 'cache_write "output0"' in str(half_schedule.module)


POPLAR_PROGRAMS = {
    "matmul": (MATMUL, {"input0": [96, 256], "input1": [256, 128]}),
    "matmul-odd": (MATMUL, {"input0": [97, 256], "input1": [256, 131]}),  # vertex.reg: partial last tiles
    "softmax": (SOFTMAX, {"input0": [64, 512]}),
    "rowsum": ("output0[N] +=! input0[N, C]", {"input0": [512, 512]}),
}
"""Programs whose data overflow one Poplar tile's 624 KiB where a schedule made them one
vertex (bound loops, private accumulators): the `bind` sketches were refused there."""


@pytest.mark.parametrize("name", list(POPLAR_PROGRAMS))
def test_poplar_space_is_legal_by_construction(name: str) -> None:
    """Poplar's search space (no grid, no shared memory: `gridless`) holds the default and
    the `vertex` sketches only - nothing bound, staged or privately accumulated, the
    reductions unrolled or vectorized - so every point of it (the space is small: each one
    is tried, not a sample) applies, lowers and prints (the vertex split and its tile-memory
    check included) without a refusal: a 16-trial tune measures valid candidates only; no run."""
    from einc.tune.space import SearchSpace
    from einc.tune.types import Point, TuneTask

    ir, shapes = POPLAR_PROGRAMS[name]
    task = TuneTask(ir, "poplar", f"<{name}>", {k: {"dtype": "float32", "shape": v} for k, v in shapes.items()})
    space = SearchSpace.from_task(task)
    assert set(space.sketches) - {"default"} and all(s in ("default", "vertex", "vertex.vector", "vertex.reg") for s in space.sketches)
    assert ("vertex.reg" in space.sketches) == name.startswith("matmul")  # also where no tile divides (97 x 131)
    points = [Point.of(sketch, dict(zip(options, values))) for sketch in space.sketches
              for options in [space.knob_options(sketch)] for values in itertools.product(*options.values())]  # fmt: skip
    assert len(points) == space.size() and len(set(points)) == len(points) > 2
    for point in points:
        comp = task.compilation(space.candidate(point).schedule)
        target = comp.module("target")  # refusals raise here (ScheduleError, TargetError)
        comp.run_until("source")
        # every kernel spread over several tiles (a kernel made one vertex overflows one)
        split = [str(op.attributes["egpu.tile_split"]) for op in target.walk() if "egpu.tile_split" in op.attributes]
        assert split and not any("vertices = 1," in a for a in split), (point, split)


def test_tile_sketches_and_bounded_knobs() -> None:
    """OpenCL's space: the default (no staging on PoCL), tile.shared, one sketch per staged
    input, the double-buffered and the padded ones, one-column register tiles, the unstaged
    reduction unrolled; work-item knobs up to four default work-groups; a point of 64x80 work-items (past
    the 4096 limit) is refused when compiled, before any launch."""
    from einc.tune.space import SearchSpace
    from einc.tune.types import TuneTask

    task = TuneTask(MATMUL, "opencl", "<m>", _inputs("matmul"))
    space = SearchSpace.from_task(task, rules=["tile"])
    assert list(space.sketches) == ["default", "tile.columns", "tile.kunroll", "tile.shared", "tile.shared.input0",
                                    "tile.shared.input1", "tile.shared.single", "tile.shared.pad0",
                                    "tile.shared.pad1"]  # fmt: skip
    for name in space.sketches:
        options = space.knob_options(name)
        assert max(options["output0.M.threads"]) == 4 * get_target("opencl").limits.default_block
        assert set(options["output0.M.reg"]) == {1, 2, 4, 5, 8, 10, 16}
    assert space.sketches["default"].roles["output0.M.threads"].kind == "thread"
    point = space.default_point()
    big = type(point).of("default", {**point.values(), "output0.M.threads": 128, "output0.N.threads": 128,
                                     "output0.M.reg": 1, "output0.N.reg": 1})  # 64 x 80 work-items
    comp = Compilation(MATMUL, "<m>", _inputs("matmul"), None, "opencl", space.candidate(big).schedule)
    with pytest.raises(TargetError, match="cannot be launched: 16384 threads per block"):
        comp.run_until("source")


@pytest.mark.parametrize("target", ["opencl", "cuda", "sycl", "hip"])
def test_float16_contraction_is_register_tiled(target: str) -> None:
    """A float16 matmul: its register tile is a private array held as float32 on every device
    target (einc-widen-narrow-buffers), so the default's register-tiled plan applies; the
    numbers: tests/test_narrow_buffers.py."""
    f16 = {"dtype": "float16", "shape": [64, 48]}
    comp = Compilation(MATMUL, "<m>", {"input0": f16, "input1": {**f16, "shape": [48, 40]}}, None, target, "default")
    source = comp.run_until("source")
    assert "float output0_local[" in source


def test_a_bind_that_cannot_map_is_refused_at_its_schedule_op() -> None:
    """A loop bound inside sequential loops is refused when the schedule is applied (the
    scheduled stage, at the bind), not later by convert-affine-to-egpu: the default policy's
    trials and the random schedule generator see the refusal where they look for it."""
    from einc.errors import ScheduleError
    from einc.schedule.script import Schedule

    text = ('builtin.module {\n  transform.named_sequence @__transform_main(%root: !transform.any_op) {\n'
            '    %h = transform.einc.match stmt "output0" axis "W" in %root\n'
            '    transform.einc.bind %h to "block.y"\n    transform.yield\n  }\n}\n')  # fmt: skip
    comp = Compilation("output0[N, C, H, W] = input0[N, H, W, C]", "t.ein",
                       {"input0": {"dtype": "float32", "shape": [2, 5, 5, 3]}}, target="cuda",
                       schedule=Schedule.parse(text, "s.mlir"), use_records=False)  # fmt: skip
    with pytest.raises(ScheduleError, match="cannot be mapped onto work-items") as err:
        comp.module("scheduled")
    assert "s.mlir:4:5" in err.value.render()


ROWS_CASES = {
    "rowsum": ("output0[N] +=! input0[N, C]", {"input0": [16, 100]}, lambda a: a.sum(axis=1)),
    "softmax": (SOFTMAX, {"input0": [8, 130]}, _softmax),
}


@pytest.mark.parametrize("target", [*DEVICES[:3], "cuda", "hip"])
@pytest.mark.parametrize("case", list(ROWS_CASES))
def test_cross_thread_rows_per_work_group_match_numpy(target: str, case: str) -> None:
    """`tile.cross` (`Variant.rows_knob`): several rows a work-group, the rows on thread.y
    beside each row's work-items on thread.x, at every option of the knob (the divisors of
    the rows among 1-16), run on OpenCL, SYCL and HLSL, interpreted (egpu) on CUDA and HIP,
    against NumPy."""
    from einc.semantics.egpu import run_lowered

    ir, shapes, reference = ROWS_CASES[case]
    inputs = {k: {"dtype": "float32", "shape": v} for k, v in shapes.items()}
    loops = Compilation(ir, f"<{case}>", inputs, None, target, ScheduleChoice.NONE).module("loops")
    schedule = policy.build(get_target(target), loops, variant=policy.Variant(frozenset(), "cross", rows_knob=True))
    assert schedule is not None
    knobs = schedule.knobs()
    rows = sorted(k for k in knobs if k.endswith(".N.rows"))
    assert rows == (["output0.N.rows"] if case == "rowsum" else ["temp0.N.rows", "temp1.N.rows"])
    options = (1, 2, 4, 8, 16) if case == "rowsum" else (1, 2, 4, 8)  # 16 rows, 8 rows
    assert all(knobs[k].selected == 1 and tuple(knobs[k].options) == options for k in rows)
    executes = target in ("opencl", "sycl", "hlsl")
    if executes:
        require_run(target)
    for r in options[1:]:
        comp = Compilation(ir, f"<{case}>", inputs, None, target, schedule.with_values({k: r for k in rows}))
        comp.run_until("source")
        assert 'to "thread.y"' in str(comp.applied_schedule)
        arrays = random_inputs(comp)
        if executes:
            out = run_on_device(comp, arrays)["output0"]
        else:
            out = run_lowered(comp.results["target"], arrays, target=target)["output0"]
        np.testing.assert_allclose(out, reference(arrays["input0"].astype(np.float64)), rtol=1e-4, atol=1e-4)


def test_cross_thread_rows_past_the_work_group_limit_are_refused() -> None:
    """A `tile.cross` point whose rows times work-items per row pass the target's work-group
    limit (CUDA: 1024) is refused when the schedule is applied, at its bind, before any launch."""
    from einc.errors import EincError

    inputs = {"input0": {"dtype": "float32", "shape": [64, 2048]}}
    loops = Compilation("output0[N] +=! input0[N, C]", "<r>", inputs, None, "cuda", ScheduleChoice.NONE).module("loops")
    schedule = policy.build(get_target("cuda"), loops, variant=policy.Variant(frozenset(), "cross", rows_knob=True))
    assert schedule is not None
    ok = Compilation("output0[N] +=! input0[N, C]", "<r>", inputs, None, "cuda",
                     schedule.with_values({"output0.N.rows": 4, "output0.C.threads": 256}))  # fmt: skip
    ok.run_until("source")
    past = Compilation("output0[N] +=! input0[N, C]", "<r>", inputs, None, "cuda",
                       schedule.with_values({"output0.N.rows": 8, "output0.C.threads": 256}))  # fmt: skip
    with pytest.raises(EincError, match="2048 threads per block, more than the limit 1024"):
        past.run_until("source")


@pytest.mark.parametrize("target", DEVICES[:2])
def test_random_schedule_generator_draws_rows_per_work_group(target: str) -> None:
    """The random schedule generator (tests/oracle/genschedule.py) starts some scripts from
    `tile.cross` with its rows knob drawn: over fixed seeds on a row sum it draws several
    rows a work-group, and those scripts run and match NumPy."""
    import random

    from tests.oracle.genschedule import header, random_script

    require_run(target)
    ir, inputs = "output0[N] +=! input0[N, C]", {"input0": {"dtype": "float32", "shape": [16, 64]}}
    comp = Compilation(ir, "<r>", inputs, None, target, "none", use_records=False)
    comp.run_until("loops")
    drawn = []
    for seed in range(60):
        lines = random_script(comp, random.Random(seed), steps=1).lines
        rows = [int(m) for ln in lines for m in re.findall(r'"output0\.N\.rows" = (\d+)', ln)]
        if rows and rows[0] > 1:
            drawn.append(lines)
    assert len(drawn) >= 2
    for lines in drawn:
        scheduled = Compilation(ir, "<r>", inputs, None, target, header(lines), use_records=False)
        scheduled.run_until("source")
        arrays = random_inputs(scheduled)
        out = run_on_device(scheduled, arrays)["output0"]
        np.testing.assert_allclose(out, arrays["input0"].astype(np.float64).sum(axis=1), rtol=1e-4, atol=1e-4)
