"""Moving one statement's nest into another's loop: `transform.einc.compute_at` (a producer
recomputed per iteration of a consumer loop, TVM/Halide's compute_at) and
`transform.einc.reverse_compute_at` (an elementwise consumer computed at the end of each
iteration of a producer loop: an epilogue).

`compute_at(producer, loop)`: `producer` is the outermost loop of a nest writing one
intermediate tensor T (with its identity fill, the `einc.init` nest or bare store of the same
statement, if any); `loop` is a loop of a later nest reading T. At the start of `loop`'s body
a local buffer `T_local` (`memref.alloca`) holds the box of T that one iteration of `loop`
reads (staging.py's footprint), and a copy of the fill and the producer nest computes exactly
that box into it: the producer's output loops (the loops indexing T) are re-bounded to the
box (a box extent of 1 drops the loop), its reduction loops are kept whole. The consumer's
reads of T inside `loop` read `T_local`. Consecutive iterations whose boxes overlap compute
the overlap again (a 3x3 stencil recomputes its halo). Each iteration owns its buffer, so a
parallel `loop` stays parallel. When nothing else reads T any more the original nest, its
fill and T's allocation are erased.

Contract (compute_at), otherwise a Failure and the IR unchanged:
- the producer nest writes only T; T is written nowhere else (but by its fill);
- every access to T in the producer (and fill) indexes each dimension with a distinct loop
  variable whose loop runs over the whole dimension (`0 to size`, step 1): the map from
  loops to elements is invertible and covers T;
- nothing the producer reads is written between it and the consumer nest or inside it;
- every access to T inside `loop` is an affine load with a bounded box provably inside T.

`reverse_compute_at(consumer, loop)`: `consumer` is the outermost loop of an elementwise nest
(its output indexed by every one of its loop variables, no reduction) reading a tensor T
that the nest around `loop` writes. At the end of `loop`'s body, a copy of the consumer
restricted to the elements whose reads of T lie in the box T has completed in that iteration;
the original consumer is erased.

Marks: the copies drop parallel/bind marks (the loop they land in keeps its own); `loop`
loses a vectorize mark (it received other code; vectorize it again where still legal).

Contract (reverse_compute_at), otherwise a Failure and the IR unchanged:
- the consumer reads T with each dimension indexed by a distinct loop variable of its own
  whose loop covers that dimension (`0 to size`, step 1);
- every write to T in the producer nest is inside `loop`, and `loop` and every loop around
  it in that nest give different iterations disjoint elements of T (so an element is final
  when its iteration ends: a reduction loop around `loop` is refused), and the boxes of all
  iterations tile T exactly (trip counts times box size is T's size);
- the consumer writes one tensor the producer nest (and what lies between) does not touch,
  and reads nothing else the producer nest or what lies between writes; of what lies
  between, it uses only constants and allocations (moved up before the producer nest).
"""

from __future__ import annotations

import math
from collections.abc import Container
from dataclasses import dataclass

from xdsl.dialects import affine, arith, memref
from xdsl.dialects.builtin import AffineMapAttr, IntegerAttr, MemRefType, StringAttr
from xdsl.ir import Block, Operation, SSAValue
from xdsl.ir.affine import AffineExpr, AffineMap
from xdsl.rewriter import InsertPoint, Rewriter

from einc.transforms.staging import Box, footprint, linear_map
from einc.transforms.loop_analysis import (
    Access,
    accesses,
    accesses_to,
    buffer_name,
    constant_bounds,
    induction_var,
    linear_form,
    separates,
    step_of,
    trip_count,
    written_groups,
)
from einc.transforms.affine_fold import fold_applies, fold_one_apply
from einc.transforms.loop_build import Failure, describe
from einc.transforms.loop_transforms import BIND_ATTR, PARALLEL_ATTR, STMT_ATTR, VECTORIZE_ATTR

Terms = dict[SSAValue, int]


# ---- shared checks ------------------------------------------------------------------------------


def _top_in(block: Block, op: Operation) -> Operation | None:
    """The ancestor of `op` (or `op`) whose parent block is `block`."""
    while op is not None and op.parent_block() is not block:
        op = op.parent_op()  # type: ignore[assignment]
    return op


