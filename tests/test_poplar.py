"""Poplar-specific behaviour, run on einc's CPU harness (einc/runtime/poplar.py) and checked
against NumPy on fresh random inputs: kernels whose loops a schedule bound to block and
thread ids (the blocks run one after another in the vertex, the threads are its workers),
the slices of read-only inputs each vertex of a split kernel is connected to, the per-tile
memory limit, and local arrays inside a vertex's compute().
"""

from __future__ import annotations

import dataclasses
import re
from typing import Any

import numpy as np
import pytest

from einc.compiler.driver import Compilation
from einc.runtime.arrays import poisoned
from einc.errors import TargetError
from einc.schedule.choice import ScheduleChoice
from tests.test_conformance import fresh_seed
from tests.test_device_differential import script
from tests.test_device_targets import require

pytestmark = pytest.mark.poplar


def _compile(ir: str, inputs: dict[str, Any], lines: list[str] | None = None, unscheduled: bool = False) -> Compilation:
    """`lines` as the schedule, or the default; `unscheduled`: no schedule (the mapping pass's
    one output element per point, where the default register-tiles a contraction)."""
    schedule = ScheduleChoice.NONE if unscheduled else script(lines) if lines else None
    comp = Compilation(ir, "<poplar>", inputs, None, "poplar", schedule)
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


# ---- read-only inputs connected as slices ---------------------------------------------------------


def test_split_kernel_vertices_read_only_their_slices_of_inputs() -> None:
    """A stencil with a halo (each vertex's slice of `input0` is its range plus two
    elements) and a gather (`input1`, indexed by a loaded value, stays whole); the mirror
    bounds-checks every read against the connected slice, and the results are NumPy's."""
    require("poplar")
    inputs = {"input0": {"dtype": "float32", "shape": [1002]}, "input1": {"dtype": "float32", "shape": [7]},
              "input2": {"dtype": "int32", "shape": [1000]}}  # fmt: skip
    comp = _compile("output0[N] = input0[N] + input0[N + 2] * input1[input2[N]] where N in 1000", inputs)
    values = _random(inputs, fresh_seed())
    values["input2"] = np.random.default_rng(fresh_seed()).integers(0, 7, 1000).astype(np.int32)
    outputs, runner = _run(comp, values)
    x, w, i = (values[k].astype(np.float64) for k in ("input0", "input1", "input2"))
    np.testing.assert_allclose(outputs["output0"], x[:1000] + x[2:] * w[i.astype(int)], rtol=1e-6, atol=1e-5)
    records = runner.graph()
    assert len(records) > 2
    for r in records:
        out, x_slice = r.fields["output0"], r.fields["input0"]
        assert (x_slice.first, x_slice.last) == (out.first, out.last + 2)
        assert (r.fields["input2"].first, r.fields["input2"].last) == (out.first, out.last)
        assert r.fields["input1"].count == 7


_OUT_OF_SLICE = """
#include <poplar/Vertex.hpp>
class EincPeek : public poplar::Vertex {
public:
  poplar::Input<poplar::Vector<float>> in;
  poplar::Output<poplar::Vector<float>> out;
  bool compute() { out[0] = in[2]; return true; }
};
#ifdef EINC_POPLAR_HOST
#include <poplar/Graph.hpp>
#include <poplar/Program.hpp>
EINC_POPLAR_VERTEX(EincPeek, in, out)
void einc_build_graph(poplar::Graph &graph, const std::vector<poplar::Tensor> &buffers,
                      poplar::program::Sequence &prog) {
  for (const poplar::Tensor &buffer : buffers) graph.setTileMapping(buffer, 0);
  poplar::ComputeSet cs = graph.addComputeSet("peek");
  poplar::VertexRef v = graph.addVertex(cs, "EincPeek", {{"in", buffers[0].slice(0, 2)}, {"out", buffers[1]}});
  graph.setTileMapping(v, 0);
  prog.add(poplar::program::Execute(cs));
}
#endif
"""


def test_mirror_refuses_a_read_outside_the_connected_slice() -> None:
    """The element exists in the tensor, but the vertex is connected to its first two."""
    require("poplar")
    from einc.errors import ToolchainError
    from einc.runtime.manifest import Buffer, KernelLaunch, LaunchManifest
    from einc.runtime.poplar import load_poplar_kernel

    manifest = LaunchManifest(
        "poplar", (Buffer("in", "float32", (4,), "input"), Buffer("out", "float32", (1,), "output")),
        (KernelLaunch("peek", ("in", "out"), (1, 1, 1), (1, 1, 1)),),
    )  # fmt: skip
    runner = load_poplar_kernel(_OUT_OF_SLICE, manifest)
    with pytest.raises(ToolchainError, match="indexes element 2 of a field connected to 2 elements"):
        runner({"in": np.arange(4, dtype=np.float32)}, {"out": np.zeros(1, np.float32)})


# ---- tile memory ------------------------------------------------------------------------------------

_ROWS = {"input0": {"dtype": "float32", "shape": [12, 20000]}}
"""960000 bytes: more than one tile's 624 KiB, half of it fits."""


def test_kernel_over_a_tiles_memory_spreads_over_more_tiles() -> None:
    """12 row sums would be one vertex (fewer than 8 points per worker); its 960 KB of input
    do not fit a tile, so it is cut into vertices of 6 rows (480 KB each)."""
    require("poplar")
    from einc.dialects.egpu_attrs import TileSplitAttr
    from einc.transforms.vertex_split import vertex_bytes

    comp = _compile("output0[N] +=! input0[N, K]", _ROWS)
    kernels = [k for k in comp.results["target"].ops if hasattr(k, "block_size")]
    split = kernels[0].attributes["egpu.tile_split"]
    assert isinstance(split, TileSplitAttr) and split.data.vertices == 2
    assert 480_000 <= split.data.bytes == vertex_bytes(kernels[0], split.data) <= 624 * 1024
    values = _random(_ROWS, fresh_seed())
    outputs, runner = _run(comp, values)
    np.testing.assert_allclose(outputs["output0"], values["input0"].astype(np.float64).sum(axis=1), rtol=1e-4, atol=1e-2)
    assert sorted(r.fields["input0"].count for r in runner.graph()) == [6 * 20000, 6 * 20000]


