"""einc's C flags against GCC's own loop transforms: the schedules jam their register tiles
themselves, and GCC's unroll-and-jam of a loop around a vectorized one left a global average
pool's channel loop scalar (4x slower: its tile starts at zero in registers since the C
pipeline runs einc-init-accumulators)."""

from __future__ import annotations

import platform
import re
import shutil
import subprocess
from pathlib import Path

import pytest

import einc
from einc.runtime.c import CFLAGS

POOL = "input input0: float32[1, 64, 7, 7]\noutput0[N, C] +=! input0[N, C, H, W] / 49.0\n"


@pytest.mark.skipif(platform.machine() != "x86_64" or shutil.which("gcc") is None, reason="x86-64 GCC assembly")
def test_the_pools_channel_loop_stays_vectorized(tmp_path: Path) -> None:
    source = einc.compile(POOL, target="c").source
    assert "output0_local" in source and "= 0.0f - (einc_f32x" in source  # the tile starts at zero
    c = tmp_path / "pool.c"
    c.write_text(source)
    flags = [f for f in CFLAGS if f not in ("-shared", "-fPIC")]
    subprocess.run(["gcc", *flags, "-S", "-o", str(tmp_path / "pool.s"), str(c)], check=True)
    asm = (tmp_path / "pool.s").read_text()
    # the division by 49 runs on vectors: `vdivps`, or the C target's `einc_vdivs` (two FMAs a
    # vector, einc.targets.c DIVIDE_BY_SCALAR) in the reduction; scalar divisions only in the
    # rows' one-element tails (49 = 3 x 16 + 1: one per channel of the tile), where a channel
    # loop run scalar would divide every element
    tails = len(re.findall(r"for \(int64_t HxW = 48; HxW < 49; HxW\+\+\)", source))
    vector = re.findall(r"\bv?divps\b", asm) + re.findall(r"\bvfnmadd\d+ps\b[^\n]*%[yz]mm", asm)
    assert vector and len(re.findall(r"\bv?divss\b", asm)) <= tails, (tails, asm)
