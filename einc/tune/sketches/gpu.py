"""Device (GPU) sketch rules. `tile`: the multi-level tiling of the default policy
(einc.schedule.policies.gpu: contractions on work-group, work-item and register tiles with
a reduction tile, other reductions cross-thread or with private accumulators, elementwise
nests several elements per work-item), varied per sketch (`policies.gpu.Variant`): the
contractions' inputs staged in shared memory: none (`tile`), every input (`tile.shared`),
one (`tile.shared.T`; staged tiles double buffered where both slots fit), every input
single buffered (`tile.shared.single`) or with its rows
padded by 0 or 1 element (`tile.shared.pad0/1`); the other reductions cross-thread
(`tile.cross`: a row per work-group, or several on `thread.y` (a knob `stmt.axis.rows`), each
row's reduction shared by its work-items) or one output
per work-item with a private accumulator (`tile.private`), whichever the default is not;
contractions with a work-item per output column (`tile.columns`: register tiles one column
wide, for devices that vectorize across work-items).
Its knobs (`stmt.axis.threads|rows|reg|ktile|kunroll|items`) range over options the target's
description bounds (work-items up to four default work-groups and the target's work-group
limit, register tiles that divide their axis up to 16, reduction tiles up to 16, the staged
reduction tile's unroll - the width of a staged row's vector loads - 1 to 8), and a point
whose work-group or staged tiles break a limit is refused when the schedule is applied,
before any launch. The constructed default is the space's `default` sketch.

On a target without a grid of work-groups (`gridless`: Poplar, whose printer spreads a
kernel's points over the IPU's tiles) the space is the `vertex` sketches alone, legal by
construction there: the mapping left to the vertex split, each reduction's innermost loop
unrolled by a knob (`vertex`) or in vector partial accumulators (`vertex.vector`), or a
contraction's outputs in unbound register tiles of private accumulators, one point per tile
(`vertex.reg`, knobs `stmt.axis.l2`: 2, 4 or 8 rows and columns); no bind (a bound kernel is
one vertex on one tile, refused where its data overflow the tile) and no `tile` sketch (no
default policy there).

The older rules: each statement nest's innermost spatial loop (and the one above
it) tiled, the tiles bound to work-groups (`block.x/y`) and work-items (`thread.x/y`), the
other spatial loops and the reductions run by each work-item (`bind`, `bind.private` with a
private accumulator); a reduction to few elements shared by a work-group's work-items
(`bind.reduce`). Knobs `stmt.axis.threads`: work-items per work-group along the axis. Nests
left unbound are mapped by the target's pipeline as with no schedule.
"""

from __future__ import annotations

import math

from xdsl.dialects import affine
from xdsl.ir import SSAValue

from einc.schedule.builder import Failure
from einc.schedule.policies.gpu import Variant, register_size
from einc.transforms.loop_analysis import band_from
from einc.tune.sketches.base import KnobRole, Nest, RuleContext, Sketch
from einc.tune.sketches.cpu import _Build, build_sketch

Y_THREADS = (1, 2, 4, 8)


def _pow2_upto(n: int, limit: int) -> tuple[int, ...]:
    found = sorted({1 << p for p in range(12) if 1 << p <= min(n, limit)} | ({n} if n <= limit else set()))
    return tuple(found) or (1,)


