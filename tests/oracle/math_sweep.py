"""The math-accuracy sweep (tests/test_math_accuracy.py): every function of the language over
edge values (zeros of both signs, subnormals, the largest finite values, infinities, NaN,
negative bases, values near 1 for the logarithms, near 0 for tanh and erf, large negative ones
for exp, normcdf and sigmoid, multiples of pi, halves for round) and random values, in one
program per target (two statements per dtype), measured in ulps against an exact reference.

The reference: float64 NumPy / SciPy (scipy.special for erf and normcdf) for float16 and
float32 results, whose ulps are 2^29 times a float64 ulp; mpmath at 96 bits, correctly
rounded to float64, for float64 results (a float64 library is no reference for float64
results: SciPy's `ndtr` is hundreds of ulps off in the lower tail, where it cancels).

ulps: |got - exact| / ulp(exact), where ulp(v) is the spacing of the dtype's numbers at |v|
(2^(e - p) for |v| in [2^(e-1), 2^e), never below the smallest subnormal). A NaN where the
exact value is NaN, and the same infinity, are 0 ulps; any other NaN or infinity mismatch is
infinitely far, and so is a zero of the wrong sign (a sign error, not a rounding one).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import numpy as np

UNARY = ("exp", "exp2", "log", "log2", "log10", "sqrt", "rsqrt", "tanh", "sigmoid", "erf",
         "normcdf", "sin", "cos", "tan", "round", "rfloor", "rceil", "remainder", "abs")  # fmt: skip
BINARY = ("pow", "max", "min")
FUNCTIONS = UNARY + BINARY

PRECISION = {"float16": 11, "float32": 24, "float64": 53}
"""Significand bits (the leading one included)."""
MIN_EXPONENT = {"float16": -14, "float32": -126, "float64": -1022}


def edge_values(dtype: str) -> np.ndarray:
    """The unary functions' edge values of `dtype` (every value also negated)."""
    info = np.finfo(dtype)
    tiny, sub = float(info.smallest_normal), float(info.smallest_subnormal)
    eps = float(info.eps)
    big = float(info.max)
    values = [
        0.0, sub, 2 * sub, 3 * sub, tiny - sub, tiny / 2, tiny, tiny * 1.5, big, big / 2,
        math.inf, math.nan, 1.0, 0.5, 2.0, 3.0, 10.0, 0.1, 0.25, 0.75,
        1 + eps, 1 + 2 * eps, 1 + 4 * eps, 1 - eps / 2, 1 - eps, 1 - 3 * eps, 1 + 1e-3, 1 - 1e-3,
        0.999, 1.001, 1 + 1e-5, 1 - 1e-5, 1.5, 2.5, 0.4999999999999, 4.5, -0.5 + eps / 4,
        1e-5, 1e-8, 1e-10, 1e-20, 1e-30, 1e-3, 0.01, 0.2, 0.45, 0.55, 0.8, 0.9, 1.2, 1.7,
        2.2, 2.9, 3.5, 4.2, 5.0, 6.3, 8.0, 9.5, 13.0, 20.0, 26.5, 27.2, 30.0, 37.5, 38.5, 40.0,
        44.0, 50.0, 64.0, 80.0, 87.0, 88.5, 89.0, 100.0, 103.0, 104.0, 126.5, 127.9, 128.5,
        149.0, 150.0, 700.0, 708.0, 709.5, 710.0, 740.0, 744.0, 745.0, 746.0, 1000.0, 1022.5,
        1024.0, 1074.0, 1075.0, 1e4, 1e5, 1e6, 1e10, 1e15, 1e20, 1e30, 1e100, 1e200, 1e300,
        math.pi / 4, math.pi / 2, math.pi, 3 * math.pi / 2, 2 * math.pi, 100 * math.pi,
        1e5 * math.pi, 2.0**23 - 0.5, 2.0**23 + 1, 2.0**24 + 2, 2.0**52 - 0.5, 2.0**52 + 1,
        2.0**31, 2.0**63, 0.69, 0.7, 1.38, 2.0**-10, 2.0**-20, 2.0**-60, 6.2e-5, 6.1e-5,
        65504.0, 65520.0, 11.09, 11.1, 9.7, 9.9, 10.3, 12.0, 14.0, 14.1, 15.0, 16.0, 17.0,
        5.9e-8, 3.3e-8, 710.5, 0.3, 0.35, 0.625, 0.84375, 1.25, 2.857, 6.0, 2.0**-28,
    ]  # fmt: skip
    with np.errstate(over="ignore"):
        arr = np.array(values, np.float64).astype(dtype)
        arr = np.concatenate([arr, -arr])
    arr = arr[np.isfinite(arr) | ~np.isfinite(np.array(values * 2, np.float64))]
    assert arr.dtype == np.dtype(dtype)
    return np.unique(arr.view(f"u{arr.itemsize}")).view(dtype)  # distinct bit patterns


