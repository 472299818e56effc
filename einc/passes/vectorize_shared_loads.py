"""`einc-vectorize-shared-loads`: scalar loads of consecutive, aligned elements of a
work-group (shared) buffer become one vector load (`egpu.vload`, marked `egpu.align`) and
lane extractions (`egpu.vextract`).

An unrolled register tile reads its operands from shared memory one element at a time:

    %a0 = affine.load %B_shared[%k, %j + %c0] : memref<8x128xf32>     // %c0 = 0
    %a1 = affine.load %B_shared[%k, %j + %c1] : memref<8x128xf32>     // %c1 = 1
    ... (4 in all)

becomes, where the flat index of the first (`%k * 128 + %j`) is provably a multiple of 4
(`%j = %thread_x * 8`):

    %v = egpu.vload %B_shared[%k, %j] {egpu.align = 16} : memref<8x128xf32> -> vector<4xf32>
    %a0 = egpu.vextract %v[0] : vector<4xf32> -> f32   ...

so a GPU reads the four with one 128-bit shared load (`ld.shared.v4.f32` on NVIDIA), four
times fewer load instructions per FMA in the inner loop of a register-tiled matmul.

Which loads: `affine.load`s of a float32 `egpu.alloc_shared` buffer in one block, with no
barrier and no other use of a shared buffer than a load (nested ops included) between them, whose flat
row-major indices are `rest + c`, `rest + c + 1`, ... with the same non-constant `rest`, `c`
a multiple of the width and `rest` a multiple of it for every value its variables take
(einc.transforms.alignment; coefficients times what divides each variable: loop variables by their lower bound and
step, `affine.apply`s by their coefficients, constants by themselves; work-item ids by 1).
Widths 4, then 2, as the target's `vector_width` allows. The printers spell the aligned load
natively where the language has one (CUDA, HIP: a 16- or 8-byte aligned load; shared arrays
are declared aligned to 16 bytes), else as the ordinary vector load. Global buffers are combined
by `einc-vectorize-global`, which calls this with its own choice of loads (the launch
contract aligns a kernel's arguments).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from xdsl.context import Context
from xdsl.dialects import affine, memref
from xdsl.dialects.builtin import AffineMapAttr, Float32Type, IntegerAttr, MemRefType, ModuleOp, VectorType, i64
from xdsl.ir import Block, Operation, SSAValue
from xdsl.passes import ModulePass
from xdsl.rewriter import InsertPoint, Rewriter

from einc.dialects import egpu
from einc.ir.attrs import ALIGN_ATTR
from einc.transforms.affine_index import dims_to_operands
from einc.transforms.alignment import constant, divisor
from einc.transforms.loop_analysis import linear_form, walk_ops
from einc.transforms.staging import linear_map

MAX_DIVISOR = 16


def _divisor(v: SSAValue) -> int:
    """A power of two (at most MAX_DIVISOR) dividing every value `v` takes."""
    return min(divisor(v), MAX_DIVISOR)


def _multiple(terms: dict[SSAValue, int], const: int) -> int:
    g = math.gcd(const, MAX_DIVISOR) or MAX_DIVISOR
    for v, c in terms.items():
        g = math.gcd(g, c * _divisor(v))
    return g or MAX_DIVISOR


def _flat(load: affine.LoadOp) -> tuple[dict[SSAValue, int], int] | None:
    """The flat row-major index of `load` as (terms over non-constant values, constant)."""
    t = load.memref.type
    assert isinstance(t, MemRefType)
    shape = t.get_shape()
    m = dims_to_operands(load.map.data)
    terms: dict[SSAValue, int] = {}
    const = 0
    for d, e in enumerate(m.results):
        form = linear_form(e, list(load.indices))
        if form is None:
            return None
        stride = math.prod(shape[d + 1 :])
        for v, c in form[0].items():
            k = constant(v)
            if k is not None:
                const += c * k * stride
            else:
                terms[v] = terms.get(v, 0) + c * stride
        const += form[1] * stride
    return {v: c for v, c in terms.items() if c}, const


def _dominates(v: SSAValue, point: Operation) -> bool:
    """Whether `v` is available just before `point` (same block: defined earlier)."""
    block = point.parent_block()
    owner = v.owner
    if isinstance(owner, Block):
        return True  # a block argument of an enclosing block (its users are inside)
    if owner.parent_block() is not block:
        return True
    op = point.prev_op
    while op is not None:
        if op is owner:
            return True
        op = op.prev_op
    return False


def _indices(load: affine.LoadOp, at: Operation) -> list[SSAValue] | None:
    """Index values of `load`'s element made just before `at` (constants folded in)."""
    m = dims_to_operands(load.map.data)
    forms = []
    for e in m.results:
        form = linear_form(e, list(load.indices))
        if form is None:
            return None
        terms, const = form
        kept: dict[SSAValue, int] = {}
        for v, c in terms.items():
            k = constant(v)
            if k is None:
                kept[v] = c
            else:
                const += c * k
        forms.append((kept, const))
    operands = list(dict.fromkeys(v for terms, _ in forms for v in terms))
    if not all(_dominates(v, at) for v in operands):
        return None
    values = []
    for form in forms:
        if form[1] == 0 and len(form[0]) == 1 and next(iter(form[0].values())) == 1:
            values.append(next(iter(form[0])))  # the index is a value as it is
            continue
        used = list(form[0])
        apply = affine.ApplyOp(used, AffineMapAttr(linear_map([form], used)))
        Rewriter.insert_op(apply, InsertPoint.before(at))
        values.append(apply.result)
    return values


