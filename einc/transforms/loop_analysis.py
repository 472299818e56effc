"""Reading `affine.for` nests: memory accesses, index ranges, and the dependence tests the
schedule transforms use to prove a rewrite keeps every result identical.

The tests are conservative and cheap. A loop *separates* a buffer when, for some dimension
`p`, every access to that buffer inside the loop indexes dimension `p` with
`c * iv + rest` (one `c` for all accesses) and all the `rest` values lie in an interval
narrower than `|c| * step`: two different iterations of the loop then touch disjoint elements
of the buffer. Everything the transforms need follows from that:
- a loop carries no dependence when it separates every buffer written inside it
  (parallelize, vectorize, bind);
- a permutation of a perfect band keeps every dependence when, for each written buffer, the
  loops that do not separate it keep their relative order (interchange, reorder);
- two sibling loops fuse when the fused loop separates every buffer they share.
Anything the analysis cannot read (a `memref.load` of a written buffer, a non-affine index)
counts as a dependence: the transform is refused, never guessed.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from functools import cmp_to_key

from xdsl.dialects import affine, arith, memref
from xdsl.dialects.builtin import IntegerAttr, MemRefType, StringAttr
from xdsl.ir import BlockArgument, Operation, SSAValue
from xdsl.ir.affine import (
    AffineBinaryOpExpr,
    AffineBinaryOpKind,
    AffineConstantExpr,
    AffineDimExpr,
    AffineExpr,
    AffineMap,
)

from einc.transforms.affine_index import Range, dims_to_operands, expr_range, shared_dims, simplify_flat
from einc.transforms.ranges import trip_count as trip_count  # its home is ranges.py


@dataclass(frozen=True)
class Access:
    """One load or store: `map` is None for a non-affine `memref.load/store`."""

    op: Operation
    buffer: SSAValue
    map: AffineMap | None
    operands: tuple[SSAValue, ...]
    write: bool


def access_of(op: Operation) -> Access | None:
    if not is_a(op, _ACCESS_OPS):
        return None
    if isinstance(op, affine.LoadOp):
        return Access(op, op.memref, dims_to_operands(op.map.data), tuple(op.indices), False)
    if isinstance(op, affine.StoreOp):
        return Access(op, op.memref, dims_to_operands(op.map.data), tuple(op.indices), True)
    if isinstance(op, memref.LoadOp):
        return Access(op, op.memref, None, tuple(op.indices), False)
    assert isinstance(op, memref.StoreOp)
    return Access(op, op.memref, None, tuple(op.indices), True)


_ACCESS_OPS = (affine.LoadOp, affine.StoreOp, memref.LoadOp, memref.StoreOp)
_ALLOC_OPS = (memref.AllocaOp, memref.AllocOp)
_SUBCLASS: dict[tuple[type, tuple[type, ...]], bool] = {}


def is_a(op: Operation, kinds: tuple[type[Operation], ...]) -> bool:
    """`isinstance(op, kinds)`, the answer kept per op class: `isinstance` on xDSL ops goes
    through ABC checks, and the analyses ask it of every op they walk."""
    key = (type(op), kinds)
    found = _SUBCLASS.get(key)
    if found is None:
        found = _SUBCLASS[key] = issubclass(type(op), kinds)
    return found


def accesses(root: Operation) -> list[Access]:
    """Every load and store nested in `root` (root included), in program order."""
    return [a for op in walk_ops(root) if (a := access_of(op)) is not None]


def walk_ops(root: Operation) -> list[Operation]:
    """`list(root.walk())` (root first, then each region's blocks' ops in order, depth
    first), through xDSL's links instead of its nested generators (a few times faster:
    the analyses walk every nest they look at)."""
    found: list[Operation] = []
    stack = [root]
    while stack:
        op = stack.pop()
        found.append(op)
        if op.regions:
            inner: list[Operation] = []
            for region in op.regions:
                for block in region.blocks:
                    child = block.first_op
                    while child is not None:
                        inner.append(child)
                        child = child.next_op
            inner.reverse()
            stack += inner
    return found


def named_accesses(root: Operation, tensor: str) -> list[Access] | str:
    """The accesses inside `root` of the one buffer named `tensor` (`buffer_name`), in program
    order; a reason (to be placed after the caller's own words) where there is none or two
    buffers share the name."""
    found = [a for a in accesses(root) if buffer_name(a.buffer) == tensor]
    if not found:
        return f"'{tensor}' is not accessed inside"
    if any(a.buffer is not found[0].buffer for a in found):
        return f"two buffers are named '{tensor}' inside"
    return found


def accesses_to(buffer: SSAValue, root: Operation | None = None) -> list[Access]:
    """The loads and stores of `buffer` (nested in `root`, root included, when given), in
    program order: `[a for a in accesses(root) if a.buffer is buffer]`, found through the
    buffer's uses instead of a walk of `root` (the cost follows the uses, not `root`'s size)."""
    found: dict[Operation, Access] = {}
    for use in buffer.uses:
        op = use.operation
        if op in found or (root is not None and op is not root and not root.is_ancestor(op)):
            continue
        a = access_of(op)
        if a is not None and a.buffer is buffer:
            found[op] = a
    if len(found) < 2:
        return list(found.values())
    return [found[op] for op in sorted(found, key=cmp_to_key(walk_order))]


def walk_order(a: Operation, b: Operation) -> int:
    """-1 when `a` comes before `b` in a walk of their common ancestor, 1 when after: both
    climbed to the ops below their first common ancestor, which are then compared by region,
    block, and position in their block (a walk from one towards the other, both ways, so
    the cost is their distance)."""
    if a is b:
        return 0
    path_a, path_b = _ancestors(a), _ancestors(b)
    k = 0
    while k < len(path_a) and k < len(path_b) and path_a[k] is path_b[k]:
        k += 1
    if k == len(path_a):
        return -1  # a encloses b: an op comes before its regions
    if k == len(path_b):
        return 1
    x, y = path_a[k], path_b[k]
    block_x, block_y = x.parent_block(), y.parent_block()
    if block_x is not block_y:
        parent = x.parent_op()
        assert parent is not None and block_x is not None and block_y is not None
        blocks = [blk for region in parent.regions for blk in region.blocks]
        return -1 if blocks.index(block_x) < blocks.index(block_y) else 1
    forward, backward = x.next_op, x.prev_op
    while forward is not None or backward is not None:
        if forward is y:
            return -1
        if backward is y:
            return 1
        forward = forward.next_op if forward is not None else None
        backward = backward.prev_op if backward is not None else None
    raise AssertionError("two ops of one block not found from each other")


def _ancestors(op: Operation) -> list[Operation]:
    """`op` and the ops around it, outermost first."""
    path = [op]
    while (parent := path[-1].parent_op()) is not None:
        path.append(parent)
    return path[::-1]


def local_buffers(root: Operation) -> set[SSAValue]:
    """Buffers allocated inside `root`: private to one iteration of it."""
    return {op.results[0] for op in walk_ops(root) if is_a(op, _ALLOC_OPS)}


def buffer_name(buffer: SSAValue) -> str:
    owner = buffer.owner
    if isinstance(owner, Operation) and isinstance(n := owner.attributes.get("ein.name"), StringAttr):
        return n.data
    return buffer.name_hint or "buffer"


# ---- ranges -------------------------------------------------------------------------------------


def induction_var(loop: affine.ForOp) -> BlockArgument:
    return loop.body.block.args[0]


def step_of(loop: affine.ForOp) -> int:
    return loop.step.value.data


def bound_operands(loop: affine.ForOp) -> tuple[tuple[SSAValue, ...], tuple[SSAValue, ...]]:
    n = len(loop.lowerBoundOperands)
    return tuple(loop.operands[:n]), tuple(loop.operands[n : n + len(loop.upperBoundOperands)])


def value_range(v: SSAValue, depth: int = 0) -> Range:
    """Inclusive bounds of an index value: loop variables (bounds may be max/min maps of
    other ranged values), constants and `affine.apply`s of them; unbounded otherwise."""
    if depth > 16:
        return None, None
    if isinstance(v, BlockArgument):
        loop = v.block.parent_op()
        if not isinstance(loop, affine.ForOp) or v.index != 0:
            return None, None
        lb_ops, ub_ops = bound_operands(loop)
        lbs = [map_result_range(r, loop.lowerBoundMap.data, lb_ops, depth) for r in loop.lowerBoundMap.data.results]
        ubs = [map_result_range(r, loop.upperBoundMap.data, ub_ops, depth) for r in loop.upperBoundMap.data.results]
        los = [lo for lo, _ in lbs]
        his = [hi for _, hi in ubs if hi is not None]
        lo = None if any(x is None for x in los) else max(los)  # type: ignore[type-var]
        hi = min(his) - 1 if his else None
        step = loop.step.value.data
        if step > 1 and lo is not None and hi is not None and lbs == [(lo, lo)]:
            hi = lo + (hi - lo) // step * step  # the last iterate of a constant lower bound
        return lo, hi
    owner = v.owner
    if isinstance(owner, arith.ConstantOp) and isinstance(owner.value, IntegerAttr):
        return owner.value.value.data, owner.value.value.data
    if isinstance(owner, affine.ApplyOp):
        m = owner.map.data
        return map_result_range(m.results[0], m, tuple(owner.mapOperands), depth)
    return None, None


def map_result_range(e: AffineExpr, m: AffineMap, operands: Sequence[SSAValue], depth: int = 0) -> Range:
    m2 = dims_to_operands(AffineMap(m.num_dims, m.num_symbols, (e,)))
    return expr_range(m2.results[0], [value_range(o, depth + 1) for o in operands])


def constant_bounds(loop: affine.ForOp) -> tuple[int, int] | None:
    """`(lower, upper)` when both bounds are single constants (upper exclusive)."""
    lb, ub = loop.lowerBoundMap.data, loop.upperBoundMap.data
    if len(lb.results) != 1 or len(ub.results) != 1:
        return None
    lo, hi = lb.results[0], ub.results[0]
    if isinstance(lo, AffineConstantExpr) and isinstance(hi, AffineConstantExpr):
        return lo.value, hi.value
    return None


# ---- linear forms -------------------------------------------------------------------------------


def uses_dim(e: AffineExpr, pos: int) -> bool:
    if isinstance(e, AffineDimExpr):
        return e.position == pos
    if isinstance(e, AffineBinaryOpExpr):
        return uses_dim(e.lhs, pos) or uses_dim(e.rhs, pos)
    return False


def split_linear(e: AffineExpr, pos: int) -> tuple[int, AffineExpr] | None:
    """`(c, rest)` with `e == c * d<pos> + rest` and `rest` free of `d<pos>`, or None when
    `d<pos>` appears under a floordiv/mod/ceildiv or a non-constant product."""
    if not uses_dim(e, pos):
        return 0, e
    if isinstance(e, AffineDimExpr):
        return 1, AffineExpr.constant(0)
    assert isinstance(e, AffineBinaryOpExpr)
    if e.kind == AffineBinaryOpKind.Add:
        left, right = split_linear(e.lhs, pos), split_linear(e.rhs, pos)
        if left is None or right is None:
            return None
        return left[0] + right[0], left[1] + right[1]
    if e.kind == AffineBinaryOpKind.Mul:
        for var, const in ((e.lhs, e.rhs), (e.rhs, e.lhs)):
            if isinstance(const, AffineConstantExpr):
                inner = split_linear(var, pos)
                if inner is None:
                    return None
                return inner[0] * const.value, inner[1] * const.value
    return None


# ---- dependence tests -----------------------------------------------------------------------------


def linear_form(e: AffineExpr, operands: Sequence[SSAValue]) -> tuple[dict[SSAValue, int], int] | None:
    """`e` over `operands` as `{value: coefficient}` plus a constant, or None if not linear."""
    if isinstance(e, AffineConstantExpr):
        return {}, e.value
    if isinstance(e, AffineDimExpr):
        return {operands[e.position]: 1}, 0
    if not isinstance(e, AffineBinaryOpExpr):
        return None
    if e.kind == AffineBinaryOpKind.Add:
        a, b = linear_form(e.lhs, operands), linear_form(e.rhs, operands)
        if a is None or b is None:
            return None
        terms = dict(a[0])
        for v, c in b[0].items():
            terms[v] = terms.get(v, 0) + c
        return {v: c for v, c in terms.items() if c}, a[1] + b[1]
    if e.kind == AffineBinaryOpKind.Mul:
        for var, const in ((e.lhs, e.rhs), (e.rhs, e.lhs)):
            if isinstance(const, AffineConstantExpr):
                inner = linear_form(var, operands)
                if inner is None:
                    return None
                return {v: c * const.value for v, c in inner[0].items() if c * const.value}, inner[1] * const.value
    return None


def defined_inside(v: SSAValue, loop: Operation) -> bool:
    owner = v.owner
    if isinstance(owner, Operation):
        return loop.is_ancestor(owner)
    parent = owner.parent_op()
    return parent is not None and loop.is_ancestor(parent)


def separates(iv: SSAValue, step: int, group: Sequence[Access]) -> bool:
    """Whether, within one run of the loop of `iv` (which moves by at least `step`),
    different iterations make every access of `group` (one buffer) touch disjoint elements."""
    loop = iv.owner.parent_op()  # type: ignore[union-attr]
    assert loop is not None, iv
    return separates_all([(iv, loop, a) for a in group], step)


def flat_access(a: Access, start: int | None = None) -> Access | None:
    """`a` with the buffer's dimensions from `start` (default: its first index that is not
    linear) merged into their row-major flat position (`view_results`), when that position
    is linear (a coalesced loop's `x[n, p floordiv 28, p mod 28]` of rows of 28 is
    `x'[n, p]`); None otherwise. The same element is touched exactly when the merged indices
    agree."""
    if a.map is None or not isinstance(a.buffer.type, MemRefType):
        return None
    view = view_results(a, a.buffer.type.get_shape(), start)
    if view is None:
        return None
    return Access(a.op, a.buffer, AffineMap(a.map.num_dims, 0, tuple(view[1])), a.operands, a.write)


def first_nonlinear(a: Access) -> int | None:
    """The first dimension whose index is not linear in the operands (None: all are, or the
    access is not affine)."""
    if a.map is None:
        return None
    return next((d for d, e in enumerate(a.map.results) if linear_form(e, a.operands) is None), None)


def view_results(a: Access, dims: Sequence[int], start: int | None = None) -> tuple[int, list[AffineExpr]] | None:
    """The access's indices with the tensor's dimensions from `start` (default: its first
    index that is not linear, a coalesced loop's floordiv and mod) merged into their flat
    position: (start, the indices of the view `dims[:start] + [prod(dims[start:])]`), when
    that position and the indices before are linear; None otherwise (or when every index is
    linear and no `start` is given)."""
    assert a.map is not None
    k = first_nonlinear(a) if start is None else start
    if k is None or any(x < 0 for x in dims) or len(dims) != len(a.map.results):
        return None
    m = shared_dims(a.map, a.operands)
    flat: AffineExpr = AffineExpr.constant(0)
    stride = 1
    for e, extent in reversed(list(zip(m.results[k:], dims[k:]))):
        flat = e * stride + flat
        stride *= extent
    flat = simplify_flat(flat)
    results = [*m.results[:k], flat]
    if any(linear_form(e, a.operands) is None for e in results):
        return None
    return k, results


def _flat_group(accesses: Sequence[Access]) -> list[Access] | None:
    """Every access of a group as `flat_access` from the first dimension where one of them
    has an index that is not linear (all merged alike); None when the indices are all
    linear, or some access does not merge."""
    starts = [k for a in accesses if (k := first_nonlinear(a)) is not None]
    if not starts:
        return None
    flat = [f for a in accesses if (f := flat_access(a, min(starts))) is not None]
    return flat if len(flat) == len(accesses) else None


def separates_all(items: Sequence[tuple[SSAValue, Operation, Access]], step: int) -> bool:
    """`separates` for accesses each paired with its own induction variable and loop (sibling
    loops with the same bounds, about to be fused). Per dimension, each index must read
    `c * iv + outer + inner`: the same `c` and the same terms in values defined outside the
    loops for every access, and inner terms (values of loops inside) whose combined range is
    narrower than `|c| * step`."""
    if not items or any(a.map is None for _, _, a in items):
        return False
    if _separates_dims(items, step):
        return True
    flat = _flat_group([a for _, _, a in items])  # coalesced indices: the flat positions
    return flat is not None and _separates_dims([(iv, loop, f) for (iv, loop, _), f in zip(items, flat)], step)


def _separates_dims(items: Sequence[tuple[SSAValue, Operation, Access]], step: int) -> bool:
    rank = len(items[0][2].map.results)  # type: ignore[union-attr]
    for p in range(rank):
        coefficients: set[int] = set()
        outers: list[dict[SSAValue, int]] = []
        lo: int | None = 0
        hi: int | None = 0
        first = True
        ok = True
        for iv, loop, a in items:
            assert a.map is not None
            form = linear_form(a.map.results[p], a.operands)
            if form is None:
                ok = False
                break
            terms, const = form
            coefficients.add(terms.get(iv, 0))
            outer = {v: c for v, c in terms.items() if v is not iv and not defined_inside(v, loop)}
            outers.append(outer)
            r_lo, r_hi = const, const
            for v, c in terms.items():
                if v is iv or v in outer:
                    continue
                v_lo, v_hi = value_range(v)
                if v_lo is None or v_hi is None:
                    ok = False
                    break
                r_lo += min(c * v_lo, c * v_hi)
                r_hi += max(c * v_lo, c * v_hi)
            if not ok:
                break
            lo = r_lo if first else min(lo, r_lo)  # type: ignore[type-var]
            hi = r_hi if first else max(hi, r_hi)  # type: ignore[type-var]
            first = False
        if not ok or len(coefficients) != 1 or any(o != outers[0] for o in outers):
            continue
        c = coefficients.pop()
        if c != 0 and hi - lo < abs(c) * step:  # type: ignore[operator]
            return True
    return False


def determined_loops(group: Sequence[Access], band: Sequence[SSAValue]) -> set[SSAValue]:
    """Band ivs whose values are determined by the element accessed (all of `group` using
    one index map): two band iterations touching the same element agree on them. Read per
    index as a mixed-radix number: the term of largest `|c| * step` is determined when the
    other band terms span less than it."""
    flat = _flat_group(group)  # coalesced indices: the flat positions determine loops too
    return _determined(group, band) | (_determined(flat, band) if flat is not None else set())


def _determined(group: Sequence[Access], band: Sequence[SSAValue]) -> set[SSAValue]:
    first = group[0]
    if any(a.map is None or a.map != first.map or a.operands != first.operands for a in group):
        return set()
    assert first.map is not None
    determined: set[SSAValue] = set()
    for e in first.map.results:
        form = linear_form(e, first.operands)
        if form is None:
            continue
        terms = {v: c for v, c in form[0].items() if v in band}
        while terms:
            def weight(v: SSAValue) -> int:
                return abs(terms[v]) * step_of(v.owner.parent_op())  # type: ignore[union-attr, arg-type]

            # the heaviest term first; among terms of equal weight (`16 * F.q.o + l.o + l.i`
            # with l.o stepping by 16) whichever the others span less than
            found = None
            for top in sorted(terms, key=weight, reverse=True):
                span = 0
                for v, c in terms.items():
                    if v is top:
                        continue
                    v_lo, v_hi = value_range(v)
                    if v_lo is None or v_hi is None:
                        span = None  # type: ignore[assignment]
                        break
                    span += abs(c) * (v_hi - v_lo)
                if span is not None and span < weight(top):
                    found = top
                    break
                if weight(top) < max(weight(v) for v in terms):
                    break
            if found is None:
                break
            determined.add(found)
            del terms[found]
    return determined


def written_groups(root: Operation, within: Operation | None = None) -> dict[SSAValue, list[Access]]:
    """Buffers written inside `root` (except ones allocated inside `within`, default
    `root`), each with every access to it inside `root`."""
    accs = accesses(root)
    local = local_buffers(within or root)
    written = [a.buffer for a in accs if a.write and a.buffer not in local]
    return {b: [a for a in accs if a.buffer is b] for b in dict.fromkeys(written)}


def carried_dependence(loop: affine.ForOp) -> SSAValue | None:
    """A buffer whose elements two iterations of `loop` may both touch (one writing), or
    None when the iterations are independent (parallel, vectorizable)."""
    iv, step = induction_var(loop), step_of(loop)
    for buffer, group in written_groups(loop).items():
        if not separates(iv, step, group):
            return buffer
    return None


def band_from(top: affine.ForOp) -> list[affine.ForOp]:
    """`top` and, below it, each loop that is alone (but for the yield) in the body above it."""
    band = [top]
    while True:
        ops = list(band[-1].body.block.ops)
        if len(ops) == 2 and isinstance(ops[0], affine.ForOp):
            band.append(ops[0])
        else:
            return band


def perfect_band(loops: Sequence[affine.ForOp]) -> bool:
    """Whether each loop's body is exactly the next loop (and its yield), without results."""
    for outer, inner in zip(loops, loops[1:]):
        ops = list(outer.body.block.ops)
        if len(ops) != 2 or ops[0] is not inner:
            return False
    return all(not loop.results for loop in loops)


def band_permutation_breaks(loops: Sequence[affine.ForOp], order: Sequence[int]) -> SSAValue | None:
    """For a perfect band `loops` (outermost first) and a new order (`order[k]` = index of
    the loop placed at depth k), a written buffer whose dependences the permutation could
    reverse, else None: iterations touching one element agree on the loops the index
    determines, so the others (a reduction's loops) must keep their relative order.
    Bound dominance is checked separately (`bounds_dominate`)."""
    ivs = [induction_var(loop) for loop in loops]
    for buffer, group in written_groups(loops[0]).items():
        fixed = determined_loops(group, ivs)
        free = [k for k, iv in enumerate(ivs) if iv not in fixed]
        new_positions = [order.index(k) for k in free]
        if new_positions != sorted(new_positions):
            return buffer
    return None


def bounds_dominate(loops: Sequence[affine.ForOp], order: Sequence[int]) -> bool:
    """Whether, in the new order, every loop's bounds use only ivs of loops outside it."""
    ivs = [induction_var(loop) for loop in loops]
    for depth, k in enumerate(order):
        lb, ub = bound_operands(loops[k])
        for operand in (*lb, *ub):
            if operand in ivs and order.index(ivs.index(operand)) >= depth:  # type: ignore[arg-type]
                return False
    return True


def conflicts(a: Operation, b: Operation) -> SSAValue | None:
    """A buffer one of `a`, `b` writes and the other accesses (memory order matters)."""
    acc_a, acc_b = accesses(a), accesses(b)
    writes_a = {x.buffer for x in acc_a if x.write}
    writes_b = {x.buffer for x in acc_b if x.write}
    for x in acc_b:
        if x.buffer in writes_a:
            return x.buffer
    for x in acc_a:
        if x.buffer in writes_b:
            return x.buffer
    return None
