"""Integer division is total (docs/LANGUAGE.md, "Integer division"): `a // 0 == a % 0 == 0`,
`MIN // -1 == MIN` (wrapped) and `MIN % -1 == 0`, NumPy's results, on every target.

Each target runs one program with `//`, `/`, `%`, division by the constant -1, a reduction of
remainders and a gather whose index divides, on every pair of the dividends and divisors
`0, 1, -1, 2, -2, 7, -7, MIN, MIN + 1, MAX, MAX - 1` plus random values, and is compared
exactly with NumPy. The C kernel runs in this process: a trapping division would kill it
(SIGFPE), so the run finishing is part of the test.
"""

from __future__ import annotations

import re

from typing import Any

import numpy as np
import pytest

from einc.compiler.driver import Compilation
from einc.runtime.arrays import poisoned
from einc.semantics.loops import run_interpreted
from einc.semantics.reference import run_reference
from tests.oracle.seeds import fresh_seed
from tests.test_device_targets import require

SIGNED = ("int8", "int16", "int32", "int64")
TARGETS = ("c", "opencl", "sycl", "hlsl", "poplar")

PROGRAM = """
input a: DT[R, R]
input b: DT[R, R]
input table: float32[8]
input small_a: DT[49]
input small_b: DT[49]
output floor_div, true_div, floor_mod, by_minus_one, row_mod_sum, gathered
floor_div[I, J] = a[I, J] // b[I, J]
true_div[I, J] = a[I, J] / b[I, J]
floor_mod[I, J] = a[I, J] % b[I, J]
by_minus_one[I, J] = a[I, J] // -1 + a[I, J] % -1 + a[I, J] // 2
row_mod_sum[I] +=! a[I, J] % b[I, J]
gathered[M] = table[small_a[M] // small_b[M] + small_a[M] % small_b[M] + 3]
"""
RESULTS = ("floor_div", "true_div", "floor_mod", "by_minus_one", "row_mod_sum", "gathered")


def special_values(dtype: str) -> np.ndarray:
    info = np.iinfo(dtype)
    return np.array(
        [0, 1, -1, 2, -2, 7, -7, info.min, info.min + 1, info.max, info.max - 1], dtype
    )


def program_inputs(dtype: str, seed: int) -> dict[str, np.ndarray]:
    """Every (dividend, divisor) pair of the special values, then random values (a fifth of
    the divisors zero) up to 16 x 16."""
    info = np.iinfo(dtype)
    rng = np.random.default_rng(seed)
    special = special_values(dtype)
    n = 16
    a = rng.integers(info.min, info.max, size=(n, n), dtype=dtype, endpoint=True)
    b = rng.integers(info.min, info.max, size=(n, n), dtype=dtype, endpoint=True)
    b[rng.random((n, n)) < 0.2] = 0
    pairs = len(special) ** 2
    a.reshape(-1)[:pairs] = np.repeat(special, len(special))
    b.reshape(-1)[:pairs] = np.tile(special, len(special))
    small = np.arange(-3, 4)
    return {
        "a": a,
        "b": b,
        "table": np.arange(8, dtype=np.float32) * 1.5,
        "small_a": np.repeat(small, 7).astype(dtype),
        "small_b": np.tile(small, 7).astype(dtype),
    }


def numpy_results(inputs: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    a, b = inputs["a"], inputs["b"]
    small_a, small_b = inputs["small_a"], inputs["small_b"]
    with np.errstate(divide="ignore", over="ignore"):
        return {
            "floor_div": a // b,
            "true_div": a // b,
            "floor_mod": a % b,
            "by_minus_one": a // a.dtype.type(-1) + a % a.dtype.type(-1) + a // 2,
            "row_mod_sum": (a % b).sum(axis=1, dtype=a.dtype),
            "gathered": inputs["table"][small_a // small_b + small_a % small_b + 3],
        }


def compilation(dtype: str, target: str) -> Compilation:
    return Compilation(PROGRAM.replace("DT", dtype).replace("R", "16"), "<intdiv>", target=target)


def test_numpy_defines_division_by_zero_and_min_by_minus_one() -> None:
    """The rule docs/LANGUAGE.md states is NumPy's, for every integer width, signed and
    unsigned (einc's dtypes are signed; the unsigned results are pinned too)."""
    for dtype in (*SIGNED, "uint8", "uint16", "uint32", "uint64"):
        info = np.iinfo(dtype)
        values = np.array([0, 1, 7, info.max, info.min], dtype)
        zero = np.zeros_like(values)
        with np.errstate(divide="ignore", over="ignore"):
            assert (values // zero == 0).all(), dtype
            assert (values % zero == 0).all(), dtype
            assert (np.fmod(values, zero) == 0).all(), dtype
            if info.min < 0:
                minimum, minus_one = np.array([info.min], dtype), np.array([-1], dtype)
                assert (minimum // minus_one == info.min).all(), dtype
                assert (minimum % minus_one == 0).all(), dtype


@pytest.mark.parametrize("dtype", SIGNED)
def test_reference_and_interpreter_follow_numpy(dtype: str) -> None:
    inputs = program_inputs(dtype, seed=1)
    comp = compilation(dtype, "c")
    want = numpy_results(inputs)
    for name, got in (
        ("reference", run_reference(comp.run_until("ein"), inputs)),
        ("interpreter", run_interpreted(comp.run_until("loops"), inputs)),
    ):
        for result in RESULTS:
            np.testing.assert_array_equal(got[result], want[result], err_msg=f"{name} {result}")


def _target_cases() -> list[Any]:
    return [
        pytest.param(t, d, marks=[getattr(pytest.mark, t)] if t != "c" else [], id=f"{t}-{d}")
        for t in TARGETS
        for d in SIGNED
    ]


@pytest.mark.parametrize(("target", "dtype"), _target_cases())
def test_target_matches_numpy(target: str, dtype: str) -> None:
    if target != "c":
        require(target)
    seed = fresh_seed() % 2**32
    inputs = program_inputs(dtype, seed)
    comp = compilation(dtype, target)
    kernel = comp.kernel()
    outputs = {o.name: poisoned(o.shape, o.dtype) for o in comp.program.outputs}
    kernel.run({k: v.copy() for k, v in inputs.items()}, outputs)
    want = numpy_results(inputs)
    for result in RESULTS:
        np.testing.assert_array_equal(
            outputs[result], want[result], err_msg=f"{target} {dtype} {result} (seed {seed})"
        )


def test_constant_divisor_prints_unguarded_c() -> None:
    """`x // 2` and `x % 2` divide directly; only a divisor that may be 0 or -1 is guarded."""
    source = Compilation(
        "output0[N] = input0[N] // 2 + input0[N] % 2 + N // 2",
        input_dict={"input0": {"dtype": "int32", "shape": [8]}},
    ).run_until("source")
    # (N // 2 splits N into N_q * 2 + N_r: einc-split-index-axes)
    assert re.search(r"einc_floordiv_i32\(input0\[[^]]+\], 2\)", source), source
    assert "INT32_MIN" not in source and "== 0" not in source, source


def test_float_division_is_not_guarded() -> None:
    """The guard is for integers only: a float program's C has no select on its divisor."""
    source = Compilation(
        "output0[N] = input0[N] // input1[N] + input0[N] % input1[N] + input0[N] / input1[N]",
        input_dict={"input0": {"dtype": "float32", "shape": [8]},
                    "input1": {"dtype": "float32", "shape": [8]}},  # fmt: skip
    ).run_until("source")
    assert "== 0" not in source and "? 1" not in source, source
