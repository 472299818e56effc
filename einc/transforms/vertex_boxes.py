"""Box splits of a Poplar kernel (the second form of einc/transforms/vertex_split.py's
split, for kernels whose contiguous ranges of points read too much): the point space is
taken as its written buffer's shape and cut into boxes of `tile` points; each vertex writes
its box of that buffer and reads, of every read-only buffer the interval analysis bounds,
one box per dimension (the same extents on every vertex, its low corner per vertex), so a
column or a window of an input is connected instead of the hull of its rows.

The boxes are exact: per-dimension read ranges are evaluated at every point (in batches), and
reduced per fine tile (at most FINE_TILES of them); a vertex's box is the hull of its fine
tiles' boxes (a tile is a whole number of fine tiles). docs/POPLAR.md has the design.
"""

from __future__ import annotations

import dataclasses
import math

import numpy as np
from xdsl.dialects.builtin import ArrayAttr, IntegerAttr, MemRefType

from einc.dialects import egpu
from einc.dialects.egpu_attrs import TileSplit
from einc.ir.attrs import POINT_SHAPE_ATTR
from einc.transforms.ranges import Unbounded
from einc.transforms.vertex_split import (
    BATCH_POINTS,
    Bounds,
    Splittable,
    element_bytes,
    inside,
    read_dims,
    vertex_bytes,
)

BIG = 1 << 62
"""The bytes of a split that is not legal (ranged boxes that overlap): no tile holds it."""

FINE_TILES = 1 << 15
"""Most fine tiles the point space is cut into to bound the boxes (their hulls are exact)."""


def point_shape(space: Splittable, write_granule: int) -> tuple[int, ...] | None:
    """The point space as the written buffers' common shape, when every written buffer is
    written at 1 * point + 0, has one element per point and elements of at least a word."""
    if space.ranged:
        return _tile_points(space)
    shapes = set()
    for k, (s, c) in space.written.items():
        t = space.kernel.body.block.args[k].type
        assert isinstance(t, MemRefType)
        if s != 1 or c != 0 or math.prod(t.get_shape()) != space.points or element_bytes(t) < write_granule:
            return None
        shapes.add(tuple(t.get_shape()))
    return shapes.pop() if len(shapes) == 1 else None


def _tile_points(space: Splittable) -> tuple[int, ...] | None:
    """A kernel whose points are register tiles (every written argument accessed in a range
    per point: `Splittable.ranged`): its points' shape (`egpu.point_shape`), or None."""
    attr = space.kernel.attributes.get(POINT_SHAPE_ATTR)
    if space.written or not isinstance(attr, ArrayAttr):
        return None
    shape = tuple(a.value.data for a in attr.data if isinstance(a, IntegerAttr))
    return shape if len(shape) == len(attr.data) and math.prod(shape) == space.points else None


