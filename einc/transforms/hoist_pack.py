"""Hoisting a read-only staged tile out of a parallel loop (`hoist_pack`: the mechanism of
`einc-hoist-packs`, einc/passes/hoist_packs.py, which holds the module's story and the policy).
`hoist_pack` returns a Failure, the IR unchanged, where the tile does not qualify."""

from __future__ import annotations

import math

from xdsl.dialects import affine, func, memref
from xdsl.dialects.builtin import AffineMapAttr, IndexType, NoneAttr, StringAttr
from xdsl.ir import Block, Operation, Region, SSAValue
from xdsl.ir.affine import AffineExpr, AffineMap
from xdsl.rewriter import InsertPoint, Rewriter

from einc.ir.attrs import COPY_ATTR, MEMORY_ATTR, NAME_ATTR, PARALLEL_ATTR
from einc.transforms.loop_analysis import constant_bounds, induction_var, step_of
from einc.transforms.loop_build import Failure
from einc.transforms.ranges import trip_count


def _bounds(loop: affine.ForOp) -> tuple[int, int]:
    """The constant bounds of a loop the caller checked has them."""
    bounds = constant_bounds(loop)
    assert bounds is not None
    return bounds


MAX_PACK_ELEMENTS = 1 << 22
"""The largest buffer of packed tiles the pass makes (16 MiB of float32)."""

def _inside(op: Operation, root: Operation) -> bool:
    return root.is_ancestor(op)


def _available_above(value: SSAValue, parallel: Operation, slots: dict[SSAValue, int], nest: Operation) -> bool:
    """`value`, used inside the copy-in nest, is a slot loop's variable or is defined outside the
    parallel loop (or inside the nest itself)."""
    if value in slots:
        return True
    owner = value.owner
    if isinstance(owner, Block):
        op = owner.parent_op()
        return op is not None and (_inside(op, nest) or not _inside(op, parallel))
    return _inside(owner, nest) or not _inside(owner, parallel)


def _written(function: Operation, tensor: SSAValue) -> bool:
    """Some op of the function other than a load uses the tensor (a store, a call...)."""
    return any(
        not isinstance(use.operation, affine.LoadOp | memref.LoadOp) for use in tensor.uses if function.is_ancestor(use.operation)
    )


