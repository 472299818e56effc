"""Local (private) arrays on the device targets: `cache_read/_write ... in "local"` and
`compute_at` make a `memref.alloca` that, inside a kernel, is each work-item's own array
(`float a[16];` in OpenCL/CUDA/HIP/SYCL kernels, a function-local array in HLSL).

Executed on OpenCL (PoCL), HLSL (lavapipe), SYCL and CUDA (where an NVIDIA GPU is) against a
float64 NumPy reference on fresh random inputs, with sizes the tiles divide and sizes they do
not (partial tiles: the copies skip the elements outside the tensor); compile-checked on CUDA (NVRTC, sm_80) and HIP
(gfx90a). Refusals: a local buffer above a thread-bound loop (each thread would fill its own
copy) at the cache op's file:line:col whichever order the binds come in, tiles of two threads
that overlap, and more local memory per work-item than the target's `private_memory`.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from einc.compiler.driver import Compilation
from einc.errors import ScheduleError, TargetError
from tests.test_device_differential import run_on_device, script
from tests.test_device_schedules import MATMUL, matmul_lines, random_inputs
from tests.test_device_targets import require, require_run

RUNS = [pytest.param(t, marks=getattr(pytest.mark, t)) for t in ("opencl", "hlsl", "sycl", "cuda")]
CHECKS = {"cuda": "sm_80", "hip": "gfx90a"}
COMPILES = [pytest.param(t, marks=getattr(pytest.mark, t)) for t in CHECKS]
F32 = "float32"


def f32(*shape: int) -> dict[str, Any]:
    return {"dtype": F32, "shape": list(shape)}


def compile_check(comp: Compilation) -> int:
    """The source compiles for CUDA sm_80 / HIP gfx90a without spills; the last kernel's
    bytes of stack (CUDA) or scratch per lane (HIP): 0 when its local arrays live in
    registers."""
    if comp.target == "cuda":
        from einc.runtime.cuda import compile_check_cuda as check
    else:
        from einc.runtime.hip import compile_check_hip as check
    source = comp.run_until("source")
    manifest = comp.target_obj.manifest(comp.results["target"])
    report = check(source, manifest, CHECKS[comp.target]).check()
    assert report.ok, report.log
    kernel = report.kernel(manifest.kernels[-1].name)
    assert kernel.spills == 0
    return kernel.details.get("stack_bytes", kernel.details.get("scratch_bytes_per_lane", -1))


# ---- a register-blocked matmul -------------------------------------------------------------------


TILES_16_BY_4 = [
    '%n = transform.einc.match stmt "output0" axis "N" in %root',
    '%m = transform.einc.match stmt "output0" axis "M" in %root',
    '%k = transform.einc.match stmt "output0" axis "K" in %root',
    "%no, %ni = transform.einc.tile %n by 16",
    "%mo, %mi = transform.einc.tile %m by 16",
    "%nt, %nr = transform.einc.tile %ni by 4",
    "%mt, %mr = transform.einc.tile %mi by 4",
]
"""N and M of a matmul tiled by 16 (blocks), then by 4 (a thread's tile)."""


def register_blocked(unroll: bool, binds_first: bool = True, at: str = "%d") -> list[str]:
    """N and M tiled by 16 (blocks) then by 4 (threads), order N.o M.o N.i.o M.i.o K N.i.i
    M.i.i: each thread accumulates a 4x4 tile of output0 in a local array (cache_write at
    its thread loop), the 4x4 loops unrolled when they have constant bounds."""
    lines = [
        *TILES_16_BY_4,
        "%a, %b, %c, %d, %e, %f, %g = transform.einc.reorder %no, %mo, %nt, %mt, %k, %nr, %mr",
    ]
    binds = [
        'transform.einc.bind %a to "block.y"',
        'transform.einc.bind %b to "block.x"',
        'transform.einc.bind %c to "thread.y"',
        'transform.einc.bind %d to "thread.x"',
    ]
    cache = [f'%w = transform.einc.cache_write "output0" at {at} in "local"']
    lines += binds + cache if binds_first else cache + binds
    if unroll:
        lines += ["transform.einc.unroll %g by 4", "transform.einc.unroll %f by 4"]
    return lines


def matmul(n: int, m: int, k: int, target: str, lines: list[str]) -> Compilation:
    return Compilation(MATMUL, "<t>", {"input0": f32(n, k), "input1": f32(k, m)}, None, target, script(lines))


MATMUL_SIZES = [(32, 48, 20), (37, 45, 29)]
"""Tiles of 16 and 4 divide the first; the second has partial tiles on blocks, threads and
the register tile (its 4x4 loops keep their min bounds: not unrolled)."""


@pytest.mark.parametrize("target", RUNS)
@pytest.mark.parametrize("n,m,k", MATMUL_SIZES)
def test_register_blocked_matmul_matches_numpy(target: str, n: int, m: int, k: int) -> None:
    require_run(target)
    comp = matmul(n, m, k, target, register_blocked(unroll=n % 16 == 0 and m % 16 == 0))
    source = comp.run_until("source")
    assert "float output0_local[16];" in source
    launch = comp.target_obj.manifest(comp.results["target"]).kernels[-1]
    assert launch.block[:2] == (4, 4) and launch.grid[:2] == (-(-m // 16), -(-n // 16))
    inputs = random_inputs(comp)
    out = run_on_device(comp, inputs)["output0"]
    expected = inputs["input0"].astype(np.float64) @ inputs["input1"]
    np.testing.assert_allclose(out, expected, rtol=1e-4, atol=1e-5 * k)


@pytest.mark.parametrize("target", COMPILES)
@pytest.mark.parametrize("n,m,k", MATMUL_SIZES)
def test_register_blocked_matmul_compiles(target: str, n: int, m: int, k: int) -> None:
    require(target)
    """The unrolled 4x4 tile (constant indices) is kept in registers: no stack or scratch."""
    unroll = n % 16 == 0 and m % 16 == 0
    comp = matmul(n, m, k, target, register_blocked(unroll=unroll))
    stack = compile_check(comp)
    assert "float output0_local[16];" in comp.results["source"]
    if unroll:
        assert stack == 0


def register_blocked_shared() -> list[str]:
    """The register-blocked matmul with K tiled by 8 and the input tiles of each K.o
    iteration staged in shared memory (the block's threads copy them between barriers):
    the classic GPU matmul."""
    lines = [
        *TILES_16_BY_4,
        "%ko, %ki = transform.einc.tile %k by 8",
        "%a, %b, %c, %d, %e, %f, %g, %h = transform.einc.reorder %no, %mo, %nt, %mt, %ko, %ki, %nr, %mr",
        'transform.einc.bind %a to "block.y"',
        'transform.einc.bind %b to "block.x"',
        'transform.einc.bind %c to "thread.y"',
        'transform.einc.bind %d to "thread.x"',
        '%w = transform.einc.cache_write "output0" at %d in "local"',
        '%s0 = transform.einc.cache_read "input0" at %e in "shared"',
        '%s1 = transform.einc.cache_read "input1" at %e in "shared"',
    ]
    return lines


@pytest.mark.parametrize("target", RUNS)
@pytest.mark.parametrize("n,m,k", MATMUL_SIZES)
def test_register_blocked_matmul_with_shared_tiles_matches_numpy(target: str, n: int, m: int, k: int) -> None:
    """With partial tiles the out-of-range threads still reach every barrier: their local
    array is declared outside the guard of the compute (found here: the guard had taken the
    declaration and refused the schedule)."""
    require_run(target)
    comp = matmul(n, m, k, target, register_blocked_shared())
    source = comp.run_until("source")
    assert "float output0_local[16];" in source and "input1_shared" in source
    inputs = random_inputs(comp)
    out = run_on_device(comp, inputs)["output0"]
    expected = inputs["input0"].astype(np.float64) @ inputs["input1"]
    np.testing.assert_allclose(out, expected, rtol=1e-4, atol=1e-5 * k)


@pytest.mark.parametrize("target", COMPILES)
def test_register_blocked_matmul_with_shared_tiles_compiles(target: str) -> None:
    require(target)
    compile_check(matmul(37, 45, 29, target, register_blocked_shared()))


@pytest.mark.parametrize("target", RUNS)
@pytest.mark.parametrize("n,m,k", MATMUL_SIZES)
def test_one_element_accumulator_per_thread_matches_numpy(target: str, n: int, m: int, k: int) -> None:
    """One output per thread (tests/test_device_schedules.py's tiled matmul with shared
    input tiles), accumulated in a one-element local array staged at the thread loop (found
    here: its constant-index store read as a reduction shared by the threads)."""
    require_run(target)
    comp = matmul(n, m, k, target, matmul_lines(8) + ['%w = transform.einc.cache_write "output0" at %d in "local"'])
    assert "float output0_local[1];" in comp.run_until("source")
    inputs = random_inputs(comp)
    out = run_on_device(comp, inputs)["output0"]
    expected = inputs["input0"].astype(np.float64) @ inputs["input1"]
    np.testing.assert_allclose(out, expected, rtol=1e-4, atol=1e-5 * k)


# ---- a convolution with its input tile and halo in a local array --------------------------------

CONV = "output0[N] +=! input0[N + K] * input1[K] where N in {n}"


def conv(n: int, target: str) -> Compilation:
    """N tiled by 16 (blocks) then 4 (threads); each thread stages its 4 outputs and the
    4 + 10 - 1 = 13 inputs they read (the tile and its halo) in local arrays."""
    lines = [
        '%n = transform.einc.match stmt "output0" axis "N" in %root',
        '%k = transform.einc.match stmt "output0" axis "K" in %root',
        "%no, %ni = transform.einc.tile %n by 16",
        "%nt, %nr = transform.einc.tile %ni by 4",
        "%a, %b, %c, %d = transform.einc.reorder %no, %nt, %k, %nr",
        'transform.einc.bind %a to "block.x"',
        'transform.einc.bind %b to "thread.x"',
        '%r = transform.einc.cache_read "input0" at %b in "local"',
        '%w = transform.einc.cache_write "output0" at %b in "local"',
    ]
    return Compilation(CONV.format(n=n), "<t>", {"input0": f32(n + 9), "input1": f32(10)}, None, target, script(lines))


@pytest.mark.parametrize("target", RUNS)
@pytest.mark.parametrize("n", [32, 30])
def test_convolution_stages_its_halo_locally(target: str, n: int) -> None:
    require_run(target)
    comp = conv(n, target)
    source = comp.run_until("source")
    assert "float input0_local[13];" in source and "float output0_local[4];" in source
    inputs = random_inputs(comp)
    out = run_on_device(comp, inputs)["output0"]
    x, w = inputs["input0"].astype(np.float64), inputs["input1"].astype(np.float64)
    np.testing.assert_allclose(out, [x[i : i + 10] @ w for i in range(n)], rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("target", COMPILES)
def test_convolution_compiles(target: str) -> None:
    require(target)
    compile_check(conv(30, target))


# ---- compute_at into a thread loop ---------------------------------------------------------------

STENCIL = (
    "temp0[H, W] = input0[H, W] * 2.0 + 1.0; "
    "output0[HO, WO] +=! temp0[HO + KH, WO + KW] where HO in {h}, WO in {w}, KH in 3, KW in 3"
)


def stencil(h: int, w: int, target: str, tile: int | None) -> Compilation:
    """The producer temp0 recomputed per output (its 3x3 box, in a local array) at the
    thread loop of WO; rows on thread.y (or tiled: blocks of `tile` rows)."""
    lines = [
        '%ho = transform.einc.match stmt "output0" axis "HO" in %root',
        '%wo = transform.einc.match stmt "output0" axis "WO" in %root',
    ]
    if tile is None:
        lines += ['transform.einc.bind %ho to "thread.y"']
    else:
        lines += [f"%hb, %ht = transform.einc.tile %ho by {tile}",
                  'transform.einc.bind %hb to "block.x"', 'transform.einc.bind %ht to "thread.y"']  # fmt: skip
    lines += [
        'transform.einc.bind %wo to "thread.x"',
        '%t = transform.einc.match stmt "temp0" in %root',
        "transform.einc.compute_at %t at %wo",
    ]
    return Compilation(STENCIL.format(h=h, w=w), "<t>", {"input0": f32(h + 2, w + 2)}, None, target, script(lines))


def stencil_reference(x: np.ndarray, h: int, w: int) -> np.ndarray:
    t = x.astype(np.float64) * 2 + 1
    return np.array([[t[i : i + 3, j : j + 3].sum() for j in range(w)] for i in range(h)])


STENCILS = [(6, 5, None), (8, 7, 4)]


@pytest.mark.parametrize("target", RUNS)
@pytest.mark.parametrize("h,w,tile", STENCILS)
def test_compute_at_recomputes_a_producer_per_thread(target: str, h: int, w: int, tile: int | None) -> None:
    require_run(target)
    comp = stencil(h, w, target, tile)
    source = comp.run_until("source")
    assert "float temp0_local[9];" in source
    assert len(comp.target_obj.manifest(comp.results["target"]).kernels) == 2  # fill, stencil: temp0 is gone
    inputs = random_inputs(comp)
    out = run_on_device(comp, inputs)["output0"]
    np.testing.assert_allclose(out, stencil_reference(inputs["input0"], h, w), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("target", RUNS)
def test_compute_at_without_binds_maps_one_output_per_work_item(target: str) -> None:
    """No binds: the default mapping flattens HO x WO onto work-items (30 of them) and each
    one recomputes its 3x3 box of temp0 in its own local array (the local buffer does not
    stop the nest from being parallel)."""
    require_run(target)
    lines = [
        '%wo = transform.einc.match stmt "output0" axis "WO" in %root',
        '%t = transform.einc.match stmt "temp0" in %root',
        "transform.einc.compute_at %t at %wo",
    ]
    comp = Compilation(STENCIL.format(h=6, w=5), "<t>", {"input0": f32(8, 7)}, None, target, script(lines))
    assert "float temp0_local[9];" in comp.run_until("source")
    launch = comp.target_obj.manifest(comp.results["target"]).kernels[-1]
    assert launch.block[0] * launch.grid[0] >= 30 and launch.block[0] > 1
    inputs = random_inputs(comp)
    out = run_on_device(comp, inputs)["output0"]
    np.testing.assert_allclose(out, stencil_reference(inputs["input0"], 6, 5), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("target", COMPILES)
def test_compute_at_compiles(target: str) -> None:
    require(target)
    compile_check(stencil(8, 7, target, 4))


# ---- refusals --------------------------------------------------------------------------------------


def test_local_buffer_above_thread_loops_bound_later_is_refused_at_the_cache_op() -> None:
    """cache_write at the block loop M.o, the threads bound after it: each thread would
    accumulate into its own copy of the block's tile. Refused after the schedule, at the
    cache op (line 11 of the script: the binds come after it)."""
    comp = matmul(32, 32, 8, "opencl", register_blocked(unroll=False, binds_first=False, at="%b"))
    with pytest.raises(ScheduleError, match="lies outside loop N.i.o of output0, which is bound to thread.y") as err:
        comp.run_until("scheduled")
    assert str(err.value).startswith("<schedule>:11:5: error: the local buffer 'output0_local'")
    assert 'use "shared" for a tile shared by the block\'s threads' in str(err.value)


def test_local_buffer_above_thread_loops_bound_before_is_refused_at_the_cache_op() -> None:
    comp = matmul(32, 32, 8, "hlsl", register_blocked(unroll=False, at="%b"))
    with pytest.raises(ScheduleError, match="loop N.i.o of output0 inside it is bound to thread.y") as err:
        comp.run_until("scheduled")
    assert str(err.value).startswith("<schedule>:15:5: error:")
    assert '"shared"' in str(err.value)


def test_compute_at_above_thread_loops_is_refused_at_its_op() -> None:
    """compute_at at the row loop whose columns are bound to threads afterwards."""
    lines = [
        '%ho = transform.einc.match stmt "output0" axis "HO" in %root',
        '%wo = transform.einc.match stmt "output0" axis "WO" in %root',
        '%t = transform.einc.match stmt "temp0" in %root',
        "transform.einc.compute_at %t at %ho",
        'transform.einc.bind %wo to "thread.x"',
    ]
    comp = Compilation(STENCIL.format(h=6, w=5), "<t>", {"input0": f32(8, 7)}, None, "sycl", script(lines))
    with pytest.raises(ScheduleError, match="'temp0_local' at loop HO of output0 lies outside loop WO") as err:
        comp.run_until("scheduled")
    assert str(err.value).startswith("<schedule>:6:5: error: the local buffer 'temp0_local'")


def test_overlapping_thread_tiles_are_refused() -> None:
    """A thread-bound loop whose iterations' tiles overlap (thread t stages elements t ..
    t + 28, written back whole) is refused; with a stride of 29 the tiles are disjoint. (A
    schedule's bind already refuses such a loop unless it binds a cross-thread reduction:
    the check does not rely on that.)"""
    from xdsl.dialects import memref
    from xdsl.parser import Parser

    from einc.dialects.context import make_context
    from einc.transforms.staging import private_buffer_failure
    from einc.transforms.loop_build import Failure

    def failure(step: int) -> Failure | None:
        text = f"""
        func.func @f(%C: memref<160xf32>) {{
          affine.for %t = 0 to 4 {{
            %l = memref.alloca() {{ein.name = "C_local"}} : memref<29xf32>
            affine.for %c = 0 to 29 {{
              %v = affine.load %C[%t * {step} + %c] : memref<160xf32>
              affine.store %v, %l[%c] : memref<29xf32>
            }}
            affine.for %c = 0 to 29 {{
              %v = affine.load %l[%c] : memref<29xf32>
              affine.store %v, %C[%t * {step} + %c] : memref<160xf32>
            }}
          }} {{einc.stmt = "C", einc.axis = "T", einc.bind = "thread.x"}}
          func.return
        }}"""
        module = Parser(make_context(), text).parse_module()
        (alloca,) = [op for op in module.walk() if isinstance(op, memref.AllocaOp)]
        return private_buffer_failure(alloca)

    overlapping = failure(1)
    assert overlapping is not None
    assert "'C_local' at loop T of C is written back to 'C', but the tiles of two iterations of loop T of C (bound to thread.x) may overlap" in overlapping.message
    assert failure(29) is None


def test_too_much_local_memory_per_work_item_is_refused() -> None:
    """A 128x128 float32 tile of input1 (64 KiB, staging.py's limit per buffer) and a row of
    input0 per thread: 66048 bytes, more than the target's 64 KiB of local arrays per
    work-item. Refused before any code is printed."""
    lines = [
        '%n = transform.einc.match stmt "output0" axis "N" in %root',
        '%k = transform.einc.match stmt "output0" axis "K" in %root',
        'transform.einc.bind %n to "thread.x"',
        '%r = transform.einc.cache_read "input0" at %n in "local"',
        '%s = transform.einc.cache_read "input1" at %n in "local"',
    ]
    comp = matmul(4, 128, 128, "cuda", lines)
    comp.run_until("target")
    with pytest.raises(TargetError, match=r"66048 bytes of local arrays per work-item \(at most 65536\)"):
        comp.run_until("source")


@pytest.mark.parametrize("target, dtype", [("hlsl", "int8"), ("hlsl", "int16")])
def test_local_arrays_of_types_the_target_widens_are_refused(target: str, dtype: str) -> None:
    """HLSL has no 8- or 16-bit integer types: a local array of one is refused at the cache
    op, not by the device compiler. (float16/bfloat16 local arrays are held as float32 on
    every device target: tests/test_narrow_buffers.py.)"""
    lines = ['%n = transform.einc.match stmt "output0" axis "N" in %root',
             'transform.einc.bind %n to "thread.x"',
             '%r = transform.einc.cache_read "input0" at %n in "local"']  # fmt: skip
    comp = Compilation("output0[N, M] = input0[N, M] * 2", "<t>", {"input0": {"dtype": dtype, "shape": [8, 6]}},
                       None, target, script(lines))  # fmt: skip
    with pytest.raises(ScheduleError, match=f"the {target} target has no local arrays of {dtype}") as err:
        comp.run_until("source")
    assert str(err.value).startswith("<schedule>:5:5: error: the local buffer 'input0_local'")


def test_local_arrays_of_narrow_integers_run_on_opencl() -> None:
    require("opencl")
    lines = ['%n = transform.einc.match stmt "output0" axis "N" in %root',
             'transform.einc.bind %n to "thread.x"',
             '%r = transform.einc.cache_read "input0" at %n in "local"',
             '%w = transform.einc.cache_write "output0" at %n in "local"']  # fmt: skip
    comp = Compilation("output0[N, M] = input0[N, M] * 3", "<t>", {"input0": {"dtype": "int8", "shape": [8, 6]}},
                       None, "opencl", script(lines))  # fmt: skip
    assert "char input0_local[6];" in comp.run_until("source")
    inputs = random_inputs(comp)
    out = run_on_device(comp, inputs)["output0"]
    np.testing.assert_array_equal(out, inputs["input0"] * np.int8(3))


def test_partial_tiles_stage_locally_on_c_too() -> None:
    """staging.py's partial tiles (37 rows by 4, 23 columns by 8) hold for C as well: the
    copies test each element against the tensor's end (no test below 0: none is needed)."""
    from tests.test_schedules import check

    src = check(MATMUL, {"input0": f32(37, 12), "input1": f32(12, 23)}, script([
        '%n = transform.einc.match stmt "output0" axis "N" in %root',
        '%m = transform.einc.match stmt "output0" axis "M" in %root',
        "%no, %ni = transform.einc.tile %n by 4",
        "%mo, %mi = transform.einc.tile %m by 8",
        "%a, %b, %c, %d = transform.einc.reorder %no, %mo, %ni, %mi",
        '%w = transform.einc.cache_write "output0" at %b',
        '%r = transform.einc.cache_read "input0" at %b',
    ]))  # fmt: skip
    assert "if ((N_o + output0_c0 < 37) & (M_o + output0_c1 < 23)) {" in src
    assert "if (N_o + input0_c0 < 37) {" in src and ">= 0" not in src
