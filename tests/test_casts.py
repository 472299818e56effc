"""Float -> integer casts saturate (docs/LANGUAGE.md, `.cast`): truncation toward zero, a
result beyond the type's range is its minimum or maximum, NaN is 0; on every target, in
scalar and vectorized loops, in the interpreter and in the float64 reference.

One program casts each float input (float16, float32, float64, where the target has them) to
each integer dtype. The inputs are the boundaries (127.9, -128.9, 2^31 and 2^31 - 128 as a
float32, 2^63, the largest float16...), +-inf, NaN, values far out of range and random values
of every magnitude, in a row long enough for whole vectors and a remainder. Results are
compared exactly with `saturated`, computed here from Python's integers (NumPy's own `astype`
of an out-of-range float is undefined C behaviour, whatever the platform gives). The C kernels
are also built with `-fsanitize=float-cast-overflow` and must run without a report.
"""

from __future__ import annotations

import math
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from einc.compiler.driver import Compilation
from einc.semantics.loops import run_interpreted
from einc.semantics.reference import run_reference
from einc.runtime.c import CFLAGS, compile_c
from einc.runtime.signature import KernelSignature
from einc.targets.c import CTarget
from einc.targets import get_target
from tests.oracle.semantics import I8, I16, I32, I64
from tests.oracle.semantics import saturate as oracle_saturate
from tests.test_device_targets import COMPILED, require

FLOATS = ("float16", "float32", "float64")
INTS = ("int8", "int16", "int32", "int64")
EXECUTED = ("c", "opencl", "hlsl", "sycl", "poplar")
N = 123

SPECIAL = [
    0.0, -0.0, 0.5, -0.5, 0.999, -0.999, 1.0, -1.0, 3.7, -3.7,
    126.5, 127.0, 127.9, 128.0, 128.5, -127.5, -128.0, -128.9, -129.0, -129.5, 255.9, 256.0,
    32767.0, 32767.9, 32768.0, -32768.0, -32768.9, -32769.0, 65504.0, -65504.0, 65520.0,
    2.0**31 - 128, 2.0**31, 2.0**31 + 256, -(2.0**31), -(2.0**31) - 256, 2147483647.0,
    2147483647.5, -2147483648.9, 2.0**63 - 1024, 2.0**63, -(2.0**63), -(2.0**63) - 2048,
    1e10, -1e10, 1e19, -1e19, 1e30, -1e30, 1e300, -1e300,
    math.inf, -math.inf, math.nan, -math.nan,
]  # fmt: skip


def saturated(value: float, dtype: str) -> int:
    """The language's cast of one float to the integer `dtype`, in Python integers."""
    info = np.iinfo(dtype)
    if math.isnan(value):
        return 0
    if math.isinf(value):
        return int(info.max if value > 0 else info.min)
    return min(max(math.trunc(value), int(info.min)), int(info.max))


def float_inputs(dtype: str) -> np.ndarray:
    """The special values, then fixed random values of every magnitude (both signs), as
    `dtype` (beyond float16's range they round to infinity)."""
    rng = np.random.default_rng(2026)
    randoms = rng.choice([-1.0, 1.0], N) * 10.0 ** rng.uniform(-1, 21, N)
    values = np.concatenate([SPECIAL, randoms])[:N]
    with np.errstate(over="ignore"):
        return values.astype(dtype)


def expected(x: np.ndarray, dtype: str) -> np.ndarray:
    return np.array([saturated(float(v), dtype) for v in x], dtype=dtype)


def pairs(target: str) -> list[tuple[str, str]]:
    """(float, int) dtype pairs the target stores and computes."""
    desc = get_target(target).limits
    ok = [d for d in (*FLOATS, *INTS) if desc is None or (desc.stores(d) and desc.computes(d))]
    return [(f, i) for f in FLOATS for i in INTS if f in ok and i in ok]


def program(target: str) -> str:
    floats = sorted({f for f, _ in pairs(target)})
    lines = [f"input x_{f}: {f}[{N}]" for f in floats]
    names = [f"{f}_to_{i}" for f, i in pairs(target)]
    lines.append("output " + ", ".join([*names, "folded"]))
    lines += [f"{f}_to_{i}[K] = x_{f}[K].cast(`{i}`)" for f, i in pairs(target)]
    lines.append("folded[K] = const(1e10).cast(`int8`) + (x_float32[K] * 0.0).cast(`int8`)")
    return "\n".join(lines)


