"""The pair form's pieces (README, "The convolutions on an Intel Xeon"): `transform.einc.
group_lanes ... interleaved` (the group index fastest, lane `2 f + g`) and `egpu.vload_repeat`
(a run of k consecutive elements repeated over the lanes, which the vectorizer makes from a
load whose last index is `l mod k`), against NumPy on every target: C, OpenCL, SYCL, HLSL
and Poplar compiled and run, CUDA and HIP on the egpu interpreter. The program has the
layouts the pair form stages (the output's and the filter's channels `2 f + g`, the input's
two groups innermost), so the vector loop over the merged loop reads the input as one run of
two values per vector."""

from __future__ import annotations

import re
from typing import Any

import numpy as np
import pytest

from einc.compiler.driver import Compilation
from einc.errors import EincError
from einc.semantics.compare import max_error, tolerance
from einc.semantics.egpu import run_lowered
from tests.test_device_differential import run_on_device
from tests.test_device_targets import require

IR = "output0[N, W, F, G] +=! input0[N, W, C, G] * input1[C, F, G] where G in 2"
INPUTS: dict[str, Any] = {"input0": {"dtype": "float32", "shape": [2, 3, 5, 2]},
                          "input1": {"dtype": "float32", "shape": [5, 8, 2]}}  # fmt: skip
TARGETS = ["c", "opencl", "sycl", "hlsl", "poplar", "cuda", "hip"]


def _schedule(target: str, interleaved: str = " interleaved", vectorize: bool = True) -> str:
    lines = [f'%{a.lower()} = transform.einc.match stmt "output0" axis "{a}" in %root' for a in "NWCGF"]
    lines += ["%r0, %r1, %r2, %r3, %r4 = transform.einc.reorder %n, %w, %c, %g, %f",
              f"%o, %l = transform.einc.group_lanes %r3 by 2{interleaved}"]  # fmt: skip
    if target != "c":
        lines.append('transform.einc.bind %r0 to "thread.x"')
    if vectorize:
        lines.append("transform.einc.vectorize %l")
    return _script(lines)


def _run(comp: Compilation, target: str, arrays: dict[str, np.ndarray]) -> np.ndarray:
    if target == "c":
        return comp.kernel()(**arrays)["output0"]
    if target in ("cuda", "hip"):
        return run_lowered(comp.results["target"], arrays, target=target)["output0"]
    return run_on_device(comp, arrays)["output0"]


@pytest.mark.parametrize("target", TARGETS)
def test_interleaved_lanes_read_the_input_as_a_repeated_pair(target: str) -> None:
    require(target)
    comp = Compilation(IR, "<pairs>", INPUTS, None, target, _schedule(target))
    source = comp.run_until("source")
    ir = str(comp.results["target"])
    if target in ("c", "opencl") or "egpu.vstore" in ir:  # vectorized: the input one run of 2 per vector
        assert re.search(r"egpu\.vload_repeat .* run 2 .*-> vector<\d+xf32>", ir), ir
    if target == "c":
        # one 64-bit broadcast of the pair from the input (no per-lane loads)
        assert re.search(r"einc_vrepeat64_f32x16\(&input0\[[^\]]*% 2\]\)", source), source
        assert "__builtin_memcpy(&q, a, 8)" in source
    rng = np.random.default_rng(26)
    arrays = {k: rng.uniform(-2, 2, v["shape"]).astype(np.float32) for k, v in INPUTS.items()}
    got = _run(comp, target, arrays)
    want = np.einsum("nwcg,cfg->nwfg", arrays["input0"].astype(np.float64), arrays["input1"].astype(np.float64))
    assert max_error(got, want) <= tolerance("float32"), source


