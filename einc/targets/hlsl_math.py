"""einc's own math functions for the HLSL target, where the Vulkan built-ins fall short of the
accuracy docs/LANGUAGE.md promises (4 ulps for float32 and float64).

Vulkan's precision rules let `exp`, `exp2` be 3 + 2|x| ulps off, `log`, `log2` off by 2^-21
absolutely near 1 and `sin`, `cos` by 2^-11 absolutely, and `pow` inherit all of that; lavapipe
uses them: float32 `tanh(1e-5)` was 838 ulps off, `log` near 1 up to 328 ulps, `exp` near -62
50 ulps, `pow(-2, 3)` NaN. Its float64 `sqrt`, `floor`, `ceil`, `trunc`, `round` and `fma` work at
float32 precision (`round(123456789.5)` gave 123456793), and HLSL has no float64 `exp`, `log`,
`sin`... at all. So these are computed here from what is exact: `+ - * /`, compares,
conversions, float32 `floor`/`round`/`trunc`/`abs`/`sqrt` and the bits of a float32 (`asuint`,
`asfloat`; a float64 is built with `asdouble(lo, hi)` but cannot be taken apart, so its
exponent comes from its float32 conversion).

The Vulkan stack also rewrites float arithmetic as fast math (naga drops SPIR-V's
`NoContraction`, and Mesa then folds `x - x` to 0, `(a + b) - b` to `a`, `0 * x` to 0): no
helper relies on an error-free transformation that such a rewrite cancels (no `(x + 2^23) -
2^23` rounding, no TwoSum). Extra precision comes from values split on their bits (`asuint(x) &
0xfffff000u`), which no rewrite sees through, and from exact products of short operands.

Each helper is an HLSL function (valid C++ with `cpp_prelude()`, which tests/test_hlsl_math.py
uses to sweep millions of arguments with g++): `HELPERS[name] = (definition, helpers it calls)`,
named `einc_<function>_<f32|f64>`. `FUNCTIONS[(op type, element type)]` is the helper computing
that math op. The polynomial coefficients come from scripts/fit_math.py (Chebyshev
interpolation in mpmath) or are Taylor coefficients; the method of each function is in its
comment.
"""

from __future__ import annotations

import math

import numpy as np
from xdsl.dialects import math as mathd
from xdsl.dialects.builtin import f32, f64
from xdsl.ir import Attribute, Operation

from einc.dialects.math_ext import ErfcOp


def f(value: float) -> str:
    """A float32 literal that reads back as `value` rounded to float32."""
    text = repr(float(np.float32(value)))
    return (text if ("e" in text or "." in text) else text + ".0") + "f"


def d(value: float) -> str:
    """A float64 literal (HLSL: the `L` suffix)."""
    return repr(float(value)) + "L"


def horner(variable: str, coefficients: list[float], literal=f) -> str:
    """`c0 + v * (c1 + v * (...))` (lowest coefficient first)."""
    text = literal(coefficients[-1])
    for c in reversed(coefficients[:-1]):
        text = f"{literal(c)} + {variable} * ({text})"
    return text


def _split(value: float, bits: int) -> tuple[float, float]:
    """`value` as a float32 with its top `bits` significand bits, and the float32 rest."""
    top = np.float32(value)
    mask = np.uint32(0xFFFFFFFF) << np.uint32(24 - bits)
    hi = float((np.array(top).view(np.uint32) & mask).view(np.float32))
    return hi, float(np.float32(value - hi))


INF = "asfloat(einc_inf_bits)"
NAN = "asfloat(einc_nan_bits)"
"""Built at run time from the target's preamble globals: naga refuses infinite or NaN constants."""


def _isnan(v: str) -> str:
    return f"(asuint({v}) & 0x7fffffffu) > 0x7f800000u"


LN2_HI, LN2_LO = _split(math.log(2), 15)  # k * LN2_HI exact for |k| < 512
LOG2E_HI, LOG2E_LO = _split(1 / math.log(2), 12)
LOG10E_HI, LOG10E_LO = _split(1 / math.log(10), 12)
LOG10_2_HI, LOG10_2_LO = _split(math.log10(2), 12)
PIO2_HI, PIO2_LO = _split(math.pi / 2, 8)

TWO_OVER_PI = (0x00000000, 0xA2F9836E, 0x4E441529, 0xFC2757D1, 0xF534DDC0, 0xDB629599,
               0x3C439041, 0xFE5163AB, 0xDEBBC561)  # fmt: skip
