"""The HLSL target: one compute entry point per kernel, for glslang -> SPIR-V -> Vulkan.

    RWStructuredBuffer<float> input0 : register(u0);     // every buffer a global, binding k
    [numthreads(64, 1, 1)]
    void kernel_output0(uint3 einc_group : SV_GroupID, uint3 einc_thread : SV_GroupThreadID,
                        uint3 einc_global : SV_DispatchThreadID) { ... }

HLSL has no 8- or 16-bit types (without 16-bit extensions): `legalize-storage-dtypes`
stores int8/int16/float16 buffers as int32/float32 (the manifest's `storage_dtype`),
`legalize-narrow-ints` computes int8/int16 in int (wrapping), and halves are float values
rounded with `f32tof16`. Indices are 32-bit `int`. Math: overloaded names (`exp`), `abs`,
`max`/`min`, `mad`; `erf` and C's `round` (half away from zero) are helpers. HLSL has no
double-precision transcendental functions: a float64 `exp` is refused (TargetError), and
glslang has no signed 64-bit integer type: int64 tensors and values are refused too.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import ClassVar

from xdsl.dialects import arith, func
from xdsl.dialects import math as mathd
from xdsl.dialects.builtin import IndexType, ModuleOp, f32, f64, i1, i32
from xdsl.ir import Operation

from einc.dialects import egpu
from einc.runtime.manifest import LaunchManifest
from einc.targets.clike import CLikeTarget, Expr, Spelling, call, helper, _Writer  # pyright: ignore[reportPrivateUsage]
from einc.targets.gpu import DeviceTarget, Runner, host_buffers, use_text

HLSL_KEYWORDS = frozenset(
    """in out inout uniform line lineadj point triangle triangleadj sample vector matrix
    string texture sampler buffer cbuffer tbuffer shared groupshared precise snorm unorm
    register packoffset linear centroid nointerpolation noperspective technique pass
    compile half min16float min10float min16int min12int min16uint uint uint2 uint3 uint4
    int2 int3 int4 float2 float3 float4 double2 double3 double4 bool2 bool3 bool4 dword
    asm discard interface namespace template typename export row_major column_major
    globallycoherent numthreads mad lerp saturate clamp frac rcp sign step lit dot cross
    asfloat asint asuint f32tof16 f16tof32 isnan isinf isfinite any all""".split()
)

def _hlsl_alloc_shared(w: _Writer, op: egpu.AllocSharedOp) -> None:
    """`groupshared` arrays are globals: declared before the kernels."""
    t = op.memref.type
    saved, w.scopes = w.scopes, w.scopes[:1]
    name = w.declare(op.memref, op.memref.name_hint or "shared", buffer=True)
    w.scopes = saved
    element = w.ctype(t.get_element_type())  # type: ignore[union-attr]
    count = 1
    for d in t.get_shape():  # type: ignore[union-attr]
        count *= d
    use_text(w, f"shared {name}", f"groupshared {element} {name}[{count}];")


class HLSLTarget(DeviceTarget):
    name: ClassVar[str] = "hlsl"
    pipeline: ClassVar[str] = (
        "convert-ein-to-affine,legalize-f16-for-c,convert-affine-to-egpu{target=hlsl},"
        "legalize-storage-dtypes{target=hlsl},legalize-narrow-ints{target=hlsl},"
        "legalize-f16-storage,einc-vectorize-loops{target=hlsl},canonicalize,cse"
    )
    kernel_prefix: ClassVar[str] = ""
    index_type: ClassVar[str] = "int"
    barrier: ClassVar[str] = "GroupMemoryBarrierWithGroupSync();"
    helper_prefix: ClassVar[str] = "inline"
    reserved_words = HLSL_KEYWORDS
    work_item_index = {
        **{f"block_id.{d}": f"((int)einc_group.{d})" for d in "xyz"},
        **{f"thread_id.{d}": f"((int)einc_thread.{d})" for d in "xyz"},
        **{f"global_id.{d}": f"((int)einc_global.{d})" for d in "xyz"},
    }  # block and grid sizes print as the launch's constants
    types = {f64: "double", f32: "float", i32: "int", i1: "bool", IndexType(): "int"}
    """No int64: glslang's HLSL has `uint64_t` but no signed 64-bit type."""
    unsigned_types = {i32: "uint", i1: "bool", IndexType(): "uint"}
    vector_elements = frozenset({f32, i32})
    vector_type: ClassVar[str] = "{t}{n}"
    vector_typedef: ClassVar[str] = ""
    vector_lane: ClassVar[str] = "{v}[{k}]"
    vector_operators = CLikeTarget.vector_operators
    vector_load: ClassVar[str] = "{T}({lanes})"
    math_suffix = {f32: ""}
    """Only float has transcendental functions in HLSL."""
    literal_suffix = {f64: "L", f32: "f"}
    literal_cast = {}
    literal_names = {
        "INT32_MIN": "(-2147483647 - 1)", "INT32_MAX": "2147483647",
        "INFINITY": "asfloat(einc_inf_bits)", "NAN": "asfloat(einc_nan_bits)",
    }  # fmt: skip
    preamble = (
        "// infinities built at run time: naga refuses infinite or NaN constants",
        "static uint einc_inf_bits = 0x7f800000u;",
        "static uint einc_nan_bits = 0x7fc00000u;",
    )
    ops = {
        **CLikeTarget.ops,
        mathd.AbsFOp: Spelling("abs({0})", operands=(0,)),
        arith.MaxnumfOp: Spelling("max({0}, {1})", operands=(0,)),
        arith.MinnumfOp: Spelling("min({0}, {1})", operands=(0,)),
        mathd.FmaOp: Spelling("mad({0}, {1}, {2})", operands=(0,)),
        mathd.RsqrtOp: call("rsqrt"),
        mathd.ErfOp: helper("erf", 1),
        mathd.RoundOp: helper("round", 1),
        mathd.RoundEvenOp: call("round"),
        mathd.TruncOp: call("trunc"),
        mathd.CopySignOp: helper("copysign"),
        mathd.Log1pOp: Spelling("log(1 + {0})", operands=(0,)),
        mathd.ExpM1Op: Spelling("(exp({0}) - 1)", operands=(0,)),
        arith.RemSIOp: helper("remsi"),
    }  # fmt: skip
    helpers = {
        **CLikeTarget.helpers,
        # Abramowitz & Stegun 7.1.26 (|error| < 1.5e-7)
        "erf": "{t} s = a < 0 ? -1 : 1; a = abs(a); {t} t = 1 / (1 + 0.3275911f * a); "
        "{t} y = 1 - ((((1.061405429f * t - 1.453152027f) * t + 1.421413741f) * t "
        "- 0.284496736f) * t + 0.254829592f) * t * exp(-a * a); return s * y;",
        "round": "{t} r = trunc(a); return abs(a - r) >= 0.5f ? r + (a < 0 ? -1 : 1) : r;",
        "copysign": "return (a < 0) == (b < 0 || (b == 0 && asuint(b) != 0)) ? a : -a;",
        # glslang turns HLSL's int `%` into OpSMod (floor modulo), which naga computes through
        # floats (MIN % 7 gave 96); the quotient (OpSDiv) is exact.
        "remsi": "return a - (a / b) * b;",
    }
    unary_helpers = frozenset({"absi", "erf", "round"})
    round_f16: ClassVar[str] = "return f16tof32(f32tof16(a));"
    subgroup_reduce = {
        egpu.ReduceKind.ADD: "WaveActiveSum({0})", egpu.ReduceKind.MUL: "WaveActiveProduct({0})",
        egpu.ReduceKind.MAX: "WaveActiveMax({0})", egpu.ReduceKind.MIN: "WaveActiveMin({0})",
    }  # fmt: skip
    statement_printers = {
        **DeviceTarget.statement_printers,
        egpu.AllocSharedOp: _hlsl_alloc_shared,  # type: ignore[dict-item]
    }

    @classmethod
    def host(cls, w: _Writer, op: func.FuncOp) -> None:
        """Every buffer is a global `RWStructuredBuffer` at its manifest binding."""
        module = op.parent_op()
        assert isinstance(module, ModuleOp)
        for k, (value, buffer) in enumerate(host_buffers(module)):
            name = w.declare(value, buffer.name, buffer=True)
            element = w.ctype(value.type.get_element_type())
            w.line(f"RWStructuredBuffer<{element}> {name} : register(u{k});")

    @classmethod
    def top_level(cls, w: _Writer, op: Operation) -> None:
        if isinstance(op, egpu.FuncOp):
            module = op.parent_op()
            assert module is not None
            for launch in module.walk():
                if isinstance(launch, egpu.LaunchOp) and launch.callee.string_value() == op.sym_name.data:
                    for arg, buffer in zip(op.body.block.args, launch.buffers):
                        w.names[arg] = w.names[buffer]
        super().top_level(w, op)

    @classmethod
    def signature(cls, w: _Writer, f: func.FuncOp, params: Sequence[str]) -> str:
        x, y, z = f.block_size  # type: ignore[attr-defined]
        return (
            f"[numthreads({x}, {y}, {z})]\n"
            f"void {f.sym_name.data}(uint3 einc_group : SV_GroupID, "
            "uint3 einc_thread : SV_GroupThreadID, uint3 einc_global : SV_DispatchThreadID)"
        )

    @classmethod
    def manifest(cls, module: ModuleOp) -> LaunchManifest:
        manifest = super().manifest(module)
        buffers = tuple(dataclasses.replace(b, binding=k) for k, b in enumerate(manifest.buffers))
        return dataclasses.replace(manifest, buffers=buffers)

    @classmethod
    def build(cls, source: str, module: ModuleOp) -> Runner:
        from einc.runtime.vulkan import load_hlsl_kernel

        return load_hlsl_kernel(source, cls.manifest(module))
