"""Outlining a statement into a device kernel: the building half of
`convert-affine-to-egpu` (`gpu_mapping` says how the statement's iterations map onto
work-items; this builds the `egpu.func` and names the host buffers to launch it with).

A local buffer (`memref.alloca`) left at the host's top level, with the statements filling
and reading it, becomes one kernel (`enclose_private_buffers`): a private array never
crosses kernels. The kernel body of a reduction bound to threads is built by
`cross_thread_reduce.py`, the cooperative copies of tensors staged in shared memory by
`shared_staging.py`.
"""

from __future__ import annotations

import math

from xdsl.builder import Builder
from xdsl.dialects import affine, arith, func, memref, scf
from xdsl.dialects.builtin import (
    AffineMapAttr,
    ArrayAttr,
    DictionaryAttr,
    IndexType,
    IntegerAttr,
    StringAttr,
)
from xdsl.ir import Block, Operation, Region, SSAValue
from xdsl.ir.affine import AffineExpr, AffineMap
from xdsl.rewriter import InsertPoint, Rewriter

from einc.dialects import egpu
from einc.ir.attrs import NAME_ATTR, POINT_SHAPE_ATTR
from einc.transforms.cross_thread_reduce import build_reduction
from einc.transforms.gpu_mapping import (
    Mapping,
    Statement,
    delinearize,
    index_constant,
    is_pure,
    perfect_chain,
    schedule_error,
    trip_count,
)
from einc.transforms.loop_build import describe
from einc.transforms.loops import constant_trip_range, induction_var
from einc.transforms.shared_staging import has_shared_staging, stage_shared
from einc.transforms.staging import MEMORY_ATTR

_STATEMENT_OPS = (affine.ForOp, affine.StoreOp, memref.StoreOp)


def enclose_private_buffers(host: Block) -> None:
    """Keep each local buffer of the host's top level in one kernel. A `memref.alloca` is a
    private array of one work-item; at the top level (the loop whose iteration it belonged to
    was unrolled away) the statements that fill and read it would become kernels of their
    own, each with its own uninitialised copy. The top-level ops from the buffer to the last
    one that depends on it (through the buffer or through values computed from it) move, in
    order, into a loop of one iteration: one statement, one kernel, one work-item. Left in
    place: host allocations, and pure ops of values computed before (constants, index
    arithmetic: the kernel clones them); deallocations in the span follow the new loop."""
    for alloca in [op for op in host.ops if _is_private_alloca(op)]:
        if alloca.parent_block() is not host:  # moved with an earlier buffer's span
            continue
        span = _dependent_span(host, alloca)
        if sum(isinstance(op, _STATEMENT_OPS) for op in span) < 2:
            continue  # one statement: its kernel clones the buffer and the ops it needs
        inside = set(span)
        body = Block(arg_types=[IndexType()])
        body.args[0].name_hint = "once"
        body.add_op(affine.YieldOp.get())
        once = affine.ForOp.from_region((), (), (), (), 0, 1, Region(body), 1)
        Rewriter.insert_op(once, InsertPoint.after(span[-1]))
        after: Operation = once
        for op in span:
            if isinstance(op, memref.DeallocOp):
                op.detach()
                Rewriter.insert_op(op, InsertPoint.after(after))
                after = op
            elif isinstance(op, memref.AllocOp) or (
                is_pure(op) and not any(o.owner in inside for o in op.operands)
            ):
                inside.discard(op)
            else:
                op.detach()
                body.insert_op_before(op, body.last_op)  # type: ignore[arg-type]


def _is_private_alloca(op: Operation) -> bool:
    return isinstance(op, memref.AllocaOp) and op.attributes.get(MEMORY_ATTR) != StringAttr("shared")


def _dependent_span(host: Block, alloca: Operation) -> list[Operation]:
    """The top-level ops of `host` from `alloca` to the last one that uses the buffer or a
    value computed, in the span, from it (closed: every use of a value the span defines is
    in the span)."""
    ops = list(host.ops)
    position = {op: k for k, op in enumerate(ops)}

    def top(op: Operation) -> Operation:
        while op.parent_block() is not host:
            op = op.parent_op()  # type: ignore[assignment]
        return op

    start = end = position[alloca]
    k = start
    while k <= end:
        for inner in ops[k].walk():
            for result in inner.results:
                for use in result.uses:
                    end = max(end, position[top(use.operation)])
        k += 1
    return ops[start : end + 1]


