"""Differential tests on the device targets: random valid Antares programs
(tests/oracle/genprog.py) compiled for OpenCL, HLSL, SYCL, Poplar and CUDA (where an NVIDIA GPU is), executed through
their real toolchains and compared with the oracle's float64 meaning (tests/oracle/compare.py, the
tolerances of tests/test_differential.py); the same programs compile-checked for CUDA (sm_90,
NVRTC) and HIP (gfx90a); and random legal tile + bind schedules on OpenCL, HLSL and CUDA, some
staging a tensor the statement reads in GPU shared memory.

A program a target refuses by design (a TargetError saying it cannot store or compute one of
the program's dtypes: HLSL int64 / float64 math, Poplar float64) is assumed away; any other
exception fails. A schedule the legality checks refuse (ScheduleError) is assumed away too,
and deterministic cases check that such schedules do apply and bind loops to block / thread
ids. Kernels run in the fork-server worker of tests/oracle/isolate.py, so a crashing kernel
fails one example only. Missing toolchains skip (fail when CI=true) as in
tests/test_device_targets.py. Example counts scale with EINC_HYPOTHESIS_PROFILE.
"""

from __future__ import annotations

import random
import re
from typing import Any

import numpy as np
import pytest
from hypothesis import assume, given, note, settings
from hypothesis import strategies as st

from einc.compiler.driver import Compilation
from einc.runtime.arrays import poisoned
from einc.errors import ScheduleError, TargetError
from einc.targets import description
from tests.oracle.budget import examples
from tests.oracle.compare import check_output
from tests.oracle.genprog import GenProgram, programs
from tests.oracle.isolate import run_isolated
from tests.test_conformance import ALL, Program, check_against_reference, fresh_seed, random_inputs
from tests.test_device_targets import require, require_run

EXAMPLES = {"opencl": 25, "hlsl": 12, "sycl": 8, "poplar": 6, "cuda": 25}
SCHEDULE_EXAMPLES = {"opencl": 15, "hlsl": 6, "cuda": 15}
CHECKS = {"cuda": ("sm_90", 6), "hip": ("gfx90a", 4)}

REFUSED_BY_DESIGN = re.compile(
    r"cannot store (int64|float64|float16|int16|int8|bool) buffers|of float64 is not supported|no type for [if]64"
)
"""The TargetErrors of a target refusing a dtype (tests/test_device_targets.py UNSUPPORTED)."""


def _marked(targets: Any) -> list[Any]:
    return [pytest.param(t, marks=getattr(pytest.mark, t), id=t) for t in targets]


# ---- compiling and running ----------------------------------------------------------------------


def _compile(prog_args: tuple[str, Any, Any], target: str, schedule: Any = None) -> Compilation:
    """Compile up to the source; assume away programs the target refuses by design."""
    text, input_dict, extra = prog_args
    comp = Compilation(text, "<random>", input_dict, extra, target, schedule)
    try:
        comp.run_until("source")
    except TargetError as err:
        if REFUSED_BY_DESIGN.search(err.message):
            note(f"{target} refuses by design: {err.message}")
            assume(False)
        raise
    return comp


_LOADERS = {
    "opencl": ("einc.runtime.opencl", "load_opencl_kernel"),
    "hlsl": ("einc.runtime.vulkan", "load_hlsl_kernel"),
    "sycl": ("einc.runtime.sycl", "load_sycl_kernel"),
    "poplar": ("einc.runtime.poplar", "load_poplar_kernel"),
    "cuda": ("einc.runtime.cuda", "load_cuda_kernel"),
}


def _build_and_run(
    target: str, source: str, manifest_json: str, inputs: dict[str, np.ndarray],
    outputs: dict[str, np.ndarray],
) -> dict[str, np.ndarray]:
    """What the worker does: build `source` from its launch manifest and run it."""
    import importlib

    from einc.runtime.manifest import LaunchManifest

    module, name = _LOADERS[target]
    runner = getattr(importlib.import_module(module), name)(
        source, LaunchManifest.from_json(manifest_json)
    )
    runner(inputs, outputs)
    return outputs


