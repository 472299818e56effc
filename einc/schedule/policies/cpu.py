"""The CPU default schedule: what einc does to the loops when the user gives no schedule
(einc.schedule.default picks it for the C target).

The policy decides, per loop nest, from the nest's tags and the dependence tests; it builds
the schedule op by op with a ScheduleBuilder (einc.schedule.builder), which runs each op on
a scratch clone through the schedule interpreter as it is made, and keeps only the steps
that succeeded. The result (with its knobs) is an ordinary Schedule: `einc compile
--dump-after=scheduled` shows its effect, `str(schedule)` the script itself, and a search
can tune its knobs like any other.

C (CPU) policy. First, producers are fused into consumers: an elementwise statement's
producers are computed at its outermost loop (compute_at) when that recomputes nothing (each
iteration reads its own row of the producer's tensor: softmax and layernorm become one
parallel loop over rows, each row's max, sum and output computed while it is in L1) and the
producer is no contraction (a matmul or convolution keeps its own schedule below); the
fused nest is parallelized and its innermost loops vectorized by the rules below. Then, per
remaining statement nest:
- a matmul-like reduction (the innermost output axis is also the innermost axis of an input)
  is reordered to `outer parallel axes, reduction axes, innermost output axis` (i-k-j) and,
  when big enough, register-blocked: the innermost axis tiled by a vector-friendly knob, the
  one above it unrolled by a knob, the reduction tiled for the cache, and the output tile
  staged in a local array across the reduction (cache_write) so the accumulators stay in
  registers instead of a load and store of the output per k step, and the k-by-j panel of
  the vector input packed in a local array once per k tile (cache_read); the tile follows
  the host's vector registers (3 vectors by 8 rows with AVX-512, 2 where 3 do not divide
  the row; 2 vectors by 6 rows with AVX2), its row tile loop peeled so that whole tiles unroll; with several reductions
  (a convolution) the output loop the vectorized input does not move with (the output
  channel) is tiled, unrolled above the vector loop, and the tile staged locally the same
  way (`_block_rows`); a matmul with dimensions below 64 is blocked the same way (a short
  reduction in one tile: `_matmul_tiles`); a contraction whose output row does not fill
  whole vectors (a convolution with 7, 14, 28, 30 or 56 output columns, a 1x1 convolution)
  and whose output channels do is blocked over output channels x output columns instead
  (`_block_channels`): the channels a vector loop, the columns unrolled rows of
  accumulators, the input channels and the window inside, the output tile staged with its
  channels innermost and the filter packed the same way (cache ops with a `layout`), once
  per input-channel tile; the same blocking takes a strided convolution (`WO * 2 + KW`: no
  vector along the row, each column's input a broadcast), each output phase of a transposed
  one (split into dense nests before, `phase_nests` below: its output columns every other
  one, `2 * WO + 1`, staged compactly), a row of whole vectors too long for two
  rows of register accumulators (a 1-D convolution), and with AVX-512 8 channels as half a
  vector; a grouped convolution whose groups hold half a vector's channels (8 with
  AVX-512) first has its group pairs merged with the channel loop (`_group_lanes`,
  transform.einc.group_lanes), so that it is blocked by whole vectors over two groups, each
  group's input broadcast over its half (egpu.vbroadcast_runs), or, where the FMA
  datapath is 512 bits (Intel AVX-512), takes the pair form instead (`_pair_lanes`: lanes
  interleaved over two groups, one 64-bit broadcast per FMA); a batch of small maps (fewer output
  points than BATCH_INSIDE_POINTS vectors) runs its batch loops below the channel tiles so
  that each packed filter tile serves every image, and, its input channels tiled, stages the
  output tile of a run of images above them (`_images_per_tile`);
- a contraction no register tile blocks (a depthwise convolution: its vector input moves
  with every output loop) gets its fill fused down to the output row loop and the row
  staged in a local array across the reductions (`fuse_fill_rows`): each row zeroed and
  summed in L1, not a pass zeroing every output first;
- a reduction over short innermost axes that are whole rows of its input, together long
  enough for vectors (a global average pool's 7x7 window over an NCHW map: 49 contiguous
  points a channel), is coalesced into one loop along the row and reduced into vector
  partial sums, a lane-wide tile of outputs unrolled side by side (`_row_reductions`);
  one that no vector fits (the window strided across channels, or short) sums outputs side
  by side: two vectors of channels when the summand divides (a mean's `x / 49.0`, one
  vector division for 16 channels), else INTERLEAVE unrolled scalar sums
  (`_interleave_short_reductions`);
- a register-blocked contraction's band of reduction loops (input channels, then the window)
  carries the reduction-order knob `stmt.reduce_order` (`reduction_order`: a rotation of the
  band, 0 the order above; legal for every value by construction);
- one loop runs in parallel (OpenMP) when the nest does enough work: the outermost, when it
  has enough iterations for every core, else the outermost loop below it that has (a batch
  of 1 runs its channels or rows in parallel, not its batch loop of one iteration), among
  the loops above the first that carries a dependence (`parallel_loop`);
- the innermost loop is vectorized (`omp simd`) when it is unit-stride in the output and
  carries no dependence, or into vector partial accumulators (vectorize_reduction) when it
  is a reduction over a unit-stride input whose only carried dependence is the reduction
  (row sums and maxima, softmax's max and sum; float sums are reassociated).
A nest whose output loops carry a stride test (a transposed convolution written with `%` and
`//`) is first split into one dense nest per output phase (einc.schedule.policies.conditions.
phase_nests: split_phases, distribute), each scheduled by the rules above with its own knobs.
Last, conditions on loop variables leave the scheduled loops (einc.schedule.policies.conditions):
stride tests by phase splitting, padding tests by cutting loops into boundary and interior.
"""

from __future__ import annotations

import heapq
import itertools
import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, cast

from xdsl.dialects import affine, arith, func, scf
from xdsl.dialects.builtin import AnyFloat, MemRefType, ModuleOp, StringAttr, f16
from xdsl.ir import Attribute, BlockArgument, Operation, SSAValue
from xdsl.ir.affine import AffineBinaryOpExpr, AffineDimExpr, AffineExpr, AffineMap

from einc.dialects import einc_transform as et
from einc.transforms import loop_transforms as lt
from einc.transforms.halo import bounds_guard
from einc.transforms.stream_stores import contiguous_run
from einc.transforms.loop_analysis import (
    local_buffers,
    Access,
    accesses,
    band_from,
    buffer_name,
    carried_dependence,
    constant_bounds,
    determined_loops,
    induction_var,
    linear_form,
    perfect_band,
    step_of,
    trip_count,
    value_range,
    walk_ops,
    written_groups,
)
from einc.schedule.script import Schedule
from einc.transforms.coalesce import MAX_DEPTH as COALESCE_MAX_DEPTH
from einc.schedule.builder import ScheduleBuilder
from einc.schedule.interpreter import handle_ops
from einc.schedule.policies.conditions import nest_root, phase_nests, split_conditions_out

if TYPE_CHECKING:
    from einc.targets.clike import CLikeTarget

PARALLEL_MIN_WORK = 1 << 15
"""Nests doing fewer iterations than this stay sequential (OpenMP's fork costs ~µs)."""

PARALLEL_MIN_TRIP = 16
"""A parallel loop of this many iterations gives every core of an 8-core host two chunks or
more: the outermost loop is parallelized when it is this long, else the outermost loop
below it that is (`parallel_loop`; at batch 1 the batch loop runs once)."""

PARALLEL_MAX_FORKS = 64
"""At most this many starts of a parallel loop below shorter outer loops (each start wakes
the thread team: ~1 µs)."""

REDUCTION_MIN_TRIP = 32
"""Innermost reduction loops shorter than this stay scalar (two vectors of 16 floats)."""


@dataclass(frozen=True)
class Choices:
    """Structural choices of the per-nest policy that the CPU tuning sketches vary
    (einc.tune.sketches.cpu `rule_policy`); the defaults are the policy's own. `channels`:
    block over output channels x columns when a channel plan exists (None: where the policy
    does; False: never, blocked along j; True: whatever the row's width); `pack`: the
    weight/filter tile and matmul's B panel packed (cache_read); `parallel`: the parallel
    loop is the policy's (0) or the k-th independent loop of more than one iteration after
    it; `batch_inside`: a channel-blocked nest's batch loops below the channel tiles (None:
    where the policy puts them); `coalesce`: see the field; `group_lanes`: see below."""

    channels: bool | None = None
    pack: bool = True
    parallel: int = 0
    batch_inside: bool | None = None
    coalesce: bool = True
    """A contraction over whole rows of its input (a 1x1 convolution) blocked like a matmul
    over its coalesced output rows (`coalesced_contraction`) where that pays."""
    rows: bool = True
    """A short reduction over whole rows of its input (a global average pool's window)
    coalesced and vectorized along the rows (`_row_reductions`); False: the outputs side by
    side instead (`_interleave_short_reductions`)."""
    group_lanes: int = 2
    """The most groups one vector of a grouped convolution's channels spans (`_group_lanes`:
    groups holding fewer output channels than a vector has lanes merged into whole vectors,
    each group's input broadcast over its run of lanes); 0: never. Each vector costs one
    load per group it spans (a lane-wise broadcast of that many values), so the default
    takes two groups per vector (half a vector per group: 8 channels with AVX-512's 16 lanes,
    1.1-1.5x the half-vector tile here) and not more (4 channels per group over 4 groups:
    0.55x the nest blocked along its rows, README); the tuning space varies it
    (`policy.nogroup`, `policy.group.all`)."""
    pair_lanes: bool | None = None
    """A grouped convolution whose groups hold half a vector's output channels in the pair
    form (`_pair_lanes`: lanes interleaved over two groups, the pair's input staged with the
    two groups' values side by side, one 64-bit broadcast per FMA, no shuffle) instead of
    `group_lanes`' blocked vectors (two broadcasts and an insert per FMA on AVX-512, README).
    None: wherever a vector holds 16 float32 lanes (`_pairs_here`: AVX-512): on the Xeon
    (whose insert takes one of the two FMA ports) 1.09-1.15x / 1.11-1.16x the blocked
    vectors at batch 1 / 16 (README "The pair form the default"), on Zen 4 (256-bit
    datapaths) 1.10x / 1.14x the blocked vectors with their output planes streamed and next
    tile prefetched (README "The pair form the default on Zen 4 too"); AVX2 hosts (8 lanes: a
    group's 8 channels fill a vector) keep the blocked vectors. The tuning space keeps both
    (`policy.pairs`, `policy.nopairs`)."""
    pack_rows: bool | None = None
    """The pair form's input (staged per pair of groups with its halo) packed row by row in
    the output row loop (`_pair_form`, transform.einc.pack_rows: the input row a window
    reads first copied just before that output row, so it is read while in L1) rather than
    the whole padded plane before the rows. None: where the input holds fewer than
    PREFETCH_MIN_BYTES (it stays in the caches between calls: 1.00-1.12x the whole plane at
    batch 1 on the Xeon); a larger one comes from DRAM, where the plane's long runs per
    channel stream better than a row of each channel at a time (0.90-0.96x at batch 16;
    README, "The pair form's input pack in the row loop"); the plane then prefetches the next
    pair's planes a row of each per output row (`prefetch ... spread`). The tuning space
    keeps both (`policy.pairs.rows`, `policy.pairs.plane`)."""
    prefetch: bool | None = None
    """A grouped convolution blocked over several groups per vector (`group_lanes`) prefetches
    its input's next row at the top of each output row (`_prefetch_rows`,
    transform.einc.prefetch): at batch 16 each image's input comes from DRAM, sixteen
    channel rows at a time, which the hardware prefetchers do not follow. A batched matmul
    (`_block_matmul`) prefetches its inputs' next batch element spread evenly over this
    one's k steps (`_prefetch_next`). None: where the input holds PREFETCH_MIN_BYTES or more
    (smaller, it stays in the caches between calls and the prefetches only cost); True:
    always; False: never."""
    prefetch_tile: bool | None = None
    """Where a grouped convolution's input is prefetched (`prefetch`), the next channel
    tile's input rows a row of each of its channels per output row (`prefetch ... spread` at
    the channel-tile loop: the whole tile a tile ahead, the last tile's wrapping into the
    next image's first, as the pair form's next pair) instead of this tile's next row at
    the top of each output row. None or True: a tile ahead (1.02-1.04x at batch 16 on Zen 4
    with the output planes streamed; README "The grouped convolution's next tile
    prefetched, Zen 4"); False: the next row. The tuning space keeps both
    (`policy.prefetch.rows`)."""
    stream: bool | None = None
    """Output tiles staged locally (cache_write) copied out with non-temporal stores
    (`_stream_outputs`, transform.einc.stream_stores) where the op takes them. None: those
    of outputs of STREAM_MIN_BYTES or more and those inside a loop that prefetches its
    inputs' next batch element (`_prefetch_next`: a batched matmul whose operands come from
    memory); True: every output's; False: none. The tuning
    space keeps both (`policy.stream`, `policy.nostream`)."""
    stream_planes: bool | None = None
    """A grouped convolution blocked over several groups per vector (`group_lanes`) stages
    its channel tile's whole output planes (every row of each output channel of the tile,
    `_stream_planes`) around the rows' register tiles and copies them out in one run with
    non-temporal stores, instead of each row's tile storing 14-float runs straight into the
    output (partial lines, each read for ownership first). None: where the output holds
    STREAM_PLANES_MIN_BYTES or more (at batch 1 it stays in the caches between calls, and
    the staging costs 5-8% on Zen 4); True: whatever the output's size; False: never. The
    tuning space keeps both (`policy.noplanes`, `policy.planes`)."""


POLICY = Choices()
"""The default policy's choices."""


def _unit_stride(access_map: AffineMap | None, operands: Sequence[SSAValue], iv: SSAValue) -> bool:
    if access_map is None or not access_map.results:
        return False
    form = linear_form(access_map.results[-1], operands)
    return form is not None and form[0].get(iv) == 1


def _strided(access_map: AffineMap | None, operands: Sequence[SSAValue], iv: SSAValue) -> bool:
    """Whether an access's last index moves with `iv` other than with stride 1: by a
    constant stride above 1 (a strided convolution's input `WO * 2 + KW`) or through a
    division (a transposed convolution's `(WO + 1 - KW) floordiv 2`, which phase splitting
    makes affine)."""
    if access_map is None or not access_map.results:
        return False
    e = access_map.results[-1]
    form = linear_form(e, operands)
    if form is not None:
        return form[0].get(iv, 0) > 1
    return _mentions(e, operands, iv)


def _mentions(e: AffineExpr, operands: Sequence[SSAValue], iv: SSAValue) -> bool:
    """Whether the affine expression `e` (over `operands`) reads the loop variable `iv`."""
    if isinstance(e, AffineDimExpr):
        return operands[e.position] is iv
    if isinstance(e, AffineBinaryOpExpr):
        return _mentions(e.lhs, operands, iv) or _mentions(e.rhs, operands, iv)
    return False


def _tag(loop: affine.ForOp, name: str) -> str:
    """A tagged loop's statement (`lt.STMT_ATTR`) or axis (`lt.AXIS_ATTR`)."""
    tag = loop.attributes[name]
    assert isinstance(tag, StringAttr), tag
    return tag.data