"""The bits of 2/pi after 32 zero bits (scripts/fit_math.py prints them)."""

# scripts/fit_math.py
TANH_F32 = [-0.33333334, 0.13333334, -0.053968254, 0.02186942, -0.008861562, 0.0035749013,
            -0.0013695789, 0.00037633264]  # fmt: skip
ERF_F32 = [0.12837917, -0.37612638, 0.11283792, -0.026866158, 0.0052238177, -0.00085393956,
           0.00011815798, -1.1832237e-05]  # fmt: skip
TAN_F32 = [0.33333334, 0.13333334, 0.053968254, 0.021869497, 0.008862928, 0.0035963445,
           0.0014272206, 0.00069322466, 4.2157397e-05, 0.00027338593]  # fmt: skip
ERFCX_F32 = [  # (upper end, middle, coefficients in x - middle) of erfc(x) * exp(x^2)
    (0.84375, 0.671875, [0.5371597, -0.40657085, 0.2639949, -0.15279955, 0.08066282,
                         -0.039439358, 0.018246094, -0.007877331]),
    (1.25, 1.046875, [0.41510797, -0.25924686, 0.14370896, -0.072534375, 0.033885326,
                      -0.014822759, 0.0061979154, -0.0024307936]),
    (1.75, 1.5, [0.32158542, -0.16362292, 0.07615105, -0.03293091, 0.013376238, -0.005145599,
                 0.0019142958, -0.0006710878]),
    (2.5, 2.125, [0.24267036, -0.09703012, 0.036481395, -0.01300482, 0.0044220546,
                  -0.0014420255, 0.00046422041, -0.00014050023]),
    (3.5, 3.0, [0.17900115, -0.05437226, 0.015884392, -0.0044794357, 0.0012226267,
                -0.0003240268, 8.6177846e-05, -2.1617743e-05]),
    (5.0, 4.25, [0.12934527, -0.02894433, 0.006331866, -0.0013559409, 0.0002845766,
                 -5.8546313e-05, 1.1838783e-05, -2.470105e-06, 4.821293e-07]),
    (7.0, 6.0, [0.09277657, -0.015060353, 0.0024144468, -0.00038245055, 5.9879196e-05,
                -9.261606e-06, 1.4183006e-06, -2.2621704e-07, 3.389147e-08]),
    (10.25, 8.625, [0.064982206, -0.0074361344, 0.0008455438, -9.5547446e-05, 1.073074e-05,
                    -1.195689e-06, 1.3269556e-07, -1.5759424e-08, 1.7273956e-09]),
]  # fmt: skip

EXP_TAYLOR = [1 / math.factorial(n) for n in range(2, 9)]  # exp(r) = 1 + r + r^2 * P(r)
EXP2_TAYLOR = [math.log(2) ** n / math.factorial(n) for n in range(1, 10)]
SIN_TAYLOR = [(-1) ** n / math.factorial(2 * n + 1) for n in range(1, 6)]  # sin = r + r z P(z)
COS_TAYLOR = [(-1) ** n / math.factorial(2 * n) for n in range(2, 7)]  # cos = 1 - z/2 + z^2 P(z)
LOG_SERIES = [2 / (2 * n + 1) for n in range(1, 5)]  # log(1+f) = 2s + s R(s^2), R = z P(z)


# ---- float32 -------------------------------------------------------------------------------------

_LDEXP_F32 = f"""inline float einc_ldexp_f32(float x, int k) {{
  // x * 2^k for x near 1 and k in [-252, 254], rounded once (a subnormal result too)
  if (k < -126) return (x * asfloat((uint)(k + 253) << 23)) * {f(2.0**-126)};
  if (k > 127) {{ x *= 2.0f; k -= 1; }}
  return x * asfloat((uint)(k + 127) << 23);
}}"""

_EXPK_F32 = f"""inline float einc_expk_f32(float a, float b) {{
  // exp(a + b), b small: k = round((a + b) / ln 2), r = a + b - k ln 2 (Cody-Waite: k * LN2_HI
  // is exact), exp(r) = 1 + r + r^2 P(r) (Taylor, |r| < 0.4), times 2^k
  float k = round(a * {f(1 / math.log(2))});
  float r = ((a - k * {f(LN2_HI)}) - k * {f(LN2_LO)}) + b;
  float p = 1.0f + (r + r * r * ({horner("r", EXP_TAYLOR)}));
  return einc_ldexp_f32(p, (int)k);
}}"""

