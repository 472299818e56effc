"""`transform.einc.hoist_fill` (einc.transforms.hoist_fill) and `transform.einc.prefetch ...
spread` as the CPU policy's pair form takes them when it packs the whole plane (an input from
DRAM; README "The grouped convolution's next pair prefetched"): the halo's frame filled once
before the loop over pairs of groups (where that loop is not the parallel one), the next
pair's planes prefetched a row of each per output row. Checked: the C's shape and NumPy's
numbers from the kernel and from the egpu interpreter at small grouped shapes; the lit tests
schedules/hoist_fill.ein and invalid_hoist_fill.mlir check the IR and the refusals."""

from __future__ import annotations

import re

import numpy as np
import pytest

from einc.semantics.compare import max_error, tolerance
from einc.semantics.egpu import run_lowered
from einc.schedule.policies.cpu import Choices
from tests.test_pack_rows import _grouped, _grouped_answer, grouped_policy


@pytest.mark.parametrize("h, w", [(3, 9), (2, 13)])
def test_the_plane_pair_form_fills_its_frame_once_and_prefetches_the_next_pair(
    h: int, w: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Batch 2, 4 groups of 8 channels (two pairs), the pair form packing the whole plane
    (`Choices.pack_rows=False`): the frame's fill nests before the loop over pairs, the
    copy-in inside it; at the top of each output row 3 prefetches (a row of 9 or 13 floats:
    its first, 17th and last element, cut to the row) of each of the next pair's 16 channel
    planes; NumPy's numbers from the C kernel and the egpu interpreter."""
    comp, schedule, source = grouped_policy(h, w, Choices(pair_lanes=True, pack_rows=False), monkeypatch)
    assert "transform.einc.hoist_fill %" in schedule, schedule
    assert re.search(r'transform.einc.prefetch "input0" at %\w+ by 1 spread %', schedule), schedule
    pairs = source.index("for (int64_t F_q_o = 0; F_q_o < 4; F_q_o += 2) {")
    fill = re.search(r"input0_local\[[^\]]*\] = 0\.0f;", source)
    assert fill and fill.start() < pairs, source  # the frame filled before the pairs
    assert not re.search(r"input0_local\[[^\]]*\] = 0\.0f;", source[pairs:]), source
    assert "= input0[" in source[pairs:] or "einc_vload" in source[pairs:], source  # the copy-in per pair
    rows = re.search(r"for \(int64_t HO\w* = 0; HO\w* < \d+; HO\w*\+\+\) \{\s*"
                     r"for \(int64_t input0_p1 = 0; input0_p1 < 16;", source)
    assert rows, source  # the prefetch nest first in the row loop: the next pair's 16 planes
    head = source[rows.start() : source.index("}", rows.end())]
    assert head.count("__builtin_prefetch(&input0[") == (2 if w <= 16 else 3), head
    # past the last pair: the next image's first channels, the same address row-major, so the
    # channel index is left unwrapped (no division or remainder) and clamped to the last
    # image's last channel
    assert "einc_minsi_i64(F_q_o * 8 + 16 + input0_p1, N * -32 + 63)" in head, head
    assert "/" not in head and "%" not in head, head
    rng = np.random.default_rng(h * 16 + w)
    ir, inputs = _grouped(h, w)
    arrays = {k: rng.uniform(-1, 1, v["shape"]).astype(np.float32) for k, v in inputs.items()}
    want = _grouped_answer(arrays, h, w)
    assert max_error(comp.kernel()(**arrays)["output0"], want) <= tolerance("float32"), source
    assert max_error(run_lowered(comp.results["target"], arrays, target="c")["output0"], want) <= tolerance("float32")