@pytest.mark.parametrize(
    ("ir", "inputs", "where"),
    [
        ("output0[N] +=! input0[input1[N], K]", {**_ROWS, "input1": {"dtype": "int32", "shape": [12]}},
         "needs 960032 bytes of tile memory per vertex spread over 12 tiles"),
        ("output0[F, C] = input0[input1[F], C]",
         {"input0": {"dtype": "float32", "shape": [30528, 1024]}, "input1": {"dtype": "int32", "shape": [3072]}},
         "needs 125051272 bytes of tile memory per vertex spread over 1472 tiles"),
        ("output0[] +=! input0[N, K]", _ROWS, "needs 960008 bytes of tile memory per vertex on one tile"),
    ],
    ids=["gathered-rows", "antares-take", "one-vertex"],
)
def test_vertex_over_a_tiles_memory_is_a_target_error(ir: str, inputs: dict[str, Any], where: str) -> None:
    """A gather reads its tensor whole on every tile (AntaresIR.md's Take: a 125 MB table);
    a kernel that cannot be split is one vertex: either way a TargetError names the bytes
    and the limit, before any code, and a gathered table larger than a tile by name."""
    with pytest.raises(TargetError, match=rf"poplar target: kernel \w+ {where} .*more than a tile's 638976 bytes") as e:
        _compile(ir, inputs)
    gathered = "it reads 'input0' (" in str(e.value) and "(a gather), whole on every tile" in str(e.value)
    assert gathered == ("input1" in inputs)


# ---- boxes of points ----------------------------------------------------------------------------------


def _check_boxes(runner: Any, split: Any, reads: dict[str, int]) -> None:
    """Every vertex writes its own box of output0 (disjoint, all of it) and reads, of each
    input, a box of the split's extents (`reads`: elements per box)."""
    records = [r for r in runner.graph() if "output0" in r.fields]
    assert len(records) == split.vertices and len({r.tile for r in records}) == len(records)
    assert sum(r.fields["output0"].count for r in records) == split.points
    for r in records:
        assert r.fields["output0"].writes
        for name, count in reads.items():
            assert r.fields[name].count == count


@pytest.mark.parametrize(
    ("ir", "inputs", "reads", "expect"),
    [
        ("output0[N, M] +=! input0[N, K] * input1[K, M]",
         {"input0": {"dtype": "float32", "shape": [1024, 512]}, "input1": {"dtype": "float32", "shape": [512, 512]}},
         {"input0": 16 * 512, "input1": 512 * 32}, lambda a, b: a @ b),
        ("output0[F, P] +=! input0[C, P] * input1[C, F]",
         {"input0": {"dtype": "float32", "shape": [16, 16384]}, "input1": {"dtype": "float32", "shape": [16, 64]}},
         {"input0": 16 * 32, "input1": 16 * 32}, lambda a, b: b.T @ a),
    ],
    ids=["antares-matmul", "transposed-layout"],
)
def test_published_matmuls_run_in_boxes_of_points(
    ir: str, inputs: dict[str, Any], reads: dict[str, int], expect: Any
) -> None:
    """AntaresIR.md's MatMul (1024x512x512) and the layout reading input0's columns: any
    range of points reads input1 (or input0) as the hull of its rows, over a tile's memory,
    so the points are cut into boxes (16 x 32 and 32 x 32, 1024 vertices) reading 16 rows
    of input0 and 32 columns of input1 (the layout: 32 columns of each); results are NumPy's.
    Unscheduled: an output element per point (the default register-tiles the first)."""
    require("poplar")
    comp = _compile(ir, inputs, unscheduled=True)
    kernel = next(k for k in comp.results["target"].ops if "egpu.tile_split" in k.attributes)
    split = kernel.attributes["egpu.tile_split"].data
    assert split.in_boxes and split.vertices == 1024 and split.bytes <= 624 * 1024
    values = _random(inputs, fresh_seed())
    outputs, runner = _run(comp, values)
    a, b = (values[k].astype(np.float64) for k in ("input0", "input1"))
    np.testing.assert_allclose(outputs["output0"], expect(a, b), rtol=1e-4, atol=1e-3)
    _check_boxes(runner, split, reads)


def _conv(x: np.ndarray, w: np.ndarray) -> np.ndarray:
    _, _, kh, kw = w.shape
    ho, wo = x.shape[2] - kh + 1, x.shape[3] - kw + 1
    return sum(np.einsum("nchw,fc->nfhw", x[:, :, i:i + ho, j:j + wo], w[:, :, i, j])
               for i in range(kh) for j in range(kw))  # fmt: skip