def _index_loops(a: Access, nest: Operation) -> list[affine.ForOp] | None:
    """The loops (inside `nest`) whose variables index `a`, one per dimension, when every
    index is exactly a distinct loop variable; else None."""
    if a.map is None:
        return None
    loops: list[affine.ForOp] = []
    for e in a.map.results:
        form = linear_form(e, a.operands)
        if form is None or form[1] != 0 or len(form[0]) != 1:
            return None
        ((v, c),) = form[0].items()
        loop = v.owner.parent_op() if not isinstance(v.owner, Operation) else None  # type: ignore[union-attr]
        if c != 1 or not isinstance(loop, affine.ForOp) or induction_var(loop) is not v:
            return None
        if not (nest is loop or nest.is_ancestor(loop)) or loop in loops:
            return None
        loops.append(loop)
    return loops


def _covers(loop: affine.ForOp, size: int) -> bool:
    """`loop` runs `0 to size` by 1 (bounds without operands: they get replaced)."""
    return constant_bounds(loop) == (0, size) and step_of(loop) == 1 and not loop.operands


def _writes(op: Operation) -> set[SSAValue]:
    return {a.buffer for a in accesses(op) if a.write}


def _reads(op: Operation) -> set[SSAValue]:
    return {a.buffer for a in accesses(op) if not a.write}


def _precedes(a: Operation, b: Operation) -> bool:
    """Whether `a` comes before `b` in their block (a walk from `a`: the cost is the distance
    when it does, the rest of the block when it does not)."""
    op = a.next_op
    while op is not None:
        if op is b:
            return True
        op = op.next_op
    return False


def _written_inside(buffers: list[SSAValue], root: Operation, unwritten: Container[SSAValue]) -> SSAValue | None:
    """One of `buffers` that a store nested in `root` writes, found through the buffers' uses
    (not a walk of `root`, which may be a big fused nest); those in `unwritten` (buffers no
    store writes) are not looked at."""
    for buffer in buffers:
        if buffer in unwritten:
            continue
        # an input every statement reads has a use per statement: the test per use is kept
        # to a compare (a store's buffer is its operand 1, a load's its operand 0)
        for use in buffer.uses:
            if use.index == 1 and type(op := use.operation) in _STORES and root.is_ancestor(op):
                return buffer
    return None


_ALIGNMENT = IntegerAttr(64, 64)
"""The local buffers' alignment (made once: every compute_at makes a buffer)."""

_STORES = (affine.StoreOp, memref.StoreOp)
"""Exact types, compared with `type(op) in`: `isinstance` on ops goes through ABC checks."""


# ---- restricting a cloned nest to a box ---------------------------------------------------------


def _rebase(loop: affine.ForOp, terms: Terms, low: int, shape: int, keep: set[Operation]) -> None:
    """Make `loop` (constant bounds covering a dimension) run over `[base, base + shape)` with
    `base = sum(terms) + low`: re-bounded to `0 to shape` with its variable's uses (but in
    `keep`) reading `base + iv`; with `shape == 1` the loop is dropped and its body runs once
    in its place with `base`."""
    iv = induction_var(loop)
    outer = list(terms)
    base = AffineExpr.constant(low)
    for k, v in enumerate(outer):
        base = base + AffineExpr.dimension(k) * terms[v]
    if shape == 1:
        apply = affine.ApplyOp(outer, AffineMapAttr(AffineMap(len(outer), 0, (base,))))
        Rewriter.insert_op(apply, InsertPoint.before(loop))
        iv.replace_uses_with_if(apply.result, lambda use: use.operation not in keep)
        for op in list(loop.body.block.ops)[:-1]:
            op.detach()
            Rewriter.insert_op(op, InsertPoint.before(loop))
        Rewriter.erase_op(loop)
        return
    loop.properties["lowerBoundMap"] = AffineMapAttr(AffineMap(0, 0, (AffineExpr.constant(0),)))
    loop.properties["upperBoundMap"] = AffineMapAttr(AffineMap(0, 0, (AffineExpr.constant(shape),)))
    shifted = base + AffineExpr.dimension(len(outer))
    apply = affine.ApplyOp([*outer, iv], AffineMapAttr(AffineMap(len(outer) + 1, 0, (shifted,))))
    block = loop.body.block
    block.insert_op_before(apply, block.first_op)  # type: ignore[arg-type]
    iv.replace_uses_with_if(apply.result, lambda use: use.operation is not apply and use.operation not in keep)


