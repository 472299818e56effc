"""Regressions of the device path, each on every target it touched: executed on C, OpenCL
(PoCL), SYCL, HLSL (lavapipe) and Poplar (CPU harness) against einc's float64 NumPy
reference on fixed non-zero random inputs, compile-checked on CUDA (sm_80) and HIP (gfx90a),
and executed on CUDA where an NVIDIA GPU is.
Every lowering runs with `EINC_VERIFY_EACH=1` (verify-egpu after each pass).

- A local buffer (`cache_read`/`cache_write ... in "local"`, `compute_at`) at a loop that
  `unroll` then removes: the copy and its readers were outlined into kernels of their own,
  each with its own private array, so the readers read garbage (-0.0 on OpenCL/SYCL). They
  are one kernel now.
- A rank-0 reduction whose loop is unrolled by 2 or 3: an unrolled accumulation step (a bare
  store of a value read from the accumulator) was taken for the identity fill of the next
  one, and its store was put before the loads computing it ("value used before its
  definition" on every device target).
- `rfactor` of a rank-0 reduction: the reduction loop is the statement's outermost, and the
  combine nest was placed after the replaced (detached) loop (a ValueError on every target).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import pytest

from einc.compiler.driver import Compilation
from einc.semantics.compare import max_error, random_inputs, tolerance
from einc.semantics.reference import run_reference
from tests.test_device_differential import run_on_device, script
from tests.test_device_local import compile_check
from tests.test_device_targets import require, require_run

RUNS = ("c", "opencl", "sycl", "hlsl", "poplar")
CHECKS = ("cuda", "hip")
TARGETS = [pytest.param(t, marks=getattr(pytest.mark, t), id=t) if t != "c" else t for t in RUNS + CHECKS]


@pytest.fixture(autouse=True)
def verify_each(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("EINC_VERIFY_EACH", "1")


@dataclass(frozen=True)
class Case:
    name: str
    program: str
    shapes: dict[str, list[int]]
    lines: tuple[str, ...]

    def compilation(self, target: str) -> Compilation:
        inputs = {k: {"dtype": "float32", "shape": v} for k, v in self.shapes.items()}
        return Compilation(self.program, f"<{self.name}>", inputs, None, target, script(list(self.lines)))


def match(axis: str) -> str:
    return f'%{axis.lower()} = transform.einc.match stmt "output0" axis "{axis}" in %root'


CASES = [
    Case("scalar_cached_at_unrolled_loop", "output0[N] = input0[N] * input1[]", {"input0": [4], "input1": []},
         (match("N"), '%b = transform.einc.cache_read "input1" at %n in "local"', "transform.einc.unroll %n by 4")),
    Case("scalar_cached_at_unrolled_row_loop", "output0[N, M] = input0[N, M] + input1[]",
         {"input0": [3, 5], "input1": []},
         (match("N"), '%b = transform.einc.cache_read "input1" at %n in "local"', "transform.einc.unroll %n by 3")),
    Case("two_scalars_cached_at_unrolled_loop", "output0[N] = input0[N] * input1[] + input2[]",
         {"input0": [4], "input1": [], "input2": []},
         (match("N"), '%b = transform.einc.cache_read "input1" at %n in "local"',
          '%c = transform.einc.cache_read "input2" at %n in "local"', "transform.einc.unroll %n by 4")),
    Case("row_cached_for_writing_at_unrolled_loop", "output0[N, M] = input0[N, M] * input0[N, M]",
         {"input0": [2, 3]},
         (match("N"), '%b = transform.einc.cache_write "output0" at %n in "local"', "transform.einc.unroll %n by 2")),
    Case("producer_computed_at_unrolled_loop",
         "temp0[N, M] = input0[N, M] * input0[N, M]; output0[N, M] = temp0[N, M] + 1.0", {"input0": [2, 3]},
         ('%p = transform.einc.match stmt "temp0" axis "N" in %root', match("N"),
          "transform.einc.compute_at %p at %n", "transform.einc.unroll %n by 2")),
    Case("rank0_sum_unrolled_by_2", "output0[] +=! input1[N]", {"input1": [3]},
         (match("N"), "transform.einc.unroll %n by 2")),
    Case("rank0_sum_unrolled_by_3", "output0[] +=! input1[N]", {"input1": [5]},
         (match("N"), "transform.einc.unroll %n by 3")),
    Case("rank0_max_unrolled_by_3", "output0[] >=! input1[N]", {"input1": [4]},
         (match("N"), "transform.einc.unroll %n by 3")),
    Case("rank0_sum_rfactor", "output0[] +=! input1[N]", {"input1": [8]},
         (match("N"), "%p, %c = transform.einc.rfactor %n by 4")),
    Case("rank0_sum_rfactor_parallel_partials", "output0[] +=! input1[N]", {"input1": [16]},
         (match("N"), "%p, %c = transform.einc.rfactor %n by 4", "transform.einc.parallelize %p")),
    Case("rank0_max_rfactor", "output0[] >=! input1[N]", {"input1": [12]},
         (match("N"), "%p, %c = transform.einc.rfactor %n by 3")),
    Case("rank0_sum_of_matrix_rfactor", "output0[] +=! input1[N, K] * input1[N, K]", {"input1": [4, 3]},
         (match("N"), "%p, %c = transform.einc.rfactor %n by 2")),
]
BY_NAME = {c.name: c for c in CASES}


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
@pytest.mark.parametrize("target", TARGETS)
def test_device_regression(target: str, case: Case) -> None:
    if target != "c":
        require(target)
    comp = case.compilation(target)
    comp.run_until("source")
    if target in CHECKS:
        compile_check(comp)
        return
    check_run(comp)


@pytest.mark.cuda
@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_device_regression_runs_on_cuda(case: Case) -> None:
    require_run("cuda")
    comp = case.compilation("cuda")
    comp.run_until("source")
    check_run(comp)


def check_run(comp: Compilation) -> None:
    """Run on fixed random inputs; compare with the float64 reference."""
    target = comp.target
    arrays = {k: np.asarray(v) for k, v in random_inputs(comp.program, np.random.default_rng(7)).items()}
    if target == "c":
        outputs = comp.kernel()(**arrays)
    else:
        outputs = run_on_device(comp, arrays)
    expected = run_reference(comp.results["ein"], arrays)
    for name, want in expected.items():
        err = max_error(outputs[name], want)
        assert err <= tolerance("float32"), f"{target} {name}: {outputs[name]!r}, expected {want!r}"


def test_unrolled_scalar_copy_and_its_readers_form_one_kernel() -> None:
    """Each unrolled iteration's private copy is filled and read in the same kernel."""
    comp = BY_NAME["scalar_cached_at_unrolled_loop"].compilation("opencl")
    manifest = comp.target_obj.manifest(comp.run_until("target"))
    source = comp.run_until("source")
    assert len(manifest.kernels) == 4
    for k in range(4):
        kernel = source.split("__kernel")[k + 1]
        assert "input1_local[0] = input1[0];" in kernel and f"output0[{k}] = " in kernel, kernel


def test_rank0_rfactor_makes_independent_partials() -> None:
    """The rank-0 rfactor splits the loop: a partial buffer of 4, filled, accumulated by a
    loop over the partials, combined after it."""
    comp = BY_NAME["rank0_sum_rfactor"].compilation("c")
    text = str(comp.run_until("scheduled"))
    assert "memref<4xf32>" in text and "einc.rfactor" in text and "einc.combine" in text


def fill_pairs(case: Case) -> list[tuple[bool, str]]:
    from xdsl.dialects import func

    from einc.transforms import gpu_mapping

    module = case.compilation("opencl").run_until("scheduled")
    host = next(f for f in module.walk() if isinstance(f, func.FuncOp))
    return [(s.fill is not None, s.main.name) for s in gpu_mapping.statements(host.body.block)]


def test_unrolled_accumulation_step_is_not_a_fill() -> None:
    """Only the identity fill pairs with the first unrolled step; the other steps (their
    stored values read the accumulator) are statements of their own."""
    for case in [c for c in CASES if "unrolled_by" in c.name]:
        fills = [fill for fill, _ in fill_pairs(case)]
        assert fills == [True] + [False] * (len(fills) - 1), case.name
