"""compute_at and reverse_compute_at (einc/transforms/compute_at.py): each op against NumPy on C
(and OpenCL for an epilogue), refusals located at the op with the IR untouched, random
choices on random and shared multi-statement programs against the oracle / NumPy, and the
default C schedule fusing softmax into one nest."""

from __future__ import annotations

import random
import re

import numpy as np
import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st
from xdsl.dialects import affine, func
from xdsl.dialects.builtin import StringAttr

import einc
from einc.compiler.registry import get_all_passes
from einc.compiler.driver import Compilation, lower_to_stage
from einc.semantics.compare import max_error, random_inputs, tolerance
from einc.errors import ScheduleError
from einc.transforms import loop_transforms as lt
from einc.transforms.compute_at import compute_at, reverse_compute_at
from einc.transforms.loop_analysis import accesses
from einc.semantics.reference import run_reference
from einc.schedule.script import Schedule
from tests.oracle.budget import examples
from tests.oracle.genprog import GenProgram, programs
from tests.programs import PROGRAMS
from tests.test_schedules import SOFTMAX, check, check_random_transforms_on_c, f32, script

ROW = "temp0[N, C] = input0[N, C] * 2.0; output0[N, C] = temp0[N, C] + input0[N, C]"
STENCIL = (
    "temp0[H, W] = input0[H, W] * 2.0 + 1.0; "
    "output0[HO, WO] +=! temp0[HO + KH, WO + KW] where HO in 6, WO in 5, KH in 3, KW in 3"
)
RANK0 = "temp0[] +=! input0[N, C]; output0[N] = input0[N, 0] - temp0[]"
EPILOGUE = "C[N, M] +=! input0[N, K] * input1[K, M]; output0[N, M] = (C[N, M] + input2[M]).call(`max`, [0.0])"
EP_INPUTS = {"input0": f32(12, 6), "input1": f32(6, 8), "input2": f32(8)}


def at(stmt: str, producer: str, axis: str, op: str = "compute_at", *before: str) -> str:
    return script(
        *before,
        f'%loop = transform.einc.match stmt "{stmt}" axis "{axis}" in %root',
        f'%nest = transform.einc.match stmt "{producer}" in %root',
        f"transform.einc.{op} %nest at %loop",
    )


def scheduled(ir: str, inputs: dict, schedule: str, extra: list[str] | None = None) -> str:
    return str(lower_to_stage(ir, inputs, extra, stage="scheduled", schedule=schedule))


# ---- compute_at -------------------------------------------------------------------------------


def test_row_producer_is_computed_per_row_and_erased() -> None:
    inputs = {"input0": f32(5, 7)}
    text = at("output0", "temp0", "N")
    check(ROW, inputs, text)
    ir = scheduled(ROW, inputs, text)
    assert "memref<1x7xf32>" in ir and "memref.alloc()" not in ir


@pytest.mark.parametrize("axis, box", [("HO", "3x7"), ("WO", "3x3")])
def test_stencil_recomputes_its_halo(axis: str, box: str) -> None:
    inputs = {"input0": f32(8, 7)}
    text = at("output0", "temp0", axis)
    check(STENCIL, inputs, text)
    assert f"memref<{box}xf32>" in scheduled(STENCIL, inputs, text)


def test_fill_and_reduction_producers_chain_into_one_loop() -> None:
    inputs = {"input0": f32(6, 10)}
    text = script(
        '%o = transform.einc.match stmt "output0" axis "N" in %root',
        '%t1 = transform.einc.match stmt "temp1" in %root',
        "transform.einc.compute_at %t1 at %o",
        '%t0 = transform.einc.match stmt "temp0" in %root',
        "transform.einc.compute_at %t0 at %o",
        "transform.einc.parallelize %o",
    )
    src = check(SOFTMAX, inputs, text)
    assert "temp0_local[1]" in src and "temp1_local[1]" in src and "aligned_alloc" not in src
    assert src.count("#pragma omp parallel for") == 1


def test_producer_read_elsewhere_is_kept() -> None:
    ir = "temp0[N] >=! input0[N, C]; output0[N, C] = input0[N, C] - temp0[N]; output1[N] = temp0[N] * 2.0"
    inputs = {"input0": f32(4, 9)}
    text = at("output0", "temp0", "N")
    check(ir, inputs, text, ["output0"])
    out = scheduled(ir, inputs, text, ["output0"])
    assert "temp0_local" in out and "memref.alloc()" in out


