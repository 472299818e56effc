"""Loop distribution (fission): a loop whose body holds several statements (loops, stores)
becomes one copy of the loop per statement, in order.

    for N: { for HO_p0: A ; for HO_p1: B }   ->   for N: { for HO_p0: A } ; for N: { for HO_p1: B }

The pieces of the body are its ops with side effects or regions (a nested loop, a store,
a load); ops without side effects (an `affine.apply`, a constant) go with every piece that
uses them, and no piece may use a value another computes.
Legal when the loop carries no dependence (no element two iterations both touch, one
writing: `carried_dependence`): then running every iteration of the first piece before
any of the second reorders only independent work, and each piece keeps its iterations'
order. Split by output phase (`split_phases` on a transposed convolution's output row),
distributing the loops above the phases makes each phase a nest of its own, which a
schedule then blocks as a dense convolution. Failures are values, the IR untouched.
"""

from __future__ import annotations

from xdsl.dialects import affine
from xdsl.ir import Operation
from xdsl.rewriter import InsertPoint, Rewriter
from xdsl.traits import is_side_effect_free

from einc.transforms.loop_analysis import buffer_name, carried_dependence
from einc.transforms.loop_build import Failure, describe


def _piece(op: Operation) -> bool:
    """Whether a body op is a piece of its own (not cloned along with its users)."""
    return bool(op.regions) or not is_side_effect_free(op)


def pieces(loop: affine.ForOp) -> list[Operation]:
    """The pieces `distribute_loop` would make of `loop`'s body, in order."""
    return [op for op in loop.body.block.ops if not isinstance(op, affine.YieldOp) and _piece(op)]


def distribute_loop(loop: affine.ForOp) -> list[affine.ForOp] | Failure:
    """Replace `loop` by one copy per piece of its body (module docstring), in order; each
    copy keeps the loop's tags and marks. A body of one piece is left as it is. Returns the
    copies."""
    if loop.results:
        return Failure(f"cannot distribute {describe(loop)}: it carries values between iterations")
    found = pieces(loop)
    if len(found) < 2:
        return [loop]
    if any(result.uses for op in found for result in op.results):
        return Failure(f"cannot distribute {describe(loop)}: a value one piece of its body computes is used by another")
    carried = carried_dependence(loop)
    if carried is not None:
        return Failure(
            f"cannot distribute {describe(loop)}: its iterations both access '{buffer_name(carried)}' "
            "(a carried dependence that running one piece's iterations before the next would reorder)"
        )
    body = list(loop.body.block.ops)
    positions = [body.index(op) for op in found]
    copies: list[affine.ForOp] = []
    for keep in positions:
        copy = loop.clone()
        ops = list(copy.body.block.ops)
        for k in reversed(positions):
            if k != keep:
                Rewriter.erase_op(ops[k])
        _erase_unused(copy)
        Rewriter.insert_op(copy, InsertPoint.before(loop))
        copies.append(copy)
    Rewriter.erase_op(loop)
    return copies


def _erase_unused(loop: affine.ForOp) -> None:
    """Erase the body's side-effect-free ops whose results nothing uses (last first)."""
    for op in reversed(list(loop.body.block.ops)):
        if not _piece(op) and not isinstance(op, affine.YieldOp) and all(not r.uses for r in op.results):
            Rewriter.erase_op(op)
