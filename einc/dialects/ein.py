"""The `ein` dialect: one op per Antares IR statement, keeping its einsum meaning.

A statement `output0[N, M] +=! input0[N, K] * input1[K, M]` becomes

    %output0 = ein.einsum "output0" add parallel [N = 1024, M = 512] reduce [K = 512]
        : tensor<1024x512xf32> {
    ^bb0(%N : index, %M : index, %K : index):
      %a = ein.load %input0[%N, %K] : tensor<1024x512xf32>
      %b = ein.load %input1[%K, %M] : tensor<512x512xf32>
      %p = arith.mulf %a, %b : f32
      ein.yield %p : f32
    }

Value semantics: an einsum reads tensors defined outside it and yields one tensor. Its axes are
ordered output axes first (one per result dimension, in the output's index order), then the
reduction axes; the body is evaluated once per point of the iteration space and its yielded
scalar is combined into the output element with the combiner (`assign` for `=`). Index
arithmetic is `arith` on `index`; `.when` is an `scf.if` yielding the chosen value, so a
guarded access is never performed when its condition is false; math is `arith` and `math`.
"""

from __future__ import annotations

from collections.abc import Sequence
from enum import auto

from xdsl.dialects.builtin import (
    ArrayAttr,
    DenseArrayBase,
    IndexType,
    StringAttr,
    TensorType,
    i64,
)
from xdsl.dialects.utils.enum_attribute import EnumAttribute
from xdsl.ir import Attribute, Block, Dialect, Region, SpacedOpaqueSyntaxAttribute, SSAValue
from xdsl.irdl import (
    IRDLOperation,
    irdl_attr_definition,
    irdl_op_definition,
    operand_def,
    prop_def,
    region_def,
    result_def,
    traits_def,
    var_operand_def,
)
from xdsl.parser import Parser
from xdsl.printer import Printer
from xdsl.traits import HasParent, IsTerminator, Pure, RecursiveMemoryEffect
from xdsl.utils.exceptions import VerifyException
from xdsl.utils.str_enum import StrEnum


class Combiner(StrEnum):
    """How the body's value is merged into the output element (Antares' `=`, `+=!`, ...)."""

    ASSIGN = auto()
    ADD = auto()
    MUL = auto()
    MAX = auto()
    MIN = auto()
    AND = auto()
    OR = auto()


@irdl_attr_definition
class CombinerAttr(EnumAttribute[Combiner], SpacedOpaqueSyntaxAttribute):
    name = "ein.combiner"


@irdl_op_definition
class LoadOp(IRDLOperation):
    """Reads one element of a tensor. Indices are `index` values; any expression is allowed
    (a gather loads its index from another tensor), and lowering keeps affine ones affine."""

    name = "ein.load"
    tensor = operand_def(TensorType)
    indices = var_operand_def(IndexType)
    result = result_def()
    traits = traits_def(Pure())

    def __init__(self, tensor: SSAValue, indices: Sequence[SSAValue]):
        assert isinstance(tensor.type, TensorType)
        super().__init__(
            operands=[tensor, indices], result_types=[tensor.type.get_element_type()]
        )

    def verify_(self) -> None:
        ttype = self.tensor.type
        assert isinstance(ttype, TensorType)
        if len(self.indices) != ttype.get_num_dims():
            raise VerifyException(
                f"ein.load: {len(self.indices)} indices for a tensor of rank "
                f"{ttype.get_num_dims()}"
            )
        if self.result.type != ttype.get_element_type():
            raise VerifyException("ein.load: result type must be the tensor's element type")

    def print(self, printer: Printer) -> None:
        printer.print_string(" ")
        printer.print_operand(self.tensor)
        with printer.in_square_brackets():
            printer.print_list(self.indices, printer.print_operand)
        printer.print_op_attributes(self.attributes)
        printer.print_string(" : ")
        printer.print_attribute(self.tensor.type)

    @classmethod
    def parse(cls, parser: Parser) -> LoadOp:
        tensor = parser.parse_unresolved_operand()
        indices = parser.parse_comma_separated_list(
            parser.Delimiter.SQUARE, parser.parse_unresolved_operand
        )
        attrs = parser.parse_optional_attr_dict()
        parser.parse_punctuation(":")
        ttype = parser.parse_type()
        op = cls(
            parser.resolve_operand(tensor, ttype),
            [parser.resolve_operand(i, IndexType()) for i in indices],
        )
        op.attributes.update(attrs)
        return op


