"""The default C schedule's reductions and vector math: innermost reduction loops get vector
partial accumulators (transform.einc.vectorize_reduction, checked by mark_reduction_loop),
exp and friends go through libmvec, and every such kernel matches NumPy (float64 reference,
fresh random inputs, poisoned outputs; float sums are reassociated, so within tolerance).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, given, note, settings
from hypothesis import strategies as st
from xdsl.dialects import affine, arith, func
from xdsl.parser import Parser

from einc.targets import get_target
from einc.dialects.context import make_context
from einc.schedule.default import default_schedule
from einc.dialects import einc_transform as et
from einc.compiler.driver import Compilation
from einc.semantics.compare import max_error, tolerance
from einc.transforms import loop_transforms as lt
from einc.transforms.vectorize import REDUCTION_ATTR, mark_reduction_loop
from einc.schedule.script import Schedule
from einc.targets.c import CTarget
from tests.oracle.budget import examples

C_LANES = CTarget.vector_lanes()
"""float32 lanes of the C target's vectors on this host (16 with AVX-512, 8 with AVX2)."""


def f32(*shape: int) -> dict[str, Any]:
    return {"dtype": "float32", "shape": list(shape)}


def c_schedule(comp: Compilation) -> Schedule:
    """The default C schedule of a compilation's loops (which must have one)."""
    schedule = default_schedule(get_target("c"), comp.run_until("loops"))
    assert schedule is not None
    return schedule


def axes(ops: list[Any]) -> list[tuple[str, str]]:
    """(statement, axis) of each match op."""
    return [(op.stmt.data, op.axis.data) for op in ops]


# ---- mark_reduction_loop: what it accepts and refuses -----------------------------------------

LOOP = """
func.func @f(%x: memref<64xf32>, %y: memref<65xf32>, %s: memref<2xf32>) {{
  affine.for %i = 0 to 64 {{
    {body}
  }}
  func.return
}}
"""

SUM = """
    %v = affine.load %x[%i] : memref<64xf32>
    %a = affine.load %s[0] : memref<2xf32>
    %b = arith.addf %a, %v : f32
    affine.store %b, %s[0] : memref<2xf32>
"""


def _mark(body: str) -> affine.ForOp | lt.Failure:
    module = Parser(make_context(), LOOP.format(body=body)).parse_module()
    loop = next(op for op in module.walk() if isinstance(op, affine.ForOp))
    return mark_reduction_loop(loop)


def test_a_sum_with_an_elementwise_store_is_marked() -> None:
    store = """
    %w = arith.mulf %v, %v : f32
    affine.store %w, %y[%i + 1] : memref<65xf32>
    """
    loop = _mark(SUM + store)
    assert isinstance(loop, affine.ForOp) and REDUCTION_ATTR in loop.attributes


@pytest.mark.parametrize("extra, message", [
    # y[i + 1] = y[i] * x[i]: iteration i reads what iteration i - 1 wrote
    ("""%r = affine.load %y[%i] : memref<65xf32>
        %w = arith.mulf %r, %v : f32
        affine.store %w, %y[%i + 1] : memref<65xf32>""", "another index"),
    # the accumulator read again outside the pattern
    ("""%r = affine.load %s[0] : memref<2xf32>
        affine.store %r, %y[%i] : memref<65xf32>""", "accessed again"),
    # a store to an invariant index that is no reduction
    ("""affine.store %v, %s[1] : memref<2xf32>""", "accessed again|not a reduction"),
])  # fmt: skip
def test_carried_dependences_besides_the_reduction_are_refused(extra: str, message: str) -> None:
    result = _mark(SUM + extra)
    assert isinstance(result, lt.Failure)
    assert any(part in result.message for part in message.split("|")), result.message


def test_a_loop_without_reduction_is_refused() -> None:
    result = _mark("""%v = affine.load %x[%i] : memref<64xf32>
    affine.store %v, %y[%i] : memref<65xf32>""")
    assert isinstance(result, lt.Failure) and "no reduction" in result.message


# ---- default schedules on C against NumPy ------------------------------------------------------

SOFTMAX = (
    "temp0[N] >=! input0[N, C]; temp1[N] +=! (input0[N, C] - temp0[N]).call(`exp`); "
    "output0[N, C] = (input0[N, C] - temp0[N]).call(`exp`) / temp1[N]"
)


