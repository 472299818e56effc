"""`einc-vectorize-global{target=T}`: global-memory accesses of consecutive elements at
provably aligned addresses become vector loads and stores (`egpu.vload`/`egpu.vstore`
marked `egpu.align`), which CUDA and HIP print as 16-byte `float4`-sized accesses
(`ld.global.v4.f32`), OpenCL as `vload4`/`vstore4`.

Alignment is proven against the launch contract: every buffer argument of a kernel starts
at an address aligned to the alignment its manifest states (`Buffer.align`; the runtimes'
own allocations are, and a caller's device array that is not is refused at launch). The
pass records what it assumes on the kernel's argument (`egpu.align` in its argument
attributes; the manifest states it and the printers say it in a comment), so an index that
is a multiple of the vector width (einc.transforms.alignment) is an aligned address.

Three shapes, whatever schedule made them (the pass works on the egpu level):
1. Staging copies (shared_staging.py's `scf.for %e = %tid to N step T` over a tile, the
   block's threads splitting its elements): where N is a multiple of the width W and the
   global load's and the shared store's indices move by one in their last dimension for
   W consecutive `e` from a multiple of W, aligned, the loop runs over N / W vectors
   (`e = W * v`) and each load/store pair becomes a vector pair (the copy's elements are
   the same; each thread copies W consecutive ones). `einc-async-copies` (after this pass)
   makes such a pair one 16-byte `cp.async` on CUDA sm_80+.
   A copy into a tile staged with a permuted layout (`cache_read ... layout`: matmul's
   `A[N, K]` staged `[K, N]`), whose shared index moves across rows with `e`, gets the
   same aligned vector load and `W` scalar stores down the tile's column (the transpose;
   `einc-async-copies` leaves it: cp.async cannot transpose, so it goes through registers).
   16-bit elements so scattered (HIP's MFMA operand staged k innermost) take two source
   rows per thread where the tile allows (`row_pairs_plan`): two vector loads, each
   column's pair one aligned 32-bit store, the threads in the order with the fewest bank
   conflicts among a wavefront's first 32 words.
2. Elementwise loops: an innermost `affine.for` with constant bounds whose stores all go
   to global buffers at an index unit-stride in the loop variable, every access of a stored
   buffer at that same index (no carried dependence), and every unit-stride global access
   aligned to the width, is strip-mined by the vectorizer (einc.transforms.vectorize) at
   the target's width; a remainder loop stays scalar.
3. Vector accesses already there (a register tile's store, `einc-vectorize-loops`) are
   marked aligned where their index is a multiple of their width.
4. Unrolled scalar loads of consecutive float32 elements of an argument the kernel never
   writes (a register tile reading a row of an input straight from global memory), in one
   block, whose flat index is a multiple of the width: one aligned vector load and lane
   extractions (the grouping of `einc-vectorize-shared-loads`).

5. Elementwise loops of float16/bfloat16 kept only in memory (`egpu.load_extf`,
   `egpu.store_truncf`: CUDA, HIP; the target's `packed_narrow_access`) over 2, 4 or 8
   consecutive elements: one aligned vector load or store per buffer, the body unrolled
   on float32 lanes with its roundings as they were (einc.transforms.narrow_access); a
   chunk cut short at the extent's end is versioned: packed when full, else the scalar
   loop (the tail).

Anything else stays scalar (a guarded copy of a partial tile, a padded shared row that
breaks alignment, a trip count that is no multiple of the width).
Element types: those the target has vectors of (`vector_elements`), at most 16 bytes a
vector and the target's `vector_lanes()`.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from xdsl.context import Context
from xdsl.dialects import affine, arith, scf
from xdsl.dialects.builtin import (
    AffineMapAttr,
    AnyFloat,
    ArrayAttr,
    DictionaryAttr,
    Float32Type,
    IndexType,
    IntegerAttr,
    IntegerType,
    MemRefType,
    ModuleOp,
    VectorType,
    bf16,
    f16,
    i64,
)
from xdsl.ir import Attribute, BlockArgument, Operation, SSAValue
from xdsl.ir.affine import AffineDimExpr, AffineExpr, AffineMap
from xdsl.rewriter import InsertPoint, Rewriter

from einc.dialects import egpu
from einc.ir.attrs import ALIGN_ATTR
from einc.passes.targeted import TargetedPass
from einc.passes.vectorize_shared_loads import vectorize_shared_loads
from einc.transforms.affine_index import dims_to_operands
from einc.transforms.alignment import constant, expr_step, flat_divisor, identity_map
from einc.transforms.loop_analysis import trip_count
from einc.transforms.loop_build import Failure
from einc.transforms.loop_transforms import VECTORIZE_ATTR
from einc.transforms.narrow_access import (
    narrow_arithmetic_failure,
    narrow_loop_failure,
    pack_narrow_arithmetic,
    pack_narrow_loop,
    version_partial_chunk,
)
from einc.transforms.vectorize import REDUCTION_ATTR, vectorize_loop

VECTOR_BYTES = 16


def element_bytes(element: Attribute) -> int:
    if isinstance(element, AnyFloat):
        return element.bitwidth // 8
    return element.width.data // 8 if isinstance(element, IntegerType) else 0


def _global(kernel: egpu.FuncOp, v: SSAValue) -> bool:
    return isinstance(v, BlockArgument) and v.block is kernel.body.block


def _steps(op: affine.LoadOp | affine.StoreOp, iv: SSAValue, body: Operation, width: int) -> list[int | None]:
    m = dims_to_operands(op.map.data)
    return [expr_step(e, list(op.indices), iv, body, width, {iv: width}) for e in m.results]


def _unit_stride(steps: list[int | None]) -> bool:
    return bool(steps) and steps[-1] == 1 and all(s == 0 for s in steps[:-1])


def _aligned(op: affine.LoadOp | affine.StoreOp, iv: SSAValue, width: int) -> bool:
    memory = op.memref.type
    assert isinstance(memory, MemRefType)
    return flat_divisor(memory, op.map.data, list(op.indices), {iv: width}) % width == 0


def element_indices(op: affine.LoadOp | affine.StoreOp) -> list[SSAValue]:
    """The index values of `op`'s element, one `affine.apply` per dimension before it."""
    m = dims_to_operands(op.map.data)
    values: list[SSAValue] = []
    for e in m.results:
        if isinstance(e, AffineDimExpr):  # an index as it is (a double buffer's slot)
            values.append(op.indices[e.position])
            continue
        apply = affine.ApplyOp(list(op.indices), AffineMapAttr(AffineMap(m.num_dims, 0, (e,))))
        Rewriter.insert_op(apply, InsertPoint.before(op))
        values.append(apply.result)
    return values


