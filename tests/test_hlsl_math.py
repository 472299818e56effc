"""einc's own HLSL math functions (einc/targets/hlsl_math.py) compiled as C++ with g++ (their
text is valid C++ after `cpp_prelude()`, with `-ffp-contract=off` keeping HLSL's separate
multiplies and adds) and swept over far more arguments than a Vulkan run can afford: random
bit patterns over the whole range, and dense ranges where each function is delicate (near 1
for the logarithms, near 0 and the kernel boundaries for tanh, erf, erfc, huge arguments for
sin, cos, tan). float32 results are compared with float64 NumPy/SciPy, float64 results with
mpmath; every one within 4 ulps (docs/LANGUAGE.md). tests/test_math_accuracy.py runs them on
lavapipe itself over the edge values."""

from __future__ import annotations

import ctypes
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest

from einc.targets import hlsl_math
from tests.oracle import math_sweep as sweep
from tests.oracle.seeds import ci, fresh_seed

F32 = ("exp", "exp2", "log", "log2", "log10", "tanh", "erf", "erfc", "sin", "cos", "tan")
F64 = ("exp", "exp2", "log", "log2", "log10", "tanh", "erf", "erfc", "sin", "cos", "tan",
       "sqrt", "rsqrt", "trunc", "floor", "ceil", "round")  # fmt: skip
EXACT64 = ("trunc", "floor", "ceil", "round")


@pytest.fixture(scope="module")
def library(tmp_path_factory: pytest.TempPathFactory) -> ctypes.CDLL:
    compiler = shutil.which("g++")
    if compiler is None:
        if ci():
            pytest.fail("g++ missing in CI")
        pytest.skip("g++ is not installed")
    names = [f"{fn}_f32" for fn in F32] + [f"{fn}_f64" for fn in F64] + ["pow_f32", "pow_f64"]
    source = hlsl_math.cpp_source(names)
    for fn in F32:
        source += (f'extern "C" void run_{fn}_f32(const float* x, float* o, long n) '
                   f"{{ for (long i = 0; i < n; i++) o[i] = einc_{fn}_f32(x[i]); }}\n")  # fmt: skip
    for fn in F64:
        source += (f'extern "C" void run_{fn}_f64(const double* x, double* o, long n) '
                   f"{{ for (long i = 0; i < n; i++) o[i] = einc_{fn}_f64(x[i]); }}\n")  # fmt: skip
    for t, s in (("float", "f32"), ("double", "f64")):
        source += (f'extern "C" void run_pow_{s}(const {t}* x, const {t}* y, {t}* o, long n) '
                   f"{{ for (long i = 0; i < n; i++) o[i] = einc_pow_{s}(x[i], y[i]); }}\n")  # fmt: skip
    folder = tmp_path_factory.mktemp("hlsl_math")
    (folder / "math.cpp").write_text(source)
    library = folder / "math.so"
    subprocess.run([compiler, "-O2", "-ffp-contract=off", "-shared", "-fPIC", str(folder / "math.cpp"),
                    "-o", str(library)], check=True, capture_output=True)  # fmt: skip
    return ctypes.CDLL(str(Path(library)))


def call(lib: ctypes.CDLL, name: str, *arrays: np.ndarray) -> np.ndarray:
    dtype = np.float64 if name.endswith("f64") else np.float32
    args = [np.ascontiguousarray(a, dtype) for a in arrays]
    out = np.empty_like(args[0])
    pointers = [a.ctypes.data_as(ctypes.c_void_p) for a in (*args, out)]
    getattr(lib, f"run_{name}")(*pointers, ctypes.c_long(len(out)))
    return out


def float32_arguments(rng: np.random.Generator, n: int) -> np.ndarray:
    bits = rng.integers(0, 2**32, n, dtype=np.uint64).astype(np.uint32).view(np.float32)
    dense = [rng.uniform(-12, 12, n), rng.uniform(-1, 1, n), 1 + rng.uniform(-2e-3, 2e-3, n),
             rng.uniform(-105, 90, n), rng.uniform(-1e6, 1e6, n), 2.0 ** rng.uniform(-40, 0, n)]  # fmt: skip
    return np.concatenate([bits[np.isfinite(bits)], *[np.asarray(d, np.float32) for d in dense]])


def float64_arguments(rng: np.random.Generator, n: int) -> np.ndarray:
    bits = rng.integers(-(2**63), 2**63, n, dtype=np.int64).view(np.float64)
    dense = [rng.uniform(-30, 30, n), rng.uniform(-1, 1, n), 1 + rng.uniform(-1e-6, 1e-6, n),
             rng.uniform(-750, 712, n), rng.uniform(-1e9, 1e9, n), 2.0 ** rng.uniform(-60, 0, n),
             np.round(rng.uniform(-1e3, 1e3, n) * 2) / 2]  # fmt: skip
    return np.concatenate([bits[np.isfinite(bits)], *dense])


