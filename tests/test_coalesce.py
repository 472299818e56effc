"""transform.einc.coalesce (einc/transforms/coalesce.py): random schedules using the op on C
and OpenCL against NumPy (float64 reference, fresh random inputs), the shape of the C of a
coalesced 1x1 convolution (the coalesced loop present, no `/` or `%` where its index is
contiguous), the flat-index simplification on its own, and the refusals."""

from __future__ import annotations

import random
import re

import numpy as np
import pytest
from xdsl.ir.affine import AffineExpr

from einc.compiler.driver import Compilation
from einc.errors import ScheduleError
from einc.transforms.affine_index import simplify_flat
from tests.oracle.compare import Expected
from tests.oracle.corpus import Case, check_case

CONV1X1 = "output0[N, F, HO, WO] +=! input0[N, C, HO, WO] * input1[F, C] where HO in 3, WO in 6"
CONV1X1_INPUTS = {"input0": {"dtype": "float32", "shape": [2, 5, 3, 6]}, "input1": {"dtype": "float32", "shape": [8, 5]}}
PAD3X3 = ("output0[N, F, HO, WO] +=! input0[N, C, HO + KH - 1, WO + KW - 1].when([HO + KH - 1 >= 0, HO + KH - 1 < 4, "
          "WO + KW - 1 >= 0, WO + KW - 1 < 5], 0.0) * input1[F, C, KH, KW] where HO in 4, WO in 5")  # fmt: skip
PAD3X3_INPUTS = {"input0": {"dtype": "float32", "shape": [2, 3, 4, 5]}, "input1": {"dtype": "float32", "shape": [4, 3, 3, 3]}}
ADD3 = "output0[F, H, W] = input0[F, H, W] * 2.0 + input1[H, W]"
ADD3_INPUTS = {"input0": {"dtype": "float32", "shape": [3, 4, 5]}, "input1": {"dtype": "float32", "shape": [4, 5]}}


def _conv1x1(a: dict[str, np.ndarray]) -> np.ndarray:
    return np.einsum("nchw,fc->nfhw", a["input0"], a["input1"])


def _pad3x3(a: dict[str, np.ndarray]) -> np.ndarray:
    x = np.pad(a["input0"], ((0, 0), (0, 0), (1, 1), (1, 1)))
    w = a["input1"]
    out = np.zeros((2, 4, 4, 5))
    for kh in range(3):
        for kw in range(3):
            out += np.einsum("nchw,fc->nfhw", x[:, :, kh : kh + 4, kw : kw + 5], w[:, :, kh, kw])
    return out


def _add3(a: dict[str, np.ndarray]) -> np.ndarray:
    return a["input0"] * 2.0 + a["input1"]


PROGRAMS = {
    # name: (program, inputs, reference, the nest's axes outermost first, its statement's output)
    "conv1x1": (CONV1X1, CONV1X1_INPUTS, _conv1x1, ["N", "F", "HO", "WO"]),
    "pad3x3": (PAD3X3, PAD3X3_INPUTS, _pad3x3, ["N", "F", "HO", "WO"]),
    "add3": (ADD3, ADD3_INPUTS, _add3, ["F", "H", "W"]),
}


def random_coalesce_script(name: str, rng: random.Random) -> str:
    """A random schedule of `name`'s nest around a coalesce: which loop and how many below it,
    then a tile of the coalesced loop (any size: dividing or with a `min` tail), an unroll,
    a parallel loop, a staged output tile, or a vectorized inner loop."""
    axes = PROGRAMS[name][3]
    start = rng.randrange(len(axes) - 1)
    depth = rng.randint(2, len(axes) - start)
    lines = [f'%a = transform.einc.match stmt "output0" axis "{axes[start]}" in %root',
             f"%p = transform.einc.coalesce %a by {depth}"]  # fmt: skip
    innermost = start + depth == len(axes) and name == "add3"
    follow = rng.choice(["tile", "tile", "parallel", "unroll", "stage", "vector"])
    if follow in ("tile", "stage", "vector") or (follow == "unroll" and not innermost):
        lines.append(f"%o, %i = transform.einc.tile %p by {rng.choice([2, 3, 4, 5, 8])}")
        if follow == "stage":
            lines.append('%s = transform.einc.cache_write "output0" at %o')
        elif follow == "vector" and innermost:
            lines.append("transform.einc.vectorize %i")
        elif follow == "unroll":
            lines.append("%u = transform.einc.unroll %i by 2")
    # the loop above the coalesced one in parallel (the dependence test does not see through
    # a coalesced index's floordiv and mod: a coalesced loop itself is refused)
    if start > 0 and (follow == "parallel" or rng.random() < 0.3):
        lines.append(f'%q = transform.einc.match stmt "output0" axis "{axes[0]}" in %root')
        lines.append("transform.einc.parallelize %q")
    elif follow == "unroll":
        lines.append("%u = transform.einc.unroll %p by 2")
    body = "\n".join(f"  {line}" for line in lines)
    return f"transform.named_sequence @__transform_main(%root: !transform.any_op) {{\n{body}\n  transform.yield\n}}"


