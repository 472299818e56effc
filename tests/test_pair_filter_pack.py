"""The pair form's filter pack as vector transposes (issue 22 item 6 / issue 26): a grouped
convolution of 8 channels per group takes the pair form on 512-bit vectors, whose filter is
packed per pair of groups as `local[c, kh, kw, f, g] = input1[g, f, c, kh, kw]` (lane 2 f +
g). `einc.transforms.transpose_copy` takes the lanes as two loops (g moving the destination
by 1, f by 2) and the source's run of C x KH x KW columns in tiles of 16, the last one partial
where the run is no multiple of 16 (masked row loads, only the run's transposed rows stored).
Checked on the generated C (no scalar copy of the filter left; the loads per tile) and
against NumPy (float64 reference, random data, fixed seed) from the C kernel and from the egpu
interpreter, at small odd maps and runs of 36, 100 and 16 columns (4 input channels per
group, 3x3, 5x5, 2x2)."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest

from einc.compiler.driver import Compilation
from einc.semantics.compare import max_error, tolerance
from einc.semantics.egpu import run_lowered
from tests.modules import load_module

BENCHMARKS = Path(__file__).resolve().parent.parent / "benchmarks"
bench = load_module(BENCHMARKS / "cpu_operators.py")


@pytest.mark.parametrize("window, size", [(3, (5, 7)), (5, (3, 9)), (2, (4, 5))])
def test_the_pair_forms_filter_is_packed_by_vector_transposes(window: int, size: tuple[int, int],
                                                              monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("EINC_C_VECTOR_BITS", "512")
    monkeypatch.setenv("EINC_C_FMA_BITS", "512")
    op = bench.Conv(16, 32, size, (window, window), pad=window // 2, groups=4).op("grouped", 1)
    comp = Compilation(op.ir, "<grouped>", op.inputs, None, "c", use_records=False)
    source = comp.run_until("source")
    assert isinstance(source, str)
    assert "einc_vrepeat64_f32x16(&input0_local[" in source, source  # the pair form
    # no scalar copy of the filter: 16 rows per tile, the run's last columns by masked loads
    assert not re.search(r"input1_local\[[^\]]*\] = input1\[", source), source
    run = 4 * window * window  # 16 input channels in 4 groups
    assert len(re.findall(r"einc_vload_f32x16\(&input1\[", source)) == 16, source
    masked = re.findall(r"einc_vloadn_f32x16\(&input1\[[^;]*, (\d+)\);", source)
    assert masked == ([str(run % 16)] * 16 if run % 16 else []), masked
    stores = re.findall(r"einc_vstore_f32x16\(&input1_local\[", source)
    assert len(stores) == 16 + run % 16, source
    rng = np.random.default_rng(22 + window)
    arrays = {name: rng.uniform(-1, 1, v["shape"]).astype(np.float32) for name, v in op.inputs.items()}
    want = op.numpy({name: a.astype(np.float64) for name, a in arrays.items()})
    assert max_error(comp.kernel()(**arrays)["output0"], want) <= tolerance("float32"), source
    assert max_error(run_lowered(comp.results["target"], arrays, target="c")["output0"], want) <= tolerance("float32")
