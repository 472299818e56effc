"""Cross-thread reductions: a schedule binds a reduction loop to a thread axis
(`transform.einc.bind %ki to "thread.x"`), convert-affine-to-egpu gives every work-item a
private partial and combines the partials of the block (a tree in shared memory, or one
`egpu.subgroup_reduce` on CUDA/HIP when the threads form a power-of-two cluster of a warp, two
when they are a multiple of the warp: each warp, then the warp totals).

Executed on OpenCL (PoCL), HLSL (lavapipe) and SYCL (Intel's CPU device) against a float64
NumPy reference on fresh random inputs (outputs poisoned before a run), with reduction
extents the thread count does and does not divide; compile-checked on CUDA (NVRTC, sm_80)
and HIP (gfx90a, gfx1030) with the warp shuffle in the source, and the CUDA kernels run on
a CPU emulator of a block's threads and warp shuffles. Refusals: a logical combiner,
two bound reductions, a reduction bound to blocks, a bound reduction below an unbound
output loop, Poplar; and the location of an unmappable bind. (float16/bfloat16 partials:
tests/test_narrow_buffers.py.)
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from hypothesis import given, note, settings
from hypothesis import strategies as st

from einc.compiler.driver import Compilation
from einc.runtime.arrays import poisoned
from einc.errors import ScheduleError
from tests.test_device_differential import run_on_device, script
from tests.test_device_schedules import random_inputs
from tests.oracle.budget import examples
from tests.oracle.isolate import run_isolated
from tests.test_device_targets import require

DEVICES = [pytest.param(t, marks=getattr(pytest.mark, t)) for t in ("opencl", "hlsl", "sycl")]


def rows(tile: int | None, rows_per_block: int | None = None) -> list[str]:
    """N bound to block.x (or tiled: N.o to block.x, N.i to thread.y), K tiled by `tile`
    with K.i bound to thread.x (or K itself bound to thread.x when `tile` is None)."""
    lines = [
        '%n = transform.einc.match stmt "output0" axis "N" in %root',
        '%k = transform.einc.match stmt "output0" axis "K" in %root',
    ]
    if rows_per_block is None:
        lines.append('transform.einc.bind %n to "block.x"')
    else:
        lines += [
            f"%no, %ni = transform.einc.tile %n by {rows_per_block}",
            'transform.einc.bind %no to "block.x"',
            'transform.einc.bind %ni to "thread.y"',
        ]
    if tile is None:
        lines.append('transform.einc.bind %k to "thread.x"')
    else:
        lines += [f"%ko, %ki = transform.einc.tile %k by {tile}", 'transform.einc.bind %ki to "thread.x"']
    return lines


def compile_rows(program: str, shapes: dict[str, list[int]], dtype: str, target: str, lines: list[str]) -> Compilation:
    inputs = {name: {"dtype": dtype, "shape": shape} for name, shape in shapes.items()}
    comp = Compilation(program, "<t>", inputs, None, target, script(lines))
    comp.run_until("source")
    return comp


def check(comp: Compilation, expected: Any, inputs: dict[str, np.ndarray], name: str = "output0") -> None:
    out = run_on_device(comp, inputs)[name]
    if np.dtype(out.dtype).kind == "f":  # a reordered sum: a few ulps per term
        np.testing.assert_allclose(out, expected, rtol=1e-5, atol=1e-5 * max(1, inputs["input0"].shape[-1]) ** 0.5)
    else:
        np.testing.assert_array_equal(out, expected)


SUM = "output0[N] +=! input0[N, K]"
DOT = "output0[N] +=! input0[N, K] * input1[N, K]"
MAX = "output0[N] >=! input0[N, K]"
MIN = "output0[N] <=! input0[N, K]"
F64 = {
    SUM: lambda x: x["input0"].astype(np.float64).sum(axis=1),
    DOT: lambda x: (x["input0"].astype(np.float64) * x["input1"]).sum(axis=1),
    MAX: lambda x: x["input0"].max(axis=1),
    MIN: lambda x: x["input0"].min(axis=1),
}


@pytest.mark.parametrize("target", DEVICES)
@pytest.mark.parametrize(
    "program,n,k,tile,rows_per_block",
    [
        (SUM, 5, 64, 16, None),  # 16 threads divide K
        (SUM, 7, 50, 16, None),  # a partial last tile
        (DOT, 6, 300, 64, None),  # 64 threads (above a CUDA warp)
        (DOT, 3, 37, None, None),  # K bound directly: 37 threads, not a power of two
        (MAX, 9, 45, 8, 4),  # rows on thread.y, a partial row tile (9 rows by 4)
        (MIN, 4, 20, 32, None),  # more threads than the reduction has elements
    ],
)
def test_float_reductions_match_numpy(target: str, program: str, n: int, k: int, tile: int | None,
                                      rows_per_block: int | None) -> None:  # fmt: skip
    require(target)
    shapes = {"input0": [n, k]} | ({"input1": [n, k]} if "input1" in program else {})
    comp = compile_rows(program, shapes, "float32", target, rows(tile, rows_per_block))
    kernel = comp.results["target"]
    assert "egpu.alloc_shared" in str(kernel) and "egpu.barrier" in str(kernel)
    launch = comp.target_obj.manifest(kernel).kernels[-1]
    threads = tile if tile is not None else k
    assert launch.block == (threads, rows_per_block or 1, 1)
    inputs = random_inputs(comp)
    check(comp, F64[program](inputs), inputs)


@pytest.mark.parametrize("target", DEVICES)
@pytest.mark.parametrize("dtype", ["int8", "int16", "int32", "int64"])
@pytest.mark.parametrize("program", [DOT, MAX])
def test_integer_reductions_match_numpy(target: str, dtype: str, program: str) -> None:
    """Exact integer results, negative values included (HLSL keeps int64 as uint64_t: the
    tree's max must compare signed, or a row's max would come out negative; HLSL has no 8-
    or 16-bit types: the partials' shared buffer is stored widened, found by the random
    bind schedules). Sums wrap as the narrow type does."""
    require(target)
    shapes = {"input0": [6, 40]} | ({"input1": [6, 40]} if program == DOT else {})
    comp = compile_rows(program, shapes, dtype, target, rows(16))
    inputs = random_inputs(comp)
    x = inputs["input0"]
    expected = (x * inputs["input1"]).sum(axis=1) if program == DOT else x.max(axis=1)
    check(comp, expected.astype(dtype), inputs)


@pytest.mark.parametrize("target", DEVICES)
def test_full_reduction_to_a_scalar_matches_numpy(target: str) -> None:
    """`output0[] +=! ...`: no output loop, one block of threads."""
    require(target)
    lines = [
        '%k = transform.einc.match stmt "output0" axis "K" in %root',
        "%ko, %ki = transform.einc.tile %k by 32",
        'transform.einc.bind %ki to "thread.x"',
    ]
    comp = compile_rows("output0[] +=! input0[K] * input1[K]", {"input0": [1000], "input1": [1000]},
                        "float32", target, lines)  # fmt: skip
    inputs = random_inputs(comp)
    check(comp, np.dot(inputs["input0"].astype(np.float64), inputs["input1"]), inputs)


@pytest.mark.opencl
def test_softmax_with_bound_reductions_matches_numpy() -> None:
    """The row max and the row sum of exponentials each reduced by 32 threads per row."""
    require("opencl")
    program = (
        "temp0[N] >=! input0[N, C]; temp1[N] +=! (input0[N, C] - temp0[N]).call(`exp`); "
        "output0[N, C] = (input0[N, C] - temp0[N]).call(`exp`) / temp1[N]"
    )
    lines = []
    for t in ("temp0", "temp1"):
        lines += [
            f'%n_{t} = transform.einc.match stmt "{t}" axis "N" in %root',
            f'%c_{t} = transform.einc.match stmt "{t}" axis "C" in %root',
            f'transform.einc.bind %n_{t} to "block.x"',
            f"%co_{t}, %ci_{t} = transform.einc.tile %c_{t} by 32",
            f'transform.einc.bind %ci_{t} to "thread.x"',
        ]
    comp = compile_rows(program, {"input0": [10, 100]}, "float32", "opencl", lines)
    inputs = random_inputs(comp)
    x = inputs["input0"].astype(np.float64)
    e = np.exp(x - x.max(axis=1, keepdims=True))
    out = run_on_device(comp, inputs)["output0"]
    np.testing.assert_allclose(out, e / e.sum(axis=1, keepdims=True), rtol=1e-5, atol=1e-6)


@pytest.mark.opencl
@settings(max_examples=examples(10), deadline=None)
@given(
    program=st.sampled_from([SUM, DOT, MAX, MIN]),
    dtype=st.sampled_from(["float32", "float64", "int32", "int64"]),
    n=st.integers(1, 9),
    k=st.integers(1, 150),
    tile=st.sampled_from([None, 1, 2, 3, 7, 8, 32, 64]),
    rows_per_block=st.sampled_from([None, 1, 3]),
)
def test_random_cross_thread_reductions_match_numpy(
    program: str, dtype: str, n: int, k: int, tile: int | None, rows_per_block: int | None
) -> None:
    """Random extents, thread counts (dividing K or not, above K, one thread), combiners and
    types on OpenCL; K itself is bound when it has at most 64 iterations."""
    require("opencl")
    if tile is None and k > 64:
        tile = 64
    shapes = {"input0": [n, k]} | ({"input1": [n, k]} if "input1" in program else {})
    comp = compile_rows(program, shapes, dtype, "opencl", rows(tile, rows_per_block))
    note(comp.results["source"])
    inputs = random_inputs(comp)
    expected = F64[program](inputs)
    if np.dtype(dtype).kind == "i" and program == DOT:
        expected = (inputs["input0"] * inputs["input1"]).sum(axis=1)
    check(comp, expected.astype(dtype) if np.dtype(dtype).kind == "i" else expected, inputs)


CHECKS = [("cuda", "sm_80"), ("hip", "gfx90a"), ("hip", "gfx1030")]


@pytest.mark.parametrize("target,arch", [pytest.param(t, a, marks=getattr(pytest.mark, t)) for t, a in CHECKS])
@pytest.mark.parametrize("dtype", ["float32", "int64"])  # 32- and 64-bit shuffles
@pytest.mark.parametrize("tile,rows_per_block,combine", [
    (16, None, "one"),  # a cluster of 16 lanes
    (32, 2, "one"),  # a whole warp per row, two rows
    (64, None, "two"),  # two warps: warp totals through shared memory, a cluster of 2
    (96, 2, "two"),  # three warps per row (a cluster of 4, one lane the identity), two rows
    (24, None, "tree"),  # not a power of two nor a multiple of 32
])  # fmt: skip
def test_cuda_hip_reductions_compile(target: str, arch: str, tile: int, rows_per_block: int | None,
                                     combine: str, dtype: str) -> None:  # fmt: skip
    """A power-of-two thread count up to 32 reduces with warp shuffles in clusters of that
    many lanes (no shared memory); a multiple of 32 in two stages (each warp, then the
    warps' totals); other counts take the shared-memory tree. Compiled for the
    architecture, without spills, with exactly the shared memory each way needs."""
    require(target)
    from einc.runtime.cuda import compile_check_cuda
    from einc.runtime.hip import compile_check_hip

    program = MAX if dtype.startswith("int") else DOT
    shapes = {"input0": [8, 200]} | ({"input1": [8, 200]} if program == DOT else {})
    comp = compile_rows(program, shapes, dtype, target, rows(tile, rows_per_block))
    source = comp.results["source"]
    kernel = comp.results["target"]
    shuffle = "__shfl_xor_sync(" if target == "cuda" else "__shfl_xor("
    size = int(dtype[-2:]) // 8
    block_rows = rows_per_block or 1
    if combine == "one":
        assert f"cluster {tile} :" in str(kernel)
        assert shuffle in source and f"(partial, {tile});" in source and "__shared__" not in source
    elif combine == "two":
        assert "cluster 32 :" in str(kernel) and shuffle in source
        assert "__shared__" in source and "warp_totals[" in source
        assert f"(v, {1 << (tile // 32 - 1).bit_length()});" in source
    else:
        assert shuffle not in source and "partials[" in source
    manifest = comp.target_obj.manifest(kernel)
    check_fn = compile_check_cuda if target == "cuda" else compile_check_hip
    report = check_fn(source, manifest, arch).check()
    assert report.ok, report.log
    resources = report.kernel(manifest.kernels[-1].name)
    assert resources.spills == 0
    shared = {"one": 0, "two": tile // 32 * block_rows * size, "tree": tile * block_rows * size}[combine]
    assert resources.shared_bytes == shared


# A CPU stand-in for one CUDA block: a std::thread per CUDA thread, `__syncthreads` a
# barrier of the block, `__shfl_xor_sync` an exchange through per-thread slots between two
# barriers (every thread of the block calls it together, as the kernels einc prints do), with
# the lane's width segment and a trap when the caller or its source lane is outside the mask
# or the mask names a lane the block does not have.
EMULATOR = r"""
#include <barrier>
#include <cstring>
#include <thread>
#include <utility>
#include <vector>
struct dim3 { unsigned x, y, z; };
static thread_local dim3 threadIdx, blockIdx;
static dim3 blockDim, gridDim;
static const int warpSize = 32;
static std::barrier<>* einc_bar;
static unsigned long long einc_slots[1024];
#define __global__
#define __device__
#define __launch_bounds__(...)
#define __restrict__
#define __shared__ static
static inline void __syncthreads() { einc_bar->arrive_and_wait(); }
static inline float __int_as_float(int i) { float f; std::memcpy(&f, &i, 4); return f; }
template <typename T> T __shfl_xor_sync(unsigned mask, T v, int o, int w) {
  unsigned n = blockDim.x * blockDim.y * blockDim.z;
  unsigned t = threadIdx.x + blockDim.x * (threadIdx.y + blockDim.y * threadIdx.z);
  unsigned src = t ^ (unsigned)o;
  if ((src & ~(unsigned)(w - 1)) != (t & ~(unsigned)(w - 1))) src = t;
  unsigned lanes = n - (t & ~31u) >= 32 ? 0xffffffffu : (1u << (n - (t & ~31u))) - 1u;  // the warp's threads
  if (!(mask >> (t & 31u) & 1u) || !(mask >> (src & 31u) & 1u) || (mask & ~lanes)) __builtin_trap();
  std::memcpy(&einc_slots[t], &v, sizeof(T));
  einc_bar->arrive_and_wait();
  T r;
  std::memcpy(&r, &einc_slots[src], sizeof(T));
  einc_bar->arrive_and_wait();
  return r;
}
template <typename... P, std::size_t... I>
static void einc_call(void (*k)(P...), void** b, std::index_sequence<I...>) { k(static_cast<P>(b[I])...); }
"""
LAUNCHER = r"""
extern "C" void einc_launch_NAME(void** b, int gx, int gy, int gz, int bx, int by, int bz) {
  blockDim = {(unsigned)bx, (unsigned)by, (unsigned)bz};
  gridDim = {(unsigned)gx, (unsigned)gy, (unsigned)gz};
  for (int z = 0; z < gz; z++) for (int y = 0; y < gy; y++) for (int x = 0; x < gx; x++) {
    std::barrier<> bar(bx * by * bz);
    einc_bar = &bar;
    std::vector<std::thread> ts;
    for (int tz = 0; tz < bz; tz++) for (int ty = 0; ty < by; ty++) for (int tx = 0; tx < bx; tx++)
      ts.emplace_back([=] {
        threadIdx = {(unsigned)tx, (unsigned)ty, (unsigned)tz};
        blockIdx = {(unsigned)x, (unsigned)y, (unsigned)z};
        einc_call(NAME, b, std::make_index_sequence<ARGS>());
      });
    for (auto& t : ts) t.join();
  }
}
"""


@pytest.mark.parametrize("program,dtype,tile,rows_per_block,k", [
    (DOT, "float32", 16, None, 200),  # a cluster of 16 lanes
    (DOT, "float64", 96, 2, 300),  # two stages: 3 warps per row, 2 rows
    (DOT, "int64", 64, 3, 150),  # two stages, 3 rows (a partial row tile of 7 by 3)
    (DOT, "int32", 8, 4, 70),  # clusters of 8 lanes, 4 to a warp
    (MIN, "float32", 4, 5, 33),  # clusters of 4 lanes, 5 rows: a warp of 20 threads
])  # fmt: skip
def test_cuda_shuffles_on_a_warp_emulator_match_numpy(
    program: str, dtype: str, tile: int, rows_per_block: int | None, k: int, tmp_path: Any
) -> None:
    """No NVIDIA GPU here: the printed CUDA kernels (warp shuffles in clusters and in two
    stages) run on `EMULATOR`, compiled by the host's g++, against NumPy."""
    import subprocess

    shapes = {"input0": [7, k]} | ({"input1": [7, k]} if program == DOT else {})
    comp = compile_rows(program, shapes, dtype, "cuda", rows(tile, rows_per_block))
    assert "__shfl_xor_sync(" in comp.results["source"]
    manifest = comp.target_obj.manifest(comp.results["target"])
    text = EMULATOR + comp.results["source"].replace('extern "C" ', "")
    for launch in manifest.kernels:
        text += LAUNCHER.replace("NAME", launch.name).replace("ARGS", str(len(launch.args)))
    (tmp_path / "k.cpp").write_text(text)
    subprocess.run(["g++", "-std=c++20", "-O1", "-shared", "-fPIC", "-pthread", str(tmp_path / "k.cpp"),
                    "-o", str(tmp_path / "k.so")], check=True, capture_output=True)  # fmt: skip
    inputs = random_inputs(comp)
    buffers = {b.name: inputs[b.name].copy() if b.name in inputs else poisoned(b.shape, b.dtype) for b in manifest.buffers}
    launches = [(k.name, k.args, k.grid, k.block) for k in manifest.kernels]
    out = run_isolated(_emulate, str(tmp_path / "k.so"), launches, buffers, timeout=120.0)["output0"]
    if dtype.startswith("int"):
        np.testing.assert_array_equal(out, (inputs["input0"] * inputs["input1"]).sum(axis=1))
    else:
        np.testing.assert_allclose(out, F64[program](inputs), rtol=1e-5, atol=1e-5)


def _emulate(library: str, launches: list[Any], buffers: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """Run the launches of an emulated CUDA library (in the isolated worker: a trap kills it,
    not the test run); returns the buffers."""
    import ctypes

    lib = ctypes.CDLL(library)
    for name, args, grid, block in launches:
        pointers = (ctypes.c_void_p * len(args))(*[buffers[a].ctypes.data for a in args])
        getattr(lib, f"einc_launch_{name}")(pointers, *grid, *block)
    return buffers


@pytest.mark.parametrize("target", ["cuda", "hip"])
@pytest.mark.parametrize("program", [MAX, MIN])
def test_float_max_min_shuffles_propagate_nan(target: str, program: str) -> None:
    """arith.maximumf / minimumf propagate NaN: the warp helper's combine must too."""
    comp = compile_rows(program, {"input0": [4, 64]}, "float32", target, rows(8))
    assert "a != a" in comp.results["source"]


# ---- refusals ------------------------------------------------------------------------------


def refused(program: str, lines: list[str], target: str = "opencl", dtype: str = "float32",
            shape: tuple[int, int] = (4, 16)) -> ScheduleError:  # fmt: skip
    comp = Compilation(program, "<t>", {"input0": {"dtype": dtype, "shape": list(shape)}}, None, target, script(lines))
    with pytest.raises(ScheduleError) as err:
        comp.run_until("source")
    return err.value


def test_logical_combiner_is_refused() -> None:
    """`|=!` (or) is not one of +, *, max, min: refused at the bind op."""
    err = refused("output0[N] |=! input0[N, K] > 0.5", rows(None))
    assert "associative and commutative" in err.message and str(err.loc) == "<schedule>:6:5"


def test_reduction_bound_to_blocks_is_refused() -> None:
    lines = rows(None)[:-1] + ['transform.einc.bind %k to "block.y"']
    err = refused(SUM, lines)
    assert "blocks cannot combine" in err.message and str(err.loc) == "<schedule>:6:5"


def test_two_bound_reductions_are_refused() -> None:
    program = "output0[N] +=! input0[N, K, J]"
    lines = [
        '%n = transform.einc.match stmt "output0" axis "N" in %root',
        '%k = transform.einc.match stmt "output0" axis "K" in %root',
        '%j = transform.einc.match stmt "output0" axis "J" in %root',
        'transform.einc.bind %k to "thread.x"',
        'transform.einc.bind %j to "thread.y"',
    ]
    comp = Compilation(program, "<t>", {"input0": {"dtype": "float32", "shape": [4, 8, 8]}}, None, "opencl", script(lines))
    with pytest.raises(ScheduleError, match="bound to threads already") as err:
        comp.run_until("source")
    assert str(err.value.loc) == "<schedule>:7:5"


def test_reduction_below_an_unbound_output_loop_is_refused_at_the_bind() -> None:
    """N stays sequential: one block would have to reduce every row in turn. The pass
    refuses it at the bind op of K, not at the schedule's first line."""
    lines = [
        '%n = transform.einc.match stmt "output0" axis "N" in %root',
        '%k = transform.einc.match stmt "output0" axis "K" in %root',
        'transform.einc.bind %k to "thread.x"',
    ]
    err = refused(SUM, lines)
    assert "cannot be mapped onto work-items" in err.message and str(err.loc) == "<schedule>:5:5"


def test_unmappable_bind_is_reported_at_the_bind_op() -> None:
    """A parallel loop bound to threads inside a sequential loop (issue 4's location fix)."""
    lines = [
        '%n = transform.einc.match stmt "output0" axis "N" in %root',
        '%m = transform.einc.match stmt "output0" axis "M" in %root',
        "%a, %b = transform.einc.reorder %m, %n",
        'transform.einc.bind %b to "thread.x"',
    ]
    comp = Compilation("output0[N, M] = input0[N, M] + 1.0", "<t>", {"input0": {"dtype": "float32", "shape": [4, 8]}},
                       None, "opencl", script(lines))  # fmt: skip
    with pytest.raises(ScheduleError, match="cannot be mapped onto work-items") as err:
        comp.run_until("source")
    assert str(err.value.loc) == "<schedule>:6:5"


def test_poplar_refuses_a_reduction_bound_to_threads() -> None:
    """A Poplar vertex's workers cannot exchange partials (no shared memory, no subgroups)."""
    err = refused(SUM, rows(4), target="poplar")
    assert "cannot combine partial results across threads" in err.message
    assert str(err.loc) == "<schedule>:7:5"



def test_subgroup_reduce_cluster_must_be_a_power_of_two() -> None:
    from xdsl.parser import Parser
    from xdsl.utils.exceptions import VerifyException

    from einc.dialects.context import make_context

    text = """builtin.module {
  egpu.func @k(%a: memref<4xf32>) grid [1, 1, 1] block [8, 1, 1] {
    %c = arith.constant 1.0 : f32
    %s = egpu.subgroup_reduce add %c cluster CLUSTER : f32
    egpu.return
  }
}"""
    module = Parser(make_context(), text.replace("CLUSTER", "8")).parse_module()
    module.verify()
    assert "egpu.subgroup_reduce add %c cluster 8 : f32" in str(module)
    with pytest.raises(VerifyException, match="cluster size 6 is not a power of two"):
        Parser(make_context(), text.replace("CLUSTER", "6")).parse_module().verify()
