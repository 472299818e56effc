"""Loops whose iterations become lanes: a work-item's loops (a loop over points, a tile's
loops in a kernel of few work-items) would otherwise run one iteration per step for the few
work-items of the launch.

A loop (with the loops of constant bounds perfectly nested in it) runs all its iterations of
every work-item at once as lanes (`Grid.expanded`: each lane knows its work-item, whose
coordinates, shared memory and private buffers it uses). Iterations of one work-item run in
order in the program, so any element two iterations touch (one writing) makes the expansion
wrong: a second race detector (memory.py, `Buffer._expansion_check`) finds it, the buffers
are restored, and fewer loops are tried, down to running the loop in order (as is a loop
whose body faults: the ordered run reports the fault with its work-item). A loop that needed
its order is not tried again. Only loops with no results, whose body holds no barrier,
subgroup operation, shared allocation or launch, outside any other expansion, are tried.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np
from xdsl.dialects import affine
from xdsl.dialects.builtin import VectorType
from xdsl.ir import Operation, SSAValue

from einc.dialects import egpu
from einc.semantics.egpu.memory import Buffer, KernelFault

if TYPE_CHECKING:
    from einc.semantics.egpu.machine import Machine

_BARRED = (egpu.BarrierOp, egpu.SubgroupReduceOp, egpu.AllocSharedOp, egpu.LaunchOp)

MAX_LANES = 1 << 18


class Nest:
    """A loop and the constant-bound loops perfectly nested in it, and what their body uses
    from outside."""

    def __init__(self, loops: list[Operation], outside: list[SSAValue]):
        self.loops = loops
        self.outside = outside


def nest_of(op: Operation) -> Nest | None:
    """The loops to try as lanes from `op`; None where `op` may not be expanded."""
    from einc.transforms.gpu_mapping import perfect_chain
    from einc.transforms.ranges import constant_trip_range

    if op.results:
        return None
    loops: list[Operation] = [op]
    if isinstance(op, affine.ForOp):
        for loop in perfect_chain(op)[1:]:
            if constant_trip_range(loop) is None or loop.results:
                break
            loops.append(loop)
    loops = independent_prefix(loops)
    if not loops:
        return None
    found: dict[SSAValue, None] = {}
    for inner in op.regions[0].walk():
        if isinstance(inner, _BARRED):
            return None
        for v in inner.operands:
            owner = v.owner
            defining = owner if isinstance(owner, Operation) else owner.parent_op()
            if defining is None or not op.is_ancestor(defining):
                found[v] = None
    return Nest(loops, list(found))


def _depends_on(value: SSAValue, ivs: set[SSAValue], memo: dict[SSAValue, frozenset[SSAValue]]) -> frozenset[SSAValue]:
    """The induction variables of `ivs` that `value` is computed from (through pure ops)."""
    found = memo.get(value)
    if found is not None:
        return found
    memo[value] = frozenset()
    if value in ivs:
        found = frozenset([value])
    elif isinstance(value.owner, Operation) and not value.owner.regions:
        found = frozenset().union(*[_depends_on(o, ivs, memo) for o in value.owner.operands])
    else:
        found = frozenset()
    memo[value] = found
    return found


def independent_prefix(loops: list[Operation]) -> list[Operation]:
    """The loops of `loops` (a perfect nest, outermost first) up to the first one some store
    of the nest does not index with (its iterations would write one element: a reduction);
    a cheap first guess, the race detector decides."""
    from xdsl.dialects import memref

    if not loops:
        return loops
    ivs = {loop.regions[0].block.args[0]: loop for loop in loops}
    memo: dict[SSAValue, frozenset[SSAValue]] = {}
    used: set[SSAValue] | None = None
    for op in loops[0].walk():
        if isinstance(op, affine.StoreOp | memref.StoreOp | egpu.VStoreOp | egpu.StoreTruncfOp):
            if isinstance(op.memref.owner, memref.AllocaOp) and loops[0].is_ancestor(op.memref.owner):
                continue
            deps: set[SSAValue] = set()
            for index in op.indices:
                deps |= _depends_on(index, set(ivs), memo)
            used = deps if used is None else used & deps
    if used is None:
        return loops
    prefix: list[Operation] = []
    for loop in loops:
        if loop.regions[0].block.args[0] not in used:
            break
        prefix.append(loop)
    return prefix


def _ranges(loops: list[Operation]) -> list[tuple[int, int, int]]:
    from einc.transforms.ranges import constant_trip_range

    ranges = []
    for loop in loops:
        assert isinstance(loop, affine.ForOp)
        bounds = constant_trip_range(loop)
        assert bounds is not None
        step = loop.step.value.data
        ranges.append((bounds[0], step, max(0, -(-(bounds[1] - bounds[0]) // step))))
    return ranges


def run_expanded(m: Machine, op: Operation, lo: np.ndarray, hi: np.ndarray, step: int,
                 dtype: np.dtype, mask: np.ndarray | None) -> bool:  # fmt: skip
    """Run the loop `op` (bounds `lo`, `hi` per lane) with its nest's iterations as lanes:
    the longest nest that is independent; False (nothing changed) where none is."""
    if m.grid.expansion:
        return False
    if op not in m.expandable:
        m.expandable[op] = nest_of(op)
    nest = m.expandable[op]
    if nest is None:
        return False
    while nest.loops:
        if _run(m, nest, lo, hi, step, dtype, mask):
            return True
        nest.loops = nest.loops[:-1]
    m.expandable[op] = None
    return False


def _run(m: Machine, nest: Nest, lo: np.ndarray, hi: np.ndarray, step: int, dtype: np.dtype,
         mask: np.ndarray | None) -> bool:  # fmt: skip
    grid = m.grid
    act = grid.active(mask)
    trips = np.maximum(0, -((lo - hi) // step))[act]
    inner = _ranges(nest.loops[1:])
    per = int(np.prod([n for _, _, n in inner]))
    total = int(trips.sum()) * per
    if total < 2 or total > MAX_LANES or total <= len(act):
        return False
    first_map = np.repeat(act, trips)
    k = np.arange(len(first_map)) - np.repeat(np.cumsum(trips) - trips, trips)
    lane_map = np.repeat(first_map, per)
    ivs = [(lo[lane_map] + np.repeat(k, per) * step).astype(dtype)]
    if inner:
        idx = np.unravel_index(np.tile(np.arange(per), len(first_map)), [n for _, _, n in inner])
        ivs += [(low + i.astype(np.int64) * s) for i, (low, s, _) in zip(idx, inner)]
    slots = [m.slot(v) for v in nest.outside]
    values = [m.env[s] for s in slots]
    buffers = [v for v in values if isinstance(v, Buffer)]
    saved_data = [(b, b.data.copy()) for b in buffers if not b.readonly]
    for s, v, value in zip(slots, nest.outside, values):
        if isinstance(value, np.ndarray) and value.ndim == (2 if isinstance(v.type, VectorType) else 1):
            m.env[s] = value[lane_map]
    m.launches += 1
    m.grid = grid.expanded(lane_map, m.launches)
    try:
        for loop, iv in zip(nest.loops[:-1], ivs):
            m.env[m.slot(loop.regions[0].block.args[0])] = iv
        m.run_block(nest.loops[-1].regions[0].block, None, [ivs[-1]])
    except KernelFault:
        for b, data in saved_data:
            b.data[...] = data
        return False
    finally:
        m.grid = grid
        for s, value in zip(slots, values):
            m.env[s] = value
    return True
