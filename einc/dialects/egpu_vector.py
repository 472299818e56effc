"""The `egpu` dialect's vector ops on builtin `vector<NxT>` values of a target's vector width:
`egpu.vload`, `egpu.vload_repeat`, `egpu.vstore`, `egpu.vbroadcast`, `egpu.vbroadcast_runs`, `egpu.vconvert`, `egpu.vfma`, `egpu.vreduce`, `egpu.vextract`, `egpu.vshuffle`.
The dialect is `einc.dialects.egpu`.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import ClassVar

from xdsl.dialects.builtin import I64, AnyFloat, DenseArrayBase, IndexType, IntegerAttr, MemRefType, VectorType, i64
from xdsl.ir import Attribute, Operation, SSAValue
from xdsl.irdl import (
    IRDLOperation,
    VarConstraint,
    base,
    irdl_op_definition,
    operand_def,
    prop_def,
    result_def,
    traits_def,
    var_operand_def,
)
from xdsl.traits import Pure
from xdsl.utils.exceptions import VerifyException

from einc.dialects.egpu_attrs import ReduceKind, ReduceKindAttr
from einc.ir.attrs import STORE_LANES_ATTR

VECTOR_WIDTHS = (2, 3, 4, 8, 16)


def _check_vector(op: Operation, vector: Attribute, element: Attribute | None = None) -> None:
    if not isinstance(vector, VectorType) or vector.get_num_dims() != 1:
        raise VerifyException(f"{op.name}: expected a 1-d vector type, got {vector}")
    width = vector.get_shape()[0]
    if width not in VECTOR_WIDTHS:
        raise VerifyException(
            f"{op.name}: vector width {width} is not one of {list(VECTOR_WIDTHS)}"
        )
    if element is not None and vector.get_element_type() != element:
        raise VerifyException(
            f"{op.name}: vector of {vector.get_element_type()} on a buffer of {element}"
        )



def _check_vector_access(op: Operation, buffer: SSAValue, indices: Sequence[SSAValue], vector: Attribute) -> None:
    """A vector access's checks: `vector` a vector of `buffer`'s element type, an index per
    dimension of `buffer`."""
    t = buffer.type
    assert isinstance(t, MemRefType)
    _check_vector(op, vector, t.get_element_type())
    if len(indices) != t.get_num_dims():
        raise VerifyException(f"{op.name}: {len(indices)} indices for a buffer of rank {t.get_num_dims()}")

def _check_lanes(op: Operation, vector: Attribute) -> None:
    """`egpu.lanes` (the first N lanes only), where present, a count below the width."""
    counted = op.attributes.get(STORE_LANES_ATTR)
    if counted is not None:
        assert isinstance(vector, VectorType)
        width = vector.get_shape()[0]
        if not isinstance(counted, IntegerAttr) or not 0 < counted.value.data < width:
            raise VerifyException(f"{op.name}: {STORE_LANES_ATTR} must be a lane count in 1..{width - 1}")


@irdl_op_definition
class VLoadOp(IRDLOperation):
    """`width` consecutive elements of a buffer from flat row-major position
    `indices` (the last index advances); marked `egpu.lanes` = N, only the first N (the
    other lanes zero)."""

    name = "egpu.vload"
    memref = operand_def(MemRefType)
    indices = var_operand_def(IndexType)
    result = result_def(VectorType)
    traits = traits_def()
    assembly_format = "$memref `[` $indices `]` attr-dict `:` type($memref) `->` type($result)"

    def __init__(self, memref: SSAValue, indices: Sequence[SSAValue], result_type: VectorType):
        super().__init__(operands=[memref, indices], result_types=[result_type])

    def verify_(self) -> None:
        _check_vector_access(self, self.memref, self.indices, self.result.type)
        _check_lanes(self, self.result.type)


@irdl_op_definition
class VLoadRepeatOp(IRDLOperation):
    """`run` consecutive elements of a buffer from flat row-major position `indices` (the
    last index advances), repeated over the lanes: lane j holds element `j mod run` (`run`
    dividing the width). A vector loop reads such a vector where the last index of a load
    is `iv mod run` (plus values fixed in the loop): the pair form of the grouped
    convolution, whose input staged with two groups innermost gives each FMA the pair of
    the two groups' values over a vector of lanes `2 f + g` (on C one 64-bit broadcast)."""

    name = "egpu.vload_repeat"
    memref = operand_def(MemRefType)
    indices = var_operand_def(IndexType)
    run = prop_def(IntegerAttr[I64])
    result = result_def(VectorType)
    assembly_format = "$memref `[` $indices `]` `run` $run attr-dict `:` type($memref) `->` type($result)"

    def __init__(self, memref: SSAValue, indices: Sequence[SSAValue], run: int, result_type: VectorType):
        super().__init__(operands=[memref, indices], properties={"run": IntegerAttr(run, i64)},
                         result_types=[result_type])  # fmt: skip

    def verify_(self) -> None:
        _check_vector_access(self, self.memref, self.indices, self.result.type)
        result = self.result.type
        assert isinstance(result, VectorType)
        run, width = self.run.value.data, result.get_shape()[0]
        if run < 2 or run >= width or width % run:
            raise VerifyException(f"egpu.vload_repeat: a run of {run} does not repeat over a vector of {width}")


