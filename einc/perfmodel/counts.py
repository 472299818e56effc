"""What one lowered kernel (`egpu.func`) does, counted from its IR without running it:
floating-point operations, warp instructions, global memory sectors (coalescing), shared
memory wavefronts (bank conflicts), local memory and barriers.

The kernel is walked as warps execute it. A sample of warps (along each work-group dimension
the first, a middle and the last work-group, the middle one standing for all the others; in
each, every warp, or the first, a middle and the last where that would be over 256 warps) runs
side by side, one row of lanes per sampled warp, each row weighted by the
warps it stands for. Index values (work-item ids, loop variables, `affine.apply`, integer
`arith`) are evaluated per lane; float values are not needed. A loop runs a sample of its
iterations per row in the same way: all of them up to 4, else its first, a middle and its
last iteration (weighted 1, n - 2, 1), and a single middle one once the nest holds more than
512 sampled paths. Control flow masks lanes (`scf.if` on index comparisons, loops whose
bounds differ per lane). So counts are exact where every middle iteration, block and warp
does the same work as the sampled one (the kernels of the default schedules, tiles that
divide their loops), and estimates otherwise.

Per warp access:
- global memory: the 32-byte sectors (`sector_bytes`) the active lanes' bytes touch: a
  unit-stride access across lanes touches lanes x size / 32 sectors, a strided one one per
  lane. A load or store whose address does not change in an enclosing loop and that no other
  access to its buffer in that loop may alias (a scalar accumulator) is counted once per
  execution of that loop, as the compilers keep it in a register; a load repeated in one block
  with no store or barrier in between is counted once (common subexpressions).
- shared memory: 32 banks of 4 bytes; a request takes as many wavefronts as the most distinct
  words any bank holds (lanes reading one word share it); the excess over the distinct words /
  32 is the bank conflicts.
- local arrays (`memref.alloca`): registers where every index is a constant (unrolled loops),
  else local memory (one coalesced access per warp access).
FLOPs: one per float arithmetic op (add, sub, mul, div, min, max, compare, negate) and math
function per lane (an fma two), by width; a `subgroup_reduce` log2(cluster) per lane.
Instructions: one per data op (index arithmetic is left out: the compilers hoist and
strength-reduce it), a multiply feeding one add fused with it, four per math function.
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field

import numpy as np
from xdsl.dialects import affine, arith, memref, scf
from xdsl.dialects import math as xmath
from xdsl.dialects.builtin import AnyFloat, IndexType, IntegerAttr, IntegerType, MemRefType, VectorType
from xdsl.ir import Attribute, Block, BlockArgument, Operation, Region, SSAValue
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
from einc.dialects.egpu_mma import FRAGMENT, MmaOp
from einc.ir.attrs import NAME_ATTR

Lanes = np.ndarray
"""Per lane values: int64 of shape (rows, warp)."""

FULL_LOOP = 4
"""Loops of at most this many iterations run every iteration."""
PATH_BUDGET = 512
ROW_BUDGET = 256
SLP_BITS = 256
"""The widest vector the SLP vectorizer packs a work-item's scalar ops into on the CPU devices:
LLVM's preferred vector width on its AVX-512 targets (PoCL builds for `skylake-avx512`, which
prefers 256-bit vectors), 8 float32 lanes. On Zen 4, PoCL's register-tiled MatMul 512^3 runs
at 131 GFLOP/s, beyond the 4-wide packing of its `vload4` elements (58 GFLOP/s, the model's
compute roofline before store runs were counted)."""
"""Every warp of a sampled work-group runs (a tail work-group's guards cut between its warps)
while the sampled warps stay within this many; else its first, a middle and its last."""
"""Sampled paths through a loop nest before deeper loops run one middle iteration."""


@dataclass
class BufferTraffic:
    """Global memory traffic of one buffer in one kernel (weighted warp accesses)."""

    bytes: int
    """The buffer's size."""
    load_sectors: float = 0.0
    store_sectors: float = 0.0


@dataclass
class KernelCounts:
    name: str
    grid: tuple[int, int, int]
    block: tuple[int, int, int]
    warp: int
    spread: int
    """Work-groups the kernel's work is spread over (the grid; a Poplar kernel's vertices)."""
    flops: dict[int, float] = field(default_factory=dict[int, float])
    """Floating-point operations done by active lanes, by width in bits (16, 32, 64)."""
    issued_flops: dict[int, float] = field(default_factory=dict[int, float])
    """Lane slots issued for them: masked lanes of an issuing warp count (SIMT)."""
    matrix_flops: dict[str, float] = field(default_factory=dict[str, float])
    """Floating-point operations of tensor-core tiles (`egpu.mma`: 2 * 16 * 16 * k per tile),
    by input type (`f16`, `bf16`): costed at the device's matrix peak, not its vector one."""
    instructions: float = 0.0
    math_calls: float = 0.0
    chain_steps: float = 0.0
    """Warp executions of loop iterations whose body carries a float accumulation (a value
    loaded from a location its loop does not move, combined and stored back there): each
    waits for the previous iteration's, a dependency chain the model charges the device's
    `chain_cycles` per step (independent accumulators in one body count once)."""
    """Warp executions of math functions (exp, log, sqrt, ...; not abs, fma, copysign): each
    is 4 of `instructions`, which the model rescales to the device's `math_instructions`."""
    global_requests: float = 0.0
    global_sectors: float = 0.0
    global_bytes: float = 0.0
    """Bytes the active lanes asked for."""
    buffers: dict[str, BufferTraffic] = field(default_factory=dict[str, BufferTraffic])
    shared_requests: float = 0.0
    shared_wavefronts: float = 0.0
    shared_ideal: float = 0.0
    local_requests: float = 0.0
    local_sectors: float = 0.0
    barriers: float = 0.0
    shared_bytes: int = 0
    register_array_words: int = 0
    """32-bit words of local arrays every index of which is a constant (registers)."""
    notes: list[str] = field(default_factory=list[str])

    @property
    def threads(self) -> int:
        return math.prod(self.grid) * math.prod(self.block)

    @property
    def total_flops(self) -> float:
        return sum(self.flops.values()) + sum(self.matrix_flops.values())

    @property
    def bank_conflicts(self) -> float:
        return self.shared_wavefronts - self.shared_ideal


# ---- evaluation of index values -----------------------------------------------------------------


def _affine(e: AffineExpr, ops: Sequence[Lanes | None], dims: int) -> Lanes | None:
    match e:
        case AffineConstantExpr(value=v):
            return np.asarray(v, np.int64)
        case AffineDimExpr(position=p):
            return ops[p]
        case AffineSymExpr(position=p):
            return ops[dims + p]
        case AffineBinaryOpExpr(kind=kind, lhs=lhs, rhs=rhs):
            a, b = _affine(lhs, ops, dims), _affine(rhs, ops, dims)
            if a is None or b is None:
                return None
            if kind == AffineBinaryOpKind.Add:
                return a + b
            if kind == AffineBinaryOpKind.Mul:
                return a * b
            with np.errstate(divide="ignore"):
                if kind == AffineBinaryOpKind.FloorDiv:
                    return np.floor_divide(a, np.where(b == 0, 1, b))
                if kind == AffineBinaryOpKind.CeilDiv:
                    return -np.floor_divide(-a, np.where(b == 0, 1, b))
                return np.mod(a, np.where(b == 0, 1, b))
    return None


def _known(values: Sequence[Lanes | None]) -> list[Lanes] | None:
    """`values` when every one is known, else None."""
    found = [v for v in values if v is not None]
    return found if len(found) == len(values) else None


def _fold(pick: np.ufunc, values: Sequence[Lanes]) -> Lanes:
    result = np.asarray(values[0], np.int64)
    for v in values[1:]:
        result = pick(result, v)
    return result


def evaluate_map(m: AffineMap, operands: Sequence[Lanes | None]) -> list[Lanes | None]:
    return [_affine(r, operands, m.num_dims) for r in m.results]


_CMP = {
    0: np.equal, 1: np.not_equal, 2: np.less, 3: np.less_equal, 4: np.greater, 5: np.greater_equal,
    6: np.less, 7: np.less_equal, 8: np.greater, 9: np.greater_equal,
}  # fmt: skip
_INT_BINARY = {
    arith.AddiOp: np.add, arith.SubiOp: np.subtract, arith.MuliOp: np.multiply, arith.MinSIOp: np.minimum,
    arith.MaxSIOp: np.maximum, arith.MinUIOp: np.minimum, arith.MaxUIOp: np.maximum, arith.AndIOp: np.bitwise_and,
    arith.OrIOp: np.bitwise_or, arith.XOrIOp: np.bitwise_xor,
}  # fmt: skip
_INT_DIVIDE = {
    arith.DivSIOp: lambda a, b: np.trunc(a / b).astype(np.int64), arith.DivUIOp: np.floor_divide,
    arith.FloorDivSIOp: np.floor_divide, arith.CeilDivSIOp: lambda a, b: -np.floor_divide(-a, b),
    arith.RemSIOp: np.fmod, arith.RemUIOp: np.mod,
}  # fmt: skip

_CONVERSIONS = (arith.ExtFOp, arith.TruncFOp, arith.SIToFPOp, arith.FPToSIOp, arith.UIToFPOp, arith.FPToUIOp,
                arith.BitcastOp, arith.ExtSIOp, arith.ExtUIOp, arith.TruncIOp, arith.IndexCastOp)  # fmt: skip
_NOT_FLOPS = (arith.ConstantOp, arith.SelectOp, *_CONVERSIONS)
_CHEAP_MATH = (xmath.AbsFOp, xmath.FmaOp, xmath.CopySignOp)


def _width(t: Attribute) -> tuple[int, int]:
    """(bits of the element, elements) of a scalar or vector type; bits 0 for non-floats."""
    n = 1
    if isinstance(t, VectorType):
        n = math.prod(t.get_shape())
        t = t.get_element_type()
    return (t.bitwidth if isinstance(t, AnyFloat) else 0), n


def element_bytes(t: MemRefType[Attribute]) -> int:
    e = t.get_element_type()
    if isinstance(e, AnyFloat):
        return max(1, e.bitwidth // 8)
    if isinstance(e, IntegerType):
        return max(1, e.width.data // 8)
    return 8  # index


def _strides(shape: Sequence[int]) -> list[int]:
    strides, s = [], 1
    for extent in reversed(shape):
        strides.append(s)
        s *= max(1, extent)
    return strides[::-1]


def _samples(n: int) -> list[tuple[int, int]]:
    """(index, weight) of the sampled ones of `n` work-groups or warps."""
    if n <= 3:
        return [(k, 1) for k in range(n)]
    return [(0, 1), (n // 2, n - 2), (n - 1, 1)]


def _distinct(ids: np.ndarray, valid: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Per row of `ids` (rows, k): the sorted ids and a mask of the first of each distinct valid id."""
    big = np.iinfo(np.int64).max
    keyed = np.where(valid, ids, big)
    order = np.sort(keyed, axis=1)
    first = np.ones_like(order, dtype=bool)
    first[:, 1:] = order[:, 1:] != order[:, :-1]
    return order, first & (order != big)


@dataclass
class _Frame:
    loop: Operation
    factor: np.ndarray
    """Per row: how many iterations this sample stands for."""
    first: bool
    """Whether this sample is the loop's first iteration (or its only sample)."""


class KernelWalk:
    """Counts of one `egpu.func` for a device of `warp` lanes and `sector` byte sectors."""

    def __init__(self, kernel: egpu.FuncOp, warp: int, sector: int, spread: int | None = None, simd: int = 0):
        self.kernel = kernel
        self.warp = max(1, warp)
        self.simd = max(0, simd)
        self.packed: dict[SSAValue, int] = {}
        """Per float value of a work-item's code (`simd`): the lanes of the vector it is one
        element of (a vector load's element, or an op on one): the SIMD group it issues in."""
        self.slp: dict[Operation, int] = {}
        """Per scalar op of a work-item's code (`simd`) that computes a value stored into a
        register array beside its neighbours' (`store_runs`): the SIMD group it issues in."""
        self.sector = max(1, sector)
        grid, block = kernel.grid_size, kernel.block_size
        self.counts = KernelCounts(kernel.sym_name.data, grid, block, self.warp, spread or math.prod(grid))
        threads = math.prod(block)
        warps = -(-threads // self.warp)
        rows: list[tuple[int, int, int, int, float]] = []
        every = math.prod(len(_samples(g)) for g in grid) * warps <= ROW_BUDGET  # all warps of a sampled block
        for bx, wx in _samples(grid[0]):
            for by, wy in _samples(grid[1]):
                for bz, wz in _samples(grid[2]):
                    for w, ww in [(w, 1) for w in range(warps)] if every else _samples(warps):
                        rows.append((bx, by, bz, w, float(wx * wy * wz * ww)))
        self.rows = len(rows)
        lane = np.arange(self.warp, dtype=np.int64)
        tid = np.array([r[3] for r in rows], np.int64)[:, None] * self.warp + lane[None, :]
        self.valid = tid < threads
        self.weight = np.array([r[4] for r in rows])
        ids: dict[str, Lanes] = {
            "thread_id.x": tid % block[0],
            "thread_id.y": (tid // block[0]) % block[1],
            "thread_id.z": tid // (block[0] * block[1]),
        }
        for k, axis in enumerate("xyz"):
            ids[f"block_id.{axis}"] = np.broadcast_to(np.array([r[k] for r in rows], np.int64)[:, None], tid.shape)
            ids[f"global_id.{axis}"] = ids[f"block_id.{axis}"] * block[k] + ids[f"thread_id.{axis}"]
            ids[f"block_dim.{axis}"] = np.full(tid.shape, block[k], np.int64)
            ids[f"grid_dim.{axis}"] = np.full(tid.shape, grid[k], np.int64)
        self.ids = ids
        self.env: dict[SSAValue, Lanes] = {}
        self.frames: list[_Frame] = []
        self.paths = 1
        self.spaces: dict[SSAValue, str] = {}
        self.names: dict[SSAValue, str] = {}
        for arg in kernel.body.block.args:
            self.spaces[arg] = "global"
            t = arg.type
            if isinstance(t, MemRefType):
                name = _arg_name(kernel, arg.index) or f"arg{arg.index}"
                nbytes = math.prod(t.get_shape()) * element_bytes(t)
                self.counts.buffers[name] = BufferTraffic(nbytes)
                self.names[arg] = name
        self._hoist: dict[Operation, int] = {}

    # ---- the walk ----------------------------------------------------------------------------
    def run(self) -> KernelCounts:
        for op in self.kernel.walk():
            if isinstance(op, egpu.AllocSharedOp):
                self.counts.shared_bytes += op.bytes
            elif isinstance(op, memref.AllocaOp):
                accesses = [_access(use.operation) for use in op.memref.uses]
                if all(a is not None and all(self.constant(i) for i in a.indices) for a in accesses):
                    t = op.memref.type
                    assert isinstance(t, MemRefType)
                    self.counts.register_array_words += -(-math.prod(t.get_shape()) * element_bytes(t) // 4)
        self.block(self.kernel.body.block, self.valid.copy(), self.weight.copy())
        return self.counts

    def value(self, v: SSAValue) -> Lanes | None:
        found = self.env.get(v)
        if found is not None:
            return found
        owner = v.owner
        if isinstance(owner, arith.ConstantOp) and isinstance(owner.value, IntegerAttr):
            return np.asarray(owner.value.value.data, np.int64)
        return None

    def block(self, block: Block, mask: np.ndarray, weight: np.ndarray) -> None:
        seen: set[tuple[object, ...]] = set()
        if self.simd:
            self.store_runs(block)
        for op in block.ops:
            if not mask.any():
                return
            self.op(op, mask, weight, seen)

    def op(self, op: Operation, mask: np.ndarray, weight: np.ndarray, seen: set[tuple[object, ...]]) -> None:
        if self.index_op(op):
            return
        if isinstance(op, affine.ForOp | scf.ForOp):
            self.loop(op, mask, weight)
            self.forget(op, seen)
            return
        if isinstance(op, scf.IfOp):
            cond = self.value(op.cond)
            if cond is None:
                self.counts.notes.append("a branch on data: its then-branch counted for every lane")
            taken = mask if cond is None else mask & (np.asarray(cond) != 0)
            self.block(op.true_region.block, taken, weight)
            if op.false_region.blocks:
                self.block(op.false_region.block, mask & ~taken if cond is not None else mask & False, weight)
            self.forget(op, seen)
            return
        if isinstance(op, egpu.AllocSharedOp):
            self.spaces[op.memref] = "shared"
            return
        if isinstance(op, memref.AllocaOp):
            self.spaces[op.memref] = "private"
            return
        if isinstance(op, egpu.BarrierOp):
            self.counts.barriers += self.warp_weight(mask, weight)
            self.counts.instructions += self.warp_weight(mask, weight)
            seen.clear()
            return
        if isinstance(op, MmaOp):
            self.mma(op, mask, weight)
            for key in [key for key in seen if key[0] is op.c]:
                seen.discard(key)  # it stores its C tile
            return
        if isinstance(op, egpu.CopyAsyncOp):  # cp.async: a global load and a shared store
            for access in _copy_accesses(op):
                self.memory(op, access, mask, weight, seen)
            return
        access = _access(op)
        if access is not None:
            self.memory(op, access, mask, weight, seen)
            return
        if op.regions:  # an op this walk does not know: its regions once, as they stand
            self.counts.notes.append(f"{op.name} walked once")
            for region in op.regions:
                for b in region.blocks:
                    self.block(b, mask, weight)
            self.forget(op, seen)
            return
        self.arithmetic(op, mask, weight)

    def forget(self, op: Operation, seen: set[tuple[object, ...]]) -> None:
        """After a region op: loads of buffers it stores to (or of any buffer, when it holds a
        barrier) are no longer known."""
        stored = set()
        for inner in op.walk():
            if isinstance(inner, egpu.BarrierOp):
                seen.clear()
                return
            access = _copy_accesses(inner)[1] if isinstance(inner, egpu.CopyAsyncOp) else _access(inner)
            if access is not None and access.store:
                stored.add(access.memref)
            if isinstance(inner, MmaOp):
                stored.add(inner.c)
        for k in [k for k in seen if k[0] in stored]:
            seen.discard(k)

    def index_op(self, op: Operation) -> bool:
        """Evaluate an op producing index values; False for any other op."""
        if isinstance(op, egpu.IndexOp):
            self.env[op.result] = self.ids[f"{op.name.removeprefix('egpu.')}.{op.dimension.value}"]
            return True
        if isinstance(op, affine.ApplyOp):
            value = evaluate_map(op.map.data, [self.value(o) for o in op.mapOperands])[0]
            if value is not None:
                self.env[op.result] = value
            return True
        if isinstance(op, affine.MinOp):
            found = _known(evaluate_map(op.map.data, [self.value(o) for o in op.operands]))
            if found is not None:
                self.env[op.result] = _fold(np.minimum, found)
            return True
        if isinstance(op, arith.ConstantOp):
            return True
        results = op.results
        if len(results) != 1 or not isinstance(results[0].type, IndexType | IntegerType):
            return False
        if isinstance(results[0].type, IntegerType) and not isinstance(op, arith.CmpiOp):
            if not all(isinstance(o.type, IndexType) for o in op.operands):
                return False
        operands = [self.value(o) for o in op.operands]
        result: Lanes | None = None
        known = all(o is not None for o in operands)
        kind = type(op)
        if kind in _INT_BINARY and known:
            result = _INT_BINARY[kind](operands[0], operands[1])
        elif kind in _INT_DIVIDE and known:
            b = np.asarray(operands[1])
            result = _INT_DIVIDE[kind](operands[0], np.where(b == 0, 1, b))
        elif isinstance(op, arith.CmpiOp) and known:
            result = _CMP[op.predicate.value.data](operands[0], operands[1]).astype(np.int64)
        elif isinstance(op, arith.SelectOp) and operands[0] is not None and operands[1] is not None and operands[2] is not None:
            result = np.where(operands[0] != 0, operands[1], operands[2])
        elif isinstance(op, arith.IndexCastOp) and known:
            result = operands[0]
        elif not isinstance(op, arith.CmpiOp | arith.SelectOp | arith.IndexCastOp) and kind not in _INT_BINARY and kind not in _INT_DIVIDE:
            return False
        if result is not None:
            self.env[results[0]] = np.asarray(result, np.int64)
        return isinstance(results[0].type, IndexType) or isinstance(op, arith.CmpiOp)

    # ---- loops -----------------------------------------------------------------------------------
    def bounds(self, op: affine.ForOp | scf.ForOp) -> tuple[Lanes | None, Lanes | None, Lanes | None]:
        if isinstance(op, scf.ForOp):
            return self.value(op.lb), self.value(op.ub), self.value(op.step)
        lbs = evaluate_map(op.lowerBoundMap.data, [self.value(o) for o in op.lowerBoundOperands])
        ubs = evaluate_map(op.upperBoundMap.data, [self.value(o) for o in op.upperBoundOperands])
        lows, highs = _known(lbs), _known(ubs)
        lb = None if lows is None else _fold(np.maximum, lows)
        ub = None if highs is None else _fold(np.minimum, highs)
        return lb, ub, np.asarray(op.step.value.data, np.int64)

    def loop(self, op: affine.ForOp | scf.ForOp, mask: np.ndarray, weight: np.ndarray) -> None:
        lb, ub, step = self.bounds(op)
        body = op.body.block
        shape = mask.shape
        if lb is None or ub is None or step is None:
            self.counts.notes.append(f"a loop's trip count is unknown: counted once ({op.name})")
            trips = np.where(mask, 1, 0)
            lb = np.zeros(shape, np.int64)
            step = np.asarray(1, np.int64)
        else:
            s = np.where(np.asarray(step) == 0, 1, step)
            trips = np.where(mask, np.maximum(0, -np.floor_divide(-(np.asarray(ub) - lb), s)), 0)
        lb_l = np.broadcast_to(np.asarray(lb, np.int64), shape)
        step_l = np.broadcast_to(np.asarray(step, np.int64), shape)
        n = trips.max(axis=1)  # per row: the warp runs while any lane does
        top = int(n.max()) if n.size else 0
        if top <= 0:
            return
        slots: list[tuple[np.ndarray, np.ndarray, bool]]  # (iteration per row, weight per row, first)
        if top <= FULL_LOOP:
            slots = [(np.full(n.shape, i), (i < n).astype(float), i == 0) for i in range(top)]
        elif self.paths * 3 > PATH_BUDGET:
            slots = [(n // 2, n.astype(float), True)]
        else:
            slots = [(np.zeros_like(n), (n >= 1).astype(float), True), (n // 2, np.maximum(n - 2, 0).astype(float), False),
                     (np.maximum(n - 1, 0), (n >= 2).astype(float), False)]  # fmt: skip
        self.paths *= len(slots)
        iv = body.args[0]
        for it, factor, first in slots:
            lane_mask = mask & (it[:, None] < trips)
            if not lane_mask.any() or not factor.any():
                continue
            self.env[iv] = lb_l + it[:, None] * step_l
            self.frames.append(_Frame(op, factor, first))
            self.block(body, lane_mask, weight * factor)
            self.frames.pop()
        self.paths //= len(slots)

    # ---- memory ----------------------------------------------------------------------------------
    def memory(self, op: Operation, access: _Access, mask: np.ndarray, weight: np.ndarray,
               seen: set[tuple[object, ...]]) -> None:  # fmt: skip
        space = self.space(access.memref)
        key = access.key()
        if access.store:
            for k in [k for k in seen if k[0] is access.memref]:
                seen.discard(k)
        elif key in seen:
            return
        else:
            seen.add(key)
        t = access.memref.type
        assert isinstance(t, MemRefType)
        if space == "private" and all(self.constant(i) for i in access.indices):
            return  # a register
        depth = self.hoist_depth(op, access) if space != "private" else 0
        if depth:
            frames = self.frames[-depth:]
            if not all(f.first for f in frames):
                return
            factor = np.prod([f.factor for f in frames], axis=0)
            weight = np.divide(weight, factor, out=np.zeros_like(weight), where=factor > 0)
        es = element_bytes(t)
        span = es * access.lanes
        rows = self.warp_rows(mask)
        w = weight * rows
        requests = float(w.sum())
        self.counts.instructions += requests
        active = mask.sum(axis=1)
        if space == "private":
            self.counts.local_requests += requests
            self.counts.local_sectors += float((w * np.ceil(active * span / self.sector)).sum())
            return
        address = self.address(access, t, es)
        if space == "shared":
            waves, ideal = self.bank_wavefronts(address, span, mask)
            self.counts.shared_requests += requests
            self.counts.shared_wavefronts += float((w * waves).sum())
            self.counts.shared_ideal += float((w * ideal).sum())
            return
        sectors = self.sectors(address, span, mask)
        total = float((w * sectors).sum())
        self.counts.global_requests += requests
        self.counts.global_sectors += total
        self.counts.global_bytes += float((weight * active).sum()) * span
        name = self.names.get(access.memref)
        if name is not None:
            traffic = self.counts.buffers[name]
            if access.store:
                traffic.store_sectors += total
            else:
                traffic.load_sectors += total

    def space(self, v: SSAValue) -> str:
        found = self.spaces.get(v)
        if found is not None:
            return found
        owner = v.owner
        if isinstance(owner, Operation) and owner.name in ("memref.subview", "memref.cast", "memref.reinterpret_cast"):
            return self.space(owner.operands[0])
        return "global"

    def constant(self, v: SSAValue) -> bool:
        """Whether `v` is known when the kernel is compiled: a constant, or the variable of a
        loop with constant bounds (which the compilers unroll: a local array indexed by such
        values lives in registers)."""
        owner = v.owner
        if isinstance(owner, arith.ConstantOp):
            return True
        if isinstance(v, BlockArgument) and v.index == 0:
            loop = v.block.parent_op()
            if isinstance(loop, affine.ForOp):
                return not loop.lowerBoundOperands and not loop.upperBoundOperands
        return False

    def address(self, access: _Access, t: MemRefType[Attribute], es: int) -> Lanes | None:
        indices: list[Lanes | None]
        if access.map is not None:
            indices = evaluate_map(access.map, [self.value(i) for i in access.indices])
        else:
            indices = [self.value(i) for i in access.indices]
        if any(i is None for i in indices):
            return None
        linear = np.zeros(self.valid.shape, np.int64)
        for i, s in zip(indices, _strides(t.get_shape())):
            linear = linear + np.asarray(i, np.int64) * s
        return linear * es

    def sectors(self, address: Lanes | None, span: int, mask: np.ndarray) -> np.ndarray:
        """Per row: distinct sectors the active lanes' bytes [address, address + span) touch."""
        if address is None:
            return mask.sum(axis=1) * -(-span // self.sector)
        first = address // self.sector
        last = (address + span - 1) // self.sector
        k = int((last - first).max()) + 1
        ids = first[:, :, None] + np.arange(k)[None, None, :]
        ids = np.minimum(ids, last[:, :, None]).reshape(mask.shape[0], -1)
        valid = np.repeat(mask, k, axis=1)
        _, distinct = _distinct(ids, valid)
        return distinct.sum(axis=1)

    def bank_wavefronts(self, address: Lanes | None, span: int, mask: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Per row: wavefronts (the most distinct 4-byte words one of the 32 banks holds) and
        the conflict-free number (distinct words / 32)."""
        if address is None:
            active = mask.sum(axis=1)
            return active.astype(float), np.ceil(active / 32)
        words = -(-span // 4)
        ids = (address // 4)[:, :, None] + np.arange(words)[None, None, :]
        ids = ids.reshape(mask.shape[0], -1)
        valid = np.repeat(mask, words, axis=1)
        order, distinct = _distinct(ids, valid)
        rows = order.shape[0]
        bank = np.where(distinct, order % 32, 0) + 32 * np.arange(rows)[:, None]
        per_bank = np.bincount(bank.ravel(), weights=distinct.ravel().astype(float), minlength=32 * rows)
        waves = per_bank.reshape(rows, 32).max(axis=1)
        return waves, np.ceil(distinct.sum(axis=1) / 32)

    def hoist_depth(self, op: Operation, access: _Access) -> int:
        """How many innermost enclosing loops `op` may be hoisted out of (its address does not
        change in them and no other access to its buffer there may alias it)."""
        found = self._hoist.get(op)
        if found is not None:
            return found
        depth = 0
        loop = op.parent_op()
        while isinstance(loop, affine.ForOp | scf.ForOp | scf.IfOp) and loop is not self.kernel:
            if isinstance(loop, scf.IfOp):
                loop = loop.parent_op()
                continue
            if any(_inside(i, loop) for i in access.indices):
                break
            key = access.key()
            others = [a for o in loop.walk() if o is not op for a in [_access(o)] if a is not None]
            if any(a.memref is access.memref and a.key() != key for a in others):
                break
            if self.space(access.memref) == "shared" and any(isinstance(o, egpu.BarrierOp) for o in loop.walk()):
                break
            depth += 1
            loop = loop.parent_op()
        self._hoist[op] = depth
        return depth

    # ---- tensor cores ----------------------------------------------------------------------------
    def mma(self, op: MmaOp, mask: np.ndarray, weight: np.ndarray) -> None:
        """One 16 x 16 x k tile per executing warp: 2 * 16 * 16 * k matrix FLOPs, one
        instruction per 16 x 8 x 16 (`mma.m16n8k16`) or 16 x 16 x 16 (MFMA) step, and the A, B
        and C tiles moved as whole tiles (registers: nothing; shared memory: their words over
        the 32 banks, conflict-free as `ldmatrix` reads them; global memory: the sectors the
        tile's rows touch, C read and written)."""
        k = op.k.value.data
        lanes = op.lanes.value.data
        warps = self.warp_weight(mask, weight)
        a_type = op.a.type
        assert isinstance(a_type, MemRefType)
        kind = "bf16" if "bf16" in str(a_type.get_element_type()) else "f16"
        self.counts.matrix_flops[kind] = self.counts.matrix_flops.get(kind, 0.0) + 2.0 * FRAGMENT * FRAGMENT * k * warps
        steps = k // FRAGMENT * (2 if lanes == 32 else 1)
        self.counts.instructions += steps * warps
        rows = self.warp_rows(mask)
        w = weight * rows
        first = np.argmax(mask, axis=1)  # the tile's base indices: the first active lane's
        for which, buffer, indices, shape, store in (
            ("a", op.a, op.a_indices, (FRAGMENT, k), False),
            ("b", op.b, op.b_indices, (k, FRAGMENT), False),
            ("c", op.c, op.c_indices, (FRAGMENT, FRAGMENT), True),
        ):
            t = buffer.type
            assert isinstance(t, MemRefType)
            space = self.space(buffer)
            if space == "private" and all(self.constant(i) for i in indices):
                continue
            es = element_bytes(t)
            values = [self.value(i) for i in indices]
            strides = _strides(t.get_shape())
            d0, d1 = op.dims(which)
            tile = (np.arange(shape[0])[:, None] * strides[d0] + np.arange(shape[1])[None, :] * strides[d1]).ravel()
            if any(v is None for v in values):
                base = np.zeros(self.rows, np.int64)
            else:
                linear = np.zeros(self.valid.shape, np.int64)
                for v, s in zip(values, strides):
                    linear = linear + np.broadcast_to(np.asarray(v, np.int64), self.valid.shape) * s
                base = linear[np.arange(self.rows), first]
            address = (base[:, None] + tile[None, :]) * es
            valid = np.broadcast_to(rows[:, None] > 0, address.shape)
            nbytes = tile.size * es
            requests = float(w.sum()) * max(1, -(-nbytes // (lanes * 16)))  # 16 bytes per lane a request
            if space in ("shared", "private"):
                _, distinct = _distinct(address // 4, valid)
                waves = np.ceil(distinct.sum(axis=1) / 32)
                if space == "shared":
                    self.counts.shared_requests += requests
                    self.counts.shared_wavefronts += float((w * waves).sum())
                    self.counts.shared_ideal += float((w * waves).sum())
                else:
                    self.counts.local_requests += requests
                    self.counts.local_sectors += float((w * np.ceil(distinct.sum(axis=1) * 4 / self.sector)).sum())
                continue
            _, distinct = _distinct(address // self.sector, valid)
            sectors = float((w * distinct.sum(axis=1)).sum())
            name = self.names.get(buffer)
            for stored in (False, True) if store else (False,):
                self.counts.global_requests += requests
                self.counts.global_sectors += sectors
                self.counts.global_bytes += float(w.sum()) * nbytes
                if name is not None:
                    traffic = self.counts.buffers[name]
                    if stored:
                        traffic.store_sectors += sectors
                    else:
                        traffic.load_sectors += sectors
            self.counts.instructions += requests * (2 if store else 1)

    # ---- arithmetic ------------------------------------------------------------------------------
    def warp_rows(self, mask: np.ndarray) -> np.ndarray:
        return mask.any(axis=1).astype(float)

    def warp_weight(self, mask: np.ndarray, weight: np.ndarray) -> float:
        return float((weight * self.warp_rows(mask)).sum())

    def arithmetic(self, op: Operation, mask: np.ndarray, weight: np.ndarray) -> None:
        if isinstance(op, egpu.ReturnOp) or op.name in ("scf.yield", "affine.yield"):
            return
        flops, bits, instructions = self.cost(op)
        warps = self.warp_weight(mask, weight)
        slots = 1.0  # instructions and issued FLOPs per lane and op, as a share of a scalar op's
        if self.simd:
            slots = self.simd_share(op)
            instructions *= slots
        if bits and self.frames and _leads_chain(op):
            self.counts.chain_steps += warps
        self.counts.instructions += instructions * warps
        if op.dialect_name() == "math" and not isinstance(op, _CHEAP_MATH):
            self.counts.math_calls += warps
        if flops and bits:
            lanes = float((weight * mask.sum(axis=1)).sum())
            self.counts.flops[bits] = self.counts.flops.get(bits, 0.0) + flops * lanes
            issued = flops * warps * self.warp * (slots / _elements(op) if self.simd else 1.0)
            self.counts.issued_flops[bits] = self.counts.issued_flops.get(bits, 0.0) + issued

    def store_runs(self, block: Block) -> None:
        """The compiler's straight-line (SLP) vectorizer starts from stores to consecutive
        addresses: in `block`, stores of scalar float results into a register array (a private
        array at constant indices: an unrolled register tile's accumulators) at consecutive
        elements are packed in groups of up to `SLP_BITS` (and `simd` lanes), and so are the
        ops computing them in the block (the multiply and the add of each accumulator's
        update). Recorded in `slp`, read by `simd_share`."""
        runs: dict[SSAValue, list[tuple[int, Operation]]] = {}
        for op in block.ops:
            access = _access(op)
            if access is None or not access.store or access.lanes != 1 or self.spaces.get(access.memref) != "private":
                continue
            t = access.memref.type
            assert isinstance(t, MemRefType)
            address = self.address(access, t, 1)
            if address is None or np.ndim(address) and not (address == address.flat[0]).all():
                continue
            runs.setdefault(access.memref, []).append((int(np.asarray(address).flat[0]), op))
        for memory, stores in runs.items():
            t = memory.type
            assert isinstance(t, MemRefType)
            limit = max(1, min(self.simd, SLP_BITS // (8 * element_bytes(t))))
            stores.sort(key=lambda s: s[0])
            start = 0
            for end in range(1, len(stores) + 1):
                if end < len(stores) and stores[end][0] == stores[end - 1][0] + 1:
                    continue
                run = stores[start:end]
                for k in range(0, len(run), limit):
                    group = run[k:k + limit]
                    if len(group) > 1:
                        for _, store in group:
                            self._mark_slp(store.operands[0], block, len(group), 2)
                start = end

    def _mark_slp(self, v: SSAValue, block: Block, lanes: int, depth: int) -> None:
        owner = v.owner
        if not isinstance(owner, Operation) or owner.parent_block() is not block or _elements(owner) != 1:
            return
        if owner.dialect_name() not in ("arith", "math") or isinstance(owner, arith.ConstantOp):
            return
        self.slp[owner] = max(lanes, self.slp.get(owner, 1))
        if depth > 1:
            for o in owner.operands:
                self._mark_slp(o, block, lanes, depth - 1)

    def simd_share(self, op: Operation) -> float:
        """On a device that runs each work-item's code on its own (`simd` lanes: a CPU's
        runtime looping over work-items), what one op of a work-item issues, in scalar ops:
        a vector of n elements ceil(n / simd) instructions; a scalar op on an element of a
        vector of w lanes (`egpu.vextract` of a vector load, or an op on such a value) 1 / w,
        as the compiler's straight-line (SLP) vectorizer packs the w ops on the w elements
        into one instruction (the register tile fed by `vload4`); picking an element out is
        free (the vector is used in place); an op whose result is stored into a register
        array beside its neighbours' (`store_runs`) 1 / the run's group. Every other scalar
        op: 1."""
        if isinstance(op, egpu.VExtractOp):
            t = op.vector.type
            assert isinstance(t, VectorType)
            self.packed[op.result] = min(self.simd, math.prod(t.get_shape()))
            return 0.0
        n = _elements(op)
        if n > 1:
            return float(-(-n // self.simd))
        lanes = max((self.packed.get(o, 1) for o in op.operands), default=1)
        lanes = max(lanes, self.slp.get(op, 1))
        if lanes > 1:
            for r in op.results:
                self.packed[r] = lanes
        return 1.0 / lanes

    def cost(self, op: Operation) -> tuple[float, int, float]:
        """(FLOPs per lane, their width in bits, warp instructions) of a data op."""
        typed = _typed(op)
        bits, n = _width(typed) if typed is not None else (0, 1)
        if isinstance(op, egpu.SubgroupReduceOp):
            cluster = op.cluster_size.value.data if op.cluster_size is not None else self.warp
            steps = max(1, int(math.log2(max(1, min(cluster, self.warp)))))
            return (steps if bits else 0), bits, 2 * steps
        if isinstance(op, egpu.VReduceOp):
            bits, n = _width(op.operands[0].type)
            return max(0, n - 1), bits, max(1, n - 1)
        if isinstance(op, egpu.VFmaOp | xmath.FmaOp):
            return 2 * n, bits, 1
        if op.dialect_name() == "math":
            return n, bits, 1 if isinstance(op, _CHEAP_MATH) else 4
        if op.dialect_name() == "arith" and bits and not isinstance(op, _NOT_FLOPS):
            if isinstance(op, arith.MulfOp) and _fused(op):
                return n, bits, 0
            return n, bits, 1
        return 0, 0, 0 if isinstance(op, arith.ConstantOp) else 1


def _typed(op: Operation) -> Attribute | None:
    """The type an op computes in: its result's (its first operand's without one; a
    comparison's operands')."""
    if isinstance(op, arith.CmpfOp):
        return op.lhs.type
    return op.results[0].type if op.results else (op.operands[0].type if op.operands else None)


def _elements(op: Operation) -> int:
    """The elements of the value an op computes (a vector's lanes; 1 for a scalar)."""
    typed = _typed(op)
    return _width(typed)[1] if typed is not None else 1


def _carries(op: Operation) -> bool:
    """Whether float op `op` accumulates in its loop: an operand loaded from a location whose
    indices its loop does not move, and its result stored back to that location in the same
    block."""
    loop = op.parent_op()
    if not isinstance(loop, affine.ForOp | scf.ForOp):
        return False
    loads = [_access(o.owner) for o in op.operands if isinstance(o.owner, Operation)]
    stores = [_access(u.operation) for r in op.results for u in r.uses if u.operation.parent is op.parent]
    return any(
        load is not None and not load.store and store is not None and store.store and load.key() == store.key()
        and not any(_inside(i, loop) for i in load.indices)
        for load in loads for store in stores
    )  # fmt: skip


def _leads_chain(op: Operation) -> bool:
    """Whether `op` is the first accumulation (`_carries`) of its block: the one that stands
    for the block's chains (independent accumulators advance together)."""
    block = op.parent
    if block is None or not _carries(op):
        return False
    return next(o for o in block.ops if _carries(o)) is op


def _fused(op: arith.MulfOp) -> bool:
    """A multiply whose one use is an add or subtract: the compilers emit an fma."""
    uses = list(op.result.uses)
    return len(uses) == 1 and isinstance(uses[0].operation, arith.AddfOp | arith.SubfOp)


def _inside(v: SSAValue, loop: Operation) -> bool:
    """Whether `v` is defined inside `loop` (its body's arguments included)."""
    owner: Operation | Block | None = v.owner
    if isinstance(v, BlockArgument):
        owner = v.block
    while owner is not None:
        if owner is loop:
            return True
        parent: Operation | Block | Region | None = owner.parent
        while parent is not None and not isinstance(parent, Operation):
            parent = parent.parent
        owner = parent
    return False


@dataclass(frozen=True)
class _Access:
    memref: SSAValue
    indices: tuple[SSAValue, ...]
    map: AffineMap | None
    store: bool
    lanes: int
    """Elements one lane moves (a vector access's width)."""

    def key(self) -> tuple[object, ...]:
        return (self.memref, self.map, self.indices)


def _access(op: Operation) -> _Access | None:
    if isinstance(op, affine.LoadOp | affine.StoreOp):
        return _Access(op.memref, tuple(op.indices), op.map.data, isinstance(op, affine.StoreOp), _lanes(op))
    if isinstance(op, memref.LoadOp | memref.StoreOp):
        return _Access(op.memref, tuple(op.indices), None, isinstance(op, memref.StoreOp), _lanes(op))
    if isinstance(op, egpu.VLoadOp | egpu.LoadExtfOp):
        return _Access(op.memref, tuple(op.indices), None, False, _lanes(op))
    if isinstance(op, egpu.VLoadRepeatOp):  # the run's elements, one load
        return _Access(op.memref, tuple(op.indices), None, False, op.run.value.data)
    if isinstance(op, egpu.VStoreOp | egpu.StoreTruncfOp):
        return _Access(op.memref, tuple(op.indices), None, True, _lanes(op))
    return None


def _copy_accesses(op: egpu.CopyAsyncOp) -> tuple[_Access, _Access]:
    """The global load and the shared store of an asynchronous copy (of `op.width` elements)."""
    return (_Access(op.source, tuple(op.source_indices), None, False, op.width),
            _Access(op.memref, tuple(op.indices), None, True, op.width))  # fmt: skip


def _lanes(op: Operation) -> int:
    typed = op.results[0].type if op.results else op.operands[0].type
    return _width(typed)[1]


def _arg_name(kernel: egpu.FuncOp, index: int) -> str | None:
    attrs = kernel.arg_attrs
    if attrs is None or index >= len(attrs.data):
        return None
    name = attrs.data[index].data.get(NAME_ATTR)
    return getattr(name, "data", None)


def kernels(module: Operation) -> Iterator[egpu.FuncOp]:
    """The module's kernels in launch order (as the host function launches them)."""
    funcs = {op.sym_name.data: op for op in module.walk() if isinstance(op, egpu.FuncOp)}
    launched = [op.callee.root_reference.data for op in module.walk() if isinstance(op, egpu.LaunchOp)]
    for name in launched or list(funcs):
        if name in funcs:
            yield funcs[name]


def runs_loops(kernel: egpu.FuncOp) -> bool:
    """Whether a work-item of `kernel` runs a loop a compiler keeps (any but a loop of at most
    FULL_LOOP iterations between constant bounds, which compilers unroll)."""
    for op in kernel.walk():
        if isinstance(op, affine.ForOp):
            lb, ub = op.lowerBoundMap.data, op.upperBoundMap.data
            if op.lowerBoundOperands or op.upperBoundOperands or len(lb.results) != 1 or len(ub.results) != 1:
                return True
            low, high = lb.results[0], ub.results[0]
            if not isinstance(low, AffineConstantExpr) or not isinstance(high, AffineConstantExpr):
                return True
            if -(-(high.value - low.value) // op.step.value.data) > FULL_LOOP:
                return True
        elif isinstance(op, scf.ForOp):
            values: list[int] = []
            for v in (op.lb, op.ub, op.step):
                owner = v.owner
                if not (isinstance(owner, arith.ConstantOp) and isinstance(owner.value, IntegerAttr)):
                    return True
                values.append(owner.value.value.data)
            lo, hi, step = values
            if -(-(hi - lo) // max(1, step)) > FULL_LOOP:
                return True
    return False


def count_kernel(kernel: egpu.FuncOp, warp: int, sector: int, spread: int | None = None, simd: int = 0) -> KernelCounts:
    """The counts of `kernel` on a device of `warp` lanes and `sector`-byte sectors; `simd`:
    the SIMD lanes of a device that runs each work-item's code on its own (a CPU runtime's
    loop over work-items: `warp` 1), whose vectors and the ops on their elements issue as
    SIMD instructions (`KernelWalk.simd_share`); 0 on a GPU (every op of a lane its own)."""
    return KernelWalk(kernel, warp, sector, spread, simd).run()
