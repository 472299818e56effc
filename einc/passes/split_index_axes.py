"""`einc-split-index-axes`: a loop whose variable is divided by a constant that divides its
extent is split so the division and the remainder become loop variables.

A grouped convolution reads input channel `co // 16 * 16 + rc`; with `co` (extent 64) split
into `co.q` (0..4) and `co.r` (0..16), `co = 16 * co.q + co.r`, the index is `16 * co.q + rc`
and the output's `16 * co.q + co.r`: affine, unit-stride in `co.r`, so the default
schedules block and vectorize it as they do an ungrouped convolution. Runs in the `loops`
stage of every target (einc.passes.pipeline.LOOPS_PIPELINE), before any schedule.

Policy only (the mechanism is einc.transforms.axis_split): a loop is split by the divisor
that leaves the fewest divisions and remainders of its variable, and only when that is
fewer than before; the two loops are then considered again (`co // 16` and `co % 4` split
`co` by 16, then `co.r` by 4). A division whose dividend may be negative is never reduced
(the language's `//` and `%` are floor division and modulo), so it keeps its loop whole; a
divisor that does not divide the extent is never used. Every other division by a constant
is then reduced where the loop bounds prove it (`(HO * 2 + KH) // 2` with KH in 0..3 is
`HO + KH // 2`: the vector loop over HO no longer divides).
"""

from __future__ import annotations

from dataclasses import dataclass

from xdsl.context import Context
from xdsl.dialects.builtin import ModuleOp
from xdsl.passes import ModulePass

from einc.transforms.axis_split import divided_loops, simplify_maps, split_candidates, split_loop
from einc.transforms.loop_build import Failure


@dataclass(frozen=True)
class SplitIndexAxesPass(ModulePass):
    name = "einc-split-index-axes"

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        work = divided_loops(op)[::-1]  # popped in walk order
        while work:
            loop = work.pop()
            found = [(after, -d) for d, before, after in split_candidates(loop) if after < before]
            if not found:
                continue
            split = split_loop(loop, -min(found)[1])
            if not isinstance(split, Failure):
                work.extend(split)
        simplify_maps(op)
