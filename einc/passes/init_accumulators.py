"""`einc-init-accumulators`: a register tile of accumulators starts at the reduction's
identity instead of being read back from a filled tensor.

A `+=!` statement is a fill nest (`einc.init`: every element of the output set to the
identity) followed by the reduction nest. A schedule that stages the output's tile in
work-item memory (`cache_write "C" at %l in "local"`) copies the tile in from C at the start
of each iteration of `%l` and back at its end. When the tile is staged once per element (the
loops around the staging point give their iterations disjoint tiles, so no reduction loop
encloses it), what the copy-in reads is always the fill's identity: the copy-in stores the
identity constant instead, and no thread reads C before writing it. When, besides, the
tiles of the staging loops cover every element of C (constant loop bounds, each dimension
of C indexed by its own loops), the fill nest is dead and goes (on a device, one kernel and
one pass over C fewer).

    affine.for %i ... {                      // fill: C[i, j] = 0
    affine.for %io ... { affine.for %jo ... {
      %t = memref.alloca() : memref<8x8xf32>
      affine.for %c0 = 0 to 8 { affine.for %c1 = 0 to 8 {
        %v = affine.load %C[%io + %c0, %jo + %c1]          // becomes the identity 0.0
        affine.store %v, %t[%c0, %c1] } }
      ... reduce into %t ...
      affine.for ... { affine.store (load %t), %C[...] }   // the copy-out: unchanged
    } }

The nests after the fill are taken together up to the first that uses C otherwise than
through staged tiles: several nests (a transposed convolution's output phases, each a
nest of its own) and several tiles in a nest (the pieces of a split or peeled loop, each
staging its own tile; a compact tile of every other column) qualify when no two tiles, and
no two iterations of one tile's loops, write back the same element (the staging loops'
iterations enumerated, up to 2^16 iterations and 2^24 output elements). Past those limits
one tile alone still qualifies: its fill goes when its loops' iterations form a regular grid
over the output (per dimension, the box's extent and the loops' strides a mixed-radix
numbering of 0 .. extent: an 8192 x 8192 tensor-core matmul's blocks, warps and fragments),
else it stays when each loop around the tile gives its iterations disjoint elements.

A fill fused into the loops around its reduction (the CPU default's `fuse_fills`: at batch
> 1 each image's outputs zeroed just before its nest, inside the parallel batch loop) is
taken per iteration of those loops (constant bounds, up to 2^16 iterations in all): the
tiles staged after it in that iteration disjoint and inside the box it has just written,
their copy-ins store the identity; when they cover that box in every iteration, the fill
goes (a batch-16 grouped 3x3 convolution no longer zeroes and reads back 12.8 MB of
outputs).

A dimension of C may be moved by several copy loops when together they number one box (a
mixed radix, `_mixed_radix`: the pair form's output channel `8 g + f` staged as [f, g],
coefficients 1 and 8 over 8 and 2 iterations, is channels 0 .. 15); overlapping or gapped
ones leave the IR as it was.

A tensor-core accumulator fragment (`einc.fragment`, einc.transforms.tensorize) is a tile
too: each lane copies its own elements of a 16 x 16 tile of C (the hardware's layout,
`lane floordiv 4`...), which the warp's lanes together cover exactly; it is taken as that
16 x 16 box at the loops around the lane loop (one kernel for a tensor-core matmul, its
accumulator zeroed in registers).

A tile staged inside a larger tile of the same output (a grouped convolution's register
tile of an output row inside its channel tile's whole output planes, staged to be streamed
out in whole lines: the CPU default's `_stream_planes`) copies in from the larger tile:
once the larger tile's copy-in stores the identity, that copy-in is taken as a fill fused
into the loops around it (`_init_within_tiles`), so the row tiles start at the identity and,
covering the planes, the planes' zeroing goes too.

A fill inside the staging point (the CPU default's `fuse_fill_rows`: a depthwise
convolution's output row staged in a local array and zeroed there) makes the copy-in dead
when the fill writes every element of the tile: the copy-in goes (the row no longer read
from the output before it is written: a depthwise convolution at batch 16 makes two trips
through memory, not three).

Conservative: anything else (another access to C in the nests or between the fill and the
nests, two tiles writing the same element, a staging point inside a reduction loop, shared
memory) leaves the IR as it was. Run by the C pipeline and, before `convert-affine-to-egpu`
(it reads the loop-level statements), by the device pipelines. The numbers are unchanged:
each element's copy-in read the identity the fill had just written.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from collections.abc import Iterator, Sequence

import numpy as np

from xdsl.context import Context
from xdsl.dialects import affine, arith, func, memref, scf
from xdsl.dialects.builtin import MemRefType, ModuleOp
from xdsl.ir import Operation, SSAValue
from xdsl.ir.affine import AffineDimExpr, AffineExpr, AffineMap
from xdsl.passes import ModulePass

from einc.dialects import egpu
from einc.dialects.egpu_mma import FRAGMENT
from einc.ir.attrs import COPY_ATTR, FRAGMENT_ATTR, INIT_ATTR, MEMORY_ATTR
from einc.transforms.index_split import iv_guard
from einc.transforms.loop_analysis import (
    accesses,
    constant_bounds,
    induction_var,
    linear_form,
    separates,
    step_of,
    walk_ops,
)

MAX_TILE_ORIGINS = 1 << 16
"""Coverage is checked by listing the staging loops' iterations; above this many the fill stays."""
MAX_COVERAGE_ELEMENTS = 1 << 24
"""...and marking the tiles in a map of the output's elements; above this many the fill stays."""
MAX_COVERAGE_RANK = 32
"""...of at most this rank (NumPy's arrays hold at most 64 dimensions); above it the fill stays."""


