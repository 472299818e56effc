"""The default C schedule register-blocks every contraction (issue 26 item 1, issue 22 item 6),
one test per cause: matmuls with dimensions below 64 (a short reduction, a narrow output,
batched small matmuls), and convolutions whose output rows do not fill whole vectors (1D,
2D, 3D, 7x7 windows, 7x7 outputs, padded, strided, transposed, grouped, 1-D with long rows,
batches of small maps) blocked over output channels x output columns with the filter packed
channels-innermost, and short reductions summing several outputs side by side. Each checks the schedule (tiles, staged layouts), the
generated C (a local accumulator tile, explicit vector code in the innermost loop) and the
numbers against a NumPy float64 reference on fresh random inputs, on small shapes.
"""

from __future__ import annotations

import re
from typing import Any

import numpy as np
import pytest

from einc.compiler.driver import Compilation
from einc.dialects import einc_transform as et
from einc.schedule.default import default_schedule
from einc.schedule.script import Schedule
from einc.semantics.compare import max_error, tolerance
from einc.targets import get_target
from einc.targets.c import CTarget

C_LANES = CTarget.vector_lanes()
"""float32 lanes of the C target's vectors on this host (16 with AVX-512, 8 with AVX2)."""


def f32(*shape: int) -> dict[str, Any]:
    return {"dtype": "float32", "shape": list(shape)}


def c_schedule(comp: Compilation) -> Schedule:
    schedule = default_schedule(get_target("c"), comp.run_until("loops"))
    assert schedule is not None
    return schedule


def _check_numbers(comp: Compilation, inputs: dict[str, Any], reference: Any, variant: tuple[str, Schedule] | None = None) -> str:
    """Run the kernel (under `variant`'s (program, schedule), else the default) on fresh
    random inputs against the float64 reference; returns the kernel's C source."""
    kernel = comp.kernel() if variant is None else Compilation(variant[0], "<t>", inputs, None, "c", variant[1]).kernel()
    for seed in (0, 1):
        rng = np.random.default_rng(seed)
        arrays = {k: rng.uniform(-1, 1, v["shape"]).astype(np.float32) for k, v in inputs.items()}
        got = kernel(**arrays)["output0"]
        want = reference({k: v.astype(np.float64) for k, v in arrays.items()})
        assert max_error(got, want) <= tolerance("float32"), kernel.source
    return kernel.source


def _vector_loops(source: str) -> list[str]:
    """The bodies of the explicit vector loops (`for (...; X += W)` whose body uses einc's
    vector type) of a C source."""
    bodies = []
    for m in re.finditer(r"for \(int64_t (\w+) = [^;]*; \1 < [^;]*; \1 \+= \d+\) \{\n", source):
        depth, k = 1, m.end()
        while depth:
            depth += {"{": 1, "}": -1}.get(source[k], 0)
            k += 1
        body = source[m.end() : k - 1]
        if "einc_f32x" in body:
            bodies.append(body)
    return bodies


# ---- matmuls with dimensions below 64 --------------------------------------------------------------

MATMUL = "output0[N, M] +=! input0[N, K] * input1[K, M]"
BMM = "output0[B, N, M] +=! input0[B, N, K] * input1[B, K, M]"


@pytest.mark.parametrize("ir, shapes", [
    (MATMUL, ((20, 12), (12, 64))),  # a short reduction (K 12) and i not a whole number of row tiles
    (MATMUL, ((70, 80), (80, 32))),  # a narrow output (M 32)
    (BMM, ((3, 10, 8), (3, 8, 48))),  # batched small matmuls
])  # fmt: skip
def test_small_matmuls_are_register_blocked_and_match_numpy(ir: str, shapes: tuple[tuple[int, ...], ...]) -> None:
    inputs = {"input0": f32(*shapes[0]), "input1": f32(*shapes[1])}
    comp = Compilation(ir, "<mm>", inputs, None, "c")
    schedule = c_schedule(comp)
    knobs = schedule.knobs()
    assert {"output0.tile_i", "output0.tile_j", "output0.tile_k"} <= set(knobs), schedule
    assert [op.tensor.data for op in schedule.ops(et.CacheWriteOp)] == ["output0"], schedule
    assert schedule.ops(et.UnrollOp), schedule
    source = _check_numbers(comp, inputs, lambda a: a["input0"] @ a["input1"])
    assert "float output0_local[" in source
    # the whole row tiles accumulate in the local tile (a partial last one, peeled, in the output)
    loops = _vector_loops(source)
    assert any("output0_local[" in body and "input1_local[" in body for body in loops), source
    assert all("if (" not in body and "pragma omp simd" not in body for body in loops), source


# ---- convolutions: output channels x output columns -----------------------------------------------


def _conv_ref(pad: int, dims: int) -> Any:
    def ref(a: dict[str, np.ndarray]) -> np.ndarray:
        x, w = a["input0"], a["input1"]
        x = np.pad(x, [(0, 0), (0, 0), *[(pad, pad)] * dims])
        axes = tuple(range(2, 2 + dims))
        win = np.lib.stride_tricks.sliding_window_view(x, w.shape[2:], axis=axes)  # N C O... K...
        letters = "dhw"[3 - dims :]
        kern = "ijk"[:dims]
        return np.einsum(f"nc{letters}{kern},fc{kern}->nf{letters}", win, w)

    return ref


