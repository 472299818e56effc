"""Errors with no place in any source (a kernel, a lowered module or a PyTorch op called with
the wrong arrays; backward through an einc op) render as `einc: error: message`, the message
naming the call and the argument, never at a made-up `<unknown>:0:0`; errors with a place keep
`file:line:col: error:`."""

from __future__ import annotations

import os
from collections.abc import Callable

import numpy as np
import pytest

import einc
from einc.compiler.driver import Compilation
from einc.errors import EincError, RuntimeInputError, SourceLocation, UsageError
from einc.semantics.egpu import run_lowered

ADD = "output0[N] = input0[N] + 1.0"
INPUTS: dict[str, dict[str, object]] = {"input0": {"dtype": "float32", "shape": [4]}}


def rendered(call: Callable[[], object], kind: type[EincError] = RuntimeInputError) -> str:
    with pytest.raises(kind) as info:
        call()
    assert info.value.loc is None
    return str(info.value)


def test_an_error_without_a_place_names_no_made_up_one() -> None:
    assert EincError("the message").render() == "einc: error: the message"
    assert EincError("m", SourceLocation("p.ein", 2, 3)).render() == "p.ein:2:3: error: m"


@pytest.mark.parametrize("target", ["c", "opencl"])
def test_a_kernel_called_with_the_wrong_arrays(target: str) -> None:
    kernel = einc.compile(ADD, INPUTS, target=target)
    assert rendered(lambda: kernel(input0=np.ones(5, np.float32))) == (
        "einc: error: input 'input0' has shape [5], expected [4]")
    assert rendered(lambda: kernel(A=np.ones(4, np.float32))) == (
        "einc: error: unknown input 'A' (the kernel takes input0: float32[4])")


def test_run_lowered_with_the_wrong_inputs_names_the_call() -> None:
    module = Compilation(ADD, "<p>", INPUTS, target="cuda").module("target")
    assert rendered(lambda: run_lowered(module, {"A": np.ones(4, np.float32)}, target="cuda")) == (
        "einc: error: run_lowered: missing input 'input0' (float32[4])")
    assert rendered(lambda: run_lowered(module, {"input0": np.ones(4, np.float64)}, target="cuda")) == (
        "einc: error: run_lowered: input 'input0' is float64[4], the kernel takes float32[4]")


def test_a_torch_op_called_with_the_wrong_tensors_names_the_op_and_argument() -> None:
    try:
        import torch
    except ImportError:  # pragma: no cover - depends on the environment
        if os.environ.get("CI"):
            raise
        pytest.skip("torch is not installed")
    import einc.torch

    a, b = torch.rand(6, 5), torch.rand(5, 4)
    mm = einc.torch.op("output0[N, M] +=! input0[N, K] * input1[K, M]", {"input0": a, "input1": b})
    head = f"einc: error: {mm.name}"
    assert rendered(lambda: mm(a.double(), b)) == (
        f"{head}: argument 0 ('input0') has dtype torch.float64, the op was made for torch.float32")
    with pytest.raises(RuntimeInputError) as shape:  # placed at the axis where the program has one
        mm(a, torch.rand(6, 4))
    assert "<unknown>" not in str(shape.value) and str(shape.value).startswith("einc: error: " if shape.value.loc is None else "<string>:1:")
    assert rendered(lambda: mm(a)).startswith(f"{head} takes 2 tensors (input0: float32[")
    assert rendered(lambda: mm(a.clone().requires_grad_(), b).sum().backward(), UsageError).startswith(
        f"{head} has no derivative: einc ops compute the forward only")
