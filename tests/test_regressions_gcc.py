"""Wrong code from the C compiler itself, pinned: the C target avoids it (einc/targets/c.py).

gcc 12.2 at -O3 with AVX2 if-converted a max-reduction over a guarded load into a masked
vector load that read zeros (found by the random transform scripts; any schedule, "none"
included). Checked against NumPy with fresh non-zero data."""

from __future__ import annotations

import numpy as np
import pytest

import einc
from tests.oracle.seeds import fresh_seed

PROGRAM = (
    "temp1[N, M, K] >=! input1[N - 1, M].when((N - 1) >= 0, 1.0) + input0[] + input1[0, 0] / 1.0 "
    "where N in 4, K in 2"
)
INPUTS = {"input0": {"dtype": "float32", "shape": []}, "input1": {"dtype": "float32", "shape": [4, 5]}}


@pytest.mark.parametrize("schedule", ["none", None])
def test_guarded_load_under_a_max_reduction(schedule: str | None) -> None:
    rng = np.random.default_rng(fresh_seed())
    i0 = np.asarray(rng.uniform(0.5, 2.0), dtype=np.float32)
    i1 = (rng.uniform(0.5, 2.0, (4, 5)) * rng.choice([-1.0, 1.0], (4, 5))).astype(np.float32)
    got = einc.compile(PROGRAM, INPUTS, schedule=schedule)(input0=i0, input1=i1)["temp1"]
    want = np.empty((4, 5, 2))
    for n in range(4):
        v = i1[n - 1].astype(np.float64) if n >= 1 else np.ones(5)
        want[n] = (v + float(i0) + float(i1[0, 0]))[:, None]
    np.testing.assert_allclose(got, want, rtol=1e-6)


def test_only_kernels_with_a_guarded_load_lose_if_conversion() -> None:
    """The workaround is per function: a kernel without a guarded load keeps gcc's loop
    if-conversion (it vectorizes selects, e.g. the saturating casts)."""
    from einc.targets.c import NO_IF_CONVERT

    guarded = einc.compile(PROGRAM, INPUTS, schedule="none").source
    assert f"{NO_IF_CONVERT} void kernel(" in guarded
    plain = einc.compile("output0[N] = (input0[N] * 4.0).cast(`int32`)", {"input0": {"dtype": "float32", "shape": [64]}})
    assert NO_IF_CONVERT not in plain.source and "void kernel(" in plain.source
