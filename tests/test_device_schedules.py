"""Device schedules staging tensors in GPU shared memory (`transform.einc.cache_read/_write
... in "shared"`): a tiled matmul whose i/j tiles are bound to block.y/x and thread.y/x with
the input tiles staged at the reduction-tile loop, a reduction with a staged input, and the
refusals (a box that depends on a thread id, too much shared memory, shared memory on C).
Executed on OpenCL (PoCL), HLSL (lavapipe), SYCL (Intel's CPU device) and CUDA (where an
NVIDIA GPU is) against a float64 NumPy reference on fresh random inputs; compile-checked on CUDA/HIP, whose resource reports
must show exactly the staged tiles' bytes of shared memory.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from einc.compiler.driver import Compilation
from einc.errors import ScheduleError, TargetError
from tests.test_conformance import fresh_seed
from tests.test_device_differential import run_on_device, script
from tests.test_device_targets import require, require_run

MATMUL = "output0[N, M] +=! input0[N, K] * input1[K, M]"


def matmul_lines(tile: int, staged: tuple[str, ...] = ("input0", "input1"), memory: str = "shared") -> list[str]:
    """Tile N, M, K by `tile`, order N.o M.o N.i M.i K.o K.i, bind the i/j tiles to
    block.y/x and thread.y/x, stage `staged` at K.o."""
    lines = [
        '%n = transform.einc.match stmt "output0" axis "N" in %root',
        '%m = transform.einc.match stmt "output0" axis "M" in %root',
        '%k = transform.einc.match stmt "output0" axis "K" in %root',
        f"%no, %ni = transform.einc.tile %n by {tile}",
        f"%mo, %mi = transform.einc.tile %m by {tile}",
        f"%ko, %ki = transform.einc.tile %k by {tile}",
        "%a, %b, %c, %d, %e, %f = transform.einc.reorder %no, %mo, %ni, %mi, %ko, %ki",
        'transform.einc.bind %a to "block.y"',
        'transform.einc.bind %b to "block.x"',
        'transform.einc.bind %c to "thread.y"',
        'transform.einc.bind %d to "thread.x"',
    ]
    return lines + [f'transform.einc.cache_read "{t}" at %e in "{memory}"' for t in staged]


def matmul(n: int, m: int, k: int, tile: int, target: str, **kw: Any) -> Compilation:
    f32 = "float32"
    inputs = {"input0": {"dtype": f32, "shape": [n, k]}, "input1": {"dtype": f32, "shape": [k, m]}}
    return Compilation(MATMUL, "<t>", inputs, None, target, script(matmul_lines(tile, **kw)))


def random_inputs(comp: Compilation) -> dict[str, np.ndarray]:
    """Fresh random inputs: floats in [-1, 1), integers in [-9, 9] (never all zeros)."""
    rng = np.random.default_rng(fresh_seed())
    values = {}
    for t in comp.program.inputs:
        if np.dtype(t.dtype).kind == "f":
            values[t.name] = rng.uniform(-1, 1, t.shape).astype(t.dtype)
        else:
            values[t.name] = rng.integers(-9, 10, t.shape).astype(t.dtype)
    return values


SIZES = [(32, 32, 32, 8), (37, 45, 29, 8), (20, 12, 50, 16)]
"""(N, M, K, tile): tiles dividing every size, and not dividing any."""


@pytest.mark.parametrize("target", [pytest.param(t, marks=getattr(pytest.mark, t)) for t in ("opencl", "hlsl", "sycl", "cuda")])
@pytest.mark.parametrize("n,m,k,tile", SIZES)
def test_shared_matmul_matches_numpy(target: str, n: int, m: int, k: int, tile: int) -> None:
    require_run(target)
    comp = matmul(n, m, k, tile, target)
    source = comp.run_until("source")
    kernel = comp.results["target"]
    assert "egpu.alloc_shared" in str(kernel) and "egpu.barrier" in str(kernel)
    launch = comp.target_obj.manifest(kernel).kernels[-1]
    assert launch.block[:2] == (tile, tile) and launch.grid[:2] == (-(-m // tile), -(-n // tile))
    inputs = random_inputs(comp)
    out = run_on_device(comp, inputs)["output0"]
    expected = inputs["input0"].astype(np.float64) @ inputs["input1"]
    np.testing.assert_allclose(out, expected, rtol=1e-4, atol=1e-5 * k)
    del source


@pytest.mark.opencl
def test_shared_reduction_matches_numpy() -> None:
    """Row sums with rows bound to threads (a partial tile: 50 rows by 16) and the input's
    column tiles staged at the reduction-tile loop (rows padded against bank conflicts)."""
    require("opencl")
    lines = [
        '%n = transform.einc.match stmt "output0" axis "N" in %root',
        '%k = transform.einc.match stmt "output0" axis "K" in %root',
        "%no, %ni = transform.einc.tile %n by 16",
        "%ko, %ki = transform.einc.tile %k by 8",
        'transform.einc.bind %no to "block.x"',
        'transform.einc.bind %ni to "thread.x"',
        'transform.einc.cache_read "input0" at %ko in "shared"',
    ]
    comp = Compilation("output0[N] +=! input0[N, K]", "<t>", {"input0": {"dtype": "float32", "shape": [50, 30]}},
                       None, "opencl", script(lines))  # fmt: skip
    comp.run_until("source")
    # 16 rows of 8, each padded by 4 (einc-pad-shared: the lanes read down a column)
    assert "__local float input0_shared[192];" in comp.results["source"]
    inputs = random_inputs(comp)
    out = run_on_device(comp, inputs)["output0"]
    np.testing.assert_allclose(out, inputs["input0"].astype(np.float64).sum(axis=1), rtol=1e-5, atol=1e-5)


def test_shared_box_at_a_thread_loop_is_refused() -> None:
    """Staging at the thread-bound loop itself: the tile's offset would be the thread's
    column (each thread would stage a different tile)."""
    lines = matmul_lines(8, staged=())
    lines.append('transform.einc.cache_read "input0" at %d in "shared"')
    comp = Compilation(MATMUL, "<t>", {"input0": {"dtype": "float32", "shape": [16, 16]},
                                       "input1": {"dtype": "float32", "shape": [16, 16]}}, None, "opencl", script(lines))  # fmt: skip
    with pytest.raises(ScheduleError, match="in shared memory: the loop is bound to thread.x") as err:
        comp.run_until("scheduled")
    assert "<schedule>:14:5" in str(err.value)


def test_too_much_shared_memory_is_refused() -> None:
    """Two 128x128 float32 tiles (128 KiB) break CUDA's 48 KiB per block before any code
    is printed."""
    comp = matmul(256, 256, 256, 128, "cuda")
    with pytest.raises(TargetError, match="131072 bytes of shared memory"):
        comp.run_until("target")


def test_shared_memory_on_c_is_refused() -> None:
    comp = matmul(16, 16, 16, 8, "c")
    with pytest.raises(ScheduleError, match="no GPU shared memory"):
        comp.run_until("source")


ROW_SUM_LINES = [
    '%n = transform.einc.match stmt "output0" axis "N" in %root',
    '%k = transform.einc.match stmt "output0" axis "K" in %root',
    "%no, %ni = transform.einc.tile %n by 4",
    "%ko, %ki = transform.einc.tile %k by 4",
    'transform.einc.bind %no to "block.x"',
    'transform.einc.bind %ni to "thread.x"',
]


@pytest.mark.parametrize("op", ['cache_write "output0"', 'cache_read "input0"'])
def test_shared_memory_on_poplar_is_refused_at_the_cache_op_before_the_schedule_runs(op: str) -> None:
    """Poplar's workers share no memory; the refusal came at launch, at the tile op."""
    comp = Compilation("output0[N] +=! input0[N, K]", "<t>", {"input0": {"dtype": "float32", "shape": [16, 12]}},
                       None, "poplar", script([*ROW_SUM_LINES, f'%s = transform.einc.{op} at %ko in "shared"']))  # fmt: skip
    with pytest.raises(ScheduleError) as err:
        comp.run_until("scheduled")
    assert err.value.render().startswith(
        f"<schedule>:9:5: error: the poplar target has no shared memory: transform.einc.{op.split()[0]} of "
        f"'{op.split()[1][1:-1]}' in \"shared\" cannot be staged there; stage it in \"local\" memory")


