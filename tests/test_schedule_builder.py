"""ScheduleBuilder: each method makes its `transform.einc.*` op and runs it on the scratch
payload at once; an illegal step tried is a Failure value that leaves the schedule, the
handles and the payload as they were; knobs are listed with their options; the schedule
built does to a fresh copy of the loops what the steps did to the scratch payload."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from xdsl.dialects import affine
from xdsl.dialects.builtin import ModuleOp, StringAttr
from xdsl.ir import Operation
from xdsl.parser import Parser

from einc.compiler.registry import get_all_passes
from einc.dialects.context import make_context
from einc.dialects import einc_transform as et
from einc.compiler.driver import Compilation
from einc.errors import EincError
from einc.schedule.default import default_schedule
from einc.schedule.script import Knob, Schedule
from einc.targets import get_target
from einc.schedule.builder import Failure, IllegalStep, ScheduleBuilder

ROW_SUM = "temp0[N] +=! input0[N, C]; output0[N] = temp0[N] * 2.0"
"""A fill (`temp0` N init), a reduction nest (`temp0` N, C) and an elementwise nest (`output0` N)."""


def row_sum_loops() -> ModuleOp:
    return Compilation(ROW_SUM, "<b>", {"input0": {"dtype": "float32", "shape": [8, 64]}}, None, "c").run_until("loops")


# two sibling loops computing exp(x - m) each (einc.transforms.loop_cse)
TWO_LOOPS = """
func.func @f(%x: memref<64xf32>, %m: memref<1xf32>, %s: memref<1xf32>, %y: memref<64xf32>) {
  affine.for %i = 0 to 64 {
    %v = affine.load %x[%i] : memref<64xf32>
    %c = affine.load %m[0] : memref<1xf32>
    %d = arith.subf %v, %c : f32
    %e = math.exp %d : f32
    %a = affine.load %s[0] : memref<1xf32>
    %b = arith.addf %a, %e : f32
    affine.store %b, %s[0] : memref<1xf32>
  } {einc.stmt = "t", einc.axis = "C"}
  affine.for %j = 0 to 64 {
    %v = affine.load %x[%j] : memref<64xf32>
    %c = affine.load %m[0] : memref<1xf32>
    %d = arith.subf %v, %c : f32
    %e = math.exp %d : f32
    %t = affine.load %s[0] : memref<1xf32>
    %q = arith.divf %e, %t : f32
    affine.store %q, %y[%j] : memref<64xf32>
  } {einc.stmt = "y", einc.axis = "C"}
  func.return
}
"""


def two_loops() -> ModuleOp:
    return Parser(make_context(), TWO_LOOPS).parse_module()


Step = Callable[[ScheduleBuilder], Any]
STEPS: dict[str, tuple[Callable[[], ModuleOp], Step, type[Operation]]] = {
    "tile": (row_sum_loops, lambda b: b.tile(b.match("temp0", "C"), 16), et.TileOp),
    "tile_by_knob": (row_sum_loops, lambda b: b.tile(b.match("temp0", "C"), b.knob("t", 16, [8, 32])), et.TileOp),
    "peel": (row_sum_loops, lambda b: b.peel(b.match("temp0", "C"), 24), et.PeelOp),
    "unroll": (row_sum_loops, lambda b: b.unroll(b.match("temp0", "C"), 4), et.UnrollOp),
    "rfactor": (row_sum_loops, lambda b: b.rfactor(b.match("temp0", "C"), 4), et.RfactorOp),
    "reorder": (row_sum_loops, lambda b: b.reorder([b.match("temp0", "C"), b.match("temp0", "N")]), et.ReorderOp),
    "parallelize": (row_sum_loops, lambda b: b.parallelize(b.match("output0", "N")), et.ParallelizeOp),
    "vectorize": (row_sum_loops, lambda b: b.vectorize(b.match("output0", "N")), et.VectorizeOp),
    "vectorize_reduction": (row_sum_loops, lambda b: b.vectorize_reduction(b.match("temp0", "C")), et.VectorizeReductionOp),
    "bind": (row_sum_loops, lambda b: b.bind(b.match("output0", "N"), "block.x"), et.BindOp),
    "fuse": (row_sum_loops, lambda b: b.fuse(b.match("temp0", "N", init=True), b.match("temp0", "N")), et.FuseOp),
    "compute_at": (row_sum_loops, lambda b: b.compute_at(b.match("temp0", "N"), b.match("output0", "N")), et.ComputeAtOp),
    "reverse_compute_at": (row_sum_loops, lambda b: b.reverse_compute_at(b.match("output0", "N"), b.match("temp0", "N")),
                           et.ReverseComputeAtOp),
    "cache_read": (row_sum_loops, lambda b: b.cache_read("input0", b.match("temp0", "N")), et.CacheReadOp),
    "cache_write": (row_sum_loops, lambda b: b.cache_write("temp0", b.match("temp0", "N")), et.CacheWriteOp),
    "reuse": (two_loops, lambda b: b.reuse(b.match("t", "C"), b.match("y", "C")), et.ReuseOp),
}  # fmt: skip


@pytest.mark.parametrize("name", sorted(STEPS))
def test_each_method_makes_its_op_and_runs_it_on_the_payload(name: str) -> None:
    make, step, kind = STEPS[name]
    loops = make()
    b = ScheduleBuilder(loops.clone())
    before = str(b.payload)
    step(b)
    ops = list(b.sequence.body.block.ops)
    assert isinstance(ops[-1], kind) and all(isinstance(op, et.MatchOp | et.KnobOp) for op in ops[:-1]), ops
    assert str(b.payload) != before  # run at once: the scratch payload is transformed
    schedule = b.finish()
    assert isinstance(schedule, Schedule) and schedule.ops(kind) == [ops[-1]]
    # one pathway: the schedule does to a fresh copy what the steps did to the scratch one
    assert str(schedule.apply(loops, get_all_passes())) == str(b.payload)
    assert str(loops) == before  # apply works on a clone


def test_results_are_handles_of_the_payload_loops() -> None:
    b = ScheduleBuilder(row_sum_loops())
    outer, inner = b.tile(b.match("temp0", "C"), 16)
    assert [b.loop(outer).step.value.data, b.loop(inner).step.value.data] == [16, 1]
    assert b.loop(inner).parent_op() is b.loop(outer)


def test_knobs_are_listed_with_their_options() -> None:
    b = ScheduleBuilder(row_sum_loops())
    knob = b.knob("temp0.tile_c", 16, (64, 8, 32))
    b.tile(b.match("temp0", "C"), knob)
    schedule = b.finish()
    assert schedule.knobs() == {"temp0.tile_c": Knob("temp0.tile_c", (8, 16, 32, 64), 16)}
    (tile,) = schedule.ops(et.TileOp)
    assert tile.size is knob and tile.static_size is None
    # a search sets the knob, and the schedule then tiles by it
    scheduled = schedule.with_values({"temp0.tile_c": 32}).apply(row_sum_loops(), get_all_passes())
    assert "step 32" in str(scheduled) and "step 16" not in str(scheduled)


def test_a_failing_step_is_a_failure_and_changes_nothing() -> None:
    b = ScheduleBuilder(row_sum_loops())
    b.vectorize(b.match("output0", "N"))
    schedule_before, payload_before = str(b.schedule), str(b.payload)
    reduction = next(op for op in b.payload.walk() if isinstance(op, affine.ForOp) and op.attributes["einc.axis"] == StringAttr("C"))
    # the row sum's C loop carries the sum: parallelizing it is illegal
    result = b.try_(lambda: b.parallelize(b.handle(reduction)))
    assert isinstance(result, Failure) and "parallelize" in result.message, result
    assert str(b.schedule) == schedule_before and str(b.payload) == payload_before
    assert reduction not in b.handles  # the attempt's match is gone with it
    # the builder goes on: a legal step after the failure is kept
    assert b.try_(lambda: b.vectorize_reduction(b.handle(reduction))) is None
    assert [type(op) for op in b.sequence.body.block.ops] == [et.MatchOp, et.VectorizeOp, et.MatchOp, et.VectorizeReductionOp]


def test_outside_try_an_illegal_step_raises_and_is_no_user_error() -> None:
    b = ScheduleBuilder(row_sum_loops())
    h = b.match("temp0", "N")
    with pytest.raises(IllegalStep, match="vectorize") as info:
        b.vectorize(h)  # not an innermost loop
    assert not isinstance(info.value, EincError)
    assert [type(op) for op in b.sequence.body.block.ops] == [et.MatchOp]


def test_an_attempt_failing_after_it_changed_the_payload_is_a_bug() -> None:
    """Only an attempt's last step may change the payload: the ops could be removed, the
    payload change not."""
    b = ScheduleBuilder(row_sum_loops())
    with pytest.raises(AssertionError, match="changed the payload"):
        b.try_(lambda: b.parallelize(b.tile(b.match("temp0", "C"), 16)[1]))


def test_handles_are_made_once_and_remembered() -> None:
    b = ScheduleBuilder(row_sum_loops())
    loop = b.loop(b.match("output0", "N"))
    first = b.handle(loop)
    assert b.handle(loop) is first
    matches = b.finish().ops(et.MatchOp)
    assert len(matches) == 2 and (matches[1].stmt.data, matches[1].axis.data) == ("output0", "N")  # type: ignore[union-attr]


def test_the_schedule_prints_and_parses_back() -> None:
    b = ScheduleBuilder(row_sum_loops())
    b.tile(b.match("temp0", "C"), b.knob("k", 16, [8]))
    schedule = b.finish()
    again = Schedule.parse(str(schedule))
    assert again.knobs() == schedule.knobs() and len(again.ops(et.TileOp)) == 1


def test_the_default_schedule_comes_from_the_target_as_ops() -> None:
    """C's and a device's default policies give a Schedule built as ops (no text parsed: no
    source); a target without a grid of work-groups to map onto (Poplar) gives none."""
    loops = row_sum_loops()
    schedule = default_schedule(get_target("c"), loops)
    assert isinstance(schedule, Schedule) and schedule.source is None
    (vectorized,) = schedule.ops(et.VectorizeReductionOp)
    assert isinstance(match := vectorized.target.owner, et.MatchOp) and match.axis == StringAttr("C")
    device = default_schedule(get_target("cuda"), loops)
    assert isinstance(device, Schedule) and device.source is None and device.ops(et.BindOp)
    assert default_schedule(get_target("poplar"), loops) is None
