"""Lowering the shared-memory staging of a kernel: tensors a schedule staged in shared
memory (staging.py's cache_read/cache_write, `einc.memory = "shared"`) become
`egpu.alloc_shared` buffers that the block's threads fill and drain cooperatively between
barriers, with the partial-tile checks guarding the compute only.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from xdsl.builder import Builder
from xdsl.dialects import affine, arith, memref, scf
from xdsl.dialects.builtin import (
    IndexType,
    StringAttr,
)
from xdsl.ir import Block, Operation, Region, SSAValue
from xdsl.rewriter import InsertPoint, Rewriter

from einc.dialects import egpu
from einc.ir.attrs import PAD_ATTR
from einc.transforms.double_buffer import FIRST, NEXT, double_buffer_nests
from einc.transforms.gpu_mapping import (
    Launch,
    Statement,
    delinearize,
    index_constant,
    is_pure,
    linear_thread_id,
    perfect_chain,
    schedule_error,
    trip_count,
)
from einc.transforms.loops import induction_var
from einc.transforms.staging import MEMORY_ATTR, SHARED_COPY_ATTR


def _is_shared_alloca(op: Operation) -> bool:
    return isinstance(op, memref.AllocaOp) and op.attributes.get(MEMORY_ATTR) == StringAttr("shared")


def has_shared_staging(stmt: Statement) -> bool:
    """Whether a schedule staged a tensor of the statement in shared memory (staging.py)."""
    return any(_is_shared_alloca(inner) for op in stmt.ops for inner in op.walk())


def stage_shared(kernel: egpu.FuncOp, launch: Launch, conds: Sequence[SSAValue]) -> None:
    """Lower the shared staging of staging.py in `kernel` (before its return is built):
    - each marked `memref.alloca` becomes an `egpu.alloc_shared` at the kernel's top level;
    - each copy nest becomes one loop in which the block's threads split the box's elements
      (linear thread id, strided by the block size), so a thread copies out exactly the
      elements it copied in;
    - in each staging loop body, `egpu.barrier` after the copy-in nests and after the
      compute (before the copy-out nests, or at the end of the body: before the next
      iteration overwrites the buffer);
    - a double-buffered tile (double_buffer.py, rewritten first): one barrier after its
      prologue copy before the loop, none after its prefetch in the loop (only the one at
      the end of the body);
    - the partial-tile checks `conds` guard the compute only: every thread runs the copies
      and reaches every barrier. Raises ScheduleError when a guarded value is used across a
      barrier (the guard cannot be split there)."""
    block = kernel.body.block
    prologue_barriers, _ = double_buffer_nests(kernel)  # unfit ones stay single-buffered
    for alloca in [op for op in kernel.walk() if _is_shared_alloca(op)]:
        assert isinstance(alloca, memref.AllocaOp)
        shared = egpu.AllocSharedOp(alloca.memref.type)  # type: ignore[arg-type]
        shared.memref.name_hint = alloca.memref.name_hint
        if PAD_ATTR in alloca.attributes:  # the schedule's pad, for einc-pad-shared
            shared.attributes[PAD_ATTR] = alloca.attributes[PAD_ATTR]
        Rewriter.insert_op(shared, InsertPoint.at_start(block))
        alloca.memref.replace_all_uses_with(shared.memref)
        Rewriter.erase_op(alloca)
    top = Builder(InsertPoint.after(_last_alloc_shared(block)))
    tid = linear_thread_id(top, launch.block)
    threads = math.prod(launch.block)
    copies: dict[Block, tuple[list[Operation], list[Operation]]] = {}
    sync: set[Operation] = set(prologue_barriers)
    for nest in [op for op in kernel.walk() if isinstance(op, affine.ForOp) and SHARED_COPY_ATTR in op.attributes]:
        assert isinstance(nest, affine.ForOp)
        kind = nest.attributes[SHARED_COPY_ATTR]
        copy = _distribute(nest, tid, threads)
        if kind == StringAttr(FIRST):  # a double buffer's prologue (its barrier follows the copies)
            sync.add(copy)
            continue
        if kind == StringAttr(NEXT):  # a prefetch (in its `scf.if`): no barrier after it, one at the end
            guard = copy.parent_op()
            body = guard.parent_block() if isinstance(guard, scf.IfOp) else None
            assert guard is not None and body is not None
            copies.setdefault(body, ([], []))
            sync.add(guard)
            continue
        ins, outs = copies.setdefault(copy.parent_block(), ([], []))  # type: ignore[arg-type]
        (ins if kind == StringAttr("in") else outs).append(copy)
    for body, (ins, outs) in copies.items():
        for point in (
            [InsertPoint.after(ins[-1])] if ins else []
        ) + [InsertPoint.before(outs[0]) if outs else InsertPoint.before(body.last_op)]:  # type: ignore[arg-type]
            barrier = egpu.BarrierOp()
            Rewriter.insert_op(barrier, point)
            sync.add(barrier)
        sync.update(ins + outs)
    if conds:  # computed in order at the top level: each `and` right after its check
        in_range = conds[0]
        for cond in conds[1:]:
            both = arith.AndIOp(in_range, cond)
            Rewriter.insert_op(both, InsertPoint.after(cond.owner))  # type: ignore[arg-type]
            in_range = both.result
        start = block.get_operation_index(in_range.owner) + 1  # type: ignore[arg-type]
        _guard_block(block, start, in_range, sync)


def _last_alloc_shared(block: Block) -> Operation:
    last = block.first_op
    for op in block.ops:
        if not isinstance(op, egpu.AllocSharedOp):
            break
        last = op
    assert last is not None
    return last


def _distribute(nest: affine.ForOp, tid: SSAValue, threads: int) -> Operation:
    """Replace a copy nest over a box by `for e = tid to size step threads`, the body at the
    box point `e` (row-major)."""
    loops = perfect_chain(nest)
    points = math.prod(trip_count(loop) for loop in loops)
    b = Builder(InsertPoint.before(nest))
    step_block = Block(arg_types=[IndexType()])
    step_block.args[0].name_hint = "e"
    step_block.add_op(scf.YieldOp())
    copy = b.insert(scf.ForOp(tid, index_constant(b, points), index_constant(b, threads), [],
                              Region(step_block)))  # fmt: skip
    inner = Builder(InsertPoint.before(step_block.last_op))  # type: ignore[arg-type]
    mapper: dict[SSAValue, SSAValue] = {}
    for loop, iv in zip(loops, delinearize(inner, step_block.args[0], loops)):
        mapper[induction_var(loop)] = iv
    for op in loops[-1].body.block.ops:
        if not isinstance(op, affine.YieldOp):
            inner.insert(op.clone(mapper))
    Rewriter.erase_op(nest)
    return copy


_TRAPPING = (arith.DivSIOp, arith.DivUIOp, arith.RemSIOp, arith.RemUIOp, arith.FloorDivSIOp,
             arith.CeilDivSIOp, arith.CeilDivUIOp)
"""Pure ops that may trap on a CPU device (integer division by zero): out-of-range threads
must not run them."""


def _guard_block(block: Block, start: int, cond: SSAValue, sync: set[Operation]) -> None:
    """Put the ops of `block` from `start` on under `scf.if cond`, in runs between the ops of
    `sync` (copies, barriers); loops holding one are entered instead. Pure ops of unguarded
    values (but integer divisions) stay outside, above the guard."""
    group: list[Operation] = []
    values: set[SSAValue] = set()
    between: list[Operation] = []  # pure ops left outside, among the group's ops

    def flush() -> None:
        if not group:
            return
        for op in between:  # the guarded ops may use them: they move above the guard
            op.detach()
            Rewriter.insert_op(op, InsertPoint.before(group[0]))
        between.clear()
        guard = scf.IfOp(cond, [], [scf.YieldOp()])
        Rewriter.insert_op(guard, InsertPoint.before(group[0]))
        end = guard.true_region.block.last_op
        for op in group:
            op.detach()
            Rewriter.insert_op(op, InsertPoint.before(end))  # type: ignore[arg-type]
        for op in group:
            for result in op.results:
                if any(not guard.is_ancestor(use.operation) for use in result.uses):
                    raise schedule_error(
                        "a value of a partial tile's guarded compute is used across a "
                        "shared-memory barrier: stage at another loop"
                    )
        group.clear()

    for op in list(block.ops)[start:]:
        if isinstance(op, affine.YieldOp | scf.YieldOp | egpu.ReturnOp):
            break
        if op in sync:
            flush()
        elif any(inner in sync for inner in op.walk()):
            flush()
            for region in op.regions:
                for inner_block in region.blocks:
                    _guard_block(inner_block, 0, cond, sync)
        elif (is_pure(op) or isinstance(op, memref.AllocaOp)) and not isinstance(op, _TRAPPING) and not any(
            o in values for o in op.operands
        ):  # (a work-item's local array may be declared outside the guard)
            if group:
                between.append(op)
        else:
            group.append(op)
            values.update(op.results)
    flush()


__all__ = ["has_shared_staging", "stage_shared"]
