"""The frontend on valid programs: every shared test program parses, gets the right result
shapes and dtypes, builds a verified ein module that round-trips through xDSL's printer and
parser, and follows the IR conventions the lowering relies on."""

from __future__ import annotations

import pytest
from xdsl.dialects import affine, arith, func, math, scf
from xdsl.dialects.builtin import IndexType, ModuleOp, StringAttr, TensorType, f32, i32
from xdsl.ir import BlockArgument, Operation
from xdsl.parser import Parser

from einc.dialects.context import make_context
from einc.dialects.ein import Combiner, EinsumOp, LoadOp, YieldOp
from einc.errors import SemanticError
from einc.frontend import Program, TensorInfo, build_module, checked, parse_program
from einc.frontend import ast as syntax
from einc.frontend.diagnostics import SourceText
from einc.frontend.lexer import Kind, tokenize
from einc.frontend.parser import parse
from tests.programs import EIN_FILES, PROGRAMS, Case, f32 as f32_input, tensor

EXPECTED_OUTPUTS: dict[str, list[tuple[str, str, tuple[int, ...]]]] = {
    "broadcast": [("output0", "float32", (4, 8, 2, 2))],
    "broadcast_all": [("output0", "float32", (2, 4, 2, 2))],
    "matmul": [("output0", "float32", (16, 12))],
    "batch_matmul": [("output0", "float32", (3, 16, 12))],
    "elementwise": [("output0", "float32", (64,))],
    "scalar": [("output0", "float32", ())],
    "multiple_outputs": [("output0", "float32", (64,)), ("output1", "float32", (64,)),
                         ("output2", "float32", (64,))],
    "transpose": [("output0", "float32", (2, 3, 5, 5))],
    "reshape": [("output0", "float32", (3, 3, 128))],
    "reduce_sum": [("output0", "float32", (4,))],
    "reduce_min": [("output0", "float32", (4,))],
    "cast": [("output0", "float32", (16,))],
    "condition_relu": [("output0", "float32", (8, 6))],
    "condition_relu_dynamic_dtype": [("output0", "float32", (8, 6))],
    "external_function": [("output0", "float32", (16,))],
    "convolution_no_pad": [("output0", "float32", (2, 6, 6, 6))],
    "convolution_with_pad": [("output0", "float32", (2, 6, 7, 7))],
    "conv_winograd_3x3": [("output0", "float32", (2, 6, 6, 6))],
    "depth_to_space": [("output0", "float32", (1, 4, 2, 4, 2, 4))],
    "depthwise_conv": [("output0", "float32", (2, 4, 6, 6))],
    "slice": [("output0", "float32", (1, 4))],
    "concat": [("output0", "float32", (4, 16))],
    "one_hot": [("output0", "float32", (4, 8))],
    "take": [("output0", "float32", (5, 6))],
    "gather": [("output0", "float32", (4, 8))],
    "pad": [("output0", "float32", (2, 3, 8, 8))],
    "div_no_nan": [("output0", "float32", (64,))],
    "max_pool": [("output0", "float32", (2, 3, 6, 6))],
    "avg_pool": [("output0", "float32", (4, 3, 3))],
    "tile": [("output0", "float32", (6, 32))],
    "softmax": [("output0", "float32", (4, 16))],
    "batch_norm_inference": [("output0", "float32", (2, 8, 4, 4))],
    "logical_bool": [("output0", "int8", (16, 8))],
    "sigmoid": [("output0", "float32", (16, 8))],
    "add_matmul_head_fusion": [("output0", "float32", (16, 12))],
    "conv_bias_relu_tail_fusion": [("output0", "float32", (1, 4, 8, 8))],
    "mnist_inference": [("data_5", "float32", (4, 10))],
    "bert_attention": [("attention_probs", "float32", (2, 2, 4, 4))],
    "bert_layer_norm": [("layer_output_norm", "float32", (2, 4, 2, 4))],
    "layer_norm": [("output0", "float32", (4, 16))],
    "gelu_erf": [("output0", "float32", (4, 16))],
    "int_floor_div_mod": [("output0", "int32", (16,))],
    "int_shifts": [("output0", "int64", (8,))],
    "int8_logic_to_int8": [("output0", "int8", (8,))],
    "float_floor_div_mod": [("output0", "float32", (16,))],
    "mixed_promotion": [("output0", "float16", (8,))],
    "float64_math": [("output0", "float64", (8,))],
    "pow_max_min": [("output0", "float32", (8,))],
    "float16_casts": [("output0", "float16", (8,))],
    "product_reduction": [("output0", "float32", (4,))],
    "and_or_reductions": [("all_pos", "int8", (4,)), ("any_pos", "int8", (4,)),
                          ("output0", "int8", (4,))],
    "scalar_reduction": [("output0", "float32", ())],
    "masked_max_without_else": [("output0", "float32", (4,))],
    "when_without_else_assign": [("output0", "float32", (8,))],
    "short_circuit_condition": [("output0", "float32", (8,))],
    "computed_gather": [("output0", "float32", (8,))],
    "gather_2d_with_int64_index": [("output0", "float32", (5, 3))],
    "axis_val_and_dtype": [("output0", "float64", (3, 4))],
    "int_sum_to_int64": [("output0", "int64", (4,))],
    "bool_output": [("output0", "int8", (8,))],
    "newline_separated": [("output0", "float32", (8,))],
    "min_reduction_int": [("output0", "int32", (3,))],
    "arange_int": [("output0", "int32", (10,))],
    "literal_only": [("output0", "float32", (3,))],
    "unused_input_kept": [("output0", "float32", (4,))],
}  # fmt: skip

