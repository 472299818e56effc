"""Shifts are total (docs/LANGUAGE.md, "Shifts"): an amount outside [0, W) of a W-bit integer,
read as unsigned, shifts every bit out (`x << n == 0`, `x >> n == 0 or -1`), NumPy's results,
on every target, in the interpreter and in the reference; a constant amount outside [0, W) is
a compile-time error at the amount.

Each target runs one program shifting every special value left and right by every amount of
-W - 1, -1, 0, 1, W / 2, W - 1, W, W + 1, 2W, 70, MIN, MAX (and by random amounts, mostly out
of range), compared exactly with NumPy. (Before the rule, C gave 0 at 20 indices and -6 at
the 21st of one 21-element kernel: undefined behaviour.)
"""

from __future__ import annotations

import numpy as np
import pytest

from einc.compiler.driver import Compilation
from einc.runtime.arrays import poisoned
from einc.errors import EincError
from einc.semantics.loops import run_interpreted
from einc.semantics.reference import run_reference
from tests.oracle.seeds import fresh_seed
from tests.test_device_targets import require
from tests.test_int_division import SIGNED, TARGETS, special_values

PROGRAM = """
input a: DT[R, R]
input b: DT[R, R]
input small: int8[R]
output left, right, mixed, narrow
left[I, J] = a[I, J] << b[I, J]
right[I, J] = a[I, J] >> b[I, J]
mixed[I] +=! (a[I, J] >> 1) << (b[I, J] % 8)
narrow[I] = small[I] << 7 >> (small[I] % 9).cast(`int8`)
"""
RESULTS = ("left", "right", "mixed", "narrow")


def amounts(dtype: str) -> np.ndarray:
    width = np.iinfo(dtype).bits
    info = np.iinfo(dtype)
    values = [-width - 1, -1, 0, 1, width // 2, width - 1, width, width + 1, 2 * width, 70,
              info.min, info.max]  # fmt: skip
    return np.array([v for v in values if info.min <= v <= info.max], dtype)


def program_inputs(dtype: str, seed: int) -> dict[str, np.ndarray]:
    info = np.iinfo(dtype)
    rng = np.random.default_rng(seed)
    n = 16
    a = rng.integers(info.min, info.max, size=(n, n), dtype=dtype, endpoint=True)
    b = rng.integers(info.min, info.max, size=(n, n), dtype=dtype, endpoint=True)
    special, shifts = special_values(dtype), amounts(dtype)
    pairs = len(special) * len(shifts)
    a.reshape(-1)[:pairs] = np.repeat(special, len(shifts))
    b.reshape(-1)[:pairs] = np.tile(shifts, len(special))
    small = np.array([-128, -1, 0, 1, 127, 3, -3, 64, -64, 5, 8, 9, -9, 100, -100, 2], np.int8)
    return {"a": a, "b": b, "small": small}


def numpy_results(inputs: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    a, b, small = inputs["a"], inputs["b"], inputs["small"]
    with np.errstate(all="ignore"):
        eight = a.dtype.type(8)
        return {
            "left": np.left_shift(a, b),
            "right": np.right_shift(a, b),
            "mixed": np.left_shift(np.right_shift(a, a.dtype.type(1)), b % eight).sum(axis=1, dtype=a.dtype),
            "narrow": np.right_shift(np.left_shift(small, np.int8(7)), (small % np.int8(9)).astype(np.int8)),
        }


def compilation(dtype: str, target: str) -> Compilation:
    return Compilation(PROGRAM.replace("DT", dtype).replace("R", "16"), "<shifts>", target=target)


def test_numpy_shifts_every_bit_out() -> None:
    """The rule docs/LANGUAGE.md states is NumPy's: an amount of W or more, or a negative one
    (read as unsigned), gives 0 to the left and the sign to the right."""
    for dtype in SIGNED:
        width = np.iinfo(dtype).bits
        x = np.array([5, -5, 1, -1], dtype)
        for n in (width, width + 1, -1, -width):
            amount = np.array(n, dtype) if np.iinfo(dtype).min <= n <= np.iinfo(dtype).max else n
            assert (np.left_shift(x, amount) == 0).all(), (dtype, n)
            assert (np.right_shift(x, amount) == np.where(x < 0, -1, 0)).all(), (dtype, n)


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


@pytest.mark.parametrize(
    ("target", "dtype"),
    [pytest.param(t, d, marks=[getattr(pytest.mark, t)] if t != "c" else [], id=f"{t}-{d}")
     for t in TARGETS for d in SIGNED],  # fmt: skip
)
def test_target_matches_numpy(target: str, dtype: str) -> None:
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


@pytest.mark.parametrize(
    ("expr", "col"),
    [("x[N] << 70", 27), ("x[N] >> 32", 27), ("x[N] << -1", 27), ("x[N] << (30 + 2)", 28),
     ("x[N].cast(`int8`) << const(8, `int8`)", 40)],  # fmt: skip
)
def test_constant_amount_out_of_range_is_located(expr: str, col: int) -> None:
    src = f"input x: int32[4]\noutput0[N] = 1 + ({expr})\n"
    with pytest.raises(EincError) as info:
        Compilation(src, "p.ein").run_until("ein")
    err = info.value
    assert err.loc is not None and (err.loc.line, err.loc.col) == (2, col), err.render()
    assert "shift amount" in err.message and "out of range" in err.message


def test_constant_amount_in_range_is_not_guarded() -> None:
    """`x << 3` shifts directly; only an amount that may be out of range is guarded."""
    src = "input x: int32[8]\ninput n: int32[8]\noutput0[N] = (x[N] << 3) + (x[N] >> 31)\n"
    text = Compilation(src, "p.ein").run_until("source")
    assert "<< 3" in text and ">> 31" in text and "?" not in text, text
    guarded = Compilation(src.replace("<< 3", "<< n[N]"), "p.ein").run_until("source")
    assert "?" in guarded, guarded
