"""Index-set splitting (einc/transforms/index_split.py): `transform.einc.split_conditions` and
`transform.einc.split_phases`, by hand and in the CPU default schedule
(einc/schedule/policies/conditions.py).

- a padded convolution and a transposed convolution (stride 2, written with `%` and `//`
  tests) computed with the split schedules on every executable target (C, OpenCL, SYCL, HLSL,
  Poplar) against a float64 NumPy reference on fresh random inputs, compile-checked on CUDA
  and HIP; the CPU default schedule on C;
- the code's shape: under the default C schedule the vectorized loops of both convolutions
  read no condition (but in the boundary pieces), and the transposed convolution's keep only
  the window taps that reach their output phase;
- refusals, located at the op; the affine simplification the phases rely on.
"""

from __future__ import annotations

import functools
import re
from typing import Any

import numpy as np
import pytest
from xdsl.dialects import affine, arith, func, memref, scf
from xdsl.ir.affine import AffineExpr, AffineMap

import einc
from einc.compiler.driver import Compilation
from einc.errors import ScheduleError
from einc.ir.attrs import PARALLEL_ATTR, VECTORIZE_ATTR
from einc.transforms.index_split import canonical, iv_guard
from einc.transforms.loop_analysis import trip_count
from tests.oracle.compare import check_reference
from tests.test_conformance import fresh_seed
from tests.test_device_differential import script
from tests.test_device_targets import require, require_run

PAD_CONV = (
    "output0[N, F, HO, WO] +=! (input0[N, C, HO + KH - 1, WO + KW - 1].when([HO + KH - 1 >= 0, "
    "HO + KH - 1 < {h}, WO + KW - 1 >= 0, WO + KW - 1 < {w}], 0.0) * input1[F, C, KH, KW]) where HO in {h}, WO in {w}"
)
TRANSPOSED = (
    "output0[N, F, HO, WO] +=! (input0[N, C, (HO + 1 - KH) // 2, (WO + 1 - KW) // 2] * input1[C, F, KH, KW]).when(["
    "(HO + 1 - KH) % 2 == 0, (WO + 1 - KW) % 2 == 0, (HO + 1 - KH) // 2 >= 0, (HO + 1 - KH) // 2 < {h}, "
    "(WO + 1 - KW) // 2 >= 0, (WO + 1 - KW) // 2 < {w}]) where HO in {ho}, WO in {wo}"
)


def f32(*shape: int) -> dict[str, Any]:
    return {"dtype": "float32", "shape": list(shape)}


def pad_conv(c: int, f: int, h: int, w: int) -> tuple[str, dict[str, Any]]:
    return PAD_CONV.format(h=h, w=w), {"input0": f32(1, c, h, w), "input1": f32(f, c, 3, 3)}


def transposed(c: int, f: int, h: int, w: int) -> tuple[str, dict[str, Any]]:
    """4x4 window, stride 2, padding 1: an h x w input gives a 2h x 2w output."""
    return TRANSPOSED.format(h=h, w=w, ho=2 * h, wo=2 * w), {"input0": f32(1, c, h, w), "input1": f32(c, f, 4, 4)}


def pad_conv_ref(a: dict[str, np.ndarray]) -> np.ndarray:
    x = np.pad(a["input0"], ((0, 0), (0, 0), (1, 1), (1, 1)))
    win = np.lib.stride_tricks.sliding_window_view(x, (3, 3), axis=(2, 3))
    return np.einsum("nchwij,fcij->nfhw", win, a["input1"])


def transposed_ref(a: dict[str, np.ndarray]) -> np.ndarray:
    x, w = a["input0"], a["input1"]
    n, _, h, wd = x.shape
    f, kh, kw = w.shape[1:]
    full = np.zeros((n, f, 2 * (h - 1) + kh, 2 * (wd - 1) + kw))
    for i in range(kh):
        for j in range(kw):
            full[:, :, i:i + 2 * h - 1:2, j:j + 2 * wd - 1:2] += np.einsum("nchw,cf->nfhw", x, w[:, :, i, j])
    return full[:, :, 1:2 * h + 1, 1:2 * wd + 1]


