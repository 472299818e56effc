"""Comparing a kernel's outputs with the oracle's float64 values, dtype-aware.

Two kinds of expectation:
- `Expected` from the program generator carries, per element, a bound on how far a correct
  implementation computing in the program's dtypes may be from the float64 value (`err`, a
  running error analysis) and a mask of elements whose value is not determined by the dtypes'
  rounding (`uncertain`, e.g. a float comparison too close to call). Checked elements must lie
  within `TOL_FACTOR * err`; integers and exactly computed floats must be equal.
- `reference_tolerance` gives the fixed tolerances used for the hand-written references.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

# How many times the analysed error bound a result may be off (and the margin within which a
# discontinuity such as a comparison is considered undecided).
TOL_FACTOR = 4.0

REL_TOL = {"float64": 1e-10, "float32": 1e-4, "float16": 1e-2}


@dataclass
class Expected:
    """The oracle's value of one result tensor."""

    dtype: str  # the dtype the kernel must return (bool results are int8)
    value: np.ndarray  # float64 for float dtypes, int64 for int dtypes
    err: np.ndarray | None = None  # float64 bound on |implementation - value|, None: exact
    uncertain: np.ndarray | None = None  # bool mask of elements not checked


def _fmt(arr: np.ndarray, limit: int = 8) -> str:
    flat = np.asarray(arr).ravel()
    text = np.array2string(flat[:limit], precision=9, separator=", ")
    return text + (f" ... ({flat.size} elements)" if flat.size > limit else "")


def check_output(name: str, got: np.ndarray, exp: Expected, context: str = "") -> None:
    """Asserts `got` matches `exp`; the message says where and by how much it does not."""
    got = np.asarray(got)
    where = f"{name}: " + (f"[{context}] " if context else "")
    assert got.dtype == np.dtype(exp.dtype), (
        f"{where}dtype {got.dtype}, expected {exp.dtype}"
    )
    assert got.shape == exp.value.shape, (
        f"{where}shape {got.shape}, expected {exp.value.shape}"
    )
    ref = exp.value
    checked = np.ones(ref.shape, dtype=bool)
    if exp.uncertain is not None:
        checked &= ~np.broadcast_to(exp.uncertain, ref.shape)
    if np.dtype(exp.dtype).kind in "iub":
        bad = checked & (got.astype(np.int64) != ref.astype(np.int64))
        tol = np.zeros(ref.shape)
    else:
        g = got.astype(np.float64)
        err = np.zeros(ref.shape) if exp.err is None else np.broadcast_to(exp.err, ref.shape)
        tol = TOL_FACTOR * err
        with np.errstate(invalid="ignore"):
            close = (g == ref) | (np.abs(g - ref) <= tol)
        bad = checked & ~close
    if bad.any():
        idx = np.argwhere(bad)
        first = tuple(int(i) for i in idx[0]) if idx.size else ()
        raise AssertionError(
            f"{where}{int(bad.sum())} of {ref.size} elements differ "
            f"({int((~checked).sum())} undecided, not checked); first at {list(first)}: "
            f"got {got[first]!r}, expected {ref[first]!r} (tolerance {tol[first]:.3g})\n"
            f"  got:      {_fmt(got)}\n  expected: {_fmt(ref)}"
        )


def reference_tolerance(dtype: str, ref: np.ndarray, reduce_len: int = 1) -> tuple[float, float]:
    """(rtol, atol) for comparing an output of `dtype` with a float64 reference: a relative
    tolerance per dtype and an absolute floor scaled by the reduction length and the
    reference's magnitude (a sum of n terms of size s is off by up to n * eps * s)."""
    if np.dtype(dtype).kind in "iub":
        return 0.0, 0.0
    rtol = REL_TOL[dtype]
    finite = np.abs(ref[np.isfinite(ref)]) if ref.size else np.zeros(0)
    scale = max(1.0, float(finite.max())) if finite.size else 1.0
    return rtol, rtol * max(1, reduce_len) ** 0.5 * scale


def check_reference(
    name: str, got: np.ndarray, ref: np.ndarray, dtype: str, reduce_len: int = 1, context: str = ""
) -> None:
    """Asserts `got` (of `dtype`) is close to the float64/int64 reference `ref`."""
    got = np.asarray(got)
    where = f"{name}: " + (f"[{context}] " if context else "")
    assert got.dtype == np.dtype(dtype), f"{where}dtype {got.dtype}, expected {dtype}"
    ref = np.asarray(ref)
    assert got.shape == ref.shape, f"{where}shape {got.shape}, expected {ref.shape}"
    rtol, atol = reference_tolerance(dtype, ref.astype(np.float64), reduce_len)
    if rtol == 0.0:
        bad = got.astype(np.int64) != ref.astype(np.int64)
    else:
        g, r = got.astype(np.float64), ref.astype(np.float64)
        with np.errstate(invalid="ignore"):
            bad = ~((g == r) | (np.abs(g - r) <= atol + rtol * np.abs(r)))
    if bad.any():
        first = tuple(int(i) for i in np.argwhere(bad)[0])
        raise AssertionError(
            f"{where}{int(bad.sum())} of {ref.size} elements differ (rtol {rtol}, atol "
            f"{atol:.3g}); first at {list(first)}: got {got[first]!r}, expected {ref[first]!r}\n"
            f"  got:      {_fmt(got)}\n  expected: {_fmt(ref)}"
        )