def _case(name: str, target: str, seed: int) -> Case:
    program, input_dict, reference, _ = PROGRAMS[name]
    script = random_coalesce_script(name, random.Random(seed))
    data = np.random.default_rng(seed)
    inputs = {k: data.uniform(-1, 1, v["shape"]).astype(np.float32) for k, v in input_dict.items()}
    value = reference({k: v.astype(np.float64) for k, v in inputs.items()})
    # float32 rounding of every product and partial sum, in any order: a bound of 32 ulps of
    # the sum of the terms' magnitudes
    magnitude = reference({k: np.abs(v.astype(np.float64)) for k, v in inputs.items()})
    expected = {"output0": Expected("float32", value, err=32 * float(np.finfo(np.float32).eps) * magnitude)}
    return Case(program, input_dict, None, script, target, seed, inputs, expected, origin="test_coalesce")


SEEDS = range(6)


@pytest.mark.parametrize("target", ["c", "opencl"])
@pytest.mark.parametrize("name", sorted(PROGRAMS))
def test_random_coalesce_schedules_match_numpy(name: str, target: str) -> None:
    """Random schedules around a coalesce (any nest depth and start, tiles dividing or not,
    parallel, unrolled, staged, vectorized) compute the reference's numbers on C and OpenCL."""
    for seed in SEEDS:
        case = _case(name, target, seed)
        refused = check_case(case)
        assert refused is None, f"{case.reproducer()}\nrefused: {refused.render() if refused else ''}"


MATMUL_LIKE = {
    # the 1x1 convolution blocked like a matmul along the coalesced HO x WO (18 points of
    # rows of 6): the reduction above it, the coalesced loop vectorized (vectors across rows)
    "vector": ['%ho = transform.einc.match stmt "output0" axis "HO" in %root',
               "%p = transform.einc.coalesce %ho by 2",
               '%c = transform.einc.match stmt "output0" axis "C" in %root',
               "%r0, %r1 = transform.einc.reorder %c, %p",
               "transform.einc.vectorize %r1"],
    # tiled by 9 (tiles across rows), the output tile and the input panel staged at the tile
    # loop (boxes of the merged HO x WO), the channels' tiles unrolled above the vector loop
    "staged": ['%ho = transform.einc.match stmt "output0" axis "HO" in %root',
               "%p = transform.einc.coalesce %ho by 2",
               "%o, %i = transform.einc.tile %p by 9",
               '%c = transform.einc.match stmt "output0" axis "C" in %root',
               '%f = transform.einc.match stmt "output0" axis "F" in %root',
               "%fo, %fi = transform.einc.tile %f by 4",
               "%r0, %r1, %r2, %r3, %r4 = transform.einc.reorder %fo, %o, %c, %fi, %i",
               '%s = transform.einc.cache_write "output0" at %r1',
               '%t = transform.einc.cache_read "input0" at %r1',
               "%u = transform.einc.unroll %r3 by 4",
               '%v = transform.einc.match stmt "output0" axis "HO.WO.i" in %root',
               "transform.einc.vectorize %v",
               "transform.einc.parallelize %r0"],
}  # fmt: skip


