"""Double buffering of a shared tile (`transform.einc.double_buffer %staged`).

A tile staged in shared memory at a reduction loop (`cache_read "B" at %k in "shared"`) is
copied in at the start of each iteration and read by the compute after a barrier; a second
barrier at the end of the iteration keeps the next copy from overwriting it early: the
copy's global latency is exposed once per iteration, and there are two barriers.

Double buffered, the buffer gets a leading dimension of 2 (two tiles) and the loop

    copy tile lb into slot 0                       (before the loop: the prologue)
    barrier
    for k = lb to ub step s:
      if k + s < ub: copy tile k + s into slot ((k - lb) / s + 1) % 2   (the prefetch)
      compute on slot ((k - lb) / s) % 2
      barrier

reads tile k while the loads of tile k + s are in flight, with one barrier per iteration: the
barrier at the end of iteration k - 1 orders iteration k - 1's reads of a slot before
iteration k's prefetch into it, and the one at the end of iteration k makes the prefetched
tile visible to iteration k + 1.

`mark_double_buffer` (the schedule op) checks legality and marks the allocation
`einc.double_buffer`; `double_buffer_nests` rewrites the marked buffers of a kernel when
`convert-affine-to-egpu` lowers its shared staging (shared_staging.stage_shared puts the
barriers: one after the prologue, none after the prefetch). Legal where: the buffer is a
`cache_read` into shared memory (copied in only, never written back), staged at a loop with
constant bounds that carries a dependence (the reduction: a sequential loop every thread of
the block runs, e.g. `K.o`), and its copy nest uses no value computed inside the loop but
the loop's variable (the copy of tile k + s is the copy of tile k with k shifted).

Sketches and policies: `ScheduleBuilder.double_buffer(buffer)` on the handle a shared
`cache_read` returned, inside `try_` (a refusal is a Failure value, the schedule unchanged);
`double_buffer_failure(alloca)` says beforehand whether it would be refused.
"""

from __future__ import annotations

from xdsl.dialects import affine, arith, memref, scf
from xdsl.dialects.builtin import AffineMapAttr, IndexType, IntegerAttr, MemRefType, StringAttr, UnitAttr
from xdsl.ir import Operation, SSAValue
from xdsl.ir.affine import AffineExpr, AffineMap
from xdsl.rewriter import InsertPoint, Rewriter

from einc.dialects import egpu
from einc.dialects.egpu_mma import MmaOp
from einc.ir.attrs import MEMORY_ATTR, SHARED_COPY_ATTR
from einc.transforms.affine_index import dims_to_operands
from einc.transforms.loop_analysis import (
    buffer_name,
    carried_dependence,
    constant_bounds,
    induction_var,
    step_of,
)
from einc.transforms.loop_build import Failure, describe

DOUBLE_BUFFER_ATTR = "einc.double_buffer"
"""On a shared staging `memref.alloca`: double buffer it (`mark_double_buffer`)."""

FIRST, NEXT = "first", "next"
"""SHARED_COPY_ATTR values of a double-buffered tile's copies: the prologue (tile lb, before
the loop) and the prefetch (tile k + s, in the loop under `k + s < ub`)."""


