"""Loop unswitching: a guard (`scf.if`) inside an `affine.for` whose condition is the same
in every iteration is tested once before the loop, and the loop is versioned.

    affine.for %K = 0 to 499 {             %v = affine.apply (-N_o + 499)
      %v = affine.apply (-N_o + 499)       %c = arith.cmpi slt, 3, %v
      %c = arith.cmpi slt, 3, %v     =>    scf.if %c {
      scf.if %c { A }                        affine.for %K ... { A }        // the guard's then
    }                                      } else {
                                             affine.for %K ... { }          // its else (none)
                                           }

The condition's computation (its backward slice inside the loop) is copied before the loop;
it may use only pure integer ops that cannot trap (`HOISTABLE`) on values defined outside
the loop. In each version the other guards that the known value decides go too: the same
condition value, or a comparison of the same value with a constant that the known one
implies (`3 < v` true makes `1 < v` true; false makes `5 < v` false), `v` the same value
or one computed alike (`same_value`). The iterations run
the same operations in the same order: always legal. Mechanism only: einc-unswitch
(einc/passes/unswitch.py) chooses where.

A guard may yield values (a padded read's `.when`: the element if the index is inside, else
the padding), and only part of its condition may be invariant: `(r >= 0 & r < 14) & (c >= 0 &
c < 14)`, the row part invariant in the loop over columns. The loop is then versioned on that
part (`invariant_part`: a value of the condition's `andi` tree); in each version the
comparisons its known value decides become constants and what they feed folds
(`index_split.fold_constants`): the row-inside version keeps `c >= 0 & c < 14`, the other
yields the padding without the read. `affine.if` never reaches this: einc lowers every
condition to `scf.if` (the ein dialect's `.when` and the guards of loop_transforms alike),
so there is no `affine.if` to version.
"""

from __future__ import annotations

import math
from collections.abc import Callable

from xdsl.dialects import affine, arith, scf
from xdsl.dialects.builtin import IntegerAttr, i1
from xdsl.ir import Operation, SSAValue
from xdsl.ir.affine import AffineBinaryOpExpr, AffineBinaryOpKind, AffineConstantExpr, AffineExpr
from xdsl.rewriter import InsertPoint, Rewriter

from einc.dialects.egpu_kernel import AllocSharedOp, BarrierOp, SubgroupReduceOp
from einc.dialects.egpu_mma import MmaOp
from einc.transforms.affine_index import affine_expr_of
from einc.transforms.index_split import Comparison, canonical, fold_constants, inline_if, linear_dims
from einc.transforms.loop_analysis import constant_bounds, induction_var, step_of
from einc.transforms.loop_build import Failure, describe
from einc.transforms.ranges import Range, value_range

HOISTABLE = (
    arith.ConstantOp, arith.CmpiOp, arith.AndIOp, arith.OrIOp, arith.XOrIOp, arith.AddiOp,
    arith.SubiOp, arith.MuliOp, arith.IndexCastOp, affine.ApplyOp,
)  # fmt: skip
"""The ops a hoisted condition may be computed with: pure, and never trapping, so that
computing them before a loop that runs no iteration is harmless."""

COLLECTIVE = (BarrierOp, SubgroupReduceOp, MmaOp, AllocSharedOp)
"""Ops every work-item of a group must reach together: a loop holding one is not put under a
condition that may differ between work-items.
"""

MAX_UNSWITCH_OPS = 1 << 15
"""The most ops (nested ones included) a loop may have to be versioned (each unswitch
copies it once)."""


