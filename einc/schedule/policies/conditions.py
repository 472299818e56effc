"""Conditions out of loops: the policy that applies index-set splitting
(einc.transforms.index_split) to a scheduled payload, shared by the CPU default schedule
(einc.schedule.policies.cpu.default_schedule) and the CPU tuning sketches
(einc.tune.sketches.cpu), both through `split_conditions_out(builder)` after the nests are
scheduled; and, before them, `phase_nests(builder, top)` (used by the CPU default): a nest
whose output loops carry a stride test split into one dense nest per output phase
(split_phases on the output loops, distribute on the loops above them, then the window
loops' phases), each then blocked like any convolution, its loops named by handles matched
inside it (the nests share their tags; `nest_root`).

0. A perfect nest with a stride test whose innermost loop is a reduction (the per-nest
   policy found no unit-stride input in it) gets its unit-stride output loop innermost,
   vectorized.
1. Stride tests: a loop whose variable moves a `(x + k) mod s` that a comparison reads
   (a transposed convolution's `(HO + p - KH) % 2 == 0`) is split into `s` phases
   (`transform.einc.split_phases`), loops without a carried dependence first (the output
   rows and columns), then the others (the window loops: legal when the phases, once their
   skipped points are gone, touch disjoint elements). Each output phase then keeps only the
   window taps that reach it, and its `//` indices are affine.
2. Bound tests: a loop whose range a comparison splits into a boundary and an interior of
   at least half its iterations (a padded convolution's rows and columns) is cut there
   (`transform.einc.split_conditions`), outer loops first: the interior reads no condition.
   A parallel loop is cut inside (`split_conditions ... inside`: the pieces as branches of
   one loop), so that its boundary pieces run among the threads with the interior.
"""

from __future__ import annotations

from collections.abc import Iterator

from xdsl.dialects import affine, arith, func
from xdsl.dialects.builtin import StringAttr
from xdsl.ir import SSAValue
from xdsl.ir.affine import AffineBinaryOpExpr, AffineBinaryOpKind, AffineConstantExpr, AffineExpr

from einc.ir.attrs import PARALLEL_ATTR
from einc.schedule.builder import IllegalStep, ScheduleBuilder
from einc.transforms import loop_transforms as lt
from einc.transforms.distribute import pieces as distribute_pieces
from einc.transforms.index_split import MAX_PIECES, canonical, comparison_expr, linear_dims, split_points
from einc.transforms.loop_analysis import (
    band_from,
    carried_dependence,
    constant_bounds,
    determined_loops,
    induction_var,
    linear_form,
    perfect_band,
    trip_count,
    written_groups,
)

MAX_POLICY_STRIDE = 4
"""The largest stride the policy splits into phases (each phase is a copy of the body)."""


Tag = tuple[str, str, bool]


def _tag(loop: affine.ForOp) -> Tag | None:
    stmt, axis = loop.attributes.get(lt.STMT_ATTR), loop.attributes.get(lt.AXIS_ATTR)
    if not isinstance(stmt, StringAttr) or not isinstance(axis, StringAttr) or "einc.copy" in loop.attributes:
        return None
    return stmt.data, axis.data, "einc.init" in loop.attributes


def _mods(e: AffineExpr) -> Iterator[tuple[AffineExpr, int]]:
    if isinstance(e, AffineBinaryOpExpr):
        if e.kind == AffineBinaryOpKind.Mod and isinstance(e.rhs, AffineConstantExpr):
            yield e.lhs, e.rhs.value
        yield from _mods(e.lhs)
        yield from _mods(e.rhs)


def phase_stride(loop: affine.ForOp) -> int | None:
    """The stride `s` of a `(... + c * x + ...) mod s` test in `loop`'s body that its variable
    `x` moves (`c` not a multiple of `s`), or None."""
    iv = induction_var(loop)
    for op in loop.body.walk():
        if not isinstance(op, arith.CmpiOp):
            continue
        found = comparison_expr(op)
        if found is None:
            continue
        expr, dims, _ = found
        position = next((k for k, d in enumerate(dims) if d is iv), None)
        if position is None:
            continue
        for inner, s in _mods(expr):
            form = linear_dims(canonical(inner))
            if form is not None and 1 < s and form[0].get(position, 0) % s:
                return s
    return None


