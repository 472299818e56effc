"""A depthwise convolution's rows (issue 26): no register tile blocks it (every loop moves its
vector input), so the default C schedule fuses the fill down to the output row loop and
stages each output row in a local array across the 3x3 window (`fuse_fill_rows` in
einc/schedule/policies/cpu.py): each row zeroed and summed while it is in L1, not a pass
zeroing the whole output first that the sums then read back. Checked at batch 1 and 2: the
schedule (fuses to the row loop, the row's cache_write), the C (the zeros stored into the
staged row, inside the row loop; no zero fill of the output before it) and NumPy's numbers
on random inputs, padding included."""

from __future__ import annotations

import re

import numpy as np
import pytest

from einc.compiler.driver import Compilation
from einc.dialects import einc_transform as et
from einc.schedule.default import default_schedule
from einc.semantics.compare import max_error, tolerance
from einc.targets import get_target

DEPTHWISE = ("output0[N, F, HO, WO] +=! (input0[N, F, HO + KH - 1, WO + KW - 1].when([HO + KH - 1 >= 0, "
             "HO + KH - 1 < 5, WO + KW - 1 >= 0, WO + KW - 1 < 20], 0.0) * input1[F, 0, KH, KW]) "
             "where HO in 5, WO in 20")  # fmt: skip


def _reference(a: dict[str, np.ndarray]) -> np.ndarray:
    x = np.pad(a["input0"], [(0, 0), (0, 0), (1, 1), (1, 1)])
    win = np.lib.stride_tricks.sliding_window_view(x, (3, 3), axis=(2, 3))
    return np.einsum("nfhwij,fij->nfhw", win, a["input1"][:, 0])


@pytest.fixture(scope="module", params=[1, 2])
def depthwise(request: pytest.FixtureRequest) -> tuple[Compilation, dict]:
    batch = request.param
    inputs = {"input0": {"dtype": "float32", "shape": [batch, 3, 5, 20]},
              "input1": {"dtype": "float32", "shape": [3, 1, 3, 3]}}  # fmt: skip
    return Compilation(DEPTHWISE, "<depthwise>", inputs, None, "c", use_records=False), inputs


def test_the_fill_is_fused_to_the_row_loop_and_the_row_staged(depthwise: tuple[Compilation, dict]) -> None:
    comp, _ = depthwise
    schedule = default_schedule(get_target("c"), comp.run_until("loops"))
    assert schedule is not None
    fuses = schedule.ops(et.FuseOp)
    assert len(fuses) == 3, schedule  # batch, channel and row loops
    (write,) = schedule.ops(et.CacheWriteOp)
    assert write.tensor.data == "output0", schedule
    source = comp.run_until("source")
    row = source.index("float output0_local[20]")
    zeros = [m.start() for m in re.finditer(r"0\.0f - \(einc_f32x\d+\)\{\};\s*einc_vstore_f32x\d+\(&output0|output0(?:_local)?\[[^\]]*\] = 0\.0f;", source)]
    assert zeros and min(zeros) > row, source  # the row zeroed inside its loop, no pass before


def test_the_numbers_are_numpys(depthwise: tuple[Compilation, dict]) -> None:
    comp, inputs = depthwise
    kernel = comp.kernel()
    for seed in (0, 1):
        rng = np.random.default_rng(seed)
        arrays = {k: rng.uniform(-1, 1, v["shape"]).astype(np.float32) for k, v in inputs.items()}
        want = _reference({k: v.astype(np.float64) for k, v in arrays.items()})
        assert max_error(kernel(**arrays)["output0"], want) <= tolerance("float32"), kernel.source


def test_the_output_is_never_read(depthwise: tuple[Compilation, dict]) -> None:
    """The staged row's copy-in went (einc-init-accumulators: the fill inside the staging
    point overwrites every element it read): the output is written once and never read, two
    trips through memory (the input read, the output written), not three."""
    comp, _ = depthwise
    source = comp.run_until("source")
    reads = re.findall(r"=\s*(?:einc_vload_f32x\d+\(&)?output0\[", source)
    assert not reads, source
    assert re.search(r"(?:einc_vstore_f32x\d+\(&output0\[|output0\[[^\]]*\] =)", source), source