def invariant_slice(value: SSAValue, loop: affine.ForOp) -> list[Operation] | None:
    """The ops inside `loop` that compute `value`, in program order, when all are HOISTABLE
    and everything else they read is defined outside `loop`; else None."""
    found: dict[Operation, None] = {}

    def visit(v: SSAValue) -> bool:
        owner = v.owner
        if not isinstance(owner, Operation):  # a block argument: outside, or an iv inside
            return not loop.is_ancestor(owner)
        if not loop.is_ancestor(owner):
            return True
        if owner in found:
            return True
        if not isinstance(owner, HOISTABLE) or owner.regions:
            return False
        if not all(visit(operand) for operand in owner.operands):
            return False
        found[owner] = None
        return True

    if not visit(value):
        return None
    order = {op: i for i, op in enumerate(loop.walk())}
    return sorted(found, key=order.__getitem__)


def conjuncts(cond: SSAValue) -> list[SSAValue]:
    """The values whose conjunction `cond` is: the leaves of its `andi` tree, left first."""
    owner = cond.owner
    if isinstance(owner, arith.AndIOp) and cond.type == i1:
        return [*conjuncts(owner.lhs), *conjuncts(owner.rhs)]
    return [cond]


def invariant_part(cond: SSAValue, loop: affine.ForOp) -> SSAValue | None:
    """The first value of `cond`'s `andi` tree (`cond` itself, then its operands', left
    first) that `loop` does not change (`invariant_slice`); None when there is none."""
    if invariant_slice(cond, loop) is not None:
        return cond
    owner = cond.owner
    if isinstance(owner, arith.AndIOp) and cond.type == i1 and loop.is_ancestor(owner):
        for operand in owner.operands:
            found = invariant_part(operand, loop)
            if found is not None:
                return found
    return None


def _in_tree(part: SSAValue, cond: SSAValue) -> bool:
    owner = cond.owner
    return part is cond or (isinstance(owner, arith.AndIOp) and any(_in_tree(part, o) for o in owner.operands))


def unswitch_loop(
    loop: affine.ForOp, guard: scf.IfOp, part: SSAValue | None = None
) -> tuple[affine.ForOp, affine.ForOp] | Failure:
    """Version `loop` on `guard`'s condition, or on `part` of it (a value of its `andi`
    tree: `invariant_part`): `scf.if cond { loop' } else { loop'' }` in its place, the
    condition computed once before it; in `loop'` (the loop itself) the condition is true,
    in `loop''` (a copy) false, and in each the guards and comparisons the known value
    decides are folded (module docstring): a guard on the whole condition becomes its
    then-block, or its else-block (or nothing). Returns (loop', loop''). A Failure, with the
    IR unchanged, when `guard` is not inside `loop`, `part` is not in its condition's `andi`
    tree, `loop` carries values, the condition is not invariant in `loop` (or uses an op
    outside HOISTABLE), `loop` holds a COLLECTIVE op, or it has more than MAX_UNSWITCH_OPS
    ops."""
    if guard is loop or not loop.is_ancestor(guard):
        return Failure(f"cannot unswitch {describe(loop)}: the guard is not inside it")
    part = guard.cond if part is None else part
    if not _in_tree(part, guard.cond):
        return Failure(f"cannot unswitch {describe(loop)}: the value is not a conjunct of the guard's condition")
    if loop.results:
        return Failure(f"cannot unswitch {describe(loop)}: it carries values")
    hoisted = invariant_slice(part, loop)
    if hoisted is None:
        return Failure(f"cannot unswitch {describe(loop)}: the guard's condition changes in it")
    collective = next((op for op in loop.walk() if isinstance(op, COLLECTIVE)), None)
    if collective is not None:
        return Failure(
            f"cannot unswitch {describe(loop)}: it holds '{collective.name}', which the work-items "
            "must reach together, and the condition may differ between them"
        )
    ops = sum(1 for _ in loop.walk())
    if ops > MAX_UNSWITCH_OPS:
        return Failure(f"cannot unswitch {describe(loop)}: it has {ops} ops, the limit is {MAX_UNSWITCH_OPS}")
    path = _path(loop, guard)
    point = InsertPoint.before(loop)
    mapper: dict[SSAValue, SSAValue] = {}
    for op in hoisted:
        Rewriter.insert_op(op.clone(value_mapper=mapper), point)
    cond = mapper.get(part, part)
    copied: dict[SSAValue, SSAValue] = {}
    copy = loop.clone(value_mapper=copied)
    versioned = scf.IfOp(cond, [], [scf.YieldOp()], [scf.YieldOp()])
    Rewriter.insert_op(versioned, point)
    loop.detach()
    Rewriter.insert_op(loop, InsertPoint.at_start(versioned.true_region.block))
    Rewriter.insert_op(copy, InsertPoint.at_start(versioned.false_region.block))
    for version, known in ((loop, True), (copy, False)):
        fact = _follow(version, path)
        assert isinstance(fact, scf.IfOp)
        if part is guard.cond:
            fold_implied(version, fact.cond, known)
        else:
            _fold_decided(version, copied.get(part, part) if version is copy else part, known)
    return loop, copy


