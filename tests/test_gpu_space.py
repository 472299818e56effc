"""The device search space (einc/tune/sketches/gpu.py): its `tile` sketches vary the default
policy (einc/schedule/policies/gpu.py `Variant`: staging per input, double buffering,
padding, the staged reduction tile's unroll, one-column register tiles, cross-thread or
private reductions; the seed sketches a search measures first). The
constructed default is a candidate on every device target; every knob is bounded by the
target's description; a point past a limit is refused before any launch; points of the
new sketches compute NumPy's numbers on OpenCL (PoCL).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from einc.compiler.driver import Compilation
from einc.errors import EincError
from einc.schedule.default import default_schedule
from einc.targets import get_target
from einc.tune.space import SearchSpace, loops_of
from einc.tune.types import Point, TuneTask
from tests.test_device_differential import run_on_device
from tests.test_device_schedules import random_inputs
from tests.test_device_targets import require_run

MATMUL = "output0[N, M] +=! input0[N, K] * input1[K, M]"
SOFTMAX = ("temp0[N] >=! input0[N, C]; temp1[N] +=! (input0[N, C] - temp0[N]).call(`exp`); "
           "output0[N, C] = (input0[N, C] - temp0[N]).call(`exp`) / temp1[N]")  # fmt: skip
ROWSUM = "output0[N] +=! input0[N, C]"
PROGRAMS: dict[str, tuple[str, dict[str, list[int]]]] = {
    "matmul": (MATMUL, {"input0": [40, 48], "input1": [48, 24]}),
    "softmax": (SOFTMAX, {"input0": [6, 96]}),
    "rowsum": (ROWSUM, {"input0": [5, 200]}),
}
DEVICES = ("opencl", "sycl", "hlsl", "cuda", "hip")
MATMUL_DEVICES = ("opencl", "cuda")
"""The matmul's space (ten sketches, 2 CPU-s each to build) on one target without shared memory
on chip and one with: the others differ in the limits the reductions' spaces check."""
CASES = [(name, t) for name in PROGRAMS for t in (MATMUL_DEVICES if name == "matmul" else DEVICES)]


def _task(name: str, target: str, shapes: dict[str, list[int]] | None = None) -> TuneTask:
    ir, default_shapes = PROGRAMS[name]
    inputs = {k: {"dtype": "float32", "shape": v} for k, v in (shapes or default_shapes).items()}
    return TuneTask(ir, target, f"<{name}>", inputs)


@pytest.fixture(scope="module")
def spaces() -> dict[tuple[str, str], SearchSpace]:
    return {(name, t): SearchSpace.from_task(_task(name, t), rules=["tile"]) for name, t in CASES}


@pytest.mark.parametrize("name,target", CASES)
def test_the_constructed_default_is_a_candidate(spaces: dict, name: str, target: str) -> None:
    space = spaces[name, target]
    default = default_schedule(get_target(target), loops_of(space.task))
    assert default is not None
    assert space.candidate(space.default_point()).schedule == str(default)