def _padded(dims: int, pad: int, sizes: tuple[int, ...]) -> str:
    outs, wins = ["DO", "HO", "WO"][3 - dims :], ["KD", "KH", "KW"][3 - dims :]
    index = [f"{o} + {k} - {pad}" for o, k in zip(outs, wins)]
    where = ", ".join(f"{o} in {n}" for o, n in zip(outs, sizes))
    access = f"input0[N, C, {', '.join(index)}]"
    if pad:
        conds = ", ".join(f"{i} >= 0, {i} < {n}" for i, n in zip(index, sizes))
        access = f"{access}.when([{conds}], 0.0)"
    return f"output0[N, F, {', '.join(outs)}] +=! ({access} * input1[F, C, {', '.join(wins)}]) where {where}"


CONVS = {
    # name: (dims, pad, input shape, filter shape); outputs as wide as the inputs less the
    # window (valid) or as wide (padded)
    "conv1d": (1, 0, (1, 5, 13), (2 * 16, 5, 3)),
    # a row of whole vectors too long for two rows of accumulators in registers
    "conv1d long row": (1, 0, (1, 3, 16 * C_LANES + 2), (2 * 16, 3, 3)),
    "conv2d 7 columns": (2, 0, (1, 6, 9, 9), (32, 6, 3, 3)),
    "conv2d 7x7 window": (2, 0, (1, 3, 12, 12), (16, 3, 7, 7)),
    "conv2d padded 7x7 output": (2, 1, (1, 8, 7, 7), (32, 8, 3, 3)),
    "conv3d": (3, 0, (1, 4, 5, 6, 7), (16, 4, 3, 3, 3)),
    "conv3d padded": (3, 1, (2, 3, 4, 5, 6), (32, 3, 3, 3, 3)),
}


def _conv(name: str) -> tuple[str, Compilation, dict[str, Any], Any]:
    dims, pad, x, w = CONVS[name]
    sizes = tuple(n + 2 * pad - k + 1 for n, k in zip(x[2:], w[2:]))
    inputs = {"input0": f32(*x), "input1": f32(*w)}
    ir = _padded(dims, pad, sizes)
    return ir, Compilation(ir, "<conv>", inputs, None, "c"), inputs, _conv_ref(pad, dims)


@pytest.mark.parametrize("name", sorted(CONVS))
def test_convolutions_are_blocked_over_output_channels_and_match_numpy(name: str) -> None:
    """Output channels x output columns: the output tile staged with its channels innermost
    and the filter packed the same way (cache ops with a layout), the columns unrolled, the
    channels a vector loop of explicit vector code whose filter loads are vectors of the
    packed tile (a padded input's guard is a scalar test of the invariant input element,
    broadcast over the channels: not a condition on vector lanes)."""
    _, comp, inputs, ref = _conv(name)
    schedule = c_schedule(comp)
    knobs = schedule.knobs()
    assert {"output0.tile_channels", "output0.tile_cols"} <= set(knobs), schedule
    (write,) = schedule.ops(et.CacheWriteOp)
    rank = len(inputs["input0"]["shape"])
    assert write.tensor.data == "output0" and write.layout_order == (0, *range(2, rank), 1), schedule
    (read,) = schedule.ops(et.CacheReadOp)
    assert read.tensor.data == "input1" and read.layout_order == (*range(1, rank), 0), schedule
    source = _check_numbers(comp, inputs, ref)
    # the filter packed on the stack per image, or once per call above the batch loop (a batch
    # of 2 or more: einc-hoist-packs, a heap buffer `input1_local_pack`)
    filt = "input1_local_pack" if "input1_local_pack = " in source else "input1_local"
    assert "float output0_local[" in source and (filt == "input1_local_pack" or "float input1_local[" in source)
    # (not the filter's packing copy: on 512-bit hosts its transposing tiles are vector loops too)
    compute = [body for body in _vector_loops(source)
               if f"{filt}[" in body and not re.search(rf"einc_vstoren?_f32x\d+\(&{filt}\[", body)]
    assert compute, source
    for body in compute:
        assert f"einc_vload_f32x{min(C_LANES, 16)}(&{filt}[" in body
        assert "pragma omp simd" not in body and "? " not in body
    # the filter packed a block of output channels x taps per input channel (the local's
    # outermost dimension outermost, then the filter's order: each channel's taps read
    # contiguously), the output tile written back a vector of channels at a time; a run of taps
    # that is a multiple of the vector (on a host with masked vectors: that holds one, its last
    # tile partial) is transposed as vector tiles instead (einc-vectorize-loops' transposing
    # copy, tests/test_transpose_copy.py)
    if f"einc_vload_f32x{min(C_LANES, 16)}(&input1[" in source:
        assert not re.search(rf"{filt}\[[^\]]*\] = input1\[", source), source
    else:
        assert _copy_loops(source, "input1")[:2] == ["input1_c1", "input1_c0"], source
    # (on a host with masked vector stores, a tile of more than half a vector of columns is
    # written back as one register transpose, each row a masked store: einc-vectorize-loops'
    # transposing copy, tests/test_transpose_copy.py)
    back = _copy_loops(source, "output0", back=True)
    if back:
        assert back[-1] == "output0_c1", source
    else:
        assert C_LANES >= 16 and "einc_vstoren_f32x16(&output0[" in source, source


