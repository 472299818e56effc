"""einc.semantics.egpu.run_lowered: every level below `ein` executed and compared with the oracle.

1. A corpus of programs (matmul, convolution, softmax, layer norm, reductions, casts, float16
   and narrow-int programs) on every target with its default schedule: the module after every
   prefix of the target's `pipeline` (one pass at a time, from the scheduled loops to the
   legalized IR: egpu kernels, vectors, narrow-float storage, Poplar's tile split) runs and
   matches the NumPy oracle (einc/semantics/reference.py) within the dtype's tolerance (driver.tolerance).
2. Random legal schedules on the device targets: tiles bound to blocks and threads, tensors
   staged in shared memory (tests/test_device_differential.py's generator), cross-thread
   reductions combined by a shared-memory tree with barriers or by `egpu.subgroup_reduce`.
3. Doctored kernels are caught: a barrier removed from a shared-memory reduction or from a
   shared staging loop (a data race), a barrier under a divergent branch, a subgroup
   reduction not reached by its whole cluster, an off-by-one store (out of bounds), a wrong
   operation (wrong numbers), an unwritten output element (poisoned), a Poplar vertex reading
   outside its slice; unknown ops raise UnsupportedIR naming the op.
"""

from __future__ import annotations

import random
import re

import numpy as np
import pytest
from xdsl.dialects import affine, arith, func, scf
from xdsl.dialects.builtin import AffineMapAttr, IntegerAttr, ModuleOp
from xdsl.ir import Operation
from xdsl.ir.affine import AffineExpr, AffineMap
from xdsl.parser import Parser
from xdsl.rewriter import InsertPoint, Rewriter

from einc.dialects import egpu
from einc.compiler.driver import Compilation
from einc.semantics.compare import max_error, tolerance
from einc.errors import RuntimeInputError, TargetError
from einc.semantics.loops import run_interpreted
from einc.semantics.egpu import KernelFault, UnsupportedIR, run_lowered
from einc.semantics.egpu.memory import DataRace
from einc.compiler.registry import run_pipeline
from einc.semantics.reference import run_reference
from tests.test_conformance import ALL, Program, random_inputs
from tests.test_cross_thread_reduce import rows
from tests.test_device_differential import (
    REFUSED_BY_DESIGN,
    random_bind_schedule,
    script,
)

TARGETS = ("c", "opencl", "cuda", "hip", "hlsl", "sycl", "poplar")
DEVICES = ("opencl", "cuda", "hip", "hlsl", "sycl")

CORPUS = (
    "matmul", "convolution_with_pad", "softmax", "layer_norm", "reduce_sum", "reduce_min",
    "cast", "mixed_promotion", "float16_casts", "int_floor_div_mod", "int_shifts",
    "logical_bool", "gather_2d_with_int64_index", "bool_output", "max_pool", "scalar",
)  # fmt: skip
OWN = [
    Program("matmul_16", "output0[N, M] +=! input0[N, K] * input1[K, M]",
            {"input0": {"dtype": "float32", "shape": [16, 16]}, "input1": {"dtype": "float32", "shape": [16, 16]}}, None),
    Program("softmax_8x32", "mx[N] >=! input0[N, C]; sm[N] +=! (input0[N, C] - mx[N]).call(`exp`); "
            "output0[N, C] = (input0[N, C] - mx[N]).call(`exp`) / sm[N]",
            {"input0": {"dtype": "float32", "shape": [8, 32]}}, ["output0"]),
    Program("matmul_f16", "output0[N, M] +=! input0[N, K] * input1[K, M]",
            {"input0": {"dtype": "float16", "shape": [8, 8]}, "input1": {"dtype": "float16", "shape": [8, 8]}}, None),
]  # fmt: skip
PROGRAMS = {p.name: p for p in ALL} | {p.name: p for p in OWN}


def passes(pipeline: str) -> list[str]:
    """A pipeline's passes (commas inside `{...}` options kept)."""
    return [p for p in re.split(r",(?![^{]*})", pipeline) if p]


def inputs_for(prog: Program, comp: Compilation, seed: int = 0) -> dict[str, np.ndarray]:
    if prog.name in {p.name for p in ALL}:
        return random_inputs(prog, seed)
    from einc.semantics.compare import random_inputs as driver_inputs

    return driver_inputs(comp.program, np.random.default_rng(seed))