def _unmark(root: Operation) -> None:
    """Copies nested in another loop drop parallel/bind marks (one parallel loop per nest)."""
    for op in root.walk():
        if isinstance(op, affine.ForOp):
            op.attributes.pop(PARALLEL_ATTR, None)
            op.attributes.pop(BIND_ATTR, None)


def _drop_vector_mark(loop: affine.ForOp) -> None:
    """A vectorized loop that received another statement's code is vectorized no more (it
    may no longer be innermost, or the new code unit-stride): vectorize again if wanted."""
    loop.attributes.pop(VECTORIZE_ATTR, None)


# ---- compute_at ---------------------------------------------------------------------------------


@dataclass
class ComputeAtPlan:
    """Everything compute_at checked, before any rewrite: the nests to copy (fills first),
    T, the box one iteration of `loop` reads, and whether the original goes away."""

    producer: affine.ForOp
    fills: list[Operation]
    loop: affine.ForOp
    tensor: SSAValue
    box: Box
    output_loops: dict[affine.ForOp, list[affine.ForOp]]  # per copied nest: loop per dimension
    erase_original: bool
    reads: list[Access]  # the accesses to T inside `loop`, in program order

    @property
    def recompute(self) -> float:
        """Elements computed over one run of `loop` per element of T (1.0: no overlap and
        nothing outside what is read)."""
        shape = self.tensor.type.get_shape()  # type: ignore[attr-defined]
        return (trip_count(self.loop) or 0) * math.prod(self.box.shape) / max(1, math.prod(shape))

    @property
    def disjoint(self) -> bool:
        """Whether different iterations of `loop` read disjoint elements of T."""
        return separates(induction_var(self.loop), step_of(self.loop), self.reads)