@pytest.mark.parametrize("fn", F32)
def test_float32_within_4_ulps(library: ctypes.CDLL, fn: str) -> None:
    seed = fresh_seed() % 2**32
    x = float32_arguments(np.random.default_rng(seed), 20000)
    got = call(library, f"{fn}_f32", x)
    want = sweep.exact(fn, "float32", x)
    errors = sweep.ulps_fast(got, want, "float32")
    k = int(np.argmax(errors))
    assert errors[k] <= 4, f"{fn}({x[k]!r}) = {got[k]!r}, exact {want[k]!r}: {errors[k]:.3g} ulps (seed {seed})"


def test_float32_pow_within_4_ulps(library: ctypes.CDLL) -> None:
    seed = fresh_seed() % 2**32
    rng = np.random.default_rng(seed)
    n = 20000
    base = np.concatenate([rng.uniform(0, 10, n), rng.uniform(-10, 10, n), 2.0 ** rng.uniform(-149, 127, n),
                           1 + rng.uniform(-1e-3, 1e-3, n)]).astype(np.float32)  # fmt: skip
    power = np.concatenate([rng.uniform(-40, 40, n), np.round(rng.uniform(-40, 40, n)), rng.uniform(-1.5, 1.5, n),
                            rng.uniform(-1e5, 1e5, n)]).astype(np.float32)  # fmt: skip
    got = call(library, "pow_f32", base, power)
    with np.errstate(all="ignore"):
        want = np.power(base.astype(np.float64), power.astype(np.float64))
    errors = sweep.ulps_fast(got, want, "float32")
    k = int(np.argmax(errors))
    assert errors[k] <= 4, f"pow({base[k]!r}, {power[k]!r}) = {got[k]!r}, exact {want[k]!r} (seed {seed})"


@pytest.mark.parametrize("fn", F64)
def test_float64_within_4_ulps(library: ctypes.CDLL, fn: str) -> None:
    """Against NumPy (float64's library, within an ulp) everywhere, then the 30 worst
    against mpmath; the rounding functions exactly (signed zeros included)."""
    seed = fresh_seed() % 2**32
    x = float64_arguments(np.random.default_rng(seed), 4000)
    got = call(library, f"{fn}_f64", x)
    if fn in EXACT64:
        with np.errstate(all="ignore"):
            want = sweep.exact({"trunc": "trunc", "floor": "rfloor", "ceil": "rceil", "round": "round"}[fn], "float64", x)
        same = (got == want) & (np.signbit(got) == np.signbit(want)) | (np.isnan(got) & np.isnan(want))
        assert same.all(), f"{fn}: {x[~same][:3]} gave {got[~same][:3]}, want {want[~same][:3]} (seed {seed})"
        return
    with np.errstate(all="ignore"):
        rough = sweep.exact(fn, "float32", x)  # float64 NumPy / SciPy
    errors = sweep.ulps_fast(got, rough, "float64")
    worst = np.argsort(-errors)[:30]
    exact = sweep.exact(fn, "float64", x[worst])
    precise = sweep.ulps(got[worst], exact, "float64")
    k = int(np.argmax(precise))
    assert precise[k] <= 4, (
        f"{fn}({x[worst][k]!r}) = {got[worst][k]!r}, exact {float(exact[k])!r}: {precise[k]:.3g} ulps (seed {seed})"
    )


def test_float64_pow_within_4_ulps(library: ctypes.CDLL) -> None:
    """Including x near 1 with huge y, where y log2(x) needs log2(x) to ~2^-70."""
    seed = fresh_seed() % 2**32
    rng = np.random.default_rng(seed)
    n = 5000
    base = np.concatenate([rng.uniform(0, 10, n), 2.0 ** rng.uniform(-1074, 1023, n), 1 + rng.uniform(-1e-6, 1e-6, n),
                           rng.uniform(-10, 10, n)])  # fmt: skip
    power = np.concatenate([rng.uniform(-300, 300, n), rng.uniform(-1.2, 1.2, n), rng.uniform(-1e9, 1e9, n),
                            np.round(rng.uniform(-300, 300, n))])  # fmt: skip
    got = call(library, "pow_f64", base, power)
    with np.errstate(all="ignore"):
        rough = np.power(base, power)
    worst = np.argsort(-sweep.ulps_fast(got, rough, "float64"))[:30]
    exact = sweep.exact("pow", "float64", base[worst], power[worst])
    precise = sweep.ulps(got[worst], exact, "float64")
    k = int(np.argmax(precise))
    assert precise[k] <= 4, f"pow({base[worst][k]!r}, {power[worst][k]!r}) = {got[worst][k]!r} (seed {seed})"
