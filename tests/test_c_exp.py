"""The C target's float32 `exp` of 16 lanes (einc.targets.c `EXP_F32X16`: inline on AVX-512
where every lane is within [-87, 87] or at most -104, libmvec's lane loop, `cold`, for any
other vector): within 1 ulp of the exact result on a dense sweep of the inline path's range
(exhaustively, all 2.2e9 floats: at most 0.98 ulp), +0 below -104 (-inf included), and bit
for bit libmvec's result on every vector with a special lane (NaN payloads, a signalling NaN,
+inf, overflow, subnormal results, the guards' neighbours) among ordinary ones; kernels print
it (a softmax: NaN, +inf and -inf rows keep NumPy's meaning), and a host without AVX-512 (the
`#else` branch, here by `-mno-avx512f`) gets the same numbers from the lane loop."""

from __future__ import annotations

import ctypes
import re

import numpy as np
import pytest

import einc
from einc.runtime.c import compile_c, native_vector_bits
from einc.targets.c import EXP_F32X16, simd_declarations

T = "einc_f32x16"
LANE_LOOP = f"{T} r; for (int k = 0; k < 16; k++) r[k] = expf((a[k])); return r;"
SPECIAL = [np.nan, -np.nan, np.inf, -np.inf, 0.0, -0.0, 1e-40, -1e-40, 87.0, -87.0, 87.00001, -87.00001,
           88.72283, 88.7229, 89.0, 1e30, -87.4, -100.0, -103.97, -103.99, -104.0, -104.00001, -1e30]  # fmt: skip
SIGNALLING = 0x7F800007
PAYLOAD = 0x7FC00123

avx512 = pytest.mark.skipif(native_vector_bits() != 512, reason="the inline path needs AVX-512")


def _library(extra: tuple[str, ...] = ()) -> ctypes.CDLL:
    source = "\n".join([
        "#include <math.h>", "#include <stdint.h>", simd_declarations({"exp"}),
        f"typedef float {T} __attribute__((vector_size(64)));",
        f"static __attribute__((noinline, cold)) {T} lanes({T} a) {{ {LANE_LOOP} }}",
        f"static inline {T} fast({T} a) {{ {EXP_F32X16.format(T=T, generic=LANE_LOOP, lanes='lanes')} }}",
        "void run(const float* x, float* f, float* g, int64_t count) {",
        f"  for (int64_t i = 0; i + 16 <= count; i += 16) {{ {T} a; __builtin_memcpy(&a, x + i, sizeof a);",
        f"    {T} r = fast(a), q = lanes(a); __builtin_memcpy(f + i, &r, sizeof r); __builtin_memcpy(g + i, &q, sizeof q); }} }}",
    ]) + "\n"  # fmt: skip
    return ctypes.CDLL(str(compile_c(source, extra_flags=extra).path))


@pytest.fixture(scope="module")
def library() -> ctypes.CDLL:
    return _library()


