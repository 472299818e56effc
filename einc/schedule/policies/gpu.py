"""The device default schedule: what einc does to the loops of a device target (OpenCL, CUDA,
HIP, HLSL, SYCL) when the user gives no schedule (einc.schedule.default picks it for the
`gpu` schedule family).

Like Roller, it constructs the schedule from the target's facts (its TargetDescription:
work-items per work-group, the subgroup width, shared and private memory, whether shared
memory is on chip) with a small analytic rule per kind of nest, and searches nothing. Per
statement nest (a perfect band of tagged loops writing one tensor; fills and other nests are
left to `convert-affine-to-egpu`'s default mapping):

- a contraction (a reduction whose input is reused across an output axis: matmul, batch
  matmul, convolution as an implicit GEMM, any `+=!` with reuse) is tiled on three levels:
  the innermost output axis `x` and the output axis `y` the input read along `x` does not
  move with (matmul's rows, a convolution's output channels) into work-group tiles
  (`block.x/y`), work-item tiles (`thread.x/y`: `THREADS` work-items, 16x16 where the
  target's default work-group is 256, else 8x8) and a register tile of up to `REGISTER`
  by `REGISTER` outputs per work-item, held in a private array across the reductions
  (`cache_write ... in "local"`) and unrolled (where the statement's body is a few ops,
  `UNROLL_BODY`; on PoCL a matmul's tile is 2 * `REGISTER` rows tall, `tall_rows`); the largest other output axis goes to
  `block.z`, any further ones run in each work-item. Where the target's shared memory is
  on chip (`shared_on_chip`), the outermost reduction is tiled (`ktile`: the staged tiles
  fill at most half the shared memory) and both inputs' tiles are staged in shared memory
  at the reduction tile loop (`cache_read ... in "shared"`): the hot loop then reads shared
  memory only, `rx * ry` FMAs per `rx + ry` shared loads, fewer where they are vector
  loads (`einc-vectorize-shared-loads`): each tile is staged with the dimension of its
  register-tile axis innermost whatever the operand's global layout (`layout`: matmul's
  `A[N, K]` as `[K, N]`, a transposed `B[M, K]` as `[K, M]`, a convolution's filter
  `[F, C, KH, KW]` as `[C, KH, KW, F]`; rows padded by `TRANSPOSED_PAD` against the copy's
  bank conflicts), so it is read along that axis with vector loads; a convolution's
  innermost window axis (at most `WINDOW` long) is unrolled whole, so the input row under
  the register tile is consecutive elements read once for every offset. Where both slots
  fit, the K tile is chosen half as long and the staged tiles double buffered
  (`double_buffer`: the next tile's copies, `cp.async` on CUDA sm_80+, run under the
  current tile's compute, one barrier per tile). On targets with tensor cores (CUDA, HIP),
  a float16/bfloat16 contraction accumulated in float32 whose output axes and reduction
  are multiples of 16 is tried first on them (`tensorize`: a 16x16 output tile per warp):
  a block of warps (`tensorized_staged`) with A's and B's tiles of a reduction tile and
  the block's float32 accumulator tile staged in shared memory (rows padded by
  `TENSOR_PAD`: the fragment reads are free of bank conflicts), else one warp per block
  reading global memory (`tensorized`), the plan above where neither fits. Where the
  target's runtime runs work-items as the lanes of vectors (`items_vectorized`: Intel's
  SYCL CPU device), a two-axis contraction with one reduction takes a work-item per output
  column instead (`Variant.columns`, `one_column`): consecutive work-items read consecutive
  elements, one vector load. Register tiles are divisors of
  their axis (so the register loops have constant trip counts and unroll); work-item and
  work-group tiles need not divide (the last work-group's work-items outside the range skip
  the body);
- another reduction (a row sum, softmax's max and sum, layernorm's mean and variance) whose
  innermost reduction reads an input at unit stride, where shared memory is on chip or the
  runtime's barriers are compile-time splits of its work-item loop (`shares_reductions`:
  CUDA, HIP, Intel's SYCL CPU device): each output on a work-group, the reduction
  shared by its work-items, consecutive work-items reading consecutive elements (a
  cross-thread reduction: warp shuffles on CUDA/HIP), `row_threads` of them per row (the
  default work-group: 256 on CUDA/HIP, 64 on PoCL; two vectors of work-items where they are
  vector lanes, `items_vectorized`: 32 on SYCL; at most the row); otherwise (lavapipe,
  whose barriers switch coroutines; PoCL, `vector_rows`) one output per work-item, its
  accumulator in a private register across the reduction (`cache_write ... in "local"`)
  instead of a load and store of global memory per step, and on PoCL the row read in
  vectors of the target's width into vector partial sums (`vectorize_reduction`, a row at
  least a vector long: PoCL vectorizes no work-item loop in which work-items run loops of
  their own, but does a work-item's vectors);
- an elementwise nest of at most three axes: the innermost axis in chunks of up to `ITEMS`
  consecutive elements per work-item (a divisor of the axis: a loop of constant trip count
  the device compiler unrolls; a float16/bfloat16 output on CUDA/HIP with no even divisor
  up to `ITEMS`: chunks of `ITEMS`, the last cut short, so that the full ones are packed), the chunks over work-groups and work-items, the next axes on
  `block.y`, `block.z`; one of more axes is left to the default mapping.

Knobs (the tuner's default sketch varies them): `stmt.axis.threads` (work-items along an
axis), `stmt.axis.reg` (register tile), `stmt.axis.ktile` (reduction tile), `stmt.axis.items`
(elements per work-item). Every step is tried on the payload (ScheduleBuilder.try_): a step
the payload refuses is left out, so the schedule is always legal.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, cast

from xdsl.dialects import affine, func
from xdsl.dialects.builtin import MemRefType, ModuleOp, StringAttr, bf16, f16
from xdsl.ir import Attribute, Block, Operation, SSAValue

from einc.dialects.egpu_mma import LANES
from einc.errors import ScheduleError
from einc.ir.attrs import NARROW_FLOATS, dtype_name
from einc.schedule.builder import Failure, IllegalStep, ScheduleBuilder
from einc.schedule.checks import check_scheduled
from einc.schedule.script import Schedule
from einc.transforms import loop_transforms as lt
from einc.transforms.loop_analysis import (
    Access,
    accesses,
    band_from,
    buffer_name,
    determined_loops,
    induction_var,
    linear_form,
    perfect_band,
    trip_count,
    written_groups,
)

if TYPE_CHECKING:
    from einc.targets.clike import CLikeTarget
    from einc.targets.descriptions import TargetDescription

REGISTER = 8
"""The largest register tile per axis: 8x8 accumulators per work-item (64 registers, the
classic SGEMM thread tile; on PoCL's CPU device the 64x64 work-group tile it makes with 8x8
work-items is the fastest of the hand schedules tried)."""

ITEMS = 4
"""Elements per work-item of an elementwise nest (at most)."""

CROSS_THREAD_MIN = 32
"""A reduction shorter than this is not shared across work-items."""

UNROLL_BODY = 16
"""A contraction's register tile is unrolled only where the statement's body has at most
this many ops (a multiply-accumulate has six): a body of inlined math functions (einc's own
float64 `exp`, `pow` ... on HLSL) copied `rx * ry` times makes code, compile time and
shaders without making the tile faster."""

KUNROLL = 4
"""The unroll of a staged reduction tile's loop (independent steps for the device compiler
to schedule; a tile left in its tensor's order, K innermost, is then read a float4 at a
time)."""

WINDOW = 4
"""A contraction with several reduction axes (a convolution) has its innermost one unrolled
whole where it is at most this long (a window: KW)."""

TRANSPOSED_PAD = 4
"""The row pad (elements) of a shared tile staged with a permuted layout: one 16-byte word
(vector loads stay aligned), so the copy's writes down a column spread over the banks."""

