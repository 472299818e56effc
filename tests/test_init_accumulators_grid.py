"""einc-init-accumulators past its enumeration limits (2^24 output elements, 2^16 tile
origins): a tile whose loops' iterations form a regular grid over the output (per
dimension a mixed-radix numbering of 0 .. extent by the box and the loops' strides) covers
it exactly, shown symbolically, so an 8192 x 8192 float16 tensor-core matmul on CUDA and
HIP starts its accumulator fragments at zero in registers: one kernel, C never read. The
numbers: the same argument forced on small shapes (limits patched to 0) on the egpu
interpreter against NumPy, with a shape whose edge tiles are partial (no regular grid: the
fill stays, the tiles read it back) beside them."""

from __future__ import annotations

import sys

import ml_dtypes
import numpy as np
import pytest

from einc.compiler.driver import Compilation
import einc.passes.init_accumulators  # noqa: F401  (the module, not the function einc.passes exports)
from einc.semantics.egpu import run_lowered
from tests.test_device_targets import require

init_accumulators = sys.modules["einc.passes.init_accumulators"]

DTYPES = {"float16": np.dtype(np.float16), "bfloat16": np.dtype(ml_dtypes.bfloat16)}


def _program(dtype: str, m: int, n: int, k: int) -> str:
    return f"""
input A: {dtype}[{m}, {k}]
input B: {dtype}[{n}, {k}]
C[I, J] +=! A[I, K].cast(`float32`) * B[J, K].cast(`float32`)
"""


def _compile(target: str, dtype: str, m: int, n: int, k: int) -> Compilation:
    comp = Compilation(_program(dtype, m, n, k), "<grid>", target=target, schedule="default")
    comp.run_until("source")
    return comp


def _kernels(comp: Compilation) -> int:
    return str(comp.results["target"]).count("egpu.launch ")


@pytest.fixture(scope="module")
def large() -> dict[str, Compilation]:
    return {target: _compile(target, "float16", 8192, 8192, 32) for target in ("cuda", "hip")}


@pytest.mark.parametrize("target", ["cuda", "hip"])
def test_large_output_accumulates_in_registers(large: dict[str, Compilation], target: str) -> None:
    """8192 x 8192 (2^26 elements, past the enumeration): the default tensor-core kernel alone,
    its fragments zeroed in registers and C written once, never read."""
    comp = large[target]
    source = str(comp.results["source"])
    assert _kernels(comp) == 1, comp.results["target"]
    assert "float C_frag[" in source and "C_frag[frag] = 0.0f;" in source, source
    assert "= C[" not in source, "C is never read back"


@pytest.mark.cuda
def test_large_output_ptx(large: dict[str, Compilation]) -> None:
    """NVRTC's PTX of the 8192 x 8192 kernel: one entry, tensor-core mma, and no global load
    of float32 (the only float32 buffer is C)."""
    require("cuda")
    from einc.runtime.cuda import ptx

    code = ptx(str(large["cuda"].results["source"]), "sm_80")
    assert code.count(".entry") == 1, code
    assert "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32" in code
    assert "ld.global.f32" not in code and "ld.global.v2.f32" not in code and "ld.global.v4.f32" not in code


@pytest.mark.parametrize("target", ["cuda", "hip"])
@pytest.mark.parametrize(("dtype", "m", "n", "grid"), [("float16", 64, 48, True), ("bfloat16", 64, 48, True), ("float16", 40, 24, False)])
def test_symbolic_cover_numbers(monkeypatch: pytest.MonkeyPatch, target: str, dtype: str, m: int, n: int, grid: bool) -> None:
    """The symbolic argument alone (enumeration limits 0): a regular grid (64 x 48) loses its
    fill and reads C never; partial edge tiles (40 x 24) keep the fill (two kernels). Both
    agree with the float64 reference on the egpu interpreter (float32 sums of exact
    products: a few float32 ulps)."""
    monkeypatch.setattr(init_accumulators, "MAX_COVERAGE_ELEMENTS", 0)
    comp = _compile(target, dtype, m, n, 32)
    assert (_kernels(comp) == 1) == grid, comp.results["target"]
    rng = np.random.default_rng()
    values = {"A": rng.uniform(-2, 2, (m, 32)).astype(DTYPES[dtype]), "B": rng.uniform(-2, 2, (n, 32)).astype(DTYPES[dtype])}
    got = run_lowered(comp.results["target"], values, target=target)["C"]
    want = values["A"].astype(np.float64) @ values["B"].astype(np.float64).T
    np.testing.assert_allclose(got, want, rtol=0, atol=1e-5 * np.max(np.abs(want)))


def test_grid_never_claims_more_than_the_enumeration(monkeypatch: pytest.MonkeyPatch) -> None:
    """Where both apply, the symbolic proof is the enumeration's or more conservative: the
    default OpenCL float32 matmul's fill goes either way on a divisible shape; on a ragged
    one (partial edge tiles, `min` bounds) only the enumeration drops it, the symbolic
    argument keeping the fill (two kernels)."""
    program = "C[I, J] +=! A[I, K] * B[K, J]"
    limits = (init_accumulators.MAX_COVERAGE_ELEMENTS, 0)
    for (m, n), symbolic in (((64, 64), 1), ((60, 36), 2)):
        specs = {"A": {"dtype": "float32", "shape": [m, 16]}, "B": {"dtype": "float32", "shape": [16, n]}}
        decided = []
        for limit in limits:
            monkeypatch.setattr(init_accumulators, "MAX_COVERAGE_ELEMENTS", limit)
            comp = Compilation(program, "<grid>", specs, None, "opencl", "default")
            comp.run_until("target")
            decided.append(_kernels(comp))
        assert decided == [1, symbolic], (m, n, decided)


def test_copy_loops_of_one_dimension_form_a_box_only_as_a_mixed_radix() -> None:
    """`_mixed_radix`: several copy loops moving one dimension of the output (a split channel,
    `8 g + f`) are one box when each coefficient is the span of the finer ones; a gap or an
    overlap is not; one loop is its own box (an empty one too)."""
    box = init_accumulators._mixed_radix
    assert box([(1, 8), (8, 2)]) == (1, 16) and box([(8, 2), (1, 8)]) == (1, 16)
    assert box([(2, 3), (6, 4), (24, 1)]) == (2, 12)
    assert box([(1, 8), (9, 2)]) is None and box([(1, 9), (8, 2)]) is None
    assert box([(4, 0)]) == (4, 0) and box([(1, 8), (8, 0)]) is None
