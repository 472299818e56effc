"""The mechanism of spreading a Poplar kernel over tiles: which kernels may be split, the
elements each vertex of a split reads and writes, and the tile memory a vertex needs. The
policy (how many vertices) is `split-poplar-vertices` (einc/passes/split_poplar_vertices.py);
docs/POPLAR.md describes the whole design.

Contract: with a split (`Splittable.split`), every access to a written buffer lies in the
point loop at s * point + c (checked at every point), so vertex t touches only elements
[s * begin + c, s * (end - 1) + c] of it, disjoint from every other vertex's, and no two
vertices write one 32-bit word (for elements narrower than the write granule, `chunk` and c
are multiples of the elements per word and s is 1); every load of a read-only buffer
connected as a slice reads inside that vertex's slice (`Bounds`, on ranges.py's rules per point,
bounds its index at every point; the slice is clipped to the tensor, since a guarded load's
index may leave it where the guard is false). `vertex_bytes` is the most tile memory one
vertex needs: its fields (each slice or whole tensor, in FIELD_ALIGN units), its plain
fields and its workers' local arrays.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from xdsl.dialects import affine, arith, memref, scf
from xdsl.dialects.builtin import IntegerAttr, MemRefType
from xdsl.ir import Attribute, Block, Operation, SSAValue
from xdsl.ir.affine import (
    AffineBinaryOpExpr,
    AffineBinaryOpKind,
    AffineConstantExpr,
    AffineDimExpr,
    AffineExpr,
    AffineMap,
    AffineSymExpr,
)

from einc.dialects import egpu
from einc.dialects.egpu_attrs import TileSplit
from einc.transforms.ranges import PointRange, Points, Unbounded, point_map_ranges

READS = (affine.LoadOp, memref.LoadOp, egpu.LoadExtfOp, egpu.VLoadOp, egpu.VLoadRepeatOp)
WRITES = (affine.StoreOp, memref.StoreOp, egpu.StoreTruncfOp, egpu.VStoreOp)

FIELD_ALIGN = 8
"""Bytes a vertex's field occupies are counted in 8-byte units: the IPU loads 64 bits at a
time, and Poplar places vector edges on 8-byte boundaries."""


def written(arg: SSAValue) -> bool:
    """Whether a kernel argument is stored to."""
    return any(isinstance(u.operation, WRITES) and u.index == 1 for u in arg.uses)


def point_loop(kernel: egpu.FuncOp) -> scf.ForOp:
    """The point loop of a split kernel: its one top-level `scf.for`."""
    loops = [op for op in kernel.body.block.ops if isinstance(op, scf.ForOp)]
    assert len(loops) == 1, f"{kernel.sym_name.data}: a split kernel has one point loop"
    return loops[0]


def _eval_affine(e: AffineExpr, values: list[np.ndarray], dims: int) -> np.ndarray:
    match e:
        case AffineConstantExpr(value=v):
            return np.full_like(values[0] if values else np.zeros(1, np.int64), v)
        case AffineDimExpr(position=p):
            return values[p]
        case AffineSymExpr(position=p):
            return values[dims + p]
        case AffineBinaryOpExpr(kind=kind, lhs=lhs, rhs=rhs):
            a, b = _eval_affine(lhs, values, dims), _eval_affine(rhs, values, dims)
            if kind == AffineBinaryOpKind.Add:
                return a + b
            if kind == AffineBinaryOpKind.Mul:
                return a * b
            if kind == AffineBinaryOpKind.FloorDiv:
                return np.floor_divide(a, b)
            if kind == AffineBinaryOpKind.CeilDiv:
                return -np.floor_divide(-a, b)
            return np.mod(a, b)
    raise AssertionError(e)


def _point_values(v: SSAValue, point: SSAValue, points: np.ndarray) -> np.ndarray | None:
    """`v` at every point, when it is the point or affine in it alone; else None."""
    if v is point:
        return points
    owner = v.owner
    if isinstance(owner, arith.ConstantOp) and isinstance(owner.value, IntegerAttr):
        return np.full_like(points, owner.value.value.data)
    if isinstance(owner, affine.ApplyOp):
        values = [_point_values(o, point, points) for o in owner.mapOperands]
        if any(x is None for x in values):
            return None
        m = owner.map.data
        return _eval_affine(m.results[0], values, m.num_dims)  # type: ignore[arg-type]
    return None


def _flat_index(op: Operation, point: SSAValue, points: np.ndarray) -> np.ndarray | None:
    """The flat element an affine/memref load or store touches at every point, or None."""
    if isinstance(op, affine.LoadOp | affine.StoreOp):
        buffer, m, operands = op.memref, op.map.data, op.indices
    elif isinstance(op, memref.LoadOp | memref.StoreOp):
        buffer, operands = op.memref, op.indices
        m = AffineMap.identity(len(operands))
    else:
        return None
    values = [_point_values(o, point, points) for o in operands]
    if any(x is None for x in values):
        return None
    assert isinstance(buffer.type, MemRefType)
    flat = np.zeros_like(points)
    for result, size in zip(m.results, buffer.type.get_shape()):
        flat = flat * size + _eval_affine(result, values, m.num_dims)  # type: ignore[arg-type]
    return flat


def inside(op: Operation, loop: Operation) -> bool:
    parent = op.parent_op()
    while parent is not None and parent is not loop:
        parent = parent.parent_op()
    return parent is loop


# ---- the elements a vertex reads: intervals per point ------------------------------------------


def _map_ranges(m: AffineMap, operands: Sequence[SSAValue], bounds: Bounds) -> list[PointRange]:
    return point_map_ranges(m, [bounds.of(o) for o in operands], bounds.ranges)


class Bounds:
    """Ranges of index values inside the split loop, per point: the point itself, the
    induction variables of loops inside it (from their bounds), constants, affine.apply /
    min and integer arithmetic on them (einc/transforms/ranges.py's rules, per point).
    Raises Unbounded for anything else."""

    def __init__(self, loop: scf.ForOp, points: np.ndarray):
        self.loop = loop
        self.point = loop.body.block.args[0]
        self.points = points
        self.ranges = Points(points)
        self.known: dict[SSAValue, PointRange] = {}

    def of(self, v: SSAValue) -> PointRange:
        if v not in self.known:
            self.known[v] = self._compute(v)
        return self.known[v]

    def _compute(self, v: SSAValue) -> PointRange:
        if v is self.point:
            return self.points, self.points
        owner = v.owner
        if isinstance(owner, Block):
            parent = owner.parent_op()
            if parent is None or not inside(parent, self.loop) or v is not owner.args[0]:
                raise Unbounded()
            if isinstance(parent, affine.ForOp):
                lows = _map_ranges(parent.lowerBoundMap.data, parent.lowerBoundOperands, self)
                highs = _map_ranges(parent.upperBoundMap.data, parent.upperBoundOperands, self)
                return np.maximum.reduce([lo for lo, _ in lows]), np.minimum.reduce([hi for _, hi in highs]) - 1
            if isinstance(parent, scf.ForOp):
                return self.of(parent.lb)[0], self.of(parent.ub)[1] - 1
            raise Unbounded()
        if isinstance(owner, arith.ConstantOp) and isinstance(owner.value, IntegerAttr):
            return self.ranges.constant(owner.value.value.data)
        if isinstance(owner, egpu.IndexOp):
            low, high = owner.index_range()
            return np.full_like(self.points, low), np.full_like(self.points, high)
        if isinstance(owner, affine.ApplyOp):
            return _map_ranges(owner.map.data, owner.mapOperands, self)[0]
        if isinstance(owner, affine.MinOp):
            found = _map_ranges(owner.map.data, owner.operands, self)
            return np.minimum.reduce([lo for lo, _ in found]), np.minimum.reduce([hi for _, hi in found])
        if isinstance(owner, arith.IndexCastOp | arith.ExtSIOp):
            return self.of(owner.operands[0])
        if isinstance(owner, arith.SelectOp):
            a, b = self.of(owner.lhs), self.of(owner.rhs)
            return np.minimum(a[0], b[0]), np.maximum(a[1], b[1])
        if isinstance(owner, arith.AddiOp | arith.SubiOp | arith.MuliOp | arith.FloorDivSIOp
                      | arith.DivSIOp | arith.RemSIOp | arith.MinSIOp | arith.MaxSIOp):  # fmt: skip
            a, b = self.of(owner.lhs), self.of(owner.rhs)
            if isinstance(owner, arith.AddiOp):
                return self.ranges.add(a, b)
            if isinstance(owner, arith.SubiOp):
                return a[0] - b[1], a[1] - b[0]
            if isinstance(owner, arith.MuliOp):
                return self.ranges.mul(a, b)
            if isinstance(owner, arith.MinSIOp):
                return np.minimum(a[0], b[0]), np.minimum(a[1], b[1])
            if isinstance(owner, arith.MaxSIOp):
                return np.maximum(a[0], b[0]), np.maximum(a[1], b[1])
            c = self.ranges.constant_divisor(b)
            if isinstance(owner, arith.FloorDivSIOp) or np.all(a[0] >= 0):  # C division of x >= 0
                if isinstance(owner, arith.RemSIOp):
                    return self.ranges.mod(a, c)
                return self.ranges.floordiv(a, c)
            if isinstance(owner, arith.RemSIOp):
                return np.full_like(a[0], -(c - 1)), np.full_like(a[1], c - 1)
            truncate = lambda x: np.where(x >= 0, x // c, -(-x // c))
            return truncate(a[0]), truncate(a[1])
        raise Unbounded()


def read_dims(op: Operation, bounds: Bounds) -> list[PointRange]:
    """The index range a load (or store) may take in each dimension of its buffer, per
    point (a vector access: all its lanes, in the last dimension)."""
    if isinstance(op, affine.LoadOp | affine.StoreOp):
        results = _map_ranges(op.map.data, op.indices, bounds)
    elif isinstance(op, memref.LoadOp | memref.StoreOp | egpu.VLoadOp | egpu.VStoreOp | egpu.VLoadRepeatOp):
        results = [bounds.of(i) for i in op.indices]
    else:
        raise Unbounded()
    if isinstance(op, egpu.VLoadOp | egpu.VStoreOp) and results:
        lanes = (op.result if isinstance(op, egpu.VLoadOp) else op.value).type.get_shape()[0]  # type: ignore[attr-defined]
        lo, hi = results[-1]
        results[-1] = lo, hi + lanes - 1
    if isinstance(op, egpu.VLoadRepeatOp) and results:  # the run's elements
        lo, hi = results[-1]
        results[-1] = lo, hi + op.run.value.data - 1
    return results


def _read_interval(op: Operation, bounds: Bounds, clip: bool = False) -> PointRange:
    """The flat elements a load may touch, per point (a vector load: all its lanes); with
    `clip`, each dimension's range cut to the tensor first (an access runs only inside it:
    a clipped register tile's guarded copy-out, `if (N_o + c0 < 13)`, indexes past the end
    only where its guard is false)."""
    results = read_dims(op, bounds)
    assert isinstance(op, affine.LoadOp | affine.StoreOp | memref.LoadOp | memref.StoreOp | egpu.VLoadOp | egpu.VStoreOp | egpu.VLoadRepeatOp)
    buffer = op.memref
    assert isinstance(buffer.type, MemRefType)
    low, high = np.zeros_like(bounds.points), np.zeros_like(bounds.points)
    for (lo, hi), size in zip(results, buffer.type.get_shape()):
        if clip:
            lo, hi = np.clip(lo, 0, size - 1), np.clip(hi, 0, size - 1)
        low, high = low * size + lo, high * size + hi
    return low, high


BATCH_POINTS = 1 << 21
"""Points the interval analysis evaluates at once (it keeps a few int64 arrays of this many
per index value)."""


def _reads(kernel: egpu.FuncOp, loop: scf.ForOp, points: np.ndarray, written: set[int]) -> dict[int, PointRange]:
    """Each read-only argument all of whose uses are loads the interval analysis bounds:
    the elements it may read, per point (unclipped: a guarded load's index may leave the
    tensor where the guard is false); evaluated BATCH_POINTS points at a time."""
    parts: dict[int, list[PointRange]] = {}
    unbounded: set[int] = set()
    for first in range(0, len(points), BATCH_POINTS):
        bounds = Bounds(loop, points[first:first + BATCH_POINTS])
        for k, arg in enumerate(kernel.body.block.args):
            if k in written or k in unbounded or not arg.uses:
                continue
            try:
                intervals = [_read_interval(u.operation, bounds) for u in arg.uses if inside(u.operation, loop)]
            except Unbounded:
                unbounded.add(k)
                continue
            if len(intervals) != len(list(arg.uses)):
                unbounded.add(k)
                continue
            low = np.minimum.reduce([lo for lo, _ in intervals])
            parts.setdefault(k, []).append((low, np.maximum.reduce([hi for _, hi in intervals])))
    return {
        k: (np.concatenate([lo for lo, _ in ranges]), np.concatenate([hi for _, hi in ranges]))
        for k, ranges in parts.items() if k not in unbounded
    }  # fmt: skip


# ---- tile memory ----------------------------------------------------------------------------------


def _elements(arg: SSAValue) -> int:
    assert isinstance(arg.type, MemRefType)
    return math.prod(arg.type.get_shape())


def element_bytes(t: Attribute) -> int:
    assert isinstance(t, MemRefType)
    return max(t.get_element_type().bitwidth, 8) // 8  # type: ignore[attr-defined]


def field_bytes(elements: np.ndarray | int, width: int) -> np.ndarray | int:
    return -(-(np.asarray(elements) * width) // FIELD_ALIGN) * FIELD_ALIGN


def local_bytes(kernel: egpu.FuncOp) -> int:
    """The local arrays of a vertex's compute(): one copy per worker it uses."""
    workers = min(math.prod(kernel.block_size), 6)
    arrays = [op for op in kernel.walk() if isinstance(op, memref.AllocaOp | egpu.AllocSharedOp)]
    return workers * sum(int(field_bytes(_elements(a.results[0]), element_bytes(a.results[0].type))) for a in arrays)


