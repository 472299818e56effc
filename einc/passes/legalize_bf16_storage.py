"""`legalize-bf16-storage`: bfloat16 kept only in memory, on every target.

No language einc prints to has a bfloat16 it can compute with everywhere (C before C23,
OpenCL, HLSL, PoCL's and glslang's SPIR-V), so bf16 is held as its bits (a 16-bit unsigned
integer: einc.targets.bfloat16) and computed in f32. Run after `legalize-f16-for-c` (which
computes every bf16 operation in f32 and rounds its result with `arith.truncf`); on every
kernel of a device target, and every function of the C target, it makes the rewrite
`legalize-f16-storage` makes for f16:

    %x = affine.load %a[%i] : memref<8xbf16>     ->  %x = egpu.load_extf %a[%i] : memref<8xbf16> -> f32
    %r = arith.truncf %y : f32 to bf16           ->  %r = egpu.round %y as bf16 : f32
    affine.store %r, %b[%i] : memref<8xbf16>     ->  egpu.store_truncf %r, %b[%i] : f32, memref<8xbf16>

bf16 constants become f32 constants (exact) and every other bf16 value becomes f32. An
f64 -> bf16 or int -> bf16 conversion rounds through f32, as NumPy's bfloat16 (ml_dtypes)
does.
"""

from __future__ import annotations

from dataclasses import dataclass

from xdsl.context import Context
from xdsl.dialects import func
from xdsl.dialects.builtin import BFloat16Type, MemRefType, ModuleOp, bf16

from einc.dialects import egpu
from xdsl.passes import ModulePass

from einc.passes.legalize_f16_storage import legalize_storage


def _holds_bf16(function: egpu.FuncOp | func.FuncOp) -> bool:
    for op in function.walk():
        for value in (*op.operands, *op.results):
            t = value.type
            if isinstance(t.get_element_type() if isinstance(t, MemRefType) else t, BFloat16Type):
                return True
    return False


@dataclass(frozen=True)
class LegalizeBf16StoragePass(ModulePass):
    name = "legalize-bf16-storage"

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        kernels = [f for f in op.ops if isinstance(f, egpu.FuncOp)]
        # a device target's kernels (its host function is not printed); else C's functions
        functions = kernels or [f for f in op.ops if isinstance(f, func.FuncOp) and f.body.blocks]
        for function in functions:
            if _holds_bf16(function):
                legalize_storage(function, bf16)