def _element(buffer: SSAValue) -> Attribute:
    """The element type of a memref value."""
    memory = buffer.type
    assert isinstance(memory, MemRefType), memory
    return cast("MemRefType[Attribute]", memory).get_element_type()


def _tagged(loop: affine.ForOp) -> bool:
    return lt.STMT_ATTR in loop.attributes and lt.AXIS_ATTR in loop.attributes and "einc.copy" not in loop.attributes


def schedule_nest(top: affine.ForOp, b: ScheduleBuilder, lanes: int, choices: Choices = POLICY) -> None:
    """The default schedule of the nest under `top`, added to `b`: a contraction's
    unit-stride output loop moved innermost and register-blocked, the outer loop parallel
    given enough work, the innermost loop vectorized (or its reduction vector-accumulated);
    nothing for a nest whose band is not perfect or has untagged (or copied) loops; `choices`:
    the structural choices a tuning sketch varies (Choices)."""
    band = band_from(top)
    if not all(_tagged(loop) for loop in band) or not perfect_band(band):
        return
    if choices.coalesce and coalesced_contraction(top, b, lanes, choices):
        return
    pairs = _pairs_here(lanes) if choices.pair_lanes is None else choices.pair_lanes
    staged: list[SSAValue] = []
    if pairs and (paired := _pair_lanes(top, b, lanes, choices.pack_rows, staged)) is not None:  # the pair form
        _parallelize(band_from(paired), math.prod(trip_count(loop) or 1 for loop in band), b, choices.parallel)
        # the input's frame filled once, before the pair loop, where that loop is not the
        # parallel one (batch 16: once an image, not once a pair of groups; README "The
        # grouped convolution's next pair prefetched")
        for buffer in staged:
            b.try_(lambda: b.hoist_fill(buffer))  # noqa: B023
        return
    if choices.group_lanes:  # a grouped convolution's channels over several groups
        top = _group_lanes(top, b, lanes, choices.group_lanes)
    band = band_from(top)
    groups = written_groups(top)
    work = math.prod(trip_count(loop) or 1 for loop in band)
    if len(groups) == 1:
        (buffer, group), = groups.items()
        ivs = [induction_var(loop) for loop in band]
        fixed = determined_loops(group, ivs)
        parallel = [loop for loop in band if induction_var(loop) in fixed]
        reduction = [loop for loop in band if induction_var(loop) not in fixed]
        stores = [a for a in group if a.write]
        if parallel and reduction and band[-1] in reduction and stores:
            p = parallel[-1]
            iv = induction_var(p)
            reads = [a for a in _loads(top) if a.buffer is not buffer]
            order = [*parallel[:-1], *reduction, p]
            def planned() -> bool:
                return _channel_plan(order, len(parallel) - 1, lanes, choices.channels) is not None  # noqa: B023

            if _unit_stride(stores[0].map, stores[0].operands, iv) and (
                any(_unit_stride(a.map, a.operands, iv) for a in reads)
                # a strided convolution (`WO * 2 + KW`): no vector along j, but blocked over
                # output channels x columns, each column's input a broadcast
                or (any(_strided(a.map, a.operands, iv) for a in reads) and planned())
            ) or (
                # a phase of a transposed convolution (`phase_nests`): its output columns
                # every other one (`WO * 2 + 1`), its input unit-stride: blocked over output
                # channels x columns, the output tile staged with its channels innermost
                _strided(stores[0].map, stores[0].operands, iv)
                and any(_unit_stride(a.map, a.operands, iv) for a in reads) and planned()
            ):
                handles = [b.handle(loop) for loop in order]
                reordered = b.try_(lambda: b.reorder(handles))
                if not isinstance(reordered, lt.Failure):
                    new = [b.loop(h) for h in reordered]
                    b.remember(new, reordered)
                    band = band_from(_block_contraction(new, len(parallel) - 1, b, lanes, choices))
            elif band == [*parallel, *reduction] and (trip_count(band[-1]) or 0) < REDUCTION_MIN_TRIP:
                rows = _row_reductions(band, len(parallel), b, lanes) if choices.rows else None
                if rows is not None:  # vectorized along the rows: the band's parallel loop, no more
                    _parallelize(band_from(rows), work, b, choices.parallel)
                    return
                band = band_from(_interleave_short_reductions(band, len(parallel), b, lanes=lanes))
    _parallelize(band, work, b, choices.parallel)
    inner = band_from(band[0])[-1]
    stores = [a for a in next(iter(written_groups(inner).values()), ()) if a.write]
    if stores and _unit_stride(stores[0].map, stores[0].operands, induction_var(inner)) and (trip_count(inner) or 0) > 1:
        if _tagged(inner) and not isinstance(b.try_(lambda: b.vectorize(b.handle(inner))), lt.Failure):
            return
    _vectorize_reduction(inner, b)


# -- coalesced output rows (a 1x1 convolution blocked like a matmul) ---------------------------


def coalesced_contraction(top: affine.ForOp, b: ScheduleBuilder, lanes: int, choices: Choices = POLICY) -> bool:
    """A contraction whose last two output loops (HO, WO) index the output and every input
    that moves with them as whole rows (`x[.., HO, WO]`, the rows exactly WO's extent: a
    1x1 convolution, out[n, f, p] = sum_c w[f, c] x[n, c, p] with p = HO * W + WO), whose
    row does not fill whole vectors but the plane does (28 columns, 784 points: along WO a
    row is vectors of 16, 8 and 4), is coalesced (`transform.einc.coalesce`): HO x WO one
    loop of contiguous points, the reductions (C, KH, KW of one tap) one loop, and blocked
    as a matmul (`_block_matmul`: the points a vector loop, output channels unrolled rows of
    accumulators staged across the reduction, the whole vectors of points in the input read
    contiguously); the usual parallel loop. False (nothing added): not such a nest, or a step
    refused."""
    band = band_from(top)
    groups = written_groups(top)
    if len(groups) != 1 or len(band) < 4:
        return False
    ((out, group),) = groups.items()
    ivs = [induction_var(loop) for loop in band]
    fixed = determined_loops(group, ivs)
    parallel = [loop for loop in band if induction_var(loop) in fixed]
    reduction = [loop for loop in band if induction_var(loop) not in fixed]
    if len(parallel) < 3 or not reduction or band != [*parallel, *reduction]:
        return False
    h, w = parallel[-2], parallel[-1]
    nh, nw = trip_count(h) or 0, trip_count(w) or 0
    if nw % lanes == 0 or (nh * nw) % lanes or nh * nw < 4 * lanes:
        return False
    hv, wv = induction_var(h), induction_var(w)
    stores = [a for a in group if a.write]
    if not stores or not all(_whole_rows(a, hv, wv, nh, nw) for a in group):
        return False
    reads = [a for a in _loads(top) if a.buffer is not out]
    moving = [a for a in reads if a.map is not None and (_moves_with(a, hv) or _moves_with(a, wv))]
    if not moving or not all(_whole_rows(a, hv, wv, nh, nw) for a in moving):
        return False
    # a filter (read at an output channel and a reduction, not at the points): the rows of
    # the matmul; the input rows read along the points move with a reduction too
    if not any(_moves_with(a, induction_var(r)) for a in moving for r in reduction):
        return False
    coalesced = b.try_(lambda: b.coalesce(b.handle(h), 2))
    if isinstance(coalesced, lt.Failure):
        return False
    p = b.loop(coalesced)
    b.remember([p], [coalesced])
    k_handle = b.handle(reduction[0])
    if len(reduction) > 1:
        k_handle = b.try_(lambda: b.coalesce(b.handle(reduction[0]), len(reduction)))
        if isinstance(k_handle, lt.Failure):
            return False
    k = b.loop(k_handle)
    b.remember([k], [k_handle])
    outer = band_from(band[0] if band[0] is not h else p)[: len(parallel) - 2]
    reordered = b.try_(lambda: b.reorder([*(b.handle(x) for x in outer), k_handle, coalesced]))
    if isinstance(reordered, lt.Failure):
        return False
    new = [b.loop(x) for x in reordered]
    b.remember(new, reordered)
    blocked = _block_points(new, len(outer), b, lanes, choices.pack)
    work = math.prod(trip_count(loop) or 1 for loop in band)
    _parallelize_pieces(band_from(blocked), work, b, choices.parallel)
    return True