def test_rank0_producer_moves_into_the_loop() -> None:
    check(RANK0, {"input0": f32(5, 6)}, at("output0", "temp0", "N"))


def test_compute_at_inside_a_tiled_consumer() -> None:
    inputs = {"input0": f32(8, 7)}
    check(STENCIL, inputs, at("output0", "temp0", "HO.o", "compute_at",
                              '%h = transform.einc.match stmt "output0" axis "HO" in %root',
                              "%ho, %hi = transform.einc.tile %h by 2"))


# ---- reverse_compute_at -------------------------------------------------------------------------


@pytest.mark.parametrize("axis, before", [
    ("N", []),
    ("M", []),
    ("N.o", ['%n = transform.einc.match stmt "C" axis "N" in %root', "%no, %ni = transform.einc.tile %n by 4"]),
    ("N", ['%n = transform.einc.match stmt "C" axis "N" in %root', "transform.einc.parallelize %n",
           '%c = transform.einc.cache_write "C" at %n']),
])
def test_epilogue_after_a_matmul_row(axis: str, before: list[str]) -> None:
    text = at("C", "output0", axis, "reverse_compute_at", *before)
    check(EPILOGUE, EP_INPUTS, text)
    ir = scheduled(EPILOGUE, EP_INPUTS, text)
    loops = [op for op in lower_to_stage(EPILOGUE, EP_INPUTS, stage="scheduled", schedule=text).walk()
             if isinstance(op, affine.ForOp) and op.parent_op() is not None and isinstance(op.parent_op(), func.FuncOp)]
    assert len(loops) == 2, ir  # the fill and the matmul nest holding the epilogue


@pytest.mark.opencl
def test_epilogue_on_opencl() -> None:
    text = at("C", "output0", "N", "reverse_compute_at").replace(
        "    transform.yield", '    transform.einc.bind %loop to "block.x"\n    transform.yield')
    kernel = einc.compile(EPILOGUE, EP_INPUTS, target="opencl", schedule=text)
    rng = np.random.default_rng(3)
    arrays = {k: rng.uniform(-1, 1, v["shape"]).astype(np.float32) for k, v in EP_INPUTS.items()}
    got = kernel(**arrays)["output0"]
    want = np.maximum(arrays["input0"].astype(np.float64) @ arrays["input1"] + arrays["input2"], 0.0)
    assert max_error(got, want) <= tolerance("float32")


# ---- refusals ------------------------------------------------------------------------------------

MM_SQ = {"input0": f32(4, 4), "input1": f32(4, 4), "input2": f32(4)}
SOFT_IN = {"input0": f32(4, 8)}
TILE_T = ['%t = transform.einc.match stmt "temp0" axis "N" in %root', "%a, %b = transform.einc.tile %t by 2"]
K_OUTER = ['%n = transform.einc.match stmt "C" axis "N" in %root', '%k = transform.einc.match stmt "C" axis "K" in %root',
           '%m = transform.einc.match stmt "C" axis "M" in %root', "%a, %b, %c = transform.einc.reorder %k, %n, %m"]
