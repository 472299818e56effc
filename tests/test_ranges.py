"""einc/transforms/ranges.py: the one set of interval rules for affine expressions, on
scalar bounds (`expr_range`) and per point of a loop (`point_expr_range`), checked sound
against every value and identical on the two carriers."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from xdsl.ir.affine import AffineBinaryOpExpr, AffineBinaryOpKind, AffineExpr

from einc.transforms.ranges import Points, Unbounded, expr_range, point_expr_range

d0, d1 = AffineExpr.dimension(0), AffineExpr.dimension(1)
s0 = AffineExpr.symbol(0)


def _times(a: AffineExpr, b: AffineExpr) -> AffineExpr:
    """A product of two non-constants (semi-affine: its range needs the interval rule)."""
    return AffineBinaryOpExpr(AffineBinaryOpKind.Mul, a, b)


EXPRS = {
    "linear": d0 * 3 + d1 * -2 + 7,
    "floordiv": (d0 * 5 + d1) // 4,
    "ceildiv": (d0 - d1).ceil_div(3),
    "mod-one-period": (d1 + 8) % 20,
    "mod-wraps": (d0 * 7 + d1) % 6,
    "product": _times(d0, d1) + s0,
    "nested": ((d0 + s0) % 5) * 2 + _times(d1 // 3, d0),
}
DIMS = [(-4, 6), (0, 9)]
SYMBOLS = [(2, 3)]


def _values(e: AffineExpr, dims: list[tuple[int, int]], symbols: list[tuple[int, int]]) -> list[int]:
    spaces = [range(lo, hi + 1) for lo, hi in [*dims, *symbols]]
    return [
        e.eval(list(point[: len(dims)]), list(point[len(dims) :]))
        for point in itertools.product(*spaces)
    ]


@pytest.mark.parametrize("name", EXPRS)
def test_expr_range_holds_every_value(name: str) -> None:
    e = EXPRS[name]
    values = _values(e, DIMS, SYMBOLS)
    lo, hi = expr_range(e, DIMS, SYMBOLS)
    assert lo is not None and hi is not None
    assert lo <= min(values) and max(values) <= hi
    if name in ("linear", "floordiv", "ceildiv", "mod-one-period"):
        assert (lo, hi) == (min(values), max(values))  # exact where the rules are


@pytest.mark.parametrize("name", EXPRS)
def test_point_ranges_are_the_scalar_rules_at_every_point(name: str) -> None:
    """Per point p of 0..5, d0 in [p - 4, p + 1]: each point's bounds are expr_range's."""
    e = EXPRS[name]
    points = np.arange(6, dtype=np.int64)
    dims = [(points - 4, points + 1), (np.zeros_like(points), np.full_like(points, 9))]
    symbols = [(np.full_like(points, 2), np.full_like(points, 3))]
    low, high = point_expr_range(e, dims, symbols, Points(points))
    for p in points:
        scalar = [(int(p) - 4, int(p) + 1), (0, 9)]
        assert (low[p], high[p]) == expr_range(e, scalar, SYMBOLS)
        values = _values(e, scalar, SYMBOLS)
        assert low[p] <= min(values) and max(values) <= high[p]


def test_division_by_a_non_constant_is_unbounded() -> None:
    e = AffineBinaryOpExpr(AffineBinaryOpKind.FloorDiv, d0, d1)
    assert expr_range(e, DIMS) == (None, None)
    points = np.arange(3, dtype=np.int64)
    with pytest.raises(Unbounded):
        point_expr_range(e, [(points, points), (points + 1, points + 2)], [], Points(points))
