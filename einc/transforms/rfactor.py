"""`rfactor`: a reduction loop split into independent partial reductions (a partials buffer
filled with the combiner's identity, the chunk loop outermost, then a nest combining the
partials into the output); the mechanism behind `transform.einc.rfactor`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from xdsl.builder import Builder
from xdsl.dialects import affine, arith, memref
from xdsl.dialects.builtin import AffineMapAttr, MemRefType, StringAttr, UnitAttr
from xdsl.ir import Block, Operation, SSAValue
from xdsl.ir.affine import AffineExpr, AffineMap
from xdsl.rewriter import InsertPoint, Rewriter

from einc.ir.attrs import AXIS_ATTR, STMT_ATTR
from einc.transforms.affine_fold import fold_applies
from einc.transforms.affine_index import dims_to_operands
from einc.transforms.loop_analysis import (
    accesses_to,
    buffer_name,
    constant_bounds,
    induction_var,
    step_of,
    trip_count,
    written_groups,
)
from einc.transforms.loop_build import Failure, _depends_on_loop, _new_loop, _retag, describe

if TYPE_CHECKING:
    from einc.dialects.ein import Combiner


def rfactor_loop(loop: affine.ForOp, factor: int) -> tuple[affine.ForOp, affine.ForOp] | Failure:
    """Split a reduction over `loop` into `factor` independent partial reductions: a buffer
    `partial[factor, ...out]` filled with the combiner's identity, the nest accumulating into
    `partial[k mod factor chunk, ...]` with the chunk loop outermost of the reduction (now
    parallel), then a nest combining the partials into the output. Reassociates the sum
    (results equal up to rounding). Returns (the chunk loop, the combine loop)."""
    from einc.transforms.combiner import build_combine, identity_constant
    from einc.dialects.ein import Combiner

    if factor <= 1:
        return Failure(f"rfactor factor must be at least 2, got {factor}")
    n = trip_count(loop)
    if n is None or constant_bounds(loop) != (0, n) or step_of(loop) != 1:
        return Failure(f"cannot rfactor {describe(loop)}: it needs bounds 0 to a constant, step 1")
    if n % factor:
        return Failure(f"cannot rfactor {describe(loop)}: factor {factor} does not divide {n}")
    groups = written_groups(loop)
    if len(groups) != 1:
        return Failure(f"cannot rfactor {describe(loop)}: it must write exactly one buffer")
    (buffer, group), = groups.items()
    stores = [a for a in group if a.write]
    loads = [a for a in group if not a.write]
    if len(stores) != 1 or len(loads) != 1 or stores[0].map is None or loads[0].map is None:
        return Failure(f"cannot rfactor {describe(loop)}: not a single load-combine-store reduction")
    store, load = stores[0].op, loads[0].op
    assert isinstance(store, affine.StoreOp) and isinstance(load, affine.LoadOp)
    if load.map != store.map or tuple(load.indices) != tuple(store.indices):
        return Failure(f"cannot rfactor {describe(loop)}: the load and store differ")
    combine = store.value.owner
    combiner = _combiner_of(combine, load.result)
    if combiner is None:
        return Failure(f"cannot rfactor {describe(loop)}: no add/mul/max/min combine found")
    if any(o is induction_var(loop) for o in store.indices) or any(
        _depends_on_loop(o, loop) for o in store.indices
    ):
        return Failure(f"cannot rfactor {describe(loop)}: it is not a reduction loop")
    # the enclosing loops defining the store's indices must enclose `loop`
    out_type = buffer.type
    assert isinstance(out_type, MemRefType)
    element = out_type.get_element_type()
    # the fill and combine nests go around `top`, the outermost loop whose other code does not
    # touch the output (inside a compute_at or a fuse, the consumer's loop reads it); nested
    # in a loop, the partials cover the box of the output one iteration of that loop writes
    top = _reduction_top(loop, buffer)
    enclosing = top.parent_op()
    box = None
    if isinstance(enclosing, affine.ForOp):
        from einc.transforms.staging import footprint

        box = footprint(enclosing, buffer_name(buffer), group)
        if isinstance(box, Failure):
            return Failure(f"cannot rfactor {describe(loop)} inside {describe(enclosing)}: {box.message}")
    out_shape = list(out_type.get_shape()) if box is None else box.shape
    # partial buffer [factor, *out_shape]: a private one per iteration of the enclosing loop
    if box is None:
        alloc: memref.AllocOp | memref.AllocaOp = memref.AllocOp.get(element, shape=[factor, *out_shape])
        func_block = _function_block(loop)
        Rewriter.insert_op(alloc, InsertPoint.at_start(func_block))
        Rewriter.insert_op(memref.DeallocOp.get(alloc), InsertPoint.before(func_block.last_op))  # type: ignore[arg-type]
    else:
        assert isinstance(enclosing, affine.ForOp)
        alloc = memref.AllocaOp.get(element, 64, [factor, *out_shape])
        Rewriter.insert_op(alloc, InsertPoint.at_start(enclosing.body.block))
    # a name no other buffer of the function has (a second rfactor of the same output, or
    # of a combine over partials, would repeat it: device manifests name buffers uniquely)
    taken = {buffer_name(op.results[0]) for op in _function_block(loop).walk()
             if isinstance(op, memref.AllocOp | memref.AllocaOp) and op is not alloc}  # fmt: skip
    name, k = buffer_name(buffer) + "_rf", 1
    while name in taken:
        name, k = f"{buffer_name(buffer)}_rf{k}", k + 1
    alloc.attributes["ein.name"] = StringAttr(name)
    alloc.memref.name_hint = name
    init = identity_constant(combiner, element)
    Rewriter.insert_op(init, InsertPoint.before(top))
    shape = [factor, *out_shape]
    fill_point = InsertPoint.before(top)
    fill_loops = []
    for k, extent in enumerate(shape):
        f = _new_loop((), (), 0, extent, 1, f"r{k}")
        Rewriter.insert_op(f, fill_point)
        fill_loops.append(f)
        fill_point = InsertPoint.before(f.body.block.last_op)  # type: ignore[arg-type]
    Rewriter.insert_op(affine.StoreOp(init.result, alloc.memref, [induction_var(f) for f in fill_loops]), fill_point)
    # split the reduction loop: `chunk` (0 to factor, over the partials) and `inner`
    width = n // factor
    hint = induction_var(loop).name_hint or "k"
    outer = _new_loop((), (), 0, factor, 1, hint + "_rf")
    attributes = dict(loop.attributes)
    region = loop.detach_region(loop.body)
    region.block.args[0].name_hint = hint + "_i"
    inner = affine.ForOp.from_region((), (), (), (), 0, width, region, 1)
    outer.body.block.insert_op_before(inner, outer.body.block.first_op)  # type: ignore[arg-type]
    Rewriter.replace_op(loop, outer)
    if top is loop:  # the reduction is the statement's outermost loop (a rank-0 output)
        top = outer
    chunk = induction_var(outer)
    scaled = affine.ApplyOp([chunk, region.block.args[0]], AffineMapAttr(AffineMap(2, 0, (AffineExpr.dimension(0) * width + AffineExpr.dimension(1),))))
    region.block.insert_op_before(scaled, region.block.first_op)  # type: ignore[arg-type]
    region.block.args[0].replace_uses_with_if(scaled.result, lambda use: use.operation is not scaled)
    _retag(outer, attributes, ".rf")
    _retag(inner, attributes, ".i")
    for old in (load, store):
        m = dims_to_operands(old.map.data)
        nd = m.num_dims
        new_map = AffineMap(nd + 1, 0, (AffineExpr.dimension(nd), *m.results))
        operands = [*old.indices, chunk]
        if box is not None:  # partial[chunk, index - the box's origin]
            from einc.transforms.staging import linear_map

            forms = next(f for a, f in box.inner.items() if a.op is old)
            shifted = [(terms, const - low) for (terms, const), low in zip(forms, box.low)]
            operands = [*dict.fromkeys(v for terms, _ in shifted for v in terms), chunk]
            new_map = linear_map([({chunk: 1}, 0), *shifted], operands)
        if isinstance(old, affine.LoadOp):
            Rewriter.replace_op(old, affine.LoadOp(alloc.memref, operands, AffineMapAttr(new_map), element))
        else:
            Rewriter.replace_op(old, affine.StoreOp(old.value, alloc.memref, operands, AffineMapAttr(new_map)))
    fold_applies(outer)
    outer.attributes["einc.rfactor"] = UnitAttr()
    # combine the partials into the output, after the whole nest
    point = InsertPoint.after(top)
    comb_loops = []
    for k, extent in enumerate([*out_shape, factor]):
        f = _new_loop((), (), 0, extent, 1, f"c{k}")
        Rewriter.insert_op(f, point)
        comb_loops.append(f)
        point = InsertPoint.before(f.body.block.last_op)  # type: ignore[arg-type]
    ivs = [induction_var(f) for f in comb_loops]
    b = Builder(point)
    if box is None:
        acc = b.insert(affine.LoadOp(buffer, ivs[:-1])).result
    else:  # buffer[the box's origin + c]
        from einc.transforms.staging import linear_map

        outer_vars = list(dict.fromkeys(v for terms in box.outer for v in terms))
        far_operands = [*outer_vars, *ivs[:-1]]
        far = AffineMapAttr(linear_map(
            [({**terms, iv: 1}, low) for terms, low, iv in zip(box.outer, box.low, ivs)], far_operands))
        acc = b.insert(affine.LoadOp(buffer, far_operands, far, element)).result
    part = b.insert(affine.LoadOp(alloc.memref, [ivs[-1], *ivs[:-1]])).result
    merged = build_combine(b, combiner, acc, part)
    if box is None:
        b.insert(affine.StoreOp(merged, buffer, ivs[:-1]))
    else:
        b.insert(affine.StoreOp(merged, buffer, far_operands, far))
    stmt = loop.attributes.get(STMT_ATTR)
    for f, role in ((fill_loops, "einc.init"), (comb_loops, "einc.combine")):
        for k, x in enumerate(f):
            if stmt is not None:
                x.attributes[STMT_ATTR] = stmt
            x.attributes[AXIS_ATTR] = StringAttr(f"rf{k}")
            x.attributes[role] = UnitAttr()
    del Combiner
    return outer, comb_loops[0]


def _combiner_of(op: Operation | Block | None, acc: SSAValue) -> Combiner | None:
    from einc.dialects.ein import Combiner

    table = {
        arith.AddfOp: Combiner.ADD, arith.AddiOp: Combiner.ADD, arith.MulfOp: Combiner.MUL,
        arith.MuliOp: Combiner.MUL, arith.MaximumfOp: Combiner.MAX, arith.MinimumfOp: Combiner.MIN,
        arith.MaxSIOp: Combiner.MAX, arith.MinSIOp: Combiner.MIN,
    }
    if not isinstance(op, Operation) or type(op) not in table or op.operands[0] is not acc:
        return None
    return table[type(op)]


def _reduction_top(loop: affine.ForOp, buffer: SSAValue) -> affine.ForOp:
    """The outermost loop enclosing `loop` (or itself) inside which nothing but `loop`
    touches `buffer`, the reduction's output: its partials are combined right after it."""
    top, parent = loop, loop.parent_op()
    while isinstance(parent, affine.ForOp):
        if any(not loop.is_ancestor(a.op) for a in accesses_to(buffer, parent)):
            break
        top, parent = parent, parent.parent_op()
    return top


def _function_block(op: Operation) -> Block:
    from xdsl.dialects import func

    parent = op.parent_op()
    while parent is not None and not isinstance(parent, func.FuncOp):
        parent = parent.parent_op()
    assert parent is not None
    return parent.body.block
