"""`einc-tile{stmt=C axis=K size=32}`: strip-mine the loops of one statement's axis.

The policy half of `transform.einc.tile` as a standalone pass: it matches loops by their
`einc.stmt`/`einc.axis` tags and calls the same utility (loop_transforms.tile_loop).
"""

from __future__ import annotations

from dataclasses import dataclass

from xdsl.context import Context
from xdsl.dialects import affine
from xdsl.dialects.builtin import ModuleOp, StringAttr
from xdsl.passes import ModulePass
from xdsl.utils.exceptions import PassFailedException

from einc.transforms.loop_build import Failure
from einc.transforms.loop_transforms import AXIS_ATTR, STMT_ATTR, tile_loop


@dataclass(frozen=True)
class TileLoopsPass(ModulePass):
    name = "einc-tile"

    stmt: str = ""
    axis: str = ""
    size: int = 32

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        loops = [
            loop
            for loop in op.walk()
            if isinstance(loop, affine.ForOp)
            and loop.attributes.get(STMT_ATTR) == StringAttr(self.stmt)
            and loop.attributes.get(AXIS_ATTR) == StringAttr(self.axis)
            and "einc.init" not in loop.attributes
        ]
        if not loops:
            raise PassFailedException(f"einc-tile: no loop {self.axis} of {self.stmt}")
        for loop in loops:
            result = tile_loop(loop, self.size)
            if isinstance(result, Failure):
                raise PassFailedException(f"einc-tile: {result.message}")