def buffer_name(value: SSAValue) -> str | None:
    owner = value.owner
    if isinstance(owner, memref.AllocOp):
        name = owner.attributes.get(NAME_ATTR)
        return name.data if isinstance(name, StringAttr) else None
    if isinstance(owner, Block) and isinstance(f := owner.parent_op(), func.FuncOp):
        if f.arg_attrs is not None:
            name = f.arg_attrs.data[value.index].data.get(NAME_ATTR)  # type: ignore[attr-defined]
            return name.data if isinstance(name, StringAttr) else None
    return value.name_hint


def host_order(host: Block) -> dict[Operation, int]:
    """Each op of the host block -> its position: the order of `_host_values`' results, made
    once for all the statements of a host (outlining erases ops and inserts launches, which
    keeps the order of those left)."""
    return {op: k for k, op in enumerate(host.ops)}


def _host_values(
    stmt: Statement, host: Block, order: dict[Operation, int] | None = None
) -> tuple[list[SSAValue], list[Operation]]:
    """The buffers the statement uses (host block arguments and allocations, in order) and
    the floating host ops it needs, in program order (`order`: `host_order(host)`, made
    before ops were inserted or moved; made here when missing or missing an op)."""
    needed: set[Operation] = set()
    buffers: set[SSAValue] = set()

    def visit(value: SSAValue) -> None:
        owner = value.owner
        if isinstance(owner, Block):
            if owner is host:
                buffers.add(value)
            return
        if owner.parent_block() is not host:
            return
        if isinstance(owner, memref.AllocOp):
            buffers.add(value)
            return
        if owner in needed:
            return
        needed.add(owner)
        for o in owner.operands:
            visit(o)
        for inner in owner.walk():
            for o in inner.operands:
                visit(o)

    for op in stmt.ops:
        for inner in op.walk():
            for o in inner.operands:
                visit(o)
    if order is None or any(op not in order for op in needed) or any(b.owner not in order for b in buffers if b not in host.args):
        order = host_order(host)
    args = [a for a in host.args if a in buffers]
    allocs = sorted((b for b in buffers if b not in host.args), key=lambda b: order[b.owner])  # type: ignore[index]
    floating = sorted(needed, key=order.__getitem__)
    return args + allocs, floating


