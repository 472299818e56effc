"""Turning index computations into affine expressions and maps.

Mechanism shared by the ein lowering (is this `ein.load` index affine in the loop variables?)
and the schedule transforms (rewriting accesses after tiling or interchange). Failure is a
returned `None`; nothing here modifies IR.
"""

from __future__ import annotations

from collections.abc import Sequence

from xdsl.dialects import affine, arith
from xdsl.dialects.builtin import IndexType, IntegerAttr
from xdsl.ir import SSAValue
from xdsl.ir.affine import (
    AffineBinaryOpExpr,
    AffineBinaryOpKind,
    AffineConstantExpr,
    AffineDimExpr,
    AffineExpr,
    AffineMap,
    AffineSymExpr,
)


def affine_expr_of(value: SSAValue, dims: Sequence[SSAValue]) -> AffineExpr | None:
    """`value` as an affine expression whose dimension `d<k>` is `dims[k]`, or None.

    Contract: recognises the `dims` themselves, `index` constants, `affine.apply` (dims and
    symbols of its map alike) and `arith.addi/subi` on index, `arith.muli` by a constant and
    `arith.floordivsi/ceildivsi` by a positive constant, recursively. Anything else (a value
    loaded from memory, `remsi`, a product of two variables, ...) gives None, as does any
    expression that reaches a value outside `dims`.
    """
    for position, dim in enumerate(dims):
        if value is dim:
            return AffineExpr.dimension(position)
    if not isinstance(value.type, IndexType):
        return None
    owner = value.owner
    if isinstance(owner, arith.ConstantOp) and isinstance(owner.value, IntegerAttr):
        return AffineExpr.constant(owner.value.value.data)
    if isinstance(owner, affine.ApplyOp):
        operands = [affine_expr_of(o, dims) for o in owner.mapOperands]
        if any(o is None for o in operands):
            return None
        m = owner.map.data
        return m.results[0].replace_dims_and_symbols(
            operands[: m.num_dims],  # type: ignore[arg-type]
            operands[m.num_dims :],  # type: ignore[arg-type]
        )
    if not isinstance(
        owner,
        arith.AddiOp | arith.SubiOp | arith.MuliOp | arith.FloorDivSIOp | arith.CeilDivSIOp,
    ):
        return None
    lhs = affine_expr_of(owner.lhs, dims)
    rhs = affine_expr_of(owner.rhs, dims)
    if lhs is None or rhs is None:
        return None
    match owner:
        case arith.AddiOp():
            return lhs + rhs
        case arith.SubiOp():
            return lhs - rhs
        case arith.MuliOp():
            if isinstance(lhs, AffineConstantExpr) or isinstance(rhs, AffineConstantExpr):
                return lhs * rhs
            return None
        case arith.FloorDivSIOp():
            if isinstance(rhs, AffineConstantExpr) and rhs.value > 0:
                return lhs // rhs
            return None
        case _:
            if isinstance(rhs, AffineConstantExpr) and rhs.value > 0:
                return lhs.ceil_div(rhs)
            return None


def affine_access(
    indices: Sequence[SSAValue], dims: Sequence[SSAValue]
) -> tuple[AffineMap, tuple[SSAValue, ...]] | None:
    """An access `memref[indices]` as `(map, operands)` for `affine.load/store`, or None.

    Contract: every index must satisfy `affine_expr_of(index, dims)`. The map has one result
    per index and one dimension per operand; the operands are the `dims` that the indices
    actually use, in `dims` order (unused ones are dropped). No symbols.
    """
    exprs = [affine_expr_of(i, dims) for i in indices]
    if any(e is None for e in exprs):
        return None
    full = AffineMap(len(dims), 0, tuple(exprs))  # type: ignore[arg-type]
    used = full.used_dims()
    kept = tuple(d for k, d in enumerate(dims) if k in used)
    compact = full.drop_dims([k not in used for k in range(len(dims))])
    return AffineMap(
        compact.num_dims, 0, tuple(simplify(e, compact.num_dims) for e in compact.results)
    ), kept


