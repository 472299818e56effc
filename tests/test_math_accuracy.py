"""The math-accuracy sweep: every function of the language, for every float dtype, on every
executable target (C, OpenCL, HLSL, SYCL, Poplar), over edge values and random values
(tests/oracle/math_sweep.py), measured in ulps against the exact value: float32 and float64
results within 4 ulps, float16 results within 1 (computed in float32, rounded once), as
docs/LANGUAGE.md ("Math accuracy") promises; Poplar, which has no float64, refuses it with a
located TargetError. CUDA and HIP print the same lowering and are compile-checked.

One program per target sweeps every dtype (each statement a kernel whose branches run one
function per point): five compiles in all.
(Before this test: HLSL's `erf` was float32-accurate only, its float32 `tanh(1e-5)` 838 ulps
off, `log` near 1 up to 328, `exp` near -62 50, `pow(-2, 3)` NaN; `normcdf` was 0 in the
lower tail and `sigmoid` 0 where its result is subnormal, on every target.)
"""

from __future__ import annotations

import functools
from typing import Any

import numpy as np
import pytest

from einc.compiler.driver import Compilation
from einc.runtime.arrays import poisoned
from einc.errors import TargetError
from tests.oracle import math_sweep as sweep
from tests.oracle.seeds import fresh_seed
from tests.test_device_targets import COMPILED, require

TARGETS = ("c", "opencl", "sycl", "hlsl", "poplar")
DTYPES = ("float32", "float64", "float16")
LIMIT = {"float32": 4.0, "float64": 4.0, "float16": 1.0}
N_RANDOM = 48


def dtypes(target: str) -> tuple[str, ...]:
    """The dtypes the target computes (Poplar refuses float64: tested below)."""
    return tuple(d for d in DTYPES if not (target == "poplar" and d == "float64"))


def group(target: str) -> int:
    """Functions per kernel: one on C and OpenCL (their default schedules vectorize a plain
    elementwise statement: libmvec's and PoCL's vector functions are swept too) and on HLSL
    (lavapipe compiles one kernel holding every helper for minutes), all of a kind on SYCL
    and Poplar (each kernel costs them seconds; they keep math loops scalar)."""
    return 0 if target in ("sycl", "poplar") else 1


@functools.cache
def inputs(dtype: str, seed: int) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    x = np.concatenate([sweep.edge_values(dtype), sweep.random_values(dtype, N_RANDOM, rng)])
    px, py = sweep.pow_pairs(dtype, rng, N_RANDOM)
    return {"x": x, "px": px, "py": py}


@functools.cache
def exact_values(dtype: str, seed: int) -> dict[str, np.ndarray]:
    """The exact value of every function at the inputs (once per dtype and seed: the
    float64 ones come from mpmath)."""
    values = inputs(dtype, seed)
    return {
        fn: sweep.exact(fn, dtype, *((values["px"], values["py"]) if fn in sweep.BINARY else (values["x"],)))
        for fn in sweep.FUNCTIONS
    }


def report(fn: str, args: tuple[np.ndarray, ...], got: np.ndarray, want: np.ndarray,
           errors: np.ndarray, limit: float) -> str:
    lines = []
    for k in np.argsort(-errors)[:3]:
        if errors[k] <= limit:
            break
        shown = ", ".join(repr(float(a[k])) for a in args)
        lines.append(f"  {fn}({shown}) = {float(got[k])!r}, exact {float(want[k])!r}: {errors[k]:.3g} ulps")
    return "\n".join(lines)


@pytest.mark.parametrize(
    "target", [pytest.param(t, marks=[getattr(pytest.mark, t)] if t != "c" else []) for t in TARGETS]
)
def test_math_within_the_promised_ulps(target: str) -> None:
    require(target)
    seed = fresh_seed() % 2**32
    values = {d: inputs(d, seed) for d in dtypes(target)}
    sizes = {d: (len(v["x"]), len(v["px"])) for d, v in values.items()}
    comp = Compilation(sweep.program(sizes, group(target)), "<sweep>", target=target)
    kernel = comp.kernel()
    outputs = {o.name: poisoned(o.shape, o.dtype) for o in comp.program.outputs}
    feed = {f"{k}_{d.replace('float', 'f')}": v.copy() for d, vs in values.items() for k, v in vs.items()}
    kernel.run(feed, outputs)
    failures = []
    for dtype in dtypes(target):
        exact = exact_values(dtype, seed)
        for fn, got in sweep.results(outputs, dtype, group(target)).items():
            args = (values[dtype]["px"], values[dtype]["py"]) if fn in sweep.BINARY else (values[dtype]["x"],)
            errors = sweep.ulps(got, exact[fn], dtype)
            if errors.max() > LIMIT[dtype]:
                failures.append(f"{dtype} {fn}, beyond {LIMIT[dtype]} ulps:\n"
                                + report(fn, args, got, exact[fn], errors, LIMIT[dtype]))  # fmt: skip
    assert not failures, f"{target} (seed {seed}):\n" + "\n".join(failures)


