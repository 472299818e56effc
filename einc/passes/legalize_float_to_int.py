"""`legalize-float-to-int`: float -> integer conversions that saturate (docs/LANGUAGE.md, `.cast`).

A float converted to an integer type truncates toward zero; a value beyond the type's range
gives its minimum or maximum (the infinities included) and NaN gives 0. C, OpenCL, CUDA, HIP,
SYCL and Poplar leave an out-of-range conversion undefined (gcc on x86 gives the "integer
indefinite" -2^31 for 32-bit results; narrower types wrap it) and HLSL devices answer
differently again, so every target's pipeline rewrites each scalar `arith.fptosi` /
`arith.fptoui` into a conversion of a value that is always in range:

    %r = arith.fptosi %x : f32 to i8
becomes
    %below = arith.cmpf olt, %x, -128.0 : f32       // the minimum, a power of two: exact
    %c = arith.select %below, -128.0, %x : f32      // clamped below; NaN stays NaN
    %inside = arith.cmpf olt, %c, 128.0 : f32       // 2^7: the first value too large
    %safe = arith.select %inside, %c, 0.0 : f32     // too large or NaN: 0
    %conv = arith.fptosi %safe : f32 to i8          // trunc(%safe) fits: defined everywhere
    %above = arith.cmpf oge, %x, 128.0 : f32
    %top = arith.select %above, 127, 0 : i8
    %r = arith.ori %conv, %top : i8                 // %conv is 0 where %top is not

which C prints as `x < -128.0f ? -128.0f : x`, then
`(int8_t)(c < 128.0f ? c : 0.0f) | (x >= 128.0f ? 127 : 0)`. Both bounds are powers of two,
exact in f32 and f64 for every integer width (the maximum itself, 2^31 - 1 say, is not an
f32), so the comparisons decide exactly, with no rounding. For `fptoui` the bounds are 0 and
2^N. An f16 operand is extended to f32 first (exact; f16 cannot hold 2^31).

The conversion is computed unconditionally (never in an arm of a `?:`, where gcc, which
assumes a conversion may trap, would keep a branch), so gcc vectorizes the loop (masked
compares and `vcvttps2dq`) where einc's own vectorizer, which has no vector compare or
select, keeps it scalar under `#pragma omp simd`.

Run it after `legalize-f16-for-c` and before `einc-vectorize-loops`: it rewrites scalar
conversions only (vector conversions are made by the vectorizer from already legalized
scalar ones and are then always in range). Other ops are untouched, so loops without a
float -> integer conversion are unchanged.
"""

from __future__ import annotations

from typing import cast

from dataclasses import dataclass

from xdsl.context import Context
from xdsl.dialects import arith
from xdsl.dialects.builtin import (
    AnyFloat,
    FloatAttr,
    IntegerAttr,
    IntegerType,
    ModuleOp,
    f32,
)
from xdsl.ir import Operation, SSAValue
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


def saturating_bounds(bits: int, signed: bool) -> tuple[int, int]:
    """The integer type's range [minimum, maximum]; `maximum + 1` is the first float too large."""
    if signed:
        return -(1 << (bits - 1)), (1 << (bits - 1)) - 1
    return 0, (1 << bits) - 1


class SaturateFloatToInt(RewritePattern):
    @op_type_rewrite_pattern
    def match_and_rewrite(
        self, op: arith.FPToSIOp | arith.FPToUIOp, rewriter: PatternRewriter
    ) -> None:
        x, result = op.input, op.result
        if not isinstance(x.type, AnyFloat) or not isinstance(result.type, IntegerType):
            return  # a vector conversion: made in range by the scalar one it came from
        new_ops: list[Operation] = []
        if isinstance(x.type, NARROW_FLOATS):
            new_ops.append(wide := arith.ExtFOp(x, f32))
            x = wide.result
        ft, it = cast(AnyFloat, x.type), result.type
        lo, hi = saturating_bounds(it.width.data, isinstance(op, arith.FPToSIOp))

        def constant(value: float, t: AnyFloat | IntegerType) -> SSAValue:
            attr = FloatAttr(float(value), t) if isinstance(t, AnyFloat) else IntegerAttr(int(value), t)
            new_ops.append(c := arith.ConstantOp(attr))
            return c.result

        def emit(new: Operation) -> SSAValue:
            new_ops.append(new)
            return new.results[0]

        lo_f, limit_f, zero = constant(lo, ft), constant(hi + 1, ft), constant(0.0, ft)
        below = emit(arith.CmpfOp(x, lo_f, "olt"))
        clamped = emit(arith.SelectOp(below, lo_f, x))
        inside = emit(arith.CmpfOp(clamped, limit_f, "olt"))
        safe = emit(arith.SelectOp(inside, clamped, zero))
        converted = emit(type(op)(safe, it))
        above = emit(arith.CmpfOp(x, limit_f, "oge"))
        maximum = constant(hi if hi < 1 << (it.width.data - 1) else hi - (1 << it.width.data), it)
        top = emit(arith.SelectOp(above, maximum, constant(0, it)))
        saturated = emit(arith.OrIOp(converted, top))
        rewriter.replace(op, new_ops, [saturated])


@dataclass(frozen=True)
class LegalizeFloatToIntPass(ModulePass):
    name = "legalize-float-to-int"

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        if not any(is_a(inner, _CONVERSIONS) for inner in walk_ops(op)):
            return  # nothing to rewrite: no walk of the pattern rewriter (a PatternRewriter per op)
        PatternRewriteWalker(Located(SaturateFloatToInt()), apply_recursively=False).rewrite_module(op)


_CONVERSIONS = (arith.FPToSIOp, arith.FPToUIOp)
"""The ops SaturateFloatToInt rewrites (its match's type)."""
