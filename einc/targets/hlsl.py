"""The HLSL target: one compute entry point per kernel, for glslang -> SPIR-V -> Vulkan.

    RWStructuredBuffer<float> input0 : register(u0);     // every buffer a global, binding k
    [numthreads(64, 1, 1)]
    void kernel_output0(uint3 einc_group : SV_GroupID, uint3 einc_thread : SV_GroupThreadID,
                        uint3 einc_global : SV_DispatchThreadID) { ... }

HLSL has no 8- or 16-bit types (without 16-bit extensions): `legalize-storage-dtypes`
stores int8/int16/float16 buffers as int32/float32 (the manifest's `storage_dtype`),
`legalize-narrow-ints` computes int8/int16 in int (wrapping), and halves are float values
rounded with `f32tof16`. Indices are 32-bit `int`. Math: HLSL's overloaded built-ins where
they are accurate (`sqrt`, `rsqrt`, `floor`, `abs`, `mad`, ...), C's `round` (half away from
zero) as a helper, and einc's own functions (einc.targets.hlsl_math) where Vulkan's precision
rules let the built-in fall short, or it is missing or float32-precision for float64: float32
`exp exp2 log log2 log10 tanh erf erfc sin cos tan pow`, every float64 function. NaN is
tested on the bits, in every float compare that a NaN must make true or that fast-math
folding could (`x != x` was false on the Vulkan stack), and in `max`/`min`.
glslang has no signed 64-bit integer type: int64 is printed as `uint64_t` (two's complement
bits) with the signed operations as helpers (below).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import ClassVar

from xdsl.dialects import arith, func
from xdsl.dialects import math as mathd
from xdsl.dialects.builtin import IndexType, IntegerAttr, MemRefType, ModuleOp, f32, f64, i1, i32, i64
from xdsl.ir import Operation

from einc.dialects import egpu
from einc.dialects.math_ext import ErfcOp
from einc.runtime.manifest import LaunchManifest
from einc.targets import hlsl_math
from einc.targets.bfloat16 import Bf16Spelling
from einc.targets.descriptions import GLSLANG_HLSL, TargetDescription
from einc.targets.clike import CLikeTarget
from einc.targets.spelling import CAST, UNARY, Expr, Spelling, call, compare, helper
from einc.targets.writer import Writer
from einc.targets.gpu import DeviceTarget, Runner, TargetRuntime, host_buffers, use_text
from einc.targets.op_printers import statement

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

# ---- int64 as uint64_t --------------------------------------------------------------------------
# (helpers are named einc_<op>_s64: einc_<op>_i64 is the name of an `index` (int) helper)
# glslang's HLSL has `uint64_t` but no `int64_t`: an i64 is a uint64_t (two's complement), so
# + - * & | ^ << == != and loads/stores are unchanged, and every signed operation is a helper
# on the bits. glslang also truncates 64-bit literals (2^63 became 0) and rejects explicit
# casts to uint64_t, so constants outside int's range are built from two uint halves at run
# time, and an int is widened by its two halves.

_SIGN64 = "einc_bits_s64(2147483648u, 0u)"
_I64_HELPERS: dict[str, tuple[str, tuple[str, ...]]] = {
    # name: (definition, helpers it calls)
    "bits": ("inline uint64_t einc_bits_s64(uint hi, uint lo) "
             "{ uint64_t h = hi; uint64_t l = lo; return (h << 32) | l; }", ()),
    "slt": ("inline bool einc_slt_s64(uint64_t a, uint64_t b) "
            f"{{ return (a ^ {_SIGN64}) < (b ^ {_SIGN64}); }}", ("bits",)),
    "absi": ("inline uint64_t einc_absi_s64(uint64_t a) { return (a >> 63) != 0 ? 0 - a : a; }", ()),
    "divsi": ("inline uint64_t einc_divsi_s64(uint64_t a, uint64_t b) { uint64_t q = "
              "einc_absi_s64(a) / einc_absi_s64(b); return ((a ^ b) >> 63) != 0 ? 0 - q : q; }",
              ("absi",)),
    "remsi": ("inline uint64_t einc_remsi_s64(uint64_t a, uint64_t b) "
              "{ return a - einc_divsi_s64(a, b) * b; }", ("divsi",)),
    "floordiv": ("inline uint64_t einc_floordiv_s64(uint64_t a, uint64_t b) { uint64_t q = "
                 "einc_divsi_s64(a, b); return (q * b != a && ((a ^ b) >> 63) != 0) ? q - 1 : q; }",
                 ("divsi",)),
    "ceildiv": ("inline uint64_t einc_ceildiv_s64(uint64_t a, uint64_t b) { uint64_t q = "
                "einc_divsi_s64(a, b); return (q * b != a && ((a ^ b) >> 63) == 0) ? q + 1 : q; }",
                ("divsi",)),
    "shrsi": ("inline uint64_t einc_shrsi_s64(uint64_t a, uint64_t b) "
              "{ return (a >> 63) != 0 ? ~(~a >> b) : a >> b; }", ()),
    "maxsi": ("inline uint64_t einc_maxsi_s64(uint64_t a, uint64_t b) "
              "{ return einc_slt_s64(a, b) ? b : a; }", ("slt",)),
    "minsi": ("inline uint64_t einc_minsi_s64(uint64_t a, uint64_t b) "
              "{ return einc_slt_s64(a, b) ? a : b; }", ("slt",)),
    "ipowi": ("inline uint64_t einc_ipowi_s64(uint64_t a, uint64_t b) { if ((b >> 63) != 0) "
              "return a == 1 ? 1 : a == 0 - 1 ? ((b & 1) != 0 ? 0 - 1 : 1) : 0; uint64_t r = 1; "
              "for (; b != 0; b >>= 1, a *= a) if ((b & 1) != 0) r *= a; return r; }", ()),
    # (glslang's implicit int -> uint64_t conversion stores right but compares wrong after
    # naga and lavapipe: `(x >> 63) != 0` was false for x = -15; so the halves are explicit)
    "sext": ("inline uint64_t einc_sext_s64(int a) { uint hi = a < 0 ? 4294967295u : 0u; "
             "uint lo = asuint(a); uint64_t h = hi; uint64_t l = lo; return (h << 32) | l; }", ()),
    "tof32": ("inline float einc_tof32_s64(uint64_t a) "
              "{ return (a >> 63) != 0 ? -(float)(0 - a) : (float)a; }", ()),
    "tof64": ("inline double einc_tof64_s64(uint64_t a) "
              "{ return (a >> 63) != 0 ? -(double)(0 - a) : (double)a; }", ()),
    "fromf32": ("inline uint64_t einc_fromf32_s64(float a) { float m = trunc(abs(a)); "
                "uint hi = (uint)(m / 4294967296.0f); uint lo = (uint)(m - (float)hi * 4294967296.0f); "
                "uint64_t h = hi; uint64_t l = lo; uint64_t r = (h << 32) | l; "
                "return a < 0 ? 0 - r : r; }", ()),
    "fromf64": ("inline uint64_t einc_fromf64_s64(double a) { double m = abs(a); "
                "uint hi = (uint)(m / 4294967296.0L); uint lo = (uint)(m - (double)hi * 4294967296.0L); "
                "uint64_t h = hi; uint64_t l = lo; uint64_t r = (h << 32) | l; "
                "return a < 0 ? 0 - r : r; }", ()),
}
_CMP64 = {2: "einc_slt_s64({0}, {1})", 3: "!einc_slt_s64({1}, {0})",
          4: "einc_slt_s64({1}, {0})", 5: "!einc_slt_s64({0}, {1})"}  # fmt: skip
"""Signed predicates (slt sle sgt sge) by number."""
_UCMP64 = {6: "{0} < {1}", 7: "{0} <= {1}", 8: "{0} > {1}", 9: "{0} >= {1}"}
"""Unsigned predicates (ult ule ugt uge) by number: an i64 is a uint64_t already."""
_BINARY64: dict[type[Operation], str] = {
    arith.DivSIOp: "divsi", arith.RemSIOp: "remsi", arith.FloorDivSIOp: "floordiv",
    arith.CeilDivSIOp: "ceildiv", arith.ShRSIOp: "shrsi", arith.MaxSIOp: "maxsi",
    arith.MinSIOp: "minsi", mathd.IPowIOp: "ipowi",
}  # fmt: skip


# ---- NaN -----------------------------------------------------------------------------------------
# The Vulkan stack treats HLSL's `!=` (OpFUnordNotEqual) as ordered (`x != x` was false for a
# NaN x: naga and lavapipe), and a driver may fold the reflexive compares (`x == x` to true) as
# fast math. So NaN is tested on the bits (`asuint`; a double through its float conversion,
# which keeps NaN and turns a large double into an infinity, not a NaN), and every float
# compare that a NaN must make true, or that folding could make true, is a helper on it.

def _isnan(v: str) -> str:
    return f"(asuint((float){v}) & 0x7fffffffu) > 0x7f800000u"


_ISNAN = _isnan("a")
_EITHER_NAN = f"{_isnan('a')} || {_isnan('b')}"
_CMPF_HELPERS = {  # predicate number: (name, body on a and b)
    1: ("oeq", f"return a == b && !({_ISNAN});"),
    3: ("oge", f"return a >= b && !({_ISNAN});"),
    5: ("ole", f"return a <= b && !({_ISNAN});"),
    7: ("ord", f"return !({_EITHER_NAN});"),
    9: ("ugt", f"return !(a <= b) || {_EITHER_NAN};"),
    11: ("ult", f"return !(a >= b) || {_EITHER_NAN};"),
    13: ("une", f"return !(a == b) || {_EITHER_NAN};"),
    14: ("uno", f"return {_EITHER_NAN};"),
}
"""The float predicates printed as helpers (the others: C's irreflexive ordered operators,
`ogt olt one`, which a NaN already makes false, and their negations `ueq uge ule`)."""


def _cmpf(w: Writer, op: Operation) -> Expr:
    assert isinstance(op, arith.CmpfOp)
    predicate = op.predicate.value.data
    if predicate not in _CMPF_HELPERS:
        return w.spell(op, compare(w.t.cmpf[predicate]))
    name, body = _CMPF_HELPERS[predicate]
    t, s = w.ctype(op.lhs.type), w.suffix(op.lhs.type)
    function = f"einc_{name}_{s}"
    w.helpers_used.setdefault((f"cmpf_{name}", s), f"inline bool {function}({t} a, {t} b) {{ {body} }}")
    return Expr(f"{function}({w.value(op.lhs).text}, {w.value(op.rhs).text})")


def _own_math(w: Writer, op: Operation) -> Expr:
    """A math op einc computes itself on HLSL (einc.targets.hlsl_math), else HLSL's built-in."""
    name = hlsl_math.FUNCTIONS.get((type(op), op.results[0].type))
    if name is None:
        return _default(w, op)
    for helper, text in hlsl_math.definitions(name):
        w.helpers_used.setdefault((helper, "math"), text)
    return Expr(f"einc_{name}({', '.join(w.value(v).text for v in op.operands)})")