CTX = make_context()


def compile_case(case: Case) -> tuple[Program, ModuleOp]:
    program = parse_program(case.ir, input_dict=case.input_dict, extra_outputs=case.extra_outputs)
    return program, build_module(program)


def roundtrip(module: ModuleOp) -> None:
    text = str(module)
    reparsed = Parser(CTX, text).parse_module()
    reparsed.verify()
    assert str(reparsed) == text


def einsums(module: ModuleOp) -> list[EinsumOp]:
    return [op for op in module.walk() if isinstance(op, EinsumOp)]


def ops_of(op: Operation, kind: type[Operation]) -> list[Operation]:
    return [o for o in op.walk() if isinstance(o, kind)]


def build(ir: str, inputs: dict[str, object], extra: list[str] | None = None) -> ModuleOp:
    return build_module(parse_program(ir, input_dict=inputs, extra_outputs=extra))  # type: ignore[arg-type]


# ---- every shared program ---------------------------------------------------------------------


def test_expected_table_covers_every_program():
    assert sorted(EXPECTED_OUTPUTS) == sorted(c.name for c in PROGRAMS)
    assert len({c.name for c in PROGRAMS}) == len(PROGRAMS)


@pytest.mark.parametrize("case", PROGRAMS, ids=lambda c: c.name)
def test_program_outputs_build_and_roundtrip(case: Case):
    program, module = compile_case(case)
    assert [(o.name, o.dtype, o.shape) for o in program.outputs] == EXPECTED_OUTPUTS[case.name]
    assert [t.name for t in program.inputs] == list(case.input_dict)
    assert len(einsums(module)) == len(program.statements)
    roundtrip(module)


@pytest.mark.parametrize("name,text", EIN_FILES, ids=[n for n, _ in EIN_FILES])
def test_ein_file_builds_and_roundtrips(name: str, text: str):
    program = parse_program(text, filename=f"{name}.ein")
    assert program.filename == f"{name}.ein" and program.source == text
    roundtrip(build_module(program))


def test_ein_file_declarations_and_output_list():
    program = parse_program(dict(EIN_FILES)["softmax_file"])
    assert program.inputs == [TensorInfo("x", "float32", (4, 16))]
    assert [o.name for o in program.outputs] == ["row_max", "y"]
    scalar = parse_program(dict(EIN_FILES)["scalar_file"])
    assert scalar.inputs == [TensorInfo("a", "float64", ()), TensorInfo("b", "int32", ())]
    assert scalar.outputs == [TensorInfo("c", "float64", ())]