def _softmax(a: dict[str, np.ndarray]) -> np.ndarray:
    x = a["input0"]
    e = np.exp(x - x.max(axis=1, keepdims=True))
    return e / e.sum(axis=1, keepdims=True)


CASES = {
    # 1000 = 62 * 16 + 8: a scalar remainder after the vector loop
    "row_sum": ("output0[N] +=! input0[N, C]", {"input0": f32(33, 1000)}, lambda a: a["input0"].sum(axis=1)),
    "row_max_nan": ("output0[N] >=! input0[N, C]", {"input0": f32(9, 1000)}, lambda a: a["input0"].max(axis=1)),
    "row_min_int": ("output0[N] <=! input0[N, C]", {"input0": {"dtype": "int32", "shape": [7, 300]}},
                    lambda a: a["input0"].min(axis=1)),
    "dot_rows": ("output0[N] +=! input0[N, C] * input1[N, C]", {"input0": f32(5, 4096), "input1": f32(5, 4096)},
                 lambda a: (a["input0"] * a["input1"]).sum(axis=1)),
    "softmax": (SOFTMAX, {"input0": f32(16, 1000)}, _softmax),
}  # fmt: skip


@pytest.mark.parametrize("case", sorted(CASES))
def test_default_reductions_are_vectorized_and_match_numpy(case: str) -> None:
    ir, inputs, answer = CASES[case]
    comp = Compilation(ir, "<r>", inputs, None, "c")
    assert c_schedule(comp).ops(et.VectorizeReductionOp)
    kernel = comp.kernel()
    assert "einc_vreduce_" in kernel.source, kernel.source
    for seed in (0, 1):
        rng = np.random.default_rng(seed)
        arrays = {
            k: (rng.uniform(-3, 3, v["shape"]) if v["dtype"] == "float32"
                else rng.integers(-10**6, 10**6, v["shape"])).astype(v["dtype"])
            for k, v in inputs.items()
        }  # fmt: skip
        if case == "row_max_nan":
            arrays["input0"][3, 500] = np.nan  # max propagates NaN, as NumPy's
            arrays["input0"][4, 999] = np.inf  # in the scalar remainder
        got = kernel(**arrays)["output0"]  # outputs are poisoned before the run
        want = answer({k: v.astype(np.float64) if v.dtype.kind == "f" else v for k, v in arrays.items()})
        if case in ("row_max_nan", "row_min_int"):
            assert np.array_equal(got, want.astype(got.dtype), equal_nan=True), (got, want)
        else:
            assert max_error(got, want) <= tolerance("float32"), kernel.source


def test_default_softmax_calls_vector_exp() -> None:
    comp = Compilation(SOFTMAX, "<s>", {"input0": f32(16, 1024)}, None, "c")
    source = comp.run_until("source")
    assert f"einc_vexp_f32x{C_LANES}" in source and "expf(" in source and "__simd__" in source


def test_short_reductions_stay_scalar() -> None:
    """Below REDUCTION_MIN_TRIP iterations a vector accumulator is not worth its reduction."""
    comp = Compilation("output0[N] +=! input0[N, C]", "<s>", {"input0": f32(64, 8)}, None, "c")
    schedule = c_schedule(comp)
    assert not schedule.ops(et.VectorizeReductionOp), schedule
    # the schedule still vectorizes the fill of the output, a loop over the 64 rows
    (vectorized,) = schedule.ops(et.VectorizeOp)
    assert isinstance(match := vectorized.target.owner, et.MatchOp) and match.init is not None
    assert axes([match]) == [("output0", "N")]


# ---- loop_cse: reuse across sibling loops -------------------------------------------------------

TWO_LOOPS = """
func.func @f(%x: memref<64xf32>, %m: memref<1xf32>, %s: memref<1xf32>, %y: memref<64xf32>) {{
  affine.for %i = 0 to 64 {{
    %v = affine.load %x[%i] : memref<64xf32>
    %c = affine.load %m[0] : memref<1xf32>
    %d = arith.subf %v, %c : f32
    %e = math.exp %d : f32
    %a = affine.load %s[0] : memref<1xf32>
    %b = arith.addf %a, %e : f32
    affine.store %b, %s[0] : memref<1xf32>
  }} {{einc.stmt = "t", einc.axis = "C"}}
  {between}
  affine.for %j = {bounds} {{
    %v = affine.load %x[{index}] : memref<64xf32>
    %c = affine.load %m[0] : memref<1xf32>
    %d = arith.subf %v, %c : f32
    %e = math.exp %d : f32
    %t = affine.load %s[0] : memref<1xf32>
    %q = arith.divf %e, %t : f32
    affine.store %q, %y[%j] : memref<64xf32>
  }} {{einc.stmt = "y", einc.axis = "C"}}
  func.return
}}
"""


