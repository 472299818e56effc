"""Buffers and the work-items that access them: bounds-checked gathers and scatters for every
lane at once, per-block shared memory, per-work-item private memory, and a race detector.

`Grid` is one launch's work-items: lane `l` is work-item `l % B` (linear thread id, x
fastest) of block `l // B` (linear block id), B the work-items of a block. Between two
barriers (an *epoch*) the work-items of a block may run in any order, and blocks run in any
order always, so an element one work-item writes and another reads or writes in the same
epoch (or from another block, in the same launch) is a data race: the program's result
depends on the schedule. The interpreter runs the lanes in lock-step, which hides such
races, so every access of a global or shared buffer inside a kernel is checked against the
last writer and readers of each element, and a race raises KernelFault naming both
work-items: a missing barrier is reported even where lock-step happens to give the right
numbers. (Readers are tracked per element and epoch as one work-item or "several"; a
write after reads by another block in an earlier epoch is not detected.)
"""

from __future__ import annotations

import copy
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np
from xdsl.dialects.builtin import IntegerAttr
from xdsl.ir import Operation
from xdsl.utils.exceptions import InterpretationError

from einc.ir.attrs import ALIGN_ATTR
from einc.semantics.egpu.values import Lanes


class KernelFault(InterpretationError):
    """A fault of the executed program (a compiler bug when the compiler made the program):
    an out-of-bounds access, a data race, a barrier or subgroup operation not reached by
    every work-item that must reach it, a write to an input."""


class DataRace(KernelFault):
    """Two work-items access one element, one of them writing, with no barrier between."""


