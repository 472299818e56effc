"""A target whose math library lacks a float dtype (HLSL: float-only intrinsics) refuses a
call of that dtype before lowering, at the call in the source; every other function of the
language compiles there. The refusal list (`TargetDescription.math_dtypes`, the frontend's
`OWN_MATH`) is checked against what the printer can actually print."""

from __future__ import annotations

import re

import pytest

from einc.compiler.driver import Compilation
from einc.errors import TargetError
from einc.frontend.dtype_rules import FUNCTIONS

BINARY = ("max", "min", "pow")


def program(fn: str, dtype: str) -> str:
    call = f"input0[N].call(`{fn}`, [input0[N]])" if fn in BINARY else f"input0[N].call(`{fn}`)"
    return f"input input0: {dtype}[8]\noutput0[N] = 1 + {call}\n"


@pytest.mark.parametrize("fn", FUNCTIONS)
def test_hlsl_float64_math_refused_at_the_call_or_printed(fn: str) -> None:
    from einc.frontend.target_check import OWN_MATH

    comp = Compilation(program(fn, "float64"), "p.ein", target="hlsl")
    if fn in OWN_MATH:
        assert "[numthreads(" in comp.run_until("source")  # an HLSL compute shader
        return
    with pytest.raises(TargetError) as info:
        comp.run_until("source")
    err = info.value
    assert err.loc is not None and (err.loc.file, err.loc.line, err.loc.col) == ("p.ein", 2, 18), err.render()
    assert re.match(r"hlsl target: `\w+` of float64 is not supported", err.message)


@pytest.mark.parametrize("fn", FUNCTIONS)
def test_hlsl_float32_math_prints(fn: str) -> None:
    assert Compilation(program(fn, "float32"), "p.ein", target="hlsl").run_until("source")


def test_the_check_runs_before_the_printer_would_fail() -> None:
    """Without the frontend check, the printer meets float64 `exp` it cannot spell: the
    check is what turns that into a located refusal."""
    from einc.targets.hlsl import HLSLTarget

    assert HLSLTarget.limits.math_dtypes == frozenset({"float32"})
    comp = Compilation(program("exp", "float64"), "p.ein", target="c")
    assert "exp(" in comp.run_until("source")  # C has float64 math


def test_float16_math_is_computed_in_float32_on_hlsl() -> None:
    """float16 is not a native HLSL type here: it is computed (and its `exp` taken) in float32,
    so its math is not refused (found by the random transform scripts)."""
    src = "output0[N] = N.cast(`float16`).call(`exp`) / 1.0 where N in 1\n"
    comp = Compilation(src, "p.ein", target="hlsl")
    assert "exp(" in comp.run_until("source")


@pytest.mark.parametrize("op", ["//", "%"])
def test_hlsl_float64_floor_division_refused_at_the_operator(op: str) -> None:
    """Float `//` and `%` take `floor` from the math library (found by the random scripts:
    the printer refused it unlocated)."""
    src = f"input input0: float64[4]\noutput0[N] = 1 + input0[N] {op} 1.5\n"
    with pytest.raises(TargetError) as info:
        Compilation(src, "p.ein", target="hlsl").run_until("source")
    assert info.value.loc is not None and info.value.loc.line == 2, info.value.render()
    assert f"`{op}` (floor division) of float64 is not supported" in info.value.message
    assert Compilation(src.replace("float64", "float32"), "p.ein", target="hlsl").run_until("source")