@irdl_op_definition
class VStoreOp(IRDLOperation):
    name = "egpu.vstore"
    value = operand_def(VectorType)
    memref = operand_def(MemRefType)
    indices = var_operand_def(IndexType)
    assembly_format = (
        "$value `,` $memref `[` $indices `]` attr-dict `:` type($value) `,` type($memref)"
    )

    def __init__(self, value: SSAValue, memref: SSAValue, indices: Sequence[SSAValue]):
        super().__init__(operands=[value, memref, indices])

    def verify_(self) -> None:
        t = self.memref.type
        assert isinstance(t, MemRefType)
        _check_vector(self, self.value.type, t.get_element_type())
        if len(self.indices) != t.get_num_dims():
            raise VerifyException(
                f"egpu.vstore: {len(self.indices)} indices for a buffer of rank {t.get_num_dims()}"
            )
        _check_lanes(self, self.value.type)


@irdl_op_definition
class VBroadcastOp(IRDLOperation):
    """A vector whose every element is the scalar `value` (a loop-invariant operand of a
    vectorized loop)."""

    name = "egpu.vbroadcast"
    value = operand_def()
    result = result_def(VectorType)
    traits = traits_def(Pure())
    assembly_format = "$value attr-dict `:` type($value) `->` type($result)"

    def __init__(self, value: SSAValue, result_type: VectorType):
        super().__init__(operands=[value], result_types=[result_type])

    def verify_(self) -> None:
        _check_vector(self, self.result.type)
        element = self.result.type.get_element_type()  # type: ignore[union-attr]
        if element != self.value.type:
            raise VerifyException(
                f"egpu.vbroadcast: a vector of {element} from a value of {self.value.type}"
            )


@irdl_op_definition
class VBroadcastRunsOp(IRDLOperation):
    """A vector of k runs: lanes `r * W/k` to `(r + 1) * W/k - 1` hold the scalar `values[r]`
    (k values, k dividing the width W). A vector loop reads such a vector where an index
    moves with the loop variable only through `iv floordiv d` (d = W/k): a grouped
    convolution's input `x[8 * (F floordiv 8) + C]` over a vector of 16 output channels
    spanning two groups holds the two groups' inputs, each broadcast over its group's 8
    lanes (the two-value broadcast)."""

    name = "egpu.vbroadcast_runs"
    values = var_operand_def()
    result = result_def(VectorType)
    traits = traits_def(Pure())
    assembly_format = "$values attr-dict `:` type($values) `->` type($result)"

    def __init__(self, values: Sequence[SSAValue], result_type: VectorType):
        super().__init__(operands=[values], result_types=[result_type])

    def verify_(self) -> None:
        t = self.result.type
        _check_vector(self, t)
        assert isinstance(t, VectorType)
        element, width = t.get_element_type(), t.get_shape()[0]
        k = len(self.values)
        if k < 2 or width % k:
            raise VerifyException(f"egpu.vbroadcast_runs: {k} values do not divide a vector of {width} into runs")
        if any(v.type != element for v in self.values):
            raise VerifyException(f"egpu.vbroadcast_runs: a vector of {element} from values of another type")


@irdl_op_definition
class VConvertOp(IRDLOperation):
    """Each element converted to the result's element type as a C cast does (and as
    `arith.extf`/`truncf`/`sitofp`/`fptosi`/`extsi`/`trunci` do on scalars): floats round to
    nearest, float to integer truncates toward zero, integers sign-extend or wrap. (xDSL's
    arith casts take scalars only.)"""

    name = "egpu.vconvert"
    vector = operand_def(VectorType)
    result = result_def(VectorType)
    traits = traits_def(Pure())
    assembly_format = "$vector attr-dict `:` type($vector) `->` type($result)"

    def __init__(self, vector: SSAValue, result_type: VectorType):
        super().__init__(operands=[vector], result_types=[result_type])

    def verify_(self) -> None:
        _check_vector(self, self.vector.type)
        _check_vector(self, self.result.type)
        source, result = self.vector.type, self.result.type
        if source.get_shape() != result.get_shape():  # type: ignore[union-attr]
            raise VerifyException(f"egpu.vconvert: {source} and {result} differ in width")


