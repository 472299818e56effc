"""The `egpu` dialect's kernel ops: `egpu.func` (a kernel and its launch shape), `egpu.return`,
the host's `egpu.launch`, the work-item coordinates (`egpu.block_id`, `thread_id`, `global_id`,
`block_dim`, `grid_dim`), work-group synchronisation and memory (`egpu.barrier`,
`egpu.alloc_shared`) and `egpu.subgroup_reduce`. The dialect is `einc.dialects.egpu`.
"""

from __future__ import annotations

import math
import weakref
from abc import ABC, abstractmethod
from collections.abc import Sequence
from typing import ClassVar

from xdsl.dialects import affine, memref
from xdsl.dialects.builtin import (
    I64,
    AnyFloat,
    ArrayAttr,
    DenseArrayBase,
    DictionaryAttr,
    FunctionType,
    IndexType,
    IntegerAttr,
    IntegerType,
    MemRefType,
    StringAttr,
    SymbolRefAttr,
    VectorType,
    i64,
)
from xdsl.ir import Attribute, Block, Operation, Region, SSAValue
from xdsl.irdl import (
    AnyAttr,
    AttrSizedOperandSegments,
    IRDLOperation,
    VarConstraint,
    irdl_op_definition,
    operand_def,
    opt_prop_def,
    prop_def,
    region_def,
    result_def,
    traits_def,
    var_operand_def,
)
from xdsl.parser import Parser
from xdsl.printer import Printer
from xdsl.traits import (
    HasParent,
    IsolatedFromAbove,
    IsTerminator,
    Pure,
    SymbolOpInterface,
)
from xdsl.utils.exceptions import VerifyException

