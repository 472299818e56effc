"""Shared test programs: every example of Antares' AntaresIR.md, the MNIST and BERT programs of
its README, and einc's own, with small shapes.

`PROGRAMS` holds `Case(name, ir, input_dict, extra_outputs)` in Antares' `einstein_v2` form;
the f-string examples are expanded by hand (their parameters are noted beside them).
`EIN_FILES` holds `(name, text)` programs in `.ein` file form (declarations, no input_dict).
"""

from __future__ import annotations

from typing import Any, NamedTuple


class Case(NamedTuple):
    name: str
    ir: str
    input_dict: dict[str, Any]
    extra_outputs: list[str] | None = None


def f32(*shape: int) -> dict[str, Any]:
    return {"dtype": "float32", "shape": list(shape)}


def tensor(dtype: str, *shape: int) -> dict[str, Any]:
    return {"dtype": dtype, "shape": list(shape)}


# ---- AntaresIR.md, in its order ------------------------------------------------------------
ANTARES_EXAMPLES = [
    Case("broadcast", "output0[N, F, HO, WO] = input0[N] where F in 8, HO in 2, WO in 2",
         {"input0": f32(4)}),
    Case("broadcast_all", "output0[N, F, HO, WO] = input0[0] where N in 2, F in 4, HO in 2, WO in 2",
         {"input0": f32(1)}),
    Case("matmul", "output0[N, M] +=! input0[N, K] * input1[K, M]",
         {"input0": f32(16, 8), "input1": f32(8, 12)}),
    Case("batch_matmul", "output0[B, N, M] +=! input0[B, N, K] * input1[B, K, M]",
         {"input0": f32(3, 16, 8), "input1": f32(3, 8, 12)}),
    Case("elementwise", "output0[N] = input0[N] + input1[N]",
         {"input0": f32(8 * 8), "input1": f32(8 * 8)}),
    Case("scalar", "output0[] = input0[] + input1[]", {"input0": f32(), "input1": f32()}),
    Case("multiple_outputs",
         "output0[N] = input0[N] + input1[N]; output1[N] = input0[N] * 2; "
         "output2[N] = input1[N] + output1[N];",
         {"input0": f32(8 * 8), "input1": f32(8 * 8)}, ["output0", "output1", "output2"]),
    Case("transpose", "output0[N, C, H, W] = input0[N, H, W, C]", {"input0": f32(2, 5, 5, 3)}),
    Case("reshape", "output0[A, B, C] = input0[A, B, C / 64, C % 64] where C in 128",
         {"input0": f32(3, 3, 2, 64)}),
    Case("reduce_sum", "output0[N] +=! input0[N, C]", {"input0": f32(4, 32)}),
    Case("reduce_min", "output0[N] <=! input0[N, C]", {"input0": f32(4, 32)}),
    Case("cast", "output0[N] = N.cast(`float32`) where N in 16", {}),
    Case("condition_relu", "output0[N, C] = input0[N, C].when([input0[N, C] > 0.0], 0.0)",
         {"input0": f32(8, 6)}),
    Case("condition_relu_dynamic_dtype",
         "output0[N, C] = input0[N, C].when([input0[N, C] > const(0.0).cast(input0[N, C].dtype())], "
         "const(0.0).cast(input0[N, C].dtype()))",
         {"input0": f32(8, 6)}),
    Case("external_function", "output0[N] = N.cast(`float32`).call(`tanh`) where N in 16", {}),
    Case("convolution_no_pad",
         "output0[N, F, HO, WO] +=! input0[N, C, HO + KH, WO + KW] * input1[F, C, KH, KW] "
         "where HO in 6, WO in 6",
         {"input0": f32(2, 4, 8, 8), "input1": f32(6, 4, 3, 3)}),
    # _N, _C, _H, _W, _F, _KH, _KW, _SH, _SW, _PH, _PW = 2, 4, 7, 7, 6, 5, 5, 1, 1, 2, 2
    # _HO = _WO = (7 - 5 + 2 * 2) // 1 + 1 = 7
    Case("convolution_with_pad",
         "output0[N, F, HO, WO] +=! input0[N, C, HO * 1 + KH - 2, WO * 1 + KW - 2].when("
         "[HO * 1 + KH - 2 >= 0, HO * 1 + KH - 2 < 7, WO * 1 + KW - 2 >= 0, WO * 1 + KW - 2 < 7], "
         "0.0) * input1[F, C, KH, KW] where HO in 7, WO in 7",
         {"input0": f32(2, 4, 7, 7), "input1": f32(6, 4, 5, 5)}),
    # _N, _CI, _H, _W, _CO = 2, 4, 8, 8, 6; _HO = _WO = 6; _nH = _nW = 3; _P = 2 * 3 * 3 = 18
    Case("conv_winograd_3x3",
         "helper4x3[N, M] = const(1.0).when([N * 3 + M == 0, N * 3 + M == 11], const(0.0).when("
         "[N * 3 + M == 1, N * 3 + M == 2, N * 3 + M == 9, N * 3 + M == 10], const(-0.5).when("
         "[N * 3 + M == 4], 0.5, merge_op=`any`), merge_op=`any`), merge_op=`any`) "
         "where N in 4, M in 3; "
         "transform_filter[EPS, NU, CI, CO] +=! ((input1[CO, CI, Rkh, Rkw] * helper4x3[EPS, Rkh] "
         "* helper4x3[NU, Rkw])); "
         "input_tile[C, B, EPS, NU] = input0[B // (3 * 3), C, B // 3 % 3 * 2 + EPS, "
         "B % 3 * 2 + NU] where C in 4, B in 18, EPS in 4, NU in 4; "
         "helper4x4[N, M] = const(1.0).when([N * 4 + M == 0, N * 4 + M == 6, N * 4 + M == 9, "
         "N * 4 + M == 10, N * 4 + M == 15], const(-1.0).when([N * 4 + M == 5, N * 4 + M == 7, "
         "N * 4 + M == 8], 0.0, merge_op=`any`), merge_op=`any`) where N in 4, M in 4; "
         "transform_input[EPS, NU, C, B] +=! input_tile[C, B, K1, K2] * helper4x4[K1, EPS] * "
         "helper4x4[K2, NU] where EPS in 4, NU in 4, C in 4, B in 18; "
         "batch_gemm[EPS, NU, K, B] +=! transform_filter[EPS, NU, CI, K] * "
         "transform_input[EPS, NU, CI, B] where EPS in 4, NU in 4, K in 6, B in 18; "
         "helper4x2[N, M] = const(0.0) .when([N * 2 + M == 1, N * 2 + M == 6], const(-1.0).when("
         "[N * 2 + M == 3], 1.0, merge_op=`any`), merge_op=`any`) where N in 4, M in 2; "
         "inverse[K, B, VH, VW] +=! batch_gemm[K1, K2, K, B] * helper4x2[K1, VH] * "
         "helper4x2[K2, VW] where K in 6, B in 18, VH in 2, VW in 2; "
         "output0[N, K, H, W] = inverse[K, N * 3 * 3 + H // 2 * 3 + W // 2, H % 2, W % 2] "
         "where N in 2, K in 6, H in 6, W in 6",
         {"input0": f32(2, 4, 8, 8), "input1": f32(6, 4, 3, 3)}),
    Case("depth_to_space", "output0[N, H, C0, W, C1, C2] = input0[N, H, W, C0, C1, C2]",
         {"input0": f32(1, 4, 4, 2, 2, 4)}),
    Case("depthwise_conv",
         "output0[N, C, HO, WO] +=! input0[N, C, HO + KH, WO + KW] * input1[KH, KW, C, 0] "
         "where HO in 6, WO in 6",
         {"input0": f32(2, 4, 8, 8), "input1": f32(3, 3, 4, 1)}),
    Case("slice", "output0[N, F] = input0[N, F, 2]", {"input0": f32(1, 4, 5)}),
    Case("concat", "output0[N, F] = input0[N, F].when([F < 8], input1[N, F - 8]) where F in 16",
         {"input0": f32(4, 8), "input1": f32(4, 8)}),
    Case("one_hot", "output0[N, F] = const(1.0).when([input0[N] == F], const(0.0)) where F in 8",
         {"input0": tensor("int32", 4)}),
    Case("take", "output0[F, C] = input0[input1[F], C]",
         {"input0": f32(10, 6), "input1": tensor("int32", 5)}),
    Case("gather", "output0[N, F] = input0[input1[N, F]]",
         {"input0": f32(32), "input1": tensor("int32", 4, 8)}),
    Case("pad",
         "output0[N, C, HO, WO] = input0[N, C, -1 + HO, -1 + WO].when([-1 + HO >= 0, -1 + HO < 6, "
         "-1 + WO >= 0, -1 + WO < 6], 0.0) where HO in 8, WO in 8",
         {"input0": f32(2, 3, 6, 6)}),
    Case("div_no_nan", "output0[N] = (input0[N] / input1[N]).when([input1[N] != 0], 0.0)",
         {"input0": f32(2 * 32), "input1": f32(2 * 32)}),
    Case("max_pool",
         "output0[N, C, HO, WO] >=! input0[N, C, HO * 2 + KH, WO * 2 + KW] "
         "where HO in 6, WO in 6, KW in 2, KH in 2",
         {"input0": f32(2, 3, 12, 12)}),
    Case("avg_pool",
         "temp0[NC, HO, WO] +=! input0[NC, HO * 3 + KH, WO * 3 + KW] "
         "where HO in 3, WO in 3, KW in 3, KH in 3; "
         "output0[NC, HO, WO] = temp0[NC, HO, WO] * 0.111111",
         {"input0": f32(4, 9, 9)}),
    Case("tile", "output0[ON, OC] = input0[ON % 2, OC % 16] where ON in 6, OC in 32",
         {"input0": f32(2, 16)}),
    Case("softmax",
         "temp0[N] >=! input0[N, C]; temp1[N] +=! (input0[N, C] - temp0[N]).call(`exp`); "
         "output0[N, C] = (input0[N, C] - temp0[N]).call(`exp`) / temp1[N]",
         {"input0": f32(4, 16)}),
    Case("batch_norm_inference",
         "output0[N, C, H, W] = bias[C] + scale[C] * (input0[N, C, H, W] - mean[C]) / "
         "(1e-5 + variance[C]).call(`sqrt`)",
         {"input0": f32(2, 8, 4, 4), "mean": f32(8), "variance": f32(8), "scale": f32(8),
          "bias": f32(8)}),
    Case("logical_bool", "output0[N, M] = input0[N, M] & ~input1[N, M]",
         {"input0": tensor("int8", 16, 8), "input1": tensor("int8", 16, 8)}),
    Case("sigmoid", "output0[N, M] = 1.0 / (1.0 + (-input0[N, M]).call(`exp`))",
         {"input0": f32(16, 8)}),
    Case("add_matmul_head_fusion",
         "temp0[K, N] = input0[N, K] + 100; output0[N, M] +=! temp0[K, N] * input1[K, M] "
         "where K in 10",
         {"input0": f32(16, 12), "input1": f32(12, 12)}),
    Case("conv_bias_relu_tail_fusion",
         "conv_out[N, F, HO, WO] +=! input0[N, C, HO + KH, WO + KW] * input1[KH, KW, C, F] "
         "where HO in 8, WO in 8; "
         "conv_bias[N, F, HO, WO] = conv_out[N, F, HO, WO] + input2[0, 0, 0, F]; "
         "output0[N, F, HO, WO] = conv_bias[N, F, HO, WO].when(conv_bias[N, F, HO, WO] > 0.0, 0.0)",
         {"input0": f32(1, 4, 8, 8), "input1": f32(1, 1, 4, 4), "input2": f32(1, 1, 1, 4)}),
]  # fmt: skip

