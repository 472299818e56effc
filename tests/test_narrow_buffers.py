"""float16/bfloat16 register tiles and shared tiles on every device target
(`einc-widen-narrow-buffers`): a contraction whose output is float16 or bfloat16 (each product
and each sum rounded to it, as the language says) gets the device default's register-tiled
plan, its accumulators held as float32 in private memory, and a hand schedule may stage its
16-bit inputs in shared memory on OpenCL, SYCL and HLSL (held as float32 there; CUDA and HIP
keep 16-bit tiles), and a float16/bfloat16 reduction bound to threads combines its partials
in a tree of float32 slots, each combine rounded to the narrow type.

Bit for bit against NumPy's per-op rounding in the reduction's order (a register tile keeps
each output's order), fresh random inputs of a fixed seed, shapes no tile divides:
executed on OpenCL (PoCL), SYCL (Intel's CPU device), HLSL (lavapipe) and the Poplar harness,
on the egpu interpreter for CUDA and HIP (the kernels after the target's whole pipeline).
"""

from __future__ import annotations

from typing import Any

import ml_dtypes
import numpy as np
import pytest

from einc.compiler.driver import Compilation
from einc.semantics.egpu import run_lowered
from tests.test_device_differential import run_on_device, script
from tests.test_device_local import register_blocked_shared
from tests.test_device_targets import require_run

MATMUL = "output0[N, M] +=! input0[N, K] * input1[K, M]"
ROWSUM = "output0[N] +=! input0[N, K]"
DTYPES = {"float16": np.dtype(np.float16), "bfloat16": np.dtype(ml_dtypes.bfloat16)}
N, K, M = 37, 45, 29
EXECUTED = [pytest.param(t, marks=getattr(pytest.mark, t)) for t in ("opencl", "sycl", "hlsl", "poplar")]


