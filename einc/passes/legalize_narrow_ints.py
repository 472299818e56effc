"""`legalize-narrow-ints{target=T}`: int8 / int16 values computed in int32, for languages
without those types (HLSL). Run after `legalize-storage-dtypes` (buffers are then int32).

Every i8 / i16 value becomes an i32 holding the same number (sign-extended), so comparisons,
`and`/`or`/`xor`, arithmetic right shifts, `remsi`, min/max and select are unchanged. A result
that can leave the narrow range (`+ - * << /`, conversions into the type, ...) is wrapped
back into it, as the narrow arithmetic would have:

    %r = arith.addi %a, %b : i8    ->  %s = arith.addi %a, %b : i32
                                       %t = arith.shli %s, %c24 : i32
                                       %r = arith.shrsi %t, %c24 : i32

Unsigned operations (`shrui`, `divui`, `remui`, `extui`, `uitofp`, unsigned `cmpi`) see the
narrow bit pattern: their operands are masked (`andi 0xff`) first. `extsi` out of a narrow
type is the value itself (or `extsi i32 to i64`); `trunci` into one wraps.
"""

from __future__ import annotations

from dataclasses import dataclass

from xdsl.context import Context
from xdsl.dialects import arith
from xdsl.dialects.builtin import IntegerAttr, IntegerType, ModuleOp, i32
from xdsl.ir import Attribute, Operation, SSAValue
from xdsl.rewriter import InsertPoint, Rewriter

from einc.dialects import egpu
from einc.passes.targeted import TargetedPass

EXACT = (
    arith.AndIOp, arith.OrIOp, arith.XOrIOp, arith.ShRSIOp, arith.RemSIOp, arith.SelectOp,
    arith.MaxSIOp, arith.MinSIOp, arith.ExtSIOp, arith.ConstantOp,
)  # fmt: skip
"""Ops whose i32 result on sign-extended narrow operands is already in the narrow range."""
UNSIGNED = (arith.ShRUIOp, arith.DivUIOp, arith.RemUIOp, arith.ExtUIOp, arith.UIToFPOp)
UNSIGNED_PREDICATES = range(6, 10)  # ult ule ugt uge


def _narrow_width(t: Attribute, narrow: frozenset[int]) -> int | None:
    return t.width.data if isinstance(t, IntegerType) and t.width.data in narrow else None


def _constant(value: int, at: Operation) -> SSAValue:
    c = arith.ConstantOp(IntegerAttr(value, i32))
    Rewriter.insert_op(c, InsertPoint.before(at))
    return c.result


def _wrap(value: SSAValue, bits: int, after: Operation) -> SSAValue:
    """`(value << (32 - bits)) >> (32 - bits)`, inserted after `after`."""
    shift = arith.ConstantOp(IntegerAttr(32 - bits, i32))
    left = arith.ShLIOp(value, shift.result)
    right = arith.ShRSIOp(left.result, shift.result)
    Rewriter.insert_op([shift, left, right], InsertPoint.after(after))
    return right.result


def _mask(value: SSAValue, bits: int, before: Operation) -> SSAValue:
    mask = _constant((1 << bits) - 1, before)
    masked = arith.AndIOp(value, mask)
    Rewriter.insert_op(masked, InsertPoint.before(before))
    return masked.result


def legalize_kernel(kernel: egpu.FuncOp, narrow: frozenset[int]) -> None:
    """Widen every narrow integer of `kernel` to i32 (see the module docstring)."""
    ops = list(kernel.walk())
    before = {
        op: ([o.type for o in op.operands], [r.type for r in op.results]) for op in ops
    }
    for op in ops:  # 1. every narrow value becomes i32
        for r in list(op.results):
            if _narrow_width(r.type, narrow):
                Rewriter.replace_value_with_new_type(r, i32)
        for region in op.regions:
            for block in region.blocks:
                for arg in list(block.args):
                    if _narrow_width(arg.type, narrow):
                        Rewriter.replace_value_with_new_type(arg, i32)
    for op in ops:  # 2. fix each op that touched a narrow type
        operand_types, result_types = before[op]
        in_bits = [_narrow_width(t, narrow) for t in operand_types]
        out_bits = [_narrow_width(t, narrow) for t in result_types]
        if not any(in_bits) and not any(out_bits):
            continue
        if isinstance(op, arith.ConstantOp) and isinstance(op.value, IntegerAttr):
            bits = out_bits[0] or 32
            v = op.value.value.data & ((1 << bits) - 1)
            v = v - (1 << bits) if v >= 1 << (bits - 1) else v
            Rewriter.replace_op(op, arith.ConstantOp(IntegerAttr(v, i32)))
            continue
        if isinstance(op, UNSIGNED) or (
            isinstance(op, arith.CmpiOp) and op.predicate.value.data in UNSIGNED_PREDICATES
        ):
            for k, bits in enumerate(in_bits):
                if bits:
                    op.operands[k] = _mask(op.operands[k], bits, op)
        if isinstance(op, arith.ExtSIOp | arith.ExtUIOp | arith.TruncIOp) and (
            op.input.type == op.result.type
        ):  # now i32 -> i32
            value = op.input
            if isinstance(op, arith.TruncIOp) and out_bits[0]:
                value = _wrap(value, out_bits[0], op)
            Rewriter.replace_op(op, [], [value])
            continue
        if len(op.results) == 1 and out_bits[0] and not isinstance(op, EXACT):
            result = op.results[0]
            uses = list(result.uses)
            wrapped = _wrap(result, out_bits[0], op)
            for use in uses:
                use.operation.operands[use.index] = wrapped


@dataclass(frozen=True)
class LegalizeNarrowIntsPass(TargetedPass):
    name = "legalize-narrow-ints"

    target: str = "hlsl"

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        computable = self.limits().arith_dtypes
        narrow = frozenset(b for b in (8, 16) if f"int{b}" not in computable)
        if not narrow:
            return
        for kernel in [k for k in op.ops if isinstance(k, egpu.FuncOp)]:
            legalize_kernel(kernel, narrow)
