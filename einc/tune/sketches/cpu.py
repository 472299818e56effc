"""CPU sketch rules (the C target): multi-level tiling of space and reduction loops (Ansor's
SSRSRS: outer space tiles parallel, reduction tiles, inner space tiles, inner reductions,
a register tile unrolled and vectorized innermost) with the output tile staged in registers
(`cache_write` local) and the vector input packed (`cache_read` local) as variants; the
same after the default's producer fusion (`compute_at`); consumer fusion
(`reverse_compute_at`) into a tiled contraction; `rfactor` of a reduction with little
spatial parallelism. Nests a rule does not handle get the default policy's per-nest schedule
(einc.schedule.policies.cpu). The `policy` rule starts from the default policy's own plan
(channel or row blocking, packing, parallel loop, condition splitting) with one structural
choice changed, its size knobs kept. Knob names: `stmt.axis.l1` (how many inner tiles an outer tile
covers; on the first spatial axis this sets the parallel grain), `stmt.axis.l2` (the
register tile), `stmt.axis.rfactor`.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field

from xdsl.dialects import affine, func
from xdsl.ir import SSAValue

from einc.transforms.loop_analysis import band_from
from einc.transforms import loop_transforms as lt
from einc.schedule.builder import IllegalStep, ScheduleBuilder
from einc.schedule.policies.conditions import split_conditions_out
from einc.targets import get_target
from einc.schedule.policies import cpu as policy
from einc.tune.sketches.base import (
    KnobRole,
    Nest,
    RuleContext,
    Sketch,
    nearest,
    tag,
    tile_options,
    top_loops,
)

MAX_REBUILDS = 8
RFACTOR_MAX_SPATIAL = 16
"""A reduction whose output has at most this many elements gets an rfactor sketch."""
RFACTOR_MIN_TRIP = 32


@dataclass
class _Build:
    """One sketch under construction: the builder and the knob roles made so far."""

    b: ScheduleBuilder
    ctx: RuleContext
    roles: dict[str, KnobRole] = field(default_factory=dict)

    def knob(self, nest: Nest, axis: str, level: int, kind: str, value: int, options: tuple[int, ...]) -> SSAValue:
        name = f"{nest.stmt}.{axis}.{'rfactor' if kind == 'rfactor' else f'l{level}'}"
        self.roles[name] = KnobRole(nest.stmt, axis, level, nest.extent(axis), kind)
        return self.b.knob(name, value, options)


Scheduler = Callable[[_Build, Nest, affine.ForOp], bool]
"""`scheduler(build, nest, top) -> bool`: schedules one nest, False when it does not apply."""


def build_sketch(ctx: RuleContext, name: str, description: str, scheduler: Scheduler, fuse: bool = False,
                 fallback: bool = True, pre: Callable[[_Build], None] | None = None) -> Sketch | None:  # fmt: skip
    """The sketch where `scheduler(build, nest, top) -> bool` schedules the nests it handles
    (the default per-nest policy the rest, or nothing without `fallback`); `pre(build)`
    first, then with `fuse` the default's producer fusion. A nest whose steps the payload
    refuses with the sketch's default values is left to the default policy (the sketch is
    rebuilt without it); None when no nest was handled."""
    skip: set[int] = set()
    for _ in range(MAX_REBUILDS):
        b = ScheduleBuilder(ctx.loops.clone(), f"<sketch {name}>")
        build = _Build(b, ctx)
        handled = 0
        fused: set[affine.ForOp] = set()
        if pre is not None:
            pre(build)
            handled += 1
        tops = top_loops(b.payload)
        if fuse:
            for f in b.payload.walk():
                if isinstance(f, func.FuncOp) and f.body.blocks:
                    fused |= set(policy.fuse_producers(list(f.body.block.ops), b))
            if not fused:
                return None
        failed = None
        for nest, top in zip(ctx.nests, tops):
            if top.parent_block() is None or top in fused:
                continue
            if nest.position not in skip:
                try:
                    if scheduler(build, nest, top):
                        handled += 1
                        continue
                except IllegalStep:
                    failed = nest.position
                    break
            if fallback:
                policy.schedule_nest(top, b, ctx.lanes)
        if failed is not None:
            skip.add(failed)
            continue
        if not handled:
            return None
        if get_target(ctx.target).sketches == "cpu":  # as the CPU default (device mappings keep their loops)
            split_conditions_out(b)
        return Sketch(name, b.finish(), description, build.roles)
    return None


def _vector_input(nest: Nest, j: str) -> str | None:
    """The input read at unit stride along `j` that moves with a reduction (matmul's B)."""
    for t in nest.tensors:
        if not t.written and t.unit_axis == j and t.axes & set(nest.reduction):
            return t.name
    return None


def _strided_input(nest: Nest, j: str) -> str | None:
    """An input that moves with `j` and with a reduction but not at unit stride along `j` (a
    strided convolution's input, `x[.., WO * 2 + KW]`; a transposed one's, `x[.., (WO - KW)
    // 2]`), when the nest also reads a weight (an input moving with a reduction but not
    with `j`) and the output is unit-stride along `j`: a contraction whose register tile
    still vectorizes along the output's `j` (strided loads of the input) rather than along
    a short innermost reduction."""
    out = nest.output()
    reductions = set(nest.reduction)
    weight = any(not t.written and j not in t.axes and t.axes & reductions for t in nest.tensors)
    if out is None or out.unit_axis != j or not weight:
        return None
    return next((t.name for t in nest.tensors if not t.written and j in t.axes and t.axes & reductions), None)


def _weight(nest: Nest, j: str) -> str | None:
    """The input that moves with a reduction but not with `j` (matmul's A, a convolution's
    weight): the one a register tile broadcasts, and `.pw` packs."""
    reductions = set(nest.reduction)
    return next((t.name for t in nest.tensors if not t.written and j not in t.axes and t.axes & reductions), None)


def _row_axis(nest: Nest, j: str, vector_input: str | None) -> str | None:
    """The spatial axis tiled into unrolled rows: the last one (but j) the vector input does
    not move with (matmul's rows, a convolution's output channels); else the last one the
    weight moves with (a grouped convolution, whose input moves with the channel through
    `F // group`); else the one before j."""
    others = [s for s in nest.spatial if s != j and nest.extent(s) >= 2]
    if vector_input is not None:
        vin = next(t for t in nest.tensors if t.name == vector_input)
        free = [s for s in others if s not in vin.axes]
        if free:
            return free[-1]
    weight = _weight(nest, j)
    if weight is not None:
        moving = next(t.axes for t in nest.tensors if t.name == weight)
        if rows := [s for s in others if s in moving]:
            return rows[-1]
    return others[-1] if others else None


PARALLEL_CHOICES = 2
"""Sketch variants per choice of the parallel loop: the k-th outer space tile (of an axis
longer than 1) moved outermost and run in parallel (`.p1`: the second; the first is the
plain sketch)."""


def tile_nest(build: _Build, nest: Nest, top: affine.ForOp, cache_write: bool = False,
              cache_read: bool = False, consumer: affine.ForOp | None = None, parallel: int = 0,
              pack_weight: bool = False) -> bool:  # fmt: skip
    """Multi-level tiling of one nest; False when it does not apply. `parallel`: which outer
    space tile (of the axes longer than 1, in tile order) runs outermost in parallel (False
    when there is no such tile); `pack_weight`: the weight's tile (`_weight`) copied to a
    local array per outer reduction tile (cache_read)."""
    if not nest.perfect or nest.init or not nest.spatial:
        return False
    b, lanes = build.b, build.ctx.lanes
    out = nest.output()
    assert out is not None
    j = nest.spatial[-1]
    vin = _vector_input(nest, j)
    inputs_unit_r = nest.reduction and any(not t.written and t.unit_axis == nest.reduction[-1] for t in nest.tensors)
    reduce_inner = bool(nest.reduction) and vin is None and bool(inputs_unit_r)
    if reduce_inner and nest.extent(nest.reduction[-1]) < policy.REDUCTION_MIN_TRIP:
        # a strided or transposed convolution: the input is unit-stride only along the short
        # kernel window; the register tile vectorizes along the output's unit axis instead
        vin = _strided_input(nest, j)
        reduce_inner = vin is None
    i = None if reduce_inner else _row_axis(nest, j, vin)
    if pack_weight and (reduce_inner or _weight(nest, j) is None):
        return False
    vectors, rows = policy.register_tile(lanes)
    handles = dict(zip(nest.axes, (b.handle(x) for x in band_from(top))))
    # the outer space tiles in band order, but a matmul-like nest (one reduction, a vector
    # input) puts the vector axis's first (after the batch axes the vector input moves
    # with), as the default does: each parallel task owns a panel of the vector input
    # across every row tile
    spatial = list(nest.spatial)
    panel = vin is not None and len(nest.reduction) == 1 and not reduce_inner and nest.extent(j) > 1
    if panel:
        moving = next(t.axes for t in nest.tensors if t.name == vin)
        spatial = [s for s in spatial if s in moving and s != j] + [j] + [s for s in spatial if s not in moving]
    # the parallel tile: the `parallel`-th of the axes longer than 1 (at batch 1, never the
    # batch axis), moved outermost
    long = [s for s in spatial if nest.extent(s) > 1]
    if parallel >= max(1, len(long)):
        return False
    first = long[parallel] if long else None
    S0: list[SSAValue] = []
    S1: list[SSAValue] = []
    S2: dict[str, SSAValue] = {}
    unroll_knob = None
    for s in spatial:
        e, h = nest.extent(s), handles[s]
        if e == 1:  # nothing to tile
            S0.append(h)
            continue
        inner, inner_opts = 1, (1,)
        if s == j and not reduce_inner:
            opts = tile_options(e, hi=128, dividing=True)
            inner, inner_opts = nearest([v for v in opts if v <= vectors * lanes] or opts, vectors * lanes), opts
            h, S2[s] = b.tile(h, build.knob(nest, s, 2, "tile", inner, opts))
        elif s == i:
            opts = tuple(sorted(set(tile_options(e, hi=8)) | ({rows} if rows <= e else set())))
            if s != nest.axes[0]:
                # the peeled rows' copy would sit inside the loops above i, and the nest would
                # no longer be perfect: only sizes that divide i (no copy)
                opts = tuple(v for v in opts if e % v == 0) or (1,)
            inner, inner_opts = nearest(opts, rows), opts
            unroll_knob = build.knob(nest, s, 2, "unroll", inner, opts)
            # the rows past the last whole tile in a copy of the nest (none when the rows
            # divide i): every tile of the loop kept is whole, and unrolls
            h, _ = b.peel(h, unroll_knob)
            h, S2[s] = b.tile(h, unroll_knob)
        # the default outer tiles: a panel of j and (matmul-like, j first) every row tile
        # under it, or a few rows
        span = {j: 64, i: e if panel else 32}.get(s, 1)
        opts = tile_options(math.ceil(e / min(inner_opts)))
        kind = "parallel" if s == first else "tile"
        want = max(1, span // inner)
        if s == first:  # enough parallel tasks by default: PARALLEL_MIN_TRIP, or one per tile
            want = max(1, min(want, math.ceil(e / inner) // policy.PARALLEL_MIN_TRIP))
        outer, middle = b.tile(h, build.knob(nest, s, 1, kind, nearest(opts, want), opts))
        S0.append(outer)
        S1.append(middle)
    # the reductions keep their relative order (reorder refuses to reassociate a sum across
    # them): the first is tiled, its inner tile and the others run in the inner level
    R0: list[SSAValue] = []
    R1 = [handles[r] for r in nest.reduction[1:]]
    if nest.reduction:
        r, e = nest.reduction[0], nest.extent(nest.reduction[0])
        opts = tile_options(e, lo=min(e, 4), hi=512)
        r0, r1 = b.tile(handles[r], build.knob(nest, r, 1, "tile", nearest(opts, 256), opts))
        R0, R1 = [r0], [r1, *R1]
    inner2 = [S2[x] for x in (i, j) if x is not None and x in S2]
    if first is not None:  # the parallel tile outermost (the outer tiles are all spatial)
        par = S0[spatial.index(first)]
        S0 = [par, *(h for h in S0 if h is not par)]
    order = S0 + S1 + R0 + R1 if reduce_inner else S0 + R0 + S1 + R1 + inner2
    new = b.reorder(order)
    b.remember([b.loop(h) for h in new], new)
    at = dict(zip(order, new))  # the handles before the reorder -> after it
    if reduce_inner:
        b.try_(lambda: b.vectorize_reduction(new[-1]))
    else:
        # vectorized before the rows unroll: the copies keep the mark (the peeled rows'
        # copy of the nest, where j is no innermost loop, stays scalar)
        if out.unit_axis == j and j in S2:
            b.try_(lambda: b.vectorize(at[S2[j]]))
        if unroll_knob is not None and i is not None and i in S2:
            b.try_(lambda: b.unroll(at[S2[i]], unroll_knob))
        # the output tile below the last middle space loop in a local array (registers)
        # across the inner reductions, the vector input's tile packed per outer reduction tile
        stage_at = at[(S0 + S1)[-1]]
        if cache_write and R1:
            b.try_(lambda: b.cache_write(out.name, stage_at))
        if cache_read and R0 and vin is not None:
            b.try_(lambda: b.cache_read(vin, at[R0[-1]]))
        weight = _weight(nest, j)
        if pack_weight and R0 and weight is not None:
            # the weight's tile (rows x the reduction tile) contiguous, per outer reduction tile
            b.try_(lambda: b.cache_read(weight, at[R0[-1]]))
    if consumer is not None:
        b.reverse_compute_at(b.handle(consumer), at[S0[-1]])
    b.try_(lambda: b.parallelize(new[0]))
    return True


def _elementwise_consumer(ctx: RuleContext, nest: Nest) -> Nest | None:
    """A later elementwise nest reading `nest`'s output at the same element (bias, relu)."""
    out = nest.output()
    if out is None or not nest.reduction:
        return None
    for later in ctx.nests[nest.position + 1:]:
        if later.init or not later.perfect or later.reduction:
            continue
        if any(t.name == out.name and not t.written for t in later.tensors):
            return later
    return None


TILE_VARIANTS = (
    # suffix, cache_write, cache_read (vector input), pack_weight, parallel, what
    ("", False, False, False, 0, ""),
    (".cw", True, False, False, 0, ", the output tile in registers"),
    (".cw.cr", True, True, False, 0, ", the output tile in registers and the vector input packed"),
    (".cw.pw", True, False, True, 0, ", the output tile in registers and the weight's tile packed"),
    (".cw.p1", True, False, False, 1, ", the output tile in registers, the second outer space tile parallel"),
    (".cw.pw.p1", True, False, True, 1, ", the output tile in registers, the weight's tile packed, the second "
     "outer space tile parallel"),
)  # fmt: skip
"""The `tile` rule's sketches. The parallel loop is an outer space tile of an axis longer
than 1 (at batch 1 not the batch loop), moved outermost: the first (or `.p1` the second)."""


def rule_tile(ctx: RuleContext) -> list[Sketch]:
    """`tile`, `tile.cw`, `tile.cw.cr`, `tile.cw.pw`, `tile.cw.p1`, `tile.cw.pw.p1`:
    multi-level tiling of every statement nest (TILE_VARIANTS); a variant that changes
    nothing over an earlier one is left out."""
    found: list[Sketch] = []
    for suffix, cw, cr, pw, par, what in TILE_VARIANTS:
        sketch = build_sketch(ctx, f"tile{suffix}", "multi-level tiling (space outer parallel, reduction, space, "
                              "reduction, register tile unrolled and vectorized)" + what,
                              lambda build, nest, top, cw=cw, cr=cr, pw=pw, par=par:
                              tile_nest(build, nest, top, cw, cr, parallel=par, pack_weight=pw),
                              )  # fmt: skip
        if sketch is not None and not any(s.schedule.same_as(sketch.schedule) for s in found):
            found.append(sketch)
    return found


def rule_fuse_producers(ctx: RuleContext) -> list[Sketch]:
    """`fuse.tile`: each elementwise statement that reads an earlier statement's result has
    its outer loop tiled (a knob: rows per parallel task), its producers computed at that
    tile as the default does at a row (compute_at), the other nests tiled."""
    written = {t.name: n.position for n in ctx.nests for t in n.tensors if t.written}
    consumers = {n.position for n in ctx.nests if n.perfect and not n.init and not n.reduction and n.extents[0] >= 4
                 and any(written.get(t.name, n.position) < n.position for t in n.tensors if not t.written)}  # fmt: skip
    if not consumers:
        return []

    def scheduler(build: _Build, nest: Nest, top: affine.ForOp) -> bool:
        return tile_nest(build, nest, top)

    def pre(build: _Build) -> None:
        for nest, top in zip(ctx.nests, top_loops(build.b.payload)):
            if nest.position in consumers:
                # neither 1 nor the whole extent: both are the default's fusion at a row
                axis, e = nest.axes[0], nest.extents[0]
                opts = tile_options(e, lo=min(2, e), hi=min(64, max(2, e // 2)))
                build.b.tile(build.b.handle(top), build.knob(nest, axis, 1, "parallel", nearest(opts, 4), opts))

    sketch = build_sketch(ctx, "fuse.tile", "elementwise statements' outer loops tiled, their producers "
                          "computed at each tile (compute_at), the other nests tiled", scheduler, fuse=True, pre=pre)  # fmt: skip
    return [sketch] if sketch is not None else []


def rule_fuse_consumer(ctx: RuleContext) -> list[Sketch]:
    """`tile.rca`: a contraction tiled with its elementwise consumer computed in each outer
    tile (reverse_compute_at), while the tile is in cache."""
    pairs = {n.position: c.position for n in ctx.nests if (c := _elementwise_consumer(ctx, n)) is not None}
    if not pairs:
        return []

    def scheduler(build: _Build, nest: Nest, top: affine.ForOp) -> bool:
        if nest.position not in pairs:
            return tile_nest(build, nest, top, True)
        want = ctx.nests[pairs[nest.position]].stmt
        consumer = next((t for t in top_loops(build.b.payload)
                         if tag(t, lt.STMT_ATTR) == want and "einc.init" not in t.attributes), None)  # fmt: skip
        return tile_nest(build, nest, top, True, consumer=consumer)

    sketch = build_sketch(ctx, "tile.rca", "contractions tiled with their elementwise consumer computed in each "
                          "outer tile (reverse_compute_at)", scheduler)  # fmt: skip
    return [sketch] if sketch is not None else []


def rule_rfactor(ctx: RuleContext) -> list[Sketch]:
    """`rfactor`: a reduction to few elements split into parallel partial reductions."""
    wanted = {n.position for n in ctx.nests if n.perfect and not n.init and n.reduction
              and math.prod(n.extent(s) for s in n.spatial) <= RFACTOR_MAX_SPATIAL
              and n.extent(n.reduction[-1]) >= RFACTOR_MIN_TRIP}  # fmt: skip
    if not wanted:
        return []

    def scheduler(build: _Build, nest: Nest, top: affine.ForOp) -> bool:
        if nest.position not in wanted:
            return False
        b = build.b
        r = nest.reduction[-1]
        e = nest.extent(r)
        opts = tile_options(e, lo=2, hi=256, dividing=True)
        knob = build.knob(nest, r, 1, "rfactor", nearest(opts, 16), opts)
        loop = next(x for x in band_from(top) if tag(x, lt.AXIS_ATTR) == r)
        chunk, _combine = b.rfactor(b.handle(loop), knob)
        b.try_(lambda: b.parallelize(chunk))
        innermost = [op for op in b.loop(chunk).walk() if isinstance(op, affine.ForOp)][-1]
        if innermost is not b.loop(chunk):
            b.try_(lambda: b.vectorize_reduction(b.handle(innermost)))
        return True

    sketch = build_sketch(ctx, "rfactor", "a reduction to few elements split into parallel partial "
                          "reductions (rfactor), then combined", scheduler)  # fmt: skip
    return [sketch] if sketch is not None else []


def policy_role(name: str, nests: list[Nest]) -> KnobRole:
    """The role of a CPU default-policy knob (`stmt.tile_i|j|k|rows|channels|cols|...`, `stmt.reduce_order`)."""
    stmt, _, what = name.rpartition(".")
    nest = next((n for n in nests if n.stmt == stmt and not n.init and n.spatial), None)
    if nest is None:
        return KnobRole(stmt, "?", 1, 0, "tile")
    spatial, reduction = list(nest.spatial), list(nest.reduction)
    if what == "reduce_order":  # a rotation of the reduction band, no size (features skip it)
        return KnobRole(stmt, (reduction or spatial)[0], 1, len(reduction), "order")
    rows = spatial[-2] if len(spatial) > 1 else spatial[-1]
    axis, level, kind = {"tile_j": (spatial[-1], 2, "tile"), "tile_points": (spatial[-1], 2, "tile"),
                         "tile_i": (rows, 2, "unroll"),
                         "tile_rows": (rows, 2, "unroll"),
                         "tile_k": ((reduction or spatial)[-1], 1, "tile")}.get(what, (rows, 1, "tile"))  # fmt: skip
    return KnobRole(stmt, axis, level, nest.extent(axis), kind)


POLICY_VARIANTS: tuple[tuple[str, policy.Choices, bool, str], ...] = (
    # suffix, the per-nest choices, conditions split out, what
    ("j", policy.Choices(channels=False), True, "register-blocked along the output row (no channel blocking)"),
    ("ch", policy.Choices(channels=True), True, "register-blocked over output channels x columns whatever the "
     "row's width"),
    ("p1", policy.Choices(parallel=1), True, "the next independent loop parallel"),
    ("p2", policy.Choices(parallel=2), True, "the second next independent loop parallel"),
    ("ch.p1", policy.Choices(channels=True, parallel=1), True, "blocked over channels x columns, the next "
     "independent loop parallel"),
    ("nopack", policy.Choices(pack=False), True, "the weight (filter, matmul panel) read in place, not packed"),
    ("bi", policy.Choices(batch_inside=True), True, "the batch loops below the channel tiles"),
    ("bo", policy.Choices(batch_inside=False), True, "the batch loops above the channel tiles"),
    ("bi.p1", policy.Choices(batch_inside=True, parallel=1), True, "the batch loops below the channel tiles, "
     "the next independent loop parallel"),
    ("nocoal", policy.Choices(coalesce=False), True, "a 1x1 convolution's output rows not coalesced (blocked "
     "over its output channels x columns, or along its rows)"),
    ("nopairs", policy.Choices(pair_lanes=False), True, "a grouped convolution's vectors of channels blocked over "
     "two groups (group_lanes: two broadcasts and an insert per FMA), not the pair form"),
    ("nogroup", policy.Choices(group_lanes=0, pair_lanes=False), True, "a grouped convolution's channels one group at a time "
     "(no group_lanes: half a vector where a group holds half a vector's channels)"),
    ("group.all", policy.Choices(group_lanes=64, pair_lanes=False), True, "a grouped convolution's vectors of channels over as many "
     "groups as they hold (group_lanes over more than two groups)"),
    ("pairs", policy.Choices(pair_lanes=True), True, "a grouped convolution in the pair form (lanes interleaved "
     "over two groups, the pair's input staged with their values side by side: one 64-bit broadcast per FMA)"),
    ("pairs.rows", policy.Choices(pair_lanes=True, pack_rows=True), True, "a grouped convolution in the pair form with its "
     "input packed row by row in the output row loop (transform.einc.pack_rows), not the whole padded plane before the rows"),
    ("pairs.plane", policy.Choices(pair_lanes=True, pack_rows=False), True, "a grouped convolution in the pair form with "
     "its input's whole padded plane packed before the output rows (the default packs an input under 4 MiB row by row)"),
    ("noprefetch", policy.Choices(prefetch=False, pair_lanes=False), True, "a grouped convolution's input rows, a batched "
     "matmul's next batch element, not prefetched (no transform.einc.prefetch at its output rows, at its batch loop)"),
    ("prefetch", policy.Choices(prefetch=True, pair_lanes=False), True, "a grouped convolution's input rows, a batched matmul's "
     "next batch element, prefetched whatever the input's size (the default prefetches inputs of 4 MiB or more)"),
    ("prefetch.rows", policy.Choices(prefetch=True, prefetch_tile=False, pair_lanes=False), True, "a grouped convolution's "
     "input prefetched a row ahead at the top of each output row (this tile's next row), not the next channel tile's "
     "rows spread over this tile's output rows"),
    ("noplanes", policy.Choices(stream_planes=False, pair_lanes=False), True, "a grouped convolution's row tiles "
     "copied straight into the output, not through its channel tile's whole output planes streamed out"),
    ("planes", policy.Choices(stream_planes=True, pair_lanes=False), True, "a grouped convolution's output planes staged "
     "and streamed out whatever the output's size (the default stages those of outputs of 4 MiB or more)"),
    ("interleave", policy.Choices(rows=False), True, "a short reduction over whole rows summed with its outputs "
     "side by side (the reduction outside, the outputs inside), not vectorized along the rows"),
    ("stream", policy.Choices(stream=True), True, "the output tiles (cache_write) copied out with non-temporal "
     "stores (transform.einc.stream_stores) where the op takes them, whatever the output's size"),
    ("nostream", policy.Choices(stream=False), True, "no output tile copied out with non-temporal stores (the "
     "default streams those of outputs of 16 MiB or more)"),
    ("cond", policy.POLICY, False, "conditions left in the loops (no peeling or index-set splitting)"),
)  # fmt: skip
"""The `policy` rule's sketches: the default policy's schedule with one structural choice
changed (einc.schedule.policies.cpu.Choices, and whether conditions are split out); each
keeps the policy's size knobs (`stmt.tile_channels|tile_cols|tile_reduce|tile_spatial|
tile_rows|tile_i|tile_j|tile_k|tile_points`) with their bounded options."""


def rule_policy(ctx: RuleContext) -> list[Sketch]:
    """`policy.j`, `policy.ch`, `policy.p1`, ...: the default schedule with one of its
    structural choices changed (POLICY_VARIANTS); a variant that changes nothing (the same
    script as the default or an earlier variant) is left out. The default itself is the
    space's `default` sketch, and each variant's own default point is proposed early by the
    search (SearchSpace.seed_points)."""
    target = get_target(ctx.target)
    made = [policy.default_schedule(target, ctx.loops)]
    found: list[Sketch] = []
    for suffix, choices, split, what in POLICY_VARIANTS:
        schedule = policy.default_schedule(target, ctx.loops, choices, split_conditions=split)
        if schedule is None or any(m is not None and m.same_as(schedule) for m in made):
            continue
        made.append(schedule)
        found.append(Sketch(f"policy.{suffix}", schedule, f"the default schedule, {what}",
                            {name: policy_role(name, ctx.nests) for name in schedule.knobs()}, seed=True))  # fmt: skip
    return found


RULES = {"tile": rule_tile, "fuse": rule_fuse_producers, "rca": rule_fuse_consumer, "rfactor": rule_rfactor,
         "policy": rule_policy}  # fmt: skip