# ---- Antares-README.md: MNIST inference and BERT-layer fragments ----------------------------
README_EXAMPLES = [
    Case("mnist_inference",
         "data_0[N, M] +=!  data[N, K] * weight_0[K, M];   "
         "data_1[N, K] =   (data_0[N, K] + bias_0[K]).call(`max`, [0.0]);   "
         "data_2[N, M] +=!  data_1[N, K] * weight_1[K, M];   "
         "data_3[N, K] =   (data_2[N, K] + bias_1[K]).call(`max`, [0.0]);   "
         "data_4[N, M] +=!  data_3[N, K] * weight_2[K, M];   "
         "data_5[N, K] =   (data_4[N, K] + bias_2[K]);",
         {"data": f32(4, 16), "weight_0": f32(16, 12), "weight_1": f32(12, 12),
          "weight_2": f32(12, 10), "bias_0": f32(12), "bias_1": f32(12), "bias_2": f32(10)},
         []),
    # {H} = 4
    Case("bert_attention",
         """merged_layer_local[R, B, S1, N1, H1] +=! input_tensor[B, S1, N, H] * qkv_weight[R, N, H, N1, H1];
merged_layer_trans[R, B, N1, S1, H1] = merged_layer_local[R, B, S1, N1, H1] + qkv_bias[R, N1, H1];
attention_scores[B, N1, S1, S2] +=! merged_layer_trans[0, B, N1, S1, H1] * merged_layer_trans[1, B, N1, S2, H1] / const(4).cast(`float32`);
  softmax_1_temp0[B, N1] >=! attention_scores[B, N1, S1, S2];
  softmax_1_temp1[B, N1] +=! (attention_scores[B, N1, S1, S2] - softmax_1_temp0[B, N1]).call(`exp`);
attention_probs[B, N1, S1, S2] = (attention_scores[B, N1, S1, S2] - softmax_1_temp0[B, N1]).call(`exp`) / softmax_1_temp1[B, N1];""",
         {"input_tensor": f32(2, 4, 2, 4), "qkv_weight": f32(3, 2, 4, 2, 4),
          "qkv_bias": f32(3, 2, 4)}),
    # {N * H} = 8
    Case("bert_layer_norm",
         """layer_norm_2_src[B, S1, N2, H2] = layer_output[B, S1, N2, H2] + attention_output_norm[B, S1, N2, H2];
  layer_norm_2_temp0[B, S1] += layer_norm_2_src[B, S1, N2, H2];
  layer_norm_2_temp1[B, S1] += layer_norm_2_src[B, S1, N2, H2] * layer_norm_2_src[B, S1, N2, H2];
layer_output_norm[B, S1, N2, H2] = (layer_norm_2_src[B, S1, N2, H2] * 8 - layer_norm_2_temp0[B, S1]) * (layer_norm_2_temp0[B, S1] * 8 - layer_norm_2_temp1[B, S1] * layer_norm_2_temp1[B, S1]).call(`max`, [1e-8]).call(`rsqrt`);""",
         {"layer_output": f32(2, 4, 2, 4), "attention_output_norm": f32(2, 4, 2, 4)}),
]  # fmt: skip

