"""The C target's division of a float32 vector by a splat scalar (einc.targets.c
`DIVIDE_BY_SCALAR`: one reciprocal, two FMAs, the division itself for lanes it cannot prove)
gives the correctly rounded quotient bit for bit, as C's `/` and NumPy's float32 division do:
on every pair of special values (signed zeros, infinities, NaNs, subnormals, the guards'
boundaries), on random bit patterns (every binade), and over every mantissa of a binade for
many divisors. Both printed paths run on an AVX-512 host (16 lanes; 8 lanes take the AVX2 +
FMA path); elsewhere the helpers fall back to `/` and the tests check that fallback."""

from __future__ import annotations

import ctypes
import re

import numpy as np
import pytest

import einc
from einc.runtime.c import compile_c, native_vector_bits
from einc.targets.c import DIVIDE_BY_SCALAR

LANES = (16, 8)


def _library() -> ctypes.CDLL:
    lines = ["#include <stdint.h>"]
    for n in LANES:
        T = f"einc_f32x{n}"
        lines += [
            f"typedef float {T} __attribute__((vector_size({4 * n})));",
            DIVIDE_BY_SCALAR.format(P="static inline", T=T, t="float", s="f32", n=n),
            f"void divide{n}(const float* x, float d, float* r, int64_t count) {{",
            f"  for (int64_t i = 0; i + {n} <= count; i += {n}) {{ {T} a; __builtin_memcpy(&a, x + i, sizeof a);",
            f"    {T} q = einc_vdivs_f32x{n}(a, d); __builtin_memcpy(r + i, &q, sizeof q); }} }}",
        ]
    return ctypes.CDLL(str(compile_c("\n".join(lines) + "\n").path))


@pytest.fixture(scope="module")
def library() -> ctypes.CDLL:
    return _library()


def _divide(lib: ctypes.CDLL, n: int, x: np.ndarray, d: float) -> np.ndarray:
    x = np.ascontiguousarray(x, np.float32)
    assert len(x) % n == 0
    r = np.empty_like(x)
    getattr(lib, f"divide{n}")(ctypes.c_void_p(x.ctypes.data), ctypes.c_float(d), ctypes.c_void_p(r.ctypes.data),
                               ctypes.c_int64(len(x)))  # fmt: skip
    return r


def _assert_exact(x: np.ndarray, d: np.float32, got: np.ndarray) -> None:
    with np.errstate(all="ignore"):
        want = x / d
    nan = np.isnan(want)
    same = (got.view(np.uint32) == want.view(np.uint32)) | (nan & np.isnan(got))
    bad = np.flatnonzero(~same)
    assert not bad.size, [(float(d).hex(), float(x[i]).hex(), float(got[i]).hex(), float(want[i]).hex()) for i in bad[:5]]


def _f32(bits: list[int]) -> list[float]:
    return list(np.array(bits, np.uint32).view(np.float32))


SPECIAL_X = [0.0, -0.0, 1.0, -3.5, np.inf, -np.inf, np.nan, 1e-40, -1e-45, 1.1754944e-38, 3.4028235e38, -3.4028235e38,
             2.0**-101, 2.0**-100, 2.0**-99, 2.0**-60, 2.0**100, 2.0**126, 2.0**127, 7.0, 0.1] + _f32(
    [0x7FC00123, 0xFFC00045, 0x7F800007, 0x00000001, 0x807FFFFF, 0x3F800001, 0x3FFFFFFF])  # fmt: skip
SPECIAL_D = [49.0, 768.0, 3.0, -3.0, 1.1, 0.0, -0.0, np.inf, -np.inf, np.nan, 1e-40, 2.0**-50, 2.0**-51,
             np.nextafter(np.float32(2.0**50), np.float32(0)), 2.0**50, 1e38, 1e-38, 1.9999999, -0.3333333]  # fmt: skip


@pytest.mark.parametrize("n", LANES)
def test_every_special_pair_alone_and_among_ordinary_lanes(library: ctypes.CDLL, n: int) -> None:
    rng = np.random.default_rng(5)
    for d in np.array(SPECIAL_D, np.float32):
        for x in np.array(SPECIAL_X, np.float32):
            lanes = rng.uniform(-4, 4, n).astype(np.float32)  # one special among ordinary lanes
            lanes[rng.integers(n)] = x
            alone = np.full(n, x, np.float32)  # a vector of the special only
            v = np.concatenate([lanes, alone])
            _assert_exact(v, d, _divide(library, n, v, float(d)))


@pytest.mark.parametrize("n", LANES)
def test_random_bit_patterns(library: ctypes.CDLL, n: int) -> None:
    rng = np.random.default_rng(11)
    x = rng.integers(0, 2**32, 1 << 16, dtype=np.uint64).astype(np.uint32).view(np.float32)
    normal = rng.standard_normal(1 << 16).astype(np.float32) * np.float32(1000)
    divisors = np.concatenate([
        rng.integers(0, 2**32, 24, dtype=np.uint64).astype(np.uint32).view(np.float32),
        rng.standard_normal(8).astype(np.float32), np.array(SPECIAL_D, np.float32),
    ])  # fmt: skip
    for d in divisors:
        for v in (x, normal):
            _assert_exact(v, d, _divide(library, n, v, float(d)))


