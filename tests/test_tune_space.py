"""The tuner's search space (einc.tune.space): each sketch rule on its own, the default point
as the driver's default schedule, every sketch's default values against NumPy on C, the point
operations and features, and random points of random programs' spaces on C and OpenCL: each
matches the oracle or is refused with a located EincError (tests/oracle/corpus.py).
The programs are lit_tests/tune/*.ein (their scripts are lit goldens there)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, assume, given, note, settings
from hypothesis import strategies as st

from einc.compiler.driver import Compilation
from einc.errors import ScheduleError
from einc.schedule.default import default_schedule
from einc.schedule.script import Schedule
from einc.targets import get_target
from einc.tune.sketches import cpu, gpu
from einc.tune.sketches.base import RuleContext, analyse
from einc.tune.space import SearchSpace, describe_sketches, loops_of
from einc.tune.types import Point, TuneTask
from tests.oracle.budget import examples
from tests.oracle.corpus import check_case, genprog_case
from tests.oracle.genprog import GenProgram, programs
from tests.test_device_targets import require

PROGRAMS = Path(__file__).parent.parent / "lit_tests" / "tune"


def task(name: str, target: str = "c") -> TuneTask:
    return TuneTask.from_file(PROGRAMS / f"{name}.ein", target)


def context(name: str, target: str = "c") -> RuleContext:
    from einc.tune.space import _lanes, _max_threads  # pyright: ignore[reportPrivateUsage]

    t = task(name, target)
    loops = loops_of(t)
    return RuleContext(loops, analyse(loops), target, _lanes(target), _max_threads(target))


def ops(sketch_schedule: Schedule) -> list[str]:
    return [op.name.removeprefix("transform.einc.") for op in sketch_schedule.module.walk()]


# ---- each rule on its own ------------------------------------------------------------------------


def test_tile_rule_on_matmul_tiles_space_and_reduction_at_levels() -> None:
    sketches = {s.name: s for s in cpu.rule_tile(context("matmul"))}
    assert list(sketches) == ["tile", "tile.cw", "tile.cw.cr", "tile.cw.pw", "tile.cw.p1", "tile.cw.pw.p1"]
    tile = sketches["tile"]
    assert set(tile.schedule.knobs()) == {"output0.N.l1", "output0.N.l2", "output0.M.l1", "output0.M.l2", "output0.K.l1"}
    roles = tile.roles
    # matmul-like: the vector axis's outer tiles first, in parallel (a panel of B per task)
    assert roles["output0.N.l2"].kind == "unroll" and roles["output0.M.l1"].kind == "parallel"
    assert roles["output0.K.l1"].extent == 64 and roles["output0.M.l2"].level == 2
    assert {"tile", "reorder", "unroll", "vectorize", "parallelize"} <= set(ops(tile.schedule))
    assert "cache_write" in ops(sketches["tile.cw"].schedule) and "cache_read" not in ops(sketches["tile.cw"].schedule)
    assert "cache_read" in ops(sketches["tile.cw.cr"].schedule)
    for knob in tile.schedule.knobs().values():
        assert len(knob.options) <= 12 and knob.selected in knob.options


def test_tile_rule_on_conv_keeps_the_reductions_in_order() -> None:
    (tile, *_) = cpu.rule_tile(context("conv2d"))
    assert "output0.C.l1" in tile.schedule.knobs() and "output0.KH.l1" not in tile.schedule.knobs()
    assert "output0.N.l1" not in tile.schedule.knobs()  # extent 1: nothing to tile
    assert tile.roles["output0.F.l2"].kind == "unroll"  # the rows the vector input does not move with


def _parallel_trips(sketch_schedule: Schedule, name: str) -> list[int]:
    """The trip counts of the loops the sketch runs in parallel, on the loops of `name`."""
    from einc.transforms.loop_analysis import trip_count
    from einc.transforms.loop_transforms import PARALLEL_ATTR

    t = task(name)
    module = Compilation(t.source, t.filename, None, None, "c", sketch_schedule).module("scheduled")
    return [trip_count(op) or 0 for op in module.walk() if PARALLEL_ATTR in op.attributes]


def test_tile_rule_never_runs_a_batch_of_one_in_parallel() -> None:
    """conv2d.ein has a batch of 1: the parallel loop is the output channels' outer tile,
    moved outermost; `.p1` runs the second outer space tile (rows) in parallel instead."""
    sketches = {s.name: s for s in cpu.rule_tile(context("conv2d"))}
    assert {"tile", "tile.cw", "tile.cw.cr", "tile.cw.pw", "tile.cw.p1"} <= set(sketches)
    assert sketches["tile"].roles["output0.F.l1"].kind == "parallel"
    assert sketches["tile.cw.p1"].roles["output0.HO.l1"].kind == "parallel"
    assert sketches["tile.cw.p1"].roles["output0.F.l1"].kind == "tile"
    for name in ("tile", "tile.cw.p1"):
        trips = _parallel_trips(sketches[name].schedule, "conv2d")
        assert trips and all(n > 1 for n in trips), (name, trips)


def test_tile_rule_packs_the_weight() -> None:
    sketches = {s.name: s for s in cpu.rule_tile(context("conv2d"))}
    reads = [op.tensor.data for op in sketches["tile.cw.pw"].schedule.module.walk()
             if op.name == "transform.einc.cache_read"]  # fmt: skip
    assert reads == ["input1"]  # the weight (the vector input is `.cw.cr`'s)
    (mm,) = [s for s in cpu.rule_tile(context("matmul")) if s.name == "tile.cw.pw"]
    assert [op.tensor.data for op in mm.schedule.module.walk() if op.name == "transform.einc.cache_read"] == ["input0"]


def _ctx(ir: str, input_dict: dict) -> RuleContext:
    from einc.tune.space import _lanes  # pyright: ignore[reportPrivateUsage]

    loops = loops_of(TuneTask(ir, "c", "<test>", input_dict))
    return RuleContext(loops, analyse(loops), "c", _lanes("c"))


F32 = "float32"


def test_tile_rule_register_tiles_strided_and_grouped_convolutions() -> None:
    """A stride-2 convolution is unit-stride in its input only along the 3-wide kernel window:
    the register tile still vectorizes the output's WO and unrolls output channels (no
    vectorized reduction). A grouped convolution (the input channel `F // 4 * 2 + C`) is
    tiled too, its rows the weight's channel axis."""
    strided = ("output0[N, F, HO, WO] +=! input0[N, C, HO * 2 + KH, WO * 2 + KW] * input1[F, C, KH, KW] "
               "where HO in 6, WO in 8")  # fmt: skip
    (tile, *_) = cpu.rule_tile(_ctx(strided, {"input0": {"dtype": F32, "shape": [1, 4, 13, 17]},
                                              "input1": {"dtype": F32, "shape": [8, 4, 3, 3]}}))  # fmt: skip
    assert tile.roles["output0.WO.l2"].kind == "tile" and tile.roles["output0.F.l2"].kind == "unroll"
    assert "vectorize_reduction" not in ops(tile.schedule)
    grouped = ("output0[N, F, HO, WO] +=! input0[N, F // 4 * 2 + C, HO + KH, WO + KW] * input1[F, C, KH, KW] "
               "where HO in 6, WO in 8")  # fmt: skip
    sketches = cpu.rule_tile(_ctx(grouped, {"input0": {"dtype": F32, "shape": [2, 4, 8, 10]},
                                            "input1": {"dtype": F32, "shape": [8, 2, 3, 3]}}))  # fmt: skip
    assert sketches
    # the unrolled rows are output channels (F, or F's inner part where the index
    # simplification splits F into groups), and below the batch loop only row tiles that
    # divide their axis: a peeled copy would break the nest
    ((name, role),) = [(k, r) for k, r in sketches[0].roles.items() if r.kind == "unroll"]
    assert role.axis.split(".")[0] == "F", name
    assert all(role.extent % v == 0 for v in sketches[0].schedule.knobs()[name].options)


