"""Packing copies that transpose become W x W vector tiles on C (issue 26: the filter of a 3x3
convolution on a 7x7 map, packed with its output channels innermost, was a scalar transpose
GCC does not vectorize). `einc-vectorize-loops` on a target with `vector_shuffle` rewrites a
staging copy whose destination moves by 1 along one loop and whose source moves by 1 along a
run of others (einc.transforms.transpose_copy): W row loads, log2(W) stages of W
`egpu.vshuffle`s, W column stores. Checked: the generated C's shape, NumPy's numbers from the
C kernel and from the egpu interpreter (the shuffles' meaning), the W x W transpose masks,
and the refusals (the copy left scalar)."""

from __future__ import annotations

import re
from typing import Any

import numpy as np
import pytest
from xdsl.dialects import affine
from xdsl.dialects.builtin import IntegerAttr

from einc.compiler.driver import Compilation
from einc.semantics.compare import max_error, tolerance
from einc.semantics.egpu import run_lowered
from einc.semantics.reference import run_reference
from einc.targets.c import CTarget
from einc.transforms.loop_build import Failure
from einc.transforms.transpose_copy import transpose_copy, transpose_masks

C_LANES = CTarget.vector_lanes()
CONV = ("output0[N, F, HO, WO] +=! (input0[N, C, HO + KH - 1, WO + KW - 1].when([HO + KH - 1 >= 0, HO + KH - 1 < 3, "
        "WO + KW - 1 >= 0, WO + KW - 1 < 3], 0.0) * input1[F, C, KH, KW]) where HO in 3, WO in 3")  # fmt: skip
INPUTS = {"input0": {"dtype": "float32", "shape": [1, 16, 3, 3]},
          "input1": {"dtype": "float32", "shape": [16, 16, 3, 3]}}  # fmt: skip


def _conv(a: dict[str, np.ndarray]) -> np.ndarray:
    x = np.pad(a["input0"], [(0, 0), (0, 0), (1, 1), (1, 1)])
    win = np.lib.stride_tricks.sliding_window_view(x, (3, 3), axis=(2, 3))
    return np.einsum("nchwij,fcij->nfhw", win, a["input1"])


@pytest.fixture(scope="module")
def conv() -> Compilation:
    """A 3x3 convolution on a 3x3 map, 16 -> 16 channels: blocked over output channels, the
    filter packed [C, KH, KW, F] (a 16 x 144 transpose per tile)."""
    comp = Compilation(CONV, "<conv>", INPUTS, None, "c", use_records=False)
    comp.run_until("source")
    return comp


def _arrays(seed: int) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    return {k: rng.uniform(-1, 1, v["shape"]).astype(np.float32) for k, v in INPUTS.items()}


@pytest.mark.skipif(C_LANES < 4, reason="no vectors of 4 float lanes or more on this host")
def test_the_packed_filter_is_copied_as_vector_transposes(conv: Compilation) -> None:
    source = conv.run_until("source")
    start = source.index("float input1_local[")
    copy = source[start : source.index("output0_local", start)]  # the packing, up to the output tile
    width = min(C_LANES, 16)
    assert f"einc_vload_f32x{width}(&input1[" in copy and f"einc_vstore_f32x{width}(&input1_local[" in copy, copy
    assert copy.count("__builtin_shufflevector(") == width * (width.bit_length() - 1), copy
    assert not re.search(r"input1_local\[[^\]]*\] = ", copy), copy  # no scalar copy left
    assert "/" not in copy and "%" not in copy, copy  # the run's floordiv/mod merged into flat positions


def test_the_kernel_and_the_egpu_interpreter_give_numpys_numbers(conv: Compilation) -> None:
    for seed in (0, 1):
        arrays = _arrays(seed)
        want = _conv({k: v.astype(np.float64) for k, v in arrays.items()})
        got = conv.kernel()(**arrays)["output0"]
        assert max_error(got, want) <= tolerance("float32"), conv.run_until("source")
    arrays = _arrays(2)
    lowered = run_lowered(conv.results["target"], arrays, target="c")
    oracle = run_reference(conv.module("ein"), arrays)
    assert max_error(lowered["output0"], oracle["output0"]) <= tolerance("float32")


@pytest.mark.parametrize("width", [4, 8, 16])
def test_the_masks_transpose(width: int) -> None:
    rows = [np.arange(width) + width * i for i in range(width)]
    for half, lo, hi in transpose_masks(width):
        new = list(rows)
        for i in range(width):
            if not i & half:
                both = np.concatenate([rows[i], rows[i + half]])
                new[i], new[i + half] = both[lo], both[hi]
        rows = new
    assert (np.array(rows) == np.arange(width * width).reshape(width, width).T).all()