@pytest.mark.parametrize(
    ("ir", "inputs", "tile", "reads", "expect"),
    [
        ("output0[N, F, HO, WO] +=! input0[N, C, HO + KH, WO + KW] * input1[F, C, KH, KW] where HO in 8, WO in 8",
         {"input0": {"dtype": "float32", "shape": [2, 4, 10, 10]}, "input1": {"dtype": "float32", "shape": [6, 4, 3, 3]}},
         (1, 3, 2, 4), {"input0": 4 * 4 * 6, "input1": 3 * 36}, _conv),
        ("output0[B, N, M] +=! input0[B, N, K] * input1[B, K, M]",
         {"input0": {"dtype": "float32", "shape": [3, 16, 24]}, "input1": {"dtype": "float32", "shape": [3, 24, 20]}},
         (1, 4, 5), {"input0": 4 * 24, "input1": 24 * 5}, lambda a, b: a @ b),
    ],
    ids=["conv-windows", "batch-matmul"],
)
def test_boxes_of_points_read_windows_and_columns(
    monkeypatch: pytest.MonkeyPatch, ir: str, inputs: dict[str, Any], tile: tuple[int, ...],
    reads: dict[str, int], expect: Any,
) -> None:  # fmt: skip
    """ConvolutionNoPad and BatchMatMul at small sizes on tiles of 1 KiB (their published
    sizes on 624 KiB tiles split the same way: benchmarks/poplar_antares.py): no range of
    points fits, so the points are cut into boxes, each vertex reading its window of input0
    (its rows and columns plus the kernel's halo) and its filters or columns of input1;
    every read is bounds-checked against the box, and the results are NumPy's."""
    require("poplar")
    from einc.targets.poplar import PoplarTarget

    small = dataclasses.replace(PoplarTarget.limits, tile_memory=1024)
    monkeypatch.setattr(PoplarTarget, "limits", small)  # only split-poplar-vertices reads tile_memory
    comp = _compile(ir, inputs)
    kernel = next(k for k in comp.results["target"].ops if "egpu.tile_split" in k.attributes)
    split = kernel.attributes["egpu.tile_split"].data
    assert split.in_boxes and split.tile == tile and split.bytes <= 1024
    values = _random(inputs, fresh_seed())
    outputs, runner = _run(comp, values)
    a, b = (values[k].astype(np.float64) for k in ("input0", "input1"))
    np.testing.assert_allclose(outputs["output0"], expect(a, b), rtol=1e-5, atol=1e-4)
    _check_boxes(runner, split, reads)


# ---- local arrays ------------------------------------------------------------------------------------


def test_local_array_in_a_vertex_runs() -> None:
    """cache_read "local" of a matmul's row of input0 at M: a private array declared in
    compute() (one per worker), filled and read there; results are NumPy's."""
    require("poplar")
    inputs = {"input0": {"dtype": "float32", "shape": [20, 12]}, "input1": {"dtype": "float32", "shape": [12, 30]}}
    lines = ['%m = transform.einc.match stmt "output0" axis "M" in %root',
             '%c = transform.einc.cache_read "input0" at %m']  # fmt: skip
    comp = _compile("output0[N, M] +=! input0[N, K] * input1[K, M]", inputs, lines)
    assert "float input0_local[12];" in comp.results["source"]
    values = _random(inputs, fresh_seed())
    outputs, _ = _run(comp, values)
    a, b = values["input0"].astype(np.float64), values["input1"].astype(np.float64)
    np.testing.assert_allclose(outputs["output0"], a @ b, rtol=1e-5, atol=1e-4)


def test_local_array_in_bound_kernel_runs() -> None:
    """The same staging in a kernel whose N is bound to block.x and M to thread.x (tiles
    of 5): each worker has its own array."""
    require("poplar")
    inputs = {"input0": {"dtype": "float32", "shape": [4, 9]}, "input1": {"dtype": "float32", "shape": [9, 10]}}
    lines = [*_N_M, "%mo, %mi = transform.einc.tile %m by 5", 'transform.einc.bind %n to "block.x"',
             'transform.einc.bind %mo to "block.y"', 'transform.einc.bind %mi to "thread.x" max_threads 6',
             '%k = transform.einc.match stmt "output0" axis "K" in %root',
             '%c = transform.einc.cache_read "input1" at %k']  # fmt: skip
    comp = _compile("output0[N, M] +=! input0[N, K] * input1[K, M]", inputs, lines)
    assert "einc_block" in comp.results["source"] and "_local[" in comp.results["source"]
    values = _random(inputs, fresh_seed())
    outputs, _ = _run(comp, values)
    a, b = values["input0"].astype(np.float64), values["input1"].astype(np.float64)
    np.testing.assert_allclose(outputs["output0"], a @ b, rtol=1e-5, atol=1e-4)


def test_local_arrays_count_once_per_worker_in_tile_memory() -> None:
    """A 40000-byte local row per worker (six workers: 240000 bytes) beside a gathered
    400000-byte table every vertex reads whole: over 624 KiB however input0 is spread
    (with one copy of the row it would fit)."""
    lines = ['%n = transform.einc.match stmt "output0" axis "N" in %root',
             '%c = transform.einc.cache_read "input0" at %n']  # fmt: skip
    inputs = {"input0": {"dtype": "float32", "shape": [12, 10000]}, "input1": {"dtype": "float32", "shape": [100000]},
              "input2": {"dtype": "int32", "shape": [12]}}  # fmt: skip
    with pytest.raises(TargetError, match=r"needs 6[4-9]\d{4} bytes of tile memory per vertex spread over 12 tiles"):
        _compile("output0[N] +=! input0[N, K] + input1[input2[N]]", inputs, lines)


_TOO_BIG = """
#include <poplar/Vertex.hpp>
class EincSum : public poplar::Vertex {
public:
  poplar::Input<poplar::Vector<float>> in;
  poplar::Output<poplar::Vector<float>> out;
  bool compute() { out[0] = in[0]; return true; }
};
#ifdef EINC_POPLAR_HOST
#include <poplar/Graph.hpp>
#include <poplar/Program.hpp>
EINC_POPLAR_VERTEX(EincSum, in, out)
void einc_build_graph(poplar::Graph &graph, const std::vector<poplar::Tensor> &buffers,
                      poplar::program::Sequence &prog) {
  for (const poplar::Tensor &buffer : buffers) graph.setTileMapping(buffer, 0);
  poplar::ComputeSet cs = graph.addComputeSet("sum");
  poplar::VertexRef v = graph.addVertex(cs, "EincSum", {{"in", buffers[0]}, {"out", buffers[1]}});
  graph.setTileMapping(v, 3);
  prog.add(poplar::program::Execute(cs));
}
#endif
"""