@pytest.mark.poplar
def test_local_staging_on_poplar_matches_numpy() -> None:
    """What the refusal suggests runs: the same schedule staging in "local" memory."""
    require_run("poplar")
    comp = Compilation("output0[N] +=! input0[N, K]", "<t>", {"input0": {"dtype": "float32", "shape": [16, 12]}},
                       None, "poplar", script([*ROW_SUM_LINES, '%s = transform.einc.cache_write "output0" at %ko in "local"']))  # fmt: skip
    assert "einc_thread" in comp.source_text()  # the threads are the workers
    inputs = random_inputs(comp)
    out = run_on_device(comp, inputs)["output0"]
    np.testing.assert_allclose(out, inputs["input0"].astype(np.float64).sum(axis=1), rtol=1e-5, atol=1e-5)


CHECKS = {"cuda": "sm_90", "hip": "gfx90a"}


@pytest.mark.parametrize("target", [pytest.param(t, marks=getattr(pytest.mark, t)) for t in CHECKS])
@pytest.mark.parametrize("tile", [8, 16])
def test_shared_matmul_resources_show_the_staged_tiles(target: str, tile: int) -> None:
    """CUDA (NVRTC, ptxas -v) / HIP (kernel-resource-usage): the kernel compiles without
    spills and its shared memory is exactly the two staged float32 tiles."""
    require(target)
    if target == "cuda":
        from einc.runtime.cuda import compile_check_cuda as check
    else:
        from einc.runtime.hip import compile_check_hip as check
    comp = matmul(70, 50, 40, tile, target)
    source = comp.run_until("source")
    assert ("__shared__ float input0_shared" in source) and "__syncthreads();" in source
    manifest = comp.target_obj.manifest(comp.results["target"])
    report = check(source, manifest, CHECKS[target]).check()
    assert report.ok, report.log
    kernel = report.kernel(manifest.kernels[-1].name)
    assert kernel.spills == 0
    assert kernel.shared_bytes == 2 * tile * tile * 4