def _mantissas(lib: ctypes.CDLL, divisors: np.ndarray, exponents: tuple[int, ...]) -> None:
    one = np.arange(1 << 23, dtype=np.uint32) | np.uint32(0x3F800000)  # every x in [1, 2)
    for e in exponents:
        x = (one.view(np.float32) * np.float32(2.0**e)).astype(np.float32)
        for d in divisors:
            _assert_exact(x, d, _divide(lib, 16, x, float(d)))


def test_every_mantissa_of_a_binade(library: ctypes.CDLL) -> None:
    rng = np.random.default_rng(3)
    divisors = np.concatenate([
        (rng.integers(0, 1 << 23, 6).astype(np.uint32) | np.uint32(0x3F800000)).view(np.float32),
        np.array([49.0, 768.0, 1.9999999, 1.0000001], np.float32),
    ])  # fmt: skip
    _mantissas(library, divisors, (0,))


@pytest.mark.slow
def test_every_mantissa_near_the_guards(library: ctypes.CDLL) -> None:
    """Binades where the quotient or the residual nears the guards' bounds (|q| 2^-50 and
    2^126, |x| about 2^-101), for divisors near theirs (|d| 2^-50 and 2^50)."""
    rng = np.random.default_rng(4)
    mantissas = (rng.integers(0, 1 << 23, 12).astype(np.uint32) | np.uint32(0x3F800000)).view(np.float32)
    divisors = np.concatenate([mantissas, mantissas[:3] * np.float32(2.0**-50), mantissas[3:6] * np.float32(2.0**49),
                               -mantissas[6:9] * np.float32(2.0**-49)])  # fmt: skip
    _mantissas(library, divisors, (-101, -100, -52, -1, 75, 126, 127))


def _call(source: str, arrays: dict[str, np.ndarray], out: np.ndarray) -> np.ndarray:
    params = re.search(r"void kernel\(([^)]*)\)", source)
    assert params is not None
    names = [p.split()[-1].lstrip("*") for p in params.group(1).split(",")]
    kernel = ctypes.CDLL(str(compile_c(source).path)).kernel
    out = out.copy()
    kernel(*[(out if n == "output0" else arrays[n]).ctypes.data_as(ctypes.c_void_p) for n in names])
    return out


@pytest.mark.parametrize(
    "program, prints",
    [
        ("output0[N] +=! input0[N, C] / 49.0", True),  # a mean's terms
        ("output0[N] +=! input0[N, C] / -0.3", True),
        ("output0[N] +=! input0[N, C] / 64.0", False),  # a power of two: gcc multiplies
        ("output0[N, C] = input0[N, C] / 49.0", False),  # no reduction: the divider runs beside
    ],
)
def test_kernels_print_the_helper_in_reductions_with_the_divisions_numbers(program: str, prints: bool) -> None:
    """Where the kernel calls the helper (reductions on hosts of 8 or 16 float32 lanes), its
    outputs equal bit for bit those of the same source with the helper's fast paths compiled
    out (every lane divided by `/`), specials in the inputs included, and match the float64
    reference on ordinary rows. (The default vectorizes a reduction by a row's own value
    across rows, not along it; the library tests above cover such divisors.)"""
    rng = np.random.default_rng(7)
    rows, ordinary = 32, slice(8, 32)
    x = rng.standard_normal((rows, 256)).astype(np.float32)
    for r in range(8):  # the specials, among ordinary lanes, in the first rows
        x[r, rng.choice(256, len(SPECIAL_X), replace=False)] = np.array(SPECIAL_X, np.float32)
    kernel = einc.compile(program, {"input0": {"dtype": "float32", "shape": [rows, 256]}}, target="c",
                          use_records=False)  # fmt: skip
    lanes = native_vector_bits() // 32
    assert (kernel.source.count(f"einc_vdivs_f32x{lanes}(") >= 2) == (prints and lanes in LANES), kernel.source
    shape = (rows,) if "+=!" in program else (rows, 256)
    got = _call(kernel.source, {"input0": x}, np.zeros(shape, np.float32))
    plain = kernel.source.replace(f"#if {lanes} == 16 &&", "#if 0 &&").replace(f"#elif {lanes} == 8 &&", "#elif 0 &&")
    want = _call(plain, {"input0": x}, np.zeros(shape, np.float32))
    same = (got.view(np.uint32) == want.view(np.uint32)) | (np.isnan(got) & np.isnan(want))
    assert same.all(), (program, np.argwhere(~same)[:5])
    divisor = float(program.split("/ ")[1])
    expect = x[ordinary].astype(np.float64) / divisor
    np.testing.assert_allclose(got[ordinary], expect.sum(1) if "+=!" in program else expect, rtol=1e-5, atol=1e-5)
