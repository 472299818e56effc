"""`legalize-f16-for-c`: compute f16 and bf16 arithmetic and math in f32.

    %r = math.exp %x : f16
becomes
    %0 = arith.extf %x : f16 to f32
    %1 = math.exp %0 : f32
    %r = arith.truncf %1 : f32 to f16

for every floating-point computation (arith's float arithmetic and comparisons, all of
`math`) that has an f16 operand or result. f16 stays a storage type: loads, stores,
constants, `select` and conversions are untouched. Rounding to f16 after each operation
keeps f16 semantics: for `+ - * /` and `sqrt` the f32 result rounded to f16 is the correctly
rounded f16 result (f32 carries more than 2 * 11 + 2 significand bits), and math functions
get f32 accuracy, as NumPy's float16 loops (which also compute in float32). C has no f16
math library and OpenCL devices without `cl_khr_fp16` arithmetic need the same rewrite, so
the C-like printers only ever see f16 in memory and in conversions. bf16 is treated the same
way (f32 carries more than 2 * 8 + 2 significand bits: the same argument holds).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import get_args

from xdsl.context import Context
from xdsl.dialects import arith, math
from xdsl.dialects.builtin import FloatAttr, ModuleOp, f32
from xdsl.ir import Attribute, Operation, SSAValue
from xdsl.passes import ModulePass
from xdsl.pattern_rewriter import (
    PatternRewriter,
    PatternRewriteWalker,
    RewritePattern,
    op_type_rewrite_pattern,
)

from einc.ir.attrs import NARROW_FLOATS
from einc.ir.locations import Located
from einc.transforms.loop_analysis import is_a, walk_ops

FloatCompute = (
    arith.FloatingPointLikeBinaryOperation
    | arith.NegfOp
    | arith.CmpfOp
    | math.FloatingPointLikeUnaryMathOperation
    | math.FloatingPointLikeBinaryMathOperation
    | math.FmaOp
    | math.FPowIOp
)


def _widen(t: Attribute) -> Attribute:
    return f32 if isinstance(t, NARROW_FLOATS) else t


class ComputeF16InF32(RewritePattern):
    @op_type_rewrite_pattern
    def match_and_rewrite(self, op: FloatCompute, rewriter: PatternRewriter) -> None:
        types = (*op.operand_types, *op.result_types)
        if not any(isinstance(t, NARROW_FLOATS) for t in types):
            return
        new_ops: list[Operation] = []
        operands: list[SSAValue] = []
        for operand in op.operands:
            if not isinstance(operand.type, NARROW_FLOATS):
                operands.append(operand)
            elif isinstance(c := operand.owner, arith.ConstantOp) and isinstance(
                c.value, FloatAttr
            ):  # an f16 constant is exact in f32
                constant_f32 = arith.ConstantOp(FloatAttr(c.value.value.data, f32))
                new_ops.append(constant_f32)
                operands.append(constant_f32.result)
            else:
                new_ops.append(ext := arith.ExtFOp(operand, f32))
                operands.append(ext.result)
        wide = type(op).create(
            operands=operands,
            result_types=[_widen(t) for t in op.result_types],
            properties=dict(op.properties),
            attributes=dict(op.attributes),
        )
        new_ops.append(wide)
        results: list[SSAValue] = []
        for old, new in zip(op.results, wide.results):
            if isinstance(old.type, NARROW_FLOATS):
                new_ops.append(trunc := arith.TruncFOp(new, old.type))
                results.append(trunc.result)
            else:
                results.append(new)
        rewriter.replace(op, new_ops, results)


@dataclass(frozen=True)
class LegalizeF16ForCPass(ModulePass):
    name = "legalize-f16-for-c"

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        if not any(_computes_f16(inner) for inner in walk_ops(op)):
            return  # nothing to rewrite: no walk of the pattern rewriter (a PatternRewriter per op)
        PatternRewriteWalker(Located(ComputeF16InF32()), apply_recursively=False).rewrite_module(op)


_FLOAT_COMPUTE: tuple[type[Operation], ...] = get_args(FloatCompute)
"""FloatCompute's op classes."""


def _computes_f16(op: Operation) -> bool:
    """Whether ComputeF16InF32 rewrites `op` (its match's type and first test)."""
    return is_a(op, _FLOAT_COMPUTE) and any(isinstance(t, NARROW_FLOATS) for t in (*op.operand_types, *op.result_types))
