"""The C target's vector maximum/minimum helpers (einc.targets.c `lanewise_bodies`: AVX512DQ's
VRANGEPS/VRANGEPD and selects for NaN) agree bit for bit with the lane loop of the scalar
IEEE 754-2019 helpers they replace, on every pair of special values: NaNs with payloads and
signs, a signalling NaN, infinities, signed zeros, subnormals, ordinary values. On a host
without AVX512DQ the helper is the lane loop itself (the `#else` branch) and the test checks
that the printed fallback compiles and agrees."""

from __future__ import annotations

import ctypes
import struct

import numpy as np
import pytest

from einc.runtime.c import compile_c
from einc.targets.c import CTarget

SPECIAL32 = [0.0, -0.0, 1.0, -1.0, 3.5, -3.5, np.inf, -np.inf, 1e-40, -1e-40]
NANS32 = [0x7FC00000, 0xFFC00000, 0x7FC00123, 0xFFC00045, 0x7F800007]  # quiet, payloads, signalling
NANS64 = [0x7FF8000000000000, 0xFFF8000000000000, 0x7FF8000000000123, 0x7FF0000000000007]


def _values(ctype: str) -> np.ndarray:
    if ctype == "float":
        nans = np.array(NANS32, np.uint32).view(np.float32)
        return np.concatenate([np.array(SPECIAL32, np.float32), nans])
    nans = np.array(NANS64, np.uint64).view(np.float64)
    return np.concatenate([np.array(SPECIAL32 + [5e-320], np.float64), nans])


def _source() -> tuple[str, list[tuple[str, str, int]]]:
    """A library with, per helper of `lanewise_bodies`, `fast_<k>` (the printed helper) and
    `slow_<k>` (its lane loop alone) over arrays of whole vectors."""
    lines = ["#include <stdint.h>", "#include <math.h>"]
    keys = sorted(k for k in CTarget.lanewise_bodies if k[0] in ("vmaximumf", "vminimumf"))  # vexp: test_c_exp.py
    for scalar, s in (("float", "f32"), ("double", "f64")):
        for name in ("maximumf", "minimumf"):
            body = CTarget.helpers[name].format(t=scalar)
            lines.append(f"static inline {scalar} einc_{name}_{s}({scalar} a, {scalar} b) {{ {body} }}")
    for k, (name, s, n) in enumerate(keys):
        scalar = "float" if s == "f32" else "double"
        T = f"V{k}"
        size = n * (4 if s == "f32" else 8)
        generic = (f"{T} r; for (int k = 0; k < {n}; k++) r[k] = einc_{name[1:]}_{s}((a[k]), (b[k])); return r;")
        fast = CTarget.lanewise_bodies[(name, s, n)].format(generic=generic, T=T, lanes=f"lanes{k}")
        lines += [
            f"typedef {scalar} {T} __attribute__((vector_size({size})));",
            f"static __attribute__((noinline, cold)) {T} lanes{k}({T} a, {T} b) {{ {generic} }}",
            f"static inline {T} fast{k}({T} a, {T} b) {{ {fast} }}",
            f"static inline {T} slow{k}({T} a, {T} b) {{ {generic} }}",
            f"void run{k}(const {scalar}* x, const {scalar}* y, {scalar}* f, {scalar}* g, int64_t count) {{",
            f"  for (int64_t i = 0; i + {n} <= count; i += {n}) {{ {T} a, b;",
            f"    __builtin_memcpy(&a, x + i, sizeof a); __builtin_memcpy(&b, y + i, sizeof b);",
            f"    {T} r = fast{k}(a, b), q = slow{k}(a, b);",
            f"    __builtin_memcpy(f + i, &r, sizeof r); __builtin_memcpy(g + i, &q, sizeof q); }} }}",
        ]
    return "\n".join(lines) + "\n", keys


@pytest.mark.parametrize("nans", [True, False])
def test_range_helpers_match_the_scalar_helpers_bit_for_bit(nans: bool) -> None:
    """Every ordered pair of specials; without NaNs every vector takes the inline VRANGE path
    (with them, vectors with a NaN lane take the lane loop)."""
    source, keys = _source()
    assert len(keys) == 12  # max and min, f32 and f64, 512/256/128-bit vectors
    lib = ctypes.CDLL(str(compile_c(source).path))
    for k, (name, s, n) in enumerate(keys):
        v = _values("float" if s == "f32" else "double")
        v = v if nans else v[~np.isnan(v)]
        x = np.repeat(v, len(v))  # every ordered pair
        y = np.tile(v, len(v))
        pad = -len(x) % n
        x, y = np.concatenate([x, x[:pad]]), np.concatenate([y, y[:pad]])
        f, g = np.empty_like(x), np.empty_like(x)
        pointer = ctypes.c_void_p
        getattr(lib, f"run{k}")(pointer(x.ctypes.data), pointer(y.ctypes.data), pointer(f.ctypes.data),
                                pointer(g.ctypes.data), ctypes.c_int64(len(x)))  # fmt: skip
        bits = np.uint32 if s == "f32" else np.uint64
        differ = np.flatnonzero(f.view(bits) != g.view(bits))
        assert not differ.size, [(name, s, n, x[i], y[i], f[i], g[i]) for i in differ[:5]]
        # the scalar helpers' own meaning, on a few pairs: NaN from either side, +0 over -0
        fmt = "<f" if s == "f32" else "<d"
        pick = {(0.0, -0.0): 0.0 if name == "vmaximumf" else -0.0, (-0.0, 0.0): 0.0 if name == "vmaximumf" else -0.0}
        for i in range(len(v) * len(v)):
            a, b = float(x[i]), float(y[i])
            if np.isnan(a) or np.isnan(b):
                assert np.isnan(g[i])
            elif a == 0 and b == 0 and (a, b) in pick and struct.pack(fmt, a) != struct.pack(fmt, b):
                assert struct.pack(fmt, float(g[i])) == struct.pack(fmt, pick[(a, b)])


def test_softmax_row_max_prints_the_range_helper() -> None:
    """The helper a vectorized row maximum calls is the VRANGEPS one (with its fallback)."""
    from einc.compiler.driver import Compilation

    program = "input x: float32[4, 64]\noutput top\ntop[N] >=! x[N, C]\n"
    schedule = ("transform.named_sequence @__transform_main(%root: !transform.any_op) {\n"
                '  %t = transform.einc.match stmt "top" axis "C" in %root\n'
                "  transform.einc.vectorize_reduction %t\n  transform.yield\n}\n")  # fmt: skip
    source = Compilation(program, "<rows>", target="c", schedule=schedule).run_until("source")
    assert isinstance(source, str)
    assert "__builtin_ia32_range" in source and "#else" in source, source