def test_tensors_may_be_named_input_and_output():
    program = parse_program(dict(EIN_FILES)["tensor_named_input"])
    assert program.inputs == [TensorInfo("input", "float32", (4,))]
    assert program.outputs == [TensorInfo("output", "float32", (4,))]


def test_input_dict_and_matching_declarations_combine():
    text = "input a: float32[4]\ninput b: int8[2]\nc[N] = a[N] + b[0]"
    program = parse_program(text, input_dict={"a": f32_input(4)})
    assert [t.name for t in program.inputs] == ["a", "b"]


# ---- the module's interface ------------------------------------------------------------------


def test_kernel_signature_names_and_result_order():
    case = next(c for c in PROGRAMS if c.name == "multiple_outputs")
    _, module = compile_case(case)
    kernel = next(op for op in module.walk() if isinstance(op, func.FuncOp))
    assert kernel.sym_name.data == "kernel"
    assert [a.name_hint for a in kernel.body.block.args] == ["input0", "input1"]
    assert kernel.arg_attrs is not None
    assert [d.data["ein.name"] for d in kernel.arg_attrs.data] == [
        StringAttr("input0"), StringAttr("input1")
    ]
    ret = kernel.body.block.last_op
    assert isinstance(ret, func.ReturnOp)
    assert [v.name_hint for v in ret.arguments] == ["output0", "output1", "output2"]


def test_last_statement_is_appended_to_extra_outputs():
    module = build("a[N] = x[N] * 2.0; b[N] = a[N] + 1.0; c[N] = b[N] - x[N]",
                   {"x": f32_input(4)}, ["b"])  # fmt: skip
    ret = next(op for op in module.walk() if isinstance(op, func.ReturnOp))
    assert [v.name_hint for v in ret.arguments] == ["b", "c"]


def test_scalar_tensors_are_rank_zero():
    _, module = compile_case(next(c for c in PROGRAMS if c.name == "scalar"))
    kernel = next(op for op in module.walk() if isinstance(op, func.FuncOp))
    assert all(t == TensorType(f32, []) for t in kernel.function_type.inputs.data)
    (einsum,) = einsums(module)
    assert einsum.axis_names == () and einsum.result_type == TensorType(f32, [])


def test_matmul_einsum_axes_combiner_and_body():
    _, module = compile_case(next(c for c in PROGRAMS if c.name == "matmul"))
    (einsum,) = einsums(module)
    assert einsum.output_name.data == "output0" and einsum.result.name_hint == "output0"
    assert einsum.combiner.data == Combiner.ADD
    assert list(zip(einsum.axis_names, einsum.axis_extents)) == [("N", 16), ("M", 12), ("K", 8)]
    loads = ops_of(einsum, LoadOp)
    n, m, k = einsum.block.args
    assert [list(ld.indices) for ld in loads] == [[n, k], [k, m]]  # type: ignore[attr-defined]
    assert isinstance(einsum.yield_op.value.owner, arith.MulfOp)


def test_reduction_axes_follow_first_appearance():
    case = next(c for c in PROGRAMS if c.name == "convolution_no_pad")
    _, module = compile_case(case)
    (einsum,) = einsums(module)
    assert einsum.axis_names == ("N", "F", "HO", "WO", "C", "KH", "KW")
    assert einsum.axis_extents == (2, 6, 6, 6, 4, 3, 3)


def test_affine_index_is_one_affine_apply_over_the_axes_it_uses():
    module = build("o[H] +=! x[H * 2 + K - 1 + 3] where H in 3, K in 2", {"x": f32_input(9)})
    (einsum,) = einsums(module)
    (load,) = ops_of(einsum, LoadOp)
    (index,) = load.indices  # type: ignore[attr-defined]
    apply = index.owner
    assert isinstance(apply, affine.ApplyOp)
    assert list(apply.mapOperands) == list(einsum.block.args)
    amap = apply.map.data
    assert (amap.num_dims, amap.num_symbols) == (2, 0)
    assert amap.eval([5, 1], []) == (13,)


def test_floor_division_and_modulo_indices_are_affine():
    case = next(c for c in PROGRAMS if c.name == "reshape")
    _, module = compile_case(case)
    applies = ops_of(module, affine.ApplyOp)
    maps = [a.map.data for a in applies]  # type: ignore[attr-defined]
    assert [m.eval([127], []) for m in maps] == [(1,), (63,)]
    assert "floordiv" in str(maps[0]) and "mod" in str(maps[1])