def _nest(text: str) -> affine.ForOp:
    from xdsl.parser import Parser

    from einc.dialects.context import make_context

    module = Parser(make_context(), text).parse_module()
    return next(op for op in module.walk() if isinstance(op, affine.ForOp))


@pytest.mark.parametrize("body, why", [
    # a run of 6 elements: no multiple of 16 (or 8, 4) lanes
    ("affine.for %i = 0 to 16 {\n affine.for %j = 0 to 6 {\n"
     " %v = affine.load %a[%i, %j] : memref<16x6xf32>\n affine.store %v, %b[%j, %i] : memref<6x16xf32>\n } }",
     "no multiple"),
    # not a copy: the value is computed
    ("affine.for %i = 0 to 16 {\n affine.for %j = 0 to 16 {\n %v = affine.load %a[%i, %j] : memref<16x16xf32>\n"
     " %w = arith.addf %v, %v : f32\n affine.store %w, %b[%j, %i] : memref<16x16xf32>\n } }", "no copy nest"),
    # a copy that does not transpose
    ("affine.for %i = 0 to 16 {\n affine.for %j = 0 to 16 {\n"
     " %v = affine.load %a[%i, %j] : memref<16x16xf32>\n affine.store %v, %b[%i, %j] : memref<16x16xf32>\n } }",
     "no transposing copy"),
])  # fmt: skip
def test_other_nests_are_refused_untouched(body: str, why: str) -> None:
    shapes = re.findall(r"memref<[^>]*>", body)
    text = f"func.func @f(%a: {shapes[0]}, %b: {shapes[-1]}) {{\n{body}\n func.return\n}}"
    loop = _nest(text)
    before = str(loop)
    done = transpose_copy(loop, 16)
    assert isinstance(done, Failure) and why in done.message, done
    assert str(loop) == before


COPY_OUT = ("func.func @f(%a: memref<{r}x8x2xf32>, %b: memref<2x8x{r}xf32>) {{\n"
            " affine.for %p = 0 to {r} {{\n affine.for %f = 0 to 8 {{\n affine.for %g = 0 to 2 {{\n"
            " %v = affine.load %a[%p, %f, %g] : memref<{r}x8x2xf32>\n"
            " affine.store %v, %b[%g, %f, %p] : memref<2x8x{r}xf32>\n }} }} }}\n func.return\n}}")  # fmt: skip
"""The pair form's copy-out: a tile of r pixels x 16 lanes (lane 2 f + g) back to the
output's [group, channel, pixel] order; the run's two loops move the destination by r and
8 r, no multiple of one another's trip counts."""


def test_a_partial_tile_with_scattered_rows_is_transposed_into_partial_stores() -> None:
    """14 pixels of 16 lanes (over half a tile, on a target with a one-instruction partial
    store of 64 bytes): 14 row loads (the two missing rows repeat the
    last), the 16 x 16 transpose, 16 stores of their first 14 lanes (`egpu.lanes`), each at
    its own row of the destination (g * 8 r + f * r)."""
    from einc.dialects import egpu
    from einc.ir.attrs import STORE_LANES_ATTR

    loop = _nest(COPY_OUT.format(r=14))
    assert isinstance(transpose_copy(loop, 16), Failure)  # no partial store on the target: refused
    done = transpose_copy(loop, 16, partial_bytes=64)
    assert not isinstance(done, Failure), done
    ops = list(done.walk())
    assert sum(isinstance(op, egpu.VLoadOp) for op in ops) == 14
    stores = [op for op in ops if isinstance(op, egpu.VStoreOp)]
    marks = [op.attributes.get(STORE_LANES_ATTR) for op in stores]
    assert len(stores) == 16 and all(isinstance(m, IntegerAttr) and m.value.data == 14 for m in marks), marks


def test_a_tile_of_half_the_lanes_or_less_stays_scalar() -> None:
    loop = _nest(COPY_OUT.format(r=8))
    before = str(loop)
    done = transpose_copy(loop, 16, partial_bytes=64)
    assert isinstance(done, Failure) and "no transposing copy" in done.message, done
    assert str(loop) == before


def _grouped(h: int, w: int) -> tuple[str, dict[str, Any]]:
    ir = (f"output0[N, F, HO, WO] +=! input0[N, F // 8 * 8 + C, HO + KH - 1, WO + KW - 1]"
          f".when([HO + KH - 1 >= 0, HO + KH - 1 < {h}, WO + KW - 1 >= 0, WO + KW - 1 < {w}], 0.0)"
          f" * input1[F, C, KH, KW] where HO in {h}, WO in {w}")  # fmt: skip
    return ir, {"input0": {"dtype": "float32", "shape": [1, 32, h, w]}, "input1": {"dtype": "float32", "shape": [32, 8, 3, 3]}}


