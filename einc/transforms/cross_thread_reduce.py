"""The kernel body of a reduction loop a schedule bound to a thread axis (`CrossThread`,
found by `gpu_mapping.cross_thread_reduction`): every work-item accumulates a private
partial, the block combines the partials (a tree in shared memory, one
`egpu.subgroup_reduce`, or two: each warp, then the warp totals), and one work-item
combines the total into the output element.

A float16/bfloat16 accumulator (its arithmetic already computed in float32 and rounded, by
`legalize-f16-for-c`) is combined the same way: each combine in float32 rounded to the
narrow type, the tree's shared slots held as float32 (exact; OpenCL, SYCL and HLSL cannot
declare 16-bit arrays), never a subgroup reduction (warp shuffles of 16-bit values are not
in the targets' `subgroup_reduce_dtypes`).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence

from xdsl.builder import Builder
from xdsl.dialects import affine, arith, scf
from xdsl.dialects.builtin import (
    AffineMapAttr,
    IndexType,
    MemRefType,
    f32,
)
from xdsl.ir import Attribute, Block, Operation, Region, SSAValue
from xdsl.ir.affine import AffineExpr, AffineMap
from xdsl.rewriter import InsertPoint, Rewriter

from einc.dialects import egpu
from einc.dialects.ein import Combiner
from einc.ir.attrs import NARROW_FLOATS
from einc.transforms.combiner import build_combine, identity_constant
from einc.transforms.gpu_mapping import (
    CrossThread,
    Launch,
    Mapping,
    Statement,
    index_constant,
    linear_thread_id,
    perfect_chain,
)
from einc.transforms.loops import constant_trip_range, induction_var

_REDUCE_KINDS = {Combiner.ADD: egpu.ReduceKind.ADD, Combiner.MUL: egpu.ReduceKind.MUL,
                 Combiner.MAX: egpu.ReduceKind.MAX, Combiner.MIN: egpu.ReduceKind.MIN}  # fmt: skip


def _combine(b: Builder, combiner: Combiner, acc: SSAValue, value: SSAValue) -> SSAValue:
    """`build_combine`; for a float16/bfloat16 accumulator in float32, rounded once to it (the
    language's per-op rounding: the pipeline legalized narrow arithmetic before this runs)."""
    narrow = acc.type
    if not isinstance(narrow, NARROW_FLOATS):
        return build_combine(b, combiner, acc, value)
    wide = build_combine(b, combiner, b.insert(arith.ExtFOp(acc, f32)).result, b.insert(arith.ExtFOp(value, f32)).result)
    return b.insert(arith.TruncFOp(wide, narrow)).result


def build_reduction(
    b: Builder, start: Sequence[Operation], mapper: dict[SSAValue, SSAValue], stmt: Statement,
    mapping: Mapping, conds: Sequence[SSAValue], kernel: egpu.FuncOp,
) -> None:
    """Build, at `b` (the work-item's point: its mapped coordinates are in `mapper`), the
    kernel body of a statement with a reduction loop bound to threads (`mapping.reduction`);
    `start` holds the ops below the mapped levels, `conds` the partial-tile checks of the
    mapped loops. Every work-item:
    1. accumulates a private partial from the combiner's identity over its share of the
       reduction (the loops around the bound loop run in it, carrying the partial; the bound
       loop's variable is `lb + thread id * step`; a work-item past a partial tile, or whose
       output element is out of range, contributes the identity);
    2. combines the partials of its block's work-items along the reduction's dimension:
       `egpu.subgroup_reduce` (`reduction.subgroup`), or a tree in an `egpu.alloc_shared`
       array (one slot per work-item; `ceil(log2 n)` halving steps, each a guarded combine
       then `egpu.barrier`, which every work-item reaches);
    3. the work-item with id 0 along the dimension (and an output element in range) runs the
       statement's fill if it has one, then combines the total into the output element."""
    red = mapping.reduction
    assert red is not None
    element = red.store.value.type
    tid = b.insert(egpu.ThreadIdOp(red.dim)).result
    tid.name_hint = f"thread_{red.dim.value}"
    identity = b.insert(identity_constant(red.combiner, element)).result
    in_range: SSAValue | None = None
    for cond in conds:
        in_range = cond if in_range is None else b.insert(arith.AndIOp(in_range, cond)).result
    loops = [op for op in start if isinstance(op, affine.ForOp)]
    for op in start:  # index arithmetic below the levels: every work-item runs it
        if not isinstance(op, affine.ForOp | affine.YieldOp):
            b.insert(op.clone(mapper))
    assert len(loops) == 1

    def accumulate(inner: Builder) -> SSAValue:
        return _accumulate(inner, loops[0], mapper, identity, red, tid)

    partial = accumulate(b) if in_range is None else _select_region(b, in_range, element, accumulate, identity)
    partial.name_hint = "partial"

    total: SSAValue | Callable[[Builder], SSAValue]
    if red.threads == 1:
        total = partial
    elif red.subgroup and red.two_stage:
        total = _two_stage(b, partial, tid, identity, red, mapping.launch, kernel)
    elif red.subgroup:
        total = b.insert(egpu.SubgroupReduceOp(_REDUCE_KINDS[red.combiner], partial, red.cluster)).result
        total.name_hint = "total"
    else:
        total = _tree(b, partial, tid, red, mapping.launch, kernel)

    first = b.insert(arith.CmpiOp(tid, index_constant(b, 0), "eq")).result
    if in_range is not None:
        first = b.insert(arith.AndIOp(first, in_range)).result
    guard = b.insert(scf.IfOp(first, [], [scf.YieldOp()]))
    inner = Builder(InsertPoint.before(guard.true_region.block.last_op))  # type: ignore[arg-type]
    value = total if isinstance(total, SSAValue) else total(inner)
    if stmt.fill is not None:  # the fill's loops beyond the mapped ones run here
        chain = perfect_chain(stmt.fill)
        store = chain[-1].body.block.first_op if chain else stmt.fill
        assert store is not None
        for fill_loop, loop in zip(chain, mapping.loops):
            mapper[induction_var(fill_loop)] = mapper[induction_var(loop)]
        inner.insert(chain[len(mapping.loops)].clone(mapper) if len(chain) > len(mapping.loops) else store.clone(mapper))
    acc = inner.insert(red.load.clone(mapper)).results[0]
    mapper[red.store.value] = _combine(inner, red.combiner, acc, value)
    inner.insert(red.store.clone(mapper))


def _accumulate(
    b: Builder, op: affine.ForOp, mapper: dict[SSAValue, SSAValue], acc: SSAValue,
    red: CrossThread, tid: SSAValue,
) -> SSAValue:
    """Clone the loop `op` of the reduction's nest at `b`, its accumulator carried in
    registers from `acc` (the loads of the output element read the carried value, the
    store updates it): a sequential loop carries it as an `iter_args` value; the bound loop
    becomes the work-item's coordinate, under a check when it is a partial tile. Returns the
    accumulator after `op`."""
    if op is red.loop:
        step, lower = op.step.value.data, op.lowerBoundMap.data.eval([], [])[0]
        coordinate = tid
        if lower or step != 1:
            m = AffineMap(1, 0, (AffineExpr.dimension(0) * step + lower,))
            coordinate = b.insert(affine.ApplyOp([tid], AffineMapAttr(m))).result
        mapper[induction_var(op)] = coordinate
        body = list(op.body.block.ops)
        if constant_trip_range(op) is not None:
            return _carry(b, body, mapper, acc, red, tid)
        n_lb = len(op.lowerBoundOperands)
        upper = b.insert(affine.MinOp([mapper.get(o, o) for o in op.operands[n_lb:]], op.upperBoundMap)).result
        cond = b.insert(arith.CmpiOp(coordinate, upper, "slt")).result
        return _select_region(b, cond, acc.type, lambda inner: _carry(inner, body, mapper, acc, red, tid), acc)
    n_lb, n_ub = len(op.lowerBoundOperands), len(op.upperBoundOperands)
    operands = [mapper.get(o, o) for o in op.operands[: n_lb + n_ub]]
    block = Block(arg_types=[IndexType(), acc.type])
    block.args[0].name_hint = induction_var(op).name_hint
    block.args[1].name_hint = "partial"
    loop = b.insert(affine.ForOp.from_region(
        operands[:n_lb], operands[n_lb:], [acc], [acc.type], op.lowerBoundMap, op.upperBoundMap,
        Region(block), op.step,
    ))  # fmt: skip
    mapper[induction_var(op)] = block.args[0]
    inner = Builder(InsertPoint.at_end(block))
    inner.insert(affine.YieldOp.get(_carry(inner, list(op.body.block.ops), mapper, block.args[1], red, tid)))
    return loop.results[0]


def _carry(
    b: Builder, ops: Sequence[Operation], mapper: dict[SSAValue, SSAValue], acc: SSAValue,
    red: CrossThread, tid: SSAValue,
) -> SSAValue:
    """Clone `ops` (a loop body of the reduction's nest) at `b`, carrying the accumulator
    `acc`; returns its value after them."""
    for op in ops:
        if isinstance(op, affine.YieldOp):
            continue
        if op is red.load:
            mapper[red.load.result] = acc
        elif op is red.store:
            acc = mapper[red.store.value]
        elif isinstance(op, affine.ForOp) and (op is red.loop or op.is_ancestor(red.store)):
            acc = _accumulate(b, op, mapper, acc, red, tid)
        else:
            b.insert(op.clone(mapper))
    return acc


def _select_region(
    b: Builder, cond: SSAValue, result_type: Attribute, build: Callable[[Builder], SSAValue], otherwise: SSAValue
) -> SSAValue:
    """`cond ? build() : otherwise` as an `scf.if` with a result; `build` inserts the true
    branch's ops with the builder it gets."""
    true_block, false_block = Block(), Block()
    false_block.add_op(scf.YieldOp(otherwise))
    branch = b.insert(scf.IfOp(cond, [result_type], Region(true_block), Region(false_block)))
    inner = Builder(InsertPoint.at_end(true_block))
    inner.insert(scf.YieldOp(build(inner)))
    return branch.results[0]


def _two_stage(
    b: Builder, partial: SSAValue, tid: SSAValue, identity: SSAValue, red: CrossThread,
    launch: Launch, kernel: egpu.FuncOp,
) -> SSAValue:
    """Combine the partials along x (`red.threads`, a multiple of the warp `red.cluster`, so
    that no warp straddles two rows of the block) in two subgroup reductions: every warp
    reduces its lanes, its lane 0 stores the warp's total in an `egpu.alloc_shared` array
    (one slot per warp of the block, a row's warps side by side), barrier, then the first
    `w` lanes of each row (`w`: the row's warps rounded up to a power of two) reduce the
    row's totals, lanes past them contributing the identity. Every work-item reaches the
    barrier and both reductions. Returns the total (right in the row's lane 0)."""
    assert red.cluster is not None
    warp = red.cluster
    per_row = red.threads // warp
    lanes = 1 << (per_row - 1).bit_length()
    shared = egpu.AllocSharedOp(MemRefType(partial.type, [math.prod(launch.block) // warp]))
    shared.memref.name_hint = "warp_totals"
    Rewriter.insert_op(shared, InsertPoint.at_start(kernel.body.block))
    kind = _REDUCE_KINDS[red.combiner]
    mine = b.insert(egpu.SubgroupReduceOp(kind, partial, warp)).result
    mine.name_hint = "warp_total"
    linear = linear_thread_id(b, launch.block)
    d0, d1 = AffineExpr.dimension(0), AffineExpr.dimension(1)
    lane = b.insert(affine.ApplyOp([tid], AffineMapAttr(AffineMap(1, 0, (d0 % warp,))))).result
    leader = b.insert(arith.CmpiOp(lane, index_constant(b, 0), "eq")).result
    guard = b.insert(scf.IfOp(leader, [], [scf.YieldOp()]))
    inner = Builder(InsertPoint.before(guard.true_region.block.last_op))  # type: ignore[arg-type]
    inner.insert(affine.StoreOp(mine, shared.memref, [linear], AffineMapAttr(AffineMap(1, 0, (d0 // warp,)))))
    b.insert(egpu.BarrierOp())
    present = b.insert(arith.CmpiOp(tid, index_constant(b, per_row), "slt")).result
    # the row's first slot is (linear - x) / warp: a row is `threads` work-items
    rows = math.prod(launch.block) // red.threads
    slot = AffineMap(2, 0, ((d0 - d1) // warp + d1,)) if rows > 1 else AffineMap(2, 0, (d1,))
    value = _select_region(
        b, present, partial.type,
        lambda at: at.insert(affine.LoadOp(shared.memref, [linear, tid], AffineMapAttr(slot))).result,
        identity,
    )  # fmt: skip
    total = b.insert(egpu.SubgroupReduceOp(kind, value, lanes)).result
    total.name_hint = "total"
    return total


def _tree(
    b: Builder, partial: SSAValue, tid: SSAValue, red: CrossThread, launch: Launch, kernel: egpu.FuncOp
) -> Callable[[Builder], SSAValue]:
    """Combine the partials along the reduction's dimension in an `egpu.alloc_shared` array
    with one slot per work-item of the block (its linear id; `tid` is its id along the
    reduction's dimension): store, barrier, then while `n`
    partials remain, the first `n - ceil(n / 2)` work-items combine the slot `ceil(n / 2)`
    ahead into theirs, and barrier (but after the last step, which only id 0 runs). Returns
    a builder of the total (read by id 0 only)."""
    element = partial.type
    narrow = isinstance(element, NARROW_FLOATS)  # slots held as float32, values narrow
    shared = egpu.AllocSharedOp(MemRefType(f32 if narrow else element, [math.prod(launch.block)]))
    shared.memref.name_hint = "partials"
    Rewriter.insert_op(shared, InsertPoint.at_start(kernel.body.block))
    slot = tid if math.prod(launch.block) == red.threads else linear_thread_id(b, launch.block)
    stride = math.prod(launch.block[: red.dim.index])

    def at(offset: int) -> AffineMapAttr:
        return AffineMapAttr(AffineMap(1, 0, (AffineExpr.dimension(0) + offset,)))

    def store(at_b: Builder, value: SSAValue) -> None:
        if narrow:
            value = at_b.insert(arith.ExtFOp(value, f32)).result
        at_b.insert(affine.StoreOp(value, shared.memref, [slot], at(0)))

    def load(at_b: Builder, offset: int) -> SSAValue:
        value = at_b.insert(affine.LoadOp(shared.memref, [slot], at(offset))).result
        return at_b.insert(arith.TruncFOp(value, element)).result if narrow else value

    store(b, partial)
    b.insert(egpu.BarrierOp())
    n = red.threads
    while n > 1:
        half = -(-n // 2)
        active = b.insert(arith.CmpiOp(tid, index_constant(b, n - half), "slt")).result
        guard = b.insert(scf.IfOp(active, [], [scf.YieldOp()]))
        step = Builder(InsertPoint.before(guard.true_region.block.last_op))  # type: ignore[arg-type]
        mine, other = load(step, 0), load(step, half * stride)
        store(step, _combine(step, red.combiner, mine, other))
        if half > 1:  # after the last step only work-item 0 reads, its own slot
            b.insert(egpu.BarrierOp())
        n = half

    def total(inner: Builder) -> SSAValue:
        value = load(inner, 0)
        value.name_hint = "total"
        return value

    return total


__all__ = ["build_reduction"]