def _two_loops(between: str = "", bounds: str = "0 to 64", index: str = "%j") -> tuple[Any, list[affine.ForOp]]:
    module = Parser(make_context(), TWO_LOOPS.format(between=between, bounds=bounds, index=index)).parse_module()
    return module, [op for op in module.walk() if isinstance(op, affine.ForOp)]


def test_reuse_stores_the_shared_exp_and_loads_it_in_the_second_loop() -> None:
    from xdsl.dialects import math, memref

    from einc.transforms.loop_cse import reuse_values

    module, (first, second) = _two_loops()
    allocas = reuse_values(first, second)
    assert not isinstance(allocas, lt.Failure) and len(allocas) == 1
    assert allocas[0].memref.type.get_shape() == (64,)
    assert isinstance(allocas[0], memref.AllocaOp) and allocas[0].next_op is first
    assert not any(isinstance(op, math.ExpOp) for op in second.walk())  # computed once
    stores = [op for op in first.body.block.ops if isinstance(op, affine.StoreOp) and op.memref is allocas[0].memref]
    assert len(stores) == 1 and isinstance(stores[0].value.owner, math.ExpOp)
    loads = [op for op in second.body.block.ops if isinstance(op, affine.LoadOp) and op.memref is allocas[0].memref]
    assert len(loads) == 1 and all(isinstance(u.operation, arith.DivfOp) for u in loads[0].result.uses)
    module.verify()


@pytest.mark.parametrize("between, bounds, index, message", [
    # the max both loops read changes between them: the first loop's exp is stale
    ("%z = arith.constant 1.0 : f32\n  affine.store %z, %m[0] : memref<1xf32>", "0 to 64", "%j", "unchanged"),
    ("", "0 to 32", "%j", "same constant bounds"),
    # a call may write anything
    ("func.call @g() : () -> ()", "0 to 64", "%j", "may change their inputs"),
    # x[63 - j]: another element, no match
    ("", "0 to 64", "63 - %j", "no value"),
])  # fmt: skip
def test_reuse_is_refused_when_the_values_differ(between: str, bounds: str, index: str, message: str) -> None:
    from einc.transforms.loop_cse import reuse_values

    module, (first, second) = _two_loops(between, bounds, index)
    before = str(module)
    result = reuse_values(first, second)
    assert isinstance(result, lt.Failure) and message in result.message, result
    assert str(module) == before  # the IR untouched


def test_default_softmax_computes_exp_once_per_element() -> None:
    comp = Compilation(SOFTMAX, "<s>", {"input0": f32(16, 1024)}, None, "c")
    (reuse,) = c_schedule(comp).ops(et.ReuseOp)
    assert axes([reuse.first.owner, reuse.second.owner]) == [("temp1", "C"), ("output0", "C")]
    scheduled = str(comp.run_until("scheduled"))
    assert scheduled.count("math.exp") == 1 and "temp1_reuse" in scheduled


def test_no_reuse_without_a_math_call() -> None:
    """Layer norm shares only `x - mean` (a subtraction): recomputing beats a store and a load."""
    ir = ("temp0[N] +=! input0[N, C] / 64.0; temp1[N] +=! (input0[N, C] - temp0[N]) * (input0[N, C] - temp0[N]); "
          "output0[N, C] = (input0[N, C] - temp0[N]) / temp1[N]")
    comp = Compilation(ir, "<ln>", {"input0": f32(32, 64)}, None, "c")
    schedule = c_schedule(comp)
    assert len(schedule.ops(et.ComputeAtOp)) == 2 and not schedule.ops(et.ReuseOp), schedule


# ---- convolutions: output channels register-blocked ------------------------------------------------

CONV2D = ("output0[N, F, HO, WO] +=! input0[N, C, HO + KH, WO + KW] * input1[F, C, KH, KW] "
          "where HO in {ho}, WO in {wo}")


def _conv2d(a: dict[str, np.ndarray]) -> np.ndarray:
    x, w = a["input0"], a["input1"]
    kh, kw = w.shape[2], w.shape[3]
    win = np.lib.stride_tricks.sliding_window_view(x, (kh, kw), axis=(2, 3))  # N C HO WO KH KW
    return np.tensordot(win, w, axes=([1, 4, 5], [1, 2, 3])).transpose(0, 3, 1, 2)


