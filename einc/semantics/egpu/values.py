"""Lane values and the arithmetic on them: `arith` and `math` (scalar and vector types) computed
once for every work-item of a launch with NumPy.

A value is a NumPy array whose leading axis is the lane (work-item): shape `(W,)` for a
scalar type, `(W, n)` for `vector<nxT>`; a value every lane shares (a constant, a loop
counter of a uniform loop) is kept without the lane axis (shape `()` or `(n,)`), and NumPy
broadcasting mixes the two. Each element type is its own NumPy dtype (`f16` is float16,
`i8` int8, `index` int64, `i1` bool), so every operation rounds and wraps as the type does,
with the semantics of einc's loop interpreter (einc/semantics/loops.py): total integer division,
saturating float -> integer conversion, NaN-propagating `maximumf`/`minimumf`, `fma` as an
exact product in double then one rounding.
"""

from __future__ import annotations

import functools
import operator
from collections.abc import Callable
from typing import cast as typing_cast

import numpy as np
from xdsl.dialects import arith
from xdsl.dialects.builtin import AnyFloat, IndexType, IntegerType, VectorType, bf16
from xdsl.ir import Attribute, Operation

from einc.ir.attrs import dtype_name
from einc.semantics import loops as interp
from einc.semantics.loops import bitwidth

Lanes = np.ndarray
"""A value of every lane (or one shared by all: no lane axis). NumPy scalars (`np.generic`,
what operations on 0-d arrays give) stand for 0-d arrays: they broadcast and compute alike."""


def lanes(value: object) -> Lanes:
    """`value` (an `env` entry) as a lane value."""
    if isinstance(value, np.ndarray | np.generic):
        return typing_cast(Lanes, value)
    raise TypeError(f"not a lane value: {type(value).__name__}")


class UnsupportedIR(Exception):
    """The module holds an op (or a form of one) the interpreter does not execute."""

    def __init__(self, op: Operation | str, detail: str = ""):
        name = op if isinstance(op, str) else op.name
        super().__init__(f"the egpu interpreter cannot execute {name}" + (f": {detail}" if detail else ""))
        self.op_name = name


def element_type(t: Attribute) -> Attribute:
    return t.get_element_type() if isinstance(t, VectorType) else t


@functools.lru_cache(maxsize=256)
def dtype_of(t: Attribute) -> np.dtype:
    """The NumPy dtype holding values of scalar or vector type `t`."""
    t = element_type(t)
    if isinstance(t, AnyFloat):
        if t.bitwidth not in (16, 32, 64):
            raise UnsupportedIR(str(t), "no NumPy float of that width")
        return np.dtype(dtype_name(t))  # bf16: ml_dtypes' bfloat16
    if isinstance(t, IndexType):
        return np.dtype(np.int64)
    if isinstance(t, IntegerType):
        width = t.width.data
        if width == 1:
            return np.dtype(np.bool_)
        if width not in (8, 16, 32, 64):
            raise UnsupportedIR(str(t), "no NumPy integer of that width")
        return np.dtype(f"int{width}")
    raise UnsupportedIR(str(t), "not a scalar or vector type")


def unsigned_view(x: Lanes) -> Lanes:
    a = np.asarray(x)
    return a if a.dtype == np.bool_ else a.view(f"uint{a.dtype.itemsize * 8}")


def as_dtype(x: Lanes, dtype: np.dtype) -> Lanes:
    return np.asarray(x).astype(dtype, copy=False)


def select(cond: Lanes, a: Lanes, b: Lanes, vector: bool) -> Lanes:
    """Per lane: `a` where `cond`, else `b` (for vectors, `cond` has one value per lane)."""
    c = np.asarray(cond)
    if vector and c.ndim == 1:
        c = c[:, None]
    return np.where(c, a, b)


# ---- arith ----------------------------------------------------------------------------------


def _signed_pair(a: Lanes, b: Lanes) -> tuple[Lanes, Lanes]:
    a, b = np.asarray(a), np.asarray(b)
    if a.dtype == np.bool_:  # an i1 true reads as -1 when signed
        return -a.astype(np.int8), -b.astype(np.int8)
    return a, b


def _div_trunc(a: Lanes, b: Lanes) -> Lanes:
    safe = np.where(b == 0, 1, b).astype(b.dtype)
    q = a // safe
    r = a - q * safe
    q = np.where((r != 0) & ((a < 0) != (safe < 0)), q + 1, q).astype(a.dtype)
    return np.where(b == 0, 0, q).astype(a.dtype)


def _total(fn: Callable[[Lanes, Lanes], Lanes]) -> Callable[[Lanes, Lanes], Lanes]:
    def total(a: Lanes, b: Lanes) -> Lanes:
        safe = np.where(b == 0, 1, b).astype(np.asarray(b).dtype)
        return np.where(b == 0, 0, fn(a, safe)).astype(np.asarray(a).dtype)

    return total