@dataclass
class Grid:
    """The work-items of one launch (or of the host code: one lane, no kernel)."""

    kernel: str | None
    grid: tuple[int, int, int] = (1, 1, 1)
    block: tuple[int, int, int] = (1, 1, 1)
    epoch: int = 0
    launch: int = 0
    vertex_of_block: bool = False
    """Poplar: a block is a vertex (tile), its work-items the vertex's workers."""
    nest: tuple[tuple[str, int], ...] = ()
    """Host loops run as lanes (machine.py, `parallel_nest`): (name, trip count) per loop,
    outermost first; lane l is the iteration whose indices are l in row-major order."""
    origin: np.ndarray | None = None
    """A kernel's loop run as lanes (expand.py): the work-item (lane of the launch) of each
    lane; None where lanes are work-items."""
    expansion: int = 0
    """Which expansion these lanes are (0: none): the stamp of its second race detector."""

    def __post_init__(self) -> None:
        self.per_block = int(np.prod(self.block))
        self.blocks = int(np.prod(self.grid))
        self.lanes = self.per_block * self.blocks
        lane = np.arange(self.lanes, dtype=np.int64)
        self.lane = lane
        self.block_of = lane // self.per_block
        thread = lane % self.per_block
        bx, by, _ = self.block
        gx, gy, _ = self.grid
        self.thread_linear = thread
        self.thread_id = (thread % bx, (thread // bx) % by, thread // (bx * by))
        b = self.block_of
        self.block_id = (b % gx, (b // gx) % gy, b // (gx * gy))
        self.global_id = tuple(self.block_id[d] * self.block[d] + self.thread_id[d] for d in range(3))

    def expanded(self, lane_map: np.ndarray, stamp: int) -> Grid:
        """These lanes' work-items, lane `k` of the result being lane `lane_map[k]` here."""
        g = copy.copy(self)
        g.origin = self.items(lane_map)
        g.expansion = stamp
        g.lanes = len(lane_map)
        g.lane = np.arange(g.lanes, dtype=np.int64)
        g.block_of = self.block_of[lane_map]
        g.thread_linear = self.thread_linear[lane_map]
        g.thread_id = tuple(a[lane_map] for a in self.thread_id)
        g.block_id = tuple(a[lane_map] for a in self.block_id)
        g.global_id = tuple(a[lane_map] for a in self.global_id)
        return g

    def items(self, act: np.ndarray) -> np.ndarray:
        """The work-items (lanes of the launch) of lanes `act`."""
        return act if self.origin is None else self.origin[act]

    def describe(self, lane: int) -> str:
        if self.kernel is None:
            return "the host code"
        if self.nest:
            index = np.unravel_index(lane, [n for _, n in self.nest])
            return "iteration " + ", ".join(f"{name}={int(i)}" for (name, _), i in zip(self.nest, index))
        t = tuple(int(self.thread_id[d][lane]) for d in range(3))
        b = tuple(int(self.block_id[d][lane]) for d in range(3))
        unit = "vertex" if self.vertex_of_block else "block"
        return f"work-item {list(t)} of {unit} {list(b)} of kernel {self.kernel}"

    def active(self, mask: Lanes | None) -> np.ndarray:
        return self.lane if mask is None else np.flatnonzero(mask)


@dataclass
class Window:
    """Poplar: the flat elements each lane's vertex may access: [lo, hi), at `stride *
    point + offset` (stride 1, offset 0 for a read slice)."""

    lo: np.ndarray
    hi: np.ndarray
    stride: int = 1
    offset: int = 0
    what: str = "slice"


@dataclass
class Buffer:
    """A memref's storage. `per` is how many copies exist: one ("" : a global or host
    buffer), one per block ("block": shared memory) or one per work-item ("lane": private
    memory); the copies are the leading axis of `data`."""

    data: np.ndarray
    name: str
    per: str = ""
    stamp: int = 0
    """For a private buffer: the expansion whose lanes own it (0: the launch's work-items)."""
    readonly: bool = False
    window: Window | None = None
    _track_launch: int = -1
    _writer: np.ndarray = field(default_factory=lambda: np.empty(0, np.int64))
    _wepoch: np.ndarray = field(default_factory=lambda: np.empty(0, np.int64))
    _reader: np.ndarray = field(default_factory=lambda: np.empty(0, np.int64))
    _repoch: np.ndarray = field(default_factory=lambda: np.empty(0, np.int64))
    _x_stamp: int = 0
    _x_writer: np.ndarray = field(default_factory=lambda: np.empty(0, np.int64))
    _x_reader: np.ndarray = field(default_factory=lambda: np.empty(0, np.int64))

    @property
    def shape(self) -> tuple[int, ...]:
        return tuple(self.data.shape[1:] if self.per else self.data.shape)

    # ---- indexing --------------------------------------------------------------------------

    def _flat(
        self, grid: Grid, op: Operation, index: Sequence[Lanes], act: np.ndarray, width: int
    ) -> np.ndarray:
        """The flat element of each active lane's access (bounds-checked), copies included."""
        shape = self.shape
        if len(index) != len(shape):
            raise KernelFault(f"{op.name}: {len(index)} indices into a buffer of rank {len(shape)}")
        size = self.data.size // self.data.shape[0] if self.per else self.data.size
        if all(np.ndim(i) == 0 for i in index):  # the same element for every lane
            where = [int(i) for i in index]
            if any(not 0 <= i < d for i, d in zip(where, shape)) or (
                width > 1 and int(np.ravel_multi_index(where, shape)) + width > size
            ):
                span = f" (a vector of {width})" if width > 1 else ""
                raise KernelFault(
                    f"out-of-bounds access in {op.name} by {grid.describe(int(act[0]))}: index "
                    f"{where}{span} into buffer '{self.name}' of shape {list(shape)}"
                )
            at = int(np.ravel_multi_index(where, shape)) if shape else 0
            flat = np.full(act.shape, at, np.int64)
        else:
            flat = np.zeros(act.shape, np.int64)
            bad = np.zeros(act.shape, np.bool_)
            for i, d in zip(index, shape):
                i = np.asarray(i, np.int64)
                i = i[act] if i.ndim else i
                bad |= (i < 0) | (i >= d)
                flat = flat * d + i
            if width > 1:
                bad |= flat + width > size
            if bad.any():
                k = int(np.argmax(bad))
                where = [int(np.asarray(i)[act[k]] if np.ndim(i) else i) for i in index]
                span = f" (a vector of {width})" if width > 1 else ""
                raise KernelFault(
                    f"out-of-bounds access in {op.name} by {grid.describe(int(act[k]))}: index "
                    f"{where}{span} into buffer '{self.name}' of shape {list(shape)}"
                )
        if self.window is not None:
            self._check_window(grid, op, flat, act, width)
        align = op.attributes.get(ALIGN_ATTR)
        if isinstance(align, IntegerAttr) and flat.size:
            misaligned = (flat * self.data.dtype.itemsize) % align.value.data != 0
            if misaligned.any():
                k = int(np.argmax(misaligned))
                raise KernelFault(
                    f"misaligned vector access in {op.name} by {grid.describe(int(act[k]))}: element "
                    f"{int(flat[k])} of buffer '{self.name}' is not at a multiple of the "
                    f"{align.value.data} bytes the op claims ({ALIGN_ATTR})"
                )
        if self.per == "lane":
            flat = flat + (act if self.stamp == grid.expansion else grid.items(act)) * size
        elif self.per == "block":
            flat = flat + grid.block_of[act] * size
        return flat

    def _check_window(self, grid: Grid, op: Operation, flat: np.ndarray, act: np.ndarray, width: int) -> None:
        w = self.window
        assert w is not None
        lo, hi = w.lo[grid.items(act)], w.hi[grid.items(act)]
        bad = (flat < lo) | (flat + width > hi) | ((flat - w.offset) % w.stride != 0)
        if bad.any():
            k = int(np.argmax(bad))
            raise KernelFault(
                f"{op.name} by {grid.describe(int(act[k]))} accesses element {int(flat[k])} of "
                f"'{self.name}', outside its vertex's {w.what} [{int(lo[k])}, {int(hi[k])})"
                + (f" at {w.stride} * point + {w.offset}" if w.stride != 1 or w.offset else "")
            )

    # ---- the race detector -------------------------------------------------------------------

    def _tracking(self, grid: Grid) -> bool:
        if grid.kernel is None or self.per == "lane" or self.readonly:
            return False
        if self._track_launch != grid.launch:
            n = self.data.size
            self._writer = np.full(n, -1, np.int64)
            self._wepoch = np.full(n, -1, np.int64)
            self._reader = np.full(n, -1, np.int64)
            self._repoch = np.full(n, -1, np.int64)
            self._track_launch = grid.launch
        return True

    def _race(self, grid: Grid, op: Operation, flat: np.ndarray, items: np.ndarray,
              other: np.ndarray, conflict: np.ndarray, what: str) -> DataRace:  # fmt: skip
        k = int(np.argmax(conflict))
        o = int(other[k])
        them = grid.describe(o) if o >= 0 else "other work-items"
        return DataRace(
            f"data race on buffer '{self.name}' (element {int(flat[k]) % max(1, int(np.prod(self.shape)))}): "
            f"{op.name} by {grid.describe(int(items[k]))} {what} {them} with no barrier between "
            "(or from another block)"
        )

    def _expansion_check(self, grid: Grid, op: Operation, flat: np.ndarray, act: np.ndarray, write: bool) -> None:
        """Within a loop run as lanes (expand.py): an element two of its lanes touch, one
        writing, is a dependence between iterations (a DataRace the expansion catches)."""
        if grid.expansion == 0 or self.readonly or (self.per == "lane" and self.stamp == grid.expansion):
            return
        if self._x_stamp != grid.expansion:
            self._x_writer = np.full(self.data.size, -1, np.int64)
            self._x_reader = np.full(self.data.size, -1, np.int64)
            self._x_stamp = grid.expansion
        w = self._x_writer[flat]
        conflict = (w >= 0) & (w != act)
        if write:
            r = self._x_reader[flat]
            conflict |= (r != -1) & (r != act)
        if conflict.any():
            raise DataRace(f"{op.name}: iterations of a loop run as lanes touch one element of '{self.name}'")
        if write:
            self._x_writer[flat] = act
            if (self._x_writer[flat] != act).any():
                raise DataRace(f"{op.name}: iterations of a loop run as lanes write one element of '{self.name}'")
        else:
            previous = self._x_reader[flat]
            self._x_reader[flat] = act
            several = (self._x_reader[flat] != act) | ((previous != -1) & (previous != act))
            self._x_reader[flat[several]] = -2

    def _check_read(self, grid: Grid, op: Operation, flat: np.ndarray, items: np.ndarray) -> None:
        w = self._writer[flat]
        conflict = (w >= 0) & (w != items) & (
            (self._wepoch[flat] == grid.epoch) | (w // grid.per_block != items // grid.per_block)
        )
        if conflict.any():
            raise self._race(grid, op, flat, items, w, conflict, "reads an element written by")
        previous = np.where(self._repoch[flat] == grid.epoch, self._reader[flat], -1)
        self._reader[flat] = items
        self._repoch[flat] = grid.epoch
        several = (self._reader[flat] != items) | ((previous != -1) & (previous != items))
        self._reader[flat[several]] = -2

    def _check_write(self, grid: Grid, op: Operation, flat: np.ndarray, items: np.ndarray) -> None:
        w = self._writer[flat]
        conflict = (w >= 0) & (w != items) & (
            (self._wepoch[flat] == grid.epoch) | (w // grid.per_block != items // grid.per_block)
        )
        if conflict.any():
            raise self._race(grid, op, flat, items, w, conflict, "overwrites an element written by")
        r = self._reader[flat]
        conflict = (self._repoch[flat] == grid.epoch) & (r != -1) & (r != items)
        if conflict.any():
            raise self._race(grid, op, flat, items, r, conflict, "overwrites an element read by")
        self._writer[flat] = items
        self._wepoch[flat] = grid.epoch
        clash = self._writer[flat] != items
        if clash.any():
            raise self._race(grid, op, flat, items, self._writer[flat], clash, "writes the element also written by")

    # ---- access ------------------------------------------------------------------------------

    def load(self, grid: Grid, op: Operation, index: Sequence[Lanes], mask: Lanes | None, width: int = 1) -> Lanes:
        if grid.kernel is None:
            return self._host_load(op, index, width)
        act = grid.active(mask)
        flat = self._flat(grid, op, index, act, width)
        if width > 1:
            flat = flat[:, None] + np.arange(width)
        if self._tracking(grid):
            self._check_read(grid, op, flat.reshape(-1), np.repeat(grid.items(act), width))
        if grid.expansion:
            self._expansion_check(grid, op, flat.reshape(-1), np.repeat(act, width), write=False)
        values = self.data.reshape(-1)[flat]
        out = np.zeros((grid.lanes, *values.shape[1:]), self.data.dtype)
        out[act] = values
        return out

    def store(self, grid: Grid, op: Operation, index: Sequence[Lanes], value: Lanes, mask: Lanes | None, width: int = 1) -> None:
        if self.readonly:
            raise KernelFault(f"{op.name} writes the input buffer '{self.name}'")
        if grid.kernel is None:
            self._host_store(op, index, value, width)
            return
        act = grid.active(mask)
        flat = self._flat(grid, op, index, act, width)
        v = np.asarray(value, self.data.dtype)
        lane_valued = v.ndim > (1 if width > 1 else 0)
        if width > 1:
            flat = flat[:, None] + np.arange(width)
        v = v[act] if lane_valued else np.broadcast_to(v, flat.shape)
        if self._tracking(grid):
            self._check_write(grid, op, flat.reshape(-1), np.repeat(grid.items(act), width))
        if grid.expansion:
            self._expansion_check(grid, op, flat.reshape(-1), np.repeat(act, width), write=True)
        self.data.reshape(-1)[flat] = v

    def _host_index(self, op: Operation, index: Sequence[Lanes], width: int) -> tuple[int, ...]:
        where = tuple(map(int, index))
        shape = self.data.shape
        if len(where) != len(shape) or any(not 0 <= i < d for i, d in zip(where, shape)) or (
            width > 1 and int(np.ravel_multi_index(where, shape)) + width > self.data.size
        ):
            span = f" (a vector of {width})" if width > 1 else ""
            raise KernelFault(
                f"out-of-bounds access in {op.name}: index {list(where)}{span} into buffer "
                f"'{self.name}' of shape {list(shape)}"
            )
        return where

    def _host_load(self, op: Operation, index: Sequence[Lanes], width: int) -> Lanes:
        if width == 1:
            where = tuple(map(int, index))
            if len(where) == self.data.ndim and (not where or min(where) >= 0):
                try:
                    return self.data[where]
                except IndexError:
                    pass
            self._host_index(op, index, width)
        where = self._host_index(op, index, width)
        start = int(np.ravel_multi_index(where, self.shape))
        return self.data.reshape(-1)[start : start + width].copy()

    def _host_store(self, op: Operation, index: Sequence[Lanes], value: Lanes, width: int) -> None:
        if width == 1:
            where = tuple(map(int, index))
            if len(where) == self.data.ndim and (not where or min(where) >= 0):
                try:
                    self.data[where] = value
                    return
                except IndexError:
                    pass
            self._host_index(op, index, width)
        where = self._host_index(op, index, width)
        start = int(np.ravel_multi_index(where, self.shape))
        self.data.reshape(-1)[start : start + width] = value