# phases of every loop of the stride tests, then the bound tests cut (outer loops first)
PHASES = [f'%{a}0 = transform.einc.match stmt "output0" axis "{a}" in %root\n    %{a}1 = transform.einc.split_phases %{a}0 by 2'
          for a in ("HO", "WO", "KH", "KW")]  # fmt: skip
CUTS = [f'%{a}2 = transform.einc.match stmt "output0" axis "{a}" in %root\n    %{a}3 = transform.einc.split_conditions %{a}2'
        for a in ("HO", "WO")]  # fmt: skip
# each output phase a nest of its own (what the CPU default does before blocking): the loops
# above the phases of HO, then of WO, distributed (handles holding several loops: each one's
# copies), then the window's phases and the bound tests
NESTS = [
    PHASES[0], '%F0 = transform.einc.match stmt "output0" axis "F" in %root\n    %F1, %F2 = transform.einc.distribute %F0 into 2',
    '%N0 = transform.einc.match stmt "output0" axis "N" in %root\n    %N1, %N2 = transform.einc.distribute %N0 into 2',
    PHASES[1], '%H0 = transform.einc.match stmt "output0" axis "HO" in %root\n    %H1, %H2 = transform.einc.distribute %H0 into 2',
    '%F3 = transform.einc.match stmt "output0" axis "F" in %root\n    %F4, %F5 = transform.einc.distribute %F3 into 2',
    '%N3 = transform.einc.match stmt "output0" axis "N" in %root\n    %N4, %N5 = transform.einc.distribute %N3 into 2',
    *PHASES[2:], *CUTS,
]  # fmt: skip
CASES = {
    "pad_conv": (pad_conv(3, 4, 6, 7), pad_conv_ref, CUTS),
    "transposed": (transposed(3, 2, 4, 5), transposed_ref, PHASES + CUTS),
    "transposed_nests": (transposed(3, 2, 4, 5), transposed_ref, NESTS),
}
EXECUTED = ("c", "opencl", "sycl", "hlsl", "poplar")


def _check(outputs: dict[str, np.ndarray], inputs: dict[str, np.ndarray], ref: Any, reduce: int, context: str) -> None:
    want = ref({k: v.astype(np.float64) for k, v in inputs.items()})
    check_reference("output0", outputs["output0"], want, "float32", reduce, context)


def _inputs(input_dict: dict[str, Any], seed: int) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    return {k: rng.uniform(-1, 1, v["shape"]).astype(np.float32) for k, v in input_dict.items()}


@pytest.mark.parametrize("case", list(CASES))
@pytest.mark.parametrize("target", [pytest.param(t, marks=[getattr(pytest.mark, t)] if t != "c" else [], id=t)
                                    for t in EXECUTED])  # fmt: skip
def test_split_schedules_match_numpy(target: str, case: str) -> None:
    require_run(target)
    (ir, input_dict), ref, lines = CASES[case]
    kernel = einc.compile(ir, input_dict, target=target, schedule=script(lines), use_records=False)
    seed = fresh_seed()
    inputs = _inputs(input_dict, seed)
    _check(kernel(**{k: v.copy() for k, v in inputs.items()}), inputs, ref, 48, f"{case} on {target}, seed {seed}")


@pytest.mark.parametrize("case", list(CASES))
@pytest.mark.parametrize("target", [pytest.param(t, marks=getattr(pytest.mark, t)) for t in ("cuda", "hip")])
def test_split_schedules_compile_on_cuda_and_hip(target: str, case: str) -> None:
    require(target)
    (ir, input_dict), _, lines = CASES[case]
    kernel = einc.compile(ir, input_dict, target=target, schedule=script(lines), use_records=False)
    kernel.check()


# ---- the CPU default schedule ------------------------------------------------------------------


@functools.cache
def default_c(case: str) -> Compilation:
    """The default C schedule of a convolution big enough to be register-blocked (`_block_rows`:
    16 columns or more)."""
    ir, input_dict = pad_conv(8, 8, 20, 20) if case == "pad_conv" else transposed(8, 64, 6, 8)
    comp = Compilation(ir, f"<{case}>", input_dict, None, "c", "default")
    comp.run_until("source")
    return comp


DEFAULT_CASES = ("pad_conv", "transposed")