def _writes_shared(op: Operation) -> bool:
    """A barrier, or a store (of any kind) to a work-group buffer: shared memory may change."""
    if isinstance(op, egpu.BarrierOp):
        return True
    if isinstance(op, affine.StoreOp | memref.StoreOp | egpu.VStoreOp | egpu.StoreTruncfOp):
        return isinstance(op.memref.owner, egpu.AllocSharedOp)
    return not isinstance(op, affine.LoadOp | memref.LoadOp | egpu.VLoadOp | egpu.VLoadRepeatOp | egpu.LoadExtfOp) and any(
        isinstance(o.owner, egpu.AllocSharedOp) for o in op.operands
    )


def shared_f32(load: affine.LoadOp) -> bool:
    """A load of a float32 work-group buffer."""
    memory = load.memref.type
    return isinstance(load.memref.owner, egpu.AllocSharedOp) and isinstance(memory, MemRefType) and isinstance(
        memory.get_element_type(), Float32Type
    )


def _segments(block: Block, wanted: Callable[[affine.LoadOp], bool]) -> list[list[affine.LoadOp]]:
    """Runs of `wanted` loads in `block` between barriers and writes to shared memory."""
    runs: list[list[affine.LoadOp]] = [[]]
    for op in block.ops:
        if isinstance(op, affine.LoadOp):
            if wanted(op):
                runs[-1].append(op)
        elif any(_writes_shared(inner) for inner in walk_ops(op)):
            runs.append([])
    return [r for r in runs if len(r) > 1]


def vectorize_shared_loads(
    kernel: egpu.FuncOp, widths: Sequence[int], wanted: Callable[[affine.LoadOp], bool] = shared_f32
) -> int:
    """Combine the loads of `kernel` (module docstring); returns how many vector loads.
    `wanted`: which loads (float32 ones of buffers nothing writes between barriers or shared
    stores: `einc-vectorize-global` passes the kernel's read-only float32 arguments)."""
    made = 0
    blocks = [b for op in walk_ops(kernel) for r in op.regions for b in r.blocks]
    for block in blocks:
        for run in _segments(block, wanted):
            groups: dict[tuple[SSAValue, frozenset[tuple[SSAValue, int]]], dict[int, list[affine.LoadOp]]] = {}
            for load in run:
                flat = _flat(load)
                if flat is None:
                    continue
                terms, const = flat
                groups.setdefault((load.memref, frozenset(terms.items())), {}).setdefault(const, []).append(load)
            for (buffer, terms), by_const in groups.items():
                done: set[int] = set()
                for width in widths:
                    for c in sorted(by_const):
                        lanes = range(c, c + width)
                        if c % width or any(k in done or k not in by_const for k in lanes):
                            continue
                        if _multiple(dict(terms), c) % width:
                            continue
                        loads = [op for k in lanes for op in by_const[k]]
                        first = min(loads, key=lambda o: run.index(o))
                        indices = _indices(by_const[c][0], first)
                        if indices is None:
                            continue
                        memory = buffer.type
                        assert isinstance(memory, MemRefType)
                        element = memory.get_element_type()
                        vload = egpu.VLoadOp(buffer, indices, VectorType(element, [width]))
                        vload.attributes[ALIGN_ATTR] = IntegerAttr(width * 4, i64)
                        Rewriter.insert_op(vload, InsertPoint.before(first))
                        for lane, k in enumerate(lanes):
                            for op in by_const[k]:
                                extract = egpu.VExtractOp(vload.result, lane)
                                Rewriter.replace_op(op, extract)
                        done.update(lanes)
                        made += 1
    return made


@dataclass(frozen=True)
class VectorizeSharedLoadsPass(ModulePass):
    name = "einc-vectorize-shared-loads"

    width: int = 4
    """The widest vector load (the target's vector width); 4 and 2 are tried, up to it."""

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        widths = [w for w in (4, 2) if w <= self.width]
        for kernel in op.ops:
            if isinstance(kernel, egpu.FuncOp):
                vectorize_shared_loads(kernel, widths)