def test_sketches_per_program(spaces: dict) -> None:
    """A contraction gets the staging, double-buffered and padded sketches where the target
    has shared memory; reductions the cross-thread sketch where the default keeps a private
    accumulator (HLSL: lavapipe's barriers switch coroutines; OpenCL: PoCL's rows in vector
    partial sums, `vector_rows`) and the private one where the default is cross-thread (CUDA:
    on-chip shared memory; SYCL: barriers split the work-item loop, work-items vector lanes)."""
    mm = spaces["matmul", "opencl"].sketches
    assert {"tile.columns", "tile.shared", "tile.shared.input0", "tile.shared.input1", "tile.shared.single",
            "tile.shared.pad0", "tile.shared.pad1"} <= set(mm)  # fmt: skip
    columns = spaces["matmul", "opencl"].sketch_default("tile.columns").values()
    assert columns["output0.M.reg"] == 1 and columns["output0.M.threads"] == 32  # all 24 columns of the tile
    assert [s for s in spaces["matmul", "opencl"].sketches if spaces["matmul", "opencl"].sketches[s].seed] == [
        "tile.columns", "tile.kunroll", "tile.shared"]
    kunroll = mm["tile.kunroll"]
    assert kunroll.roles["output0.K.kunroll"].kind == "unroll" and "shared" not in str(kunroll.schedule)
    assert spaces["matmul", "opencl"].knob_options("tile.kunroll")["output0.K.kunroll"] == (1, 2, 4, 8)
    assert "transform.einc.double_buffer" in str(mm["tile.shared"].schedule)
    assert "transform.einc.double_buffer" not in str(mm["tile.shared.single"].schedule)
    assert '"shared" pad 1' in str(mm["tile.shared.pad1"].schedule)
    assert mm["tile.shared"].roles["output0.K.kunroll"].kind == "unroll"
    for key in (("softmax", "hlsl"), ("rowsum", "hlsl"), ("softmax", "opencl"), ("rowsum", "opencl")):
        assert "tile.cross" in spaces[key].sketches and "tile.private" not in spaces[key].sketches, key
    for key in (("softmax", "sycl"), ("rowsum", "sycl"), ("rowsum", "cuda")):
        assert "tile.private" in spaces[key].sketches, key
        # the default is cross-thread already: `tile.cross` stays only for its rows per
        # work-group (gpu.14), where the rows give it more than one option
        if "tile.cross" in spaces[key].sketches:
            assert any(k.endswith(".rows") and len(o) > 1 for k, o in spaces[key].knob_options("tile.cross").items()), key
    cross = spaces["rowsum", "sycl"].sketches["default"]
    assert set(cross.schedule.knobs()) == {"output0.C.threads"}
    rows = spaces["rowsum", "opencl"].sketches["default"]  # PoCL: a row per work-item, vector partial sums
    assert set(rows.schedule.knobs()) == {"output0.N.threads"}
    assert "transform.einc.vectorize_reduction" in str(rows.schedule)
    assert "transform.einc.vectorize_reduction" not in str(spaces["rowsum", "opencl"].sketches["tile.cross"].schedule)


ROW_SHAPES = {"rowsum": {"input0": [5, 200]}, "softmax": {"input0": [3, 40]}}
"""Rows a vector of 16 does not divide (a remainder in narrower vectors) and one (40) barely
over a vector."""


@pytest.mark.parametrize("target", ["opencl", "sycl", "hlsl", "cuda", "hip", "poplar"])
@pytest.mark.parametrize("name", ["rowsum", "softmax"])
def test_the_default_row_reduction_per_target(name: str, target: str) -> None:
    """The default row reduction's shape on every device target, and its numbers (the egpu
    interpreter, NumPy float64 reference): a row per work-item in vector partial sums of
    the target's width on PoCL (`vector_rows`: OpenCL), cross-thread elsewhere a barrier
    splits the work-item loop or shared memory is on chip (SYCL, CUDA, HIP), a row per
    work-item with a scalar accumulator on lavapipe (HLSL); Poplar leaves the mapping to
    its vertex split."""
    from einc.semantics.egpu import run_lowered

    ir = PROGRAMS[name][0]
    inputs = {k: {"dtype": "float32", "shape": v} for k, v in ROW_SHAPES[name].items()}
    comp = Compilation(ir, f"<{name}>", inputs, None, target, None, use_records=False)
    comp.run_until("target")
    schedule = comp.schedule_text or ""
    vector = "transform.einc.vectorize_reduction" in schedule
    cross = 'to "thread.x"' in schedule and "cache_write" not in schedule
    assert vector == (target == "opencl"), schedule
    if target in ("sycl", "cuda", "hip"):
        assert cross, schedule
    if target in ("opencl", "hlsl"):
        assert not cross and '"local"' in schedule, schedule
    x = random_inputs(comp)
    got = run_lowered(comp.module("target"), x, target=target)["output0"]
    np.testing.assert_allclose(got, _reference(name, x), rtol=1e-5, atol=1e-5)