def bind_nest(build: _Build, nest: Nest, top: affine.ForOp, private: bool = False) -> bool:
    """Tile and bind one nest; `private`: its output accumulated in a work-item's private
    array across the reductions (cache_write local at the innermost bound loop)."""
    if not nest.perfect or nest.init or not nest.spatial:
        return False
    b, ctx = build.b, build.ctx
    handles = dict(zip(nest.axes, (b.handle(x) for x in band_from(top))))
    x = nest.spatial[-1]
    y = nest.spatial[-2] if len(nest.spatial) > 1 else None
    y_cap = max(Y_THREADS) if y is not None else 1
    opts = _pow2_upto(nest.extent(x), max(1, ctx.max_threads // y_cap))
    tx = _knob(build, nest, x, 0, opts)
    xo, xi = b.tile(handles[x], tx)
    bound = [(xo, "block.x")]
    inner = [(xi, "thread.x")]
    if y is not None:
        ty = _knob(build, nest, y, 0, _pow2_upto(nest.extent(y), y_cap), want=4)
        yo, yi = b.tile(handles[y], ty)
        bound.insert(0, (yo, "block.y"))
        inner.insert(0, (yi, "thread.y"))
    rest = [handles[s] for s in nest.spatial if s not in (x, y)] + [handles[r] for r in nest.reduction]
    order = [h for h, _ in bound] + [h for h, _ in inner] + rest
    new = b.reorder(order)
    for h, (_, axis) in zip(new, bound + inner):
        b.bind(h, axis, ctx.max_threads)
    out = nest.output()
    if private and nest.reduction and out is not None:
        b.try_(lambda: b.cache_write(out.name, new[len(bound + inner) - 1]))
    return True


def _knob(build: _Build, nest: Nest, axis: str, level: int, opts: tuple[int, ...], want: int = 64) -> SSAValue:
    value = max([v for v in opts if v <= want] or [opts[0]])
    name = f"{nest.stmt}.{axis}.threads"
    build.roles[name] = KnobRole(nest.stmt, axis, level, nest.extent(axis), "thread")
    return build.b.knob(name, value, opts)


def gridless(target: str) -> bool:
    """Whether the target has no grid of work-groups to bind loops to (its description's
    grid is 1: Poplar, whose printer spreads a kernel's points over the IPU's tiles itself;
    a kernel bound to work-groups or work-items, or accumulating in a private array, is one
    vertex on one tile there, and a cross-thread reduction has no shared memory)."""
    from einc.targets import get_target

    d = get_target(target).limits
    return d is not None and max(d.max_grid) <= 1


def rule_bind(ctx: RuleContext) -> list[Sketch]:
    """`bind`: block/thread tiling of every statement nest; `bind.private`: the same with
    each reduction's output accumulated in private memory. None on a target without a grid
    (`gridless`: its `vertex` sketches instead)."""
    if gridless(ctx.target):
        return []
    found = []
    for name, private, what in (("bind", False, ""), ("bind.private", True, ", reductions accumulated in private memory")):
        sketch = build_sketch(ctx, name, "the innermost spatial loops tiled and bound to work-groups and work-items, "
                              "the rest of each nest run by each work-item" + what,
                              lambda build, nest, top, private=private: bind_nest(build, nest, top, private), fallback=False)  # fmt: skip
        if sketch is not None and not any(s.schedule.same_as(sketch.schedule) for s in found):
            found.append(sketch)
    return found


REDUCE_MAX_SPATIAL = 4096
"""A reduction whose output has at most this many elements (too few to fill a device with
a work-item each) gets its reduction shared by the work-items of a work-group."""


def bind_reduce_nest(build: _Build, nest: Nest, top: affine.ForOp) -> bool:
    """A reduction to few elements: the output loops bound to work-groups (`block.x/y/z`),
    the innermost reduction tiled and its tile bound to the work-items, which combine their
    partials (a cross-thread reduction)."""
    if not nest.perfect or nest.init or not nest.reduction or len(nest.spatial) > 3:
        return False
    if math.prod(nest.extent(s) for s in nest.spatial) > REDUCE_MAX_SPATIAL:
        return bind_nest(build, nest, top)
    b, ctx = build.b, build.ctx
    handles = dict(zip(nest.axes, (b.handle(x) for x in band_from(top))))
    r = nest.reduction[-1]
    e = nest.extent(r)
    opts = _pow2_upto(e, min(ctx.max_threads, 1024))
    knob = _knob(build, nest, r, 0, opts, want=128)
    _outer, inner = b.tile(handles[r], knob)
    for s, axis in zip(nest.spatial, ("block.x", "block.y", "block.z")):
        b.bind(handles[s], axis, ctx.max_threads)
    b.bind(inner, "thread.x", ctx.max_threads)
    return True


def rule_bind_reduce(ctx: RuleContext) -> list[Sketch]:
    """`bind.reduce`: reductions to few elements shared by a work-group's work-items (not on
    a target without a grid: `gridless`)."""
    if gridless(ctx.target):
        return []
    if not any(n.perfect and not n.init and n.reduction and len(n.spatial) <= 3
               and math.prod(n.extent(s) for s in n.spatial) <= REDUCE_MAX_SPATIAL for n in ctx.nests):  # fmt: skip
        return []
    sketch = build_sketch(ctx, "bind.reduce", "reductions to few elements: output loops on work-groups, the "
                          "reduction's tile on their work-items (a cross-thread reduction); the other nests as bind",
                          lambda build, nest, top: bind_reduce_nest(build, nest, top) or bind_nest(build, nest, top),
                          fallback=False)  # fmt: skip
    return [sketch] if sketch is not None else []


GPU_KNOBS = {"threads": (0, "thread"), "ktile": (1, "tile"), "reg": (2, "unroll"), "items": (2, "unroll"),
             "kunroll": (1, "unroll"), "rows": (0, "thread")}
"""The default policy's knob kinds (`stmt.axis.KIND`): their tile level and role kind."""


def policy_role(name: str, nests: list[Nest]) -> KnobRole | None:
    """The role of a knob of the device policy (`stmt.axis.threads` ...), None for another."""
    rest, _, what = name.rpartition(".")
    stmt, _, axis = rest.rpartition(".")
    if what not in GPU_KNOBS or not stmt:
        return None
    level, kind = GPU_KNOBS[what]
    nest = next((n for n in nests if n.stmt == stmt and not n.init and axis in n.axes), None)
    return KnobRole(stmt, axis, level, nest.extent(axis) if nest is not None else 0, kind)


PADS = (0, 1)
"""`pad N` of the `tile.shared.padN` sketches' staged tiles (the default lets einc-pad-shared
choose): rows unpadded (16-byte aligned: vector loads of a row) or padded by one element
(conflict-free columns)."""


SEEDS = ("tile.cross", "tile.private", "tile.shared", "tile.columns", "tile.kunroll")
"""The `tile` sketches whose default points a search measures first: the reductions the
default does not make (cross-thread on a device whose shared memory is not on chip, private
accumulators where it is) and the staged contraction (the default where shared memory is on
chip) and the one-column register tiles (the fastest shape on Intel's SYCL CPU device), and the
unstaged contraction with its reduction unrolled."""


def tile_variants(inputs: list[str], shared: bool) -> list[tuple[str, Variant, str]]:
    """The `tile` sketches: (name, what they change of the default policy, description)."""
    every = frozenset(inputs)
    found = [("tile", Variant(frozenset()), "no input staged"),
             ("tile.cross", Variant(frozenset(), "cross", rows_knob=True), "no input staged, other reductions "
              "cross-thread (a work-group's work-items share each output's reduction; the outputs a work-group "
              "holds a knob, `stmt.axis.rows`)"),
             ("tile.private", Variant(frozenset(), "private"), "no input staged, other reductions one output per "
              "work-item (a private accumulator)"),
             ("tile.columns", Variant(frozenset(), columns=True), "no input staged, a work-item per output column "
              "(register tiles one column wide: consecutive work-items read consecutive elements)"),
             ("tile.kunroll", Variant(frozenset(), unstaged_kunroll=True), "no input staged, the reduction tiled "
              "and unrolled by a knob (independent register-tile updates per step)")]  # fmt: skip
    if shared:
        found.append(("tile.shared", Variant(every, kunroll_knob=True), "every input of a contraction staged in "
                      "shared memory, the reduction tile unrolled by a knob (its rows' vector width)"))
        found += [(f"tile.shared.{t}", Variant(frozenset({t}), kunroll_knob=True), f"'{t}' staged in shared memory")
                  for t in inputs]  # fmt: skip
        found.append(("tile.shared.single", Variant(every, double_buffer=False, kunroll_knob=True),
                      "every input staged in shared memory, single buffered (the default double buffers "
                      "where both slots fit)"))
        found += [(f"tile.shared.pad{p}", Variant(every, pad=p, kunroll_knob=True),
                   f"every input staged in shared memory, its rows padded by {p}") for p in PADS]
    return found


def rule_tile(ctx: RuleContext) -> list[Sketch]:
    """`tile...`: the default policy's multi-level tiling (work-group = work-items x register
    tile per output axis, a reduction tile where staged) with the contractions' inputs staged
    in shared memory (none, all, or one; double buffered; padded), and the other reductions
    cross-thread or in private accumulators. Every knob is bounded by the target's
    description (einc.schedule.policies.gpu: work-items up to four default work-groups and
    the target's limit, staged tiles within its shared memory)."""
    from einc.schedule.policies import gpu as policy
    from einc.targets import get_target

    target = get_target(ctx.target)
    if target.limits is None:
        return []
    inputs = sorted({t.name for n in ctx.nests if n.reduction and not n.init for t in n.tensors if not t.written})
    found: list[Sketch] = []
    for name, variant, what in tile_variants(inputs, target.limits.shared_bytes_per_block > 0):
        schedule = policy.build(target, ctx.loops, name=f"<sketch {name}>", variant=variant)
        if schedule is None or any(s.schedule.same_as(schedule) for s in found):
            continue
        roles = {k: r for k in schedule.knobs() if (r := policy_role(k, ctx.nests)) is not None}
        found.append(Sketch(name, schedule, "contractions on work-group, work-item and register tiles, " + what
                            + "; other nests as the default schedule", roles, seed=name in SEEDS))  # fmt: skip
    return found


VERTEX_UNROLLS = (1, 2, 4, 8)
"""Unroll factors of a reduction in the `vertex` sketch (those that divide its extent)."""

VERTEX_UNROLL = 4
"""The `vertex` sketch's default unroll (the faster of the Poplar hand schedules, 4 and 8,
on MatMul and ReduceSum: benchmarks/device_schedules.py POPLAR_HANDS)."""


def unroll_nest(build: _Build, nest: Nest, top: affine.ForOp) -> bool:
    """A reduction nest's innermost reduction unrolled by a knob `stmt.axis.l2` (the
    factors of VERTEX_UNROLLS that divide its extent): the mapping, loop order and memory
    are left as the target lowers them, so the kernel stays split over the tiles."""
    if not nest.perfect or nest.init or not nest.reduction:
        return False
    r = nest.reduction[-1]
    options = tuple(u for u in VERTEX_UNROLLS if nest.extent(r) % u == 0)
    if len(options) < 2:
        return False
    handle = build.b.handle(band_from(top)[nest.axes.index(r)])
    knob = build.knob(nest, r, 2, "unroll", max(u for u in options if u <= VERTEX_UNROLL), options)
    build.b.unroll(handle, knob)
    return True


def vector_nest(build: _Build, nest: Nest, top: affine.ForOp) -> bool:
    """A reduction nest whose innermost loop is a reduction: that loop in vector partial
    accumulators of the target's width (`vectorize_reduction`: float2 on the IPU; sums
    reassociated, as the C target's default does)."""
    if not nest.perfect or nest.init or not nest.reduction or nest.axes[-1] != nest.reduction[-1]:
        return False
    handle = build.b.handle(band_from(top)[-1])
    return not isinstance(build.b.try_(lambda: build.b.vectorize_reduction(handle)), Failure)


VERTEX_REGISTERS = (2, 4, 8)
"""Register tile sizes of the `vertex.reg` sketch per output axis (each clipped to the axis;
one that does not divide it leaves a partial last tile, its loops unrolled under guards)."""

VERTEX_REGISTER = (4, 8)
"""The `vertex.reg` sketch's default register tile (rows, columns): the fastest of 4x4, 4x8
and 8x8 on the Poplar harness (MatMul 512^3, README Benchmarks)."""


def register_nest(build: _Build, nest: Nest, top: affine.ForOp) -> bool:
    """A contraction's two innermost output axes (y, x) in register tiles of knobs
    `stmt.y.l2` x `stmt.x.l2` (VERTEX_REGISTERS clipped to each axis, bounded so that a
    tile's rows and columns of its inputs take at most half a tile's memory; by default
    the largest up to VERTEX_REGISTER dividing the axis, else that one with a partial last
    tile: the Poplar default's `register_size`), the
    reductions inside the tile loops and the tile's outputs accumulated in a private array
    (`cache_write` local), its loops unrolled: nothing bound, so the mapping pass gives each
    register tile a point and the vertex split spreads them over the tiles (bands of
    register rows, or boxes)."""
    if not nest.perfect or nest.init or not nest.reduction or len(nest.spatial) < 2:
        return False
    if nest.axes[len(nest.axes) - len(nest.reduction):] != nest.reduction:
        return False
    from einc.targets import get_target

    out = nest.output()
    target = get_target(build.ctx.target)
    limits = target.limits
    if out is None or limits is None:
        return False
    y, x = nest.spatial[-2], nest.spatial[-1]
    depth = math.prod(nest.extent(r) for r in nest.reduction)
    fits = lambda r: 2 * r * depth * 4 <= limits.tile_memory // 4  # noqa: E731
    oy = tuple(sorted({min(r, nest.extent(y)) for r in VERTEX_REGISTERS if fits(r)}))
    ox = tuple(sorted({min(r, nest.extent(x)) for r in VERTEX_REGISTERS if fits(r)}))
    if not oy or not ox:
        return False
    b = build.b
    handles = dict(zip(nest.axes, (b.handle(loop) for loop in band_from(top))))
    first = [tuple(r for r in reversed(options) if r <= most) or options[:1] for options, most in zip((oy, ox), VERTEX_REGISTER)]
    ry = build.knob(nest, y, 2, "unroll", register_size(nest.extent(y), first[0]), oy)
    rx = build.knob(nest, x, 2, "unroll", register_size(nest.extent(x), first[1]), ox)
    yo, yr = b.tile(handles[y], ry)
    xo, xr = b.tile(handles[x], rx)
    others = [handles[s] for s in nest.spatial[:-2]]
    new = b.reorder([*others, yo, xo, *(handles[r] for r in nest.reduction), yr, xr])
    b.cache_write(out.name, new[len(others) + 1], "local")
    b.unroll(new[-1], rx)
    b.unroll(new[-2], ry)
    return True


def rule_vertex(ctx: RuleContext) -> list[Sketch]:
    """`vertex`, on a target without a grid (`gridless`: Poplar) only: what its hand
    schedules do, legal by construction there - nothing bound or staged (a bound kernel is
    one vertex on one tile, refused where its data overflow the tile's memory; staging needs
    shared memory the target has none of), every reduction's innermost loop unrolled by a
    knob (`vertex`) or in vector partials (`vertex.vector`), or a contraction in unbound
    register tiles of private accumulators (`vertex.reg`: a point per register tile, which
    the vertex split spreads over the tiles like single outputs)."""
    if not gridless(ctx.target):
        return []
    made = [build_sketch(ctx, "vertex", "the mapping left to the vertex split over the tiles, each reduction's "
                         "innermost loop unrolled by a knob", unroll_nest, fallback=False),
            build_sketch(ctx, "vertex.vector", "the mapping left to the vertex split over the tiles, each reduction's "
                         "innermost loop in vector partial accumulators", vector_nest, fallback=False),
            build_sketch(ctx, "vertex.reg", "contractions in register tiles of private accumulators, a point each, "
                         "spread over the tiles by the vertex split", register_nest, fallback=False)]  # fmt: skip
    return [s for s in made if s is not None]


RULES = {"tile": rule_tile, "bind": rule_bind, "reduce": rule_bind_reduce, "vertex": rule_vertex}
