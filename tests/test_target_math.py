"""Every function of the language compiles on HLSL in every float dtype: where HLSL's
built-ins fall short of docs/LANGUAGE.md's accuracy (or do not exist: float64 `exp`, `erf`,
...), einc prints its own (einc/targets/hlsl_math.py). float16 is computed in float32; float64
floor division takes einc's own float64 `floor`. (HLSL once refused every float64 math
function; its float64 `round` worked at float32 precision.)"""

from __future__ import annotations

import re

import pytest

from einc.compiler.driver import Compilation
from einc.frontend.dtype_rules import FUNCTIONS

BINARY = ("max", "min", "pow")


def program(fn: str, dtype: str) -> str:
    call = f"input0[N].call(`{fn}`, [input0[N]])" if fn in BINARY else f"input0[N].call(`{fn}`)"
    return f"input input0: {dtype}[8]\noutput0[N] = 1 + {call}\n"


@pytest.mark.parametrize("dtype", ["float64", "float32", "float16"])
@pytest.mark.parametrize("fn", FUNCTIONS)
def test_hlsl_prints_every_function(fn: str, dtype: str) -> None:
    assert "[numthreads(" in Compilation(program(fn, dtype), "p.ein", target="hlsl").run_until("source")


def test_hlsl_prints_einc_math_where_its_builtins_fall_short() -> None:
    """float32 `exp` is einc's (Vulkan lets the built-in be 3 + 2|x| ulps off), `sqrt` the
    built-in; float64 `sqrt` and `floor` are einc's (lavapipe computes them in float32)."""
    f32 = Compilation(program("exp", "float32").replace("call(`exp`)", "call(`exp`) + input0[N].call(`sqrt`)"),
                      "p.ein", target="hlsl").run_until("source")  # fmt: skip
    kernel = f32[f32.index("[numthreads("):]
    # the default schedule's index: four elements per work-item, `input0[N_o_o + N_o_i + 3]`
    assert re.search(r"einc_exp_f32\(input0\[[^]]*\]\)", kernel) and re.search(r"[^_]sqrt\(input0\[", kernel), kernel
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