def assert_matches(got: dict[str, np.ndarray], want: dict[str, np.ndarray], where: str) -> None:
    assert sorted(got) == sorted(want), f"{where}: outputs {sorted(got)}, expected {sorted(want)}"
    for name, w in want.items():
        g = got[name]
        assert g.shape == w.shape, f"{where}: {name} has shape {g.shape}, expected {w.shape}"
        poisoned = np.isnan(g.astype(np.float64)) & ~np.isnan(np.asarray(w, np.float64))
        assert not poisoned.any(), f"{where}: {name}[{np.argwhere(poisoned)[0].tolist()}] never written (NaN)"
        err, tol = max_error(g, w), tolerance(str(g.dtype))
        assert err <= tol, f"{where}: {name} differs from the oracle by {err:.3g} (tolerance {tol:g})"


def walk_pipeline(comp: Compilation, inputs: dict[str, np.ndarray], want: dict[str, np.ndarray],
                  seen: dict[str, None] | None = None) -> int:  # fmt: skip
    """Run the scheduled module and the module after each pass of the target's pipeline;
    the number of distinct modules executed."""
    module = comp.module("scheduled").clone()
    ran = 0
    seen = {} if seen is None else seen
    for step in ["(scheduled)", *passes(comp.target_obj.pipeline)]:
        if step != "(scheduled)":
            run_pipeline(comp.ctx, module, step)
        text = str(module)
        if text in seen:
            continue
        seen[text] = None
        got = run_lowered(module, inputs, target=comp.target)
        assert_matches(got, want, f"{comp.target}, after {step}")
        ran += 1
    return ran


def compiled(prog: Program, target: str, schedule: str | None = None) -> Compilation | None:
    """The program compiled to the target's IR; None where the target refuses a dtype by design."""
    comp = Compilation(prog.ir, f"<{prog.name}>", prog.input_dict, prog.extra_outputs, target, schedule, use_records=False)
    try:
        comp.run_until("target")
    except TargetError as err:
        if REFUSED_BY_DESIGN.search(err.message):
            return None
        raise
    return comp


# ---- 1. the corpus on every target, after every pass -----------------------------------------


@pytest.mark.parametrize("target", TARGETS)
def test_every_pass_of_every_target_matches_the_oracle(target: str) -> None:
    ran = 0
    for name in (*CORPUS, *(p.name for p in OWN)):
        prog = PROGRAMS[name]
        comp = compiled(prog, target)
        if comp is None:
            continue
        inputs = inputs_for(prog, comp)
        want = run_reference(comp.module("ein"), inputs)
        ran += walk_pipeline(comp, inputs, want)
    assert ran >= 2 * len(CORPUS)


def test_loop_level_agrees_with_the_loop_interpreter() -> None:
    """At the loops level the older xDSL-based interpreter (einc/semantics/loops.py) gives the same
    numbers, bit for bit (the lanes of a parallel loop nest compute what its iterations do)."""
    for name in ("matmul", "softmax", "int_shifts", "mixed_promotion"):
        prog = PROGRAMS[name]
        comp = Compilation(prog.ir, "<t>", prog.input_dict, prog.extra_outputs, "c", "none")
        inputs = inputs_for(prog, comp)
        ours, theirs = run_lowered(comp.module("loops"), inputs), run_interpreted(comp.module("loops"), inputs)
        for out in theirs:
            np.testing.assert_array_equal(ours[out], theirs[out], err_msg=f"{name}: {out}")


def test_inputs_are_checked_and_never_written() -> None:
    comp = Compilation(PROGRAMS["matmul"].ir, "<t>", PROGRAMS["matmul"].input_dict, None, "cuda")
    module = comp.module("target")
    inputs = inputs_for(PROGRAMS["matmul"], comp)
    before = {k: v.copy() for k, v in inputs.items()}
    run_lowered(module, inputs)
    for k in inputs:
        np.testing.assert_array_equal(inputs[k], before[k])
    with pytest.raises(RuntimeInputError, match="input0"):
        run_lowered(module, {**inputs, "input0": inputs["input0"].astype(np.float64)})
    with pytest.raises(RuntimeInputError, match="missing input 'input1'"):
        run_lowered(module, {"input0": inputs["input0"]})