def inputs_for(target: str) -> dict[str, np.ndarray]:
    return {f"x_{f}": float_inputs(f) for f in sorted({f for f, _ in pairs(target)})}


def check(outputs: dict[str, np.ndarray], target: str, what: str) -> None:
    for f, i in pairs(target):
        np.testing.assert_array_equal(
            outputs[f"{f}_to_{i}"], expected(float_inputs(f), i), err_msg=f"{what}: {f} -> {i}"
        )
    assert (outputs["folded"] == 127).all(), what


def compilation(target: str, schedule: Any = None) -> Compilation:
    return Compilation(program(target), "<casts>", target=target, schedule=schedule)


def run(comp: Compilation) -> dict[str, np.ndarray]:
    return comp.kernel()(**inputs_for(comp.target))


# ---- the rule --------------------------------------------------------------------------------


def test_examples_of_the_rule() -> None:
    """docs/LANGUAGE.md's examples, in `saturated` and in the oracle's `saturate`."""
    def f32(v: float) -> float:
        return float(np.float32(v))

    cases = [(1e10, "int32", 2**31 - 1), (1e10, "int8", 127), (-1e10, "int8", -128),
             (math.inf, "int16", 2**15 - 1), (-math.inf, "int64", -(2**63)), (math.nan, "int32", 0),
             (127.9, "int8", 127), (-128.9, "int8", -128), (f32(2.0**31), "int32", 2**31 - 1),
             (f32(2.0**31 - 128), "int32", 2**31 - 128), (2.0**63, "int64", 2**63 - 1),
             (-3.7, "int16", -3), (255.9, "uint8", 255), (-0.5, "uint8", 0)]  # fmt: skip
    for value, dtype, want in cases:
        assert saturated(value, dtype) == want, (value, dtype)
    oracle = {"int8": I8, "int16": I16, "int32": I32, "int64": I64}
    for dtype, dt in oracle.items():
        for f in FLOATS:
            x = float_inputs(f)
            got = oracle_saturate(x, dt)
            assert [int(v) for v in got] == [saturated(float(v), dtype) for v in x], (f, dtype)


def test_reference_and_interpreter_saturate() -> None:
    comp = compilation("c")
    inputs = inputs_for("c")
    check(run_reference(comp.run_until("ein"), inputs), "c", "reference")
    check(run_interpreted(comp.run_until("loops"), inputs), "c", "interpreter")


# ---- executed targets ------------------------------------------------------------------------


@pytest.mark.parametrize("schedule", [None, "none"], ids=["default", "unscheduled"])
def test_c_saturates(schedule: str | None) -> None:
    """The default schedule (parallel, `omp simd`: gcc vectorizes the loops) and plain loops."""
    comp = compilation("c", schedule)
    check(run(comp), "c", f"c, schedule {schedule}")


@pytest.mark.parametrize(
    "target", [pytest.param(t, marks=getattr(pytest.mark, t)) for t in EXECUTED if t != "c"]
)
def test_device_target_saturates(target: str) -> None:
    require(target)
    check(run(compilation(target)), target, target)


@pytest.mark.parametrize(
    ("target", "arch"),
    [pytest.param(t, a, marks=getattr(pytest.mark, t)) for t, archs in COMPILED.items() for a in archs],
)
def test_cuda_and_hip_compile(target: str, arch: str) -> None:
    require(target)
    comp = compilation(target)
    source = comp.run_until("source")
    assert "fptosi" not in source
    manifest = comp.target_obj.manifest(comp.results["target"])
    if target == "cuda":
        from einc.runtime.cuda import compile_check_cuda as compile_check
    else:
        from einc.runtime.hip import compile_check_hip as compile_check
    compile_check(source, manifest, arch).check()


# ---- C: undefined behaviour, vectorization, untouched loops -----------------------------------

_RUN_SANITIZED = """
import ctypes, sys
import numpy as np
data = np.load(sys.argv[2])
arrays = [np.ascontiguousarray(data[name]) for name in sys.argv[3].split(",")]
getattr(ctypes.CDLL(sys.argv[1]), sys.argv[4])(*[ctypes.c_void_p(a.ctypes.data) for a in arrays])
print("finished")
"""