def plan_compute_at(
    producer: affine.ForOp, loop: affine.ForOp, unwritten: Container[SSAValue] = frozenset()
) -> ComputeAtPlan | Failure:
    """Check compute_at of the nest `producer` at `loop` (module docstring); no rewrite.
    `unwritten`: buffers known to have no store (`LoopIndex.unwritten`): an input every
    statement reads is not then gone through per statement fused."""
    block = producer.parent_block()
    if block is None:
        return Failure("compute_at: the producer is not in a block")
    if producer is loop or producer.is_ancestor(loop):
        return Failure(f"cannot compute {describe(producer)} at {describe(loop)}: the loop is inside the producer")
    consumer = _top_in(block, loop)
    if consumer is None or not _precedes(producer, consumer):
        return Failure(f"cannot compute {describe(producer)} at {describe(loop)}: the loop must be in a later nest beside the producer")
    groups = written_groups(producer)
    if len(groups) != 1:
        return Failure(f"cannot compute_at {describe(producer)}: its nest must write exactly one tensor, it writes {len(groups)}")
    (tensor,) = groups
    name = buffer_name(tensor)
    t_type = tensor.type
    assert isinstance(t_type, MemRefType)
    shape = t_type.get_shape()
    # the fill: earlier ops of the same statement writing only T (the ops of the block writing
    # T are found through T's uses, in program order)
    stmt = producer.attributes.get(STMT_ATTR)
    fills: list[Operation] = []
    writers = dict.fromkeys(_top_in(block, a.op) for a in accesses_to(tensor) if a.write)
    for op in writers:
        if op is None or op is producer or not _precedes(op, producer):
            continue
        if tensor in _writes(op):
            fill = (isinstance(op, affine.ForOp) and "einc.init" in op.attributes and op.attributes.get(STMT_ATTR) == stmt) or (
                isinstance(op, affine.StoreOp)
            )
            if not fill or _writes(op) != {tensor}:
                return Failure(f"cannot compute_at {describe(producer)}: '{name}' is also written by another operation before it")
            fills.append(op)
    moved = [*fills, producer]
    for use in tensor.uses:
        user = use.operation
        if any(m is user or m.is_ancestor(user) for m in moved):
            if not isinstance(user, affine.LoadOp | affine.StoreOp) or (isinstance(user, affine.StoreOp) and user.value is tensor):
                return Failure(f"cannot compute_at {describe(producer)}: '{user.name}' uses '{name}' inside it")
            continue
        if isinstance(user, memref.DeallocOp):
            continue
        if isinstance(user, affine.StoreOp | memref.StoreOp) and user.memref is tensor:
            return Failure(f"cannot compute_at {describe(producer)}: '{name}' is also written outside it")
        if not isinstance(user, affine.LoadOp | memref.LoadOp):
            return Failure(f"cannot compute_at {describe(producer)}: '{name}' is used by '{user.name}'")
    # the producer's accesses to T: an invertible map from its output loops onto all of T
    output_loops: dict[affine.ForOp, list[affine.ForOp]] = {}
    for nest in moved:
        chosen: list[affine.ForOp] | None = None
        for a in accesses(nest):
            if a.buffer is not tensor:
                continue
            found = _index_loops(a, nest)
            if found is None or (chosen is not None and found != chosen):
                return Failure(
                    f"cannot compute_at {describe(producer)}: it must index '{name}' with one distinct loop "
                    "variable per dimension (an invertible map from its loops to the elements)"
                )
            chosen = found
        assert chosen is not None
        if any(not _covers(f, size) for f, size in zip(chosen, shape)):
            return Failure(f"cannot compute_at {describe(producer)}: its loops over '{name}' must run over whole dimensions (0 to size, step 1)")
        if isinstance(nest, affine.ForOp):
            output_loops[nest] = chosen
    # the producer's inputs keep their values until the consumer's loop: the ops between are
    # read whole, the consumer (a nest that may have grown by earlier fusions) through the
    # inputs' uses
    inputs = list(dict.fromkeys(a.buffer for m in moved for a in accesses(m) if not a.write and a.buffer is not tensor))
    op = moved[0]
    while op is not None:
        hit: SSAValue | None
        if op is consumer:
            hit = _written_inside(inputs, consumer, unwritten)
        elif op in moved:
            hit = None
        else:
            hit = next(iter(_writes(op) & set(inputs)), None)
        if hit is not None:
            return Failure(
                f"cannot compute {describe(producer)} at {describe(loop)}: '{buffer_name(hit)}', "
                "which it reads, is written between it and the loop"
            )
        op = None if op is consumer else op.next_op
    # the consumer's reads of T inside the loop: one box inside T
    accs = accesses_to(tensor, loop)
    if not accs:
        return Failure(f"cannot compute {describe(producer)} at {describe(loop)}: '{name}' is not read inside the loop")
    ops = {a.op for a in accs}
    if any(loop.is_ancestor(use.operation) and use.operation not in ops for use in tensor.uses):
        return Failure(f"cannot compute {describe(producer)} at {describe(loop)}: an operation other than a load uses '{name}' inside")
    box = footprint(loop, name, accs)
    if isinstance(box, Failure):
        return Failure(f"cannot compute {describe(producer)} at {describe(loop)}: the box it reads: {box.message}")
    readers = [
        use.operation for use in tensor.uses
        if isinstance(use.operation, affine.LoadOp | memref.LoadOp)
        and not any(m.is_ancestor(use.operation) for m in moved) and use.operation not in ops
    ]
    owner = tensor.owner
    erase = isinstance(owner, memref.AllocOp) and not readers and "ein.output" not in owner.attributes
    return ComputeAtPlan(producer, fills, loop, tensor, box, output_loops, erase, accs)


