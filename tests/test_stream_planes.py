"""The CPU policy's grouped convolution blocked over two groups per vector (`group_lanes`,
the default where the FMA datapath is narrower than 512 bits: Zen 4, AVX2) with its output
planes staged and streamed (`Choices.stream_planes`, `_stream_planes`; README "The grouped
convolution's output planes streamed"): the channel tile's whole output planes staged in a
local array around the rows' register tiles, whose copy-outs write it, and copied out in one
run with non-temporal stores; einc-init-accumulators starts the row tiles at zero
(`_init_within_tiles`), so the planes are neither zeroed nor read back. Checked: the C's
shape and NumPy's numbers from the kernel and from the egpu interpreter at small grouped
shapes, and that the default leaves a small output (batch 1's caches) as it was."""

from __future__ import annotations

import re

import pytest

from einc.schedule.policies.cpu import Choices
from tests.test_pack_rows import check_grouped_numbers, grouped_policy


@pytest.mark.parametrize("h, w", [(3, 9), (4, 8), (2, 13)])
def test_the_grouped_convolutions_planes_are_staged_and_streamed(h: int, w: int, monkeypatch: pytest.MonkeyPatch) -> None:
    """Batch 2, 4 groups of 8 channels (two tiles of 16 channels), `stream_planes=True`: per
    image and channel tile a local array of the tile's 16 planes (16 h w floats), the rows'
    register tiles inside it zeroed (not copied in), their copy-outs into the planes (no
    store into output0 but the streamed one), the planes copied out in one run of whole
    vectors with non-temporal stores; NumPy's numbers (a NaN input too) from the C kernel
    and the egpu interpreter."""
    comp, schedule, source = grouped_policy(h, w, Choices(pair_lanes=False, stream_planes=True), monkeypatch)
    assert "transform.einc.stream_stores %" in schedule, schedule
    planes = re.search(rf"float (output0_local\w*)\[{16 * h * w}\] __attribute__", source)
    assert planes, source
    name = planes.group(1)
    body = source[planes.end() :]
    assert not re.search(rf"\b{name}\[[^\]]*\] = 0\.0f;", body), source  # the planes not zeroed
    row = re.search(r"float (output0_local\w*)\[(\d+)\] __attribute__", body)
    assert row and row.group(1) != name and int(row.group(2)) < 16 * h * w, source
    assert re.search(rf"\b{row.group(1)}\[[^\]]*\] = 0\.0f;", body), source  # the row tile starts at zero
    assert not re.search(rf"\b{row.group(1)}\[[^\]]*\] = {name}\[", body), source  # not read from the planes
    copy_out = rf"einc_vstoren?_f32x\d+\(&{name}\[|\b{name}\[[^\]]*\] = {row.group(1)}\["
    assert re.search(copy_out, body), source  # the rows' copy-outs write the planes (vectors or, 8 columns, elements)
    reads = re.findall(rf"= {name}\[|einc_vload\w*\(&{name}\[", body)
    assert len(reads) == 1, source  # the planes read once: by the streamed copy
    streamed = re.search(rf"< {16 * h * w}; \w+ \+= 16\) \{{\s*einc_f32x16 v = einc_vload_f32x16\(&{name}\[[^;]*;\s*"
                         r"einc_vstream512_f32x16\(&output0\[", body)  # fmt: skip
    assert streamed, source  # one run of whole vectors, streamed
    assert len(re.findall(r"\(&output0\[", source)) == 1 and "output0[" not in source.replace("&output0[", ""), source
    assert "einc_sfence();" in source, source
    check_grouped_numbers(comp, h, w, (0, 3, 0, 0), source)


@pytest.mark.parametrize("planes", [None, False])
def test_a_small_output_or_the_choice_off_keeps_the_rows_stores(planes: bool | None, monkeypatch: pytest.MonkeyPatch) -> None:
    """The default (an output under STREAM_PLANES_MIN_BYTES: it stays in the caches between
    calls) and `stream_planes=False` (`policy.noplanes`): the rows' tiles store straight into
    the output, nothing streamed; NumPy's numbers."""
    comp, schedule, source = grouped_policy(3, 9, Choices(pair_lanes=False, stream_planes=planes), monkeypatch)
    assert "stream_stores" not in schedule, schedule
    assert "einc_vstream" not in source and re.search(r"einc_vstoren?_f32x\d+\(&output0\[", source), source
    assert not re.search(r"float output0_local\w*\[432\]", source), source
    check_grouped_numbers(comp, 3, 9, (0, 3, 0, 0), source)


def test_the_policy_stages_the_planes_of_a_large_output() -> None:
    """The default's threshold: batch 16's grouped output (12.8 MB) is staged, batch 1's
    (0.8 MB) is not (STREAM_PLANES_MIN_BYTES, 4 MiB)."""
    from einc.schedule.policies.cpu import STREAM_PLANES_MIN_BYTES

    assert 256 * 28 * 28 * 4 < STREAM_PLANES_MIN_BYTES <= 16 * 256 * 28 * 28 * 4