def per_op_matmul(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """The language's narrow `+=!`: each product and each sum rounded to the output's type, the
    reduction in K order (float32 holds each exact product and, with more than 2p + 2 bits,
    rounds each sum as the narrow type would)."""
    acc = np.zeros((a.shape[0], b.shape[1]), a.dtype)
    for k in range(a.shape[1]):
        p = (a[:, k, None].astype(np.float32) * b[None, k, :].astype(np.float32)).astype(a.dtype)
        acc = (acc.astype(np.float32) + p.astype(np.float32)).astype(a.dtype)
    return acc


def inputs(dtype: str, seed: int = 11) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    t = DTYPES[dtype]
    return {"input0": rng.uniform(-2, 2, (N, K)).astype(t), "input1": rng.uniform(-2, 2, (K, M)).astype(t)}


def compile_matmul(target: str, dtype: str, schedule: object) -> Compilation:
    shapes = {"input0": {"dtype": dtype, "shape": [N, K]}, "input1": {"dtype": dtype, "shape": [K, M]}}
    return Compilation(MATMUL, "<narrow>", shapes, None, target, schedule)  # type: ignore[arg-type]


def hand() -> object:
    """The classic GPU matmul (tests/test_device_local.py): 16x16 work-group tiles of 4x4
    register tiles, both inputs' K tiles of 8 staged in shared memory."""
    return script(register_blocked_shared())


def bits(x: np.ndarray) -> np.ndarray:
    return x.view(np.uint16)


def run(comp: Compilation, values: dict[str, np.ndarray]) -> np.ndarray:
    if comp.target in ("cuda", "hip"):
        return run_lowered(comp.results["target"], values, target=comp.target)["output0"]
    return run_on_device(comp, values)["output0"]


@pytest.mark.parametrize("dtype", list(DTYPES))
@pytest.mark.parametrize("target", EXECUTED)
def test_default_register_tiles_narrow_outputs(target: str, dtype: str) -> None:
    """The default schedule register-tiles the float16/bfloat16 matmul (a private
    `output0_local` of floats; Poplar's vertices too) and the result is NumPy's bits."""
    require_run(target)
    comp = compile_matmul(target, dtype, "default")
    source = comp.run_until("source")
    assert comp.applied_schedule is not None and 'cache_write "output0"' in str(comp.applied_schedule)
    assert "output0_local" in source
    values = inputs(dtype)
    np.testing.assert_array_equal(bits(run(comp, values)), bits(per_op_matmul(values["input0"], values["input1"])))


@pytest.mark.parametrize("dtype", list(DTYPES))
@pytest.mark.parametrize("target", [t for t in EXECUTED if t.values[0] != "poplar"])
def test_narrow_tiles_staged_in_shared_memory(target: str, dtype: str) -> None:
    """A hand schedule staging both 16-bit inputs in shared memory (held as float32 on these
    targets) with a 16-bit register tile: NumPy's bits."""
    require_run(target)
    comp = compile_matmul(target, dtype, hand())
    comp.run_until("source")
    assert "egpu.barrier" in str(comp.results["target"])
    values = inputs(dtype, seed=12)
    np.testing.assert_array_equal(bits(run(comp, values)), bits(per_op_matmul(values["input0"], values["input1"])))


@pytest.mark.parametrize("dtype", list(DTYPES))
@pytest.mark.parametrize("target", ["cuda", "hip"])
@pytest.mark.parametrize("schedule", ["default", "hand"])
def test_cuda_and_hip_narrow_register_tiles_interpreted(target: str, dtype: str, schedule: str) -> None:
    """CUDA and HIP: the default (staged, double buffered; 16-bit shared tiles kept) and the
    hand schedule, their float32 register tiles run on the egpu interpreter: NumPy's bits."""
    comp = compile_matmul(target, dtype, "default" if schedule == "default" else hand())
    source = comp.run_until("source")
    assert "float output0_local[" in source
    values = inputs(dtype, seed=13)
    np.testing.assert_array_equal(bits(run(comp, values)), bits(per_op_matmul(values["input0"], values["input1"])))


@pytest.mark.parametrize("target", ["opencl", "sycl", "hlsl", "cuda", "hip"])
def test_shared_tiles_are_float32_where_the_target_has_no_16bit_arrays(target: str) -> None:
    """The printed shared tile: float32 on OpenCL, SYCL and HLSL, 16 bits on CUDA and HIP."""
    comp = compile_matmul(target, "float16", hand())
    comp.run_until("target")
    shared = [line for line in str(comp.results["target"]).splitlines() if "egpu.alloc_shared" in line]
    assert shared, "no shared tile"
    wide = target in ("opencl", "sycl", "hlsl")
    assert all(("xf32>" in line) == wide and ("xf16>" in line) != wide for line in shared), shared


def tree_order(x: np.ndarray, threads: int, combine: Any, identity: float) -> np.ndarray:
    """A row reduction as a cross-thread reduction computes it, each combine rounded to the
    narrow type: work-item t accumulates elements t, t + threads, ... in order, then the tree
    (while n > 1: the first n - ceil(n / 2) slots combine the slot ceil(n / 2) ahead), then
    the output's fill combined with the total."""
    t = x.dtype

    def f(a: np.ndarray, b: np.ndarray) -> np.ndarray:
        return combine(a.astype(np.float32), b.astype(np.float32)).astype(t)

    slots = [np.full(x.shape[0], identity, t) for _ in range(threads)]
    for k in range(x.shape[1]):
        slots[k % threads] = f(slots[k % threads], x[:, k])
    n = threads
    while n > 1:
        half = -(-n // 2)
        for i in range(n - half):
            slots[i] = f(slots[i], slots[i + half])
        n = half
    return f(np.full(x.shape[0], identity, t), slots[0])


@pytest.mark.parametrize("dtype", list(DTYPES))
@pytest.mark.parametrize("target", [*(t for t in EXECUTED if t.values[0] != "poplar"), "cuda", "hip"])
@pytest.mark.parametrize("program", ["sum", "max"])
def test_cross_thread_narrow_partials(target: str, dtype: str, program: str) -> None:
    """A float16/bfloat16 row sum or max with its reduction bound to 16 work-items (a partial
    last tile) or to 37 (not a power of two): the partials combine in a tree of float32 slots
    (no 16-bit arrays needed), each combine rounded to the narrow type: the bits of that order
    computed by NumPy (`tree_order`)."""
    if target not in ("cuda", "hip"):
        require_run(target)
    prog, combine, identity = {"sum": (ROWSUM, np.add, 0.0), "max": ("output0[N] >=! input0[N, K]", np.maximum, -np.inf)}[program]
    for rows, cols, tile in ((7, 50, 16), (3, 37, None)):
        lines = ['%n = transform.einc.match stmt "output0" axis "N" in %root',
                 '%k = transform.einc.match stmt "output0" axis "K" in %root',
                 'transform.einc.bind %n to "block.x"']  # fmt: skip
        if tile is None:
            lines.append('transform.einc.bind %k to "thread.x"')
        else:
            lines += [f"%ko, %ki = transform.einc.tile %k by {tile}", 'transform.einc.bind %ki to "thread.x"']
        comp = Compilation(prog, "<rows>", {"input0": {"dtype": dtype, "shape": [rows, cols]}}, None, target, script(lines))
        comp.run_until("source")
        assert "egpu.barrier" in str(comp.results["target"])
        x = np.random.default_rng(rows).uniform(-3, 3, (rows, cols)).astype(DTYPES[dtype])
        expected = tree_order(x, tile or cols, combine, identity)
        np.testing.assert_array_equal(bits(run(comp, {"input0": x})), bits(expected))


@pytest.mark.parametrize("target", [*EXECUTED, "cuda", "hip"])
def test_narrow_row_sum_default(target: str) -> None:
    """The default schedule of a float16 row sum: a private float32 register across the row
    (PoCL, lavapipe; Poplar keeps the default mapping) or a cross-thread reduction (SYCL, CUDA, HIP: float16 partials
    combined in a tree). Within the bound of its roundings (each at most half an ulp of a
    partial sum no larger than the row's absolute sum) of the exact sum."""
    if target not in ("cuda", "hip"):
        require_run(target)
    rows, cols = 19, 700
    comp = Compilation(ROWSUM, "<rowsum>", {"input0": {"dtype": "float16", "shape": [rows, cols]}}, None, target, "default")
    comp.run_until("source")
    assert (comp.applied_schedule is None) == (target == "poplar")  # Poplar's default tiles contractions only
    cross = "egpu.barrier" in str(comp.results["target"])
    assert cross == (target in ("sycl", "cuda", "hip")), target
    x = np.random.default_rng(14).uniform(-1, 1, (rows, cols)).astype(np.float16)
    exact = x.astype(np.float64).sum(axis=1)
    bound = (cols + 1) * 2.0**-11 * np.abs(x.astype(np.float64)).sum(axis=1)
    out = run(comp, {"input0": x}).astype(np.float64)
    assert np.all(np.abs(out - exact) <= bound), (out, exact)


@pytest.mark.opencl
def test_opencl_rounds_to_float16_by_bits_as_numpy() -> None:
    """OpenCL's `einc_round_f16` (bit arithmetic, einc/targets/opencl.py): every float32
    whose low 13 bits are one of the patterns that decide a rounding (0, 1, just below and
    at the tie, just above it, all ones), each with every sign, exponent and high
    significand (4 Mi values: every binade of the normal and subnormal halves, the overflow
    threshold 65520, float32 subnormals, the infinities), against NumPy's float32 -> float16
    -> float32; NaNs stay NaN."""
    require_run("opencl")
    low = np.array([0, 1, 0xFFF, 0x1000, 0x1001, 0x1FFF], np.uint32)
    high = np.arange(1 << 19, dtype=np.uint32) << 13
    x = (high[:, None] | low[None, :]).ravel().view(np.float32)
    comp = Compilation("output0[N] = input0[N].cast(`float16`).cast(`float32`)", "<round>",
                       {"input0": {"dtype": "float32", "shape": [x.size]}}, None, "opencl", "default")  # fmt: skip
    source = comp.run_until("source")
    assert "einc_round_f16(" in source and "vstore_half" not in source.split("__kernel")[0]
    with np.errstate(over="ignore"):
        want = x.astype(np.float16).astype(np.float32)
    got = run(comp, {"input0": x})
    nan = np.isnan(want)
    assert np.array_equal(np.isnan(got), nan)
    np.testing.assert_array_equal(got[~nan].view(np.uint32), want[~nan].view(np.uint32))