def _space_properties(
    name: str, combiner: Combiner, axes: Sequence[tuple[str, int]]
) -> dict[str, Attribute]:
    """The properties of an op over an iteration space (`ein.einsum`, `ein.scatter`)."""
    return {
        "name": StringAttr(name),
        "axes": ArrayAttr([StringAttr(a) for a, _ in axes]),
        "extents": DenseArrayBase.from_list(i64, [e for _, e in axes]),
        "combiner": CombinerAttr(combiner),
    }


def _space_body(axes: Sequence[tuple[str, int]]) -> Region:
    """An empty body taking one index argument per axis, named after it."""
    block = Block(arg_types=[IndexType()] * len(axes))
    for arg, (axis, _) in zip(block.args, axes):
        arg.name_hint = axis
    return Region(block)


@irdl_op_definition
class EinsumOp(IRDLOperation):
    """One Antares statement: an iteration space of named axes, a scalar body, a combiner."""

    name = "ein.einsum"
    output_name = prop_def(StringAttr, prop_name="name")
    axes = prop_def(ArrayAttr[StringAttr])
    extents = prop_def(DenseArrayBase.constr(i64))
    combiner = prop_def(CombinerAttr)
    body = region_def("single_block")
    result = result_def(TensorType)
    traits = traits_def(RecursiveMemoryEffect())

    def __init__(
        self,
        name: str,
        combiner: Combiner,
        axes: Sequence[tuple[str, int]],
        result_type: TensorType,
        body: Region | None = None,
    ):
        super().__init__(
            properties=_space_properties(name, combiner, axes),
            regions=[body if body is not None else _space_body(axes)],
            result_types=[result_type],
        )

    # ---- derived views -------------------------------------------------------------------
    @property
    def axis_names(self) -> tuple[str, ...]:
        return tuple(a.data for a in self.axes.data)

    @property
    def axis_extents(self) -> tuple[int, ...]:
        return self.extents.get_values()

    @property
    def result_type(self) -> TensorType:
        assert isinstance(self.result.type, TensorType)
        return self.result.type

    @property
    def num_parallel(self) -> int:
        """Output axes come first: one per result dimension."""
        return self.result_type.get_num_dims()

    @property
    def is_reduction(self) -> bool:
        return self.combiner.data != Combiner.ASSIGN

    @property
    def block(self) -> Block:
        return self.body.block

    @property
    def yield_op(self) -> YieldOp:
        term = self.block.last_op
        assert isinstance(term, YieldOp)
        return term

    # ---- verification ----------------------------------------------------------------------
    def verify_(self) -> None:
        names = self.axis_names
        extents = self.axis_extents
        if len(names) != len(extents):
            raise VerifyException("ein.einsum: axes and extents differ in length")
        if len(set(names)) != len(names):
            raise VerifyException(f"ein.einsum: repeated axis name in {list(names)}")
        for name, extent in zip(names, extents):
            if extent <= 0:
                raise VerifyException(f"ein.einsum: axis {name} has non-positive extent {extent}")
        block = self.block
        if len(block.args) != len(names) or any(
            not isinstance(a.type, IndexType) for a in block.args
        ):
            raise VerifyException(
                "ein.einsum: the body takes one index argument per axis "
                f"({len(names)}), got {len(block.args)}"
            )
        rank = self.num_parallel
        if rank > len(names):
            raise VerifyException(
                f"ein.einsum: result of rank {rank} but only {len(names)} axes"
            )
        if tuple(self.result_type.get_shape()) != extents[:rank]:
            raise VerifyException(
                f"ein.einsum: result shape {list(self.result_type.get_shape())} differs "
                f"from the output axes' extents {list(extents[:rank])}"
            )
        if not self.is_reduction and rank != len(names):
            raise VerifyException(
                f"ein.einsum: axes {list(names[rank:])} are not in the output; "
                "only a reduction (+=!, >=!, ...) may sum over them"
            )
        if not isinstance(block.last_op, YieldOp):
            raise VerifyException("ein.einsum: the body must end with ein.yield")
        if self.yield_op.value.type != self.result_type.get_element_type():
            raise VerifyException(
                f"ein.einsum: yields {self.yield_op.value.type} into a tensor of "
                f"{self.result_type.get_element_type()}"
            )

    # ---- custom syntax -----------------------------------------------------------------------
    def print(self, printer: Printer) -> None:
        printer.print_string(" ")
        printer.print_string_literal(self.output_name.data)
        printer.print_string(f" {self.combiner.data}")
        pairs = [f"{n} = {e}" for n, e in zip(self.axis_names, self.axis_extents)]
        rank = self.num_parallel
        printer.print_string(f" parallel [{', '.join(pairs[:rank])}]")
        if rank < len(pairs):
            printer.print_string(f" reduce [{', '.join(pairs[rank:])}]")
        printer.print_op_attributes(self.attributes)
        printer.print_string(" : ")
        printer.print_attribute(self.result.type)
        printer.print_string(" ")
        printer.print_region(self.body)

    @classmethod
    def parse(cls, parser: Parser) -> EinsumOp:
        name = parser.parse_str_literal("output tensor name")
        combiner = Combiner(parser.parse_keyword_in([str(c) for c in Combiner], "combiner"))

        def parse_axis() -> tuple[str, int]:
            axis = parser.parse_identifier("axis name")
            parser.parse_punctuation("=")
            return axis, parser.parse_integer(allow_boolean=False, allow_negative=False)

        parser.parse_keyword("parallel")
        axes = parser.parse_comma_separated_list(parser.Delimiter.SQUARE, parse_axis)
        if parser.parse_optional_keyword("reduce"):
            axes += parser.parse_comma_separated_list(parser.Delimiter.SQUARE, parse_axis)
        attrs = parser.parse_optional_attr_dict()
        parser.parse_punctuation(":")
        result_type = parser.parse_type()
        if not isinstance(result_type, TensorType):
            parser.raise_error("ein.einsum: expected a tensor result type")
        body = parser.parse_region()
        op = cls(name, combiner, axes, result_type, body)
        op.attributes.update(attrs)
        return op