@pytest.mark.parametrize("n, c, f, h, w, k, tiles", [
    # 18 columns: 16 + 2, 8 + 8 + 2, 4 x 4 + 2 (4 channels: 8 would be blocked over channels)
    (2, 8, 4, 20, 20, 3, {16: 4, 8: 4, 4: 2}),
    (1, 3, 6, 19, 35, 2, {16: 2, 8: 2, 4: 2}),  # 6 channels: tiles of 2
    # 38 columns: 2 vectors of 16 + 4 + 2 (four rows in 32 registers), 4 x 8 + 4 + 2 (six
    # vectors a row: two rows in 16 registers), 9 x 4 + 2
    (1, 4, 12, 6, 40, 3, {16: 4, 8: 2, 4: 2}),
])  # fmt: skip
def test_default_conv2d_blocks_output_channels_and_matches_numpy(
    n: int, c: int, f: int, h: int, w: int, k: int, tiles: dict[int, int]
) -> None:
    """Rows of accumulators as many as the host's vector registers hold (see _block_rows)."""
    tile = tiles[C_LANES]
    ho, wo = h - k + 1, w - k + 1
    ir = CONV2D.format(ho=ho, wo=wo)
    inputs = {"input0": f32(n, c, h, w), "input1": f32(f, c, k, k)}
    comp = Compilation(ir, "<conv>", inputs, None, "c")
    schedule = c_schedule(comp)
    assert schedule.knobs()["output0.tile_rows"].selected == tile, schedule
    assert [op.tensor.data for op in schedule.ops(et.CacheWriteOp)] == ["output0"], schedule
    kernel = comp.kernel()
    assert "float output0_local[" in kernel.source and f"einc_vload_f32x{C_LANES}" in kernel.source
    for seed in (0, 1):
        rng = np.random.default_rng(seed)
        arrays = {k_: rng.uniform(-1, 1, v["shape"]).astype(np.float32) for k_, v in inputs.items()}
        got = kernel(**arrays)["output0"]
        want = _conv2d({k_: v.astype(np.float64) for k_, v in arrays.items()})
        assert max_error(got, want) <= tolerance("float32")


def test_narrow_convolutions_are_not_blocked() -> None:
    """Fewer than 16 output columns: no vector to block around (and 4 output channels: no
    vector of channels either)."""
    comp = Compilation(CONV2D.format(ho=6, wo=6), "<conv>", {"input0": f32(1, 4, 8, 8), "input1": f32(4, 4, 3, 3)},
                       None, "c")
    schedule = c_schedule(comp)
    assert not schedule.knobs() and not schedule.ops(et.TileOp) and not schedule.ops(et.CacheWriteOp), schedule
    # still reordered with the output columns innermost, and those vectorized
    (reorder,) = schedule.ops(et.ReorderOp)
    assert [axis for _, axis in axes([h.owner for h in reorder.targets])] == ["N", "F", "HO", "C", "KH", "KW", "WO"]
    assert reorder.loops[-1] in [op.target for op in schedule.ops(et.VectorizeOp)]


# ---- random row programs: reductions and reuse under the default schedule ----------------------

SHARED = [
    "(input0[N, C] - input1[C]).call(`exp`)",
    "(input0[N, C] * 0.5).call(`tanh`) + input1[C]",
    "input0[N, C].call(`sin`) * input1[C]",
    "input0[N, C] * input1[C]",
]
REDUCE = ["+=!", ">=!", "<=!"]


@settings(max_examples=examples(20), deadline=None, suppress_health_check=list(HealthCheck))
@given(shared=st.sampled_from(SHARED), reduce=st.sampled_from(REDUCE), n=st.integers(1, 5),
       c=st.integers(1, 80), seed=st.integers(0, 2**32 - 1))  # fmt: skip