def worth_splitting(loop: affine.ForOp) -> bool:
    """Whether `split_conditions` would cut `loop` into at most MAX_PIECES pieces, one of them
    at least half its iterations (a padded row's interior, not a 3-tap window's taps)."""
    bounds, n = constant_bounds(loop), trip_count(loop)
    if bounds is None or not n:
        return False
    points = split_points(loop)
    if isinstance(points, lt.Failure) or not points or len(points) + 1 > MAX_PIECES:
        return False
    edges = [bounds[0], *points, bounds[1]]
    return max(hi - lo for lo, hi in zip(edges, edges[1:])) * 2 >= bounds[1] - bounds[0]


def nest_root(b: ScheduleBuilder, top: affine.ForOp) -> SSAValue | None:
    """The handle to match `top`'s inner loops in when other nests of its statement share
    their tags (its phases, `phase_nests`), else None (a match anywhere finds the same)."""
    stmt, block = top.attributes.get(lt.STMT_ATTR), top.parent_block()
    if block is None:
        return None
    siblings = [op for op in block.ops if isinstance(op, affine.ForOp) and op.attributes.get(lt.STMT_ATTR) == stmt
                and "einc.init" not in op.attributes]  # fmt: skip
    return b.handle(top) if len(siblings) > 1 else None


def phase_nests(b: ScheduleBuilder, top: affine.ForOp) -> list[affine.ForOp]:
    """Before the per-nest schedule: a perfect nest whose output loops carry a stride test (a
    transposed convolution's `(HO + 1 - KH) % 2 == 0`) split into one nest per output phase
    (`split_phases` on each such loop, then `distribute` on the loops above the phases), and
    in each nest the window loops split by phase too, which keeps the one phase of taps that
    reaches it: each nest is a dense convolution (2x2 taps for a 4x4 window of stride 2, the
    `//` indices affine, no stride test left), blocked like any other. Every loop of every
    nest is named by a handle matched inside its nest (they share tags). Returns the nests'
    outermost loops; empty when `top` is no such nest (or a step is refused: then the nest
    is left to `split_conditions_out`)."""
    band = band_from(top)
    if not all(_tag(loop) is not None for loop in band) or not perfect_band(band):
        return []
    outputs = [(_axis(loop), s) for loop in band[1:]
               if (s := phase_stride(loop)) is not None and s <= MAX_POLICY_STRIDE and carried_dependence(loop) is None]  # fmt: skip
    if not outputs:
        return []
    stmt = _stmt(top)
    nests = [b.handle(top)]
    if len(b.loops(nests[0])) != 1:
        return []
    for axis, stride in outputs:
        split: list[SSAValue] = []
        for h in nests:
            found = b.try_(lambda: _phase_nests(b, stmt, axis, stride, h))  # noqa: B023
            if isinstance(found, lt.Failure):
                return []
            split += found
        nests = split
    tops: list[affine.ForOp] = []
    for h in nests:
        (nest,) = b.loops(h)
        while (window := _window_phase(nest)) is not None:
            loop, stride = window
            if isinstance(b.try_(lambda: b.split_phases(b.match(stmt, _axis(loop), root=h), stride)), lt.Failure):  # noqa: B023
                break
        b.remember([nest], [h])
        inner = band_from(nest)[1:]
        if perfect_band(band_from(nest)) and all(_tag(loop) is not None for loop in inner):
            b.remember(inner, [b.match(stmt, _axis(loop), root=h) for loop in inner])
        tops.append(nest)
    return tops


def _window_phase(nest: affine.ForOp) -> tuple[affine.ForOp, int] | None:
    """The first loop of `nest`'s band with a stride test the policy splits, and its stride."""
    for loop in band_from(nest):
        s = phase_stride(loop)
        if s is not None and s <= MAX_POLICY_STRIDE:
            return loop, s
    return None


def _phase_nests(b: ScheduleBuilder, stmt: str, axis: str, stride: int, h: SSAValue) -> list[SSAValue]:
    """One nest (handle `h`) split by the phases of its loop `axis`: the loops above the
    phases distributed, innermost first. Returns the handles of the new nests (in order)."""
    phases = b.split_phases(b.match(stmt, axis, root=h), stride)
    loops = b.loops(phases)
    (top,) = b.loops(h)
    parent = loops[0].parent_op()
    above: list[affine.ForOp] = []
    while isinstance(parent, affine.ForOp):
        above.append(parent)
        if parent is top:
            break
        parent = parent.parent_op()
    if not above or above[-1] is not top:
        raise IllegalStep(f"the phases of {axis} are not inside the nest")
    copies: tuple[SSAValue, ...] = (phases,)
    for loop in above:
        handle = h if loop is top else b.match(stmt, _axis(loop), root=h)
        copies = b.distribute(handle, len(distribute_pieces(loop)))
    return list(copies)


