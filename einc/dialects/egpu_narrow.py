"""The `egpu` dialect's legalization ops for a narrow float kept only in memory (f16 on devices
without half arithmetic): `egpu.load_extf` reads it widened, `egpu.store_truncf` writes it
narrowed, `egpu.round` rounds in the wider type. The dialect is `einc.dialects.egpu`.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import ClassVar

from xdsl.dialects.builtin import AnyFloat, AnyFloatConstr, IndexType, MemRefType
from xdsl.ir import Attribute, Operation, SSAValue
from xdsl.irdl import (
    IRDLOperation,
    VarConstraint,
    irdl_op_definition,
    operand_def,
    prop_def,
    result_def,
    traits_def,
    var_operand_def,
)
from xdsl.traits import Pure
from xdsl.utils.exceptions import VerifyException


def _check_narrowing(op: Operation, memref: Attribute, value: Attribute) -> None:
    assert isinstance(memref, MemRefType)
    element = memref.get_element_type()
    if not (isinstance(element, AnyFloat) and isinstance(value, AnyFloat)) or (
        element.bitwidth >= value.bitwidth
    ):
        raise VerifyException(
            f"{op.name}: the buffer's {element} must be a float narrower than {value}"
        )


@irdl_op_definition
class LoadExtfOp(IRDLOperation):
    """Load a narrow float element and widen it exactly (OpenCL `vload_half`)."""

    name = "egpu.load_extf"
    memref = operand_def(MemRefType)
    indices = var_operand_def(IndexType)
    result = result_def(AnyFloat)
    assembly_format = "$memref `[` $indices `]` attr-dict `:` type($memref) `->` type($result)"

    def __init__(self, memref: SSAValue, indices: Sequence[SSAValue], result_type: Attribute):
        super().__init__(operands=[memref, indices], result_types=[result_type])

    def verify_(self) -> None:
        _check_narrowing(self, self.memref.type, self.result.type)


@irdl_op_definition
class StoreTruncfOp(IRDLOperation):
    """Round a float to the buffer's narrower float type (to nearest even) and store it
    (OpenCL `vstore_half`)."""

    name = "egpu.store_truncf"
    value = operand_def(AnyFloat)
    memref = operand_def(MemRefType)
    indices = var_operand_def(IndexType)
    assembly_format = (
        "$value `,` $memref `[` $indices `]` attr-dict `:` type($value) `,` type($memref)"
    )

    def __init__(self, value: SSAValue, memref: SSAValue, indices: Sequence[SSAValue]):
        super().__init__(operands=[value, memref, indices])

    def verify_(self) -> None:
        _check_narrowing(self, self.memref.type, self.value.type)


@irdl_op_definition
class RoundOp(IRDLOperation):
    """The value rounded (to nearest even) to the narrower float type `as`, kept in the
    wider type: `arith.truncf` + `arith.extf` for a device that cannot hold the narrow type."""

    name = "egpu.round"
    T: ClassVar = VarConstraint("T", AnyFloatConstr)
    value = operand_def(T)
    as_type = prop_def(AnyFloat, prop_name="as")
    result = result_def(T)
    traits = traits_def(Pure())
    assembly_format = "$value `as` $as attr-dict `:` type($result)"

    def __init__(self, value: SSAValue, as_type: AnyFloat):
        super().__init__(operands=[value], properties={"as": as_type}, result_types=[value.type])

    def verify_(self) -> None:
        if self.value.type != self.result.type:
            raise VerifyException("egpu.round: result type differs from the operand's")
        if self.as_type.bitwidth >= self.result.type.bitwidth:  # type: ignore[union-attr]
            raise VerifyException(
                f"egpu.round: {self.as_type} is not narrower than {self.result.type}"
            )