def _use64(w: Writer, name: str) -> str:
    """Print the i64 helper `name` (after those it calls) once; its function name."""
    text, calls = _I64_HELPERS[name]
    for callee in calls:
        _use64(w, callee)
    w.helpers_used.setdefault((f"{name}64", "i64"), text)
    return f"einc_{name}_s64"


def _default(w: Writer, op: Operation) -> Expr:
    spelling = w.t.ops.get(type(op))
    if isinstance(op, arith.CmpiOp):
        spelling = compare(w.t.cmpi[op.predicate.value.data])
    elif isinstance(op, arith.ExtUIOp | arith.UIToFPOp) and op.operands[0].type == i1:
        spelling = CAST
    if spelling is None:
        w.unsupported(op)
        raise AssertionError
    return w.spell(op, spelling)


def _int64(w: Writer, op: Operation) -> Expr:
    """Signed operations on or conversions to and from i64, as helpers (else as usual)."""
    operand, result = op.operands[0].type, op.results[0].type
    args = [w.value(v).text for v in op.operands]
    if isinstance(op, arith.CmpiOp) and operand == i64 and op.predicate.value.data in _CMP64:
        _use64(w, "slt")
        return Expr(_CMP64[op.predicate.value.data].format(*args), UNARY)
    if isinstance(op, arith.CmpiOp) and operand == i64 and op.predicate.value.data in _UCMP64:
        # already unsigned bits (glslang rejects a cast to uint64_t)
        return w.spell(op, compare(_UCMP64[op.predicate.value.data]))
    if type(op) in _BINARY64 and operand == i64:
        return Expr(f"{_use64(w, _BINARY64[type(op)])}({args[0]}, {args[1]})")
    if isinstance(op, mathd.AbsIOp) and operand == i64:
        return Expr(f"{_use64(w, 'absi')}({args[0]})")
    if isinstance(op, arith.SIToFPOp) and operand == i64:
        return Expr(f"{_use64(w, 'tof64' if result == f64 else 'tof32')}({args[0]})")
    if isinstance(op, arith.FPToSIOp) and result == i64:
        return Expr(f"{_use64(w, 'fromf64' if operand == f64 else 'fromf32')}({args[0]})")
    if isinstance(op, arith.ExtSIOp | arith.ExtUIOp | arith.IndexCastOp) and result == i64:
        value = f"(int){w.value(op.operands[0]).operand(UNARY)}" if operand == i1 else args[0]
        return Expr(f"{_use64(w, 'sext')}({value})")
    return _default(w, op)