SCAN = """
builtin.module {
  func.func @kernel(%x: memref<8xf32> {ein.name = "x"}, %y: memref<8xf32> {ein.name = "y", ein.output}) {
    %0 = affine.load %x[0] : memref<8xf32>
    affine.store %0, %y[0] : memref<8xf32>
    affine.for %i = 1 to 8 {
      %a = affine.load %y[%i - 1] : memref<8xf32>
      %b = affine.load %x[%i] : memref<8xf32>
      %s = arith.addf %a, %b : f32
      affine.store %s, %y[%i] : memref<8xf32>
    }
    func.return
  }
}
"""


STRIDED = """
builtin.module {
  func.func @kernel(%x: memref<8xf32> {ein.name = "x"}, %y: memref<2xf32> {ein.name = "y", ein.output}) {
    egpu.launch @k(%x, %y) : memref<8xf32>, memref<2xf32>
    func.return
  }
  egpu.func @k(%x: memref<8xf32>, %y: memref<2xf32>) grid [1, 1, 1] block [2, 1, 1] {
    %t = egpu.thread_id x
    %z = arith.constant 0.0 : f32
    affine.store %z, %y[%t] : memref<2xf32>
    %c8 = arith.constant 8 : index
    %c2 = arith.constant 2 : index
    scf.for %p = %t to %c8 step %c2 {
      %a = affine.load %y[%t] : memref<2xf32>
      %b = memref.load %x[%p] : memref<8xf32>
      %s = arith.addf %a, %b : f32
      affine.store %s, %y[%t] : memref<2xf32>
    }
    egpu.return
  }
}
"""
"""Each work-item sums its points (a loop of per-work-item bounds into one element)."""


def test_dependent_iterations_run_in_order() -> None:
    """A loop whose iterations depend on each other through memory (a running sum) is tried
    as lanes, found racing, and run in order: the sequential meaning, not the lanes'."""
    from einc.dialects.context import make_context

    x = np.arange(1, 9, dtype=np.float32)
    module = Parser(make_context(), SCAN).parse_module()
    np.testing.assert_array_equal(run_lowered(module, {"x": x})["y"], np.cumsum(x))
    module = Parser(make_context(), STRIDED).parse_module()
    np.testing.assert_array_equal(run_lowered(module, {"x": x})["y"], [x[0::2].sum(), x[1::2].sum()])


# ---- 2. random legal schedules on the device targets -------------------------------------------


SCHEDULED = ("matmul", "softmax", "reduce_sum", "convolution_with_pad", "layer_norm", "transpose", "concat", "max_pool")


@pytest.mark.parametrize("target", DEVICES)
def test_random_bind_and_shared_schedules_match_the_oracle(target: str) -> None:
    """Tiles bound to block.x / thread.x (sometimes block.y), some tensors staged in shared
    memory; every pass of the pipeline after the schedule."""
    rng = random.Random(1234)
    kernels = shared = 0
    for name in SCHEDULED:
        prog = PROGRAMS[name]
        for _ in range(2):
            text = random_bind_schedule((prog.ir, prog.input_dict, prog.extra_outputs), target, rng)
            if text is None:
                continue
            try:
                comp = compiled(prog, target, text)
            except Exception as err:  # a schedule the legality checks refuse
                if type(err).__name__ in ("ScheduleError", "TargetError"):
                    continue
                raise
            if comp is None:
                continue
            inputs = inputs_for(prog, comp, seed=7)
            walk_pipeline(comp, inputs, run_reference(comp.module("ein"), inputs))
            ops = list(comp.module("target").walk())
            kernels += sum(isinstance(o, egpu.FuncOp) for o in ops)
            shared += sum(isinstance(o, egpu.AllocSharedOp) for o in ops)
    assert kernels > 0 and shared > 0


REDUCTIONS = {
    "output0[N] +=! input0[N, K]": "sum",
    "output0[N] >=! input0[N, K]": "max",
    "output0[N] +=! input0[N, K] * input1[N, K]": "dot",
}


