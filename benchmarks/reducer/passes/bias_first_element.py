"""`bias-first-element`: a "uniform load" hoisting that takes a load from a 1-D input as the
same for every index (it reads element 0). Wrong on programs adding a bias vector (MNIST's
dense layers), right on programs without 1-D inputs."""

from dataclasses import dataclass

from xdsl.dialects import affine
from xdsl.dialects.builtin import AffineMapAttr, MemRefType
from xdsl.ir import BlockArgument
from xdsl.ir.affine import AffineConstantExpr, AffineMap
from xdsl.passes import ModulePass


@dataclass(frozen=True)
class BiasFirstElement(ModulePass):
    """Read 1-D inputs at index 0 (wrong on purpose)."""

    name = "bias-first-element"

    def apply(self, ctx, op):
        for load in list(op.walk()):
            if not isinstance(load, affine.LoadOp) or not isinstance(load.memref, BlockArgument):
                continue
            kind = load.memref.type
            if isinstance(kind, MemRefType) and len(kind.get_shape()) == 1:
                old = load.map.data
                load.properties["map"] = AffineMapAttr(AffineMap(old.num_dims, old.num_symbols, (AffineConstantExpr(0),)))
