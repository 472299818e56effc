"""The `egpu` dialect: einc's GPU/SIMD kernels, with assembly formats that read well.

After `convert-affine-to-egpu` a program is a host function launching kernels in order:

    func.func @kernel(%x: memref<64x16xf32> {ein.name = "x"}, %y: memref<64xf32> {...}) {
      egpu.launch @kernel_y(%x, %y) : memref<64x16xf32>, memref<64xf32>
      func.return
    }
    egpu.func @kernel_y(%x: memref<64x16xf32>, %y: memref<64xf32>) grid [1, 1, 1] block [64, 1, 1] {
      %i = egpu.global_id x
      ...
      egpu.return
    }

An `egpu.func` is one kernel: buffer (memref) arguments, a launch shape (`grid` work-groups
of `block` work-items, per dimension x y z) and a body that runs once per work-item. Its
index ops (`egpu.block_id x`, `egpu.thread_id y`, ...) read the work-item's coordinates;
their ranges follow from the launch shape. `egpu.barrier` synchronises a work-group,
`egpu.alloc_shared` is work-group (shared/local) memory, `egpu.subgroup_reduce` reduces over
a warp/subgroup. Vector ops (`egpu.vload`, `egpu.vstore`, `egpu.vbroadcast`, `egpu.vconvert`,
`egpu.vfma`, `egpu.vreduce`) work on builtin `vector<NxT>` values of a target's vector width
(`einc-vectorize-loops` makes them; elementwise arithmetic on vectors is xDSL's `arith`). `egpu.load_extf`,
`egpu.store_truncf` and `egpu.round` are legalization ops: a narrow float kept only in memory
(f16 on devices without half arithmetic), read widened and written narrowed.
"""

from __future__ import annotations

from abc import ABC, abstractmethod

from collections.abc import Sequence
from dataclasses import dataclass
from enum import auto
from typing import ClassVar

from xdsl.dialects.builtin import (
    AnyFloat,
    AnyFloatConstr,
    ArrayAttr,
    DenseArrayBase,
    DictionaryAttr,
    FunctionType,
    I64,
    IndexType,
    IntegerAttr,
    MemRefType,
    StringAttr,
    SymbolRefAttr,
    VectorType,
    i64,
)
from xdsl.dialects.utils.enum_attribute import EnumAttribute
from xdsl.ir import Attribute, Block, Data, Dialect, Operation, Region, SpacedOpaqueSyntaxAttribute, SSAValue
from xdsl.irdl import (
    AnyAttr,
    IRDLOperation,
    VarConstraint,
    base,
    irdl_attr_definition,
    irdl_op_definition,
    operand_def,
    opt_prop_def,
    prop_def,
    region_def,
    result_def,
    traits_def,
    var_operand_def,
)
from xdsl.parser import AttrParser, Parser
from xdsl.printer import Printer
from xdsl.traits import (
    HasParent,
    IsolatedFromAbove,
    IsTerminator,
    Pure,
    SymbolOpInterface,
)
from xdsl.utils.exceptions import VerifyException
from xdsl.utils.str_enum import StrEnum

VECTOR_WIDTHS = (2, 3, 4, 8, 16)


class Dim(StrEnum):
    X = auto()
    Y = auto()
    Z = auto()

    @property
    def index(self) -> int:
        return "xyz".index(str(self))


class ReduceKind(StrEnum):
    ADD = auto()
    MUL = auto()
    MAX = auto()
    MIN = auto()


@irdl_attr_definition
class DimAttr(EnumAttribute[Dim], SpacedOpaqueSyntaxAttribute):
    name = "egpu.dim"


@irdl_attr_definition
class ReduceKindAttr(EnumAttribute[ReduceKind], SpacedOpaqueSyntaxAttribute):
    name = "egpu.reduce_kind"


def _launch_shape(values: Sequence[int]) -> DenseArrayBase:
    return DenseArrayBase.from_list(i64, list(values))


# ---- kernels --------------------------------------------------------------------------------


