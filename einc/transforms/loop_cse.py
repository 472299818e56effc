"""Common subexpressions across two sibling loops: a value the first loop computes for each
iteration, and the second loop computes again the same way, is kept in a local array by the
first and loaded by the second (softmax fused into one row loop computes `exp(x - max)` in
the sum and again in the normalisation: with this, once). The mechanism behind
`transform.einc.reuse %first in %second`.

Contract of `plan_reuse(first, second)` / `apply_reuse(plan)` (`reuse_values` does both):

- Input: two innermost `affine.for` loops without results, in the same block, `first` before
  `second`, of step 1 and the same constant bounds `lo to hi` (`hi - lo` at most
  `MAX_ELEMENTS`), whose bodies hold no op with regions.
- Shared values: an op result of `second`'s body *matches* one of `first`'s body when both
  come from ops of the same kind, properties and result type whose operands match pairwise:
  the two loop variables match, a value defined outside both loops matches itself (the
  same SSA value), op results recursively. Loads match when they read the same buffer at
  the same linear index of matching operands (however the map is written). A shared value is a matched value of `second` that some
  unmatched op of `second` uses, which depends on the loop variable, is a float or integer
  scalar, and whose expression holds more than loads and index arithmetic.
- Legality: only values whose expression is side-effect free apart from its loads, and
  loads only buffers written neither in either loop nor by any op between them (so
  `first`'s value at iteration i is the value `second` would compute at iteration i), are
  shared; a bigger expression that fails this leaves its legal parts to be shared. An op
  with other side effects (a call, ...) between the loops, or no shared value, is a Failure.
- Output: per shared value, a `memref.alloca` of `hi - lo` elements (`<name>_reuse<k>`,
  printed as a local array) just before `first`; in `first`'s body a store of the value at
  `[i - lo]` right after it is computed; in `second`'s body a load from `[i - lo]` replaces
  the value and the ops only it used are erased. Loop marks are kept (a vectorize mark on
  `first` still holds: the new store is unit-stride and private to the iteration).
- Failure (a value; the IR untouched): anything outside the cases above.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from xdsl.dialects import affine, memref
from xdsl.dialects.builtin import AffineMapAttr, AnyFloat, IntegerType, StringAttr
from xdsl.ir import Block, Operation, SSAValue
from xdsl.ir.affine import AffineExpr, AffineMap
from xdsl.rewriter import InsertPoint, Rewriter
from xdsl.traits import is_side_effect_free

from einc.transforms.affine_index import dims_to_operands
from einc.transforms.loop_analysis import constant_bounds, linear_form, step_of
from einc.transforms.loop_build import Failure, describe
from einc.transforms.loop_transforms import STMT_ATTR

MAX_ELEMENTS = 8192
"""The largest local array a reuse makes (32 KiB of float32: L1-sized, on each thread's stack)."""


_MEMORY_OPS = (
    affine.LoadOp, affine.StoreOp, affine.ForOp, affine.YieldOp, memref.LoadOp, memref.StoreOp, memref.AllocaOp,
)
"""Ops between the loops whose effects on buffers `plan_reuse` reads off (stores); any other
op with side effects between them is refused."""


@dataclass
class ReusePlan:
    first: affine.ForOp
    second: affine.ForOp
    lower: int
    count: int
    pairs: list[tuple[SSAValue, SSAValue]] = field(default_factory=list)
    """(value in `first`, the same value in `second`) per shared value."""

    def ops_saved(self) -> list[Operation]:
        """The ops of `second` that the reuse erases (their expressions, loads included)."""
        saved: list[Operation] = []
        for _, value in self.pairs:
            saved += _expression(value, self.second.body.block)
        return saved


def _key_of(block: Block, other_iv_key: str) -> dict[SSAValue, object]:
    """A structural key for each value defined in `block` (the loop body)."""
    keys: dict[SSAValue, object] = {block.args[0]: other_iv_key}

    def key(v: SSAValue) -> object:
        return keys.get(v, ("outer", id(v)))

    for op in block.ops:
        if isinstance(op, affine.StoreOp | affine.YieldOp) or not op.results:
            continue
        if isinstance(op, affine.LoadOp):
            keys[op.result] = ("load", key(op.memref), str(op.result.type), _index_key(op, key))
            continue
        props = tuple(sorted((k, str(p)) for k, p in op.properties.items()))
        for k, result in enumerate(op.results):
            keys[result] = (op.name, k, props, str(result.type), tuple(key(o) for o in op.operands))
    return keys


def _index_key(op: affine.LoadOp, key: Callable[[SSAValue], object]) -> object:
    """A load's index, the same for the same element however its map is written: per result
    `{operand key: coefficient}` and a constant (the map's text where not linear)."""
    m = dims_to_operands(op.map.data)
    results = []
    for e in m.results:
        form = linear_form(e, op.indices)
        if form is None:
            return (str(m), tuple(key(o) for o in op.indices))
        terms: dict[object, int] = {}
        for v, c in form[0].items():
            terms[key(v)] = terms.get(key(v), 0) + c
        results.append((tuple(sorted(((repr(k), c) for k, c in terms.items() if c))), form[1]))
    return tuple(results)


def _expression(value: SSAValue, body: Block) -> list[Operation]:
    """The ops of `body` that compute `value` (its operands' defining ops, transitively)."""
    found: list[Operation] = []
    stack = [value]
    while stack:
        v = stack.pop()
        op = v.owner
        if not isinstance(op, Operation) or op.parent_block() is not body or op in found:
            continue
        found.append(op)
        stack += list(op.operands)
    return found


def _written(ops: list[Operation]) -> set[SSAValue]:
    """The buffers stored to by `ops` or by any op nested in them."""
    buffers: set[SSAValue] = set()
    for top in ops:
        for op in top.walk():
            if isinstance(op, affine.StoreOp | memref.StoreOp):
                buffers.add(op.memref)
    return buffers


def plan_reuse(first: affine.ForOp, second: affine.ForOp) -> ReusePlan | Failure:
    """What `apply_reuse` would do (see the module docstring); the IR is not changed."""
    where = f"{describe(first)} in {describe(second)}"
    block = first.parent_block()
    if block is None or second.parent_block() is not block or first is second:
        return Failure(f"cannot reuse values of {where}: the loops are not siblings")
    ops = list(block.ops)
    if ops.index(first) > ops.index(second):
        return Failure(f"cannot reuse values of {where}: the first loop comes after the second")
    for loop in (first, second):
        if any(op.regions for op in loop.body.block.ops):
            return Failure(f"cannot reuse values of {where}: {describe(loop)} is not an innermost loop without regions")
        if step_of(loop) != 1 or loop.results:
            return Failure(f"cannot reuse values of {where}: only loops of step 1 without results")
    bounds = constant_bounds(first)
    if bounds is None or constant_bounds(second) != bounds:
        return Failure(f"cannot reuse values of {where}: the loops need the same constant bounds")
    lower, upper = bounds
    count = upper - lower
    if count < 1 or count > MAX_ELEMENTS:
        return Failure(f"cannot reuse values of {where}: {count} iterations (at most {MAX_ELEMENTS})")
    between = ops[ops.index(first) + 1 : ops.index(second)]
    for top in between:
        for op in top.walk():
            if not isinstance(op, _MEMORY_OPS) and not is_side_effect_free(op):
                return Failure(f"cannot reuse values of {where}: {op.name} between them may change their inputs")
    first_body, second_body = first.body.block, second.body.block
    first_keys = _key_of(first_body, "iv")
    by_key: dict[object, SSAValue] = {}
    for v, k in first_keys.items():
        by_key.setdefault(k, v)
    second_keys = _key_of(second_body, "iv")
    matched = {v: by_key[k] for v, k in second_keys.items() if k in by_key and v is not second_body.args[0]}
    written = _written([first, second, *between])
    def reusable(value: SSAValue) -> bool:
        expression = _expression(value, second_body)
        return not any(
            (isinstance(e, affine.LoadOp) and e.memref in written)
            or (not isinstance(e, affine.LoadOp) and not is_side_effect_free(e))
            for e in expression
        )

    legal = {v for v in matched if reusable(v)}
    inside = {v.owner for v in legal}
    plan = ReusePlan(first, second, lower, count)
    for op in second_body.ops:
        for value in op.results:
            if value not in legal or not isinstance(value.type, AnyFloat | IntegerType):
                continue
            if all(u.operation in inside for u in value.uses):
                continue  # only used inside a bigger shared expression
            expression = _expression(value, second_body)
            if not any(not isinstance(e, affine.LoadOp | affine.ApplyOp) for e in expression):
                continue  # a load or index arithmetic: recomputing is as cheap
            if second_body.args[0] not in {o for e in expression for o in e.operands}:
                continue  # loop-invariant: the compiler hoists it already
            plan.pairs.append((matched[value], value))
    if not plan.pairs:
        return Failure(f"cannot reuse values of {where}: no value computed the same way in both with its inputs unchanged")
    return plan


def apply_reuse(plan: ReusePlan) -> list[memref.AllocaOp]:
    """Rewrite as planned; the local arrays made, in order."""
    first, second = plan.first, plan.second
    stmt = first.attributes.get(STMT_ATTR)
    base = stmt.data if isinstance(stmt, StringAttr) else "value"
    index = AffineMapAttr(AffineMap(1, 0, (AffineExpr.dimension(0) - plan.lower,)))
    allocas: list[memref.AllocaOp] = []
    for k, (kept, again) in enumerate(plan.pairs):
        alloca = memref.AllocaOp.get(kept.type, 64, [plan.count])
        name = f"{base}_reuse{k}" if len(plan.pairs) > 1 else f"{base}_reuse"
        alloca.attributes["ein.name"] = StringAttr(name)
        alloca.memref.name_hint = name
        Rewriter.insert_op(alloca, InsertPoint.before(first))
        allocas.append(alloca)
        owner = kept.owner
        assert isinstance(owner, Operation)
        store = affine.StoreOp(kept, alloca.memref, [first.body.block.args[0]], index)
        Rewriter.insert_op(store, InsertPoint.after(owner))
        again_owner = again.owner
        assert isinstance(again_owner, Operation)
        load = affine.LoadOp(alloca.memref, [second.body.block.args[0]], index, again.type)
        Rewriter.insert_op(load, InsertPoint.before(again_owner))
        again.replace_all_uses_with(load.result)
    # erase what no longer has a use, users before their operands
    changed = True
    while changed:
        changed = False
        for op in reversed(list(second.body.block.ops)):
            if op.results and all(not r.uses for r in op.results) and (
                isinstance(op, affine.LoadOp) or is_side_effect_free(op)
            ):
                Rewriter.erase_op(op)
                changed = True
    return allocas


def reuse_values(first: affine.ForOp, second: affine.ForOp) -> list[memref.AllocaOp] | Failure:
    """`plan_reuse` then `apply_reuse`: the local arrays made, or a Failure (IR untouched)."""
    plan = plan_reuse(first, second)
    if isinstance(plan, Failure):
        return plan
    return apply_reuse(plan)


__all__ = ["MAX_ELEMENTS", "ReusePlan", "apply_reuse", "plan_reuse", "reuse_values"]