@pytest.mark.parametrize("target", ["c", "opencl"])
@pytest.mark.parametrize("schedule", sorted(MATMUL_LIKE))
def test_coalesced_matmul_like_schedules_match_numpy(schedule: str, target: str) -> None:
    """The coalesced 1x1 convolution vectorized along HO x WO (vector accesses across rows),
    tiled, staged and unrolled, on C and OpenCL."""
    body = "\n".join(f"  {line}" for line in MATMUL_LIKE[schedule])
    script = f"transform.named_sequence @__transform_main(%root: !transform.any_op) {{\n{body}\n  transform.yield\n}}"
    case = _case("conv1x1", target, 7)
    case.schedule = script
    refused = check_case(case)
    assert refused is None, f"{case.reproducer()}\nrefused: {refused.render() if refused else ''}"


def test_vector_loop_over_coalesced_index_has_no_division() -> None:
    """Vectorized along the coalesced loop: the vector loads and stores index the flat
    `HOxWO` (a vector may span two rows), no `/` or `%` in the loop."""
    source = _coalesced_source(CONV1X1, CONV1X1_INPUTS, MATMUL_LIKE["vector"])
    loop = _loop_body(source, r"for \(int64_t HOxWO = 0; HOxWO < \d+; HOxWO \+= \d+\)")  # vectors of the host's width
    assert re.search(r"einc_vload_f32x\d+\(&input0\[N \* 90 \+ C \* 18 \+ HOxWO\]\)", loop), loop
    assert re.search(r"einc_vstore_f32x\d+\(&output0\[N \* 144 \+ F \* 18 \+ HOxWO\]", loop), loop
    assert "/" not in loop and "%" not in loop, loop


def _coalesced_source(program: str, inputs: dict, lines: list[str]) -> str:
    body = "\n".join(f"  {line}" for line in lines)
    script = f"transform.named_sequence @__transform_main(%root: !transform.any_op) {{\n{body}\n  transform.yield\n}}"
    return Compilation(program, input_dict=inputs, schedule=script, use_records=False).run_until("source")


def _loop_body(source: str, header: str) -> str:
    """The text of the loop whose header line matches `header` (a regex), to its closing brace."""
    lines = source.splitlines()
    start = next(k for k, line in enumerate(lines) if re.search(header, line))
    indent = len(lines[start]) - len(lines[start].lstrip())
    end = next(k for k in range(start + 1, len(lines)) if lines[k].startswith(" " * indent + "}"))
    return "\n".join(lines[start : end + 1])


def test_coalesced_1x1_convolution_indexes_without_division() -> None:
    """HO x WO of a 1x1 convolution as one loop (HOxWO, 18 iterations), blocked over it with
    a vector loop over channels inside: the input and output are indexed at the flat `HOxWO`,
    no `/` or `%` anywhere in the coalesced loop (x[n, c, p floordiv 6, p mod 6] of rows of 6)."""
    source = _coalesced_source(CONV1X1, CONV1X1_INPUTS, [
        '%ho = transform.einc.match stmt "output0" axis "HO" in %root',
        "%p = transform.einc.coalesce %ho by 2",
        '%f = transform.einc.match stmt "output0" axis "F" in %root',
        '%c = transform.einc.match stmt "output0" axis "C" in %root',
        "%r0, %r1, %r2 = transform.einc.reorder %p, %c, %f",
        "transform.einc.vectorize %r2",
    ])  # fmt: skip
    loop = _loop_body(source, r"for \(int64_t HOxWO = 0; HOxWO < 18; HOxWO\+\+\)")
    assert "input0[N * 90 + C * 18 + HOxWO]" in loop, loop
    assert "#pragma omp simd" in loop, loop  # the channels' vector loop, inside
    assert "/" not in loop and "%" not in loop, loop