def _fine(shape: tuple[int, ...]) -> tuple[int, ...]:
    """The fine tile: the shape cut evenly, outer dimensions first, into <= FINE_TILES."""
    counts = [1] * len(shape)
    grown = True
    while grown:
        grown = False
        for i, size in enumerate(shape):
            if counts[i] < size and math.prod(counts) * 2 <= FINE_TILES:
                counts[i] = min(size, counts[i] * 2)
                grown = True
    return tuple(-(-size // c) for size, c in zip(shape, counts))


def clipped(extent: tuple[int, ...], lows: tuple[tuple[int, ...], ...], shape: tuple[int, ...]) -> list[int]:
    """The dimensions in which some vertex's box (`extent` from its low corner in `lows`, a
    table per vertex or () for the whole dimension) passes the end of a tensor of `shape`:
    a written box of register tiles there is clipped to the tensor, [low, min(low + extent,
    size)), so that vertex's extent and the row-major strides of its box are its own."""
    return [d for d, (e, low, n) in enumerate(zip(extent, lows, shape)) if low and max(low) + e > n]


class BoxSpace:
    """The fine boxes of a splittable kernel's reads over its point shape."""

    def __init__(self, space: Splittable, shape: tuple[int, ...]):
        self.space, self.shape = space, shape
        self.fine = _fine(shape)
        self.grid = tuple(-(-p // t) for p, t in zip(shape, self.fine))
        args = space.kernel.body.block.args
        self.sizes = {k: tuple(a.type.get_shape()) for k, a in enumerate(args) if isinstance(a.type, MemRefType)}
        self.reads: dict[int, tuple[np.ndarray, np.ndarray]] = {}
        """Read argument -> (lows, highs) of shape grid + (rank,), clipped to the tensor."""
        self._evaluate()

    def _evaluate(self) -> None:
        kernel, loop = self.space.kernel, self.space.loop
        args = kernel.body.block.args
        candidates = [
            k for k, a in enumerate(args)
            if k not in self.space.written and a.uses
            and all(inside(u.operation, loop) and not isinstance(u.operation, egpu.VLoadOp | egpu.VLoadRepeatOp) for u in a.uses)
        ]  # fmt: skip
        candidates += [k for k in self.space.ranged if k not in candidates]
        count, per = math.prod(self.grid), math.prod(self.fine)
        strides = np.array([math.prod(self.shape[i + 1:]) for i in range(len(self.shape))], np.int64)
        offsets = np.stack(np.unravel_index(np.arange(per), self.fine), axis=1).astype(np.int64)
        top = np.array(self.shape, np.int64) - 1
        batch = max(1, BATCH_POINTS // per)
        lows: dict[int, list[np.ndarray]] = {k: [] for k in candidates}
        highs: dict[int, list[np.ndarray]] = {k: [] for k in candidates}
        for first in range(0, count, batch):
            tiles = np.arange(first, min(first + batch, count))
            corner = np.stack(np.unravel_index(tiles, self.grid), axis=1).astype(np.int64) * np.array(self.fine)
            coords = np.minimum(corner[:, None, :] + offsets[None, :, :], top)  # repeats: same hull
            points = (coords @ strides).reshape(-1)
            bounds = Bounds(loop, points)
            for k in list(lows):
                try:
                    ranges = [read_dims(u.operation, bounds) for u in args[k].uses]
                except Unbounded:
                    del lows[k], highs[k]
                    continue
                lo = np.stack([np.minimum.reduce([r[d][0] for r in ranges]) for d in range(len(ranges[0]))], axis=-1)
                hi = np.stack([np.maximum.reduce([r[d][1] for r in ranges]) for d in range(len(ranges[0]))], axis=-1)
                lows[k].append(lo.reshape(len(tiles), per, -1).min(axis=1))
                highs[k].append(hi.reshape(len(tiles), per, -1).max(axis=1))
        if any(k not in lows for k in self.space.ranged):
            raise Unbounded()
        for k, parts in lows.items():
            size = np.array(self.sizes[k], np.int64)
            lo = np.concatenate(parts).reshape(*self.grid, len(size))
            hi = np.concatenate(highs[k]).reshape(*self.grid, len(size))
            self.reads[k] = np.clip(lo, 0, size - 1), np.clip(hi, 0, size - 1)

    def _boxes(self, multiples: tuple[int, ...]) -> dict[int, tuple[np.ndarray, np.ndarray]]:
        """Per read argument, every vertex's (lows, highs) for tiles of `multiples` fine tiles."""
        counts = [-(-g // m) for g, m in zip(self.grid, multiples)]
        found = {}
        for k, (lo, hi) in self.reads.items():
            rank = lo.shape[-1]
            pad = [(0, c * m - g) for c, m, g in zip(counts, multiples, self.grid)] + [(0, 0)]
            big = np.iinfo(np.int64).max
            lo = np.pad(lo, pad, constant_values=big).reshape(*(x for c, m in zip(counts, multiples) for x in (c, m)), rank)
            hi = np.pad(hi, pad, constant_values=-1).reshape(*(x for c, m in zip(counts, multiples) for x in (c, m)), rank)
            axes = tuple(range(1, 2 * len(counts), 2))
            found[k] = lo.min(axis=axes).reshape(-1, rank), hi.max(axis=axes).reshape(-1, rank)
        return found

    def split(self, multiples: tuple[int, ...]) -> TileSplit:
        """The kernel in boxes of `multiples` fine tiles, with its read boxes and bytes."""
        tile = tuple(min(m * f, p) for m, f, p in zip(multiples, self.fine, self.shape))
        vertices = math.prod(-(-p // t) for p, t in zip(self.shape, tile))
        boxes = []
        for k, (lo, hi) in sorted(self._boxes(multiples).items()):
            size = np.array(self.sizes[k], np.int64)
            extent = np.maximum(hi - lo + 1, 0).max(axis=0)
            low = np.where(hi >= lo, lo, 0)
            if k not in self.space.ranged:
                low = np.minimum(low, size - extent)  # a read box shifted back inside the tensor
            # a box of written register tiles stays where its tiles are: the last box of a
            # dimension the tile grid does not divide is clipped to the tensor (`clipped`)
            tables = tuple(() if e == n else tuple(int(x) for x in low[:, d]) for d, (e, n) in enumerate(zip(extent, size)))
            boxes.append((k, tuple(int(e) for e in extent), tables))
        written = tuple((k, s, c) for k, (s, c) in sorted(self.space.written.items()))
        split = TileSplit(vertices, 0, self.space.points, 0, written, (), self.shape, tile, tuple(boxes))
        if not self._disjoint(split):
            return dataclasses.replace(split, bytes=BIG)
        return dataclasses.replace(split, bytes=vertex_bytes(self.space.kernel, split))

    def _disjoint(self, split: TileSplit) -> bool:
        """Whether the boxes of every written argument accessed in ranges (a register tile
        per point) are disjoint between vertices: each element is counted in the boxes
        that hold it."""
        for k, extent, lows in split.boxes:
            if k not in self.space.ranged:
                continue
            counts = np.zeros(self.sizes[k], np.int32)
            for t in range(split.vertices):
                box = tuple(slice(low[t], low[t] + e) if low else slice(0, e) for e, low in zip(extent, lows))  # numpy clips
                counts[box] += 1
            if counts.max() > 1:
                return False
        return True

    def search(self, limit: int, tiles: int, preferred: int) -> TileSplit | None:
        """Halve the tile in the dimension that most shrinks a vertex's bytes (outer first on
        ties) while it does not fit or has fewer than `preferred` vertices, within `tiles`."""
        multiples = list(self.grid)
        split = self.split(tuple(multiples))
        while split.bytes > limit or split.vertices < preferred:
            options = []
            for i, m in enumerate(multiples):
                if m > 1:
                    trial = tuple(-(-m // 2) if j == i else x for j, x in enumerate(multiples))
                    if math.prod(-(-g // x) for g, x in zip(self.grid, trial)) <= tiles:
                        options.append((self.split(trial), i, trial))
            if not options:
                break
            split, _, best = min(options, key=lambda o: (o[0].bytes, o[1]))
            multiples = list(best)
        return split if split.bytes <= limit else None