_EXP_F32 = f"""inline float einc_exp_f32(float x) {{
  if ({_isnan("x")}) return x;
  if (x > 89.0f) return {INF};
  if (x < -104.0f) return 0.0f;
  return einc_expk_f32(x, 0.0f);
}}"""

_EXP2_F32 = f"""inline float einc_exp2_f32(float x) {{
  // 2^x = 2^k * 2^f, k = round(x), f = x - k exact, 2^f by its Taylor series (|f| <= 1/2)
  if ({_isnan("x")}) return x;
  if (x >= 128.0f) return {INF};
  if (x <= -151.0f) return 0.0f;
  float k = round(x);
  float t = x - k;
  return einc_ldexp_f32(1.0f + t * ({horner("t", EXP2_TAYLOR)}), (int)k);
}}"""

_LOG_PROLOGUE = f"""  // x = 2^k m, m in [sqrt(1/2), sqrt(2)), f = m - 1 exact, s = f / (2 + f):
  // log(m) = f - hfsq + s (hfsq + R(s^2)), hfsq = f^2 / 2, R the atanh series
  uint u = asuint(x);
  if ((u & 0x7fffffffu) == 0u) return -{INF};
  if ((u & 0x7fffffffu) > 0x7f800000u || u == 0x7f800000u) return x;
  if ((u >> 31) != 0u) return {NAN};
  int e = 0;
  if (u < 0x00800000u) {{ u = asuint(x * 8388608.0f); e = -23; }}
  e += (int)(u >> 23) - 127;
  u = (u & 0x007fffffu) | 0x3f800000u;
  if (u > 0x3fb504f3u) {{ u -= 0x00800000u; e += 1; }}
  float f = asfloat(u) - 1.0f;
  float k = (float)e;
  float hfsq = 0.5f * f * f;
  float s = f / (2.0f + f);
  float z = s * s;
  float R = z * ({horner("z", LOG_SERIES)});"""

_LOG_F32 = f"""inline float einc_log_f32(float x) {{
{_LOG_PROLOGUE}
  return k * {f(LN2_HI)} - ((hfsq - (s * (hfsq + R) + k * {f(LN2_LO)})) - f);
}}"""

_LOG_HI_LO = """  // log(m) = hi + lo, hi with 12 significant bits (its bits cut: no rewrite cancels lo)
  float hi = asfloat(asuint(f - hfsq) & 0xfffff000u);
  float lo = ((f - hi) - hfsq) + s * (hfsq + R);"""

_LOG2_F32 = f"""inline float einc_log2_f32(float x) {{
{_LOG_PROLOGUE}
{_LOG_HI_LO}
  float a = hi * {f(LOG2E_HI)};
  float w = k + a;
  return w + ((((lo + hi) * {f(LOG2E_LO)} + lo * {f(LOG2E_HI)}) + ((k - w) + a)));
}}"""

_LOG10_F32 = f"""inline float einc_log10_f32(float x) {{
{_LOG_PROLOGUE}
{_LOG_HI_LO}
  return (((k * {f(LOG10_2_LO)} + (lo + hi) * {f(LOG10E_LO)}) + lo * {f(LOG10E_HI)}) + hi * {f(LOG10E_HI)}) + k * {f(LOG10_2_HI)};
}}"""

_TANH_F32 = f"""inline float einc_tanh_f32(float x) {{
  // |x| < 0.625: x + x^3 P(x^2) (fitted); else 1 - 2 / (exp(2|x|) + 1); 1 from 9.1
  if ({_isnan("x")}) return x;
  float a = abs(x);
  if (a < 0.625f) {{ float z = x * x; return x + x * z * ({horner("z", TANH_F32)}); }}
  float r = a > 9.1f ? 1.0f : 1.0f - 2.0f / (einc_exp_f32(2.0f * a) + 1.0f);
  return x < 0.0f ? -r : r;
}}"""


def _erfcx_pieces() -> str:
    lines = []
    for k, (upper, middle, coefficients) in enumerate(ERFCX_F32):
        test = f"if (a < {f(upper)}) " if k < len(ERFCX_F32) - 1 else ""
        lines.append(f"  {test}{{ float t = a - {f(middle)}; return {horner('t', coefficients)}; }}")
    return "\n".join(lines)