def _copy_loops(source: str, tensor: str, back: bool = False) -> list[str]:
    """The loop variables (outermost first) of the first copy nest of `tensor` in a C source
    (`back`: the first copy-out nest, whose body stores to the tensor)."""
    for m in re.finditer(rf"((?:[ ]*for \(int64_t {tensor}_c\d+ = [^\n]*\n)+)\s*([^\n]*)", source):
        if not back or m.group(2).startswith(f"{tensor}["):
            return re.findall(rf"for \(int64_t ({tensor}_c\d+) =", m.group(1))
    return []


def test_every_option_of_the_channel_tiles_applies() -> None:
    """The knobs of the channel blocking offer only sizes the schedule can apply; each gives
    NumPy's answer (a search may pick any)."""
    ir, comp, inputs, ref = _conv("conv3d padded")
    schedule = c_schedule(comp)
    knobs = schedule.knobs()
    for name in ("output0.tile_channels", "output0.tile_cols"):
        assert len(knobs[name].options) >= 2, knobs[name]
        for option in knobs[name].options:
            _check_numbers(comp, inputs, ref, (ir, schedule.with_values({name: option})))


def test_every_reduction_order_applies_and_the_default_is_the_policys() -> None:
    """The reduction-order knob (`output0.reduce_order`, transform.einc.rotate): one option
    per rotation of the blocked convolution's reduction band (input channels, then the
    window), 0 the default and the policy's own order (the input
    channels outermost); every option applies and gives NumPy's numbers (the padding tests
    read one window loop each: split out the same way in every order), and 1 runs the window
    outside the input channels."""
    ir, comp, inputs, ref = _conv("conv2d padded 7x7 output")
    schedule = c_schedule(comp)
    knob = schedule.knobs()["output0.reduce_order"]
    assert knob.options == (0, 1, 2) and knob.selected == 0, schedule
    (rotate,) = schedule.ops(et.RotateOp)
    default = _check_numbers(comp, inputs, ref)
    loops = re.findall(r"for \(int64_t (C|KH|KW)\b", default)
    assert loops[:3] == ["C", "KH", "KW"], loops
    for option in knob.options[1:]:
        source = _check_numbers(comp, inputs, ref, (ir, schedule.with_values({knob.name: option})))
        if option == 1:
            assert re.findall(r"for \(int64_t (C|KH|KW)\b", source)[:3] == ["KH", "KW", "C"], source


def test_the_input_channel_tile_fits_the_packed_filter() -> None:
    """Many input channels: the first reduction is tiled so that the packed filter tile stays
    within CHANNEL_PACK_ELEMENTS (the output tile of a 3x3 map, small, staged once above the
    input-channel tiles: `test_small_maps_stage_the_whole_output_tile_once`)."""
    from einc.schedule.policies.cpu import CHANNEL_PACK_ELEMENTS

    inputs = {"input0": f32(1, 256, 5, 5), "input1": f32(32, 256, 3, 3)}
    ir = "output0[N, F, HO, WO] +=! input0[N, C, HO + KH, WO + KW] * input1[F, C, KH, KW] where HO in 3, WO in 3"
    comp = Compilation(ir, "<conv>", inputs, None, "c")
    schedule = c_schedule(comp)
    knobs = schedule.knobs()
    tc, tf = knobs["output0.tile_reduce"].selected, knobs["output0.tile_channels"].selected
    assert tc < 256 and 256 % tc == 0 and tf * tc * 9 <= CHANNEL_PACK_ELEMENTS, schedule
    _check_numbers(comp, inputs, _conv_ref(0, 2))
    # the largest of each knob's options together still apply (a search may pick any)
    largest = {name: max(knobs[name].options) for name in ("output0.tile_reduce", "output0.tile_channels")}
    _check_numbers(comp, inputs, _conv_ref(0, 2), (ir, schedule.with_values(largest)))


def test_small_maps_stage_the_whole_output_tile_once() -> None:
    """A padded 3x3 convolution on a 7x7 map with the input channels tiled (the packed
    filter would not fit): the output tile of every output point of a channel tile is staged
    above the input-channel tiles (`_whole_output_tile`), zero-initialised in the local tile
    and written back once, a vector of channels at a time; no copy of the output into the
    local tile nor a copy out per input-channel tile (with 7 columns, scalar and transposed,
    it cost about a tenth of the time); NumPy's numbers, also with the largest channel tile."""
    from einc.schedule.policies.cpu import WHOLE_TILE_ELEMENTS

    inputs = {"input0": f32(1, 256, 7, 7), "input1": f32(32, 256, 3, 3)}
    ir = _padded(2, 1, (7, 7))
    comp = Compilation(ir, "<conv>", inputs, None, "c")
    schedule = c_schedule(comp)
    knobs = schedule.knobs()
    assert knobs["output0.tile_reduce"].selected < 256, schedule
    assert max(knobs["output0.tile_channels"].options) * 49 <= WHOLE_TILE_ELEMENTS, schedule
    source = _check_numbers(comp, inputs, _conv_ref(1, 2))
    tile, reduce = source.index("float output0_local["), source.index("for (int64_t C_o = 0;")
    assert tile < reduce and source.count("float output0_local[") == 1, source
    assert re.search(r"output0_local\[[^\]]*\] = 0\.0f;", source[tile:reduce]), source
    assert not re.search(r"=[^;]*\boutput0\[", source), source  # the output is never read
    assert len(re.findall(r"\boutput0\[[^\n]* = output0_local\[", source)) == 1, source
    assert source.index("= output0_local[") > source.rindex("input1_local["), source  # after the reduction
    # (on a host with masked vector stores, a tile of more than half a vector of columns is
    # written back as one register transpose, each row a masked store: einc-vectorize-loops'
    # transposing copy, tests/test_transpose_copy.py)
    back = _copy_loops(source, "output0", back=True)
    if back:
        assert back[-1] == "output0_c1", source
    else:
        assert C_LANES >= 16 and "einc_vstoren_f32x16(&output0[" in source, source
    largest = {"output0.tile_channels": max(knobs["output0.tile_channels"].options)}
    _check_numbers(comp, inputs, _conv_ref(1, 2), (ir, schedule.with_values(largest)))


