"""Non-temporal stores of an output tile's copy-out (`transform.einc.stream_stores %tile`).

A tile staged with `cache_write` (registers or a stack array: a matmul's 4 x 64 accumulator
tile) is written back to the output once, after its reduction loop, and nothing in the kernel
reads those elements again. Stored non-temporally (x86 `vmovntps`, `_mm512_stream_ps`), the
lines go to memory through the write-combining buffers without being read for ownership
first and without evicting the inputs from the caches: on the 2-core Xeon of issue 26,
1.06-1.11 on 512x32x512 and batched A V at batch 16 (README, "Where the 4 x 4 matmuls' time
goes on the Xeon").

`mark_stream_stores` (the schedule op) marks the tile's copy-out stores `einc.stream` (with the
op's location); `check_stream_stores` (`einc-stream-stores`, C pipeline, after
`einc-vectorize-loops`) refuses, at the schedule op, a marked store that did not become a
vector store of 16, 32 or 64 bytes, or an output the kernel reads back (a tile copied in
because `einc-init-accumulators` could not start it at zero: a tile inside the reduction loop,
or `+=` into an output that is also read); the C printer calls a helper storing with
`vmovntps` where the address is aligned to the vector's size and with a plain store where it
is not (a caller's output 16 bytes past a line: no fault, same numbers), and ends every
function holding such stores with `sfence` (the streaming stores are weakly ordered: they are
visible to other threads only after it). Other targets print plain stores (a hint, as
`prefetch`).

Refused at the op: a handle that is not a local `cache_write` tile, a tile whose copy-out
writes a buffer that is not a kernel argument, an output read elsewhere in the kernel than
by this tile's copy-in.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import cast

from xdsl.dialects import affine, func, memref
from xdsl.dialects.builtin import MemRefType, StringAttr, VectorType
from xdsl.ir import Attribute, BlockArgument, Operation, SSAValue
from xdsl.ir.affine import AffineExpr

from einc.dialects import egpu
from einc.errors import ScheduleError, SourceLocation
from einc.ir.attrs import MEMORY_ATTR, STREAM_ATTR, VECTORIZE_ATTR, vector_bytes
from einc.transforms.coalesce import coalesce_loops
from einc.transforms.loop_analysis import buffer_name, constant_bounds, induction_var, linear_form, step_of
from einc.transforms.loop_build import Failure

STREAM_BYTES = (16, 32, 64)
"""The vector sizes a non-temporal store takes (SSE, AVX, AVX-512)."""

_STORES = (affine.StoreOp, memref.StoreOp, egpu.VStoreOp)


def _reads(buffer: SSAValue) -> list[Operation]:
    """The ops using `buffer` other than as the destination of a store."""
    return [u.operation for u in buffer.uses
            if not (isinstance(u.operation, _STORES) and u.operation.operands[1] is buffer and u.index == 1)]  # fmt: skip


def mark_stream_stores(alloca: Operation, loc: str) -> int | Failure:
    """Mark the copy-out stores of the `cache_write` tile `alloca` non-temporal
    (`einc.stream` = `loc`); the number marked, or why not."""
    if not isinstance(alloca, memref.AllocaOp):
        return Failure(f"stream_stores expects a staged tile (the handle of a cache_write), got '{alloca.name}'")
    name = buffer_name(alloca.memref)
    if alloca.attributes.get(MEMORY_ATTR) == StringAttr("shared"):
        return Failure(f"cannot stream the stores of '{name}': it is staged in shared memory")
    outs = [u.operation for u in alloca.memref.uses
            if isinstance(u.operation, affine.LoadOp)
            for s in u.operation.result.uses
            if isinstance(s.operation, affine.StoreOp) and s.index == 0 and s.operation.memref is not alloca.memref]  # fmt: skip
    stores = [s.operation for load in outs for s in load.results[0].uses if isinstance(s.operation, affine.StoreOp)]
    if not stores:
        return Failure(f"cannot stream the stores of '{name}': no copy-out writes it back "
                       "(stream_stores takes the handle of a cache_write)")  # fmt: skip
    target = stores[0].memref
    assert isinstance(stores[0], affine.StoreOp)
    tensor = buffer_name(target)
    if not isinstance(target, BlockArgument) or not isinstance(target.owner.parent_op(), func.FuncOp):
        return Failure(f"cannot stream the stores of '{name}': its copy-out writes '{tensor}', not a kernel argument")
    copy_in = {u.operation for u in target.uses if isinstance(u.operation, affine.LoadOp)
               and any(isinstance(s.operation, affine.StoreOp) and s.operation.memref is alloca.memref
                       for s in u.operation.result.uses)}  # fmt: skip
    read = [op for op in _reads(target) if op not in copy_in]
    if read:
        return Failure(f"cannot stream the stores of '{name}': the kernel reads '{tensor}' back "
                       "(a streamed line leaves the caches: stream only outputs written once)")  # fmt: skip
    for store in stores:
        store.attributes[STREAM_ATTR] = StringAttr(loc)
    return len(stores)


def contiguous_run(tile: Sequence[int], tensor: Sequence[int]) -> int:
    """The elements of a `tile`-shaped box of a row-major `tensor` that lie contiguously in it:
    the product of the tile's last extent and, going outwards, each next one while every
    extent inside it spans the tensor's whole dimension (two whole rows of 56 of a [.., 56, 56]
    output: 112)."""
    run = 1
    for d in range(len(tile) - 1, -1, -1):
        run *= tile[d]
        if tile[d] != tensor[d]:
            break
    return run


def _copy_loops(far: affine.StoreOp, near: affine.LoadOp) -> list[affine.ForOp] | None:
    """The copy nest of a tile (one loop per dimension, in order) whose innermost loop holds
    `near` (the tile's access, indexed by the loops' variables) and `far` (the output's,
    offset by them, each with coefficient 1), or None where it is not that plain shape (a
    guarded or clamped copy)."""
    tile_type, out_type = near.memref.type, far.memref.type
    if not isinstance(tile_type, MemRefType) or not isinstance(out_type, MemRefType):
        return None
    tile = list(tile_type.get_shape())
    loops: list[affine.ForOp] = []
    op = far.parent_op()
    while isinstance(op, affine.ForOp) and len(loops) < len(tile):
        loops.insert(0, op)
        op = op.parent_op()
    if len(loops) != len(tile) or far.parent_op() is not near.parent_op():
        return None
    ivs = [induction_var(loop) for loop in loops]
    if list(near.indices) != ivs or any(e != AffineExpr.dimension(d) for d, e in enumerate(near.map.data.results)):
        return None
    for d, (loop, e) in enumerate(zip(loops, far.map.data.results)):
        form = linear_form(e, list(far.indices))
        if (form is None or constant_bounds(loop) != (0, tile[d]) or step_of(loop) != 1
                or any(c != (1 if v is ivs[d] else 0) for v, c in form[0].items() if v in ivs)
                or form[0].get(ivs[d]) != 1):  # fmt: skip
            return None
    return loops


def coalesce_stream_copies(root: Operation) -> int:
    """The copy-out nest of each tile whose stores `stream_stores` marked, coalesced
    (`coalesce_loops`) over the dimensions whose elements run on contiguously in the tile and
    the output, as `contiguous_run` finds them: a tile of whole output rows is copied out as
    one run, so each vector store starts a multiple of the vector from the tile's start (two
    rows of 56 floats: 7 stores of 16, each on a 64-byte line where the first is; row by row,
    the second row's stores straddle lines and cannot stream). Run after
    `einc-init-accumulators` (which matches a tile's copy-in and copy-out nests loop by loop)
    and before `einc-vectorize-loops`; a nest of another shape (guarded, clamped, in a layout
    of its own) is left as it is. The number of nests coalesced."""
    done = 0
    for store in [op for op in root.walk() if isinstance(op, affine.StoreOp) and STREAM_ATTR in op.attributes]:
        load = store.value.owner
        if isinstance(load, affine.LoadOp) and _coalesce_copy(store, load):
            done += 1
    return done


def _coalesce_copy(far: affine.StoreOp, near: affine.LoadOp) -> bool:
    """The copy-out nest (`_copy_loops`) of `far` coalesced over its contiguous run; whether it was."""
    loops = _copy_loops(far, near)
    tile = list(cast("MemRefType[Attribute]", near.memref.type).get_shape())
    if not loops or not tile:  # not a copy nest, or a scalar's: nothing to coalesce
        return False
    out_type = cast("MemRefType[Attribute]", far.memref.type)
    run = contiguous_run(tile, list(out_type.get_shape()))
    first = len(tile) - 1
    size = tile[first]
    while size < run:
        first -= 1
        size *= tile[first]
    if first == len(tile) - 1:
        return False
    inner = loops[-1]
    vectorize = inner.attributes.pop(VECTORIZE_ATTR, None)
    merged = coalesce_loops(loops[first], len(tile) - first)
    if isinstance(merged, Failure):  # the checks above leave none; the nest stays as it was
        if vectorize is not None:
            inner.attributes[VECTORIZE_ATTR] = vectorize
        return False
    if vectorize is not None:
        merged.attributes[VECTORIZE_ATTR] = vectorize
    return True


def check_stream_stores(root: Operation) -> None:
    """Refuse (a ScheduleError at the `stream_stores` op) a store marked `einc.stream` that is
    not a vector store of 16, 32 or 64 bytes into a kernel argument, or whose buffer the
    kernel reads; run after `einc-init-accumulators` and `einc-vectorize-loops`."""
    for op in root.walk():
        mark = op.attributes.get(STREAM_ATTR)
        if not isinstance(mark, StringAttr):
            continue
        loc = SourceLocation.parse(mark.data) if mark.data else None
        buffer = op.operands[1] if isinstance(op, _STORES) else None
        tensor = buffer_name(buffer) if buffer is not None else op.name
        if not isinstance(op, egpu.VStoreOp):
            raise ScheduleError(f"stream_stores: a store into '{tensor}' is not a vector store (a non-temporal "
                                "store writes a whole vector: vectorize the copy-out, its rows a multiple of "
                                "the vector)", loc)  # fmt: skip
        t = op.value.type
        assert isinstance(t, VectorType) and isinstance(op.memref.type, MemRefType)
        if vector_bytes(t) not in STREAM_BYTES:
            raise ScheduleError(f"stream_stores: a store into '{tensor}' writes a vector of {vector_bytes(t)} bytes "
                                f"(non-temporal stores take {', '.join(map(str, STREAM_BYTES))})", loc)  # fmt: skip
        read = _reads(op.memref)
        if read:
            raise ScheduleError(f"stream_stores: the kernel reads '{tensor}' back ('{read[0].name}': its tile is "
                                "copied in, not started at zero; stage it outside the reduction loop)", loc)  # fmt: skip
