"""`einc-async-copies`: global-to-shared copies as asynchronous copies (CUDA `cp.async`).

A shared tile is filled by the block's threads, each loading elements of a global buffer
and storing them into the tile (shared_staging.py):

    %v = affine.load %input1[%K_o + %c0, %M_o + %c1] : memref<256x256xf32>
    affine.store %v, %input1_shared[%c0, %c1] : memref<8x128xf32>

On NVIDIA GPUs from sm_80 (Ampere) on, `cp.async` copies global to shared memory without
passing through registers and without making the thread wait for the load: the copies of
a tile are all in flight at once, and with a double-buffered tile
(transform.einc.double_buffer) the next tile's copies run under the current tile's
compute. Each such load/store pair becomes `egpu.copy_async` (the indices made explicit
with `affine.apply`), and an `egpu.async_wait` goes before every barrier of a kernel that
copies asynchronously: the copies a thread started are complete before the barrier that
publishes them to the block.

Which pairs: an `affine.load` of a kernel argument (global memory) whose only use is an
`affine.store` into an `egpu.alloc_shared` buffer in the same block, inside an `scf.for`
(the copy loops the block's threads split), elements of 4 or 8 bytes; and the same pairs
of an `egpu.vload` and an `egpu.vstore` (`einc-vectorize-global`: consecutive elements,
both addresses aligned to the vector) of 8 or 16 bytes, one `cp.async` of that size. The pass runs only where the target description's `compute_capability` is 80 or
more (CUDA: its code is compiled for sm_80 and sm_90); the printed helper also falls back
to a plain copy when compiled for an older architecture (`__CUDA_ARCH__ < 800`).

Targets without an asynchronous copy whose `plain_vector_copies` is set (HIP) get the vector
pairs alone as `egpu.copy_async`, printed as one plain 16-byte copy (a float16 tile's eight
elements in one load and one store, not eight of each), their waits as nothing.
"""

from __future__ import annotations

from dataclasses import dataclass

from xdsl.context import Context
from xdsl.dialects import affine, scf
from xdsl.dialects.builtin import AnyFloat, IntegerAttr, IntegerType, MemRefType, ModuleOp, VectorType
from xdsl.ir import BlockArgument, Operation
from xdsl.rewriter import InsertPoint, Rewriter

from einc.dialects import egpu
from einc.ir.attrs import ALIGN_ATTR
from einc.passes.targeted import TargetedPass
from einc.passes.vectorize_global import element_indices

ASYNC_BYTES = (4, 8, 16)
"""The sizes one `cp.async` copies: an element of 4 or 8 bytes, or a vector pair."""


def _bytes(memory: MemRefType) -> int:
    element = memory.get_element_type()
    if isinstance(element, AnyFloat):
        return element.bitwidth // 8
    return element.width.data // 8 if isinstance(element, IntegerType) else 0


def _in_copy_loop(op: Operation) -> bool:
    """Inside an `scf.for`: a copy loop the block's threads split (shared_staging.py), whose
    elements are read by others only after a barrier."""
    parent = op.parent_op()
    while parent is not None and not isinstance(parent, egpu.FuncOp):
        if isinstance(parent, scf.ForOp):
            return True
        parent = parent.parent_op()
    return False


def _vector_copy(kernel: egpu.FuncOp, store: egpu.VStoreOp) -> bool:
    """A vector pair of `einc-vectorize-global` (aligned, 4 to 16 bytes) as one copy."""
    shared, load = store.memref, store.value.owner
    if not isinstance(shared.owner, egpu.AllocSharedOp) or not isinstance(load, egpu.VLoadOp):
        return False
    source = load.memref
    if not (isinstance(source, BlockArgument) and source.block is kernel.body.block):
        return False
    if load.parent_block() is not store.parent_block() or load.result.uses.get_length() != 1 or not _in_copy_loop(store):
        return False
    memory, vector = source.type, load.result.type
    assert isinstance(memory, MemRefType) and isinstance(vector, VectorType)
    lanes = vector.get_shape()[0]
    size = _bytes(memory) * lanes
    align = load.attributes.get(ALIGN_ATTR)
    if size not in ASYNC_BYTES or not isinstance(align, IntegerAttr) or align.value.data < size:
        return False
    if store.attributes.get(ALIGN_ATTR) != align:
        return False
    copy = egpu.CopyAsyncOp(source, list(load.indices), shared, list(store.indices), lanes)
    copy.attributes[ALIGN_ATTR] = align
    Rewriter.insert_op(copy, InsertPoint.before(store))
    Rewriter.erase_op(store)
    Rewriter.erase_op(load)
    return True


def make_async_copies(kernel: egpu.FuncOp, vectors_only: bool = False) -> int:
    """Rewrite `kernel`'s global-to-shared copy pairs (module docstring; `vectors_only`: the
    vector pairs alone); returns how many."""
    made = 0
    for vstore in [op for op in kernel.walk() if isinstance(op, egpu.VStoreOp)]:
        made += _vector_copy(kernel, vstore)
    for store in [] if vectors_only else [op for op in kernel.walk() if isinstance(op, affine.StoreOp)]:
        shared, load = store.memref, store.value.owner
        if not isinstance(shared.owner, egpu.AllocSharedOp) or not isinstance(load, affine.LoadOp):
            continue
        source = load.memref
        if not (isinstance(source, BlockArgument) and source.block is kernel.body.block):
            continue
        if load.parent_block() is not store.parent_block() or load.result.uses.get_length() != 1 or not _in_copy_loop(store):
            continue
        memory = source.type
        if not isinstance(memory, MemRefType) or _bytes(memory) not in ASYNC_BYTES:
            continue
        copy = egpu.CopyAsyncOp(source, element_indices(load), shared, element_indices(store))
        Rewriter.insert_op(copy, InsertPoint.before(store))
        Rewriter.erase_op(store)
        Rewriter.erase_op(load)
        made += 1
    if made:
        for barrier in [op for op in kernel.walk() if isinstance(op, egpu.BarrierOp)]:
            Rewriter.insert_op(egpu.AsyncWaitOp(), InsertPoint.before(barrier))
    return made


@dataclass(frozen=True)
class AsyncCopiesPass(TargetedPass):
    name = "einc-async-copies"

    target: str = "cuda"
    """Whose description gives the architecture (`compute_capability`)."""

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        plain = self.target_facts().plain_vector_copies
        if self.limits().compute_capability < 80 and not plain:
            return
        for kernel in op.walk():
            if isinstance(kernel, egpu.FuncOp):
                make_async_copies(kernel, vectors_only=self.limits().compute_capability < 80)


__all__ = ["AsyncCopiesPass", "make_async_copies"]
