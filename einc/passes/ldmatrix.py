"""`einc-ldmatrix`: a warp's tensor-core fragments read from shared memory with `ldmatrix`.

`egpu.mma` (einc.dialects.egpu_mma) on CUDA gathers each lane's A and B fragments element by
element (two 16-bit loads per 32-bit register: 8 for A, 8 for B per 16-wide k step). Where
an operand is a shared tile (`egpu.alloc_shared`) of 16-bit elements whose rows of 8
elements are contiguous and 16-byte aligned, PTX's `ldmatrix.sync.aligned.m8n8.x4.shared.b16`
(sm_75+) loads the four 8 x 8 matrices of a fragment in one instruction, each lane giving
the address of one row: without `.trans` where the operand's k dimension is its contiguous
one (A `[m, k]`, a transposed B `[n, k]`), with `.trans` where the other is (A `[k, m]`,
B `[k, n]`). The op is marked `egpu.ldmatrix = {a = "x4" | "x4.trans", b = ...}` for the
operands that qualify; the CUDA printer (einc.targets.tensor_cores) spells the loads.

Qualifies: 32 lanes (`mma.m16n8k16`), the operand in shared memory, 16-bit elements, one of
its two fragment dimensions at stride 1, the other's stride a multiple of 8 elements, and
the flat index of the tile's base a multiple of 8 for every value its variables take
(einc.transforms.alignment). Anything else keeps the element-wise gathers (same numbers:
the instruction moves the same elements into the same registers).

HIP's MFMA (`mfma.16x16x16`, 64 lanes) has no such instruction, but each lane's operand is
4 consecutive k elements of one row (A row lane % 16, B column lane % 16, k from
4 (lane / 16)): where the operand's k dimension is at stride 1, its other dimension's stride
a multiple of 4 elements and its tile's base a multiple of 4 (8 bytes; shared tiles are
16-byte aligned), they are one 8-byte vector load (`ds_read_b64` from shared memory): the
operand is marked "v4", and the HIP printer loads the lane's `einc_x4` at once.
"""

from __future__ import annotations

from dataclasses import dataclass

from xdsl.context import Context
from xdsl.dialects.builtin import (
    BFloat16Type,
    DictionaryAttr,
    Float16Type,
    IntegerType,
    MemRefType,
    ModuleOp,
    StringAttr,
)
from xdsl.passes import ModulePass

from einc.dialects.egpu_kernel import AllocSharedOp
from einc.dialects.egpu_mma import MmaOp
from einc.ir.attrs import LDMATRIX_ATTR
from einc.transforms.alignment import flat_divisor, identity_map, strides

ROW = 8
"""Elements in one ldmatrix row (16 bytes of 16-bit elements)."""
MFMA_LANES = 64
"""A wavefront: `egpu.mma`'s lanes on HIP (MFMA)."""
MFMA_VECTOR = 4
"""Consecutive k elements of one lane's MFMA operand (8 bytes)."""


def ldmatrix_mode(op: MmaOp, which: str) -> str | None:
    """"x4" or "x4.trans" (CUDA) or "v4" (HIP) where operand `which` ("a" or "b") qualifies
    (module docstring)."""
    buffer, indices = (op.a, op.a_indices) if which == "a" else (op.b, op.b_indices)
    memory = buffer.type
    if op.lanes.value.data not in (32, MFMA_LANES) or not isinstance(buffer.owner, AllocSharedOp) or not isinstance(memory, MemRefType):
        return None
    element = memory.get_element_type()
    if not (isinstance(element, Float16Type | BFloat16Type) or (isinstance(element, IntegerType) and element.width.data == 16)):
        return None
    first, second = op.dims(which)
    rows, k = (first, second) if which == "a" else (second, first)  # A [m, k], B [k, n]
    stride = strides(memory)
    if op.lanes.value.data == MFMA_LANES:  # a lane's 4 consecutive k elements: one vector
        if stride[k] != 1 or stride[rows] % MFMA_VECTOR or flat_divisor(memory, identity_map(len(indices)), list(indices)) % MFMA_VECTOR:
            return None
        return "v4"
    if stride[k] == 1 and stride[rows] % ROW == 0:
        mode = "x4"
    elif stride[rows] == 1 and stride[k] % ROW == 0:
        mode = "x4.trans"
    else:
        return None
    if flat_divisor(memory, identity_map(len(indices)), list(indices)) % ROW:
        return None
    return mode


def mark_ldmatrix(module: ModuleOp) -> int:
    """Mark the `egpu.mma` operands that `ldmatrix` reads; returns how many."""
    done = 0
    for op in module.walk():
        if isinstance(op, MmaOp):
            modes = {w: m for w in ("a", "b") if (m := ldmatrix_mode(op, w)) is not None}
            if modes:
                op.attributes[LDMATRIX_ATTR] = DictionaryAttr({w: StringAttr(m) for w, m in modes.items()})
                done += len(modes)
    return done


@dataclass(frozen=True)
class LdmatrixPass(ModulePass):
    name = "einc-ldmatrix"

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        mark_ldmatrix(op)


__all__ = ["LdmatrixPass", "ldmatrix_mode", "mark_ldmatrix"]