@pytest.mark.parametrize("target", DEVICES)
@pytest.mark.parametrize(("tile", "rows_per_block", "k"), [(8, 2, 64), (32, None, 100), (64, 1, 128)])
def test_cross_thread_reductions_match_the_oracle(target: str, tile: int, rows_per_block: int | None, k: int) -> None:
    """Reductions bound to thread.x: partials combined by a tree in shared memory (barriers
    between levels) or by egpu.subgroup_reduce (CUDA, HIP: clusters, two stages for 64)."""
    for program in REDUCTIONS:
        shapes = {"input0": [7, k]} | ({"input1": [7, k]} if "input1" in program else {})
        prog = Program("r", program, {n: {"dtype": "float32", "shape": s} for n, s in shapes.items()}, None)
        comp = compiled(prog, target, script(rows(tile, rows_per_block)))
        assert comp is not None
        ops = list(comp.module("target").walk())
        assert any(isinstance(o, egpu.SubgroupReduceOp | egpu.BarrierOp) for o in ops)
        inputs = inputs_for(prog, comp, seed=3)
        walk_pipeline(comp, inputs, run_reference(comp.module("ein"), inputs))


@pytest.mark.parametrize("target", ["cuda", "opencl", "hlsl"])
@pytest.mark.parametrize(("n", "m", "k"), [(32, 48, 20), (37, 45, 29)])
def test_private_register_tiles_match_the_oracle(target: str, n: int, m: int, k: int) -> None:
    """Each work-item accumulates a 4x4 tile of a matmul in its own array (`memref.alloca` in
    the kernel: private memory), partial tiles included."""
    from tests.test_device_local import register_blocked

    prog = Program("rb", "output0[N, M] +=! input0[N, K] * input1[K, M]",
                   {"input0": {"dtype": "float32", "shape": [n, k]}, "input1": {"dtype": "float32", "shape": [k, m]}}, None)  # fmt: skip
    comp = compiled(prog, target, script(register_blocked(unroll=n % 4 == 0)))
    assert comp is not None
    kernel_allocas = [o for o in comp.module("target").walk() if o.name == "memref.alloca"
                      and isinstance(o.parent_op(), egpu.FuncOp | affine.ForOp | scf.IfOp)]  # fmt: skip
    assert kernel_allocas
    inputs = inputs_for(prog, comp, seed=11)
    walk_pipeline(comp, inputs, run_reference(comp.module("ein"), inputs))


# ---- 3. doctored kernels --------------------------------------------------------------------------


def _module(program: str, shapes: dict[str, list[int]], target: str, lines: list[str] | None = None,
            dtype: str = "float32") -> tuple[Compilation, ModuleOp, dict[str, np.ndarray], dict[str, np.ndarray]]:  # fmt: skip
    prog = Program("d", program, {n: {"dtype": dtype, "shape": s} for n, s in shapes.items()}, None)
    # without a script, the default mapping (one element per work-item), which the doctoring
    # helpers below are written for
    comp = compiled(prog, target, script(lines) if lines else "none")
    assert comp is not None
    module = comp.module("target").clone()
    inputs = inputs_for(prog, comp, seed=5)
    want = run_reference(comp.module("ein"), inputs)
    assert_matches(run_lowered(module, inputs, target=target), want, "undoctored")
    return comp, module, inputs, want


def _ops(module: ModuleOp, kind: type[Operation]) -> list[Operation]:
    return [o for o in module.walk() if isinstance(o, kind)]


def test_a_removed_barrier_in_a_shared_memory_reduction_is_a_race() -> None:
    _, module, inputs, _ = _module("output0[N] +=! input0[N, K]", {"input0": [7, 64]}, "opencl", rows(8, 2))
    barriers = _ops(module, egpu.BarrierOp)
    assert len(barriers) == 3
    Rewriter.erase_op(barriers[1])
    with pytest.raises(DataRace, match=r"data race on buffer 'partials'.*work-item \[\d, \d, 0\] of block"):
        run_lowered(module, inputs)


