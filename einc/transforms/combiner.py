"""The scalar IR of an einsum combiner: its identity constant and its merge step.

Shared by the ein lowering and by schedule transforms that split or privatise reductions.
"""

from __future__ import annotations

from xdsl.builder import Builder
from xdsl.dialects import arith
from xdsl.dialects.builtin import AnyFloat, FloatAttr, IntegerAttr, IntegerType
from xdsl.ir import Attribute, Operation, SSAValue

from einc.dialects.ein import Combiner, combiner_identity

_FLOAT_OPS: dict[Combiner, type[arith.FloatingPointLikeBinaryOperation]] = {
    Combiner.ADD: arith.AddfOp,
    Combiner.MUL: arith.MulfOp,
    Combiner.MAX: arith.MaximumfOp,  # NaN-propagating, as NumPy's max
    Combiner.MIN: arith.MinimumfOp,
}
_INT_OPS: dict[Combiner, type[arith.SignlessIntegerBinaryOperation]] = {
    Combiner.ADD: arith.AddiOp,
    Combiner.MUL: arith.MuliOp,
    Combiner.MAX: arith.MaxSIOp,
    Combiner.MIN: arith.MinSIOp,
}
_LOGICAL_OPS: dict[Combiner, type[arith.SignlessIntegerBinaryOperation]] = {
    Combiner.AND: arith.AndIOp,
    Combiner.OR: arith.OrIOp,
}


def scalar_constant(value: float | int, element_type: Attribute) -> arith.ConstantOp:
    """An `arith.constant` of a float or signless integer element type."""
    if isinstance(element_type, AnyFloat):
        return arith.ConstantOp(FloatAttr(float(value), element_type))
    assert isinstance(element_type, IntegerType), f"not a scalar type: {element_type}"
    return arith.ConstantOp(IntegerAttr(int(value), element_type))


def identity_constant(combiner: Combiner, element_type: Attribute) -> arith.ConstantOp:
    """The constant a reduction's output is filled with before combining (`assign` has
    none: it is an error to ask)."""
    is_float = isinstance(element_type, AnyFloat)
    bits = element_type.bitwidth if isinstance(element_type, AnyFloat | IntegerType) else 0
    return scalar_constant(combiner_identity(combiner, is_float, bits), element_type)


def build_combine(
    builder: Builder, combiner: Combiner, acc: SSAValue, value: SSAValue
) -> SSAValue:
    """Insert the ops merging `value` into the accumulator value `acc` and return the merged
    value (both of the output's element type).

    Contract: `add/mul/max/min` are one arith op (`maximumf/minimumf` for floats: NaN
    propagates); `and/or` are logical: `(acc != 0) op (value != 0)` selected as 1 or 0 of the
    element type (a float compares with `une`, so NaN counts as true, as in C). `assign`
    returns `value` and inserts nothing.
    """
    if combiner == Combiner.ASSIGN:
        return value
    is_float = isinstance(value.type, AnyFloat)
    if combiner in _FLOAT_OPS:
        op_type = _FLOAT_OPS[combiner] if is_float else _INT_OPS[combiner]
        return builder.insert(op_type(acc, value)).result
    zero = builder.insert(scalar_constant(0, value.type)).result
    one = builder.insert(scalar_constant(1, value.type)).result

    def nonzero(x: SSAValue) -> Operation:
        return arith.CmpfOp(x, zero, "une") if is_float else arith.CmpiOp(x, zero, "ne")

    lhs = builder.insert(nonzero(acc)).results[0]
    rhs = builder.insert(nonzero(value)).results[0]
    both = builder.insert(_LOGICAL_OPS[combiner](lhs, rhs)).result
    return builder.insert(arith.SelectOp(both, one, zero)).result


_COMBINE_OPS: dict[type[Operation], Combiner] = {
    arith.AddfOp: Combiner.ADD, arith.AddiOp: Combiner.ADD,
    arith.MulfOp: Combiner.MUL, arith.MuliOp: Combiner.MUL,
    arith.MaximumfOp: Combiner.MAX, arith.MaxSIOp: Combiner.MAX,
    arith.MinimumfOp: Combiner.MIN, arith.MinSIOp: Combiner.MIN,
}  # fmt: skip
"""The combiners that are associative and commutative (up to float rounding), by the op
`build_combine` makes for them."""


def accumulation(store: Operation) -> tuple[Combiner, Operation] | None:
    """For a store of `combine(acc, x)` where `acc` is a load of the stored element (same
    buffer, map and indices) and `combine` is an add/mul/max/min op (`_COMBINE_OPS`): the
    combiner and that load. None for any other store (an assignment, a logical combiner, a
    non-affine access). A float16/bfloat16 accumulation whose arithmetic `legalize-f16-for-c`
    moved to f32 (`truncf(combine(extf(acc), extf(x)))`) is one too."""
    from xdsl.dialects import affine

    if not isinstance(store, affine.StoreOp):
        return None
    combine = store.value.owner
    narrow = isinstance(combine, arith.TruncFOp)
    if narrow:
        combine = combine.input.owner
    if not isinstance(combine, Operation) or type(combine) not in _COMBINE_OPS:
        return None
    load = combine.operands[0].owner
    if narrow:
        if not isinstance(load, arith.ExtFOp):
            return None
        load = load.input.owner
    if not isinstance(load, affine.LoadOp) or load.memref is not store.memref:
        return None
    if load.map != store.map or tuple(load.indices) != tuple(store.indices):
        return None
    return _COMBINE_OPS[type(combine)], load