def _fold_decided(root: affine.ForOp, cond: SSAValue, value: bool) -> None:
    """In `root`, where `cond` is `value`, replace each comparison and conjunction that this
    decides (`implied`; a true conjunction decides through each of its conjuncts) by its
    constant, and fold what they feed (`fold_constants`)."""
    facts = conjuncts(cond) if value else [cond]
    decided: list[tuple[SSAValue, bool]] = [(cond, value)]  # cond may be defined before root
    for op in root.walk():
        if isinstance(op, arith.CmpiOp | arith.AndIOp) and op.result is not cond and op.result.type == i1 and op.result.uses:
            taken = next((t for f in facts if (t := implied(f, value, op.result)) is not None), None)
            if taken is not None:
                decided.append((op.result, taken))
    constants = {v: arith.ConstantOp(IntegerAttr(int(v), i1)) for v in (False, True)}
    Rewriter.insert_op(list(constants.values()), InsertPoint.at_start(root.body.block))
    for result, taken in decided:
        for use in list(result.uses):
            if root.is_ancestor(use.operation):
                use.operation.operands[use.index] = constants[taken].result
    fold_constants(root)


def _path(root: Operation, op: Operation) -> list[tuple[int, int, int]]:
    """Where `op` is under `root`: (region, block, op) indices from `root` down."""
    steps: list[tuple[int, int, int]] = []
    while op is not root:
        block = op.parent_block()
        assert block is not None and block.parent is not None
        parent = block.parent.parent
        assert parent is not None
        region = block.parent
        steps.append((parent.regions.index(region), list(region.blocks).index(block), list(block.ops).index(op)))
        op = parent
    return steps[::-1]


def _follow(root: Operation, path: list[tuple[int, int, int]]) -> Operation:
    for r, b, o in path:
        root = list(list(root.regions[r].blocks)[b].ops)[o]
    return root


def _interval(cond: SSAValue, value: bool) -> tuple[SSAValue, float, float] | None:
    """(x, lo, hi) such that `cond` is `value` exactly when lo <= x <= hi, for a signed
    comparison of x with an integer constant; else None."""
    cmp = cond.owner
    if not isinstance(cmp, arith.CmpiOp):
        return None
    lhs, rhs = _constant(cmp.lhs), _constant(cmp.rhs)
    name = arith.CMPI_COMPARISON_OPERATIONS[cmp.predicate.value.data]
    if (lhs is None) == (rhs is None) or name not in ("slt", "sle", "sgt", "sge"):
        return None
    if lhs is not None:  # c OP x  ==  x OP' c
        x, c, name = cmp.rhs, lhs, {"slt": "sgt", "sle": "sge", "sgt": "slt", "sge": "sle"}[name]
    else:
        x, c = cmp.lhs, rhs
    assert c is not None
    inf = float("inf")
    true = {"slt": (-inf, c - 1), "sle": (-inf, c), "sgt": (c + 1, inf), "sge": (c, inf)}[name]
    if value:
        return x, true[0], true[1]
    return (x, -inf, true[0] - 1) if true[1] == inf else (x, true[1] + 1, inf)