from einc.dialects.egpu_attrs import Dim, DimAttr, ReduceKind, ReduceKindAttr


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

    def private_bytes(self) -> int:
        """Bytes of the kernel's local arrays (`memref.alloca`): each work-item's own."""
        total = 0
        for op in self.walk():
            if isinstance(op, memref.AllocaOp):
                t = op.memref.type
                element = t.get_element_type()
                bits = element.bitwidth if isinstance(element, AnyFloat) else (
                    element.width.data if isinstance(element, IntegerType) else 64
                )
                total += math.prod(t.get_shape()) * max(1, bits // 8)
        return total

    def written_tensor(self) -> str | None:
        """The name of the first tensor argument the kernel stores to (its statement's output)."""
        args = set(self.body.block.args)
        for op in self.walk():
            if isinstance(op, affine.StoreOp | memref.StoreOp) and op.memref in args:
                name = op.memref.name_hint
                return name if isinstance(name, str) else None
        return None

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
        """The `egpu.func @callee`, as `SymbolTable.lookup_symbol` finds it, through a table
        of the symbols of the launch's symbol table (the module) by name, made once and made
        again when it misses or names an op no longer there: every launch's verifier asks,
        and a lookup goes through all of the module's ops."""
        from xdsl.traits import SymbolTable

        op = _lookup_symbol(self, self.callee)
        if op is None:
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


_SYMBOLS: weakref.WeakKeyDictionary[Operation, dict[str, Operation]] = weakref.WeakKeyDictionary()
"""A symbol table op -> its symbols by name (the first op of each name, as lookups find)."""


def _lookup_symbol(op: Operation, name: SymbolRefAttr) -> Operation | None:
    """The op `name` refers to from `op` (a flat reference), from `_SYMBOLS`; None when the
    table cannot say (a nested reference, no symbol table, no such symbol: the caller asks
    `SymbolTable.lookup_symbol`, which explains)."""
    from xdsl.traits import SymbolTable

    if name.nested_references.data:
        return None
    anchor = op.parent_op()
    while anchor is not None and not anchor.has_trait(SymbolTable):
        anchor = anchor.parent_op()
    if anchor is None:
        return None
    key = name.root_reference.data

    def current(found: Operation | None) -> bool:
        interface = found.get_trait(SymbolOpInterface) if found is not None else None
        return (
            found is not None and interface is not None and found.parent_op() is anchor
            and (sym := interface.get_sym_attr_name(found)) is not None and sym.data == key
        )

    table = _SYMBOLS.get(anchor)
    if table is not None and current(table.get(key)):
        return table[key]
    table = {}
    for other in anchor.regions[0].block.ops:
        interface = other.get_trait(SymbolOpInterface)
        if interface is not None and (sym := interface.get_sym_attr_name(other)) is not None:
            table.setdefault(sym.data, other)
    _SYMBOLS[anchor] = table
    return table.get(key)


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


@irdl_op_definition
class CopyAsyncOp(IRDLOperation):
    """`egpu.copy_async %src[%i, ...] to %dst[%j, ...] (lanes N)?`: start copying one element
    (or N consecutive ones, along the last dimension of both buffers) of a global buffer into
    a shared one without waiting for it (CUDA sm_80+ `cp.async`); the elements are there
    after this work-item's next `egpu.async_wait`. 4, 8 or 16 bytes a copy; N > 1 from
    vector pairs (`einc-vectorize-global`), both addresses aligned to the N elements."""

    name = "egpu.copy_async"
    irdl_options = (AttrSizedOperandSegments(as_property=True),)
    source = operand_def(MemRefType)
    source_indices = var_operand_def(IndexType)
    memref = operand_def(MemRefType)
    """The shared destination (named as loads' and stores' buffers are)."""
    indices = var_operand_def(IndexType)
    lanes = opt_prop_def(IntegerAttr[I64])
    """Consecutive elements copied (absent: 1)."""
    assembly_format = (
        "$source `[` $source_indices `]` `to` $memref `[` $indices `]` (`lanes` $lanes^)? attr-dict "
        "`:` type($source) `,` type($memref)"
    )

    def __init__(
        self, source: SSAValue, source_indices: Sequence[SSAValue], dest: SSAValue, indices: Sequence[SSAValue], lanes: int = 1
    ):
        properties: dict[str, Attribute] = {} if lanes == 1 else {"lanes": IntegerAttr(lanes, i64)}
        super().__init__(operands=[source, source_indices, dest, indices], properties=properties)

    @property
    def width(self) -> int:
        """Consecutive elements copied."""
        return 1 if self.lanes is None else self.lanes.value.data

    def verify_(self) -> None:
        kernel_of(self)
        src, dst = self.source.type, self.memref.type
        assert isinstance(src, MemRefType) and isinstance(dst, MemRefType)
        if src.get_element_type() != dst.get_element_type():
            raise VerifyException("egpu.copy_async: the buffers' element types differ")
        if len(self.source_indices) != len(src.get_shape()) or len(self.indices) != len(dst.get_shape()):
            raise VerifyException("egpu.copy_async: an index per dimension of each buffer")
        if self.width < 1:
            raise VerifyException("egpu.copy_async: copies at least one element")


@irdl_op_definition
class PrefetchOp(IRDLOperation):
    """`egpu.prefetch %buf[%i, ...]`: a hint that the element (its cache line) will be read
    soon (`transform.einc.prefetch`). It reads and writes nothing: C prints
    `__builtin_prefetch(&buf[i])` (a prefetch instruction, which never faults), the other
    targets print nothing. The indices lie inside the buffer (the transform guards them)."""

    name = "egpu.prefetch"
    memref = operand_def(MemRefType)
    indices = var_operand_def(IndexType)
    assembly_format = "$memref `[` $indices `]` attr-dict `:` type($memref)"

    def __init__(self, buffer: SSAValue, indices: Sequence[SSAValue]):
        super().__init__(operands=[buffer, indices])

    def verify_(self) -> None:
        t = self.memref.type
        assert isinstance(t, MemRefType)
        if len(self.indices) != len(t.get_shape()):
            raise VerifyException("egpu.prefetch: an index per dimension of the buffer")


@irdl_op_definition
class AsyncWaitOp(IRDLOperation):
    """Wait until every `egpu.copy_async` this work-item started has written its element
    (a barrier after it then makes them visible to the work-group)."""

    name = "egpu.async_wait"
    assembly_format = "attr-dict"

    def __init__(self):
        super().__init__()

    def verify_(self) -> None:
        kernel_of(self)
