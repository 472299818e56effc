"""`rotate`: the order of a perfect band's loops rotated, reduction loops included; the
mechanism behind `transform.einc.rotate`, the CPU tuning space's reduction-order knob.

    for C: for KH: for KW: O[..] += X[..] * W[..]    -- rotate by 1 ->    for KH: for KW: for C:

`rotate_band(loops, k)`: the listed loops (a perfect band, outermost first) run in the order
`loops[k:] + loops[:k]` (k = 0: unchanged). Unlike `reorder`, which keeps the relative order
of a reduction's loops (the order of its float sum), `rotate` may permute them when the
reduction is reassociable: every buffer written in the band whose loops would change order is
accumulated by one load-combine-store (`B[I] = combine(B[I], x)`, the load used only there, `I`
the same in both) with an associative and commutative combiner (add, mul, max, min, float or
integer; einc.transforms.vectorize.REDUCTIONS). Float sums and products are reassociated (the
terms are added in another order: results differ by rounding only), as by rfactor and
vectorize_reduction; max and min give the same value in any order. The band's bounds must
allow the order (no loop moved outside one its bounds read). Failure as a value, IR untouched.

`rotation_legal(loops)` checks every rotation at once: where it holds, a knob choosing k in
`range(len(loops))` is legal whatever its value (the tuner's `stmt.reduce_order`).
"""

from __future__ import annotations

from collections.abc import Sequence

from xdsl.dialects import affine
from xdsl.ir import Operation

from einc.transforms.loop_analysis import (
    Access,
    bounds_dominate,
    determined_loops,
    induction_var,
    perfect_band,
    written_groups,
)
from einc.transforms.loop_build import Failure, describe


def _reassociable(group: Sequence[Access]) -> bool:
    """Whether a buffer's accesses in a band are one accumulation `B[I] = combine(B[I], x)`."""
    from einc.transforms.vectorize import REDUCTIONS

    stores = [a for a in group if a.write]
    loads = [a for a in group if not a.write]
    if len(stores) != 1 or len(loads) != 1:
        return False
    store, load = stores[0].op, loads[0].op
    if not isinstance(store, affine.StoreOp) or not isinstance(load, affine.LoadOp):
        return False
    if load.map != store.map or tuple(load.indices) != tuple(store.indices):
        return False
    combine = store.value.owner
    if not isinstance(combine, Operation) or type(combine) not in REDUCTIONS:
        return False
    if load.result not in combine.operands or len(combine.operands) != 2:
        return False
    return len(list(load.result.uses)) == 1


def _band(loops: Sequence[affine.ForOp]) -> Failure | None:
    if len(loops) < 2:
        return Failure(f"rotate needs two loops or more, got {len(loops)}")
    if len({id(x) for x in loops}) != len(loops):
        return Failure("rotate lists a loop twice")
    if not perfect_band(loops) or any(loops[k + 1].parent_op() is not loops[k] for k in range(len(loops) - 1)):
        return Failure("rotate needs the loops of one perfect nest, outermost first (each body holds only the next loop)")
    return None


def _order_broken(loops: Sequence[affine.ForOp], order: Sequence[int]) -> Failure | None:
    """Why the band may not run in `order` (`order[d]`: the loop placed at depth d), if so."""
    if not bounds_dominate(loops, order):
        return Failure(f"rotate would move a loop outside a loop its bounds depend on ({describe(loops[0])})")
    ivs = [induction_var(loop) for loop in loops]
    for buffer, group in written_groups(loops[0]).items():
        fixed = determined_loops(group, ivs)
        free = [k for k, iv in enumerate(ivs) if iv not in fixed]
        positions = [order.index(k) for k in free]
        if positions != sorted(positions) and not _reassociable(group):
            name = buffer.name_hint or "a buffer"
            return Failure(
                f"rotate would reorder the loops of '{name}' in {describe(loops[0])}, which is not one "
                "accumulation by an associative, commutative combiner"
            )
    return None


def rotation_legal(loops: Sequence[affine.ForOp]) -> Failure | None:
    """None when every rotation of the band `loops` is legal (module docstring), else why not."""
    bad = _band(loops)
    if bad is not None:
        return bad
    n = len(loops)
    for k in range(1, n):
        bad = _order_broken(loops, [(k + d) % n for d in range(n)])
        if bad is not None:
            return bad
    return None


def rotate_band(loops: Sequence[affine.ForOp], k: int) -> list[affine.ForOp] | Failure:
    """Run the perfect band `loops` (outermost first) in the order `loops[k:] + loops[:k]`.
    Returns the new loops in the order of `loops` (each the loop its operand was, wherever it
    now sits)."""
    from einc.transforms.loop_transforms import _rebuild_band

    bad = _band(loops)
    if bad is not None:
        return bad
    n = len(loops)
    if not 0 <= k < n:
        return Failure(f"rotate by {k}: a band of {n} loops rotates by 0 to {n - 1}")
    if k == 0:
        return list(loops)
    order = [(k + d) % n for d in range(n)]
    bad = _order_broken(loops, order)
    if bad is not None:
        return bad
    new = _rebuild_band(list(loops), order)  # in the new order
    return [new[order.index(j)] for j in range(n)]