def _plan(alloca: Operation, reduction: bool) -> tuple[affine.ForOp, affine.ForOp] | Failure:
    """The staging loop and the copy-in nest of `alloca`, or why it cannot be double buffered."""
    if not isinstance(alloca, memref.AllocaOp):
        return Failure(f"double_buffer expects a staging buffer (the handle of a cache_read), got '{alloca.name}'")
    name = buffer_name(alloca.memref)
    if alloca.attributes.get(MEMORY_ATTR) != StringAttr("shared"):
        return Failure(f"cannot double buffer '{name}': it is not staged in shared memory (cache_read ... in \"shared\")")
    loop = alloca.parent_op()
    if not isinstance(loop, affine.ForOp):
        return Failure(f"cannot double buffer '{name}': it is not staged at a loop")
    body = loop.body.block
    ins = [op for op in body.ops if isinstance(op, affine.ForOp) and op.attributes.get(SHARED_COPY_ATTR) == StringAttr("in")
           and any(isinstance(s, affine.StoreOp) and s.memref is alloca.memref for s in op.walk())]  # fmt: skip
    uses = [use.operation for use in alloca.memref.uses]
    if any(not isinstance(u, affine.LoadOp | affine.StoreOp) and not _mma_reads(u, alloca.memref) for u in uses):
        return Failure(f"cannot double buffer '{name}': an operation other than a load or store uses it")
    stores = [u for u in uses if isinstance(u, affine.StoreOp)]
    if len(ins) != 1 or any(not ins[0].is_ancestor(s) for s in stores):
        return Failure(f"cannot double buffer '{name}': it is written back or written in {describe(loop)} "
                       "(only a tile copied in and read, a cache_read, can be prefetched)")  # fmt: skip
    nest = ins[0]
    if reduction and carried_dependence(loop) is None:
        return Failure(f"cannot double buffer '{name}' at {describe(loop)}: it is not a reduction loop "
                       "(the tile of the next iteration is prefetched: stage at the reduction's loop)")  # fmt: skip
    bounds = constant_bounds(loop)
    if bounds is None:
        return Failure(f"cannot double buffer '{name}' at {describe(loop)}: its bounds are not constant")
    iv = induction_var(loop)
    for op in nest.walk():
        for v in op.operands:
            owner = v.owner
            defining = owner if isinstance(owner, Operation) else owner.parent_op()
            if v is iv or v is alloca.memref or defining is None or nest.is_ancestor(defining) or not loop.is_ancestor(defining):
                continue
            return Failure(f"cannot double buffer '{name}' at {describe(loop)}: its copy uses a value "
                           "computed in the loop's body")  # fmt: skip
    return loop, nest


def double_buffer_failure(alloca: Operation) -> Failure | None:
    """Why `mark_double_buffer(alloca)` would refuse, or None."""
    plan = _plan(alloca, reduction=True)
    return plan if isinstance(plan, Failure) else None


def mark_double_buffer(alloca: Operation) -> memref.AllocaOp | Failure:
    """Mark a shared staging buffer to be double buffered (module docstring); a Failure, the
    IR unchanged, where it is not legal."""
    plan = _plan(alloca, reduction=True)
    if isinstance(plan, Failure):
        return plan
    assert isinstance(alloca, memref.AllocaOp)
    alloca.attributes[DOUBLE_BUFFER_ATTR] = UnitAttr()
    return alloca


def _mma_reads(op: Operation, buffer: SSAValue) -> bool:
    """`op` is an `egpu.mma` reading `buffer` as its A or B tile (never its accumulator)."""
    return isinstance(op, MmaOp) and buffer is not op.c and buffer in (op.a, op.b)


def _mma_with_slot(op: MmaOp, old: SSAValue, buffer: SSAValue, slot: SSAValue) -> MmaOp:
    """`op` reading its tiles in `old` from `buffer` at [slot, *its indices] instead."""
    operands: list[tuple[SSAValue, list[SSAValue], tuple[int, ...]]] = []
    for which, value, indices in (("a", op.a, op.a_indices), ("b", op.b, op.b_indices), ("c", op.c, op.c_indices)):
        dims = op.dims(which)
        if value is old:
            operands.append((buffer, [slot, *indices], (dims[0] + 1, dims[1] + 1)))
        else:
            operands.append((value, list(indices), dims))
    (a, ai, ad), (b, bi, bd), (c, ci, cd) = operands
    new = MmaOp(a, ai, b, bi, c, ci, op.lane, op.lanes.value.data, op.k.value.data, (ad, bd, cd))
    new.attributes.update(op.attributes)
    return new


def _with_slot(op: affine.LoadOp | affine.StoreOp, buffer: SSAValue, slot: SSAValue) -> Operation:
    """`op` on `buffer` at [slot, *op's indices]."""
    m = dims_to_operands(op.map.data) if op.map is not None else None
    indices = list(op.indices)
    results = m.results if m is not None else tuple(AffineExpr.dimension(i) for i in range(len(indices)))
    n = len(indices)
    new_map = AffineMapAttr(AffineMap(n + 1, 0, (AffineExpr.dimension(n), *results)))
    if isinstance(op, affine.LoadOp):
        return affine.LoadOp(buffer, [*indices, slot], new_map, op.result.type)
    return affine.StoreOp(op.value, buffer, [*indices, slot], new_map)