def test_random_row_programs_match_the_reference(shared: str, reduce: str, n: int, c: int, seed: int) -> None:
    """A row reduction of a shared expression, then an elementwise use of both (softmax's
    shape): fused, reused, reduction-vectorized as the default schedule decides, at sizes
    below, at and around the vector width; equal to the float64 reference interpreter."""
    from einc.semantics.reference import run_reference

    ir = f"temp0[N] {reduce} {shared}; output0[N, C] = {shared} * temp0[N] + input0[N, C]"
    inputs = {"input0": f32(n, c), "input1": f32(c)}
    comp = Compilation(ir, "<row>", inputs, None, "c")
    note(f"{ir}\n{default_schedule(get_target('c'), comp.run_until('loops'))}")
    kernel = comp.kernel()
    rng = np.random.default_rng(seed)
    arrays = {k: rng.uniform(-2, 2, v["shape"]).astype(np.float32) for k, v in inputs.items()}
    got = kernel(**arrays)["output0"]
    want = run_reference(comp.results["ein"], {k: v.astype(np.float64) for k, v in arrays.items()})["output0"]
    assert max_error(got, want) <= tolerance("float32"), kernel.source


def test_every_row_tile_option_of_the_conv_schedule_applies() -> None:
    """The `tile_rows` knob offers only sizes the schedule can unroll; each one gives NumPy's
    answer (a search may pick any). 4 output channels: no vector of channels, so the rows
    blocking."""
    inputs = {"input0": f32(1, 4, 10, 20), "input1": f32(4, 4, 3, 3)}
    ir = CONV2D.format(ho=8, wo=18)
    comp = Compilation(ir, "<conv>", inputs, None, "c")
    schedule = c_schedule(comp)
    knob = schedule.knobs()["output0.tile_rows"]
    assert len(knob.options) >= 2, knob
    rng = np.random.default_rng(2)
    arrays = {k: rng.uniform(-1, 1, v["shape"]).astype(np.float32) for k, v in inputs.items()}
    want = _conv2d({k: v.astype(np.float64) for k, v in arrays.items()})
    for option in knob.options:
        variant = schedule.with_values({"output0.tile_rows": option})
        kernel = Compilation(ir, "<conv>", inputs, None, "c", variant).kernel()
        assert max_error(kernel(**arrays)["output0"], want) <= tolerance("float32"), option


# ---- the policy's decisions, recorded --------------------------------------------------------------


def test_default_schedules_match_the_recorded_ones() -> None:
    """Every shared program's default schedule (for 128-, 256- and 512-bit vectors) is the one
    recorded in tests/golden/default_schedules.json: a speed-up or a rewrite of the policy
    must not change what it decides. Regenerate only for an intended change of policy."""
    import json

    from tests.default_schedule_golden import GOLDEN, current_texts

    recorded = json.loads(GOLDEN.read_text())
    current = current_texts()
    assert set(current) == set(recorded)
    for bits, programs in recorded.items():
        assert set(current[bits]) == set(programs), bits
        assert sum(text is not None for text in programs.values()) > len(programs) // 2
        for name, text in programs.items():
            assert current[bits][name] == text, f"{name} ({bits}-bit vectors):\n{current[bits][name]}"


# ---- the parallel loop: enough iterations for every core whatever the batch -----------------------

PADDED_CONV = (
    "output0[N, F, HO, WO] +=! (input0[N, C, HO + KH - 1, WO + KW - 1].when("
    "[HO + KH - 1 >= 0, HO + KH - 1 < {h}, WO + KW - 1 >= 0, WO + KW - 1 < {w}], 0.0) * input1[F, C, KH, KW]) "
    "where HO in {h}, WO in {w}"
)
BATCH_MATMUL = "output0[B, N, M] +=! input0[B, N, K] * input1[B, K, M]"
ELEMENTWISE = "output0[N, C, H, W] = input0[N, C, H, W] * 2.0 - 1.0"


def _padded_conv(a: dict[str, np.ndarray]) -> np.ndarray:
    x = np.pad(a["input0"], ((0, 0), (0, 0), (1, 1), (1, 1)))
    return _conv2d({"input0": x, "input1": a["input1"]})


PARALLEL_CASES = {
    # name: (ir, inputs, reference, the parallel loop's axis at batch 1); the convolution's
    # output channels are 4 tiles of 16 or 2 of 32, too few: its first spatial loop runs in
    # parallel chunks (`_parallel_chunks`: 8 of 7 rows, the first and last peeled off for the
    # padding's tests, so 6 in parallel)
    "conv3x3_pad1": (PADDED_CONV.format(h=56, w=56), {"input0": f32(1, 64, 56, 56), "input1": f32(64, 64, 3, 3)},
                     _padded_conv, "HO"),
    "batch_matmul": (BATCH_MATMUL, {"input0": f32(1, 64, 128), "input1": f32(1, 128, 1024)},
                     lambda a: a["input0"] @ a["input1"], "M"),
    "elementwise": (ELEMENTWISE, {"input0": f32(1, 64, 28, 28)}, lambda a: a["input0"] * 2.0 - 1.0, "C"),
}  # fmt: skip