def test_mirror_refuses_a_tile_over_its_memory() -> None:
    """160000 floats (640000 bytes) connected to one vertex: more than the tile's 624 KiB."""
    require("poplar")
    from einc.errors import ToolchainError
    from einc.runtime.manifest import Buffer, KernelLaunch, LaunchManifest
    from einc.runtime.poplar import load_poplar_kernel

    manifest = LaunchManifest(
        "poplar", (Buffer("in", "float32", (160000,), "input"), Buffer("out", "float32", (1,), "output")),
        (KernelLaunch("sum", ("in", "out"), (1, 1, 1), (1, 1, 1)),),
    )  # fmt: skip
    runner = load_poplar_kernel(_TOO_BIG, manifest)
    with pytest.raises(ToolchainError, match="tile 3 needs 640008 bytes for the fields of compute set 'sum', more than its 638976"):
        runner({"in": np.zeros(160000, np.float32)}, {"out": np.zeros(1, np.float32)})


# ---- random programs on many small vertices -----------------------------------------------------


def test_random_programs_on_vertices_of_few_points_match_oracle(monkeypatch: pytest.MonkeyPatch) -> None:
    """Random programs with POINTS_PER_WORKER = 1, so that every kernel of more than six
    points is split into vertices of six points with the tightest input slices: the mirror
    bounds-checks every read against its vertex's slice, and the results are the oracle's."""
    require("poplar")
    from hypothesis import HealthCheck, given, settings
    from hypothesis import strategies as st

    import einc.passes.split_poplar_vertices as poplar
    from tests.oracle.budget import examples
    from tests.oracle.genprog import GenProgram, programs
    from tests.test_device_differential import check_program

    monkeypatch.setattr(poplar, "POINTS_PER_WORKER", 1)

    @settings(max_examples=examples(8), deadline=None, suppress_health_check=list(HealthCheck))
    @given(prog=programs(), seed=st.integers(0, 2**32 - 1))
    def run(prog: GenProgram, seed: int) -> None:
        check_program(prog, seed, "poplar")

    run()


# ---- the mirror's checks and messages ---------------------------------------------------------------

_MIRROR_CASES = r"""
#include <poplar/Vertex.hpp>
class EincCopy : public poplar::Vertex {
public:
  poplar::Input<poplar::Vector<float>> in;
  poplar::Output<poplar::Vector<float>> out;
  unsigned n;
  bool compute() {
    for (unsigned i = 0; i < n; ++i) out[i] = in[i];
    return n != 7;
  }
};
class EincRows : public poplar::MultiVertex {
public:
  poplar::Vector<poplar::Input<poplar::Vector<float>>> rows;
  poplar::Output<float> out;
  bool compute(unsigned worker) {
    if (worker == 0) *out = rows[1][0] + rows[0][1];
    return true;
  }
};
class EincHalf : public poplar::Vertex {
public:
  poplar::Output<poplar::Vector<half>> out;
  bool compute() { out[0] = 1; return true; }
};
#ifdef EINC_POPLAR_HOST
#include <cstdlib>
#include <string>
#include <poplar/Graph.hpp>
#include <poplar/Program.hpp>
EINC_POPLAR_VERTEX(EincCopy, in, out, n)
EINC_POPLAR_VERTEX(EincRows, rows, out)
EINC_POPLAR_VERTEX(EincHalf, out)

// One graph per case (EINC_MIRROR_CASE): 0 is valid, every other one breaks one rule.
void einc_build_graph(poplar::Graph &graph, const std::vector<poplar::Tensor> &buffers,
                      poplar::program::Sequence &prog) {
  const char *name = std::getenv("EINC_MIRROR_CASE");
  const std::string c = name ? name : "";
  const poplar::Tensor &x = buffers[0], &y = buffers[1], &s = buffers[2], &t = buffers[3], &h = buffers[4];
  if (c != "unmapped-element") graph.setTileMapping(y, 0);
  for (const poplar::Tensor &b : {x, s, t, h}) graph.setTileMapping(b, 0);
  poplar::ComputeSet cs = graph.addComputeSet("cs");
  poplar::VertexRef v = graph.addVertex(cs, c == "unknown-type" ? "EincNope" : "EincCopy");
  graph.connect(v["in"], c == "type-mismatch" ? t : x.transpose().flatten());
  graph.connect(v[c == "unknown-field" ? "nope" : "out"], y);
  if (c != "unset-field") graph.setInitialValue(v["n"], c == "returns-false" ? 7 : 8);
  if (c != "unmapped-vertex") graph.setTileMapping(v, c == "tile-out-of-range" ? 1472 : 1);
  poplar::VertexRef r = graph.addVertex(cs, "EincRows");
  graph.connect(r["rows"], c == "list-of-scalar" ? x[0][0] : x.reshape({2, 4}));
  graph.connect(r["out"], c == "scalar-of-many" ? x : s);
  graph.setTileMapping(r, 2);
  if (c == "plain-connected") graph.connect(v["n"], x);
  if (c == "edge-set") graph.setInitialValue(v["in"], 1);
  if (c == "not-a-list") graph.connect(v["in"][0], x);
  if (c == "list-unsized") graph.connect(graph.addVertex(cs, "EincRows")["rows"][0], x);
  auto copy = [&](const poplar::Tensor &out, unsigned tile) {
    poplar::VertexRef w = graph.addVertex(cs, "EincCopy", {{"in", x.flatten()}, {"out", out}});
    graph.setInitialValue(w["n"], 8);
    graph.setTileMapping(w, tile);
  };
  if (c == "both-write") copy(y, 3);
  if (c == "reads-written") graph.connect(r["rows"], y.reshape({2, 4}));
  if (c == "word") {
    for (unsigned k = 0; k < 2; ++k)
      graph.setTileMapping(graph.addVertex(cs, "EincHalf", {{"out", h.slice(k, k + 1)}}), 4);
  }
  if (c == "constant") {
    poplar::Tensor k = graph.addConstant<float>(poplar::FLOAT, {8}, 1.0f, "k");
    graph.setTileMapping(k, 0);
    copy(k, 5);
  }
  if (c == "constant-count") graph.addConstant<float>(poplar::FLOAT, {2}, {1.0f, 2.0f, 3.0f}, "k");
  if (c == "unknown-compute-set") graph.addVertex(poplar::ComputeSet(), "EincCopy");
  if (c == "slice") x.slice(0, 9);
  if (c == "reshape") x.reshape({3});
  if (c == "transpose") y.transpose();
  if (c == "index-scalar") s[0];
  if (c == "concat") poplar::concat(x.flatten(), y);
  if (c == "copy") prog.add(poplar::program::Copy(y, t));
  if (c == "stream") graph.createHostWrite("x", x);
  prog.add(poplar::program::Execute(cs));
  // a Copy and a Repeat: y is written back unchanged
  prog.add(poplar::program::Repeat(2, poplar::program::Copy(y, y)));
}
#endif
"""