def _launches(w: Writer, module: Operation) -> dict[str, list[egpu.LaunchOp]]:
    """The launches of each kernel of `module`, in walk order: one walk per writer (not one
    per kernel)."""
    found = w.launches if isinstance(w, _HLSLWriter) else None
    if found is None:
        found = {}
        for launch in module.walk():
            if isinstance(launch, egpu.LaunchOp):
                found.setdefault(launch.callee.string_value(), []).append(launch)
        if isinstance(w, _HLSLWriter):
            w.launches = found
    return found


class _HLSLWriter(Writer):
    """Builds i64 constants outside int's range from two 32-bit halves at run time."""

    launches: dict[str, list[egpu.LaunchOp]] | None = None
    """Each kernel's launches by name, found by one walk of the module (`_launches`)."""

    def constant(self, op: arith.ConstantOp) -> Expr:
        value = op.value
        if op.result.type != i64 or not isinstance(value, IntegerAttr):
            return super().constant(op)
        bits = value.value.data % (1 << 64)
        signed = bits - (1 << 64) if bits >> 63 else bits
        if -(1 << 31) < signed < (1 << 31):
            return super().constant(op)
        return Expr(f"{_use64(self, 'bits')}({bits >> 32}u, {bits & 0xFFFFFFFF}u)")


