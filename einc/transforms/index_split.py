"""Index-set splitting: conditions on loop variables (a `.when`'s padding and stride tests,
the guards the lowering adds) moved out of loop bodies into loop bounds.

- `split_conditions(loop)`: the loop's range cut at the iterates where a comparison in its
  body starts or stops being decided (true, or false, for every value of the other loop
  variables it reads); each piece is a copy of the loop whose decided comparisons are folded
  to constants (`fold_conditions`). The interior of a padded convolution's row loop then
  reads no condition; the boundary pieces keep them. `split_conditions_inside(loop)`: the
  same pieces as branches of a test on the loop's variable inside the loop, which keeps
  its iterations (a parallel loop shares the boundary pieces among its threads).
- `split_phases(loop, s)`: the loop `x` over `[lb, ub)` replaced by `s` loops over `t`, one
  per phase `r`, with `x = lb + (r + s*t) * step`: a stride condition `(x + k) % s == 0`
  becomes constant per phase (or, with its other variable split by phase too, constant), and
  `(x + k) // s` an affine index unit-stride in `t` (`canonical`).
- `fold_conditions(root)`: every integer comparison nested in `root` that the ranges of the
  loop variables decide becomes a constant, and the `scf.if`, `arith.select`, `andi`, `ori`
  it feeds are simplified.

Splitting changes no result: the pieces run the same iterations in the same order, and a
comparison is folded only when range analysis (einc.transforms.loop_analysis.value_range,
sound) decides it. Failures are values (`Failure`), the IR untouched.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import cast
from dataclasses import dataclass

from xdsl.dialects import affine, arith, memref, scf
from xdsl.dialects.builtin import AffineMapAttr, FloatAttr, IndexType, IntegerAttr, IntegerType, i1
from xdsl.ir import Block, BlockArgument, Operation, Region, SSAValue
from xdsl.ir.affine import AffineBinaryOpExpr, AffineBinaryOpKind, AffineConstantExpr, AffineDimExpr, AffineExpr, AffineMap
from xdsl.rewriter import InsertPoint, Rewriter

from einc.ir.attrs import PARALLEL_ATTR
from einc.transforms.affine_fold import fold_applies
from einc.transforms.affine_index import affine_expr_of, dims_to_operands
from einc.transforms.loop_analysis import (
    Access,
    buffer_name,
    carried_dependence,
    constant_bounds,
    induction_var,
    linear_form,
    step_of,
    value_range,
)
from einc.transforms.loop_build import Failure, describe
from einc.transforms.ranges import Range, expr_range

MAX_SPLIT_TRIP = 4096
"""`split_conditions` evaluates each comparison at every iterate of a loop of at most this many."""

MAX_PIECES = 9
"""The most pieces `split_conditions` cuts a loop into."""

MAX_PHASES = 16
"""The largest stride `split_phases` takes (it makes that many copies of the body)."""


# ---- affine expressions ------------------------------------------------------------------------


def linear_dims(e: AffineExpr) -> tuple[dict[int, int], int] | None:
    """`e` as {dim position: coefficient} plus a constant, or None when it is not linear."""
    if isinstance(e, AffineConstantExpr):
        return {}, e.value
    if isinstance(e, AffineDimExpr):
        return {e.position: 1}, 0
    if not isinstance(e, AffineBinaryOpExpr):
        return None
    if e.kind == AffineBinaryOpKind.Add:
        a, b = linear_dims(e.lhs), linear_dims(e.rhs)
        if a is None or b is None:
            return None
        terms = dict(a[0])
        for d, c in b[0].items():
            terms[d] = terms.get(d, 0) + c
        return {d: c for d, c in terms.items() if c}, a[1] + b[1]
    if e.kind == AffineBinaryOpKind.Mul:
        for var, const in ((e.lhs, e.rhs), (e.rhs, e.lhs)):
            if isinstance(const, AffineConstantExpr):
                inner = linear_dims(var)
                if inner is None:
                    return None
                k = const.value
                return {d: c * k for d, c in inner[0].items() if c * k}, inner[1] * k
    return None


def _fromlinear_dims(terms: dict[int, int], const: int) -> AffineExpr:
    out: AffineExpr | None = None
    for d in sorted(terms):
        term = AffineExpr.dimension(d) * terms[d] if terms[d] != 1 else AffineExpr.dimension(d)
        out = term if out is None else out + term
    if out is None:
        return AffineExpr.constant(const)
    return out + const if const else out


def canonical(e: AffineExpr) -> AffineExpr:
    """`e` with like terms combined, and `(s*a + b) mod s` as `b mod s`, `(s*a + b) floordiv s`
    as `a + b floordiv s` (exact for integers, s > 0): after a phase split, a stride test
    `(2*t + 1) mod 2` is the constant 1 and an index `(2*t + 2) floordiv 2` is `t + 1`."""
    if not isinstance(e, AffineBinaryOpExpr):
        return e
    lhs, rhs = canonical(e.lhs), canonical(e.rhs)
    kind = e.kind
    if kind in (AffineBinaryOpKind.Add, AffineBinaryOpKind.Mul):
        whole = AffineBinaryOpExpr(kind, lhs, rhs)
        form = linear_dims(whole)
        return _fromlinear_dims(*form) if form is not None else whole
    if not isinstance(rhs, AffineConstantExpr) or rhs.value <= 0:
        return AffineBinaryOpExpr(kind, lhs, rhs)
    s = rhs.value
    form = linear_dims(lhs)
    if form is None or kind == AffineBinaryOpKind.CeilDiv:
        return AffineBinaryOpExpr(kind, lhs, rhs)
    terms, const = form
    quotient = {d: c // s for d, c in terms.items() if c // s}
    rest = {d: c % s for d, c in terms.items() if c % s}
    q0, r0 = divmod(const, s)
    if kind == AffineBinaryOpKind.Mod:
        if not rest:
            return AffineExpr.constant(r0)
        return AffineBinaryOpExpr(kind, _fromlinear_dims(rest, r0), rhs)
    if not rest:  # r0 // s == 0
        return _fromlinear_dims(quotient, q0)
    inner = AffineBinaryOpExpr(kind, _fromlinear_dims(rest, r0), rhs)
    whole = _fromlinear_dims(quotient, q0)
    return inner if not quotient and not q0 else whole + inner


def _canonical_map(m: AffineMap) -> AffineMap:
    m = dims_to_operands(m)
    return AffineMap(m.num_dims, 0, tuple(canonical(r) for r in m.results))


def canonicalize_maps(root: Operation) -> None:
    """`canonical` on the maps of the affine loads, stores and applies nested in `root`."""
    for op in list(root.walk()):
        if isinstance(op, affine.LoadOp | affine.StoreOp | affine.ApplyOp):
            new = _canonical_map(op.map.data)
            if new != op.map.data:
                op.properties["map"] = AffineMapAttr(new)


# ---- deciding comparisons ----------------------------------------------------------------------


def _enclosing_ivs(op: Operation) -> list[SSAValue]:
    ivs: list[SSAValue] = []
    parent = op.parent_op()
    while parent is not None:
        if isinstance(parent, affine.ForOp):
            ivs.append(induction_var(parent))
        parent = parent.parent_op()
    return ivs


def _operand_expr(v: SSAValue, dims: Sequence[SSAValue]) -> tuple[AffineExpr, int | None] | None:
    """An integer comparison operand as an affine expression over `dims`, and the bit width
    its value is truncated to (None for an index): `arith.index_cast` of an index expression,
    an integer constant, or an index expression."""
    owner = v.owner
    if isinstance(owner, arith.ConstantOp) and isinstance(owner.value, IntegerAttr):
        if isinstance(v.type, IndexType):
            return AffineExpr.constant(owner.value.value.data), None
        if not isinstance(v.type, IntegerType) or v.type.width.data < 2:
            return None
        bits = v.type.width.data
        value = (owner.value.value.data + (1 << (bits - 1))) % (1 << bits) - (1 << (bits - 1))  # signed
        return AffineExpr.constant(value), None
    width = None
    if isinstance(owner, arith.IndexCastOp) and isinstance(owner.input.type, IndexType):
        if not isinstance(v.type, IntegerType):
            return None
        width, v = v.type.width.data, owner.input
    if not isinstance(v.type, IndexType):
        return None
    e = affine_expr_of(v, dims)
    return (e, width) if e is not None else None


def comparison_expr(cmp: arith.CmpiOp) -> tuple[AffineExpr, list[SSAValue], list[int]] | None:
    """`lhs - rhs` of an integer comparison as an affine expression over the loop variables
    enclosing it, the dims, and the bit widths its operands are truncated to; None when an
    operand is no affine function of loop variables."""
    dims = _enclosing_ivs(cmp)
    lhs, rhs = _operand_expr(cmp.lhs, dims), _operand_expr(cmp.rhs, dims)
    if lhs is None or rhs is None:
        return None
    widths = [w for _, w in (lhs, rhs) if w is not None]
    return canonical(lhs[0] - rhs[0]), dims, widths


def _fits(r: Range, width: int) -> bool:
    lo, hi = r
    return lo is not None and hi is not None and -(1 << (width - 1)) <= lo and hi < (1 << (width - 1))


_SIGNED = {"eq": "eq", "ne": "ne", "slt": "slt", "sle": "sle", "sgt": "sgt", "sge": "sge",
           "ult": "slt", "ule": "sle", "ugt": "sgt", "uge": "sge"}  # fmt: skip


def _iterates(iv: SSAValue, r: Range) -> Range:
    """`r` shrunk to the iterates of `iv`'s loop (constant lower bound, step > 1)."""
    loop = iv.block.parent_op() if isinstance(iv, BlockArgument) else None
    bounds = constant_bounds(loop) if isinstance(loop, affine.ForOp) else None
    lo, hi = r
    if bounds is None or lo is None or hi is None:
        return r
    assert isinstance(loop, affine.ForOp)
    step = step_of(loop)
    return bounds[0] + -((bounds[0] - lo) // step) * step, bounds[0] + (hi - bounds[0]) // step * step


def iv_guard(branch: scf.IfOp) -> tuple[SSAValue, int] | None:
    """`(x, c)` when `branch` tests `x < c` for an index `x` and a constant `c` (the tests
    `split_conditions_inside` makes: its then-region runs for `x < c`, its else for `x >= c`)."""
    test = branch.cond.owner
    if not isinstance(test, arith.CmpiOp) or test.predicate.value.data != 2 or not isinstance(test.rhs.type, IndexType):
        return None
    edge = test.rhs.owner
    if not isinstance(edge, arith.ConstantOp) or not isinstance(edge.value, IntegerAttr):
        return None
    return test.lhs, edge.value.value.data


def _guarded_ranges(op: Operation, dims: Sequence[SSAValue]) -> list[Range]:
    """The ranges of the loop variables `dims` at `op`: their loops' bounds, narrowed by the
    `scf.if` branches on `x < c` (`iv_guard`) that enclose it."""
    ranges = [value_range(d) for d in dims]
    child, parent = op, op.parent_op()
    while parent is not None:
        guard = iv_guard(parent) if isinstance(parent, scf.IfOp) else None
        k = next((k for k, d in enumerate(dims) if guard is not None and guard[0] is d), None)
        if guard is not None and k is not None:
            lo, hi = ranges[k]
            c = guard[1]
            if child.parent_region() is cast(scf.IfOp, parent).true_region:  # x < c
                ranges[k] = _iterates(dims[k], (lo, c - 1 if hi is None else min(hi, c - 1)))
            else:  # x >= c
                ranges[k] = _iterates(dims[k], (c if lo is None else max(lo, c), hi))
        child, parent = parent, parent.parent_op()
    return ranges


@dataclass(frozen=True)
class Comparison:
    """An integer comparison on loop variables, ready to be decided over their ranges:
    `diff` is `lhs - rhs`, `operands` each side's expression and truncation width."""

    predicate: str  # signed form: eq ne slt sle sgt sge
    unsigned: bool
    diff: AffineExpr
    dims: list[SSAValue]
    operands: list[tuple[AffineExpr, int | None]]
    ranges: list[Range]  # of the dims, from their loops' bounds

    @staticmethod
    def of(cmp: arith.CmpiOp) -> Comparison | None:
        found = comparison_expr(cmp)
        if found is None:
            return None
        diff, dims, _ = found
        sides = [_operand_expr(o, dims) for o in (cmp.lhs, cmp.rhs)]
        operands = [(canonical(side[0]), side[1]) for side in sides if side is not None]  # both, as diff
        name = arith.CMPI_COMPARISON_OPERATIONS[cmp.predicate.value.data]
        return Comparison(_SIGNED[name], name.startswith("u"), diff, dims, operands, _guarded_ranges(cmp, dims))

    def decide(self, pinned: dict[SSAValue, Range] | None = None) -> bool | None:
        """The comparison's value at every point of the ranges (`pinned` overrides some loop
        variables'), or None when it may take both. Operands truncated to a narrower integer
        must fit it; an unsigned comparison is decided only on non-negative operands."""
        ranges = [pinned[d] if pinned and d in pinned else r for d, r in zip(self.dims, self.ranges)]
        for expr, width in self.operands:
            if width is None and not self.unsigned:
                continue
            r = expr_range(expr, ranges)
            if width is not None and not _fits(r, width):
                return None
            if self.unsigned and (r[0] is None or r[0] < 0):
                return None
        lo, hi = expr_range(self.diff, ranges)
        name = self.predicate
        if name == "eq" or name == "ne":
            if lo is not None and hi is not None and lo == hi == 0:
                return name == "eq"
            if (lo is not None and lo > 0) or (hi is not None and hi < 0):
                return name == "ne"
            return None
        below = {"slt": 0, "sle": 1}.get(name)
        if below is not None:  # diff < below
            if hi is not None and hi < below:
                return True
            if lo is not None and lo >= below:
                return False
            return None
        above = 0 if name == "sgt" else -1  # diff > above
        if lo is not None and lo > above:
            return True
        if hi is not None and hi <= above:
            return False
        return None


def decide(cmp: arith.CmpiOp, pinned: dict[SSAValue, Range] | None = None) -> bool | None:
    """`cmp`'s value at every point of the loop variables' ranges (`pinned` overrides some),
    or None when it may take both (`Comparison.decide`)."""
    found = Comparison.of(cmp)
    return None if found is None else found.decide(pinned)


# ---- folding -----------------------------------------------------------------------------------


def _constant_bool(v: SSAValue) -> bool | None:
    owner = v.owner
    if isinstance(owner, arith.ConstantOp) and v.type == i1 and isinstance(owner.value, IntegerAttr):
        return bool(owner.value.value.data)
    return None


def _replace(op: Operation, values: Sequence[SSAValue]) -> None:
    for old, new in zip(op.results, values):
        old.replace_all_uses_with(new)
    Rewriter.erase_op(op)


def _bool(value: bool, before: Operation) -> SSAValue:
    const = arith.ConstantOp(IntegerAttr(int(value), i1))
    Rewriter.insert_op(const, InsertPoint.before(before))
    return const.result


def inline_if(op: scf.IfOp, taken: bool) -> None:
    """`op` replaced by the ops of its region `taken` (its results by what that region yields)."""
    region = op.true_region if taken else op.false_region
    if not region.blocks:  # no else: nothing runs, no results
        Rewriter.erase_op(op)
        return
    block: Block = region.block
    yield_op = block.last_op
    assert isinstance(yield_op, scf.YieldOp)
    values = list(yield_op.operands)
    for inner in list(block.ops)[:-1]:
        inner.detach()
        Rewriter.insert_op(inner, InsertPoint.before(op))
    _replace(op, values)


def fold_conditions(root: Operation) -> int:
    """Fold the integer comparisons nested in `root` that the loop variables' ranges decide,
    and what they feed: `andi`/`ori`/`xori` with a constant, `arith.select` and `scf.if` on a
    constant (the branch taken inlined); unused pure ops they leave are erased. Returns how
    many comparisons were folded."""
    folded = 0
    for op in list(root.walk()):
        if isinstance(op, arith.CmpiOp) and op.parent is not None:
            value = decide(op)
            if value is not None:
                _replace(op, [_bool(value, op)])
                folded += 1
    if folded:
        fold_constants(root)
    return folded


def fold_constants(root: Operation) -> None:
    """Fold what the constant conditions nested in `root` feed: `andi`/`ori`/`xori` with a
    constant, `arith.select` and `scf.if` on a constant (the branch taken inlined), then erase
    the `B[i] = B[i] + 0.0` updates that leaves (`_erase_zero_updates`), the unused pure ops
    and the loops left empty (`root` itself stays)."""
    changed = True
    while changed:
        changed = False
        for op in list(root.walk()):
            if op.parent is None or op is root:
                continue
            if isinstance(op, arith.AndIOp | arith.OrIOp) and op.result.type == i1:
                a, b = _constant_bool(op.lhs), _constant_bool(op.rhs)
                absorbing = isinstance(op, arith.OrIOp)  # x | true, x & false
                if a is not None and b is not None:
                    _replace(op, [_bool(a or b if absorbing else a and b, op)])
                elif a is not None or b is not None:
                    known, other = (a, op.rhs) if a is not None else (b, op.lhs)
                    _replace(op, [_bool(absorbing, op)] if known == absorbing else [other])
                else:
                    continue
                changed = True
            elif isinstance(op, arith.XOrIOp) and op.result.type == i1:
                a, b = _constant_bool(op.lhs), _constant_bool(op.rhs)
                if a is None or b is None:
                    continue
                _replace(op, [_bool(a != b, op)])
                changed = True
            elif isinstance(op, arith.SelectOp):
                c = _constant_bool(op.cond)
                if c is None:
                    continue
                _replace(op, [op.lhs if c else op.rhs])
                changed = True
            elif isinstance(op, scf.IfOp):
                c = _constant_bool(op.cond)
                if c is None:
                    continue
                inline_if(op, c)
                changed = True
    _erase_zero_updates(root)
    _erase_unused(root)
    _erase_empty_loops(root)


def _erase_unused(root: Operation) -> None:
    changed = True
    while changed:
        changed = False
        for op in reversed(list(root.walk())):
            removable = op.dialect_name() in ("arith", "math") or isinstance(op, affine.ApplyOp | affine.LoadOp | memref.LoadOp)
            if op is not root and removable and not op.regions and all(not r.uses for r in op.results):
                Rewriter.erase_op(op)
                changed = True


def _positive_zero(v: SSAValue) -> bool:
    owner = v.owner
    return isinstance(owner, arith.ConstantOp) and isinstance(owner.value, FloatAttr) and (
        owner.value.value.data == 0.0 and math.copysign(1.0, owner.value.value.data) > 0
    )


def _erase_zero_updates(root: Operation) -> None:
    """Erase each `B[i] = B[i] + 0.0` nested in `root` (what a folded `.when` without an else
    leaves of a sum's update: the point is skipped) whose buffer never holds -0.0
    (`never_negative_zero`), where adding +0.0 changes nothing."""
    for op in list(root.walk()):
        if not isinstance(op, affine.StoreOp):
            continue
        add = op.value.owner
        if not isinstance(add, arith.AddfOp):
            continue
        for acc, zero in ((add.lhs, add.rhs), (add.rhs, add.lhs)):
            load = acc.owner
            if (
                _positive_zero(zero) and isinstance(load, affine.LoadOp) and load.memref is op.memref
                and load.map == op.map and tuple(load.indices) == tuple(op.indices)
                and load.parent is op.parent and _nothing_written_between(load, op)
                and never_negative_zero(op.memref)
            ):  # fmt: skip
                Rewriter.erase_op(op)
                break


def _nothing_written_between(first: Operation, last: Operation) -> bool:
    op = first.next_op
    while op is not None and op is not last:
        if op.regions or isinstance(op, affine.StoreOp | memref.StoreOp):
            return False
        op = op.next_op
    return op is last


def never_negative_zero(buffer: SSAValue) -> bool:
    """Whether no element of `buffer` can hold -0.0 when it is read: every store into it (or
    into the buffers its stores copy from, recursively) stores a constant other than -0.0, a
    sum with an operand that is never -0.0 (round to nearest: `a + b` is -0.0 only when `a`
    and `b` both are), or a load of such a buffer. This relies on einc's invariant that a
    buffer it writes is written before it is read (inputs are never written): a sum's
    accumulator, filled with +0.0 and updated by `acc + x`, never holds -0.0."""
    return _never_negative_zero(buffer, set())


def _never_negative_zero(buffer: SSAValue, assumed: set[SSAValue]) -> bool:
    if buffer in assumed:
        return True  # what is shown for the other stores holds for these (induction)
    assumed.add(buffer)
    stores = [use.operation for use in buffer.uses if isinstance(use.operation, affine.StoreOp | memref.StoreOp)
              and use.operation.operands[1] is buffer]  # fmt: skip
    if not stores:
        return False  # an input: anything
    return all(_value_never_negative_zero(store.operands[0], assumed, 0) for store in stores)


def _value_never_negative_zero(v: SSAValue, assumed: set[SSAValue], depth: int) -> bool:
    if depth > 8:
        return False
    owner = v.owner
    if isinstance(owner, arith.ConstantOp):
        value = owner.value
        if isinstance(value, FloatAttr):
            x = value.value.data
            return not (x == 0.0 and math.copysign(1.0, x) < 0)
        return False
    if isinstance(owner, arith.AddfOp):
        for operand in (owner.lhs, owner.rhs):
            trial = set(assumed)  # a failed branch's assumptions are dropped
            if _value_never_negative_zero(operand, trial, depth + 1):
                assumed |= trial
                return True
        return False
    if isinstance(owner, affine.LoadOp | memref.LoadOp):
        return _never_negative_zero(owner.memref, assumed)
    return False


def _erase_empty_loops(root: Operation) -> None:
    """Erase the loops nested in `root` whose bodies do nothing (only empty loops)."""
    for op in reversed(list(root.walk())):
        if op is not root and isinstance(op, affine.ForOp) and not op.results and _empty(op):
            Rewriter.erase_op(op)


def _empty(loop: affine.ForOp) -> bool:
    return all(isinstance(op, affine.YieldOp) for op in loop.body.block.ops)


# ---- split_conditions --------------------------------------------------------------------------


def _loop_failure(verb: str, loop: affine.ForOp) -> Failure | None:
    bounds = constant_bounds(loop)
    if bounds is None:
        return Failure(f"cannot {verb} {describe(loop)}: its bounds are not constant")
    if loop.results:
        return Failure(f"cannot {verb} {describe(loop)}: it carries values")
    return None


def split_points(loop: affine.ForOp) -> list[int] | Failure:
    """The iterates of `loop` (constant bounds, at most MAX_SPLIT_TRIP iterations) where a
    comparison in its body becomes or stops being decided, for comparisons that change at
    most twice along the loop (a bound test; a stride test, which changes at every phase,
    is `split_phases`'s); sorted, the first iterate left out."""
    failure = _loop_failure("split", loop)
    if failure is not None:
        return failure
    bounds = constant_bounds(loop)
    assert bounds is not None
    step = step_of(loop)
    points = list(range(bounds[0], bounds[1], step))
    if len(points) > MAX_SPLIT_TRIP:
        return Failure(f"cannot split {describe(loop)}: it runs {len(points)} iterations (at most {MAX_SPLIT_TRIP})")
    iv = induction_var(loop)
    cuts: set[int] = set()
    for op in loop.body.walk():
        if not isinstance(op, arith.CmpiOp):
            continue
        found = Comparison.of(op)
        if found is None or not any(d is iv for d in found.dims):
            continue
        statuses = [found.decide({iv: (x, x)}) for x in points]
        changes = [points[k] for k in range(1, len(points)) if statuses[k] != statuses[k - 1]]
        if len(changes) <= 2:
            cuts.update(changes)
    return sorted(cuts)


def split_conditions(loop: affine.ForOp) -> list[affine.ForOp] | Failure:
    """Cut `loop` (constant bounds) at `split_points` into consecutive copies, the first
    being `loop` itself; in each the comparisons its range decides are folded. Returns the
    pieces in order (a piece left doing nothing, a sum's skipped points, is erased); `[loop]`
    untouched when no comparison of the body changes along it (a schedule stays valid when
    a tuned tile size leaves a loop without a boundary)."""
    points = split_points(loop)
    if isinstance(points, Failure):
        return points
    if not points:
        return [loop]  # nothing decided anywhere: the loop stays whole (as under other tile sizes)
    if len(points) + 1 > MAX_PIECES:
        return Failure(f"cannot split {describe(loop)}: it would make {len(points) + 1} pieces (at most {MAX_PIECES})")
    bounds = constant_bounds(loop)
    assert bounds is not None
    edges = [bounds[0], *points, bounds[1]]
    pieces = [loop]
    for k in range(1, len(edges) - 1):
        piece = loop.clone()
        Rewriter.insert_op(piece, InsertPoint.after(pieces[-1]))
        pieces.append(piece)
    for piece, lo, hi in zip(pieces, edges, edges[1:]):
        piece.properties["lowerBoundMap"] = AffineMapAttr(AffineMap(0, 0, (AffineExpr.constant(lo),)))
        piece.properties["upperBoundMap"] = AffineMapAttr(AffineMap(0, 0, (AffineExpr.constant(hi),)))
        if hi - lo <= piece.step.value.data and PARALLEL_ATTR in piece.attributes:
            del piece.attributes[PARALLEL_ATTR]  # one iteration: nothing to share among threads
    for piece in pieces:
        fold_conditions(piece)
    kept = [p for p in pieces if not _empty(p)]
    for p in pieces:
        if p not in kept:
            Rewriter.erase_op(p)
    return kept


def split_conditions_inside(loop: affine.ForOp) -> list[affine.ForOp] | Failure:
    """`split_conditions` kept inside `loop`: the loop keeps all its iterations and its body
    becomes the pieces' bodies, each folded over its piece's range, as the branches of an
    `scf.if` chain on its variable (`x < p1`, else `x < p2`, ...). A parallel loop (a padded
    convolution's row chunks) then shares its boundary pieces among the threads with its
    interior, where consecutive pieces would run them alone; one test per iteration.
    Returns `[loop]` (untouched when no comparison of the body changes along it)."""
    points = split_points(loop)
    if isinstance(points, Failure):
        return points
    if not points:
        return [loop]
    if len(points) + 1 > MAX_PIECES:
        return Failure(f"cannot split {describe(loop)}: it would make {len(points) + 1} pieces (at most {MAX_PIECES})")
    bounds = constant_bounds(loop)
    assert bounds is not None
    edges = [bounds[0], *points, bounds[1]]
    pieces: list[affine.ForOp] = []
    for lo, hi in zip(edges, edges[1:]):  # folded in place (the enclosing loops' variables in reach), then moved
        piece = loop.clone()
        Rewriter.insert_op(piece, InsertPoint.before(loop))
        piece.properties["lowerBoundMap"] = AffineMapAttr(AffineMap(0, 0, (AffineExpr.constant(lo),)))
        piece.properties["upperBoundMap"] = AffineMapAttr(AffineMap(0, 0, (AffineExpr.constant(hi),)))
        fold_conditions(piece)
        pieces.append(piece)
    body = loop.body.block
    terminator = body.last_op
    assert terminator is not None
    for op in reversed(list(body.ops)[:-1]):
        Rewriter.erase_op(op)
    iv = induction_var(loop)
    point = InsertPoint.before(terminator)
    for k, piece in enumerate(pieces):
        into = point
        if k < len(pieces) - 1:
            edge = arith.ConstantOp(IntegerAttr(edges[k + 1], IndexType()))
            test = arith.CmpiOp(iv, edge.result, "slt")
            branch = scf.IfOp(test.result, [], [scf.YieldOp()], [scf.YieldOp()])
            for op in (edge, test, branch):
                Rewriter.insert_op(op, point)
            taken, rest = branch.true_region.block.last_op, branch.false_region.block.last_op
            assert taken is not None and rest is not None  # the branches' scf.yield
            into, point = InsertPoint.before(taken), InsertPoint.before(rest)
        induction_var(piece).replace_all_uses_with(iv)
        for op in list(piece.body.block.ops)[:-1]:
            op.detach()
            Rewriter.insert_op(op, into)
        Rewriter.erase_op(piece)
    return [loop]


# ---- split_phases ------------------------------------------------------------------------------


def split_phases(loop: affine.ForOp, stride: int) -> list[affine.ForOp] | Failure:
    """Replace `loop` (x over constant bounds, step `step`) by `stride` loops, phase `r`
    running `t` from 0 with `x = lb + (r + stride * t) * step`, in order of `r` (the
    iterations of one phase after another: legal when the loop carries no dependence, or
    the phases touch disjoint elements after folding). Indices and comparisons are rewritten in `t` (`canonical`: a
    `(x + k) mod stride` becomes a constant, a `(x + k) floordiv stride` affine in `t`) and the
    comparisons each phase decides folded. Returns the phase loops (a phase without
    iterations is left out)."""
    failure = _loop_failure("phase-split", loop)
    if failure is not None:
        return failure
    if stride <= 0:
        return Failure(f"phase count must be positive, got {stride}")
    if stride > MAX_PHASES:
        return Failure(f"cannot phase-split {describe(loop)} by {stride}: at most {MAX_PHASES} phases")
    bounds = constant_bounds(loop)
    assert bounds is not None
    step = step_of(loop)
    n = max(0, -(-(bounds[1] - bounds[0]) // step))
    if stride == 1:
        return [loop]
    carried = carried_dependence(loop)
    iv = induction_var(loop)
    hint = iv.name_hint or "i"
    phases: list[affine.ForOp] = []
    for r in range(min(stride, n)):  # a phase beyond the trip count has no iteration
        count = -(-(n - r) // stride)
        block = Block(arg_types=[IndexType()])
        t = block.args[0]
        t.name_hint = f"{hint}_p{r}"
        x = affine.ApplyOp([t], AffineMapAttr(AffineMap(1, 0, (AffineExpr.dimension(0) * (stride * step) + (bounds[0] + r * step),))))
        block.add_op(x)
        mapper: dict[SSAValue, SSAValue] = {iv: x.result}
        for op in loop.body.block.ops:
            block.add_op(op.clone(value_mapper=mapper))
        new = affine.ForOp.from_region((), (), (), (), 0, count, Region(block), 1)
        new.attributes.update(loop.attributes)
        Rewriter.insert_op(new, InsertPoint.before(loop))
        phases.append(new)
    for new in phases:
        fold_applies(new)
        canonicalize_maps(new)
        fold_conditions(new)
    kept = [p for p in phases if not _empty(p)]
    if carried is not None and not _independent(kept):
        for p in phases:
            Rewriter.erase_op(p)
        return Failure(
            f"cannot phase-split {describe(loop)}: its iterations both access '{buffer_name(carried)}' "
            "(a carried dependence that the phases would reorder)"
        )
    for p in phases:
        if p not in kept:
            Rewriter.erase_op(p)
    Rewriter.erase_op(loop)
    return kept


def _independent(phases: Sequence[affine.ForOp]) -> bool:
    """Whether no element one phase writes is accessed by another phase (then the phases'
    order, which differs from the loop's, changes nothing)."""
    from einc.transforms.loop_analysis import accesses

    per_phase = [accesses(p) for p in phases]
    for a in range(len(phases)):
        for b in range(a + 1, len(phases)):
            for x in per_phase[a]:
                for y in per_phase[b]:
                    if x.buffer is y.buffer and (x.write or y.write) and not _disjoint(x, y):
                        return False
    return True


def _disjoint(x: Access, y: Access) -> bool:
    """Whether two affine accesses never reach one element: in some dimension the difference
    of their indices (loop variables not shared by both taken as independent) is never 0
    (a GCD test, then a range test)."""
    if x.map is None or y.map is None:
        return False
    for ex, ey in zip(x.map.results, y.map.results):
        fx, fy = linear_form(canonical(ex), x.operands), linear_form(canonical(ey), y.operands)
        if fx is None or fy is None:
            continue
        terms = dict(fx[0])
        for v, c in fy[0].items():
            terms[v] = terms.get(v, 0) - c
        terms = {v: c for v, c in terms.items() if c}
        const = fx[1] - fy[1]
        g = 0
        for c in terms.values():
            g = math.gcd(g, c)
        if (g == 0 and const != 0) or (g and const % g):
            return True
        lo, hi = const, const
        for v, c in terms.items():
            r = value_range(v)
            if r[0] is None or r[1] is None:
                lo = hi = None
                break
            assert lo is not None and hi is not None
            lo, hi = lo + min(c * r[0], c * r[1]), hi + max(c * r[0], c * r[1])
        if lo is not None and hi is not None and (lo > 0 or hi < 0):
            return True
    return False
