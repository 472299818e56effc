"""`cse-loads`: a CSE of loads that compares the memref but not the indices: two loads of
one tensor at different places in one block read the same element. Wrong on programs that
read a tensor twice in a statement (the attention scores' q and k), right on the others."""

from dataclasses import dataclass

from xdsl.dialects import affine
from xdsl.passes import ModulePass


@dataclass(frozen=True)
class CseLoads(ModulePass):
    """Merge affine.loads of one memref in a block, whatever their indices (wrong on purpose)."""

    name = "cse-loads"

    def apply(self, ctx, op):
        for load in list(op.walk()):
            if not isinstance(load, affine.LoadOp) or load.parent is None:
                continue
            for earlier in load.parent.ops:
                if earlier is load:
                    break
                if isinstance(earlier, affine.LoadOp) and earlier.memref is load.memref and earlier.map != load.map:
                    load.result.replace_all_uses_with(earlier.result)
                    load.detach()
                    load.erase()
                    break