def _hlsl_alloc_shared(w: Writer, op: egpu.AllocSharedOp) -> None:
    """`groupshared` arrays are globals: declared before the kernels."""
    t = op.memref.type
    assert isinstance(t, MemRefType)
    saved, w.scopes = w.scopes, w.scopes[:1]
    name = w.declare(op.memref, op.memref.name_hint or "shared", buffer=True)
    w.scopes = saved
    element = w.ctype(t.get_element_type())
    count = 1
    for d in t.get_shape():
        count *= d
    use_text(w, f"shared {name}", f"groupshared {element} {name}[{count}];")


class HLSLTarget(DeviceTarget):
    name: ClassVar[str] = "hlsl"
    lexer: ClassVar[str] = "hlsl"
    runtime_device: ClassVar[str | None] = "vulkan"
    pipeline: ClassVar[str] = (
        "legalize-f16-for-c,einc-widen-narrow-buffers{target=hlsl},legalize-float-to-int,"
        "einc-init-accumulators,convert-affine-to-egpu{target=hlsl},einc-pad-shared{target=hlsl},"
        "legalize-storage-dtypes{target=hlsl},legalize-narrow-ints{target=hlsl},"
        "legalize-f16-storage,legalize-bf16-storage,einc-unswitch{when=false},einc-vectorize-loops{target=hlsl},einc-vectorize-global{target=hlsl},einc-vectorize-shared-loads,canonicalize,cse"
    )
    limits = TargetDescription(
        "hlsl", max_threads_per_block=1024, max_block=(1024, 1024, 64),
        max_grid=(65535, 65535, 65535), shared_bytes_per_block=32 * 1024,
        subgroup_size=4, vector_width=4, default_block=64,
        storage_dtypes=GLSLANG_HLSL, arith_dtypes=GLSLANG_HLSL | {"bool"}, shared_on_chip=False,
    )  # fmt: skip
    kernel_prefix: ClassVar[str] = ""
    index_type: ClassVar[str] = "int"
    barrier: ClassVar[str] = "GroupMemoryBarrierWithGroupSync();"
    private_array: ClassVar[str] = "{t} {name}[{n}];"  # a function-local array
    helper_prefix: ClassVar[str] = "inline"
    reserved_words = HLSL_KEYWORDS
    work_item_index = {
        **{f"block_id.{d}": f"((int)einc_group.{d})" for d in "xyz"},
        **{f"thread_id.{d}": f"((int)einc_thread.{d})" for d in "xyz"},
        **{f"global_id.{d}": f"((int)einc_global.{d})" for d in "xyz"},
    }  # block and grid sizes print as the launch's constants
    types = {f64: "double", f32: "float", i64: "uint64_t", i32: "int", i1: "bool", IndexType(): "int"}
    """int64 is `uint64_t` with signed operations as helpers: glslang's HLSL has no int64_t."""
    unsigned_types = {i64: "uint64_t", i32: "uint", i1: "bool", IndexType(): "uint"}
    bf16_spelling = Bf16Spelling("uint", "uint", "asuint(f)", "asfloat(u)")
    """bfloat16 buffers are stored as float32 (`legalize-storage-dtypes`): only `egpu.round`."""
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
        "round": "{t} r = trunc(a); return abs(a - r) >= 0.5f ? r + (a < 0 ? -1 : 1) : r;",
        # (of two zeros, the sign bit picks: `a + b` could be rewritten as fast math)
        "maximumf": f"{{t}} r = a > b ? a : b; r = {_isnan('b')} ? b : r; r = {_ISNAN} ? a : r; "
        "return (a == 0 && b == 0) ? ((asuint((float)a) >> 31) != 0u ? b : a) : r;",
        "minimumf": f"{{t}} r = a < b ? a : b; r = {_isnan('b')} ? b : r; r = {_ISNAN} ? a : r; "
        "return (a == 0 && b == 0) ? ((asuint((float)a) >> 31) != 0u ? a : b) : r;",
        "copysign": "return (a < 0) == (b < 0 || (b == 0 && asuint(b) != 0)) ? a : -a;",
        # glslang turns HLSL's int `%` into OpSMod (floor modulo), which naga computes through
        # floats (MIN % 7 gave 96); the quotient (OpSDiv) is exact.
        "remsi": "return a - (a / b) * b;",
    }
    unary_helpers = frozenset({"absi", "round"})
    round_f16: ClassVar[str] = "return f16tof32(f32tof16(a));"
    subgroup_reduce = {
        egpu.ReduceKind.ADD: "WaveActiveSum({0})", egpu.ReduceKind.MUL: "WaveActiveProduct({0})",
        egpu.ReduceKind.MAX: "WaveActiveMax({0})", egpu.ReduceKind.MIN: "WaveActiveMin({0})",
    }  # fmt: skip
    statement_printers = {
        **DeviceTarget.statement_printers,
        egpu.AllocSharedOp: statement(egpu.AllocSharedOp, _hlsl_alloc_shared),
    }
    cmpf = tuple(
        f"einc_{_CMPF_HELPERS[k][0]}({{0}}, {{1}})" if k in _CMPF_HELPERS else spelling
        for k, spelling in enumerate(CLikeTarget.cmpf)
    )
    """C's predicates, and the helpers of `_CMPF_HELPERS` (printed by `_cmpf`)."""
    expression_printers = {
        **DeviceTarget.expression_printers,
        arith.CmpfOp: _cmpf,
        **{op: _own_math for op, _ in hlsl_math.FUNCTIONS},
        **{op: _int64 for op in (
            arith.CmpiOp, *_BINARY64, mathd.AbsIOp, arith.SIToFPOp, arith.FPToSIOp,
            arith.ExtSIOp, arith.ExtUIOp, arith.IndexCastOp,
        )},  # fmt: skip
    }

    @classmethod
    def host(cls, w: Writer, op: func.FuncOp) -> None:
        """Every buffer is a global `RWStructuredBuffer` at its manifest binding."""
        module = op.parent_op()
        assert isinstance(module, ModuleOp)
        for k, (value, buffer) in enumerate(host_buffers(module)):
            name = w.declare(value, buffer.name, buffer=True)
            assert isinstance(value.type, MemRefType)
            element = w.ctype(value.type.get_element_type())
            w.line(f"RWStructuredBuffer<{element}> {name} : register(u{k});")

    @classmethod
    def top_level(cls, w: Writer, op: Operation) -> None:
        if isinstance(op, egpu.FuncOp):
            module = op.parent_op()
            assert module is not None
            for launch in _launches(w, module).get(op.sym_name.data, ()):
                for arg, buffer in zip(op.body.block.args, launch.buffers):
                    w.names[arg] = w.names[buffer]
        super().top_level(w, op)

    @classmethod
    def signature(cls, w: Writer, f: func.FuncOp, params: Sequence[str]) -> str:
        assert isinstance(f, egpu.FuncOp), f  # HLSL prints only the kernels (`host` declares buffers)
        x, y, z = f.block_size
        return (
            f"[numthreads({x}, {y}, {z})]\n"
            f"void {f.sym_name.data}(uint3 einc_group : SV_GroupID, "
            "uint3 einc_thread : SV_GroupThreadID, uint3 einc_global : SV_DispatchThreadID)"
        )

    @classmethod
    def emit(cls, module: ModuleOp) -> str:
        cls.manifest(module)  # refuse impossible launches before printing anything
        return _HLSLWriter(cls).module(module)

    @classmethod
    def manifest(cls, module: ModuleOp) -> LaunchManifest:
        manifest = super().manifest(module)
        buffers = tuple(dataclasses.replace(b, binding=k) for k, b in enumerate(manifest.buffers))
        return dataclasses.replace(manifest, buffers=buffers)

    @classmethod
    def runtime(cls) -> TargetRuntime:
        from einc.runtime import vulkan

        return vulkan

    @classmethod
    def load(cls, source: str, manifest: LaunchManifest) -> Runner:
        from einc.runtime.vulkan import load_hlsl_kernel

        return load_hlsl_kernel(source, manifest)