def _constant(v: SSAValue) -> int | None:
    owner = v.owner
    if isinstance(owner, arith.ConstantOp) and isinstance(owner.value, IntegerAttr):
        return owner.value.value.data
    return None


def same_value(a: SSAValue, b: SSAValue) -> bool:
    """Whether `a` and `b` are the same value: the same SSA value, or results of the same
    HOISTABLE op (name, properties, attributes) on the same values (what CSE would merge:
    each unrolled copy of a tile loop computes its own `affine.apply` of the tile's end)."""
    if a is b:
        return True
    x, y = a.owner, b.owner
    if not isinstance(x, HOISTABLE) or type(x) is not type(y):  # one result each
        return False
    assert isinstance(y, Operation)
    return (
        x.properties == y.properties and x.attributes == y.attributes and len(x.operands) == len(y.operands)
        and all(same_value(p, q) for p, q in zip(x.operands, y.operands))
    )  # fmt: skip


def implied(cond: SSAValue, value: bool, other: SSAValue) -> bool | None:
    """`other`'s value where `cond` is `value`, when that decides it; else None."""
    if same_value(other, cond):
        return value
    known, asked = _interval(cond, value), _interval(other, True)
    if known is None or asked is None or not same_value(known[0], asked[0]):
        return None
    if asked[1] <= known[1] and known[2] <= asked[2]:
        return True
    if known[2] < asked[1] or asked[2] < known[1]:
        return False
    return None


def _leaves(v: SSAValue, root: Operation, into: dict[SSAValue, None]) -> bool:
    """Collect the values defined outside `root` that an index value inside it is computed
    from (through constants, `affine.apply`, `addi`, `subi`, `muli`); False if it is
    computed otherwise, or from a loop variable inside `root`."""
    owner = v.owner
    if not root.is_ancestor(owner if isinstance(owner, Operation) else owner):
        into[v] = None
        return True
    if isinstance(owner, arith.ConstantOp):
        return True
    if isinstance(owner, affine.ApplyOp | arith.AddiOp | arith.SubiOp | arith.MuliOp):
        return all(_leaves(o, root, into) for o in owner.operands)
    return False


def comparison(cmp: arith.CmpiOp, root: Operation) -> Comparison | None:
    """A signed comparison of index values inside `root` as a `Comparison` over the values
    defined outside `root` it is computed from (a Poplar point's `N_o`, a loop variable),
    their ranges `value_range`'s; None otherwise."""
    leaves: dict[SSAValue, None] = {}
    name = arith.CMPI_COMPARISON_OPERATIONS[cmp.predicate.value.data]
    if name.startswith("u") or not all(_leaves(o, root, leaves) for o in (cmp.lhs, cmp.rhs)):
        return None
    dims = list(leaves)
    sides = [affine_expr_of(o, dims) for o in (cmp.lhs, cmp.rhs)]
    if sides[0] is None or sides[1] is None:
        return None
    operands: list[tuple[AffineExpr, int | None]] = [(canonical(e), None) for e in sides if e is not None]
    return Comparison(name, False, canonical(sides[0] - sides[1]), dims, operands, [value_range(d) for d in dims])


def _lattice(v: SSAValue) -> tuple[int, int]:
    """(start, step): `v` is always `start + k * step` (a loop variable with constant bounds,
    or an `affine.apply` whose result is a multiple of a constant: `(id floordiv 63) * 4`);
    (0, 1) when nothing is known."""
    owner = v.owner
    if not isinstance(owner, Operation):
        loop = owner.parent_op()
        bounds = constant_bounds(loop) if isinstance(loop, affine.ForOp) and induction_var(loop) is v else None
        return (bounds[0], step_of(loop)) if bounds is not None and isinstance(loop, affine.ForOp) else (0, 1)
    if isinstance(owner, affine.ApplyOp) and len(owner.map.data.results) == 1:
        return 0, max(1, _multiple(owner.map.data.results[0]))
    return 0, 1