def _fill(op: Operation) -> tuple[SSAValue, SSAValue] | None:
    """(tensor, constant) of a fill nest: loops marked `einc.init` around one store of a
    constant, else None."""
    if not isinstance(op, affine.ForOp) or INIT_ATTR not in op.attributes:
        return None
    stores = [o for o in walk_ops(op) if isinstance(o, affine.StoreOp | memref.StoreOp)]
    if len(stores) != 1 or not isinstance(stores[0], affine.StoreOp):
        return None
    value = stores[0].value
    if not isinstance(value.owner, arith.ConstantOp) or value.owner.parent_op() is not op.parent_op():
        return None
    return stores[0].memref, value


def _uses(op: Operation, buffer: SSAValue) -> bool:
    return any(buffer in o.operands for o in walk_ops(op))


def _copy_nests(alloca: memref.AllocaOp) -> tuple[affine.ForOp, affine.ForOp] | None:
    """The copy-in nest right after a cache_write's alloca and the copy-out nest ending its block."""
    copy_in = alloca.next_op
    block = alloca.parent_block()
    copy_out = block.last_op.prev_op if block is not None and block.last_op is not None else None
    if not (isinstance(copy_in, affine.ForOp) and isinstance(copy_out, affine.ForOp)):
        return None
    if copy_in is copy_out or COPY_ATTR not in copy_in.attributes or COPY_ATTR not in copy_out.attributes:
        return None
    return copy_in, copy_out


def _enclosing_loops(op: Operation, top: Operation) -> list[affine.ForOp] | None:
    """The affine.for loops from `top` down to `op`'s parent, or None when something else
    (a conditional, a non-affine loop) lies between."""
    loops: list[affine.ForOp] = []
    parent = op.parent_op()
    while parent is not None:
        if not isinstance(parent, affine.ForOp):
            return None
        loops.append(parent)
        if parent is top:
            return loops[::-1]
        parent = parent.parent_op()
    return None


Guard = tuple[SSAValue, int, bool]
"""`(x, c, below)`: an enclosing branch runs for `x < c` (below) or `x >= c` (`iv_guard`)."""


def _guarded_loops(op: Operation, top: Operation) -> tuple[list[affine.ForOp], tuple[Guard, ...]] | None:
    """`_enclosing_loops`, and besides the branches on `x < c` of those loops' variables
    (`split_conditions_inside`'s pieces of a parallel loop) that lie between."""
    loops: list[affine.ForOp] = []
    guards: list[Guard] = []
    child, parent = op, op.parent_op()
    while parent is not None:
        if isinstance(parent, scf.IfOp) and (guard := iv_guard(parent)) is not None:
            guards.append((guard[0], guard[1], child.parent_region() is parent.true_region))
        elif not isinstance(parent, affine.ForOp):
            return None
        else:
            loops.append(parent)
            if parent is top:
                ivs = {induction_var(loop) for loop in loops}
                return (loops[::-1], tuple(guards)) if all(g[0] in ivs for g in guards) else None
        child, parent = parent, parent.parent_op()
    return None


