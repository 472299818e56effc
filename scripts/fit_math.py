"""Fit the polynomial coefficients of einc's own math functions (einc/targets/hlsl_math.py).

Each polynomial interpolates its function at Chebyshev nodes of its interval (near-minimax),
in mpmath at 120 bits, with the lowest degree whose relative error over the interval is below
the target; coefficients are printed rounded to float32 (`f`) or float64. Run:

    python scripts/fit_math.py            # every fit, with its degree and maximum error

The printed tables are what hlsl_math.py holds; rerun after changing an interval or a target.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import Any

import mpmath as mp

mp.mp.prec = 120


def chebyshev_fit(f: Callable[[Any], Any], lo: float, hi: float, degree: int,
                  variable: Callable[[Any], Any] = lambda x: x) -> list[Any]:
    """Monomial coefficients (in `variable(x)`, lowest first) of the polynomial interpolating
    `f(x)` at the Chebyshev nodes of [lo, hi] (nodes in x, polynomial in variable(x))."""
    n = degree + 1
    nodes = [mp.mpf(lo) + (mp.mpf(hi) - lo) * (1 - mp.cos(mp.pi * (2 * k + 1) / (2 * n))) / 2 for k in range(n)]
    rows = [[variable(x) ** j for j in range(n)] for x in nodes]
    values = [f(x) for x in nodes]
    return list(mp.lu_solve(mp.matrix(rows), mp.matrix(values)))


def max_error(f, coefficients, lo, hi, variable=lambda x: x, relative=True, samples=2000):
    worst = mp.mpf(0)
    for k in range(samples + 1):
        x = mp.mpf(lo) + (mp.mpf(hi) - lo) * k / samples
        want = f(x)
        got = mp.polyval(list(reversed(coefficients)), variable(x))
        err = abs(got - want) / (abs(want) if relative and want != 0 else 1)
        worst = max(worst, err)
    return worst


def fit(name: str, f, lo: float, hi: float, target: float, variable=lambda x: x,
        relative=True, max_degree=30) -> list[Any]:
    for degree in range(1, max_degree + 1):
        c = chebyshev_fit(f, lo, hi, degree, variable)
        err = max_error(f, c, lo, hi, variable, relative)
        if err < target:
            print(f"# {name}: degree {degree} on [{lo}, {hi}], max {'relative' if relative else 'absolute'} error {float(err):.3g}")
            return c
    raise SystemExit(f"{name}: no degree up to {max_degree} reaches {target}")


def show(coefficients: list[Any], kind: str) -> str:
    if kind == "f":
        import numpy as np

        return ", ".join(f"{np.float32(float(c))!r}".replace("np.float32(", "").rstrip(")") + "f" for c in coefficients)
    return ", ".join(repr(float(c)) for c in coefficients)


def erfcx(x):
    return mp.erfc(x) * mp.exp(x * x)


def main() -> None:
    out = sys.stdout
    f32 = 2.0**-30
    # tanh(x) = x + x^3 * P(x^2), |x| < 0.625
    c = fit("tanh f32", lambda x: (mp.tanh(x) - x) / x**3 if x != 0 else mp.mpf(-1) / 3, 1e-6, 0.625, f32,
            variable=lambda x: x * x)
    print("TANH_F32 =", show(c, "f"), file=out)
    # erf(x) = x + x * P(x^2), |x| < 0.84375
    c = fit("erf f32", lambda x: mp.erf(x) / x - 1 if x != 0 else 2 / mp.sqrt(mp.pi) - 1, 1e-6, 0.84375, f32,
            variable=lambda x: x * x, relative=False)
    print("ERF_F32 =", show(c, "f"), file=out)
    # tan(x) = x + x^3 * P(x^2), |x| <= pi/4
    c = fit("tan f32", lambda x: (mp.tan(x) - x) / x**3 if x != 0 else mp.mpf(1) / 3, 1e-6, float(mp.pi / 4) + 1e-6,
            f32, variable=lambda x: x * x)
    print("TAN_F32 =", show(c, "f"), file=out)
    # erfc(x) = exp(-x^2) * G(x) on pieces, G in (x - mid)
    pieces = [(0.5, 0.84375), (0.84375, 1.25), (1.25, 1.75), (1.75, 2.5), (2.5, 3.5), (3.5, 5.0), (5.0, 7.0), (7.0, 10.25)]
    for lo, hi in pieces:
        mid = (lo + hi) / 2
        c = fit(f"erfcx f32 [{lo}, {hi}]", erfcx, lo, hi, f32, variable=lambda x, m=mid: x - m)
        print(f"ERFCX_F32[{lo}, {hi}] (in x - {mid}) =", show(c, "f"), file=out)
    f64 = 2.0**-58
    c = fit("tanh f64", lambda x: (mp.tanh(x) - x) / x**3 if x != 0 else mp.mpf(-1) / 3, 1e-9, 0.625, f64,
            variable=lambda x: x * x)
    print("TANH_F64 =", show(c, "d"), file=out)
    c = fit("erf f64", lambda x: mp.erf(x) / x - 1 if x != 0 else 2 / mp.sqrt(mp.pi) - 1, 1e-9, 0.5, f64,
            variable=lambda x: x * x, relative=False)
    print("ERF_F64 =", show(c, "d"), file=out)
    pieces = [(0.5, 0.75), (0.75, 1.0), (1.0, 1.25), (1.25, 1.5), (1.5, 1.875), (1.875, 2.25),
              (2.25, 2.75), (2.75, 3.25), (3.25, 4.0), (4.0, 5.0), (5.0, 6.25), (6.25, 8.0),
              (8.0, 10.5), (10.5, 14.0), (14.0, 19.0), (19.0, 27.5)]
    for lo, hi in pieces:
        mid = (lo + hi) / 2
        c = fit(f"erfcx f64 [{lo}, {hi}]", erfcx, lo, hi, f64, variable=lambda x, m=mid: x - m)
        print(f"    ({hi}, {mid}, [{show(c, 'd')}]),", file=out)




def pow_table(scale: int = 128, invc_bits: int = 20) -> None:
    """The float64 pow table of einc/targets/hlsl_math.py: for m in [0.75, 1.5) nearest to
    c = 1 + j/scale (j from -scale/4 to scale/2), invc = 1/c cut to `invc_bits` bits (so m's
    24-bit head times it is exact; exactly 1 for j = 0), and -log2(invc) as a 24-bit head and
    a float64 rest."""
    import math

    print("POW_TABLE_F64 = [  # (invc, -log2(invc) cut to 24 bits, the rest), j = -32 .. 64")
    for j in range(-scale // 4, scale // 2 + 1):
        c = 1 + j / scale
        m, e = math.frexp(1 / c)
        invc = math.ldexp(math.floor(m * 2**invc_bits + 0.5), e - invc_bits)
        lg = -mp.log(mp.mpf(invc), 2)
        if lg == 0:
            head, rest = 0.0, 0.0
        else:
            mh, eh = math.frexp(float(lg))
            head = math.ldexp(math.trunc(mh * 2**24), eh - 24)
            rest = float(lg - mp.mpf(head))
        print(f"    ({invc!r}, {head!r}, {rest!r}),")
    print("]")


def split_constants() -> None:
    """The float64 constants einc/targets/hlsl_math.py splits into a short head (exact products)
    and the rest, from their 200-bit values."""
    import math

    with mp.workprec(200):
        for name, value, bits in (("LN2", mp.log(2), 32), ("LOG2E", 1 / mp.log(2), 29),
                                  ("LOG10E", 1 / mp.log(10), 29), ("LOG10_2", mp.log10(2), 42),
                                  ("LOG2E (16 bits)", 1 / mp.log(2), 16)):  # fmt: skip
            m, e = math.frexp(float(value))
            head = math.ldexp(math.floor(m * 2**bits), e - bits)
            print(f"{name}: {head!r}, {float(value - mp.mpf(head))!r}")


if __name__ == "__main__":
    main()
    pow_table()
    split_constants()