@irdl_op_definition
class YieldOp(IRDLOperation):
    """Terminates an einsum body with the scalar value of one iteration point."""

    name = "ein.yield"
    value = operand_def()
    traits = traits_def(IsTerminator(), HasParent(EinsumOp), Pure())
    assembly_format = "$value attr-dict `:` type($value)"

    def __init__(self, value: SSAValue):
        super().__init__(operands=[value])



@irdl_op_definition
class ScatterOp(IRDLOperation):
    """Antares' scatter `data[indices[B, 0], M] =. updates[B, M]` (`+=.` adds): the result is
    `source` with, for every point of the iteration space in loop order (axes outermost
    first), the element at the yielded indices replaced by (`assign`) or increased by
    (`add`) the yielded value. Indices may be any `index` values (read from tensors); a
    point whose indices fall outside the tensor writes nothing. Repeated indices: the last
    point in loop order wins (`assign`), or every value is added (`add`)."""

    name = "ein.scatter"
    output_name = prop_def(StringAttr, prop_name="name")
    axes = prop_def(ArrayAttr[StringAttr])
    extents = prop_def(DenseArrayBase.constr(i64))
    combiner = prop_def(CombinerAttr)
    source = operand_def(TensorType)
    body = region_def("single_block")
    result = result_def(TensorType)
    traits = traits_def(RecursiveMemoryEffect())

    def __init__(
        self,
        name: str,
        combiner: Combiner,
        axes: Sequence[tuple[str, int]],
        source: SSAValue,
        body: Region | None = None,
    ):
        super().__init__(
            operands=[source],
            properties=_space_properties(name, combiner, axes),
            regions=[body if body is not None else _space_body(axes)],
            result_types=[source.type],
        )

    @property
    def axis_names(self) -> tuple[str, ...]:
        return tuple(a.data for a in self.axes.data)

    @property
    def axis_extents(self) -> tuple[int, ...]:
        return self.extents.get_values()

    @property
    def result_type(self) -> TensorType:
        assert isinstance(self.result.type, TensorType)
        return self.result.type

    @property
    def block(self) -> Block:
        return self.body.block

    @property
    def yield_op(self) -> ScatterYieldOp:
        term = self.block.last_op
        assert isinstance(term, ScatterYieldOp)
        return term

    def verify_(self) -> None:
        names, extents = self.axis_names, self.axis_extents
        if len(names) != len(extents) or len(set(names)) != len(names):
            raise VerifyException("ein.scatter: axes must be distinct, one extent each")
        if any(e <= 0 for e in extents):
            raise VerifyException("ein.scatter: axis extents must be positive")
        if self.combiner.data not in (Combiner.ASSIGN, Combiner.ADD):
            raise VerifyException("ein.scatter: the combiner is assign or add")
        if self.result.type != self.source.type:
            raise VerifyException("ein.scatter: the result has the source's type")
        block = self.block
        if len(block.args) != len(names) or any(
            not isinstance(a.type, IndexType) for a in block.args
        ):
            raise VerifyException("ein.scatter: the body takes one index argument per axis")
        if not isinstance(block.last_op, ScatterYieldOp):
            raise VerifyException("ein.scatter: the body must end with ein.scatter_yield")
        rank = self.result_type.get_num_dims()
        if len(self.yield_op.indices) != rank:
            raise VerifyException(
                f"ein.scatter: {len(self.yield_op.indices)} indices for a tensor of rank {rank}"
            )
        if self.yield_op.value.type != self.result_type.get_element_type():
            raise VerifyException("ein.scatter: yields a value of another element type")

    def print(self, printer: Printer) -> None:
        printer.print_string(" ")
        printer.print_string_literal(self.output_name.data)
        printer.print_string(f" {self.combiner.data} ")
        printer.print_operand(self.source)
        pairs = [f"{n} = {e}" for n, e in zip(self.axis_names, self.axis_extents)]
        printer.print_string(f" over [{', '.join(pairs)}]")
        printer.print_op_attributes(self.attributes)
        printer.print_string(" : ")
        printer.print_attribute(self.result.type)
        printer.print_string(" ")
        printer.print_region(self.body)

    @classmethod
    def parse(cls, parser: Parser) -> ScatterOp:
        name = parser.parse_str_literal("output tensor name")
        combiner = Combiner(parser.parse_keyword_in(["assign", "add"], "combiner"))
        source = parser.parse_unresolved_operand()

        def parse_axis() -> tuple[str, int]:
            axis = parser.parse_identifier("axis name")
            parser.parse_punctuation("=")
            return axis, parser.parse_integer(allow_boolean=False, allow_negative=False)

        parser.parse_keyword("over")
        axes = parser.parse_comma_separated_list(parser.Delimiter.SQUARE, parse_axis)
        attrs = parser.parse_optional_attr_dict()
        parser.parse_punctuation(":")
        result_type = parser.parse_type()
        body = parser.parse_region()
        op = cls(name, combiner, axes, parser.resolve_operand(source, result_type), body)
        op.attributes.update(attrs)
        return op