_ERFCX_F32 = f"""inline float einc_erfcx_f32(float a) {{
  // erfc(a) exp(a^2) for a in [0.5, 10.25]: a fitted polynomial per piece
{_erfcx_pieces()}
}}"""

_ERFC_LARGE_F32 = """inline float einc_erfcbig_f32(float a) {
  // erfc(a) for a in [0.5, 10.25]: exp(-a^2) erfcx(a), with -a^2 = -h^2 - (a - h)(a + h),
  // h = a cut to 12 bits (h^2 exact): the exponent is exact to float32's precision
  float h = asfloat(asuint(a) & 0xfffff000u);
  return einc_expk_f32(-h * h, -(a - h) * (a + h)) * einc_erfcx_f32(a);
}"""

_ERF_F32 = f"""inline float einc_erf_f32(float x) {{
  // |x| < 0.84375: x + x P(x^2) (fitted); below 3.95: 1 - erfc(|x|); then 1
  if ({_isnan("x")}) return x;
  float a = abs(x);
  if (a < 0.84375f) {{ float z = x * x; return x + x * ({horner("z", ERF_F32)}); }}
  float r = a < 3.95f ? 1.0f - einc_erfcbig_f32(a) : 1.0f;
  return x < 0.0f ? -r : r;
}}"""

_ERFC_F32 = f"""inline float einc_erfc_f32(float x) {{
  // |x| < 0.5: 1 - erf(x); x <= -0.5: 2 - erfc(-x); else erfcbig
  if ({_isnan("x")}) return x;
  float a = abs(x);
  if (a < 0.5f) {{ float z = x * x; return 1.0f - (x + x * ({horner("z", ERF_F32)})); }}
  if (x < 0.0f) return a < 4.0f ? 2.0f - einc_erfcbig_f32(a) : 2.0f;
  return a < 10.25f ? einc_erfcbig_f32(a) : 0.0f;
}}"""


def _two_over_pi_word() -> str:
    chain = " : ".join(f"i == {k} ? 0x{w:08x}u" for k, w in enumerate(TWO_OVER_PI[:-1]))
    return f"inline uint einc_twobypi_u32(int i) {{ return {chain} : 0x{TWO_OVER_PI[-1]:08x}u; }}"


_REDUCE_F32 = f"""struct einc_reduced_f32 {{ float r; int q; }};

inline einc_reduced_f32 einc_reduce_f32(float a) {{
  // a (finite, > pi/4) = (q + r / (pi/2)) pi/2 exactly enough, |r| <= pi/4: the 24-bit
  // significand m times 96 bits of 2/pi from the bit that makes the product's bits above 2
  // multiples of 4 (Payne-Hanek), in 32-bit words and 64-bit sums
  uint u = asuint(a);
  int e = (int)(u >> 23) - 127;
  uint64_t m = (u & 0x007fffffu) | 0x00800000u;
  int p = e + 7;
  int w = p >> 5;
  uint sh = (uint)(p & 31);
  uint t0 = einc_twobypi_u32(w), t1 = einc_twobypi_u32(w + 1), t2 = einc_twobypi_u32(w + 2), t3 = einc_twobypi_u32(w + 3);
  uint w0 = sh == 0u ? t0 : (t0 << sh) | (t1 >> (32u - sh));
  uint w1 = sh == 0u ? t1 : (t1 << sh) | (t2 >> (32u - sh));
  uint w2 = sh == 0u ? t2 : (t2 << sh) | (t3 >> (32u - sh));
  uint64_t p2 = m * w2, p1 = m * w1, p0 = m * w0;
  uint64_t mid = (p2 >> 32) + (p1 & 0xffffffffu);
  uint64_t top = (mid >> 32) + (p1 >> 32) + (p0 & 0xffffffffu);
  // the product's bits 94, 95 (top's 30, 31) are q mod 4, bits 30..93 the fraction
  uint64_t fr = ((top & 0x3fffffffu) << 34) | ((mid & 0xffffffffu) << 2) | ((p2 & 0xffffffffu) >> 30);
  int q = (int)((top >> 30) & 3u);
  float sgn = 1.0f;
  if ((fr >> 63) != 0u) {{ q += 1; fr = 0u - fr; sgn = -1.0f; }}
  uint hi32 = (uint)(fr >> 32), lo32 = (uint)(fr & 0xffffffffu);
  int lz = hi32 != 0u ? 31 - (int)firstbithigh(hi32) : 63 - (int)firstbithigh(lo32);
  uint top32 = (uint)((fr << (uint)lz) >> 32);
  float h = (float)(top32 >> 16) * 65536.0f, l = (float)(top32 & 0xffffu);
  // r = (h + l) 2^(-32 - lz) pi/2, h * PIO2_HI exact
  float r = h * {f(PIO2_HI)} + (h * {f(PIO2_LO)} + l * {f(math.pi / 2)});
  einc_reduced_f32 res;
  res.r = sgn * einc_ldexp_f32(r, -32 - lz);
  res.q = q & 3;
  return res;
}}"""

