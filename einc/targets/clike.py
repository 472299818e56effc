"""The shared printer of C-like targets (C, OpenCL, CUDA, HIP, HLSL, SYCL, Poplar).

As tinygrad's `CStyleLanguage`: a target is a set of tables (type names, kernel prefix,
buffer qualifiers, op spellings, math function names, helper functions, barrier and
work-item index spellings) and `CLikeTarget.emit` walks func/affine/scf/memref/arith/math IR
and prints it with them. Subclasses change tables (`{**CLikeTarget.types, ...}`), not code.

Printers only print: anything a language lacks (f16 arithmetic, ...) is legalized by a pass
in the target's `pipeline` before `emit`. An op without a spelling raises TargetError naming
it; nothing is guessed.

Printing rules:
- every loop is `for (int64_t N = 0; N < 1024; N++)`, named after the IR's name hints;
- memrefs are flat row-major pointers, accesses print their flattened index expression;
- a pure value used once in its own block is inlined into its user; a load is inlined only
  when no write lies between it and its user; constants are always inlined;
- affine floordiv/mod/ceildiv print as C `/` and `%` when the dividend is provably
  non-negative (from loop bounds), else through helpers with floor semantics;
- float literals are the shortest text that round-trips in their type (`0.1f`), infinities
  and NaN are INFINITY / NAN; f16 constants are cast from exact f32 literals;
- vector values (`einc-vectorize-loops`) are always named: their type, loads, stores,
  broadcasts and conversions come from the `vector_*` tables; arithmetic uses the scalar
  operator where `vector_operators`/`vector_math` allow it, else a lane-wise helper built from
  the scalar spelling (`einc_vmaximumf_f32x16`); lane reductions are helpers too.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np
from xdsl.dialects import arith, func
from xdsl.dialects import math as mathd
from xdsl.dialects.builtin import (
    IndexType,
    ModuleOp,
    bf16,
    f16,
    f32,
    f64,
    i1,
    i8,
    i16,
    i32,
    i64,
)
from xdsl.ir import Attribute, Operation

from einc.dialects import egpu
from einc.dialects.math_ext import ErfcOp
from einc.errors import InternalCompilerError, RuntimeMissingError, TargetError
from einc.runtime.manifest import LaunchManifest
from einc.targets import bfloat16
from einc.targets.bfloat16 import Bf16Spelling
from einc.targets.descriptions import TargetDescription
from einc.targets.op_printers import expression, statement
from einc.targets.spelling import (
    ADD,
    ATOM,
    BAND,
    BOR,
    BXOR,
    CAST,
    EQUALITY,
    LOR,
    MUL,
    SHIFT,
    TERNARY,
    UNARY,
    Expr,
    Spelling,
    call,
    helper,
    infix,
)
from einc.targets.writer import Writer


@dataclass(frozen=True)
class CompileCheck:
    """A target compile-checked by `einc check`: the architectures, the register budget per
    block (32-bit registers per SM / VGPR lanes per CU), and `checker(source, manifest, arch)`
    returning an object whose `.check()` reports per-kernel resources."""

    archs: tuple[str, ...]
    register_file: int
    checker: Callable[[], Callable[..., Any]]
    """Returns the checker (imported on demand: its toolchain module may be absent)."""



class CLikeTarget:
    """A C-like language: tables, and `emit` to print a lowered module with them."""

    name: ClassVar[str] = "clike"
    pipeline: ClassVar[str] = (
        "legalize-f16-for-c,legalize-float-to-int,canonicalize,cse"
    )
    """Run on the scheduled loops (the driver's `target` stage)."""
    limits: ClassVar[TargetDescription | None] = None
    """The device's launch limits and dtypes (what the mapping and legalization passes read);
    None for a target without kernels to launch (C)."""
    compile_check: ClassVar[CompileCheck | None] = None
    """How `einc check` compile-checks the target with its real toolchain (None: it does not)."""
    runtime_device: ClassVar[str | None] = None
    """The `einc.runtime` module whose `device_description()` names the device the kernels run
    on (tuning records are kept per device); None: they run on this CPU."""
    sketches: ClassVar[str] = ""
    """The target's schedule family ("cpu", "gpu"; "": none): which default policy
    (einc.schedule.default) and which of the tuner's sketch rules fit it."""
    torch_device: ClassVar[str] = "cpu"
    """The torch device type of the tensors `einc.torch` ops on this target take ("cuda": a
    GPU's; "cpu": host tensors, which a device runtime copies over)."""
    lexer: ClassVar[str] = "c"
    """Pygments' lexer for the source (`einc explain` highlights it)."""
    openmp: ClassVar[bool] = False
    """Whether the kernels run on this CPU's OpenMP threads (einc run reports how they wait)."""
    takes_cflags: ClassVar[bool] = False
    """Whether `build` takes extra C compiler flags (`einc.compile(cflags=...)`)."""
    shared_library: ClassVar[bool] = False
    """Whether `build` makes a shared library with a C ABI (the tuner's runner then loads the
    library itself instead of compiling again in its worker)."""

    includes: ClassVar[tuple[str, ...]] = ()
    preamble: ClassVar[tuple[str, ...]] = ()
    """Lines printed after the includes (type aliases or macros a language lacks)."""
    kernel_prefix: ClassVar[str] = ""
    """Before the kernel's return type (`__kernel `, `extern "C" __global__ `)."""
    buffer_prefix: ClassVar[str] = ""
    """Before a buffer argument's element type (`__global `)."""
    buffer_suffix: ClassVar[str] = ""
    """After the `*` of a buffer argument (` restrict`, ` __restrict__`)."""
    readonly_prefix: ClassVar[str] = "const "
    index_type: ClassVar[str] = "int64_t"
    barrier: ClassVar[str] = ""
    """The work-group barrier statement (GPU targets)."""
    work_item_index: ClassVar[Mapping[str, str]] = {}
    """Work-item index spellings by name (`"global_id.x": "get_global_id(0)"`)."""

    types: ClassVar[Mapping[Attribute, str]] = {
        f64: "double", f32: "float", f16: "_Float16", bf16: "uint16_t",
        i64: "int64_t", i32: "int32_t", i16: "int16_t", i8: "int8_t", i1: "bool",
        IndexType(): "int64_t",
    }  # fmt: skip
    unsigned_types: ClassVar[Mapping[Attribute, str]] = {
        i64: "uint64_t", i32: "uint32_t", i16: "uint16_t", i8: "uint8_t", i1: "bool",
        IndexType(): "uint64_t",
    }  # fmt: skip
    math_suffix: ClassVar[Mapping[Attribute, str]] = {f64: "", f32: "f"}
    """Suffix of C math functions and float literals by type; a float type missing here has
    no math library (f16: legalize it to f32 first)."""
    literal_cast: ClassVar[Mapping[Attribute, str]] = {f16: "(_Float16)"}
    """Float types written as a cast of an exact f32 literal."""
    literal_suffix: ClassVar[Mapping[Attribute, str]] = {f64: "", f32: "f"}
    """Suffix of float literals by type (languages with overloaded math have no math
    suffix but still a float literal suffix)."""
    literal_names: ClassVar[Mapping[str, str]] = {}
    """Respellings of named literals (`INT32_MAX`, `INFINITY`, `NAN`) a language lacks."""
    promoted_types: ClassVar[frozenset[Attribute]] = frozenset({i8, i16})
    """Integer types C computes in `int`: arithmetic on one is cast back to it (wraps)."""

    ops: ClassVar[Mapping[type[Operation], Spelling]] = {
        arith.AddfOp: infix("+", ADD), arith.SubfOp: infix("-", ADD),
        arith.MulfOp: infix("*", MUL), arith.DivfOp: infix("/", MUL),
        arith.NegfOp: Spelling("-{0}", UNARY, (ATOM,)),  # never `--x`
        arith.AddiOp: infix("+", ADD), arith.SubiOp: infix("-", ADD),
        arith.MuliOp: infix("*", MUL), arith.DivSIOp: infix("/", MUL),
        arith.RemSIOp: infix("%", MUL),
        arith.AndIOp: infix("&", BAND), arith.OrIOp: infix("|", BOR),
        arith.XOrIOp: infix("^", BXOR),
        arith.ShLIOp: infix("<<", SHIFT), arith.ShRSIOp: infix(">>", SHIFT),
        arith.ShRUIOp: Spelling("({t})(({ut}){0} >> {1})", UNARY),
        arith.DivUIOp: Spelling("({t})(({ut}){0} / ({ut}){1})", UNARY),
        arith.RemUIOp: Spelling("({t})(({ut}){0} % ({ut}){1})", UNARY),
        arith.FloorDivSIOp: helper("floordiv"), arith.CeilDivSIOp: helper("ceildiv"),
        arith.MaxSIOp: helper("maxsi"), arith.MinSIOp: helper("minsi"),
        arith.MaximumfOp: helper("maximumf"), arith.MinimumfOp: helper("minimumf"),
        arith.MaxnumfOp: call("fmax", 2), arith.MinnumfOp: call("fmin", 2),
        arith.SelectOp: Spelling("{0} ? {1} : {2}", TERNARY, (EQUALITY, LOR, TERNARY)),
        arith.ExtFOp: CAST, arith.TruncFOp: CAST, arith.SIToFPOp: CAST, arith.FPToSIOp: CAST,
        arith.ExtSIOp: CAST, arith.TruncIOp: CAST, arith.IndexCastOp: CAST,
        arith.ExtUIOp: Spelling("({t})({ut}){0}", UNARY),
        arith.UIToFPOp: Spelling("({t})({ut}){0}", UNARY),
        mathd.AbsFOp: call("fabs"), mathd.AbsIOp: helper("absi", 1),
        mathd.IPowIOp: helper("ipowi"),
        mathd.AcosOp: call("acos"), mathd.AcoshOp: call("acosh"),
        mathd.AsinOp: call("asin"), mathd.AsinhOp: call("asinh"),
        mathd.AtanOp: call("atan"), mathd.AtanhOp: call("atanh"),
        mathd.Atan2Op: call("atan2", 2), mathd.CbrtOp: call("cbrt"),
        mathd.CeilOp: call("ceil"), mathd.CopySignOp: call("copysign", 2),
        mathd.CosOp: call("cos"), mathd.CoshOp: call("cosh"), mathd.ErfOp: call("erf"),
        ErfcOp: call("erfc"),
        mathd.ExpOp: call("exp"), mathd.Exp2Op: call("exp2"), mathd.ExpM1Op: call("expm1"),
        mathd.FloorOp: call("floor"), mathd.FmaOp: call("fma", 3),
        mathd.LogOp: call("log"), mathd.Log10Op: call("log10"), mathd.Log1pOp: call("log1p"),
        mathd.Log2Op: call("log2"), mathd.PowFOp: call("pow", 2),
        mathd.FPowIOp: Spelling("pow{f}({0}, ({t}){1})", ATOM, (0, UNARY)),
        mathd.RoundOp: call("round"), mathd.RoundEvenOp: call("rint"),
        mathd.RsqrtOp: Spelling("1 / sqrt{f}({0})", MUL, (0,)),
        mathd.SinOp: call("sin"), mathd.SinhOp: call("sinh"), mathd.SqrtOp: call("sqrt"),
        mathd.TanOp: call("tan"), mathd.TanhOp: call("tanh"), mathd.TruncOp: call("trunc"),
    }  # fmt: skip
    cmpi: ClassVar[Sequence[str]] = (
        "{0} == {1}", "{0} != {1}", "{0} < {1}", "{0} <= {1}", "{0} > {1}", "{0} >= {1}",
        "({ut}){0} < ({ut}){1}", "({ut}){0} <= ({ut}){1}",
        "({ut}){0} > ({ut}){1}", "({ut}){0} >= ({ut}){1}",
    )  # fmt: skip
    """By predicate number: eq ne slt sle sgt sge ult ule ugt uge."""
    cmpf: ClassVar[Sequence[str]] = (
        "0", "{0} == {1}", "{0} > {1}", "{0} >= {1}", "{0} < {1}", "{0} <= {1}",
        "{0} < {1} || {0} > {1}", "{0} == {0} && {1} == {1}",
        "!({0} < {1} || {0} > {1})", "!({0} <= {1})", "!({0} < {1})", "!({0} >= {1})",
        "!({0} > {1})", "{0} != {1}", "{0} != {0} || {1} != {1}", "1",
    )  # fmt: skip
    """By predicate number: false oeq ogt oge olt ole one ord ueq ugt uge ult ule une uno
    true (C's relational operators are ordered, `!=` is unordered)."""

    helpers: ClassVar[Mapping[str, str]] = {
        "floordiv": "{t} q = a / b; return (q * b != a && (a < 0) != (b < 0)) ? q - 1 : q;",
        "ceildiv": "{t} q = a / b; return (q * b != a && (a < 0) == (b < 0)) ? q + 1 : q;",
        "mod": "{t} r = a % b; return (r != 0 && (r < 0) != (b < 0)) ? r + b : r;",
        "maxsi": "return a > b ? a : b;",
        "minsi": "return a < b ? a : b;",
        "maximumf": "{t} r = a > b ? a : b; r = b != b ? b : r; r = a != a ? a : r; "
        "return ((a == 0) & (b == 0)) ? a + b : r;",
        "minimumf": "{t} r = a < b ? a : b; r = b != b ? b : r; r = a != a ? a : r; "
        "return ((a == 0) & (b == 0)) ? -(-a - b) : r;",
        "absi": "return a < 0 ? -a : a;",
        "ipowi": "if (b < 0) return a == 1 ? 1 : a == -1 ? (b & 1 ? -1 : 1) : 0; "
        "{t} r = 1; for (; b; b >>= 1, a *= a) if (b & 1) r *= a; return r;",
    }
    """Bodies of the helper functions `static inline {t} einc_<name>_<s>({t} a, {t} b)`,
    printed once per type used. maximumf/minimumf are IEEE 754-2019's maximum/minimum: NaN
    from either operand (C's fmax drops it), -0 below +0 (of two zeros, `a + b` is the larger,
    `-(-a - b)` the smaller), so they are commutative and associative and every reduction order
    gives the same result; selects only, so gcc vectorizes them as it did `a > b ? a : b`."""
    helper_prefix: ClassVar[str] = "static inline"
    unary_helpers: ClassVar[frozenset[str]] = frozenset({"absi"})
    """Helpers taking one argument `a` (the others take `a, b`)."""

    # -- vectors (egpu.vload/vstore/vbroadcast/vreduce/vfma and arith on vector values) --------
    vector_elements: ClassVar[frozenset[Attribute]] = frozenset({f64, f32, i64, i32})
    """Element types the printer has vectors of (`einc-vectorize-loops` vectorizes only
    these; empty: the target's loops stay scalar)."""
    vector_type: ClassVar[str] = "einc_{s}x{n}"
    """The name of a vector of `{n}` elements of C type `{t}` (suffix `{s}`)."""
    vector_typedef: ClassVar[str] = (
        "typedef {t} {T} __attribute__((vector_size({bytes})));\n"
        "typedef {t} {T}_mem __attribute__((vector_size({bytes}), aligned({align}), may_alias));"
    )
    """Printed once per vector type used, before the helpers ("" for builtin types). C:
    GCC/Clang vector extensions; `_mem` is the same vector in memory: aligned to the element
    only (loads may be unaligned) and aliasing its elements. (`__builtin_memcpy` into a
    value compiles to stack round trips in gcc 12: 100x slower matmuls.)"""
    vector_lane: ClassVar[str] = "{v}[{k}]"
    """Lane `{k}` of vector variable `{v}` (an lvalue) in the lane-wise helpers."""
    lanewise_bodies: ClassVar[Mapping[tuple[str, str, int], str]] = {}
    """Bodies of lane-wise helpers the target spells better than the lane loop, by (helper
    name, element suffix, lanes): `{generic}` is the lane loop's body, `{T}` the vector type,
    `{lanes}` (where a body names it) the lane loop as a function of its own, never inlined
    and `cold`, for a rare slow path (einc.targets.c: IEEE maximum/minimum in one AVX-512
    instruction, float32 `exp` inline with libmvec's lane loop for special arguments)."""
    vector_shuffle_guard: ClassVar[str] = "1"
    """The preprocessor condition under which the compiler has `vector_shuffle`."""
    vector_operators: ClassVar[frozenset[type[Operation]]] = frozenset({
        arith.AddfOp, arith.SubfOp, arith.MulfOp, arith.DivfOp, arith.NegfOp,
        arith.AddiOp, arith.SubiOp, arith.MuliOp, arith.AndIOp, arith.OrIOp, arith.XOrIOp,
    })  # fmt: skip
    """Ops whose scalar operator spelling applies to vectors as is; other elementwise ops
    call a lane-wise helper `einc_v<op>_<s>x<n>` built from their scalar spelling."""
    lanewise_vector_math: ClassVar[frozenset[type[Operation]]] = frozenset()
    """Math ops `einc-vectorize-loops` may put on vectors although the language's functions
    take scalars (printed as lane-wise helpers: C, through libmvec)."""
    vector_math: ClassVar[frozenset[type[Operation]]] = frozenset()
    """`math` ops whose scalar spelling takes vectors as is (OpenCL's overloaded builtins):
    `einc-vectorize-loops` vectorizes loops calling them; other math keeps a loop scalar."""
    vector_load: ClassVar[str] = "einc_vload_{s}x{n}({p})"
    """A vector load: `{p}` the address of the first element, `{lanes}` the lanes' element
    accesses separated by commas, `{T}` the vector type. Helpers of `vector_helpers` it
    names are printed."""
    aligned_vector_load: ClassVar[str] = ""
    """A vector load from an address aligned to the vector's size (`egpu.align`); "" prints
    `vector_load`."""
    repeat_loads: ClassVar[Mapping[int, str]] = {}
    """`egpu.vload_repeat` by the run's size in bits: a load of the run from address `{p}`
    broadcast over the vector (C: 64 bits, one `vbroadcastsd`/`vpbroadcastq` from memory);
    a size not here is a lane-wise helper of the run's elements."""
    vector_store: ClassVar[str] = "einc_vstore_{s}x{n}({p}, {v});"
    """A vector store statement (`{v}` the value); "" stores lane by lane."""
    partial_vector_store: ClassVar[str] = ""
    """A store of a vector's first `{k}` lanes (`egpu.lanes`: a transposing copy's partial
    tile); "" stores those lanes one by one."""
    partial_vector_store_bytes: ClassVar[int] = 0
    """The vector size (bytes) whose partial store `partial_vector_store` (and partial load
    `partial_vector_load`) does in one instruction; a transposing copy takes a partial tile,
    an interleaving copy partial rows, only of such vectors (0: none)."""
    partial_vector_load: ClassVar[str] = ""
    """A load of the first `{k}` elements from `{p}`, the other lanes zero (`egpu.lanes` on an
    `egpu.vload`: an interleaving copy's last columns); needed where
    `partial_vector_store_bytes` is set."""
    aligned_vector_store: ClassVar[str] = ""
    """A vector store to an address aligned to the vector's size (`egpu.align`); "" prints
    `vector_store`."""
    stream_stores: ClassVar[Mapping[int, str]] = {}
    """A non-temporal vector store statement (`einc.stream`: transform.einc.stream_stores) by the
    vector's size in bytes; a size not here prints `vector_store`."""
    stream_fence: ClassVar[tuple[str, str]] = ("", "")
    """The statement ending a function that holds non-temporal stores (C: `sfence`: they are
    weakly ordered) and the helper function it calls ("" none)."""
    vector_convert: ClassVar[str] = "__builtin_convertvector({0}, {T})"
    """`egpu.vconvert` of `{0}` to vector type `{T}` (each element as a C cast); "" converts
    lane by lane with the scalar cast."""
    vector_broadcast: ClassVar[str] = "{0} - ({T}){{}}"
    """A vector of `{0}` (C: a scalar operand is splat; `x - 0` is `x` for every x, -0.0 and
    NaN included, where `x + 0` would turn -0.0 into +0.0; gcc folds it to one broadcast)."""
    vector_literal: ClassVar[str] = "({T}){{{0}}}"
    """A vector of the lanes `{0}` (comma-separated; `egpu.vbroadcast_runs`); "" builds it
    lane by lane."""
    vector_shuffle: ClassVar[str] = ""
    """`egpu.vshuffle` of vectors `{a}` and `{b}` by the lane indices `{mask}` (comma-separated);
    "" picks lane by lane in a helper. Where it is set, `einc-vectorize-loops` transposes
    the W x W tiles of the copies that pack a tensor with another dimension innermost
    (`einc.transforms.transpose_copy`): without it they stay scalar copies. Lane
    reductions fold halves in vector registers with it (`_vreduce`, `{a}` and `{b}` the same
    vector); where `vector_shuffle_guard` is false when compiled they loop over the lanes."""
    vector_helpers: ClassVar[Mapping[str, str]] = {
        "vload": "{P} {T} einc_vload_{s}x{n}(const {t}* a) {{ return *(const {T}_mem*)a; }}",
        "vstore": "{P} void einc_vstore_{s}x{n}({t}* a, {T} v) {{ *({T}_mem*)a = v; }}",
        "vbroadcast": "{P} {T} einc_vbroadcast_{s}x{n}({t} a) "
        "{{ {T} r; for (int k = 0; k < {n}; k++) {lane_r} = a; return r; }}",
    }
    """Helper functions the vector spellings call, by name (`{P}` the helper prefix,
    `{lane_r}` lane k of `r`)."""

    @classmethod
    def vector_lanes(cls) -> int:
        """float32 lanes of the vectors `einc-vectorize-loops` makes for this target. C: the
        host's vector registers (`einc.runtime.c.native_vector_bits`: 16 with AVX-512, 8 with
        AVX2, 4 otherwise), since the kernel is built with `-march=native`."""
        from einc.runtime.c import native_vector_bits

        return native_vector_bits() // 32

    loop_pragmas: ClassVar[Mapping[tuple[str, ...], str]] = {
        ("einc.parallel", "einc.vectorize"): "#pragma omp parallel for simd",
        ("einc.parallel",): "#pragma omp parallel for",
        ("einc.vectorize",): "#pragma omp simd",
    }
    """The line printed before an `affine.for`: the first entry whose schedule marks (unit
    attributes) the loop all carries; marks missing here are not printed (the loop stays
    sequential). Marks OpenMP cannot nest are left out first (`_pragma_marks`): a loop inside
    a printed `simd` loop prints neither `parallel` nor `simd`, one inside a printed
    `parallel` loop no `parallel`."""

    barrier_loop_pragma: ClassVar[str | None] = None
    """The line printed before every loop that holds a work-group barrier (`egpu.barrier`, at
    any depth) or lies inside a loop that does, after its `loop_pragmas` line; None prints
    nothing (einc.targets.sycl)."""

    outline_parallel_loops: ClassVar[bool] = False
    """Whether the body of a loop printed `parallel` is printed as a static inline function
    of its own, called by the loop (`Writer.parallel_loop`: the body keeps the restrict of
    the buffers the OpenMP outlining loses)."""

    @classmethod
    def outlined_signature(cls, w: Writer, f: func.FuncOp, name: str, params: Sequence[str]) -> str:
        """The header line of the function a parallel loop's body of `f` is printed into."""
        return f"static inline void {name}({', '.join(params)})"

    statement_printers: ClassVar[Mapping[type[Operation], Callable[[Writer, Operation], None]]] = {
        egpu.StoreTruncfOp: statement(egpu.StoreTruncfOp, bfloat16.c_store_truncf),
    }
    expression_printers: ClassVar[Mapping[type[Operation], Callable[[Writer, Operation], Expr]]] = {
        egpu.LoadExtfOp: expression(egpu.LoadExtfOp, bfloat16.c_load_extf),
        egpu.RoundOp: expression(egpu.RoundOp, bfloat16.c_round),
    }
    """Printers of a target family's own ops (GPU coordinates, barriers, ...), beside the
    shared ones (here: bfloat16 kept in memory, `legalize-bf16-storage`)."""
    prefetch_hint: ClassVar[str] = ""
    """The function a prefetch (`egpu.prefetch`, a cache hint) is printed as, given the
    element's address; empty: the target prints none."""
    tensor_cores: ClassVar[frozenset[str]] = frozenset()
    """The `transform.einc.tensorize` intrinsics the target prints (`egpu.mma`)."""
    mma_k_contiguous: ClassVar[bool] = False
    """Whether a lane's tensor-core operand is one vector load only where its shared tile
    has k contiguous (HIP's MFMA: no transposing LDS read, so the device default stages an
    operand k innermost); CUDA's `ldmatrix.trans` reads a `[k, n]` tile as it is."""
    plain_vector_copies: ClassVar[bool] = False
    """Whether the global-to-shared copies of 16-byte vectors (`einc-vectorize-global`'s
    pairs, float16/bfloat16 tiles included) become `egpu.copy_async` where the target has
    no asynchronous copy (`einc-async-copies`), which it prints as one plain 16-byte copy
    (HIP); CUDA's come from its `compute_capability` (cp.async)."""
    narrow_shared_tiles: ClassVar[bool] = False
    """Whether float16/bfloat16 tiles may be staged in shared memory (`cache_read ... in
    "shared"`): the target prints them as 16-bit arrays (CUDA, HIP); OpenCL without
    cl_khr_fp16 cannot declare half arrays."""
    packed_narrow_access: ClassVar[bool] = False
    """Whether `einc-vectorize-global` packs elementwise float16/bfloat16 accesses into
    aligned vectors (its shape 5): the target prints `egpu.vconvert` between them and
    float32 vectors (`narrow_lane_conversion`)."""
    packed_narrow_arithmetic: ClassVar[frozenset[Attribute]] = frozenset()
    """The 16-bit float types (f16, bf16) a packed loop of which, every op an add, sub or mul
    rounded once to the type, computes on `vector<W x T>` (einc.transforms.narrow_access:
    the same bits): the target prints `arith.addf/subf/mulf` on those vectors as packed
    16-bit instructions (CUDA: `add.rn.f16x2`, `fma.rn.bf16x2`; HIP: float16's
    `v_pk_add_f16`/`v_pk_mul_f16`, none for bfloat16 on gfx90a)."""
    narrow_lane_conversion: ClassVar[Callable[[Writer, Attribute, Attribute], str | None] | None] = None
    """The function converting one lane between a 16-bit float kept in memory and float32
    (`egpu.vconvert`'s lanes), registering its helpers; None where none."""
    bf16_spelling: ClassVar[Bf16Spelling | None] = bfloat16.C_BF16
    """How bfloat16's helpers are spelled (einc.targets.bfloat16); its buffers' element type
    is `types[bf16]`, the same type as `bf16_spelling.u16`."""
    memory_ops: ClassVar[tuple[type[Operation], ...]] = (egpu.StoreTruncfOp,)
    """Ops besides stores that an inlined load must not move past (barriers, ...)."""
    reserved_words: ClassVar[frozenset[str]] = frozenset()
    """Names no value may take besides C's keywords (the language's own, intrinsics)."""

    @classmethod
    def top_level(cls, w: Writer, op: Operation) -> None:
        """Print one top-level op of the module: C prints every function."""
        if not isinstance(op, func.FuncOp):
            raise InternalCompilerError(f"{cls.name} target: cannot print top-level {op.name}")
        if op.body.blocks:
            w.function(op)

    @classmethod
    def signature(cls, w: Writer, f: func.FuncOp, params: Sequence[str]) -> str:
        """The function's header line (before ` {`), given its printed parameters."""
        prefix = "static " if f.sym_visibility and f.sym_visibility.data == "private" else ""
        return f"{cls.kernel_prefix}{prefix}void {f.sym_name.data}({', '.join(params)})"

    @classmethod
    def body_pragmas(cls, f: func.FuncOp) -> Sequence[str]:
        """Lines opening the function's body, before its statements (HIP: contraction off
        where the language rounds a product to float16)."""
        return ()

    @classmethod
    def alloc(cls, element: str, count: int, name: str) -> str:
        """The statement allocating a temporary buffer (C: aligned heap memory)."""
        size = -(-count * cls.sizeof(element) // 64) * 64
        return f"{element}* {name} = ({element}*)aligned_alloc(64, {size});"

    private_array: ClassVar[str] = ""
    """The declaration of a local array (`memref.alloca`: a staged tile, a compute_at box):
    `{t}` the element type, `{name}`, `{n}` the element count. In a device kernel it is the
    work-item's own (private) memory. Empty: the target has none (TargetError)."""

    @classmethod
    def local_array(cls, element: str, count: int, name: str) -> str:
        """The statement declaring a local array (`memref.alloca`), from `private_array`."""
        if not cls.private_array:
            raise TargetError(
                f"{cls.name} target: local arrays (memref.alloca, from cache_read/cache_write "
                "in \"local\" or compute_at) are not supported yet"
            )
        return cls.private_array.format(t=element, name=name, n=count)

    @classmethod
    def free(cls, name: str) -> str:
        return f"free({name});"

    @staticmethod
    def sizeof(element: str) -> int:
        return {"double": 8, "int64_t": 8, "float": 4, "int32_t": 4, "_Float16": 2,
                "uint16_t": 2, "int16_t": 2, "int8_t": 1, "bool": 1}[element]  # fmt: skip

    # A target is its tables: these work on the class and on an instance alike.
    @classmethod
    def emit(cls, module: ModuleOp) -> str:
        """The source text of every function of a lowered module."""
        return Writer(cls).module(module)

    @classmethod
    def declarations(cls, module: ModuleOp) -> list[str]:
        """Lines the source needs after its includes and preamble, from what `module` uses
        (e.g. C's vector-math declarations); none by default."""
        return []

    @classmethod
    def cannot_run(cls) -> str | None:
        """Why the target's kernels cannot run on this machine (its toolchain or its device is
        missing), or None. C runs on this CPU."""
        return None

    needs_toolchain: ClassVar[bool] = False
    """Whether the target needs a toolchain beyond a C compiler (its `toolchain_check` says
    whether it is here)."""

    @classmethod
    def toolchain_check(cls) -> tuple[bool, str] | None:
        """Whether the toolchain the target needs is here, and a one-line reason (its runtime's
        `toolchain_check`); None for a target that needs nothing beyond einc's own (C).
        A missing toolchain fails the tests in CI (einc.targets.toolchains)."""
        return None

    @classmethod
    def toolchain_identity(cls, cflags: Sequence[str] = ()) -> tuple[str, str]:
        """The compiler the target's kernels are built with and its flags, one line each (its
        runtime's `toolchain_identity`): tuning records are keyed by them, so a record made
        with another compiler or other flags is not used. `cflags`: a compile's extra C flags
        (targets that `takes_cflags`). Never raises (`unknown (why)`); a target that does not
        say: ("", "")."""
        return "", ""

    @classmethod
    def hardware_checks(cls) -> Mapping[str, Callable[[], tuple[bool, str]]]:
        """Checks of hardware the target's kernels run on, by name (e.g. `cuda-gpu`): asked by
        tests that need it, never required in CI."""
        return {}

    @classmethod
    def manifest(cls, module: ModuleOp) -> LaunchManifest | None:
        """The launches of a lowered module, for hosts that launch the source's kernels; None
        for a target whose source is one host function (C)."""
        return None

    @classmethod
    def build(
        cls, source: str, module: ModuleOp
    ) -> Callable[[Mapping[str, np.ndarray], Mapping[str, np.ndarray]], object]:
        """Compile `source` (emitted from the lowered `module`) into a runner called as
        `runner(inputs, outputs)` with arrays by name, writing the outputs in place."""
        raise RuntimeMissingError(f"the {cls.name} target has no runtime on this machine")


__all__ = ["CLikeTarget", "Expr", "Spelling", "call", "helper", "infix"]