def test_constant_index_is_an_index_constant():
    module = build("o[N] = x[N, 0]", {"x": f32_input(3, 2)})
    (load,) = ops_of(module, LoadOp)
    constant = load.indices[1].owner  # type: ignore[attr-defined]
    assert isinstance(constant, arith.ConstantOp) and constant.result.type == IndexType()


def test_gather_index_is_index_cast_of_the_loaded_value():
    case = next(c for c in PROGRAMS if c.name == "take")
    _, module = compile_case(case)
    outer = [ld for ld in ops_of(module, LoadOp) if ld.tensor.name_hint == "input0"][0]  # type: ignore[attr-defined]
    cast = outer.indices[0].owner  # type: ignore[attr-defined]
    assert isinstance(cast, arith.IndexCastOp) and isinstance(cast.input.owner, LoadOp)
    assert outer.indices[1] is einsums(module)[0].block.args[1]  # type: ignore[attr-defined]


def test_non_affine_index_is_arith_on_index():
    case = next(c for c in PROGRAMS if c.name == "computed_gather")
    _, module = compile_case(case)
    names = [op.name for op in einsums(module)[0].block.ops]
    assert names == [
        "ein.load", "arith.index_cast", "arith.constant", "arith.muli", "arith.addi",
        "arith.constant", "arith.remsi", "arith.constant", "arith.cmpi", "arith.xori",
        "arith.cmpi", "arith.andi", "arith.addi", "arith.select", "ein.load", "ein.yield",
    ]  # fmt: skip
    assert not ops_of(module, affine.ApplyOp)


def test_axis_values_are_index_casts_of_affine_applies():
    case = next(c for c in PROGRAMS if c.name == "conv_winograd_3x3")
    _, module = compile_case(case)
    helper = einsums(module)[0]
    first = helper.block.first_op
    assert isinstance(first, affine.ApplyOp) and first.map.data.eval([2, 1], []) == (7,)
    (use,) = list(first.result.uses)
    cast = use.operation
    assert isinstance(cast, arith.IndexCastOp) and cast.result.type == i32


def test_when_is_scf_if_with_the_guarded_load_inside():
    case = next(c for c in PROGRAMS if c.name == "pad")
    _, module = compile_case(case)
    (einsum,) = einsums(module)
    (if_op,) = ops_of(einsum, scf.IfOp)
    load_parents = {ld.parent_op() for ld in ops_of(einsum, LoadOp)}
    assert load_parents == {if_op}
    assert einsum.yield_op.value.owner is if_op
    assert ops_of(einsum, arith.AndIOp)
    assert not ops_of(einsum, arith.SelectOp)


def test_when_any_folds_conditions_with_ori():
    module = build("o[N] = x[N].when([N < 1, N > 2], 0.0, merge_op=`any`)", {"x": f32_input(4)})
    assert ops_of(module, arith.OrIOp) and not ops_of(module, arith.AndIOp)


def test_later_condition_reading_a_tensor_short_circuits():
    case = next(c for c in PROGRAMS if c.name == "short_circuit_condition")
    _, module = compile_case(case)
    ifs = ops_of(module, scf.IfOp)
    assert len(ifs) == 2
    guard = ifs[0]
    assert [ld.parent_op() for ld in ops_of(guard, LoadOp)] == [guard]


def test_when_without_else_yields_the_reduction_identity():
    case = next(c for c in PROGRAMS if c.name == "masked_max_without_else")
    _, module = compile_case(case)
    (if_op,) = ops_of(module, scf.IfOp)
    (otherwise,) = ops_of(if_op.false_region.block.first_op, arith.ConstantOp)  # type: ignore[union-attr]
    assert otherwise.value.value.data == float("-inf")  # type: ignore[attr-defined]


def test_bool_result_is_stored_as_i8_with_extui():
    case = next(c for c in PROGRAMS if c.name == "bool_output")
    _, module = compile_case(case)
    (einsum,) = einsums(module)
    assert isinstance(einsum.yield_op.value.owner, arith.ExtUIOp)
    assert str(einsum.result_type) == "tensor<8xi8>"