def test_the_padded_plane_is_staged_and_the_taps_have_no_edge(depthwise: tuple[Compilation, dict]) -> None:
    """The input staged per channel with its halo
    (`cache_read ... halo`: 7 x 22 for the 5 x 20 plane, padding zeros stored once): every
    tap of the window is then whole vector loads of the staged plane (16 + 4 of a 20-wide
    row), no scalar edge iteration, no condition anywhere in the kernel."""
    comp, _ = depthwise
    schedule = default_schedule(get_target("c"), comp.run_until("loops"))
    assert schedule is not None
    (read,) = schedule.ops(et.CacheReadOp)
    assert read.tensor.data == "input0" and read.halo is not None, schedule
    source = comp.run_until("source")
    assert "float input0_local[154]" in source, source
    assert "if (" not in source and "#pragma omp simd" not in source, source
    taps = re.findall(r"einc_vload_f32x(\d+)\(&input0_local\[[^\]]*\(HO \+ KH\) \* 22 \+ \(WO \+ KW\)\]\)", source)
    assert taps and all(int(n) >= 4 for n in taps), source
    assert not re.search(r"= input0_local\[", source), source  # no scalar read of the plane


PAIRED = DEPTHWISE.replace("< 5", "< 6").replace("HO in 5", "HO in 6")


def test_an_even_number_of_rows_is_summed_in_pairs() -> None:
    """6 output rows (WINDOW_ROWS = 2 divides them): the row loop tiled by 2, its tile below
    the window loops, above the vector loop; the staged output tile two rows (2 x 20), the
    padded plane 8 x 22; NumPy's numbers."""
    inputs = {"input0": {"dtype": "float32", "shape": [1, 3, 6, 20]},
              "input1": {"dtype": "float32", "shape": [3, 1, 3, 3]}}  # fmt: skip
    comp = Compilation(PAIRED, "<depthwise>", inputs, None, "c", use_records=False)
    schedule = default_schedule(get_target("c"), comp.run_until("loops"))
    assert schedule is not None
    assert [op.static_size.value.data for op in schedule.ops(et.TileOp) if op.static_size] == [2, 2], schedule
    source = comp.run_until("source")
    assert "float output0_local[40]" in source and "float input0_local[176]" in source, source
    assert re.search(r"for \(int64_t KW = 0; KW < 3; KW\+\+\) \{\s*for \(int64_t HO_i = 0; HO_i < 2; HO_i\+\+\) \{\s*"
                     r"for \(int64_t WO = 0;", source), source  # fmt: skip
    assert "if (" not in source, source
    kernel = comp.kernel()
    rng = np.random.default_rng(3)
    arrays = {k: rng.uniform(-1, 1, v["shape"]).astype(np.float32) for k, v in inputs.items()}
    want = _reference({k: v.astype(np.float64) for k, v in arrays.items()})
    assert max_error(kernel(**arrays)["output0"], want) <= tolerance("float32"), source


BIG = DEPTHWISE.replace("< 5", "< 112").replace("HO in 5", "HO in 112").replace("< 20", "< 112").replace("WO in 20", "WO in 112")


def test_a_batch_larger_than_the_caches_stages_pairs_and_streams_whole_row_pairs() -> None:
    """3 x 144 x 112 x 112 (21.7 MB in, as much out): the padded plane is staged per channel
    and the rows summed in pairs whatever the input's total size (HALO_MAX_BYTES), and the
    output, 16 MiB or more (STREAM_MIN_BYTES), is stored non-temporally; each staged pair of
    rows (2 x 112) lies whole in the output, so its copy-out is one run of 224
    (einc-coalesce-stream-copies), every vector store of it streamed. NumPy's numbers."""
    inputs = {"input0": {"dtype": "float32", "shape": [3, 144, 112, 112]},
              "input1": {"dtype": "float32", "shape": [144, 1, 3, 3]}}  # fmt: skip
    comp = Compilation(BIG, "<depthwise>", inputs, None, "c", use_records=False)
    schedule = default_schedule(get_target("c"), comp.run_until("loops"))
    assert schedule is not None
    (read,) = schedule.ops(et.CacheReadOp)
    assert read.tensor.data == "input0" and read.halo is not None, schedule
    assert len(schedule.ops(et.StreamStoresOp)) == 1, schedule
    source = comp.run_until("source")
    assert "float output0_local[224]" in source and "float input0_local[12996]" in source, source
    copy_out = re.search(r"for \(int64_t (output0_c2xoutput0_c3) = 0; \1 < 224; \1 \+= (\d+)\) \{\s*"
                         r"einc_f32x\2 v = einc_vload_f32x\2\(&output0_local\[[^\]]*\]\);\s*"
                         r"einc_vstream\d+_f32x\2\(&output0\[", source)  # fmt: skip
    assert copy_out, source
    assert not re.search(r"einc_vstore_f32x\d+\(&output0\[", source), source  # every store streamed
    kernel = comp.kernel()
    rng = np.random.default_rng(4)
    arrays = {k: rng.uniform(-1, 1, v["shape"]).astype(np.float32) for k, v in inputs.items()}
    want = _reference({k: v.astype(np.float64) for k, v in arrays.items()})
    assert max_error(kernel(**arrays)["output0"], want) <= tolerance("float32"), source