def test_tiled_sketches_of_a_padded_convolution_split_its_conditions_out() -> None:
    """Every CPU tiling sketch ends as the CPU default does (split_conditions_out): the
    padded convolution's bound tests are cut out of its loops in the sketch's script."""
    sketches = cpu.rule_tile(context("conv2d"))
    assert sketches and all("split_conditions" in ops(s.schedule) for s in sketches), [ops(s.schedule) for s in sketches]


def test_fuse_rule_on_softmax_computes_producers_at_row_tiles() -> None:
    (fused,) = cpu.rule_fuse_producers(context("softmax"))
    assert list(fused.schedule.knobs()) == ["output0.N.l1"]
    assert ops(fused.schedule).count("compute_at") == 2
    assert cpu.rule_fuse_producers(context("matmul")) == []


def test_consumer_fusion_rule_on_matmul_relu() -> None:
    (rca,) = cpu.rule_fuse_consumer(context("matmul_relu"))
    assert "reverse_compute_at" in ops(rca.schedule)
    assert cpu.rule_fuse_consumer(context("matmul")) == []


def test_rfactor_rule_only_for_little_spatial_parallelism() -> None:
    (rf,) = cpu.rule_rfactor(context("reduce_sum"))
    knob = rf.schedule.knobs()["output0.K.rfactor"]
    assert all(4096 % v == 0 for v in knob.options) and "rfactor" in ops(rf.schedule)
    assert cpu.rule_rfactor(context("matmul")) == []