@irdl_op_definition
class VFmaOp(IRDLOperation):
    """a * b + c, element-wise, with one rounding."""

    name = "egpu.vfma"
    T: ClassVar = VarConstraint("T", base(VectorType))
    a = operand_def(T)
    b = operand_def(T)
    c = operand_def(T)
    result = result_def(T)
    traits = traits_def(Pure())
    assembly_format = "$a `,` $b `,` $c attr-dict `:` type($result)"

    def __init__(self, a: SSAValue, b: SSAValue, c: SSAValue):
        super().__init__(operands=[a, b, c], result_types=[a.type])

    def verify_(self) -> None:
        _check_vector(self, self.result.type)
        if not isinstance(self.result.type.get_element_type(), AnyFloat):  # type: ignore[union-attr]
            raise VerifyException("egpu.vfma: needs float vectors")
        if not self.a.type == self.b.type == self.c.type == self.result.type:
            raise VerifyException("egpu.vfma: operands and result must have one type")


@irdl_op_definition
class VReduceOp(IRDLOperation):
    """Combines a vector's elements into one scalar."""

    name = "egpu.vreduce"
    kind = prop_def(ReduceKindAttr)
    vector = operand_def(VectorType)
    result = result_def()
    traits = traits_def(Pure())
    assembly_format = "$kind $vector attr-dict `:` type($vector) `->` type($result)"

    def __init__(self, kind: ReduceKind, vector: SSAValue):
        assert isinstance(vector.type, VectorType)
        super().__init__(
            operands=[vector],
            properties={"kind": ReduceKindAttr(kind)},
            result_types=[vector.type.get_element_type()],
        )

    def verify_(self) -> None:
        _check_vector(self, self.vector.type)
        element = self.vector.type.get_element_type()  # type: ignore[union-attr]
        if self.result.type != element:
            raise VerifyException(
                f"egpu.vreduce: result type {self.result.type} differs from the vector's "
                f"element type {element}"
            )


@irdl_op_definition
class VExtractOp(IRDLOperation):
    """Lane `lane` of a vector (a scalar of its element type): the lanes of a vector load
    that replaced scalar loads (`einc-vectorize-shared-loads`)."""

    name = "egpu.vextract"
    lane = prop_def(IntegerAttr)
    vector = operand_def(VectorType)
    result = result_def()
    traits = traits_def(Pure())
    assembly_format = "$vector `[` $lane `]` attr-dict `:` type($vector) `->` type($result)"

    def __init__(self, vector: SSAValue, lane: int):
        assert isinstance(vector.type, VectorType)
        super().__init__(
            operands=[vector],
            properties={"lane": IntegerAttr(lane, IndexType())},
            result_types=[vector.type.get_element_type()],
        )

    def verify_(self) -> None:
        _check_vector(self, self.vector.type)
        t = self.vector.type
        assert isinstance(t, VectorType)
        if not 0 <= self.lane.value.data < t.get_shape()[0]:
            raise VerifyException(f"egpu.vextract: lane {self.lane.value.data} of {t}")
        if self.result.type != t.get_element_type():
            raise VerifyException(f"egpu.vextract: result type {self.result.type} differs from {t.get_element_type()}")


@irdl_op_definition
class VShuffleOp(IRDLOperation):
    """Lanes of two vectors of one type picked by a constant `mask` (one lane index per
    result lane: `k < W` is lane k of `a`, `W + k` lane k of `b`; C's
    `__builtin_shufflevector`). A copy that transposes W x W tiles (a filter packed with
    its output channels innermost, `einc.transforms.transpose_copy`) loads W rows and
    stores W columns through log2(W) stages of these."""

    name = "egpu.vshuffle"
    mask = prop_def(DenseArrayBase.constr(i64))
    a = operand_def(VectorType)
    b = operand_def(VectorType)
    result = result_def(VectorType)
    traits = traits_def(Pure())
    assembly_format = "$a `,` $b $mask attr-dict `:` type($a) `,` type($b) `->` type($result)"

    def __init__(self, a: SSAValue, b: SSAValue, mask: Sequence[int]):
        super().__init__(
            operands=[a, b], properties={"mask": DenseArrayBase.from_list(i64, list(mask))}, result_types=[a.type]
        )

    @property
    def lanes(self) -> tuple[int, ...]:
        return tuple(int(k) for k in self.mask.get_values())

    def verify_(self) -> None:
        _check_vector(self, self.a.type)
        t = self.a.type
        assert isinstance(t, VectorType)
        width = t.get_shape()[0]
        if self.b.type != t or self.result.type != t:
            raise VerifyException(f"egpu.vshuffle: operands and result of one type expected, got {self.a.type}, {self.b.type} -> {self.result.type}")
        if len(self.lanes) != width or not all(0 <= k < 2 * width for k in self.lanes):
            raise VerifyException(f"egpu.vshuffle: mask {list(self.lanes)} does not pick {width} lanes of two {t}")