@pytest.mark.opencl
@pytest.mark.parametrize("n,m,k,tile", [(16, 16, 24, 8), (19, 13, 21, 8)])
def test_shared_cache_write_matmul_matches_numpy(n: int, m: int, k: int, tile: int) -> None:
    """The output tile of the block staged at K.o too (copied in, accumulated, copied out
    each iteration; a thread copies out the elements it copied in)."""
    require("opencl")
    comp = matmul(n, m, k, tile, "opencl")
    comp.schedule = script(matmul_lines(tile) + ['transform.einc.cache_write "output0" at %e in "shared"'])
    source = comp.run_until("source")
    assert "__local float output0_shared[" in source
    inputs = random_inputs(comp)
    out = run_on_device(comp, inputs)["output0"]
    np.testing.assert_allclose(out, inputs["input0"].astype(np.float64) @ inputs["input1"], rtol=1e-4, atol=1e-4)


@pytest.mark.opencl
def test_unstaged_partial_tiles_on_two_thread_axes_match_numpy() -> None:
    """Found while measuring: with partial tiles on thread.y and thread.x, the second
    coordinate was defined after the first tile's guard and used inside it (TargetError
    'value used before its definition'); every coordinate now precedes every guard."""
    require("opencl")
    comp = matmul(37, 45, 29, 8, "opencl", staged=())
    comp.run_until("source")
    inputs = random_inputs(comp)
    out = run_on_device(comp, inputs)["output0"]
    np.testing.assert_allclose(out, inputs["input0"].astype(np.float64) @ inputs["input1"], rtol=1e-4, atol=1e-4)


