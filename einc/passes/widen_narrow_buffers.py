"""`einc-widen-narrow-buffers`: a device kernel's float16/bfloat16 private arrays, and its
shared tiles where the target cannot declare 16-bit ones, held as float32.

A schedule's `cache_write ... in "local"` of a float16 output (the register tile of a
float16 matmul), or `cache_read ... in "shared"` of a bfloat16 input on OpenCL, makes an
array of a type the device target cannot declare (OpenCL C without `cl_khr_fp16`, HLSL with
no 16-bit types) or computes in float32 anyway (every device target: `legalize-f16-for-c`).
Run right after `legalize-f16-for-c`, on the loops before `convert-affine-to-egpu`, it
retypes each such `memref.alloca` to f32:

    %acc = memref.alloca() : memref<4x4xf16>        ->  %acc = memref.alloca() : memref<4x4xf32>
    %x = affine.load %acc[%i, %j] : memref<4x4xf16> ->  %w = affine.load %acc[%i, %j] : memref<4x4xf32>
    %y = arith.extf %x : f16 to f32                     (%y's uses take %w)
    %r = arith.truncf %s : f32 to f16
    affine.store %r, %acc[%i, %j] : memref<4x4xf16> ->  %e = arith.extf %r : f16 to f32
                                                        affine.store %e, %acc[%i, %j] : memref<4x4xf32>

Every value stored is a float16 (bfloat16) value, which float32 holds exactly, and every
value loaded is widened before it is computed with, so the numbers are the same bits as
with a 16-bit array: the rounding after each operation stays where `legalize-f16-for-c` put
it. A load used otherwise than widened to f32 (copied into a 16-bit buffer) gets an exact
`arith.truncf` back. Private arrays are widened on every device target (none computes in
float16, and a float32 register tile has no conversion in the hot loop); shared tiles only
where the target has no 16-bit shared arrays (`narrow_shared_tiles` false: OpenCL, SYCL,
HLSL). CUDA and HIP keep their 16-bit shared tiles (half the shared memory and copies,
tensor-core fragments read them as they are). A shared tile held as float32 takes twice the
bytes; convert-affine-to-egpu checks the total against the target's shared memory.
"""

from __future__ import annotations

from dataclasses import dataclass

from xdsl.context import Context
from xdsl.dialects import affine, arith, memref
from xdsl.dialects.builtin import FloatAttr, MemRefType, ModuleOp, StringAttr, f32
from xdsl.ir import Operation, SSAValue
from xdsl.rewriter import InsertPoint, Rewriter

from einc.errors import InternalCompilerError
from einc.ir.attrs import MEMORY_ATTR, NARROW_FLOATS
from einc.passes.targeted import TargetedPass

_LOADS = (affine.LoadOp, memref.LoadOp)
_STORES = (affine.StoreOp, memref.StoreOp)


def widened_buffers(module: Operation, shared: bool) -> list[memref.AllocaOp]:
    """The float16/bfloat16 `memref.alloca`s of `module` to hold as float32: private arrays,
    and shared tiles (einc.memory = "shared") where `shared`."""
    found = []
    for op in module.walk():
        if not isinstance(op, memref.AllocaOp):
            continue
        t = op.memref.type
        if not isinstance(t, MemRefType) or not isinstance(t.get_element_type(), NARROW_FLOATS):
            continue
        if op.attributes.get(MEMORY_ATTR) == StringAttr("shared") and not shared:
            continue
        found.append(op)
    return found


def _wide_value(value: SSAValue, before: Operation) -> SSAValue:
    """`value` (a float16/bfloat16 or float32 value) as float32: a float constant rebuilt
    wide beside it, an f32 value as it is, else widened (exact) in front of `before`."""
    if value.type == f32:
        return value
    owner = value.owner
    if isinstance(owner, arith.ConstantOp) and isinstance(owner.value, FloatAttr):
        const = arith.ConstantOp(FloatAttr(owner.value.value.data, f32))
        Rewriter.insert_op(const, InsertPoint.after(owner))
        return const.result
    ext = arith.ExtFOp(value, f32)
    Rewriter.insert_op(ext, InsertPoint.before(before))
    return ext.result


def _widen_load(load: affine.LoadOp | memref.LoadOp) -> None:
    """The load now yields f32: widening uses take it as it is, others an exact truncf."""
    (result,) = load.results
    narrow = result.type
    wide = Rewriter.replace_value_with_new_type(result, f32)
    back: SSAValue | None = None
    for use in list(wide.uses):
        user = use.operation
        if isinstance(user, arith.ExtFOp) and user.result.type == f32:
            user.result.replace_all_uses_with(wide)
            Rewriter.erase_op(user)
            continue
        if back is None:
            trunc = arith.TruncFOp(wide, narrow)
            Rewriter.insert_op(trunc, InsertPoint.after(load))
            back = trunc.result
        user.operands[use.index] = back


def widen(alloca: memref.AllocaOp) -> None:
    """Hold `alloca`'s elements as float32 (see the module's docstring)."""
    t = alloca.memref.type
    assert isinstance(t, MemRefType)
    users = [use.operation for use in alloca.memref.uses]
    for user in users:
        if isinstance(user, _LOADS) and user.memref is alloca.memref:
            continue
        if isinstance(user, _STORES) and user.memref is alloca.memref and user.value is not alloca.memref:
            continue
        raise InternalCompilerError(
            f"einc-widen-narrow-buffers: the {t.get_element_type()} buffer "
            f"'{alloca.memref.name_hint}' is used by {user.name}, not a load or store"
        )
    wide_type = MemRefType(f32, t.get_shape(), t.layout, t.memory_space)
    memory = Rewriter.replace_value_with_new_type(alloca.memref, wide_type)
    assert memory.owner is alloca
    for user in users:
        if isinstance(user, _LOADS):
            _widen_load(user)
        elif isinstance(user, _STORES):
            value = user.value
            user.operands[0] = _wide_value(value, user)
            if not value.uses and isinstance(value.owner, arith.ConstantOp):
                Rewriter.erase_op(value.owner)


@dataclass(frozen=True)
class WidenNarrowBuffersPass(TargetedPass):
    name = "einc-widen-narrow-buffers"

    target: str = "opencl"
    """Whose `narrow_shared_tiles` says whether 16-bit shared tiles stay 16-bit."""

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        shared = not self.target_facts().narrow_shared_tiles
        for alloca in widened_buffers(op, shared):
            widen(alloca)


__all__ = ["WidenNarrowBuffersPass", "widen", "widened_buffers"]