def vertex_bytes(kernel: egpu.FuncOp, split: TileSplit | None) -> int:
    """The most bytes of tile memory one of the kernel's vertices needs: its fields (each
    connected slice or box, or whole tensor, in FIELD_ALIGN units), its plain fields and its
    workers' local arrays."""
    args = kernel.body.block.args
    if split is None:
        fields = sum(int(field_bytes(_elements(a), element_bytes(a.type))) for a in args)
        return fields + local_bytes(kernel)
    if split.boxes or split.shape:
        boxes = {k: extent for k, extent, _ in split.boxes}
        tiled = sum(1 for p, t in zip(split.shape, split.tile) if t < p)
        size = local_bytes(kernel) + 4 * (1 + 2 * tiled + len(split.bases))
        for k, a in enumerate(args):
            count = math.prod(split.tile) if k in split.written_at else math.prod(boxes.get(k, (_elements(a),)))
            size += int(field_bytes(count, element_bytes(a.type)))
        return size
    begins = np.arange(split.vertices, dtype=np.int64) * split.chunk
    ends = np.minimum(begins + split.chunk, split.points)
    writes, reads = split.written_at, split.read_slices
    total = np.zeros_like(begins) + local_bytes(kernel) + 4 * (2 + len(split.bases))
    for k, a in enumerate(args):
        if k in writes:
            s, _ = writes[k]
            count: np.ndarray | int = s * (ends - 1 - begins) + 1
        elif k in reads:
            first, end = reads[k]
            count = np.array(end) - np.array(first)
        else:
            count = _elements(a)
        total = total + field_bytes(count, element_bytes(a.type))
    return int(total.max())


