"""What the loop transforms share (einc/transforms/loop_transforms.py, rfactor.py and the
staging, outlining, vectorization utilities): the `Failure` a refused transform returns,
`describe` (a loop in messages), building an `affine.for` (`_new_loop`), carrying a split
loop's tags (`_retag`), and whether a value varies with a loop (`_depends_on_loop`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from xdsl.dialects import affine
from xdsl.dialects.builtin import AffineMapAttr, IndexType, StringAttr
from xdsl.ir import Block, Region, SSAValue
from xdsl.ir.affine import AffineMap

from einc.ir.attrs import AXIS_ATTR, BIND_ATTR, PARALLEL_ATTR, STMT_ATTR, VECTORIZE_ATTR
from einc.transforms.loop_analysis import induction_var


@dataclass(frozen=True)
class Failure:
    """Why a transform was refused; the IR is unchanged."""

    message: str


def describe(loop: affine.ForOp) -> str:
    """`loop K of output0` from the loop's tags (or `loop %name`)."""
    axis, stmt = loop.attributes.get(AXIS_ATTR), loop.attributes.get(STMT_ATTR)
    if isinstance(axis, StringAttr) and isinstance(stmt, StringAttr):
        return f"loop {axis.data} of {stmt.data}"
    return f"loop %{induction_var(loop).name_hint or '?'}"


def _retag(loop: affine.ForOp, attributes: dict, suffix: str) -> None:
    """Copy the tags of a split loop, renaming its axis; schedule marks stay on one side:
    the outer loop keeps parallel/bind, the inner loop keeps vectorize."""
    dropped = (VECTORIZE_ATTR,) if suffix == ".o" else (PARALLEL_ATTR, BIND_ATTR)
    for k, v in attributes.items():
        if k not in dropped:
            loop.attributes[k] = v
    if isinstance(axis := attributes.get(AXIS_ATTR), StringAttr):
        loop.attributes[AXIS_ATTR] = StringAttr(axis.data + suffix)


def _new_loop(
    lb_ops: Sequence[SSAValue], ub_ops: Sequence[SSAValue], lb: AffineMap | int,
    ub: AffineMap | int, step: int, hint: str | None,
) -> affine.ForOp:
    block = Block(arg_types=[IndexType()])
    block.args[0].name_hint = hint
    block.add_op(affine.YieldOp.get())
    return affine.ForOp.from_region(
        lb_ops, ub_ops, (), (),
        AffineMapAttr(lb) if isinstance(lb, AffineMap) else lb,
        AffineMapAttr(ub) if isinstance(ub, AffineMap) else ub,
        Region(block), step,
    )


def _depends_on_loop(v: SSAValue, loop: affine.ForOp) -> bool:
    owner = v.owner
    if isinstance(owner, Block):
        return owner.parent_op() is loop or (owner.parent_op() is not None and loop.is_ancestor(owner.parent_op()))  # type: ignore[arg-type]
    return loop.is_ancestor(owner)