@irdl_op_definition
class FuncOp(IRDLOperation):
    """One kernel: runs its body once per work-item of `grid` x `block` (x, y, z)."""

    name = "egpu.func"
    body = region_def("single_block")
    sym_name = prop_def(StringAttr)
    function_type = prop_def(FunctionType)
    arg_attrs = opt_prop_def(ArrayAttr[DictionaryAttr])
    grid = prop_def(DenseArrayBase)
    block = prop_def(DenseArrayBase)
    traits = traits_def(IsolatedFromAbove(), SymbolOpInterface())
    sym_visibility = opt_prop_def(StringAttr)  # unused: kernels are public entry points

    def __init__(
        self,
        name: str,
        arg_types: Sequence[Attribute],
        grid: Sequence[int],
        block: Sequence[int],
        body: Region | None = None,
        arg_attrs: Sequence[DictionaryAttr] | None = None,
    ):
        if body is None:
            body = Region(Block(arg_types=arg_types))
        super().__init__(
            properties={
                "sym_name": StringAttr(name),
                "function_type": FunctionType.from_lists(list(arg_types), []),
                "arg_attrs": ArrayAttr(arg_attrs) if arg_attrs is not None else None,
                "grid": _launch_shape(grid),
                "block": _launch_shape(block),
            },
            regions=[body],
        )

    @property
    def grid_size(self) -> tuple[int, int, int]:
        return tuple(self.grid.get_values())  # type: ignore[return-value]

    @property
    def block_size(self) -> tuple[int, int, int]:
        return tuple(self.block.get_values())  # type: ignore[return-value]

    @property
    def args(self) -> tuple[SSAValue, ...]:
        return tuple(self.body.block.args)

    def shared_bytes(self) -> int:
        """Bytes of work-group memory the kernel allocates."""
        return sum(op.bytes for op in self.body.block.ops if isinstance(op, AllocSharedOp))

    def verify_(self) -> None:
        for what, shape in (("grid", self.grid_size), ("block", self.block_size)):
            if len(shape) != 3 or any(v < 1 for v in shape):
                raise VerifyException(
                    f"egpu.func: {what} must be three positive sizes (x, y, z), got {list(shape)}"
                )
        if self.function_type.outputs.data:
            raise VerifyException("egpu.func: a kernel returns no values")
        if tuple(self.body.block.arg_types) != self.function_type.inputs.data:
            raise VerifyException("egpu.func: block arguments differ from the function type")
        for k, t in enumerate(self.function_type.inputs.data):
            if not isinstance(t, MemRefType):
                raise VerifyException(f"egpu.func: argument {k} is {t}, kernels take buffers")
        if not isinstance(self.body.block.last_op, ReturnOp):
            raise VerifyException("egpu.func: the body must end with egpu.return")

    def print(self, printer: Printer) -> None:
        printer.print_string(" ")
        printer.print_symbol_name(self.sym_name.data)
        attrs = self.arg_attrs.data if self.arg_attrs is not None else ()

        def arg(k: int) -> None:
            a = self.body.block.args[k]
            printer.print_block_argument(a)
            if k < len(attrs) and attrs[k].data:
                printer.print_string(" ")
                printer.print_attr_dict(attrs[k].data)

        printer.print_string("(")
        printer.print_list(range(len(self.body.block.args)), arg)
        printer.print_string(")")
        printer.print_string(f" grid [{', '.join(map(str, self.grid_size))}]")
        printer.print_string(f" block [{', '.join(map(str, self.block_size))}]")
        printer.print_op_attributes(self.attributes, print_keyword=True)
        printer.print_string(" ")
        printer.print_region(self.body, print_entry_block_args=False)

    @classmethod
    def parse(cls, parser: Parser) -> FuncOp:
        name = parser.parse_symbol_name().data

        def parse_arg() -> tuple[Parser.Argument, DictionaryAttr]:
            a = parser.parse_argument()
            return a, DictionaryAttr(parser.parse_optional_dictionary_attr_dict())

        args = parser.parse_comma_separated_list(parser.Delimiter.PAREN, parse_arg)

        def shape(keyword: str) -> list[int]:
            parser.parse_keyword(keyword)
            return parser.parse_comma_separated_list(
                parser.Delimiter.SQUARE, lambda: parser.parse_integer(allow_boolean=False)
            )

        grid, block = shape("grid"), shape("block")
        extra = parser.parse_optional_attr_dict_with_keyword()
        body = parser.parse_region([a for a, _ in args])
        arg_attrs = [d for _, d in args]
        op = cls(
            name,
            [a.type for a, _ in args],  # type: ignore[misc]
            grid,
            block,
            body,
            arg_attrs if any(d.data for d in arg_attrs) else None,
        )
        if extra is not None:
            op.attributes.update(extra.data)
        return op


