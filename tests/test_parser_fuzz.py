"""Robustness: whatever text (and input_dict) the frontend is given, it either builds a verified
module or raises an `EincError` with a location in that text; never another exception, never an
internal compiler error, never a RecursionError."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from einc.errors import EincError
from einc.frontend import InternalCompilerError, build_module, parse_program
from tests.oracle.budget import examples
from tests.programs import EIN_FILES, PROGRAMS

TOKENS = [
    "input0", "input1", "x", "N", "K", "M", "[", "]", "(", ")", ",", ";", "\n", ".", "+", "-",
    "*", "/", "//", "%", "<", ">", "<=", ">=", "==", "!=", "&", "|", "~", "<<", ">>", "=", "+=!",
    ">=!", "<=!", "*=!", "&=!", "|=!", "+=", "where", "in", "const", "when", "cast", "call",
    "dtype", "val", "`float32`", "`int8`", "`exp`", "`max`", "`pow`", "`any`", "merge_op", "0",
    "1", "2", "3", "1.5", "1e-5", "input", "output", ":", "float32", "int32", "#", "`", "'",
]  # fmt: skip
SOUP_INPUTS: dict[str, Any] = {
    "input0": {"dtype": "float32", "shape": [4, 8]},
    "input1": {"dtype": "int32", "shape": [8]},
    "x": {"dtype": "int8", "shape": []},
}
DTYPES = ["float64", "float32", "float16", "int64", "int32", "int16", "int8"]
TYPED_INPUTS: dict[str, Any] = {f"t_{d}": {"dtype": d, "shape": [4, 5]} for d in DTYPES}
TYPED_INPUTS.update({f"s_{d}": {"dtype": d, "shape": []} for d in DTYPES})
FUNCTIONS = ["exp", "log", "log2", "log10", "sqrt", "rsqrt", "tanh", "sigmoid", "erf", "floor",
             "ceil", "round", "abs", "sin", "cos", "tan", "exp2"]  # fmt: skip
SOURCES = [(c.ir, c.input_dict, c.extra_outputs) for c in PROGRAMS] + [
    (text, None, None) for _, text in EIN_FILES
]


def compile_or_diagnose(source: str, input_dict: Any = None, extra_outputs: Any = None) -> bool:
    """True when the program compiles; False when it is rejected with a proper diagnostic."""
    try:
        build_module(parse_program(source, "fuzz.ein", input_dict, extra_outputs))
        return True
    except InternalCompilerError as exc:  # pragma: no cover - reported as a failure
        raise AssertionError(f"internal compiler error on {source!r}") from exc
    except EincError as exc:
        loc = exc.loc
        assert loc is not None and loc.file == "fuzz.ein" and loc.source == source
        assert 1 <= loc.line <= source.count("\n") + 1 and loc.col >= 1 and loc.length >= 1
        assert exc.message and not exc.message[0].isupper()
        return False


@settings(max_examples=examples(300))
@given(st.text(max_size=120), st.booleans())
def test_random_text(source: str, with_inputs: bool):
    compile_or_diagnose(source, SOUP_INPUTS if with_inputs else None)


@settings(max_examples=examples(300))
@given(st.lists(st.sampled_from(TOKENS), max_size=40), st.booleans())
def test_token_soup(tokens: list[str], with_inputs: bool):
    compile_or_diagnose(" ".join(tokens), SOUP_INPUTS if with_inputs else None)


EDIT = st.tuples(
    st.sampled_from(["delete", "insert", "swap", "insert_token"]),
    st.floats(0, 1, exclude_max=True),
    st.floats(0, 1, exclude_max=True),
    st.characters(codec="ascii"),
    st.sampled_from(TOKENS),
)


@settings(max_examples=examples(400))
@given(st.sampled_from(SOURCES), st.lists(EDIT, min_size=1, max_size=4))
def test_mutated_programs(program: tuple[str, Any, Any], edits: list[tuple]):
    source, input_dict, extra_outputs = program
    text = list(source)
    for kind, where, other, char, token in edits:
        if not text:
            break
        i, j = int(where * len(text)), int(other * len(text))
        if kind == "delete":
            del text[i]
        elif kind == "insert":
            text.insert(i, char)
        elif kind == "insert_token":
            text.insert(i, token)
        else:
            text[i], text[j] = text[j], text[i]
    compile_or_diagnose("".join(text), input_dict, extra_outputs)


def expressions() -> st.SearchStrategy[str]:
    """Expressions over tensors of every dtype: mostly well-formed, often ill-typed."""
    leaf = st.one_of(
        st.sampled_from(DTYPES).map(lambda d: f"t_{d}[N, K]"),
        st.sampled_from(DTYPES).map(lambda d: f"s_{d}[]"),
        st.sampled_from(["N", "K", "N.val()", "0", "1", "-3", "1.5", "0.0", "1e-5", "100",
                         "const(2.5)", "const(-1, `int8`)", "const(7, `float16`)"]),
    )  # fmt: skip
    ops = ["+", "-", "*", "/", "//", "%", "<<", ">>", "&", "|", "==", "!=", "<", "<=", ">", ">="]

    def extend(inner: st.SearchStrategy[str]) -> st.SearchStrategy[str]:
        return st.one_of(
            st.tuples(inner, st.sampled_from(ops), inner).map(lambda t: f"({t[0]} {t[1]} {t[2]})"),
            st.tuples(st.sampled_from(["-", "~"]), inner).map(lambda t: f"{t[0]}({t[1]})"),
            st.tuples(inner, st.sampled_from(DTYPES)).map(lambda t: f"({t[0]}).cast(`{t[1]}`)"),
            st.tuples(inner, st.sampled_from(FUNCTIONS)).map(lambda t: f"({t[0]}).call(`{t[1]}`)"),
            st.tuples(inner, st.sampled_from(["max", "min", "pow"]), inner).map(
                lambda t: f"({t[0]}).call(`{t[1]}`, [{t[2]}])"
            ),
            st.tuples(inner, st.lists(inner, min_size=1, max_size=3), inner, st.booleans()).map(
                lambda t: f"({t[0]}).when([{', '.join(t[1])}], {t[2]}"
                + (", merge_op=`any`)" if t[3] else ")")
            ),
            st.tuples(inner, inner).map(lambda t: f"({t[0]}).when({t[1]})"),
            inner.map(lambda e: f"t_float32[({e}).cast(`int32`) % 4, K]"),
            st.tuples(inner, st.sampled_from(DTYPES)).map(
                lambda t: f"({t[0]}).cast(t_{t[1]}[N, K].dtype())"
            ),
        )

    return st.recursive(leaf, extend, max_leaves=12)


@settings(max_examples=examples(250))
@given(
    st.sampled_from(["o[N, K] =", "o[N] +=!", "o[] >=!", "o[N] <=!", "o[] *=!", "o[N] &=!",
                     "o[N] |=!"]),  # fmt: skip
    expressions(),
)
def test_generated_expressions(head: str, expr: str):
    compile_or_diagnose(f"{head} {expr}", TYPED_INPUTS)


JSONISH = st.recursive(
    st.none() | st.booleans() | st.integers(-5, 5) | st.floats(allow_nan=False) | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=6), inner, max_size=3),
    max_leaves=8,
)


@settings(max_examples=examples(200))
@given(
    st.one_of(
        JSONISH,
        st.dictionaries(
            st.sampled_from(["f", "x", "1x", ""]),
            st.fixed_dictionaries(
                {"dtype": st.sampled_from(DTYPES + ["bool", "float8", 3])},
                optional={"shape": st.lists(st.integers(-2, 6) | st.just(True), max_size=3)},
            ),
            max_size=2,
        ),
    ),
    st.one_of(st.none(), JSONISH, st.lists(st.sampled_from(["o", "f", "p"]), max_size=3)),
)
def test_malformed_input_dict_and_extra_outputs(input_dict: Any, extra_outputs: Any):
    compile_or_diagnose("o[N] = f[N] * 2.0", input_dict, extra_outputs)


DEEP = {
    "parens": lambda n: "o[N] = " + "(" * n + "f[N]" + ")" * n,
    "unary_minus": lambda n: "o[N] = " + "-" * n + "f[N]",
    "logical_not": lambda n: "o[N] = " + "~" * n + "f[N]",
    "long_sum": lambda n: "o[N] = f[N]" + " + f[N]" * n,
    "method_chain": lambda n: "o[N] = f[N]" + ".cast(`float64`).cast(`float32`)" * n,
    "nested_when": lambda n: "o[N] = " + "f[N].when(N < 2, " * n + "1.0" + ")" * n,
    "nested_gather": lambda n: "o[N] = f[" + "i[" * n + "N" + "]" * n + "]",
    "nested_lists": lambda n: "o[N] = f[N].when(" + "[" * n + "N < 1" + "]" * n + ")",
    "unclosed": lambda n: "o[N] = " + "(" * n,
    "many_statements": lambda n: "".join(f"t{k}[N] = f[N] * {k}.0\n" for k in range(n)),
}


# Statements are compiled one by one: 200 of them show that many statements work.
DEPTHS = [
    (kind, n)
    for kind in sorted(DEEP)
    for n in (10, 200, 5_000, 100_000)
    if not (kind == "many_statements" and n > 200)
]


@pytest.mark.parametrize("kind, n", DEPTHS)
def test_deep_nesting_is_a_diagnostic_not_a_crash(kind: str, n: int):
    inputs = {"f": {"dtype": "float32", "shape": [4]}, "i": {"dtype": "int32", "shape": [4]}}
    compile_or_diagnose(DEEP[kind](n), inputs)


def test_moderately_deep_programs_still_compile():
    inputs = {"f": {"dtype": "float32", "shape": [4]}, "i": {"dtype": "int32", "shape": [4]}}
    for kind in ("parens", "long_sum", "nested_when", "nested_gather"):
        assert compile_or_diagnose(DEEP[kind](40), inputs), kind