def test_interleaved_and_blocked_lanes_compute_the_same() -> None:
    """The same loops grouped without `interleaved` (g = l floordiv |f|): the input's last
    index is then a division (runs of 8 lanes, `vbroadcast_runs`), no repeat; both match
    NumPy, and scalar (unvectorized) interleaved lanes too."""
    rng = np.random.default_rng(27)
    arrays = {k: rng.uniform(-2, 2, v["shape"]).astype(np.float32) for k, v in INPUTS.items()}
    want = np.einsum("nwcg,cfg->nwfg", arrays["input0"].astype(np.float64), arrays["input1"].astype(np.float64))
    for interleaved, vectorize in (("", False), (" interleaved", False)):
        comp = Compilation(IR, "<pairs>", INPUTS, None, "c", _schedule("c", interleaved, vectorize))
        source = comp.run_until("source")
        assert "vrepeat" not in source, source
        assert max_error(comp.kernel()(**arrays)["output0"], want) <= tolerance("float32"), source


def test_a_repeat_the_vectors_do_not_hold_whole_stays_scalar() -> None:
    """`F mod 3` over vectors of 16: not a run repeated from each vector's first lane, so the
    vectorizer leaves the loop scalar (no repeat, no vector load of the input); NumPy's
    numbers."""
    ir = "output0[N, F] +=! input0[N, F % 3] * input1[F] where F in 16"
    inputs = {"input0": {"dtype": "float32", "shape": [2, 3]}, "input1": {"dtype": "float32", "shape": [16]}}
    sched = ("builtin.module {\n  transform.named_sequence @__transform_main(%root: !transform.any_op) {\n"
             '    %f = transform.einc.match stmt "output0" axis "F" in %root\n'
             "    transform.einc.vectorize %f\n    transform.yield\n  }\n}\n")  # fmt: skip
    comp = Compilation(ir, "<r>", inputs, None, "c", sched)
    source = comp.run_until("source")
    assert "vrepeat" not in source and "vload_repeat" not in str(comp.results["target"]), source
    rng = np.random.default_rng(28)
    arrays = {k: rng.uniform(-2, 2, v["shape"]).astype(np.float32) for k, v in inputs.items()}
    a, b = (arrays[k].astype(np.float64) for k in ("input0", "input1"))
    want = a[:, np.arange(16) % 3] * b
    assert max_error(comp.kernel()(**arrays)["output0"], want) <= tolerance("float32"), source


# the grouped convolution of tests/test_group_lanes.py (4 groups of 4 output channels, 3
# input channels a group), staged as the pair form stages it
GROUPED = "output0[N, W, F] +=! input0[N, F // 4 * 3 + C, W] * input1[C, F] where F in 16"
GROUPED_INPUTS: dict[str, Any] = {"input0": {"dtype": "float32", "shape": [2, 12, 5]},
                                  "input1": {"dtype": "float32", "shape": [3, 16]}}  # fmt: skip
STAGED = ['%x = transform.einc.cache_read "input0" at %r1 split 1 by 3 layout [0, 2, 3, 1]',
          '%w = transform.einc.cache_read "input1" at %r1 split 1 by 4 layout [0, 2, 1]',
          '%y = transform.einc.cache_write "output0" at %r1 split 2 by 4 layout [0, 1, 3, 2]']  # fmt: skip


def _pair_schedule(target: str, staged: list[str]) -> str:
    """Pairs of groups outermost (F.q tiled by 2), then group_lanes interleaved over the
    pair's 2 x 4 channels, each tensor staged per pair with its channel split into group x
    channel-in-group and the groups innermost (lane order 2 f + g), the lanes vectorized."""
    lines = _pair_lines(target, [], ["N", "F.q.o", "W", "C", "F.q.i", "F.r"], staged)
    return _script([*lines, "transform.einc.vectorize %l"])


