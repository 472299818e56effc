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


def _scatter(vector: SSAValue, store: affine.StoreOp, steps: list[int], width: int) -> None:
    """Lane k of `vector` stored where `store` stores at `e + k`: its indices at `e` plus
    k times their lane steps (`steps`, per dimension), before `store`."""
    base = element_indices(store)
    for k in range(width):
        indices: list[SSAValue] = []
        for index, step in zip(base, steps):
            if k == 0 or step == 0:
                indices.append(index)
                continue
            moved = affine.ApplyOp([index], AffineMapAttr(AffineMap(1, 0, (AffineExpr.dimension(0) + k * step,))))
            Rewriter.insert_op(moved, InsertPoint.before(store))
            indices.append(moved.result)
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