@irdl_op_definition
class ReturnOp(IRDLOperation):
    name = "egpu.return"
    traits = traits_def(IsTerminator(), HasParent(FuncOp))
    assembly_format = "attr-dict"


@irdl_op_definition
class LaunchOp(IRDLOperation):
    """Host side: run kernel `@callee` on these buffers (after every earlier launch ends)."""

    name = "egpu.launch"
    callee = prop_def(SymbolRefAttr)
    buffers = var_operand_def(MemRefType)
    assembly_format = "$callee `(` $buffers `)` attr-dict `:` type($buffers)"

    def __init__(self, callee: str, buffers: Sequence[SSAValue]):
        super().__init__(operands=[buffers], properties={"callee": SymbolRefAttr(callee)})

    def kernel(self) -> FuncOp:
        from xdsl.traits import SymbolTable

        op = SymbolTable.lookup_symbol(self, self.callee)
        if not isinstance(op, FuncOp):
            raise VerifyException(f"egpu.launch: no egpu.func {self.callee}")
        return op

    def verify_(self) -> None:
        if self.parent_op() is None or isinstance(_enclosing_kernel(self), FuncOp):
            raise VerifyException("egpu.launch: launches happen on the host, not in a kernel")
        kernel = self.kernel()
        if tuple(o.type for o in self.buffers) != kernel.function_type.inputs.data:
            raise VerifyException(
                f"egpu.launch: buffer types differ from those of {self.callee}"
            )


# ---- work-item coordinates --------------------------------------------------------------------


def _enclosing_kernel(op: Operation) -> FuncOp | None:
    parent = op.parent_op()
    while parent is not None and not isinstance(parent, FuncOp):
        parent = parent.parent_op()
    return parent


def kernel_of(op: Operation) -> FuncOp:
    kernel = _enclosing_kernel(op)
    if kernel is None:
        raise VerifyException(f"{op.name}: only valid inside an egpu.func")
    return kernel


class IndexOp(IRDLOperation):
    """A coordinate of the running work-item along one dimension; its inclusive range
    follows from the enclosing kernel's launch shape."""

    dim = prop_def(DimAttr)
    result = result_def(IndexType)
    traits = traits_def(Pure())
    assembly_format = "$dim attr-dict"

    def __init__(self, dim: Dim):
        super().__init__(properties={"dim": DimAttr(dim)}, result_types=[IndexType()])

    @property
    def dimension(self) -> Dim:
        return self.dim.data

    def extent(self, kernel: FuncOp) -> int:
        """How many distinct values the index takes."""
        raise NotImplementedError

    def index_range(self) -> tuple[int, int]:
        kernel = kernel_of(self)
        return 0, self.extent(kernel) - 1

    def verify_(self) -> None:
        kernel_of(self)


@irdl_op_definition
class BlockIdOp(IndexOp):
    """The work-group (block) index: 0 <= id < grid."""

    name = "egpu.block_id"

    def extent(self, kernel: FuncOp) -> int:
        return kernel.grid_size[self.dimension.index]


@irdl_op_definition
class ThreadIdOp(IndexOp):
    """The work-item (thread) index within its work-group: 0 <= id < block."""

    name = "egpu.thread_id"

    def extent(self, kernel: FuncOp) -> int:
        return kernel.block_size[self.dimension.index]


@irdl_op_definition
class GlobalIdOp(IndexOp):
    """block_id * block + thread_id: 0 <= id < grid * block."""

    name = "egpu.global_id"

    def extent(self, kernel: FuncOp) -> int:
        d = self.dimension.index
        return kernel.grid_size[d] * kernel.block_size[d]