def _parallelize_pieces(band: list[affine.ForOp], work: int, b: ScheduleBuilder, shift: int = 0) -> None:
    """`_parallelize` the band; where it has no parallel loop (a batch of 1: the batch loop
    runs once) and its last loop holds several nests (`_block_points`' point tiles, peeled:
    the whole tiles, then the partial last one), each of those nests, its share of `work`
    by its iterations. A 1x1 convolution 1x256x28x28 -> 128 otherwise ran its 16 whole
    tiles of 48 points on one core (2 threads, wall clock: README, CPU operators)."""
    if parallel_loop(band, work) is not None:
        _parallelize(band, work, b, shift)
        return
    pieces = [op for op in band[-1].body.block.ops if isinstance(op, affine.ForOp)]
    total = sum(math.prod(trip_count(loop) or 1 for loop in band_from(piece)) for piece in pieces) or 1
    runs = math.prod(trip_count(loop) or 1 for loop in band)
    for piece in pieces:
        inner = band_from(piece)
        _parallelize(inner, work * math.prod(trip_count(loop) or 1 for loop in inner) // (total * runs), b, shift)


def _block_points(band: list[affine.ForOp], n_outer: int, b: ScheduleBuilder, lanes: int, pack: bool = True) -> affine.ForOp:
    """Register-block an i-k-j band `[outer..., F, K, P]` of a coalesced contraction like
    `_block_matmul`: the points P tiled by the register tile's vectors (a tile that does not
    divide P has its partial last tile peeled off, which runs as a loop of its own; 784
    points are 16 tiles of 48 and one of 16), the output channels F tiled by the register tile's rows, moved inside the reduction
    and unrolled, the reduction K tiled for the cache, the order `P tiles, K tiles, F tiles,
    K, F, P`, the output tile staged across the reduction and, with `pack` where two channel
    tiles or more read it, the input's k-by-points panel packed per k tile (cache_read; k
    tiled so that the panel fits PANEL_L1_ELEMENTS). Sizes are knobs. Returns the band's new
    outermost loop."""
    i, k, j = band[n_outer - 1], band[n_outer], band[-1]
    ni, nk, nj = trip_count(i) or 0, trip_count(k) or 0, trip_count(j) or 0
    # the 256-bit datapath's tile on every host: on 512-bit FMA datapaths 4 x 4 (a row of
    # four vectors, each loaded from another input channel's row) ran 0.84x its 3 x 8
    # (1x1 convolution 1x256x28x28 -> 128, Sapphire Rapids class, 1 thread, CPU time)
    vectors, rows = register_tile(lanes, 256)
    ti = max(t for t in (1, 2, 4, 6, 8) if t <= min(rows, ni))
    tj = vectors * lanes
    # a packed panel (tk x tj) within PANEL_L1_ELEMENTS: k 128 for 3 vectors of points
    packed = pack and ni >= 2 * ti
    tk = next((t for t in (256, 128, 64) if nk % t == 0 and (not packed or t * tj <= PANEL_L1_ELEMENTS)),
              nk if nk <= 256 else 0)  # fmt: skip
    if ni < 2 or nj < tj or not tk:
        return band[0]
    stmt = _tag(i, lt.STMT_ATTR)
    knob_j, knob_i, knob_k = (
        b.knob(f"{stmt}.tile_points", tj, {t * lanes for t in range(1, vectors + 1) if t * lanes <= nj}),
        b.knob(f"{stmt}.tile_i", ti, (1, 2, 4, 6, 8)),
        b.knob(f"{stmt}.tile_k", tk, {t for t in (64, 128, 256, 512) if nk % t == 0} | {tk}),
    )  # fmt: skip
    # 8 x 3 vectors of points: 0.66-0.73 of the FMA peak on the 1x1 convolution 16x256x28x28
    # -> 128 (AVX-512, 1 thread; hand-written C of each tile: 8 x 1 0.48, 4 x 7 0.33, spilling)
    tiles = [b.tile(b.handle(i), knob_i), b.tile(b.handle(k), knob_k), b.tile(b.handle(j), knob_j)]
    (io, ii), (ko, ki), (jo, ji) = ((b.loop(o), b.loop(n)) for o, n in tiles)
    handles = dict(zip((io, ii, ko, ki, jo, ji), (h for pair in tiles for h in pair)))
    band_now = band_from(band[0] if n_outer > 1 else io)
    for loop in band_now[: n_outer - 1]:
        handles[loop] = b.handle(loop)
    wanted = [*band_now[: n_outer - 1], jo, ko, io, ki, ii, ji]
    reordered = b.try_(lambda: b.reorder([handles[x] for x in wanted]))
    if isinstance(reordered, lt.Failure):
        return band_now[0]
    new = [b.loop(h) for h in reordered]
    b.remember(new, reordered)
    root = nest_root(b, new[0])
    # the whole point tiles apart from a partial last one, then the whole channel tiles:
    # constant trip counts, which unroll and keep the accumulators in registers
    for at in (new[-6], new[-4]):
        b.try_(lambda: b.peel(b.handle(at), 1))  # noqa: B023
    axis = {name: _tag(loop, lt.AXIS_ATTR) for name, loop in (("io", new[-4]), ("ii", new[-2]), ("ji", new[-1]))}
    if isinstance(b.try_(lambda: b.unroll(b.match(stmt, axis["ii"], root=root), knob_i)), lt.Failure):
        return new[0]
    b.try_(lambda: b.vectorize(b.match(stmt, axis["ji"], root=root)))
    (out,) = written_groups(new[0])
    if _element(out) != f16:  # see _block_matmul
        b.try_(lambda: b.cache_write(buffer_name(out), b.match(stmt, axis["io"], root=root)))
    # the k-by-points panel of the input packed once per k tile of each whole point tile (as
    # `_block_matmul` packs B) where several channel tiles read it: the tile's 48 points of
    # 128 input channels are 128 runs of 192 bytes 3 KiB apart, which the hardware
    # prefetchers do not follow from DRAM (batch 16) and which share L1 sets with each
    # other; packed, every channel tile reads 24 KiB from L1 (1x1 convolution 16x256x28x28
    # -> 128, 1 thread, CPU time: 1.16-1.4x; at batch 1 1.09x; README, CPU operators)
    panel = [a.buffer for a in _loads(new[-1]) if a.buffer is not out and a.map is not None
             and _moves_with(a, induction_var(new[-1])) and _moves_with(a, induction_var(new[-3]))]  # fmt: skip
    if packed and len({id(x) for x in panel}) == 1:
        b.try_(lambda: b.cache_read(buffer_name(panel[0]), b.handle(new[-5])))
    return new[0]


def _whole_rows(a: Access, hv: SSAValue, wv: SSAValue, nh: int, nw: int) -> bool:
    """Whether an access reads `x[.., hv, wv]` (its last two indices the two loop variables,
    plus loop variables that are always 0; no other index moving with them) of a buffer whose last two extents are the
    loops' (`nh`, `nw`): the points of the plane contiguous, in the loops' order."""
    if a.map is None or len(a.map.results) < 2:
        return False
    shape = cast("MemRefType[Attribute]", a.buffer.type).get_shape()
    if tuple(shape[-2:]) != (nh, nw):
        return False
    for e, v in zip(a.map.results[-2:], (hv, wv)):
        form = linear_form(e, a.operands)
        # other terms only of loops that run once (a 1x1 window's KH, KW)
        if form is None or form[1] or form[0].get(v) != 1 or any(value_range(u) != (0, 0) for u in form[0] if u is not v):
            return False
    for e in a.map.results[:-2]:
        form = linear_form(e, a.operands)
        if form is None or hv in form[0] or wv in form[0]:
            return False
    return True


INTERLEAVE = 8
"""Outputs `_interleave_short_reductions` accumulates side by side."""


def _row_reductions(band: list[affine.ForOp], n_outer: int, b: ScheduleBuilder, lanes: int) -> affine.ForOp | None:
    """A reduction over the innermost axes of its inputs that are together long enough for
    vectors (a global average pool's 7x7 window over an NCHW map: each channel's 49 points
    contiguous): the reduction loops coalesced into one loop over the row
    (`transform.einc.coalesce`), reduced into vector partial sums (vectorize_reduction: three
    vectors and one scalar point for 49; the lanes then folded in registers), and the last
    output loop tiled by `lanes` and unrolled, its tile staged locally (cache_write): `lanes`
    rows' sums and their lane folds independent, side by side. Where the reduction is not
    over whole rows of every input that moves with it (a strided window, a transposed
    layout), or the rows are shorter than REDUCTION_MIN_TRIP, None: nothing done. Float sums
    are reassociated (vector partial sums, as every vectorized reduction). 2048x7x7 pool,
    AVX-512, 1 thread, shared machine, C compiled alone: 12.5 us (INTERLEAVE's two vectors of
    strided channels, 16 scalar loads and inserts a vector) -> 5.4 us. Returns the band's
    new outermost loop."""
    reduction = band[n_outer:]
    trips = [trip_count(loop) or 0 for loop in reduction]
    if not reduction or math.prod(trips) < REDUCTION_MIN_TRIP or len(reduction) > COALESCE_MAX_DEPTH:
        return None
    ivs = [induction_var(loop) for loop in reduction]
    for a in _loads(band[0]):
        moving = a.map is not None and any(
            form is None or set(form[0]) & set(ivs)
            for form in (linear_form(e, a.operands) for e in a.map.results)
        )  # fmt: skip
        if moving and not _rows_of(a, ivs, trips):
            return None
    p = band[n_outer - 1]
    n = trip_count(p) or 0
    (out,) = written_groups(band[0])
    if _element(out) == f16:  # see _block_matmul
        return None
    top = b.handle(band[0]) if band[0] is not p else None
    first = b.handle(reduction[0])
    row = b.try_(lambda: b.coalesce(first, len(reduction))) if len(reduction) > 1 else first
    if isinstance(row, lt.Failure):
        return None
    tile = None
    if lanes > 1 and n % lanes == 0 and n > lanes:
        po_h, pi_h = b.tile(b.handle(p), lanes)
        tile = pi_h
        top = top or po_h
        b.try_(lambda: b.cache_write(buffer_name(out), po_h))
    top = top or b.handle(p)
    b.try_(lambda: b.vectorize_reduction(row))
    if tile is not None:
        b.try_(lambda: b.unroll(tile, lanes))  # noqa: B023
    return b.loop(top)


def _rows_of(a: Access, ivs: Sequence[SSAValue], trips: Sequence[int]) -> bool:
    """Whether access `a` reads whole rows along the loop variables `ivs` (of `trips`
    iterations): its last len(ivs) indices are the variables themselves, in order, over a
    buffer whose last extents are the trips, and no other index moves with them."""
    k = len(ivs)
    if a.map is None or len(a.map.results) < k:
        return False
    shape = cast("MemRefType[Attribute]", a.buffer.type).get_shape()
    if tuple(shape[-k:]) != tuple(trips):
        return False
    for e, v in zip(a.map.results[-k:], ivs):
        form = linear_form(e, a.operands)
        if form is None or form[1] or form[0] != {v: 1}:
            return False
    for e in a.map.results[:-k]:
        form = linear_form(e, a.operands)
        if form is None or set(form[0]) & set(ivs):
            return False
    return True


def _interleave_short_reductions(band: list[affine.ForOp], n_outer: int, b: ScheduleBuilder, lanes: int = 0) -> affine.ForOp:
    """A reduction over short innermost axes no vector fits (a global average pool's 7x7
    window, strided across channels): the last output loop tiled, its tile moved below the
    reductions, the output tile staged locally (cache_write), and, when the summand divides
    (a mean's `x / 49.0`), the tile vectorized (two vectors of `lanes` channels whose sums
    run side by side, each lane's input a strided element: one vector division for 16
    channels instead of a scalar one each) — else, or where two vectors do not divide the
    channels, tiled by INTERLEAVE and unrolled: INTERLEAVE independent scalar sums instead of one
    chain of dependent adds per output. Every output's sum keeps its order (the window's
    elements one after another): the numbers are those of the loops as written. 2048x7x7
    pool, AVX-512, 1 thread: 0.031 ms (one chain), 0.024 (8 unrolled), 0.014 (2 vectors).
    Returns the band's new outermost loop."""
    p = band[n_outer - 1]
    n = trip_count(p) or 0
    divides = any(isinstance(op, arith.DivfOp) for op in band[-1].body.walk())
    wide = 2 * lanes if divides and lanes > 1 and n % (2 * lanes) == 0 and n >= 4 * lanes else 0
    if not wide and (n % INTERLEAVE or n < 2 * INTERLEAVE):
        return band[0]
    (out,) = written_groups(band[0])
    handles = {loop: b.handle(loop) for loop in band}
    po_h, pi_h = b.tile(handles[p], wide or INTERLEAVE)
    po, pi = b.loop(po_h), b.loop(pi_h)
    handles.update({po: po_h, pi: pi_h})
    wanted = [*band[: n_outer - 1], po, *band[n_outer:], pi]
    reordered = b.try_(lambda: b.reorder([handles[x] for x in wanted]))
    if isinstance(reordered, lt.Failure):
        return band_from(band[0] if band[0] is not p else po)[0]  # the (legal) tiling only
    new = [b.loop(h) for h in reordered]
    b.remember(new, reordered)
    if _element(out) == f16:  # see _block_matmul
        return new[0]
    if isinstance(b.try_(lambda: b.cache_write(buffer_name(out), b.handle(new[n_outer - 1]))), lt.Failure):
        return new[0]
    if wide:
        b.try_(lambda: b.vectorize(b.handle(new[-1])))
    else:
        b.try_(lambda: b.unroll(b.handle(new[-1]), INTERLEAVE))
    return new[0]


def parallel_loop(band: Sequence[affine.ForOp], work: int) -> affine.ForOp | None:
    """The loop of a band (outermost first) to run in parallel, for a nest doing `work`
    iterations in all: the outermost loop with at least `PARALLEL_MIN_TRIP` iterations among
    the outer loops whose iterations are independent (above the first that carries a
    dependence: a reduction's loops), as long as the loops above it start it at most
    `PARALLEL_MAX_FORKS` times, each doing at least `PARALLEL_MIN_WORK` iterations; failing
    that, the longest such loop (the outermost of equals). A batch of 1 then runs its
    channels or rows in parallel instead of its batch loop on one core, while a nest whose
    outermost loop is long enough keeps it. None: the nest stays sequential."""
    if work < PARALLEL_MIN_WORK:
        return None
    forks, best, best_trip = 1, None, 1
    for loop in band:
        n = trip_count(loop)
        if n is None or forks > PARALLEL_MAX_FORKS or forks * PARALLEL_MIN_WORK > work:
            break
        if carried_dependence(loop) is not None:
            break
        if n >= PARALLEL_MIN_TRIP:
            return loop
        if n > best_trip:
            best, best_trip = loop, n
        forks *= n
    return best


def _parallelize(band: Sequence[affine.ForOp], work: int, b: ScheduleBuilder, shift: int = 0) -> None:
    """The band's parallel loop (`parallel_loop`) run in parallel; `shift` k > 0: the k-th
    loop of more than one iteration after it, above the first that carries a dependence
    (the policy's loop when there is no such loop)."""
    loop = parallel_loop(band, work)
    if loop is not None and shift > 0:
        free: list[affine.ForOp] = []
        for x in band:
            if carried_dependence(x) is not None:
                break
            free.append(x)
        later = [x for x in free[free.index(loop) + 1:] if (trip_count(x) or 0) > 1] if loop in free else []
        loop = later[shift - 1] if shift <= len(later) else loop
    if loop is not None:
        b.try_(lambda: b.parallelize(b.handle(loop)))


def _vectorize_reduction(inner: affine.ForOp, b: ScheduleBuilder) -> None:
    """Vector partial accumulators for an innermost reduction loop (a row sum, a row max)
    of at least `REDUCTION_MIN_TRIP` iterations whose only carried dependences are its
    reductions (checked by mark_reduction_loop)."""
    if not _tagged(inner) or (trip_count(inner) or 0) < REDUCTION_MIN_TRIP:
        return
    b.try_(lambda: b.vectorize_reduction(b.handle(inner)))


def _loads(root: affine.ForOp) -> list[Access]:
    return [a for a in accesses(root) if not a.write]


def _block_matmul(band: list[affine.ForOp], n_outer: int, b: ScheduleBuilder, lanes: int,
                  pack: bool = True, prefetch: bool | None = None) -> affine.ForOp:  # fmt: skip
    """Register-block an i-k-j band `[outer parallel..., reductions..., j]` of a big
    matmul-like nest: j tiled by a vector-width multiple, i (the last outer parallel loop)
    tiled and its tile moved inside the reduction and unrolled, the reduction tiled for L2,
    the order `j tiles, k tiles, i tiles, k, i, j` and the output tile staged locally.
    Sizes are knobs; j and k take dividing sizes, i's tile loop is peeled so that its whole
    tiles have a fixed trip count (which keeps gcc's accumulators in registers) and a
    partial last tile stays a loop. Returns the band's new outermost loop."""
    if n_outer < 1:
        return band[0]
    i, j = band[n_outer - 1], band[-1]
    reductions = band[n_outer:-1]
    if len(reductions) != 1:
        return _block_rows(band, n_outer, b, lanes)
    k = reductions[0]
    ni, nj, nk = trip_count(i), trip_count(j), trip_count(k)
    if ni is None or nj is None or nk is None:
        return band[0]
    if ni < 2 or nj < lanes or nk < 1:
        return band[0]
    # the accumulator tile (`register_tile`): with 32 vector registers (AVX-512) 3 (or 2)
    # vectors by 8 rows; with 16
    # (AVX2, SSE) 2 vectors by 6 rows, 12 accumulators beside two vectors of B and a
    # broadcast of A (AVX2 1024^3, 1 thread: 60-74 GFLOP/s against 46-50 for 4 vectors by 4
    # rows, which spills). When the rows do not divide i, the i tile loop is peeled: its
    # whole tiles have a constant trip count and unroll, the last partial tile stays a loop.
    sizes = _matmul_tiles(nj, nk, lanes)
    if sizes is None:
        return band[0]
    vectors, ti = register_tile(lanes)
    if lanes >= 16 and (sizes[0] < vectors * lanes or sizes[0] * sizes[1] > PANEL_L1_ELEMENTS):
        # the 4 x 4 tile of a 512-bit FMA datapath only with a row of its 4 vectors (else 2
        # x 4 would leave 8 accumulators for two FMA ports) and a packed panel that fits L1
        # (PANEL_L1_ELEMENTS): the 256-bit datapath's tile otherwise
        sizes = _matmul_tiles(nj, nk, lanes, 256)
        vectors, ti = register_tile(lanes, 256)
        if sizes is None:
            return band[0]
    tj, tk = sizes
    ti = max(t for t in (1, 2, 4, 6, 8) if t <= min(ti, ni))  # a short i (batched small matmuls)
    stmt = _tag(i, lt.STMT_ATTR)
    knob_j, knob_i, knob_k = (
        b.knob(f"{stmt}.{name}", value, options)
        for name, value, options in (("tile_j", tj, (16, 32, 64, 128)), ("tile_i", ti, (1, 2, 4, 6, 8)), ("tile_k", tk, (64, 128, 256, 512)))
    )  # fmt: skip
    hi, hk, hj = b.handle(i), b.handle(k), b.handle(j)
    # i -> io, ii ; k -> ko, ki ; j -> jo, ji ; order jo, ko, io, ki, ii, ji: a k-by-j panel
    # of the right input stays in L2 while every i tile passes over it
    tiles = [b.tile(hi, knob_i), b.tile(hk, knob_k), b.tile(hj, knob_j)]
    (io, ii), (ko, ki), (jo, ji) = ((b.loop(o), b.loop(n)) for o, n in tiles)
    handles = dict(zip((io, ii, ko, ki, jo, ji), (h for pair in tiles for h in pair)))
    band_now = band_from(band[0] if n_outer > 1 else io)
    wanted = [*band_now[: n_outer - 1], jo, ko, io, ki, ii, ji]
    for loop in band_now[: n_outer - 1]:
        handles[loop] = b.handle(loop)
    reordered = b.try_(lambda: b.reorder([handles[x] for x in wanted]))
    if isinstance(reordered, lt.Failure):
        # e.g. a guarded body the tiles cannot be moved across: keep the (legal) tiling only
        return band_now[0]
    new = [b.loop(h) for h in reordered]
    b.remember(new, reordered)
    ii_new, ji_new = new[-2], new[-1]
    # a legality check only: the vectorize below marks this loop with its copies
    if isinstance(lt.vectorize_loop(ji_new), lt.Failure):
        return new[0]
    (out,) = written_groups(new[-4])
    panel = [a.buffer for a in _loads(ji_new)
             if a.buffer is not out and _unit_stride(a.map, a.operands, induction_var(ji_new))]  # fmt: skip
    # the whole i tiles apart from a partial last one (none when the knob divides i)
    if isinstance(b.try_(lambda: b.peel(b.handle(new[-4]), 1)), lt.Failure):
        return new[0]
    if isinstance(b.try_(lambda: b.unroll(b.handle(ii_new), knob_i)), lt.Failure):
        return new[0]
    b.vectorize(b.match(_tag(ji_new, lt.STMT_ATTR), _tag(ji_new, lt.AXIS_ATTR), root=nest_root(b, new[0])))
    # stage the output tile in a local array across the reduction: fixed-shape accumulators
    # the C compiler keeps in registers instead of a load and store per k step
    io_new, ko_new = new[-4], new[-5]
    # not for f16: gcc may keep a local _Float16 accumulator at float precision
    # (-fexcess-precision=fast), where the output in memory is rounded at every step
    if _element(out) != f16:
        b.try_(lambda: b.cache_write(buffer_name(out), b.handle(io_new)))
    # pack the k-by-j panel of the input the vector loop reads (B) into a local array once per
    # k tile: every i tile then reads it contiguously, where B's rows a matrix row apart map
    # to the same L1 sets (AVX2, 1024^3: 32 to 48 GFLOP/s unpacked from run to run, 52.7 packed)
    if len(panel) == 1 and pack:
        b.try_(lambda: b.cache_read(buffer_name(panel[0]), b.handle(ko_new)))
    if n_outer > 1 and prefetch is not False:
        _prefetch_next(new[n_outer - 2], new[-3], out, b, 0 if prefetch else PREFETCH_MIN_BYTES)
    return new[0]


def _prefetch_next(batch: affine.ForOp, k: affine.ForOp, out: SSAValue, b: ScheduleBuilder, least: int) -> None:
    """The inputs of a batched matmul whose batch element (a head's A and B) moves with the
    loop `batch` prefetched one element ahead, spread evenly over the element's k steps
    (`transform.einc.prefetch ... spread %k evenly`; Choices.prefetch): at batch 16 (192
    heads of 64 + 32 KiB) each head's operands come from DRAM into a register tile that
    broadcasts A from 8 rows 512 bytes apart, and the hot loop waits (Zen 4, one thread,
    thread CPU time, same process: A V 192x128x128x64 0.62 -> 0.90 of the FMA peak, Q K^T
    0.65 -> 0.85). Where all of them fit the caches between calls (inputs of fewer than
    `least` bytes, PREFETCH_MIN_BYTES: batch 1's 12 heads) nothing."""
    for buffer in sorted(_moving_inputs(batch, batch, out), key=buffer_name):
        if _bytes_of(buffer) >= least:
            b.try_(lambda: b.prefetch(buffer_name(buffer), b.handle(batch), 1, b.handle(k), evenly=True))  # noqa: B023


PANEL_L1_ELEMENTS = 8192
"""The largest packed k-by-j panel (32 KiB of float32, within a 48 KiB L1) for which
`_block_matmul` takes the 512-bit FMA datapath's 4 x 4 tile (`register_tile`): batched
matmul 8x256^3 (k tile 256, a 64 KiB panel of 4 vectors) ran 0.91-0.96x the 2 x 8 tile
(32 KiB), 0.99x with a k tile of 128 (Sapphire Rapids class, 1 thread, shared machine)."""


def _matmul_tiles(nj: int, nk: int, lanes: int, fma_bits: int | None = None) -> tuple[int, int] | None:
    """The (j, k) tile of `_block_matmul` for a j loop of `nj` and a reduction of `nk`: j by
    the register tile's vectors (or fewer whole vectors, when they divide nj), k by a
    cache-sized tile that divides it, or whole when it is no longer than one (a 512x32x512
    matmul keeps its 32-long reduction in one tile). None: j is not whole vectors, or k
    neither divides nor is short."""
    vectors, _ = register_tile(lanes, fma_bits)
    tj = next((t for t in (vectors * lanes, 2 * lanes, lanes) if nj % t == 0), None)
    tk = next((t for t in (256, 128, 64) if nk % t == 0), nk if nk <= 256 else None)
    return None if tj is None or tk is None else (tj, tk)


ROW_BLOCK_MAX_ELEMENTS = 1024
"""The largest output tile `_block_rows` keeps in a local array (4 KiB of float32)."""


def _moves_with(access: Access, iv: SSAValue) -> bool:
    """Whether an access's (affine) index may change with the loop variable `iv`."""
    assert access.map is not None, access
    for e in access.map.results:
        form = linear_form(e, access.operands)
        if form[0].get(iv) if form is not None else _mentions(e, access.operands, iv):
            return True
    return False


def _block_rows(band: list[affine.ForOp], n_outer: int, b: ScheduleBuilder, lanes: int) -> affine.ForOp:
    """Register-block a band `[outer parallel..., reductions..., j]` with several reductions
    (a convolution: `N, F, HO, C, KH, KW, WO`): the innermost outer parallel loop `i` the
    vector input (unit-stride in j) does not move with (F: each output channel reuses the
    same input row, as matmul's rows reuse a row of B) is tiled by a knob, its tile loop
    moved just above j and unrolled, j vectorized, and the output tile (tile x j) staged in
    a local array across the reductions at the last outer parallel loop (cache_write):
    accumulators in registers, each vector of input loaded once per tile instead of once per
    output channel. Returns the band's new outermost loop."""
    outer, reductions, j = band[:n_outer], band[n_outer:-1], band[-1]
    nj = trip_count(j)
    if n_outer < 1 or nj is None or nj < 16:
        return band[0]
    (out,) = written_groups(band[0])
    jv = induction_var(j)
    vector_inputs = [a for a in _loads(band[0]) if a.buffer is not out and _unit_stride(a.map, a.operands, jv)]
    candidates = [loop for loop in outer if (trip_count(loop) or 0) >= 4
                  and not any(_moves_with(a, induction_var(loop)) for a in vector_inputs)]  # fmt: skip
    if not vector_inputs or not candidates:
        return band[0]
    i = candidates[-1]
    ni = trip_count(i) or 0
    # rows of accumulators that fit the vector registers: a row of j is its whole vectors
    # and the narrower vectors of its remainder (AVX2, 30 columns: 8+8+8+4+2, five registers
    # a row, two rows: 42.6 GFLOP/s against 36.1 for four rows, which spill)
    per_row = nj // lanes + bin((nj % lanes) >> 1).count("1")
    budget = 24 if lanes >= 16 else 12
    fits = [t for t in (4, 2) if ni % t == 0 and t * nj <= ROW_BLOCK_MAX_ELEMENTS]
    ti = next((t for t in fits if t * per_row <= budget), 2 if 2 in fits else None)
    if ti is None:
        return band[0]
    stmt = _tag(i, lt.STMT_ATTR)
    # only sizes that divide i: the unroll needs the tile loop's constant trip count
    options = {t for t in (2, 4, 8) if ni % t == 0 and t * nj <= ROW_BLOCK_MAX_ELEMENTS}
    knob = b.knob(f"{stmt}.tile_rows", ti, options)
    handles = {loop: b.handle(loop) for loop in band}
    outer_h, inner_h = b.tile(handles[i], knob)
    io, ii = b.loop(outer_h), b.loop(inner_h)
    handles[io], handles[ii] = outer_h, inner_h
    wanted = [io if loop is i else loop for loop in outer] + [*reductions, ii, j]
    reordered = b.try_(lambda: b.reorder([handles[x] for x in wanted]))
    if isinstance(reordered, lt.Failure):
        return band_from(band[0] if band[0] is not i else io)[0]  # the (legal) tiling only
    new = [b.loop(h) for h in reordered]
    b.remember(new, reordered)
    reduction_order(b, stmt, new[n_outer : n_outer + len(reductions)])
    ii_new, j_new = new[-2], new[-1]
    # a legality check only: the vectorize below marks this loop with its copies
    if isinstance(lt.vectorize_loop(j_new), lt.Failure):
        return new[0]
    if isinstance(b.try_(lambda: b.unroll(b.handle(ii_new), knob)), lt.Failure):
        return new[0]
    b.vectorize(b.match(stmt, _tag(j_new, lt.AXIS_ATTR), root=nest_root(b, new[0])))
    at = new[n_outer - 1]
    # not for f16 (see _block_matmul)
    if _element(out) != f16:
        b.try_(lambda: b.cache_write(buffer_name(out), b.handle(at)))
    return new[0]


def reduction_order(b: ScheduleBuilder, stmt: str, loops: list[affine.ForOp]) -> None:
    """The reduction-order knob `stmt.reduce_order` over a register-blocked contraction's band
    of reduction loops (a convolution's input channels and window, `C, KH, KW`): its value k
    rotates the band (`transform.einc.rotate`: `KH, KW, C` for 1, the input channels
    innermost; `KW, C, KH` for 2); 0, the default, is the band as the policy orders it, and
    changes nothing. Offered only where every value is legal whatever the others: each
    rotation legal (einc.transforms.reduction_order.rotation_legal: one reassociable
    accumulation; float sums in another order, rounding only), constant bounds, and no
    condition reading two loops of the band (a padding test reads one window loop and an
    output loop outside the band, `HO + KH - 1 >= 0`: split_conditions_out, after this, cuts
    the same loop at the same bounds in every rotation, since the loops outside the band
    keep their places)."""
    from einc.transforms.reduction_order import rotation_legal

    if len(loops) < 2 or any(constant_bounds(loop) is None for loop in loops):
        return
    ivs: set[SSAValue] = {induction_var(loop) for loop in loops}
    for op in loops[0].walk():
        if isinstance(op, scf.IfOp | arith.SelectOp) and any(len(_reads(t, ivs)) > 1 for t in _terms(op.operands[0])):
            return
    if rotation_legal(loops) is not None:
        return
    knob = b.knob(f"{stmt}.reduce_order", 0, range(len(loops)))
    rotated = b.try_(lambda: b.rotate([b.handle(loop) for loop in loops], knob))
    if not isinstance(rotated, lt.Failure):
        b.remember([b.loop(h) for h in rotated], rotated)


def _terms(condition: SSAValue) -> list[SSAValue]:
    """The conjuncts of a condition (`a and b and ...`: each bound test of a padded read)."""
    owner = condition.owner
    if isinstance(owner, arith.AndIOp):
        return [*_terms(owner.lhs), *_terms(owner.rhs)]
    return [condition]


def _reads(value: SSAValue, ivs: set[SSAValue]) -> set[SSAValue]:
    """The values of `ivs` that `value` is computed from (through the ops defining it)."""
    found: set[SSAValue] = set()
    stack, seen = [value], set[SSAValue]()
    while stack:
        v = stack.pop()
        if v in seen:
            continue
        seen.add(v)
        if v in ivs:
            found.add(v)
        elif isinstance(v.owner, Operation):
            stack.extend(v.owner.operands)
    return found


# -- register tiles over output channels (convolutions, narrow outputs) ----------------------

CHANNEL_PACK_ELEMENTS = 16384
"""The largest packed filter tile `_block_channels` keeps (64 KiB of float32, the most a
local buffer holds: staging.MAX_LOCAL_ELEMENTS); the first reduction (input channels) is
tiled to fit. Each input-channel tile copies the output tile in and out once more, unless
the output tile of every output point is staged above them (`_whole_output_tile`)."""


def _block_contraction(band: list[affine.ForOp], n_outer: int, b: ScheduleBuilder, lanes: int,
                       choices: Choices = POLICY) -> affine.ForOp:  # fmt: skip
    """Register-block an i-k-j band `[outer parallel..., reductions..., j]`: over output
    channels x output columns (`_block_channels`) when the unit-stride output axis j does
    not fill whole vectors and an output-channel loop does; else along j (`_block_matmul`,
    `_block_rows`). Returns the band's new outermost loop."""
    plan = _channel_plan(band, n_outer, lanes, choices.channels)
    if plan is not None:
        return _block_channels(band, n_outer, b, lanes, plan, choices)
    return _block_matmul(band, n_outer, b, lanes, choices.pack, choices.prefetch)


@dataclass(frozen=True)
class _ChannelPlan:
    f: affine.ForOp
    """The output-channel loop: the output and a filter move with it, the vector input does not."""
    filter: SSAValue
    out_dim: int
    """The output's dimension indexed by f (moved innermost in the staged output tile)."""
    filter_dim: int
    """The filter's dimension indexed by f (moved innermost in the packed filter)."""
    tf: int
    tw: int
    tc: int
    """Tile sizes: channels (vector lanes), output columns (unrolled rows of accumulators),
    first reduction (fits the packed filter in CHANNEL_PACK_ELEMENTS)."""


def _single_dim(access: Access, iv: SSAValue) -> int | None:
    """The one dimension of an (affine) access that moves with `iv` with coefficient 1,
    or None (no dimension, several, or another coefficient)."""
    assert access.map is not None, access
    dims: list[int] = []
    for d, e in enumerate(access.map.results):
        form = linear_form(e, access.operands)
        if form is None:
            return None
        if form[0].get(iv):
            if form[0][iv] != 1:
                return None
            dims.append(d)
    return dims[0] if len(dims) == 1 else None


def _channel_plan(band: list[affine.ForOp], n_outer: int, lanes: int, force: bool | None = None) -> _ChannelPlan | None:
    """Whether and how `_block_channels` tiles the band: an output-channel loop f whose extent
    is a multiple of the vector width, a filter read at f (and not at j) that one box covers,
    and an output row j that whole vectors do not fill (convolutions with 7, 14, 28, 30, 56
    columns: along j a 30-column row is vectors of 16, 8, 4 and 2, half the lanes idle),
    or with several reductions (a window) and j narrower than two vectors. None: block
    along j as before. `force` (Choices.channels): False, always None; True, a plan
    whatever the row's width."""
    if n_outer < 1 or len(band) - n_outer < 2 or force is False:
        return None
    outer, reductions, j = band[:n_outer], band[n_outer:-1], band[-1]
    nj = trip_count(j)
    if nj is None or nj < 2:
        return None
    (out,) = written_groups(band[0])
    stores = [a for a in accesses(band[0]) if a.write and a.buffer is out]
    loads = [a for a in _loads(band[0]) if a.buffer is not out]
    if not stores or any(a.map is None for a in [*stores, *loads]):
        return None
    jv = induction_var(j)
    # the inputs read along the output row: unit-stride, or strided (a strided convolution,
    # which cannot be vectorized along j, so is blocked over channels whatever its width)
    vector_inputs = [a for a in loads if _unit_stride(a.map, a.operands, jv) or _strided(a.map, a.operands, jv)]
    if not vector_inputs:
        return None
    strided = not any(_unit_stride(a.map, a.operands, jv) for a in vector_inputs)
    # with a window (several reductions), a row of whole vectors is blocked along j when two
    # rows of accumulators fit the registers; a longer row (a 1-D convolution's 256 columns)
    # would keep its accumulators in memory (a load and a store per FMA), so it is blocked
    # over channels x columns too
    rows_fit = nj // lanes <= (24 if lanes >= 16 else 12) // 2
    if nj % lanes == 0 and not (len(reductions) > 1 and (nj < 2 * lanes or not rows_fit)) and not strided and not force:
        return None
    for f in reversed(outer):
        nf, fv = trip_count(f) or 0, induction_var(f)
        # an input moving with f in runs (`group_lanes`: a group's input over its lanes) is
        # a broadcast per run, not a filter
        moving = [a for a in vector_inputs if _moves_with(a, fv)]
        run = _run_of(moving, fv)
        if nf % _half(lanes) or run is None:
            continue
        out_dim = _single_dim(stores[0], fv)
        filters = [a for a in loads if _moves_with(a, fv) and a not in moving]
        if out_dim is None or len({a.buffer for a in filters}) != 1 or any(_moves_with(a, jv) for a in filters):
            continue
        filter_dim = _single_dim(filters[0], fv)
        if filter_dim is None or any(_single_dim(a, fv) != filter_dim for a in filters):
            continue
        # accumulators: `vectors` vectors per output column; 24 of AVX-512's 32 registers
        # (12 of AVX2's 16), the rest for the filter vectors and the broadcast input. Two
        # vectors of channels where the columns divide into enough rows, else one; with
        # AVX-512, half a vector where the channels come in eights (a grouped convolution's
        # 8 output channels per group).
        rest = math.prod(trip_count(r) or 1 for r in reductions[1:])
        nc = trip_count(reductions[0]) or 1
        shapes: list[tuple[int, int]] = []
        for width in (2 * lanes, lanes, _half(lanes)):
            budget = (24 if lanes >= 16 else 12) // max(1, width // lanes)
            cols = max((t for t in range(1, min(nj, budget) + 1) if nj % t == 0), default=1)
            if nf % width == 0 and cols >= min(nj, 4) and width % max(run, 1) == 0:
                shapes.append((width, cols))
        if not shapes:
            continue
        tf, tw = shapes[0]
        if _c_tile(tf, nc, rest) * rest < COPY_AMORTIZED_STEPS:  # the output tile's copies per input-channel tile weigh
            points = nj * math.prod(trip_count(loop) or 1 for loop in outer[outer.index(f) + 1 :])
            tf, tw = next((shape for shape in shapes if _output_staged_once(shape[0], nc * rest, points, lanes)), shapes[0])
        tc = _c_tile(tf, nc, rest)
        if not tc:
            continue
        return _ChannelPlan(f, filters[0].buffer, out_dim, filter_dim, tf, tw, tc)
    return None


def _c_tile(width: int, nc: int, rest: int) -> int:
    """The largest input-channel tile (a divisor of `nc`) whose packed filter, `width` channels
    x `rest` taps each, fits CHANNEL_PACK_ELEMENTS; 0 when none does."""
    return max((t for t in range(1, nc + 1) if nc % t == 0 and width * t * rest <= CHANNEL_PACK_ELEMENTS), default=0)


COPY_AMORTIZED_STEPS = 384
"""`_channel_plan` looks for a narrower channel tile whose output tile is staged once
(`_output_staged_once`) only where the widest tile's input-channel tile is fewer than this
many (input channel, tap) steps: the output tile's copies in and out per input-channel tile
cost about 2 x lanes / steps of the FMAs. 288 (32 channels x 3x3 taps: the 2-D
convolutions of README, CPU operators) gained 1.17-1.29x; 432 (16 x 3x3x3, a 3-D
convolution 1x64x4x14x14 -> 64) ran 0.86x with 16 channels and the whole output tile
(Sapphire Rapids class, 1 thread, CPU time, interleaved, shared machine)."""


def _output_staged_once(width: int, reduced: int, points: int, lanes: int) -> bool:
    """Whether `_channel_plan` takes a channel tile of `width` (whole vectors, AVX-512) over
    a wider one: its output tile is staged once per channel tile, not copied in and out
    once per input-channel tile (scalar, transposed) after a pass of its own zeroing the
    output, because its packed filter holds all `reduced` (input channels x window) of each
    channel (CHANNEL_PACK_ELEMENTS: the input channels not tiled) or the tile of all
    `points` output points fits WHOLE_TILE_ELEMENTS (`_whole_output_tile`). Sapphire Rapids
    class, 1 thread, CPU time, the same process, interleaved, shared machine, batch 1,
    16 channels x 14 columns against 32 x 7: 3x3 stride 2 64x56x56 -> 128 1.17-1.29x, valid
    64x58x58 -> 64 1.11x, pad 1 128x28x28 -> 128 (the whole tile) 1.24x (README, CPU
    operators). Not with AVX2 (not measured)."""
    return lanes >= 16 and width >= lanes and (width * reduced <= CHANNEL_PACK_ELEMENTS or width * points <= WHOLE_TILE_ELEMENTS)


def _run_of(moving: Sequence[Access], fv: SSAValue) -> int | None:
    """The run length d of the accesses that move with the loop variable `fv` only through
    `fv floordiv d` (einc.transforms.vectorize.run_length), one d for all; 0 when none
    moves; None when one moves otherwise."""
    from einc.transforms.vectorize import run_length

    runs: set[int | None] = set()
    for a in moving:
        assert a.map is not None, a
        runs |= {run_length(e, a.operands, fv) for e in a.map.results if _mentions(e, a.operands, fv)}
    if not runs:
        return 0
    return runs.pop() if len(runs) == 1 and None not in runs else None


def _group_lanes(top: affine.ForOp, b: ScheduleBuilder, lanes: int, most: int = 2) -> affine.ForOp:
    """A grouped convolution whose groups hold fewer output channels than a vector has
    lanes (8 with AVX-512's 16), `most` groups or fewer filling a vector (Choices.group_lanes):
    the group loop g and the channel loop f below it (the
    `F.q`, `F.r` the loops stage split `F` into) become one loop of `lanes` channels over
    `lanes / |f|` groups (transform.einc.group_lanes), which `_block_channels` then blocks
    as whole vectors, each group's input broadcast over its lanes (egpu.vbroadcast_runs).
    Applied when f is contiguous with g in the output (`8 * F.q + F.r`) and an input reads g
    without f (the group's input channels). Returns the nest's (new) outermost loop."""
    band = band_from(top)
    groups = written_groups(top)
    if len(groups) != 1 or lanes < 4:
        return top
    ((out, group),) = groups.items()
    fixed = determined_loops(group, [induction_var(loop) for loop in band])
    stores = [a for a in group if a.write and a.map is not None]
    loads = [a for a in _loads(top) if a.buffer is not out and a.map is not None]
    if not stores:
        return top
    for g, f in zip(band, band[1:]):
        ng, nf = trip_count(g) or 0, trip_count(f) or 0
        gv, fv = induction_var(g), induction_var(f)
        if gv not in fixed or fv not in fixed or not 2 <= nf < lanes or lanes % nf or ng % (lanes // nf):
            continue
        if lanes // nf > most:
            return top
        store_map = stores[0].map
        assert store_map is not None
        forms = [linear_form(e, stores[0].operands) for e in store_map.results]
        if not any(form is not None and form[0].get(fv) and form[0].get(gv) == nf * form[0][fv] for form in forms):
            continue
        if not any(_moves_with(a, gv) and not _moves_with(a, fv) for a in loads):
            continue
        grouped = b.try_(lambda: b.group_lanes(b.handle(g), lanes // nf))  # noqa: B023
        if isinstance(grouped, lt.Failure):
            return top
        return b.loop(grouped[0]) if g is top else top
    return top


def _one_dim(access: Access, iv: SSAValue) -> tuple[int, int] | None:
    """The one dimension of an (affine, linear) access that moves with `iv` and its
    coefficient there, or None (none, several, or an index that is not linear)."""
    assert access.map is not None, access
    found: list[tuple[int, int]] = []
    for d, e in enumerate(access.map.results):
        form = linear_form(e, access.operands)
        if form is None:
            return None
        if form[0].get(iv):
            found.append((d, form[0][iv]))
    return found[0] if len(found) == 1 else None


PAIR_COLUMNS = 14
"""The most output columns `_pair_lanes` unrolls: 14 accumulators, the broadcast pairs and
the filter vector in AVX-512's 32 registers (README, grouped_tiles.py's pair form)."""


PAIR_WINDOW_UNROLL = 7
"""The widest window row `_pair_form` unrolls around its columns (a 7x7 filter: 7 x 14 FMAs
from 20 broadcast pairs)."""


def _pairs_here(lanes: int) -> bool:
    """Whether the default takes the pair form (Choices.pair_lanes None): vectors of 16
    float32 lanes (AVX-512, whatever the FMA datapath's width: Intel's 512-bit one and Zen
    4's 256-bit one both run it faster than the blocked vectors)."""
    return lanes >= 16


def _pair_lanes(top: affine.ForOp, b: ScheduleBuilder, lanes: int, rows: bool | None = None,
                staged: list[SSAValue] | None = None) -> affine.ForOp | None:  # fmt: skip
    """The pair form of a grouped convolution whose groups hold half a vector's output
    channels (Choices.pair_lanes; README, "The convolutions on an Intel Xeon"): the band
    `[outer..., g, f, spatial..., j, reductions...]` (g the group, f the channel in it, j
    the output column) becomes `outer..., g.o, spatial..., j.o, reductions..., j.i, l` with
    g tiled by 2 (a pair of groups) and `l` its two groups interleaved with f
    (`group_lanes ... interleaved`, lane 2 f + g); the output tile staged at j.o and the
    filter packed at g.o in lane order (`split` by |f|, the group innermost), the pair's
    input staged at g.o with the two groups' values of a pixel side by side (`split` by the
    group's input channels, the group innermost; with its `halo` where its reads are
    bounds-guarded: no condition left), so that each FMA's input is one run of two
    (`egpu.vload_repeat`: one 64-bit broadcast on AVX-512, no shuffle); j.i unrolled
    (`stmt.tile_cols`), l vectorized; the staged input's handle appended to `staged` (the
    caller hoists its frame fill once the parallel loop is chosen). Returns the nest's new
    outermost loop, or None (nothing added: not such a nest)."""
    band = band_from(top)
    groups = written_groups(top)
    if len(groups) != 1 or lanes < 4:
        return None
    ((out, group),) = groups.items()
    if _element(out) == f16:
        return None
    ivs = [induction_var(loop) for loop in band]
    fixed = determined_loops(group, ivs)
    parallel = [loop for loop in band if induction_var(loop) in fixed]
    reduction = [loop for loop in band if induction_var(loop) not in fixed]
    stores = [a for a in group if a.write and a.map is not None]
    loads = [a for a in _loads(top) if a.buffer is not out]
    if not stores or not reduction or band != [*parallel, *reduction] or len(parallel) < 3 or any(a.map is None for a in loads):
        return None
    j = parallel[-1]
    if not _unit_stride(stores[0].map, stores[0].operands, induction_var(j)):
        return None
    for k in range(len(parallel) - 2):
        g, f = parallel[k], parallel[k + 1]
        ng, nf = trip_count(g) or 0, trip_count(f) or 0
        gv, fv = induction_var(g), induction_var(f)
        if 2 * nf != lanes or ng % 2:
            continue
        out_g, out_f = _one_dim(stores[0], gv), _one_dim(stores[0], fv)
        if out_g is None or out_f != (out_g[0], 1) or out_g[1] != nf:  # the output's channel `|f| g + f`
            continue
        inputs = [a for a in loads if _moves_with(a, gv) and not _moves_with(a, fv)]
        filters = [a for a in loads if _moves_with(a, fv)]
        if len({a.buffer for a in inputs}) != 1 or len({a.buffer for a in filters}) != 1:
            continue
        in_g = {_one_dim(a, gv) for a in inputs}
        filter_f, filter_g = {_one_dim(a, fv) for a in filters}, {_one_dim(a, gv) for a in filters}
        if len(in_g) != 1 or len(filter_f) != 1 or len(filter_g) != 1:
            continue
        (ig,), (ff,), (fg,) = in_g, filter_f, filter_g
        if ig is None:
            continue
        in_dim, per_group = ig
        if per_group < 2 or ff is None or ff[1] != 1 or fg != (ff[0], nf):  # the filter's channel `|f| g + f`
            continue
        return _pair_form(parallel, reduction, k, b, out, (out_g[0], nf), filters[0].buffer, (ff[0], nf),
                          inputs[0].buffer, (in_dim, per_group), rows, staged)
    return None


def _pair_form(parallel: list[affine.ForOp], reduction: list[affine.ForOp], k: int, b: ScheduleBuilder, out: SSAValue,
               out_split: tuple[int, int], weight: SSAValue, weight_split: tuple[int, int], image: SSAValue,
               image_split: tuple[int, int], rows: bool | None = None,
               staged_out: list[SSAValue] | None = None) -> affine.ForOp:  # fmt: skip
    """`_pair_lanes`' steps on the band `[*parallel, *reduction]` (g = parallel[k], f =
    parallel[k + 1]); each split `(d, F)` stages a tensor's dimension d as `x floordiv F`,
    `x mod F`; `rows` (Choices.pack_rows; None: an input under PREFETCH_MIN_BYTES): the
    staged input's copy-in moved into the first output row loop below the pair, each row
    packed before the output row that reads it first (`pack_rows`; where refused, the whole
    plane before the rows, the next pair's planes prefetched a row of each per output row:
    `prefetch ... spread`); `staged_out` receives the staged input's handle."""
    band = [*parallel, *reduction]
    g, f, j = parallel[k], parallel[k + 1], parallel[-1]
    stmt = _tag(g, lt.STMT_ATTR)
    nj = trip_count(j) or 1
    tw = max(t for t in range(1, min(nj, PAIR_COLUMNS) + 1) if nj % t == 0)
    knob_w = b.knob(f"{stmt}.tile_cols", tw, {t for t in range(2, 17) if nj % t == 0} or {tw})
    handles = {loop: b.handle(loop) for loop in band}
    go_h, gi_h = b.tile(handles[g], 2)
    jo_h, ji_h = b.tile(handles[j], knob_w)
    wanted = [*(handles[x] for x in parallel[:k]), go_h, *(handles[x] for x in parallel[k + 2 : -1]), jo_h,
              *(handles[x] for x in reduction), ji_h, gi_h, handles[f]]  # fmt: skip
    reordered = b.try_(lambda: b.reorder(wanted))
    if isinstance(reordered, lt.Failure):
        return band_from(b.loop(handles[band[0]]) if band[0] is not g else b.loop(go_h))[0]
    new = [b.loop(h) for h in reordered]
    b.remember(new, reordered)
    go_h, jo_h, ji_h = reordered[k], reordered[len(parallel) - 2], reordered[-3]
    paired = b.try_(lambda: b.group_lanes(reordered[-2], 2, interleaved=True))
    if isinstance(paired, lt.Failure):
        return new[0]
    lane_axis = _tag(b.loop(paired[1]), lt.AXIS_ATTR)

    def innermost_pair(rank: int, d: int) -> tuple[int, ...]:  # split dimension d's two parts last, the group innermost
        return (*(x for x in range(rank + 1) if x not in (d, d + 1)), d + 1, d)

    def group_innermost(rank: int, d: int) -> tuple[int, ...]:  # only the group moved innermost
        return (*(x for x in range(rank + 1) if x != d), d)

    def rank(buffer: SSAValue) -> int:
        return len(cast("MemRefType[Attribute]", buffer.type).get_shape())

    if isinstance(b.try_(lambda: b.cache_write(buffer_name(out), jo_h, layout=innermost_pair(rank(out), out_split[0]),
                                               split=out_split)), lt.Failure):  # fmt: skip
        return new[0]
    b.try_(lambda: b.cache_read(buffer_name(weight), go_h, layout=innermost_pair(rank(weight), weight_split[0]),
                                split=weight_split))  # fmt: skip
    layout = group_innermost(rank(image), image_split[0])
    staged = b.try_(lambda: b.cache_read(buffer_name(image), go_h, layout=layout, split=image_split, halo=True))
    if isinstance(staged, lt.Failure):
        staged = b.try_(lambda: b.cache_read(buffer_name(image), go_h, layout=layout, split=image_split))
    if rows is None:
        rows = _bytes_of(image) < PREFETCH_MIN_BYTES
    if staged_out is not None and not isinstance(staged, lt.Failure):
        staged_out.append(staged)
    if rows and not isinstance(staged, lt.Failure) and k + 2 < len(parallel) - 1:  # the first output row loop below the pair
        b.try_(lambda: b.pack_rows(staged, reordered[k + 1]))
    elif not rows and not isinstance(staged, lt.Failure) and k + 2 < len(parallel) - 1:
        # the whole plane packed (an input from DRAM): the next pair's planes prefetched a row
        # of each per output row, the last pair's wrapping into the next image's first
        # (1.04-1.08x at batch 16 on the Xeon; README "The grouped convolution's next pair
        # prefetched")
        b.try_(lambda: b.prefetch(buffer_name(image), go_h, 1, spread=reordered[k + 1]))
    if isinstance(b.try_(lambda: b.unroll(ji_h, knob_w)), lt.Failure):
        return new[0]
    # the window's innermost loop (KW) unrolled whole around the columns: pixel p at KW k
    # reads pair p + k, so GCC broadcasts each of the row's pairs once; GCC unrolls a 3-wide
    # window itself, not a 5-wide one (one broadcast per FMA: 0.33-0.37 of the FMA peak against
    # 0.61-0.71 unrolled, 5x5 grouped on the Xeon; README "The pair form's window unrolled")
    window = reduction[-1]
    if len(reduction) > 1 and 1 < (trip_count(window) or 0) <= PAIR_WINDOW_UNROLL:
        b.try_(lambda: b.unroll(reordered[-4], trip_count(window) or 1))
    b.try_(lambda: b.vectorize(b.match(stmt, lane_axis, root=nest_root(b, new[0]))))
    return new[0]


def _parallel_chunks(
    before: Sequence[affine.ForOp], channel_tiles: int, after: Sequence[affine.ForOp], columns: int, lanes: int
) -> int | None:
    """The chunk size that splits the first spatial loop (`after[0]`) of a channel-blocked
    nest into `PARALLEL_MIN_TRIP / 2` chunks or more (one per core of an 8-core host), when
    the loops above the filter pack and the input-channel tiles (batch, channel tiles) give
    fewer parallel units (with the input channels tiled or not, since cpu.20): the largest size dividing the loop that gives that many chunks and whose chunks
    hold 16 vectors of output columns or more (the filter is packed again per chunk: scalar
    copies, about lanes / (columns x size) of the FMAs). `parallel_loop` then takes the
    chunk loop. None: no split (enough units, no spatial loop, or one too short)."""
    units = channel_tiles * math.prod(trip_count(loop) or 1 for loop in before)
    if not after or units >= PARALLEL_MIN_TRIP // 2:
        return None
    n = trip_count(after[0]) or 0
    want = PARALLEL_MIN_TRIP // 2  # the chunk loop alone: parallel_loop takes one loop
    sizes = [t for t in range(1, n // 2 + 1) if n % t == 0 and n // t >= want and t * columns >= 16 * lanes]
    return max(sizes) if sizes else None


WHOLE_TILE_ELEMENTS = 16384
"""`_block_channels` stages the output tile of every output point of a channel tile at once,
above the input-channel tiles (`_whole_output_tile`), when it has at most this many elements
(64 KiB of float32, the most a local buffer holds: staging.MAX_LOCAL_ELEMENTS; in the L2
cache beside the packed filter). 4096 (16 KiB, in L1) until cpu.20: a padded 3x3
convolution 1x256x14x14 -> 256 (32 channels x 196 points, 6272) staged whole ran 1.18x
(Sapphire Rapids class, 1 thread, CPU time, interleaved, shared machine)."""


def _whole_output_tile(tiled_c: bool, batch_inside: bool, split: int | None, f_options: set[int],
                       points: int) -> bool:  # fmt: skip
    """Whether `_block_channels` stages the output tile at the channel tile (above the
    input-channel tiles, zero-initialised once and written back once) rather than per row of
    columns inside each input-channel tile (copied in and out, transposed, once per
    input-channel tile: with 7 columns and 32 input channels a tile, a tenth of the time):
    where the input channels are tiled, the loops below the channel tile are those of one
    image (neither the batch inside nor the spatial loop split for parallelism) and the tile
    of every output point fits in WHOLE_TILE_ELEMENTS with the largest channel tile."""
    return tiled_c and not batch_inside and split is None and max(f_options) * points <= WHOLE_TILE_ELEMENTS


BATCH_INSIDE_POINTS = 16
"""`_block_channels` moves the batch loops below the channel tiles when an image has fewer
output points than this many vectors (the packed filter then serves the whole batch)."""


def _images_per_tile(before: list[affine.ForOp], width: int, points: int) -> int:
    """The images of a batch (the one loop `before` the channel tiles) whose output tile,
    `width` channels at every one of their `points`, `_block_channels` stages at once above
    the input-channel tiles when the batch runs inside them: the most that divide the batch
    and fit WHOLE_TILE_ELEMENTS; 0 for fewer than two, or other loops above the channel tiles.
    The filter tiles are packed once per run of images (once per call where the whole
    batch fits). Conv 3x3 pad 1, 16x512x7x7 -> 512, AVX-512 (32 channels x 8 images x 49
    points, 12544 elements), 1 thread, thread CPU time, same process, shared machine: 1.23-1.27x
    the rows' tiles copied in and out per 32 input channels (README)."""
    if len(before) != 1 or (n := trip_count(before[0]) or 0) < 2:
        return 0
    return max((d for d in range(2, n + 1) if n % d == 0 and width * d * points <= WHOLE_TILE_ELEMENTS), default=0)


def _half(lanes: int) -> int:
    """The narrowest channel tile `_block_channels` vectorizes: half a vector with AVX-512
    (8 lanes, an AVX2 vector), a whole one otherwise."""
    return lanes // 2 if lanes >= 16 else lanes


def _innermost(rank: int, dim: int) -> tuple[int, ...]:
    """The dimension order moving `dim` innermost."""
    return (*(d for d in range(rank) if d != dim), dim)


def _block_channels(band: list[affine.ForOp], n_outer: int, b: ScheduleBuilder, lanes: int, plan: _ChannelPlan,
                    choices: Choices = POLICY) -> affine.ForOp:  # fmt: skip
    """Register-block a band `[outer parallel..., reductions..., j]` over output channels f
    (vectors) x output columns j (unrolled rows), the reductions (input channels, then the
    window) inside, the order `outer..., f tiles, [c tiles], outer spatial..., j tiles, c,
    window..., j, f`: the output tile staged in a local array with the channels
    innermost (cache_write with a layout) so that every accumulator is a register across the
    reductions, and the filter tile packed once per (f, c) tile with its channels innermost
    (cache_read with a layout), a vector of filter per window element. Each step loads a
    vector of filter per `tf` channels and broadcasts one input per column: tw x tf/lanes
    FMAs per tw + tf/lanes loads. With the input channels tiled (a filter tile larger than
    CHANNEL_PACK_ELEMENTS), the output tile is copied in and out once per input-channel
    tile (a small map's whole tile staged above them instead: `_whole_output_tile`), and
    the loops above the first input-channel tile (batch, channel tiles) are the ones that
    can run in parallel. Sizes are knobs over sizes that divide their loops.
    Returns the band's new outermost loop."""
    outer, reductions, j = band[:n_outer], band[n_outer:-1], band[-1]
    f, c = plan.f, reductions[0]
    nf, nj, nc = trip_count(f) or 0, trip_count(j) or 0, trip_count(c) or 0
    stmt = _tag(f, lt.STMT_ATTR)
    # every combination of the knobs' options applies: channel tiles no larger than the
    # packed filter allows with the largest input-channel tile
    rest = math.prod(trip_count(r) or 1 for r in reductions[1:])
    f_options = {t for t in (_half(lanes), lanes, 2 * lanes, 4 * lanes)
                 if nf % t == 0 and t * plan.tc * rest <= CHANNEL_PACK_ELEMENTS} | {plan.tf}  # fmt: skip
    knob_f = b.knob(f"{stmt}.tile_channels", plan.tf, f_options)
    knob_w = b.knob(f"{stmt}.tile_cols", plan.tw, {t for t in range(2, 17) if nj % t == 0} or {plan.tw})
    handles = {loop: b.handle(loop) for loop in band}
    fo_h, fi_h = b.tile(handles[f], knob_f)
    jo_h, ji_h = b.tile(handles[j], knob_w)
    fo, fi, jo, ji = (b.loop(h) for h in (fo_h, fi_h, jo_h, ji_h))
    handles.update({fo: fo_h, fi: fi_h, jo: jo_h, ji: ji_h})
    co = ci = c
    if plan.tc < nc:
        options = {t for t in range(1, nc + 1) if nc % t == 0 and plan.tf * t * rest <= CHANNEL_PACK_ELEMENTS}
        knob_c = b.knob(f"{stmt}.tile_reduce", plan.tc, options)
        co_h, ci_h = b.tile(handles[c], knob_c)
        co, ci = b.loop(co_h), b.loop(ci_h)
        handles.update({co: co_h, ci: ci_h})
    k = outer.index(f)
    before, after = outer[:k], outer[k + 1 :]
    tiled_c = [co] if co is not ci else []
    # the filter is packed once per (channel tile, input-channel tile), above the spatial
    # loops: packing is scalar and strided, so packing per output row would cost about
    # lanes / columns of the vector FMAs (more than they do for 7 or 14 columns). Then only
    # the loops above the pack (and the input-channel tiles) can run in parallel: with few
    # channel tiles, the first spatial loop is split into chunks above them
    # (`_parallel_chunks`), the filter packed once per chunk
    split = _parallel_chunks(before, nf // plan.tf, after, nj, lanes)
    # small images (a 7x7 map) in a batch: the batch loops go below the channel tiles, so
    # that each packed filter tile serves every image instead of being packed again per image
    # (packing costs about lanes / points of the FMAs: a third with 49 points); the channel
    # tiles are then the parallel units, so only where they are enough for every core
    points = nj * math.prod(trip_count(loop) or 1 for loop in after)
    batch_inside = (math.prod(trip_count(loop) or 1 for loop in before) > 1 and points < BATCH_INSIDE_POINTS * lanes
                    and nf // plan.tf >= PARALLEL_MIN_TRIP // 2)  # fmt: skip
    if choices.batch_inside is not None:
        batch_inside = choices.batch_inside and math.prod(trip_count(loop) or 1 for loop in before) > 1
    chunks = fo  # the loop the filter is packed in when the input channels are not tiled
    # with the input channels tiled, the batch inside stages the output tile of a run of
    # images (every point of each) above the input-channel tiles: zeroed once, copied out
    # once, where a row's tile was copied in and out per input-channel tile
    images = _images_per_tile(before, max(f_options), points) if batch_inside and tiled_c else 0
    run = fo
    if images:
        no_h, ni_h = b.tile(handles[before[0]], images)
        run, ni = b.loop(no_h), b.loop(ni_h)
        handles.update({run: no_h, ni: ni_h})
        wanted = [fo, run, *tiled_c, ni, *after, jo, ci, *reductions[1:], ji, fi]
    elif batch_inside:
        wanted = [fo, *tiled_c, *before, *after, jo, ci, *reductions[1:], ji, fi]
    elif split is not None:
        knob_s = b.knob(f"{stmt}.tile_spatial", split, {t for t in range(1, (trip_count(after[0]) or 1) + 1)
                                                         if (trip_count(after[0]) or 1) % t == 0})  # fmt: skip
        so_h, si_h = b.tile(handles[after[0]], knob_s)
        so, si = b.loop(so_h), b.loop(si_h)
        handles.update({so: so_h, si: si_h})
        chunks = so
        wanted = [*before, fo, so, *tiled_c, si, *after[1:], jo, ci, *reductions[1:], ji, fi]
    else:
        wanted = [*before, fo, *tiled_c, *after, jo, ci, *reductions[1:], ji, fi]
    reordered = b.try_(lambda: b.reorder([handles[x] for x in wanted]))
    if isinstance(reordered, lt.Failure):
        return band_from(band[0] if band[0] is not f else fo)[0]  # the (legal) tilings only
    new = [b.loop(h) for h in reordered]
    b.remember(new, reordered)
    reduction_order(b, stmt, new[wanted.index(ci) : wanted.index(ci) + len(reductions)])
    whole = images or _whole_output_tile(bool(tiled_c), batch_inside, split, f_options, points)
    at_out, at_filter = new[wanted.index(run if whole else jo)], new[wanted.index(co if tiled_c else chunks)]
    ji_new, fi_new = new[-2], new[-1]
    (out,) = written_groups(new[0])
    out_rank = len(cast("MemRefType[Attribute]", out.type).get_shape())
    filter_rank = len(cast("MemRefType[Attribute]", plan.filter.type).get_shape())
    # stage first: the vector loop is unit-stride in the staged tiles, not in the tensors
    if _element(out) == f16:  # see _block_matmul
        return new[0]
    out_name = buffer_name(out)
    if not (whole or tiled_c or batch_inside or split is not None) and after and after[-1] in wanted:
        least = {None: STREAM_PLANES_MIN_BYTES, True: 0, False: None}[choices.stream_planes]
        planes = _stream_planes(new[wanted.index(fo)], new[wanted.index(after[-1])], new[-1], plan.filter, out, b,
                                lanes, least)  # fmt: skip
        out_name = planes or out_name
    if isinstance(b.try_(lambda: b.cache_write(out_name, b.handle(at_out), layout=_innermost(out_rank, plan.out_dim))), lt.Failure):
        return new[0]
    if choices.pack:
        b.try_(lambda: b.cache_read(buffer_name(plan.filter), b.handle(at_filter), layout=_innermost(filter_rank, plan.filter_dim)))
    if choices.prefetch is not False and after and after[-1] in wanted:
        _prefetch_rows(new[wanted.index(after[-1])], new[-1], plan.filter, out, b, 0 if choices.prefetch else PREFETCH_MIN_BYTES,
                       None if choices.prefetch_tile is False else _channel_tiles(new[: wanted.index(fo) + 1]))  # fmt: skip
    if isinstance(b.try_(lambda: b.unroll(b.handle(ji_new), knob_w)), lt.Failure):
        return new[0]
    b.try_(lambda: b.vectorize(b.match(stmt, _tag(fi_new, lt.AXIS_ATTR), root=nest_root(b, new[0]))))
    return new[0]


PREFETCH_MIN_BYTES = 4 << 20
"""The smallest input `_prefetch_rows` prefetches by default: a grouped convolution's input
at batch 1 (0.8 MB, 256 x 28 x 28) stays in the caches between calls, and its prefetches
cost 2-4% there (AVX-512, one thread, shared machine: 0.158 against 0.155 ms); at batch 16
(12.8 MB) they gain 7-12% (2.83-2.91 against 3.04-3.26 ms; README)."""


def _channel_tiles(loops: list[affine.ForOp]) -> affine.ForOp | None:
    """The innermost of `loops` (a blocked convolution's loops down to its channel tiles)
    with more than one iteration: the loop whose next iteration reads the next channel tile's
    input (`_prefetch_rows`)."""
    return next((loop for loop in reversed(loops) if (trip_count(loop) or 2) > 1), None)


def _prefetch_rows(row: affine.ForOp, lanes: affine.ForOp, weight: SSAValue, out: SSAValue, b: ScheduleBuilder,
                   least: int = 0, tile: affine.ForOp | None = None) -> None:  # fmt: skip
    """The input of a nest blocked over several groups per vector (its index reads the lane
    loop `lanes` through a division: `8 * (l floordiv 8)`, group_lanes) prefetched one
    iteration ahead at the top of the output-row loop `row` (Choices.prefetch): one row of
    each of the tile's input channels. With the channel-tile loop `tile` (around `row`;
    Choices.prefetch_tile), the next tile's input instead, spread over the rows: at the top
    of output row r, row r of each of the next tile's channels (the last tile's wrapping
    into the next image's first); where that fails, the next row as without. Nothing for
    other nests (their input does not move with the lanes), whose hardware prefetchers
    follow fewer streams, nor inputs smaller than `least` bytes."""
    for buffer in _moving_inputs(row, lanes, weight, out):
        if _bytes_of(buffer) < least:
            continue
        if tile is not None and not isinstance(
            b.try_(lambda: b.prefetch(buffer_name(buffer), b.handle(tile), 1, spread=b.handle(row))),  # noqa: B023
            lt.Failure,
        ):
            continue
        b.try_(lambda: b.prefetch(buffer_name(buffer), b.handle(row), 1))  # noqa: B023


STREAM_PLANES_MIN_BYTES = 4 << 20
"""The smallest output whose planes `_stream_planes` stages and streams by default: a grouped
convolution's output at batch 1 (0.8 MB) stays in the caches between calls, where the staged
planes cost 5-8% (0.344-0.356 against 0.328 ms on Zen 4, one thread, thread CPU time); at
batch 16 (12.8 MB) they gain 1.19-1.29x (README, "The grouped convolution's output planes
streamed")."""


def _stream_planes(tile: affine.ForOp, row: affine.ForOp, lanes_loop: affine.ForOp, weight: SSAValue, out: SSAValue,
                   b: ScheduleBuilder, lanes: int, least: int | None) -> str | None:  # fmt: skip
    """Stage the output `out` of a nest blocked over several groups per vector (its input
    moves with the lane loop `lanes_loop` through a division, as `_prefetch_rows` finds it)
    at the channel-tile loop `tile` (`cache_write` in the output's own layout: the tile's
    channels' whole planes, in the caches beside the rows' register tiles staged inside it,
    whose copy-outs now write it) and copy it out with non-temporal stores (one run: the
    planes of consecutive channels lie end to end in the output). Only for an output of
    `least` bytes or more (None: never), planes of at most WHOLE_TILE_ELEMENTS and runs of
    whole vectors of `lanes`. The staged buffer's name, for the row tiles' `cache_write`,
    or None where nothing was staged. einc-init-accumulators starts both tiles at zero."""
    if least is None or _bytes_of(out) < least or not _moving_inputs(row, lanes_loop, weight, out):
        return None
    shape = cast("MemRefType[Attribute]", out.type).get_shape()
    ivs = {induction_var(loop) for loop in [tile, *(x for x in walk_ops(tile) if isinstance(x, affine.ForOp))]}
    stores = [a for a in accesses(tile) if a.write and a.buffer is out]
    if len(stores) != 1 or stores[0].map is None:
        return None
    # the planes' extent per dimension: the trip counts of the loops inside `tile` each index moves with
    extents: list[int] = []
    for e in stores[0].map.results:
        form = linear_form(e, stores[0].operands)
        if form is None:
            return None
        span = 1
        for v, c in form[0].items():
            if v in ivs:
                loop = next(x for x in [tile, *walk_ops(tile)] if isinstance(x, affine.ForOp) and induction_var(x) is v)
                span += c * ((trip_count(loop) or 1) - 1) * step_of(loop)
        extents.append(span)
    if math.prod(extents) > WHOLE_TILE_ELEMENTS or contiguous_run(extents, shape) % lanes:
        return None
    staged = b.try_(lambda: b.cache_write(buffer_name(out), b.handle(tile)))
    if isinstance(staged, lt.Failure):
        return None
    b.try_(lambda: b.stream_stores(staged))
    buffers = handle_ops(b.interpreter.get_values((staged,))[0])
    return buffer_name(buffers[0].results[0]) if buffers and buffers[0].results else None


def _moving_inputs(nest: affine.ForOp, loop: affine.ForOp, *others: SSAValue) -> list[SSAValue]:
    """The inputs (kernel arguments, not staged tiles) read inside `nest`, other than
    `others`, whose index moves with `loop`: a grouped convolution's input with its lane loop
    (each group's value broadcast over its run of lanes: `_prefetch_rows`), a batched matmul's
    operands with its batch loop (`_prefetch_next`)."""
    iv = induction_var(loop)
    return list({a.buffer: None for a in _loads(nest) if isinstance(a.buffer, BlockArgument)
                 and all(a.buffer is not x for x in others) and a.map is not None and _moves_with(a, iv)})  # fmt: skip


def _bytes_of(buffer: SSAValue) -> int:
    t = cast("MemRefType[Attribute]", buffer.type)
    width = getattr(t.get_element_type(), "bitwidth", 32)
    return math.prod(t.get_shape()) * max(1, width // 8)


def _elementwise(top: affine.ForOp) -> bool:
    """A perfect tagged band writing one tensor at every one of its loop variables."""
    band = band_from(top)
    if not all(_tagged(loop) for loop in band) or not perfect_band(band) or "einc.init" in top.attributes:
        return False
    groups = written_groups(top)
    if len(groups) != 1:
        return False
    (group,) = groups.values()
    return determined_loops(group, [induction_var(loop) for loop in band]) == {induction_var(loop) for loop in band}


def _contraction(top: affine.ForOp) -> bool:
    """A matmul/convolution-like nest the per-nest policy reorders and blocks: a reduction
    innermost, the output unit-stride in its last parallel loop, and an input unit-stride
    in that loop that also moves with a reduction loop (input1[K, M]; not a broadcast
    row such as softmax's temp0[N])."""
    band = band_from(top)
    groups = written_groups(top)
    if not perfect_band(band) or len(groups) != 1:
        return False
    ((buffer, group),) = groups.items()
    ivs = [induction_var(loop) for loop in band]
    fixed = determined_loops(group, ivs)
    parallel = [iv for iv in ivs if iv in fixed]
    reduction = [iv for iv in ivs if iv not in fixed]
    stores = [a for a in group if a.write]
    if not parallel or not reduction or ivs[-1] in fixed or not stores:
        return False
    p = parallel[-1]
    if not _unit_stride(stores[0].map, stores[0].operands, p):
        return False
    for a in _loads(top):
        if a.buffer is buffer or not _unit_stride(a.map, a.operands, p):
            continue
        forms = [linear_form(e, a.operands) for e in a.map.results] if a.map is not None else []
        if any(form is not None and set(form[0]) & set(reduction) for form in forms):
            return True
    return False


def fuse_producers(block_ops: list[Operation], b: ScheduleBuilder) -> list[affine.ForOp]:
    """Compute each elementwise statement's producers at its outermost loop when that costs
    no recomputation (each iteration reads its own box of the producer's tensor, and the
    boxes tile it: the softmax/layernorm row pattern) and the producer's nest then goes
    away; nearest producer first, so a producer of a producer follows it in. The fused nest
    stays parallel where the consumer was big enough, and its innermost loops are
    vectorized where the usual rule allows. Returns the fused consumers."""
    from einc.transforms.compute_at import plan_compute_at
    from einc.transforms.loop_analysis import accesses

    tops = [op for op in block_ops if isinstance(op, affine.ForOp)]
    # A producer is a nest writing a tensor the consumer reads: compute_at refuses any other
    # (it computes the tensor the producer writes where the consumer reads it). Candidates
    # are found through the tensors read, not by trying every earlier nest, and taken
    # nearest first; a fused producer's own inputs bring their writers in. The nests
    # writing each tensor are indexed once: fusion only erases nests and puts copies inside
    # consumers, so the index of the nests left stays true.
    writers: dict[SSAValue, list[int]] = {}
    for k, top in enumerate(tops):
        for buffer in dict.fromkeys(a.buffer for a in accesses(top) if a.write):
            writers.setdefault(buffer, []).append(k)
    fused: list[affine.ForOp] = []
    for position, consumer in reversed(list(enumerate(tops))):
        if consumer.parent_block() is None or not _elementwise(consumer):
            continue
        work = math.prod(trip_count(loop) or 1 for loop in band_from(consumer))
        count = 0
        candidates = _Producers(writers)
        candidates.read((a.buffer for a in accesses(consumer)), position)
        while (at := candidates.nearest()) is not None:
            producer = tops[at]
            if producer.parent_block() is None or "einc.init" in producer.attributes or not _tagged(producer):
                continue
            if _contraction(producer):  # keeps its own reordering and register blocking
                continue
            plan = plan_compute_at(producer, consumer, b.functions.index.unwritten())
            if isinstance(plan, lt.Failure) or not plan.erase_original or plan.recompute != 1.0 or not plan.disjoint:
                continue
            inputs = [a.buffer for m in [*plan.fills, producer] for a in accesses(m)]
            b.compute_at(b.handle(producer), b.handle(consumer), plan)
            candidates.read(inputs, at)
            count += 1
        if not count:
            continue
        fused.append(consumer)
        _reuse_between_loops(consumer, b)
        _parallelize(band_from(consumer), work, b)
        for inner in [op for op in consumer.walk() if isinstance(op, affine.ForOp)]:
            if any(isinstance(op, affine.ForOp) for op in inner.body.walk()) or not _tagged(inner):
                continue
            groups = written_groups(inner)
            stores = [a for a in next(iter(groups.values()), ()) if a.write]
            if len(groups) == 1 and stores and _unit_stride(stores[0].map, stores[0].operands, induction_var(inner)) and (trip_count(inner) or 0) > 1:
                if not isinstance(b.try_(lambda: b.vectorize(b.handle(inner))), lt.Failure):  # noqa: B023
                    continue
            _vectorize_reduction(inner, b)
    return fused


@dataclass
class _Producers:
    """The nests (by position) that may produce what a consumer reads, nearest first: the
    writers of each tensor read, once, that come before the position given with it."""

    writers: dict[SSAValue, list[int]]
    heap: list[int] = field(default_factory=list[int])  # minus positions
    queued: set[int] = field(default_factory=set[int])
    seen: set[SSAValue] = field(default_factory=set[SSAValue])

    def read(self, buffers: Iterable[SSAValue], before: int) -> None:
        for buffer in buffers:
            if buffer in self.seen:
                continue
            self.seen.add(buffer)
            for k in self.writers.get(buffer, ()):
                if k < before and k not in self.queued:
                    self.queued.add(k)
                    heapq.heappush(self.heap, -k)

    def nearest(self) -> int | None:
        return -heapq.heappop(self.heap) if self.heap else None


COSTLY_DIALECTS = frozenset({"math"})
"""Ops worth a store and a load to compute once (transcendental functions): a value of a
fused loop built from them is reused by a later loop instead of computed again."""


def _reuse_between_loops(nest: affine.ForOp, b: ScheduleBuilder) -> None:
    """In a fused nest, a later innermost loop reuses (transform.einc.reuse) what an earlier
    sibling loop computed the same way per iteration, when that saves a costly op (softmax:
    the sum's `exp(x - max)` is stored in a row-local array, the normalisation loads it)."""
    from einc.transforms.loop_cse import plan_reuse

    inner = [op for op in nest.walk() if isinstance(op, affine.ForOp) and _tagged(op)
             and not any(isinstance(o, affine.ForOp) for o in op.body.walk())]  # fmt: skip
    for k, second in enumerate(inner):
        # what a reuse saves are ops of the second loop's body: without a costly one there,
        # no pair is worth planning (a long fused chain has as many loops as statements)
        costly = _costly(second)
        for first in inner[:k]:
            if not costly:
                break
            plan = plan_reuse(first, second)
            if isinstance(plan, lt.Failure):
                continue
            if not any(op.dialect_name() in COSTLY_DIALECTS for op in plan.ops_saved()):
                continue
            b.reuse(b.handle(first), b.handle(second))
            costly = _costly(second)


def _costly(loop: affine.ForOp) -> bool:
    return any(op.dialect_name() in COSTLY_DIALECTS for op in loop.body.block.ops)


def register_tile(lanes: int, fma_bits: int | None = None) -> tuple[int, int]:
    """(vectors, rows) of the accumulator tile of a blocked matmul on a host with `lanes`
    float32 lanes a vector and an FMA datapath `fma_bits` wide (None: this host's,
    einc.runtime.c.native_fma_bits): 3 x 8 with 32 vector registers (AVX-512; 2 x 8 where 3
    vectors do not divide the row), 2 x 6 with 16 (AVX2, SSE). With AVX-512, 4 x 8 (32
    accumulators in 32 registers) spills: gcc keeps accumulators on the stack, `vfmadd213ps
    72(%rsp)` in the k loop; 1 thread, shared machine, one process each (Zen 4): batched
    matmul Q K^T 192x128x64 0.50 -> 0.60 of the FMA peak (2 x 8), A V 192x128x128x64 0.51 ->
    0.56, 512x32x512 x16 0.63 -> 0.70, 1024^3 0.78 -> 0.81.

    On 512-bit FMA datapaths (Intel's AVX-512 cores; Zen 4 splits each 512-bit FMA in two)
    4 vectors by 4 rows: the same 16 accumulators, 4 broadcasts and 4 vector loads per 16
    FMAs instead of 8 and 2, and each row of the output tile four whole cache lines
    (Sapphire Rapids class, 1 thread, CPU time, the same process, interleaved, shared
    machine, against the 2 x 8 tile: 512x32x512 1.07-1.16x, at batch 16 1.26-1.32x; Q K^T
    12x128x64x128 1.04-1.08x, batch 16 1.15-1.26x; README, Benchmarks), where its packed
    panel fits L1 (`PANEL_L1_ELEMENTS`)."""
    if lanes >= 16:
        if fma_bits is None:
            from einc.runtime.c import native_fma_bits

            fma_bits = native_fma_bits()
        return (4, 4) if fma_bits >= 512 else (3, 8)
    return (2, 6)


def default_schedule(target: type[CLikeTarget], module: ModuleOp, choices: Choices = POLICY,
                     split_conditions: bool = True) -> Schedule | None:  # fmt: skip
    """The default schedule of a loop-level module for a CPU `target` (its vector width sets
    the tiles), or None when there is nothing to do. `module` is not modified. `choices`
    and `split_conditions` (conditions left in the loops when False): what a tuning sketch
    varies."""
    b = ScheduleBuilder(module.clone(), f"<default {target.name} schedule>", cloned_from=module)
    lanes = target.vector_lanes()
    for f in b.payload.walk():
        if isinstance(f, func.FuncOp) and f.body.blocks:
            fused = set(fuse_producers(list(f.body.block.ops), b))
            for top in [op for op in f.body.block.ops if isinstance(op, affine.ForOp)]:
                if top not in fused:
                    # a transposed convolution: a dense nest per phase (conditions split out)
                    for nest in (phase_nests(b, top) if split_conditions else None) or [top]:
                        schedule_nest(nest, b, lanes, choices)
            fuse_fills(f, b)
            fuse_fill_rows(f, b, lanes)
    if choices.stream is not False:
        _stream_outputs(b, 0 if choices.stream else STREAM_MIN_BYTES, lanes)
    if split_conditions:
        split_conditions_out(b)  # padding and stride tests out of the scheduled loops
    return None if b.empty() else b.finish()


STREAM_MIN_BYTES = 16 << 20
"""The smallest output whose tiles the default policy copies out non-temporally
(Choices.stream): the write-allocate read of every output line costs most where the output
is large and each element costs few FLOPs. Same-process A/B on the Xeon, one thread, a
shared machine, thread CPU time (benchmarks/stream_stores_ab.py, README "Non-temporal stores
of outputs"): matmul 4096x32x4096 (64 MiB out) 1.76-2.29x, 512x32x512 batch 16 (16 MiB)
1.29-1.90x, 2048x256x2048 (16 MiB) 1.05-1.08x; attention's Q K^T and A V at batch 16 (12
and 6 MiB) 0.98-1.09x; outputs of 1 MiB or less (batch 1) 0.96-1.08x (they stay in the
caches between calls, and streaming them sends them to memory)."""


def _vector_rows(tile: Operation, lanes: int, output: Sequence[int] | None) -> bool:
    """Whether the staged tile `tile` (a memref.alloca) of an output of shape `output` copies
    out in runs of whole vectors of `lanes`: its rows, or the rows it holds whole (two rows
    of 56 of a [.., 56, 56] output: one run of 112, which `stream_stores` copies out as one
    loop)."""
    kind: Attribute | None = tile.results[0].type if tile.results else None
    if not isinstance(kind, MemRefType):
        return False
    shape = cast("MemRefType[Attribute]", kind).get_shape()
    if not shape:
        return False
    if shape[-1] % lanes == 0:
        return True
    run = contiguous_run(shape, output) if output is not None and len(output) == len(shape) else shape[-1]
    # where the run is not coalesced after all (a guarded copy), each row's last pieces must
    # still be vectors of 16 bytes or more for einc-stream-stores to take them
    element: Attribute = cast("MemRefType[Attribute]", kind).get_element_type()
    width = element.bitwidth if isinstance(element, AnyFloat) else 32
    row_bytes = shape[-1] * (width // 8)
    return run % lanes == 0 and row_bytes % 16 == 0


def _stream_outputs(b: ScheduleBuilder, least: int, lanes: int) -> None:
    """`transform.einc.stream_stores` of the local `cache_write` tiles the schedule made
    (Choices.stream) of outputs of `least` bytes or more, or inside a loop that prefetches
    its inputs' next batch element (`prefetch ... evenly`, `_prefetch_next`: attention's
    Q K^T and A V at batch 16, 12 and 6 MiB out, Zen 4, 1 thread, thread CPU time: 1.06 and
    1.04x the prefetching kernel with plain stores), each where the op takes it (a
    tile whose copy-out writes a kernel argument the kernel does not read back). A tile in a layout of its own (a convolution's
    channels innermost) is left alone: its copy-out transposes, element by element, and the
    kernel's build would refuse streaming it (einc-stream-stores: not a vector store), and
    so is a tile whose runs in the output (`_vector_rows`) are not whole vectors of `lanes`."""
    shapes = _argument_shapes(b)  # one walk, however many tiles
    # the loops that prefetch their inputs' next batch element (`_prefetch_next`): those
    # inputs come from memory, and the output, written once, goes there too
    from_memory = [loop for op in b.sequence.body.block.ops if isinstance(op, et.PrefetchOp) and op.evenly is not None
                   for loop in handle_ops(b.interpreter.get_values((op.target,))[0])]  # fmt: skip
    for op in list(b.sequence.body.block.ops):
        order = op.layout_order if isinstance(op, et.CacheWriteOp) else None
        if not isinstance(op, et.CacheWriteOp):
            continue
        tiles = handle_ops(b.interpreter.get_values((op.results[0],))[0])
        big = shapes.get(op.tensor.data, (None, 0))[1] >= least
        streamed = bool(tiles) and all(any(loop.is_ancestor(tile) for loop in from_memory) for tile in tiles)
        if (op.memory.data == "local"
                and (order is None or order == tuple(range(len(order))))
                and all(_vector_rows(tile, lanes, shapes.get(op.tensor.data, (None, 0))[0]) for tile in tiles)
                and (big or streamed)):  # fmt: skip
            b.try_(lambda: b.stream_stores(op.results[0]))  # noqa: B023


def _argument_shapes(b: ScheduleBuilder) -> dict[str, tuple[tuple[int, ...] | None, int]]:
    """The shape (None if not a memref) and bytes of each kernel argument of the payload's
    functions, by name (one walk of the payload however many tiles ask: compile work stays
    linear in the program's size)."""
    found: dict[str, tuple[tuple[int, ...] | None, int]] = {}
    for f in b.payload.walk():
        if isinstance(f, func.FuncOp) and f.body.blocks:
            for arg in f.body.block.args:
                kind = arg.type
                shape = tuple(cast("MemRefType[Attribute]", kind).get_shape()) if isinstance(kind, MemRefType) else None
                found.setdefault(buffer_name(arg), (shape, _bytes_of(arg)))
    return found


def fuse_fills(f: func.FuncOp, b: ScheduleBuilder) -> None:
    """A reduction's fill (its `einc.init` nest) fused into the reduction's nest when the
    nest runs its outermost loop in parallel and the fill's outermost loop has the same
    range (`transform.einc.fuse`; the fused loop stays parallel): each
    iteration (an image, a matrix of a batch) zeroes its outputs just before accumulating
    into them, while they are in cache, instead of one pass zeroing every output first. At
    batch 16 the outputs outgrow the caches and that pass costs a write and a read of every
    output from memory: batched matmul Q K^T 192x128x64 (12.6 MB of outputs), AVX-512, 1
    thread, shared machine: 0.43 -> 0.53 of the FMA peak.

    The statement's further nests right after it (a transposed convolution's output phases,
    one nest each: `phase_nests`) are fused into the same loop when they qualify the same
    way: each image then runs every phase while its outputs are in L2 (the phases together
    write each output once), and `einc-init-accumulators`, which takes the fused fill per
    iteration, finds its box covered by the phases' tiles: the fill goes and every phase's
    tile starts at zero, where with the first phase alone fused the fill stayed and the other
    phases copied its zeros in (transposed 4x4 stride 2, 16x128x16x16 -> 64, AVX-512, 1
    thread, thread CPU time, same process, shared machine: 1.14x; README)."""
    ops = [op for op in f.body.block.ops if isinstance(op, affine.ForOp)]
    for fill, nest in zip(ops, ops[1:]):
        if not _fusable_fill(fill, nest):
            continue
        phases = list(itertools.takewhile(lambda op: _fusable_fill(fill, op), ops[ops.index(nest) + 1 :]))  # noqa: B023
        fused = b.try_(lambda: b.fuse(b.handle(fill), b.handle(nest)))  # noqa: B023
        for phase in phases:
            if isinstance(fused, lt.Failure):
                break
            loop: SSAValue = fused
            fused = b.try_(lambda: b.fuse(loop, b.handle(phase)))  # noqa: B023


def _fusable_fill(fill: affine.ForOp, nest: affine.ForOp) -> bool:
    """Whether `fuse_fills` fuses the fill `fill` with `nest` (or `nest` into the loop they
    were fused into): a nest of the fill's statement, its outermost loop parallel over the
    fill's range."""
    return ("einc.init" in fill.attributes and "einc.init" not in nest.attributes and _tagged(nest)
            and fill.attributes.get(lt.STMT_ATTR) == nest.attributes.get(lt.STMT_ATTR)
            and lt.PARALLEL_ATTR in nest.attributes
            and constant_bounds(fill) is not None and constant_bounds(fill) == constant_bounds(nest))  # fmt: skip


# -- window sums over whole rows (a depthwise convolution) ---------------------------------------


def _loop_pair(block_ops: Sequence[Operation]) -> tuple[affine.ForOp, affine.ForOp] | None:
    """A reduction's fill (an `einc.init` loop) and the nest right after it, of one statement."""
    loops = [op for op in block_ops if isinstance(op, affine.ForOp)]
    for fill, nest in zip(loops, loops[1:]):
        if ("einc.init" in fill.attributes and "einc.init" not in nest.attributes and _tagged(nest)
                and fill.next_op is nest and fill.attributes.get(lt.STMT_ATTR) == nest.attributes.get(lt.STMT_ATTR)):
            return fill, nest
    return None


def _same_range(a: affine.ForOp, b: affine.ForOp) -> bool:
    return constant_bounds(a) is not None and constant_bounds(a) == constant_bounds(b) and a.step == b.step


def fuse_fill_rows(f: func.FuncOp, b: ScheduleBuilder, lanes: int) -> None:
    """A contraction summed over whole output rows that no register tile blocks (a depthwise
    convolution: every loop moves its vector input, so `_block_rows` and `_block_channels`
    find no loop to block; a convolution with too few channels to block): the fill fused
    down to the row loop (each loop the fill and the nest share with the same range, by
    `transform.einc.fuse` level by level, below the batch loop where `fuse_fills` fused it),
    then the output row staged in a local array across the reductions (cache_write at the
    row loop). Each row is zeroed and summed while it is in L1, where the fill was a pass
    over a whole image's outputs (1.8 MB for 144 x 56 x 56, more than L2) that the sums then
    read back from memory; a row staged after such a pass read every row back, which is why
    staging alone lost at batch 16 (depthwise 3x3 pad 1, 16x144x56x56, AVX-512, 1 thread,
    process CPU time, shared machine: unstaged 3.4 ms, staged 5.3 ms, fused and staged
    2.5-2.6 ms; batch 1: 0.143 -> 0.128 ms). The staged row's copy-in, which the zeros
    stored right after it overwrite unread, is dropped by `einc-init-accumulators`: the
    output is written once and never read. Rows narrower than a vector (`lanes` float32
    lanes) stay as they are."""
    pair = _loop_pair(list(f.body.block.ops))
    depth = 0
    if pair is None:  # the fill already fused into the nest's outermost loop (fuse_fills)
        for top in (op for op in f.body.block.ops if isinstance(op, affine.ForOp)):
            if (pair := _loop_pair(list(top.body.block.ops))) is not None:
                depth = 1
                break
    if pair is None:
        return
    fill, nest = pair
    fills, band = band_from(fill), band_from(nest)
    if not perfect_band(band) or any(not _tagged(loop) for loop in band):
        return
    shared = 0
    while shared < min(len(fills), len(band)) and _same_range(fills[shared], band[shared]):
        shared += 1
    # below the shared loops: the fill's row (one loop) and the nest's window loops then the
    # row's vector loop j, none of them an output loop but j
    rest, row = band[shared:], fills[shared:]
    if depth + shared < 2 or len(row) != 1 or len(rest) < 2 or not _same_range(row[0], rest[-1]):
        return
    groups = written_groups(nest)
    if len(groups) != 1 or local_buffers(nest):
        return
    ((out, group),) = groups.items()
    stores = [a for a in group if a.write]
    window = [induction_var(loop) for loop in rest[:-1]]
    if not stores or any(_moves_with(a, iv) for a in stores for iv in window):
        return
    if not lanes <= (trip_count(rest[-1]) or 0) <= ROW_BLOCK_MAX_ELEMENTS:  # a row of a vector or more
        return
    # the inputs the taps read under a bounds guard (a padded window), small enough to stage,
    # that every loop around the rows moves (a depthwise input: each channel's plane staged
    # once; a convolution's input, the same for every filter, would be copied again per filter)
    around = [induction_var(loop) for loop in band[:shared]]
    parent = nest.parent_op()
    while isinstance(parent, affine.ForOp):
        around.append(induction_var(parent))
        parent = parent.parent_op()
    taps = sorted({buffer_name(a.buffer) for a in accesses(nest) if any(_moves_with(a, iv) for iv in window)
                   and all(_moves_with(a, iv) for iv in around) and _bytes_of(a.buffer) < HALO_MAX_BYTES
                   and bounds_guard(a, list(cast("MemRefType[Attribute]", a.buffer.type).get_shape())) is not None})  # fmt: skip
    handles = [(b.handle(x), b.handle(y)) for x, y in zip(fills[:shared], band[:shared])]
    if taps and (trip_count(band[shared - 1]) or 0) % WINDOW_ROWS == 0 < WINDOW_ROWS < (trip_count(band[shared - 1]) or 0):
        pair = _row_pairs(b, handles[-1], [b.handle(loop) for loop in rest[:-1]])
        if pair is None:
            return
        handles[-1] = pair
    levels: list[SSAValue] = []
    for h_fill, h_nest in handles:
        fused = b.try_(lambda: b.fuse(h_fill, h_nest))  # noqa: B023
        if isinstance(fused, lt.Failure):
            return
        levels.append(fused)
    if levels:
        b.try_(lambda: b.cache_write(buffer_name(out), levels[-1]))
        stage_halos(b, taps, levels[-2:])


WINDOW_ROWS = 2
"""The output rows `fuse_fill_rows` sums together across the window (the row loop tiled,
its tile moved below the window loops, above the vector loop): each input row a tap loads
serves the window rows of two outputs, and the two rows' accumulators stay in registers
(depthwise 3x3 pad 1, 144 x 56 x 56 at batch 1, its plane staged with the halo, AVX-512, 1
thread, load 10.8 on 2 cores, same run: 1.755 -> 1.167 ms)."""


def _row_pairs(b: ScheduleBuilder, rows: tuple[SSAValue, SSAValue], window: list[SSAValue]) -> tuple[SSAValue, SSAValue] | None:
    """The fill's and the nest's row loops (`rows`) tiled by WINDOW_ROWS, the nest's row
    tile moved below its `window` loops; the two outer row loops (to fuse), or None where a
    step was refused (the steps before it stay: legal, unfused)."""
    nest = b.try_(lambda: b.tile(rows[1], WINDOW_ROWS))
    if isinstance(nest, lt.Failure):
        return None
    order = b.try_(lambda: b.reorder([nest[0], *window, nest[1]]))
    if isinstance(order, lt.Failure):
        return None
    fill = b.try_(lambda: b.tile(rows[0], WINDOW_ROWS))
    if isinstance(fill, lt.Failure):
        return None
    return fill[0], order[0]


HALO_MAX_BYTES = 1 << 30
"""The largest input `fuse_fill_rows` stages with its halo (and sums in row pairs) by
default. Staged, each channel's padded plane is copied once into L1 (58 x 58 floats for a
56 x 56 map) and every tap is whole vector loads with no edge code. Until cpu.20 this was 4
MiB, from a run at load 8 where, at batch 16 (29 MB streamed from memory), staging looked
slower (17.8 ms unstaged, 21.7 staged, 19.8 staged and paired). Re-measured on the Xeon,
depthwise 3x3 pad 1, 16x144x56x56, 1 thread, thread CPU time, same process, 15 rounds, load
1.2-2 (`benchmarks/ab_operator_c.py depthwise 16`): unstaged 7.40 ms, staged and paired
6.47 (1.14x), and with the pairs' copy-out streamed as one run (`_stream_outputs`,
einc-coalesce-stream-copies) 3.73 ms (1.98x). So no input is too large to stage; the bound
only keeps the copy's index arithmetic in range."""


def stage_halos(b: ScheduleBuilder, tensors: Sequence[str], places: Sequence[SSAValue]) -> None:
    """Each of `tensors` (the inputs a window's taps read) read under a bounds guard (a padded
    window) staged with its halo (`cache_read ... halo`) at the first loop of `places` that
    holds its box (the plane of a channel above its rows, else one row's window): the
    padding zeros stored once, each tap then a run of whole vector loads, no edge code and
    no conditions for `split_conditions_out` to split (depthwise 3x3 pad 1, 144 x 56 x 56:
    each channel's 58 x 58 padded plane, 13 KiB, in L1). A tensor no guard reads is refused
    by the op and left as it is."""
    for tensor in tensors:
        for at in places:
            if not isinstance(b.try_(lambda: b.cache_read(tensor, at, halo=True)), lt.Failure):  # noqa: B023
                break