def _run(lib: ctypes.CDLL, x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The helper's result and the lane loop's (libmvec) on `x` (whole vectors)."""
    x = np.ascontiguousarray(x, np.float32)
    assert len(x) % 16 == 0
    f, g = np.empty_like(x), np.empty_like(x)
    lib.run(*(ctypes.c_void_p(a.ctypes.data) for a in (x, f, g)), ctypes.c_int64(len(x)))
    return f, g


def _ulps(got: np.ndarray, x: np.ndarray) -> np.ndarray:
    """|got - exp(x)| in ulps of the exact result (float64's exp: 2^-29 of a float32 ulp)."""
    want = np.exp(x.astype(np.float64))
    ulp = np.ldexp(1.0, np.frexp(want)[1] - 24)
    return np.abs(got.astype(np.float64) - want) / ulp


@avx512
def test_inline_path_within_one_ulp_on_a_dense_sweep(library: ctypes.CDLL) -> None:
    """Every 211th float32 of [-87, 87] (all binades and mantissa positions; the exhaustive run
    of all of them: at most 0.976 ulp, at -48.87)."""
    top = int(np.float32(87.0).view(np.uint32))
    bits = np.arange(0, top + 1, 211, dtype=np.uint32)
    x = np.concatenate([bits.view(np.float32), (bits | np.uint32(0x80000000)).view(np.float32)])
    x = np.concatenate([x, np.array([87.0, -87.0, -48.87], np.float32)])
    x = np.concatenate([x, x[: -len(x) % 16]])
    got, _ = _run(library, x)
    err = _ulps(got, x)
    assert err.max() <= 1.0, (float(x[err.argmax()]), float(err.max()))


@avx512
def test_at_most_minus_104_is_plus_zero(library: ctypes.CDLL) -> None:
    x = np.array([-104.0, -104.00001, -150.0, -1e30, -np.inf, -3.4e38, -105.5, -1000.0] * 2, np.float32)
    got, lane_loop = _run(library, x)
    assert (got.view(np.uint32) == 0).all(), got  # +0, as the correctly rounded result
    assert (lane_loop == 0).all()


@pytest.mark.parametrize("special", [*SPECIAL, "signalling", "payload"])
def test_special_lanes_among_ordinary_ones_keep_libmvecs_bits(library: ctypes.CDLL, special: float | str) -> None:
    """A vector with a special lane (anywhere) takes the lane loop: libmvec's bits exactly;
    vectors of inline lanes only are within 1 ulp (and +0 below -104)."""
    rng = np.random.default_rng(3)
    if isinstance(special, str):
        value = np.uint32(SIGNALLING if special == "signalling" else PAYLOAD).view(np.float32)
    else:
        value = np.float32(special)
    x = rng.uniform(-20, 5, 16 * 16).astype(np.float32)
    for row in range(16):
        x[16 * row + row] = value
    got, lane_loop = _run(library, x)
    inline = (np.abs(x) <= 87) | (x <= -104)
    for row in range(16):
        g, q, v = got[16 * row : 16 * row + 16], lane_loop[16 * row : 16 * row + 16], x[16 * row : 16 * row + 16]
        if inline[16 * row : 16 * row + 16].all():
            ordinary = np.abs(v) <= 87
            assert _ulps(g[ordinary], v[ordinary]).max() <= 1.0
            assert (g[~ordinary].view(np.uint32) == 0).all()
        else:
            assert (g.view(np.uint32) == q.view(np.uint32)).all(), (special, g, q)


def _call(source: str, x: np.ndarray, extra: tuple[str, ...] = ()) -> np.ndarray:
    params = re.search(r"void kernel\(([^)]*)\)", source)
    assert params is not None
    names = [p.split()[-1].lstrip("*") for p in params.group(1).split(",")]
    kernel = ctypes.CDLL(str(compile_c(source, extra_flags=extra).path)).kernel
    out = np.full(x.shape, np.nan, np.float32)
    kernel(*[(out if n == "output0" else x).ctypes.data_as(ctypes.c_void_p) for n in names])
    return out


SOFTMAX = ("temp0[N] >=! input0[N, C]; temp1[N] +=! (input0[N, C] - temp0[N]).call(`exp`); "
           "output0[N, C] = (input0[N, C] - temp0[N]).call(`exp`) / temp1[N]")  # fmt: skip


def test_softmax_prints_the_inline_exp_and_keeps_numpys_numbers() -> None:
    """Softmax rows with NaN, +inf, -inf (masked attention), all -inf, huge values: NaN where
    NumPy has NaN, the same numbers elsewhere; the AVX-512 source has the inline exp and its
    cold lane loop, and compiled without AVX-512 gives the same numbers bit for bit."""
    rng = np.random.default_rng(5)
    x = rng.uniform(-8, 8, (32, 128)).astype(np.float32)
    x[1, 7] = np.nan
    x[2, 100] = np.inf
    x[3, ::3] = -np.inf
    x[4, :] = -np.inf
    x[5, 40] = 3e38
    x[6, :64] = -1e30
    x[7, 5] = -np.inf
    x[8, 9] = 200.0
    kernel = einc.compile(SOFTMAX, {"input0": {"dtype": "float32", "shape": [32, 128]}}, target="c", use_records=False)
    if native_vector_bits() == 512:
        assert "static __attribute__((noinline, cold)) einc_f32x16 einc_vexp_lanes_f32x16(" in kernel.source
        assert "return einc_vexp_lanes_f32x16(a);" in kernel.source, kernel.source
        assert kernel.source.count("einc_vexp_f32x16(") >= 2  # the helper and its call
    got = _call(kernel.source, x)
    with np.errstate(all="ignore"):
        x64 = x.astype(np.float64)
        e = np.exp(x64 - x64.max(1, keepdims=True))
        want = e / e.sum(1, keepdims=True)
    nan = np.isnan(want)
    assert (np.isnan(got) == nan).all(), np.argwhere(np.isnan(got) != nan)[:5]
    np.testing.assert_allclose(got[~nan], want[~nan], rtol=2e-6, atol=1e-30)
    plain = _call(kernel.source, x, ("-mno-avx512f",))
    assert (np.isnan(plain) == nan).all()
    np.testing.assert_allclose(plain[~nan], want[~nan], rtol=2e-6, atol=1e-30)


def test_no_avx512_fallback_compiles_and_is_the_lane_loop() -> None:
    lib = _library(("-mno-avx512f",))
    x = np.array([0.5, -3.0, 87.0, -104.0, np.nan, np.inf, -np.inf, 88.8, 1e-40, -0.0, 20.0, -20.0, 1.0, 2.0, 3.0, 4.0],
                 np.float32)  # fmt: skip
    got, lane_loop = _run(lib, x)
    assert (got.view(np.uint32) == lane_loop.view(np.uint32)).all()