class LaunchSizeOp(IndexOp, ABC):
    """A size of the launch: one constant value per dimension."""

    @abstractmethod
    def size(self, kernel: FuncOp) -> int: ...

    def extent(self, kernel: FuncOp) -> int:
        return self.size(kernel) + 1

    def index_range(self) -> tuple[int, int]:
        size = self.size(kernel_of(self))
        return size, size


@irdl_op_definition
class BlockDimOp(LaunchSizeOp):
    """The work-group size (a constant of the launch, kept for readable kernels)."""

    name = "egpu.block_dim"

    def size(self, kernel: FuncOp) -> int:
        return kernel.block_size[self.dimension.index]


@irdl_op_definition
class GridDimOp(LaunchSizeOp):
    """The number of work-groups."""

    name = "egpu.grid_dim"

    def size(self, kernel: FuncOp) -> int:
        return kernel.grid_size[self.dimension.index]


# ---- synchronisation and memory ----------------------------------------------------------------


@irdl_op_definition
class BarrierOp(IRDLOperation):
    """Every work-item of the work-group waits here; shared-memory writes before it are
    visible to reads after it."""

    name = "egpu.barrier"
    assembly_format = "attr-dict"

    def __init__(self):
        super().__init__()

    def verify_(self) -> None:
        kernel_of(self)