def _is_linear_thread_id(v: SSAValue, block: tuple[int, int, int]) -> bool:
    """`v` is `x + y * bx + z * bx * by` over the block's thread ids (gpu_mapping.linear_thread_id)."""
    owner = v.owner
    scales = {d: math.prod(block[: k]) for k, d in enumerate(egpu.Dim)}
    if isinstance(owner, egpu.ThreadIdOp):
        return math.prod(block) == block[list(egpu.Dim).index(owner.dimension)]
    if not isinstance(owner, affine.ApplyOp):
        return False
    expected = AffineExpr.constant(0)
    for k, operand in enumerate(owner.mapOperands):
        t = operand.owner
        if not isinstance(t, egpu.ThreadIdOp):
            return False
        expected = expected + AffineExpr.dimension(k) * scales[t.dimension]
    used = {operand.owner.dimension for operand in owner.mapOperands if isinstance(operand.owner, egpu.ThreadIdOp)}
    if used != {d for k, d in enumerate(egpu.Dim) if block[k] > 1}:
        return False
    return owner.map.data.results == (expected,)


def vectorize_copy_loop(kernel: egpu.FuncOp, loop: scf.ForOp, elements: frozenset[Attribute], lanes: int,
                        raw: frozenset[Attribute] = frozenset(), scatter_raw: bool = False) -> int:  # fmt: skip
    """Shape 1 of the module docstring; returns the vector width used (0: left scalar).
    `raw`: element types copied as vectors of their bits although the target computes no
    vectors of them (16-bit floats into a shared tile: up to 8 to a 16-byte vector, which
    `einc-async-copies` makes one cp.async), their pairs only aligned vector pairs, or,
    where `scatter_raw` (the target's copies are plain ones, never asynchronous: HIP), a
    vector load scattered into a transposed tile (a tensor-core operand staged k innermost)."""
    if loop.iter_args or not _is_linear_thread_id(loop.lb, kernel.block_size):
        return 0
    points, threads = constant(loop.ub), constant(loop.step)
    if points is None or threads != math.prod(kernel.block_size):
        return 0
    body = loop.body.block
    iv = body.args[0]
    pairs: list[tuple[affine.LoadOp, affine.StoreOp]] = []
    for op in body.ops:
        if isinstance(op, affine.StoreOp):
            load = op.value.owner
            if not (isinstance(load, affine.LoadOp) and load.parent_block() is body and load.result.uses.get_length() == 1):
                return 0
            if not (isinstance(op.memref.owner, egpu.AllocSharedOp) and _global(kernel, load.memref)):
                return 0
            pairs.append((load, op))
        elif not isinstance(op, affine.ApplyOp | arith.ConstantOp | affine.LoadOp | scf.YieldOp):
            return 0
    if not pairs:
        return 0
    element = pairs[0][0].result.type
    bits = element not in elements
    if (bits and element not in raw) or any(load.result.type != element for load, _ in pairs):
        return 0
    size = element_bytes(element)
    scattered: dict[affine.StoreOp, list[int]] = {}
    for width in (8, 4, 2) if bits else (4, 2):
        if (width > lanes and not bits) or width * size > VECTOR_BYTES or points % width:
            continue
        if not all(_unit_stride(_steps(load, iv, loop, width)) and _aligned(load, iv, width) for load, _ in pairs):
            continue
        # a store moving along its row is one aligned vector store; one moving across rows
        # (a transposed tile: its row is the global column) `width` scalar stores at the
        # steps the lanes move its indices by (an unaligned row stays scalar, a cp.async each)
        store_steps = [(store, _steps(store, iv, loop, width)) for _, store in pairs]
        if all(
            (_aligned(store, iv, width) if _unit_stride(steps) else None not in steps and (scatter_raw or not bits))
            for store, steps in store_steps
        ):
            scattered = {store: [s or 0 for s in steps] for store, steps in store_steps if not _unit_stride(steps)}
            break
    else:
        return 0
    if bits and scattered and len(scattered) == len(pairs):
        plan = row_pairs_plan(loop, pairs, points, width)
        if plan is not None:
            _pair_rows(loop, pairs, plan, width, element, scattered[pairs[0][1]])
            return width
    # the loop now runs over vectors: e = width * v, v < points / width
    new_ub = arith.ConstantOp(IntegerAttr(points // width, IndexType()))
    Rewriter.insert_op(new_ub, InsertPoint.before(loop))
    loop.operands[1] = new_ub.result
    scaled = affine.ApplyOp([iv], AffineMapAttr(AffineMap(1, 0, (AffineExpr.dimension(0) * width,))))
    first = body.first_op
    assert first is not None
    Rewriter.insert_op(scaled, InsertPoint.before(first))
    iv.replace_uses_with_if(scaled.result, lambda use: use.operation is not scaled)
    scaled.result.name_hint = iv.name_hint
    iv.name_hint = "v"
    vector = VectorType(element, [width])
    for load, store in pairs:
        vload = egpu.VLoadOp(load.memref, element_indices(load), vector)
        vload.attributes[ALIGN_ATTR] = IntegerAttr(width * size, i64)
        Rewriter.insert_op(vload, InsertPoint.before(load))
        if store in scattered:
            _scatter(vload.result, store, scattered[store], width)
            Rewriter.erase_op(store)
            Rewriter.erase_op(load)
            continue
        vstore = egpu.VStoreOp(vload.result, store.memref, element_indices(store))
        vstore.attributes[ALIGN_ATTR] = IntegerAttr(width * size, i64)
        Rewriter.insert_op(vstore, InsertPoint.before(store))
        Rewriter.erase_op(store)
        Rewriter.erase_op(load)
    return width


WORD_BYTES = 4
BANKS = 32
"""Shared memory's banks (32 of 4 bytes on every CUDA/HIP device einc targets), for the
lane order of `row_pairs_plan`."""


def _evaluate(v: SSAValue, env: dict[SSAValue, int]) -> int | None:
    """`v`'s value where the values in `env` take theirs (through `affine.apply` and
    constants); None where it depends on anything else."""
    if v in env:
        return env[v]
    owner = v.owner
    if isinstance(owner, arith.ConstantOp) and isinstance(owner.value, IntegerAttr):
        return owner.value.value.data
    if isinstance(owner, affine.ApplyOp):
        args = [_evaluate(o, env) for o in owner.mapOperands]
        if any(a is None for a in args):
            return None
        return owner.map.data.eval([a for a in args if a is not None], [])[0]
    return None


def _depends(v: SSAValue, iv: SSAValue) -> bool:
    if v is iv:
        return True
    owner = v.owner
    return isinstance(owner, affine.ApplyOp) and any(_depends(o, iv) for o in owner.mapOperands)


@dataclass(frozen=True)
class RowPairs:
    """A transposing copy's chunks of `depth` consecutive source rows (`cols` elements of
    the copy's order apart) by `width` columns, and the order of the chunks over the
    threads: `block` row-groups at a time, then the column groups (`groups` of them)."""

    cols: int
    depth: int
    block: int
    groups: int
    rows: int


def row_pairs_plan(loop: scf.ForOp, pairs: list[tuple[affine.LoadOp, affine.StoreOp]], points: int,
                   width: int, depth: int = 2) -> RowPairs | None:  # fmt: skip
    """Whether a copy of 16-bit elements whose `width`-element vector loads scatter down a
    transposed tile's rows (each lane's element one row further, the copy's source row the
    tile's innermost index) can take `depth` source rows per thread: each of the tile's
    rows then receives `depth` consecutive elements, one aligned 32-bit (`depth` 2) word,
    where the single 16-bit stores took one word write each for half a word. The chunks'
    order over the threads is the one whose first 32 threads' word writes fall in the
    fewest same-bank different words (`BANKS`), rows before columns on a tie's loss (a
    padded row 34 words long maps column groups 8 rows apart to banks 16 apart: two column
    groups over 16 row pairs cover the 32 banks once, four over 8 twice). None where the
    copy is not that shape, numbers checked element by element (the copy is a tile: a few
    thousand points)."""
    iv = loop.body.block.args[0]
    memory = pairs[0][1].memref.type
    assert isinstance(memory, MemRefType)
    shape = memory.get_shape()
    strides = [math.prod(shape[k + 1:]) for k in range(len(shape))]
    size = element_bytes(memory.get_element_type())
    if size * depth != WORD_BYTES or any(store.memref is not pairs[0][1].memref for _, store in pairs[1:]):
        return None
    store = pairs[0][1]
    m = dims_to_operands(store.map.data)
    operands = list(store.indices)
    if len(pairs) != 1:
        return None
    depends = [_depends(v, iv) for v in operands]
    used = [e.used_dims() for e in m.results]
    moving = [any(depends[d] for d in ds) for ds in used]
    if not moving or not moving[-1] or any(mv and not all(depends[d] for d in ds) for mv, ds in zip(moving, used)):
        return None  # an index mixing the copy's and invariant values: not worked out here
    if any(strides[k] % depth for k, moves in enumerate(moving) if not moves):
        return None  # an invariant index (a double buffer's slot) must keep the words aligned
    env: dict[SSAValue, int] = {}

    def at(e: int) -> tuple[int, ...] | None:
        env[iv] = e
        values = [_evaluate(v, env) if moves else 0 for v, moves in zip(operands, depends)]
        if any(v is None for v in values):
            return None
        results = m.eval([v for v in values if v is not None], [])
        return tuple(r if mv else 0 for r, mv in zip(results, moving))

    table = [at(e) for e in range(points)]
    if any(t is None for t in table):
        return None
    where = [t for t in table if t is not None]

    def next_row(e: int, c: int) -> bool:
        return where[e + c][:-1] == where[e][:-1] and where[e + c][-1] == where[e][-1] + 1

    # the source row's length: the first step of whole vectors that moves element 0 one
    # row down the tile, then checked for every element
    cols = next((c for c in range(width, points, width) if points % c == 0 and next_row(0, c)), None)
    if cols is None or (points // cols) % depth or not all(next_row(e, cols) for e in range(points - cols)):
        return None
    rows, groups = points // cols // depth, cols // width

    def flat(t: tuple[int, ...]) -> int:
        return sum(i * s for i, s in zip(t, strides))

    if any(flat(where[e]) % depth for e in range(points) if e // cols % depth == 0):
        return None  # a row pair's word unaligned (an odd row length)

    def cost(block: int) -> int:
        plan = RowPairs(cols, depth, block, groups, rows)
        lanes = [chunk_start(plan, u, width) for u in range(min(BANKS, rows * groups))]
        total = 0
        for j in range(width):
            words = {flat(where[e + j]) * size // WORD_BYTES for e in lanes}
            per_bank: dict[int, int] = {}
            for w in words:
                per_bank[w % BANKS] = per_bank.get(w % BANKS, 0) + 1
            total += max(per_bank.values()) - 1
        return total

    blocks = [b for b in (1, 2, 4, 8, 16, 32) if rows % b == 0]
    best = min(blocks, key=lambda b: (cost(b), b))
    return RowPairs(cols, depth, best, groups, rows)


def chunk_start(plan: RowPairs, u: int, width: int) -> int:
    """The copy-order index of chunk `u`'s first element (its first row, first column)."""
    low, rest = u % plan.block, u // plan.block
    group, high = rest % plan.groups, rest // plan.groups
    return (high * plan.block + low) * plan.depth * plan.cols + group * width


def _pair_rows(loop: scf.ForOp, pairs: list[tuple[affine.LoadOp, affine.StoreOp]], plan: RowPairs, width: int,
               element: Attribute, steps: list[int]) -> None:  # fmt: skip
    """`row_pairs_plan`'s copy: the loop over chunks (`chunk_start`), `depth` aligned vector
    loads per chunk (its rows) and per column one `depth`-element vector store of the
    rows' lanes (one 32-bit word)."""
    body = loop.body.block
    iv = body.args[0]
    chunks = plan.rows * plan.groups
    new_ub = arith.ConstantOp(IntegerAttr(chunks, IndexType()))
    Rewriter.insert_op(new_ub, InsertPoint.before(loop))
    loop.operands[1] = new_ub.result
    u = AffineExpr.dimension(0)
    low, rest = u % plan.block, u // plan.block
    start = (rest // plan.groups * plan.block + low) * (plan.depth * plan.cols) + (rest % plan.groups) * width
    first = body.first_op
    assert first is not None
    e0 = affine.ApplyOp([iv], AffineMapAttr(AffineMap(1, 0, (start,))))
    Rewriter.insert_op(e0, InsertPoint.before(first))
    iv.replace_uses_with_if(e0.result, lambda use: use.operation is not e0)
    e0.result.name_hint = iv.name_hint
    iv.name_hint = "v"
    load, store = pairs[0]
    size = element_bytes(element)
    vector = VectorType(element, [width])
    rows: list[SSAValue] = []
    first_row = element_indices(load)
    prefix: list[Operation] = []  # the ops computing the first row's indices from e0
    for op in body.ops:
        if op is load:
            break
        prefix.append(op)
    for r in range(plan.depth):
        mapper: dict[SSAValue, SSAValue] = {}
        if r:
            er = affine.ApplyOp([e0.result], AffineMapAttr(AffineMap(1, 0, (AffineExpr.dimension(0) + r * plan.cols,))))
            Rewriter.insert_op(er, InsertPoint.before(load))
            mapper[e0.result] = er.result
            for op in prefix:
                if isinstance(op, affine.ApplyOp) and op is not e0 and any(o in mapper for o in op.operands):
                    clone = op.clone(value_mapper=dict(mapper))
                    Rewriter.insert_op(clone, InsertPoint.before(load))
                    mapper[op.result] = clone.result
        indices = [mapper.get(v, v) for v in first_row]
        vload = egpu.VLoadOp(load.memref, indices, vector)
        vload.attributes[ALIGN_ATTR] = IntegerAttr(width * size, i64)
        Rewriter.insert_op(vload, InsertPoint.before(load))
        rows.append(vload.result)
    word = VectorType(element, [plan.depth])
    base = element_indices(store)
    for k in range(width):
        indices = _moved_indices(base, steps, k, store)
        lanes = [egpu.VExtractOp(row, k) for row in rows]
        splats = [egpu.VBroadcastOp(lane.result, word) for lane in lanes]
        for op in (*lanes, *splats):
            Rewriter.insert_op(op, InsertPoint.before(store))
        packed = egpu.VShuffleOp(splats[0].result, splats[1].result, [0, plan.depth])
        Rewriter.insert_op(packed, InsertPoint.before(store))
        vstore = egpu.VStoreOp(packed.result, store.memref, indices)
        vstore.attributes[ALIGN_ATTR] = IntegerAttr(plan.depth * size, i64)
        Rewriter.insert_op(vstore, InsertPoint.before(store))
    Rewriter.erase_op(store)
    Rewriter.erase_op(load)


def _moved_indices(base: Sequence[SSAValue], steps: list[int], k: int, store: Operation) -> list[SSAValue]:
    """The indices `base` moved by k times their lane steps (`steps`, per dimension): an
    `affine.apply` before `store` for each index that moves."""
    indices: list[SSAValue] = []
    for index, step in zip(base, steps):
        if k == 0 or step == 0:
            indices.append(index)
            continue
        moved = affine.ApplyOp([index], AffineMapAttr(AffineMap(1, 0, (AffineExpr.dimension(0) + k * step,))))
        Rewriter.insert_op(moved, InsertPoint.before(store))
        indices.append(moved.result)
    return indices


def _scatter(vector: SSAValue, store: affine.StoreOp, steps: list[int], width: int) -> None:
    """Lane k of `vector` stored where `store` stores at `e + k`: its indices at `e` plus
    k times their lane steps (`steps`, per dimension), before `store`."""
    base = element_indices(store)
    for k in range(width):
        indices = _moved_indices(base, steps, k, store)
        lane = egpu.VExtractOp(vector, k)
        Rewriter.insert_op(lane, InsertPoint.before(store))
        scalar = affine.StoreOp(lane.result, store.memref, indices, AffineMapAttr(identity_map(len(indices))))
        Rewriter.insert_op(scalar, InsertPoint.before(store))


def _elementwise_failure(kernel: egpu.FuncOp, loop: affine.ForOp, width: int) -> str | None:
    """Why shape 2 of the module docstring does not apply to `loop`, or None."""
    if VECTORIZE_ATTR in loop.attributes or REDUCTION_ATTR in loop.attributes:
        return "marked: einc-vectorize-loops decides"
    lb = loop.lowerBoundMap.data
    if loop.lowerBoundOperands or len(lb.results) != 1 or lb.eval([], [])[0] % width or loop.step.value.data != 1:
        return "bounds"
    trips = trip_count(loop)
    if trips is None or trips < width:
        return "trip count"
    body = loop.body.block
    iv = body.args[0]
    accesses = [op for op in body.ops if isinstance(op, affine.LoadOp | affine.StoreOp)]
    if any(op.regions for op in body.ops) or not any(isinstance(op, affine.StoreOp) for op in accesses):
        return "body"
    stored = {op.memref: op for op in accesses if isinstance(op, affine.StoreOp)}
    for op in accesses:
        steps = _steps(op, iv, loop, width)
        if isinstance(op, affine.StoreOp) and not (_global(kernel, op.memref) and _unit_stride(steps)):
            return "a store that is not a unit-stride global store"
        if op.memref in stored:
            store = stored[op.memref]
            if op.map != store.map or list(op.indices) != list(store.indices):
                return "a stored buffer accessed at another index"
        if _global(kernel, op.memref) and _unit_stride(steps) and not _aligned(op, iv, width):
            return "unaligned"
    return None


def vectorize_elementwise_loop(kernel: egpu.FuncOp, loop: affine.ForOp, target_lanes: int,
                               elements: frozenset[Attribute], math_ops: frozenset[type[Operation]]) -> bool:  # fmt: skip
    """Shape 2 of the module docstring; whether the loop was vectorized."""
    width = min(target_lanes, 4)
    if width < 2 or _elementwise_failure(kernel, loop, width) is not None:
        return False
    done = vectorize_loop(loop, width, elements, math_ops)
    return not isinstance(done, Failure)


def mark_aligned(kernel: egpu.FuncOp) -> int:
    """Shape 3: mark the global vector accesses whose index is a multiple of their width;
    returns how many."""
    made = 0
    for op in kernel.walk():
        if not isinstance(op, egpu.VLoadOp | egpu.VStoreOp) or ALIGN_ATTR in op.attributes:
            continue
        if not _global(kernel, op.memref):
            continue
        t = op.result.type if isinstance(op, egpu.VLoadOp) else op.value.type
        memory = op.memref.type
        assert isinstance(t, VectorType) and isinstance(memory, MemRefType)
        width, size = t.get_shape()[0], element_bytes(t.get_element_type())
        if size and width * size <= VECTOR_BYTES and flat_divisor(memory, identity_map(len(op.indices)), list(op.indices)) % width == 0:
            op.attributes[ALIGN_ATTR] = IntegerAttr(width * size, i64)
            made += 1
    return made


def _written(kernel: egpu.FuncOp) -> set[SSAValue]:
    """The kernel's arguments something in it writes (or passes to an op that is not a load)."""
    loads = (affine.LoadOp, egpu.VLoadOp, egpu.VLoadRepeatOp)
    return {
        arg for arg in kernel.body.block.args
        if any(not isinstance(use.operation, loads) for use in arg.uses)
    }  # fmt: skip


def combine_input_loads(kernel: egpu.FuncOp, lanes: int) -> int:
    """Shape 4: unrolled scalar loads of consecutive elements of a read-only float32
    argument (a register tile reading a row of an input) become aligned vector loads, as
    `einc-vectorize-shared-loads` does for shared tiles; returns how many."""
    written = _written(kernel)

    def wanted(load: affine.LoadOp) -> bool:
        memory = load.memref.type
        return (
            _global(kernel, load.memref) and load.memref not in written
            and isinstance(memory, MemRefType) and isinstance(memory.get_element_type(), Float32Type)
        )  # fmt: skip

    return vectorize_shared_loads(kernel, [w for w in (4, 2) if w <= lanes], wanted)


def record_alignment(kernel: egpu.FuncOp) -> None:
    """Each argument's `egpu.align`: the widest aligned access of it (the launch contract)."""
    needed: dict[int, int] = {}
    for op in kernel.walk():
        if isinstance(op, egpu.VLoadOp | egpu.VStoreOp) and _global(kernel, op.memref):
            align, arg = op.attributes.get(ALIGN_ATTR), op.memref
            if isinstance(align, IntegerAttr) and isinstance(arg, BlockArgument):
                needed[arg.index] = max(needed.get(arg.index, 0), align.value.data)
    if not needed:
        return
    count = len(kernel.body.block.args)
    attrs = list(kernel.arg_attrs.data) if kernel.arg_attrs is not None else [DictionaryAttr({})] * count
    for index, align in needed.items():
        data = dict(attrs[index].data)
        old = data.get(ALIGN_ATTR)
        if isinstance(old, IntegerAttr):
            align = max(align, old.value.data)
        data[ALIGN_ATTR] = IntegerAttr(align, i64)
        attrs[index] = DictionaryAttr(data)
    kernel.arg_attrs = ArrayAttr(attrs)


def _innermost(kernel: egpu.FuncOp) -> list[affine.ForOp]:
    return [
        op for op in kernel.walk()
        if isinstance(op, affine.ForOp) and not any(isinstance(o, affine.ForOp) for o in op.body.walk())
    ]  # fmt: skip


def pack_narrow_loops(kernel: egpu.FuncOp, arithmetic: frozenset[Attribute] = frozenset()) -> int:
    """Shape 5 (einc.transforms.narrow_access) on every innermost loop it fits, in packed
    16-bit arithmetic where its type is in `arithmetic` and the body allows it; how many."""
    made = 0
    for loop in _innermost(kernel):
        def is_argument(v: SSAValue) -> bool:
            return _global(kernel, v)

        if narrow_loop_failure(loop, is_argument) is None:
            target = loop
        elif (full := version_partial_chunk(loop, is_argument)) is not None:
            target = full
        else:
            continue
        if arithmetic and narrow_arithmetic_failure(target, is_argument, arithmetic) is None:
            pack_narrow_arithmetic(target, is_argument)
        else:
            pack_narrow_loop(target, is_argument)
        made += 1
    return made


def vectorize_global(kernel: egpu.FuncOp, lanes: int, elements: frozenset[Attribute],
                     math_ops: frozenset[type[Operation]], raw: frozenset[Attribute] = frozenset(),
                     narrow: bool = False, narrow_arithmetic: frozenset[Attribute] = frozenset(),
                     scatter_raw: bool = False) -> None:  # fmt: skip
    """The shapes of the module docstring in `kernel` (5: where `narrow`, in packed 16-bit
    arithmetic for the types in `narrow_arithmetic`), then its arguments' alignment."""
    for loop in [op for op in kernel.walk() if isinstance(op, scf.ForOp)]:
        vectorize_copy_loop(kernel, loop, elements, lanes, raw, scatter_raw)
    for loop in _innermost(kernel):
        vectorize_elementwise_loop(kernel, loop, lanes, elements, math_ops)
    if narrow:
        pack_narrow_loops(kernel, narrow_arithmetic)
    combine_input_loads(kernel, lanes)
    mark_aligned(kernel)
    record_alignment(kernel)


@dataclass(frozen=True)
class VectorizeGlobalPass(TargetedPass):
    name = "einc-vectorize-global"

    target: str = "cuda"
    """Whose vector width and element types apply."""

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        target = self.target_facts()
        elements = target.vector_elements
        if not elements:
            return
        lanes = target.vector_lanes()
        math_ops = target.vector_math | target.lanewise_vector_math
        # 16-bit float tiles copied as 16-byte vectors where they become cp.async (CUDA
        # sm_80+) or a plain 16-byte copy (HIP), never printed as vectors
        copies = self.limits().compute_capability >= 80 or target.plain_vector_copies
        raw = frozenset({f16, bf16}) if target.narrow_shared_tiles and copies else frozenset()
        for kernel in [k for k in op.ops if isinstance(k, egpu.FuncOp)]:
            vectorize_global(kernel, lanes, elements, math_ops, raw, target.packed_narrow_access,
                             target.packed_narrow_arithmetic, target.plain_vector_copies)  # fmt: skip


__all__ = ["VectorizeGlobalPass", "record_alignment", "vectorize_global"]