_SINK_F32 = f"""inline float einc_sink_f32(float r) {{
  float z = r * r;
  return r + r * z * ({horner("z", SIN_TAYLOR)});
}}"""

_COSK_F32 = f"""inline float einc_cosk_f32(float r) {{
  float z = r * r;
  return 1.0f - (0.5f * z - z * z * ({horner("z", COS_TAYLOR)}));
}}"""


def _trig(name: str, body: str) -> str:
    return f"""inline float einc_{name}_f32(float x) {{
  // |x| <= pi/4: the kernels (Taylor); else reduced by einc_reduce_f32
  uint u = asuint(x) & 0x7fffffffu;
  if (u >= 0x7f800000u) return u == 0x7f800000u ? {NAN} : x;
  float a = abs(x);
  float r = x;
  int q = 0;
  if (a > {f(math.pi / 4)}) {{ einc_reduced_f32 red = einc_reduce_f32(a); r = x < 0.0f ? -red.r : red.r; q = x < 0.0f ? (4 - red.q) & 3 : red.q; }}
{body}
}}"""


_SIN_F32 = _trig("sin", """  float v = (q & 1) == 0 ? einc_sink_f32(r) : einc_cosk_f32(r);
  return (q & 2) == 0 ? v : -v;""")
_COS_F32 = _trig("cos", """  float v = (q & 1) == 0 ? einc_cosk_f32(r) : einc_sink_f32(r);
  return ((q + 1) & 2) == 0 ? v : -v;""")
_TANK_F32 = f"""inline float einc_tank_f32(float r) {{
  // r + r^3 P(r^2) (fitted), |r| <= pi/4
  float z = r * r;
  return r + r * z * ({horner("z", TAN_F32)});
}}"""
_TAN_F32 = _trig("tan", """  float t = einc_tank_f32(r);
  return (q & 1) == 0 ? t : -1.0f / t;""")


def _log2_f64_series() -> list[float]:
    return [2 / (2 * n + 1) for n in range(1, 9)]


_POW_F32 = f"""inline float einc_pow_f32(float x, float y) {{
  // C's pow (IEEE 754's special cases); else 2^(y log2|x|) computed in float64 arithmetic
  // (log2 by the atanh series, 2^t by its Taylor series: 1e-15 relative, so the float32
  // result is rounded once from a value good to far below its ulp), negated for a negative
  // base and an odd integer y
  uint ux = asuint(x), uy = asuint(y);
  uint ax = ux & 0x7fffffffu, ay = uy & 0x7fffffffu;
  if (ay == 0u || ux == 0x3f800000u) return 1.0f;
  if (ax > 0x7f800000u || ay > 0x7f800000u) return {NAN};
  bool integer = trunc(y) == y;
  bool odd = integer && ay < 0x4b800000u && trunc(y * 0.5f) != y * 0.5f;
  bool negative = (ux >> 31) != 0u;
  if (ay == 0x7f800000u) {{
    if (ax == 0x3f800000u) return 1.0f;
    return (ax > 0x3f800000u) == ((uy >> 31) == 0u) ? {INF} : 0.0f;
  }}
  if (ax == 0u || ax == 0x7f800000u) {{
    bool big = (ax == 0u) == ((uy >> 31) != 0u);  // 0 to a negative power, inf to a positive
    float v = big ? {INF} : 0.0f;
    return negative && odd ? -v : v;
  }}
  if (negative && !integer) return {NAN};
  int e = 0;
  if (ax < 0x00800000u) {{ ax = asuint(abs(x) * 8388608.0f); e = -23; }}
  e += (int)(ax >> 23) - 127;
  uint mb = (ax & 0x007fffffu) | 0x3f800000u;
  if (mb > 0x3fb504f3u) {{ mb -= 0x00800000u; e += 1; }}
  double fm = (double)asfloat(mb) - 1.0L;
  double s = fm / (2.0L + fm);
  double z = s * s;
  double lg = 2.0L * s + s * z * ({horner("z", _log2_f64_series(), d)});
  double t = (double)y * ((double)e + lg * {d(1 / math.log(2))});
  if (t >= 128.5L) return negative && odd ? -{INF} : {INF};
  if (t <= -151.0L) return negative && odd ? -0.0f : 0.0f;
  int k = (int)t;
  if (t - (double)k > 0.5L) k += 1;
  if (t - (double)k < -0.5L) k -= 1;
  double g = t - (double)k;
  double p = 1.0L + g * ({horner("g", [math.log(2) ** n / math.factorial(n) for n in range(1, 15)], d)});
  if (k < -100) {{ p *= {d(2.0**-64)}; k += 64; }}
  if (k > 120) {{ p *= 256.0L; k -= 8; }}
  float v = (float)(p * (double)asfloat((uint)(k + 127) << 23));  // p 2^k exact, then rounded once
  return negative && odd ? -v : v;
}}"""