def test_logical_ops_work_on_i1():
    case = next(c for c in PROGRAMS if c.name == "logical_bool")
    _, module = compile_case(case)
    names = [op.name for op in einsums(module)[0].block.ops]
    assert names == [
        "ein.load", "arith.constant", "arith.cmpi", "ein.load", "arith.constant", "arith.cmpi",
        "arith.constant", "arith.xori", "arith.andi", "arith.extui", "ein.yield",
    ]  # fmt: skip


def test_int_division_is_floordivsi_and_float_floordiv_is_floor():
    module = build("o[N] = a[N] / b[N] + (x[N] // 2.0).cast(`int32`)",
                   {"a": tensor("int32", 4), "b": tensor("int32", 4), "x": f32_input(4)})  # fmt: skip
    assert ops_of(module, arith.FloorDivSIOp) and ops_of(module, math.FloorOp)
    assert not ops_of(module, arith.DivSIOp)


def test_sigmoid_is_expanded_and_max_uses_maximumf():
    module = build("o[N] = x[N].call(`sigmoid`).call(`max`, [0.0, x[N]])", {"x": f32_input(4)})
    assert ops_of(module, math.ExpOp) and ops_of(module, arith.NegfOp)
    assert len(ops_of(module, arith.MaximumfOp)) == 2


def test_yield_has_the_output_element_type():
    for case in PROGRAMS:
        _, module = compile_case(case)
        for einsum in einsums(module):
            assert isinstance(einsum.block.last_op, YieldOp)
            assert einsum.yield_op.value.type == einsum.result_type.get_element_type()


def test_block_arguments_are_named_after_axes():
    _, module = compile_case(next(c for c in PROGRAMS if c.name == "matmul"))
    (einsum,) = einsums(module)
    assert [a.name_hint for a in einsum.block.args] == ["N", "M", "K"]
    assert all(isinstance(a, BlockArgument) for a in einsum.block.args)


# ---- typing ----------------------------------------------------------------------------------


def out_dtype(ir: str, inputs: dict[str, object]) -> str:
    return parse_program(ir, input_dict=inputs).outputs[-1].dtype  # type: ignore[arg-type]


@pytest.mark.parametrize(
    "ir,inputs,dtype",
    [
        ("o[N] = a[N] + 3", {"a": tensor("int8", 4)}, "int8"),
        ("o[N] = a[N] + 0.5", {"a": tensor("int8", 4)}, "float32"),
        ("o[N] = a[N] * 2.0", {"a": tensor("float16", 4)}, "float16"),
        ("o[N] = a[N] * const(2.0)", {"a": tensor("float16", 4)}, "float32"),
        ("o[N] = a[N] + b[N]", {"a": tensor("int64", 4), "b": tensor("float16", 4)}, "float16"),
        ("o[N] = a[N] + b[N]", {"a": tensor("float64", 4), "b": tensor("float32", 4)}, "float64"),
        ("o[N] = a[N] + b[N]", {"a": tensor("int16", 4), "b": tensor("int32", 4)}, "int32"),
        ("o[N] = (a[N] > 0) + a[N]", {"a": tensor("int16", 4)}, "int16"),
        ("o[N] = (a[N] > 0) + 1", {"a": tensor("int16", 4)}, "int32"),
        ("o[N] = a[N] > 0", {"a": tensor("int16", 4)}, "int8"),
        ("o[N] = a[N].call(`exp`)", {"a": tensor("int16", 4)}, "float32"),
        ("o[N] = a[N].call(`abs`)", {"a": tensor("int16", 4)}, "int16"),
        ("o[N] = a[N].call(`max`, [b[N]])", {"a": tensor("int8", 4), "b": tensor("int64", 4)},
         "int64"),
        ("o[N] = N where N in 4", {"a": tensor("int8", 4)}, "int32"),
        ("o[N] = a[N] + N", {"a": tensor("int8", 4)}, "int32"),
        ("o[N] = const(3, `int64`) + a[N]", {"a": tensor("int8", 4)}, "int64"),
        ("o[N] = const(1.0, a[N].dtype()) + 1", {"a": tensor("float64", 4)}, "float64"),
        ("o[N] = a[N].cast(`float16`)", {"a": tensor("int8", 4)}, "float16"),
        ("o[N] = a[N].when(N > 0, 1)", {"a": tensor("int16", 4)}, "int16"),
        ("o[N] = a[N].when(N > 0, 1.5)", {"a": tensor("int16", 4)}, "float32"),
        ("o[N] = 1 / 2 + a[N]", {"a": tensor("int8", 4)}, "int8"),
        ("o[N] = 1 / 2.0 + a[N]", {"a": tensor("int8", 4)}, "float32"),
    ],
)
def test_dtype_inference_and_promotion(ir: str, inputs: dict[str, object], dtype: str):
    assert out_dtype(ir, inputs) == dtype


