"""Antares' own programs (its AntaresIR.md and built-in function table, at small sizes) on
every executed target: C, OpenCL, HLSL, SYCL and Poplar, each compared with the float64
reference (einc/semantics/reference.py) and, for the constructs einc reads as Antares defines them
(`x.dtype()` of a tensor, `const(v, dtype=...)`, `.call(fn, y)` without a list, the scatter
`=.` / `+=.`, `floor`/`ceil` giving integers, `rfloor`/`rceil`/`remainder`/`normcdf`), with
an independent NumPy expectation.

Device toolchains that are missing skip (fail in CI) as in tests/test_device_targets.py.
"""

from __future__ import annotations

import math
import re
from typing import Any, NamedTuple

import numpy as np
import pytest

from einc.compiler.driver import Compilation
from einc.errors import ParseError, ScheduleError, SemanticError, TargetError
from einc.semantics.reference import run_reference
from tests.oracle.compare import check_reference
from tests.test_device_differential import run_on_device
from tests.test_device_targets import require

TARGETS = ("c", "opencl", "hlsl", "sycl", "poplar")


def f32(*shape: int) -> dict[str, Any]:
    return {"dtype": "float32", "shape": list(shape)}


def i32(*shape: int) -> dict[str, Any]:
    return {"dtype": "int32", "shape": list(shape)}


class Case(NamedTuple):
    name: str
    ir: str
    input_dict: dict[str, Any]
    extra_outputs: list[str] | None = None
    make: Any = None
    """(rng) -> inputs, when random normal floats / small ints do not fit the program."""
    expect: Any = None
    """(inputs) -> {output: NumPy expectation}, for the constructs this file is about."""


def _normal(rng: np.random.Generator, spec: dict[str, Any]) -> np.ndarray:
    if spec["dtype"].startswith("int"):
        return rng.integers(-3, 4, spec["shape"]).astype(spec["dtype"])
    values = rng.standard_normal(spec["shape"])
    values[values == 0] = 0.5
    return values.astype(spec["dtype"])


# ---- the programs ----------------------------------------------------------------------------

_N, _CI, _CO, _H, _W, _KH, _KW = 1, 2, 3, 4, 4, 3, 3
_HO, _WO = _H + _KH - 1, _W + _KW - 1
_ACCESS_H, _ACCESS_W = "((HO - KH) + 0)", "((WO - KW) + 0)"


