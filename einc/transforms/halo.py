"""A staged tile with its halo (`transform.einc.cache_read ... halo`): the guarded reads of a
padded window made plain reads of a buffer whose elements outside the tensor hold the
guard's value.

A padded convolution reads its input under a bounds test, `x[.., h + kh - 1, w + kw - 1]
.when([h + kh - 1 >= 0, h + kh - 1 < H, ...], 0.0)`: at the loop level an `scf.if` whose
then-block is the load and whose else-block yields a constant. Staged with its halo, the
buffer holds the box of every read including the part outside the tensor (the padding),
filled with that constant before the copy-in, and each such read loads the buffer
unconditionally: every tap of the window is then a run of whole vectors with no edge code.

Contract (`bounds_guards`): a read is unguarded only when its guard is exactly a conjunction
of bounds tests of its own indices (`index >= 0`, `index < size`, or the `>`/`<=` forms of
the same; signed, operands that fit their width) and its else value a constant; all such
reads of the tensor must agree on the constant. Other reads (no guard, or a guard that tests
anything else) keep what they had. A read is redirected to the buffer before its guard is
dropped (einc.transforms.staging), so the buffer's value outside the tensor is what the
guard would have produced.
"""

from __future__ import annotations

from dataclasses import dataclass

from xdsl.dialects import affine, arith, scf
from xdsl.dialects.builtin import FloatAttr, IntegerAttr
from xdsl.ir import Attribute, Operation, SSAValue
from xdsl.rewriter import InsertPoint, Rewriter

from einc.transforms.index_split import Comparison
from einc.transforms.loop_analysis import Access, linear_form
from einc.transforms.ranges import expr_range


@dataclass(frozen=True)
class Guard:
    """The `scf.if` around a read (its then-block the load and a yield of it) and the
    constant its else-block yields."""

    op: scf.IfOp
    fill: Attribute


def _conjuncts(cond: SSAValue) -> list[SSAValue]:
    owner = cond.owner
    if isinstance(owner, arith.AndIOp):
        return _conjuncts(owner.lhs) + _conjuncts(owner.rhs)
    return [cond]


def _constant(v: SSAValue) -> Attribute | None:
    owner = v.owner
    if isinstance(owner, arith.ConstantOp) and isinstance(owner.value, FloatAttr | IntegerAttr):
        return owner.value
    return None


def _bounds_test(cond: SSAValue, access: Access, sizes: list[int]) -> bool:
    """Whether `cond` is `index_d >= 0` or `index_d < size_d` for some dimension d of `access`."""
    cmp = cond.owner
    if not isinstance(cmp, arith.CmpiOp) or access.map is None:
        return False
    found = Comparison.of(cmp)
    if found is None or found.unsigned:
        return False
    for expr, width in found.operands:
        lo, hi = expr_range(expr, found.ranges)
        if width is not None and (lo is None or hi is None or lo < -(1 << (width - 1)) or hi >= 1 << (width - 1)):
            return False
    diff = linear_form(found.diff, found.dims)
    if diff is None:
        return False
    terms, const = diff
    terms = {v: c for v, c in terms.items() if c}
    for d, e in enumerate(access.map.results):
        form = linear_form(e, access.operands)
        if form is None:
            continue
        index, offset = {v: c for v, c in form[0].items() if c}, form[1]
        if index != terms:
            continue
        # diff = index + offset - k: `>= 0` is sge with k = 0 (sgt with k = -1), `< size` is
        # slt with k = size (sle with k = size - 1)
        wanted = {"sge": 0, "sgt": -1, "slt": sizes[d], "sle": sizes[d] - 1}.get(found.predicate)
        if wanted is not None and offset - const == wanted:
            return True
    return False


def bounds_guard(access: Access, sizes: list[int]) -> Guard | None:
    """The guard of a read that tests only that the read is inside the tensor (`sizes`), and
    yields a constant otherwise; None for any other read (see the module docstring)."""
    load = access.op
    if not isinstance(load, affine.LoadOp):
        return None
    guard = load.parent_op()
    if not isinstance(guard, scf.IfOp) or load.parent_block() is not guard.true_region.block:
        return None
    then_ops = list(guard.true_region.block.ops)
    # the load's own index applies may precede it (staging's unfolded divisions: the pair
    # form's `l mod 2` input channel)
    if then_ops[-2:] != [load, guard.true_region.block.last_op] or len(guard.results) != 1:
        return None
    if not all(_index_apply(op, load) for op in then_ops[:-2]):
        return None
    yielded = guard.true_region.block.last_op
    if not isinstance(yielded, scf.YieldOp) or list(yielded.operands) != [load.result]:
        return None
    if not guard.false_region.blocks:
        return None
    other = guard.false_region.block.last_op
    if not isinstance(other, scf.YieldOp) or len(other.operands) != 1:
        return None
    fill = _constant(other.operands[0])
    if fill is None:
        return None
    if not all(_bounds_test(c, access, sizes) for c in _conjuncts(guard.cond)):
        return None
    return Guard(guard, fill)


def _index_apply(op: Operation, load: affine.LoadOp) -> bool:
    """Whether `op` is an `affine.apply` whose result only `load` reads (as an index)."""
    return isinstance(op, affine.ApplyOp) and all(use.operation is load for use in op.result.uses)


def drop_guard(load: affine.LoadOp, guard: scf.IfOp) -> None:
    """`load` (the only op of `guard`'s then-block but its yield and its index applies)
    moved before `guard`, with its applies, and replacing it; the guard's condition erased
    where nothing else reads it."""
    for op in list(guard.true_region.block.ops)[:-1]:
        op.detach()
        Rewriter.insert_op(op, InsertPoint.before(guard))
    guard.results[0].replace_all_uses_with(load.result)
    cond = guard.cond
    Rewriter.erase_op(guard)
    _erase_unused(cond)


_PURE = (arith.AndIOp, arith.CmpiOp, arith.IndexCastOp, arith.ConstantOp, affine.ApplyOp)


def _erase_unused(value: SSAValue) -> None:
    owner = value.owner
    if not isinstance(owner, _PURE) or any(r.uses for r in owner.results):
        return
    operands = list(owner.operands)
    assert isinstance(owner, Operation)
    Rewriter.erase_op(owner)
    for o in dict.fromkeys(operands):
        _erase_unused(o)
