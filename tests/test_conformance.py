"""Conformance: every program of tests/programs.py, compiled for C, against its hand-written
NumPy float64 reference (tests/oracle/references.py).

Inputs are fresh random non-zero data on every run (tests/oracle/seeds.py: from os.urandom,
fixed per test in CI; the seed is in every failure message). Tolerances: float64 1e-10, float32 1e-4, float16 1e-2 relative, with
an absolute floor scaled by the reduction length; integers exact.
"""

from __future__ import annotations

import functools
from typing import Any, NamedTuple

import numpy as np
import pytest

import einc
from tests.oracle import seeds
from tests.oracle.compare import check_reference
from tests.oracle.genprog import ODD_AXIS_NAMES, ODD_TENSOR_NAMES
from tests.oracle.isolate import run_kernel_isolated
from tests.oracle.references import REFERENCES, Reference, ein_file_inputs, make_inputs
from tests.programs import EIN_FILES, PROGRAMS


class Program(NamedTuple):
    name: str
    ir: str
    input_dict: dict[str, Any] | None  # None: a .ein text with its own declarations
    extra_outputs: list[str] | None

    @property
    def inputs(self) -> dict[str, Any]:
        return self.input_dict if self.input_dict is not None else ein_file_inputs(self.ir)


ALL = [Program(c.name, c.ir, c.input_dict, c.extra_outputs) for c in PROGRAMS] + [
    Program(name, text, None, None) for name, text in EIN_FILES
]


def fresh_seed() -> int:
    return seeds.fresh_seed()


@functools.cache
def compiled(name: str) -> einc.Kernel:
    prog = next(p for p in ALL if p.name == name)
    return einc.compile(prog.ir, prog.input_dict, target="c", extra_outputs=prog.extra_outputs)


def reference_of(prog: Program) -> Reference:
    if prog.name not in REFERENCES:
        pytest.fail(f"no reference for {prog.name!r}: add one to tests/oracle/references.py")
    return REFERENCES[prog.name]


def check_against_reference(
    prog: Program, outputs: dict[str, np.ndarray], inputs: dict[str, np.ndarray], seed: int
) -> None:
    reference = reference_of(prog)
    expected = reference.fn(inputs)
    assert sorted(outputs) == sorted(expected), (
        f"{prog.name}: results {sorted(outputs)}, expected {sorted(expected)}"
    )
    for name, want in expected.items():
        check_reference(name, outputs[name], want, reference.dtypes[name],
                        reference.reduce.get(name, 1), f"{prog.name}, seed {seed}")  # fmt: skip


def random_inputs(prog: Program, seed: int) -> dict[str, np.ndarray]:
    return make_inputs(prog.inputs, reference_of(prog).inputs, np.random.default_rng(seed))


def test_every_program_has_a_reference() -> None:
    missing = [p.name for p in ALL if p.name not in REFERENCES]
    stale = sorted(set(REFERENCES) - {p.name for p in ALL})
    assert not missing, f"programs without a reference: {missing}"
    assert not stale, f"references without a program: {stale}"


@pytest.mark.parametrize("prog", ALL, ids=[p.name for p in ALL])
def test_program_matches_reference(prog: Program) -> None:
    seed = fresh_seed()
    inputs = random_inputs(prog, seed)
    outputs = compiled(prog.name)(**{k: v.copy() for k, v in inputs.items()})
    check_against_reference(prog, outputs, inputs, seed)


@pytest.mark.parametrize("prog", ALL, ids=[p.name for p in ALL])
def test_outputs_are_fresh_on_every_call(prog: Program) -> None:
    """Two calls with different inputs: both results match their references, and the first
    call's arrays are not overwritten by the second (no shared or stale output buffers)."""
    kernel = compiled(prog.name)
    seed_a, seed_b = fresh_seed(), fresh_seed()
    inputs_a, inputs_b = random_inputs(prog, seed_a), random_inputs(prog, seed_b)
    out_a = kernel(**inputs_a)
    snapshot = {k: v.copy() for k, v in out_a.items()}
    out_b = kernel(**inputs_b)
    check_against_reference(prog, out_b, inputs_b, seed_b)
    for name in out_a:
        assert not np.shares_memory(out_a[name], out_b[name]), (
            f"{prog.name}: {name} of two calls share memory"
        )
        changed = f"{prog.name}: a later call changed {name}"
        np.testing.assert_array_equal(out_a[name], snapshot[name], err_msg=changed)
    check_against_reference(prog, out_a, inputs_a, seed_a)


@pytest.mark.parametrize("prog", ALL, ids=[p.name for p in ALL])
def test_every_output_element_is_written(prog: Program) -> None:
    """`Kernel.run` into buffers holding another input's results: any element the kernel
    does not write keeps a plausible but stale value, which the reference check catches."""
    kernel = compiled(prog.name)
    seed_a, seed_b = fresh_seed(), fresh_seed()
    inputs_a, inputs_b = random_inputs(prog, seed_a), random_inputs(prog, seed_b)
    buffers = kernel(**inputs_a)
    kernel.run(inputs_b, buffers)
    check_against_reference(prog, buffers, inputs_b, seed_b)


ODD_NAMES = sorted(set(ODD_TENSOR_NAMES) | set(ODD_AXIS_NAMES))


@pytest.mark.parametrize("name", ODD_NAMES)
def test_any_identifier_names_a_tensor_or_an_axis(name: str) -> None:
    """LANGUAGE.md reserves no identifier but its keywords: a name that is a C keyword, a
    libm function, a header macro or a typedef must still work as an input, a result and an
    axis. (The kernel runs in a worker process: a miscompiled name may crash it.)"""
    x = np.array([1.5, -2.0, 3.25], dtype=np.float32)
    f32 = {"dtype": "float32", "shape": [3]}
    other = "input0" if name != "input0" else "input1"
    cases = [
        (f"output0[N] = {name}[N] * 2.0", {name: f32}, {name: x}, {"output0": x * 2}),
        (f"{name}[N] = {other}[N] * 2.0", {other: f32}, {other: x}, {name: x * 2}),
        (f"output0[{name}] = {other}[{name}] + {name}.cast(`float32`)", {other: f32}, {other: x},
         {"output0": x + np.arange(3)}),
    ]  # fmt: skip
    failures = []
    for ir, input_dict, inputs, want in cases:
        try:
            got = run_kernel_isolated(ir, input_dict, None, inputs)
            assert sorted(got) == sorted(want), f"results {sorted(got)}"
            for key, value in want.items():
                np.testing.assert_allclose(got[key], value, rtol=1e-6)
        except Exception as err:  # noqa: BLE001 - collect every form's failure
            failures.append(f"{ir!r}: {type(err).__name__}: {str(err).splitlines()[0][:160]}")
    assert not failures, "\n".join(failures)
