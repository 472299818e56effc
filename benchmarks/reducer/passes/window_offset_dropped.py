"""`window-offset-dropped`: an index simplification that drops the last added loop index of
an unguarded load's subscript (`h + kh` read as `h`), as if windows always started at their
origin (it leaves guarded loads, a padded border, alone). Wrong on unpadded convolutions and
poolings (a window over a tensor), right on matmuls and element-wise code."""

from dataclasses import dataclass

from xdsl.dialects import affine, scf
from xdsl.dialects.builtin import AffineMapAttr
from xdsl.ir.affine import AffineBinaryOpExpr, AffineBinaryOpKind, AffineDimExpr, AffineMap
from xdsl.passes import ModulePass


def _dropped(expr):
    if isinstance(expr, AffineBinaryOpExpr) and expr.kind == AffineBinaryOpKind.Add:
        if isinstance(expr.rhs, AffineDimExpr):
            return expr.lhs
        inner = _dropped(expr.lhs)
        if inner is not None:
            return AffineBinaryOpExpr(AffineBinaryOpKind.Add, inner, expr.rhs)
    return None


@dataclass(frozen=True)
class WindowOffsetDropped(ModulePass):
    """Drop the last added loop index of each load subscript (wrong on purpose)."""

    name = "window-offset-dropped"

    def apply(self, ctx, op):
        for load in list(op.walk()):
            if not isinstance(load, affine.LoadOp) or isinstance(load.parent_op(), scf.IfOp):
                continue
            old = load.map.data
            results = [(_dropped(e) or e) for e in old.results]
            if results != list(old.results):
                load.properties["map"] = AffineMapAttr(AffineMap(old.num_dims, old.num_symbols, tuple(results)))