def test_bind_rule_on_opencl() -> None:
    sketches = {s.name: s for s in gpu.rule_bind(context("layernorm", "opencl"))}
    assert set(sketches) == {"bind", "bind.private"}
    assert all(r.kind == "thread" for r in sketches["bind"].roles.values())
    assert ops(sketches["bind"].schedule).count("bind") == 2 + 2 + 4  # temp0, temp1: N; output0: N, C


def test_bind_reduce_rule_shares_a_reduction_among_work_items() -> None:
    (reduce,) = gpu.rule_bind_reduce(context("reduce_sum", "opencl"))
    assert set(reduce.schedule.knobs()) == {"output0.K.threads"}
    binds = [op.axis.data for op in reduce.schedule.module.walk() if op.name == "transform.einc.bind"]
    assert binds == ["block.x", "thread.x"]
    assert gpu.rule_bind_reduce(context("matmul", "opencl")) == []  # 128 x 128 outputs: enough work-items


# ---- the space --------------------------------------------------------------------------------


@pytest.mark.parametrize("name,target", [("matmul", "c"), ("conv2d", "c"), ("softmax", "c"), ("softmax", "opencl")])
def test_default_point_is_the_default_schedule(name: str, target: str) -> None:
    t = task(name, target)
    space = SearchSpace.from_task(t)
    loops = loops_of(t)
    default = default_schedule(get_target(target), loops)
    text = space.candidate(space.default_point()).schedule
    if default is None:
        assert Compilation(t.source, t.filename, None, None, target, "none").module("scheduled").is_structurally_equivalent(
            Compilation(t.source, t.filename, None, None, target, Schedule.parse(text)).module("scheduled"))
    else:
        assert text == str(default)


def _reference(name: str, x: dict[str, np.ndarray]) -> np.ndarray:
    a = x["input0"].astype(np.float64)
    if name == "matmul":
        return a @ x["input1"].astype(np.float64)
    if name == "matmul_relu":
        return np.maximum(a @ x["input1"].astype(np.float64), 0.0)
    if name == "reduce_sum":
        return a.sum(axis=1)
    if name == "softmax":
        e = np.exp(a - a.max(axis=1, keepdims=True))
        return e / e.sum(axis=1, keepdims=True)
    if name == "layernorm":
        centered = a - a.mean(axis=1, keepdims=True)
        return centered / np.sqrt((centered**2).mean(axis=1, keepdims=True) + 1e-5)
    assert name == "conv2d"
    w = x["input1"].astype(np.float64)
    padded = np.pad(a, ((0, 0), (0, 0), (1, 1), (1, 1)))
    out = np.zeros((1, 16, 12, 12))
    for kh in range(3):
        for kw in range(3):
            out += np.einsum("nchw,fc->nfhw", padded[:, :, kh:kh + 12, kw:kw + 12], w[:, :, kh, kw])
    return out


@pytest.mark.parametrize("name", ["matmul", "conv2d", "softmax", "layernorm", "matmul_relu", "reduce_sum"])
def test_every_sketch_default_matches_numpy_on_c(name: str) -> None:
    t = task(name)
    space = SearchSpace.from_task(t)
    assert len(space.sketches) >= 2, space.skipped
    rng = np.random.default_rng(3)
    kernel_inputs = None
    for sketch in space.sketches:
        text = space.candidate(space.sketch_default(sketch)).schedule
        comp = Compilation(t.source, t.filename, None, None, "c", Schedule.parse(text))
        kernel = comp.kernel()
        if kernel_inputs is None:
            kernel_inputs = {i.name: rng.uniform(0.5, 1.5, i.shape).astype(i.dtype) for i in kernel.inputs}
        got = kernel(**kernel_inputs)["output0"]
        np.testing.assert_allclose(got, _reference(name, kernel_inputs), rtol=2e-5, atol=1e-5, err_msg=sketch)