def test_shared_box_whose_offset_depends_on_a_thread_id_is_refused() -> None:
    """A row index computed from the thread's coordinate outside the staging loop (`%r`)
    fixes the tile per thread: cache_tensor refuses it (Failure, IR unchanged)."""
    from xdsl.dialects import affine
    from xdsl.parser import Parser

    from einc.dialects.context import make_context
    from einc.transforms.staging import cache_tensor
    from einc.transforms.loop_build import Failure

    text = """
    func.func @f(%A: memref<8x8xf32>, %C: memref<8xf32>) {
      affine.for %n = 0 to 8 {
        %r = affine.apply affine_map<(d0) -> (7 - d0)> (%n)
        affine.for %k = 0 to 8 {
          %a = affine.load %A[%r, %k] : memref<8x8xf32>
          affine.store %a, %C[%n] : memref<8xf32>
        } {einc.stmt = "C", einc.axis = "K"}
      } {einc.stmt = "C", einc.axis = "N", einc.bind = "thread.x"}
      func.return
    }"""
    module = Parser(make_context(), text).parse_module()
    before = str(module)
    k = next(op for op in module.walk() if isinstance(op, affine.ForOp) and op.attributes["einc.axis"].data == "K")  # type: ignore[attr-defined]
    result = cache_tensor(k, "A", False, "shared")
    assert isinstance(result, Failure)
    assert "the tile's offset in dimension 0 depends on a thread id" in result.message
    assert str(module) == before


@pytest.mark.opencl
def test_partial_tile_guard_keeps_index_values_above_it() -> None:
    """Found by test_random_bind_schedules_match_oracle (shrunk): with a partial tile and a
    staged input, `N` converted to an integer (a pure op left outside the guard) was printed
    after the guarded compute using it ('value used before its definition')."""
    require("opencl")
    i32 = {"dtype": "int32", "shape": []}
    lines = ['%n = transform.einc.match stmt "output0" axis "N" in %root',
             "%no, %ni = transform.einc.tile %n by 4",
             'transform.einc.bind %no to "block.x"',
             'transform.einc.bind %ni to "thread.x"',
             '%m = transform.einc.match stmt "output0" axis "M" in %root',
             'transform.einc.cache_read "input3" at %m in "shared"']  # fmt: skip
    comp = Compilation("output0[N, M] = input3[N, M] + input0[] * N where M in 3", "<t>",
                       {"input0": i32, "input3": {"dtype": "int32", "shape": [6, 3]}}, None, "opencl",
                       script(lines))  # fmt: skip
    comp.run_until("source")
    inputs = random_inputs(comp)
    out = run_on_device(comp, inputs)["output0"]
    expected = inputs["input3"] + inputs["input0"] * np.arange(6)[:, None]
    np.testing.assert_array_equal(out, expected)


@pytest.mark.opencl
def test_shared_convolution_stages_a_halo() -> None:
    """1-D convolution, 30 outputs tiled by 8 on threads, taps tiled by 4: the staged box of
    the input in one K.o iteration is 8 + 4 - 1 = 11 elements (the tile and its halo)."""
    require("opencl")
    lines = ['%n = transform.einc.match stmt "output0" axis "N" in %root',
             '%k = transform.einc.match stmt "output0" axis "K" in %root',
             "%no, %ni = transform.einc.tile %n by 8",
             "%ko, %ki = transform.einc.tile %k by 4",
             'transform.einc.bind %no to "block.x"',
             'transform.einc.bind %ni to "thread.x"',
             'transform.einc.cache_read "input0" at %ko in "shared"']  # fmt: skip
    comp = Compilation("output0[N] +=! input0[N + K] * input1[K] where N in 30", "<t>",
                       {"input0": {"dtype": "float32", "shape": [39]}, "input1": {"dtype": "float32", "shape": [10]}},
                       None, "opencl", script(lines))  # fmt: skip
    source = comp.run_until("source")
    assert "__local float input0_shared[11];" in source
    inputs = random_inputs(comp)
    out = run_on_device(comp, inputs)["output0"]
    x, w = inputs["input0"].astype(np.float64), inputs["input1"].astype(np.float64)
    expected = np.array([x[n:n + 10] @ w for n in range(30)])
    np.testing.assert_allclose(out, expected, rtol=1e-5, atol=1e-5)