@irdl_op_definition
class AllocSharedOp(IRDLOperation):
    """A buffer in work-group (shared / local) memory, alive for the kernel's duration.
    Only at the top level of a kernel's body (the languages declare it there)."""

    name = "egpu.alloc_shared"
    memref = result_def(MemRefType)
    assembly_format = "attr-dict `:` type($memref)"

    def __init__(self, memref_type: MemRefType):
        super().__init__(result_types=[memref_type])

    @property
    def bytes(self) -> int:
        t = self.memref.type
        assert isinstance(t, MemRefType)
        count = 1
        for d in t.get_shape():
            count *= d
        element = t.get_element_type()
        width = element.bitwidth if isinstance(element, AnyFloat) else getattr(element, "width").data
        return count * max(1, width // 8)

    def verify_(self) -> None:
        if not isinstance(self.parent_op(), FuncOp):
            raise VerifyException("egpu.alloc_shared: only at the top level of an egpu.func")
        t = self.memref.type
        assert isinstance(t, MemRefType)
        if any(d < 1 for d in t.get_shape()):
            raise VerifyException("egpu.alloc_shared: needs a static shape")


# ---- vectors ----------------------------------------------------------------------------------


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


@irdl_op_definition
class VLoadOp(IRDLOperation):
    """`width` consecutive elements of a buffer from flat row-major position
    `indices` (the last index advances)."""

    name = "egpu.vload"
    memref = operand_def(MemRefType)
    indices = var_operand_def(IndexType)
    result = result_def(VectorType)
    traits = traits_def()
    assembly_format = "$memref `[` $indices `]` attr-dict `:` type($memref) `->` type($result)"

    def __init__(self, memref: SSAValue, indices: Sequence[SSAValue], result_type: VectorType):
        super().__init__(operands=[memref, indices], result_types=[result_type])

    def verify_(self) -> None:
        t = self.memref.type
        assert isinstance(t, MemRefType)
        _check_vector(self, self.result.type, t.get_element_type())
        if len(self.indices) != t.get_num_dims():
            raise VerifyException(
                f"egpu.vload: {len(self.indices)} indices for a buffer of rank {t.get_num_dims()}"
            )


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


# ---- subgroups --------------------------------------------------------------------------------


@irdl_op_definition
class SubgroupReduceOp(IRDLOperation):
    """Every work-item of a subgroup (warp, wave) gets the reduction of the subgroup's
    values; all work-items of the subgroup must reach it. With `cluster N` (a power of two,
    at most the subgroup size): every work-item gets the reduction over its *cluster*, the
    N work-items of consecutive linear thread ids `[c * N, c * N + N)` (as MLIR's
    `gpu.subgroup_reduce ... cluster(size = N)`); all work-items of the cluster must reach
    it, and clusters never straddle subgroups."""

    name = "egpu.subgroup_reduce"
    kind = prop_def(ReduceKindAttr)
    cluster_size = opt_prop_def(IntegerAttr[I64])
    T: ClassVar = VarConstraint("T", AnyAttr())
    value = operand_def(T)
    result = result_def(T)
    assembly_format = "$kind $value (`cluster` $cluster_size^)? attr-dict `:` type($result)"

    def __init__(self, kind: ReduceKind, value: SSAValue, cluster_size: int | None = None):
        properties: dict[str, Attribute] = {"kind": ReduceKindAttr(kind)}
        if cluster_size is not None:
            properties["cluster_size"] = IntegerAttr(cluster_size, i64)
        super().__init__(operands=[value], properties=properties, result_types=[value.type])

    def verify_(self) -> None:
        kernel_of(self)
        if self.value.type != self.result.type:
            raise VerifyException("egpu.subgroup_reduce: result type differs from the operand's")
        if isinstance(self.value.type, (VectorType, MemRefType)):
            raise VerifyException("egpu.subgroup_reduce: reduces scalars")
        if self.cluster_size is not None:
            n = self.cluster_size.value.data
            if n < 1 or n & (n - 1):
                raise VerifyException(f"egpu.subgroup_reduce: cluster size {n} is not a power of two")


# ---- narrow floats kept in memory -------------------------------------------------------------


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



# ---- a kernel's split over Poplar tiles ----------------------------------------------------


@dataclass(frozen=True)
class TileSplit:
    """How a kernel runs on Poplar tiles (`split-poplar-vertices` decides, the Poplar printer
    prints it): `vertices` vertices of at most `bytes` bytes of tile memory each. With one
    vertex the kernel runs whole on tile 0 (`points`, `chunk` 0, no slices). Else vertex t
    runs the points [t * chunk, min((t + 1) * chunk, points)) of the kernel's point loop (its
    one top-level `scf.for`) on tile t; `written` holds (argument, s, c) for each written
    argument, accessed only at flat element s * point + c; `read` holds (argument, first
    elements, end elements) for each read-only argument connected as one slice per vertex."""

    vertices: int
    bytes: int
    points: int = 0
    chunk: int = 0
    written: tuple[tuple[int, int, int], ...] = ()
    read: tuple[tuple[int, tuple[int, ...], tuple[int, ...]], ...] = ()

    @property
    def split(self) -> bool:
        return self.vertices > 1

    @property
    def written_at(self) -> dict[int, tuple[int, int]]:
        """Written argument -> (s, c)."""
        return {k: (s, c) for k, s, c in self.written}

    @property
    def read_slices(self) -> dict[int, tuple[tuple[int, ...], tuple[int, ...]]]:
        """Read argument -> (first elements, end elements), one per vertex."""
        return {k: (first, end) for k, first, end in self.read}

    @property
    def bases(self) -> list[int]:
        """The arguments indexed from their slice's first element (`einc_base<k>`)."""
        return sorted([*(k for k, _, _ in self.written), *(k for k, _, _ in self.read)])


@irdl_attr_definition
class TileSplitAttr(Data[TileSplit]):
    """`#egpu.tile_split<vertices = 1, bytes = 80>` or `#egpu.tile_split<vertices = 7,
    bytes = 1296, points = 300, chunk = 43, written = [1 at 1 * point + 0], read = [2 from
    [0, 0, 0, 1, 1, 2, 2] to [1, 1, 2, 2, 3, 3, 3]]>`: an `egpu.func`'s `egpu.tile_split`
    attribute (see TileSplit)."""

    name = "egpu.tile_split"

    @classmethod
    def parse_parameter(cls, parser: AttrParser) -> TileSplit:
        def field(keyword: str) -> int:
            parser.parse_keyword(keyword)
            parser.parse_punctuation("=")
            return parser.parse_integer(allow_boolean=False)

        def integers() -> tuple[int, ...]:
            return tuple(
                parser.parse_comma_separated_list(
                    parser.Delimiter.SQUARE, lambda: parser.parse_integer(allow_boolean=False)
                )
            )

        def written() -> tuple[int, int, int]:
            k = parser.parse_integer(allow_boolean=False)
            parser.parse_keyword("at")
            s = parser.parse_integer(allow_boolean=False)
            parser.parse_punctuation("*")
            parser.parse_keyword("point")
            parser.parse_punctuation("+")
            return k, s, parser.parse_integer(allow_boolean=False)

        def read() -> tuple[int, tuple[int, ...], tuple[int, ...]]:
            k = parser.parse_integer(allow_boolean=False)
            parser.parse_keyword("from")
            first = integers()
            parser.parse_keyword("to")
            return k, first, integers()

        with parser.in_angle_brackets():
            vertices = field("vertices")
            parser.parse_punctuation(",")
            size = field("bytes")
            if parser.parse_optional_punctuation(",") is None:
                return TileSplit(vertices, size)
            points = field("points")
            parser.parse_punctuation(",")
            chunk = field("chunk")
            parser.parse_punctuation(",")
            parser.parse_keyword("written")
            parser.parse_punctuation("=")
            writes = parser.parse_comma_separated_list(parser.Delimiter.SQUARE, written)
            parser.parse_punctuation(",")
            parser.parse_keyword("read")
            parser.parse_punctuation("=")
            reads = parser.parse_comma_separated_list(parser.Delimiter.SQUARE, read)
        return TileSplit(vertices, size, points, chunk, tuple(writes), tuple(reads))

    def print_parameter(self, printer: Printer) -> None:
        t = self.data
        with printer.in_angle_brackets():
            printer.print_string(f"vertices = {t.vertices}, bytes = {t.bytes}")
            if not t.split:
                return
            writes = ", ".join(f"{k} at {s} * point + {c}" for k, s, c in t.written)
            reads = ", ".join(
                f"{k} from [{', '.join(map(str, first))}] to [{', '.join(map(str, end))}]"
                for k, first, end in t.read
            )
            printer.print_string(
                f", points = {t.points}, chunk = {t.chunk}, written = [{writes}], read = [{reads}]"
            )

    def verify(self) -> None:
        t = self.data
        if t.vertices < 1 or t.bytes < 0:
            raise VerifyException(f"egpu.tile_split: bad vertex count or size in {t}")
        if not t.split:
            if t.points or t.chunk or t.written or t.read:
                raise VerifyException("egpu.tile_split: one vertex has no points or slices")
            return
        if t.chunk < 1 or -(-t.points // t.chunk) != t.vertices or not t.written:
            raise VerifyException(
                f"egpu.tile_split: {t.points} points in chunks of {t.chunk} are not "
                f"{t.vertices} vertices (or nothing is written)"
            )
        if any(len(first) != t.vertices or len(end) != t.vertices for _, first, end in t.read):
            raise VerifyException("egpu.tile_split: a read slice per vertex")


EGPU = Dialect(
    "egpu",
    [
        FuncOp,
        ReturnOp,
        LaunchOp,
        BlockIdOp,
        ThreadIdOp,
        GlobalIdOp,
        BlockDimOp,
        GridDimOp,
        BarrierOp,
        AllocSharedOp,
        VLoadOp,
        VStoreOp,
        VBroadcastOp,
        VConvertOp,
        VFmaOp,
        VReduceOp,
        SubgroupReduceOp,
        LoadExtfOp,
        StoreTruncfOp,
        RoundOp,
    ],
    [DimAttr, ReduceKindAttr, TileSplitAttr],
)

__all__ = [
    "EGPU",
    "AllocSharedOp",
    "BarrierOp",
    "BlockDimOp",
    "BlockIdOp",
    "Dim",
    "DimAttr",
    "FuncOp",
    "GlobalIdOp",
    "GridDimOp",
    "IndexOp",
    "LaunchOp",
    "LoadExtfOp",
    "ReduceKind",
    "ReduceKindAttr",
    "ReturnOp",
    "RoundOp",
    "StoreTruncfOp",
    "SubgroupReduceOp",
    "ThreadIdOp",
    "TileSplit",
    "TileSplitAttr",
    "VBroadcastOp",
    "VConvertOp",
    "VFmaOp",
    "VLoadOp",
    "VReduceOp",
    "VStoreOp",
    "kernel_of",
]