def _pair_lines(target: str, tiles: list[str], order: list[str], staged: list[str]) -> list[str]:
    """F.q tiled by 2 (pairs of groups) and `tiles`, the loops reordered to `order` (%r0,
    %r1, ...), group_lanes interleaved over the one before last (the pair's F.q.i), `staged`,
    the outermost loop bound on a device."""
    lines = ['%q = transform.einc.match stmt "output0" axis "F.q" in %root', "%qo, %qi = transform.einc.tile %q by 2", *tiles]
    lines += [f'%a{k} = transform.einc.match stmt "output0" axis "{a}" in %root' for k, a in enumerate(order)]
    n = len(order)
    lines.append(f"{', '.join(f'%r{k}' for k in range(n))} = transform.einc.reorder {', '.join(f'%a{k}' for k in range(n))}")
    lines.append(f"%o, %l = transform.einc.group_lanes %r{n - 2} by 2 interleaved")
    lines += staged
    if target != "c":
        lines.append('transform.einc.bind %r0 to "thread.x"')
    return lines


def _script(lines: list[str]) -> str:
    body = "\n".join(f"    {line}" for line in [*lines, "transform.yield"])
    return f"builtin.module {{\n  transform.named_sequence @__transform_main(%root: !transform.any_op) {{\n{body}\n  }}\n}}\n"


def _grouped_answer(arrays: dict[str, np.ndarray]) -> np.ndarray:
    a = {k: v.astype(np.float64) for k, v in arrays.items()}
    return np.einsum("ngcw,cgf->nwgf", a["input0"].reshape(2, 4, 3, 5), a["input1"].reshape(3, 4, 4)).reshape(2, 5, 16)


@pytest.mark.parametrize("target", TARGETS)
def test_the_pair_form_staged_with_split_channels(target: str) -> None:
    """cache_read/cache_write `split D by F`: the channel staged as group x channel-in-group
    with the groups innermost. The input's pair of groups side by side (one run of 2 per
    vector: `egpu.vload_repeat`), the filter and the output tile in lane order (`2 f + g`:
    unit-stride vectors), the copies putting the channels back; NumPy's numbers."""
    require(target)
    comp = Compilation(GROUPED, "<pairs>", GROUPED_INPUTS, None, target, _pair_schedule(target, STAGED))
    source = comp.run_until("source")
    ir = str(comp.results["target"])
    if target in ("c", "opencl") or "egpu.vstore" in ir:
        assert re.search(r"egpu\.vload_repeat %input0_local\[.*run 2", ir), ir
        assert re.search(r"egpu\.vload %input1_local", ir) and re.search(r"egpu\.vstore .*%output0_local", ir), ir
    if target == "c":
        # the pair-packed input: [C, W, group of the pair], read by one 64-bit broadcast
        assert "float input0_local[30]" in source
        # copied pixel by pixel, or (512-bit vectors) as the two groups' rows loaded and
        # interleaved (einc.transforms.interleave_copy)
        assert re.search(r"input0_local\[input0_c0 \* 30 \+ input0_c2 \* 10 \+ input0_c3 \* 2 \+ input0_c1\] = "
                         r"|einc_vstoren?_f32x16\(&input0_local\[input0_c0 \* 30 \+ input0_c2 \* 10 \+ ", source), source
        assert re.search(r"einc_vrepeat64_f32x8\(&input0_local\[", source), source
    rng = np.random.default_rng(29)
    arrays = {k: rng.uniform(-2, 2, v["shape"]).astype(np.float32) for k, v in GROUPED_INPUTS.items()}
    assert max_error(_run(comp, target, arrays), _grouped_answer(arrays)) <= tolerance("float32"), source


