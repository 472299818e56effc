"""Diagnostics: each kind of user error raises its class with a specific message at the
offending line and column."""

from __future__ import annotations

from typing import Any, NamedTuple

import pytest

from einc.errors import EincError, ParseError, SemanticError
from einc.frontend import build_module, parse_program

INPUTS: dict[str, Any] = {
    "x": {"dtype": "float32", "shape": [4, 8]},
    "y": {"dtype": "float32", "shape": [8, 3]},
    "f": {"dtype": "float32", "shape": [4]},
    "i": {"dtype": "int32", "shape": [4]},
}


class Bad(NamedTuple):
    name: str
    source: str
    error: type[EincError]
    fragment: str
    line: int
    col: int
    input_dict: Any = INPUTS
    extra_outputs: Any = None


CASES = [
    # ---- syntax ----
    Bad("unterminated_bracket", "o[N] = x[N, K", ParseError,
        "expected ']' to close the '[' at 1:9, found end of input", 1, 14),
    Bad("unterminated_paren", "o[N] = (x[N, 0]\n", ParseError,
        "expected ')' to close the '(' at 1:8", 2, 1),
    Bad("missing_operand", "o[N] = x[N, 0] +", ParseError,
        "expected an expression, found end of input", 1, 17),
    Bad("missing_expression_at_line_end", "o[N] = \np[N] = x[N, 0]", ParseError,
        "expected an expression, found end of line", 1, 8),
    Bad("unexpected_character", "o[N] = x[N, 0] @ 2", ParseError,
        "unexpected character '@'", 1, 16),
    Bad("unexpected_token", "o[N] = x[N, 0] y[0, 0]", ParseError,
        "expected an operator, ';' or the end of the line, found 'y'", 1, 16),
    Bad("product_without_bang", "o[N] *= x[N, K]", ParseError,
        "a product reduction is written '*=!'", 1, 6),
    Bad("comparison_as_statement_op", "o[N] >= x[N, K]", ParseError,
        "a max-reduction is written '>=!'", 1, 6),
    Bad("statement_without_indices", "o = x[0, 0]", ParseError,
        "expected '[' after the output tensor name 'o'", 1, 3),
    Bad("chained_comparison", "o[N] = x[N, 0].when(N < 2 < 3)", ParseError,
        "chained comparison", 1, 27),
    Bad("unknown_method", "o[N] = x[N, 0].exp()", ParseError,
        "unknown method '.exp'", 1, 16),
    Bad("call_needs_a_string", "o[N] = x[N, 0].call(exp)", ParseError,
        "expected a function name such as `exp`, found 'exp'", 1, 21),
    Bad("call_args_need_a_list", "o[N] = x[N, 0].call(`max`, 1.0, 2.0)", ParseError,
        "several extra arguments of `max` go in a list", 1, 33),
    Bad("bad_merge_op", "o[N] = x[N, 0].when([N < 2], 1.0, merge_op=`some`)", ParseError,
        "merge_op must be `all` or `any`", 1, 44),
    Bad("const_needs_a_number", "o[N] = const(x[N, 0])", ParseError,
        "const() takes a number, found 'x'", 1, 14),
    Bad("malformed_number", "o[N] = x[N, 0] * 1e+", ParseError,
        "malformed number '1e+'", 1, 18),
    Bad("number_glued_to_a_name", "o[N] = x[N, 0] * 2N", ParseError,
        "malformed number '2N'", 1, 18),
    Bad("unterminated_string", "o[N] = x[N, 0].cast(`float32)", ParseError,
        "unterminated string", 1, 21),
    Bad("where_without_in", "o[N] = x[N, 0] where N = 3", ParseError,
        "expected 'in' after the axis 'N'", 1, 24),
    Bad("too_deeply_nested", "o[N] = " + "(" * 200 + "x[N, 0]" + ")" * 200, ParseError,
        "nested too deeply", 1, 56),
    Bad("too_many_operators", "o[N] = x[N, 0]" + " + 1.0" * 300, ParseError,
        "expression too large", 1, 8),
    # ---- names ----
    Bad("unknown_tensor", "o[N] = x[N, 0] + z[N]", SemanticError,
        "unknown tensor 'z'", 1, 18),
    Bad("unknown_tensor_with_suggestion", "o[N] = xx[N, 0]", SemanticError,
        "unknown tensor 'xx'; did you mean 'x'?", 1, 8),
    Bad("tensor_used_before_definition", "o[N] = t[N]; t[N] = f[N]", SemanticError,
        "tensor 't' is used before the statement that defines it (at 1:14)", 1, 8),
    Bad("unknown_function", "o[N] = f[N].call(`expo`)", SemanticError,
        "unknown function `expo`; did you mean `exp`?", 1, 18),
    Bad("unknown_dtype", "o[N] = f[N].cast(`float8`)", SemanticError,
        "unknown dtype `float8`", 1, 18),
    Bad("unknown_dtype_in_const", "o[N] = f[N] + const(1, `int4`)", SemanticError,
        "unknown dtype `int4`", 1, 24),
    Bad("tensor_without_indices", "o[N] = f + f[N]", SemanticError,
        "'f' is a tensor, not an axis; index it as f[...]", 1, 8),
    Bad("redefine_input", "\nx[N, M] = y[M, N]", SemanticError,
        "'x' is an input tensor; a statement cannot redefine it", 2, 1),
    Bad("redefine_result", "o[N] = f[N]\no[N] = i[N]", SemanticError,
        "tensor 'o' is already defined at 1:1", 2, 1),
    Bad("reads_own_output", "o[N] = f[N] + o[N]", SemanticError,
        "statement reads its own output 'o'", 1, 15),
    # ---- shapes and axes ----
    Bad("too_few_indices", "o[N] = x[N]", SemanticError,
        "'x' has rank 2 (shape [4, 8]) but is indexed with 1 index", 1, 8),
    Bad("too_many_indices", "o[N] = f[N, 0, 1]", SemanticError,
        "'f' has rank 1 (shape [4]) but is indexed with 3 indices", 1, 8),
    Bad("unbound_axis", "o[N, F] = f[N]", SemanticError,
        "axis 'F' has no range", 1, 6),
    Bad("axis_only_in_compound_index", "o[N] = f[N + 1]", SemanticError,
        "axis 'N' has no range", 1, 3),
    Bad("conflicting_extents", "o[N] +=! x[N, K] * y[N, K]", SemanticError,
        "axis 'N' has extent 4 from dimension 0 of 'x' (1:12) but 8 from dimension 0 of 'y'",
        1, 22),
    Bad("out_of_range_affine_access", "o[N] = x[N, N * 2 + 2]", SemanticError,
        "index 1 of 'x' (N * 2 + 2) ranges over [2, 8] but the dimension has extent 8", 1, 13),
    Bad("out_of_range_negative", "o[N] = f[N - 1] where N in 4", SemanticError,
        "index 0 of 'f' (N - 1) ranges over [-1, 2]", 1, 10),
    Bad("out_of_range_where", "o[N] = f[N] where N in 5", SemanticError,
        "ranges over [0, 4] but the dimension has extent 4", 1, 10),
    Bad("out_of_range_constant", "o[N] = x[N, 8]", SemanticError,
        "index 1 of 'x' (8) ranges over [8, 8]", 1, 13),
    Bad("output_index_not_an_axis", "o[N + 1] = f[N]", SemanticError,
        "output indices must be axis names; found 'N + 1' in 'o'", 1, 3),
    Bad("output_index_repeated", "o[N, N] = f[N]", SemanticError,
        "axis 'N' appears twice in the output indices", 1, 6),
    Bad("assignment_with_reduction_axis", "o[N] = x[N, K]", SemanticError,
        "axis 'K' is not an output axis of 'o', so '=' cannot reduce over it", 1, 13),
    Bad("unused_where_axis", "o[N] = f[N] where M in 3", SemanticError,
        "axis 'M' in the where clause is not used in the statement", 1, 19),
    Bad("where_axis_twice", "o[N] = f[N] where N in 4, N in 4", SemanticError,
        "axis 'N' is given a range twice", 1, 27),
    Bad("zero_extent", "o[N] = N where N in 0", SemanticError,
        "the range of axis 'N' must be in [1, 2147483647], found 0", 1, 21),
    Bad("non_constant_extent", "o[N] = N where N in K", SemanticError,
        "the range of axis 'N' must be a constant integer expression", 1, 21),
    Bad("float_gather_index", "o[N] = f[f[N]]", SemanticError,
        "index 0 of 'f' has dtype float32; indices must be integers", 1, 10),
    Bad("float_literal_index", "o[N] = x[N, 1.5]", SemanticError,
        "index 1 of 'x' is the float 1.5; indices must be integers", 1, 13),
    # ---- types ----
    Bad("shift_on_floats", "o[N] = f[N] << 2", SemanticError,
        "type error: '<<' needs integer operands, found float32", 1, 13),
    Bad("shift_by_float_literal", "o[N] = i[N] >> 1.5", SemanticError,
        "type error: '>>' needs integer operands, found float32", 1, 13),
    Bad("literal_does_not_fit", "o[N] = i[N].cast(`int8`) + 200", SemanticError,
        "integer literal 200 does not fit in int8", 1, 28),
    Bad("const_does_not_fit", "o[N] = i[N] + const(3000000000)", SemanticError,
        "integer constant 3000000000 does not fit in int32", 1, 21),
    Bad("integer_division_by_zero", "o[N] = i[N] % 0", SemanticError,
        "integer division by zero", 1, 15),
    Bad("constant_division_by_zero", "o[N] = f[N] * (1 / 0)", SemanticError,
        "division by zero in a constant expression", 1, 16),
    Bad("extra_args_to_unary_function", "o[N] = f[N].call(`exp`, [1.0])", SemanticError,
        "function `exp` takes no extra arguments, found 1", 1, 18),
    Bad("pow_needs_one_argument", "o[N] = f[N].call(`pow`)", SemanticError,
        "function `pow` takes one extra argument (the exponent), found 0", 1, 18),
    Bad("dtype_as_value", "o[N] = f[N].dtype()", SemanticError,
        "'.dtype()' gives a dtype, not a value", 1, 8),
    Bad("cast_to_a_value", "o[N] = f[N].cast(f[N])", SemanticError,
        "expected a dtype such as `float32` or x.dtype(), found 'f[N]'", 1, 18),
    Bad("string_as_value", "o[N] = f[N] + `float32`", SemanticError,
        "unexpected string `float32`", 1, 15),
    Bad("val_of_a_tensor", "o[N] = f[N].val()", SemanticError,
        "'.val()' applies to an axis", 1, 8),
    # ---- programs, declarations and outputs ----
    Bad("empty_program", "  # nothing\n", SemanticError, "the program has no statements", 1, 1),
    Bad("extra_output_undefined", "o[N] = f[N]", SemanticError,
        "extra_outputs names 'p', which is not defined by any statement", 1, 1,
        extra_outputs=["p"]),
    Bad("extra_output_is_input", "o[N] = f[N]", SemanticError,
        "extra_outputs names 'f', which is an input", 1, 1, extra_outputs=["f"]),
    Bad("extra_outputs_not_a_list", "o[N] = f[N]", SemanticError,
        "extra_outputs must be a list of tensor names", 1, 1, extra_outputs="o"),
    Bad("declared_output_undefined", "input a: float32[2]\noutput b\nc[N] = a[N]", SemanticError,
        "the output declaration names 'b', which is not defined by any statement", 2, 8,
        input_dict=None),
    Bad("declared_twice", "input a: float32[2]\ninput a: float32[2]\nc[N] = a[N]",
        SemanticError, "input 'a' is declared twice (first at 1:7)", 2, 7, input_dict=None),
    Bad("declared_unknown_dtype", "input a: float8[2]\nc[N] = a[N]", SemanticError,
        "unknown dtype `float8`", 1, 10, input_dict=None),
    Bad("declared_negative_dim", "input a: float32[2, -1]\nc[N] = a[N, 0]", SemanticError,
        "dimension 1 of 'a' must be in [1, 2147483647], found -1", 1, 21, input_dict=None),
    Bad("declaration_conflicts_with_input_dict", "input f: float32[5]\nc[N] = f[N]",
        SemanticError, "input 'f' is declared as float32[5] but input_dict gives float32[4]",
        1, 1),
    Bad("declaration_syntax", "input a float32[2]\nc[N] = a[N]", ParseError,
        "expected ':' after the input name 'a'", 1, 9, input_dict=None),
    # ---- input_dict ----
    Bad("input_dict_not_a_dict", "o[N] = f[N]", SemanticError,
        "input_dict must be a dict", 1, 1, input_dict=[("f", 4)]),
    Bad("input_dict_entry_not_a_dict", "o[N] = f[N]", SemanticError,
        "input_dict['f'] must be a dict with 'dtype' and 'shape', found list", 1, 1,
        input_dict={"f": [4]}),
    Bad("input_dict_unknown_dtype", "o[N] = f[N]", SemanticError,
        "input_dict['f']: unknown dtype 'float8'", 1, 1,
        input_dict={"f": {"dtype": "float8", "shape": [4]}}),
    Bad("input_dict_negative_dim", "o[N] = f[N]", SemanticError,
        "input_dict['f']: dimension 0 must be in [1, 2147483647], found -4", 1, 1,
        input_dict={"f": {"dtype": "float32", "shape": [-4]}}),
    Bad("input_dict_float_dim", "o[N] = f[N]", SemanticError,
        "input_dict['f']: dimension 0 must be an integer, found 4.0", 1, 1,
        input_dict={"f": {"dtype": "float32", "shape": [4.0]}}),
    Bad("input_dict_bad_shape", "o[N] = f[N]", SemanticError,
        "input_dict['f']: 'shape' must be a list of dimensions, found NoneType", 1, 1,
        input_dict={"f": {"dtype": "float32"}}),
    Bad("input_dict_bad_name", "o[N] = f[N]", SemanticError,
        "input_dict: tensor name 'f-1' is not an identifier", 1, 1,
        input_dict={"f-1": {"dtype": "float32", "shape": [4]}}),
    Bad("input_dict_unknown_key", "o[N] = f[N]", SemanticError,
        "input_dict['f']: unexpected key 'shapes'", 1, 1,
        input_dict={"f": {"dtype": "float32", "shape": [4], "shapes": [4]}}),
]  # fmt: skip


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.name)
def test_error(case: Bad):
    with pytest.raises(EincError) as info:
        program = parse_program(
            case.source, "prog.ein", input_dict=case.input_dict, extra_outputs=case.extra_outputs
        )
        build_module(program)
    err = info.value
    assert type(err) is case.error, err.render()
    assert case.fragment in err.message, err.render()
    assert err.loc is not None
    assert (err.loc.file, err.loc.line, err.loc.col) == ("prog.ein", case.line, case.col), err.render()
    assert err.loc.source == case.source
    assert not err.message[0].isupper()


def test_case_names_are_unique():
    assert len({c.name for c in CASES}) == len(CASES)


def test_rendering_shows_the_line_and_a_caret_under_the_span():
    with pytest.raises(SemanticError) as info:
        parse_program("a[N] = f[N]\nb[N] = zz[N] + a[N]", input_dict=INPUTS)
    assert info.value.render() == (
        "<string>:2:8: error: unknown tensor 'zz'\n"
        "b[N] = zz[N] + a[N]\n"
        "       ^~"
    )


def test_span_length_covers_the_token():
    with pytest.raises(SemanticError) as info:
        parse_program("o[N] = f[N].call(`expo`)", input_dict=INPUTS)
    assert info.value.loc is not None and info.value.loc.length == len("`expo`")


def test_non_string_program_is_an_error():
    with pytest.raises(SemanticError, match="the program must be a string"):
        parse_program(42, input_dict=INPUTS)  # type: ignore[arg-type]
