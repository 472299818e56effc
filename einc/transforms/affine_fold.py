"""Folding `affine.apply` results into the maps of affine loads, stores and applies
(`fold_one_apply`, `fold_applies`), and offsetting a loop body's induction variable
(`_offset_iv`): the clean-up after tiling, unrolling, rfactor and compute_at.
"""

from __future__ import annotations

from collections.abc import Sequence

from xdsl.dialects import affine
from xdsl.dialects.builtin import AffineMapAttr
from xdsl.ir import Block, Operation, SSAValue
from xdsl.ir.affine import AffineExpr, AffineMap
from xdsl.rewriter import Rewriter

from einc.transforms.affine_index import dims_to_operands


def compose(m: AffineMap, operands: Sequence[SSAValue]) -> tuple[AffineMap, list[SSAValue]] | None:
    """Fold the first operand defined by a single-result `affine.apply` into `m`."""
    m = dims_to_operands(m)
    for p, operand in enumerate(operands):
        apply = operand.owner
        if not isinstance(apply, affine.ApplyOp):
            continue
        am = dims_to_operands(apply.map.data)
        rest = [o for k, o in enumerate(operands) if k != p]
        n = len(rest)
        dims = [AffineExpr.dimension(k if k < p else k - 1) for k in range(len(operands))]
        dims[p] = am.results[0].replace_dims_and_symbols(
            [AffineExpr.dimension(n + k) for k in range(am.num_dims)], []
        )
        results = tuple(r.replace_dims_and_symbols(dims, []) for r in m.results)
        return AffineMap(n + am.num_dims, 0, results), [*rest, *apply.mapOperands]
    return None


def fold_one_apply(op: Operation) -> Operation | None:
    """Replace an affine load, store or apply one of whose indices is an `affine.apply`
    result by the same op with that apply folded into its map (attributes kept); return the
    replacement, or None (IR untouched) when there is nothing to fold."""
    if not isinstance(op, affine.LoadOp | affine.StoreOp | affine.ApplyOp):
        return None
    indices = list(op.mapOperands if isinstance(op, affine.ApplyOp) else op.indices)
    if not any(isinstance(v.owner, affine.ApplyOp) for v in indices):
        return None
    folded = compose(op.map.data, indices)
    if folded is None:
        return None
    m, operands = folded
    if isinstance(op, affine.LoadOp):
        new: Operation = affine.LoadOp(op.memref, operands, AffineMapAttr(m), op.result.type)
    elif isinstance(op, affine.StoreOp):
        new = affine.StoreOp(op.value, op.memref, operands, AffineMapAttr(m))
    else:
        new = affine.ApplyOp(operands, AffineMapAttr(m))
    new.attributes.update(op.attributes)
    Rewriter.replace_op(op, new)
    return new


def fold_applies(root: Operation) -> None:
    """Fold `affine.apply` results into the maps of the affine loads, stores and applies
    nested in `root`, then erase applies left unused. Never fails."""
    changed = True
    while changed:
        changed = False
        for op in list(root.walk()):
            changed |= fold_one_apply(op) is not None
    for op in list(root.walk()):
        if isinstance(op, affine.ApplyOp) and not op.result.uses:
            Rewriter.erase_op(op)


def _offset_iv(block: Block, base: SSAValue, scale_step: int = 0) -> None:
    """Uses of `block`'s iv become `base + iv` (or `iv + scale_step` with no base)."""
    iv = block.args[0]
    if base is not None:
        apply = affine.ApplyOp([base, iv], AffineMapAttr(AffineMap(2, 0, (AffineExpr.dimension(0) + AffineExpr.dimension(1),))))
    else:
        apply = affine.ApplyOp([iv], AffineMapAttr(AffineMap(1, 0, (AffineExpr.dimension(0) + scale_step,))))
    block.insert_op_before(apply, block.first_op)  # type: ignore[arg-type]
    iv.replace_uses_with_if(apply.result, lambda use: use.operation is not apply)
