"""Ops of MLIR's `math` dialect that xDSL 0.74 lacks, defined in its namespace as upstream
MLIR has them (so printed IR reads as MLIR's): `math.erfc`, the complementary error function
`1 - erf(x)` computed without the cancellation (the lowering of `normcdf` needs it in the
lower tail, where `1 + erf` is exactly 0). Loaded into einc's context op by op, as
`transform.einc.*` is (`load_ops`)."""

from __future__ import annotations

from xdsl.context import Context
from xdsl.dialects.math import FloatingPointLikeUnaryMathOperation
from xdsl.irdl import irdl_op_definition, traits_def
from xdsl.traits import Pure, SameOperandsAndResultType


@irdl_op_definition
class ErfcOp(FloatingPointLikeUnaryMathOperation):
    """`math.erfc %x : f32`: the complementary error function of a float (MLIR's op)."""

    name = "math.erfc"

    traits = traits_def(Pure(), SameOperandsAndResultType())


MATH_EXT_OPS = (ErfcOp,)


def load_ops(ctx: Context) -> None:
    """Make the ops above parseable in `ctx` (loading twice is harmless)."""
    for op in MATH_EXT_OPS:
        if ctx.get_optional_op(op.name) is None:
            ctx.load_op(op)


__all__ = ["ErfcOp", "MATH_EXT_OPS", "load_ops"]