@pytest.mark.parametrize("case", DEFAULT_CASES)
def test_default_schedule_matches_numpy(case: str) -> None:
    comp = default_c(case)
    kernel = einc.compile(comp.source, comp.input_dict, target="c", schedule="default", use_records=False)
    seed = fresh_seed()
    inputs = _inputs(dict(comp.input_dict or {}), seed)
    ref = pad_conv_ref if case == "pad_conv" else transposed_ref
    _check(kernel(**{k: v.copy() for k, v in inputs.items()}), inputs, ref, 128, f"{case}, default, seed {seed}")


def _work(loop: affine.ForOp) -> int:
    """Iterations of `loop`'s body in all (its trip count times its enclosing loops')."""
    n, parent = trip_count(loop) or 1, loop.parent_op()
    while parent is not None:
        if isinstance(parent, affine.ForOp):
            n *= trip_count(parent) or 1
        parent = parent.parent_op()
    return n


@pytest.mark.parametrize("case", DEFAULT_CASES)
def test_default_schedule_vector_loops_read_no_condition(case: str) -> None:
    """The vectorized loops of the default C schedule: most of their work (the interior) in
    loops that read no condition; the transposed convolution's read none at all (each output
    phase keeps only the taps that reach it)."""
    comp = default_c(case)
    scheduled = comp.results["scheduled"]
    vector = [op for op in scheduled.walk() if isinstance(op, affine.ForOp) and VECTORIZE_ATTR in op.attributes]
    assert vector
    guarded = [op for op in vector if any(isinstance(o, scf.IfOp | arith.CmpiOp) for o in op.walk())]
    total, boundary = sum(map(_work, vector)), sum(map(_work, guarded))
    assert boundary <= 0.25 * total, (boundary, total)
    if case == "transposed":
        assert not guarded
        assert not any(isinstance(o, scf.IfOp | arith.CmpiOp) for o in scheduled.walk())
        source = comp.results["source"]
        assert "einc_floordiv" not in source and "einc_mod" not in source


def test_default_transposed_convolution_is_a_dense_blocked_nest_per_phase() -> None:
    """The CPU default splits the transposed convolution into its 4 output phases before
    register blocking (split_phases, distribute): 4 nests, each a dense 2x2-tap convolution
    blocked like any other: an output tile staged in registers (cache_write), the filter
    packed, a parallel loop, a vector loop over the channels; no `%` or `/` left in the C."""
    comp = default_c("transposed")
    scheduled, source, text = comp.results["scheduled"], comp.results["source"], comp.schedule_text
    assert text.count("transform.einc.distribute") >= 2 and "split_phases" in text
    (f,) = [op for op in scheduled.walk() if isinstance(op, func.FuncOp)]
    nests = [op for op in f.body.block.ops if isinstance(op, affine.ForOp) and "einc.init" not in op.attributes]
    assert len(nests) == 4
    for nest in nests:
        ops = list(nest.walk())
        assert any(isinstance(o, affine.ForOp) and PARALLEL_ATTR in o.attributes for o in ops)
        assert any(isinstance(o, affine.ForOp) and VECTORIZE_ATTR in o.attributes for o in ops)
        staged = {o.memref.name_hint for o in ops if isinstance(o, memref.AllocaOp)}
        assert {"output0_local", "input1_local"} <= staged, staged
        taps = [o for o in ops if isinstance(o, affine.ForOp) and str(o.attributes.get("einc.axis")) in ('"KH"', '"KW"')]
        assert taps and all((trip_count(t) or 0) <= 2 for t in taps)  # 2x2 taps of the 4x4 window per phase
    assert "%" not in source and " / " not in source
    assert "output0_local" in source and "#pragma omp parallel" in source


def test_default_transposed_convolution_in_a_batch_runs_every_phase_per_image() -> None:
    """In a batch, the fill and the 4 phase nests are fused into one parallel batch loop
    (`fuse_fills`): each image runs every phase while its outputs are in cache, and since
    the phases' tiles cover each image's outputs, `einc-init-accumulators` drops the fill and
    every tile starts at zero. The C never zeroes nor reads the output: it only copies the
    tiles out. The numbers are the reference's."""
    ir, input_dict = transposed(8, 32, 4, 8)
    input_dict["input0"]["shape"][0] = 16
    comp = Compilation(ir, "<transposed batch>", input_dict, None, "c", "default")
    source = comp.run_until("source")
    kernel = source[source.index("void kernel("):]
    assert kernel.count("#pragma omp parallel for") == 1 and kernel.count("for (int64_t N = 0; N < 16; N++)") == 1, kernel
    uses = [line.strip() for line in source.splitlines() if re.search(r"\boutput0\[", line)]
    assert len(uses) >= 4 and all(re.fullmatch(r"output0\[[^\]]*\] = output0_local\[[^\]]*\];", u) for u in uses), uses
    inputs = _inputs(input_dict, 22)
    _check(comp.kernel()(**{k: v.copy() for k, v in inputs.items()}), inputs, transposed_ref, 128, "batch 16, default")


