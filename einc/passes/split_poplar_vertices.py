"""`split-poplar-vertices`: decide how each kernel spreads over the IPU's tiles and record it
as the kernel's `egpu.tile_split` attribute (`#egpu.tile_split<...>`), which the Poplar
printer prints. The last pass of the Poplar pipeline (after vectorizing and cleanup: it
reads the final loop and accesses).

    egpu.func @kernel_y(...) grid [1, 1, 1] block [6, 1, 1] attributes {egpu.tile_split =
        #egpu.tile_split<vertices = 7, bytes = 1296, points = 300, chunk = 43,
                         written = [1 at 1 * point + 0], read = [...]>} { ... }

Policy: a kernel that may be split (einc/transforms/vertex_split.py, with its contract)
gets at least POINTS_PER_WORKER points per worker, on at most the description's `tiles`
vertices, unless a vertex's data do not fit its tile's `tile_memory`: then the points are
cut into more vertices (a power of two or the most, up to one word's worth of points per
vertex) until they fit; when no range of points fits (a column or window of an input read
as the hull of its rows), the points are cut into boxes (einc/transforms/vertex_boxes.py).
A kernel that cannot be split is one vertex on tile 0. When no choice fits, a TargetError
names the bytes and the limit (and a gathered table larger than a tile).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from xdsl.context import Context
from xdsl.dialects.builtin import MemRefType, ModuleOp, StringAttr
from xdsl.ir import SSAValue

from einc.dialects import egpu
from einc.errors import SourceLocation, TargetError
from einc.transforms.staging import staged_location
from einc.transforms.vertex_boxes import BoxSpace, point_shape
from einc.transforms.vertex_split import element_bytes, splittable, unsplit, whole_reads
from einc.passes.targeted import TargetedPass
from einc.targets.descriptions import KernelError, TargetDescription

POINTS_PER_WORKER = 8
"""Fewest points a split gives each worker of a vertex when memory allows: a vertex's start
costs hundreds of cycles and each tile's inputs an exchange, so a tile is only worth taking
for several points per worker."""


def _memory_error(kernel: egpu.FuncOp, needed: int, limit: int, tiles: int) -> TargetError:
    """At the schedule op that made the kernel's largest local array when the vertex fits
    without its local arrays, else (a KernelError) at the statement the kernel computes."""
    spread = f" spread over {tiles} tiles" if tiles > 1 else " on one tile"
    gathers = [
        f"'{_name(kernel, k)}' ({_whole_bytes(a)} bytes)"
        for k, a in enumerate(kernel.body.block.args)
        if k in whole_reads(kernel) and _whole_bytes(a) > limit
    ]
    reason = (
        f"; it reads {', '.join(gathers)} at indices known only when it runs (a gather), "
        "whole on every tile, and a table larger than a tile is not spread over tiles"
        if gathers else ""
    )
    message = (f"poplar target: kernel {kernel.sym_name.data} needs {needed} bytes of tile memory per "
               f"vertex{spread} (its inputs, outputs and local arrays), more than a tile's {limit} bytes"
               f"{reason}")  # fmt: skip
    loc = staged_location(kernel) if needed - kernel.private_bytes() <= limit else None
    if loc is not None:
        return TargetError(message, loc)
    return KernelError(message, SourceLocation("<target>", 1, 1), kernel.written_tensor(), kernel.location)


def _name(kernel: egpu.FuncOp, k: int) -> str:
    attrs = kernel.arg_attrs.data if kernel.arg_attrs is not None else ()
    name = attrs[k].data.get("ein.name") if k < len(attrs) else None
    return name.data if isinstance(name, StringAttr) else f"argument {k}"


def _whole_bytes(arg: SSAValue) -> int:
    assert isinstance(arg.type, MemRefType)
    return math.prod(arg.type.get_shape()) * element_bytes(arg.type)


def tile_split(kernel: egpu.FuncOp, desc: TargetDescription) -> egpu.TileSplit:
    """The kernel's split: in ranges of points, the preferred vertex count when it fits, else
    the fewest vertices that fit; else in boxes (`BoxSpace.search`); TargetError when none
    fits (or when an unsplit kernel's vertex does not fit)."""
    space = splittable(kernel, desc.write_granule)
    if space is None:
        alone = unsplit(kernel)
        if alone.bytes > desc.tile_memory:
            raise _memory_error(kernel, alone.bytes, desc.tile_memory, 1)
        return alone
    total, block = space.points, kernel.block_size[0]
    preferred = min(desc.tiles, -(-total // (block * POINTS_PER_WORKER)))
    most = min(desc.tiles, -(-total // space.words))
    needed, spread = 0, 1
    candidates = sorted({preferred, most, *(v for v in (2**e for e in range(11)) if preferred < v < most)})
    for vertices in candidates:
        split = unsplit(kernel) if vertices < 2 else space.split(vertices)
        needed, spread = split.bytes, split.vertices
        if needed <= desc.tile_memory:
            return split
    shape = point_shape(space, desc.write_granule)
    if shape is not None:
        boxes = BoxSpace(space, shape).search(desc.tile_memory, desc.tiles, preferred)
        if boxes is not None:
            return boxes
    raise _memory_error(kernel, needed, desc.tile_memory, spread)


@dataclass(frozen=True)
class SplitPoplarVerticesPass(TargetedPass):
    name = "split-poplar-vertices"
    default_target = "poplar"

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        desc = self.limits()
        for kernel in op.ops:
            if isinstance(kernel, egpu.FuncOp):
                kernel.attributes["egpu.tile_split"] = egpu.TileSplitAttr(tile_split(kernel, desc))