_MIRROR_MESSAGES = {
    "unmapped-element": "element 0 of tensor 'y' is not mapped to a tile (Graph::setTileMapping)",
    "unmapped-vertex": "a vertex of type 'EincCopy' is not mapped to a tile",
    "unset-field": "field 'n' of a vertex of type 'EincCopy' is not connected or set",
    "both-write": "vertices of types 'EincCopy' and 'EincCopy' in compute set 'cs' race: both write element 0 of tensor 'y'",
    "reads-written": "vertices of types 'EincRows' and 'EincCopy' in compute set 'cs' race: one reads what the other "
                     "writes element 0 of tensor 'y'",
    "word": "vertices of types 'EincHalf' and 'EincHalf' in compute set 'cs' race: both write the 32-bit word of "
            "element 1 of tensor 'h'",
    "returns-false": "a vertex of type 'EincCopy' in compute set 'cs' returned false",
    "constant": "a vertex writes to constant 'k'",
    "unknown-type": "unknown vertex type 'EincNope' (einc's Poplar mirror needs EINC_POPLAR_VERTEX(EincNope, fields...))",
    "unknown-field": "vertex type 'EincCopy' has no field 'nope' (fields are listed in EINC_POPLAR_VERTEX)",
    "type-mismatch": "EincCopy.in: a float field connected to a int tensor",
    "plain-connected": "EincCopy.n: field is a plain value, not an edge",
    "edge-set": "EincCopy.in: field is an edge, not a plain value",
    "scalar-of-many": "EincRows.out: a scalar field connected to a tensor of 8 elements",
    "list-of-scalar": "EincRows.rows: a list of edges needs a tensor of rank >= 1",
    "not-a-list": "field is not a list of edges",
    "list-unsized": "edge 0 of a list of 0 (call setFieldSize first)",
    "tile-out-of-range": "tile 1472 out of range (the target has 1472 tiles)",
    "constant-count": "addConstant: 3 values for a tensor of 2 elements",
    "unknown-compute-set": "addVertex: unknown compute set",
    "slice": "slice [0, 9) out of range for dimension 0 of a tensor of shape {4,2}",
    "reshape": "cannot reshape {4,2} to {3}",
    "transpose": "transpose needs a rank-2 tensor, got {8}",
    "index-scalar": "cannot index a scalar tensor",
    "concat": "einc's Poplar mirror concatenates only views of one variable",
    "copy": "Copy between tensors of different size or type: {8} float to {8} int",
    "stream": "a host stream named 'x' exists already",
}  # fmt: skip
"""What the mirror says for each broken graph of _MIRROR_CASES (after the runner's prefix)."""


@pytest.fixture(scope="module")
def mirror_cases() -> Any:
    require("poplar")
    from einc.runtime.manifest import Buffer, LaunchManifest
    from einc.runtime.poplar import load_poplar_kernel

    manifest = LaunchManifest(
        "poplar", (Buffer("x", "float32", (4, 2), "input"), Buffer("y", "float32", (8,), "output"),
                   Buffer("s", "float32", (), "temp"), Buffer("t", "int32", (8,), "temp"),
                   Buffer("h", "float16", (8,), "temp")), ())  # fmt: skip
    return load_poplar_kernel(_MIRROR_CASES, manifest)