def parallel_loops(source: str) -> list[tuple[str, int]]:
    """(variable, trip count) of each loop printed with `#pragma omp parallel for` in a C
    source (`for (int64_t X = lo; X < hi; X += step)` or `X++`)."""
    import re

    found = re.findall(
        r"#pragma omp parallel for[^\n]*\n\s*for \(int64_t (\w+) = (-?\d+); \1 < (-?\d+); \1(?:\+\+| \+= (\d+))\)", source
    )
    return [(name, -(-(int(hi) - int(lo)) // int(step or 1))) for name, lo, hi, step in found]


@pytest.mark.parametrize("case", sorted(PARALLEL_CASES))
def test_batch_1_runs_a_long_loop_in_parallel_and_matches_numpy(case: str) -> None:
    """At batch 1 the batch loop has one iteration: the parallel loop is the outermost loop
    below it with enough iterations for every core (channels, the matmul's column tiles),
    and the numbers are NumPy's."""
    from einc.schedule.policies.cpu import PARALLEL_MIN_TRIP

    ir, inputs, answer, axis = PARALLEL_CASES[case]
    kernel = Compilation(ir, "<b1>", inputs, None, "c").kernel()
    loops = parallel_loops(kernel.source)
    main = [(name, trip) for name, trip in loops if name.split("_")[0] == axis]
    assert main, (loops, kernel.source)
    # every nest big enough runs in parallel, none over a loop of one iteration
    assert all(trip >= 2 for _, trip in loops), loops
    # the matmul's column tiles: 1024 / (vectors x lanes) = 16 with AVX-512, 64 with AVX2;
    # the convolution's chunks: 8 less the 2 peeled
    least = PARALLEL_MIN_TRIP // 2 - 2 if axis == "HO" else PARALLEL_MIN_TRIP
    assert max(trip for _, trip in main) >= least, loops
    rng = np.random.default_rng()
    arrays = {k: rng.uniform(-1, 1, v["shape"]).astype(np.float32) for k, v in inputs.items()}
    got = kernel(**arrays)["output0"]
    want = answer({k: v.astype(np.float64) for k, v in arrays.items()})
    assert max_error(got, want) <= tolerance("float32")


@pytest.mark.parametrize("case", sorted(PARALLEL_CASES))
def test_batch_16_keeps_the_batch_loop_parallel(case: str) -> None:
    """A nest whose outermost loop has enough iterations keeps it parallel: at batch 16 the
    schedule parallelizes the batch axis, as before."""
    ir, inputs, _, _ = PARALLEL_CASES[case]
    batched = {k: f32(16, *v["shape"][1:]) for k, v in inputs.items()}
    comp = Compilation(ir, "<b16>", batched, None, "c")
    schedule = c_schedule(comp)
    parallel = schedule.ops(et.ParallelizeOp)
    assert parallel, schedule
    loops = parallel_loops(comp.run_until("source"))
    assert loops and all(name in ("N", "B") and trip == 16 for name, trip in loops), loops


def test_the_parallel_loop_is_never_below_a_reduction() -> None:
    """A matrix-vector product (one row, i-k-j order) has no loop above its reduction with
    more than one iteration: it stays sequential rather than start a parallel loop at every
    step of the reduction. parallel_loop itself stops at the first loop carrying a
    dependence."""
    from einc.schedule.policies.cpu import parallel_loop
    from einc.transforms.loop_analysis import band_from

    comp = Compilation("output0[N, M] +=! input0[N, K] * input1[K, M]", "<mv>",
                       {"input0": f32(1, 256), "input1": f32(256, 512)}, None, "c")  # fmt: skip
    assert parallel_loops(comp.run_until("source")) == []
    loops = comp.run_until("loops")
    (top,) = [op for op in loops.walk() if isinstance(op, affine.ForOp) and isinstance(op.parent_op(), func.FuncOp)
              and "einc.init" not in op.attributes]  # fmt: skip
    band = band_from(top)  # N, M, K
    assert parallel_loop(band, 1 << 20) is band[1]  # M: 512 iterations above the reduction
    assert parallel_loop([band[0], band[2], band[1]], 1 << 20) is None  # N (1 iteration), then K
    assert parallel_loop(band, 1000) is None  # too little work