def test_literals_are_folded_and_take_the_operand_dtype():
    program = parse_program("o[N] = a[N] + (7 // 2 - 1) * 4", input_dict={"a": tensor("int8", 4)})
    expr = program.statements[0].expr
    assert isinstance(expr, checked.Binary)
    assert expr.rhs == checked.Constant(8, "int8", expr.rhs.span)


def test_cast_of_a_literal_wraps_and_truncates():
    stmt = parse_program("o[] = (300).cast(`int8`)", input_dict={}).statements[0]
    assert stmt.expr.value == 44  # type: ignore[union-attr]
    stmt = parse_program("o[] = (-2.7).cast(`int32`)", input_dict={}).statements[0]
    assert stmt.expr.value == -2  # type: ignore[union-attr]


# ---- axes ------------------------------------------------------------------------------------


def test_where_overrides_the_inferred_extent():
    case = next(c for c in PROGRAMS if c.name == "add_matmul_head_fusion")
    program, _ = compile_case(case)
    assert program.statements[1].axes == (("N", 16), ("M", 12), ("K", 10))


def test_axis_range_comes_from_the_first_plain_use():
    program = parse_program("o[N] +=! x[N + K, K] where N in 2", input_dict={"x": f32_input(5, 3)})
    assert program.statements[0].axes == (("N", 2), ("K", 3))


def test_bert_attention_reduces_over_both_softmax_axes():
    case = next(c for c in PROGRAMS if c.name == "bert_attention")
    program, _ = compile_case(case)
    temp0 = program.statements[3]
    assert temp0.combiner == Combiner.MAX
    assert temp0.axes == (("B", 2), ("N1", 2), ("S1", 4), ("S2", 4))


def test_plus_equals_without_bang_is_a_sum():
    case = next(c for c in PROGRAMS if c.name == "bert_layer_norm")
    program, _ = compile_case(case)
    assert program.statements[1].combiner == Combiner.ADD


def test_access_under_when_is_not_range_checked_but_elsewhere_is():
    parse_program("o[N] = x[N - 1].when(N > 0, 0.0) where N in 4", input_dict={"x": f32_input(4)})
    with pytest.raises(SemanticError, match=r"ranges over \[-1, 2\]"):
        parse_program("o[N] = x[N - 1] + x[N]", input_dict={"x": f32_input(4)})


def test_range_check_uses_exact_bounds_of_winograd_indices():
    # input_tile reads input0[B // 9, C, B // 3 % 3 * 2 + EPS, B % 3 * 2 + NU]: at most 7 < 8
    case = next(c for c in PROGRAMS if c.name == "conv_winograd_3x3")
    compile_case(case)
    too_small = dict(case.input_dict, input0=f32_input(2, 4, 7, 7))
    with pytest.raises(SemanticError, match=r"index 2 of 'input0' .* ranges over \[0, 7\]"):
        parse_program(case.ir, input_dict=too_small)


# ---- lexing and parsing ----------------------------------------------------------------------


def kinds(text: str) -> list[tuple[Kind, str]]:
    return [(t.kind, t.text) for t in tokenize(SourceText(text, "t"))]