def run_on_device(comp: Compilation, inputs: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    source = comp.results["source"]
    manifest = comp.target_obj.manifest(comp.results["target"])
    outputs = {o.name: poisoned(o.shape, o.dtype) for o in comp.program.outputs}
    return run_isolated(_build_and_run, comp.target, source, manifest.to_json(),
                        {k: v.copy() for k, v in inputs.items()}, outputs, timeout=180.0)  # fmt: skip


def check_program(prog: GenProgram, seed: int, target: str, schedule: str | None = None) -> Compilation:
    inputs = prog.make_inputs(np.random.default_rng(seed))
    args = prog.compile_args()
    note(f"target: {target}\nprogram: {args[0]!r}\ninput_dict: {args[1]}\nextra_outputs: {args[2]}")
    if schedule is not None:
        note(f"schedule:\n{schedule}")
    note("inputs: " + "; ".join(f"{k}={v.tolist()!r}" for k, v in inputs.items()))
    comp = _compile(args, target, schedule)
    note(f"{target} source:\n{comp.results['source']}")
    expected = prog.evaluate(inputs)
    outputs = run_on_device(comp, inputs)
    assert sorted(outputs) == sorted(expected), (
        f"results {sorted(outputs)}, expected {sorted(expected)} (seed {seed})"
    )
    for name, exp in expected.items():
        check_output(name, outputs[name], exp, f"{target}, seed {seed}")
    return comp


# ---- 1. random programs on every executed target ------------------------------------------------


@pytest.mark.parametrize("target", _marked(EXAMPLES))
def test_random_programs_match_oracle(target: str) -> None:
    require_run(target)

    @settings(max_examples=examples(EXAMPLES[target]), deadline=None)
    @given(prog=programs(), seed=st.integers(0, 2**32 - 1))
    def run(prog: GenProgram, seed: int) -> None:
        check_program(prog, seed, target)

    run()


@pytest.mark.parametrize("target", _marked(CHECKS))
def test_random_programs_compile(target: str) -> None:
    require(target)
    arch, count = CHECKS[target]
    if target == "cuda":
        from einc.runtime.cuda import compile_check_cuda as check
    else:
        from einc.runtime.hip import compile_check_hip as check

    @settings(max_examples=examples(count), deadline=None)
    @given(prog=programs())
    def run(prog: GenProgram) -> None:
        args = prog.compile_args()
        note(f"program: {args[0]!r}\ninput_dict: {args[1]}\nextra_outputs: {args[2]}")
        comp = _compile(args, target)
        source = comp.results["source"]
        note(f"{target} source:\n{source}")
        manifest = comp.target_obj.manifest(comp.results["target"])
        report = check(source, manifest, arch).check()
        assert {k.name for k in report.kernels} == {k.name for k in manifest.kernels}

    run()


# ---- 2. random legal tile + bind schedules ------------------------------------------------------


def script(lines: list[str]) -> str:
    body = "\n".join(f"    {line}" for line in [*lines, "transform.yield"])
    return (
        "builtin.module {\n  transform.named_sequence @__transform_main(%root: !transform.any_op) {\n"
        f"{body}\n  }}\n}}\n"
    )


def _band(top: Any) -> list[Any]:
    from xdsl.dialects import affine

    from einc.transforms import loop_transforms as lt

    band = [top]
    while True:
        ops = list(band[-1].body.block.ops)
        if len(ops) == 2 and isinstance(ops[0], affine.ForOp) and lt.AXIS_ATTR in ops[0].attributes:
            band.append(ops[0])
        else:
            return band


def statement_nests(args: tuple[str, Any, Any]) -> list[tuple[str, list[tuple[str, int]], int]]:
    """Per statement with a loop nest: its name, its outer band's (axis, trip count)s, and
    the length of its identity fill's band (0: no fill, not a reduction)."""
    from xdsl.dialects import affine, func

    from einc.transforms import loop_transforms as lt
    from einc.transforms.loop_analysis import trip_count

    text, input_dict, extra = args
    loops = Compilation(text, "<random>", input_dict, extra, "c", "none").run_until("loops")
    nests, fills = [], {}
    for f in loops.walk():
        if not isinstance(f, func.FuncOp) or not f.body.blocks:
            continue
        for top in f.body.block.ops:
            attrs = top.attributes
            if not isinstance(top, affine.ForOp) or "einc.copy" in attrs:
                continue
            if lt.STMT_ATTR not in attrs or lt.AXIS_ATTR not in attrs:
                continue
            stmt = attrs[lt.STMT_ATTR].data  # type: ignore[union-attr]
            if "einc.init" in attrs:
                fills[stmt] = len(_band(top))
                continue
            band = [(loop.attributes[lt.AXIS_ATTR].data, trip_count(loop) or 0) for loop in _band(top)]  # type: ignore[union-attr]
            nests.append((stmt, band))
    return [(stmt, band, fills.get(stmt, 0)) for stmt, band in nests]


def bind_lines(stmt: str, band: list[tuple[str, int]], tile: int | None, max_threads: int,
               block_y: bool, n: int) -> list[str]:  # fmt: skip
    """Tile the outermost loop of `stmt` by `tile` and bind outer/inner to block.x/thread.x
    (tile None: bind the untiled loop to thread.x); `block_y`: also bind the next loop."""
    axis = band[0][0]
    h = f"%s{n}"
    lines = [f'{h} = transform.einc.match stmt "{stmt}" axis "{axis}" in %root']
    if tile is None:
        lines.append(f'transform.einc.bind {h} to "thread.x" max_threads {max_threads}')
    else:
        lines += [
            f"{h}o, {h}i = transform.einc.tile {h} by {tile}",
            f'transform.einc.bind {h}o to "block.x"',
            f'transform.einc.bind {h}i to "thread.x" max_threads {max_threads}',
        ]
    if block_y and len(band) > 1:
        lines += [
            f'{h}y = transform.einc.match stmt "{stmt}" axis "{band[1][0]}" in %root',
            f'transform.einc.bind {h}y to "block.y"',
        ]
    return lines


def statement_reads(args: tuple[str, Any, Any], ranks: dict[str, int] | None = None) -> dict[str, list[str]]:
    """Per statement: the tensors with a rank its loop nest reads (not its own), in order
    (and their ranks into `ranks`, where given)."""
    from xdsl.dialects import affine, func

    from einc.transforms import loop_transforms as lt
    from einc.transforms.loop_analysis import buffer_name

    text, input_dict, extra = args
    loops = Compilation(text, "<random>", input_dict, extra, "c", "none").run_until("loops")
    reads: dict[str, list[str]] = {}
    for f in loops.walk():
        if not isinstance(f, func.FuncOp) or not f.body.blocks:
            continue
        for top in f.body.block.ops:
            stmt = top.attributes.get(lt.STMT_ATTR)
            if not isinstance(top, affine.ForOp) or stmt is None or "einc.init" in top.attributes:
                continue
            names = reads.setdefault(stmt.data, [])  # type: ignore[attr-defined]
            for op in top.walk():
                if isinstance(op, affine.LoadOp) and op.memref.type.get_shape():  # type: ignore[attr-defined]
                    name = buffer_name(op.memref)
                    if name not in names and name != stmt.data:  # type: ignore[attr-defined]
                        names.append(name)
                        if ranks is not None:
                            ranks[name] = len(op.memref.type.get_shape())  # type: ignore[attr-defined]
    return reads


def shared_lines(stmt: str, band: list[tuple[str, int]], block_y: bool, tensor: str, n: int,
                 layout: list[int] | None = None) -> list[str]:  # fmt: skip
    """Stage `tensor` in shared memory at the first loop of `stmt`'s band inside the bound
    ones (none: no lines), its dimensions in the order `layout` where given."""
    inside = 2 if block_y else 1
    if len(band) <= inside:
        return []
    h = f"%s{n}k"
    order = f" layout [{', '.join(map(str, layout))}]" if layout else ""
    return [f'{h} = transform.einc.match stmt "{stmt}" axis "{band[inside][0]}" in %root',
            f'transform.einc.cache_read "{tensor}" at {h} in "shared"{order}']


def random_bind_schedule(args: tuple[str, Any, Any], target: str, rng: random.Random) -> str | None:
    """Random tiles bound to block.x/thread.x (sometimes block.y too); sometimes a tensor
    the statement reads staged in shared memory at the first loop inside the bound ones,
    sometimes with its dimensions permuted (`layout`)."""
    limit = description(target).max_threads_per_block
    lines: list[str] = []
    ranks: dict[str, int] = {}
    reads = statement_reads(args, ranks)
    for n, (stmt, band, fill) in enumerate(statement_nests(args)):
        block_y = rng.random() < 0.3
        if rng.random() < 0.25:
            continue
        trip = band[0][1]
        divisors = [d for d in range(1, min(trip, limit) + 1) if trip % d == 0] or [1]
        # mostly divisors; a non-dividing size binds a partial tile to threads
        tile = rng.choice([None, rng.choice(divisors), rng.choice(divisors),
                           rng.choice([1, 2, 3, 4, 7, 8, 16, 32, 64, 256])])  # fmt: skip
        if tile is None and trip > limit:
            tile = divisors[-1]
        if tile is not None:
            tile = min(tile, limit)
        lines += bind_lines(stmt, band, tile, limit, block_y, n)
        if reads.get(stmt) and rng.random() < 0.4:
            tensor = rng.choice(reads[stmt])
            # sometimes the tile's dimensions permuted (a filter staged channels-innermost)
            layout = rng.sample(range(ranks[tensor]), ranks[tensor]) if ranks[tensor] > 1 and rng.random() < 0.3 else None
            lines += shared_lines(stmt, band, block_y and len(band) > 1, tensor, n, layout)
    return script(lines) if lines else None


@pytest.mark.parametrize("target", _marked(SCHEDULE_EXAMPLES))
def test_random_bind_schedules_match_oracle(target: str) -> None:
    require_run(target)

    @settings(max_examples=examples(SCHEDULE_EXAMPLES[target]), deadline=None)
    @given(prog=programs(), seed=st.integers(0, 2**32 - 1))
    def run(prog: GenProgram, seed: int) -> None:
        args = prog.compile_args()
        text = random_bind_schedule(args, target, random.Random(seed))
        assume(text is not None)
        try:
            check_program(prog, seed, target, text)
        except ScheduleError as err:
            note(f"schedule refused: {err.message}")
            assume(False)

    run()


BOUND_PROGRAMS = ("matmul", "elementwise", "softmax", "transpose", "reduce_sum", "convolution_with_pad",
                  "layer_norm", "concat", "gather")  # fmt: skip


@pytest.mark.parametrize("target", _marked(SCHEDULE_EXAMPLES))
@pytest.mark.parametrize("name", BOUND_PROGRAMS)
def test_bind_schedule_applies_and_matches_reference(target: str, name: str) -> None:
    """Every statement's outermost loop tiled by its smallest divisor > 1 (the whole loop
    when it has none), bound to block.x / thread.x: the schedule must apply, the launches
    have the tile as their block, and the results match the program's NumPy reference."""
    require_run(target)
    prog: Program = next(p for p in ALL if p.name == name)
    args = (prog.ir, prog.input_dict, prog.extra_outputs)
    limit = description(target).max_threads_per_block
    lines: list[str] = []
    tiles = set()
    for n, (stmt, band, _) in enumerate(statement_nests(args)):
        trip = band[0][1]
        tile = next((d for d in range(2, trip) if trip % d == 0 and d <= limit), trip)
        tiles.add((trip // tile, tile))
        lines += bind_lines(stmt, band, tile, limit, False, n)
    assert lines, f"{name}: no statement nest to schedule"
    comp = Compilation(prog.ir, f"<{name}>", prog.input_dict, prog.extra_outputs, target, script(lines))
    comp.run_until("source")
    scheduled = str(comp.results["scheduled"])
    assert 'einc.bind = "thread.x"' in scheduled and 'einc.bind = "block.x"' in scheduled
    manifest = comp.target_obj.manifest(comp.results["target"])
    launches = {(k.grid[0], k.block[0]) for k in manifest.kernels}
    assert tiles <= launches, f"launches {launches}, expected the tiles {tiles}"
    seed = fresh_seed()
    inputs = random_inputs(prog, seed)
    outputs = run_on_device(comp, inputs)
    check_against_reference(prog, outputs, inputs, seed)


# ---- einc bugs found here (fixed; each test runs the kernel) ------------------------------------


def _run_schedule(ir: str, inputs: dict[str, Any], lines: list[str], target: str = "opencl") -> dict[str, np.ndarray]:
    """Compile `ir` with the schedule `lines` for `target`, run it on fresh random inputs and
    return (outputs, inputs)."""
    comp = Compilation(ir, "<t>", inputs, None, target, script(lines))
    comp.run_until("source")
    rng = np.random.default_rng(fresh_seed())
    values = {}
    for name, spec in inputs.items():
        shape, dtype = spec["shape"], np.dtype(spec["dtype"])
        if dtype.kind == "f":
            values[name] = rng.uniform(-2, 2, shape).astype(dtype)
        else:
            values[name] = rng.integers(-20, 20, shape).astype(dtype)
    return run_on_device(comp, values), values


@pytest.mark.opencl
def test_partly_bound_reduction_is_compiled() -> None:
    """`output0[N, M] >=! input0[N, M]` with N bound to block.x and M left sequential printed
    an unnamed block argument (the fill's M loop was dropped): the fill's remaining loops now
    run in the work-item that reduces into those elements."""
    require("opencl")
    outputs, values = _run_schedule(
        "output0[N, M] >=! input0[N, M]", {"input0": {"dtype": "float32", "shape": [4, 6]}},
        ['%n = transform.einc.match stmt "output0" axis "N" in %root',
         'transform.einc.bind %n to "block.x"'])  # fmt: skip
    np.testing.assert_array_equal(outputs["output0"], values["input0"])


@pytest.mark.opencl
def test_partly_bound_reduction_over_an_axis_is_compiled() -> None:
    """The same with a real reduction axis: N bound to threads, M and K sequential."""
    require("opencl")
    outputs, values = _run_schedule(
        "output0[N, M] +=! input0[N, K, M]", {"input0": {"dtype": "float32", "shape": [5, 3, 7]}},
        ['%n = transform.einc.match stmt "output0" axis "N" in %root',
         'transform.einc.bind %n to "thread.x"'])  # fmt: skip
    np.testing.assert_allclose(outputs["output0"], values["input0"].astype(np.float64).sum(axis=1),
                               rtol=1e-5, atol=1e-6)  # float32 sums of three terms near zero


@pytest.mark.opencl
def test_bound_reduction_with_unit_loops_is_compiled() -> None:
    """Found by test_random_bind_schedules_match_oracle (shrunk): PassFailedException 'a loop
    bound to block.y must be one of the outermost loops of a perfect nest' escaped from
    convert-affine-to-egpu. Index arithmetic a tiling leaves between bound loops now runs in
    every work-item; the result is checked against the program's meaning."""
    require("opencl")
    ir = ("temp0[N, M, K] >=! (-const(1)) + N.cast(`int64`) + (input0[] + input1[] + (input2[] + "
          "input3[N])) where M in 1, K in 1; temp1[N] = N // (const(0).cast(`int8`).call(`abs`) + 1) "
          "* (N.cast(`float32`) > 0.25) + (input4[] + input5[] + 4) where N in 1; "
          "output0[] = (temp0[0, 0, 0] / (const(1).call(`abs`) + 1)).cast(`int16`)")  # fmt: skip
    i32, i8 = {"dtype": "int32", "shape": []}, {"dtype": "int8", "shape": []}
    inputs = {"input0": i32, "input1": i32, "input2": i32, "input3": {"dtype": "int8", "shape": [1]},
              "input4": i32, "input5": i8}  # fmt: skip
    lines = ['%s = transform.einc.match stmt "temp0" axis "N" in %root',
             "%so, %si = transform.einc.tile %s by 1",
             'transform.einc.bind %so to "block.x"',
             'transform.einc.bind %si to "thread.x" max_threads 1024',
             '%sy = transform.einc.match stmt "temp0" axis "M" in %root',
             'transform.einc.bind %sy to "block.y"']  # fmt: skip
    outputs, v = _run_schedule(ir, inputs, lines)
    temp0 = -1 + 0 + (int(v["input0"]) + int(v["input1"]) + (int(v["input2"]) + int(v["input3"][0])))
    assert int(outputs["output0"]) == temp0 // 2


@pytest.mark.opencl
def test_bound_loop_inside_a_sequential_loop_is_a_schedule_error() -> None:
    """A bound loop inside a sequential (non-unit) loop cannot be mapped: ScheduleError, not
    xDSL's PassFailedException."""
    require("opencl")
    comp = Compilation("output0[N, M] = input0[N, M] * 2", "<t>",
                       {"input0": {"dtype": "float32", "shape": [4, 6]}}, None, "opencl",
                       script(['%m = transform.einc.match stmt "output0" axis "M" in %root',
                               'transform.einc.bind %m to "thread.x"']))  # fmt: skip
    with pytest.raises(ScheduleError, match="loop M of output0 is bound to thread.x but cannot be mapped"):
        comp.run_until("source")


@pytest.mark.opencl
@pytest.mark.parametrize("n", [100, 64])
def test_partial_tile_bound_to_threads_runs(n: int) -> None:
    """N tiled by 32 (100: the last tile has 4 iterations, its trip count `min(32, 100 - N.o)`
    is not constant), the inner loop bound to thread.x: the launch uses the largest trip
    count and the kernel guards the overshoot."""
    require("opencl")
    lines = ['%n = transform.einc.match stmt "output0" axis "N" in %root',
             "%no, %ni = transform.einc.tile %n by 32",
             'transform.einc.bind %no to "block.x"',
             'transform.einc.bind %ni to "thread.x" max_threads 32']  # fmt: skip
    outputs, v = _run_schedule("output0[N] = input0[N] * 3.0 + 1.0",
                               {"input0": {"dtype": "float32", "shape": [n]}}, lines)  # fmt: skip
    # float64 reference; the device may contract to an FMA (near zero only atol holds)
    np.testing.assert_allclose(outputs["output0"], v["input0"].astype(np.float64) * 3 + 1, rtol=1e-6, atol=1e-6)


@pytest.mark.opencl
def test_partial_tile_bound_to_threads_checks_the_largest_trip_count() -> None:
    require("opencl")
    lines = ['%n = transform.einc.match stmt "output0" axis "N" in %root',
             "%no, %ni = transform.einc.tile %n by 32",
             'transform.einc.bind %ni to "thread.x" max_threads 16']  # fmt: skip
    comp = Compilation("output0[N] = input0[N] * 3.0", "<t>", {"input0": {"dtype": "float32", "shape": [100]}},
                       None, "opencl", script(lines))  # fmt: skip
    with pytest.raises(ScheduleError, match="needs 32 threads per block, more than the limit 16"):
        comp.run_until("scheduled")


@pytest.mark.parametrize("target", _marked(CHECKS))
def test_cuda_builtin_names_as_user_names_compile(target: str) -> None:
    """Found by test_random_programs_compile: an axis named `blockIdx` shadowed CUDA's/HIP's
    built-in (`long long blockIdx = ((long long)blockIdx.x * ...`); now renamed."""
    require(target)
    arch = CHECKS[target][0]
    if target == "cuda":
        from einc.runtime.cuda import compile_check_cuda as check
    else:
        from einc.runtime.hip import compile_check_hip as check
    ir = "output0[blockIdx, gridDim] = input0[] + threadIdx[blockIdx] * warpSize[] where gridDim in 2"
    f32 = {"dtype": "float32", "shape": []}
    inputs = {"input0": f32, "warpSize": f32, "threadIdx": {"dtype": "float32", "shape": [3]}}
    comp = Compilation(ir, "<t>", inputs, None, target)
    source = comp.run_until("source")
    assert check(source, comp.target_obj.manifest(comp.results["target"]), arch).check().ok


@pytest.mark.opencl
def test_f16_scalar_reduction_fills_before_it_reads() -> None:
    """Found by test_random_programs_match_oracle[opencl]: `output0[] += input0[1]` (float16)
    printed `float v_1 = vload_half(0, output0);` before `vstore_half(0.0f, 0, output0);`,
    so the result was garbage; a loop-free kernel now fills before its first read."""
    require("opencl")
    comp = Compilation("output0[] += input0[1]", "<t>",
                       {"input0": {"dtype": "float16", "shape": [4]}}, None, "opencl")  # fmt: skip
    source = comp.run_until("source")
    assert source.index("vstore_half(0.0f, 0, output0)") < source.index("vload_half(0, output0)")
    x = np.array([0.5, -0.997, 1.5, 2.0], np.float16)
    out = run_on_device(comp, {"input0": x})
    np.testing.assert_array_equal(out["output0"], np.float16(-0.997))


@pytest.mark.opencl
def test_opencl_keyword_half_as_a_tensor_name_runs() -> None:
    """Found by test_random_bind_schedules_match_oracle[opencl]: an input named `half` was
    printed as a parameter name (`'half' is a keyword`); now renamed."""
    require("opencl")
    comp = Compilation("output0[N] = half[N] + 1.0", "<t>",
                       {"half": {"dtype": "float32", "shape": [3]}}, None, "opencl")  # fmt: skip
    comp.run_until("source")
    x = np.array([1.0, 2.0, 3.0], np.float32)
    out = run_on_device(comp, {"half": x})
    np.testing.assert_array_equal(out["output0"], x + 1)
