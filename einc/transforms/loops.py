"""Building and inspecting `affine.for` loop nests.

Mechanism shared by the ein lowering and the schedule transforms: they decide which nest to
build or where; these functions only build or read IR.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import cmp_to_key

from xdsl.builder import Builder
from xdsl.dialects import affine, memref
from xdsl.dialects.builtin import AffineMapAttr, IndexType, IntegerAttr, MemRefType
from xdsl.ir.affine import AffineExpr, AffineMap
from xdsl.ir import Attribute, Block, Operation, Region, SSAValue
from xdsl.rewriter import InsertPoint

from einc.transforms.loop_analysis import walk_ops, walk_order
from einc.transforms.ranges import constant_trip_range as constant_trip_range  # its home


@dataclass(frozen=True)
class LoopNest:
    """A perfect nest built by `build_loop_nest`: loops and induction variables outermost
    first, and the insertion point of the innermost body (just before its `affine.yield`)."""

    loops: tuple[affine.ForOp, ...]
    ivs: tuple[SSAValue, ...]
    body: InsertPoint


def build_loop_nest(
    builder: Builder, extents: Sequence[int], names: Sequence[str | None] = ()
) -> LoopNest:
    """Insert a perfect nest of `affine.for %iv = 0 to extent` at the builder's insertion
    point, one loop per extent, outermost first; `names` (optional, same length) become the
    induction variables' name hints.

    Contract: every extent is a positive constant; each loop body ends with `affine.yield`
    and holds only the next loop. With no extents nothing is inserted, `ivs` is empty and
    `body` is the builder's insertion point (the body then runs exactly once). The builder's
    insertion point is left unchanged. Never fails.
    """
    assert all(e > 0 for e in extents), f"non-positive loop extent in {list(extents)}"
    loops: list[affine.ForOp] = []
    ivs: list[SSAValue] = []
    point = builder.insertion_point
    for depth, extent in enumerate(extents):
        block = Block(arg_types=[IndexType()])
        if depth < len(names) and names[depth]:
            block.args[0].name_hint = names[depth]
        block.add_op(affine.YieldOp.get())
        lower, upper, step = _constant_bounds(extent)
        loop = affine.ForOp.from_region((), (), (), (), lower, upper, Region(block), step)
        builder.insert(loop, point)
        loops.append(loop)
        ivs.append(block.args[0])
        point = InsertPoint.before(block.last_op)  # type: ignore[arg-type]
    return LoopNest(tuple(loops), tuple(ivs), point)


@functools.lru_cache(maxsize=1024)
def _constant_bounds(extent: int) -> tuple[AffineMapAttr, AffineMapAttr, IntegerAttr]:
    """The bound maps and step of `affine.for 0 to extent`, made once per extent (a program
    builds a nest per statement, mostly over the same few extents)."""
    zero = AffineMapAttr(AffineMap(0, 0, (AffineExpr.constant(0),)))
    return zero, AffineMapAttr(AffineMap(0, 0, (AffineExpr.constant(extent),))), IntegerAttr.from_index_int_value(1)


def build_elementwise_nest(
    builder: Builder,
    memref_type: MemRefType,
    body: Callable[[Builder, Sequence[SSAValue]], None],
    names: Sequence[str | None] = (),
) -> LoopNest:
    """Insert a nest over every element of a buffer of `memref_type` (row-major order) and
    call `body(builder, ivs)` with a builder positioned in the innermost body.

    Contract: as `build_loop_nest`; a rank-0 buffer gets no loop and `body` is called once
    at the builder's insertion point. The builder's insertion point is left unchanged.
    """
    nest = build_loop_nest(builder, memref_type.get_shape(), names)
    body(Builder(nest.body), nest.ivs)
    return nest


def enclosing_loops(op: Operation) -> list[affine.ForOp]:
    """The `affine.for` ops around `op`, outermost first (other ops in between are skipped)."""
    loops: list[affine.ForOp] = []
    parent = op.parent_op()
    while parent is not None:
        if isinstance(parent, affine.ForOp):
            loops.append(parent)
        parent = parent.parent_op()
    return loops[::-1]


def induction_var(loop: affine.ForOp) -> SSAValue:
    return loop.body.block.args[0]


def is_stored(buffer: SSAValue) -> bool:
    """Whether an `affine.store` or `memref.store` writes `buffer` (through its uses)."""
    return any(use.index == 1 and type(use.operation) in _STORES for use in buffer.uses)


_STORES = (affine.StoreOp, memref.StoreOp)
"""Exact types, compared with `type(op) in`: `isinstance` on ops goes through ABC checks."""


STMT = "einc.stmt"
"""The attribute naming the statement a loop computes (loop_transforms.STMT_ATTR)."""


class LoopIndex:
    """The `affine.for` ops under `root` (a module) by their statement tag (`einc.stmt`), kept
    up to date as transforms change the module, so that matching a statement's loops costs
    about what it finds, not a walk of the whole module (a schedule matches once per
    statement: walks made its interpretation quadratic in the program size).

    The module is split into *units*, the ops in the bodies of `root`'s children (the
    top-level ops of each function: a statement's nest, an allocation), and each unit's loops
    are listed per tag. The contract with the code that changes the module:
    - before a transform runs, `touch(loop)` for each loop it is given. A transform changes
      only the units holding those loops, and there only the loops nested in them, and the
      loops it makes carry the tags of loops nested in them (copies, tiles; or no tag): so
      only those tags' lists of those units go stale (with a copy from one unit to another,
      in each of them). It may insert new units next to the units it changes, and erase
      any units (dropped when found detached);
    - any other change (a pass run over the module) calls `invalidate()`: everything is
      listed again at the next lookup.
    `loops_of(stmt)` returns the loops tagged `stmt`, in `root.walk()` order.

    `unwritten()` gives the function arguments no store writes (no `affine.store` or
    `memref.store` has them as its buffer: a program's inputs), found once: a transform
    never stores into a buffer that had no store (its stores are copies of stores, or go
    to buffers it makes or to a tensor already written), so the set stays true until
    `invalidate()`. compute_at asks it which of a producer's inputs cannot be written inside
    the consumer, instead of going through the uses of an input every statement reads."""

    def __init__(self, root: Operation):
        self.root = root
        self._built = False
        self._loops: dict[Operation, dict[Attribute | None, list[affine.ForOp]]] = {}
        """unit -> tag -> the loops with that tag nested in the unit (it included), in order"""
        self._units: dict[Attribute | None, dict[Operation, None]] = {}
        """tag -> the units holding loops with that tag"""
        self._stale: dict[Attribute | None, dict[Operation, None]] = {}
        """tag -> the units whose loops with that tag a transform may have changed"""
        self._touched: dict[Operation, tuple[Block | None, Operation | None, Operation | None]] = {}
        """unit -> its block and neighbours when touched (new units appear between them)"""
        self._touched_tags: set[Attribute | None] = set()
        """the tags of the loops in the touched loops (stale in each touched unit)"""
        self._unwritten: frozenset[SSAValue] | None = None

    def invalidate(self) -> None:
        self._built = False
        self._unwritten = None

    def unwritten(self) -> frozenset[SSAValue]:
        if self._unwritten is None:
            found: set[SSAValue] = set()
            for shell in self._shells():
                for region in shell.regions:
                    for block in region.blocks:
                        found.update(arg for arg in block.args if not is_stored(arg))
            self._unwritten = frozenset(found)
        return self._unwritten

    def touch(self, loop: affine.ForOp, nested: bool = True) -> None:
        """Before a transform given `loop` runs (the contract above). `nested=False`: the
        transform changes no loop nested in `loop`, it only inserts loops (copies of loops
        it is given too: compute_at's consumer loop), and the loops of the unit need not
        be gone through (a consumer that fused a long chain holds one loop per statement)."""
        if not self._built:
            return
        unit = self._unit_of(loop)
        if unit is None:
            self._built = False  # a change above the units: list everything again
            return
        if unit not in self._touched:
            self._touched[unit] = (unit.parent_block(), unit.prev_op, unit.next_op)
        tags = self._touched_tags
        tags.add(loop.attributes.get(STMT))
        if not nested:
            return
        if loop is unit:  # every loop listed in the unit is inside it
            tags.update(self._loops.get(unit, {}))
            return
        for inner in walk_ops(loop):  # a loop inside a unit that may hold many statements
            if isinstance(inner, affine.ForOp):
                tags.add(inner.attributes.get(STMT))

    def loops_of(self, stmt: Attribute) -> list[affine.ForOp]:
        if not self._built:
            self._build()
        elif self._touched:
            self._refresh()
        for unit in list(self._stale.pop(stmt, {})):
            self._forget(unit)
            if self._unit_of(unit) is unit:
                self._add(unit)
        units = []
        for unit in list(self._units.get(stmt, ())):
            if self._unit_of(unit) is unit:
                units.append(unit)
            else:  # erased
                self._forget(unit)
        if len(units) > 1:
            units.sort(key=cmp_to_key(walk_order))
        found = [loop for unit in units for loop in self._loops[unit][stmt] if loop.attributes.get(STMT) == stmt]
        shells = [op for op in self._shells() if isinstance(op, affine.ForOp) and op.attributes.get(STMT) == stmt]
        if shells:  # not made by einc: a loop directly in the module
            found = sorted([*shells, *found], key=cmp_to_key(walk_order))
        return found

    # -- internals --
    def _shells(self) -> list[Operation]:
        return [op for region in self.root.regions for block in region.blocks for op in block.ops]

    def _unit_of(self, op: Operation) -> Operation | None:
        """The ancestor of `op` (or `op`) two levels below `root`; None above that or when
        `op` is not under `root`."""
        path = [op]
        while (parent := path[-1].parent_op()) is not None and parent is not self.root:
            path.append(parent)
        if parent is not self.root or len(path) < 2:
            return None
        return path[-2]

    def _build(self) -> None:
        self._loops.clear()
        self._units.clear()
        self._stale.clear()
        self._touched.clear()
        self._touched_tags.clear()
        for shell in self._shells():
            for region in shell.regions:
                for block in region.blocks:
                    for unit in block.ops:
                        self._add(unit)
        self._built = True

    def _add(self, unit: Operation) -> None:
        lists: dict[Attribute | None, list[affine.ForOp]] = {}
        for op in unit.walk():
            if isinstance(op, affine.ForOp):
                lists.setdefault(op.attributes.get(STMT), []).append(op)
        self._loops[unit] = lists
        for tag in lists:
            self._units.setdefault(tag, {})[unit] = None

    def _forget(self, unit: Operation) -> None:
        for tag in self._loops.pop(unit, {}):
            self._units[tag].pop(unit, None)
            self._stale.get(tag, {}).pop(unit, None)

    def _refresh(self) -> None:
        """List the units the touched units' transforms inserted next to them."""
        touched, self._touched = self._touched, {}
        tags, self._touched_tags = self._touched_tags, set()
        for unit in touched:
            for tag in tags:
                self._stale.setdefault(tag, {})[unit] = None
        for unit, (block, prev, next_) in touched.items():
            # the units between the neighbours it had; a neighbour erased too, if touched,
            # hands over its own neighbour
            while prev is not None and prev.parent is not block and prev in touched:
                prev = touched[prev][1]
            while next_ is not None and next_.parent is not block and next_ in touched:
                next_ = touched[next_][2]
            shell = block.parent_op() if block is not None else None
            if block is None or shell is None or shell.parent_op() is not self.root:
                self._build()
                return
            if prev is None or prev.parent is block:
                stop_at_listed = next_ is not None and next_.parent is not block  # next erased
                op = prev.next_op if prev is not None else block.first_op
                while op is not None and op is not next_:
                    if op not in self._loops:
                        self._add(op)
                    elif stop_at_listed:
                        break
                    op = op.next_op
            elif next_ is not None and next_.parent is block:
                op = next_.prev_op  # back to the first unit listed before
                while op is not None and op not in self._loops:
                    self._add(op)
                    op = op.prev_op
            else:
                self._build()  # both neighbours erased, untouched: list everything again
                return
            if unit not in self._loops and self._unit_of(unit) is unit:
                self._add(unit)  # moved out of its span