def _read_slices(
    reads: dict[int, PointRange], kernel: egpu.FuncOp, points: int, chunk: int, whole: bool = True
) -> dict[int, tuple[tuple[int, ...], tuple[int, ...]]]:
    """Per read argument, every vertex's slice (first elements, end elements) for ranges of
    `chunk` points; an argument every vertex reads whole is left out (connected whole)
    unless `whole` is False."""
    begins = np.arange(-(-points // chunk), dtype=np.int64) * chunk
    found = {}
    for k, (low, high) in reads.items():
        size = _elements(kernel.body.block.args[k])
        first = np.clip(np.minimum.reduceat(low, begins), 0, size)
        end = np.clip(np.maximum.reduceat(high, begins) + 1, 0, size)
        end = np.maximum(end, first)
        if whole and np.all(first == 0) and np.all(end == size):
            continue
        found[k] = tuple(int(x) for x in first), tuple(int(x) for x in end)
    return found


def _split_points(
    kernel: egpu.FuncOp, write_granule: int
) -> tuple[scf.ForOp, int, dict[int, tuple[int, int]], int, list[int]] | None:
    """Whether the kernel may be split (its point loop, point count, written arguments'
    (s, c), the points per 32-bit word of its narrowest such element, and the written
    arguments of at least a word per element accessed otherwise: `_ranged_writes`), or None."""
    block = kernel.block_size[0]
    ops = list(kernel.body.block.ops)
    loops = [op for op in ops if isinstance(op, scf.ForOp)]
    if len(loops) != 1 or loops[0].results:
        return None
    loop = loops[0]
    if any(
        op is not loop and not isinstance(op, arith.ConstantOp | egpu.IndexOp | egpu.ReturnOp)
        for op in ops
    ):
        return None
    lb, ub, step = loop.lb.owner, loop.ub.owner, loop.step.owner
    if not (
        isinstance(lb, egpu.GlobalIdOp | egpu.ThreadIdOp)
        and lb.dimension.index == 0
        and isinstance(ub, arith.ConstantOp) and isinstance(ub.value, IntegerAttr)
        and isinstance(step, arith.ConstantOp) and isinstance(step.value, IntegerAttr)
        and step.value.value.data == block
    ):  # fmt: skip
        return None
    total = ub.value.value.data
    point = loop.body.block.args[0]
    points = np.arange(total, dtype=np.int64)
    writes: dict[int, tuple[int, int]] = {}
    ranged: list[int] = []
    words = 1
    for k, arg in enumerate(kernel.body.block.args):
        users = [u.operation for u in arg.uses]
        if not written(arg):
            continue
        if not all(inside(user, loop) for user in users):
            return None
        found: set[tuple[int, int]] = set()
        for user in users:
            flat = _flat_index(user, point, points)
            s, c = (int(flat[1] - flat[0]), int(flat[0])) if flat is not None and len(flat) > 1 else (0, 0)
            if flat is None or s < 1 or not np.array_equal(flat, s * points + c):
                break
            found.add((s, c))
        else:
            if len(found) == 1:
                ((s, c),) = found
                width = element_bytes(arg.type)
                if width < write_granule:
                    per_word = write_granule // width
                    if s != 1 or c % per_word:
                        return None
                    words = math.lcm(words, per_word)
                writes[k] = (s, c)
                continue
        if element_bytes(arg.type) < write_granule:
            return None
        ranged.append(k)
    if not writes and not ranged:
        return None
    return loop, total, writes, words, ranged


def _ranged_writes(kernel: egpu.FuncOp, loop: scf.ForOp, total: int, ranged: list[int],
                   words: int) -> tuple[dict[int, PointRange], int] | None:  # fmt: skip
    """The elements each point of a `ranged` written argument accesses (a register tile of
    outputs: [low, high] per point, from the interval analysis of all its loads and stores),
    and the fewest points (a multiple of `words`) that every cut between vertices must be a
    multiple of so that consecutive ranges of points access disjoint hulls of elements;
    None when an access is not bounded or no such cut exists."""
    found: dict[int, PointRange] = {}
    args = kernel.body.block.args
    for k in ranged:
        lows, highs = [], []
        for first in range(0, total, BATCH_POINTS):
            bounds = Bounds(loop, np.arange(first, min(first + BATCH_POINTS, total), dtype=np.int64))
            try:
                intervals = [_read_interval(u.operation, bounds, clip=True) for u in args[k].uses]
            except Unbounded:
                return None
            lows.append(np.minimum.reduce([lo for lo, _ in intervals]))
            highs.append(np.maximum.reduce([hi for _, hi in intervals]))
        found[k] = np.concatenate(lows), np.concatenate(highs)
    cuts = np.ones(max(total - 1, 0), dtype=bool)  # cuts[b - 1]: points [0, b) and [b, total) apart
    for low, high in found.values():
        cuts &= np.maximum.accumulate(high)[:-1] < np.minimum.accumulate(low[::-1])[::-1][1:]
    for g in np.flatnonzero(cuts) + 1:
        if g % words == 0 and cuts[g - 1::g].all():
            return found, int(g)
    return None


@dataclass(frozen=True)
class Splittable:
    """A kernel that may be split: its point loop of `points` points, its written arguments'
    (s, c), the points per 32-bit word of its narrowest written element (`words`: a chunk is
    a multiple of it) and the elements each read-only argument may read, per point."""

    kernel: egpu.FuncOp
    loop: scf.ForOp
    points: int
    written: dict[int, tuple[int, int]]
    words: int
    reads: dict[int, PointRange]
    ranged: dict[int, PointRange]
    """Written arguments each point accesses a range of (a register tile): the elements it
    may access, per point; connected as one slice per vertex, the hull of its points'."""

    def split(self, vertices: int) -> TileSplit:
        """The kernel cut into (about) `vertices` vertices of a whole number of words of
        points each, with their slices and bytes (see the module's contract)."""
        chunk = -(-self.points // vertices)
        chunk = -(-chunk // self.words) * self.words
        slices = _read_slices(self.reads, self.kernel, self.points, chunk)
        slices.update(_read_slices(self.ranged, self.kernel, self.points, chunk, whole=False))
        split = TileSplit(
            -(-self.points // chunk), 0, self.points, chunk,
            tuple((k, s, c) for k, (s, c) in sorted(self.written.items())),
            tuple((k, first, end) for k, (first, end) in sorted(slices.items())),
        )  # fmt: skip
        return TileSplit(
            split.vertices, vertex_bytes(self.kernel, split), split.points, split.chunk,
            split.written, split.read,
        )  # fmt: skip


def unsplit(kernel: egpu.FuncOp) -> TileSplit:
    """The kernel as one vertex on tile 0."""
    return TileSplit(1, vertex_bytes(kernel, None))


def splittable(kernel: egpu.FuncOp, write_granule: int) -> Splittable | None:
    """The kernel's split space, or None when it must stay one vertex."""
    legal = _split_points(kernel, write_granule)
    if legal is None:
        return None
    loop, total, writes, words, ranged = legal
    found: dict[int, PointRange] = {}
    if ranged:
        cut = _ranged_writes(kernel, loop, total, ranged, words)
        if cut is None:
            return None
        found, words = cut
    reads = _reads(kernel, loop, np.arange(total, dtype=np.int64), set(writes) | set(found))
    return Splittable(kernel, loop, total, writes, words, reads, found)


def whole_reads(kernel: egpu.FuncOp) -> set[int]:
    """The read-only arguments of a splittable kernel read at indices the interval analysis
    cannot bound (a gather's table): connected whole to every vertex."""
    loops = [op for op in kernel.body.block.ops if isinstance(op, scf.ForOp)]
    if len(loops) != 1:
        return set()
    bounds = Bounds(loops[0], np.zeros(1, np.int64))
    found = set()
    for k, arg in enumerate(kernel.body.block.args):
        if written(arg):
            continue
        try:
            for u in arg.uses:
                if isinstance(u.operation, affine.LoadOp | memref.LoadOp | egpu.VLoadOp | egpu.VLoadRepeatOp):
                    read_dims(u.operation, bounds)
        except Unbounded:
            found.add(k)
    return found