def test_mirror_runs_the_valid_case(mirror_cases: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("EINC_MIRROR_CASE", "valid")
    x = np.random.default_rng(fresh_seed()).uniform(-2, 2, (4, 2)).astype(np.float32)
    y = poisoned((8,), np.dtype(np.float32))
    mirror_cases({"x": x}, {"y": y})
    from einc.runtime.poplar import FieldRecord

    np.testing.assert_array_equal(y, x.T.ravel())
    records = mirror_cases.graph()
    assert [(r.type, r.tile) for r in records] == [("EincCopy", 1), ("EincRows", 2)]
    assert records[1].fields["rows"] == FieldRecord("x", 0, 7, 8, False)


@pytest.mark.parametrize("case", sorted(_MIRROR_MESSAGES))
def test_mirror_refuses_what_poplar_would(mirror_cases: Any, monkeypatch: pytest.MonkeyPatch, case: str) -> None:
    """Every check of the mirror (graph construction, the Engine's graph checks, a vertex's
    run), one broken graph each, with its whole message."""
    from einc.errors import ToolchainError

    monkeypatch.setenv("EINC_MIRROR_CASE", case)
    x = np.zeros((4, 2), np.float32)
    with pytest.raises(ToolchainError) as error:
        mirror_cases({"x": x}, {"y": np.zeros(8, np.float32)})
    assert error.value.message == "the Poplar program failed on einc's Poplar mirror: " + _MIRROR_MESSAGES[case]


_SCALE = """
#include <poplar/Vertex.hpp>
class EincScale : public poplar::Vertex {
public:
  poplar::Input<poplar::Vector<float>> in;
  poplar::Output<poplar::Vector<float>> out;
  bool compute() { for (unsigned i = 0; i < out.size(); ++i) out[i] = FACTOR * in[i]; return true; }
};
#ifdef EINC_POPLAR_HOST
#include <poplar/Graph.hpp>
#include <poplar/Program.hpp>
EINC_POPLAR_VERTEX(EincScale, in, out)
void einc_build_graph(poplar::Graph &graph, const std::vector<poplar::Tensor> &buffers,
                      poplar::program::Sequence &prog) {
  for (const poplar::Tensor &buffer : buffers) graph.setTileMapping(buffer, 0);
  poplar::ComputeSet cs = graph.addComputeSet("scale");
  graph.setTileMapping(graph.addVertex(cs, "EincScale", {{"in", buffers[0]}, {"out", buffers[1]}}), 0);
  prog.add(poplar::program::Execute(cs));
}
#endif
"""


def test_kernels_loaded_together_keep_their_own_vertex_types() -> None:
    """Two programs loaded in one process, each with a vertex type named EincScale: each
    kernel's graph makes its own library's vertices (the registry is per library)."""
    require("poplar")
    from einc.runtime.manifest import Buffer, LaunchManifest
    from einc.runtime.poplar import load_poplar_kernel

    manifest = LaunchManifest(
        "poplar", (Buffer("in", "float32", (5,), "input"), Buffer("out", "float32", (5,), "output")), ())
    kernels = {factor: load_poplar_kernel(_SCALE.replace("FACTOR", f"{factor}.0f"), manifest) for factor in (2, 3)}
    x = np.random.default_rng(fresh_seed()).uniform(-2, 2, 5).astype(np.float32)
    for factor, kernel in [*kernels.items(), *reversed(kernels.items())]:
        out = poisoned((5,), np.dtype(np.float32))
        kernel({"in": x}, {"out": out})
        np.testing.assert_array_equal(out, factor * x)


# ---- register tiles ----------------------------------------------------------------------------------


def register_tile_lines(rn: int, rm: int) -> list[str]:
    """A matmul's outputs in `rn` x `rm` register tiles, nothing bound: each tile's outputs
    accumulated in a private array across K (`cache_write ... in "local"` at M.o), the
    register loops unrolled; the mapping pass gives each tile a point."""
    return [*_N_M, '%k = transform.einc.match stmt "output0" axis "K" in %root',
            f"%no, %nr = transform.einc.tile %n by {rn}", f"%mo, %mr = transform.einc.tile %m by {rm}",
            "%a, %b, %e, %g, %h = transform.einc.reorder %no, %mo, %k, %nr, %mr",
            '%w = transform.einc.cache_write "output0" at %b in "local"',
            f"transform.einc.unroll %h by {rm}", f"transform.einc.unroll %g by {rn}"]  # fmt: skip


_MM = "output0[N, M] +=! input0[N, K] * input1[K, M]"


@pytest.mark.parametrize(("rn", "rm"), [(4, 4), (2, 8)])
def test_register_tiled_matmul_splits_over_tiles(rn: int, rm: int) -> None:
    """A register tile per point writes rn rows of rm outputs (not one element per point):
    the points are cut between rows of tiles, so each vertex's slice of output0 (the hull of
    its tiles, a band of whole rows) is its own and mapped to its tile; its private
    accumulators are its workers' local arrays in its bytes. Results are NumPy's, and the
    egpu interpreter, running vertex by vertex inside their slices, agrees; a slice doctored
    one row short is reported there."""
    require("poplar")
    from einc.semantics.egpu import run_lowered
    from einc.semantics.egpu.memory import KernelFault
    from einc.transforms.vertex_split import local_bytes, vertex_bytes

    inputs = {"input0": {"dtype": "float32", "shape": [48, 20]}, "input1": {"dtype": "float32", "shape": [20, 64]}}
    comp = _compile(_MM, inputs, register_tile_lines(rn, rm))
    assert f"float output0_local[{rn * rm}];" in comp.results["source"]
    kernel = [k for k in comp.results["target"].ops if "egpu.tile_split" in k.attributes][-1]
    split = kernel.attributes["egpu.tile_split"].data
    out = [k for k, a in enumerate(kernel.body.block.args) if a.type.get_shape() == (48, 64)][0]
    assert split.vertices >= 2 and not split.written and out in split.read_slices
    assert split.bytes == vertex_bytes(kernel, split) and local_bytes(kernel) == 6 * 4 * rn * rm
    first, end = split.read_slices[out]
    assert first[0] == 0 and end[-1] == 48 * 64 and all(e == f for e, f in zip(end, first[1:]))
    assert all((e - f) % (rn * 64) == 0 for f, e in zip(first, end))  # whole bands of register rows
    values = _random(inputs, fresh_seed())
    outputs, runner = _run(comp, values)
    a, b = values["input0"].astype(np.float64), values["input1"].astype(np.float64)
    np.testing.assert_allclose(outputs["output0"], a @ b, rtol=1e-5, atol=1e-4)
    assert sorted(r.fields["output0"].count for r in runner.graph() if "output0" in r.fields)[-split.vertices:] == sorted(
        e - f for f, e in zip(first, end))
    module = comp.module("target").clone()
    lowered = run_lowered(module, values, target="poplar")
    np.testing.assert_allclose(lowered["output0"], outputs["output0"], rtol=1e-5, atol=1e-5)
    kernel = [k for k in module.ops if "egpu.tile_split" in k.attributes][-1]
    short = tuple((k, f, (e[0] - 64, *e[1:]) if k == out else e) for k, f, e in split.read)
    kernel.attributes["egpu.tile_split"] = type(kernel.attributes["egpu.tile_split"])(dataclasses.replace(split, read=short))
    with pytest.raises(KernelFault, match=r"accesses element \d+ of 'output0', outside its vertex's slice \[0, \d+\)"):
        run_lowered(module, values, target="poplar")


def _matmul_matches(comp: Compilation, inputs: dict[str, Any]) -> Any:
    """Run a matmul on the harness and on the egpu interpreter with fresh random inputs,
    both against NumPy; the harness's runner."""
    from einc.semantics.egpu import run_lowered

    values = _random(inputs, fresh_seed())
    outputs, runner = _run(comp, values)
    a, b = values["input0"].astype(np.float64), values["input1"].astype(np.float64)
    np.testing.assert_allclose(outputs["output0"], a @ b, rtol=1e-5, atol=1e-4)
    lowered = run_lowered(comp.module("target").clone(), values, target="poplar")
    np.testing.assert_allclose(lowered["output0"], outputs["output0"], rtol=1e-5, atol=1e-5)
    return runner


def _boxed_register_tiles(monkeypatch: pytest.MonkeyPatch, n: int, k: int, m: int) -> tuple[Any, Compilation, list[Any]]:
    """An n x k by k x m matmul in 4 x 4 register tiles on tiles of 4 KiB (so in boxes),
    run on the harness and on the egpu interpreter, both against NumPy: its split, the
    compilation and the harness's vertex records that read input1."""
    require("poplar")
    from einc.targets.poplar import PoplarTarget

    monkeypatch.setattr(PoplarTarget, "limits", dataclasses.replace(PoplarTarget.limits, tile_memory=4096))
    inputs = {"input0": {"dtype": "float32", "shape": [n, k]}, "input1": {"dtype": "float32", "shape": [k, m]}}
    comp = _compile(_MM, inputs, register_tile_lines(4, 4))
    kernel = [op for op in comp.results["target"].ops if "egpu.tile_split" in op.attributes][-1]
    split = kernel.attributes["egpu.tile_split"].data
    assert split.in_boxes and split.bytes <= 4096
    runner = _matmul_matches(comp, inputs)
    records = [r for r in runner.graph() if "input1" in r.fields]
    assert len(records) == split.vertices and sum(r.fields["output0"].count for r in records) == n * m
    return split, comp, records


def test_register_tiles_in_boxes_on_small_tiles(monkeypatch: pytest.MonkeyPatch) -> None:
    """On tiles of 4 KiB no band of register rows fits (each reads all of input1), so the
    points (4 x 4 register tiles, `egpu.point_shape` [12, 16]) are cut into boxes: each
    vertex writes its own box of output0 (disjoint, all of it, mapped to its tile) and reads
    its rows of input0 and columns of input1. Results are NumPy's; the interpreter agrees."""
    split, comp, records = _boxed_register_tiles(monkeypatch, 48, 20, 64)
    assert split.shape == (12, 16) and split.vertices >= 4
    assert all(r.fields["input1"].count < 20 * 64 for r in records)


def test_register_tile_over_a_tile_is_a_target_error() -> None:
    """4 x 4 register tiles of a 48 x 8 output over K = 50000: one tile of outputs reads 4
    rows of input0 and 4 columns of input1 (800000 bytes each), over a tile however the
    points are spread (bands of register rows: 2400528 bytes on 12 tiles, as reported) or
    boxed: a TargetError naming the bytes, before any code."""
    inputs = {"input0": {"dtype": "float32", "shape": [48, 50000]}, "input1": {"dtype": "float32", "shape": [50000, 8]}}
    with pytest.raises(TargetError, match=r"needs 24\d{5} bytes of tile memory per vertex spread over 12 tiles"):
        _compile(_MM, inputs, register_tile_lines(4, 4))


def test_register_tiles_in_clipped_boxes(monkeypatch: pytest.MonkeyPatch) -> None:
    """A tile grid the boxes do not divide (4 x 4 register tiles of a 44 x 52 output: 11 x 13
    tiles, on tiles of 4 KiB) is cut into boxes whose last one per dimension is clipped: each
    written box of output0 stays where its tiles are, [low, min(low + extent, size)), so the
    boxes are disjoint and cover output0, and a box clipped in its columns is indexed with its
    own row stride (`einc_extent`). Results are NumPy's; the interpreter agrees."""
    split, comp, records = _boxed_register_tiles(monkeypatch, 44, 20, 52)
    assert split.shape == (11, 13)
    assert any(s % t for s, t in zip(split.shape, split.tile)) and split.vertices < 11 * 13  # clipped, not 1 x 1 boxes
    assert "* einc_extent2_1 +" in comp.results["source"]
    assert len({r.fields["output0"].count for r in records}) > 1  # the clipped boxes are smaller


def test_default_register_tiles_a_grid_not_a_power_of_two() -> None:
    """The default register-tiles a contraction whatever its tile grid (4 x 8 tiles of a
    24 x 40 output: 6 x 5 tiles), its accumulators started at 0 in registers: one kernel, no
    fill, output0 written and never read. Results are NumPy's; the interpreter, vertex by
    vertex inside their slices, agrees."""
    require("poplar")
    inputs = {"input0": {"dtype": "float32", "shape": [24, 12]}, "input1": {"dtype": "float32", "shape": [12, 40]}}
    comp = _compile(_MM, inputs)
    kernels = [k for k in comp.results["target"].ops if "egpu.tile_split" in k.attributes]
    assert len(kernels) == 1 and [a.value.data for a in kernels[0].attributes["egpu.point_shape"].data] == [6, 5]
    source = comp.results["source"]
    assert "float output0_local[32];" in source and "poplar::Output<poplar::Vector<float>> output0;" in source
    _matmul_matches(comp, inputs)


_BMM = "output0[B, N, M] +=! input0[B, N, K] * input1[B, K, M]"


@pytest.mark.parametrize(("ir", "shapes", "grid"), [
    (_MM, ([13, 11], [11, 7]), [4, 1]),  # 13 rows: 4 + 4 + 4 + 1; 7 columns: one tile of 7
    (_MM, ([37, 29], [29, 17]), [10, 3]),  # primes: the last row tile 1 row, the last column tile 1
    (_BMM, ([3, 13, 5], [3, 5, 11]), [3, 4, 2]),  # a batch axis: a point per batch too
], ids=["13x11x7", "37x29x17", "batch-3x13x5x11"])  # fmt: skip
def test_default_register_tiles_axes_no_tile_divides(ir: str, shapes: tuple[list[int], list[int]], grid: list[int]) -> None:
    """An output axis no register tile size divides (13, 37, 17, 11: primes) still gets
    register tiles by default, 4 x 8 with the last tile partial: the tile loops run to
    `min(tile, size - start)` and unroll completely, each copy that the last tile lacks
    under a guard (`if (1 < v)`, v = `N_o * -1 + 13`), so the accumulators are indexed by
    constants; an axis shorter than a tile is one tile of its length (7 columns). The
    guards depend on the tile's position only: `einc-unswitch` tests them before K
    (`if (3 < N_o * -1 + 13)`), whose versions hold no condition (the first, every guard
    true, is the whole tile's; the other, the last tile's rows, N_o = 12). Results
    are NumPy's; the interpreter, vertex by vertex inside their slices (the written slices
    clipped to the tensor per dimension), agrees."""
    require("poplar")
    inputs = {"input0": {"dtype": "float32", "shape": shapes[0]}, "input1": {"dtype": "float32", "shape": shapes[1]}}
    comp = _compile(ir, inputs)
    kernels = [k for k in comp.results["target"].ops if "egpu.tile_split" in k.attributes]
    assert len(kernels) == 1 and [a.value.data for a in kernels[0].attributes["egpu.point_shape"].data] == grid
    source = comp.results["source"]
    columns = min(8, shapes[1][-1])
    assert f"float output0_local[{4 * columns}];" in source and "einc_minsi" not in source
    assert f"if (3 < N_o * -1 + {shapes[0][-2]}) {{" in source  # the rows' guard, before K
    k_loops = loop_bodies(source, "for (int K = 0; ")
    assert len(k_loops) > 1 and all("if (" not in body and "?" not in body for body in k_loops)
    assert k_loops[0].count(" = output0_local[") == 4 * columns  # the first version: the whole tile
    _matmul_matches(comp, inputs)


def loop_bodies(source: str, header: str) -> list[str]:
    """The text between the braces of each loop of `source` that starts with `header`."""
    bodies = []
    for found in re.finditer(re.escape(header), source):
        start = source.index("{", found.end()) + 1
        depth, end = 1, start
        while depth:
            depth += {"{": 1, "}": -1}.get(source[end], 0)
            end += 1
        bodies.append(source[start:end - 1])
    return bodies


def test_partial_register_tiles_over_several_vertices_and_in_boxes(monkeypatch: pytest.MonkeyPatch) -> None:
    """Partial register tiles split like whole ones: 99 x 101 outputs in 4 x 8 tiles (the
    last row and column tiles partial) over several vertices, each writing its band of
    rows (cut only between disjoint hulls, the partial tiles' rows clipped to the tensor);
    on tiles of 4 KiB, 45 x 51 in 4 x 4 tiles in boxes, the last box clipped. Both equal
    to NumPy, and the interpreter agrees."""
    require("poplar")
    inputs = {"input0": {"dtype": "float32", "shape": [99, 37]}, "input1": {"dtype": "float32", "shape": [37, 101]}}
    comp = _compile(_MM, inputs)
    kernel = [k for k in comp.results["target"].ops if "egpu.tile_split" in k.attributes][-1]
    split = kernel.attributes["egpu.tile_split"].data
    assert split.vertices > 1 and split.points == 25 * 13
    first, end = split.read_slices[2]
    assert end[-1] == 99 * 101 and all(e == f for e, f in zip(end, first[1:]))
    _matmul_matches(comp, inputs)
    split, comp, records = _boxed_register_tiles(monkeypatch, 45, 20, 51)
    assert split.shape == (12, 13) and split.vertices > 1
    assert "if (3 < N_o * -1 + 45) {" in comp.results["source"]  # the rows' guard, before K


def test_default_register_tiled_batch_matmul_spreads_over_tiles(monkeypatch: pytest.MonkeyPatch) -> None:
    """A batch matmul in register tiles (the default) maps its batch axis to points as well:
    the tile's private array has a batch dimension of 1, copied out at `B + c0` over a unit
    loop, which owns the element as the bare `B` would. On tiles of 4 KiB, 3 x 16 x 8 by 3
    x 8 x 16 (6 KB of data) spreads its 3 x 4 x 2 points (4 x 8 register tiles) over
    several tiles; before, the whole kernel stayed one vertex over a tile (AntaresIR.md's BatchMatMul at its
    published size was refused so). Results are NumPy's; the interpreter agrees."""
    require("poplar")
    from einc.targets.poplar import PoplarTarget

    monkeypatch.setattr(PoplarTarget, "limits", dataclasses.replace(PoplarTarget.limits, tile_memory=4096))
    inputs = {"input0": {"dtype": "float32", "shape": [3, 16, 8]}, "input1": {"dtype": "float32", "shape": [3, 8, 16]}}
    comp = _compile(_BMM, inputs)
    kernel = [k for k in comp.results["target"].ops if "egpu.tile_split" in k.attributes][-1]
    split = kernel.attributes["egpu.tile_split"].data
    assert split.points == 3 * 4 * 2 and split.vertices > 1 and split.bytes <= 4096
    _matmul_matches(comp, inputs)
