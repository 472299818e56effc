"""Poplar-specific behaviour, run on einc's CPU harness (einc/runtime/poplar.py) and checked
against NumPy on fresh random inputs: kernels whose loops a schedule bound to block and
thread ids (the blocks run one after another in the vertex, the threads are its workers),
the slices of read-only inputs each vertex of a split kernel is connected to, the per-tile
memory limit, and local arrays inside a vertex's compute().
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from einc.driver import Compilation, poisoned
from einc.errors import TargetError
from tests.test_conformance import fresh_seed
from tests.test_device_differential import script
from tests.test_device_targets import require

pytestmark = pytest.mark.poplar


def _compile(ir: str, inputs: dict[str, Any], lines: list[str] | None = None) -> Compilation:
    comp = Compilation(ir, "<poplar>", inputs, None, "poplar", script(lines) if lines else None)
    comp.run_until("source")
    return comp


def _random(inputs: dict[str, Any], seed: int) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    values = {}
    for name, spec in inputs.items():
        if spec["dtype"].startswith("float"):
            values[name] = rng.uniform(-2, 2, spec["shape"]).astype(spec["dtype"])
        else:
            values[name] = rng.integers(-9, 10, spec["shape"]).astype(spec["dtype"])
    return values


def _run(comp: Compilation, values: dict[str, np.ndarray]) -> tuple[dict[str, np.ndarray], Any]:
    runner = comp.target_obj.build(comp.results["source"], comp.results["target"])
    outputs = {o.name: poisoned(o.shape, o.dtype) for o in comp.program.outputs}
    runner(values, outputs)
    return outputs, runner


# ---- bound loops --------------------------------------------------------------------------------

_N_M = ['%n = transform.einc.match stmt "output0" axis "N" in %root',
        '%m = transform.einc.match stmt "output0" axis "M" in %root']  # fmt: skip


@pytest.mark.parametrize(
    ("dtype", "lines", "marks"),
    [
        ("float32", [*_N_M, "%no, %ni = transform.einc.tile %n by 4", 'transform.einc.bind %no to "block.x"',
                     'transform.einc.bind %ni to "thread.x" max_threads 6', 'transform.einc.bind %m to "block.y"'],
         ["for (int einc_block = 0; einc_block < 9; ++einc_block)", "int einc_thread = (int)workerId;",
          "if (workerId >= 4) return true;"]),
        ("float32", [*_N_M, "%no, %ni = transform.einc.tile %n by 2", 'transform.einc.bind %no to "block.x"',
                     'transform.einc.bind %ni to "thread.y" max_threads 6',
                     'transform.einc.bind %m to "thread.x" max_threads 6'],
         ["einc_thread / 3", "einc_thread % 3"]),
        ("int8", [*_N_M, "%no, %ni = transform.einc.tile %n by 3", 'transform.einc.bind %no to "block.x"',
                  'transform.einc.bind %ni to "thread.x" max_threads 6'],
         ["if (workerId >= 1) return true;", "for (int einc_thread = 0; einc_thread < 3; ++einc_thread)"]),
    ],
    ids=["blocks-xy", "threads-xy", "bytes-one-worker"],
)
def test_bound_loops_run_blocks_in_turn_and_threads_on_workers(dtype: str, lines: list[str], marks: list[str]) -> None:
    """N (10, tiled with a partial last tile) and M (3) bound to block and thread ids: the
    vertex loops over the blocks, its workers are the threads (int8 stores: one worker runs
    the threads in turn, two workers never write one 32-bit word); results are NumPy's."""
    require("poplar")
    inputs = {"input0": {"dtype": "float32", "shape": [10, 3]}}
    comp = _compile(f"output0[N, M] = (input0[N, M] * 2).cast(`{dtype}`)", inputs, lines)
    source = comp.results["source"]
    for mark in marks:
        assert mark in source
    values = _random(inputs, fresh_seed())
    outputs, _ = _run(comp, values)
    np.testing.assert_array_equal(outputs["output0"], (values["input0"] * 2).astype(dtype))


def test_more_threads_than_workers_are_refused_at_the_bind() -> None:
    """Seven threads per block: the bind's thread limit (six workers) refuses it."""
    require("poplar")
    from einc.errors import ScheduleError

    inputs = {"input0": {"dtype": "float32", "shape": [14]}}
    lines = ['%n = transform.einc.match stmt "output0" axis "N" in %root',
             "%no, %ni = transform.einc.tile %n by 7",
             'transform.einc.bind %no to "block.x"',
             'transform.einc.bind %ni to "thread.x" max_threads 6']  # fmt: skip
    with pytest.raises(ScheduleError, match="needs 7 threads per block, more than the limit 6"):
        _compile("output0[N] = input0[N] + 1.0", inputs, lines)
    with pytest.raises(TargetError, match=r"7 threads per block \(at most 6\)"):
        _compile("output0[N] = input0[N] + 1.0", inputs,
                 [*lines[:3], 'transform.einc.bind %ni to "thread.x"'])  # fmt: skip