def outline(
    stmt: Statement, mapping: Mapping, name: str, host: Block, order: dict[Operation, int] | None = None
) -> tuple[egpu.FuncOp, list[SSAValue]]:
    """Build the kernel `name` computing `stmt` with `mapping`; returns it and the host
    buffers to launch it with. The statement's ops are left in place (the caller erases
    them). `order`: `host_order(host)`, made once for the host's statements."""
    buffers, floating = _host_values(stmt, host, order)
    arg_attrs = [
        DictionaryAttr({NAME_ATTR: StringAttr(n)} if (n := buffer_name(v)) else {})
        for v in buffers
    ]
    kernel = egpu.FuncOp(name, [v.type for v in buffers], mapping.launch.grid,
                         mapping.launch.block, arg_attrs=arg_attrs)  # fmt: skip
    if not mapping.bound and any(loop.step.value.data != 1 for loop in mapping.loops):
        # a register tile per point: the points' shape, for Poplar's box split (vertex_boxes)
        kernel.attributes[POINT_SHAPE_ATTR] = ArrayAttr([IntegerAttr(trip_count(loop), 64) for loop in mapping.loops])
    block = kernel.body.block
    mapper: dict[SSAValue, SSAValue] = {}
    for value, arg in zip(buffers, block.args):
        arg.name_hint = buffer_name(value)
        mapper[value] = arg
    b = Builder(InsertPoint.at_end(block))
    # Without loops a reduction's body floats here too: its fill must come before its first
    # read of memory (the accumulator load), as it does on the host.
    early_fill = stmt.fill is not None and not mapping.loops
    for op in floating:
        if early_fill and isinstance(op, affine.LoadOp | memref.LoadOp):
            b.insert(stmt.fill.clone(mapper))  # type: ignore[union-attr]
            early_fill = False
        b.insert(op.clone(mapper))
    fill_pending = stmt.fill is not None and (bool(mapping.loops) or early_fill)

    # the work-item's point, and the ops that run there
    body: Builder = b
    staged = has_shared_staging(stmt)
    if staged and not mapping.bound:
        raise schedule_error("a tensor staged in shared memory needs loops bound to GPU blocks or threads")
    reduction = mapping.reduction
    if staged and reduction is not None:
        raise schedule_error(
            f"{describe(reduction.loop)} is a reduction bound to threads: staging a tensor in shared "
            "memory in its statement is not supported", reduction.loop
        )
    conds: list[SSAValue] = []  # staged, reduction: the partial-tile checks, applied later
    if mapping.bound or reduction is not None:
        for k, loop in enumerate(mapping.loops):
            lower = loop.lowerBoundMap.data.eval([], [])[0]
            if loop in mapping.bound:
                level, dim = mapping.bound[loop]
                index_op = egpu.BlockIdOp(dim) if level == "block" else egpu.ThreadIdOp(dim)
                coordinate = b.insert(index_op).result
                step = loop.step.value.data
                coordinate.name_hint = induction_var(loop).name_hint
                if lower or step != 1:
                    coordinate.name_hint = f"{level}_{dim.value}"
                    m = AffineMap(1, 0, (AffineExpr.dimension(0) * step + lower,))
                    coordinate = b.insert(affine.ApplyOp([coordinate], AffineMapAttr(m))).result
                    coordinate.name_hint = induction_var(loop).name_hint
            else:  # a unit loop between bound loops: its one value
                coordinate = index_constant(b, lower)
                coordinate.name_hint = induction_var(loop).name_hint
            mapper[induction_var(loop)] = coordinate
            if k + 1 < len(mapping.loops):  # index arithmetic between two mapped loops
                for op in loop.body.block.ops:
                    if op is not mapping.loops[k + 1] and not isinstance(op, affine.YieldOp):
                        b.insert(op.clone(mapper))
        for loop in mapping.loops:
            coordinate = mapper[induction_var(loop)]
            if constant_trip_range(loop) is None:  # a partial tile: check the upper bound
                n_lb = len(loop.lowerBoundOperands)
                operands = [mapper.get(o, o) for o in loop.operands[n_lb:]]
                upper = body.insert(affine.MinOp(operands, loop.upperBoundMap)).result
                cond = body.insert(arith.CmpiOp(coordinate, upper, "slt")).result
                if staged or reduction is not None:
                    conds.append(cond)
                else:
                    guard = body.insert(scf.IfOp(cond, [], [scf.YieldOp()]))
                    body = Builder(InsertPoint.before(guard.true_region.block.last_op))  # type: ignore[arg-type]
    elif mapping.loops:
        points = math.prod(trip_count(loop) for loop in mapping.loops)
        gid = b.insert(egpu.GlobalIdOp(egpu.Dim.X)).result
        single = len(mapping.loops) == 1 and mapping.stride is None
        gid.name_hint = induction_var(mapping.loops[0]).name_hint if single else "gid"
        launched = math.prod(mapping.launch.grid) * math.prod(mapping.launch.block)
        flat = gid
        if mapping.stride is not None:
            step_block = Block(arg_types=[IndexType()])
            step_block.args[0].name_hint = (
                induction_var(mapping.loops[0]).name_hint if len(mapping.loops) == 1 else "point"
            )
            step_block.add_op(scf.YieldOp())
            b.insert(scf.ForOp(gid, index_constant(b, points), index_constant(b, mapping.stride), [],
                               Region(step_block)))  # fmt: skip
            flat = step_block.args[0]
            body = Builder(InsertPoint.before(step_block.last_op))  # type: ignore[arg-type]
        elif launched > points:
            cond = b.insert(arith.CmpiOp(gid, index_constant(b, points), "slt")).result
            guard = b.insert(scf.IfOp(cond, [], [scf.YieldOp()]))
            body = Builder(InsertPoint.before(guard.true_region.block.last_op))  # type: ignore[arg-type]
        for loop, iv in zip(mapping.loops, delinearize(body, flat, mapping.loops)):
            mapper[induction_var(loop)] = iv

    if reduction is not None:
        start = list(mapping.loops[-1].body.block.ops) if mapping.loops else [stmt.main]
        build_reduction(b, start, mapper, stmt, mapping, conds, kernel)
        b.insert(egpu.ReturnOp())
        return kernel, buffers

    if fill_pending:
        assert stmt.fill is not None
        chain = perfect_chain(stmt.fill)
        store = chain[-1].body.block.first_op if chain else stmt.fill
        assert store is not None
        for fill_loop, loop in zip(chain, mapping.loops):
            mapper[induction_var(fill_loop)] = mapper[induction_var(loop)]
        if len(chain) > len(mapping.loops):  # the fill's remaining loops run in this work-item
            body.insert(chain[len(mapping.loops)].clone(mapper))
        else:
            body.insert(store.clone(mapper))

    inner = mapping.loops[-1].body.block.ops if mapping.loops else [stmt.main]
    for op in inner:
        if isinstance(op, affine.YieldOp):
            continue
        body.insert(op.clone(mapper))
    if staged:
        stage_shared(kernel, mapping.launch, conds)
    b.insert(egpu.ReturnOp())
    return kernel, buffers


def erase_statement(stmt: Statement) -> None:
    for op in reversed(stmt.ops):
        Rewriter.erase_op(op)


__all__ = [
    "buffer_name",
    "enclose_private_buffers",
    "erase_statement",
    "outline",
]