def double_buffer_nests(root: Operation) -> tuple[list[egpu.BarrierOp], list[Failure]]:
    """Rewrite the buffers marked `einc.double_buffer` inside `root` (module docstring): the
    buffer doubled, the prologue copies (marked `einc.shared = "first"`) and one barrier
    before the loop, the copies in the loop (`"next"`) of tile k + s under one `scf.if k + s
    < ub` per loop, the reads at the current slot. The barriers in the loop are
    stage_shared's. Returns the barriers made and why the buffers a later transform of the
    schedule made unfit (an unroll of the loop cloned the copy) were left single-buffered
    (their mark dropped: one tile, two barriers, as without the op)."""
    failures: list[Failure] = []
    made: dict[affine.ForOp, tuple[affine.ApplyOp, affine.ApplyOp, affine.ApplyOp, scf.IfOp, egpu.BarrierOp]] = {}
    for alloca in [op for op in root.walk() if DOUBLE_BUFFER_ATTR in op.attributes]:
        plan = _plan(alloca, reduction=False)
        if isinstance(plan, Failure):  # a later transform (an unroll of the loop) undid it
            del alloca.attributes[DOUBLE_BUFFER_ATTR]
            failures.append(plan)
            continue
        assert isinstance(alloca, memref.AllocaOp)
        loop, nest = plan
        if loop not in made:
            made[loop] = _slots(loop)
        after, current, following, guard, barrier = made[loop]
        memory = alloca.memref.type
        assert isinstance(memory, MemRefType)
        doubled = memref.AllocaOp.get(memory.get_element_type(), 64, [2, *memory.get_shape()])
        for key, value in alloca.attributes.items():
            if key != DOUBLE_BUFFER_ATTR:
                doubled.attributes[key] = value
        doubled.memref.name_hint = alloca.memref.name_hint
        Rewriter.insert_op(doubled, InsertPoint.before(alloca))
        for use in list(alloca.memref.uses):
            op = use.operation
            if isinstance(op, MmaOp):  # a tensor-core tile read from the current slot
                Rewriter.replace_op(op, _mma_with_slot(op, alloca.memref, doubled.memref, current.result))
                continue
            assert isinstance(op, affine.LoadOp | affine.StoreOp)
            slot = following.result if nest.is_ancestor(op) else current.result
            Rewriter.replace_op(op, _with_slot(op, doubled.memref, slot))
        Rewriter.erase_op(alloca)
        iv = induction_var(loop)
        for use in list(iv.uses):
            if nest.is_ancestor(use.operation):
                use.operation.operands[use.index] = after.result
        first_at, zero = (arith.ConstantOp(IntegerAttr(v, IndexType())) for v in (_lower(loop), 0))
        first = nest.clone(value_mapper={after.result: first_at.result, following.result: zero.result})
        first.attributes[SHARED_COPY_ATTR] = StringAttr(FIRST)
        Rewriter.insert_op([first_at, zero, first], InsertPoint.before(barrier))
        nest.detach()
        end = guard.true_region.block.last_op
        assert end is not None
        Rewriter.insert_op(nest, InsertPoint.before(end))
        nest.attributes[SHARED_COPY_ATTR] = StringAttr(NEXT)
    return [slots[4] for slots in made.values()], failures


def _lower(loop: affine.ForOp) -> int:
    bounds = constant_bounds(loop)
    assert bounds is not None
    return bounds[0]


def _slots(loop: affine.ForOp) -> tuple[affine.ApplyOp, affine.ApplyOp, affine.ApplyOp, scf.IfOp, egpu.BarrierOp]:
    """At the top of `loop`'s body: k + s, the current slot, the next slot, the prefetch's
    `scf.if k + s < ub`; before the loop, the prologue's barrier."""
    bounds = constant_bounds(loop)
    assert bounds is not None
    lb, ub = bounds
    step = step_of(loop)
    iv = induction_var(loop)
    d0 = AffineExpr.dimension(0)
    position = (d0 - lb) // step

    def apply(e: AffineExpr) -> affine.ApplyOp:
        return affine.ApplyOp([iv], AffineMapAttr(AffineMap(1, 0, (e,))))

    after, current, following = apply(d0 + step), apply(position % 2), apply((position + 1) % 2)
    end = arith.ConstantOp(IntegerAttr(ub, IndexType()))
    more = arith.CmpiOp(after.result, end.result, "slt")
    guard = scf.IfOp(more.result, [], [scf.YieldOp()])
    Rewriter.insert_op([after, current, following, end, more, guard], InsertPoint.at_start(loop.body.block))
    barrier = egpu.BarrierOp()
    Rewriter.insert_op(barrier, InsertPoint.before(loop))
    return after, current, following, guard, barrier


__all__ = ["DOUBLE_BUFFER_ATTR", "double_buffer_failure", "double_buffer_nests", "mark_double_buffer"]
