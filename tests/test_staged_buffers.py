"""Staging buffers an earlier op made (a compute_at's local box, an rfactor's partials) under
later ops: rfactor inside a compute_at or a fuse combines its partials where the output is in
scope and before it is read; cache_read / cache_write of such a buffer (the `cache_staged`
widening of tests/oracle/genschedule.py). Pinned cases: tests/regressions/."""

from __future__ import annotations

import pytest

from einc.compiler.driver import Compilation
from einc.errors import ScheduleError
from tests.test_schedules import check, f32, script

PROG = "temp1[N] +=! input0[N, K]; output0[N] = temp1[N] * 2.0"
INPUTS = {"input0": f32(6, 8)}
COMPUTE_AT = (
    '%c = transform.einc.match stmt "output0" axis "N" in %root',
    '%p = transform.einc.match stmt "temp1" axis "N" in %root',
    "transform.einc.compute_at %p at %c",
)
RFACTOR = ('%k = transform.einc.match stmt "temp1" axis "K" in %root', "%a, %b = transform.einc.rfactor %k by 2")


def test_rfactor_inside_compute_at_combines_in_the_consumer_loop() -> None:
    """The partials are a private buffer per iteration of the consumer's loop, combined
    into the compute_at's buffer inside that loop (it was combined after it: undeclared)."""
    src = check(PROG, INPUTS, script(*COMPUTE_AT, *RFACTOR))
    body = src[src.index("for (int64_t N = 0"):]
    assert body.index("temp1_local_rf[") < body.index("output0[N] =")


def test_rfactor_inside_a_parallel_consumer_loop() -> None:
    """Each OpenMP iteration has its own partials (a function-wide buffer would race)."""
    check(PROG, {"input0": f32(64, 8)}, script(
        *COMPUTE_AT, '%n = transform.einc.match stmt "output0" axis "N" in %root',
        "transform.einc.parallelize %n", *RFACTOR))


def test_rfactor_of_a_reduction_fused_with_its_consumer() -> None:
    """The consumer reads the output in the fused loop: the partials are combined in each
    iteration, before it (they were combined after the loop: the consumer read zeros)."""
    check(PROG, INPUTS, script(
        '%t = transform.einc.match stmt "temp1" axis "N" in %root',
        '%o = transform.einc.match stmt "output0" axis "N" in %root',
        "%f = transform.einc.fuse %t into %o", *RFACTOR))


@pytest.mark.parametrize(("stmt_of", "axis"), [("output0", "N"), ("temp1", "K.rf"), ("temp1", "K.i")])
def test_cache_write_of_rfactor_partials_inside_compute_at(stmt_of: str, axis: str) -> None:
    check(PROG, INPUTS, script(
        *COMPUTE_AT, *RFACTOR, f'%x = transform.einc.match stmt "{stmt_of}" axis "{axis}" in %root',
        '%y = transform.einc.cache_write "temp1_local_rf" at %x'))


def test_cache_write_of_a_compute_at_buffer_at_its_loop() -> None:
    """The copies go after the buffer's allocation (they went before it: a value used
    before its definition, reported unlocated by the printer)."""
    check(PROG, INPUTS, script(
        *COMPUTE_AT, '%x = transform.einc.match stmt "output0" axis "N" in %root',
        '%y = transform.einc.cache_write "temp1_local" at %x'))


def test_cache_of_a_buffer_allocated_in_an_inner_loop_is_refused_at_the_op() -> None:
    text = script(
        '%c = transform.einc.match stmt "output0" axis "N" in %root', "%o, %i = transform.einc.tile %c by 2",
        '%p = transform.einc.match stmt "temp1" axis "N" in %root', "transform.einc.compute_at %p at %i",
        '%x = transform.einc.match stmt "output0" axis "N.o" in %root',
        '%y = transform.einc.cache_write "temp1_local" at %x')
    with pytest.raises(ScheduleError, match="allocated anew in each iteration of loop N.i") as info:
        Compilation(PROG, "<t>", INPUTS, None, "c", text).run_until("source")
    assert info.value.loc is not None and info.value.loc.line == 8


@pytest.mark.parametrize("target", [pytest.param(t, marks=getattr(pytest.mark, t)) for t in
                                    ("opencl", "hlsl", "sycl", "poplar", "cuda")])  # fmt: skip
def test_rfactor_inside_compute_at_at_a_thread_bound_loop(target: str) -> None:
    """On a device each work-item of the bound consumer loop owns its partials (private)."""
    import numpy as np

    from tests.test_device_differential import run_on_device
    from tests.test_device_targets import require_run

    require_run(target)
    text = script(*COMPUTE_AT, *RFACTOR, '%n = transform.einc.match stmt "output0" axis "N" in %root',
                  'transform.einc.bind %n to "thread.x"')
    comp = Compilation(PROG, "<t>", INPUTS, None, target, text)
    comp.run_until("source")
    x = np.random.default_rng(3).uniform(0.5, 1.5, (6, 8)).astype(np.float32)
    got = run_on_device(comp, {"input0": x})["output0"]
    np.testing.assert_allclose(got, x.astype(np.float64).sum(1) * 2, rtol=1e-5)
