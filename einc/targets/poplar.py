"""The Poplar target: one `poplar::MultiVertex` codelet class per kernel, and the host-side
graph description (`einc_build_graph`) that connects and launches them.

    class kernel_y_1f3a9c2e : public poplar::MultiVertex {   // vertex type: name + IR digest
    public:
      poplar::Input<poplar::Vector<float>> x;
      poplar::InOut<poplar::Vector<float>> y;
      bool compute(unsigned workerId) {
        for (int gid = workerId; gid < 64; gid += 6) { ... }
        return true;
      }
    };
    #ifdef EINC_POPLAR_HOST
    EINC_POPLAR_VERTEX(kernel_y_1f3a9c2e, x, y)
    void einc_build_graph(poplar::Graph &graph, const std::vector<poplar::Tensor> &buffers,
                          poplar::program::Sequence &prog) { ... one compute set per kernel ... }
    #endif

A kernel's launch is a block of at most six workers (one MultiVertex; the grid is 1, and
`convert-affine-to-egpu` strides larger spaces over the workers: `for (point = gid; point <
P; point += 6)`); workers beyond the launch's block return at once.

Loops a schedule bound to work-item ids (`_work_items`): a kernel's blocks (block.x/y/z, any
grid) run one after another in every worker, `for (int einc_block = 0; einc_block < G;
++einc_block)`, and its threads (thread.x/y/z, at most six in all: the bind's and the
launch's thread limit) are the workers, `int einc_thread = (int)workerId;`, each id taken
from the linear `einc_block` / `einc_thread`. A kernel storing elements narrower than a
32-bit word runs its threads in turn in worker 0 (two workers writing neighbouring bytes of
one word race on the IPU). There is no shared memory to stage into (`shared_bytes_per_block`
is 0: a cache_read "shared" is refused by the mapping pass).

Tiles (`vertex_split`): when that point loop is the whole kernel and every buffer the kernel
writes is accessed, inside it, only at flat element `s * point + c` (the point's own
elements: a reduction's output element, with its accumulator reads), the points are cut into
contiguous ranges of `chunk` points, one vertex per range on its own tile (at most the
description's 1472 tiles), run by a loop in `einc_build_graph`:

    static const unsigned einc_first1_2[7] = {0, 0, 0, 1, 1, 2, 2};   // m's slices
    static const unsigned einc_end1_2[7] = {1, 1, 2, 2, 3, 3, 3};
    for (unsigned tile = 0; tile < 7; ++tile) {               // 7 vertices, tiles 0..6
      unsigned begin = tile * 43, end = std::min(begin + 43u, 300u);
      poplar::VertexRef v = graph.addVertex(cs1, "...", {{"x", buffers[0].flatten().slice(begin, end)},
          {"y", buffers[1].flatten().slice(begin, end)},
          {"m", buffers[2].flatten().slice(einc_first1_2[tile], einc_end1_2[tile])}});
      graph.setInitialValue(v["einc_begin"], begin);          // its points, and the first
      graph.setInitialValue(v["einc_end"], end);              // element of each slice
      graph.setInitialValue(v["einc_base0"], begin);
      graph.setInitialValue(v["einc_base1"], begin);
      graph.setInitialValue(v["einc_base2"], einc_first1_2[tile]);
      graph.setTileMapping(v, tile);
      graph.setTileMapping(buffers[1].flatten().slice(begin, end), tile);
    }

The codelet's loop runs `point` from `einc_begin + gid` to `einc_end`, and indexes a slice
as `y[index - einc_base1]`. Each vertex so owns whole output elements; for elements
narrower than the 32-bit write granule, `chunk` and `c` are multiples of the elements per
word (and s is 1), so two vertices never write one word. A read-only buffer whose loads have
indices the interval analysis bounds (`_Bounds`: the point, loops inside the point loop,
affine maps, integer arithmetic) is connected as the slice its range of points may read (a
linear function of `begin` / `end` when it is one, else a table per vertex, clipped to the
tensor: a guarded load's index may leave it where the guard is false); any other (a gather's
table) is connected whole. Any other kernel (stores outside the loop, accesses through
non-affine or inner-loop-dependent indices, vectors on written buffers) stays one vertex on
tile 0; every buffer element no split kernel writes is on tile 0. The IPU has no float64:
such programs are refused.

Tile memory (`vertex_bytes`): a vertex needs its fields (each slice or whole tensor, in
8-byte units), its plain fields and its workers' local arrays (`memref.alloca` in compute(),
one copy per worker) in its tile's `tile_memory` (624 KiB on a Mk2 IPU). A vertex gets at
least POINTS_PER_WORKER points per worker, unless its data do not fit: then the points are
cut into more vertices (a power of two or the most, up to one word's worth of points per
tile) until they fit; when none fits, or a kernel that cannot be split does not fit on one
tile, `emit` raises a TargetError naming the bytes and the limit before printing anything.
(The home tile of every tensor is tile 0; its memory is not checked.)
"""

from __future__ import annotations