@pytest.mark.parametrize("target", [pytest.param(t, marks=getattr(pytest.mark, t)) for t in COMPILED])
def test_math_compiles_on_cuda_and_hip(target: str) -> None:
    """CUDA and HIP print the same lowering (erfc, the IEEE max/min helpers, the guarded
    shifts) with their own libraries' functions (within 4 ulps by their vendors' tables):
    every function of every dtype compiles for each architecture."""
    require(target)
    values = {d: inputs(d, 1) for d in DTYPES}
    sizes = {d: (len(v["x"]), len(v["px"])) for d, v in values.items()}
    comp = Compilation(sweep.program(sizes), "<sweep>", target=target)
    source = comp.run_until("source")
    target_obj: Any = comp.target_obj  # a device target: it has a launch manifest
    manifest = target_obj.manifest(comp.module("target"))
    if target == "cuda":
        from einc.runtime.cuda import compile_check_cuda as check
    else:
        from einc.runtime.hip import compile_check_hip as check
    for arch in COMPILED[target]:
        report = check(source, manifest, arch).check()
        assert {k.name for k in report.kernels} == {k.name for k in manifest.kernels}, arch


def test_math_on_the_egpu_interpreter() -> None:
    """The CUDA lowering of the sweep (its normcdf, sigmoid and max/min as printed) executed by
    einc.semantics.egpu, whose math functions are NumPy's: the same bounds."""
    from einc.semantics.egpu import run_lowered

    seed = fresh_seed() % 2**32
    values = {d: inputs(d, seed) for d in DTYPES}
    sizes = {d: (len(v["x"]), len(v["px"])) for d, v in values.items()}
    module = Compilation(sweep.program(sizes), "<sweep>", target="cuda").run_until("target")
    feed = {f"{k}_{d.replace('float', 'f')}": v for d, vs in values.items() for k, v in vs.items()}
    outputs = run_lowered(module, feed, target="cuda")
    failures = []
    for dtype in DTYPES:
        exact = exact_values(dtype, seed)
        for fn, got in sweep.results(outputs, dtype).items():
            errors = sweep.ulps(got, exact[fn], dtype)
            if errors.max() > LIMIT[dtype]:
                args = (values[dtype]["px"], values[dtype]["py"]) if fn in sweep.BINARY else (values[dtype]["x"],)
                failures.append(f"{dtype} {fn}:\n" + report(fn, args, got, exact[fn], errors, LIMIT[dtype]))
    assert not failures, f"(seed {seed})\n" + "\n".join(failures)


def test_poplar_refuses_float64_at_the_first_read() -> None:
    """The one dtype a target cannot compute: Poplar's float64 (the IPU has none), refused
    before lowering at the tensor's first read."""
    src = "input x: float64[4]\noutput0[N] = x[N].call(`exp`)\n"
    with pytest.raises(TargetError) as info:
        Compilation(src, "p.ein", target="poplar").run_until("source")
    err = info.value
    assert err.loc is not None and (err.loc.line, err.loc.col) == (2, 14), err.render()
    assert "float64 tensor 'x' is not supported" in err.message
    assert Compilation(src.replace("float64", "float32"), "p.ein", target="poplar").run_until("source")


def test_the_oracle_measures_ulps() -> None:
    """The sweep's own measure: exact results are 0 ulps, a neighbour 1, a NaN or an infinity
    of the wrong kind infinitely far, a wrong-signed zero too, an overflow to the largest
    finite value instead of infinity 1."""
    one_up = float(np.nextafter(np.float32(1), np.float32(2)))
    assert sweep.ulps(np.array([1.0, one_up], np.float32), np.array([1.0, 1.0]), "float32").tolist() == [0, 1]
    assert sweep.ulps(np.array([np.nan, 1.0], np.float32), np.array([np.nan, np.nan]), "float32").tolist() == [0, np.inf]
    assert sweep.ulps(np.array([-0.0], np.float32), np.array([0.0]), "float32").tolist() == [np.inf]
    big = float(np.finfo(np.float32).max)
    assert sweep.ulps(np.array([big, np.inf], np.float32), np.array([1e39, 1e39]), "float32").tolist() == [1, 0]
