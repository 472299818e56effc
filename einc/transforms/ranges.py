"""Integer range (interval) analysis of index values: one set of rules for affine
expressions, with two carriers of bounds.

- `Range`: inclusive (lower, upper), None where unbounded. `expr_range` bounds an affine
  expression from ranges of its dims and symbols, `value_range` an index SSA value (loop
  variables with constant bounds, work-item ids, constants, `affine.apply`), `trip_count`
  is a constant-bounded loop's iteration count. The C-like printers ask `value_range`
  whether a dividend is non-negative (to print `/` instead of the floor helper).
- `PointRange`: one (lower, upper) per point of a loop, as NumPy arrays (the Poplar tile
  split bounds, at every point of a kernel's point loop at once, the elements it reads:
  einc/transforms/vertex_split.py). Anything it cannot bound raises `Unbounded`.

Contract: sound (the true value always lies inside), not tight; floordiv, ceildiv and mod
are by positive constants as in valid affine maps (otherwise unbounded).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol, TypeVar

import numpy as np
from xdsl.dialects import affine, arith, scf
from xdsl.dialects.builtin import IntegerAttr
from xdsl.ir import BlockArgument, SSAValue
from xdsl.ir.affine import (
    AffineBinaryOpExpr,
    AffineBinaryOpKind,
    AffineConstantExpr,
    AffineDimExpr,
    AffineExpr,
    AffineMap,
    AffineSymExpr,
)

from einc.dialects import egpu

Range = tuple[int | None, int | None]
"""Inclusive lower and upper bounds; None is unbounded."""

PointRange = tuple[np.ndarray, np.ndarray]
"""Per point of a loop: the least and the greatest value (inclusive)."""

B = TypeVar("B", Range, PointRange)


class Unbounded(Exception):
    """A value the per-point analysis cannot bound (a gather's loaded index, ...)."""


class _Algebra(Protocol[B]):
    """Interval arithmetic on one carrier of bounds."""

    def constant(self, v: int) -> B: ...
    def unknown(self) -> B: ...
    def add(self, a: B, b: B) -> B: ...
    def mul(self, a: B, b: B) -> B: ...
    def divisor(self, b: B) -> int | None: ...
    def floordiv(self, a: B, c: int) -> B: ...
    def ceildiv(self, a: B, c: int) -> B: ...
    def mod(self, a: B, c: int) -> B: ...


def _add(a: int | None, b: int | None) -> int | None:
    return None if a is None or b is None else a + b


class _Scalar:
    def constant(self, v: int) -> Range:
        return v, v

    def unknown(self) -> Range:
        return None, None

    def add(self, a: Range, b: Range) -> Range:
        return _add(a[0], b[0]), _add(a[1], b[1])

    def mul(self, a: Range, b: Range) -> Range:
        if None in a or None in b:
            if a[0] is not None and a[0] == a[1] == 0 or b[0] is not None and b[0] == b[1] == 0:
                return 0, 0
            # Non-negative times non-negative stays non-negative.
            if a[0] is not None and a[0] >= 0 and b[0] is not None and b[0] >= 0:
                return 0, None
            return None, None
        products = [x * y for x in a for y in b]  # type: ignore[operator]
        return min(products), max(products)

    def divisor(self, b: Range) -> int | None:
        return b[0] if b[0] is not None and b[0] == b[1] and b[0] > 0 else None

    def floordiv(self, a: Range, c: int) -> Range:
        return None if a[0] is None else a[0] // c, None if a[1] is None else a[1] // c

    def ceildiv(self, a: Range, c: int) -> Range:
        return None if a[0] is None else -(-a[0] // c), None if a[1] is None else -(-a[1] // c)

    def mod(self, a: Range, c: int) -> Range:
        """x mod c (c > 0, result in [0, c)): exact within one period, else [0, c - 1]."""
        if a[0] is not None and a[1] is not None and a[0] // c == a[1] // c:
            return a[0] % c, a[1] % c
        return 0, c - 1


class Points:
    """Bounds per point of `points` (an int64 array)."""

    def __init__(self, points: np.ndarray):
        self.points = points

    def constant(self, v: int) -> PointRange:
        full = np.full_like(self.points, v)
        return full, full

    def unknown(self) -> PointRange:
        raise Unbounded()

    def add(self, a: PointRange, b: PointRange) -> PointRange:
        return a[0] + b[0], a[1] + b[1]

    def mul(self, a: PointRange, b: PointRange) -> PointRange:
        products = [a[0] * b[0], a[0] * b[1], a[1] * b[0], a[1] * b[1]]
        return np.minimum.reduce(products), np.maximum.reduce(products)

    def divisor(self, b: PointRange) -> int | None:
        if not (np.all(b[0] == b[1]) and np.all(b[0] > 0)) or len(np.unique(b[0])) != 1:
            return None
        return int(b[0][0])

    def constant_divisor(self, b: PointRange) -> int:
        c = self.divisor(b)
        if c is None:
            raise Unbounded()
        return c

    def floordiv(self, a: PointRange, c: int) -> PointRange:
        return np.floor_divide(a[0], c), np.floor_divide(a[1], c)

    def ceildiv(self, a: PointRange, c: int) -> PointRange:
        low, high = self.floordiv((-a[1], -a[0]), c)
        return -high, -low

    def mod(self, a: PointRange, c: int) -> PointRange:
        """x mod c (c > 0, result in [0, c)): exact within one period, else [0, c - 1]."""
        same = np.floor_divide(a[0], c) == np.floor_divide(a[1], c)
        return np.where(same, np.mod(a[0], c), 0), np.where(same, np.mod(a[1], c), c - 1)


def _expr_range(expr: AffineExpr, dims: Sequence[B], symbols: Sequence[B], on: _Algebra[B]) -> B:
    match expr:
        case AffineConstantExpr(value=v):
            return on.constant(v)
        case AffineDimExpr(position=p):
            return dims[p] if p < len(dims) else on.unknown()
        case AffineSymExpr(position=p):
            return symbols[p] if p < len(symbols) else on.unknown()
        case AffineBinaryOpExpr(kind=kind, lhs=lhs, rhs=rhs):
            return _binary_range(kind, _expr_range(lhs, dims, symbols, on), _expr_range(rhs, dims, symbols, on), on)
        case _:
            return on.unknown()


def _binary_range(kind: AffineBinaryOpKind, a: B, b: B, on: _Algebra[B]) -> B:
    """The bounds of `a kind b` from those of its operands."""
    if kind == AffineBinaryOpKind.Add:
        return on.add(a, b)
    if kind == AffineBinaryOpKind.Mul:
        return on.mul(a, b)
    c = on.divisor(b)
    if c is None:
        return on.unknown()
    if kind == AffineBinaryOpKind.Mod:
        return on.mod(a, c)
    if kind == AffineBinaryOpKind.FloorDiv:
        return on.floordiv(a, c)
    return on.ceildiv(a, c)


def binary_range(kind: AffineBinaryOpKind, a: Range, b: Range) -> Range:
    """`expr_range` of a binary expression from the ranges of its two operands."""
    return _binary_range(kind, a, b, _Scalar())


def expr_range(expr: AffineExpr, dims: Sequence[Range], symbols: Sequence[Range] = ()) -> Range:
    """Conservative inclusive bounds of `expr` given bounds of its dims and symbols."""
    return _expr_range(expr, dims, symbols, _Scalar())


def point_expr_range(
    expr: AffineExpr, dims: Sequence[PointRange], symbols: Sequence[PointRange], points: Points
) -> PointRange:
    """`expr_range` at every point: bounds of `expr` per point; Unbounded when it has none."""
    return _expr_range(expr, dims, symbols, points)


def point_map_ranges(m: AffineMap, values: Sequence[PointRange], points: Points) -> list[PointRange]:
    """Each result of `m` applied to operands bounded by `values`, per point."""
    return [point_expr_range(r, values[: m.num_dims], values[m.num_dims :], points) for r in m.results]


def trip_count(loop: affine.ForOp) -> int | None:
    """How many times a loop with constant bounds runs (0 for an empty one), else None."""
    lb, ub = loop.lowerBoundMap.data, loop.upperBoundMap.data
    if len(lb.results) != 1 or len(ub.results) != 1:
        return None
    lo, hi = lb.results[0], ub.results[0]
    if not (isinstance(lo, AffineConstantExpr) and isinstance(hi, AffineConstantExpr)):
        return None
    return max(0, -(-(hi.value - lo.value) // loop.step.value.data))


def max_trip_count(loop: affine.ForOp) -> int | None:
    """The trip count of a loop with a constant lower bound, the largest one when its upper
    bound is a min with a constant term; None otherwise."""
    lb, ub = loop.lowerBoundMap.data, loop.upperBoundMap.data
    if lb.num_dims or lb.num_symbols or len(lb.results) != 1:
        return None
    lower = lb.eval([], [])[0]
    constants = [r.value for r in ub.results if isinstance(r, AffineConstantExpr)]
    if not constants:
        return None
    return max(0, -(-(min(constants) - lower) // loop.step.value.data))


def value_range(v: SSAValue) -> Range:
    """Inclusive bounds of an index value: loop variables with constant bounds, work-item
    ids, constants and `affine.apply`s of them; unbounded otherwise."""
    if isinstance(v, BlockArgument):
        parent = v.block.parent_op()
        if isinstance(parent, affine.ForOp) and v.index == 0:
            bounds = constant_trip_range(parent)
            if bounds is not None and bounds[1] > bounds[0]:
                return bounds[0], bounds[1] - 1
        if isinstance(parent, scf.ForOp) and v.index == 0:
            lo, hi = value_range(parent.lb)[0], value_range(parent.ub)[1]
            if lo is not None and hi is not None and hi > lo:
                return lo, hi - 1
        return None, None
    owner = v.owner
    if isinstance(owner, egpu.IndexOp):
        return owner.index_range()
    if isinstance(owner, arith.ConstantOp) and isinstance(owner.value, IntegerAttr):
        return owner.value.value.data, owner.value.value.data
    if isinstance(owner, affine.ApplyOp):
        m = owner.map.data
        operands = [value_range(o) for o in owner.mapOperands]
        return expr_range(m.results[0], operands[: m.num_dims], operands[m.num_dims :])
    return None, None


def constant_trip_range(loop: affine.ForOp) -> tuple[int, int] | None:
    """`(lower, upper)` of a loop with constant bounds (upper exclusive), else None."""
    lb, ub = loop.lowerBoundMap.data, loop.upperBoundMap.data
    if lb.num_dims or lb.num_symbols or ub.num_dims or ub.num_symbols:
        return None
    if len(lb.results) != 1 or len(ub.results) != 1:
        return None
    return lb.eval([], [])[0], ub.eval([], [])[0]