def test_a_removed_barrier_in_shared_staging_is_a_race() -> None:
    lines = [
        '%n = transform.einc.match stmt "output0" axis "N" in %root',
        '%m = transform.einc.match stmt "output0" axis "M" in %root',
        "%no, %ni = transform.einc.tile %n by 4",
        "%mo, %mi = transform.einc.tile %m by 4",
        "%a, %b, %c, %d = transform.einc.reorder %no, %mo, %ni, %mi",
        'transform.einc.bind %a to "block.x"', 'transform.einc.bind %b to "block.y"',
        'transform.einc.bind %c to "thread.y"', 'transform.einc.bind %d to "thread.x"',
        '%k = transform.einc.match stmt "output0" axis "K" in %root',
        "%ko, %ki = transform.einc.tile %k by 4",
        'transform.einc.cache_read "input0" at %ki in "shared"',
    ]  # fmt: skip
    _, module, inputs, _ = _module("output0[N, M] +=! input0[N, K] * input1[K, M]",
                                   {"input0": [8, 16], "input1": [16, 8]}, "cuda", lines)  # fmt: skip
    assert _ops(module, egpu.AllocSharedOp)
    barriers = _ops(module, egpu.BarrierOp)
    assert barriers
    for barrier in barriers:  # every barrier matters: without it, some access races
        doctored = module.clone()
        Rewriter.erase_op([o for o in doctored.walk() if isinstance(o, egpu.BarrierOp)][barriers.index(barrier)])
        with pytest.raises(DataRace):
            run_lowered(doctored, inputs)


def test_a_barrier_in_a_divergent_branch_is_reported() -> None:
    _, module, inputs, _ = _module("output0[N] +=! input0[N, K]", {"input0": [7, 64]}, "opencl", rows(8, 2))
    level = _ops(module, scf.IfOp)[1]  # `if thread_x < 4`: a level of the tree
    barrier = egpu.BarrierOp()
    Rewriter.insert_op(barrier, InsertPoint.at_start(level.regions[0].block))
    with pytest.raises(KernelFault, match=r"egpu.barrier .* reached by 8 of the 16 work-items of block 0: work-item \[4, 0, 0\]"):
        run_lowered(module, inputs)


def test_a_subgroup_reduction_in_a_divergent_branch_is_reported() -> None:
    comp, module, inputs, _ = _module("output0[N] +=! input0[N, K]", {"input0": [7, 64]}, "cuda", rows(8, 2))
    text = str(module)
    line = re.search(r"(%\S+) = egpu.subgroup_reduce (\w+) (%\S+) cluster (\d+) : (\w+)", text)
    tx = re.search(r"(%\S+) = egpu.thread_id x", text)
    assert line is not None and tx is not None
    result, kind, value, cluster, t = line.groups()
    guarded = (  # only the work-items with thread_x < 4 (half of each cluster of 8) reach it
        f"%four = arith.constant 4 : index\n%low = arith.cmpi ult, {tx.group(1)}, %four : index\n"
        f"{result} = scf.if %low -> ({t}) {{\n%r = egpu.subgroup_reduce {kind} {value} cluster {cluster} : {t}\n"
        f"scf.yield %r : {t}\n}} else {{\nscf.yield {value} : {t}\n}}"
    )
    doctored = Parser(comp.ctx, text.replace(line.group(0), guarded)).parse_module()
    with pytest.raises(KernelFault, match=r"egpu.subgroup_reduce .* reached by 4 of the 8 work-items of its cluster"):
        run_lowered(doctored, inputs)


def _shift_store(module: ModuleOp, by: int) -> None:
    """The kernel's first store to an output writes one element further along its last index."""
    (kernel,) = _ops(module, egpu.FuncOp)
    store = next(o for o in kernel.walk() if isinstance(o, affine.StoreOp))
    assert isinstance(store, affine.StoreOp)
    m = store.map.data
    results: list[AffineExpr] = [*m.results[:-1], m.results[-1] + by]
    store.map = AffineMapAttr(AffineMap(m.num_dims, m.num_symbols, tuple(results)))


@pytest.mark.parametrize("target", ["cuda", "poplar", "hlsl"])
def test_an_off_by_one_store_is_out_of_bounds(target: str) -> None:
    _, module, inputs, _ = _module("output0[N, M] = input0[N, M] * 2.0", {"input0": [6, 10]}, target)
    _shift_store(module, 1)
    with pytest.raises(KernelFault, match=r"out-of-bounds access in affine.store by .*: index \[\d, 10\] into buffer 'output0' of shape \[6, 10\]"):
        run_lowered(module, inputs)


def test_a_store_one_element_back_leaves_poison_or_races() -> None:
    """Writing [N, M - 1]: element [N, 9] is never written (NaN) and [N, -1] is out of bounds."""
    _, module, inputs, _ = _module("output0[N, M] = input0[N, M] * 2.0", {"input0": [6, 10]}, "opencl")
    _shift_store(module, -1)
    with pytest.raises(KernelFault, match="out-of-bounds"):
        run_lowered(module, inputs)