def test_a_channel_tile_whose_whole_output_tile_fits_is_preferred() -> None:
    """A padded 3x3 convolution with 128 input channels on a 25x25 map: no channel tile's
    packed filter holds every input channel, and two vectors of channels of every output
    point (32 x 625) would not fit a local tile, one vector's (16 x 625) does; so with
    AVX-512 the channel tile is one vector (`_output_staged_once`) and its output tile is
    staged once above the input-channel tiles (`_whole_output_tile`), never read from the
    output; NumPy's numbers."""
    inputs = {"input0": f32(1, 128, 25, 25), "input1": f32(32, 128, 3, 3)}
    ir = _padded(2, 1, (25, 25))
    comp = Compilation(ir, "<conv>", inputs, None, "c")
    schedule = c_schedule(comp)
    knobs = schedule.knobs()
    source = _check_numbers(comp, inputs, _conv_ref(1, 2))
    if C_LANES >= 16:
        assert knobs["output0.tile_channels"].selected == C_LANES, schedule
        assert knobs["output0.tile_reduce"].selected < 128, schedule
        tile, reduce = source.index("float output0_local["), source.index("for (int64_t C_o = 0;")
        assert tile < reduce and source.count("float output0_local[") == 1, source
        assert not re.search(r"=[^;]*\boutput0\[", source), source  # the output is never read


def test_channel_counts_that_do_not_fill_vectors_keep_the_row_blocking() -> None:
    """6 output channels: no vector of channels; the rows blocking (`_block_rows`) stays."""
    inputs = {"input0": f32(1, 3, 9, 9), "input1": f32(6, 3, 3, 3)}
    ir = "output0[N, F, HO, WO] +=! input0[N, C, HO + KH, WO + KW] * input1[F, C, KH, KW] where HO in 7, WO in 7"
    comp = Compilation(ir, "<conv>", inputs, None, "c")
    schedule = c_schedule(comp)
    assert "output0.tile_channels" not in schedule.knobs(), schedule
    assert not any(op.layout_order for op in [*schedule.ops(et.CacheReadOp), *schedule.ops(et.CacheWriteOp)])
    _check_numbers(comp, inputs, _conv_ref(0, 2))


def test_few_channel_tiles_run_spatial_chunks_in_parallel() -> None:
    """One channel tile and the input channels tiled (the packed filter would not fit): the
    loops above the input-channel tiles are too few to run in parallel, so the first spatial
    loop is split into chunks above them (`tile_spatial`) and the chunks run in parallel."""
    inputs = {"input0": f32(1, 256, 98, 32), "input1": f32(32, 256, 3, 3)}
    ir = "output0[N, F, HO, WO] +=! input0[N, C, HO + KH, WO + KW] * input1[F, C, KH, KW] where HO in 96, WO in 30"
    comp = Compilation(ir, "<conv>", inputs, None, "c")
    schedule = c_schedule(comp)
    knobs = schedule.knobs()
    assert "output0.tile_reduce" in knobs and "output0.tile_spatial" in knobs, schedule
    chunk = knobs["output0.tile_spatial"].selected
    assert 96 % chunk == 0 and 96 // chunk >= 2, schedule
    source = _check_numbers(comp, inputs, _conv_ref(0, 2))
    assert re.search(r"#pragma omp parallel for\n\s*for \(int64_t HO_o = 0; HO_o < 96; HO_o \+= \d+\)", source), source


# ---- cache ops with a layout, by hand, on every target -------------------------------------------


def _layout_schedule(bind: bool) -> str:
    lines = [
        '%n = transform.einc.match stmt "output0" axis "N" in %root',
        '%k = transform.einc.match stmt "output0" axis "K" in %root',
        '%m = transform.einc.match stmt "output0" axis "M" in %root',
        "%r0, %r1, %r2 = transform.einc.reorder %n, %k, %m",
        *(['transform.einc.bind %r0 to "thread.x"'] if bind else []),
        '%w = transform.einc.cache_write "output0" at %r0 in "local" layout [1, 0]',
        '%a = transform.einc.cache_read "input0" at %r0 in "local" layout [1, 0]',
        '%b = transform.einc.cache_read "input1" at %r1 in "local" layout [1, 0]',
    ]
    body = "\n".join(f"    {line}" for line in [*lines, "transform.yield"])
    return (
        "builtin.module {\n  transform.named_sequence @__transform_main(%root: !transform.any_op) {\n"
        f"{body}\n  }}\n}}\n"
    )


