"""Splitting a loop whose variable is divided by a constant: `co // 16` and `co % 16` over an
axis `co` of extent 64 become the loop variables of `co = 16 * co_q + co_r` (`co_q` in 0..4,
`co_r` in 0..16), so that the indices they formed are affine and unit-stride in `co_r`.

- `simplify_divmod(expr, ranges)`: an affine expression with every `e floordiv d` and
  `e mod d` (d a positive constant) reduced where the ranges of its dims prove it: `e` is
  written `d * Q + R` (the terms whose coefficients `d` divides, and the rest), and when
  `0 <= R < d` for every value of the dims, `e floordiv d` is `Q` and `e mod d` is `R`;
  when only `R >= 0` is proven, `Q + R floordiv d` and `R mod d` (a dividend that may be
  negative is left as it is: nothing changes where the language's floor semantics and a
  truncating division would differ). The value is the same for every point of the ranges.
- `split_candidates(loop)`: the divisors worth splitting `loop` by (those of the divisions
  and remainders of its variable that the split removes) with how many remain.
- `split_loop(loop, d)`: the rewrite itself, or a `Failure` (IR untouched) for a loop that
  is not a constant-bounded, unit-step loop whose trip count `d` divides. Always legal:
  the iterations run in the same order, every index keeps its value.

The mechanism of `einc-split-index-axes` (einc/passes/split_index_axes.py); nothing here
decides where to apply it.
"""

from __future__ import annotations

from collections.abc import Sequence

from xdsl.dialects import affine
from xdsl.dialects.builtin import AffineMapAttr, StringAttr
from xdsl.ir import Attribute, BlockArgument, Operation, SSAValue
from xdsl.ir.affine import (
    AffineBinaryOpExpr,
    AffineBinaryOpKind,
    AffineConstantExpr,
    AffineDimExpr,
    AffineExpr,
    AffineMap,
)
from xdsl.rewriter import Rewriter

from einc.ir.attrs import AXIS_ATTR, BIND_ATTR, PARALLEL_ATTR, VECTORIZE_ATTR
from einc.transforms.affine_fold import fold_applies
from einc.transforms.affine_index import dims_to_operands, simplify
from einc.transforms.loop_analysis import constant_bounds, induction_var, step_of, value_range
from einc.transforms.loop_build import Failure, _new_loop, describe
from einc.transforms.ranges import Range, expr_range

_DIVMOD = (AffineBinaryOpKind.FloorDiv, AffineBinaryOpKind.Mod)
QUOTIENT, REMAINDER = ".q", ".r"
"""The axis tags of a split loop `A`: `A.q` (the quotient, outer) and `A.r` (the remainder)."""

# ---- simplification ---------------------------------------------------------------------------


def _linear(e: AffineExpr) -> tuple[dict[AffineExpr, int], int]:
    """`e` as {atom: coefficient} + constant; atoms are dims and divisions (anything that is
    not a sum or a product by a constant)."""
    if isinstance(e, AffineConstantExpr):
        return {}, e.value
    if isinstance(e, AffineBinaryOpExpr) and e.kind == AffineBinaryOpKind.Add:
        (a, ka), (b, kb) = _linear(e.lhs), _linear(e.rhs)
        terms = dict(a)
        for atom, c in b.items():
            terms[atom] = terms.get(atom, 0) + c
        return {atom: c for atom, c in terms.items() if c}, ka + kb
    if isinstance(e, AffineBinaryOpExpr) and e.kind == AffineBinaryOpKind.Mul:
        for var, const in ((e.lhs, e.rhs), (e.rhs, e.lhs)):
            if isinstance(const, AffineConstantExpr):
                terms, k = _linear(var)
                return {atom: c * const.value for atom, c in terms.items() if c * const.value}, k * const.value
    return {e: 1}, 0


def _build(terms: dict[AffineExpr, int], k: int) -> AffineExpr:
    """`sum(c * atom) + k`, written as the lowering writes indices (`d0 * 16 + d1 + -1`)."""
    out: AffineExpr | None = None
    for atom, c in terms.items():
        term = atom if c == 1 else atom * c
        out = term if out is None else out + term
    if out is None:
        return AffineExpr.constant(k)
    return out + k if k else out