def test_non_contiguous_coalesced_index_keeps_division() -> None:
    """The flat index merges a floordiv/mod pair only where the row pitch is the divisor: a
    coalesced index over rows of 5 read from rows of 6 keeps its division; an offset row and
    three coalesced loops merge."""
    e = simplify_flat(AffineExpr.dimension(1) * 20 + (AffineExpr.dimension(0) // 5) * 6 + AffineExpr.dimension(0) % 5)
    assert "floordiv" in str(e) and "mod" in str(e)
    d0 = AffineExpr.dimension(0)
    assert str(simplify_flat((d0 // 5 + 2) * 5 + (d0 % 5))) == "(d0 + 10)"
    assert str(simplify_flat((d0 // 20) * 20 + ((d0 // 5) % 4) * 5 + d0 % 5)) == "d0"


@pytest.mark.parametrize("lines, message", [
    (['%k = transform.einc.match stmt "output0" axis "C" in %root', "%p = transform.einc.coalesce %k by 2"],
     "cannot coalesce loop C of output0: loop C of output0 is not a perfect nest of 2 loops"),
    (['%n = transform.einc.match stmt "output0" axis "N" in %root', "%p = transform.einc.coalesce %n by 9"],
     r"coalesce depth must be in \[1, 8\], got 9"),
])  # fmt: skip
def test_coalesce_refusals_are_located(lines: list[str], message: str) -> None:
    with pytest.raises(ScheduleError, match=message) as err:
        _coalesced_source(CONV1X1, CONV1X1_INPUTS, lines)
    assert err.value.loc is not None


# ---- the CPU default policy (einc.schedule.policies.cpu.coalesced_contraction) -------------------

POLICY_CONV = "output0[N, F, HO, WO] +=! input0[N, C, HO, WO] * input1[F, C, KH, KW] where HO in 12, WO in 12, KH in 1, KW in 1"
POLICY_INPUTS = {"input0": {"dtype": "float32", "shape": [2, 5, 12, 12]}, "input1": {"dtype": "float32", "shape": [8, 5, 1, 1]}}


@pytest.fixture(scope="module")
def policy_conv() -> Compilation:
    comp = Compilation(POLICY_CONV, input_dict=POLICY_INPUTS, use_records=False)
    comp.run_until("source")
    return comp


def test_default_coalesces_a_1x1_convolution(policy_conv: Compilation) -> None:
    """A 1x1 convolution whose rows (12 columns) fill no whole vectors but whose plane (144
    points) does: the default coalesces HO x WO and the window into C, blocks it like a
    matmul (the points vectors, output channels unrolled rows of accumulators staged across
    the reduction), its vector loops over the points with no `/` or `%`."""
    source = policy_conv.results["source"]
    assert "HOxWO_o" in source and "CxKHxKW" in source, source
    assert "float output0_local[" in source, source
    vector_loops = [_loop_body(source, re.escape(line.strip())) for line in source.splitlines()
                    if re.search(r"for \(int64_t HOxWO_i = \w+; HOxWO_i < \w+; HOxWO_i \+= \d+\)", line)]  # fmt: skip
    assert vector_loops, source
    for loop in vector_loops:
        assert re.search(r"einc_vload_f32x\d+\(&input0\[N \* 720 \+ \(?CxKHxKW", loop), loop
        assert "/" not in loop and "%" not in loop, loop


def test_default_coalesced_1x1_convolution_matches_numpy(policy_conv: Compilation) -> None:
    data = np.random.default_rng(11)
    inputs = {k: data.uniform(-1, 1, v["shape"]).astype(np.float32) for k, v in POLICY_INPUTS.items()}
    got = policy_conv.kernel()(**inputs)["output0"]
    want = np.einsum("nchw,fc->nfhw", inputs["input0"].astype(np.float64), inputs["input1"][:, :, 0, 0].astype(np.float64))
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)


BMM = "output0[B, N, M] +=! input0[B, N, K] * input1[B, K, M]"
BMM_INPUTS = {"input0": {"dtype": "float32", "shape": [16, 32, 16]}, "input1": {"dtype": "float32", "shape": [16, 16, 32]}}


def test_default_fuses_the_fill_into_the_parallel_batch_loop() -> None:
    """A batched matmul's fill (its einc.init nest) runs inside the contraction's parallel
    batch loop (`fuse_fills`): one parallel loop, each matrix zeroed just before its sums
    instead of a pass over every output first; the numbers are the reference's."""
    comp = Compilation(BMM, input_dict=BMM_INPUTS, use_records=False)
    source = comp.run_until("source")
    kernel = source[source.index("void kernel("):]
    assert kernel.count("#pragma omp parallel for") == 1 and kernel.count("for (int64_t B = 0; B < 16; B++)") == 1, kernel
    data = np.random.default_rng(12)
    inputs = {k: data.uniform(-1, 1, v["shape"]).astype(np.float32) for k, v in BMM_INPUTS.items()}
    got = comp.kernel()(**inputs)["output0"]
    want = inputs["input0"].astype(np.float64) @ inputs["input1"].astype(np.float64)
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)


BATCH1_CONV = "output0[N, F, HO, WO] +=! input0[N, C, HO, WO] * input1[F, C, KH, KW] where HO in 28, WO in 28, KH in 1, KW in 1"
BATCH1_INPUTS = {"input0": {"dtype": "float32", "shape": [1, 7, 28, 28]}, "input1": {"dtype": "float32", "shape": [12, 7, 1, 1]}}


def test_default_coalesced_1x1_convolution_at_batch_1_runs_its_point_tiles_in_parallel() -> None:
    """At batch 1 the batch loop runs once and the point tiles are peeled (784 points: whole
    tiles, then a partial one, with AVX-512's 48-point tiles), so the band under the batch
    loop ends there (`_parallelize_pieces`): the loop of whole point tiles runs in parallel
    (it ran on one core); the numbers are the reference's."""
    comp = Compilation(BATCH1_CONV, input_dict=BATCH1_INPUTS, use_records=False)
    source = comp.run_until("source")
    kernel = source[source.index("void kernel("):]
    assert re.search(r"#pragma omp parallel for\n\s*for \(int64_t HOxWO_o = 0;", kernel), kernel
    data = np.random.default_rng(13)
    inputs = {k: data.uniform(-1, 1, v["shape"]).astype(np.float32) for k, v in BATCH1_INPUTS.items()}
    got = comp.kernel()(**inputs)["output0"]
    want = np.einsum("nchw,fc->nfhw", inputs["input0"].astype(np.float64), inputs["input1"][:, :, 0, 0].astype(np.float64))
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)


PACKED_CONV = "output0[N, F, HO, WO] +=! input0[N, C, HO, WO] * input1[F, C, KH, KW] where HO in 12, WO in 12, KH in 1, KW in 1"
PACKED_INPUTS = {"input0": {"dtype": "float32", "shape": [2, 256, 12, 12]}, "input1": {"dtype": "float32", "shape": [16, 256, 1, 1]}}


def test_default_coalesced_1x1_convolution_packs_its_input_panel(monkeypatch: pytest.MonkeyPatch) -> None:
    """With two channel tiles or more reading each point tile's input (16 output channels,
    rows of 8), the input's k-by-points panel is packed once per k tile (`_block_points`:
    cache_read), k tiled by 128 so that 128 x 48 points fit PANEL_L1_ELEMENTS, and every
    vector loop of the whole point tiles reads the packed panel; the pack reads whole vectors
    with no `/` or `%`; the numbers are the reference's."""
    monkeypatch.setenv("EINC_C_VECTOR_BITS", "512")
    monkeypatch.setenv("EINC_C_FMA_BITS", "512")
    comp = Compilation(PACKED_CONV, input_dict=PACKED_INPUTS, use_records=False)
    source = comp.run_until("source")
    assert "for (int64_t CxKHxKW_o = 0; CxKHxKW_o < 256; CxKHxKW_o += 128)" in source, source
    assert "float input0_local[6144]" in source, source
    pack = _loop_body(source, re.escape("for (int64_t input0_c1 = 0; input0_c1 < 128; input0_c1++) {"))
    assert re.search(r"einc_vload_f32x16\(&input0\[N \* 36864 \+", pack) and "/" not in pack and "%" not in pack, pack
    vector_loops = [_loop_body(source, re.escape(line.strip())) for line in source.splitlines()
                    if "for (int64_t HOxWO_i = 0; HOxWO_i < 48; HOxWO_i += 16)" in line]  # fmt: skip
    assert len(vector_loops) == 8 and all("einc_vload_f32x16(&input0_local[" in loop for loop in vector_loops), source
    data = np.random.default_rng(14)
    inputs = {k: data.uniform(-1, 1, v["shape"]).astype(np.float32) for k, v in PACKED_INPUTS.items()}
    got = comp.kernel()(**inputs)["output0"]
    want = np.einsum("nchw,fc->nfhw", inputs["input0"].astype(np.float64), inputs["input1"][:, :, 0, 0].astype(np.float64))
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)
