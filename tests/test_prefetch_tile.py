"""The CPU policy's grouped convolution blocked over two groups per vector (`group_lanes`)
prefetches the next channel tile's input a tile ahead, spread over this tile's output rows
(`Choices.prefetch_tile`, `_prefetch_rows` with the channel-tile loop; README "The grouped
convolution's next tile prefetched, Zen 4"): at the top of output row HO, row HO of each of
the next tile's channels, the last tile's the next image's first channels. The wrap into the
next image is the row-major address itself (transform.einc.prefetch `_flat_carry`): the
channel index is left unwrapped and clamped to the last image's last channel, no division or
remainder. `prefetch_tile=False` keeps this tile's next row at the top of each output row.
Checked: the schedule and the C's shape, the clamp keeping every prefetched address inside
the input, and NumPy's numbers (a NaN input too) from the kernel and the egpu interpreter."""

from __future__ import annotations

import re

import pytest

from einc.schedule.policies.cpu import Choices
from tests.test_pack_rows import check_grouped_numbers, grouped_policy


@pytest.mark.parametrize("h, w", [(3, 9), (4, 8), (2, 13)])
def test_the_next_channel_tile_is_prefetched_a_row_per_output_row(h: int, w: int, monkeypatch: pytest.MonkeyPatch) -> None:
    """Batch 2, 4 groups of 8 channels (two tiles of 16 channels: the 16 lanes span two
    groups), prefetch forced (this input is small): one prefetch nest per output row over
    the next tile's 16 channels, row HO of each, its channel index `F_q_o * 16 + 16 + p`
    clamped to `31 - 32 N` (the next image's first channels past this image's last; the last
    image's last channel at most), no division or remainder in it; every address it can
    take lies inside the input; NumPy's numbers."""
    comp, schedule, source = grouped_policy(h, w, Choices(pair_lanes=False, prefetch=True, prefetch_tile=None), monkeypatch)
    assert re.search(r'transform.einc.prefetch "input0" at %\w+ by 1 spread %', schedule), schedule
    clamp = r"einc_minsi_i64\(F_q_o \* 16 \+ 16 \+ input0_p1, N \* -32 \+ 63\)"
    pattern = (r"for \(int64_t input0_p1 = 0; input0_p1 < 16; input0_p1\+\+\) \{\s*int64_t v\w* = N;\s*"
               rf"int64_t v\w* = {clamp};\s*int64_t v\w* = HO;\s*int64_t v\w* = \d+;\s*__builtin_prefetch\(&input0\[")
    assert re.search(pattern, source), source
    prefetches = [line for line in source.splitlines() if "input0_p1" in line and "int64_t" in line and "=" in line]
    assert prefetches and not any("/" in line or "%" in line for line in prefetches), prefetches
    # the address of channel c = min(16 q + 16 + p, 63 - 32 n), row r of image n: inside the
    # input for every image n, tile q, channel p and row r, the next image's first channels
    # past this image's last
    for n in range(2):
        for q in range(2):
            for p in range(16):
                c = min(16 * q + 16 + p, 63 - 32 * n)
                assert 0 <= n * 32 + c < 2 * 32
                if n == 0 and q == 1:
                    assert (n * 32 + c) == 32 + p  # image 1's channel p, flat
    check_grouped_numbers(comp, h, w, (1, 17, h - 1, w - 1), source)


@pytest.mark.parametrize("h, w", [(3, 9), (2, 13)])
def test_prefetch_tile_false_keeps_the_next_row(h: int, w: int, monkeypatch: pytest.MonkeyPatch) -> None:
    """`prefetch_tile=False` (`policy.prefetch.rows`): this tile's row HO + 2 at the top of
    output row HO (past the last row, the next tile's first rows), no spread; the same
    numbers."""
    comp, schedule, source = grouped_policy(h, w, Choices(pair_lanes=False, prefetch=True, prefetch_tile=False), monkeypatch)
    assert 'transform.einc.prefetch "input0" at' in schedule and " spread " not in schedule, schedule
    assert re.search(rf"int64_t v\w* = \(HO \+ 2\) % {h};", source), source
    check_grouped_numbers(comp, h, w, (1, 17, h - 1, w - 1), source)