def apply_compute_at(plan: ComputeAtPlan) -> memref.AllocaOp:
    """Rewrite as planned (never fails). Returns the local buffer's allocation."""
    tensor, box, loop = plan.tensor, plan.box, plan.loop
    name = buffer_name(tensor)
    element = tensor.type.get_element_type()  # type: ignore[attr-defined]
    alloca = memref.AllocaOp.get(element, _ALIGNMENT, box.shape)
    alloca.attributes["ein.name"] = StringAttr(f"{name}_local")
    alloca.memref.name_hint = f"{name}_local"
    local = alloca.memref
    body = loop.body.block
    Rewriter.insert_op(alloca, InsertPoint.at_start(body))
    point = InsertPoint.after(alloca)
    first = alloca.next_op
    for nest in [*plan.fills, plan.producer]:
        copy = nest.clone()
        Rewriter.insert_op(copy, point)
        _unmark(copy)
        by_original = dict(zip(nest.walk(), copy.walk()))
        loops = [by_original[f] for f in plan.output_loops.get(nest, [])]  # type: ignore[index]
        ivs = [induction_var(f) for f in loops]
        # T's accesses in the copy address the local box: dimension d by the re-bounded
        # loop (or 0 when that loop is dropped)
        keep: set[Operation] = set()
        for a in [a for a in accesses(copy) if a.buffer is tensor]:
            kept = [iv for iv, size in zip(ivs, box.shape) if size > 1]
            results = tuple(
                AffineExpr.dimension(kept.index(iv)) if size > 1 else AffineExpr.constant(0)
                for iv, size in zip(ivs, box.shape)
            )
            index_map = AffineMapAttr(AffineMap(len(kept), 0, results))
            if isinstance(a.op, affine.LoadOp):
                new: Operation = affine.LoadOp(local, kept, index_map, element)
            else:
                assert isinstance(a.op, affine.StoreOp)
                new = affine.StoreOp(a.op.value, local, kept, index_map)
            Rewriter.replace_op(a.op, new)
            keep.add(new)
        for f, terms, low, size in zip(loops, box.outer, box.low, box.shape):
            _rebase(f, terms, low, size, keep)
    # what was inserted: the ops after the allocation up to the body's old first op
    inserted = 0
    op = alloca.next_op
    while op is not None and op is not first:
        inserted += 1
        op = op.next_op
    # the consumer's reads of T read the local box
    loads: list[Operation] = []
    for a, forms in box.inner.items():
        shifted = [(terms, const - low) for (terms, const), low in zip(forms, box.low)]
        operands = list(dict.fromkeys(v for terms, _ in shifted for v in terms))
        assert isinstance(a.op, affine.LoadOp)
        loads.append(affine.LoadOp(local, operands, AffineMapAttr(linear_map(shifted, operands)), element))
        Rewriter.replace_op(a.op, loads[-1])
    _fold_new_applies(alloca, inserted, loads)
    _drop_vector_mark(loop)
    if plan.erase_original:
        for nest in [plan.producer, *plan.fills]:
            Rewriter.erase_op(nest)
        for use in list(tensor.uses):
            Rewriter.erase_op(use.operation)
        Rewriter.erase_op(tensor.owner)  # type: ignore[arg-type]
    return alloca


def _fold_new_applies(alloca: memref.AllocaOp, inserted: int, loads: list[Operation]) -> None:
    """`fold_applies` over what compute_at inserted into the loop: the `inserted` ops after
    `alloca` (the copies, with the applies `_rebase` made) and the new `loads` of the box,
    not over the whole loop, whose other ops were there before (a big fused nest would be
    walked once per fused statement). The same rounds in the same order as `fold_applies`
    over the loop; each fold replaces an op in place, so the inserted ops stay the
    `inserted` ops after `alloca`."""

    def new_ops() -> list[Operation]:
        found: list[Operation] = []
        op = alloca.next_op
        for _ in range(inserted):
            assert op is not None
            found += op.walk()
            op = op.next_op
        return found + loads

    changed = True
    while changed:
        changed = False
        for op in new_ops():
            index = loads.index(op) if op in loads else None
            new = fold_one_apply(op)
            if new is None:
                continue
            if index is not None:
                loads[index] = new
            changed = True
    for op in new_ops():
        if isinstance(op, affine.ApplyOp) and not op.result.uses:
            Rewriter.erase_op(op)


def compute_at(
    producer: affine.ForOp, loop: affine.ForOp, unwritten: Container[SSAValue] = frozenset()
) -> memref.AllocaOp | Failure:
    """compute_at (module docstring): plan, then rewrite. Returns the local buffer.
    `unwritten`: as for plan_compute_at."""
    plan = plan_compute_at(producer, loop, unwritten)
    if isinstance(plan, Failure):
        return plan
    return apply_compute_at(plan)


# ---- reverse_compute_at -------------------------------------------------------------------------