def _shift_left(a: Lanes, b: Lanes) -> Lanes:
    width = np.asarray(a).dtype.itemsize * 8
    ub = unsigned_view(b)
    return np.where(ub >= width, 0, np.left_shift(a, np.minimum(ub, width - 1).astype(np.asarray(a).dtype))).astype(np.asarray(a).dtype)


def _shift_right_signed(a: Lanes, b: Lanes) -> Lanes:
    width = np.asarray(a).dtype.itemsize * 8
    return np.right_shift(a, np.minimum(unsigned_view(b), width - 1).astype(np.asarray(a).dtype))


def _shift_right_unsigned(a: Lanes, b: Lanes) -> Lanes:
    ua = unsigned_view(a)
    width = ua.dtype.itemsize * 8
    ub = unsigned_view(b)
    shifted = np.right_shift(ua, np.minimum(ub, width - 1).astype(ua.dtype))
    return np.where(ub >= width, 0, shifted).astype(ua.dtype).view(np.asarray(a).dtype)


def _unsigned(fn: Callable[[Lanes, Lanes], Lanes]) -> Callable[[Lanes, Lanes], Lanes]:
    def run(a: Lanes, b: Lanes) -> Lanes:
        a = np.asarray(a)
        if a.dtype == np.bool_:
            return fn(a, np.asarray(b))
        return np.asarray(fn(unsigned_view(a), unsigned_view(b))).astype(unsigned_view(a).dtype).view(a.dtype)

    return run


