"""The public Python contract: einc.compile(ir, input_dict, target, extra_outputs, schedule)."""

from __future__ import annotations

import numpy as np
import pytest

import einc
from einc.compiler.driver import STAGES, lower_to_stage
from einc.errors import RuntimeInputError, ScheduleError, SemanticError, TargetError
from tests.oracle.seeds import fresh_seed

MATMUL = "output0[N, M] +=! input0[N, K] * input1[K, M]"
MATMUL_INPUTS = {
    "input0": {"dtype": "float32", "shape": [16, 8]},
    "input1": {"dtype": "float32", "shape": [8, 4]},
}


def rand(rng: np.random.Generator, shape: tuple[int, ...], dtype: str = "float32") -> np.ndarray:
    return rng.uniform(0.5, 2.0, shape).astype(dtype) * rng.choice([-1, 1], shape).astype(dtype)


def test_compile_returns_callable_kernel_with_source() -> None:
    rng = np.random.default_rng(fresh_seed())
    kernel = einc.compile(MATMUL, MATMUL_INPUTS, target="c")
    a, b = rand(rng, (16, 8)), rand(rng, (8, 4))
    out = kernel(input0=a, input1=b)
    assert list(out) == ["output0"]
    assert out["output0"].dtype == np.float32 and out["output0"].shape == (16, 4)
    np.testing.assert_allclose(out["output0"], a.astype(np.float64) @ b, rtol=1e-5, atol=1e-5)
    assert "void kernel(" in kernel.source


def test_outputs_are_fresh_each_call() -> None:
    rng = np.random.default_rng(fresh_seed())
    kernel = einc.compile(MATMUL, MATMUL_INPUTS)
    a1, b1, a2, b2 = rand(rng, (16, 8)), rand(rng, (8, 4)), rand(rng, (16, 8)), rand(rng, (8, 4))
    first = kernel(input0=a1, input1=b1)["output0"]
    second = kernel(input0=a2, input1=b2)["output0"]
    assert first is not second
    np.testing.assert_allclose(first, a1.astype(np.float64) @ b1, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(second, a2.astype(np.float64) @ b2, rtol=1e-5, atol=1e-5)


def test_extra_outputs_come_first_then_last_statement() -> None:
    rng = np.random.default_rng(fresh_seed())
    ir = "output0[N] = input0[N] + input1[N]; output1[N] = input0[N] * 2; output2[N] = input1[N] + output1[N];"
    inputs = {"input0": {"dtype": "float32", "shape": [32]}, "input1": {"dtype": "float32", "shape": [32]}}
    kernel = einc.compile(ir, inputs, extra_outputs=["output0", "output1"])
    x, y = rand(rng, (32,)), rand(rng, (32,))
    out = kernel(input0=x, input1=y)
    assert list(out) == ["output0", "output1", "output2"]
    np.testing.assert_allclose(out["output0"], x + y, rtol=1e-6)
    np.testing.assert_allclose(out["output1"], x * 2, rtol=1e-6)
    np.testing.assert_allclose(out["output2"], y + x * 2, rtol=1e-6)


def test_scalar_program() -> None:
    kernel = einc.compile(
        "output0[] = input0[] + input1[]",
        {"input0": {"dtype": "float32", "shape": []}, "input1": {"dtype": "float32", "shape": []}},
    )
    out = kernel(input0=np.array(1.5, np.float32), input1=np.array(-0.25, np.float32))
    assert out["output0"].shape == () and float(out["output0"]) == 1.25


def test_program_without_inputs() -> None:
    kernel = einc.compile("output0[N] = N.cast(`float32`).call(`tanh`) where N in 64", {})
    np.testing.assert_allclose(kernel()["output0"], np.tanh(np.arange(64.0)), rtol=1e-6)


def test_every_stage_can_be_printed() -> None:
    for stage in STAGES:
        assert str(lower_to_stage(MATMUL, MATMUL_INPUTS, stage=stage))


def test_unknown_target_is_an_einc_error_with_location() -> None:
    with pytest.raises(TargetError) as info:
        einc.compile(MATMUL, MATMUL_INPUTS, target="vhdl")
    assert "unknown target 'vhdl'" in str(info.value)
    assert info.value.loc is not None
    assert isinstance(info.value, einc.EincError)


def test_semantic_error_carries_location() -> None:
    with pytest.raises(SemanticError) as info:
        einc.compile("output0[N] = input0[N] + input9[N]", {"input0": {"dtype": "float32", "shape": [4]}})
    assert info.value.loc is not None and info.value.loc.line == 1
    assert info.value.render().startswith("<string>:1:")


def test_schedule_argument_applies_or_refuses_with_a_location() -> None:
    schedule = (
        "builtin.module {\n  transform.named_sequence @__transform_main(%root: !transform.any_op) {\n"
        '    %m = transform.einc.match stmt "output0" axis "M" in %root\n'
        "    %o, %i = transform.einc.tile %m by 3\n    transform.yield\n  }\n}\n"
    )
    assert "M_o" in einc.compile(MATMUL, MATMUL_INPUTS, schedule=schedule).source
    with pytest.raises(ScheduleError) as info:
        einc.compile(MATMUL, MATMUL_INPUTS, schedule=schedule.replace("by 3", "by 0"))
    assert info.value.loc is not None and (info.value.loc.line, info.value.loc.col) == (4, 5)
    with pytest.raises(ScheduleError):
        einc.compile(MATMUL, MATMUL_INPUTS, schedule="transform.sequence")


@pytest.mark.parametrize(
    "arrays, fragment",
    [
        ({"input0": np.ones((16, 8), np.float64), "input1": np.ones((8, 4), np.float32)}, "float64"),
        ({"input0": np.ones((16, 9), np.float32), "input1": np.ones((8, 4), np.float32)}, "shape"),
        ({"input0": np.ones((16, 8), np.float32)}, "input1"),
        (
            {"input0": np.ones((16, 8), np.float32), "input1": np.ones((8, 4), np.float32), "x": np.ones(1)},
            "x",
        ),
        ({"input0": np.ones((8, 16), np.float32).T, "input1": np.ones((8, 4), np.float32)}, "contiguous"),
    ],
)
def test_bad_arrays_raise_runtime_input_error(arrays: dict[str, np.ndarray], fragment: str) -> None:
    kernel = einc.compile(MATMUL, MATMUL_INPUTS)
    with pytest.raises(RuntimeInputError) as info:
        kernel(**arrays)
    assert fragment in str(info.value)