@pytest.mark.parametrize(("line", "message"), [
    ('%x = transform.einc.cache_read "input0" at %r1 split 1 by 5', "it does not divide its 12 elements"),
    ('%x = transform.einc.cache_read "input0" at %r1 split 1 by 2', "its offset there is not a multiple of 2"),
    ('%y = transform.einc.cache_write "output0" at %r1 split 2 by 2', "not a group times 2 plus a value in 0..1"),
    ('%x = transform.einc.cache_read "input0" at %r1 split 3 by 2', "its tile has 3 dimensions"),
    ('%x = transform.einc.cache_read "input0" at %r1 split 1 by 3 halo', "no read of it inside is guarded by its bounds alone"),
    ('%x = transform.einc.cache_read "input0" at %r1 split 1 by 3 layout [0, 1, 2]', "not a permutation of its 4"),
])  # fmt: skip
def test_split_refusals_are_located(line: str, message: str) -> None:
    """A split the tile cannot take is a located error at the cache op (the schedule's line)."""
    with pytest.raises(EincError, match=re.escape(message)) as caught:
        Compilation(GROUPED, "<pairs>", GROUPED_INPUTS, None, "c", _pair_schedule("c", [line])).run_until("source")
    assert ":13:" in str(caught.value), str(caught.value)


# the grouped convolution padded (3x3 window, pad 1: its reads guarded by their bounds), 4
# groups of 4 output channels, 3 input channels a group: the benchmark's conv2d_grouped in
# small, its input staged per pair of groups with the two groups innermost AND its halo
PADDED = ("output0[N, F, HO, WO] +=! input0[N, F // 4 * 3 + C, HO + KH - 1, WO + KW - 1]"
          ".when([HO + KH - 1 >= 0, HO + KH - 1 < 5, WO + KW - 1 >= 0, WO + KW - 1 < 6], 0.0)"
          " * input1[F, C, KH, KW] where HO in 5, WO in 6")  # fmt: skip
PADDED_INPUTS: dict[str, Any] = {"input0": {"dtype": "float32", "shape": [2, 12, 5, 6]},
                                 "input1": {"dtype": "float32", "shape": [16, 3, 3, 3]}}  # fmt: skip
PADDED_STAGED = ['%y = transform.einc.cache_write "output0" at %r3 split 1 by 4 layout [0, 3, 4, 2, 1]',
                 '%fw = transform.einc.cache_read "input1" at %r1 split 0 by 4 layout [2, 3, 4, 1, 0]',
                 '%x = transform.einc.cache_read "input0" at %r1 split 1 by 3 layout [0, 2, 3, 4, 1] halo']  # fmt: skip


def _padded_schedule(target: str, staged: list[str]) -> str:
    """The pair form's loops of the CPU default's shape: pairs of groups outermost (F.q
    tiled by 2), the output columns tiled (by 3) and everything ordered before the lanes are
    grouped (`N, F.q.o, HO, WO.o, C, KH, KW, WO.i, F.q.i, F.r`), then group_lanes
    interleaved over the pair's 2 x 4 channels, `staged` at the pair (%r1) and the row tile
    (%r3), the columns unrolled, the lanes vectorized."""
    tiles = ['%w = transform.einc.match stmt "output0" axis "WO" in %root', "%wo, %wi = transform.einc.tile %w by 3"]
    order = ["N", "F.q.o", "HO", "WO.o", "C", "KH", "KW", "WO.i", "F.q.i", "F.r"]
    lines = _pair_lines(target, tiles, order, staged)
    lines += ["%u = transform.einc.unroll %r7 by 3", '%lv = transform.einc.match stmt "output0" axis "F.r*F.q.i.i" in %root',
              "transform.einc.vectorize %lv"]  # fmt: skip
    return _script(lines)


def _padded_answer(arrays: dict[str, np.ndarray]) -> np.ndarray:
    x = np.pad(arrays["input0"].astype(np.float64), ((0, 0), (0, 0), (1, 1), (1, 1)))
    w = arrays["input1"].astype(np.float64)
    out = np.zeros((2, 16, 5, 6))
    for kh in range(3):
        for kw in range(3):
            patch = x[:, :, kh : kh + 5, kw : kw + 6].reshape(2, 4, 3, 5, 6)  # n, group, c, h, w
            out += np.einsum("ngchw,gfc->ngfhw", patch, w[:, :, kh, kw].reshape(4, 4, 3)).reshape(2, 16, 5, 6)
    return out