@pytest.mark.parametrize("target", [
    "c", *(pytest.param(t, marks=getattr(pytest.mark, t)) for t in ("opencl", "hlsl", "sycl", "poplar"))
])  # fmt: skip
def test_cache_ops_with_a_layout_match_numpy_on_every_target(target: str) -> None:
    """A transposed output row, input row and input panel (`layout [1, 0]`) staged by hand;
    on the device targets inside the thread-bound row loop (private arrays)."""
    from tests.test_device_differential import run_on_device
    from tests.test_device_targets import require

    if target != "c":
        require(target)
    inputs = {"input0": f32(4, 6), "input1": f32(6, 8)}
    comp = Compilation(MATMUL, "<t>", inputs, None, target, _layout_schedule(bind=target != "c"))
    source = comp.run_until("source")
    rng = np.random.default_rng(6)
    arrays = {k: rng.uniform(-1, 1, v["shape"]).astype(np.float32) for k, v in inputs.items()}
    got = comp.kernel()(**arrays)["output0"] if target == "c" else run_on_device(comp, arrays)["output0"]
    want = arrays["input0"].astype(np.float64) @ arrays["input1"].astype(np.float64)
    assert max_error(got, want) <= tolerance("float32"), source


# ---- strided convolutions: blocked over output channels x columns --------------------------------


def _strided_ref(stride: int, pad: int) -> Any:
    def ref(a: dict[str, np.ndarray]) -> np.ndarray:
        x = np.pad(a["input0"], [(0, 0), (0, 0), (pad, pad), (pad, pad)])
        win = np.lib.stride_tricks.sliding_window_view(x, a["input1"].shape[2:], axis=(2, 3))[:, :, ::stride, ::stride]
        return np.einsum("nchwij,fcij->nfhw", win, a["input1"])

    return ref


@pytest.fixture(scope="module")
def strided_conv() -> tuple[Compilation, dict[str, Any], str]:
    """A 3x3 convolution with stride 2 and padding 1 (5x5 outputs of a 9x10 input): its
    input moves by 2 along the output row, so no vector along the row."""
    inputs = {"input0": f32(1, 3, 9, 10), "input1": f32(2 * C_LANES, 3, 3, 3)}
    e = ["HO * 2 + KH - 1", "WO * 2 + KW - 1"]
    conds = ", ".join(f"{i} >= 0, {i} < {n}" for i, n in zip(e, (9, 10)))
    ir = (f"output0[N, F, HO, WO] +=! (input0[N, C, {e[0]}, {e[1]}].when([{conds}], 0.0) * input1[F, C, KH, KW]) "
          "where HO in 5, WO in 5")  # fmt: skip
    comp = Compilation(ir, "<strided>", inputs, None, "c")
    return comp, inputs, _check_numbers(comp, inputs, _strided_ref(2, 1))


def test_strided_convolutions_are_blocked_over_output_channels(strided_conv: tuple[Compilation, dict[str, Any], str]) -> None:
    """A strided convolution (input index `WO * 2 + KW`) is blocked over output channels x
    output columns like a unit-stride one: the channels a vector loop over the packed filter,
    each column's input a broadcast, the padding tests out of the vector loops; NumPy's
    numbers (checked by the fixture)."""
    comp, _, source = strided_conv
    schedule = c_schedule(comp)
    assert {"output0.tile_channels", "output0.tile_cols"} <= set(schedule.knobs()), schedule
    (read,) = schedule.ops(et.CacheReadOp)
    assert read.tensor.data == "input1" and read.layout_order == (1, 2, 3, 0), schedule
    assert "float output0_local[" in source and "float input1_local[" in source
    # (not the filter's packing copy: on 512-bit hosts its transposing tiles are vector loops too)
    compute = [body for body in _vector_loops(source)
               if "input1_local[" in body and not re.search(r"einc_vstoren?_f32x\d+\(&input1_local\[", body)]
    assert compute, source
    for body in compute:
        assert "einc_vload_f32x" in body and "if (" not in body and "? " not in body, body


def test_a_channel_tile_whose_filter_holds_every_input_channel_is_preferred() -> None:
    """A stride-2 3x3 convolution with 64 input channels (odd 25x25 outputs of a 50x49
    input): the filter of two vectors of output channels (32 x 64 x 9) would not fit the
    packed tile, one vector's (16 x 64 x 9) does, nor would their output tile of every point
    (32 x 625), so with AVX-512 the channel tile is one vector (`_output_staged_once`): the
    input channels are not tiled, the output tile is zeroed in the
    local tile and written back once, never read from the output (no copy in and out per
    input-channel tile, no pass of its own zeroing the output); NumPy's numbers, also with
    every channel-tile option."""
    inputs = {"input0": f32(1, 64, 50, 49), "input1": f32(32, 64, 3, 3)}
    e = ["HO * 2 + KH - 1", "WO * 2 + KW - 1"]
    conds = ", ".join(f"{i} >= 0, {i} < {n}" for i, n in zip(e, (50, 49)))
    ir = (f"output0[N, F, HO, WO] +=! (input0[N, C, {e[0]}, {e[1]}].when([{conds}], 0.0) * input1[F, C, KH, KW]) "
          "where HO in 25, WO in 25")  # fmt: skip
    comp = Compilation(ir, "<strided>", inputs, None, "c")
    schedule = c_schedule(comp)
    knobs = schedule.knobs()
    assert "output0.tile_reduce" not in knobs, schedule
    if C_LANES >= 16:
        assert knobs["output0.tile_channels"].selected == C_LANES, schedule
    source = _check_numbers(comp, inputs, _strided_ref(2, 1))
    assert "for (int64_t C = 0; C < 64; C++)" in source and "C_o" not in source, source
    assert re.search(r"output0_local\[[^\]]*\] = 0\.0f;", source), source
    assert not re.search(r"=[^;]*\boutput0\[", source), source  # the output is never read
    for option in knobs["output0.tile_channels"].options:
        _check_numbers(comp, inputs, _strided_ref(2, 1), (ir, schedule.with_values({"output0.tile_channels": option})))


