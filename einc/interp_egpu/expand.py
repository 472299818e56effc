"""Loops whose iterations become lanes: a work-item's loop over many points (Poplar's point
loop before the vertices are split, a grid-stride loop) would otherwise run one iteration
per step for the few work-items of the launch.

The loop's iterations of every work-item run at once as lanes, with the race detector on.
Iterations of one work-item run in order in the program, so any element two iterations
touch (one writing) makes the expansion wrong: it is detected as a race, the buffers are
restored, and the loop runs in order after all (as does a loop whose body faults: the
ordered run reports the fault with its work-item). Only a loop at the top of a kernel's
body, run by all its work-items, with no results, whose body reads no coordinates and
holds no barrier, subgroup operation or shared or private buffer, is tried.
"""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING

import numpy as np
from xdsl.dialects import memref
from xdsl.dialects.builtin import VectorType
from xdsl.ir import Operation, Region, SSAValue

from einc.dialects import egpu
from einc.interp_egpu.memory import Buffer, Grid, KernelFault

if TYPE_CHECKING:
    from einc.interp_egpu.machine import Machine

_BARRED = (
    egpu.IndexOp, egpu.BarrierOp, egpu.SubgroupReduceOp, egpu.AllocSharedOp, egpu.LaunchOp,
    memref.AllocaOp, memref.AllocOp,
)  # fmt: skip


def outside_values(op: Operation, body: Region) -> list[SSAValue] | None:
    """The values defined outside `op` that its body uses; None where the loop may not be
    expanded."""
    if op.results:
        return None
    parent = op.parent_op()
    if not isinstance(parent, egpu.FuncOp):
        return None
    found: dict[SSAValue, None] = {}
    for inner in body.walk():
        if isinstance(inner, _BARRED):
            return None
        for v in inner.operands:
            owner = v.owner
            defining = owner if isinstance(owner, Operation) else owner.parent_op()
            if defining is None or not op.is_ancestor(defining):
                found[v] = None
    return list(found)


def run_expanded(m: Machine, op: Operation, body: Region, lo: np.ndarray, hi: np.ndarray,
                 step: int, dtype: np.dtype, outside: list[SSAValue]) -> bool:  # fmt: skip
    """Run the loop with every (work-item, iteration) a lane; False (nothing changed) where
    that is not the loop's meaning."""
    grid = m.grid
    trips = np.maximum(0, -((lo - hi) // step))
    total = int(trips.sum())
    if total < 2 or total > 1 << 21 or int(trips.max(initial=0)) < 2:
        return False
    slots = [m.slot(v) for v in outside]
    values = [m.env[s] for s in slots]
    buffers = [v for v in values if isinstance(v, Buffer)]
    if any(b.per for b in buffers):
        return False
    lane = np.repeat(grid.lane, trips)
    k = np.arange(total) - np.repeat(np.cumsum(trips) - trips, trips)
    iv = (lo[lane] + k * step).astype(dtype)
    saved_data = [(b, b.data.copy()) for b in buffers if not b.readonly]
    for s, v, value in zip(slots, outside, values):
        if isinstance(value, np.ndarray) and value.ndim == (2 if isinstance(v.type, VectorType) else 1):
            m.env[s] = value[lane]
    windows = [(b, b.window) for b in buffers if b.window is not None]
    for b, w in windows:
        b.window = dataclasses.replace(w, lo=w.lo[lane], hi=w.hi[lane])
    m.launches += 1
    m.grid = Grid(grid.kernel, (1, 1, 1), (total, 1, 1), launch=m.launches)
    try:
        m.run_block(body.block, None, [iv])
    except KernelFault:
        for b, data in saved_data:
            b.data[...] = data
        return False
    finally:
        m.grid = grid
        for b, w in windows:
            b.window = w
        for s, value in zip(slots, values):
            m.env[s] = value
    return True
