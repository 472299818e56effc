"""How einc judges a kernel's numbers: random inputs that are never zero, each dtype's
tolerance, and the error of an output against the float64 NumPy reference (einc.semantics.reference).
Shared by `einc run`, the tuner's runner, `--check-numerics` and the tests."""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from einc.ir.attrs import is_float_dtype

if TYPE_CHECKING:
    from einc.frontend import Program


def random_inputs(program: Program, rng: np.random.Generator) -> dict[str, np.ndarray]:
    """Non-zero random data: floats in ±[0.5, 2), ints in [1, 7] (small: safe as gather
    indices into any dimension of 8 or more, and for shifts)."""
    arrays = {}
    for t in program.inputs:
        if is_float_dtype(np.dtype(t.dtype)):
            mag = rng.uniform(0.5, 2.0, t.shape)
            arrays[t.name] = np.asarray(mag * rng.choice([-1.0, 1.0], t.shape), dtype=t.dtype)
        else:
            arrays[t.name] = np.asarray(rng.integers(1, 8, t.shape), dtype=t.dtype)
    return arrays  # rank 0: a 0-d array (rng draws a NumPy scalar for shape ())


def tolerance(dtype: str) -> float:
    return {"float64": 1e-9, "float32": 1e-4, "float16": 2e-2, "bfloat16": 5e-2}.get(dtype, 0.0)


def max_error(got: np.ndarray, want: np.ndarray) -> float:
    """Largest error, relative to the reference's magnitude for floats; exact for ints."""
    if got.size == 0:
        return 0.0
    if not is_float_dtype(got.dtype):
        return float(np.max(np.abs(got.astype(np.int64) - want.astype(np.int64))))
    scale = max(1.0, float(np.max(np.abs(want[np.isfinite(want)]), initial=0.0)))
    diff = np.abs(got.astype(np.float64) - want)
    same_inf = np.isinf(want) & (got.astype(np.float64) == want)
    diff = np.where(same_inf | (np.isnan(want) & np.isnan(got)), 0.0, diff)
    return float(np.max(diff)) / scale