# ---- einc's own ------------------------------------------------------------------------------
OWN_EXAMPLES = [
    Case("layer_norm",
         "mean[N] +=! input0[N, C] / C.val().cast(`float32`); "
         "var[N] +=! (input0[N, C] - mean[N]) * (input0[N, C] - mean[N]) / 16.0; "
         "output0[N, C] = (input0[N, C] - mean[N]) * (var[N] + 1e-5).call(`rsqrt`) * gamma[C] "
         "+ beta[C]",
         {"input0": f32(4, 16), "gamma": f32(16), "beta": f32(16)}),
    Case("gelu_erf",
         "output0[N, C] = 0.5 * input0[N, C] * (1.0 + (input0[N, C] * 0.7071067811865476)"
         ".call(`erf`))",
         {"input0": f32(4, 16)}),
    Case("int_floor_div_mod",
         "output0[N] = input0[N] / input1[N] + input0[N] // 3 * 10 + input0[N] % input1[N] "
         "- (-input0[N]) % 7",
         {"input0": tensor("int32", 16), "input1": tensor("int32", 16)}),
    Case("int_shifts",
         "output0[N] = (input0[N] << 2) + (input0[N] >> input1[N]) + (1 << 3)",
         {"input0": tensor("int64", 8), "input1": tensor("int64", 8)}),
    Case("int8_logic_to_int8",
         "output0[N] = (input0[N] > 0) | ~(input1[N] == 3)",
         {"input0": tensor("int8", 8), "input1": tensor("int8", 8)}),
    Case("float_floor_div_mod",
         "output0[N] = input0[N] // input1[N] + input0[N] % input1[N] + input0[N] % -2.5",
         {"input0": f32(16), "input1": f32(16)}),
    Case("mixed_promotion",
         "output0[N] = input0[N] + input1[N] * input2[N] + N",
         {"input0": tensor("int8", 8), "input1": tensor("int16", 8),
          "input2": tensor("float16", 8)}),
    Case("float64_math",
         "output0[N] = (input0[N].call(`abs`) + 1.0).call(`log`) + input0[N].call(`sin`) "
         "* input0[N].call(`cos`) + input0[N].call(`exp2`) + input0[N].call(`tan`) "
         "+ input0[N].call(`log2`) + input0[N].call(`log10`) + input0[N].call(`floor`) "
         "+ input0[N].call(`ceil`) + input0[N].call(`round`) + input0[N].call(`sigmoid`) "
         "+ input0[N].call(`tanh`) + input0[N].call(`sqrt`)",
         {"input0": tensor("float64", 8)}),
    Case("pow_max_min",
         "output0[N] = input0[N].call(`pow`, [2.0]) + input0[N].call(`max`, [input1[N], 0.5]) "
         "+ input0[N].call(`min`, [input1[N]]) + input2[N].call(`pow`, [3]) "
         "+ input2[N].call(`max`, [1, input2[N] * 2]).cast(`float32`) "
         "+ input2[N].call(`abs`).cast(`float32`)",
         {"input0": f32(8), "input1": f32(8), "input2": tensor("int32", 8)}),
    Case("float16_casts",
         "output0[N] = (input0[N].cast(`float32`) * 2.0).cast(`float16`) + "
         "input1[N].cast(`float16`) + const(1, `float16`)",
         {"input0": tensor("float16", 8), "input1": tensor("int64", 8)}),
    Case("product_reduction", "output0[N] *=! input0[N, K]", {"input0": f32(4, 5)}),
    Case("and_or_reductions",
         "all_pos[N] &=! input0[N, K] > 0.0; any_pos[N] |=! input0[N, K] > 0.0; "
         "output0[N] = all_pos[N] + any_pos[N]",
         {"input0": f32(4, 5)}, ["all_pos", "any_pos"]),
    Case("scalar_reduction", "output0[] +=! input0[N] * input1[N]",
         {"input0": f32(16), "input1": f32(16)}),
    Case("masked_max_without_else",
         "output0[N] >=! input0[N, K].when(K < 3)", {"input0": f32(4, 6)}),
    Case("when_without_else_assign",
         "output0[N] = input0[N].when([N > 2, N < 6])", {"input0": f32(8)}),
    Case("short_circuit_condition",
         "output0[N] = input0[N].when([N >= 1, input0[N - 1] > 0.0], -1.0) where N in 8",
         {"input0": f32(8)}),
    Case("computed_gather",
         "output0[N] = input0[(input1[N] * 2 + N) % 16]",
         {"input0": f32(16), "input1": tensor("int32", 8)}),
    Case("gather_2d_with_int64_index",
         "output0[N, C] = input0[input1[N], C + 1] where C in 3",
         {"input0": f32(6, 4), "input1": tensor("int64", 5)}),
    Case("axis_val_and_dtype",
         "output0[N, M] = (N * M.val() + M).cast(input0[N, M].dtype()) + "
         "const(0.5, input0[N, M].dtype())",
         {"input0": tensor("float64", 3, 4)}),
    Case("int_sum_to_int64",
         "output0[N] +=! input0[N, K].cast(`int64`) * K",
         {"input0": tensor("int16", 4, 8)}),
    Case("bool_output", "output0[N] = input0[N] > input1[N]",
         {"input0": f32(8), "input1": f32(8)}),
    Case("newline_separated",
         "temp0[N] = input0[N] * 2\noutput0[N] = temp0[N] + input0[\n  N\n]",
         {"input0": f32(8)}),
    Case("min_reduction_int",
         "output0[N] <=! input0[N, K] where K in 4",
         {"input0": tensor("int32", 3, 6)}),
    Case("arange_int", "output0[N] = N * 2 - 3 where N in 10", {}),
    Case("literal_only", "output0[N] = 2.5 where N in 3", {}),
    Case("unused_input_kept", "output0[N] = input0[N]", {"input0": f32(4), "input1": f32(2)}),
]  # fmt: skip

PROGRAMS: list[Case] = ANTARES_EXAMPLES + README_EXAMPLES + OWN_EXAMPLES

EIN_FILES: list[tuple[str, str]] = [
    ("matmul_file", """# MatMul, 16 x 8 x 12
input input0: float32[16, 8]
input input1: float32[8, 12]

output0[N, M] +=! input0[N, K] * input1[K, M]
"""),
    ("softmax_file", """// softmax over rows, two results
input x: float32[4, 2 * 8]
output row_max
row_max[N] >=! x[N, C]
row_sum[N] +=! (x[N, C] - row_max[N]).call(`exp`)
y[N, C] = (x[N, C] - row_max[N]).call(`exp`) / row_sum[N]
"""),
    ("scalar_file", """input a: float64[]
input b: int32[]
c[] = a[] * b[]  # promoted to float64
"""),
    ("tensor_named_input", """input input: float32[4]
output[N] = input[N] * 2.0
"""),
]  # fmt: skip