def test_the_defaults_neighbouring_register_tiles_are_seeds(spaces: dict) -> None:
    """The default with each register tile one option larger (PoCL's old 8x8 default tile:
    16x8 measured faster), then each one option smaller (lavapipe: 4x8, the hand schedule
    "32x64 tile, 4x8 registers", faster than the default's 8x8), measured first after the
    default, then the seed sketches' default points; a tile at its largest option (PoCL's 16
    rows, `tall_rows`) has no larger neighbour."""
    pocl = spaces["matmul", "opencl"]
    base = pocl.default_point().values()
    options = pocl.knob_options("default")
    assert base["output0.N.reg"] == options["output0.N.reg"][-1] != base["output0.M.reg"]  # tall_rows
    hlsl = SearchSpace.from_task(_task("matmul", "hlsl", {"input0": [64, 64], "input1": [64, 64]}), rules=[])
    for space in (pocl, hlsl):
        target = space.task.target
        base = space.default_point().values()
        options = space.knob_options("default")
        moves = [(k, s) for s in (1, -1) for k in ("output0.M.reg", "output0.N.reg")
                 if 0 <= options[k].index(base[k]) + s < len(options[k])]  # fmt: skip
        neighbours = space.default_neighbours()
        assert [p.sketch for p in neighbours] == ["default"] * len(moves), target
        for p, (knob, step) in zip(neighbours, moves):
            changed = {k: v for k, v in p.values().items() if v != base[k]}
            assert changed == {knob: options[knob][options[knob].index(base[knob]) + step]}, (target, changed)
        assert space.seed_points()[: len(moves)] == neighbours and space.default_point() not in space.seed_points()
    hand = {"output0.N.threads": 8, "output0.M.threads": 8, "output0.N.reg": 4, "output0.M.reg": 8}
    assert any(p.values() == hand for p in hlsl.default_neighbours())  # the hand's 4x8 beside lavapipe's 8x8


def test_the_defaults_narrower_and_wider_cross_thread_reductions_are_seeds(spaces: dict) -> None:
    """The default with every cross-thread reduction one width narrower, and one wider, all
    together (Intel's SYCL CPU device: the default's 16 work-items per row, gpu.14, beside 8
    and 32), measured in the default's batch."""
    for name in ("softmax", "rowsum"):
        space = spaces[name, "sycl"]
        base = space.default_point().values()
        widths = [k for k in base if k.endswith(".C.threads") and not k.startswith("output0.") or name == "rowsum"]
        neighbours = space.default_neighbours()
        assert len(neighbours) == 2 and space.seed_points()[:2] == neighbours
        for p, step in zip(neighbours, (-1, 1)):
            changed = {k: v for k, v in p.values().items() if v != base[k]}
            options = {k: space.knob_options("default")[k] for k in widths}
            assert changed == {k: options[k][options[k].index(base[k]) + step] for k in widths}, (name, changed)
    assert space.default_point().values()["output0.C.threads"] == 16  # rowsum: one vector of work-items a row
    assert [p.values()["output0.C.threads"] for p in space.default_neighbours()] == [8, 32]


@pytest.mark.parametrize("target", DEVICES)
def test_every_knob_is_bounded_by_the_target(spaces: dict, target: str) -> None:
    limits = get_target(target).limits
    assert limits is not None
    for name in (n for n, t in CASES if t == target):
        space = spaces[name, target]
        extents = {f"{t}.{a}": e for t, a, e in ((n.stmt, ax, n.extent(ax)) for n in space.nests for ax in n.axes)}
        for sketch in space.sketches:
            for knob, options in space.knob_options(sketch).items():
                kind = knob.rpartition(".")[2]
                extent = extents[knob.rpartition(".")[0]]
                if kind == "threads":
                    assert max(options) <= limits.max_threads_per_block, (sketch, knob)
                elif kind in ("reg", "items"):
                    # register tiles: divisors of their axis, at most 16 a work-item
                    assert all(extent % v == 0 and v <= 16 for v in options), (sketch, knob, options)
                elif kind == "rows":
                    # rows of a cross-thread reduction per work-group: divisors of the rows, at most 16
                    assert all(extent % v == 0 and v <= 16 for v in options), (sketch, knob, options)
                elif kind == "ktile":
                    assert max(options) <= min(16, extent) and limits.shared_bytes_per_block > 0, (sketch, knob)
                else:
                    assert kind == "kunroll" and set(options) <= {1, 2, 4, 8}, (sketch, knob)


def test_no_tile_sketches_without_a_grid() -> None:
    """Poplar (one MultiVertex, no shared memory): no policy schedule, no `tile` sketch."""
    space = SearchSpace.from_task(_task("matmul", "poplar"))
    assert not any(s.startswith("tile") for s in space.sketches)


