"""Regressions: the OpenMP pragmas the C printer puts on nested schedule marks.

A schedule may leave a loop marked `einc.parallel` / `einc.vectorize` inside another marked
loop: `cache_read` puts a copy loop (itself marked `einc.vectorize`) into a vectorized loop,
and any loop of a nest may be parallelized. Each mark is legal on its own, but OpenMP allows
no `parallel` inside a `simd` region (gcc rejected the kernel: "OpenMP constructs other than
'ordered simd', 'simd', 'loop' or 'atomic' may not be nested inside 'simd' region"), no
`simd` in `simd` before OpenMP 5.0, and a `parallel for` inside a `parallel for` forks a team
per outer iteration. The printer keeps the outermost pragma and drops what cannot nest
(`einc.targets.op_printers._pragma_marks`). Each case runs the kernel against a float64 NumPy
reference and checks the pragmas printed, loop by loop."""

from __future__ import annotations

import re
from collections.abc import Callable

import numpy as np
import pytest

from einc.compiler.driver import Compilation


def script(*lines: str) -> str:
    body = "\n".join(f"    {line}" for line in [*lines, "transform.yield"])
    return (
        "builtin.module {\n  transform.named_sequence @__transform_main(%root: !transform.any_op) {\n"
        f"{body}\n  }}\n}}\n"
    )


def inlined(source: str) -> list[str]:
    """The lines of the source's last function, each call of a parallel loop's body
    (`einc_parallel_K(...)`, printed as a function of its own) replaced by that body."""
    bodies: dict[str, list[str]] = {}
    name, last, lines = "", "", []
    for line in source.splitlines():
        head = re.match(r"(?:static inline )?(?:__attribute__\(\(.*?\)\) )?void (\w+)\(", line)
        if head:
            name, lines = head.group(1), []
        elif line == "}" and name:
            bodies[name], last, name = lines, name, ""
        elif name:
            lines.append(line.strip())

    def expand(body: list[str]) -> list[str]:
        out = []
        for line in body:
            call = re.match(r"(einc_parallel_\d+)\(", line)
            out.extend(expand(bodies[call.group(1)]) if call else [line])
        return out

    return expand(bodies[last])


def pragmas(source: str) -> list[tuple[str, str]]:
    """(loop variable, the pragma line before its `for`, "" for none), in the order the
    kernel runs them (parallel loop bodies printed as functions taken where called)."""
    lines = inlined(source)
    found = []
    for before, line in zip(["", *lines], lines):
        loop = re.match(r"for \(int64_t (\w+) = ", line)
        if loop:
            found.append((loop.group(1), before if before.startswith("#pragma") else ""))
    return found


def run(
    ir: str, shapes: dict[str, tuple[int, ...]], lines: list[str],
    reference: Callable[..., np.ndarray],
) -> str:
    """Compile `ir` (float32 inputs of `shapes`) on C with the transform script `lines`, check
    output0 against `reference` (float64 NumPy) on random non-zero inputs; the C source."""
    inputs = {name: {"dtype": "float32", "shape": list(shape)} for name, shape in shapes.items()}
    kernel = Compilation(ir, "<test>", inputs, None, "c", script(*lines)).kernel()
    rng = np.random.default_rng(7)
    arrays = {
        name: np.asarray(rng.uniform(0.5, 2.0, shape) * rng.choice([-1.0, 1.0], shape), np.float32)
        for name, shape in shapes.items()
    }
    got = kernel(**{name: value.copy() for name, value in arrays.items()})["output0"]
    want = reference(**{name: value.astype(np.float64) for name, value in arrays.items()})
    np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-6)
    return kernel.source


ADD = "output0[N] = input0[N] + input1[]"
ADD_2D = "output0[N, M] = input0[N, M] * input1[M]"

VECTORIZE_CACHE = [
    '%n = transform.einc.match stmt "output0" axis "N" in %root',
    "transform.einc.vectorize %n",
    '%c = transform.einc.cache_read "input0" at %n',
]
COPY_LOOP = '%k = transform.einc.match stmt "output0" axis "input0.in0" in %root'


