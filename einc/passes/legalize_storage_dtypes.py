"""`legalize-storage-dtypes{target=T}`: buffers of a dtype the target cannot store (HLSL has
no int8, int16 or float16 buffers) are stored widened: int8/int16 as int32, float16 as
float32. The host buffer records the program's dtype (`egpu.dtype`), which the launch
manifest reports as `dtype`, with the device's as `storage_dtype` (the runtime converts at
the boundary). Inside kernels, loads narrow and stores widen, exactly:

    %x = affine.load %a[%i] : memref<8xi8>     ->  %w = affine.load %a[%i] : memref<8xi32>
                                                    %x = arith.trunci %w : i32 to i8
    affine.store %y, %b[%i] : memref<8xf16>    ->  %w = arith.extf %y : f16 to f32
                                                    affine.store %w, %b[%i] : memref<8xf32>

Run right after `convert-affine-to-egpu`; the narrow values left are legalized by
`legalize-narrow-ints` and `legalize-f16-storage`.
"""

from __future__ import annotations

import typing

from dataclasses import dataclass

from xdsl.context import Context
from xdsl.dialects import affine, arith, func, memref
from xdsl.dialects.builtin import (
    AnyFloat,
    IntegerType,
    ArrayAttr,
    DictionaryAttr,
    FunctionType,
    MemRefType,
    ModuleOp,
    StringAttr,
    f32,
    i32,
)
from xdsl.ir import Attribute, Block, Operation, SSAValue
from xdsl.rewriter import InsertPoint, Rewriter

from einc.dialects import egpu
from einc.errors import TargetError
from einc.passes.targeted import TargetedPass

from einc.ir.attrs import DTYPE_ATTR, dtype_name
from einc.ir.locations import at_op


_dtype = dtype_name


def _wide(t: Attribute) -> AnyFloat | IntegerType:
    return f32 if isinstance(t, AnyFloat) else i32


def _check_widenable(t: Attribute, storable: frozenset[str], target: str, where: Operation | None = None) -> None:
    """Only narrow types are widened; a wide one the target cannot store is refused (at the
    statement of `where`, the buffer's allocation or first use, when it is located)."""
    wide = _wide(t)
    narrow = isinstance(t, AnyFloat | IntegerType) and t.bitwidth < wide.bitwidth
    if not narrow or _dtype(wide) not in storable:
        loc, notes = at_op(where.location) if where is not None else (None, ())
        raise TargetError(
            f"the {target} target cannot store {_dtype(t)} buffers "
            f"(it stores {', '.join(sorted(storable))})", loc, notes,
        )  # fmt: skip


def _retype_args(f: func.FuncOp | egpu.FuncOp, types: dict[int, Attribute]) -> None:
    block = f.body.block
    for index, t in types.items():
        Rewriter.replace_value_with_new_type(block.args[index], t)
    f.function_type = FunctionType.from_lists(block.arg_types, [])


def _narrow_accesses(buffer: SSAValue, narrow: Attribute) -> None:
    """Loads of the widened `buffer` narrow their result, stores widen their value."""
    for use in list(buffer.uses):
        op = use.operation
        if isinstance(op, affine.LoadOp | memref.LoadOp):
            wide_load = op.clone()
            wide = Rewriter.replace_value_with_new_type(wide_load.results[0], _wide(narrow))
            cast: Operation = (
                arith.TruncFOp(wide, narrow)
                if isinstance(narrow, AnyFloat)
                else arith.TruncIOp(wide, typing.cast(IntegerType, narrow))
            )
            Rewriter.replace_op(op, [wide_load, cast], [cast.results[0]])
        elif isinstance(op, affine.StoreOp | memref.StoreOp) and use.index == 0:
            continue
        elif isinstance(op, affine.StoreOp | memref.StoreOp):
            widen: Operation = (
                arith.ExtFOp(op.value, _wide(narrow))
                if isinstance(narrow, AnyFloat)
                else arith.ExtSIOp(op.value, typing.cast(IntegerType, _wide(narrow)))
            )
            Rewriter.insert_op(widen, InsertPoint.before(op))
            op.operands[0] = widen.results[0]


@dataclass(frozen=True)
class LegalizeStorageDtypesPass(TargetedPass):
    name = "legalize-storage-dtypes"

    target: str = "hlsl"

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        storable = self.limits().storage_dtypes
        for host in [f for f in op.ops if isinstance(f, func.FuncOp) and f.body.blocks]:
            attrs = (
                [dict(a.data) for a in host.arg_attrs.data]
                if host.arg_attrs is not None
                else [{} for _ in host.body.block.args]
            )
            types: dict[int, Attribute] = {}
            for k, arg in enumerate(host.body.block.args):
                t = _memref_type(arg)
                if t is not None and _dtype(element := t.get_element_type()) not in storable:
                    first_use = next((use.operation for use in arg.uses), None)
                    _check_widenable(element, storable, self.target, first_use)
                    attrs[k][DTYPE_ATTR] = StringAttr(_dtype(element))
                    types[k] = MemRefType(_wide(element), t.get_shape())
            _retype_args(host, types)
            host.arg_attrs = ArrayAttr([DictionaryAttr(a) for a in attrs])
            for alloc in [o for o in host.walk() if isinstance(o, memref.AllocOp)]:
                t = _memref_type(alloc.memref)
                if t is None or _dtype(element := t.get_element_type()) in storable:
                    continue
                _check_widenable(element, storable, self.target, alloc)
                alloc.attributes[DTYPE_ATTR] = StringAttr(_dtype(element))
                Rewriter.replace_value_with_new_type(alloc.memref, MemRefType(_wide(element), t.get_shape()))
        kernels = {k.sym_name.data: k for k in op.ops if isinstance(k, egpu.FuncOp)}
        for launch in [l for l in op.walk() if isinstance(l, egpu.LaunchOp)]:
            kernel = kernels[launch.callee.string_value()]
            types = {}
            narrow: dict[int, Attribute] = {}
            for k, (buffer, arg) in enumerate(zip(launch.buffers, kernel.body.block.args)):
                if buffer.type != arg.type:
                    element = _element(arg)
                    assert element is not None, f"kernel argument {k} is not a buffer"
                    narrow[k] = element
                    types[k] = buffer.type
            _retype_args(kernel, types)
            block: Block = kernel.body.block
            for k, element in narrow.items():
                _narrow_accesses(block.args[k], element)
        for kernel in kernels.values():
            # work-group buffers the kernel declares (a cross-thread reduction's partials, a
            # shared tile) are stored widened the same way
            for alloc in [o for o in kernel.walk() if isinstance(o, egpu.AllocSharedOp)]:
                t = _memref_type(alloc.memref)
                if t is None or _dtype(element := t.get_element_type()) in storable:
                    continue
                _check_widenable(element, storable, self.target, alloc)
                Rewriter.replace_value_with_new_type(alloc.memref, MemRefType(_wide(element), t.get_shape()))
                _narrow_accesses(alloc.memref, element)


def _memref_type(value: SSAValue) -> MemRefType | None:
    t = value.type
    return t if isinstance(t, MemRefType) else None


def _element(value: SSAValue) -> Attribute | None:
    t = _memref_type(value)
    return t.get_element_type() if t is not None else None
