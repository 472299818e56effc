"""A staged buffer's constant fill hoisted out of its staging loop: `transform.einc.hoist_fill
%buffer` (README, "The grouped convolution's next pair prefetched").

`hoist_fill(alloca)`: `alloca` is a local buffer a `cache_read` allocated at the top of a
loop's body (the staging loop) with a constant fill (a halo's frame: the pair form's padded
input, 1856 of 14400 elements a pair of groups) that the copy-in never overwrites. The
buffer and its fill nests move before the staging loop: the frame is written once, not once
an iteration; every iteration reads the same values, since no other write touches the
frame. At batch 16 the pair form fills its frame once per image instead of once per pair of
groups (with the next pair's prefetch: 1.12x against 1.04-1.05x for the prefetch alone).

Contract, otherwise a Failure and the IR unchanged:
- the alloca lies directly in the body of an `affine.for` (the staging loop) that is not
  run in parallel (`einc.parallel`, or bound to GPU blocks or threads: each thread needs its
  own buffer; a loop around the staging loop may be, the buffer stays inside it);
- at least one fill nest: a nest of loops with constant bounds, in the staging loop's body,
  whose only other ops are stores into the buffer of one `arith.constant` of that body;
- every other op using the buffer is an affine load or an affine store whose indices are
  bounded (loops, constants), and no such store can write an element a fill nest writes
  (their index ranges are disjoint in some dimension).
"""

from __future__ import annotations

from xdsl.dialects import affine, arith, memref
from xdsl.ir import Operation, SSAValue
from xdsl.rewriter import InsertPoint, Rewriter

from einc.ir.attrs import BIND_ATTR, PARALLEL_ATTR
from einc.transforms.loop_analysis import constant_bounds, map_result_range
from einc.transforms.loop_build import Failure, describe
from einc.transforms.ranges import Range


def _fill_nest(nest: affine.ForOp, buffer: SSAValue, body_ops: set[Operation]) -> list[affine.StoreOp] | None:
    """The stores of `nest` when it is a fill nest of `buffer` (constant loop bounds, only
    stores of a constant of the staging loop's body `body_ops` into the buffer), or None."""
    stores: list[affine.StoreOp] = []
    for op in nest.walk():
        if isinstance(op, affine.ForOp):
            if constant_bounds(op) is None:
                return None
        elif isinstance(op, affine.StoreOp):
            value = op.value.owner
            if op.memref is not buffer or not isinstance(value, arith.ConstantOp) or value not in body_ops:
                return None
            stores.append(op)
        elif not isinstance(op, affine.YieldOp):
            return None
    return stores or None


def _ranges(store: affine.StoreOp) -> list[Range]:
    """The inclusive range of each index of `store` over every iteration around it."""
    m = store.map.data
    return [map_result_range(e, m, tuple(store.indices)) for e in m.results]


def _disjoint(a: list[Range], b: list[Range]) -> bool:
    """Whether two boxes of index ranges share no element (disjoint in some dimension)."""
    for (alo, ahi), (blo, bhi) in zip(a, b):
        if alo is not None and ahi is not None and blo is not None and bhi is not None and (ahi < blo or bhi < alo):
            return True
    return False


def hoist_fill(alloca: memref.AllocaOp) -> Failure | None:
    """Move `alloca` and its constant fill nests before their staging loop (see the module
    docstring)."""
    buffer = alloca.memref
    loop = alloca.parent_op()
    name = buffer.name_hint or "the buffer"
    if not isinstance(loop, affine.ForOp) or alloca.parent_block() is not loop.body.block:
        return Failure(f"cannot hoist the fill of '{name}': it is not allocated at the top of a loop's body")
    if PARALLEL_ATTR in loop.attributes or BIND_ATTR in loop.attributes:
        return Failure(f"cannot hoist the fill of '{name}' out of {describe(loop)}: the loop runs in parallel "
                       "(each thread needs its own buffer)")  # fmt: skip
    body_ops = set(loop.body.block.ops)
    fills: list[affine.ForOp] = []
    fill_stores: set[Operation] = set()
    for op in loop.body.block.ops:
        if isinstance(op, affine.ForOp) and (stores := _fill_nest(op, buffer, body_ops)) is not None:
            fills.append(op)
            fill_stores.update(stores)
    if not fills:
        return Failure(f"cannot hoist the fill of '{name}' out of {describe(loop)}: "
                       "no nest of it stores only a constant")
    filled = [_ranges(s) for s in fill_stores if isinstance(s, affine.StoreOp)]
    for use in buffer.uses:
        op = use.operation
        if op in fill_stores or isinstance(op, affine.LoadOp):
            continue
        if not isinstance(op, affine.StoreOp) or op.memref is not buffer:
            return Failure(f"cannot hoist the fill of '{name}' out of {describe(loop)}: '{op.name}' uses it")
        written = _ranges(op)
        if any(lo is None or hi is None for lo, hi in written) or not all(_disjoint(written, f) for f in filled):
            return Failure(f"cannot hoist the fill of '{name}' out of {describe(loop)}: "
                           "a store may write what the fill does")
    constants = list(dict.fromkeys(s.value.owner for s in fill_stores if isinstance(s, affine.StoreOp)))
    point = InsertPoint.before(loop)
    for op in [alloca, *constants, *fills]:
        assert isinstance(op, Operation)
        op.detach()
        Rewriter.insert_op(op, point)
    return None
