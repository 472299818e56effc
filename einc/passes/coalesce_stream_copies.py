"""`einc-coalesce-stream-copies`: the copy-out nest of each tile whose stores
`transform.einc.stream_stores` marked non-temporal, coalesced over the dimensions that run on
contiguously in the tile and the output (a tile of two whole rows of 56 floats: one loop of
112, so every vector store of the run starts on a multiple of the vector from the tile's
start and streams; row by row, the second row's stores straddle cache lines). C pipeline,
after `einc-init-accumulators` (which pairs a tile's copy-in and copy-out loop by loop) and
before `einc-vectorize-loops` (einc.transforms.stream_stores.coalesce_stream_copies).
"""

from __future__ import annotations

from xdsl.context import Context
from xdsl.dialects.builtin import ModuleOp
from xdsl.passes import ModulePass

from einc.transforms.stream_stores import coalesce_stream_copies


class CoalesceStreamCopiesPass(ModulePass):
    name = "einc-coalesce-stream-copies"

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        coalesce_stream_copies(op)


__all__ = ["CoalesceStreamCopiesPass"]