# ---- refusals ----------------------------------------------------------------------------------

MATMUL = "output0[N, M] +=! input0[N, K] * input1[K, M]"


@pytest.mark.parametrize(("lines", "message"), [
    (['%k = transform.einc.match stmt "output0" axis "K" in %root', "%p = transform.einc.split_phases %k by 2"],
     "cannot phase-split loop K of output0: its iterations both access 'output0' (a carried dependence that the phases would reorder)"),
    (['%n = transform.einc.match stmt "output0" axis "N" in %root', "%p = transform.einc.split_phases %n by 0"],
     "phase count must be positive, got 0"),
    (['%n = transform.einc.match stmt "output0" axis "N" in %root', "%p = transform.einc.split_phases %n by 17"],
     "cannot phase-split loop N of output0 by 17: at most 16 phases"),
    (['%n = transform.einc.match stmt "output0" axis "N" in %root', "%o, %i = transform.einc.tile %n by 3",
      "%p = transform.einc.split_conditions %i"],
     "cannot split loop N.i of output0: its bounds are not constant"),
    (['%n = transform.einc.match stmt "output0" axis "N" in %root', "%o, %i = transform.einc.tile %n by 3",
      "%p = transform.einc.split_phases %i by 2"],
     "cannot phase-split loop N.i of output0: its bounds are not constant"),
])  # fmt: skip
def test_refusals_are_located_at_the_op(lines: list[str], message: str) -> None:
    inputs = {"input0": f32(8, 6), "input1": f32(6, 5)}
    with pytest.raises(ScheduleError) as err:
        Compilation(MATMUL, "<t>", inputs, None, "c", script(lines)).run_until("scheduled")
    assert err.value.message == message
    assert err.value.loc is not None and err.value.loc.line == 3 + len(lines) - 1


def test_nothing_to_split_leaves_the_loop_whole() -> None:
    """A loop along which no comparison changes stays whole (a tuned tile size may leave a
    loop without a boundary: the schedule must still apply); a phase split by more than the
    trip count keeps one phase per iteration."""
    inputs = {"input0": f32(8, 6), "input1": f32(6, 5)}
    lines = ['%n = transform.einc.match stmt "output0" axis "N" in %root', "%p = transform.einc.split_conditions %n",
             '%m = transform.einc.match stmt "output0" axis "M" in %root', "%q = transform.einc.split_phases %m by 7",
             "transform.einc.parallelize %p"]  # fmt: skip
    kernel = einc.compile(MATMUL, inputs, target="c", schedule=script(lines), use_records=False)
    seed = fresh_seed()
    values = _inputs(inputs, seed)
    got = kernel(**values)["output0"]
    check_reference("output0", got, values["input0"].astype(np.float64) @ values["input1"], "float32", 6, f"seed {seed}")
    scheduled = Compilation(MATMUL, "<t>", inputs, None, "c", script(lines)).run_until("scheduled")
    tags = [op.attributes["einc.axis"] for op in scheduled.walk() if isinstance(op, affine.ForOp) and "einc.init" not in op.attributes]
    assert [str(t) for t in tags].count('"N"') == 1 and [str(t) for t in tags].count('"M"') == 5


def test_a_split_loop_keeps_its_order_and_tags() -> None:
    """split_phases of a parallel loop and split_conditions keep the statement's numbers and
    the loops' tags (a later match finds every piece)."""
    ir, input_dict = pad_conv(2, 2, 5, 5)
    lines = [*CUTS, '%w = transform.einc.match stmt "output0" axis "WO" in %root', "transform.einc.parallelize %w"]
    comp = Compilation(ir, "<t>", input_dict, None, "c", script(lines))
    scheduled = comp.run_until("scheduled")
    wo = [op for op in scheduled.walk() if isinstance(op, affine.ForOp) and op.attributes.get("einc.axis").data == "WO"
          and "einc.init" not in op.attributes]  # fmt: skip
    assert len(wo) == 9 and all(PARALLEL_ATTR in op.attributes for op in wo)