# ---- float64 -------------------------------------------------------------------------------------

_TRUNC_F64 = """inline double einc_trunc_f64(double x) {
  // |x| < 2^52: its integer part from two 32-bit halves (exact conversions)
  double a = abs(x);
  if (!(a < 4503599627370496.0L)) return x;
  uint hi = (uint)(a * 2.3283064365386963e-10L);
  uint lo = (uint)(a - (double)hi * 4294967296.0L);
  double t = (double)hi * 4294967296.0L + (double)lo;
  return x < 0.0L ? -t : (x > 0.0L ? t : x);
}"""

_FLOOR_F64 = """inline double einc_floor_f64(double x) {
  double t = einc_trunc_f64(x);
  return t > x ? t - 1.0L : t;
}"""

_CEIL_F64 = """inline double einc_ceil_f64(double x) {
  double t = einc_trunc_f64(x);
  return t < x ? t + 1.0L : t;
}"""

_ROUND_F64 = """inline double einc_round_f64(double x) {
  // halves away from zero: x - trunc(x) is exact
  double t = einc_trunc_f64(x);
  double r = x - t;
  if (r >= 0.5L) return t + 1.0L;
  if (r <= -0.5L) return t - 1.0L;
  return t;
}"""

_SQRT_F64 = f"""inline double einc_sqrt_f64(double x) {{
  // float32 sqrt of the float32 conversion (x scaled by an even power of 2 into its range),
  // two Newton steps, then one correction by the residual x - y^2, computed exactly from
  // y = yh + yl, yh = y cut to float32's 24 bits (yh^2 and 2 yh yl exact)
  if ({_isnan("(float)x")} || x < 0.0L) return (double){NAN};
  if (x == 0.0L || x > {d(1.7976931348623157e308)}) return x;
  double s = 1.0L, v = x;
  for (int i = 0; i < 8 && v > 1e30L; i++) {{ v *= {d(2.0**-200)}; s *= {d(2.0**100)}; }}
  for (int i = 0; i < 8 && v < 1e-30L; i++) {{ v *= {d(2.0**200)}; s *= {d(2.0**-100)}; }}
  double y = (double)sqrt((float)v);
  y = 0.5L * (y + v / y);
  y = 0.5L * (y + v / y);
  double yh = (double)(float)y;
  double yl = y - yh;
  double res = ((v - yh * yh) - 2.0L * yh * yl) - yl * yl;
  return (y + res / (2.0L * y)) * s;
}}"""

_RSQRT_F64 = """inline double einc_rsqrt_f64(double x) { return 1.0L / einc_sqrt_f64(x); }"""