TENSOR_TILE = 16
"""The output tile (and reduction multiple) of a tensor-core instruction."""

KTILES = (16, 8, 4, 2, 1)
"""Reduction tile sizes tried, largest first, for staging in shared memory."""

TENSOR_KTILES = (64, 32, 16)
"""Reduction tiles tried, largest first, for a tensor-core plan staged in shared memory."""

TENSOR_PAD = 8
"""The row pad (elements) of a float16/bfloat16 tile staged for tensor cores: 16 bytes, so
the rows a warp's fragment loads read (8 rows, 4 pairs of columns) start 4 banks apart."""

COLUMN_ROWS = 16
"""Work-items along y of a `Variant.columns` contraction (at most)."""


@dataclass(frozen=True)
class Facts:
    """What the policy reads of the target's description."""

    threads: int
    """Work-items per work-group the policy aims for (the target's default work-group)."""
    max_threads: int
    max_grid: tuple[int, int, int]
    shared_bytes: int
    """Shared memory a work-group's staged tiles may take (half the target's: two work-groups
    per multiprocessor)."""
    on_chip: bool
    warp: int

    @classmethod
    def of(cls, d: TargetDescription) -> Facts:
        return cls(min(d.default_block, d.max_threads_per_block), d.max_threads_per_block, d.max_grid,
                   d.shared_bytes_per_block // 2, d.shared_on_chip and d.shared_bytes_per_block > 0,
                   d.subgroup_size)  # fmt: skip

    @property
    def thread_limit(self) -> int:
        """The most work-items along one axis a knob offers: four default work-groups, at
        most the target's limit (a point whose axes multiply past it is refused by `bind`)."""
        return min(self.max_threads, 4 * self.threads)

    def split(self) -> tuple[int, int]:
        """Work-items (x, y) of a 2-d work-group: 16x16 for 256, 8x8 for 64."""
        y = 1 << (int(math.log2(max(self.threads, 1))) // 2)
        return self.threads // y, y


@dataclass
class _Nest:
    top: affine.ForOp
    stmt: str
    band: list[affine.ForOp]
    spatial: list[affine.ForOp]
    reduction: list[affine.ForOp]
    output: SSAValue
    loads: list[Access]
    body: int
    """The ops of the statement's body (in its innermost loop, nested ops included)."""

    def extent(self, loop: affine.ForOp) -> int:
        return trip_count(loop) or 1


def _tag(loop: affine.ForOp, name: str) -> str:
    tag = loop.attributes[name]
    assert isinstance(tag, StringAttr), tag
    return tag.data


def _tagged(loop: affine.ForOp) -> bool:
    return lt.STMT_ATTR in loop.attributes and lt.AXIS_ATTR in loop.attributes and "einc.copy" not in loop.attributes


def _tops(module: ModuleOp) -> list[affine.ForOp]:
    """The top-level loops of the module's functions, in order (scheduling a nest keeps
    one top-level loop per nest: its tiles and copies are nested in it)."""
    return [op for f in module.walk() if isinstance(f, func.FuncOp) and f.body.blocks
            for op in f.body.block.ops if isinstance(op, affine.ForOp)]  # fmt: skip


def _alone(top: affine.ForOp) -> tuple[ModuleOp, affine.ForOp]:
    """A module whose function holds a copy of the nest `top` alone, with copies of the
    operand-free ops of the function it uses (the buffers of intermediate tensors), or, where
    it uses another value of the function, a copy of the whole module: a plan is tried on it
    at a cost that follows the nest, not the program."""
    f = top.parent_op()
    assert isinstance(f, func.FuncOp)
    inside = {r for op in top.walk() for r in op.results} | {a for op in top.walk() for region in op.regions
                                                              for blk in region.blocks for a in blk.args}  # fmt: skip
    args = f.body.block.args
    outside = [v for op in top.walk() for v in op.operands if v not in inside and v not in args]
    owners = list(dict.fromkeys(v.owner for v in outside))
    if not all(isinstance(o, Operation) and not o.operands and not o.regions for o in owners):
        module = _module_of(top)
        whole = module.clone()
        return whole, _tops(whole)[_tops(module).index(top)]
    block = Block(arg_types=[a.type for a in args])
    mapping: dict[SSAValue, SSAValue] = {}
    for new, old in zip(block.args, args):
        new.name_hint = old.name_hint  # the tensors' names (buffer_name)
        mapping[old] = new
    for owner in owners:
        assert isinstance(owner, Operation)
        copy = owner.clone(value_mapper=mapping)
        block.add_op(copy)
    copy = top.clone(value_mapper=mapping)
    block.add_ops([copy, func.ReturnOp()])
    alone = f.clone_without_regions()
    alone.body.add_block(block)
    return ModuleOp([alone]), copy


def _module_of(op: affine.ForOp) -> ModuleOp:
    module: object = op.get_toplevel_object()
    assert isinstance(module, ModuleOp)
    return module


def analyse(top: affine.ForOp) -> _Nest | None:
    """The nest under `top` as the policy sees it, or None for one it leaves alone (a fill,
    an imperfect or untagged band, several tensors written, a rank-0 result, unknown trip
    counts)."""
    band = band_from(top)
    if "einc.init" in top.attributes or not all(_tagged(x) for x in band) or not perfect_band(band):
        return None
    if any(trip_count(x) is None for x in band):
        return None
    groups = written_groups(top)
    if len(groups) != 1:
        return None
    ((buffer, group),) = groups.items()
    ivs = [induction_var(x) for x in band]
    fixed = determined_loops(group, ivs)
    spatial = [x for x in band if induction_var(x) in fixed]
    if not spatial:
        return None
    loads = [a for a in accesses(top) if not a.write and a.buffer is not buffer]
    if any(a.map is None for a in loads):
        return None
    body = sum(1 for _ in band[-1].body.walk())
    return _Nest(top, _tag(top, lt.STMT_ATTR), band, spatial, [x for x in band if x not in spatial], buffer, loads, body)


def _moving_per_dimension(nest: _Nest, name: str) -> list[set[SSAValue]] | None:
    """Per dimension of input `name`'s load in `nest`, the variables its index moves with
    (nonzero coefficients); None for a rank-0/1 load or an index that is not linear."""
    load = next(a for a in nest.loads if buffer_name(a.buffer) == name)
    assert load.map is not None
    forms = [linear_form(e, load.operands) for e in load.map.results]
    if len(forms) < 2 or any(f is None for f in forms):
        return None
    return [{v for v, c in f[0].items() if c} for f in forms if f is not None]


def _moves_with(access: Access, loop: affine.ForOp) -> bool:
    iv = induction_var(loop)
    assert access.map is not None
    for e in access.map.results:
        form = linear_form(e, access.operands)
        if form is None or form[0].get(iv):
            return True
    return False


def _unit_stride(access: Access, loop: affine.ForOp) -> bool:
    if access.map is None or not access.map.results:
        return False
    form = linear_form(access.map.results[-1], access.operands)
    return form is not None and form[0].get(induction_var(loop)) == 1


def axes_of(nest: _Nest) -> tuple[affine.ForOp, affine.ForOp | None]:
    axes = contraction_axes(nest)
    assert axes is not None
    return axes


def contraction_axes(nest: _Nest) -> tuple[affine.ForOp, affine.ForOp | None] | None:
    """(x, y) of a contraction: x the innermost output axis, y the output axis with the most
    reuse of the input read along x (one it does not move with), None with one output axis;
    None when no input moving with a reduction is reused across an output axis (no reuse:
    a row sum)."""
    if not nest.reduction:
        return None
    reused = [a for a in nest.loads if any(_moves_with(a, r) for r in nest.reduction)
              and any(not _moves_with(a, s) and nest.extent(s) > 1 for s in nest.spatial)]  # fmt: skip
    if not reused:
        return None
    x = nest.spatial[-1]
    others = [s for s in nest.spatial[:-1] if nest.extent(s) > 1]
    along_x = [a for a in nest.loads if _moves_with(a, x)]
    free = [s for s in others if not any(_moves_with(a, s) for a in along_x)]
    y = (free or others or [None])[-1]
    return x, y


def _pow2_ceil(n: int) -> int:
    return 1 << max(0, math.ceil(math.log2(max(n, 1))))


def _largest_divisor(n: int, limit: int) -> int:
    return max(d for d in range(1, min(n, limit) + 1) if n % d == 0)


def register_options(extent: int) -> tuple[int, ...]:
    """Register tile sizes along an axis: its divisors up to 2 * REGISTER (constant trip
    counts, so the register loops unroll)."""
    return tuple(d for d in range(1, min(extent, 2 * REGISTER) + 1) if extent % d == 0)


def thread_options(limit: int) -> tuple[int, ...]:
    return tuple(1 << p for p in range(11) if 1 << p <= limit)


VECTOR_ROWS = 1
"""Vectors of work-items a row of a cross-thread reduction takes on a runtime that runs
work-items as the lanes of vectors (`items_vectorized`): each step of a work-item's share
is then `VECTOR_ROWS` full vector loads of consecutive elements, and the tree that combines
the partials has log2(VECTOR_ROWS * vector_width) barrier steps (each a pass of the
work-group's work-item loop on a CPU runtime), not log2 of a default work-group's. One
vector (16 work-items on Intel's SYCL CPU device): ReduceSum 1024x1024 there 1.30x faster
than with two (the call with its arrays in place, interleaved, load 3.4; the kernel alone
1.15x), Softmax within noise (2.14 against 2.20 ms)."""


def vector_rows(d: TargetDescription | None, facts: Facts) -> bool:
    """Whether the default gives a row reduction a row per work-item read in vectors of the
    target's width (`vectorize_reduction`: vector partial sums, one lane reduction at the
    end): on a CPU runtime whose barriers split the work-item loop at compile time
    (`loop_barriers`) but which does not run work-items as vector lanes (not
    `items_vectorized`: PoCL, whose work-item loop vectorizes only where work-items run no
    loop of their own). There a cross-thread reduction's work-items each run a scalar chain
    of dependent adds, and a row per work-item loading `vector_width` consecutive elements
    a step is the faster kernel (ReduceSum 1024x1024 on PoCL, kernel alone: 0.06-0.14 ms
    against 1.3 ms for 16 or 64 work-items per row and the former default; pyopencl
    timing, load 9)."""
    return d is not None and not facts.on_chip and d.loop_barriers and not d.items_vectorized


def shares_reductions(d: TargetDescription | None, facts: Facts) -> bool:
    """Whether the default shares a row reduction (one whose innermost reduction an input
    reads at unit stride) across a work-group's work-items: where shared memory is on chip
    (a GPU: the partials combine in warp shuffles and on-chip memory), and on a CPU runtime
    whose barriers are splits of the work-item loop made at compile time (`loop_barriers`:
    PoCL, Intel's SYCL CPU device): there consecutive work-items read consecutive elements
    (one vector load across the lanes where work-items are vector lanes) and the tree of
    partials costs a few passes of that loop, where one output per work-item reads its own
    row, 4 KiB apart from its neighbours' (Softmax and ReduceSum 1024x1024, benchmarks/device_kernels.py: a row per
    work-item 0.54x and 0.55x the best hand schedule on SYCL, 0.81x and 0.79x on PoCL). Not
    lavapipe (HLSL), whose barriers switch coroutines: a row per work-item is its fastest;
    nor PoCL (`vector_rows`), where a row per work-item read in vectors beats both."""
    if facts.on_chip:
        return True
    return d is not None and d.loop_barriers and not vector_rows(d, facts)


ROWS_OPTIONS = (1, 2, 4, 8, 16)
"""Rows a cross-thread reduction's work-group may hold (`Variant.rows_knob`)."""


def row_threads(d: TargetDescription | None, facts: Facts, extent: int) -> int:
    """Work-items per row of a cross-thread reduction over `extent` elements: a power of
    two, at most the row (and the target's work-group limit); where work-items are vector
    lanes (`items_vectorized`), `VECTOR_ROWS` vectors of them (`vector_width` lanes: 16 on
    Intel's SYCL CPU device, whose best hand schedules are 16 and 32 work-items per row),
    at least a subgroup; else the target's default work-group (256 on CUDA and HIP: 8
    warps, coalesced; 64 on PoCL, whose best hand schedules are 64 and 128)."""
    want = facts.threads
    if d is not None and d.items_vectorized and not facts.on_chip:
        want = max(VECTOR_ROWS * d.vector_width, d.subgroup_size)
    row = 1 << int(math.log2(max(extent, 1)))
    return max(1, min(want, row, facts.max_threads))


@dataclass(frozen=True)
class Variant:
    """What a tuning sketch changes of the default policy (einc.tune.sketches.gpu); the
    default schedule is `Variant()`."""

    staging: frozenset[str] | None = None
    """The inputs a contraction stages in shared memory (None: every input where shared
    memory is on chip, none elsewhere)."""
    reductions: str | None = None
    """Other reductions: "cross" (cross-thread, wherever it applies), "private" (one output
    per work-item), None (cross-thread where shared memory is on chip)."""
    double_buffer: bool | None = None
    """Staged tiles double buffered (`double_buffer`): None where both slots fit (the
    default), False never (a single slot, the K tile twice as long)."""
    pad: int | None = None
    """`pad N` of the staged tiles (None: einc-pad-shared chooses)."""
    columns: bool | None = None
    """A contraction's work-items one output column each (the x register tile 1, twice the
    default work-group's work-items along x, `COLUMN_ROWS` along y, a y register tile of up
    to 2 * REGISTER): consecutive work-items read consecutive elements, which a device that
    vectorizes across work-items (the CPU runtimes of OpenCL and SYCL) loads as vectors.
    None: where the target's runtime vectorizes across work-items (`items_vectorized`) and
    the contraction is one `_Policy.one_column` takes (True/False: every contraction)."""
    kunroll_knob: bool = False
    """The staged reduction tile's unroll (KUNROLL: the width of a row's vector loads) a
    knob `stmt.axis.kunroll`."""
    unstaged_kunroll: bool = False
    """A contraction staged nowhere has its reduction tiled and unrolled by a knob
    `stmt.axis.kunroll` (`_Policy.unstaged_kunroll`): KUNROLL independent register-tile
    updates per step for the device compiler to schedule (the tuner's `tile.kunroll`)."""
    rows_knob: bool = False
    """A cross-thread reduction's work-group holds several outputs (rows): its innermost
    output axis tiled by a knob `stmt.axis.rows` (`ROWS_OPTIONS` that divide it; 1 is the
    default's row per work-group), the tile bound to `thread.y` beside the row's work-items
    on `thread.x`; a point past the target's work-group limit is refused by `bind`."""


class _Policy:
    def __init__(self, b: ScheduleBuilder, facts: Facts, target: type[CLikeTarget], variant: Variant = Variant()):
        self.b = b
        self.facts = facts
        self.target = target
        self.variant = variant
        self.staging = variant.staging

    def knob(self, nest: _Nest, loop: affine.ForOp, what: str, value: int, options: Sequence[int]) -> SSAValue:
        return self.b.knob(f"{nest.stmt}.{_tag(loop, lt.AXIS_ATTR)}.{what}", value, options)

    def schedule(self, top: affine.ForOp) -> None:
        """Schedule the nest of the top-level loop `top`: the first of its kind's
        plans that applies whole on a scratch copy of the payload is made on the real one
        (a plan is several steps, and the builder undoes only a failed last step)."""
        nest = analyse(top)
        if nest is None:
            return
        plans: list[Callable[[_Policy, _Nest], None]]
        if contraction_axes(nest) is not None:
            # tensor cores first where the target has them (refused unless the nest is a
            # float16/bfloat16 contraction accumulated in float32 whose tiles fit 16 x 16)
            plans = [*tensor_core_plans(self), _Policy.contracted] if self.target.tensor_cores else [_Policy.contracted]
        elif nest.reduction:
            default = shares_reductions(self.target.limits, self.facts)
            cross = default if self.variant.reductions is None else self.variant.reductions == "cross"
            plans = [_Policy.cross_thread, _Policy.private] if cross else [_Policy.private]
        else:
            # its preconditions are checked first and its steps are then always legal (the
            # tiles leave the band in the order bound; the unroll is tried): no trial
            if self.elementwise_applies(nest):
                try:
                    self.elementwise(nest)
                except IllegalStep:  # the steps before the refused one stand, legal
                    pass
            return
        for plan in plans:
            module, copy = _alone(top)
            scratch = _Policy(ScheduleBuilder(module, "<scratch>"), self.facts, self.target, self.variant)
            trial = analyse(copy)
            assert trial is not None
            try:
                plan(scratch, trial)
                # what the driver checks of the schedule applied (a private array of a type
                # the target computes in a wider one: float16 on OpenCL)
                check_scheduled(scratch.b.finish(), scratch.b.payload, self.target)
            except (IllegalStep, ScheduleError):
                continue
            plan(self, nest)
            return

    # -- steps ---------------------------------------------------------------------------------
    def _two_level(self, nest: _Nest, loop: affine.ForOp, threads: int, reg: int) -> tuple[SSAValue, ...]:
        """`loop` split into (work-group tile, work-item, register) loops: tiled by the
        register tile first (a divisor: constant trip count), the rest by the work-items.
        Returns the three loops and the register tile's knob."""
        b = self.b
        extent = nest.extent(loop)
        r = self.knob(nest, loop, "reg", reg, register_options(extent))
        t = self.knob(nest, loop, "threads", threads, thread_options(self.facts.thread_limit))
        q, inner = b.tile(b.handle(loop), r)
        outer, thread = b.tile(q, t)
        return outer, thread, inner, r

    def _grid(self, extent: int, tile: int, axis: int) -> None:
        """Refuse (IllegalStep) a plan whose work-groups along `axis` exceed the grid (the
        default mapping strides over a capped grid instead)."""
        if math.ceil(extent / tile) > self.facts.max_grid[axis]:
            raise IllegalStep(f"{math.ceil(extent / tile)} work-groups along grid axis {axis}")

    def _bind_z(self, nest: _Nest, rest: list[affine.ForOp]) -> affine.ForOp | None:
        """The longest of the other output axes, for block.z (within the grid's limit)."""
        fits = [s for s in rest if 1 < nest.extent(s) <= self.facts.max_grid[2]]
        return max(fits, key=nest.extent) if fits else None

    def contracted(self, nest: _Nest) -> None:
        """`contraction` along the nest's `contraction_axes`."""
        self.contraction(nest, *axes_of(nest))

    def one_column(self, nest: _Nest, y: affine.ForOp | None) -> bool:
        """Whether the contraction takes the one-column shape (`Variant.columns`): as the
        variant says, else (None) where the target's runtime vectorizes across work-items
        (`items_vectorized`: Intel's SYCL CPU device) and the nest is a two-axis contraction
        with one reduction (matmul, batch matmul, transposed operands), nothing staged and a
        body of a few ops (`UNROLL_BODY`). Not a convolution (several reductions): an earlier
        default that gave every contraction this shape made the SYCL tests take gigabytes of
        memory, and none has been measured faster with it."""
        if self.variant.columns is not None:
            return self.variant.columns
        d = self.target.limits
        staged = self.facts.on_chip if self.staging is None else bool(self.staging)
        return (d is not None and d.items_vectorized and y is not None and len(nest.reduction) == 1
                and nest.body <= UNROLL_BODY and not staged)  # fmt: skip

    def tall_rows(self, nest: _Nest, y: affine.ForOp | None) -> bool:
        """Whether the contraction's register tile is `2 * REGISTER` rows tall (along y) and
        `REGISTER` wide: on a CPU runtime that compiles a work-group's work-items into loops
        (`loop_barriers`, shared memory not on chip) without running them as vector lanes (not
        `items_vectorized`: PoCL), for a two-axis contraction with one reduction, nothing
        staged and a body of a few ops (`UNROLL_BODY`), as `one_column` takes. Each step of
        the reduction then loads REGISTER elements of the row read along x once for 2 *
        REGISTER rows (5.3 FMAs per load, 4 with 8 x 8). MatMul 512^3 on PoCL (interleaved
        rounds on a shared machine; benchmarks/device_kernels.py, README): the 16 x 8 tile with 8 x 8
        work-items (a 128 x 64 work-group tile) 1.28x the 64 x 64 / 8 x 8 hand schedule (the
        old default) on an Intel Xeon, 1.09x on AMD Zen 4 (its tuner finalist); 8 x 16 1.07x
        and 1.13x. Not a convolution (several reductions): not measured so."""
        if self.variant.columns or y is None or len(nest.reduction) != 1 or nest.body > UNROLL_BODY:
            return False
        d, f = self.target.limits, self.facts
        staged = f.on_chip if self.staging is None else bool(self.staging)
        return d is not None and d.loop_barriers and not d.items_vectorized and not f.on_chip and not staged

    def contraction(self, nest: _Nest, x: affine.ForOp, y: affine.ForOp | None) -> None:
        b, f = self.b, self.facts
        # read off the nest before it is transformed
        layouts = {buffer_name(a.buffer): self.shared_layout(nest, buffer_name(a.buffer), x, y) for a in nest.loads}
        tx, ty = f.split()
        ex = nest.extent(x)
        columns = self.one_column(nest, y)
        rx = 1 if columns else _largest_divisor(ex, REGISTER)
        tx = min(2 * f.threads if columns else tx, _pow2_ceil(math.ceil(ex / rx)))
        self._grid(ex, tx * rx, 0)
        xo, xt, xr, kx = self._two_level(nest, x, tx, rx)
        blocks, threads, regs, reg_knobs = [xo], [xt], [xr], [kx]
        ry = ty = 1
        if y is not None:
            ey = nest.extent(y)
            ry = _largest_divisor(ey, 2 * REGISTER if columns or self.tall_rows(nest, y) else REGISTER)
            ty = min(COLUMN_ROWS if columns else f.threads // tx, max(1, f.max_threads // tx), _pow2_ceil(math.ceil(ey / ry)))
            self._grid(ey, ty * ry, 1)
            yo, yt, yr, ky = self._two_level(nest, y, ty, ry)
            blocks, threads, regs, reg_knobs = [yo, xo], [yt, xt], [yr, xr], [ky, kx]
        rest = [s for s in nest.spatial if s is not x and s is not y]
        z = self._bind_z(nest, rest)
        rest = [s for s in rest if s is not z]
        red = list(nest.reduction)
        names = list(dict.fromkeys(buffer_name(a.buffer) for a in nest.loads))
        staged = [t for t in names if (f.on_chip if self.staging is None else t in self.staging)]
        stage = bool(staged) and f.shared_bytes > 0
        kt_knob = None
        double = False
        if stage:
            r0 = red[0]
            # the staged tiles: (ty * ry + tx * rx) rows of the reduction tile, times the
            # reduction axes below it, in float32 (an estimate: halos left out)
            below = math.prod(nest.extent(r) for r in red[1:])
            per_k = (ty * ry + tx * rx) * below * 4
            # double buffered where both slots fit (a K tile half as long, as much memory),
            # unless the variant says single
            kt = None
            if self.variant.double_buffer is not False:
                kt = next((k for k in KTILES if k <= nest.extent(r0) and 2 * k * per_k <= f.shared_bytes), None)
            double = kt is not None and nest.extent(r0) > kt
            if not double:
                kt = next((k for k in KTILES if k <= nest.extent(r0) and k * per_k <= f.shared_bytes), None)
            if kt is None:
                stage = False
            else:
                kt_knob = self.knob(nest, r0, "ktile", kt, tuple(k for k in KTILES if k <= nest.extent(r0)))
        ku_knob = None if stage else self.unstaged_kunroll(nest, red)
        handles = {s: b.handle(s) for s in [*rest, *red] + ([z] if z is not None else [])}
        reductions = [handles[r] for r in red]
        if stage:
            assert kt_knob is not None
            ko, ki = b.tile(handles[red[0]], kt_knob)
            reductions = [ko, ki, *reductions[1:]]
        elif ku_knob is not None:
            ko, ki = b.tile(handles[red[0]], ku_knob)
            reductions = [ko, ki]
        zs = [handles[z]] if z is not None else []
        order = [*blocks, *zs, *threads, *(handles[s] for s in rest), *reductions, *regs]
        new = b.reorder(order)
        nb, nz, nt, ns = len(blocks), len(zs), len(threads), len(rest)
        for h, axis in zip(new[:nb], ("block.y", "block.x") if y is not None else ("block.x",)):
            b.bind(h, axis)
        if z is not None:
            b.bind(new[nb], "block.z")
        for h, axis in zip(new[nb + nz:nb + nz + nt], ("thread.y", "thread.x") if y is not None else ("thread.x",)):
            b.bind(h, axis)
        at = new[nb + nz + nt + ns - 1]
        b.cache_write(buffer_name(nest.output), at, "local")
        if stage:
            ko_new = new[nb + nz + nt + ns]
            v = self.variant
            for name in staged:
                # a permuted tile is written across its rows (the copy follows the tensor's
                # order): rows padded by TRANSPOSED_PAD keep those writes off one bank
                pad = v.pad if v.pad is not None else (TRANSPOSED_PAD if layouts[name] is not None else None)
                buffer = b.try_(lambda name=name, pad=pad: b.cache_read(name, ko_new, "shared", layouts[name], pad))
                if double and not isinstance(buffer, Failure):
                    b.try_(lambda buffer=buffer: b.double_buffer(buffer))
        if nest.body > UNROLL_BODY:
            return  # a math-heavy body: the register tile stays loops (unrolled, it multiplies the code)
        for h, reg in zip(reversed(new[-len(regs):]), reversed(reg_knobs)):
            b.try_(lambda h=h, reg=reg: b.unroll(h, reg))
        if ku_knob is not None:
            ki_new = new[nb + nz + nt + ns + 1]
            b.try_(lambda: b.unroll(ki_new, ku_knob))
        if stage and len(red) > 1 and nest.extent(red[-1]) <= WINDOW:
            # a window's innermost axis (a convolution's KW) unrolled whole: the register
            # tile's row of the input read along x at the window's offsets 0 .. WINDOW - 1
            # is then consecutive elements (vector loads), shared between the offsets
            last = new[-len(regs) - 1]
            b.try_(lambda: b.unroll(last, nest.extent(red[-1])))
        if stage and len(red) == 1:
            # the reduction tile's loop unrolled by KUNROLL (KUNROLL independent steps; a
            # tile left with K innermost is then read KUNROLL consecutive elements at a
            # time: one vector load where the alignment is proved)
            ki_new = new[nb + nz + nt + ns + 1]
            ku = self.knob(nest, red[0], "kunroll", KUNROLL, (1, 2, 4, 8)) if self.variant.kunroll_knob else KUNROLL
            b.try_(lambda: b.unroll(ki_new, ku))

    def unstaged_kunroll(self, nest: _Nest, red: list[affine.ForOp]) -> SSAValue | None:
        """The knob `stmt.axis.kunroll` of an unstaged contraction's one reduction (options
        dividing it: 1, 2, 4, 8; KUNROLL first) where the variant asks for it
        (`Variant.unstaged_kunroll`) and the body is a few ops, else None."""
        if not self.variant.unstaged_kunroll or len(red) != 1 or nest.body > UNROLL_BODY:
            return None
        options = tuple(k for k in (1, 2, 4, 8) if nest.extent(red[0]) % k == 0)
        return self.knob(nest, red[0], "kunroll", KUNROLL if KUNROLL in options else 1, options)

    def tensorized(self, nest: _Nest) -> None:
        """A float16/bfloat16 contraction accumulated in float32 (`C[i, j] +=! A[i, k].cast(float32)
        * B[k, j].cast(float32)`) on tensor cores: the output axes (y, x) tiled by 16, their
        tiles on block.y / block.x (the largest other output axis on block.z, any further
        ones in each block), each 16 x 16 tile and the whole reduction on one warp
        (`tensorize`: mma.sync on CUDA, MFMA on HIP). Refused (IllegalStep: the scalar plan
        follows) unless both axes and the reduction are multiples of 16 and the body is that
        contraction (the `tensorize` step checks it)."""
        b = self.b
        x, y = axes_of(nest)
        if y is None or len(nest.reduction) != 1:
            raise IllegalStep("tensor cores: not a two-axis contraction with one reduction")
        k = nest.reduction[0]
        if any(nest.extent(a) % TENSOR_TILE for a in (x, y, k)):
            raise IllegalStep("tensor cores: the tile does not fit 16 x 16 x 16")
        self._grid(nest.extent(x), TENSOR_TILE, 0)
        self._grid(nest.extent(y), TENSOR_TILE, 1)
        rest = [s for s in nest.spatial if s is not x and s is not y]
        z = self._bind_z(nest, rest)
        rest = [s for s in rest if s is not z]
        yo, yi = b.tile(b.handle(y), TENSOR_TILE)
        xo, xi = b.tile(b.handle(x), TENSOR_TILE)
        zs = [b.handle(z)] if z is not None else []
        new = b.reorder([yo, xo, *zs, *(b.handle(s) for s in rest), yi, xi, b.handle(k)])
        b.bind(new[0], "block.y")
        b.bind(new[1], "block.x")
        if z is not None:
            b.bind(new[2], "block.z")
        b.tensorize(new[-3], min(self.target.tensor_cores))

    def tensorized_staged(self, nest: _Nest) -> None:
        """`tensorized` with the block's tiles staged in shared memory: a block of
        `wy x wx` warps (the target's default work-group: 4 x 2 warps of 32 on CUDA, 2 x 2
        wavefronts of 64 on HIP, fewer where the axes are shorter), each warp one 16 x 16
        output tile (warps on thread.z / thread.y, their lanes on thread.x); the reduction
        tiled by `TENSOR_KTILES` (the largest that divides it and fits the shared memory,
        with two slots per tile where there is more than one: double buffered, the next
        tile's copies under the current one's tensor-core work) and A's `[16 wy, kt]` and
        B's `[kt, 16 wx]` tiles staged at that loop in the tensors' own layouts, rows
        padded by `TENSOR_PAD` (the fragment reads of a warp's
        8 rows x 4 column pairs fall in 32 different banks), or, where the target's
        operand reads want k contiguous (`mma_k_contiguous`: HIP), an operand whose k is not
        innermost staged k innermost (`k_innermost_layout`), rows padded by `TRANSPOSED_PAD`
        (4 halves: rows 8-byte aligned and 34 words apart, so a wavefront's 16 rows of
        8-byte MFMA operand reads cover the 32 banks once); each warp's float32
        accumulator tile in its lanes' registers for the whole reduction (`tensorize`'s
        fragment, zeroed in registers: no fill kernel, written to C once at the end), so the
        reduction tile's loop reads shared memory only. Refused (IllegalStep) where `tensorized` is, with further
        output axes left in each block, or where the tiles do not fit."""
        b, f = self.b, self.facts
        x, y = axes_of(nest)
        if y is None or len(nest.reduction) != 1 or not f.on_chip:
            raise IllegalStep("staged tensor cores: not a two-axis contraction with one reduction, or no on-chip shared memory")
        if self.staging is not None and not {buffer_name(a.buffer) for a in nest.loads} <= self.staging:
            raise IllegalStep("staged tensor cores: the variant leaves an input in global memory")
        k = nest.reduction[0]
        ex, ey, ek = nest.extent(x), nest.extent(y), nest.extent(k)
        if any(e % TENSOR_TILE for e in (ex, ey, ek)):
            raise IllegalStep("tensor cores: the tile does not fit 16 x 16 x 16")
        rest = [s for s in nest.spatial if s is not x and s is not y]
        z = self._bind_z(nest, rest)
        if [s for s in rest if s is not z]:
            raise IllegalStep("staged tensor cores: output axes beyond three")
        intrinsic = min(self.target.tensor_cores)
        lanes = LANES[intrinsic]
        warps = max(1, min(f.threads, f.max_threads) // lanes)
        wx_max = 1 << math.ceil(math.log2(warps) / 2)
        wx = _largest_divisor(ex // TENSOR_TILE, wx_max)
        wy = _largest_divisor(ey // TENSOR_TILE, max(1, warps // wx))
        by, bx = TENSOR_TILE * wy, TENSOR_TILE * wx
        names = list(dict.fromkeys(buffer_name(a.buffer) for a in nest.loads))
        # where the target's operand reads want k contiguous (HIP's MFMA: no transposing LDS
        # read), an operand whose k is not its innermost dimension is staged k innermost
        layouts = {n: self.k_innermost_layout(nest, n, k) if self.target.mma_k_contiguous else None for n in names}

        def fits(kt: int, slots: int) -> bool:
            tiles = by * (kt + TENSOR_PAD) + kt * (bx + TENSOR_PAD)
            if any(layouts.values()):  # either tile either way round, its rows padded
                tiles = sum(max(rows * (kt + TENSOR_PAD), kt * (rows + TENSOR_PAD)) for rows in (by, bx))
            return ek % kt == 0 and slots * 2 * tiles <= f.shared_bytes

        # double buffered (two slots of each tile) where they fit and there is a next tile
        kt = None if self.variant.double_buffer is False else next(
            (kt for kt in TENSOR_KTILES if kt < ek and fits(kt, 2)), None)  # fmt: skip
        double = kt is not None
        if kt is None:
            kt = next((kt for kt in TENSOR_KTILES if fits(kt, 1)), None)
        if kt is None:
            raise IllegalStep("staged tensor cores: the tiles do not fit the shared memory")
        self._grid(ex, bx, 0)
        self._grid(ey, by, 1)
        yo, yi = b.tile(b.handle(y), by)
        yw, y16 = b.tile(yi, TENSOR_TILE)
        xo, xi = b.tile(b.handle(x), bx)
        xw, x16 = b.tile(xi, TENSOR_TILE)
        ko, ki = b.tile(b.handle(k), kt)
        zs = [b.handle(z)] if z is not None else []
        new = b.reorder([yo, xo, *zs, yw, xw, ko, y16, x16, ki])
        nz = len(zs)
        b.bind(new[0], "block.y")
        b.bind(new[1], "block.x")
        if z is not None:
            b.bind(new[2], "block.z")
        b.bind(new[2 + nz], "thread.z")
        b.bind(new[3 + nz], "thread.y")
        staged = [b.cache_read(n, new[4 + nz], "shared", layouts[n], TENSOR_PAD if layouts[n] is None else TRANSPOSED_PAD)
                  for n in names]  # fmt: skip
        if double:
            for buffer in staged:
                b.try_(lambda buffer=buffer: b.double_buffer(buffer))
        b.tensorize(new[5 + nz], intrinsic)

    def k_innermost_layout(self, nest: _Nest, name: str, k: affine.ForOp) -> tuple[int, ...] | None:
        """The dimension order of input `name`'s shared tile that puts its dimension moving
        with the reduction `k` alone innermost (a matmul's `B[K, M]` staged `[M, K]`), None
        where it already is innermost or none moves so. Each lane's tensor-core operand (4
        consecutive k elements on MFMA) is then one 8-byte LDS read, as A's is, not 4 16-bit
        ones (HIP: `mma_k_contiguous`)."""
        moving = _moving_per_dimension(nest, name)
        if moving is None:
            return None
        along = [d for d, vs in enumerate(moving) if vs == {induction_var(k)}]
        if not along or along[-1] == len(moving) - 1:
            return None
        d = along[-1]
        return (*(i for i in range(len(moving)) if i != d), d)

    def shared_layout(self, nest: _Nest, name: str, x: affine.ForOp, y: affine.ForOp | None) -> tuple[int, ...] | None:
        """The dimension order of input `name`'s shared tile (None: the tensor's): the
        dimension that moves with x alone (an input read along x: matmul's right input), else
        the one that moves with y alone (the left input, a convolution's filter), innermost,
        unless the innermost already moves with x or y. Each work-item then reads its register
        tile's consecutive elements of the tile with vector loads whatever the operand's
        global layout (`A[N, K]`, a transposed `B[M, K]` staged `[K, N]`, `[K, M]`; a filter
        `[F, C, KH, KW]` staged `[C, KH, KW, F]`), and a warp's work-items along x read
        consecutive words (read along K, the rows 8 elements apart fell in one bank)."""
        moving = _moving_per_dimension(nest, name)
        if moving is None:
            return None
        ix = induction_var(x)
        iy = induction_var(y) if y is not None else None
        if ix in moving[-1] or (iy is not None and iy in moving[-1]):
            return None
        axis = ix if any(ix in vs for vs in moving) else iy
        along = [d for d, vs in enumerate(moving) if axis is not None and vs == {axis}]
        if not along:
            return None
        d = along[-1]
        return (*(i for i in range(len(moving)) if i != d), d)

    def cross_thread(self, nest: _Nest) -> None:
        """Each output on a work-group (at most three output axes), the innermost reduction
        (read at unit stride by an input) tiled and its tile bound to the work-items."""
        b, f = self.b, self.facts
        r = nest.band[-1]
        if r not in nest.reduction or len(nest.spatial) > 3 or nest.extent(r) < CROSS_THREAD_MIN:
            raise IllegalStep("no cross-thread reduction")
        if not any(_unit_stride(a, r) for a in nest.loads):
            raise IllegalStep("no unit-stride input along the reduction")
        if any(nest.extent(s) > lim for s, lim in zip(reversed(nest.spatial), f.max_grid)):
            raise IllegalStep("too many outputs for the grid")
        threads = row_threads(self.target.limits, f, nest.extent(r))
        t = self.knob(nest, r, "threads", threads, thread_options(f.thread_limit))
        _outer, inner = b.tile(b.handle(r), t)
        x = nest.spatial[-1]
        options = tuple(o for o in ROWS_OPTIONS if nest.extent(x) % o == 0)
        rows: tuple[SSAValue, SSAValue] | None = None
        if self.variant.rows_knob and len(options) > 1:
            # several rows a work-group: the innermost output axis in tiles on thread.y
            rows = b.tile(b.handle(x), self.knob(nest, x, "rows", 1, options))
        for s, axis in zip(reversed(nest.spatial), ("block.x", "block.y", "block.z")):
            b.bind(rows[0] if rows is not None and s is x else b.handle(s), axis)
        b.bind(inner, "thread.x")
        if rows is not None:
            b.bind(rows[1], "thread.y", f.max_threads)

    def private(self, nest: _Nest) -> None:
        """One output per work-item: the innermost output axis over work-groups and their
        work-items, the next one or two on block.y / block.z, the reduction's accumulator
        in a private register."""
        b, f = self.b, self.facts
        x = nest.spatial[-1]
        tx = min(f.threads, _pow2_ceil(nest.extent(x)))
        self._grid(nest.extent(x), tx, 0)
        t = self.knob(nest, x, "threads", tx, thread_options(f.thread_limit))
        xo, xt = b.tile(b.handle(x), t)
        others = nest.spatial[:-1]
        bound = [s for s, lim in zip(reversed(others), f.max_grid[1:]) if nest.extent(s) <= lim][:2]
        seq = [s for s in others if s not in bound]
        order = [*(b.handle(s) for s in reversed(bound)), xo, xt, *(b.handle(s) for s in seq),
                 *(b.handle(r) for r in nest.reduction)]  # fmt: skip
        new = b.reorder(order)
        for h, axis in zip(new, [*("block.z", "block.y")[2 - len(bound):], "block.x", "thread.x"]):
            b.bind(h, axis)
        b.cache_write(buffer_name(nest.output), new[len(bound) + 1 + len(seq)], "local")
        d, r = self.target.limits, nest.reduction[-1]
        assert d is not None  # a device target's policy: its limits are described
        if vector_rows(d, f) and nest.extent(r) >= d.vector_width and any(_unit_stride(a, r) for a in nest.loads):
            # the innermost loop (the last reduction), at least a vector long (a pooling
            # window's few taps are left scalar); refused where it carries another dependence
            b.try_(lambda: b.vectorize_reduction(new[-1]))

    def elementwise_applies(self, nest: _Nest) -> bool:
        """At most three axes, the outer two within the grid's y and z limits."""
        others = nest.spatial[:-1]
        return len(nest.spatial) <= 3 and all(nest.extent(s) <= lim for s, lim in zip(reversed(others), self.facts.max_grid[1:]))

    def _packed_narrow(self, nest: _Nest) -> bool:
        """Whether the nest stores float16/bfloat16 kept in memory on a target that packs
        such accesses into vectors (`packed_narrow_access`)."""
        t = nest.output.type
        return self.target.packed_narrow_access and isinstance(t, MemRefType) and t.get_element_type() in (f16, bf16)

    def elementwise(self, nest: _Nest) -> None:
        """The innermost axis in chunks of `items` consecutive elements (a divisor of the
        axis: a constant trip count, left a loop), the chunks over work-groups and their work-items, the next two axes on
        block.y / block.z."""
        b, f = self.b, self.facts
        if not self.elementwise_applies(nest):
            raise IllegalStep("more than three axes, or more outputs than the grid holds")
        others = nest.spatial[:-1]
        x = nest.spatial[-1]
        ex = nest.extent(x)
        items = _largest_divisor(ex, ITEMS)
        if items not in (2, ITEMS) and ex > ITEMS and self._packed_narrow(nest):
            # no even divisor up to ITEMS (1002: 3): chunks of ITEMS, the last one cut short;
            # einc-vectorize-global packs each full chunk's 16-bit accesses into one vector
            # and leaves the short one scalar (the tail)
            items = ITEMS
        tx = min(f.threads, _pow2_ceil(-(-ex // items)))
        self._grid(ex, tx * items, 0)
        e = self.knob(nest, x, "items", items, register_options(ex)[:ITEMS * 2])
        t = self.knob(nest, x, "threads", tx, thread_options(f.thread_limit))
        q, _chunk = b.tile(b.handle(x), e)
        xo, xt = b.tile(q, t)
        # the band is now `others..., x.o.o, x.o.i, x.i`: in the order bound
        for h, axis in zip([*(b.handle(s) for s in others), xo, xt], [*("block.z", "block.y")[2 - len(others):], "block.x", "thread.x"]):
            b.bind(h, axis)
        # the chunk's loop is left a loop of constant trip count (the device's compiler
        # unrolls it): unrolled here, it multiplied the statement's code by `items` (a
        # program's size, einc's compile time and the shader's), for the same scalar accesses


def tensor_core_plans(policy: _Policy) -> list[Callable[[_Policy, _Nest], None]]:
    """The tensor-core plans of a contraction, first tried first: staged in shared memory
    (a block of warps) where the variant stages (the default), then from global memory."""
    staged = policy.variant.staging is None or bool(policy.variant.staging)
    return [_Policy.tensorized_staged, _Policy.tensorized] if staged else [_Policy.tensorized]


def default_schedule(target: type[CLikeTarget], module: ModuleOp) -> Schedule | None:
    """The default schedule of a loop-level module for a device `target`, from its
    description's facts, or None when there is nothing to do. A target without a grid of
    work-groups to map onto (Poplar spreads a kernel's points over its tiles itself) gets
    its contractions in register tiles (`register_tiles`), nothing else."""
    d = target.limits
    if d is not None and max(d.max_grid) <= 1:
        return register_tiles(target, module)
    return build(target, module)


GRIDLESS_REGISTERS = ((4, 2), (8, 4, 2))
"""The register tile sizes a gridless target's default tries, rows then columns, largest
first: 4 x 8 is the fastest of 4x4, 4x8 and 8x8 on the Poplar harness (MatMul 512^3, README
Benchmarks; the tuner's `vertex.reg` sketch searches 2-8 of each)."""


def register_size(extent: int, options: Sequence[int]) -> int:
    """The register tile along an axis of `extent`: the largest of `options` (largest first)
    that divides it, else the largest clipped to the axis (the extent itself where it is
    shorter: one tile; else a last partial tile, its loops guarded when unrolled:
    loop_transforms._unroll_clipped)."""
    return next((r for r in options if extent % r == 0), min(options[0], extent))


def register_tiles(target: type[CLikeTarget], module: ModuleOp) -> Schedule | None:
    """Each contraction's two innermost output axes (y, x) in register tiles of private
    accumulators, nothing bound: tiled by the largest of GRIDLESS_REGISTERS dividing them
    (else the largest, its last tile partial: `register_size`),
    the reductions inside the tile loops, the tile's outputs in a private array
    (`cache_write` local), its loops unrolled; the mapping pass gives each register tile a
    point and Poplar's vertex split spreads them over the tiles (bands of register rows, or
    boxes, the last box of a grid they do not divide clipped). Only where a tile's rows
    and columns of its inputs take at most a quarter of a tile's memory; None when no nest
    is so. The `+=!` fill goes (einc-init-accumulators: the accumulators start at the
    statement's init value in registers)."""
    d = target.limits
    assert d is not None
    b = ScheduleBuilder(module.clone(), f"<default {target.name} schedule>", cloned_from=module)
    for top in _tops(b.payload):
        nest = analyse(top)
        if nest is None or contraction_axes(nest) is None or len(nest.spatial) < 2:
            continue
        if nest.band[len(nest.band) - len(nest.reduction):] != nest.reduction:
            continue
        out = nest.output.type
        element = cast(Attribute, out.get_element_type()) if isinstance(out, MemRefType) else None
        if element is None or (dtype_name(element) not in d.arith_dtypes and not isinstance(element, NARROW_FLOATS)):
            continue  # the accumulators' type (float16/bfloat16 ones are held as float32: einc-widen-narrow-buffers)
        y, x = nest.spatial[-2], nest.spatial[-1]
        depth = math.prod(nest.extent(r) for r in nest.reduction)
        sizes = [register_size(nest.extent(a), options) for a, options in zip((y, x), GRIDLESS_REGISTERS)]
        if 2 * max(sizes) * depth * 4 > d.tile_memory // 4:
            continue
        yo, yr = b.tile(b.handle(y), sizes[0])
        xo, xr = b.tile(b.handle(x), sizes[1])
        others = [b.handle(s) for s in nest.spatial[:-2]]
        new = b.reorder([*others, yo, xo, *(b.handle(r) for r in nest.reduction), yr, xr])
        b.cache_write(buffer_name(nest.output), new[len(others) + 1], "local")
        b.unroll(new[-1], sizes[1])
        b.unroll(new[-2], sizes[0])
    return None if b.empty() else b.finish()


def build(target: type[CLikeTarget], module: ModuleOp, staging: frozenset[str] | None = None,
          name: str | None = None, variant: Variant | None = None) -> Schedule | None:  # fmt: skip
    """The default schedule, or with `staging` the same with those inputs of contractions
    staged in shared memory (and no others), or with `variant` what it changes (`staging`
    then replaces its staging where given): the tuner's `tile` sketches."""
    d = target.limits
    if d is None or max(d.max_grid) <= 1:
        return None
    b = ScheduleBuilder(module.clone(), name or f"<default {target.name} schedule>", cloned_from=module)
    v = variant or Variant()
    if staging is not None:
        v = replace(v, staging=staging)
    policy = _Policy(b, Facts.of(d), target, v)
    # each nest is scheduled in place: the others' top-level loops stay what they were
    for top in _tops(b.payload):
        policy.schedule(top)
    return None if b.empty() else b.finish()