def hoist_pack(alloca: memref.AllocaOp, parallel: affine.ForOp) -> memref.AllocOp | Failure:
    """Pack the local array `alloca` (staged, with its copy-in nest, inside `parallel`) once
    above `parallel`: see the module docstring. Returns the new buffer, or a Failure with
    the IR unchanged."""
    name = alloca.attributes.get(NAME_ATTR)
    where = f"the local array {name.data if isinstance(name, StringAttr) else '?'}"
    t = alloca.memref.type
    if not isinstance(t.layout, NoneAttr):
        return Failure(f"cannot hoist {where}: it has a layout")
    if MEMORY_ATTR in alloca.attributes:
        return Failure(f"cannot hoist {where}: it is not a private local array")
    copy_in = alloca.next_op
    if not (isinstance(copy_in, affine.ForOp) and COPY_ATTR in copy_in.attributes):
        return Failure(f"cannot hoist {where}: no copy-in nest follows it")
    # the loops between the parallel loop (exclusive) and the staging point; the slot loops
    # among them, those whose variable the copy-in uses, have constant bounds
    between: list[affine.ForOp] = []
    parent = alloca.parent_op()
    while parent is not parallel:
        if not isinstance(parent, affine.ForOp):
            return Failure(f"cannot hoist {where}: something other than a loop lies between it and the parallel loop")
        between.append(parent)
        parent = parent.parent_op()
        if parent is None:
            return Failure(f"cannot hoist {where}: it is not inside the parallel loop")
    used = {operand for op in copy_in.walk() for operand in op.operands}
    slots = [loop for loop in reversed(between) if induction_var(loop) in used]
    if any(constant_bounds(loop) is None for loop in slots):
        return Failure(f"cannot hoist {where}: its copy-in depends on a loop without constant bounds")
    slot_ivs: dict[SSAValue, int] = {induction_var(loop): k for k, loop in enumerate(slots)}
    # the copy-in: every store into the array, every load from a tensor the function never writes
    function = parallel.parent_op()
    while function is not None and not isinstance(function, func.FuncOp):
        function = function.parent_op()
    if function is None:
        return Failure(f"cannot hoist {where}: not inside a function")
    for op in copy_in.walk():
        for operand in op.operands:
            if operand is alloca.memref:
                if not isinstance(op, affine.StoreOp) or op.memref is not alloca.memref:
                    return Failure(f"cannot hoist {where}: its copy-in reads it")
            elif not _available_above(operand, parallel, slot_ivs, copy_in):
                return Failure(f"cannot hoist {where}: its copy-in uses a value computed inside the parallel loop")
        if isinstance(op, affine.LoadOp | memref.LoadOp) and _written(function, op.memref):
            return Failure(f"cannot hoist {where}: its copy-in reads a tensor the function writes")
    loads: list[affine.LoadOp] = []
    for use in alloca.memref.uses:
        user = use.operation
        if _inside(user, copy_in):
            continue
        if not isinstance(user, affine.LoadOp):
            return Failure(f"cannot hoist {where}: it is used by {user.name} after its copy-in")
        loads.append(user)
    counts = [trip_count(loop) or 0 for loop in slots]  # constant bounds, checked above
    tile = list(t.get_shape())
    if not tile:
        return Failure(f"cannot hoist {where}: it is a scalar")
    shape = [math.prod(counts) * tile[0], *tile[1:]]
    size = math.prod(shape)
    if size > MAX_PACK_ELEMENTS:
        return Failure(f"cannot hoist {where}: its packed tiles are {size} elements, over {MAX_PACK_ELEMENTS}")

    # the buffer, above the parallel loop; freed at the end of the function
    element = t.get_element_type()
    alloc = memref.AllocOp.get(element, shape=shape)
    pack_name = f"{name.data if isinstance(name, StringAttr) else 'local'}_pack"
    alloc.attributes[NAME_ATTR] = StringAttr(pack_name)
    alloc.memref.name_hint = pack_name
    Rewriter.insert_op(alloc, InsertPoint.before(parallel))
    body = function.body.block
    assert body.last_op is not None
    Rewriter.insert_op(memref.DeallocOp.get(alloc), InsertPoint.before(body.last_op))

    def slot_map(m: AffineMap, extra: int) -> AffineMapAttr:
        """`m` with the slot's first row added to its first index: the slot loops' variables
        are `extra` appended symbols, slot `k` starts at row `k * d0` of the buffer. The row
        is linear in the variables where the radix is a multiple of the step (`%fo * 4` for
        a 128-row tile per 32 filters), which keeps the loads unit-stride for the vectorizer;
        else a `floordiv`."""
        row: AffineExpr = AffineExpr.constant(0)
        for k, loop in enumerate(slots):
            lo, _ = _bounds(loop)
            step, radix = step_of(loop), tile[0] * math.prod(counts[k + 1 :])
            index = AffineExpr.symbol(m.num_symbols + k) - lo
            row = row + (index * (radix // step) if radix % step == 0 else (index // step) * radix)
        assert extra == len(slots)
        return AffineMapAttr(AffineMap(m.num_dims, m.num_symbols + extra, (row + m.results[0], *m.results[1:])))

    # the packing nest: the slot loops' shells around a clone of the copy-in
    point = InsertPoint.before(parallel)
    mapping: dict[SSAValue, SSAValue] = {}
    new_ivs: list[SSAValue] = []
    for loop in slots:
        lo, hi = _bounds(loop)
        block = Block(arg_types=[IndexType()])
        block.args[0].name_hint = induction_var(loop).name_hint
        yield_op = affine.YieldOp.get()
        block.add_op(yield_op)
        shell = affine.ForOp.from_region((), (), (), (), lo, hi, Region(block), step_of(loop))
        for key, value in loop.attributes.items():
            if key != PARALLEL_ATTR:
                shell.attributes[key] = value
        Rewriter.insert_op(shell, point)
        mapping[induction_var(loop)] = block.args[0]
        new_ivs.append(block.args[0])
        point = InsertPoint.before(yield_op)
    packing = copy_in.clone(value_mapper=mapping)
    Rewriter.insert_op(packing, point)
    for op in list(packing.walk()):
        if isinstance(op, affine.StoreOp) and op.memref is alloca.memref:
            m = op.map.data if op.map is not None else AffineMap.identity(len(op.indices))
            dims = list(op.indices[: m.num_dims])
            symbols = list(op.indices[m.num_dims :])
            new = affine.StoreOp(op.value, alloc.memref, [*dims, *symbols, *new_ivs], slot_map(m, len(slots)))
            Rewriter.replace_op(op, new)

    # the loads inside: the slot of their iteration
    outer_ivs = [induction_var(loop) for loop in slots]
    for load in loads:
        m = load.map.data if load.map is not None else AffineMap.identity(len(load.indices))
        dims = list(load.indices[: m.num_dims])
        symbols = list(load.indices[m.num_dims :])
        new_load = affine.LoadOp(alloc.memref, [*dims, *symbols, *outer_ivs], slot_map(m, len(slots)), element)
        for key, value in load.attributes.items():
            new_load.attributes[key] = value
        Rewriter.replace_op(load, new_load)
    Rewriter.erase_op(copy_in)
    Rewriter.erase_op(alloca)
    return alloc


__all__ = ["MAX_PACK_ELEMENTS", "hoist_pack"]