@pytest.mark.parametrize("n", [1, 13])
def test_parallel_copy_loop_inside_a_vectorized_loop(n: int) -> None:
    """The failing case of the random schedule suite (n = 1): vectorize N, cache input0 at N
    (its copy loop is marked vectorize), parallelize the copy loop. The copy loop prints no
    pragma: not `parallel for simd` inside the `simd` loop."""
    source = run(
        ADD, {"input0": (n,), "input1": ()},
        [*VECTORIZE_CACHE, COPY_LOOP, "transform.einc.parallelize %k"],
        lambda input0, input1: input0 + input1,
    )
    assert pragmas(source) == [("N", "#pragma omp simd"), ("input0_c0", "")]


def test_simd_copy_loop_inside_a_vectorized_loop() -> None:
    """The copy loop's own vectorize mark inside the vectorized N: one `simd`, the outer."""
    source = run(
        ADD, {"input0": (13,), "input1": ()}, VECTORIZE_CACHE,
        lambda input0, input1: input0 + input1,
    )
    assert pragmas(source) == [("N", "#pragma omp simd"), ("input0_c0", "")]


def test_parallel_copy_loop_inside_a_parallel_simd_loop() -> None:
    """N `parallel for simd`; the copy loop inside it, parallelized too, prints nothing."""
    source = run(
        ADD, {"input0": (13,), "input1": ()},
        [*VECTORIZE_CACHE, "transform.einc.parallelize %n",
         COPY_LOOP, "transform.einc.parallelize %k"],
        lambda input0, input1: input0 + input1,
    )
    assert pragmas(source) == [("N", "#pragma omp parallel for simd"), ("input0_c0", "")]


def test_parallel_loop_inside_a_parallel_loop() -> None:
    """Both loops of a nest parallelized: one team, forked by the outer loop."""
    source = run(
        ADD_2D, {"input0": (6, 5), "input1": (5,)},
        ['%n = transform.einc.match stmt "output0" axis "N" in %root',
         '%m = transform.einc.match stmt "output0" axis "M" in %root',
         "transform.einc.parallelize %n",
         "transform.einc.parallelize %m"],
        lambda input0, input1: input0 * input1,
    )
    assert pragmas(source) == [("N", "#pragma omp parallel for"), ("M", "")]


def test_parallel_simd_loop_inside_a_parallel_loop() -> None:
    """The inner loop parallelized and vectorized (a scalar trip count too short for einc's
    vectors: it stays a loop) inside a parallel one: `simd` only."""
    source = run(
        ADD_2D, {"input0": (6, 1), "input1": (1,)},
        ['%n = transform.einc.match stmt "output0" axis "N" in %root',
         '%m = transform.einc.match stmt "output0" axis "M" in %root',
         "transform.einc.parallelize %n",
         "transform.einc.parallelize %m",
         "transform.einc.vectorize %m"],
        lambda input0, input1: input0 * input1,
    )
    assert pragmas(source) == [("N", "#pragma omp parallel for"), ("M", "#pragma omp simd")]


def test_einc_vector_loop_inside_a_parallel_loop() -> None:
    """The inner loop parallelized and vectorized into einc's own vectors (the vector loop
    keeps `einc.parallel`) inside a parallel loop: the vector loop forks no team."""
    source = run(
        ADD_2D, {"input0": (6, 64), "input1": (64,)},
        ['%n = transform.einc.match stmt "output0" axis "N" in %root',
         '%m = transform.einc.match stmt "output0" axis "M" in %root',
         "transform.einc.parallelize %n",
         "transform.einc.parallelize %m",
         "transform.einc.vectorize %m"],
        lambda input0, input1: input0 * input1,
    )
    assert "einc_vload_f32x" in source  # 64 floats: whole vectors at any host width
    assert pragmas(source) == [("N", "#pragma omp parallel for"), ("M", "")]
