"""Loop coalescing (MLIR's `transform.loop.coalesce`, affine `coalesceLoops`): a perfect nest
of `depth` constant-bound loops becomes one loop over the product of their trip counts.

    for HO in 0..28: for WO in 0..28: body(HO, WO)   ->   for HO_WO in 0..784:
                                                            body(HO_WO floordiv 28, HO_WO mod 28)

Loop k's variable becomes `lb_k + step_k * ((p floordiv S_k) mod T_k)` (`T_k` its trip
count, `S_k` the product of the trip counts inside it; no `mod` for the outermost, no
`floordiv` for the innermost), folded into the affine loads, stores and applies that use it.
The coalesced loop runs the iterations in the same order as the nest, so it is legal for any
such nest; it is refused (failure as a value, IR untouched) where the nest is not perfect,
a bound is not a constant (a tile loop's `min`, a triangular nest), a loop carries values
(`iter_args`) or already carries a schedule mark (parallel, vectorize, bind: coalesce
first). The new loop keeps the outer loop's tags, its axis the loops' axes joined by `.`
(`HO.WO`, its C variable `HOxWO`).

Where the combined index is contiguous, no division is left once the index is linearised: a
row-major buffer indexed `x[..., HO, WO]` with a last extent of 28 reads
`x[..., p floordiv 28, p mod 28]`, whose flat position `(p floordiv 28) * 28 + p mod 28` is
`p` (einc.transforms.affine_index.simplify_flat, which the printers' linearisation applies): the C of a coalesced 1x1
convolution indexes its input `C * 784 + HO_WO`, not `HO_WO / 28 * 28 + HO_WO % 28`. The
per-dimension indices stay in bounds (the interpreters check each dimension).
"""

from __future__ import annotations

import math

from xdsl.dialects import affine
from xdsl.dialects.builtin import AffineMapAttr, StringAttr
from xdsl.ir.affine import AffineExpr, AffineMap
from xdsl.rewriter import Rewriter

from einc.ir.attrs import AXIS_ATTR, BIND_ATTR, PARALLEL_ATTR, VECTORIZE_ATTR
from einc.transforms.affine_fold import fold_applies
from einc.transforms.loop_analysis import constant_bounds, induction_var, step_of
from einc.transforms.loop_build import Failure, _new_loop, describe

MAX_DEPTH = 8
"""The most loops one coalesce fuses."""


def coalesce_nest(outer: affine.ForOp) -> list[affine.ForOp]:
    """The perfect nest from `outer` down (each body a single loop), outermost first."""
    nest = [outer]
    while True:
        body = [op for op in nest[-1].body.block.ops if not isinstance(op, affine.YieldOp)]
        if len(body) != 1 or not isinstance(body[0], affine.ForOp):
            return nest
        nest.append(body[0])


def coalesce_loops(outer: affine.ForOp, depth: int = 2) -> affine.ForOp | Failure:
    """Replace the perfect nest of `depth` loops from `outer` by one loop (module docstring).
    Returns the coalesced loop (`outer` itself for a depth of 1)."""
    if not 1 <= depth <= MAX_DEPTH:
        return Failure(f"coalesce depth must be in [1, {MAX_DEPTH}], got {depth}")
    nest = coalesce_nest(outer)[:depth]
    if len(nest) < depth:
        return Failure(f"cannot coalesce {describe(outer)}: {describe(nest[-1])} is not a perfect nest of "
                       f"{depth} loops (its body is not a single loop)")  # fmt: skip
    trips: list[int] = []
    lows: list[int] = []
    for loop in nest:
        bounds = constant_bounds(loop)
        if bounds is None:
            return Failure(f"cannot coalesce {describe(loop)}: its bounds are not constants")
        if loop.results:
            return Failure(f"cannot coalesce {describe(loop)}: it carries values between iterations")
        marks = [m for m in (PARALLEL_ATTR, VECTORIZE_ATTR, BIND_ATTR) if m in loop.attributes]
        if marks:
            return Failure(f"cannot coalesce {describe(loop)}: it is already marked {marks[0]} (coalesce before)")
        lo, hi = bounds
        lows.append(lo)
        trips.append(max(0, -(-(hi - lo) // step_of(loop))))
    if depth == 1:
        return outer
    total = math.prod(trips)
    hints = [induction_var(loop).name_hint or "i" for loop in nest]
    new = _new_loop((), (), 0, total, 1, "x".join(hints))
    p = induction_var(new)
    attributes = dict(outer.attributes)
    axes = [a.data for loop in nest if isinstance(a := loop.attributes.get(AXIS_ATTR), StringAttr)]
    if len(axes) == depth:
        attributes[AXIS_ATTR] = StringAttr(".".join(axes))
    inner = nest[-1]
    body = new.body.block
    end = body.last_op
    assert end is not None  # the new loop's yield
    # the inner body's ops move into the new loop, before its yield
    for op in [op for op in inner.body.block.ops if not isinstance(op, affine.YieldOp)]:
        op.detach()
        body.insert_op_before(op, end)
    d0 = AffineExpr.dimension(0)
    inside = total
    applies: list[affine.ApplyOp] = []
    for loop, trip, lo in zip(nest, trips, lows):
        inside //= max(trip, 1)
        e: AffineExpr = d0 if inside == 1 else d0 // inside
        if trip == 1:  # a loop that runs once: its variable is its lower bound
            e = AffineExpr.constant(0)
        elif loop is not nest[0]:
            e = e % trip
        e = e * step_of(loop) + lo
        apply = affine.ApplyOp([p], AffineMapAttr(AffineMap(1, 0, (e,))))
        applies.append(apply)
        induction_var(loop).replace_all_uses_with(apply.result)
    first = body.first_op
    assert first is not None
    for apply in applies:
        body.insert_op_before(apply, first)
    new.attributes.update(attributes)
    Rewriter.replace_op(outer, new)
    fold_applies(new)
    return new
