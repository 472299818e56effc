"""Every function of the language compiles on HLSL in every float dtype, except what the
target refuses (`TargetDescription.math_refused`: float64 `pow`), refused before lowering at
the call; the refusal list is checked against what the printer can actually print (a function
it cannot print would be an internal error, not a located refusal). float16 is computed in
float32; float64 floor division takes einc's own float64 `floor`."""

from __future__ import annotations

import re

import pytest

from einc.driver import Compilation
from einc.errors import TargetError
from einc.frontend.dtype_rules import FUNCTIONS
from einc.targets.hlsl import HLSLTarget

BINARY = ("max", "min", "pow")


def program(fn: str, dtype: str) -> str:
    call = f"input0[N].call(`{fn}`, [input0[N]])" if fn in BINARY else f"input0[N].call(`{fn}`)"
    return f"input input0: {dtype}[8]\noutput0[N] = 1 + {call}\n"


def refused(fn: str, dtype: str) -> bool:
    return any(f == fn and d == dtype for f, d, _ in HLSLTarget.limits.math_refused)


@pytest.mark.parametrize("dtype", ["float64", "float32", "float16"])
@pytest.mark.parametrize("fn", FUNCTIONS)
def test_hlsl_math_refused_at_the_call_or_printed(fn: str, dtype: str) -> None:
    comp = Compilation(program(fn, dtype), "p.ein", target="hlsl")
    if not refused(fn, dtype):
        assert "[numthreads(" in comp.run_until("source")  # an HLSL compute shader
        return
    with pytest.raises(TargetError) as info:
        comp.run_until("source")
    err = info.value
    assert err.loc is not None and (err.loc.file, err.loc.line, err.loc.col) == ("p.ein", 2, 18), err.render()
    assert re.match(r"hlsl target: `\w+` of float64 is not supported", err.message)


def test_the_check_runs_before_the_printer_would_fail() -> None:
    """HLSL has no float64 `pow` to print: the frontend check is what turns that into a
    located refusal (C prints it)."""
    assert refused("pow", "float64") and not refused("pow", "float32")
    comp = Compilation(program("pow", "float64"), "p.ein", target="c")
    assert "pow(" in comp.run_until("source")


def test_hlsl_prints_einc_math_where_its_builtins_fall_short() -> None:
    """float32 `exp` is einc's (Vulkan lets the built-in be 3 + 2|x| ulps off), `sqrt` the
    built-in; float64 `sqrt` and `floor` are einc's (lavapipe computes them in float32)."""
    f32 = Compilation(program("exp", "float32").replace("call(`exp`)", "call(`exp`) + input0[N].call(`sqrt`)"),
                      "p.ein", target="hlsl").run_until("source")  # fmt: skip
    kernel = f32[f32.index("[numthreads("):]
    assert "einc_exp_f32(input0[N])" in kernel and "sqrt(input0[N])" in kernel, kernel
    f64 = Compilation(program("sqrt", "float64").replace("call(`sqrt`)", "call(`sqrt`) + input0[N] // 1.5"),
                      "p.ein", target="hlsl").run_until("source")  # fmt: skip
    assert "einc_sqrt_f64(" in f64 and "einc_floor_f64(" in f64


def test_float16_math_is_computed_in_float32_on_hlsl() -> None:
    """float16 is not a native HLSL type here: it is computed (and its `exp` taken) in float32,
    so its math is not refused (found by the random transform scripts)."""
    src = "output0[N] = N.cast(`float16`).call(`exp`) / 1.0 where N in 1\n"
    comp = Compilation(src, "p.ein", target="hlsl")
    assert "einc_exp_f32(" in comp.run_until("source")


@pytest.mark.parametrize("op", ["//", "%"])
def test_hlsl_float64_floor_division_uses_einc_floor(op: str) -> None:
    """Float `//` and `%` take `floor`: float64's is einc's on HLSL (it was refused while
    HLSL had only a float32-precision one)."""
    src = f"input input0: float64[4]\noutput0[N] = 1 + input0[N] {op} 1.5\n"
    assert "einc_floor_f64(" in Compilation(src, "p.ein", target="hlsl").run_until("source")