def _multiple(e: AffineExpr) -> int:
    """A constant every value of `e` is a multiple of (0: `e` is 0)."""
    if isinstance(e, AffineConstantExpr):
        return abs(e.value)
    if isinstance(e, AffineBinaryOpExpr) and e.kind == AffineBinaryOpKind.Add:
        return math.gcd(_multiple(e.lhs), _multiple(e.rhs))
    if isinstance(e, AffineBinaryOpExpr) and e.kind == AffineBinaryOpKind.Mul:
        return _multiple(e.lhs) * _multiple(e.rhs)
    return 1


def pinned_range(cond: SSAValue, value: bool, root: Operation) -> dict[SSAValue, Range]:
    """The range of the one value defined outside `root` that `cond`, a comparison of an
    affine function of it, confines when it is `value` (`3 < 499 - N_o` false: N_o >= 496),
    snapped to the values it takes (N_o in 0, 4, ..., 496: N_o = 496); {} when none."""
    cmp = cond.owner
    found = comparison(cmp, root) if isinstance(cmp, arith.CmpiOp) else None
    if found is None:
        return {}
    linear = linear_dims(found.diff)
    if linear is None or len(linear[0]) != 1:
        return {}
    (position, a), b = *linear[0].items(), linear[1]
    name = found.predicate if value else {"eq": "ne", "ne": "eq", "slt": "sge", "sle": "sgt", "sgt": "sle", "sge": "slt"}[found.predicate]
    low, high = {"slt": (None, -1), "sle": (None, 0), "sgt": (1, None), "sge": (0, None), "eq": (0, 0)}.get(name, (None, None))
    if low is None and high is None:
        return {}
    if a < 0:  # a * d + b in [low, high]: d in [ceil((low - b) / a), floor((high - b) / a)], flipped for a < 0
        a, b, low, high = -a, -b, None if high is None else -high, None if low is None else -low
    dim, (known_lo, known_hi) = found.dims[position], found.ranges[position]
    lo = _bound(max, None if low is None else -((b - low) // a), known_lo)
    hi = _bound(min, None if high is None else (high - b) // a, known_hi)
    start, step = _lattice(dim)  # onto the values it takes
    lo = None if lo is None else start - (start - lo) // step * step
    hi = None if hi is None else start + (hi - start) // step * step
    return {dim: (lo, hi)}


def _bound(pick: Callable[[int, int], int], a: int | None, b: int | None) -> int | None:
    return b if a is None else a if b is None else pick(a, b)


def fold_implied(root: Operation, cond: SSAValue, value: bool) -> None:
    """Inline each `scf.if` nested in `root` whose condition `cond` being `value` decides
    (`implied`, or a comparison of loop variables that `pinned_range` decides), the branch
    taken; then erase the pure ops left unused."""
    pinned = pinned_range(cond, value, root)
    for op in list(root.walk()):
        if not isinstance(op, scf.IfOp) or op.parent is None:
            continue
        taken = implied(cond, value, op.cond)
        other = comparison(op.cond.owner, root) if pinned and isinstance(op.cond.owner, arith.CmpiOp) else None
        if taken is None and other is not None and set(pinned) & set(other.dims):
            taken = other.decide(pinned)
        if taken is not None:
            inline_if(op, taken)
    for op in reversed(list(root.walk())):
        if op is not root and isinstance(op, HOISTABLE) and not any(r.uses for r in op.results):
            Rewriter.erase_op(op)


__all__ = [
    "COLLECTIVE", "HOISTABLE", "MAX_UNSWITCH_OPS", "comparison", "conjuncts", "fold_implied", "invariant_part", "pinned_range", "implied", "invariant_slice", "same_value",
    "unswitch_loop",
]
