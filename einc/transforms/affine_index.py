"""Turning index computations into affine expressions and maps.

Mechanism shared by the ein lowering (is this `ein.load` index affine in the loop variables?)
and the schedule transforms (rewriting accesses after tiling or interchange). Failure is a
returned `None`; nothing here modifies IR (`index_values` creates ops for its caller to insert).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from xdsl.dialects import affine, arith
from xdsl.dialects.builtin import AffineMapAttr, IndexType, IntegerAttr
from xdsl.ir import Operation, SSAValue
from xdsl.ir.affine import (
    AffineBinaryOpExpr,
    AffineBinaryOpKind,
    AffineConstantExpr,
    AffineDimExpr,
    AffineExpr,
    AffineMap,
)

# Range and expr_range live in ranges.py; re-exported for the modules that import them here.
from einc.transforms.ranges import Range as Range
from einc.transforms.ranges import expr_range as expr_range


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
    `e mod c` as `e - (e floordiv c) * c`, which reads (and prints) worse. A dimension or a
    constant alone is already simple (most indices are a loop variable)."""
    if type(expr) is AffineDimExpr or type(expr) is AffineConstantExpr:
        return expr
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


# ---- the flat position of a row-major access ----------------------------------------------------


def shared_dims(m: AffineMap, operands: Sequence[SSAValue]) -> AffineMap:
    """`m` (over `operands`, as dims) with every dim whose operand is repeated replaced by the
    dim of that operand's first position (a coalesced loop's variable folded into two indices
    is one dim for `simplify_flat`)."""
    m = dims_to_operands(m)
    first = {}
    dims = [AffineExpr.dimension(first.setdefault(o, k)) for k, o in enumerate(operands)]
    if all(isinstance(d, AffineDimExpr) and d.position == k for k, d in enumerate(dims)):
        return m
    return AffineMap(m.num_dims, 0, tuple(r.replace_dims_and_symbols(dims, []) for r in m.results))


def simplify_flat(e: AffineExpr) -> AffineExpr:
    """`e` (a linearised row-major index: a sum of terms) with every pair of terms
    `c * m * (x floordiv m)` and `c * (x mod m)` replaced by `c * x`, and every pair
    `c * m * ((x floordiv m) mod n)` and `c * (x mod m)` by `c * (x mod (m * n))` (Euclid's
    division, exact for every integer x), until none is left: a coalesced index `p` read as
    `x[p floordiv 28, p mod 28]` of a buffer whose last extent is 28 flattens to `p`, three
    coalesced loops' `x[p floordiv 28, (p floordiv 7) mod 4, p mod 7]` of a 4x7 plane too.
    Other expressions come back as they are."""
    terms = _terms(e)
    if not any(_div_mod(t) for t in terms):
        return e
    merged = True
    while merged:
        merged = False
        for a, b in ((a, b) for a in range(len(terms)) for b in range(len(terms))):
            high, low = _div_mod(terms[a]), _div_mod(terms[b])
            if high is None or low is None or low[0] != "mod" or high[0] == "mod":
                continue
            _, x, m, n, c = high
            if low[1] != x or low[2] != m or c != low[4] * m:
                continue
            joined = x if high[0] == "floordiv" else x % (m * n)
            terms = [t for k, t in enumerate(terms) if k not in (a, b)] + _terms(joined * low[4])
            merged = True
            break
    out: AffineExpr = AffineExpr.constant(0)
    for t in terms:
        out = out + t
    return out


def _terms(e: AffineExpr) -> list[AffineExpr]:
    """The terms of a sum (a constant times a sum distributed)."""
    if isinstance(e, AffineBinaryOpExpr) and e.kind == AffineBinaryOpKind.Add:
        return _terms(e.lhs) + _terms(e.rhs)
    if isinstance(e, AffineBinaryOpExpr) and e.kind == AffineBinaryOpKind.Mul:
        for var, const in ((e.lhs, e.rhs), (e.rhs, e.lhs)):
            if isinstance(const, AffineConstantExpr) and isinstance(var, AffineBinaryOpExpr) and var.kind == AffineBinaryOpKind.Add:
                return [t * const.value for t in _terms(var)]
    return [e]


def _div_mod(t: AffineExpr) -> tuple[str, AffineExpr, int, int, int] | None:
    """A term `c * (x floordiv m)`, `c * (x mod m)` or `c * ((x floordiv m) mod n)` (m, n
    positive constants) as (kind, x, m, n, c); n is 0 but for the last."""
    c = 1
    if isinstance(t, AffineBinaryOpExpr) and t.kind == AffineBinaryOpKind.Mul:
        for var, const in ((t.lhs, t.rhs), (t.rhs, t.lhs)):
            if isinstance(const, AffineConstantExpr):
                c, t = const.value, var
                break
        else:
            return None
    if not isinstance(t, AffineBinaryOpExpr) or not isinstance(t.rhs, AffineConstantExpr) or t.rhs.value <= 0:
        return None
    if t.kind == AffineBinaryOpKind.FloorDiv:
        return "floordiv", t.lhs, t.rhs.value, 0, c
    if t.kind != AffineBinaryOpKind.Mod:
        return None
    inner = t.lhs
    if isinstance(inner, AffineBinaryOpExpr) and inner.kind == AffineBinaryOpKind.FloorDiv and isinstance(inner.rhs, AffineConstantExpr) and inner.rhs.value > 0:
        return "divmod", inner.lhs, inner.rhs.value, t.rhs.value, c
    return "mod", t.lhs, t.rhs.value, 0, c


def index_values(builder: list[Operation], operands: Sequence[SSAValue], results: Iterable[AffineExpr]) -> list[SSAValue]:
    """The value of each expression of `results` over `operands` (dimension k: operands[k]):
    the operand itself for a dimension, an index `arith.constant` for a constant, else an
    `affine.apply` over every operand; the new ops are appended to `builder` (not inserted)."""
    values: list[SSAValue] = []
    for e in results:
        if isinstance(e, AffineDimExpr):
            values.append(operands[e.position])
            continue
        if isinstance(e, AffineConstantExpr):
            constant = arith.ConstantOp(IntegerAttr(e.value, IndexType()))
            builder.append(constant)
            values.append(constant.result)
            continue
        apply = affine.ApplyOp(operands, AffineMapAttr(AffineMap(len(operands), 0, (e,))))
        builder.append(apply)
        values.append(apply.result)
    return values