def simplify_divmod(expr: AffineExpr, ranges: Sequence[Range]) -> AffineExpr:
    """`expr` with its divisions and remainders by positive constants reduced where the
    ranges of its dims (`ranges[p]` for `d<p>`, inclusive) prove it (module docstring)."""
    if not isinstance(expr, AffineBinaryOpExpr):
        return expr
    lhs, rhs = simplify_divmod(expr.lhs, ranges), simplify_divmod(expr.rhs, ranges)
    if expr.kind not in _DIVMOD or not isinstance(rhs, AffineConstantExpr) or rhs.value <= 0:
        if lhs is expr.lhs and rhs is expr.rhs:
            return expr
        return AffineBinaryOpExpr(expr.kind, lhs, rhs)
    d = rhs.value
    terms, k = _linear(lhs)
    quotient = {atom: c // d for atom, c in terms.items() if c % d == 0}
    rest = {atom: c for atom, c in terms.items() if c % d}
    kq, kr = divmod(k, d)  # floor: 0 <= kr < d
    r = _build(rest, kr)
    lo, hi = expr_range(r, ranges)
    if lo is None or lo < 0:
        return AffineBinaryOpExpr(expr.kind, lhs, rhs)  # a possibly negative dividend: as written
    if hi is not None and hi < d:
        return _build(quotient, kq) if expr.kind == AffineBinaryOpKind.FloorDiv else r
    if not quotient and not kq:
        return AffineBinaryOpExpr(expr.kind, lhs, rhs)
    if expr.kind == AffineBinaryOpKind.Mod:
        return r % d
    return _build({**quotient, r // d: 1}, kq)


def divmods_using(expr: AffineExpr, positions: set[int]) -> int:
    """How many divisions and remainders in `expr` have a dividend using a dim of `positions`."""
    if not isinstance(expr, AffineBinaryOpExpr):
        return 0
    own = expr.kind in _DIVMOD and any(isinstance(e, AffineDimExpr) and e.position in positions for e in expr.lhs.dfs())
    return int(own) + divmods_using(expr.lhs, positions) + divmods_using(expr.rhs, positions)


# ---- candidates -------------------------------------------------------------------------------


def _maps(root: Operation) -> list[tuple[Operation, AffineMap, tuple[SSAValue, ...]]]:
    """The affine loads, stores and applies under `root`: each with its map (symbols as dims)
    and operands."""
    found = []
    for op in root.walk():
        if isinstance(op, affine.LoadOp | affine.StoreOp):
            found.append((op, dims_to_operands(op.map.data), tuple(op.indices)))
        elif isinstance(op, affine.ApplyOp):
            found.append((op, dims_to_operands(op.map.data), tuple(op.mapOperands)))
    return found


def divided_loops(root: Operation) -> list[affine.ForOp]:
    """The loops under `root` whose variable is an operand of a division or remainder in an
    affine load, store or apply (where `split_candidates` may find something), in walk order."""
    found: dict[affine.ForOp, None] = {}
    for _, m, operands in _maps(root):
        for p, o in enumerate(operands):
            if not isinstance(o, BlockArgument) or o.index != 0:
                continue
            loop = o.block.parent_op()
            if isinstance(loop, affine.ForOp) and loop not in found and any(divmods_using(e, {p}) for e in m.results):
                found[loop] = None
    return list(found)


def _splittable(loop: affine.ForOp) -> tuple[int, int] | Failure:
    bounds = constant_bounds(loop)
    if bounds is None or step_of(loop) != 1 or loop.results:
        return Failure(f"cannot split {describe(loop)}: not a unit-step loop with constant bounds")
    return bounds


def split_candidates(loop: affine.ForOp) -> list[tuple[int, int, int]]:
    """`(d, before, after)` for each divisor `d` of a division or remainder of the loop's
    variable (a constant that divides its trip count, between 1 and it): how many divisions
    and remainders of the variable are left by `simplify_divmod` without a split, and after
    splitting by `d`. Empty for a loop `split_loop` refuses."""
    bounds = _splittable(loop)
    if isinstance(bounds, Failure):
        return []
    lb, ub = bounds
    trip = ub - lb
    iv = induction_var(loop)
    uses: list[tuple[AffineExpr, list[Range], list[int]]] = []
    divisors: list[int] = []
    for _, m, operands in _maps(loop):
        positions = [p for p, o in enumerate(operands) if o is iv]
        if not positions:
            continue
        ranges = [value_range(o) for o in operands]
        for e in m.results:
            if divmods_using(e, set(positions)):
                uses.append((e, ranges, positions))
                for sub in e.dfs():
                    if (isinstance(sub, AffineBinaryOpExpr) and sub.kind in _DIVMOD
                            and isinstance(sub.rhs, AffineConstantExpr)):  # fmt: skip
                        d = sub.rhs.value
                        if 1 < d < trip and trip % d == 0 and d not in divisors:
                            divisors.append(d)
    before = sum(divmods_using(simplify_divmod(e, ranges), set(positions)) for e, ranges, positions in uses)
    found = []
    for d in divisors:
        after = 0
        for e, ranges, positions in uses:
            n = len(ranges)
            q, r = AffineExpr.dimension(n), AffineExpr.dimension(n + 1)
            dims = [AffineExpr.dimension(p) for p in range(n)]
            for p in positions:
                dims[p] = q * d + r + lb
            split = e.replace_dims_and_symbols(dims, [])
            reduced = simplify_divmod(split, [*ranges, (0, trip // d - 1), (0, d - 1)])
            after += divmods_using(reduced, {n, n + 1})
        found.append((d, before, after))
    return found


# ---- the rewrite --------------------------------------------------------------------------------


def _tag(loop: affine.ForOp, attributes: dict[str, Attribute], suffix: str) -> None:
    """A split loop's tags: the outer keeps parallel/bind, the inner keeps vectorize."""
    dropped = (VECTORIZE_ATTR,) if suffix == QUOTIENT else (PARALLEL_ATTR, BIND_ATTR)
    for key, value in attributes.items():
        if key not in dropped:
            loop.attributes[key] = value
    if isinstance(axis := attributes.get(AXIS_ATTR), StringAttr):
        loop.attributes[AXIS_ATTR] = StringAttr(axis.data + suffix)


def simplify_maps(root: Operation) -> None:
    """Every affine load, store and apply under `root`: its divisions and remainders reduced
    by `simplify_divmod` (ranges of the operands from the loops), the dims no result uses
    dropped. The IR keeps its values."""
    for op, m, operands in _maps(root):
        if not any(isinstance(sub, AffineBinaryOpExpr) and sub.kind in _DIVMOD for e in m.results for sub in e.dfs()):
            continue
        ranges = [value_range(o) for o in operands]
        results = tuple(simplify_divmod(e, ranges) for e in m.results)
        if results == m.results:
            continue
        results = tuple(simplify(e, m.num_dims) for e in results)
        full = AffineMap(m.num_dims, 0, results)
        used = full.used_dims()
        kept = [o for p, o in enumerate(operands) if p in used]
        new_map = AffineMapAttr(full.drop_dims([p not in used for p in range(m.num_dims)]))
        if isinstance(op, affine.LoadOp):
            new: Operation = affine.LoadOp(op.memref, kept, new_map, op.result.type)
        elif isinstance(op, affine.StoreOp):
            new = affine.StoreOp(op.value, op.memref, kept, new_map)
        else:
            assert isinstance(op, affine.ApplyOp)
            new = affine.ApplyOp(kept, new_map)
        new.attributes.update(op.attributes)
        Rewriter.replace_op(op, new)


def split_loop(loop: affine.ForOp, d: int) -> tuple[affine.ForOp, affine.ForOp] | Failure:
    """`for v in lb..ub` as `for q in 0..(ub-lb)/d { for r in 0..d { v = lb + d*q + r } }`
    (tags `A.q`, `A.r`; name hints `v_q`, `v_r`), the divisions and remainders of the body's
    affine maps reduced (`simplify_maps`). A Failure (IR untouched) when the loop has no
    constant bounds, a step other than 1, results, or a trip count `d` does not divide."""
    bounds = _splittable(loop)
    if isinstance(bounds, Failure):
        return bounds
    lb, ub = bounds
    if d <= 1 or (ub - lb) % d or ub - lb <= d:
        return Failure(f"cannot split {describe(loop)} by {d}: its trip count {ub - lb} is not a multiple of it")
    hint = induction_var(loop).name_hint or "i"
    attributes = dict(loop.attributes)
    outer = _new_loop((), (), AffineMap.constant_map(0), AffineMap.constant_map((ub - lb) // d), 1, hint + "_q")
    region = loop.detach_region(loop.body)
    region.block.args[0].name_hint = hint + "_r"
    inner = affine.ForOp.from_region((), (), (), (), 0, d, region, 1)
    yield_op = outer.body.block.first_op
    assert yield_op is not None
    outer.body.block.insert_op_before(inner, yield_op)
    Rewriter.replace_op(loop, outer)
    q, r = induction_var(outer), region.block.args[0]
    v = affine.ApplyOp(
        [q, r], AffineMapAttr(AffineMap(2, 0, (AffineExpr.dimension(0) * d + AffineExpr.dimension(1) + lb,)))
    )
    first = region.block.first_op
    assert first is not None
    region.block.insert_op_before(v, first)
    r.replace_uses_with_if(v.result, lambda use: use.operation is not v)
    fold_applies(inner)
    simplify_maps(inner)
    _tag(outer, attributes, QUOTIENT)
    _tag(inner, attributes, REMAINDER)
    return outer, inner
