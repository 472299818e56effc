"""`crash-deep-nest`: a loop-interchange analysis with a fixed-size table of 6 loop levels:
an IndexError on a nest 7 deep (a 2-D convolution's N, F, H, W, C, KH, KW), fine on
shallower nests."""

from dataclasses import dataclass

from xdsl.dialects import affine
from xdsl.passes import ModulePass


@dataclass(frozen=True)
class CrashDeepNest(ModulePass):
    """Analyse loop nests with a 6-entry table (crashes on deeper ones)."""

    name = "crash-deep-nest"

    def apply(self, ctx, op):
        table = [0] * 6
        for loop in op.walk():
            if isinstance(loop, affine.ForOp):
                depth, parent = 0, loop.parent_op()
                while parent is not None:
                    depth += isinstance(parent, affine.ForOp)
                    parent = parent.parent_op()
                table[depth] += 1