TILE_3 = ['%n = transform.einc.match stmt "C" axis "N" in %root', "%a, %b = transform.einc.tile %n by 3"]
# (program, inputs, (loop's statement, moved statement, loop's axis, op, earlier lines), message)
REFUSALS = [
    (SOFTMAX, SOFT_IN, ("output0", "temp0", "N", "compute_at", TILE_T), "one distinct loop variable per dimension"),
    (SOFTMAX, SOFT_IN, ("temp0", "output0", "N", "compute_at", []), "must be in a later nest"),
    (SOFTMAX, SOFT_IN, ("temp1", "output0", "C", "compute_at", []), "must be in a later nest"),
    ("temp0[N] = input0[N] * 2.0; output0[N] = temp0[input1[N]]",
     {"input0": f32(8), "input1": {"dtype": "int32", "shape": [8]}}, ("output0", "temp0", "N", "compute_at", []),
     "not affine"),
    ("temp0[N] = input0[N] * 2.0; temp1[N] = input0[N] * 3.0; output0[N] = temp0[N] + temp1[N]", {"input0": f32(8)},
     ("temp1", "temp0", "N", "compute_at", []), "not read inside the loop"),
    (EPILOGUE, MM_SQ, ("C", "output0", "K", "reverse_compute_at", []), "not final"),
    (EPILOGUE, MM_SQ, ("C", "output0", "N", "reverse_compute_at", K_OUTER), "not final"),
    ("C[N, M] +=! input0[N, K] * input1[K, M]; output0[N, M] = C[N, M] + C[M, N]", MM_SQ,
     ("C", "output0", "N", "reverse_compute_at", []), "reach other elements"),
    ("C[N, M] +=! input0[N, K] * input1[K, M]; output0[N] +=! C[N, M]", MM_SQ,
     ("C", "output0", "N", "reverse_compute_at", []), "must be elementwise"),
    (EPILOGUE, MM_SQ, ("C", "output0", "N.o", "reverse_compute_at", TILE_3), "outside the tensor|tile it exactly"),
]


def _tagged(module, stmt: str, axis: str | None = None) -> affine.ForOp:  # type: ignore[no-untyped-def]
    """The outermost (non-fill) loop of `stmt` (with `axis`, when given)."""
    for op in module.walk():
        attrs = op.attributes
        if isinstance(op, affine.ForOp) and "einc.init" not in attrs and attrs.get(lt.STMT_ATTR) == StringAttr(stmt):
            if axis is None or attrs.get(lt.AXIS_ATTR) == StringAttr(axis):
                return op
    raise AssertionError(f"no loop {axis} of {stmt}")


@pytest.mark.parametrize("ir, inputs, where, message", REFUSALS, ids=range(len(REFUSALS)))
def test_refusals_are_located_and_leave_the_ir_untouched(ir: str, inputs: dict, where: tuple, message: str) -> None:
    stmt, moved, axis, op, before = where
    text = at(stmt, moved, axis, op, *before)
    with pytest.raises(ScheduleError, match=message) as info:
        Schedule.parse(text, "bad.mlir").apply(lower_to_stage(ir, inputs, stage="loops"), get_all_passes())
    loc = info.value.loc
    assert loc is not None and loc.file == "bad.mlir" and loc.col == 5
    assert f"transform.einc.{op} %nest" in text.splitlines()[loc.line - 1]
    # the utility refuses with the same reason before rewriting anything
    module = lower_to_stage(ir, inputs, stage="loops").clone()
    if before:
        Schedule.parse(script(*before)).apply_in_place(module, get_all_passes())
    snapshot = str(module)
    fn = reverse_compute_at if op == "reverse_compute_at" else compute_at
    result = fn(_tagged(module, moved), _tagged(module, stmt, axis))
    assert isinstance(result, lt.Failure) and re.search(message, result.message)
    assert str(module) == snapshot


# ---- random choices ------------------------------------------------------------------------------


def _function(module):  # type: ignore[no-untyped-def]
    return next(op for op in module.walk() if isinstance(op, func.FuncOp))


def _elementwise(nest: affine.ForOp) -> bool:
    """As many loops as the rank of what it stores (a cheap filter, not the legality test)."""
    stores = [a for a in accesses(nest) if a.write and a.map is not None]
    depth = sum(isinstance(op, affine.ForOp) for op in nest.walk())
    return bool(stores) and all(len(a.map.results) == depth for a in stores)  # type: ignore[union-attr]


