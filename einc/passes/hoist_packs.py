"""`einc-hoist-packs`: a read-only tile staged inside a parallel loop, whose contents do not
depend on that loop, is packed once per call above it instead of once per iteration.

A convolution at batch > 1 runs the batch as its parallel loop; the default packs the filter
(`cache_read "W"`: a local array filled by a copy-in nest) inside it, once per image, though
the filter is the same for every image. When the copy-in reads only a tensor the function
never writes, through indices of its own loops and of constant-bounded loops between the
parallel loop and the staging point (the "slot" loops, those of the loops between whose
variable the copy-in uses: a transposed convolution's filter tiles `F_o`), every iteration
of the parallel loop packs the same tiles: the pass allocates one heap buffer (`memref.alloc`, one tile per iteration of the slot loops, stacked along the
tile's first dimension) above the parallel loop, packs every slot there with a copy of the slot loops and the copy-in nest, and the
loads of the local array become loads of their slot. Heap, not stack: the packed tiles of a
batch-16 transposed convolution (4 output phases x 2 filter tiles x 64 KiB) are 512 KiB.

    affine.for %n = 0 to 16 {einc.parallel}           %W_pack = memref.alloc() : memref<256x...>
      affine.for %fo = 0 to 64 step 32 {               affine.for %fo = 0 to 64 step 32 {
        %t = memref.alloca() : memref<...>       =>      affine.for %c ... {einc.copy}   // -> %W_pack[%fo * 4 + c0, ...]
        affine.for %c ... {einc.copy}                  }
        ... affine.load %t[...] ...                    affine.for %n = 0 to 16 {einc.parallel}
                                                         affine.for %fo = 0 to 64 step 32 {
                                                           ... affine.load %W_pack[%fo * 4 + i, ...] ...

Mechanism (einc/transforms/hoist_pack.py): `hoist_pack(alloca, parallel)` returns a Failure (the IR unchanged) when the tile
does not qualify (every check before any change): something other than affine loops
between the parallel loop and the staging point, a slot loop without constant bounds, a
copy-in that reads a tensor the function writes or an index computed inside the parallel
loop, the local array written or used otherwise than by affine loads after its copy-in, a
layout, a scalar. Policy (the pass): on CPU targets, every local array
staged inside a top-level parallel loop of more than one iteration, of at least
`MIN_TILE_ELEMENTS` elements, up to `MAX_PACK_ELEMENTS` packed in all (the rest stays
per iteration). The pack costs one pass over the tile per call instead of one per
iteration of the parallel loop; the threads then share it read-only.
"""

from __future__ import annotations

import math

from xdsl.context import Context
from xdsl.dialects import affine, func, memref
from xdsl.dialects.builtin import ModuleOp
from xdsl.passes import ModulePass

from einc.ir.attrs import PARALLEL_ATTR
from einc.transforms.hoist_pack import MAX_PACK_ELEMENTS, hoist_pack
from einc.transforms.ranges import trip_count

MIN_TILE_ELEMENTS = 1 << 10
"""Smaller tiles (under 4 KiB of float32) stay packed per iteration: refilled from L1, their
copy is not worth a heap buffer (the policy's threshold, not the mechanism's)."""


def hoist_packs(function: func.FuncOp) -> None:
    """The policy: every qualifying local array inside a top-level parallel loop of more than
    one iteration."""
    for loop in list(function.body.block.ops):
        if not (isinstance(loop, affine.ForOp) and PARALLEL_ATTR in loop.attributes):
            continue
        if (trip_count(loop) or 0) < 2:  # bounds not constant, or a single iteration
            continue
        for alloca in [op for op in loop.walk() if isinstance(op, memref.AllocaOp)]:
            if math.prod(alloca.memref.type.get_shape()) < MIN_TILE_ELEMENTS:
                continue
            hoist_pack(alloca, loop)  # a Failure leaves the tile packed per iteration


class HoistPacksPass(ModulePass):
    name = "einc-hoist-packs"

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        for function in op.ops:
            if isinstance(function, func.FuncOp) and function.body.blocks:
                hoist_packs(function)


__all__ = ["HoistPacksPass", "MAX_PACK_ELEMENTS", "MIN_TILE_ELEMENTS", "hoist_packs"]
