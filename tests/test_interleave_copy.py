"""Copies that interleave K rows into lanes (einc.transforms.interleave_copy, in
`einc-vectorize-loops`): the pair form's input pack (README, "The pair form's input pack as
vector rows"). Checked: the zips' arithmetic against NumPy's interleave; the grouped
convolution padded, its input staged per K groups with the groups innermost
(`dest[..., x, k] = src[k][..., x]`), on 512-bit vectors (rows of 16 columns, whole; of 6
and 21, their last chunk masked; K = 2 and 4): NumPy's numbers from the C kernel and from the
egpu interpreter, the C's shape (no scalar copy from the tensor left; masked loads where the
row is no multiple of 16); on 256-bit vectors (no partial vectors there) a row of 6 stays
scalar."""

from __future__ import annotations

import re
from typing import Any

import numpy as np
import pytest

from einc.compiler.driver import Compilation
from einc.semantics.compare import max_error, tolerance
from einc.semantics.egpu import run_lowered
from einc.transforms.interleave_copy import interleave_stages, zip_masks
from tests.test_pair_lanes import _script


@pytest.mark.parametrize("width, k", [(4, 2), (8, 2), (16, 2), (16, 4), (16, 8), (8, 4)])
def test_the_zips_interleave_k_rows(width: int, k: int) -> None:
    """log2(K) stages of zips over K vectors give the K rows' lanes interleaved, in order."""
    rows = [np.arange(width) + 100 * j for j in range(k)]
    lo, hi = zip_masks(width)
    for stage in interleave_stages(k):
        new = []
        for i, j in stage:
            both = np.concatenate([rows[i], rows[j]])
            new += [both[lo], both[hi]]
        rows = new
    assert np.array_equal(np.concatenate(rows), np.stack([np.arange(width) + 100 * j for j in range(k)], 1).reshape(-1))


def _padded(w: int, k: int) -> tuple[str, dict[str, Any], str]:
    """The grouped convolution padded (3x3, pad 1) on a 3 x w map, 2 K groups of 4 output
    channels from 3 input channels; its input staged per K groups with the groups innermost
    and its halo (the copy: `local[c, y, x, g] = input0[n, 3 g + c, y - 1, x - 1]`)."""
    ir = (f"output0[N, F, HO, WO] +=! input0[N, F // 4 * 3 + C, HO + KH - 1, WO + KW - 1]"
          f".when([HO + KH - 1 >= 0, HO + KH - 1 < 3, WO + KW - 1 >= 0, WO + KW - 1 < {w}], 0.0)"
          f" * input1[F, C, KH, KW] where HO in 3, WO in {w}")  # fmt: skip
    inputs = {"input0": {"dtype": "float32", "shape": [1, 6 * k, 3, w]}, "input1": {"dtype": "float32", "shape": [8 * k, 3, 3, 3]}}
    lines = ['%q = transform.einc.match stmt "output0" axis "F.q" in %root', f"%qo, %qi = transform.einc.tile %q by {k}"]
    order = ["N", "F.q.o", "HO", "WO", "C", "KH", "KW", "F.q.i", "F.r"]
    lines += [f'%a{j} = transform.einc.match stmt "output0" axis "{a}" in %root' for j, a in enumerate(order)]
    lines.append(f"{', '.join(f'%r{j}' for j in range(len(order)))} = transform.einc.reorder {', '.join(f'%a{j}' for j in range(len(order)))}")
    lines.append('%x = transform.einc.cache_read "input0" at %r1 split 1 by 3 layout [0, 2, 3, 4, 1] halo')
    return ir, inputs, _script(lines)


def _answer(arrays: dict[str, np.ndarray], w: int, k: int) -> np.ndarray:
    x = np.pad(arrays["input0"].astype(np.float64), ((0, 0), (0, 0), (1, 1), (1, 1)))
    win = np.lib.stride_tricks.sliding_window_view(x, (3, 3), axis=(2, 3)).reshape(1, 2 * k, 3, 3, w, 3, 3)
    want = np.einsum("ngchwij,gfcij->ngfhw", win, arrays["input1"].astype(np.float64).reshape(2 * k, 4, 3, 3, 3))
    return want.reshape(1, 8 * k, 3, w)


@pytest.mark.parametrize("w, k", [(16, 2), (6, 2), (21, 2), (6, 4), (16, 4)])
def test_the_interleaving_copy_as_vector_rows(w: int, k: int, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("EINC_C_VECTOR_BITS", "512")
    ir, inputs, sched = _padded(w, k)
    comp = Compilation(ir, "<interleave>", inputs, None, "c", sched)
    source = comp.run_until("source")
    assert isinstance(source, str)
    # no scalar copy from the tensor: its rows loaded (masked where no multiple of 16), zipped, stored
    assert not re.search(r"input0_local\[[^\]]*\] = input0\[", source), source
    chunks = -(-w // 16)
    assert len(re.findall(r"einc_vload_f32x16\(&input0\[", source)) == k * (w // 16), source
    assert len(re.findall(r"einc_vloadn_f32x16\(&input0\[", source)) == (k if w % 16 else 0), source
    assert re.search(r"__builtin_shufflevector", source), source
    # the stores: k per chunk, fewer (and the last masked) where the chunk is partial
    stores = sum(-(-k * min(16, w - 16 * c) // 16) for c in range(chunks))
    assert len(re.findall(r"einc_vstoren?_f32x16\(&input0_local\[", source)) == stores, source
    assert len(re.findall(r"einc_vstoren_f32x16\(&input0_local\[", source)) == (1 if (k * w) % 16 else 0), source
    rng = np.random.default_rng(40 + w + k)
    arrays = {name: rng.uniform(-2, 2, v["shape"]).astype(np.float32) for name, v in inputs.items()}
    want = _answer(arrays, w, k)
    assert max_error(comp.kernel()(**arrays)["output0"], want) <= tolerance("float32"), source
    assert max_error(run_lowered(comp.results["target"], arrays, target="c")["output0"], want) <= tolerance("float32")


def test_a_row_no_multiple_of_256_bit_vectors_stays_scalar(monkeypatch: pytest.MonkeyPatch) -> None:
    """Hosts of 256-bit vectors (AVX2) have no masked partial vectors in the C target: a row of
    6 columns is copied by the scalar nest (GCC's code), still NumPy's numbers."""
    monkeypatch.setenv("EINC_C_VECTOR_BITS", "256")
    ir, inputs, sched = _padded(6, 2)
    comp = Compilation(ir, "<interleave>", inputs, None, "c", sched)
    source = comp.run_until("source")
    assert isinstance(source, str)
    assert re.search(r"input0_local\[[^\]]*\] = input0\[", source), source
    assert "einc_vloadn" not in source, source
    rng = np.random.default_rng(47)
    arrays = {name: rng.uniform(-2, 2, v["shape"]).astype(np.float32) for name, v in inputs.items()}
    assert max_error(comp.kernel()(**arrays)["output0"], _answer(arrays, 6, 2)) <= tolerance("float32"), source
