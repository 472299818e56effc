"""`einc-stream-stores`: checks the stores `transform.einc.stream_stores` marked non-temporal
(`einc.stream`) once the C pipeline has decided them: each must be a vector store of 16, 32 or
64 bytes (`einc-vectorize-loops` vectorized the copy-out) into an output the kernel never reads
(`einc-init-accumulators` started the tile at zero, no copy-in left); a refusal is a
ScheduleError at the schedule op (einc.transforms.stream_stores.check_stream_stores). The
kernel is unchanged: the C printer reads the mark.
"""

from __future__ import annotations

from xdsl.context import Context
from xdsl.dialects.builtin import ModuleOp
from xdsl.passes import ModulePass

from einc.transforms.stream_stores import check_stream_stores


class StreamStoresPass(ModulePass):
    name = "einc-stream-stores"

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        check_stream_stores(op)


__all__ = ["StreamStoresPass"]