import dataclasses
import hashlib
import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import ClassVar

import numpy as np
from xdsl.dialects import affine, arith, func, memref, scf
from xdsl.dialects.builtin import (
    IndexType,
    IntegerAttr,
    MemRefType,
    ModuleOp,
    StringAttr,
    f16,
    f32,
    i1,
    i8,
    i16,
    i32,
    i64,
)
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
from einc.errors import SourceLocation, TargetError
from einc.targets.clike import (  # pyright: ignore[reportPrivateUsage]
    ADD,
    MUL,
    Expr,
    _Writer,
    c_identifier,
)
from einc.targets.descriptions import ALL_DTYPES, TargetDescription
from einc.targets.gpu import DeviceTarget, Runner, host_buffers
from einc.targets.gpu import _index as _device_index  # pyright: ignore[reportPrivateUsage]

_READS = (affine.LoadOp, memref.LoadOp, egpu.LoadExtfOp, egpu.VLoadOp)
_WRITES = (affine.StoreOp, memref.StoreOp, egpu.StoreTruncfOp, egpu.VStoreOp)


def vertex_type(kernel: egpu.FuncOp) -> str:
    """The codelet class of a kernel: its name and a digest of its IR. Vertex types are
    global in a Poplar graph (and in the process running einc's mirror), so two programs'
    `kernel_output0` must not share one."""
    digest = hashlib.sha1(str(kernel).encode()).hexdigest()[:8]
    return f"{kernel.sym_name.data}_{digest}"


def _writes_narrow(kernel: egpu.FuncOp) -> bool:
    """Whether the kernel stores elements narrower than the IPU's 32-bit write granule into
    a buffer argument (two workers storing neighbouring bytes of one word would race)."""
    granule = PoplarTarget.limits.write_granule
    for arg in kernel.body.block.args:
        assert isinstance(arg.type, MemRefType)
        bits = max(arg.type.get_element_type().bitwidth, 8)  # type: ignore[attr-defined]
        if bits // 8 < granule and any(isinstance(u.operation, _WRITES) and u.index == 1 for u in arg.uses):
            return True
    return False


def _work_items(kernel: egpu.FuncOp) -> tuple[int, int, int, dict[str, Expr]] | None:
    """How a kernel's launch runs in one MultiVertex when it is not the plain form (one
    block of at most six threads along x, thread `workerId`): None for the plain form, else
    (blocks, threads, workers, spellings). The blocks run one after another in every worker
    (`einc_block`), the block's threads are spread over `workers` workers (`einc_thread`;
    one worker, the threads in turn, when the kernel stores elements narrower than a 32-bit
    word, which two workers must not write at once), and `spellings` gives each work-item
    index (`"block_id.y"`, ...) from `einc_block` and `einc_thread`."""
    grid, block = kernel.grid_size, kernel.block_size
    blocks, threads = math.prod(grid), math.prod(block)
    serial = threads > 1 and _writes_narrow(kernel)
    if blocks == 1 and block[1] == block[2] == 1 and not serial:
        return None
    workers = 1 if serial else threads
    spellings: dict[str, Expr] = {}
    for level, sizes, var in (("block_id", grid, "einc_block"), ("thread_id", block, "einc_thread")):
        below = 1
        for dim, size in zip("xyz", sizes):
            if size == 1:
                text, prec = "0", None
            elif below == 1 and size == math.prod(sizes):
                text, prec = var, None
            elif below == 1:
                text, prec = f"{var} % {size}", MUL
            elif below * size == math.prod(sizes):
                text, prec = f"{var} / {below}", MUL
            else:
                text, prec = f"{var} / {below} % {size}", MUL
            spellings[f"{level}.{dim}"] = Expr(text) if prec is None else Expr(text, prec)
            below *= size
    for dim, size in zip("xyz", block):
        b, t = spellings[f"block_id.{dim}"], spellings[f"thread_id.{dim}"]
        spellings[f"global_id.{dim}"] = Expr(f"{b.operand(MUL)} * {size} + {t.operand(ADD + 1)}", ADD)
    return blocks, threads, workers, spellings


def _poplar_index(w: _Writer, op: egpu.IndexOp) -> Expr:
    """A work-item index: the kernel's own spelling (`_work_items`), else the table's."""
    key = f"{op.name.removeprefix('egpu.')}.{op.dimension.value}"
    spellings = w.spellings if isinstance(w, _PoplarWriter) else {}
    return spellings[key] if key in spellings else _device_index(w, op)


def _field_kind(arg: SSAValue) -> str:
    written = any(isinstance(u.operation, _WRITES) and u.index == 1 for u in arg.uses)
    read = any(isinstance(u.operation, _READS) for u in arg.uses)
    if written:
        return "InOut" if read else "Output"
    return "Input"


# ---- spreading a kernel over tiles ------------------------------------------------------------


POINTS_PER_WORKER = 8
"""Fewest points a split gives each worker of a vertex when memory allows: a vertex's start
costs hundreds of cycles and each tile's inputs an exchange, so a tile is only worth taking
for several points per worker."""