@irdl_op_definition
class ScatterYieldOp(IRDLOperation):
    """Terminates a scatter body: the element's indices and the value written there."""

    name = "ein.scatter_yield"
    indices = var_operand_def(IndexType)
    value = operand_def()
    traits = traits_def(IsTerminator(), HasParent(ScatterOp), Pure())
    assembly_format = "`[` $indices `]` `,` $value attr-dict `:` type($value)"

    def __init__(self, indices: Sequence[SSAValue], value: SSAValue):
        super().__init__(operands=[indices, value])


def combiner_identity(combiner: Combiner, is_float: bool, bits: int) -> float | int | bool:
    """The neutral element a reduction's output is initialised with."""
    match combiner:
        case Combiner.ADD | Combiner.OR:
            return 0.0 if is_float else 0
        case Combiner.MUL | Combiner.AND:
            return 1.0 if is_float else 1
        case Combiner.MAX:
            return float("-inf") if is_float else -(1 << (bits - 1))
        case Combiner.MIN:
            return float("inf") if is_float else (1 << (bits - 1)) - 1
        case Combiner.ASSIGN:
            raise ValueError("assignment has no identity")


Ein = Dialect("ein", [EinsumOp, LoadOp, ScatterOp, ScatterYieldOp, YieldOp], [CombinerAttr])

__all__ = [
    "Combiner",
    "CombinerAttr",
    "Ein",
    "EinsumOp",
    "LoadOp",
    "ScatterOp",
    "ScatterYieldOp",
    "YieldOp",
    "combiner_identity",
]
