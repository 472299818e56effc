"""Hand-written NumPy float64 references for every program of `tests/programs.py`.

Each reference is written from what the program computes (a matmul is `a @ b`, a pad is
`np.pad`, Winograd is a direct convolution), not by transcribing the statements, and never
uses einc. `REFERENCES[name]` gives:
- `fn(inputs) -> {result name: float64 / int64 array}`;
- `dtypes`: the dtype einc must return for each result (docs/LANGUAGE.md's typing rules);
- `inputs`: how to draw valid inputs where the default (floats +-U(0.1, 2), ints in [-9, 9]
  without 0) would be wrong: index ranges, positive values, zeros for logical operators;
- `reduce`: the reduction length behind each result, which scales its absolute tolerance.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

Arrays = dict[str, np.ndarray]


# ---- inputs ------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Draw:
    """How one input is drawn: `signed` floats sign * U(0.1, 2); `positive` floats U(0.5, 2);
    ints uniform in [lo, hi] (without 0 unless `zero`)."""

    kind: str = "default"
    lo: int = -9
    hi: int = 9
    zero: bool = False

    def make(self, rng: np.random.Generator, dtype: str, shape: tuple[int, ...]) -> np.ndarray:
        if np.dtype(dtype).kind == "f":
            if self.kind == "positive":
                return rng.uniform(0.5, 2.0, shape).astype(dtype)
            mag = rng.uniform(0.1, 2.0, shape)
            return np.where(rng.integers(0, 2, shape) == 1, mag, -mag).astype(dtype)
        values = rng.integers(self.lo, self.hi + 1, shape)
        while not self.zero and (values == 0).any():
            values = np.where(values == 0, rng.integers(self.lo, self.hi + 1, shape), values)
        return np.asarray(values).astype(dtype)


def index(n: int) -> Draw:
    """Valid indices into a dimension of size n."""
    return Draw("int", 0, n - 1, zero=True)


POSITIVE = Draw("positive")


def make_inputs(
    input_dict: dict[str, Any], draws: dict[str, Draw], rng: np.random.Generator
) -> Arrays:
    return {
        name: draws.get(name, Draw()).make(rng, spec["dtype"], tuple(spec["shape"]))
        for name, spec in input_dict.items()
    }


def ein_file_inputs(text: str) -> dict[str, Any]:
    """The `input NAME: DTYPE[d0, ...]` declarations of a `.ein` text, as an input_dict."""
    decls = {}
    for m in re.finditer(r"^input\s+(\w+)\s*:\s*(\w+)\[([^\]]*)\]", text, re.MULTILINE):
        dims = [int(eval(d, {"__builtins__": {}})) for d in m.group(3).split(",") if d.strip()]
        decls[m.group(1)] = {"dtype": m.group(2), "shape": dims}
    return decls


# ---- the references ----------------------------------------------------------------------------


@dataclass(frozen=True)
class Reference:
    fn: Callable[[Arrays], Arrays]
    dtypes: dict[str, str]
    inputs: dict[str, Draw] = field(default_factory=dict)
    reduce: dict[str, int] = field(default_factory=dict)


REFERENCES: dict[str, Reference] = {}


def ref(name: str, dtypes: dict[str, str] | str = "float32", inputs: dict[str, Draw] | None = None,
        reduce: dict[str, int] | int | None = None):  # fmt: skip
    """Registers a reference. `dtypes`/`reduce` given as one value apply to `output0`."""

    def register(fn: Callable[..., Any]) -> Callable[..., Any]:
        def run(x: Arrays) -> Arrays:
            f = {k: v.astype(np.float64) if v.dtype.kind == "f" else v.astype(np.int64)
                 for k, v in x.items()}  # fmt: skip
            out = fn(**f)
            return out if isinstance(out, dict) else {"output0": out}

        dt = dtypes if isinstance(dtypes, dict) else {"output0": dtypes}
        red = reduce if isinstance(reduce, dict) else {"output0": reduce or 1}
        REFERENCES[name] = Reference(run, dt, inputs or {}, red)
        return fn

    return register


def conv2d(x: np.ndarray, w: np.ndarray, ho: int, wo: int) -> np.ndarray:
    """Valid cross-correlation, stride 1: x [N, C, H, W], w [F, C, KH, KW] -> [N, F, ho, wo]."""
    n, _, _, _ = x.shape
    f, _, kh, kw = w.shape
    out = np.zeros((n, f, ho, wo))
    for i in range(kh):
        for j in range(kw):
            out += np.einsum("nchw,fc->nfhw", x[:, :, i : i + ho, j : j + wo], w[:, :, i, j])
    return out


def softmax_rows(x: np.ndarray) -> np.ndarray:
    e = np.exp(x - x.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


def erf(x: np.ndarray) -> np.ndarray:
    return np.vectorize(math.erf, otypes=[np.float64])(x)


def round_half_away(x: np.ndarray) -> np.ndarray:
    return np.sign(x) * np.floor(np.abs(x) + 0.5)


# -- AntaresIR.md ---------------------------------------------------------------------------------
@ref("broadcast")
def ref_broadcast(input0):
    return np.broadcast_to(input0[:, None, None, None], (4, 8, 2, 2))


@ref("broadcast_all")
def ref_broadcast_all(input0):
    return np.full((2, 4, 2, 2), input0[0])


@ref("matmul", reduce=8)
def ref_matmul(input0, input1):
    return input0 @ input1


@ref("batch_matmul", reduce=8)
def ref_batch_matmul(input0, input1):
    return np.matmul(input0, input1)


@ref("elementwise")
def ref_elementwise(input0, input1):
    return input0 + input1


@ref("scalar")
def ref_scalar(input0, input1):
    return input0 + input1


@ref("multiple_outputs", {"output0": "float32", "output1": "float32", "output2": "float32"})
def ref_multiple_outputs(input0, input1):
    return {"output0": input0 + input1, "output1": input0 * 2, "output2": input1 + input0 * 2}


@ref("transpose")
def ref_transpose(input0):
    return input0.transpose(0, 3, 1, 2)


@ref("reshape")
def ref_reshape(input0):
    return input0.reshape(3, 3, 128)


@ref("reduce_sum", reduce=32)
def ref_reduce_sum(input0):
    return input0.sum(axis=1)


@ref("reduce_min")
def ref_reduce_min(input0):
    return input0.min(axis=1)


@ref("cast")
def ref_cast():
    return np.arange(16.0)


@ref("condition_relu")
def ref_condition_relu(input0):
    return np.maximum(input0, 0.0)


@ref("condition_relu_dynamic_dtype")
def ref_condition_relu_dynamic_dtype(input0):
    return np.maximum(input0, 0.0)


@ref("external_function")
def ref_external_function():
    return np.tanh(np.arange(16.0))


@ref("convolution_no_pad", reduce=4 * 3 * 3)
def ref_convolution_no_pad(input0, input1):
    return conv2d(input0, input1, 6, 6)


@ref("convolution_with_pad", reduce=4 * 5 * 5)
def ref_convolution_with_pad(input0, input1):
    padded = np.pad(input0, ((0, 0), (0, 0), (2, 2), (2, 2)))
    return conv2d(padded, input1, 7, 7)


@ref("conv_winograd_3x3", reduce=4 * 16 * 16)
def ref_conv_winograd_3x3(input0, input1):
    # Winograd F(2x2, 3x3) computes the valid 3x3 convolution exactly (up to rounding).
    return conv2d(input0, input1, 6, 6)


@ref("depth_to_space")
def ref_depth_to_space(input0):
    return input0.transpose(0, 1, 3, 2, 4, 5)


@ref("depthwise_conv", reduce=9)
def ref_depthwise_conv(input0, input1):
    out = np.zeros((2, 4, 6, 6))
    for i in range(3):
        for j in range(3):
            out += input0[:, :, i : i + 6, j : j + 6] * input1[i, j, :, 0][None, :, None, None]
    return out


@ref("slice")
def ref_slice(input0):
    return input0[:, :, 2]


@ref("concat")
def ref_concat(input0, input1):
    return np.concatenate([input0, input1], axis=1)


@ref("one_hot", inputs={"input0": index(8)})
def ref_one_hot(input0):
    return (input0[:, None] == np.arange(8)[None, :]).astype(np.float64)


@ref("take", inputs={"input1": index(10)})
def ref_take(input0, input1):
    return input0[input1]


@ref("gather", inputs={"input1": index(32)})
def ref_gather(input0, input1):
    return input0[input1]


@ref("pad")
def ref_pad(input0):
    return np.pad(input0, ((0, 0), (0, 0), (1, 1), (1, 1)))


@ref("div_no_nan")
def ref_div_no_nan(input0, input1):
    return np.where(input1 != 0, input0 / np.where(input1 != 0, input1, 1.0), 0.0)


@ref("max_pool")
def ref_max_pool(input0):
    return input0.reshape(2, 3, 6, 2, 6, 2).max(axis=(3, 5))


@ref("avg_pool", reduce=9)
def ref_avg_pool(input0):
    return input0.reshape(4, 3, 3, 3, 3).sum(axis=(2, 4)) * 0.111111


@ref("tile")
def ref_tile(input0):
    return np.tile(input0, (3, 2))


@ref("softmax", reduce=16)
def ref_softmax(input0):
    return softmax_rows(input0)


@ref("batch_norm_inference", inputs={"variance": POSITIVE})
def ref_batch_norm_inference(input0, mean, variance, scale, bias):
    c = (slice(None), None, None)
    return bias[c] + scale[c] * (input0 - mean[c]) / np.sqrt(1e-5 + variance[c])


@ref("logical_bool", "int8", inputs={"input0": Draw("int", 0, 2, True),
                                     "input1": Draw("int", 0, 2, True)})  # fmt: skip
def ref_logical_bool(input0, input1):
    return ((input0 != 0) & (input1 == 0)).astype(np.int64)


@ref("sigmoid")
def ref_sigmoid(input0):
    return 1.0 / (1.0 + np.exp(-input0))


@ref("add_matmul_head_fusion", reduce=10)
def ref_add_matmul_head_fusion(input0, input1):
    return (input0[:, :10] + 100) @ input1[:10]


@ref("conv_bias_relu_tail_fusion", reduce=4)
def ref_conv_bias_relu_tail_fusion(input0, input1, input2):
    conv = np.einsum("nchw,cf->nfhw", input0, input1[0, 0])
    return np.maximum(conv + input2[0, 0, 0][None, :, None, None], 0.0)


# -- Antares README -------------------------------------------------------------------------------
@ref("mnist_inference", {"data_5": "float32"}, reduce={"data_5": 16 * 12})
def ref_mnist_inference(data, weight_0, weight_1, weight_2, bias_0, bias_1, bias_2):
    h = np.maximum(data @ weight_0 + bias_0, 0.0)
    h = np.maximum(h @ weight_1 + bias_1, 0.0)
    return {"data_5": h @ weight_2 + bias_2}


@ref("bert_attention", {"attention_probs": "float32"}, reduce={"attention_probs": 64})
def ref_bert_attention(input_tensor, qkv_weight, qkv_bias):
    # q/k/v projection: [R, B, N1, S, H1]
    proj = np.einsum("bsnh,rnhgk->rbgsk", input_tensor, qkv_weight) + qkv_bias[:, None, :, None, :]
    scores = np.einsum("bgsk,bgtk->bgst", proj[0], proj[1]) / 4.0
    # the README's softmax normalises over both sequence axes (its max and sum run over S1, S2)
    flat = scores.reshape(*scores.shape[:2], -1)
    return {"attention_probs": softmax_rows(flat).reshape(scores.shape)}


@ref("bert_layer_norm", {"layer_output_norm": "float32"}, reduce={"layer_output_norm": 64})
def ref_bert_layer_norm(layer_output, attention_output_norm):
    src = layer_output + attention_output_norm
    s = src.sum(axis=(2, 3))[:, :, None, None]
    sq = (src * src).sum(axis=(2, 3))[:, :, None, None]
    return {"layer_output_norm": (src * 8 - s) / np.sqrt(np.maximum(s * 8 - sq * sq, 1e-8))}


# -- einc's own -----------------------------------------------------------------------------------
@ref("layer_norm", reduce=16)
def ref_layer_norm(input0, gamma, beta):
    mean = input0.mean(axis=1, keepdims=True)
    var = ((input0 - mean) ** 2).mean(axis=1, keepdims=True)
    return (input0 - mean) / np.sqrt(var + 1e-5) * gamma + beta


@ref("gelu_erf")
def ref_gelu_erf(input0):
    return 0.5 * input0 * (1.0 + erf(input0 / np.sqrt(2.0)))


@ref("int_floor_div_mod", "int32")
def ref_int_floor_div_mod(input0, input1):
    a, b = input0, input1
    return a // b + (a // 3) * 10 + a % b - (-a) % 7  # Python floor semantics, like NumPy's


@ref("int_shifts", "int64", inputs={"input1": Draw("int", 0, 5, True)})
def ref_int_shifts(input0, input1):
    return input0 * 4 + np.floor_divide(input0, 2**input1) + 8


@ref("int8_logic_to_int8", "int8",
     inputs={"input0": Draw("int", -3, 3, True), "input1": Draw("int", 0, 5, True)})  # fmt: skip
def ref_int8_logic_to_int8(input0, input1):
    return ((input0 > 0) | (input1 != 3)).astype(np.int64)


@ref("float_floor_div_mod")
def ref_float_floor_div_mod(input0, input1):
    a, b = input0, input1
    return np.floor(a / b) + (a - b * np.floor(a / b)) + (a - (-2.5) * np.floor(a / -2.5))


@ref("mixed_promotion", "float16")
def ref_mixed_promotion(input0, input1, input2):
    return input0 + input1 * input2 + np.arange(8)


@ref("float64_math", "float64", inputs={"input0": POSITIVE})
def ref_float64_math(input0):
    x = input0
    return (np.log(np.abs(x) + 1.0) + np.sin(x) * np.cos(x) + 2.0**x + np.tan(x) + np.log2(x)
            + np.log10(x) + np.floor(x) + np.ceil(x) + round_half_away(x) + 1 / (1 + np.exp(-x))
            + np.tanh(x) + np.sqrt(x))  # fmt: skip


@ref("pow_max_min")
def ref_pow_max_min(input0, input1, input2):
    return (input0**2 + np.maximum(np.maximum(input0, input1), 0.5) + np.minimum(input0, input1)
            + input2.astype(np.float64) ** 3 + np.maximum(np.maximum(input2, 1), input2 * 2)
            + np.abs(input2))  # fmt: skip


@ref("float16_casts", "float16")
def ref_float16_casts(input0, input1):
    return input0 * 2.0 + input1 + 1.0


@ref("product_reduction", reduce=5)
def ref_product_reduction(input0):
    return input0.prod(axis=1)


@ref("and_or_reductions", {"all_pos": "int8", "any_pos": "int8", "output0": "int8"})
def ref_and_or_reductions(input0):
    all_pos = (input0 > 0).all(axis=1).astype(np.int64)
    any_pos = (input0 > 0).any(axis=1).astype(np.int64)
    return {"all_pos": all_pos, "any_pos": any_pos, "output0": all_pos + any_pos}


@ref("scalar_reduction", reduce=16)
def ref_scalar_reduction(input0, input1):
    return np.dot(input0, input1)


@ref("masked_max_without_else")
def ref_masked_max_without_else(input0):
    return input0[:, :3].max(axis=1)


@ref("when_without_else_assign")
def ref_when_without_else_assign(input0):
    n = np.arange(8)
    return np.where((n > 2) & (n < 6), input0, 0.0)


@ref("short_circuit_condition")
def ref_short_circuit_condition(input0):
    prev_pos = np.concatenate([[False], input0[:-1] > 0])
    return np.where(prev_pos, input0, -1.0)


@ref("computed_gather")
def ref_computed_gather(input0, input1):
    return input0[np.mod(input1 * 2 + np.arange(8), 16)]


@ref("gather_2d_with_int64_index", inputs={"input1": index(6)})
def ref_gather_2d_with_int64_index(input0, input1):
    return input0[input1][:, 1:4]


@ref("axis_val_and_dtype", "float64")
def ref_axis_val_and_dtype(input0):
    return np.arange(12, dtype=np.float64).reshape(3, 4) + 0.5


@ref("int_sum_to_int64", "int64")
def ref_int_sum_to_int64(input0):
    return input0 @ np.arange(8)


@ref("bool_output", "int8")
def ref_bool_output(input0, input1):
    return (input0 > input1).astype(np.int64)


@ref("newline_separated")
def ref_newline_separated(input0):
    return input0 * 3


@ref("min_reduction_int", "int32")
def ref_min_reduction_int(input0):
    return input0[:, :4].min(axis=1)


@ref("arange_int", "int32")
def ref_arange_int():
    return np.arange(10) * 2 - 3


@ref("literal_only")
def ref_literal_only():
    return np.full(3, 2.5)


@ref("unused_input_kept")
def ref_unused_input_kept(input0, input1):
    return input0


# -- .ein files ------------------------------------------------------------------------------------
@ref("matmul_file", reduce=8)
def ref_matmul_file(input0, input1):
    return input0 @ input1


@ref("softmax_file", {"row_max": "float32", "y": "float32"}, reduce={"y": 16})
def ref_softmax_file(x):
    return {"row_max": x.max(axis=1), "y": softmax_rows(x)}


@ref("scalar_file", {"c": "float64"})
def ref_scalar_file(a, b):
    return {"c": a * b}


@ref("tensor_named_input", {"output": "float32"})
def ref_tensor_named_input(input):  # noqa: A002 - the program's tensor is called `input`
    return {"output": input * 2.0}