def _transposed_ref(a: dict[str, np.ndarray]) -> np.ndarray:
    """conv_transpose2d, stride 2, padding 1, 4x4 window: each input point scattered."""
    x, w = a["input0"], a["input1"]
    n, _, h, wd = x.shape
    full = np.zeros((n, w.shape[1], 2 * (h - 1) + 4, 2 * (wd - 1) + 4))
    for i, j in np.ndindex(4, 4):
        full[:, :, i : i + 2 * h - 1 : 2, j : j + 2 * wd - 1 : 2] += np.einsum("nchw,cf->nfhw", x, w[:, :, i, j])
    return full[:, :, 1 : 1 + 2 * h, 1 : 1 + 2 * wd]


@pytest.fixture(scope="module")
def transposed_conv() -> tuple[Compilation, str]:
    """A transposed convolution (stride 2, padding 1, 4x4 window; 4x5 inputs, 8x10 outputs)
    written with `//` indices and `%` tests, the tap skipped where it does not apply."""
    inputs = {"input0": f32(1, 3, 4, 5), "input1": f32(3, 2 * C_LANES, 4, 4)}
    e = ["HO + 1 - KH", "WO + 1 - KW"]
    conds = ", ".join(f"({i}) % 2 == 0, {i} >= 0, {i} < {2 * n}" for i, n in zip(e, (4, 5)))
    ir = (f"output0[N, F, HO, WO] +=! (input0[N, C, ({e[0]}) // 2, ({e[1]}) // 2] * input1[C, F, KH, KW])"
          f".when([{conds}], 0.0) where HO in 8, WO in 10")  # fmt: skip
    comp = Compilation(ir, "<transposed>", inputs, None, "c")
    return comp, _check_numbers(comp, inputs, _transposed_ref)


def test_transposed_convolutions_are_blocked_then_split_into_phases(transposed_conv: tuple[Compilation, str]) -> None:
    """A transposed convolution (its input index `(WO + 1 - KW) // 2` moves with the output
    column through a division) is blocked over output channels x columns, then its stride
    tests split into phases (the output rows, then the window taps: each unrolled column
    keeps the taps of its phase): no condition and no `%` left in the vector loops; NumPy's
    numbers (checked by the fixture)."""
    comp, source = transposed_conv
    schedule = c_schedule(comp)
    assert {"output0.tile_channels", "output0.tile_cols"} <= set(schedule.knobs()), schedule
    assert schedule.ops(et.SplitPhasesOp), schedule
    assert "float output0_local[" in source and "float input1_local[" in source
    # (not the filter's packing copy: on 512-bit hosts its transposing tiles are vector loops too)
    compute = [body for body in _vector_loops(source)
               if "input1_local[" in body and not re.search(r"einc_vstoren?_f32x\d+\(&input1_local\[", body)]
    assert compute, source
    for body in compute:
        assert "if (" not in body and "? " not in body and "%" not in body, body


def test_transposed_convolution_accumulators_start_in_registers(transposed_conv: tuple[Compilation, str]) -> None:
    """The phase nests' output tiles (every other column, channels innermost) start at zero
    in the local tile (einc-init-accumulators over several nests and split pieces: the
    tiles are disjoint and cover the output), so the C neither fills the output with zeros
    nor reads it back, and each tile is written back a vector of channels at a time (the
    copy-out's innermost loop runs along the tile's channels); NumPy's numbers (checked by
    the fixture)."""
    _, source = transposed_conv
    assert not re.search(r"\boutput0\[[^\]]*\] = 0\.0f", source) and "&output0[" not in source, source  # no fill
    assert not re.search(r"=[^;]*\boutput0\[", source), source  # no read of the output
    assert re.search(r"output0_local\[[^\]]*\] = 0\.0f;", source), source
    backs = re.findall(r"for \(int64_t (output0_c\d) = [^\n]*\n\s*output0\[[^\n]* = output0_local\[[^\n]*\+ (\w+)\];", source)
    assert backs and all(loop == last for loop, last in backs), source


def test_small_maps_in_a_batch_share_the_packed_filter() -> None:
    """A batch of small maps (3x3 outputs): the batch loop goes below the channel tiles, so
    that each packed filter tile serves every image (not packed again per image), and the
    channel tiles run in parallel; NumPy's numbers."""
    inputs = {"input0": f32(2, 4, 5, 5), "input1": f32(16 * C_LANES, 4, 3, 3)}
    ir = "output0[N, F, HO, WO] +=! input0[N, C, HO + KH, WO + KW] * input1[F, C, KH, KW] where HO in 3, WO in 3"
    comp = Compilation(ir, "<conv>", inputs, None, "c")
    source = _check_numbers(comp, inputs, _conv_ref(0, 2))
    assert re.search(r"#pragma omp parallel for\n\s*for \(int64_t F_o = 0;", source), source
    pack = source.index("float input1_local[")
    # the parallel body that packs the filter loops over the images itself (no image passed in)
    params = re.findall(r"void einc_parallel_\d+\(([^)]*)\)", source[:pack])[-1]
    assert "int64_t N" not in params and re.search(r"for \(int64_t N = 0; N < 2; N\+\+\)", source[pack:]), source


