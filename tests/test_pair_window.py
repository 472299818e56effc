"""The pair form's window row unrolled (einc.schedule.policies.cpu `_pair_form`,
PAIR_WINDOW_UNROLL): with 512-bit vectors and FMA datapaths, a grouped convolution of 8
channels per group takes the pair form, and its window's innermost loop (KW) is unrolled
whole around the unrolled columns, so that column p at window column k reads pair p + k and
one output row's window row reads `columns + KW - 1` distinct pairs (GCC broadcasts each
once; it left a rolled 5-wide KW loop alone: one broadcast per FMA, README "The pair form's
window unrolled"). Checked on the generated C and against NumPy (float64 reference, random
data, fixed seed) for 3- and 5-wide windows."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest

from einc.semantics.compare import max_error, tolerance
from tests.modules import load_module

BENCHMARKS = Path(__file__).resolve().parent.parent / "benchmarks"
bench = load_module(BENCHMARKS / "cpu_operators.py")

# column p, window column k of one broadcast pair: `... + p * 2 + k * 2 + <lane> * 2 + ...`
PAIR = re.compile(r"einc_vrepeat64_f32x16\(&input0_local\[[^\]]*?\+ (\d+) \* 2 \+ (\d+) \* 2 \+ \w+ \* 2")


@pytest.mark.parametrize("window", [3, 5])
def test_the_pair_forms_window_row_is_unrolled_and_computes_numpys_numbers(window: int,
                                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    import einc

    monkeypatch.setenv("EINC_C_VECTOR_BITS", "512")
    monkeypatch.setenv("EINC_C_FMA_BITS", "512")
    op = bench.Conv(16, 32, (5, 7), (window, window), pad=window // 2, groups=4).op("grouped", 1)
    kernel = einc.compile(op.ir, op.inputs, target="c", use_records=False)
    source = kernel.source
    assert "einc_vrepeat64_f32x16(&input0_local[" in source, source  # the pair form
    assert not re.search(r"for \(int64_t KW\b", source), source
    # the first window row (one KH iteration's body): columns x window broadcasts of
    # columns + window - 1 pairs
    body = source[source.index("for (int64_t KH") :]
    body = body[: body.index("for (int64_t KH", 1)] if "for (int64_t KH" in body[1:] else body
    pairs = [(int(p), int(k)) for p, k in PAIR.findall(body)]
    columns = 1 + max(p for p, _ in pairs)
    assert sorted(pairs) == [(p, k) for p in range(columns) for k in range(window)], pairs
    assert len({p + k for p, k in pairs}) == columns + window - 1
    rng = np.random.default_rng(26)
    arrays = {name: rng.uniform(-1, 1, v["shape"]).astype(np.float32) for name, v in op.inputs.items()}
    want = op.numpy({name: a.astype(np.float64) for name, a in arrays.items()})
    outs = {"output0": np.empty(want.shape, np.float32)}
    kernel.run(arrays, outs)
    assert max_error(outs["output0"], want) <= tolerance("float32")
