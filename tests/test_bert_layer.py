"""examples/bert_layer.ein (a BERT encoder layer) against a NumPy float64 implementation of
the layer written from BERT's formulas (not einc's reference interpreter), on the C target."""

from __future__ import annotations

from pathlib import Path

import numpy as np

import einc
from einc.compiler.driver import Compilation
from einc.semantics.compare import max_error, random_inputs

ROOT = Path(__file__).resolve().parent.parent
HEADS, SEQ, HIDDEN = 4, 128, 256


def _layer_norm(r: np.ndarray, gamma: np.ndarray, beta: np.ndarray) -> np.ndarray:
    mean = r.mean(axis=1, keepdims=True)
    var = ((r - mean) ** 2).mean(axis=1, keepdims=True)
    return (r - mean) / np.sqrt(var + 1e-12) * gamma + beta


def bert_layer(a: dict[str, np.ndarray]) -> np.ndarray:
    """One post-layer-norm BERT encoder layer in float64 (the example's scaling included)."""
    a = {k: v.astype(np.float64) for k, v in a.items()}
    x = a["x"]

    def heads(w: str, b: str) -> np.ndarray:  # [head, position, 64]
        return ((x @ a[w]) * 0.0625 + a[b]).reshape(SEQ, HEADS, -1).transpose(1, 0, 2)

    q, k, v = heads("wq", "bq"), heads("wk", "bk"), heads("wv", "bv")
    scores = q @ k.transpose(0, 2, 1) * 0.125
    e = np.exp(scores - scores.max(axis=2, keepdims=True))
    context = (e / e.sum(axis=2, keepdims=True)) @ v
    attn = context.transpose(1, 0, 2).reshape(SEQ, HIDDEN) @ a["wo"]
    h1 = _layer_norm(attn * 0.0625 + a["bo"] + x, a["ln1_g"], a["ln1_b"])
    g = (h1 @ a["w1"]) * 0.0625 + a["b1"]
    gelu = 0.5 * g * (1.0 + np.tanh(np.sqrt(2 / np.pi) * (g + 0.044715 * g**3)))
    return _layer_norm((gelu @ a["w2"]) * 0.03125 + a["b2"] + h1, a["ln2_g"], a["ln2_b"])


def test_bert_layer_matches_numpy_on_c() -> None:
    text = (ROOT / "examples" / "bert_layer.ein").read_text()
    comp = Compilation(text, "bert_layer.ein", use_records=False)
    comp.run_until("ein")
    inputs = random_inputs(comp.program, np.random.default_rng(2026))
    want = bert_layer(inputs)
    assert np.abs(want).max() > 1.0 and np.isfinite(want).all()  # normalised rows: values ~1, not collapsed
    got = einc.compile(text, None, target="c", use_records=False)(**{k: v.copy() for k, v in inputs.items()})
    assert got["out"].shape == (SEQ, HIDDEN)
    assert max_error(got["out"], want) <= 1e-4
