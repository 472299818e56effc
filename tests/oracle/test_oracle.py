"""Self-tests of the oracle, independent of einc: the generated programs evaluate, their
error bounds hold against a second evaluation in the programs' own dtypes, the typing rules
match LANGUAGE.md, and every hand-written reference runs on its program's inputs."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.oracle.budget import examples
from tests.oracle.compare import check_output
from tests.oracle.genprog import programs
from tests.oracle.semantics import (
    BOOL, F16, F32, F64, I8, I16, I32, I64, Bin, Call, Cast, Env, Lit, Val, convert, promote,
)  # fmt: skip
from tests.oracle.references import REFERENCES, ein_file_inputs, make_inputs
from tests.programs import EIN_FILES, PROGRAMS


@settings(max_examples=examples(300))
@given(prog=programs(), seed=st.integers(0, 2**32 - 1))
def test_native_evaluation_lies_within_the_error_bound(prog, seed) -> None:
    """Evaluating in the programs' dtypes (NumPy float32/float16 rounding) is one correct
    implementation: it must pass the same check einc's outputs go through."""
    inputs = prog.make_inputs(np.random.default_rng(seed))
    expected = prog.evaluate(inputs)
    native = prog.evaluate(inputs, native=True)
    assert sorted(expected) == sorted(prog.results)
    for name, exp in expected.items():
        stmt = next(s for s in prog.statements if s.name == name)
        assert exp.value.shape == stmt.shape
        assert exp.value.dtype == (np.float64 if stmt.dtype.kind == "f" else np.int64)
        check_output(name, native[name].value.astype(exp.dtype), exp, prog.ir)


@settings(max_examples=examples(20))
@given(prog=programs(large=True), seed=st.integers(0, 2**32 - 1))
def test_native_evaluation_of_large_programs_lies_within_the_error_bound(prog, seed) -> None:
    test_native_evaluation_lies_within_the_error_bound.hypothesis.inner_test(prog, seed)


@settings(max_examples=examples(100))
@given(prog=programs(), seed=st.integers(0, 2**32 - 1))
def test_inputs_are_valid(prog, seed) -> None:
    inputs = prog.make_inputs(np.random.default_rng(seed))
    assert sorted(inputs) == sorted(prog.input_dict)
    for name, arr in inputs.items():
        spec = prog.inputs[name]
        assert arr.dtype == spec.dtype.np and arr.shape == spec.shape
        if spec.kind != "index":
            assert (arr != 0).all(), f"{name} has zeros"
        assert ((arr >= spec.lo) & (arr <= spec.hi)).all()


def test_promotion_rules() -> None:
    assert promote(I8, F16) == F16  # any float beats any int
    assert promote(I64, F32) == F32
    assert promote(F16, F64) == F64
    assert promote(I8, I32) == I32
    assert promote(BOOL, I8) == I8 and promote(F32, BOOL) == F32


def ev(node) -> Val:
    return node.ev(Env(native=False))


def test_integer_division_floors_and_modulo_takes_the_divisor_sign() -> None:
    cases = [(7, 2, 3, 1), (-7, 2, -4, 1), (7, -2, -4, -1), (-7, -2, 3, -1)]
    for a, b, q, r in cases:
        assert ev(Bin("/", Lit(a, I32, False), Lit(b, I32, False))).v == q
        assert ev(Bin("//", Lit(a, I32, False), Lit(b, I32, False))).v == q
        assert ev(Bin("%", Lit(a, I32, False), Lit(b, I32, False))).v == r
    assert ev(Bin("%", Lit(-7.5, F32, True), Lit(2.0, F32, True))).v == 0.5


def test_integer_division_by_zero_gives_zero() -> None:
    """docs/LANGUAGE.md: `a // 0 == a / 0 == a % 0 == 0` on integers, NumPy's results."""
    for op in ("/", "//", "%"):
        for a in (7, -7, 0):
            node = Bin(op, Lit(a, I32, False), Lit(0, I32, False))
            assert ev(node).v == 0 and node.lo <= 0 <= node.hi


def test_casts_truncate_and_wrap() -> None:
    env = Env(native=False)
    assert convert(Val(np.asarray(-2.7)), F32, I32, env).v == -2
    assert convert(Val(np.asarray(2.7)), F64, I8, env).v == 2
    assert convert(Val(np.asarray(300)), I32, I8, env).v == 44
    assert convert(Val(np.asarray(-129)), I16, I8, env).v == 127
    assert convert(Val(np.asarray(True)), BOOL, F16, env).v == 1.0
    assert ev(Cast(Lit(200, I32, False), I8)).v == -56


def test_float_functions_of_ints_compute_in_float32() -> None:
    assert Call("exp", Lit(1, I32, False)).dtype == F32
    assert Call("abs", Lit(1, I16, False)).dtype == I16
    assert Call("round", Lit(-2.5, F64, True)).ev(Env(False)).v == -3.0  # half away from zero


@pytest.mark.parametrize("case", PROGRAMS, ids=[c.name for c in PROGRAMS])
def test_reference_runs(case) -> None:
    ref = REFERENCES[case.name]
    inputs = make_inputs(case.input_dict, ref.inputs, np.random.default_rng(0))
    out = ref.fn(inputs)
    assert set(out) == set(ref.dtypes)
    for name, arr in out.items():
        assert np.all(np.isfinite(arr)), f"{case.name}: {name} is not finite"


@pytest.mark.parametrize("name,text", EIN_FILES, ids=[n for n, _ in EIN_FILES])
def test_ein_file_reference_runs(name, text) -> None:
    ref = REFERENCES[name]
    out = ref.fn(make_inputs(ein_file_inputs(text), ref.inputs, np.random.default_rng(0)))
    assert set(out) == set(ref.dtypes)