STEM = (
    "output0[N, F, HO, WO] +=! (input0[N, C, HO * 2 + KH - 3, WO * 2 + KW - 3].when([HO * 2 + KH - 3 >= 0, "
    "HO * 2 + KH - 3 < 64, WO * 2 + KW - 3 >= 0, WO * 2 + KW - 3 < 64], 0.0) * input1[F, C, KH, KW]) where HO in 32, WO in 32"
)


def stem_ref(a: dict[str, np.ndarray]) -> np.ndarray:
    x = np.pad(a["input0"], ((0, 0), (0, 0), (3, 3), (3, 3)))
    win = np.lib.stride_tricks.sliding_window_view(x, (7, 7), axis=(2, 3))[:, :, ::2, ::2]
    return np.einsum("nchwij,fcij->nfhw", win, a["input1"])


def test_default_row_chunks_keep_their_boundary_chunks_parallel(monkeypatch: pytest.MonkeyPatch) -> None:
    """A 7x7 stride-2 convolution padded by 3 at batch 1 with few channel tiles (a ResNet
    stem, smaller): the CPU default runs its output rows in parallel chunks, and the padding's
    first and last chunk stay iterations of the parallel loop (`split_conditions ... inside`:
    branches on the chunk), not pieces run by one thread beside it. The row tests of the
    boundary chunks are inside the parallel loop; the numbers are NumPy's."""
    monkeypatch.setenv("EINC_C_VECTOR_BITS", "256")  # the row chunks (`_parallel_chunks`) at this width
    input_dict = {"input0": f32(1, 3, 64, 64), "input1": f32(16, 3, 7, 7)}
    comp = Compilation(STEM, "<stem>", input_dict, None, "c", "default")
    kernel = comp.kernel()
    scheduled = comp.results["scheduled"]
    nest = [op for op in scheduled.walk() if isinstance(op, affine.ForOp) and "einc.init" not in op.attributes]
    (chunks,) = [op for op in nest if PARALLEL_ATTR in op.attributes]
    axis = chunks.attributes["einc.axis"]
    assert [op for op in nest if op.attributes.get("einc.axis") == axis] == [chunks]  # no chunk loop beside it
    assert trip_count(chunks) == 8  # all 8 chunks of 4 rows
    guards = [found for op in chunks.walk() if isinstance(op, scf.IfOp) and (found := iv_guard(op)) is not None]
    assert [c for x, c in guards if x is chunks.body.block.args[0]] == [4, 28]  # first chunk; interior; last chunk
    tests = [op for op in scheduled.walk() if isinstance(op, arith.CmpiOp)]
    assert tests and all(chunks.is_ancestor(op) for op in tests)
    # the output tiles start at zero in the branches too (einc-init-accumulators): no fill
    # nest (its own parallel loop) before the convolution
    assert kernel.source.count("#pragma omp parallel") == 1
    seed = fresh_seed()
    inputs = _inputs(input_dict, seed)
    _check(kernel(**{k: v.copy() for k, v in inputs.items()}), inputs, stem_ref, 147, f"stem, default, seed {seed}")


# ---- the affine simplification ------------------------------------------------------------------


def test_canonical_folds_multiples_of_the_divisor() -> None:
    d0, d1 = AffineExpr.dimension(0), AffineExpr.dimension(1)
    assert str(canonical((d0 * 2 + 3) % 2)) == "1"
    assert str(canonical((d0 * 2 + d1 * 4 + 3) // 2)) == str(canonical(d0 + d1 * 2 + 1))
    assert str(canonical((d0 * 2 - d1 + 1) % 2)) == str((d1 + 1) % 2)
    # (2*d0 - d1 + 1) // 2 == d0 - d1 + (d1 + 1) // 2 for every integer d0, d1
    m = AffineMap(2, 0, (canonical((d0 * 2 - d1 + 1) // 2),))
    for x in range(-3, 4):
        for y in range(-5, 6):
            assert m.eval([x, y], []) == ((2 * x - y + 1) // 2,)