def random_moves(module, rng: random.Random) -> list[str]:  # type: ignore[no-untyped-def]
    """Random compute_at / reverse_compute_at through the utilities: a nest (mostly not a
    fill), then a loop at a random depth of a later nest (compute_at) or an earlier one
    (reverse_compute_at), mostly one that shares a tensor with it. Refusals must leave the
    IR as it was."""
    done = []
    for _ in range(rng.randint(1, 4)):
        body = _function(module).body.block
        tops = [op for op in body.ops if isinstance(op, affine.ForOp)]
        if len(tops) < 2:
            break
        reverse = rng.random() < 0.5
        plain = [t for t in tops if "einc.init" not in t.attributes and (not reverse or _elementwise(t))]
        nest = rng.choice(plain if plain and rng.random() < 0.9 else tops)
        k = tops.index(nest)
        others = (tops[:k] if reverse else tops[k + 1 :]) or tops
        mine = {a.buffer for a in accesses(nest) if (not a.write) == reverse}
        related = [t for t in others if {a.buffer for a in accesses(t) if a.write == reverse} & mine]
        other = rng.choice(related if related and rng.random() < 0.8 else others)
        loop = rng.choice([op for op in other.walk() if isinstance(op, affine.ForOp)])
        kind = "reverse_compute_at" if reverse else "compute_at"
        what = f"{kind} {lt.describe(nest)} at {lt.describe(loop)}"
        before = str(module)
        result = reverse_compute_at(nest, loop) if reverse else compute_at(nest, loop)
        if isinstance(result, lt.Failure):
            assert str(module) == before, f"{what} failed but changed the IR: {result.message}"
        else:
            done.append(what)
        module.verify()
    return done


@settings(max_examples=examples(30), deadline=None, suppress_health_check=list(HealthCheck))
@given(prog=programs(), seed=st.integers(0, 2**32 - 1))
def test_random_moves_on_random_programs_match_oracle(prog: GenProgram, seed: int) -> None:
    assume(len(prog.statements) >= 2)
    check_random_transforms_on_c(prog, seed, random_moves, "moves")


MULTI = [c for c in PROGRAMS if c.ir.count(";") >= 1 and c.ir.count("=") >= 2]


@pytest.mark.parametrize("seed", range(4))
@pytest.mark.parametrize("case", MULTI, ids=lambda c: c.name)
def test_random_moves_on_shared_programs_match_numpy(case, seed: int) -> None:  # type: ignore[no-untyped-def]
    comp = Compilation(case.ir, "<test>", case.input_dict, case.extra_outputs, "c", "none")
    module = comp.run_until("loops").clone()
    done = random_moves(module, random.Random(seed))
    comp.results["scheduled"] = module
    kernel = comp.kernel()
    arrays = {k: np.asarray(v) for k, v in random_inputs(comp.program, np.random.default_rng(seed)).items()}
    for k, v in arrays.items():
        if v.dtype.kind in "iu":
            arrays[k] = (v % 4).astype(v.dtype) + 1
    got = kernel(**arrays)
    for name, value in run_reference(comp.results["ein"], arrays).items():
        assert max_error(got[name], value) <= tolerance(str(got[name].dtype)), f"{name} after {done}"


# ---- the default C schedule -------------------------------------------------------------------------


def _top_nests(ir: str, inputs: dict) -> list[affine.ForOp]:
    module = lower_to_stage(ir, inputs, stage="scheduled")
    return [op for op in _function(module).body.block.ops if isinstance(op, affine.ForOp)]


def test_default_schedule_fuses_softmax_into_one_parallel_row_loop() -> None:
    inputs = {"input0": f32(256, 128)}
    (nest,) = _top_nests(SOFTMAX, inputs)
    assert lt.PARALLEL_ATTR in nest.attributes
    src = check(SOFTMAX, inputs, None)
    # after the vector helpers, whose lane loops do not count: the parallel loop's body (a
    # function of its own) and the kernel
    body = src[src.index("static inline void einc_parallel_0"):]
    assert body.count("for (") == 4 and "aligned_alloc" not in src


def test_default_schedule_fuses_layer_norm_and_keeps_matmul_blocking() -> None:
    (layer_norm,) = [c for c in PROGRAMS if c.name == "layer_norm"]
    assert len(_top_nests(layer_norm.ir, layer_norm.input_dict)) == 1
    check(layer_norm.ir, layer_norm.input_dict, None)
    big = {"input0": f32(128, 64), "input1": f32(64, 128), "input2": f32(128)}
    src = check(EPILOGUE, big, None)  # the matmul producer is not fused: still blocked
    assert "K_i" in src and "C_local[" in src
    assert len(_top_nests(EPILOGUE, big)) == 3  # the fill, the blocked matmul, the epilogue


def test_default_schedule_does_not_fuse_with_recomputation() -> None:
    inputs = {"input0": f32(8, 7)}
    assert len(_top_nests(STENCIL, inputs)) == 3  # temp0, the fill, output0
    check(STENCIL, inputs, None)