def reverse_compute_at(consumer: affine.ForOp, loop: affine.ForOp) -> affine.ForOp | Failure:
    """reverse_compute_at (module docstring): check everything, then move a restricted copy
    of the consumer nest to the end of `loop`'s body. Returns `loop`."""
    block = consumer.parent_block()
    where = f"cannot compute {describe(consumer)} at {describe(loop)}"
    if block is None or consumer is loop or consumer.is_ancestor(loop):
        return Failure(f"{where}: the loop is inside the consumer")
    producer = _top_in(block, loop)
    if producer is None or block.get_operation_index(producer) > block.get_operation_index(consumer):
        return Failure(f"{where}: the loop must be in an earlier nest beside the consumer")
    groups = written_groups(consumer)
    if len(groups) != 1:
        return Failure(f"{where}: the consumer must write exactly one tensor")
    ((out, out_accs),) = groups.items()
    consumer_loops = [op for op in consumer.walk() if isinstance(op, affine.ForOp)]
    for a in out_accs:
        found = _index_loops(a, consumer)
        if not a.write or found is None or set(found) != set(consumer_loops):
            return Failure(f"{where}: the consumer must be elementwise (its output indexed by each of its loops, no reduction, not read)")
    produced = written_groups(producer)
    tensors = [t for t in dict.fromkeys(a.buffer for a in accesses(consumer) if not a.write) if t in produced]
    if len(tensors) != 1:
        return Failure(f"{where}: the consumer must read exactly one tensor the loop's nest writes, it reads {len(tensors)}")
    (tensor,) = tensors
    name = buffer_name(tensor)
    shape = tensor.type.get_shape()  # type: ignore[attr-defined]
    # the consumer's reads of T: dimension d by its own loop over the whole dimension
    mapped: list[affine.ForOp] | None = None
    for a in accesses(consumer):
        if a.buffer is not tensor:
            continue
        found = _index_loops(a, consumer)
        if found is None or (mapped is not None and found != mapped):
            return Failure(f"{where}: the consumer must read '{name}' at its own loop variables, one per dimension (its reads reach other elements)")
        mapped = found
    assert mapped is not None
    if any(not _covers(f, size) for f, size in zip(mapped, shape)):
        return Failure(f"{where}: the consumer's loops over '{name}' must run over whole dimensions")
    # T is final after each iteration: all its writes inside the loop, which (with the loops
    # around it) gives every iteration its own elements, tiling T exactly
    t_accs = [a for a in accesses(producer) if a.buffer is tensor]
    if any(a.write and not loop.is_ancestor(a.op) for a in t_accs):
        return Failure(f"{where}: '{name}' is also written outside the loop")
    chain: list[affine.ForOp] = []
    op: Operation | None = loop
    while op is not None and op is not producer.parent_op():
        if isinstance(op, affine.ForOp):
            chain.append(op)
        op = op.parent_op()
    iterations = 1
    for f in chain:
        inside = [a for a in t_accs if f.is_ancestor(a.op)]
        n = trip_count(f)
        if n is None or not separates(induction_var(f), step_of(f), inside):
            return Failure(
                f"{where}: an element of '{name}' the consumer needs is not final after an iteration "
                f"({describe(f)} revisits elements: a reduction around the loop)"
            )
        iterations *= n
    box = footprint(loop, name, [a for a in t_accs if loop.is_ancestor(a.op)])
    if isinstance(box, Failure):
        return Failure(f"{where}: the box of '{name}' one iteration completes: {box.message}")
    if iterations * math.prod(box.shape) != math.prod(shape):
        return Failure(f"{where}: the boxes of '{name}' the iterations complete do not tile it exactly")
    # the consumer moves up to the loop: it must not depend on anything in between
    reads = _reads(consumer) - {tensor}
    between = list(block.ops)[block.get_operation_index(producer) : block.get_operation_index(consumer)]
    for other in between:
        if (hit := (_writes(other) & reads)) or (hit := {out} & (_writes(other) | _reads(other))):
            return Failure(f"{where}: '{buffer_name(hit.pop())}' is accessed between the loop's nest and the consumer")
        if other is not producer and tensor in _writes(other):
            return Failure(f"{where}: '{name}' is written between the loop's nest and the consumer")
    hoisted: list[Operation] = []
    for inner in consumer.walk():
        for operand in inner.operands:
            owner = operand.owner
            if isinstance(owner, Operation) and owner.parent_block() is block and owner in between:
                if not isinstance(owner, arith.ConstantOp | memref.AllocOp) or owner.operands:
                    return Failure(f"{where}: the consumer uses a value computed between the nests")
                hoisted.append(owner)
    # rewrite
    for definition in dict.fromkeys(hoisted):  # constants, the output's allocation
        definition.detach()
        Rewriter.insert_op(definition, InsertPoint.before(producer))
    copy = consumer.clone()
    Rewriter.insert_op(copy, InsertPoint.before(loop.body.block.last_op))  # type: ignore[arg-type]
    _unmark(copy)
    by_original = dict(zip(consumer.walk(), copy.walk()))
    for f, terms, low, size in zip(mapped, box.outer, box.low, box.shape):
        _rebase(by_original[f], terms, low, size, set())  # type: ignore[arg-type]
    Rewriter.erase_op(consumer)
    fold_applies(loop)
    _drop_vector_mark(loop)
    return loop
