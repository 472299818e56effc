"""The grouped convolution's register-tile forms (benchmarks/grouped_tiles.py) compute the
tile they are timed as: each form's 14 columns x two groups of output channels against NumPy
on random data (the pair forms' interleaved lanes put back), on this host's vector width."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from tests.modules import load_module

bench = load_module(Path("benchmarks/grouped_tiles.py"))
LANES = max(8, bench.vector_lanes())


@pytest.fixture(scope="module")
def dll():  # noqa: ANN201
    return bench.library(LANES)


@pytest.mark.parametrize("form", list(bench.FORMS))
def test_each_form_computes_the_tile(dll, form: str) -> None:  # noqa: ANN001
    rng = np.random.default_rng(7)
    half = LANES // 2
    x = rng.uniform(-1, 1, (2, 8, 3, 32)).astype(np.float32)
    w = rng.uniform(-1, 1, (2, half, 8, 3, 3)).astype(np.float32)
    windows = np.stack([x[:, :, :, j:j + 3] for j in range(bench.COLS)]).astype(np.float64)  # j g c kh kw
    want = np.einsum("jgchw,gfchw->jgf", windows, w.astype(np.float64))
    got = bench.tile(dll, LANES, form, x, w)
    if form == "half":  # one group per half-width vector: the first group only
        want[:, 1] = 0.0
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)
    assert np.abs(got).max() > 0.1  # the tile was written