HELPERS: dict[str, tuple[str, tuple[str, ...]]] = {
    "ldexp_f32": (_LDEXP_F32, ()),
    "expk_f32": (_EXPK_F32, ("ldexp_f32",)),
    "exp_f32": (_EXP_F32, ("expk_f32",)),
    "exp2_f32": (_EXP2_F32, ("ldexp_f32",)),
    "log_f32": (_LOG_F32, ()),
    "log2_f32": (_LOG2_F32, ()),
    "log10_f32": (_LOG10_F32, ()),
    "tanh_f32": (_TANH_F32, ("exp_f32",)),
    "erfcx_f32": (_ERFCX_F32, ()),
    "erfcbig_f32": (_ERFC_LARGE_F32, ("expk_f32", "erfcx_f32")),
    "erf_f32": (_ERF_F32, ("erfcbig_f32",)),
    "erfc_f32": (_ERFC_F32, ("erfcbig_f32",)),
    "twobypi_u32": (_two_over_pi_word(), ()),
    "reduce_f32": (_REDUCE_F32, ("twobypi_u32", "ldexp_f32")),
    "sink_f32": (_SINK_F32, ()),
    "cosk_f32": (_COSK_F32, ()),
    "sin_f32": (_SIN_F32, ("reduce_f32", "sink_f32", "cosk_f32")),
    "cos_f32": (_COS_F32, ("reduce_f32", "sink_f32", "cosk_f32")),
    "tank_f32": (_TANK_F32, ()),
    "tan_f32": (_TAN_F32, ("reduce_f32", "tank_f32")),
    "pow_f32": (_POW_F32, ()),
    "trunc_f64": (_TRUNC_F64, ()),
    "floor_f64": (_FLOOR_F64, ("trunc_f64",)),
    "ceil_f64": (_CEIL_F64, ("trunc_f64",)),
    "round_f64": (_ROUND_F64, ("trunc_f64",)),
    "sqrt_f64": (_SQRT_F64, ()),
    "rsqrt_f64": (_RSQRT_F64, ("sqrt_f64",)),
}
"""name: (HLSL definition of `einc_<name>`, the helpers it calls)."""

FUNCTIONS: dict[tuple[type[Operation], Attribute], str] = {
    (mathd.ExpOp, f32): "exp_f32", (mathd.Exp2Op, f32): "exp2_f32",
    (mathd.LogOp, f32): "log_f32", (mathd.Log2Op, f32): "log2_f32",
    (mathd.Log10Op, f32): "log10_f32", (mathd.TanhOp, f32): "tanh_f32",
    (mathd.ErfOp, f32): "erf_f32", (ErfcOp, f32): "erfc_f32",
    (mathd.SinOp, f32): "sin_f32", (mathd.CosOp, f32): "cos_f32", (mathd.TanOp, f32): "tan_f32",
    (mathd.PowFOp, f32): "pow_f32",
    (mathd.TruncOp, f64): "trunc_f64", (mathd.FloorOp, f64): "floor_f64",
    (mathd.CeilOp, f64): "ceil_f64", (mathd.RoundOp, f64): "round_f64",
    (mathd.SqrtOp, f64): "sqrt_f64", (mathd.RsqrtOp, f64): "rsqrt_f64",
}  # fmt: skip
"""The helper computing each math op of an element type (the others use HLSL's built-ins)."""


def definitions(name: str) -> list[tuple[str, str]]:
    """(name, definition) of helper `name` and every helper it calls, callees first."""
    found: dict[str, str] = {}

    def visit(n: str) -> None:
        text, calls = HELPERS[n]
        for callee in calls:
            visit(callee)
        found.setdefault(n, text)

    visit(name)
    return list(found.items())


def cpp_prelude() -> str:
    """C++ definitions of the HLSL built-ins the helpers use, for compiling them with g++
    (tests/test_hlsl_math.py): `-ffp-contract=off` keeps the arithmetic HLSL's."""
    return """#include <cmath>
#include <cstdint>
#include <cstring>
typedef uint32_t uint;
static uint einc_inf_bits = 0x7f800000u;
static uint einc_nan_bits = 0x7fc00000u;
static inline uint asuint(float x) { uint u; std::memcpy(&u, &x, 4); return u; }
static inline float asfloat(uint u) { float x; std::memcpy(&x, &u, 4); return x; }
static inline double asdouble(uint lo, uint hi) { uint64_t b = ((uint64_t)hi << 32) | lo; double x; std::memcpy(&x, &b, 8); return x; }
static inline int firstbithigh(uint v) { return v == 0 ? -1 : 31 - __builtin_clz(v); }
using std::abs; using std::round; using std::trunc; using std::sqrt;
#define inline static inline
"""


def cpp_source(names: list[str]) -> str:
    """The helpers `names` (and their callees) as C++ after `cpp_prelude()`: float64 literals
    lose HLSL's `L` suffix (C++'s long double)."""
    import re

    seen: dict[str, str] = {}
    for name in names:
        for helper, text in definitions(name):
            seen.setdefault(helper, text)
    body = re.sub(r"(\d)L\b", r"\1", "\n\n".join(seen.values()))
    return cpp_prelude() + "\n" + body + "\n"