def test_small_maps_in_a_batch_stage_a_run_of_images_whole() -> None:
    """A batch of 7x7 maps with the input channels tiled: below the channel tiles, the batch
    loop is split and the output tile of a run of images (every point of each, as many images
    as fit WHOLE_TILE_ELEMENTS) is staged above the input-channel tiles (`_images_per_tile`):
    zeroed in the local tile, written back once; the output is never read (no fill, no copy
    in per input-channel tile); NumPy's numbers."""
    from einc.schedule.policies.cpu import WHOLE_TILE_ELEMENTS

    inputs = {"input0": f32(12, 128, 7, 7), "input1": f32(16 * C_LANES, 128, 3, 3)}
    ir = _padded(2, 1, (7, 7))
    comp = Compilation(ir, "<conv>", inputs, None, "c")
    source = _check_numbers(comp, inputs, _conv_ref(1, 2))
    assert re.search(r"#pragma omp parallel for\n\s*for \(int64_t F_o = 0;", source), source
    (size,) = {int(n) for n in re.findall(r"float output0_local\[(\d+)\]", source)}
    assert size % 49 == 0 and size // 49 > 2 * C_LANES and size <= WHOLE_TILE_ELEMENTS, size  # several images
    tile, reduce = source.index("float output0_local["), source.index("for (int64_t C_o = 0;")
    assert source.index("for (int64_t N_o = 0;") < tile < reduce, source
    assert re.search(r"output0_local\[[^\]]*\] = 0\.0f;", source[tile:reduce]), source
    assert not re.search(r"=[^;]*\boutput0\[", source), source  # the output is never read
    assert len(re.findall(r"\boutput0\[[^\n]* = output0_local\[", source)) == 1, source


def _grouped(per_group: int, groups: int) -> tuple[str, dict[str, Any], Any]:
    """A padded 3x3 grouped convolution with `per_group` output channels and 3 input channels
    per group (the channel index `F // per_group * 3 + C`, which the loops stage splits into
    group x channel), its inputs and its float64 reference."""
    inputs = {"input0": f32(1, 3 * groups, 6, 5), "input1": f32(per_group * groups, 3, 3, 3)}
    e = ["HO + KH - 1", "WO + KW - 1"]
    conds = ", ".join(f"{i} >= 0, {i} < {n}" for i, n in zip(e, (6, 5)))
    ir = (f"output0[N, F, HO, WO] +=! (input0[N, F // {per_group} * 3 + C, {e[0]}, {e[1]}].when([{conds}], 0.0) "
          "* input1[F, C, KH, KW]) where HO in 6, WO in 5")  # fmt: skip

    def ref(a: dict[str, np.ndarray]) -> np.ndarray:
        x = np.pad(a["input0"], [(0, 0), (0, 0), (1, 1), (1, 1)])
        win = np.lib.stride_tricks.sliding_window_view(x, (3, 3), axis=(2, 3)).reshape(1, groups, 3, 6, 5, 3, 3)
        w = a["input1"].reshape(groups, per_group, 3, 3, 3)
        return np.einsum("ngchwij,gfcij->ngfhw", win, w).reshape(1, per_group * groups, 6, 5)

    return ir, inputs, ref