SANITIZE = ("-fsanitize=float-cast-overflow", "-fno-sanitize-recover=float-cast-overflow")


def run_sanitized(comp: Compilation, tmp_path: Path) -> subprocess.CompletedProcess[str]:
    """Build the C kernel with UBSan's float-cast-overflow check (a report aborts) and run it
    in a child process on the test inputs."""
    source = comp.run_until("source")
    signature = KernelSignature.from_module(comp.results["target"])
    library = compile_c(source, extra_flags=SANITIZE)
    arrays = inputs_for("c")
    for spec in signature.buffers:
        if spec.is_output:
            arrays[spec.name] = np.zeros(spec.shape, spec.dtype)
    np.savez(tmp_path / "arrays.npz", **arrays)
    names = ",".join(spec.name for spec in signature.buffers)
    command = [sys.executable, "-c", _RUN_SANITIZED, str(library.path), str(tmp_path / "arrays.npz"),
               names, signature.name]  # fmt: skip
    env = {"UBSAN_OPTIONS": "halt_on_error=1:print_stacktrace=0", "PATH": "/usr/bin:/bin"}
    return subprocess.run(command, capture_output=True, text=True, env=env, timeout=300, check=False)


def test_c_kernel_has_no_float_cast_overflow(tmp_path: Path) -> None:
    done = run_sanitized(compilation("c"), tmp_path)
    assert done.returncode == 0 and "finished" in done.stdout, done.stderr
    assert "runtime error" not in done.stderr, done.stderr


def test_sanitizer_reports_the_unlegalized_casts(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The control: without `legalize-float-to-int` the same kernel's casts are undefined
    and the sanitized build stops at the first one, so the check above can fail."""
    monkeypatch.setattr(CTarget, "pipeline", CTarget.pipeline.replace("legalize-float-to-int,", ""))
    done = run_sanitized(compilation("c"), tmp_path)
    assert done.returncode != 0, done.stdout
    assert "outside the range of representable values" in done.stderr, done.stderr


def test_c_cast_loop_is_vectorized_by_gcc(tmp_path: Path) -> None:
    """The legalized cast is branch-free (compares, selects, an unconditional conversion):
    gcc vectorizes its `omp simd` loop as it did `__builtin_convertvector`."""
    comp = Compilation(
        "output0[N, M] = (input0[N, M] * 4.0).cast(`int32`).cast(`float32`) + input0[N, M]",
        "<cast>", {"input0": {"dtype": "float32", "shape": [64, 1024]}}, target="c",
    )  # fmt: skip
    source = comp.run_until("source")
    assert "#pragma omp simd" in source and "__builtin_convertvector" not in source, source
    path = tmp_path / "kernel.c"
    path.write_text(source)
    flags = [f for f in CFLAGS if f != "-shared"]
    done = subprocess.run(["gcc", *flags, "-fopt-info-vec-optimized", "-c", str(path), "-o", str(tmp_path / "k.o")],
                          capture_output=True, text=True, check=False)  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert "loop vectorized" in done.stderr, (done.stderr, source)


def test_loops_without_casts_are_untouched(monkeypatch: pytest.MonkeyPatch) -> None:
    """The default C schedule's matmul and softmax print the same with and without the pass."""
    programs = [
        ("output0[N, M] +=! input0[N, K] * input1[K, M]",
         {"input0": {"dtype": "float32", "shape": [64, 64]}, "input1": {"dtype": "float32", "shape": [64, 64]}}),
        ("temp0[N] >=! input0[N, C]; temp1[N] +=! (input0[N, C] - temp0[N]).call(`exp`); "
         + "output0[N, C] = (input0[N, C] - temp0[N]).call(`exp`) / temp1[N]",
         {"input0": {"dtype": "float32", "shape": [32, 128]}}),
    ]  # fmt: skip
    with_pass = [Compilation(ir, "<p>", inputs, target="c").run_until("source") for ir, inputs in programs]
    monkeypatch.setattr(CTarget, "pipeline", CTarget.pipeline.replace("legalize-float-to-int,", ""))
    without = [Compilation(ir, "<p>", inputs, target="c").run_until("source") for ir, inputs in programs]
    assert with_pass == without