def simplify(expr: AffineExpr, num_dims: int, num_symbols: int = 0) -> AffineExpr:
    """xDSL's flattening simplification of a purely linear expression (it folds `d0 + 1 - 1`);
    expressions with floordiv/ceildiv/mod are returned unchanged, since flattening rewrites
    `e mod c` as `e - (e floordiv c) * c`, which reads (and prints) worse."""
    if any(
        isinstance(e, AffineBinaryOpExpr)
        and e.kind not in (AffineBinaryOpKind.Add, AffineBinaryOpKind.Mul)
        for e in expr.dfs()
    ):
        return expr
    try:
        return expr.simplify(num_dims, num_symbols)
    except (NotImplementedError, ZeroDivisionError):
        return expr


def dims_to_operands(m: AffineMap) -> AffineMap:
    """The same map with its symbols renumbered as trailing dimensions (`()[s0] -> (s0)`
    becomes `(d0) -> (d0)`): the operand list is unchanged. Accesses parsed from text use
    symbols, which the lowering utilities treat as dims."""
    if not m.num_symbols:
        return m
    new_syms = [AffineExpr.dimension(m.num_dims + k) for k in range(m.num_symbols)]
    dims = [AffineExpr.dimension(k) for k in range(m.num_dims)]
    return AffineMap(
        m.num_dims + m.num_symbols,
        0,
        tuple(r.replace_dims_and_symbols(dims, new_syms) for r in m.results),
    )


Range = tuple[int | None, int | None]
"""Inclusive lower and upper bounds; None is unbounded."""


def expr_range(expr: AffineExpr, dims: Sequence[Range], symbols: Sequence[Range] = ()) -> Range:
    """Conservative inclusive bounds of `expr` given bounds of its dims and symbols.

    Contract: sound (the true value always lies inside), not tight; floordiv, ceildiv and
    mod are by positive constants as in valid affine maps (otherwise unbounded).
    """
    match expr:
        case AffineConstantExpr(value=v):
            return v, v
        case AffineDimExpr(position=p):
            return dims[p] if p < len(dims) else (None, None)
        case AffineSymExpr(position=p):
            return symbols[p] if p < len(symbols) else (None, None)
        case AffineBinaryOpExpr(kind=kind, lhs=lhs, rhs=rhs):
            lo1, hi1 = expr_range(lhs, dims, symbols)
            lo2, hi2 = expr_range(rhs, dims, symbols)
            if kind == AffineBinaryOpKind.Add:
                return _add(lo1, lo2), _add(hi1, hi2)
            if kind == AffineBinaryOpKind.Mul:
                return _mul_range((lo1, hi1), (lo2, hi2))
            if lo2 is None or lo2 != hi2 or lo2 <= 0:
                return None, None
            c = lo2
            if kind == AffineBinaryOpKind.Mod:
                if lo1 is not None and hi1 is not None and lo1 // c == hi1 // c:
                    return lo1 % c, hi1 % c
                return 0, c - 1
            div = (lambda a: a // c) if kind == AffineBinaryOpKind.FloorDiv else (
                lambda a: -(-a // c)
            )
            return (
                None if lo1 is None else div(lo1),
                None if hi1 is None else div(hi1),
            )
        case _:
            return None, None


def _add(a: int | None, b: int | None) -> int | None:
    return None if a is None or b is None else a + b


def _mul_range(a: Range, b: Range) -> Range:
    if None in a or None in b:
        if a[0] is not None and a[0] == a[1] == 0 or b[0] is not None and b[0] == b[1] == 0:
            return 0, 0
        # Non-negative times non-negative stays non-negative.
        if a[0] is not None and a[0] >= 0 and b[0] is not None and b[0] >= 0:
            return 0, None
        return None, None
    products = [x * y for x in a for y in b]  # type: ignore[operator]
    return min(products), max(products)