def test_statement_operators_lex_longest_first():
    assert [t for _, t in kinds("+=! >=! <=! *=! &=! |=! += >= <= == != << >> //")][:-1] == [
        "+=!", ">=!", "<=!", "*=!", "&=!", "|=!", "+=", ">=", "<=", "==", "!=", "<<", ">>", "//"
    ]  # fmt: skip


def test_numbers():
    toks = tokenize(SourceText("1e-5 0.111111 100 1.cast .5 2E3", "t"))
    assert [(t.kind, t.value) for t in toks[:-1]] == [
        (Kind.FLOAT, 1e-5), (Kind.FLOAT, 0.111111), (Kind.INT, 100), (Kind.INT, 1),
        (Kind.OP, "."), (Kind.IDENT, "cast"), (Kind.FLOAT, 0.5), (Kind.FLOAT, 2000.0),
    ]  # fmt: skip


def test_newlines_end_statements_only_outside_brackets():
    assert kinds("a[N\n] = b[\nN]\nc")[:-1] == [
        (Kind.IDENT, "a"), (Kind.OP, "["), (Kind.IDENT, "N"), (Kind.OP, "]"), (Kind.OP, "="),
        (Kind.IDENT, "b"), (Kind.OP, "["), (Kind.IDENT, "N"), (Kind.OP, "]"),
        (Kind.NEWLINE, "\n"), (Kind.IDENT, "c"),
    ]  # fmt: skip


def test_comments():
    assert kinds("# note\n// note\na // 2 # tail\nb; // c")[:-1] == [
        (Kind.NEWLINE, "\n"), (Kind.NEWLINE, "\n"), (Kind.IDENT, "a"), (Kind.OP, "//"),
        (Kind.INT, "2"), (Kind.NEWLINE, "\n"), (Kind.IDENT, "b"), (Kind.OP, ";"),
    ]  # fmt: skip


def expr_of(text: str) -> syntax.Expr:
    return parse(SourceText(f"o[] = {text}", "t")).statements[0].expr


def shape(expr: syntax.Expr) -> str:
    """A fully parenthesized rendering of a parsed expression."""
    match expr:
        case syntax.Binary(op=op, lhs=lhs, rhs=rhs):
            return f"({shape(lhs)} {op} {shape(rhs)})"
        case syntax.Unary(op=op, operand=operand):
            return f"({op}{shape(operand)})"
        case syntax.Name(name=name):
            return name
        case syntax.Number(value=value):
            return str(value)
        case syntax.Call(operand=operand, function=fn):
            return f"{shape(operand)}.{fn}"
    return type(expr).__name__


@pytest.mark.parametrize(
    "text,expected",
    [
        ("a + b * c - d", "((a + (b * c)) - d)"),
        ("a - b - c", "((a - b) - c)"),
        ("a / b // c % d", "(((a / b) // c) % d)"),
        ("a + b << c", "((a + b) << c)"),
        ("a & b | c & d", "((a & b) | (c & d))"),
        ("a & ~b", "(a & (~b))"),
        ("a + b == c * d", "((a + b) == (c * d))"),
        ("a | b < c", "((a | b) < c)"),
        ("-a.call(`exp`)", "(-a.exp)"),
        ("(-a).call(`exp`)", "(-a).exp"),
        ("- - a", "(-(-a))"),
    ],
)
def test_precedence_follows_python(text: str, expected: str):
    assert shape(expr_of(text)) == expected


def test_when_forms():
    full = expr_of("x.when([a, b], y, merge_op=`any`)")
    assert isinstance(full, syntax.When) and len(full.conditions) == 2 and full.merge_any
    single = expr_of("x.when(a > 0, y)")
    assert isinstance(single, syntax.When) and len(single.conditions) == 1
    assert single.otherwise is not None and not single.merge_any
    bare = expr_of("x.when(a)")
    assert isinstance(bare, syntax.When) and bare.otherwise is None


def test_spans_point_into_the_source():
    source = "o[N] = x[N].call(\n  `exp`)"
    stmt = parse(SourceText(source, "t")).statements[0]
    call = stmt.expr
    assert isinstance(call, syntax.Call)
    assert (call.function_span.line, call.function_span.col) == (2, 3)
    assert source[call.span.start : call.span.end] == "x[N].call(\n  `exp`)"
