"""Staging a tensor's tile in a local/shared buffer (`transform.einc.cache_read/_write`).

Not implemented yet: the ops parse, verify and are refused with a ScheduleError at the op, so
a schedule using them never produces wrong code. The intended mechanism: the footprint box of
the tensor's affine accesses inside the loop (outer terms fixed, inner ranges from
loop_analysis), a `memref.alloca` of that box at the top of the loop body, a copy-in nest
(and copy-out for writes), and the accesses redirected with the box offset subtracted.
"""

from __future__ import annotations

from xdsl.dialects import affine

from einc.passes.utils.loop_transforms import Failure, describe


def cache_tensor(loop: affine.ForOp, tensor: str, write: bool, memory: str) -> Failure:
    kind = "cache_write" if write else "cache_read"
    return Failure(f"{kind} of '{tensor}' at {describe(loop)} in {memory} memory is not implemented yet")