def random_values(dtype: str, n: int, rng: np.random.Generator) -> np.ndarray:
    """`n` random values: magnitudes log-uniform over the dtype's range, either sign, half of
    them in [-40, 40] where most functions change."""
    info = np.finfo(dtype)
    lo, hi = math.log2(float(info.smallest_subnormal)), math.log2(float(info.max))
    wide = 2.0 ** rng.uniform(lo, hi, n - n // 2) * rng.choice([-1.0, 1.0], n - n // 2)
    narrow = rng.uniform(-40, 40, n // 2)
    return np.concatenate([wide, narrow]).astype(dtype)


def pow_pairs(dtype: str, rng: np.random.Generator, n_random: int) -> tuple[np.ndarray, np.ndarray]:
    """(bases, exponents): every pair of the special bases and exponents (negative bases with
    integer and fractional exponents, zeros, ones, infinities, NaN), then random pairs whose
    results mostly stay finite."""
    bases = [0.0, -0.0, 1.0, -1.0, 2.0, -2.0, 0.5, -0.5, 3.0, -3.0, 10.0, math.inf, -math.inf,
             math.nan, 1.5, -1.5, 1e-3, 7.25, -7.25, float(np.finfo(dtype).max), 1 + float(np.finfo(dtype).eps),
             float(np.finfo(dtype).smallest_subnormal), 0.9]  # fmt: skip
    exps = [0.0, -0.0, 1.0, -1.0, 2.0, -2.0, 3.0, -3.0, 0.5, -0.5, 1.5, 10.0, 11.0, -11.0,
            math.inf, -math.inf, math.nan, 2.0**30, 2.0**30 + 1, 0.3, 100.0, -100.0, 1e10]  # fmt: skip
    with np.errstate(over="ignore"):
        b = np.repeat(np.array(bases), len(exps)).astype(dtype)
        e = np.tile(np.array(exps), len(bases)).astype(dtype)
    rb = rng.uniform(-8, 8, n_random)
    re = rng.uniform(-12, 12, n_random)
    integral = rng.random(n_random) < 0.3
    re[integral] = np.round(re[integral])
    rb[~integral] = np.abs(rb[~integral])
    return np.concatenate([b, rb.astype(dtype)]), np.concatenate([e, re.astype(dtype)])


def program(sizes: dict[str, tuple[int, int]], group: int = 0) -> str:
    """One program sweeping every dtype of `sizes` (dtype: (n, m)): per dtype D, inputs
    `x_D` (n values), `px_D`, `py_D` (m pairs), and statements `unary_D_k[F, I]` (function
    F of the k-th group of `UNARY`'s functions at `x_D[I]`) and `binary_D_k[G, J]` (function
    G of `BINARY`'s at `px_D[J], py_D[J]`): each a kernel whose branches (`.when` on the
    function's number) run one function per point. `group`: functions per statement (0: all
    in one)."""
    lines, outputs, body = [], [], []
    for dtype, (n, m) in sizes.items():
        d = dtype.replace("float", "f")
        lines += [f"input x_{d}: {dtype}[{n}]", f"input px_{d}: {dtype}[{m}]", f"input py_{d}: {dtype}[{m}]"]
        for kind, axis, point, names in (("unary", "F", "I", UNARY), ("binary", "G", "J", BINARY)):
            for k, fns in enumerate(_groups(list(names), group)):
                if kind == "unary":
                    calls = [f"x_{d}[I].call(`{fn}`)" for fn in fns]
                else:
                    calls = [f"px_{d}[J].call(`{fn}`, [py_{d}[J]])" for fn in fns]
                outputs.append(f"{kind}_{d}_{k}")
                body.append(f"{kind}_{d}_{k}[{axis}, {point}] = {_chain(calls, axis)} where {axis} in {len(fns)}")
    return "\n".join([*lines, "output " + ", ".join(outputs), *body]) + "\n"


def _groups(fns: list[str], size: int) -> list[list[str]]:
    size = size or len(fns)
    return [fns[k : k + size] for k in range(0, len(fns), size)]


def _chain(calls: list[str], axis: str) -> str:
    """`calls[0].when(axis == 0, calls[1].when(axis == 1, ...))`: call k where axis == k."""
    text = calls[-1]
    for k in range(len(calls) - 2, -1, -1):
        text = f"({calls[k]}).when({axis} == {k}, {text})"
    return text


def results(outputs: dict[str, np.ndarray], dtype: str, group: int = 0) -> dict[str, np.ndarray]:
    """Each function's results of `dtype` from `program`'s outputs."""
    d = dtype.replace("float", "f")
    found = {}
    for kind, names in (("unary", UNARY), ("binary", BINARY)):
        for k, fns in enumerate(_groups(list(names), group)):
            found.update({fn: outputs[f"{kind}_{d}_{k}"][j] for j, fn in enumerate(fns)})
    return found


# ---- references ------------------------------------------------------------------------------


def _round_half_away(x: np.ndarray) -> np.ndarray:
    t = np.trunc(x)
    return np.where(np.abs(x - t) >= 0.5, t + np.copysign(1.0, x), t)


def _maximum(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """IEEE 754-2019 maximum (docs/LANGUAGE.md): NaN from either operand, -0 below +0."""
    zeros = (a == 0) & (b == 0)
    return np.where(zeros, np.where(np.signbit(a), b, a), np.maximum(a, b))


def _minimum(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    zeros = (a == 0) & (b == 0)
    return np.where(zeros, np.where(np.signbit(a), a, b), np.minimum(a, b))


def _numpy_reference(fn: str) -> Callable[..., np.ndarray]:
    import scipy.special as sp

    return {
        "exp": np.exp, "exp2": np.exp2, "log": np.log, "log2": np.log2, "log10": np.log10,
        "sqrt": np.sqrt, "rsqrt": lambda x: 1 / np.sqrt(x), "tanh": np.tanh,
        "sigmoid": sp.expit, "erf": sp.erf, "erfc": sp.erfc, "normcdf": sp.ndtr, "sin": np.sin, "cos": np.cos,
        "tan": np.tan, "round": _round_half_away, "rfloor": np.floor, "rceil": np.ceil, "trunc": np.trunc,
        "remainder": lambda x: x - np.floor(x), "abs": np.abs, "pow": np.power,
        "max": _maximum, "min": _minimum,
    }[fn]  # fmt: skip


def exact(fn: str, dtype: str, *args: np.ndarray) -> np.ndarray:
    """The exact value of `fn` at `args` (arrays of `dtype`), as float64 for float16/float32
    results (the value the dtype then rounds) and as an object array of mpmath numbers for
    float64 results."""
    wide = [np.asarray(a, np.float64) for a in args]
    if dtype != "float64" or fn in ("round", "rfloor", "rceil", "trunc", "abs", "max", "min", "remainder"):
        with np.errstate(all="ignore"):
            value = _numpy_reference(fn)(*wide)
        if fn == "remainder":  # x - floor(x), one rounding to the dtype (x and floor(x) exact)
            with np.errstate(all="ignore"):
                return (np.asarray(args[0]) - np.floor(np.asarray(args[0]))).astype(np.float64)
        return np.asarray(value, np.float64)
    return np.array([_mp(fn, *(float(a[k]) for a in wide)) for k in range(len(wide[0]))], object)


def _mp(fn: str, *xs: float):
    import mpmath as mp

    with mp.workprec(96):
        if any(math.isnan(x) for x in xs):
            if fn == "pow" and (xs[1] == 0 or xs[0] == 1):
                return mp.mpf(1)
            return mp.nan
        x = mp.mpf(xs[0])
        if fn == "pow":
            return _mp_pow(xs[0], xs[1])
        if math.isinf(xs[0]):
            return {"exp": mp.inf if x > 0 else mp.mpf(0), "exp2": mp.inf if x > 0 else mp.mpf(0),
                    "log": mp.inf if x > 0 else mp.nan, "log2": mp.inf if x > 0 else mp.nan,
                    "log10": mp.inf if x > 0 else mp.nan, "sqrt": mp.inf if x > 0 else mp.nan,
                    "rsqrt": mp.mpf(0) if x > 0 else mp.nan, "tanh": mp.sign(x), "sigmoid": mp.mpf(1) if x > 0 else mp.mpf(0),
                    "erf": mp.sign(x), "erfc": mp.mpf(0) if x > 0 else mp.mpf(2),
                    "normcdf": mp.mpf(1) if x > 0 else mp.mpf(0), "sin": mp.nan,
                    "cos": mp.nan, "tan": mp.nan}[fn]  # fmt: skip
        if fn in ("log", "log2", "log10", "sqrt", "rsqrt") and x < 0:
            return mp.nan
        if fn in ("log", "log2", "log10") and x == 0:
            return -mp.inf
        if fn == "rsqrt" and x == 0:
            return mp.inf if math.copysign(1, xs[0]) > 0 else -mp.inf
        if fn in ("erf", "erfc", "normcdf") and abs(x) > 100:  # (mpmath's erfc overflows there)
            tiny = mp.mpf(10) ** -2200
            return {"erf": mp.sign(x), "erfc": tiny if x > 0 else mp.mpf(2),
                    "normcdf": mp.mpf(1) if x > 0 else tiny}[fn]  # fmt: skip
        if fn in ("tanh", "erf", "sin", "tan", "sqrt") and x == 0:
            return xs[0]  # a float: mpmath has no negative zero
        return {
            "exp": mp.exp, "exp2": lambda v: mp.power(2, v), "log": mp.log,
            "log2": lambda v: mp.log(v, 2), "log10": mp.log10, "sqrt": mp.sqrt,
            "rsqrt": lambda v: 1 / mp.sqrt(v), "tanh": mp.tanh,
            "sigmoid": lambda v: 1 / (1 + mp.exp(-v)), "erf": mp.erf, "erfc": mp.erfc, "normcdf": mp.ncdf,
            "sin": mp.sin, "cos": mp.cos, "tan": mp.tan,
        }[fn](x)  # fmt: skip


def _mp_pow(a: float, b: float):
    """C's (and NumPy's) pow, exactly: IEEE 754's `pow` special cases."""
    import mpmath as mp

    odd_int = math.isfinite(b) and b == math.floor(b) and math.fmod(b, 2) != 0
    if b == 0 or a == 1:
        return mp.mpf(1)
    if a == -1 and math.isinf(b):
        return mp.mpf(1)
    if math.isinf(b):
        bigger = abs(a) > 1
        return mp.inf if bigger == (b > 0) else mp.mpf(0)
    if a == 0:
        if b < 0:
            return (-mp.inf if math.copysign(1, a) < 0 else mp.inf) if odd_int else mp.inf
        return -0.0 if odd_int and math.copysign(1, a) < 0 else 0.0
    if math.isinf(a):
        if a > 0:
            return mp.inf if b > 0 else mp.mpf(0)
        if b > 0:
            return -mp.inf if odd_int else mp.inf
        return -0.0 if odd_int else 0.0
    if a < 0:
        if b != math.floor(b):
            return mp.nan
        value = mp.power(mp.mpf(-a), mp.mpf(b))
        return -value if odd_int else value
    return mp.power(mp.mpf(a), mp.mpf(b))


# ---- ulps ------------------------------------------------------------------------------------


def ulps(got: np.ndarray, want: np.ndarray, dtype: str) -> np.ndarray:
    """How many ulps of `dtype` each result is from the exact value (see the module docstring)."""
    out = np.zeros(len(got))
    for k, (g, w) in enumerate(zip(np.asarray(got, np.float64), want)):
        out[k] = ulps_one(float(g), w, dtype)
    return out


def ulps_fast(got: np.ndarray, want: np.ndarray, dtype: str) -> np.ndarray:
    """`ulps` for a float64 `want` (NumPy, vectorized): for float16/float32 results, or as a
    first screen of float64 ones."""
    p, emin = PRECISION[dtype], MIN_EXPONENT[dtype]
    g, w = np.asarray(got, np.float64), np.asarray(want, np.float64)
    largest = float(np.finfo(dtype).max)
    with np.errstate(all="ignore"):
        e = np.maximum(np.floor(np.log2(np.abs(w))) + 1, emin + 1)
        errors = np.abs(g - w) / np.exp2(e - p)
        overflow = np.isfinite(w) & (np.abs(w) >= largest * (1 + 2.0**-p))
    same = (g == w) | (np.isnan(g) & np.isnan(w))
    errors = np.where(same, 0.0, errors)
    errors = np.where(overflow & np.isinf(g) & (np.sign(g) == np.sign(w)), 0.0, errors)
    errors = np.where((g == 0) & (w == 0) & (np.signbit(g) != np.signbit(w)), np.inf, errors)
    return np.where(np.isnan(errors), np.inf, errors)


def ulps_one(g: float, w: Any, dtype: str) -> float:
    """`ulps` of one result `g` (a float) and exact value `w` (a float or an mpmath number)."""
    import mpmath as mp

    p, emin = PRECISION[dtype], MIN_EXPONENT[dtype]
    emax = 1 - emin
    with mp.workprec(160):
        wm = mp.mpf(w)
        if mp.isnan(wm) or math.isnan(g):
            return 0.0 if (mp.isnan(wm) and math.isnan(g)) else math.inf
        largest = mp.mpf(2) ** emax * (2 - mp.mpf(2) ** (1 - p))
        top_ulp = mp.mpf(2) ** (emax - p + 1)
        if mp.isinf(wm) or abs(wm) >= largest + top_ulp / 2:  # the exact value rounds to inf
            if math.isinf(g):
                return 0.0 if (g > 0) == (wm > 0) else math.inf
            if (g > 0) != (wm > 0):
                return math.inf
            return float(1 + (largest - abs(mp.mpf(g))) / top_ulp)
        if math.isinf(g):
            return math.inf
        if wm == 0 and g == 0:
            want_negative = isinstance(w, float | np.floating) and math.copysign(1, w) < 0
            want_negative = want_negative or (not isinstance(w, float | np.floating) and str(w).startswith("-"))
            return 0.0 if want_negative == (math.copysign(1, g) < 0) else math.inf
        e = int(mp.floor(mp.log(abs(wm), 2))) + 1 if wm != 0 else emin
        ulp = mp.mpf(2) ** (max(e, emin + 1) - p)
        return float(abs(mp.mpf(g) - wm) / ulp)