FIELD_ALIGN = 8
"""Bytes a vertex's field occupies are counted in 8-byte units: the IPU loads 64 bits at a
time, and Poplar places vector edges on 8-byte boundaries."""


@dataclass(frozen=True)
class VertexSplit:
    """A kernel cut into vertices: vertex t runs points [t * chunk, min((t + 1) * chunk,
    points)) on tile t; `written` maps each written argument's position to (s, c), its
    accesses being at flat element s * point + c; `read` maps each read-only argument
    connected as a slice to the slice of every vertex, (first elements, end elements)."""

    loop: scf.ForOp
    points: int
    chunk: int
    written: dict[int, tuple[int, int]]
    read: dict[int, tuple[tuple[int, ...], tuple[int, ...]]]

    @property
    def vertices(self) -> int:
        return -(-self.points // self.chunk)

    @property
    def bases(self) -> list[int]:
        """The arguments indexed from their slice's first element (`einc_base<k>`)."""
        return sorted([*self.written, *self.read])


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


def _inside(op: Operation, loop: Operation) -> bool:
    parent = op.parent_op()
    while parent is not None and parent is not loop:
        parent = parent.parent_op()
    return parent is loop


# ---- the elements a vertex reads: intervals per point ------------------------------------------


class _Unknown(Exception):
    """An index the interval analysis cannot bound (a gather's loaded index, ...)."""


Interval = tuple[np.ndarray, np.ndarray]
"""Per point of the split loop: the least and the greatest value (inclusive)."""


def _mul(a: Interval, b: Interval) -> Interval:
    products = [a[0] * b[0], a[0] * b[1], a[1] * b[0], a[1] * b[1]]
    return np.minimum.reduce(products), np.maximum.reduce(products)


def _constant_divisor(b: Interval) -> int:
    if not (np.all(b[0] == b[1]) and np.all(b[0] > 0)) or len(np.unique(b[0])) != 1:
        raise _Unknown()
    return int(b[0][0])


def _floordiv(a: Interval, b: Interval) -> Interval:
    c = _constant_divisor(b)
    return np.floor_divide(a[0], c), np.floor_divide(a[1], c)


def _mod(a: Interval, b: Interval) -> Interval:
    """x mod c (c > 0, result in [0, c)): exact within one period, else [0, c - 1]."""
    c = _constant_divisor(b)
    same = np.floor_divide(a[0], c) == np.floor_divide(a[1], c)
    return np.where(same, np.mod(a[0], c), 0), np.where(same, np.mod(a[1], c), c - 1)


def _affine_interval(e: AffineExpr, values: list[Interval], dims: int) -> Interval:
    match e:
        case AffineConstantExpr(value=v):
            full = np.full_like(values[0][0], v) if values else np.array([v])
            return full, full
        case AffineDimExpr(position=p):
            return values[p]
        case AffineSymExpr(position=p):
            return values[dims + p]
        case AffineBinaryOpExpr(kind=kind, lhs=lhs, rhs=rhs):
            a, b = _affine_interval(lhs, values, dims), _affine_interval(rhs, values, dims)
            if kind == AffineBinaryOpKind.Add:
                return a[0] + b[0], a[1] + b[1]
            if kind == AffineBinaryOpKind.Mul:
                return _mul(a, b)
            if kind == AffineBinaryOpKind.FloorDiv:
                return _floordiv(a, b)
            if kind == AffineBinaryOpKind.CeilDiv:
                low, high = _floordiv((-a[1], -a[0]), b)
                return -high, -low
            return _mod(a, b)
    raise _Unknown()


def _map_intervals(m: AffineMap, operands: Sequence[SSAValue], bounds: _Bounds) -> list[Interval]:
    values = [bounds.of(o) for o in operands]
    return [_affine_interval(r, values, m.num_dims) for r in m.results]


class _Bounds:
    """Intervals of index values inside the split loop, per point: the point itself, the
    induction variables of loops inside it (from their bounds), constants, affine.apply /
    min and integer arithmetic on them. Raises _Unknown for anything else."""

    def __init__(self, loop: scf.ForOp, points: np.ndarray):
        self.loop = loop
        self.point = loop.body.block.args[0]
        self.points = points
        self.known: dict[SSAValue, Interval] = {}

    def of(self, v: SSAValue) -> Interval:
        if v not in self.known:
            self.known[v] = self._compute(v)
        return self.known[v]

    def _full(self, value: int) -> Interval:
        full = np.full_like(self.points, value)
        return full, full

    def _compute(self, v: SSAValue) -> Interval:
        if v is self.point:
            return self.points, self.points
        owner = v.owner
        if isinstance(owner, Block):
            parent = owner.parent_op()
            if parent is None or not _inside(parent, self.loop) or v is not owner.args[0]:
                raise _Unknown()
            if isinstance(parent, affine.ForOp):
                lows = _map_intervals(parent.lowerBoundMap.data, parent.lowerBoundOperands, self)
                highs = _map_intervals(parent.upperBoundMap.data, parent.upperBoundOperands, self)
                return np.maximum.reduce([lo for lo, _ in lows]), np.minimum.reduce([hi for _, hi in highs]) - 1
            if isinstance(parent, scf.ForOp):
                return self.of(parent.lb)[0], self.of(parent.ub)[1] - 1
            raise _Unknown()
        if isinstance(owner, arith.ConstantOp) and isinstance(owner.value, IntegerAttr):
            return self._full(owner.value.value.data)
        if isinstance(owner, egpu.IndexOp):
            low, high = owner.index_range()
            return np.full_like(self.points, low), np.full_like(self.points, high)
        if isinstance(owner, affine.ApplyOp):
            return _map_intervals(owner.map.data, owner.mapOperands, self)[0]
        if isinstance(owner, affine.MinOp):
            found = _map_intervals(owner.map.data, owner.operands, self)
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
                return a[0] + b[0], a[1] + b[1]
            if isinstance(owner, arith.SubiOp):
                return a[0] - b[1], a[1] - b[0]
            if isinstance(owner, arith.MuliOp):
                return _mul(a, b)
            if isinstance(owner, arith.MinSIOp):
                return np.minimum(a[0], b[0]), np.minimum(a[1], b[1])
            if isinstance(owner, arith.MaxSIOp):
                return np.maximum(a[0], b[0]), np.maximum(a[1], b[1])
            if isinstance(owner, arith.FloorDivSIOp) or np.all(a[0] >= 0):  # C division of x >= 0
                if isinstance(owner, arith.RemSIOp):
                    return _mod(a, b)
                return _floordiv(a, b)
            c = _constant_divisor(b)
            if isinstance(owner, arith.RemSIOp):
                return np.full_like(a[0], -(c - 1)), np.full_like(a[1], c - 1)
            truncate = lambda x: np.where(x >= 0, x // c, -(-x // c))  # noqa: E731
            return truncate(a[0]), truncate(a[1])
        raise _Unknown()


def _read_interval(op: Operation, bounds: _Bounds) -> Interval:
    """The flat elements a load may touch, per point (a vector load: all its lanes)."""
    if isinstance(op, affine.LoadOp):
        buffer, results = op.memref, _map_intervals(op.map.data, op.indices, bounds)
    elif isinstance(op, memref.LoadOp | egpu.VLoadOp):
        buffer, results = op.memref, [bounds.of(i) for i in op.indices]
    else:
        raise _Unknown()
    assert isinstance(buffer.type, MemRefType)
    low, high = np.zeros_like(bounds.points), np.zeros_like(bounds.points)
    for (lo, hi), size in zip(results, buffer.type.get_shape()):
        low, high = low * size + lo, high * size + hi
    if isinstance(op, egpu.VLoadOp):
        high = high + op.result.type.get_shape()[0] - 1  # type: ignore[attr-defined]
    return low, high


def _reads(kernel: egpu.FuncOp, loop: scf.ForOp, points: np.ndarray, written: set[int]) -> dict[int, Interval]:
    """Each read-only argument all of whose uses are loads the interval analysis bounds:
    the elements it may read, per point (unclipped: a guarded load's index may leave the
    tensor where the guard is false)."""
    bounds = _Bounds(loop, points)
    found: dict[int, Interval] = {}
    for k, arg in enumerate(kernel.body.block.args):
        if k in written or not arg.uses:
            continue
        try:
            intervals = [_read_interval(u.operation, bounds) for u in arg.uses if _inside(u.operation, loop)]
        except _Unknown:
            continue
        if len(intervals) != len(list(arg.uses)):
            continue
        found[k] = np.minimum.reduce([lo for lo, _ in intervals]), np.maximum.reduce([hi for _, hi in intervals])
    return found


# ---- tile memory ----------------------------------------------------------------------------------


def _elements(arg: SSAValue) -> int:
    assert isinstance(arg.type, MemRefType)
    return math.prod(arg.type.get_shape())


def _element_bytes(t: Attribute) -> int:
    assert isinstance(t, MemRefType)
    return max(t.get_element_type().bitwidth, 8) // 8  # type: ignore[attr-defined]


def _field_bytes(elements: np.ndarray | int, width: int) -> np.ndarray | int:
    return -(-(np.asarray(elements) * width) // FIELD_ALIGN) * FIELD_ALIGN


def _local_bytes(kernel: egpu.FuncOp) -> int:
    """The local arrays of a vertex's compute(): one copy per worker it uses."""
    workers = min(math.prod(kernel.block_size), 6)
    arrays = [op for op in kernel.walk() if isinstance(op, memref.AllocaOp | egpu.AllocSharedOp)]
    return workers * sum(int(_field_bytes(_elements(a.results[0]), _element_bytes(a.results[0].type))) for a in arrays)


def vertex_bytes(kernel: egpu.FuncOp, split: VertexSplit | None) -> int:
    """The most bytes of tile memory one of the kernel's vertices needs: its fields (each
    connected slice, or whole tensor, in FIELD_ALIGN units), its plain fields and its
    workers' local arrays."""
    args = kernel.body.block.args
    if split is None:
        fields = sum(int(_field_bytes(_elements(a), _element_bytes(a.type))) for a in args)
        return fields + _local_bytes(kernel)
    begins = np.arange(split.vertices, dtype=np.int64) * split.chunk
    ends = np.minimum(begins + split.chunk, split.points)
    total = np.zeros_like(begins) + _local_bytes(kernel) + 4 * (2 + len(split.bases))
    for k, a in enumerate(args):
        if k in split.written:
            s, _ = split.written[k]
            count: np.ndarray | int = s * (ends - 1 - begins) + 1
        elif k in split.read:
            first, end = split.read[k]
            count = np.array(end) - np.array(first)
        else:
            count = _elements(a)
        total = total + _field_bytes(count, _element_bytes(a.type))
    return int(total.max())


def _read_slices(
    reads: dict[int, Interval], kernel: egpu.FuncOp, points: int, chunk: int
) -> dict[int, tuple[tuple[int, ...], tuple[int, ...]]]:
    """Per read argument, every vertex's slice (first elements, end elements) for ranges of
    `chunk` points; an argument every vertex reads whole is left out (connected whole)."""
    begins = np.arange(-(-points // chunk), dtype=np.int64) * chunk
    found = {}
    for k, (low, high) in reads.items():
        size = _elements(kernel.body.block.args[k])
        first = np.clip(np.minimum.reduceat(low, begins), 0, size)
        end = np.clip(np.maximum.reduceat(high, begins) + 1, 0, size)
        end = np.maximum(end, first)
        if np.all(first == 0) and np.all(end == size):
            continue
        found[k] = tuple(int(x) for x in first), tuple(int(x) for x in end)
    return found


def _memory_error(kernel: egpu.FuncOp, needed: int, limit: int, tiles: int) -> TargetError:
    spread = f" spread over {tiles} tiles" if tiles > 1 else " on one tile"
    return TargetError(
        f"poplar target: kernel {kernel.sym_name.data} needs {needed} bytes of tile memory per "
        f"vertex{spread} (its inputs, outputs and local arrays), more than a tile's {limit} bytes",
        SourceLocation("<target>", 1, 1),
    )


def vertex_split(kernel: egpu.FuncOp) -> VertexSplit | None:
    """How `kernel` spreads over tiles (see the module docstring), or None to keep it one
    vertex on tile 0. Contract: with a split, every access to a written buffer lies in the
    point loop at s * point + c (checked at every point), so vertex t touches only elements
    [s * begin + c, s * (end - 1) + c] of it, disjoint from every other vertex's, and no two
    vertices write one 32-bit word; every load of a read-only buffer connected as a slice
    reads inside that vertex's slice. The vertex count is the preferred one (at least
    POINTS_PER_WORKER points per worker) or, when a vertex would need more tile memory than
    the description's `tile_memory`, the fewest that fit; TargetError when none does (or
    when an unsplit kernel's vertex does not fit)."""
    desc = PoplarTarget.limits
    legal = _split_points(kernel)
    if legal is None:
        needed = vertex_bytes(kernel, None)
        if needed > desc.tile_memory:
            raise _memory_error(kernel, needed, desc.tile_memory, 1)
        return None
    loop, total, written, words = legal
    points = np.arange(total, dtype=np.int64)
    reads = _reads(kernel, loop, points, set(written))
    block = kernel.block_size[0]
    preferred = min(desc.tiles, -(-total // (block * POINTS_PER_WORKER)))
    most = min(desc.tiles, -(-total // words))
    needed = 0
    candidates = sorted({preferred, most, *(v for v in (2**e for e in range(11)) if preferred < v < most)})
    for vertices in candidates:
        if vertices < 2:
            needed = vertex_bytes(kernel, None)
            if needed <= desc.tile_memory:
                return None
            continue
        chunk = -(-total // vertices)
        chunk = -(-chunk // words) * words
        split = VertexSplit(loop, total, chunk, written, _read_slices(reads, kernel, total, chunk))
        needed = vertex_bytes(kernel, split)
        if needed <= desc.tile_memory:
            return split
    raise _memory_error(kernel, needed, desc.tile_memory, max(candidates))


def _split_points(kernel: egpu.FuncOp) -> tuple[scf.ForOp, int, dict[int, tuple[int, int]], int] | None:
    """Whether the kernel may be split (its point loop, point count, written arguments'
    (s, c) and the points per 32-bit word of its narrowest written element), or None."""
    desc = PoplarTarget.limits
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
    written: dict[int, tuple[int, int]] = {}
    words = 1
    for k, arg in enumerate(kernel.body.block.args):
        users = [u.operation for u in arg.uses]
        if not any(isinstance(u.operation, _WRITES) and u.index == 1 for u in arg.uses):
            continue
        found: set[tuple[int, int]] = set()
        for user in users:
            flat = _flat_index(user, point, points) if _inside(user, loop) else None
            if flat is None:
                return None
            s, c = int(flat[1] - flat[0]), int(flat[0])
            if s < 1 or not np.array_equal(flat, s * points + c):
                return None
            found.add((s, c))
        if len(found) != 1:
            return None
        ((s, c),) = found
        width = _element_bytes(arg.type)
        if width < desc.write_granule:
            per_word = desc.write_granule // width
            if s != 1 or c % per_word:
                return None
            words = math.lcm(words, per_word)
        written[k] = (s, c)
    if not written:
        return None
    return loop, total, written, words


def _linear(s: int, c: int, var: str) -> str:
    """`s * var + c` as C, without unit factors and zero terms."""
    text = var if s == 1 else f"{var} * {s}"
    return text if c == 0 else f"{text} + {c}" if c > 0 else f"{text} - {-c}"


def _linear_slice(
    first: Sequence[int], end: Sequence[int], begins: list[int], stops: list[int]
) -> tuple[str, str] | None:
    """`first[t]` and `end[t]` as C of vertex t's point range `begin`, `end` (first = s *
    begin + a, end = s * end + b), when they are such functions; else None."""
    if len(begins) < 2 or (first[1] - first[0]) % (begins[1] - begins[0]):
        return None
    s = (first[1] - first[0]) // (begins[1] - begins[0])
    a, b = first[0] - s * begins[0], end[0] - s * stops[0]
    if s < 0 or any(f != s * x + a for f, x in zip(first, begins)) or any(e != s * x + b for e, x in zip(end, stops)):
        return None
    if s == 0:
        return str(a), str(b)
    return _linear(s, a, "begin"), _linear(s, b, "end")


def _plain_fields(split: VertexSplit | None) -> list[str]:
    """A split kernel's vertex fields besides its edges: its point range and the first
    element of each slice."""
    if split is None:
        return []
    return ["einc_begin", "einc_end", *(f"einc_base{k}" for k in split.bases)]


class _PoplarWriter(_Writer):
    """Indexes a split kernel's written slices from their first element."""

    split: VertexSplit | None = None
    bases: dict[SSAValue, str]
    spellings: dict[str, Expr]
    splits: dict[str, VertexSplit | None]
    """Every kernel's split, by name (computed once, before printing)."""

    def __init__(self, target: type[DeviceTarget]):
        super().__init__(target)
        self.bases = {}
        self.spellings = {}
        self.splits = {}

    def statement(self, op: Operation) -> None:
        """The split point loop runs over the vertex's own points."""
        if self.split is None or op is not self.split.loop:
            super().statement(op)
            return
        loop = self.split.loop
        step = loop.step.owner.value.value.data  # type: ignore[union-attr]
        lower = Expr(f"einc_begin + {self.value(loop.lb).operand(ADD + 1)}", ADD)
        self.for_loop(loop.body.block.args[0], lower, Expr("einc_end"), step, loop.body.block)

    def access(self, buffer: SSAValue, index: Expr) -> str:
        base = self.bases.get(buffer)
        if base is None:
            return super().access(buffer, index)
        return f"{self.value(buffer).text}[{index.operand(ADD)} - {base}]"


class PoplarTarget(DeviceTarget):
    name: ClassVar[str] = "poplar"
    pipeline: ClassVar[str] = (
        "convert-ein-to-affine,legalize-f16-for-c,legalize-float-to-int,"
        "convert-affine-to-egpu{target=poplar},"
        "legalize-storage-dtypes{target=poplar},einc-vectorize-loops{target=poplar},canonicalize,cse"
    )
    limits = TargetDescription(
        "poplar", max_threads_per_block=6, max_block=(6, 6, 6),
        max_grid=(1, 1, 1), shared_bytes_per_block=0,
        subgroup_size=1, vector_width=2, default_block=6,
        storage_dtypes=ALL_DTYPES - {"float64"},
        arith_dtypes=ALL_DTYPES - {"float64", "float16"}, write_granule=4, tiles=1472,
        tile_memory=624 * 1024, dtype_notes=(("float64", "the IPU has no double precision"),),
    )  # fmt: skip
    includes: ClassVar[tuple[str, ...]] = ("poplar/Vertex.hpp", "cmath")
    index_type: ClassVar[str] = "int"
    private_array: ClassVar[str] = "{t} {name}[{n}];"
    """A local array of compute() is on the worker's own stack (one copy per worker, counted
    in the vertex's tile memory by `vertex_bytes`)."""
    helper_prefix: ClassVar[str] = "static inline"
    reserved_words = frozenset({
        "workerId", "compute", "poplar", "half", "buffers", "graph", "prog", "einc_block",
        "einc_thread", "einc_begin", "einc_end",
    })  # fmt: skip
    work_item_index = {
        "global_id.x": "(int)workerId", "thread_id.x": "(int)workerId", "block_id.x": "0",
    }  # fmt: skip
    types = {
        f32: "float", f16: "half", i64: "long long", i32: "int", i16: "short",
        i8: "signed char", i1: "bool", IndexType(): "int",
    }  # fmt: skip
    unsigned_types = {
        i64: "unsigned long long", i32: "unsigned", i16: "unsigned short", i8: "unsigned char",
        i1: "bool", IndexType(): "unsigned",
    }  # fmt: skip
    math_suffix = {f32: "f"}
    literal_cast = {f16: "(half)"}
    literal_names = {
        "INT64_MIN": "(-9223372036854775807LL - 1)", "INT64_MAX": "9223372036854775807LL",
        "INT32_MIN": "(-2147483647 - 1)", "INT32_MAX": "2147483647",
        "INT16_MIN": "(-32767 - 1)", "INT16_MAX": "32767", "INT8_MIN": "(-127 - 1)",
    }  # fmt: skip

    expression_printers = {
        **DeviceTarget.expression_printers,
        **{op: _poplar_index for op in (egpu.BlockIdOp, egpu.ThreadIdOp, egpu.GlobalIdOp)},
    }  # type: ignore[assignment]

    @classmethod
    def description(cls) -> TargetDescription:
        """The Poplar description, except that a launch may have any grid: a kernel's
        blocks (from loops a schedule bound to block ids) run one after another in its
        vertex. The mapping pass reads `PoplarTarget.limits` itself, whose grid of one
        block keeps the unscheduled mapping a single point loop that `vertex_split`
        spreads over tiles."""
        return dataclasses.replace(cls.limits, max_grid=(2**31 - 1,) * 3)

    @classmethod
    def top_level(cls, w: _Writer, op: Operation) -> None:
        if isinstance(op, func.FuncOp):
            return  # the host part is printed after the last codelet
        if not isinstance(op, egpu.FuncOp):
            super().top_level(w, op)
            return
        cls.codelet(w, op)
        if op.next_op is None:
            module = op.parent_op()
            assert isinstance(module, ModuleOp)
            cls.graph(w, module)

    @classmethod
    def codelet(cls, w: _Writer, kernel: egpu.FuncOp) -> None:
        if w.lines:
            w.line("")
        attrs = kernel.arg_attrs.data if kernel.arg_attrs is not None else ()
        w.buffer_names = {
            c_identifier(name.data)
            for a in attrs
            if isinstance(name := a.data.get("ein.name"), StringAttr)
        }
        w.scopes.append(set())
        fields = []
        for k, arg in enumerate(kernel.body.block.args):
            hint = attrs[k].data.get("ein.name") if k < len(attrs) else None
            name = w.declare(arg, getattr(hint, "data", None), buffer=True)
            element = w.ctype(arg.type.get_element_type())  # type: ignore[union-attr]
            fields.append(f"poplar::{_field_kind(arg)}<poplar::Vector<{element}>> {name};")
        split = w.splits[kernel.sym_name.data] if isinstance(w, _PoplarWriter) else vertex_split(kernel)
        if isinstance(w, _PoplarWriter):
            w.split = split
            w.bases = {}
            if split is not None:
                args = kernel.body.block.args
                w.bases = {args[k]: f"einc_base{k}" for k in split.bases}
        fields += [f"int {field};" for field in _plain_fields(split)]
        w.line(f"class {vertex_type(kernel)} : public poplar::MultiVertex {{")
        w.line("public:")
        w.depth += 1
        for field in fields:
            w.line(field)
        w.open("bool compute(unsigned workerId)")
        work = _work_items(kernel)
        if work is None:
            block = kernel.block_size[0]
            if block < 6:
                w.line(f"if (workerId >= {block}) return true;")
            w.block(kernel.body.block)
        else:
            blocks, threads, workers, spellings = work
            if isinstance(w, _PoplarWriter):
                w.spellings = spellings
            if workers < 6:
                w.line(f"if (workerId >= {workers}) return true;")
            depth = w.depth
            if blocks > 1:
                w.open(f"for (int einc_block = 0; einc_block < {blocks}; ++einc_block)")
            if workers < threads:
                w.open(f"for (int einc_thread = 0; einc_thread < {threads}; ++einc_thread)")
            elif threads > 1:
                w.line("int einc_thread = (int)workerId;")
            w.block(kernel.body.block)
            while w.depth > depth:
                w.close()
        w.line("return true;")
        w.close()
        w.depth -= 1
        w.line("};")
        w.scopes.pop()
        if isinstance(w, _PoplarWriter):
            w.split = None
            w.bases = {}
            w.spellings = {}

    @classmethod
    def graph(cls, w: _Writer, module: ModuleOp) -> None:
        """`einc_build_graph`: every buffer on tile 0, then a compute set per kernel with one
        vertex on tile 0, or one vertex per tile for a split kernel, its written slices
        mapped to its tile."""
        index = {id(value): k for k, (value, _) in enumerate(host_buffers(module))}
        kernels = {k.sym_name.data: k for k in module.ops if isinstance(k, egpu.FuncOp)}
        launches = [op for op in module.walk() if isinstance(op, egpu.LaunchOp)]
        splits = w.splits if isinstance(w, _PoplarWriter) else {n: vertex_split(k) for n, k in kernels.items()}
        w.line("")
        w.line("#ifdef EINC_POPLAR_HOST")
        w.line("#include <algorithm>")
        w.line("#include <poplar/Graph.hpp>")
        w.line("#include <poplar/Program.hpp>")
        w.line("")
        for name, kernel in kernels.items():
            fields = [w.names[a] for a in kernel.body.block.args] + _plain_fields(splits[name])
            w.line(f"EINC_POPLAR_VERTEX({vertex_type(kernel)}, {', '.join(fields)})")
        w.line("")
        w.open(
            "void einc_build_graph(poplar::Graph &graph, const std::vector<poplar::Tensor> "
            "&buffers, poplar::program::Sequence &prog)"
        )
        w.line("for (const poplar::Tensor &buffer : buffers) graph.setTileMapping(buffer, 0);")
        for k, launch in enumerate(launches):
            name = launch.callee.string_value()
            kernel, split = kernels[name], splits[name]
            args = kernel.body.block.args
            tensors = {
                pos: f"buffers[{index[id(buffer)]}].flatten()"
                for pos, buffer in enumerate(launch.buffers)
            }
            w.line(f'poplar::ComputeSet cs{k} = graph.addComputeSet("{name}");')
            vertex = vertex_type(kernel)
            if split is None:
                edges = ", ".join(f'{{"{w.names[a]}", {tensors[p]}}}' for p, a in enumerate(args))
                w.line(f'poplar::VertexRef v{k} = graph.addVertex(cs{k}, "{vertex}", {{{edges}}});')
                w.line(f"graph.setTileMapping(v{k}, 0);")
            else:
                cls.split_vertices(w, k, vertex, split, [w.names[a] for a in args], tensors)
            w.line(f"prog.add(poplar::program::Execute(cs{k}));")
        w.close()
        w.line("#endif  // EINC_POPLAR_HOST")

    @staticmethod
    def split_vertices(
        w: _Writer, k: int, vertex: str, split: VertexSplit, fields: list[str],
        tensors: dict[int, str],
    ) -> None:  # fmt: skip
        """The loop adding compute set `cs<k>`'s vertices, one per tile: written slices
        at s * point + c, read slices from `split.read` (a linear function of the range
        when it is one, else a table per vertex)."""
        firsts: dict[int, str] = {pos: _linear(s, c, "begin") for pos, (s, c) in split.written.items()}
        ends: dict[int, str] = {pos: _linear(s, c + 1 - s, "end") for pos, (s, c) in split.written.items()}
        begins = [t * split.chunk for t in range(split.vertices)]
        stops = [min(b + split.chunk, split.points) for b in begins]
        for pos, (first, end) in split.read.items():
            linear = _linear_slice(first, end, begins, stops)
            if linear is not None:
                firsts[pos], ends[pos] = linear
                continue
            for name, values in (("first", first), ("end", end)):
                table = ", ".join(str(x) for x in values)
                w.line(f"static const unsigned einc_{name}{k}_{pos}[{split.vertices}] = {{{table}}};")
            firsts[pos], ends[pos] = f"einc_first{k}_{pos}[tile]", f"einc_end{k}_{pos}[tile]"
        slices = {pos: f"{tensors[pos]}.slice({firsts[pos]}, {ends[pos]})" for pos in firsts}
        w.open(f"for (unsigned tile = 0; tile < {split.vertices}; ++tile)")
        w.line(f"unsigned begin = tile * {split.chunk}, end = std::min(begin + {split.chunk}u, {split.points}u);")
        edges = ", ".join(
            f'{{"{name}", {slices.get(pos, tensors[pos])}}}' for pos, name in enumerate(fields)
        )
        w.line(f'poplar::VertexRef v = graph.addVertex(cs{k}, "{vertex}", {{{edges}}});')
        w.line('graph.setInitialValue(v["einc_begin"], begin);')
        w.line('graph.setInitialValue(v["einc_end"], end);')
        for pos in split.bases:
            w.line(f'graph.setInitialValue(v["einc_base{pos}"], {firsts[pos]});')
        w.line("graph.setTileMapping(v, tile);")
        for pos in split.written:
            w.line(f"graph.setTileMapping({slices[pos]}, tile);")
        w.close()

    @classmethod
    def emit(cls, module: ModuleOp) -> str:
        """Refuses impossible launches and vertices over a tile's memory before printing."""
        cls.manifest(module)
        w = _PoplarWriter(cls)
        w.splits = {k.sym_name.data: vertex_split(k) for k in module.ops if isinstance(k, egpu.FuncOp)}
        return w.module(module)

    @classmethod
    def build(cls, source: str, module: ModuleOp) -> Runner:
        from einc.runtime.poplar import load_poplar_kernel

        return load_poplar_kernel(source, cls.manifest(module))


__all__ = ["PoplarTarget"]
