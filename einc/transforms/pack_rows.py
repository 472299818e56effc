"""A staging copy packed row by row inside the loop that reads it: `transform.einc.pack_rows
%buffer at %loop` (README, "The pair form's input pack in the row loop").

`pack_rows(alloca, loop)`: `alloca` is a local buffer a `cache_read` staged (its copy-in nest,
and any constant fill nests such as a halo's frame, before `loop` in the same block); `loop`
is a later loop of that block whose iterations read a window of rows of the buffer that
slides with it (a convolution's output rows: iteration `i` reads rows `s i + A .. s i + B` of
one buffer dimension, `A`/`B` from the window loops inside). The copy-in nest moves to the
start of `loop`'s body, its loop over that dimension re-bounded to the rows iteration `i`
reads first (`s i + A + m .. s i + B`, `m` the rows the previous iteration's window shares:
a 3-row window of stride 1 copies one new row an iteration; where each iteration copies
its whole block of rows or none, the row loop keeps a constant trip count and an `scf.if`
skips the last iterations, whose rows lie past the copy-in's, instead of a `min` bound:
GCC vectorizes the copy better), and a prologue before `loop` copies the shared rows of the
first iteration (`A .. A + m - 1`). The buffer keeps its whole
shape (every index stays the same) and the fill nests stay where they are (they write before
any copy, as before). Each row is then copied just before its first use (in L1 when the
window reads it); rows no iteration reads are no longer copied.

Contract, otherwise a Failure and the IR unchanged:
- `loop` has constant bounds and lies in the alloca's block; the buffer's copy-in is one
  perfect nest of constant step-1 loops before `loop` in that block storing a value loaded
  from another memref, each buffer dimension indexed by one of its loops plus a constant;
  the buffer's other writers are nests storing constants, before the copy-in;
- every read of the buffer is an affine load inside `loop`; exactly one buffer dimension
  moves with `loop`'s variable, with the same positive coefficient in every read, and the
  rest of that index is loops inside `loop` with constant bounds (and constants);
- nothing between the copy-in nest and `loop`, nor inside `loop`, writes the memref the copy
  reads, and nothing between them touches the buffer.
"""

from __future__ import annotations

from xdsl.dialects import affine, arith, memref, scf
from xdsl.dialects.builtin import AffineMapAttr, IndexType, IntegerAttr
from xdsl.ir import Block, Operation, SSAValue
from xdsl.ir.affine import AffineExpr, AffineMap
from xdsl.rewriter import InsertPoint, Rewriter

from einc.transforms.loop_analysis import constant_bounds, induction_var, linear_form, step_of
from einc.transforms.loop_build import Failure, describe


def _top_in(block: Block, op: Operation) -> Operation | None:
    """The op of `block` that is `op` or holds it."""
    while op.parent_block() is not block:
        parent = op.parent_op()
        if parent is None:
            return None
        op = parent
    return op


def _perfect_copy(nest: Operation, buffer: SSAValue) -> tuple[list[affine.ForOp], affine.LoadOp, affine.StoreOp] | None:
    """The loops (outermost first), the load and the store of a perfect copy nest into
    `buffer` (constant step-1 loops), or None."""
    loops: list[affine.ForOp] = []
    op: Operation = nest
    while isinstance(op, affine.ForOp):
        body = [o for o in op.body.block.ops if not isinstance(o, affine.YieldOp)]
        if constant_bounds(op) is None or step_of(op) != 1 or op.results:
            return None
        loops.append(op)
        if len(body) == 1 and isinstance(body[0], affine.ForOp):
            op = body[0]
            continue
        if (len(body) == 2 and isinstance(body[0], affine.LoadOp) and isinstance(body[1], affine.StoreOp)
                and body[1].memref is buffer and body[1].value is body[0].result and body[0].memref is not buffer):  # fmt: skip
            return loops, body[0], body[1]
        return None
    return None


def _stores_constant(nest: Operation, buffer: SSAValue) -> bool:
    """Whether every store of `nest` into `buffer` stores a value defined outside it (a fill)."""
    for op in nest.walk():
        if isinstance(op, (affine.StoreOp, memref.StoreOp)) and op.memref is buffer:
            owner = op.value.owner
            if isinstance(owner, Operation) and nest.is_ancestor(owner):
                return False
    return True