def test_an_unwritten_element_stays_poisoned() -> None:
    _, module, inputs, want = _module("output0[N] = input0[N] + 1.0", {"input0": [300]}, "cuda")
    check = next(o for o in module.walk() if isinstance(o, arith.CmpiOp))  # the bounds check N < 300
    bound = check.rhs.owner
    assert isinstance(bound, arith.ConstantOp) and isinstance(bound.value, IntegerAttr)
    Rewriter.replace_op(bound, arith.ConstantOp(IntegerAttr(299, bound.result.type)))
    got = run_lowered(module, inputs)
    assert np.isnan(got["output0"][299]) and not np.isnan(got["output0"][:299]).any()
    with pytest.raises(AssertionError, match=r"output0\[\[299\]\] never written"):
        assert_matches(got, want, "doctored")


def test_a_wrong_operation_gives_wrong_numbers() -> None:
    _, module, inputs, want = _module("output0[N, M] +=! input0[N, K] * input1[K, M]",
                                      {"input0": [8, 8], "input1": [8, 8]}, "sycl")  # fmt: skip
    (mul,) = _ops(module, arith.MulfOp)
    assert isinstance(mul, arith.MulfOp)
    Rewriter.replace_op(mul, arith.AddfOp(mul.lhs, mul.rhs))
    with pytest.raises(AssertionError, match="differs from the oracle"):
        assert_matches(run_lowered(module, inputs), want, "doctored")


def test_a_race_inside_a_loop_run_as_lanes_is_reported_with_its_work_items() -> None:
    """Poplar's workers loop over points (tried as lanes); a store doctored to write column 0
    of every row makes two workers write one element: the loop falls back to order and the
    race between the two work-items is reported."""
    _, module, inputs, _ = _module("output0[N, M] = input0[N, M] * 2.0", {"input0": [16, 12]}, "poplar")
    (kernel,) = _ops(module, egpu.FuncOp)
    store = next(o for o in kernel.walk() if isinstance(o, affine.StoreOp))
    assert isinstance(store, affine.StoreOp)
    m = store.map.data
    store.map = AffineMapAttr(AffineMap(m.num_dims, m.num_symbols, (m.results[0], AffineExpr.constant(0))))
    del kernel.attributes["egpu.tile_split"]  # one vertex of six workers
    with pytest.raises(DataRace, match=r"data race on buffer 'output0'.*work-item \[\d, 0, 0\] of block \[0, 0, 0\]"):
        run_lowered(module, inputs)


def test_a_poplar_vertex_reading_outside_its_slice_is_reported() -> None:
    _, module, inputs, _ = _module("output0[N, M] +=! input0[N, K] * input1[K, M]",
                                   {"input0": [16, 16], "input1": [16, 16]}, "poplar")  # fmt: skip
    (kernel,) = _ops(module, egpu.FuncOp)
    split = kernel.attributes["egpu.tile_split"]
    assert isinstance(split, egpu.TileSplitAttr) and split.data.split and split.data.read
    import dataclasses

    k, first, end = split.data.read[0]
    narrowed = (k, first, (end[0] - 1, *end[1:]))  # vertex 0 connected one element short
    kernel.attributes["egpu.tile_split"] = egpu.TileSplitAttr(dataclasses.replace(split.data, read=(narrowed, *split.data.read[1:])))
    with pytest.raises(KernelFault, match=r"outside its vertex's slice \[0, \d+\)"):
        run_lowered(module, inputs)


def test_unknown_ops_are_unsupported() -> None:
    comp = Compilation(PROGRAMS["matmul"].ir, "<t>", PROGRAMS["matmul"].input_dict, None, "cuda")
    inputs = inputs_for(PROGRAMS["matmul"], comp)
    with pytest.raises(UnsupportedIR, match=r"cannot execute func.func: argument 0 of type tensor"):
        run_lowered(comp.module("ein"), inputs)
    module = comp.module("target").clone()
    launch = _ops(module, egpu.LaunchOp)[-1]  # the default schedule's matmul: a fill, then this
    Rewriter.insert_op(func.CallOp("helper", [], []), InsertPoint.before(launch))
    with pytest.raises(UnsupportedIR, match=r"cannot execute func.call$"):
        run_lowered(module, inputs)