def test_grouped_convolutions_block_two_groups_per_vector() -> None:
    """A grouped convolution with half a vector of output channels per group (8 with AVX-512's
    16 lanes; 4 with AVX2's 8) in the blocked form: each group pair's channels merged into one
    loop of a whole vector (transform.einc.group_lanes) and blocked over those channels x
    output columns, the filter packed per pair of groups, each column's input the two groups'
    values each broadcast over its half of the lanes (egpu.vbroadcast_runs); NumPy's numbers.
    With a quarter of a vector per group (four groups per vector, a load per group per FMA)
    the default keeps the groups apart. The blocked form is the default with 8 lanes; with
    16 the default takes the pair form (tests/test_pair_lanes.py) and the blocked form is
    `policy.nopairs` (Choices(pair_lanes=False)), built here."""
    from einc.schedule.policies.cpu import Choices, default_schedule as cpu_default

    half = C_LANES // 2
    ir, inputs, ref = _grouped(half, 2)
    comp = Compilation(ir, "<grouped>", inputs, None, "c")
    schedule = cpu_default(CTarget, comp.run_until("loops"), Choices(pair_lanes=False), split_conditions=True)
    assert schedule is not None
    if C_LANES < 16:  # the default itself
        assert str(c_schedule(comp)) == str(schedule)
    assert "transform.einc.group_lanes" in str(schedule), schedule
    assert schedule.knobs()["output0.tile_channels"].selected == C_LANES, schedule
    source = _check_numbers(comp, inputs, ref, (ir, schedule))
    vector = f"einc_f32x{C_LANES}"
    assert "float input1_local[" in source and f"einc_vload_f32x{C_LANES}(&input1_local[" in source, source
    # the second run's input: the next group's (its lane index `half` further, the channel 3 on)
    assert re.search(rf"einc_vbroadcast_runs2_f32x{C_LANES}\(input0\[[^;]*\], input0\[[^;]*\+ {half}\) / {half} \* 3\)",
                     source), source  # fmt: skip
    assert f"{vector} einc_vbroadcast_runs2_f32x{C_LANES}(float a0, float a1)" in source, source
    ir, inputs, ref = _grouped(C_LANES // 4, 4)
    assert "transform.einc.group_lanes" not in str(c_schedule(Compilation(ir, "<grouped>", inputs, None, "c")))


# ---- reductions over short axes: independent sums side by side -----------------------------------


def _interleaved(comp: Compilation) -> tuple[str, Schedule]:
    """The policy's schedule with short reductions' outputs side by side (Choices(rows=False),
    the tuning space's `policy.interleave`), not vectorized along the rows."""
    from einc.schedule.policies.cpu import Choices, default_schedule as cpu_default

    schedule = cpu_default(CTarget, comp.run_until("loops"), Choices(rows=False))
    assert schedule is not None
    return comp.source, schedule


POOL = "output0[N, C] +=! input0[N, C, H, W] / {n}.0"


def test_short_reductions_over_whole_rows_vectorize_along_the_rows() -> None:
    """A global average pool over an NCHW map (each channel's 7x7 window contiguous): the
    window loops coalesced into one loop of 49 points (`HxW`, no division in the index),
    reduced into vector partial sums (three vectors, one scalar point), the lanes folded in
    registers (shuffles), the channel loop tiled by the lanes and unrolled (that many
    independent rows side by side), the tile staged locally, the channel tiles in parallel;
    each element divided as written; NumPy's numbers."""
    inputs = {"input0": f32(1, 64 * C_LANES, 7, 7)}  # enough work for a parallel loop
    comp = Compilation(POOL.format(n=49), "<pool>", inputs, None, "c")
    source = _check_numbers(comp, inputs, lambda a: a["input0"].mean(axis=(2, 3)))
    assert re.search(rf"#pragma omp parallel for\n\s*for \(int64_t C_o = 0; C_o < {64 * C_LANES}; C_o \+= {C_LANES}\)",
                     source), source  # fmt: skip
    assert source.count(f"for (int64_t HxW = 0; HxW < {49 // C_LANES * C_LANES}; HxW += {C_LANES})") == C_LANES, source
    assert source.count(f"einc_vreduce_add_f32x{C_LANES}(") == C_LANES + 1, source  # the calls and the helper
    assert "__builtin_shufflevector" in source and "HxW / 7" not in source, source
    body = source[source.index("HxW += "):]
    assert f"/ (einc_f32x{C_LANES})" in body or f"49.0f - (einc_f32x{C_LANES})" in body, source
    # a window strided in its rows (the input's last axis not the window's): left to INTERLEAVE
    inputs = {"input0": f32(1, 7, 7, 2 * C_LANES)}
    comp = Compilation("output0[N, C] +=! input0[N, H, W, C] / 49.0", "<pool-nhwc>", inputs, None, "c")
    source = _check_numbers(comp, inputs, lambda a: a["input0"].mean(axis=(1, 2)))
    assert "HxW" not in source, source


def test_short_reductions_interleave_outputs() -> None:
    """A global average pool (a 16x16 window summed per channel, strided across channels: no
    vector along the window or the channels) without the row vectorization (the space's
    `policy.interleave`): two vectors of channels' sums side by side (the channel loop tiled
    by 2 x the lanes, the tile vectorized below the window loops, the sums in a local tile),
    each element divided as written (`x / 256.0`, one vector division per 16 channels, not
    one scalar division each), the channel tiles in parallel; NumPy's numbers. Where two
    vectors do not divide the channels, INTERLEAVE scalar sums unrolled."""
    from einc.schedule.policies.cpu import INTERLEAVE

    wide = 2 * C_LANES
    inputs = {"input0": f32(1, 256, 16, 16)}
    comp = Compilation(POOL.format(n=256), "<pool>", inputs, None, "c")
    source = _check_numbers(comp, inputs, lambda a: a["input0"].mean(axis=(2, 3)), _interleaved(comp))
    assert re.search(rf"#pragma omp parallel for\n\s*for \(int64_t C_o = 0; C_o < 256; C_o \+= {wide}\)", source), source
    assert f"float output0_local[{wide}]" in source
    inner = source[source.index("for (int64_t W = 0; W < 16; W++) {") :]
    assert re.search(rf"#pragma omp simd\n\s*for \(int64_t C_i = 0; C_i < {wide}; C_i\+\+\) {{\n\s*output0_local\[C_i\] = "
                     r"output0_local\[C_i\] \+ input0\[[^]]*\] / 256\.0f;", inner), source  # fmt: skip
    # 24 channels: two vectors do not divide them (8 lanes or more): 8 unrolled scalar sums
    inputs = {"input0": f32(1, 24, 16, 16)}
    comp = Compilation(POOL.format(n=256), "<pool>", inputs, None, "c")
    source = _check_numbers(comp, inputs, lambda a: a["input0"].mean(axis=(2, 3)), _interleaved(comp))
    inner = source[source.index("for (int64_t W = 0; W < 16; W++) {") :]
    if 24 % wide or 24 < 2 * wide:  # (4-lane hosts take the vector path)
        assert all(f"output0_local[{k}] = output0_local[{k}] + " in inner for k in range(INTERLEAVE)), source