def _range(v: SSAValue, loop: affine.ForOp) -> tuple[int, int] | None:
    """The least and greatest value of `v` inside `loop` (a constant or a constant-bounded
    loop's variable inside it), or None."""
    owner = v.owner
    if isinstance(owner, arith.ConstantOp) and isinstance(owner.value, IntegerAttr):
        return owner.value.value.data, owner.value.value.data
    if isinstance(owner, Block) and isinstance(owner.parent_op(), affine.ForOp):
        inner = owner.parent_op()
        assert isinstance(inner, affine.ForOp)
        bounds = constant_bounds(inner)
        if inner is loop or not loop.is_ancestor(inner) or bounds is None or bounds[1] <= bounds[0]:
            return None
        step = step_of(inner)
        return bounds[0], bounds[0] + step * ((bounds[1] - bounds[0] - 1) // step)
    return None


def _writes(op: Operation, buffer: SSAValue) -> bool:
    return any(isinstance(o, (affine.StoreOp, memref.StoreOp)) and o.memref is buffer for o in op.walk())


def _touches(op: Operation, buffer: SSAValue) -> bool:
    return any(buffer in o.operands for o in op.walk())


def pack_rows(alloca: memref.AllocaOp, loop: affine.ForOp) -> affine.ForOp | Failure:
    """Move the copy-in of the staged `alloca` into `loop`, one window's new rows an
    iteration (module docstring). Returns the copy-in's outermost loop inside `loop`."""
    buffer, block = alloca.memref, alloca.parent_block()
    name = describe(loop)
    bounds = constant_bounds(loop)
    if block is None or loop.parent_block() is not block:
        return Failure(f"pack_rows: {name} is not in the block of the staged buffer")
    if bounds is None or bounds[1] <= bounds[0] or loop.results:
        return Failure(f"pack_rows: {name} has no constant bounds")
    ops = list(block.ops)
    at = ops.index(loop)
    copies: list[tuple[int, tuple[list[affine.ForOp], affine.LoadOp, affine.StoreOp]]] = []
    for k, op in enumerate(ops[:at]):
        if op is alloca or not _writes(op, buffer):
            continue
        if (found := _perfect_copy(op, buffer)) is not None:
            copies.append((k, found))
        elif not _stores_constant(op, buffer):
            return Failure(f"pack_rows: the buffer is written by more than a copy-in and fills before {name}")
    if len(copies) != 1:
        return Failure(f"pack_rows: the buffer has {len(copies)} copy-in nests before {name}, not one")
    k_copy, (copy_loops, load, store) = copies[0]
    source = load.memref
    if any(_writes(op, buffer) for op in ops[k_copy + 1 :] if op is not loop):
        return Failure("pack_rows: the buffer is written after its copy-in")
    between = ops[k_copy + 1 : at]
    if any(_touches(op, buffer) or _writes(op, source) for op in between) or _writes(loop, source):
        return Failure(f"pack_rows: what lies between the copy-in and {name}, or {name}, touches what it copies")
    if any(isinstance(o, (affine.StoreOp, memref.StoreOp)) and o.memref is buffer for o in loop.walk()):
        return Failure(f"pack_rows: {name} writes the staged buffer")
    # the window of rows each iteration reads
    iv = induction_var(loop)
    dim: int | None = None
    stride: int | None = None
    low, high = None, None
    for use in buffer.uses:
        user = use.operation
        if _top_in(block, user) is ops[k_copy] or _stores_constant_user(user, buffer, ops, at):
            continue
        if not isinstance(user, affine.LoadOp) or not loop.is_ancestor(user):
            return Failure(f"pack_rows: the buffer is read outside {name} or not by an affine load")
        moving = []
        for d, e in enumerate(user.map.data.results):
            form = linear_form(e, user.indices)
            if form is None:
                if any(user.indices[q] is iv for q in e.used_dims()):
                    return Failure(f"pack_rows: a read of the buffer is not linear in dimension {d}")
                continue
            if iv in form[0]:
                moving.append((d, form))
        if len(moving) != 1:
            return Failure(f"pack_rows: a read of the buffer inside {name} moves {len(moving)} dimensions with it, not one")
        ((d, (terms, const)),) = moving
        s = terms[iv]
        if s <= 0 or (dim is not None and (d, s) != (dim, stride)):
            return Failure(f"pack_rows: the reads of the buffer inside {name} do not slide along one dimension alike")
        dim, stride = d, s
        lo = hi = const
        for v, c in terms.items():
            if v is iv:
                continue
            r = _range(v, loop)
            if r is None:
                return Failure(f"pack_rows: a read's row index depends on a value that is not a bounded loop inside {name}")
            lo, hi = lo + min(c * r[0], c * r[1]), hi + max(c * r[0], c * r[1])
        low, high = (lo if low is None else min(low, lo)), (hi if high is None else max(high, hi))
    if dim is None or stride is None or low is None or high is None:
        return Failure(f"pack_rows: {name} reads no row window of the buffer")
    # the copy loop along that dimension: store index `r + c`
    form = linear_form(store.map.data.results[dim], store.indices)
    ivs = [induction_var(x) for x in copy_loops]
    if form is None or len(form[0]) != 1 or next(iter(form[0].values())) != 1 or next(iter(form[0])) not in ivs:
        return Failure(f"pack_rows: the copy-in does not index dimension {dim} by one of its loops")
    row_iv, c = next(iter(form[0])), form[1]
    row_loop = next(loop for loop, iv in zip(copy_loops, ivs) if iv is row_iv)
    row_bounds = constant_bounds(row_loop)
    if row_bounds is None:
        return Failure("pack_rows: the copy-in's row loop has bounds that are not constants")
    r_lo, r_hi = row_bounds
    if any(row_iv in (linear_form(e, store.indices) or ({}, 0))[0] for q, e in enumerate(store.map.data.results) if q != dim):
        return Failure(f"pack_rows: the copy-in's row loop indexes more than dimension {dim}")
    first, step = bounds[0], step_of(loop)
    shared = max(0, high + 1 - low - stride * step)  # rows the previous iteration's window read
    # in-loop rows (copy-loop coordinates): max(r_lo, s i + low + shared - c) .. min(r_hi, s i + high + 1 - c)
    last = first + step * ((bounds[1] - first - 1) // step)
    i = AffineExpr.dimension(0)
    lower_e, upper_e = i * stride + (low + shared - c), i * stride + (high + 1 - c)
    lower = (lower_e,) if stride * first + low + shared - c >= r_lo else (AffineExpr.constant(r_lo), lower_e)
    upper = (upper_e,) if stride * last + high + 1 - c <= r_hi else (AffineExpr.constant(r_hi), upper_e)
    pro_lo, pro_hi = max(r_lo, stride * first + low - c), min(r_hi, stride * first + low + shared - c)

    # the rows an iteration copies a whole block or none (a window of stride 1: one row):
    # the row loop's bounds without the clip (a constant trip count), the nest guarded by
    # `i <= guard_last` where the last iterations would copy past the copy-in's rows
    guarded: int | None = None
    if len(lower) == 1 and len(upper) == 2:
        guard_last = (r_hi - (high + 1 - c)) // stride
        if first <= guard_last < last and stride * (guard_last + step) + low + shared - c >= r_hi:
            guarded, upper = guard_last, (upper_e,)

    nest = ops[k_copy]
    if pro_hi > pro_lo:
        prologue = nest.clone()
        _rebound(_find_clone(prologue, nest, row_loop), [], AffineMap(0, 0, (AffineExpr.constant(pro_lo),)), [],
                 AffineMap(0, 0, (AffineExpr.constant(pro_hi),)))  # fmt: skip
        Rewriter.insert_op(prologue, InsertPoint.before(loop))
    nest.detach()
    if guarded is None:
        Rewriter.insert_op(nest, InsertPoint.at_start(loop.body.block))
    else:
        bound = arith.ConstantOp(IntegerAttr(guarded, IndexType()))
        cond = arith.CmpiOp(iv, bound, "sle")
        guard = scf.IfOp(cond, [], [nest, scf.YieldOp()])
        Rewriter.insert_op([bound, cond, guard], InsertPoint.at_start(loop.body.block))
    _rebound(row_loop, [iv], AffineMap(1, 0, lower), [iv], AffineMap(1, 0, upper))
    assert isinstance(nest, affine.ForOp)
    return nest


def _stores_constant_user(user: Operation, buffer: SSAValue, ops: list[Operation], at: int) -> bool:
    """Whether `user` is a fill's store (a constant into the buffer) in a nest before `at`."""
    if not isinstance(user, (affine.StoreOp, memref.StoreOp)) or user.memref is not buffer:
        return False
    block = ops[0].parent_block()
    assert block is not None
    top = _top_in(block, user)
    return top is not None and top in ops[:at] and _stores_constant(top, buffer)


def _find_clone(clone: Operation, original: Operation, target: Operation) -> affine.ForOp:
    """The op of `clone` at `target`'s position in `original`."""
    for a, b in zip(original.walk(), clone.walk(), strict=True):
        if a is target:
            assert isinstance(b, affine.ForOp)
            return b
    raise AssertionError("not in the nest")


def _rebound(loop: affine.ForOp, lb_ops: list[SSAValue], lb: AffineMap, ub_ops: list[SSAValue], ub: AffineMap) -> None:
    """Replace `loop` by the same loop with the bounds `lb` (max) .. `ub` (min)."""
    region = loop.detach_region(loop.body)
    new = affine.ForOp.from_region(lb_ops, ub_ops, (), (), AffineMapAttr(lb), AffineMapAttr(ub), region, step_of(loop))
    new.attributes.update(loop.attributes)
    Rewriter.replace_op(loop, new)
