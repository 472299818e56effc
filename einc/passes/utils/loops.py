"""Building and inspecting `affine.for` loop nests.

Mechanism shared by the ein lowering and the schedule transforms: they decide which nest to
build or where; these functions only build or read IR.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from xdsl.builder import Builder
from xdsl.dialects import affine
from xdsl.dialects.builtin import IndexType, MemRefType
from xdsl.ir import Block, Operation, Region, SSAValue
from xdsl.rewriter import InsertPoint


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
        loop = affine.ForOp.from_region((), (), (), (), 0, extent, Region(block))
        builder.insert(loop, point)
        loops.append(loop)
        ivs.append(block.args[0])
        point = InsertPoint.before(block.last_op)  # type: ignore[arg-type]
    return LoopNest(tuple(loops), tuple(ivs), point)


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


def constant_trip_range(loop: affine.ForOp) -> tuple[int, int] | None:
    """`(lower, upper)` of a loop with constant bounds (upper exclusive), else None."""
    lb, ub = loop.lowerBoundMap.data, loop.upperBoundMap.data
    if lb.num_dims or lb.num_symbols or ub.num_dims or ub.num_symbols:
        return None
    if len(lb.results) != 1 or len(ub.results) != 1:
        return None
    return lb.eval([], [])[0], ub.eval([], [])[0]