def test_points_mutate_crossover_and_refuse() -> None:
    space = SearchSpace.from_task(task("matmul"))
    rng = np.random.default_rng(0)
    assert space.size() == sum(int(np.prod([len(o) for o in space.knob_options(s).values()])) for s in space.sketches)
    for _ in range(50):
        p = space.random_point(rng)
        options = space.knob_options(p.sketch)
        assert set(p.values()) == set(options) and all(v in options[k] for k, v in p.knobs)
        q = space.mutate(p, rng)
        if q.sketch == p.sketch:
            changed = [k for k, v in q.knobs if p.values()[k] != v]
            assert 1 <= len(changed) <= 2
        r = space.random_point(rng)
        child = space.crossover(p, r, rng)
        if p.sketch == r.sketch:
            assert all(v in (p.values()[k], r.values()[k]) for k, v in child.knobs)
        else:
            assert child == p
    with pytest.raises(ScheduleError, match="no sketch 'nope'"):
        space.candidate(Point("nope"))
    with pytest.raises(ScheduleError, match="is not one of"):
        space.candidate(Point.of("tile", {**space.sketch_default("tile").values(), "output0.K.l1": 3}))
    with pytest.raises(ScheduleError, match="sets no value"):
        space.candidate(Point("tile"))


def test_features_follow_the_knobs() -> None:
    space = SearchSpace.from_task(task("matmul"))
    base = space.sketch_default("tile").values()
    small = Point.of("tile", {**base, "output0.M.l2": 16})
    large = Point.of("tile", {**base, "output0.M.l2": 64})
    f = space.features([space.default_point(), small, large])
    names = space.feature_names()
    assert f.shape == (3, len(names)) and f.dtype == np.float64 and np.isfinite(f).all()
    assert f[0, names.index("sketch=default")] == 1 and f[1, names.index("sketch=tile")] == 1
    assert f[1, names.index("tile:output0.M.l2:log2")] == 4 and f[2, names.index("tile:output0.M.l2:log2")] == 6
    assert f[2, names.index("l2.bytes.log2")] > f[1, names.index("l2.bytes.log2")]
    assert f[2, names.index("vector.multiple")] == 4 * f[1, names.index("vector.multiple")]


def test_describe_sketches_by_rule() -> None:
    text = describe_sketches(str(PROGRAMS / "reduce_sum.ein"), "c", "rfactor")
    assert text.startswith("// sketch rfactor:") and "knob output0.K.rfactor in" in text
    assert "sketch default" not in text
    assert "rule rfactor: does not apply" in describe_sketches(str(PROGRAMS / "matmul.ein"), "c", "rfactor")


# ---- random programs x random points -----------------------------------------------------------


def _check_points(prog: GenProgram, target: str, seed: int) -> None:
    text, input_dict, extra = prog.compile_args()
    assume(not extra)  # a TuneTask has no extra outputs
    space = SearchSpace.from_task(TuneTask(text, target, "<program>", input_dict))
    note(f"sketches: {list(space.sketches)}; skipped: {space.skipped}")
    rng = np.random.default_rng(seed)
    points = {space.default_point(), space.random_point(rng), space.random_point(rng)}
    for point in sorted(points):
        note(f"point: {point.describe()}")
        case = genprog_case(prog, target, space.candidate(point).schedule, seed, origin="test_tune_space")
        check_case(case)  # the oracle's numbers, or a located refusal (returned)


@settings(max_examples=examples(6), derandomize=True, database=None, deadline=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much, HealthCheck.data_too_large])  # fmt: skip
@given(prog=programs(large=True), seed=st.integers(0, 2**16))
def test_random_points_of_random_programs_on_c(prog: GenProgram, seed: int) -> None:
    _check_points(prog, "c", seed)


@settings(max_examples=examples(4), derandomize=True, database=None, deadline=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much, HealthCheck.data_too_large])  # fmt: skip
@given(prog=programs(), seed=st.integers(0, 2**16))
def test_random_points_of_random_programs_on_opencl(prog: GenProgram, seed: int) -> None:
    require("opencl")
    _check_points(prog, "opencl", seed)


def test_a_failing_rule_is_skipped_with_its_reason(monkeypatch: pytest.MonkeyPatch) -> None:
    def broken(ctx: RuleContext) -> list:
        raise RuntimeError("boom")

    monkeypatch.setitem(cpu.RULES, "rfactor", broken)
    space = SearchSpace.from_task(task("matmul"))
    assert space.skipped["rfactor"] == "RuntimeError: boom" and "tile" in space.sketches


def test_sketches_command(capsys: pytest.CaptureFixture[str]) -> None:
    from einc.cli import main

    assert main(["sketches", str(PROGRAMS / "reduce_sum.ein"), "--rule", "rfactor"]) == 0
    assert "transform.einc.rfactor" in capsys.readouterr().out
    assert main(["sketches", str(PROGRAMS / "reduce_sum.ein"), "--rule", "nope"]) == 1
    err = capsys.readouterr().err
    assert "<command line>:1:" in err and "no sketch rule 'nope' for target 'c' (rules: default, tile" in err