INT_BINARY: dict[type[Operation], Callable[[Lanes, Lanes], Lanes]] = {
    arith.AddiOp: operator.add,
    arith.SubiOp: operator.sub,
    arith.MuliOp: operator.mul,
    arith.AndIOp: operator.and_,
    arith.OrIOp: operator.or_,
    arith.XOrIOp: operator.xor,
    arith.MaxSIOp: lambda a, b: np.maximum(*_signed_pair(a, b)),
    arith.MinSIOp: lambda a, b: np.minimum(*_signed_pair(a, b)),
    arith.DivSIOp: _div_trunc,
    arith.RemSIOp: lambda a, b: (a - _div_trunc(a, b) * np.where(b == 0, 0, b)).astype(np.asarray(a).dtype),
    arith.FloorDivSIOp: _total(np.floor_divide),
    arith.CeilDivSIOp: _total(lambda a, b: -((-a) // b)),
    arith.ShLIOp: _shift_left,
    arith.ShRSIOp: _shift_right_signed,
    arith.ShRUIOp: _shift_right_unsigned,
    arith.DivUIOp: _unsigned(_total(np.floor_divide)),
    arith.RemUIOp: _unsigned(_total(np.mod)),
    arith.CeilDivUIOp: _unsigned(_total(lambda a, b: a // b + (a % b != 0))),
    arith.MaxUIOp: _unsigned(np.maximum),
    arith.MinUIOp: _unsigned(np.minimum),
}
"""Integer (and index) binary ops on same-dtype arrays (which wrap as the type does)."""

FLOAT_BINARY: dict[type[Operation], Callable[[Lanes, Lanes], Lanes]] = {
    arith.AddfOp: operator.add,
    arith.SubfOp: operator.sub,
    arith.MulfOp: operator.mul,
    arith.DivfOp: operator.truediv,
    arith.MaximumfOp: interp.maximum,
    arith.MinimumfOp: interp.minimum,
    arith.MaxnumfOp: np.fmax,
    arith.MinnumfOp: np.fmin,
    **interp.FLOAT_BINARY_MATH,
}



_CMPI: tuple[Callable[[Lanes, Lanes], Lanes], ...] = (
    operator.eq, operator.ne, operator.lt, operator.le, operator.gt, operator.ge,
    operator.lt, operator.le, operator.gt, operator.ge,
)  # fmt: skip


def cmpi(predicate: int, a: Lanes, b: Lanes) -> Lanes:
    if predicate >= 6:
        a, b = unsigned_view(a), unsigned_view(b)
    else:
        a, b = _signed_pair(a, b)
    return np.asarray(_CMPI[predicate](a, b))


def _unordered(a: Lanes, b: Lanes) -> Lanes:
    return np.isnan(a) | np.isnan(b)


_CMPF: tuple[Callable[[Lanes, Lanes], Lanes], ...] = (
    lambda a, b: np.zeros(np.broadcast(a, b).shape, np.bool_),
    operator.eq, operator.gt, operator.ge, operator.lt, operator.le,
    lambda a, b: (a != b) & ~_unordered(a, b),
    lambda a, b: ~_unordered(a, b),
    lambda a, b: (a == b) | _unordered(a, b),
    lambda a, b: (a > b) | _unordered(a, b),
    lambda a, b: (a >= b) | _unordered(a, b),
    lambda a, b: (a < b) | _unordered(a, b),
    lambda a, b: (a <= b) | _unordered(a, b),
    lambda a, b: a != b,
    _unordered,
    lambda a, b: np.ones(np.broadcast(a, b).shape, np.bool_),
)  # fmt: skip
"""By predicate number: false oeq ogt oge olt ole one ord ueq ugt uge ult ule une uno true."""


def cmpf(predicate: int, a: Lanes, b: Lanes) -> Lanes:
    return np.asarray(_CMPF[predicate](np.asarray(a), np.asarray(b)))


def float_to_int(x: Lanes, dtype: np.dtype, signed: bool) -> Lanes:
    """Truncation toward zero, saturated to the type's range, NaN giving 0 (interp._fptoi)."""
    bits = 1 if dtype == np.bool_ else dtype.itemsize * 8
    lo, hi = (-(2 ** (bits - 1)), 2 ** (bits - 1) - 1) if signed else (0, 2**bits - 1)
    t = np.trunc(np.asarray(x, np.float64))
    inside = (t >= lo) & (t < float(hi) + 1)
    work = np.dtype(np.int64) if signed else np.dtype(np.uint64)
    out = np.where(inside, np.where(inside, t, 0).astype(work), 0).astype(work)
    out = np.where(t >= float(hi) + 1, np.array(hi, dtype=work), out)
    out = np.where(t < lo, np.array(lo, dtype=work), out)
    out = np.where(np.isnan(t), 0, out).astype(work)
    if dtype == np.bool_:
        return (out & 1).astype(np.bool_)
    return out.astype(dtype)


def _int_source(x: Lanes, signed: bool) -> Lanes:
    a = np.asarray(x)
    if a.dtype == np.bool_:
        return -a.astype(np.int64) if signed else a.astype(np.int64)
    return a if signed else unsigned_view(a)


def _is_float(dtype: np.dtype) -> bool:
    """A float dtype, ml_dtypes' bfloat16 (kind "V") among them."""
    return dtype.kind == "f" or dtype == np.dtype(dtype_name(bf16))


def cast(op: Operation, x: Lanes, dst: Attribute) -> Lanes:
    """The conversion `op` (an arith cast, or egpu.vconvert) of `x` into type `dst`."""
    dtype = dtype_of(dst)
    a = np.asarray(x)
    if isinstance(op, arith.FPToSIOp | arith.FPToUIOp):
        return float_to_int(a, dtype, isinstance(op, arith.FPToSIOp))
    if isinstance(op, arith.BitcastOp):
        return a.view(dtype)
    src_float = _is_float(a.dtype)
    dst_float = _is_float(dtype)
    if src_float and not dst_float:  # a vector conversion: as fptosi
        return float_to_int(a, dtype, True)
    if dst_float:
        if src_float:
            return a.astype(dtype)
        return _int_source(a, not isinstance(op, arith.UIToFPOp)).astype(dtype)
    if dtype == np.bool_:  # trunci to i1
        return (_int_source(a, True) & 1).astype(np.bool_)
    return _int_source(a, not isinstance(op, arith.ExtUIOp)).astype(dtype)


CASTS = (
    arith.ExtFOp, arith.TruncFOp, arith.SIToFPOp, arith.UIToFPOp, arith.FPToSIOp,
    arith.FPToUIOp, arith.ExtSIOp, arith.ExtUIOp, arith.TruncIOp, arith.IndexCastOp,
    arith.BitcastOp,
)  # fmt: skip


# ---- math -----------------------------------------------------------------------------------


FLOAT_UNARY: dict[type[Operation], Callable[[Lanes], Lanes]] = {**interp.FLOAT_UNARY, arith.NegfOp: np.negative}
"""The loop interpreter's table (its functions take arrays too), and negation."""


def fma(a: Lanes, b: Lanes, c: Lanes, dtype: np.dtype) -> Lanes:
    """a * b + c computed in double (exact product for f16/f32), then one rounding."""
    wide = np.asarray(a, np.float64) * np.asarray(b, np.float64) + np.asarray(c, np.float64)
    return wide.astype(dtype)


def ipowi(a: Lanes, b: Lanes, t: Attribute) -> Lanes:
    """Integer power element by element (rare: Python ints, wrapped)."""
    dtype = dtype_of(t)
    width = bitwidth(element_type(t))
    aa, bb = np.broadcast_arrays(np.asarray(a), np.asarray(b))
    out = np.empty(aa.shape, dtype)
    for k in np.ndindex(aa.shape):
        v = interp.ipow(int(aa[k]), int(bb[k])) & ((1 << width) - 1)
        out[k] = v - (1 << width) if v >> (width - 1) else v
    return out


REDUCE: dict[str, Callable[[Lanes, Lanes], Lanes]] = {
    "add": operator.add,
    "mul": operator.mul,
    "max": interp.maximum,
    "min": interp.minimum,
}
"""egpu.vreduce / subgroup_reduce combiners (max/min as arith.maximumf: NaN, -0 below +0)."""


def combine(kind: str, a: Lanes, b: Lanes) -> Lanes:
    fn = REDUCE[kind]
    if np.asarray(a).dtype.kind != "f" and kind in ("max", "min"):
        return np.maximum(a, b) if kind == "max" else np.minimum(a, b)
    return fn(a, b)