@pytest.mark.parametrize("target", TARGETS)
def test_the_padded_pair_form_stages_its_input_with_halo_and_split(target: str) -> None:
    """`cache_read ... split D by F ... halo`: the padded input of a pair of groups staged with
    its two groups innermost and its halo (zero-filled, the copy-in clamped to the tensor),
    the window's reads unguarded (no condition in the loops, no border nests needed) and read
    as one run of 2 per vector (`egpu.vload_repeat`) though the group index reached them
    through `l mod 2` (the halo's guards found before the split, the unfolded division
    moved out of the dropped guard); NumPy's numbers on every target."""
    require(target)
    comp = Compilation(PADDED, "<pairs>", PADDED_INPUTS, None, target, _padded_schedule(target, PADDED_STAGED))
    source = comp.run_until("source")
    ir = str(comp.results["target"])
    if target in ("c", "opencl") or "egpu.vload %input1_local" in ir:  # the lanes vectorized
        assert re.search(r"egpu\.vload_repeat %input0_local\[.*run 2", ir), ir
    if target == "c":
        # [N, C, H + 2, W + 2, group of the pair]; the copy-in over the tensor's part only
        assert "float input0_local[336]" in source, source
        assert re.search(r"for \(int64_t input0_c3 = 1; input0_c3 < 6; input0_c3\+\+\)", source), source
        # copied in the local's order: the pair of groups innermost, each pixel's two values stored together
        # (or, with 512-bit vectors, each row's two groups loaded and interleaved: einc.transforms.interleave_copy)
        assert re.search(r"input0_c4 < 7; input0_c4\+\+\) \{\s*for \(int64_t input0_c1 = 0; input0_c1 < 2;"
                         r"|einc_vstoren_f32x16\(&input0_local\[", source), source
        assert re.search(r"einc_vrepeat64_f32x8\(&input0_local\[", source), source
        body = source[source.index("einc_vrepeat64_f32x8(&input0_local") - 2000 :]
        assert " < 5)" not in body and ">= 0)" not in body, body  # no bounds test left in the loops
        # the halo's fill plain nests over the frame around the copy-in only (its pair of
        # groups too short for vectors of its own): rows 0 and 6, then columns 0 and 7
        assert re.search(r"input0_local\[[^\]]*input0_h4\] = 0\.0f;", source), source
        assert re.search(r"for \(int64_t input0_h2\w* = 6; input0_h2\w* < 7;", source), source
        assert re.search(r"for \(int64_t input0_h3\w* = 7; input0_h3\w* < 8;", source), source
        # the output tile starts at zero (its channel `4 g + f` staged by two copy loops, one
        # box): no fill pass over the output, the tile never read back from it
        assert re.search(r"output0_local\[[^\]]*\] = 0\.0f;", source), source
        assert not re.search(r"output0_local\[[^\]]*\] = output0\[", source), source
        assert not re.search(r"einc_vstore_f32x\d+\(&output0\[", source), source
    rng = np.random.default_rng(30)
    arrays = {k: rng.uniform(-2, 2, v["shape"]).astype(np.float32) for k, v in PADDED_INPUTS.items()}
    assert max_error(_run(comp, target, arrays), _padded_answer(arrays)) <= tolerance("float32"), source


def test_a_split_dimension_reaching_outside_the_tensor_is_refused_with_the_halo() -> None:
    """The halo reaches outside the tensor in the window's dimensions; the split dimension
    (staged as group x channel) must not: splitting the padded row is a located error."""
    line = '%x = transform.einc.cache_read "input0" at %r1 split 2 by 5 halo'
    with pytest.raises(EincError, match=re.escape("its tile there is strided, merged or reaches outside the tensor")) as caught:
        Compilation(PADDED, "<pairs>", PADDED_INPUTS, None, "c", _padded_schedule("c", [line])).run_until("source")
    assert ":19:" in str(caught.value), str(caught.value)