@dataclass(frozen=True)
class _Tile:
    """A staged tile of the output: its alloca, the one load of the output in its copy-in,
    its copy-out nest and the loops from the statement nest's top down to the alloca."""

    alloca: memref.AllocaOp
    load: affine.LoadOp
    copy_out: affine.ForOp
    loops: list[affine.ForOp]
    """For a fragment, the loops around its lane loop (the lanes together hold one box)."""
    fragment: bool = False
    guards: tuple[Guard, ...] = ()
    """The branches around the tile (`_guarded_loops`): only the iterations they let through stage it."""


def _tiles(nest: Operation, tensor: SSAValue) -> list[_Tile] | None:
    """The staged tiles of `tensor` in `nest` when every use of `tensor` inside it is the one
    load of a tile's copy-in or the store of its copy-out (several tiles: the pieces of a
    peeled or split loop, each staging its own), else None."""
    if not isinstance(nest, affine.ForOp):
        return None
    tiles: list[_Tile] = []
    copies: list[affine.ForOp] = []
    for o in walk_ops(nest):
        if not isinstance(o, memref.AllocaOp) or MEMORY_ATTR in o.attributes:
            continue
        found = _copy_nests(o)
        if found is None or not _uses(found[0], tensor):
            continue
        copy_in, copy_out = found
        loads = [a for a in accesses(copy_in) if a.buffer is tensor]
        if len(loads) != 1 or loads[0].write or not isinstance(loads[0].op, affine.LoadOp):
            return None
        enclosing = _guarded_loops(o, nest)
        if enclosing is None or not _same_box(copy_in, loads[0].op, copy_out, tensor):
            return None
        loops, guards = enclosing
        fragment = FRAGMENT_ATTR in o.attributes
        if fragment and guards:
            return None
        tiles.append(_Tile(o, loads[0].op, copy_out, loops[:-1] if fragment else loops, fragment, guards))
        copies += [copy_in, copy_out]
    # a prefetch of C (transform.einc.prefetch: its next row's lines) reads and writes nothing
    uses = [o for o in walk_ops(nest) if tensor in o.operands and not isinstance(o, egpu.PrefetchOp)]
    if not tiles or any(not any(c.is_ancestor(o) for c in copies) for o in uses):
        return None
    if any(not isinstance(o, affine.LoadOp | affine.StoreOp) for o in uses):
        return None
    return tiles


def _same_box(copy_in: affine.ForOp, load: affine.LoadOp, copy_out: affine.ForOp, tensor: SSAValue) -> bool:
    """Whether the copy-out writes back the elements the copy-in read: the same map of the
    same outer values, its copy loops (same bounds) in the copy-in's places."""
    stores = [a.op for a in accesses(copy_out) if a.write and a.buffer is tensor]
    if len(stores) != 1 or not isinstance(store := stores[0], affine.StoreOp):
        return False
    ins = [f for f in walk_ops(copy_in) if isinstance(f, affine.ForOp)]
    outs = [f for f in walk_ops(copy_out) if isinstance(f, affine.ForOp)]
    if len(ins) != len(outs) or any(constant_bounds(a) != constant_bounds(b) or step_of(a) != step_of(b)
                                    for a, b in zip(ins, outs)):  # fmt: skip
        return False
    renamed: dict[SSAValue, SSAValue] = {induction_var(b): induction_var(a) for a, b in zip(ins, outs)}
    return load.map == store.map and list(load.indices) == [renamed.get(v, v) for v in store.indices]


TOO_MANY = "too many"
"""`_tile_map`'s answer when the tiles are too many (or the output too large) to enumerate."""


