"""Float semantics docs/LANGUAGE.md promises, the same on every target, in the interpreter and
in the reference: NaN through comparisons (`!=` true, the others false), conditions (a NaN is
true, as C's `(bool)x`), `max`/`min` (NaN from either argument, -0 below +0) and `>=!`/`<=!`
reductions (a NaN anywhere gives NaN); `pow` on negative and zero bases and its other special cases (C's
`pow`: `pow(-2, 3) == -8`, `pow(0, 0) == 1`, `pow(0, -1) == inf`); `round` halves away from zero
at the dtype's own precision; signed zeros through `abs`, negation and rounding.

Each target runs one program per dtype over NaN, infinities, signed zeros and ordinary values,
compared bit for bit (NaN with NaN) with NumPy. (HLSL got every one of these wrong: `x != x`
false for a NaN, a NaN condition false, `max(NaN, 3) == 3`, a max reduction skipping NaN,
`pow(-2, 3)` NaN, `pow(0, 0) == 0`, float64 `round(123456789.5) == 123456793`.)
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from einc.compiler.driver import Compilation
from einc.runtime.arrays import poisoned
from einc.semantics.loops import maximum, minimum, run_interpreted
from einc.semantics.reference import run_reference
from tests.test_device_targets import require

TARGETS = ("c", "opencl", "sycl", "hlsl", "poplar")
DTYPES = ("float32", "float64")

PROGRAM = """
input x: DT[@R]
input y: DT[@R]
input base: DT[@P]
input power: DT[@P]
output ne, eq, lt, le, gt, ge, chosen, logic, big, small, top, bottom, powered, rounded, signs
ne[N] = (x[N] != y[N]).cast(`int8`) + 2 * (x[N] != x[N]).cast(`int8`)
eq[N] = (x[N] == y[N]).cast(`int8`) + 2 * (x[N] == x[N]).cast(`int8`)
lt[N] = (x[N] < y[N]).cast(`int8`) + 2 * (x[N] >= y[N]).cast(`int8`).when((x[N] < y[N]) | (x[N] != y[N]), 1)
le[N] = (x[N] <= y[N]).cast(`int8`) + 2 * (x[N] <= x[N]).cast(`int8`)
gt[N] = (x[N] > y[N]).cast(`int8`) + 2 * (~(x[N] > y[N])).cast(`int8`)
ge[N] = (x[N] >= y[N]).cast(`int8`) + 2 * (x[N] >= x[N]).cast(`int8`)
chosen[N] = (1.0).when(x[N], 2.0) + (10.0).when([x[N], y[N]], 20.0) + (100.0).when([x[N], y[N]], 200.0, merge_op=`any`)
logic[N] = (x[N] & y[N]).cast(`int8`) + 2 * (x[N] | y[N]).cast(`int8`) + 4 * (~x[N]).cast(`int8`)
big[N] = x[N].call(`max`, [y[N]])
small[N] = x[N].call(`min`, [y[N]])
top[] >=! x[N]
bottom[] <=! y[N]
powered[Q] = base[Q].call(`pow`, [power[Q]])
rounded[N] = x[N].call(`round`)
signs[N] = -x[N].call(`abs`)
"""
RESULTS = ("ne", "eq", "lt", "le", "gt", "ge", "chosen", "logic", "big", "small", "top", "bottom",
           "powered", "rounded", "signs")  # fmt: skip

X = [math.nan, 1.0, math.nan, -0.0, 0.0, 2.0, -math.inf, math.inf, 3.0, 1.5, -2.5, 2.5,
     0.49999997, 123456789.5, -123456789.5, 4503599627370495.5, -0.5, 7.0]  # fmt: skip
Y = [2.0, math.nan, math.nan, 0.0, -0.0, 2.0, -math.inf, 3.0, math.inf, -1.0, 0.5, 2.5,
     1.0, 1.0, 2.0, 3.0, 5.0, 7.0]  # fmt: skip
POW = [(-2, 3), (-2, 2), (-2, -3), (-2, 0.5), (0, 0), (-0.0, 0), (0, -1), (-0.0, -1), (-0.0, -2),
       (0, 3), (-0.0, 3), (0, 2.5), (1, math.nan), (math.nan, 0), (math.nan, 1), (-1, math.inf),
       (-1, -math.inf), (0.5, math.inf), (0.5, -math.inf), (2, math.inf), (2, -math.inf),
       (-math.inf, 3), (-math.inf, 2), (-math.inf, -3), (-math.inf, -2), (math.inf, -1),
       (math.inf, 0.5), (-8, 1 / 3), (2, 10), (10, -2), (-3, 5), (1.5, 2.5)]  # fmt: skip


def inputs(dtype: str) -> dict[str, np.ndarray]:
    with np.errstate(over="ignore"):  # float16: 123456789.5 is inf
        x, y = np.array(X, dtype), np.array(Y, dtype)
        base = np.array([b for b, _ in POW], dtype)
        power = np.array([p for _, p in POW], dtype)
    return {"x": x, "y": y, "base": base, "power": power}


def expected(values: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    x, y, base, power = values["x"], values["y"], values["base"], values["power"]
    t = x.dtype.type

    def i8(v: np.ndarray) -> np.ndarray:
        return np.asarray(v).astype(np.int8)

    truth_x, truth_y = x != 0, y != 0  # C's (bool)x: NaN is true
    with np.errstate(all="ignore"):
        trunc = np.trunc(x)
        rounded = np.where(np.abs(x - trunc) >= 0.5, trunc + np.copysign(t(1), x), trunc)
        return {
            "ne": i8(x != y) + 2 * i8(x != x),
            "eq": i8(x == y) + 2 * i8(x == x),
            "lt": i8(x < y) + 2 * np.where((x < y) | (x != y), i8(x >= y), np.int8(1)),
            "le": i8(x <= y) + 2 * i8(x <= x),
            "gt": i8(x > y) + 2 * i8(~(x > y)),
            "ge": i8(x >= y) + 2 * i8(x >= x),
            "chosen": np.where(truth_x, t(1), t(2)) + np.where(truth_x & truth_y, t(10), t(20))
            + np.where(truth_x | truth_y, t(100), t(200)),
            "logic": i8(truth_x & truth_y) + 2 * i8(truth_x | truth_y) + 4 * i8(~truth_x),
            "big": maximum(x, y),
            "small": minimum(x, y),
            "top": np.array(np.max(x)),
            "bottom": np.array(np.min(y)),
            "powered": np.power(base, power),
            "rounded": rounded,
            "signs": -np.abs(x),
        }


def program(dtype: str) -> str:
    return PROGRAM.replace("DT", dtype).replace("@R", str(len(X))).replace("@P", str(len(POW)))


def check(name: str, got: dict[str, np.ndarray], want: dict[str, np.ndarray]) -> None:
    failures = []
    for result in RESULTS:
        g, w = np.asarray(got[result]), np.asarray(want[result])
        if g.dtype.kind == "f":
            w = w.astype(g.dtype)
            same = (g == w) & (np.signbit(g) == np.signbit(w)) | (np.isnan(g) & np.isnan(w))
            if result == "powered":  # a finite power within 4 ulps (the others are exact)
                with np.errstate(all="ignore"):
                    near = np.abs(g - w) <= 4 * np.spacing(np.abs(w))
                same |= np.isfinite(w) & (w != 0) & near
        else:
            same = g == w
        if not np.all(same):
            bad = np.flatnonzero(~np.asarray(same).reshape(-1))
            failures.append(f"{result} at {bad.tolist()}: got {g.reshape(-1)[bad].tolist()}, "
                            f"want {w.reshape(-1)[bad].tolist()}")  # fmt: skip
    assert not failures, f"{name}:\n  " + "\n  ".join(failures)


def test_numpy_is_the_rule() -> None:
    """The cases docs/LANGUAGE.md lists, checked on NumPy (the reference) itself."""
    with np.errstate(all="ignore"):
        assert np.power(-2.0, 3.0) == -8 and np.power(0.0, 0.0) == 1 and np.power(0.0, -1.0) == math.inf
        assert np.power(-0.0, -1.0) == -math.inf and np.isnan(np.power(-2.0, 0.5))
        assert np.power(1.0, math.nan) == 1 and np.power(math.nan, 0.0) == 1
        assert np.power(-1.0, math.inf) == 1
        assert np.isnan(np.maximum(math.nan, 3.0)) and np.isnan(np.maximum(3.0, math.nan))
        assert np.isnan(np.max(np.array([1.0, math.nan, 3.0])))


@pytest.mark.parametrize("dtype", DTYPES + ("float16",))
def test_reference_and_interpreter(dtype: str) -> None:
    values = inputs(dtype)
    comp = Compilation(program(dtype), "<float-semantics>")
    want = expected(values)
    check("interpreter", run_interpreted(comp.run_until("loops"), values), want)
    if dtype != "float16":  # the reference computes in float64: a float16 pow overflows later
        reference = run_reference(comp.run_until("ein"), values)
        reference = {k: np.asarray(v).astype(want[k].dtype) for k, v in reference.items()}
        check("reference", reference, want)


@pytest.mark.parametrize(
    ("target", "dtype"),
    [pytest.param(t, d, marks=[getattr(pytest.mark, t)] if t != "c" else [], id=f"{t}-{d}")
     for t in TARGETS for d in DTYPES + ("float16",) if not (t == "poplar" and d == "float64")],  # fmt: skip
)
def test_target(target: str, dtype: str) -> None:
    require(target)
    values = inputs(dtype)
    comp = Compilation(program(dtype), "<float-semantics>", target=target)
    kernel = comp.kernel()
    outputs = {o.name: poisoned(o.shape, o.dtype) for o in comp.program.outputs}
    kernel.run({k: v.copy() for k, v in values.items()}, outputs)
    check(f"{target} {dtype}", outputs, expected(values))


# ---- vector lane reductions (a row maximum vectorized: the lanes combined as a tree) --------------

ROWS = """
input x: float32[6, 64]
output top, bottom
top[N] >=! x[N, C]
bottom[N] <=! x[N, C]
"""
LANE_SCHEDULE = """
transform.named_sequence @__transform_main(%root: !transform.any_op) {
  %t = transform.einc.match stmt "top" axis "C" in %root
  transform.einc.vectorize_reduction %t
  %b = transform.einc.match stmt "bottom" axis "C" in %root
  transform.einc.vectorize_reduction %b
  transform.yield
}
"""


def _rows() -> np.ndarray:
    """Rows whose extremes sit in one lane of the vector accumulators: a NaN (one row, two
    NaNs in another), signed zeros (+0 above -0 whichever comes first), infinities, ordinary
    values; the lane reduction must give what a sequential one does."""
    rng = np.random.default_rng(7)
    x = rng.uniform(-1, 1, (6, 64)).astype(np.float32)
    x[0, 37] = np.nan
    x[1, 5], x[1, 50] = np.nan, np.nan
    x[2] = -np.abs(x[2])
    x[2, 9], x[2, 41] = -0.0, 0.0
    x[3] = np.abs(x[3])
    x[3, 12], x[3, 60] = 0.0, -0.0
    x[4, 3], x[4, 63] = np.inf, -np.inf
    x[5] = -0.0
    x[5, 22] = 0.0
    return x


@pytest.mark.parametrize("target", [pytest.param(t, marks=[getattr(pytest.mark, t)] if t != "c" else [], id=t)
                                    for t in TARGETS])  # fmt: skip
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_vector_lane_reductions_keep_nan_and_signed_zero(target: str, dtype: str) -> None:
    """Also the vector maximum/minimum that combine the accumulators (OpenCL: `select`s,
    einc/targets/opencl.py `lanewise_bodies`; C: one AVX-512 instruction where it can)."""
    require(target)
    if dtype == "float64" and target == "poplar":
        return  # the IPU has no float64 (refused: tests/test_poplar.py)
    x = _rows().astype(dtype)
    comp = Compilation(ROWS.replace("float32", dtype), "<rows>", target=target, schedule=LANE_SCHEDULE)
    source = comp.run_until("source")
    if not (dtype == "float64" and target == "hlsl"):  # HLSL's float64 reductions stay scalar
        assert "vreduce_max" in source and "vreduce_min" in source, source
        assert target == "poplar" or "for (int h = " in source, source  # a tree (Poplar: 2 lanes)
    top, bottom = poisoned((6,), dtype), poisoned((6,), dtype)
    comp.kernel().run({"x": x.copy()}, {"top": top, "bottom": bottom})
    want_top = np.array([np.nan if np.isnan(r).any() else max(r, key=lambda v: (v, not np.signbit(v)))
                         for r in x], dtype)  # fmt: skip
    want_bottom = np.array([np.nan if np.isnan(r).any() else min(r, key=lambda v: (v, not np.signbit(v)))
                            for r in x], dtype)  # fmt: skip
    for got, want in ((top, want_top), (bottom, want_bottom)):
        same = (got == want) & (np.signbit(got) == np.signbit(want)) | (np.isnan(got) & np.isnan(want))
        assert same.all(), (target, got, want)