def _stmt(loop: affine.ForOp) -> str:
    tag = _tag(loop)
    assert tag is not None
    return tag[0]


def _axis(loop: affine.ForOp) -> str:
    tag = _tag(loop)
    assert tag is not None
    return tag[1]


def _output_innermost(b: ScheduleBuilder) -> None:
    """In a perfect nest with a stride test whose innermost loop is a reduction, move the
    last parallel loop the output is unit-stride in innermost and vectorize it (the inputs'
    `//` indices become unit-stride there once the phases are split; the per-nest policy
    left the nest alone for want of a unit-stride input)."""
    for f in b.payload.walk():
        if not isinstance(f, func.FuncOp) or not f.body.blocks:
            continue
        for top in [op for op in f.body.block.ops if isinstance(op, affine.ForOp)]:
            band = band_from(top)
            if not all(_tag(loop) is not None for loop in band) or not perfect_band(band):
                continue
            if not any(phase_stride(loop) for loop in band):
                continue
            groups = written_groups(top)
            if len(groups) != 1:
                continue
            ((_, group),) = groups.items()
            ivs = [induction_var(loop) for loop in band]
            fixed = determined_loops(group, ivs)
            stores = [a for a in group if a.write]
            store_map = stores[0].map if stores else None
            if ivs[-1] in fixed or store_map is None or not store_map.results:
                continue
            form = linear_form(store_map.results[-1], stores[0].operands)
            unit = [loop for loop in band if induction_var(loop) in fixed and form is not None
                    and form[0].get(induction_var(loop)) == 1]  # fmt: skip
            if not unit:
                continue
            p = unit[-1]
            order = [*(loop for loop in band if induction_var(loop) in fixed and loop is not p),
                     *(loop for loop in band if induction_var(loop) not in fixed), p]  # fmt: skip
            reordered = b.try_(lambda: b.reorder([b.handle(loop) for loop in order]))  # noqa: B023
            if isinstance(reordered, lt.Failure):
                continue
            b.remember([b.loop(h) for h in reordered], reordered)
            last = reordered[-1]
            b.try_(lambda: b.vectorize(last))  # noqa: B023


def _guarded(b: ScheduleBuilder) -> dict[Tag, list[affine.ForOp]]:
    """The payload's loops (by tag, outer tags first) of the tags some loop of which encloses
    an integer comparison; one walk (a program without conditions costs one walk in all)."""
    by_tag: dict[Tag, list[affine.ForOp]] = {}
    guarded: set[Tag] = set()
    for op in b.payload.walk():
        if isinstance(op, affine.ForOp):
            tag = _tag(op)
            if tag is not None:
                by_tag.setdefault(tag, []).append(op)
        elif isinstance(op, arith.CmpiOp):
            parent = op.parent_op()
            while parent is not None:
                if isinstance(parent, affine.ForOp) and (tag := _tag(parent)) is not None:
                    guarded.add(tag)
                parent = parent.parent_op()
    return {tag: loops for tag, loops in by_tag.items() if tag in guarded}


def split_conditions_out(b: ScheduleBuilder) -> None:
    """Split the payload's loops (all statements) by stride phases, then at bound tests (the
    module docstring); every step is tried, an illegal one is left out."""
    if not _guarded(b):
        return
    _output_innermost(b)
    for carried in (False, True):
        guarded = _guarded(b)
        for tag in list(guarded):
            loops = guarded.get(tag, [])  # as the splits before left them
            strides = {s for loop in loops if (s := phase_stride(loop)) is not None and s <= MAX_POLICY_STRIDE}
            if len(strides) != 1 or any((carried_dependence(loop) is not None) != carried for loop in loops):
                continue
            (stride,) = strides
            stmt, axis, init = tag
            if not isinstance(b.try_(lambda: b.split_phases(b.match(stmt, axis, init), stride)), lt.Failure):  # noqa: B023
                guarded = _guarded(b)
    guarded = _guarded(b)
    for tag in list(guarded):
        loops = guarded.get(tag, [])  # as the splits before left them
        if any(worth_splitting(loop) for loop in loops):
            stmt, axis, init = tag
            inside = any(PARALLEL_ATTR in loop.attributes for loop in loops)
            if not isinstance(b.try_(lambda: b.split_conditions(b.match(stmt, axis, init), inside)), lt.Failure):  # noqa: B023
                guarded = _guarded(b)