def _tile_map(tiles: Sequence[_Tile], tensor: SSAValue) -> np.ndarray | str | None:
    """The map of `tensor`'s elements the copy-outs of `tiles` write back, over all
    iterations of each tile's loops (bounds evaluated at each point, partial tiles' `min`
    bounds included; a compact tile's every `s`-th element, a transposed convolution's
    phase); None when two tiles, or two iterations of one, write the same element (an
    enclosing reduction loop, another tile's elements) or a box is not a tile of the copy
    loops; TOO_MANY when the enumeration is too large."""
    memory = tensor.type
    if not isinstance(memory, MemRefType):
        return None
    shape = memory.get_shape()
    if math.prod(shape) > MAX_COVERAGE_ELEMENTS or len(shape) > MAX_COVERAGE_RANK:
        return TOO_MANY
    marking = _Marking(np.zeros(shape, dtype=bool))
    for tile in tiles:
        forms = _fragment_forms(tile, tensor) if tile.fragment else _box_forms(tile.copy_out, tensor)
        if forms is None or not marking.visit(tile.loops, forms, {}, tile.guards):
            return marking.failure if forms is not None else None
    return marking.covered


def _grid_covers(tile: _Tile, tensor: SSAValue) -> bool:
    """Whether the iterations of one tile's loops write back every element of `tensor`
    exactly once, shown without listing them (the outputs too large for `_tile_map`): each
    dimension's positions are its box's own (stride `step`, `extent` of them) plus, per
    loop its origin moves, that loop's stride (coefficient x loop step, `trip` of them): a
    mixed-radix numbering. Sorted by stride, the digits that take more than one value must
    have strides 1, n1, n1 n2, ... (each the span of the finer ones: no gap, no overlap) and
    the whole span be the dimension's extent, from 0. Each loop moves one dimension at most,
    constant bounds, positive strides; a loop no dimension moves runs once. Then the map
    from iterations to elements is a product of bijections: an exact cover."""
    memory = tensor.type
    if not isinstance(memory, MemRefType):
        return False
    forms = _fragment_forms(tile, tensor) if tile.fragment else _box_forms(tile.copy_out, tensor)
    if forms is None:
        return False
    trips: dict[SSAValue, tuple[int, int, int]] = {}
    for loop in tile.loops:
        bounds = constant_bounds(loop)
        if bounds is None:
            return False
        step = step_of(loop)
        trips[induction_var(loop)] = (bounds[0], step, max(0, -(-(bounds[1] - bounds[0]) // step)))
    moved: set[SSAValue] = set()
    for (terms, const, step, extent), size in zip(forms, memory.get_shape(), strict=True):
        digits = [(step, extent)]
        origin = const
        for v, c in terms.items():
            if v not in trips or v in moved:
                return False
            moved.add(v)
            lower, loop_step, trip = trips[v]
            origin += c * lower
            digits.append((c * loop_step, trip))
        if any(n == 0 for _, n in digits):
            return False
        span = 1
        for stride, n in sorted(d for d in digits if d[1] > 1):
            if stride != span:
                return False
            span *= n
        if origin != 0 or span != size:
            return False
    return all(trip == 1 for v, (_, _, trip) in trips.items() if v not in moved)


@dataclass
class _Marking:
    """`_tile_map`'s enumeration: the elements marked so far, the iterations counted, and
    why it stopped (None: an overlap or a bound it cannot evaluate; TOO_MANY)."""

    covered: np.ndarray
    points: int = 0
    marked: int = 0
    failure: str | None = None

    def visit(self, loops: Sequence[affine.ForOp], forms: list[tuple[dict[SSAValue, int], int, int, int]],
              env: dict[SSAValue, int], guards: Sequence[Guard] = ()) -> bool:  # fmt: skip
        """Mark the boxes of every iteration of `loops` (the outer ones' variables in `env`)
        that `guards` let through; False (and `failure` set) where it stops."""
        if not loops:
            self.points += 1
            if self.points > MAX_TILE_ORIGINS:
                self.failure = TOO_MANY
                return False
            box = _box(forms, env, self.covered.shape)
            if box is None or self.covered[box].any():
                return False
            self.covered[box] = True
            self.marked += self.covered[box].size
            return True
        loop = loops[0]
        bounds = []
        for m, operands in ((loop.lowerBoundMap.data, loop.lowerBoundOperands), (loop.upperBoundMap.data, loop.upperBoundOperands)):
            if any(o not in env for o in operands):
                return False
            bounds.append(m.eval([env[o] for o in operands[: m.num_dims]], [env[o] for o in operands[m.num_dims :]]))
        iv = induction_var(loop)
        for value in range(max(bounds[0]), min(bounds[1]), step_of(loop)):
            if any(x is iv and (value < c) != below for x, c, below in guards):
                continue
            if not self.visit(loops[1:], forms, {**env, iv: value}, guards):
                return False
        return True


def _box(forms: list[tuple[dict[SSAValue, int], int, int, int]], env: dict[SSAValue, int],
         shape: Sequence[int]) -> tuple[slice, ...] | None:  # fmt: skip
    """The elements (one slice per dimension, clipped to `shape`) of the box `forms`
    describes at the outer variables `env`; None where a variable is not in `env`."""
    box = []
    for (terms, const, step, extent), size in zip(forms, shape):
        if any(v not in env for v in terms):
            return None
        origin = const + sum(c * env[v] for v, c in terms.items())
        first = origin if origin >= 0 else origin + (-origin + step - 1) // step * step
        box.append(slice(first, max(first, min(size, origin + step * (extent - 1) + 1)), step))
    return tuple(box)


def _box_forms(copy_out: affine.ForOp, tensor: SSAValue) -> list[tuple[dict[SSAValue, int], int, int, int]] | None:
    """Per dimension of `tensor`: the outer terms, constant, step and extent of the box a
    copy-out writes (each dimension moved by its own copy loop, from 0 by 1, times a
    positive step), or None."""
    loops: dict[SSAValue, affine.ForOp] = {induction_var(f): f for f in walk_ops(copy_out) if isinstance(f, affine.ForOp)}
    return _store_forms(copy_out, tensor, loops, fixed=False)


def _store_forms(root: Operation, tensor: SSAValue, loops: dict[SSAValue, affine.ForOp],
                 fixed: bool) -> list[tuple[dict[SSAValue, int], int, int, int]] | None:  # fmt: skip
    """The forms of `_box_forms` for the one store to `tensor` in `root`, `loops` the loops
    (by induction variable) that move the box: each dimension moved by one of them (from 0
    by 1, constant bounds) times a positive step, or, where `fixed`, by none (extent 1);
    None otherwise."""
    stores = [a for a in accesses(root) if a.write and a.buffer is tensor]
    if len(stores) != 1 or (store_map := stores[0].map) is None:
        return None
    forms: list[tuple[dict[SSAValue, int], int, int, int]] = []
    seen: set[SSAValue] = set()
    for e in store_map.results:
        form = linear_form(e, stores[0].operands)
        if form is None:
            return None
        terms, const = form
        inner = [(v, c) for v, c in terms.items() if v in loops]
        outer = {v: c for v, c in terms.items() if v not in loops}
        if not inner and fixed:
            forms.append((outer, const, 1, 1))
            continue
        if not inner or any(c < 1 or v in seen for v, c in inner):
            return None
        seen.update(v for v, _ in inner)
        digits: list[tuple[int, int]] = []
        for v, c in inner:
            bounds = constant_bounds(loops[v])
            if bounds is None or bounds[0] != 0 or step_of(loops[v]) != 1:
                return None
            digits.append((c, bounds[1]))
        box = _mixed_radix(digits)
        if box is None:
            return None
        forms.append((outer, const, *box))
    return forms


def _mixed_radix(digits: list[tuple[int, int]]) -> tuple[int, int] | None:
    """The (step, extent) of the positions `sum c k` a dimension takes over its copy loops
    (`digits`: each loop's coefficient c and trip count, from 0 by 1) when they are one
    box: sorted by coefficient, each the span of the finer ones (a channel staged split as
    group x channel-in-group, `8 g + f`: step 1, extent 16); None otherwise (gaps or
    overlaps). One loop: its own coefficient and trip count."""
    if len(digits) == 1:
        return digits[0]
    moving = sorted(d for d in digits if d[1] > 1)
    if any(n < 1 for _, n in digits):
        return None
    if not moving:
        return (min(c for c, _ in digits), 1)
    step, extent = moving[0]
    for c, n in moving[1:]:
        if c != step * extent:
            return None
        extent *= n
    return step, extent


def _fragment_forms(tile: _Tile, tensor: SSAValue) -> list[tuple[dict[SSAValue, int], int, int, int]] | None:
    """`_box_forms` of a fragment's copy-out taken over its warp's lanes: the 16 x 16 box
    of the two dimensions the lane and the copy loop move (the lanes' elements, the
    hardware's layout, cover it exactly), each outer term as the store has it."""
    lane_loop = tile.alloca.parent_op()
    stores = [a for a in accesses(tile.copy_out) if a.write and a.buffer is tensor]
    if not isinstance(lane_loop, affine.ForOp) or len(stores) != 1 or (store_map := stores[0].map) is None:
        return None
    store = stores[0]
    inner = {induction_var(lane_loop), induction_var(tile.copy_out)}
    positions = [p for p, v in enumerate(store.operands) if v in inner]
    zeros = [AffineExpr.constant(0) if p in positions else AffineExpr.dimension(p) for p in range(len(store.operands))]
    forms: list[tuple[dict[SSAValue, int], int, int, int]] = []
    for e in store_map.results:
        form = linear_form(e.replace_dims_and_symbols(zeros, []), store.operands)
        if form is None:
            return None
        moved = any(isinstance(d, int) and d in positions for d in _dims_of(e))
        forms.append((form[0], form[1], 1, FRAGMENT if moved else 1))
    return forms if sum(f[3] == FRAGMENT for f in forms) == 2 else None


def _dims_of(e: AffineExpr) -> set[int]:
    return {x.position for x in e.dfs() if isinstance(x, AffineDimExpr)}


def _fill_forms(fill_op: affine.ForOp, tensor: SSAValue) -> list[tuple[dict[SSAValue, int], int, int, int]] | None:
    """`_box_forms` of a fill nest (a perfect nest of loops from 0 by 1 with constant bounds
    around its store): per dimension of `tensor`, the terms of the loops outside the fill,
    constant, step and extent of the box one execution of the nest writes (a dimension no
    fill loop moves: extent 1), or None."""
    loops: list[affine.ForOp] = []
    op: Operation = fill_op
    while isinstance(op, affine.ForOp):
        loops.append(op)
        body = [o for o in op.body.block.ops if not isinstance(o, affine.YieldOp)]
        if len(body) != 1 or not isinstance(body[0], affine.ForOp):
            break
        op = body[0]
    return _store_forms(fill_op, tensor, {induction_var(f): f for f in loops}, fixed=True)


def _outer_points(loops: Sequence[affine.ForOp], env: dict[SSAValue, int]) -> Iterator[dict[SSAValue, int]] | None:
    """Every iteration of `loops` (a chain, outermost first) as values of their variables,
    or None when a bound is not constant."""
    if not loops:
        return iter([env])
    bounds = constant_bounds(loops[0])
    if bounds is None:
        return None
    iv, step = induction_var(loops[0]), step_of(loops[0])
    points: list[dict[SSAValue, int]] = []
    for value in range(bounds[0], bounds[1], step):
        inner = _outer_points(loops[1:], {**env, iv: value})
        if inner is None:
            return None
        points += list(inner)
        if len(points) > MAX_TILE_ORIGINS:
            return None
    return iter(points)


def _nested_fill(fill_op: Operation, host: func.FuncOp,
                 from_tile: bool = False) -> tuple[SSAValue, SSAValue, list[affine.ForOp]] | None:  # fmt: skip
    """(tensor, constant, loops around it) of a fill nest fused into the loops of a nest (its
    parent an affine.for, the loops from the function down to it nothing but loops: a
    batch loop running each image's fill before its reduction, `transform.einc.fuse`), its
    constant defined outside the fill; else None. `from_tile`: `fill_op` is a tile's copy-in
    that now stores the identity (`_init_within_tiles`), not an `einc.init` nest."""
    if not isinstance(fill_op, affine.ForOp) or (INIT_ATTR not in fill_op.attributes and not from_tile):
        return None
    if not isinstance(fill_op.parent_op(), affine.ForOp):
        return None
    top: Operation = fill_op
    while (parent := top.parent_op()) is not None and parent is not host:
        top = parent
    outer = _enclosing_loops(fill_op, top)
    if outer is None:
        return None
    stores = [o for o in walk_ops(fill_op) if isinstance(o, affine.StoreOp | memref.StoreOp)]
    if len(stores) != 1 or not isinstance(stores[0], affine.StoreOp):
        return None
    value = stores[0].value
    owner = value.owner
    if not isinstance(owner, arith.ConstantOp) or fill_op.is_ancestor(owner):
        return None
    where = owner.parent_op()
    if where is None or not where.is_ancestor(fill_op):
        return None
    return stores[0].memref, value, outer


def _later_tiles(fill_op: Operation, tensor: SSAValue) -> list[_Tile]:
    """The tiles of the nests after the fill that use the tensor only through staged tiles
    (a transposed convolution's phase nests, each with the tiles of its split pieces), up
    to the first that uses it otherwise."""
    tiles: list[_Tile] = []
    nest = fill_op.next_op
    while nest is not None:
        if _uses(nest, tensor):
            found_tiles = _tiles(nest, tensor)
            if found_tiles is None:
                break
            tiles += found_tiles
        nest = nest.next_op
    return tiles


def _init_nested(fill_op: Operation, host: func.FuncOp, from_tile: bool = False) -> int:
    """A fill fused into the loops around its nest (`_nested_fill`): each iteration of those
    loops fills a box and stages tiles after it. Checked per iteration: the tiles of one
    iteration disjoint and inside the box its fill has just written (their copy-ins read
    the identity: it is stored instead); when they cover the box exactly, the fill goes
    (each element the fill wrote is written back by a tile before anything else reads
    it). `from_tile`: `fill_op` is a tile's copy-in storing the identity (`_init_within_tiles`).
    Returns the tiles rewritten."""
    found = _nested_fill(fill_op, host, from_tile)
    if found is None:
        return 0
    tensor, identity, outer = found
    memory = tensor.type
    assert isinstance(fill_op, affine.ForOp)
    if not isinstance(memory, MemRefType):
        return 0
    shape = memory.get_shape()
    if math.prod(shape) > MAX_COVERAGE_ELEMENTS or len(shape) > MAX_COVERAGE_RANK:
        return 0
    tiles = _later_tiles(fill_op, tensor)
    forms = _fill_forms(fill_op, tensor)
    tile_forms = [_box_forms(tile.copy_out, tensor) if not tile.fragment else None for tile in tiles]
    points = _outer_points(outer, {})
    if not tiles or forms is None or points is None or any(f is None for f in tile_forms):
        return 0
    exact = True
    budget = 0
    staged = _Marking(np.zeros(shape, dtype=bool))
    for env in points:
        # One map for every iteration, cleared inside the fill's box after each: the
        # tiles of an iteration lie inside its box (checked by counting), so the work per
        # iteration is the box's, not the whole output's.
        filled = _box(forms, env, shape)
        if filled is None:
            return 0
        staged.points, staged.marked = 0, 0
        for tile, tile_form in zip(tiles, tile_forms):
            assert tile_form is not None
            if not staged.visit(tile.loops, tile_form, env, tile.guards):
                return 0
        budget += staged.points
        inside = int(staged.covered[filled].sum())
        if budget > MAX_TILE_ORIGINS or inside != staged.marked:
            return 0
        exact = exact and inside == staged.covered[filled].size
        staged.covered[filled] = False
    for tile in tiles:
        tile.load.results[0].replace_all_uses_with(identity)
        tile.load.detach()
        tile.load.erase()
    if exact:
        fill_op.detach()
        fill_op.erase()
    return len(tiles)


def _overwritten_copy_in(alloca: memref.AllocaOp) -> affine.ForOp | None:
    """The copy-in of a staged tile when the nest right after it is a fill (`einc.init`)
    that writes every element of the tile without reading it: the fill moved inside the
    staging point (`fuse_fill_rows`: a depthwise convolution's output row zeroed in its
    local array), so what the copy-in read from the output is overwritten unread."""
    found = _copy_nests(alloca)
    if found is None:
        return None
    copy_in = found[0]
    tile = alloca.results[0]
    if any(a.write and a.buffer is not tile for a in accesses(copy_in)):
        return None
    fill_op = copy_in.next_op
    if not isinstance(fill_op, affine.ForOp) or INIT_ATTR not in fill_op.attributes:
        return None
    mine = [a for a in accesses(fill_op) if a.buffer is tile]
    if len(mine) != 1 or not mine[0].write:
        return None
    for o in walk_ops(fill_op):  # the store runs in every iteration: no condition, no empty loop
        if isinstance(o, affine.ForOp):
            bounds = constant_bounds(o)
            if bounds is None or bounds[1] <= bounds[0]:
                return None
        elif o.regions:
            return None
    forms = _fill_forms(fill_op, tile)
    memory = tile.type
    if forms is None or not isinstance(memory, MemRefType) or len(forms) != len(shape := memory.get_shape()):
        return None
    if any(outer or const != 0 or step != 1 or extent != n for (outer, const, step, extent), n in zip(forms, shape)):
        return None
    return copy_in


def _init_within_tiles(host: func.FuncOp) -> int:
    """Tiles staged inside a larger tile of the same output (a grouped convolution's
    register tile of an output row inside the pair of groups' whole output planes, staged
    to be streamed out in whole lines): once the larger tile's copy-in stores the identity
    (rewritten above), that copy-in is a fill of the larger tile fused into the loops
    around it, and the smaller tiles staged after it in its block are taken as
    `_init_nested` takes a fused fill's (their copy-ins store the identity; where they
    cover the larger tile, its copy-in goes). Returns the tiles rewritten."""
    done = 0
    for alloca in [op for op in walk_ops(host) if isinstance(op, memref.AllocaOp) and MEMORY_ATTR not in op.attributes]:
        found = _copy_nests(alloca)
        if found is None or alloca.parent_block() is None:
            continue
        copy_in, tile = found[0], alloca.results[0]
        if any(not a.write or a.buffer is not tile for a in accesses(copy_in)):
            continue  # the copy-in still reads something: not a fill
        done += _init_nested(copy_in, host, from_tile=True)
    return done


def init_accumulators(host: func.FuncOp) -> int:
    """Rewrite the staged accumulator tiles of `host` (module docstring); returns how many."""
    done = 0
    for alloca in [op for op in walk_ops(host) if isinstance(op, memref.AllocaOp) and MEMORY_ATTR not in op.attributes]:
        if (copy_in := _overwritten_copy_in(alloca)) is not None:
            copy_in.detach()
            copy_in.erase()
            done += 1
    nested = [op for op in walk_ops(host) if isinstance(op, affine.ForOp) and INIT_ATTR in op.attributes
              and isinstance(parent := op.parent_op(), affine.ForOp) and INIT_ATTR not in parent.attributes]  # fmt: skip
    for fill_op in nested:
        done += _init_nested(fill_op, host)
    for fill_op in list(host.body.block.ops):
        found = _fill(fill_op)
        if found is None:
            continue
        tensor, identity = found
        tiles = _later_tiles(fill_op, tensor)
        if not tiles:
            continue
        covered = _tile_map(tiles, tensor)
        if covered is None:
            continue
        if isinstance(covered, str):
            # too many tiles to enumerate: one tile whose loops' iterations are a regular
            # grid covering the output exactly (`_grid_covers`: the fill goes), or staged at
            # loops that each give their iterations disjoint elements (no reduction loop
            # encloses it; the fill stays)
            (tile,) = tiles if len(tiles) == 1 else (None,)
            if tile is None or tile.guards:
                continue
            whole = _grid_covers(tile, tensor)
            if not whole:
                inside = [a for a in accesses(tile.loops[0]) if a.buffer is tensor]
                if not all(separates(induction_var(f), step_of(f), [a for a in inside if f.is_ancestor(a.op)]) for f in tile.loops):
                    continue
        else:
            whole = bool(covered.all())
        for tile in tiles:
            tile.load.results[0].replace_all_uses_with(identity)
            tile.load.detach()
            tile.load.erase()
        if whole:  # nothing between the fill and the nests uses the tensor
            fill_op.detach()
            fill_op.erase()
        done += len(tiles)
    return done + _init_within_tiles(host)


@dataclass(frozen=True)
class InitAccumulatorsPass(ModulePass):
    name = "einc-init-accumulators"

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        for host in op.ops:
            if isinstance(host, func.FuncOp) and host.body.blocks:
                init_accumulators(host)


__all__ = ["InitAccumulatorsPass", "init_accumulators"]