@pytest.mark.parametrize("sketch", ["tile.shared", "tile.shared.single"])
def test_a_point_past_the_shared_memory_is_refused_before_launch(sketch: str) -> None:
    """HLSL has 32 KiB of shared memory a work-group: 64x4 work-items with 8x8 register tiles
    stage (512 + 32) x 16 floats per input tile (twice that double buffered, the default)."""
    from einc.schedule.policies.gpu import Variant, build
    from einc.tune.sketches.gpu import tile_variants

    task = _task("matmul", "hlsl", {"input0": [512, 512], "input1": [512, 512]})
    variant = next(v for name, v, _ in tile_variants(["input0", "input1"], True) if name == sketch)
    assert isinstance(variant, Variant)
    schedule = build(get_target("hlsl"), loops_of(task), variant=variant)
    assert schedule is not None
    values = {**{k: v.selected for k, v in schedule.knobs().items()}, "output0.M.threads": 64, "output0.N.threads": 4,
              "output0.M.reg": 8, "output0.N.reg": 8, "output0.K.ktile": 16}  # fmt: skip
    comp = Compilation(task.source, "<m>", task.input_dict, None, "hlsl", str(schedule.with_values(values)))
    with pytest.raises(EincError, match="shared memory"):
        comp.run_until("source")


def _reference(name: str, x: dict[str, np.ndarray]) -> np.ndarray:
    a = x["input0"].astype(np.float64)
    if name == "matmul":
        return a @ x["input1"].astype(np.float64)
    if name == "rowsum":
        return a.sum(axis=1)
    e = np.exp(a - a.max(axis=1, keepdims=True))
    return e / e.sum(axis=1, keepdims=True)


POINTS: list[tuple[str, str, dict[str, Any]]] = [
    ("matmul", "tile.shared.single", {"output0.K.ktile": 8, "output0.K.kunroll": 8, "output0.M.reg": 4}),
    ("matmul", "tile.shared.pad1", {"output0.K.ktile": 16, "output0.K.kunroll": 2, "output0.N.reg": 5}),
    ("matmul", "tile.shared.input1", {"output0.K.ktile": 4, "output0.M.threads": 2, "output0.N.threads": 16}),
    ("matmul", "tile.columns", {}),
    ("matmul", "tile.kunroll", {"output0.K.kunroll": 8, "output0.N.reg": 5}),
    ("softmax", "tile.cross", {"temp0.C.threads": 32, "temp1.C.threads": 64}),
    ("softmax", "default", {"temp0.N.threads": 16}),  # PoCL: rows per work-item, vector partials
    ("rowsum", "tile.cross", {"output0.C.threads": 16}),
    ("rowsum", "default", {"output0.N.threads": 8}),
]


@pytest.mark.opencl
@pytest.mark.parametrize("name,sketch,values", POINTS, ids=[f"{n}-{s}" for n, s, _ in POINTS])
def test_points_of_the_new_sketches_match_numpy(spaces: dict, name: str, sketch: str, values: dict[str, Any]) -> None:
    require_run("opencl")
    space = spaces[name, "opencl"]
    point = Point.of(sketch, {**space.sketch_default(sketch).values(), **values})
    task = space.task
    comp = Compilation(task.source, f"<{name}>", task.input_dict, None, "opencl", space.candidate(point).schedule)
    comp.run_until("source")
    x = random_inputs(comp)
    out = run_on_device(comp, x)["output0"]
    np.testing.assert_allclose(out, _reference(name, x), rtol=1e-4, atol=1e-4)


@pytest.mark.sycl
def test_the_unrolled_reduction_on_sycls_one_column_tiles_matches_numpy() -> None:
    """`tile.kunroll` on SYCL: the one-column register tiles (Intel's CPU device's default
    shape) with the reduction unrolled by 8, run against NumPy."""
    from einc.schedule.policies import gpu as policy

    require_run("sycl")
    task = _task("matmul", "sycl")
    target = get_target("sycl")
    schedule = policy.build(target, loops_of(task), variant=policy.Variant(frozenset(), unstaged_kunroll=True))
    assert schedule is not None
    knobs = schedule.knobs()
    assert knobs["output0.M.reg"].selected == 1 and knobs["output0.K.kunroll"].selected == 4
    text = str(schedule.with_values({**{k: v.selected for k, v in knobs.items()}, "output0.K.kunroll": 8}))
    comp = Compilation(task.source, "<matmul>", task.input_dict, None, "sycl", text)
    comp.run_until("source")
    x = random_inputs(comp)
    np.testing.assert_allclose(run_on_device(comp, x)["output0"], _reference("matmul", x), rtol=1e-4, atol=1e-4)