@pytest.mark.parametrize("h, w", [(3, 9), (2, 13)])
def test_the_grouped_pair_forms_copy_out_gives_numpys_numbers(h: int, w: int) -> None:
    """The grouped convolution (groups of 8 channels) by the CPU default: on a host of 16
    float lanes its pair form, whose output tile (w columns, not a multiple of 16) is copied
    out as one partial 16 x 16 transpose (16 AVX-512 masked stores of w lanes, no scalar
    copy left); NumPy's numbers from the kernel and from the egpu interpreter (the partial
    stores' meaning) on every host."""
    ir, inputs = _grouped(h, w)
    comp = Compilation(ir, "<grouped>", inputs, None, "c", use_records=False)
    source = comp.run_until("source")
    if "einc_vrepeat64_f32x16(&input0_local[" in source:  # the pair form (512-bit FMA hosts)
        # 16 per copy of the row loop (einc-unswitch may version it: the row-by-row pack's guard)
        stores = len(re.findall(rf"einc_vstoren_f32x16\(&output0\[[^;]*, {w}\);", source))
        assert stores and stores % 16 == 0, source
        assert not re.search(r"output0\[[^\]]*\] = output0_local\[", source), source
    rng = np.random.default_rng(h * w)
    arrays = {k: rng.uniform(-1, 1, v["shape"]).astype(np.float32) for k, v in inputs.items()}
    x = np.pad(arrays["input0"].astype(np.float64), ((0, 0), (0, 0), (1, 1), (1, 1)))
    win = np.lib.stride_tricks.sliding_window_view(x, (3, 3), axis=(2, 3)).reshape(1, 4, 8, h, w, 3, 3)
    want = np.einsum("ngchwij,gfcij->ngfhw", win, arrays["input1"].astype(np.float64).reshape(4, 8, 8, 3, 3))
    want = want.reshape(1, 32, h, w)
    assert max_error(comp.kernel()(**arrays)["output0"], want) <= tolerance("float32"), source
    lowered = run_lowered(comp.results["target"], arrays, target="c")
    assert max_error(lowered["output0"], want) <= tolerance("float32")


FILTER = ("func.func @f(%a: memref<2x8x{c}x3xf32>, %b: memref<{c}x3x8x2xf32>) {{\n"
          " affine.for %c = 0 to {c} {{\n affine.for %k = 0 to 3 {{\n affine.for %f = 0 to 8 {{\n"
          " affine.for %g = 0 to 2 {{\n %v = affine.load %a[%g, %f, %c, %k] : memref<2x8x{c}x3xf32>\n"
          " affine.store %v, %b[%c, %k, %f, %g] : memref<{c}x3x8x2xf32>\n }} }} }} }}\n func.return\n}}")  # fmt: skip
"""The pair form's filter pack: lanes 2 f + g (two loops, g moving the destination by 1 and
f by 2), a run of 3 c source columns per row."""


@pytest.mark.parametrize("c", [7, 5, 2])
def test_the_pair_forms_filter_pack_takes_two_lane_loops_and_a_partial_run(c: int) -> None:
    """A run of 21 columns: one whole tile of 16 columns and a partial one (masked loads of its
    5 columns, 5 stores), on a target with partial vectors; refused (untouched) without them.
    Runs of 15 and 6, under one tile, are refused on either."""
    from einc.dialects import egpu
    from einc.ir.attrs import STORE_LANES_ATTR

    run = 3 * c
    loop = _nest(FILTER.format(c=c))
    before = str(loop)
    assert isinstance(transpose_copy(loop, 16), Failure)
    assert str(loop) == before
    done = transpose_copy(loop, 16, partial_bytes=64)
    if run < 16:
        assert isinstance(done, Failure) and "no multiple" in done.message, done
        assert str(loop) == before
        return
    assert not isinstance(done, Failure), done
    ops = list(done.walk())
    loads = [op for op in ops if isinstance(op, egpu.VLoadOp)]
    stores = [op for op in ops if isinstance(op, egpu.VStoreOp)]
    masked = [op.attributes[STORE_LANES_ATTR] for op in loads if STORE_LANES_ATTR in op.attributes]
    assert len(loads) == 16 * (run // 16) + 16 and len(masked) == 16, loads
    assert all(isinstance(m, IntegerAttr) and m.value.data == run % 16 for m in masked), masked
    assert len(stores) == run and not any(STORE_LANES_ATTR in op.attributes for op in stores)