def _conv_transpose(x: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    inp, w = x["input0"].astype(np.float64), x["input1"].astype(np.float64)
    out = np.zeros((_N, _CO, _HO, _WO))
    for kh in range(_KH):
        for kw in range(_KW):
            out[:, :, kh:kh + _H, kw:kw + _W] += np.einsum("nchw,cf->nfhw", inp, w[:, :, kh, kw])
    return {"output0": out}


def _conv(inp: np.ndarray, w: np.ndarray) -> np.ndarray:
    """A valid (unpadded) 2-D convolution, stride 1: inp [N, C, H, W], w [F, C, KH, KW]."""
    n, _, h, wd = inp.shape
    f, _, kh, kw = w.shape
    out = np.zeros((n, f, h - kh + 1, wd - kw + 1))
    for i in range(kh):
        for j in range(kw):
            window = inp[:, :, i:i + h - kh + 1, j:j + wd - kw + 1]
            out += np.einsum("nchw,fc->nfhw", window, w[:, :, i, j].astype(np.float64))
    return out


def _winograd(n: int, ci: int, h: int, w: int, co: int) -> str:
    """Antares' ConvWinograd_3x3 program (AntaresIR.md) at the given sizes."""
    ho, wo = h - 2, w - 2
    nh, nw = (ho + 1) // 2, (wo + 1) // 2
    p = n * nh * nw
    return (
        "helper4x3[N, M] = const(1.0).when([N * 3 + M == 0, N * 3 + M == 11], const(0.0).when("
        "[N * 3 + M == 1, N * 3 + M == 2, N * 3 + M == 9, N * 3 + M == 10], const(-0.5).when("
        "[N * 3 + M == 4], 0.5, merge_op=`any`), merge_op=`any`), merge_op=`any`) where N in 4, "
        "M in 3; transform_filter[EPS, NU, CI, CO] +=! ((input1[CO, CI, Rkh, Rkw] * "
        "helper4x3[EPS, Rkh] * helper4x3[NU, Rkw])); "
        f"input_tile[C, B, EPS, NU] = input0[B // ({nh} * {nw}), C, B // {nw} % {nh} * 2 + EPS, "
        f"B % {nw} * 2 + NU] where C in {ci}, B in {p}, EPS in 4, NU in 4; "
        "helper4x4[N, M] = const(1.0).when([N * 4 + M == 0, N * 4 + M == 6, N * 4 + M == 9, "
        "N * 4 + M == 10, N * 4 + M == 15], const(-1.0).when([N * 4 + M == 5, N * 4 + M == 7, "
        "N * 4 + M == 8], 0.0, merge_op=`any`), merge_op=`any`) where N in 4, M in 4; "
        "transform_input[EPS, NU, C, B] +=! input_tile[C, B, K1, K2] * helper4x4[K1, EPS] * "
        f"helper4x4[K2, NU] where EPS in 4, NU in 4, C in {ci}, B in {p}; "
        "batch_gemm[EPS, NU, K, B] +=! transform_filter[EPS, NU, CI, K] * "
        f"transform_input[EPS, NU, CI, B] where EPS in 4, NU in 4, K in {co}, B in {p}; "
        "helper4x2[N, M] = const(0.0) .when([N * 2 + M == 1, N * 2 + M == 6], const(-1.0).when("
        "[N * 2 + M == 3], 1.0, merge_op=`any`), merge_op=`any`) where N in 4, M in 2; "
        "inverse[K, B, VH, VW] +=! batch_gemm[K1, K2, K, B] * helper4x2[K1, VH] * "
        f"helper4x2[K2, VW] where K in {co}, B in {p}, VH in 2, VW in 2; "
        f"output0[N, K, H, W] = inverse[K, N * {nh} * {nw} + H // 2 * {nw} + W // 2, H % 2, "
        f"W % 2] where N in {n}, K in {co}, H in {ho}, W in {wo}"
    )


def _scatter_inputs(rng: np.random.Generator) -> dict[str, np.ndarray]:
    # rows 0 and 2 write the same element (the later one, row 2, stays); row 3 is outside
    # the tensor (nothing written)
    indices = np.array([[1, 2, 0, 3], [0, 0, 1, 1], [1, 2, 0, 3], [4, 0, 0, 0]], np.int32)
    return {"data": rng.standard_normal((4, 3, 2, 4, 5)).astype(np.float32),
            "indices": indices,
            "updates": rng.standard_normal((4, 5)).astype(np.float32)}  # fmt: skip


def _scatter_expect(x: dict[str, np.ndarray], add: bool) -> dict[str, np.ndarray]:
    out = x["data"].astype(np.float64).copy()
    for b, row in enumerate(x["indices"]):
        if all(0 <= int(i) < n for i, n in zip(row, out.shape)):
            where = tuple(int(i) for i in row)
            out[where] = out[where] + x["updates"][b] if add else x["updates"][b]
    return {"data_out": out}


def _scatter_then_read(x: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    temp = x["input0"].astype(np.float64) * 2
    temp[3], temp[0] = x["updates"][0], x["updates"][1]
    return {"output0": temp.sum(axis=1)}


def _int_literal_scatter(data: np.ndarray) -> np.ndarray:
    out = data.astype(np.int64).copy()
    out[[2, 0], :] = -2  # stored as C stores -2.5 into an int: truncated
    out[[2, 0], 0] += 1
    return out


def _rounding_inputs(rng: np.random.Generator) -> dict[str, np.ndarray]:
    x = rng.uniform(-7.0, 7.0, 16)
    x[np.abs(x - np.round(x)) < 1e-3] += 0.25  # no value at a step of floor / ceil
    return {"input0": x.astype(np.float32), "input1": rng.standard_normal(16).astype(np.float32)}


CASES = [
    Case("conv2d_transpose_dtype_of_tensor",
         f"output0[N, F, HO, WO] +=! input0[N, C, {_ACCESS_H}, {_ACCESS_W}].when([{_ACCESS_H} >= 0, "
         f"{_ACCESS_H} < {_H}, {_ACCESS_W} >= 0, {_ACCESS_W} < {_W}], const(0, input0.dtype())) "
         f"* input1[C, F, KH, KW] where HO in {_HO}, WO in {_WO}",
         {"input0": f32(_N, _CI, _H, _W), "input1": f32(_CI, _CO, _KH, _KW)},
         expect=_conv_transpose),
    Case("const_dtype_keyword",
         "output0[N, M] = input0[N, M].when([input0[N, M] > const(0, dtype=input0.dtype())], "
         "const(0, dtype=input0.dtype()))",
         {"input0": f32(6, 5)},
         expect=lambda x: {"output0": np.maximum(x["input0"].astype(np.float64), 0.0)}),
    Case("call_extra_argument_without_list",
         "output0[N] = input0[N].call(`max`, 0.0) + input0[N].call(`min`, [0.5, input1[N]])",
         {"input0": f32(9), "input1": f32(9)},
         expect=lambda x: {"output0": np.maximum(x["input0"], 0.0).astype(np.float64)
                           + np.minimum(np.minimum(x["input0"], 0.5), x["input1"])}),
    Case("call_result_dtype_keyword",
         "output0[N] = (input0[N]).call(`exp`, dtype=`float32`) + (input0[N]).call(`max`, "
         "[input1[N]], dtype=`float32`) + input0[N].call(`min`, 0.25, output_dtype=`int32`)",
         {"input0": f32(9), "input1": f32(9)},
         expect=lambda x: {"output0": np.exp(x["input0"].astype(np.float64))
                           + np.maximum(x["input0"], x["input1"])
                           + np.trunc(np.minimum(x["input0"], 0.25))}),
    Case("scatter4d",
         "data[indices[B, 0], indices[B, 1], indices[B, 2], indices[B, 3], M] =. updates[B, M]",
         {"data": f32(4, 3, 2, 4, 5), "indices": i32(4, 4), "updates": f32(4, 5)},
         make=_scatter_inputs, expect=lambda x: _scatter_expect(x, add=False)),
    Case("scatter4d_add",
         "data[indices[B, 0], indices[B, 1], indices[B, 2], indices[B, 3], M] +=. updates[B, M]",
         {"data": f32(4, 3, 2, 4, 5), "indices": i32(4, 4), "updates": f32(4, 5)},
         make=_scatter_inputs, expect=lambda x: _scatter_expect(x, add=True)),
    Case("scatter_float_literal_into_ints",
         "data[idx[B], M] =. -2.5; data[idx[B], 0] +=. 1.5",
         {"data": i32(4, 3), "idx": i32(2)},
         make=lambda rng: {"data": rng.integers(-9, 9, (4, 3)).astype(np.int32),
                           "idx": np.array([2, 0], np.int32)},
         expect=lambda x: {"data_out_out": _int_literal_scatter(x["data"])}),
    Case("scatter_then_read",
         "temp[N, M] = input0[N, M] * 2.0; temp[indices[B], M] =. updates[B, M]; "
         "output0[N] +=! temp[N, M]",
         {"input0": f32(5, 3), "indices": i32(2), "updates": f32(2, 3)},
         make=lambda rng: {"input0": rng.standard_normal((5, 3)).astype(np.float32),
                           "indices": np.array([3, 0], np.int32),
                           "updates": rng.standard_normal((2, 3)).astype(np.float32)},
         expect=lambda x: _scatter_then_read(x)),
    Case("floor_is_an_integer",
         "output0[N] = input0[N].call(`floor`) / 2; output1[N] = input0[N].call(`ceil`); "
         "output2[N] = input1[input0[N].call(`floor`) + 8]",
         {"input0": f32(16), "input1": f32(16)}, ["output0", "output1", "output2"],
         make=_rounding_inputs,
         expect=lambda x: {
             "output0": np.floor(x["input0"]).astype(np.int64) // 2,
             "output1": np.ceil(x["input0"]).astype(np.int64),
             "output2": x["input1"][np.floor(x["input0"]).astype(np.int64) + 8].astype(np.float64),
         }),
    Case("rfloor_rceil_remainder",
         "output0[N] = input0[N].call(`rfloor`) / 2 + input0[N].call(`rceil`) * 3 "
         "+ input0[N].call(`remainder`) * 10",
         {"input0": f32(16), "input1": f32(16)}, make=_rounding_inputs,
         expect=lambda x: {"output0": np.floor(x["input0"].astype(np.float64)) / 2
                           + np.ceil(x["input0"].astype(np.float64)) * 3
                           + (x["input0"] - np.floor(x["input0"])).astype(np.float64) * 10}),
    Case("normcdf",
         "output0[N] = input0[N].call(`normcdf`)", {"input0": f32(16)},
         expect=lambda x: {"output0": np.array(
             [0.5 * math.erfc(-float(v) / math.sqrt(2)) for v in x["input0"]])}),
    # Antares' published programs (AntaresIR.md), small
    Case("matmul_bias_add_val",
         "output0[N, M] +=! input0[N, K] * input1[K, M] + input2[M] / K.val()",
         {"input0": f32(4, 6), "input1": f32(6, 5), "input2": f32(5)},
         expect=lambda x: {"output0": x["input0"].astype(np.float64) @ x["input1"]
                           + x["input2"].astype(np.float64)}),
    Case("reshape", "output0[A, B, C] = input0[A, B, C / 4, C % 4] where C in 8",
         {"input0": f32(2, 3, 2, 4)}),
    Case("onehot", "output0[N, F] = const(1.0).when([input0[N] == F], const(0.0)) where F in 8",
         {"input0": i32(4)}, make=lambda rng: {"input0": rng.integers(0, 8, 4).astype(np.int32)}),
    Case("take", "output0[F, C] = input0[input1[F], C]", {"input0": f32(7, 3), "input1": i32(5)},
         make=lambda rng: {"input0": rng.standard_normal((7, 3)).astype(np.float32),
                           "input1": rng.integers(0, 7, 5).astype(np.int32)}),
    Case("pad",
         "output0[N, C, HO, WO] = input0[N, C, -1 + HO, -1 + WO].when([-1 + HO >= 0, -1 + HO < 4, "
         "-1 + WO >= 0, -1 + WO < 4], 0.0) where HO in 6, WO in 6",
         {"input0": f32(2, 3, 4, 4)}),
    Case("maxpool",
         "output0[N, C, HO, WO] >=! input0[N, C, HO * 2 + KH, WO * 2 + KW] where HO in 3, WO in 3, "
         "KW in 2, KH in 2",
         {"input0": f32(2, 3, 6, 6)}),
    Case("softmax",
         "temp0[N] >=! input0[N, C]; temp1[N] +=! (input0[N, C] - temp0[N]).call(`exp`); "
         "output0[N, C] = (input0[N, C] - temp0[N]).call(`exp`) / temp1[N]",
         {"input0": f32(4, 10)}),
    Case("batchnorm",
         "output0[N, C, H, W] = bias[C] + scale[C] * (input0[N, C, H, W] - mean[C]) / "
         "(1e-5 + variance[C]).call(`sqrt`)",
         {"input0": f32(2, 3, 2, 2), "mean": f32(3), "variance": f32(3), "scale": f32(3),
          "bias": f32(3)},
         make=lambda rng: {"input0": rng.standard_normal((2, 3, 2, 2)).astype(np.float32),
                           "mean": rng.standard_normal(3).astype(np.float32),
                           "variance": rng.uniform(0.5, 2.0, 3).astype(np.float32),
                           "scale": rng.standard_normal(3).astype(np.float32),
                           "bias": rng.standard_normal(3).astype(np.float32)}),
    Case("condition_relu_dynamic_dtype",
         "output0[N, C] = input0[N, C].when([input0[N, C] > const(0.0).cast(input0[N, C].dtype())],"
         " const(0.0).cast(input0[N, C].dtype()))",
         {"input0": f32(4, 5)}),
    Case("vectorized_boolean_check",
         "output0[N] = ((input0[N, 0] == 0).cast(`int32`) << 24) + ((input0[N, 1] == 0)"
         ".cast(`int32`) << 16) + ((input0[N, 2] == 0).cast(`int32`) << 8) + "
         "(input0[N, 3] == 0).cast(`int32`)",
         {"input0": i32(10, 4)},
         make=lambda rng: {"input0": rng.integers(0, 2, (10, 4)).astype(np.int32)}),
    Case("range_tanh", "output0[N] = N.cast(`float32`).call(`tanh`) where N in 16", {}),
    Case("run_sh_default_relu",
         "output0[N] = input0[N].call(`max`, const(0, dtype=input0.dtype()))", {"input0": f32(64)},
         expect=lambda x: {"output0": np.maximum(x["input0"], 0).astype(np.float64)}),
    Case("conv_fused_reduce_axis_pad",
         f"output0[N, F, HO, WO] +=! input0[N, CKHKW // 9, HO + ((CKHKW % 9) // 3) - 1, "
         f"WO + ((CKHKW % 9) % 3) - 1].when([HO + ((CKHKW % 9) // 3) - 1 >= 0, "
         f"HO + ((CKHKW % 9) // 3) - 1 < 5, WO + ((CKHKW % 9) % 3) - 1 >= 0, "
         f"WO + ((CKHKW % 9) % 3) - 1 < 5], 0.0) * input1[F, CKHKW] where HO in 5, WO in 5",
         {"input0": f32(1, 2, 5, 5), "input1": f32(3, 18)},
         expect=lambda x: {"output0": _conv(np.pad(x["input0"].astype(np.float64),
                                                   ((0, 0), (0, 0), (1, 1), (1, 1))),
                                            x["input1"].reshape(3, 2, 3, 3))}),
    Case("winograd_3x3",
         _winograd(1, 2, 6, 6, 3), {"input0": f32(1, 2, 6, 6), "input1": f32(3, 2, 3, 3)},
         expect=lambda x: {"output0": _conv(x["input0"].astype(np.float64), x["input1"])}),
    Case("layernorm",
         "temp0[N] +=! input0[N, C]; temp1[N] +=! input0[N, C] * input0[N, C]; output0[N, C] = "
         "(input0[N, C] * C.val() - temp0[N]) * (temp1[N] * C.val() - temp0[N] * temp0[N] + 1e-5)"
         ".call(`rsqrt`)",
         {"input0": f32(4, 16)}),
    Case("conv_bias_relu_tail_fusion",
         "conv_out[N, F, HO, WO] +=! input0[N, C, HO + KH, WO + KW] * input1[KH, KW, C, F] "
         "where HO in 4, WO in 4; conv_bias[N, F, HO, WO] = conv_out[N, F, HO, WO] + "
         "input2[0, 0, 0, F]; output0[N, F, HO, WO] = conv_bias[N, F, HO, WO].when("
         "conv_bias[N, F, HO, WO] > 0.0, 0.0)",
         {"input0": f32(1, 3, 5, 5), "input1": f32(2, 2, 3, 4), "input2": f32(1, 1, 1, 4)}),
    Case("add_matmul_head_fusion",
         "temp0[K, N] = input0[N, K] + 100; output0[N, M] +=! temp0[K, N] * input1[K, M] "
         "where K in 10",
         {"input0": f32(6, 12), "input1": f32(12, 5)}),
    Case("logical_bool", "output0[N, M] = input0[N, M] & ~input1[N, M]",
         {"input0": {"dtype": "int8", "shape": [4, 6]}, "input1": {"dtype": "int8", "shape": [4, 6]}}),
    Case("concat",
         "output0[N, F] = input0[N, F].when([F < 4], input1[N, F - 4]) where F in 8",
         {"input0": f32(3, 4), "input1": f32(3, 4)}),
    Case("gather", "output0[N, F] = input0[input1[N, F]]", {"input0": f32(20), "input1": i32(3, 4)},
         make=lambda rng: {"input0": rng.standard_normal(20).astype(np.float32),
                           "input1": rng.integers(0, 20, (3, 4)).astype(np.int32)}),
    Case("avgpool",
         "output0[NC, HO, WO] +=! input0[NC, HO * 3 + KH, WO * 3 + KW] / 9.0 where HO in 2, "
         "WO in 2, KW in 3, KH in 3",
         {"input0": f32(3, 6, 6)}),
    Case("multiple_outputs",
         "output0[N] = input0[N] + input1[N]; output1[N] = input0[N] * 2; "
         "output2[N] = input1[N] + output1[N];",
         {"input0": f32(8), "input1": f32(8)}, ["output0", "output1", "output2"]),
]


# ---- running ---------------------------------------------------------------------------------


def _inputs(case: Case) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(sum(map(ord, case.name)))
    if case.make is not None:
        return case.make(rng)
    return {name: _normal(rng, spec) for name, spec in case.input_dict.items()}


def _run(target: str, comp: Compilation, inputs: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    if target == "c":
        return comp.kernel()(**{k: v.copy() for k, v in inputs.items()})
    require(target)
    comp.run_until("source")
    return run_on_device(comp, inputs)


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_antares_program_matches_reference(case: Case, target: str) -> None:
    comp = Compilation(case.ir, f"<{case.name}>", case.input_dict, case.extra_outputs, target)
    inputs = _inputs(case)
    module = comp.run_until("ein")
    reference = run_reference(module, inputs)
    expected = case.expect(inputs) if case.expect is not None else {}
    outputs = _run(target, comp, inputs)
    dtypes = {o.name: o.dtype for o in comp.program.outputs}
    assert sorted(outputs) == sorted(reference)
    for name, got in outputs.items():
        check_reference(name, got, reference[name], dtypes[name], 16, f"{target}, reference")
        if name in expected:
            check_reference(name, got, expected[name], dtypes[name], 16, f"{target}, NumPy")


# ---- what the new constructs mean --------------------------------------------------------------


def _program(ir: str, input_dict: dict[str, Any], extra: list[str] | None = None) -> Any:
    comp = Compilation(ir, "<t>", input_dict, extra, "c")
    comp.run_until("ein")
    return comp.program


def test_floor_and_ceil_give_integers_and_rfloor_keeps_the_dtype() -> None:
    program = _program(
        "a[N] = x[N].call(`floor`); b[N] = y[N].call(`ceil`); c[N] = h[N].call(`floor`); "
        "d[N] = x[N].call(`rfloor`); e[N] = y[N].call(`rceil`); f[N] = i[N].call(`floor`); "
        "g[N] = x[N].call(`remainder`); k[N] = i[N].call(`rfloor`)",
        {"x": f32(4), "y": {"dtype": "float64", "shape": [4]},
         "h": {"dtype": "float16", "shape": [4]}, "i": i32(4)},
        ["a", "b", "c", "d", "e", "f", "g", "k"],
    )
    dtypes = {o.name: o.dtype for o in program.outputs}
    assert dtypes == {"a": "int32", "b": "int64", "c": "int32", "d": "float32", "e": "float64",
                      "f": "int32", "g": "float32", "k": "int32"}


def test_scatter_into_an_input_returns_a_result_of_its_own() -> None:
    program = _program("data[idx[B], M] =. upd[B, M]",
                       {"data": f32(5, 3), "idx": i32(2), "upd": f32(2, 3)})
    assert [o.name for o in program.outputs] == ["data_out"]
    assert [i.name for i in program.inputs] == ["data", "idx", "upd"]


@pytest.mark.parametrize("ir, message", [
    ("nope[idx[B], M] =. upd[B, M]", "scatter target 'nope' must be an input or the result"),
    ("data[idx[B]] =. upd[B, 0]", "'data' has rank 2"),
    ("data[idx[B], M] =. upd[B, M] + data[0, M]", "statement reads its own output 'data'"),
    ("data[B + 4, M] =. upd[B, M]", "index 0 of 'data' (B + 4) ranges over [4, 5]"),
])
def test_scatter_mistakes_are_located_errors(ir: str, message: str) -> None:
    with pytest.raises(SemanticError, match=re.escape(message)):
        _program(ir, {"data": f32(5, 3), "idx": i32(2), "upd": f32(2, 3)})


def test_scatter_min_and_max_are_refused_by_name() -> None:
    """Antares parses `<=.` / `>=.` but generates no code for them (lang/generic.py)."""
    for op, what in (("<=.", "scatter-min"), (">=.", "scatter-max")):
        with pytest.raises(ParseError, match=f"'{op}' \\(Antares' {what}\\) is not supported"):
            _program(f"data[idx[B], M] {op} upd[B, M]",
                     {"data": f32(5, 3), "idx": i32(2), "upd": f32(2, 3)})


_BIG = {"data": f32(64, 16), "idx": i32(4096), "upd": f32(4096, 16)}


def _big_inputs() -> dict[str, np.ndarray]:
    rng = np.random.default_rng(7)
    return {"data": rng.standard_normal((64, 16)).astype(np.float32),
            "idx": rng.integers(0, 64, 4096).astype(np.int32),
            "upd": rng.standard_normal((4096, 16)).astype(np.float32)}  # fmt: skip


@pytest.mark.parametrize("op", ["=.", "+=."])
def test_default_schedule_keeps_a_big_scatter_sequential(op: str) -> None:
    """4096 x 16 points, enough for the default C schedule to parallelize an ordinary nest;
    the scatter's rows repeat (64 rows), so only loop order gives the last-write result."""
    comp = Compilation(f"data[idx[B], M] {op} upd[B, M]", "<big>", _BIG, None, "c")
    inputs = _big_inputs()
    out = comp.kernel()(**inputs)["data_out"]
    assert "omp" not in comp.results["source"]
    expected = inputs["data"].astype(np.float64).copy()
    for b, row in enumerate(inputs["idx"]):
        expected[row] = expected[row] + inputs["upd"][b] if op == "+=." else inputs["upd"][b]
    check_reference("data_out", out, expected, "float32", 4096, "big scatter")


@pytest.mark.parametrize("op", ["=.", "+=."])
@pytest.mark.parametrize("target, axis, step", [
    ("c", "B", "transform.einc.parallelize %h"),
    ("c", "M", "transform.einc.vectorize %h"),
    ("c", "B", "transform.einc.vectorize_reduction %h"),
    ("opencl", "B", 'transform.einc.bind %h to "block.x"'),
    ("opencl", "M", 'transform.einc.bind %h to "thread.x"'),
])
def test_a_schedule_running_a_scatter_loop_in_parallel_is_refused(
    op: str, target: str, axis: str, step: str
) -> None:
    """Repeated indices would race: the scatter's loops carry a dependence through the
    updated tensor, so parallel, vector and GPU-bound schedules of them are refused."""
    schedule = f"""builtin.module {{
  transform.named_sequence @__transform_main(%root: !transform.any_op) {{
    %h = transform.einc.match stmt "data_out" axis "{axis}" in %root
    {step}
    transform.yield
  }}
}}
"""
    ir = f"data[idx[B], M] {op} upd[B, M]"
    comp = Compilation(ir, "<sched>", _BIG, None, target, schedule)
    with pytest.raises(ScheduleError, match="cannot"):
        comp.run_until("source")


def test_a_dtype_refusal_in_scatter_indices_points_at_the_load() -> None:
    """A target that cannot store a dtype names the tensor where a scatter's index reads it."""
    comp = Compilation("data[x[B].cast(`int32`)] =. u[B]", "<s>",
                       {"data": f32(8), "x": {"dtype": "float64", "shape": [4]}, "u": f32(4)},
                       None, "poplar")  # fmt: skip
    with pytest.raises(TargetError, match=r"<s>:1:6: error: poplar target: float64 tensor 'x'"):
        comp.run_until("source")
