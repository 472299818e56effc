"""Differential tests: random valid Antares programs (tests/oracle/genprog.py), run through einc,
against their NumPy float64 meaning.

(a) the loop-level module (`lower_to_stage(..., stage="loops")`) on xDSL's interpreter;
(b) the C target (`einc.compile(..., target="c")`), with tiny shapes and with shapes large
    enough for the default schedule to tile, vectorize and parallelize.

Each example draws a program and an input seed; a failure prints the program text, its
`input_dict`, `extra_outputs` and the seed (Hypothesis shrinks the program first). Example
counts scale with EINC_HYPOTHESIS_PROFILE (`thorough`: ten times as many).
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
from hypothesis import given, note, settings
from hypothesis import strategies as st

import einc
from einc.compiler.driver import lower_to_stage
from einc.semantics.loops import run_interpreted
from tests.oracle.budget import examples
from tests.oracle.compare import check_output
from tests.oracle.genprog import GenProgram, programs
from tests.oracle.isolate import run_kernel_isolated

Runner = Callable[[GenProgram, dict[str, np.ndarray]], dict[str, np.ndarray]]


def run_interpreter(prog: GenProgram, inputs: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    text, input_dict, extra = prog.compile_args()
    module = lower_to_stage(text, input_dict, extra, stage="loops")
    return run_interpreted(module, inputs)


def run_c(prog: GenProgram, inputs: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """Compiles here (for the source in the report); runs in a worker process, so a crashing
    kernel fails only this example."""
    text, input_dict, extra = prog.compile_args()
    kernel = einc.compile(text, input_dict, target="c", extra_outputs=extra)
    note(f"C source:\n{kernel.source}")
    return run_kernel_isolated(text, input_dict, extra, inputs)


def check_program(prog: GenProgram, seed: int, run: Runner) -> None:
    inputs = prog.make_inputs(np.random.default_rng(seed))
    text, input_dict, extra = prog.compile_args()
    note(f"program: {text!r}\ninput_dict: {input_dict}\nextra_outputs: {extra}")
    note("inputs: " + "; ".join(f"{k}={v.tolist()!r}" for k, v in inputs.items()))
    expected = prog.evaluate(inputs)
    outputs = run(prog, {k: v.copy() for k, v in inputs.items()})
    assert sorted(outputs) == sorted(expected), (
        f"results {sorted(outputs)}, expected {sorted(expected)} (seed {seed})"
    )
    for name, exp in expected.items():
        check_output(name, outputs[name], exp, f"seed {seed}")


@settings(max_examples=examples(60))
@given(prog=programs(), seed=st.integers(0, 2**32 - 1))
def test_interpreter_matches_oracle(prog: GenProgram, seed: int) -> None:
    check_program(prog, seed, run_interpreter)


@settings(max_examples=examples(40))
@given(prog=programs(), seed=st.integers(0, 2**32 - 1))
def test_c_matches_oracle(prog: GenProgram, seed: int) -> None:
    check_program(prog, seed, run_c)


@settings(max_examples=examples(20))
@given(prog=programs(large=True), seed=st.integers(0, 2**32 - 1))
def test_c_matches_oracle_on_larger_shapes(prog: GenProgram, seed: int) -> None:
    """Extents past vector widths, tiles and unroll factors, nests big enough to run in
    parallel: the default C schedule's transformations at work."""
    check_program(prog, seed, run_c)
