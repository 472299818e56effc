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

import math
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np
from xdsl.dialects import affine, arith, func, memref, scf
from xdsl.dialects import math as mathd
from xdsl.dialects.builtin import (
    AnyFloat,
    FloatAttr,
    IndexType,
    IntegerAttr,
    IntegerType,
    MemRefType,
    ModuleOp,
    StringAttr,
    VectorType,
    f16,
    f32,
    f64,
    i1,
    i8,
    i16,
    i32,
    i64,
)
from xdsl.ir import Attribute, Block, BlockArgument, Operation, SSAValue
from xdsl.ir.affine import (
    AffineBinaryOpExpr,
    AffineBinaryOpKind,
    AffineConstantExpr,
    AffineDimExpr,
    AffineExpr,
    AffineMap,
    AffineSymExpr,
)

from einc.dialects import egpu
from einc.errors import InternalCompilerError, TargetError
from einc.ir.attrs import PARALLEL_ATTR, VECTORIZE_ATTR
from einc.passes.utils.affine_index import dims_to_operands
from einc.passes.utils.ranges import Range, expr_range, value_range

# ---- spellings --------------------------------------------------------------------------------

# C operator precedence, loosest to tightest (parenthesise an operand looser than required)
TERNARY, LOR, LAND, BOR, BXOR, BAND, EQUALITY, RELATIONAL, SHIFT, ADD, MUL, UNARY, ATOM = range(
    1, 14
)


@dataclass(frozen=True)
class CompileCheck:
    """A target compile-checked by `einc check`: the architectures, the register budget per
    block (32-bit registers per SM / VGPR lanes per CU), and `checker(source, manifest, arch)`
    returning an object whose `.check()` reports per-kernel resources."""

    archs: tuple[str, ...]
    register_file: int
    checker: Callable[[], Callable[..., Any]]
    """Returns the checker (imported on demand: its toolchain module may be absent)."""


@dataclass(frozen=True)
class Spelling:
    """How an op prints as an expression. `fmt` fields: `{0}`.. operands, `{t}` the result's
    C type, `{s}` its type suffix (`f32`, `i64`: helper names), `{f}` its math-function
    suffix (`f` for float), `{ut}` the unsigned C type of operand 0. `prec` is the result's
    precedence; operand k is parenthesised when looser than `operands[k]` (the last entry
    repeats); `helper` names a helper function the expression calls."""

    fmt: str
    prec: int = ATOM
    operands: tuple[int, ...] = (UNARY,)
    helper: str | None = None
    may_overflow: bool = False
    """An integer result C may compute wider than its type (`int8_t + int8_t` is an int)."""

    def required(self, k: int) -> int:
        return self.operands[min(k, len(self.operands) - 1)]


def infix(symbol: str, prec: int) -> Spelling:
    """A left-associative binary operator. Operands of bitwise operators are always
    parenthesised unless simple: C's precedences there surprise readers."""
    may_overflow = symbol in ("+", "-", "*", "/", "<<")
    if prec in (SHIFT, BAND, BXOR, BOR):
        return Spelling(f"{{0}} {symbol} {{1}}", prec, (UNARY,), may_overflow=may_overflow)
    return Spelling(f"{{0}} {symbol} {{1}}", prec, (prec, prec + 1), may_overflow=may_overflow)


def call(name: str, arity: int = 1) -> Spelling:
    args = ", ".join(f"{{{k}}}" for k in range(arity))
    return Spelling(f"{name}{{f}}({args})", ATOM, (0,))


def helper(name: str, arity: int = 2) -> Spelling:
    args = ", ".join(f"{{{k}}}" for k in range(arity))
    return Spelling(f"einc_{name}_{{s}}({args})", ATOM, (0,), helper=name)


def compare(fmt: str) -> Spelling:
    """A comparison template: a plain relational/equality operator, or a compound form whose
    operands must be simple (they may be repeated)."""
    for symbol, prec in (("==", EQUALITY), ("!=", EQUALITY), ("<=", RELATIONAL),
                         (">=", RELATIONAL), ("<", RELATIONAL), (">", RELATIONAL)):  # fmt: skip
        if fmt == f"{{0}} {symbol} {{1}}":
            return Spelling(fmt, prec, (SHIFT, SHIFT + 1))
    prec = LOR if "||" in fmt else LAND if "&&" in fmt else UNARY if fmt[0] == "!" else (
        RELATIONAL if fmt[0] == "(" else ATOM
    )
    return Spelling(fmt, prec, (UNARY,))


CAST = Spelling("({t}){0}", UNARY, (UNARY,))


@dataclass(frozen=True)
class Expr:
    text: str
    prec: int = ATOM

    def operand(self, required: int) -> str:
        return f"({self.text})" if self.prec < required else self.text


# ---- the target base ------------------------------------------------------------------------


class CLikeTarget:
    """A C-like language: tables, and `emit` to print a lowered module with them."""

    name: ClassVar[str] = "clike"
    pipeline: ClassVar[str] = (
        "legalize-f16-for-c,legalize-float-to-int,canonicalize,cse"
    )
    """Run on the loops (the driver's `scheduled` stage): `lowering()` starts at the `ein` level."""
    compile_check: ClassVar[CompileCheck | None] = None
    runtime_device: ClassVar[str | None] = None
    """The `einc.runtime` module whose `device_description()` names the device the kernels run
    on (tuning records are kept per device); None: they run on this CPU."""
    sketches: ClassVar[str] = ""
    """Which family of the tuner's sketch rules fits the target ("cpu", "gpu"; "": only its
    default schedule is tuned)."""
    shared_library: ClassVar[bool] = False
    """Whether `build` makes a shared library with a C ABI (the tuner's runner then loads the
    library itself instead of compiling again in its worker)."""
    """How `einc check` compile-checks the target with its real toolchain (None: it does not)."""

    @classmethod
    def check_schedule(cls, schedule: Any) -> None:
        """Refuse, before it is applied, a schedule (einc.schedule.Schedule) the target cannot
        run (ScheduleError at the op responsible). The default accepts every schedule."""

    @classmethod
    def default_schedule(cls, loops: ModuleOp) -> object:
        """The schedule (an einc.schedule.Schedule) applied to a loop-level module when the user
        gives none, or None for no schedule. The default schedules nothing; a target with a
        policy (einc.schedules) overrides this."""
        return None

    @classmethod
    def check_scheduled(cls, schedule: Any, scheduled: ModuleOp) -> None:
        """Refuse what `schedule` made of the loops (`scheduled`) when the target cannot run
        it (ScheduleError at the schedule op that made it). The default accepts it."""

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
        f64: "double", f32: "float", f16: "_Float16",
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
        "maximumf": "return (a > b || a != a) ? a : b;",
        "minimumf": "return (a < b || a != a) ? a : b;",
        "absi": "return a < 0 ? -a : a;",
        "ipowi": "if (b < 0) return a == 1 ? 1 : a == -1 ? (b & 1 ? -1 : 1) : 0; "
        "{t} r = 1; for (; b; b >>= 1, a *= a) if (b & 1) r *= a; return r;",
    }
    """Bodies of the helper functions `static inline {t} einc_<name>_<s>({t} a, {t} b)`,
    printed once per type used. maximumf/minimumf propagate NaN (C's fmax does not)."""
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
    vector_operators: ClassVar[frozenset[type[Operation]]] = frozenset({
        arith.AddfOp, arith.SubfOp, arith.MulfOp, arith.DivfOp, arith.NegfOp,
        arith.AddiOp, arith.SubiOp, arith.MuliOp, arith.AndIOp, arith.OrIOp, arith.XOrIOp,
    })  # fmt: skip
    """Ops whose scalar operator spelling applies to vectors as is; other elementwise ops
    call a lane-wise helper `einc_v<op>_<s>x<n>` built from their scalar spelling."""
    vector_math: ClassVar[frozenset[type[Operation]]] = frozenset()
    """`math` ops whose scalar spelling takes vectors as is (OpenCL's overloaded builtins):
    `einc-vectorize-loops` vectorizes loops calling them; other math keeps a loop scalar."""
    vector_load: ClassVar[str] = "einc_vload_{s}x{n}({p})"
    """A vector load: `{p}` the address of the first element, `{lanes}` the lanes' element
    accesses separated by commas, `{T}` the vector type. Helpers of `vector_helpers` it
    names are printed."""
    vector_store: ClassVar[str] = "einc_vstore_{s}x{n}({p}, {v});"
    """A vector store statement (`{v}` the value); "" stores lane by lane."""
    vector_convert: ClassVar[str] = "__builtin_convertvector({0}, {T})"
    """`egpu.vconvert` of `{0}` to vector type `{T}` (each element as a C cast); "" converts
    lane by lane with the scalar cast."""
    vector_broadcast: ClassVar[str] = "{0} - ({T}){{}}"
    """A vector of `{0}` (C: a scalar operand is splat; `x - 0` is `x` for every x, -0.0 and
    NaN included, where `x + 0` would turn -0.0 into +0.0; gcc folds it to one broadcast)."""
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

    statement_printers: ClassVar[Mapping[type[Operation], Callable[[_Writer, Operation], None]]] = {}
    expression_printers: ClassVar[Mapping[type[Operation], Callable[[_Writer, Operation], Expr]]] = {}
    """Printers of a target family's own ops (GPU coordinates, barriers, ...), beside the
    shared ones."""
    memory_ops: ClassVar[tuple[type[Operation], ...]] = ()
    """Ops besides stores that an inlined load must not move past (barriers, ...)."""
    reserved_words: ClassVar[frozenset[str]] = frozenset()
    """Names no value may take besides C's keywords (the language's own, intrinsics)."""

    @classmethod
    def top_level(cls, w: _Writer, op: Operation) -> None:
        """Print one top-level op of the module: C prints every function."""
        if not isinstance(op, func.FuncOp):
            raise InternalCompilerError(f"{cls.name} target: cannot print top-level {op.name}")
        if op.body.blocks:
            w.function(op)

    @classmethod
    def signature(cls, w: _Writer, f: func.FuncOp, params: Sequence[str]) -> str:
        """The function's header line (before ` {`), given its printed parameters."""
        prefix = "static " if f.sym_visibility and f.sym_visibility.data == "private" else ""
        return f"{cls.kernel_prefix}{prefix}void {f.sym_name.data}({', '.join(params)})"

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
                "int16_t": 2, "int8_t": 1, "bool": 1}[element]  # fmt: skip

    # A target is its tables: these work on the class and on an instance alike.
    @classmethod
    def emit(cls, module: ModuleOp) -> str:
        """The source text of every function of a lowered module."""
        return _Writer(cls).module(module)

    @classmethod
    def lowering(cls) -> str:
        """The pipeline from an `ein`-level module: the loops' conversion, then `pipeline`
        (what the driver runs as two stages, for tests and tools that start at `ein`)."""
        from einc.targets import LOOPS_PIPELINE

        return f"{LOOPS_PIPELINE},{cls.pipeline}"

    @classmethod
    def declarations(cls, module: ModuleOp) -> list[str]:
        """Lines the source needs after its includes and preamble, from what `module` uses
        (e.g. C's vector-math declarations); none by default."""
        return []

    @classmethod
    def build(
        cls, source: str, module: ModuleOp
    ) -> Callable[[Mapping[str, np.ndarray], Mapping[str, np.ndarray]], object]:
        """Compile `source` (emitted from the lowered `module`) into a runner called as
        `runner(inputs, outputs)` with arrays by name, writing the outputs in place."""
        raise TargetError(f"the {cls.name} target has no runtime on this machine")


# ---- the walk -----------------------------------------------------------------------------------

C_RESERVED = frozenset(
    """auto break case char const continue default do double else enum extern float for goto
    if inline int long register restrict return short signed sizeof static struct switch
    typedef union unsigned void volatile while bool true false main kernel malloc free
    aligned_alloc abs NAN INFINITY""".split()
)

class _Writer:
    """One emission: names, inlining decisions, helpers used, output lines."""

    def __init__(self, target: type[CLikeTarget]):
        self.t = target
        self.lines: list[str] = []
        self.depth = 0
        self.scopes: list[set[str]] = [set()]
        self.buffer_names: set[str] = set()
        """Names of the function's buffers: other values never take them."""
        self.names: dict[SSAValue, str] = {}
        self.helpers_used: dict[tuple[str, str], str] = {}
        functions = {m.group(1) for s in target.ops.values() if (m := _CALLEE.match(s.fmt))}
        functions |= _called_names(target)
        self.reserved = (
            C_RESERVED | functions | {f + "f" for f in functions} | target.reserved_words
        )

    # -- output -------------------------------------------------------------------------------
    def line(self, text: str) -> None:
        self.lines.append("  " * self.depth + text)

    def open(self, header: str) -> None:
        self.line(header + " {")
        self.depth += 1
        self.scopes.append(set())

    def close(self, trailer: str = "}") -> None:
        self.depth -= 1
        self.scopes.pop()
        self.line(trailer)

    # -- names ----------------------------------------------------------------------------------
    def declare(self, value: SSAValue, hint: str | None = None, buffer: bool = False) -> str:
        """A fresh C name for `value`, after its hint, unique among the visible names."""
        base = c_identifier(hint or value.name_hint or "v")
        name, k = base, 1
        while (
            name in self.reserved
            or name.startswith("einc_")
            or any(name in s for s in self.scopes)
            or (not buffer and name in self.buffer_names)
        ):
            name, k = f"{base}_{k}", k + 1
        self.scopes[-1].add(name)
        self.names[value] = name
        return name

    # -- types ----------------------------------------------------------------------------------
    def ctype(self, t: Attribute) -> str:
        if isinstance(t, VectorType):
            return self.vector_ctype(t)
        if t not in self.t.types:
            raise TargetError(f"{self.t.name} target: no type for {t}")
        return self.t.types[t]

    def suffix(self, t: Attribute) -> str:
        if isinstance(t, VectorType):
            return f"{self.suffix(t.get_element_type())}x{t.get_shape()[0]}"
        if isinstance(t, IndexType):
            return "i64"
        if isinstance(t, IntegerType):
            return f"i{t.width.data}"
        return f"f{t.bitwidth}" if isinstance(t, AnyFloat) else "x"

    def use_helper(self, name: str, t: Attribute) -> None:
        key = (name, self.suffix(t))
        if key not in self.helpers_used:
            ct = self.ctype(t)
            args = f"{ct} a" if name in self.t.unary_helpers else f"{ct} a, {ct} b"
            body = self.t.helpers[name].format(t=ct)
            self.helpers_used[key] = (
                f"{self.t.helper_prefix} {ct} einc_{name}_{key[1]}({args}) {{ {body} }}"
            )

    # -- module and functions -------------------------------------------------------------------
    def module(self, module: ModuleOp) -> str:
        for op in module.ops:
            self.t.top_level(self, op)
        head = [f"#include <{h}>" for h in self.t.includes] + list(self.t.preamble) + self.t.declarations(module)
        helpers = list(self.helpers_used.values())
        parts = ["\n".join(head), "\n".join(helpers), "\n".join(self.lines)]
        return "\n\n".join(p for p in parts if p) + "\n"

    def function(self, f: func.FuncOp) -> None:
        if f.function_type.outputs:
            raise InternalCompilerError(f"{self.t.name} target: @{f.sym_name.data} returns values")
        attrs = f.arg_attrs.data if f.arg_attrs is not None else ()
        self.buffer_names = {
            c_identifier(name.data)
            for arg_attrs in attrs
            if isinstance(name := arg_attrs.data.get("ein.name"), StringAttr)
        } | {
            c_identifier(name.data)
            for op in f.walk()
            if isinstance(op, memref.AllocOp | memref.AllocaOp)
            and isinstance(name := op.attributes.get("ein.name"), StringAttr)
        }
        if self.lines:
            self.line("")  # a blank line between functions
        self.scopes.append(set())  # parameter names are the function's own
        params: list[str] = []
        for k, arg in enumerate(f.body.block.args):
            if not isinstance(arg.type, MemRefType):
                raise InternalCompilerError(f"{self.t.name} target: argument {k} is not a memref")
            hint = attrs[k].data.get("ein.name") if k < len(attrs) else None
            name = self.names.get(arg)  # named already where buffers are globals (HLSL)
            if name is None:
                name = self.declare(arg, getattr(hint, "data", None), buffer=True)
            element = self.ctype(arg.type.get_element_type())
            const = "" if _is_written(arg) else self.t.readonly_prefix
            params.append(f"{self.t.buffer_prefix}{const}{element}*{self.t.buffer_suffix} {name}")
        self.open(self.t.signature(self, f, params))
        self.block(f.body.block)
        self.close()
        self.scopes.pop()

    def block(self, block: Block) -> None:
        for op in block.ops:
            self.statement(op)

    # -- statements -----------------------------------------------------------------------------
    def statement(self, op: Operation) -> None:
        if op.results and all(self.inlined(r) for r in op.results):
            return
        handler = (
            _STATEMENTS.get(type(op))
            or _VECTOR_STATEMENTS.get(type(op))
            or self.t.statement_printers.get(type(op))
        )
        if handler is not None:
            handler(self, op)
            return
        if len(op.results) == 1:
            value = op.results[0]
            expr = self.expression(op)
            name = self.declare(value)
            self.line(f"{self.ctype(value.type)} {name} = {expr.text};")
            return
        self.unsupported(op)

    def unsupported(self, op: Operation) -> None:
        raise InternalCompilerError(
            f"the {self.t.name} target cannot print '{op.name}' "
            "(it must be lowered or legalized before printing)"
        )

    def for_loop(self, iv: SSAValue, lower: Expr, upper: Expr, step: int, body: Block) -> None:
        self.scopes.append(set())  # the loop variable is local to the loop
        name = self.declare(iv)
        increment = f"{name}++" if step == 1 else f"{name} += {step}"
        self.line(
            f"for ({self.t.index_type} {name} = {lower.text}; "
            f"{name} < {upper.operand(RELATIONAL + 1)}; "
            f"{increment}) {{"
        )
        self.depth += 1
        self.block(body)
        self.close()

    def carried(self, results: Sequence[SSAValue], inits: Sequence[SSAValue]) -> list[str]:
        """Declare the variables holding loop-carried values or scf.if results."""
        names = []
        for result, init in zip(results, inits) if inits else ((r, None) for r in results):
            name = self.declare(result)
            value = f" = {self.value(init).text}" if init is not None else ""
            self.line(f"{self.ctype(result.type)} {name}{value};")
            names.append(name)
        return names

    def assign_yield(self, targets: Sequence[SSAValue], values: Sequence[SSAValue]) -> None:
        for target, value in zip(targets, values):
            self.line(f"{self.names[target]} = {self.value(value).text};")

    # -- expressions ----------------------------------------------------------------------------
    def value(self, v: SSAValue) -> Expr:
        if v in self.names:
            return Expr(self.names[v])
        if isinstance(v, BlockArgument):
            raise InternalCompilerError(f"{self.t.name} target: unnamed block argument {v}")
        if self.inlined(v) and isinstance(v.owner, Operation):
            return self.expression(v.owner)
        raise InternalCompilerError(f"{self.t.name} target: value used before its definition: {v}")

    def expression(self, op: Operation) -> Expr:
        if isinstance(op, arith.ConstantOp):
            return self.constant(op)
        handler = (
            _EXPRESSIONS.get(type(op))
            or _VECTOR_EXPRESSIONS.get(type(op))
            or self.t.expression_printers.get(type(op))
        )
        if handler is not None:
            return handler(self, op)
        spelling = self.t.ops.get(type(op))
        if isinstance(op, arith.CmpiOp):
            spelling = compare(self.t.cmpi[op.predicate.value.data])
        elif isinstance(op, arith.CmpfOp):
            spelling = compare(self.t.cmpf[op.predicate.value.data])
        elif isinstance(op, arith.ExtUIOp | arith.UIToFPOp) and op.operands[0].type == i1:
            spelling = CAST  # a bool is already 0 or 1
        if spelling is None or len(op.results) != 1:
            self.unsupported(op)
            raise AssertionError
        return self.spell(op, spelling)

    def spell(self, op: Operation, spelling: Spelling) -> Expr:
        result_type = op.results[0].type
        if isinstance(result_type, VectorType):
            if type(op) not in self.t.vector_operators and type(op) not in self.t.vector_math:
                return self.lanewise(op, spelling)
            result_type = result_type.get_element_type()  # fields of the element type
            if spelling.helper is not None:
                raise InternalCompilerError(f"{op.name} on vectors calls a scalar helper")
        operand_type = op.operands[0].type if op.operands else result_type
        fields = {
            "t": self.ctype(result_type),
            "s": self.suffix(result_type),
            "ut": self.t.unsigned_types.get(operand_type, "?"),
        }
        if "{f}" in spelling.fmt:
            float_type = result_type if isinstance(result_type, AnyFloat) else operand_type
            if float_type not in self.t.math_suffix:
                raise InternalCompilerError(
                    f"the {self.t.name} target has no {float_type} math "
                    f"for '{op.name}' (legalize it first, e.g. legalize-f16-for-c)"
                )
            fields["f"] = self.t.math_suffix[float_type]
        if spelling.helper is not None:
            self.use_helper(spelling.helper, result_type)
        operands = [
            self.value(o).operand(spelling.required(k)) for k, o in enumerate(op.operands)
        ]
        text = spelling.fmt.format(*operands, **fields)
        if spelling.may_overflow and result_type in self.t.promoted_types:
            # C computes narrow integers in int: wrap back to the type as arith does
            return Expr(f"({fields['t']})({text})", UNARY)
        return Expr(text, spelling.prec)

    def constant(self, op: arith.ConstantOp) -> Expr:
        value, t = op.value, op.result.type
        if isinstance(value, FloatAttr):
            text = self.float_literal(value.value.data, t)
        elif isinstance(value, IntegerAttr):
            text = int_literal(value.value.data, t)
            text = self.t.literal_names.get(text, text)
        else:
            self.unsupported(op)
            raise AssertionError
        # a negative literal is a negation: `-x` of it prints `-(-1.5)`, never `--1.5`
        return Expr(text, UNARY if text.startswith("-") else ATOM)

    def float_literal(self, value: float, t: Attribute) -> str:
        if t in self.t.literal_cast:
            return self.t.literal_cast[t] + self.float_literal(value, f32)
        if t not in self.t.math_suffix and t not in self.t.literal_suffix:
            raise TargetError(f"{self.t.name} target: no literal of type {t}")
        if math.isnan(value):
            return self.t.literal_names.get("NAN", "NAN")
        if math.isinf(value):
            name = self.t.literal_names.get("INFINITY", "INFINITY")
            return name if value > 0 else f"-{name}"
        text = repr(float(value)) if t == f64 else str(np.float32(value))
        suffixes = self.t.literal_suffix if t in self.t.literal_suffix else self.t.math_suffix
        return text + suffixes[t]

    # -- vectors --------------------------------------------------------------------------------
    def vector_fields(self, t: VectorType) -> dict[str, str]:
        element = t.get_element_type()
        n = t.get_shape()[0]
        scalar = self.ctype(element)
        fields = {"t": scalar, "s": self.suffix(element), "n": str(n), "P": self.t.helper_prefix}
        fields["T"] = self.t.vector_type.format(**fields)
        fields["lane_r"] = self.t.vector_lane.format(v="r", k="k")
        return fields

    def vector_ctype(self, t: VectorType) -> str:
        """The vector type's name; its typedef is printed once, before the helpers."""
        fields = self.vector_fields(t)
        if self.t.vector_typedef:
            size = self.t.sizeof(fields["t"]) if "{bytes}" in self.t.vector_typedef else 0
            text = self.t.vector_typedef.format(**fields, bytes=size * int(fields["n"]), align=size)
            if ("vtype", fields["T"]) not in self.helpers_used:
                self.helpers_used[("vtype", fields["T"])] = text
        return fields["T"]

    def vector_spelling(self, fmt: str, t: VectorType, *operands: str, **values: str) -> str:
        """`fmt` with the vector type's fields; the `vector_helpers` it calls are printed."""
        fields = self.vector_fields(t)
        self.vector_ctype(t)
        for name, body in self.t.vector_helpers.items():
            key = (name, f"{fields['s']}x{fields['n']}")
            if f"einc_{name}_" in fmt and key not in self.helpers_used:
                self.helpers_used[key] = body.format(**fields)
        return fmt.format(*operands, **fields, **values)

    def lanewise_helper(self, name: str, t: VectorType, params: Sequence[tuple[str, str]], result: str, body: str) -> str:
        """Print once `{result} einc_<name>_<s>x<n>(params) {{ body }}`; its name."""
        fields = self.vector_fields(t)
        self.vector_ctype(t)
        function = f"einc_{name}_{fields['s']}x{fields['n']}"
        key = (name, f"{fields['s']}x{fields['n']}")
        if key not in self.helpers_used:
            args = ", ".join(f"{pt} {pn}" for pt, pn in params)
            self.helpers_used[key] = f"{self.t.helper_prefix} {result} {function}({args}) {{ {body} }}"
        return function

    def lane(self, v: str, k: str) -> str:
        return self.t.vector_lane.format(v=v, k=k)

    def scalar_spelling(self, op_type: type[Operation], operands: Sequence[str], element: Attribute) -> str:
        """The scalar spelling of `op_type` on `element` operands (texts), its helpers printed."""
        spelling = self.t.ops.get(op_type)
        if spelling is None:
            raise InternalCompilerError(f"the {self.t.name} target has no spelling of {op_type.name}")
        fields = {"t": self.ctype(element), "s": self.suffix(element),
                  "ut": self.t.unsigned_types.get(element, "?")}  # fmt: skip
        if "{f}" in spelling.fmt:
            if element not in self.t.math_suffix:
                raise InternalCompilerError(f"the {self.t.name} target has no {element} math")
            fields["f"] = self.t.math_suffix[element]
        if spelling.helper is not None:
            self.use_helper(spelling.helper, element)
        return spelling.fmt.format(*operands, **fields)

    def lanewise(self, op: Operation, spelling: Spelling) -> Expr:
        """An elementwise op on vectors through a helper applying its scalar spelling to each
        lane (`einc_vaddf_f32x4(a, b)`)."""
        t = op.results[0].type
        assert isinstance(t, VectorType)
        element = t.get_element_type()
        names = "abc"[: len(op.operands)]
        lanes = [f"({self.lane(n, 'k')})" for n in names]
        scalar = self.scalar_spelling(type(op), lanes, element)
        T = self.ctype(t)
        body = (
            f"{T} r; for (int k = 0; k < {t.get_shape()[0]}; k++) "
            f"{self.lane('r', 'k')} = {scalar}; return r;"
        )
        name = "v" + op.name.split(".")[-1]
        function = self.lanewise_helper(name, t, [(T, n) for n in names], T, body)
        args = ", ".join(self.value(o).text for o in op.operands)
        return Expr(f"{function}({args})")

    # -- memory ---------------------------------------------------------------------------------
    def access(self, buffer: SSAValue, index: Expr) -> str:
        return f"{self.value(buffer).text}[{index.text}]"

    def flat_affine(self, buffer: SSAValue, m: AffineMap, operands: Sequence[SSAValue]) -> Expr:
        """The row-major flat index of `buffer[m(operands)]`."""
        assert isinstance(buffer.type, MemRefType)
        m = dims_to_operands(m)
        strides = _strides(buffer.type.get_shape())
        flat: AffineExpr = AffineExpr.constant(0)
        for result, stride in zip(m.results, strides):
            flat = flat + result * stride  # folds the 0 + and * 1, keeps the index order
        return self.affine_expr(flat, operands)

    def flat_values(self, buffer: SSAValue, indices: Sequence[SSAValue]) -> Expr:
        assert isinstance(buffer.type, MemRefType)
        terms: list[Expr] = []
        for index, stride in zip(indices, _strides(buffer.type.get_shape())):
            expr = self.value(index)
            if stride != 1:
                expr = Expr(f"{expr.operand(MUL)} * {stride}", MUL)
            terms.append(expr)
        if not terms:
            return Expr("0")
        if len(terms) == 1:
            return terms[0]
        return Expr(" + ".join(t.operand(ADD + 1) for t in terms), ADD)

    def affine_expr(self, expr: AffineExpr, operands: Sequence[SSAValue]) -> Expr:
        ranges = [value_range(o) for o in operands]
        text, prec = self._affine(expr, operands, ranges)
        return Expr(text, prec)

    def _affine(
        self, e: AffineExpr, operands: Sequence[SSAValue], ranges: Sequence[Range]
    ) -> tuple[str, int]:
        match e:
            case AffineConstantExpr(value=v):
                return str(v), (ATOM if v >= 0 else UNARY)
            case AffineDimExpr(position=p) | AffineSymExpr(position=p):
                expr = self.value(operands[p])
                return expr.text, expr.prec
            case AffineBinaryOpExpr(kind=AffineBinaryOpKind.Add, lhs=lhs, rhs=rhs):
                left = self._paren(self._affine(lhs, operands, ranges), ADD)
                negated = _negated(rhs)
                if negated is not None:
                    right = self._paren(self._affine(negated, operands, ranges), MUL)
                    return f"{left} - {right}", ADD
                return f"{left} + {self._paren(self._affine(rhs, operands, ranges), ADD)}", ADD
            case AffineBinaryOpExpr(kind=AffineBinaryOpKind.Mul, lhs=lhs, rhs=rhs):
                left = self._paren(self._affine(lhs, operands, ranges), MUL)
                right = self._paren(self._affine(rhs, operands, ranges), MUL + 1)
                return f"{left} * {right}", MUL
            case AffineBinaryOpExpr(kind=kind, lhs=lhs, rhs=rhs):
                lo, _ = expr_range(lhs, ranges)
                c = self._affine(rhs, operands, ranges)[0]
                if lo is not None and lo >= 0:
                    left = self._paren(self._affine(lhs, operands, ranges), MUL)
                    if kind == AffineBinaryOpKind.FloorDiv:
                        return f"{left} / {c}", MUL
                    if kind == AffineBinaryOpKind.Mod:
                        return f"{left} % {c}", MUL
                    inner = self._paren(self._affine(lhs, operands, ranges), ADD)
                    return f"({inner} + {int(c) - 1}) / {c}", MUL
                name = {
                    AffineBinaryOpKind.FloorDiv: "floordiv",
                    AffineBinaryOpKind.Mod: "mod",
                    AffineBinaryOpKind.CeilDiv: "ceildiv",
                }[kind]
                self.use_helper(name, IndexType())
                inner = self._affine(lhs, operands, ranges)[0]
                return f"einc_{name}_i64({inner}, {c})", ATOM
            case _:
                raise InternalCompilerError(f"{self.t.name} target: cannot print affine expr {e}")

    @staticmethod
    def _paren(part: tuple[str, int], at_least: int) -> str:
        text, prec = part
        return f"({text})" if prec < at_least else text

    def bound(self, m: AffineMap, operands: Sequence[SSAValue], helper_name: str) -> Expr:
        """A loop bound: the max (lower) or min (upper) of the map's results."""
        m = dims_to_operands(m)
        exprs = [self.affine_expr(r, operands) for r in m.results]
        result = exprs[0]
        for e in exprs[1:]:
            self.use_helper(helper_name, IndexType())
            result = Expr(f"einc_{helper_name}_i64({result.text}, {e.text})")
        return result

    # -- inlining -----------------------------------------------------------------------------
    def inlined(self, v: SSAValue) -> bool:
        """Whether `v` is printed inside its user's expression instead of being declared."""
        op = v.owner
        if not isinstance(op, Operation) or len(op.results) != 1:
            return False
        if isinstance(op, arith.ConstantOp):
            return True
        user_op = v.get_user_of_unique_use()
        if user_op is None or op.regions:
            return False
        if user_op.parent_block() is not op.parent_block():
            return False
        if type(user_op) in _STATEMENTS and not isinstance(
            user_op, _INLINE_INTO_STATEMENTS
        ):
            return False
        if type(op) in _LOADS:
            return not _writes_between(op, user_op, self.t.memory_ops)
        if type(op) in self.t.ops or isinstance(op, (arith.CmpiOp, arith.CmpfOp)):
            return _uses_once(self.t, user_op, v)
        return type(op) in _EXPRESSIONS and _uses_once(self.t, user_op, v)


def _negated(e: AffineExpr) -> AffineExpr | None:
    """`x` when `e` is `x * -c` or `-c` (printed as a subtraction), else None."""
    if isinstance(e, AffineConstantExpr) and e.value < 0:
        return AffineExpr.constant(-e.value)
    if (
        isinstance(e, AffineBinaryOpExpr)
        and e.kind == AffineBinaryOpKind.Mul
        and isinstance(e.rhs, AffineConstantExpr)
        and e.rhs.value < 0
    ):
        return e.lhs if e.rhs.value == -1 else e.lhs * (-e.rhs.value)
    return None


def _strides(shape: Sequence[int]) -> list[int]:
    strides, running = [], 1
    for dim in reversed(shape):
        strides.append(running)
        running *= dim
    return strides[::-1]


def _called_names(target: type) -> set[str]:
    """Every function a target's spelling tables call (`get_global_id(0)`, `vload_half(...)`,
    `barrier(...)`): a user's tensor or axis must not shadow them."""
    texts: list[str] = []
    for klass in target.__mro__:
        for value in vars(klass).values():
            if isinstance(value, str):
                texts.append(value)
            elif isinstance(value, dict):
                texts += [v for v in value.values() if isinstance(v, str)]  # type: ignore[union-attr]
    # `{name}f(` in a format is a suffix, not a function: skip names glued to a placeholder
    return set(re.findall(r"(?<![}\w])([A-Za-z_]\w*)[ \t]*\(", "\n".join(texts)))


# Lower-case names the C headers or the compiler predefine as macros (the upper-case ones are
# caught by shape in `_may_be_macro`).
PLATFORM_MACROS = frozenset(
    """linux unix i386 errno assert isnan isinf isfinite isnormal signbit fpclassify isgreater
    isgreaterequal isless islessequal islessgreater isunordered math_errhandling complex
    imaginary alignas alignof noreturn static_assert thread_local offsetof stdin stdout stderr
    NAN EOF""".split()
)


def _may_be_macro(name: str) -> bool:
    """Names a header, the compiler or the implementation may define: reserved spellings
    (`_X`, `__`), `*_t` types, upper-case constants like `M_PI` or `NULL`, known macros."""
    return (
        name.startswith("_")
        or "__" in name
        or name.endswith("_t")
        or (name.isupper() and (len(name) >= 4 or "_" in name))
        or name in PLATFORM_MACROS
    )


def c_identifier(text: str) -> str:
    """A C identifier for a user's tensor or axis name that no header macro can capture:
    the name itself where that is safe, else the name behind an `x_` prefix."""
    name = re.sub(r"\W", "_", text)
    if not name or name[0].isdigit():
        return "v" + name
    if _may_be_macro(name):
        return "x_" + (re.sub(r"_+", "_", name).strip("_") or "v")
    return name


def int_literal(value: int, t: Attribute) -> str:
    if t == i1:
        return "1" if value & 1 else "0"
    bits = 64 if isinstance(t, IndexType) else t.width.data  # type: ignore[union-attr]
    value = value - (1 << bits) if value >= 1 << (bits - 1) else value
    if value == -(1 << (bits - 1)):
        return f"INT{bits}_MIN"
    if value == (1 << (bits - 1)) - 1 and bits > 8:
        return f"INT{bits}_MAX"
    return str(value)


_CALLEE = re.compile(r"([A-Za-z_]\w*)\{f\}\(")
_LOADS = frozenset({affine.LoadOp, memref.LoadOp})
_WRITES = (affine.StoreOp, memref.StoreOp, memref.DeallocOp, func.CallOp, egpu.VStoreOp)
_READS = (affine.LoadOp, memref.LoadOp, egpu.LoadExtfOp, egpu.VLoadOp)


def _writes_between(
    first: Operation, last: Operation, memory_ops: tuple[type[Operation], ...] = ()
) -> bool:
    op = first.next_op
    while op is not None and op is not last:
        if isinstance(op, _WRITES) or isinstance(op, memory_ops) or op.regions:
            return True
        op = op.next_op
    return False


def _uses_once(target: type[CLikeTarget], user: Operation, v: SSAValue) -> bool:
    """An operand spelled twice (`a > b ? a : b`) must be a name, not a repeated expression."""
    index = [k for k, o in enumerate(user.operands) if o is v]
    if len(index) != 1:
        return False
    if isinstance(user, arith.CmpiOp):
        fmt = target.cmpi[user.predicate.value.data]
    elif isinstance(user, arith.CmpfOp):
        fmt = target.cmpf[user.predicate.value.data]
    elif type(user) in target.ops:
        fmt = target.ops[type(user)].fmt
    else:
        return True
    return fmt.count(f"{{{index[0]}}}") <= 1


def _is_written(buffer: SSAValue) -> bool:
    return any(
        isinstance(u.operation, (affine.StoreOp, memref.StoreOp)) and u.index == 1
        or not isinstance(u.operation, _READS)
        for u in buffer.uses
    )


# -- per-op statement and expression printers (the walk's op table) ----------------------------


def _affine_for(w: _Writer, op: affine.ForOp) -> None:
    n_lb, n_ub = len(op.lowerBoundOperands), len(op.upperBoundOperands)
    lower = w.bound(op.lowerBoundMap.data, op.operands[:n_lb], "maxsi")
    upper = w.bound(op.upperBoundMap.data, op.operands[n_lb : n_lb + n_ub], "minsi")
    names = w.carried(op.results, op.inits)
    for arg, name in zip(op.body.block.args[1:], names):
        w.names[arg] = name  # carried values live in the results' variables
    printed = _pragma_marks(op)
    for marks, pragma in w.t.loop_pragmas.items():
        if all(mark in printed for mark in marks):
            w.line(pragma)
            break
    w.for_loop(op.body.block.args[0], lower, upper, op.step.value.data, op.body.block)


def _pragma_marks(op: affine.ForOp) -> set[str]:
    """The schedule marks of `op` its pragma may print, given the marks printed on the
    enclosing loops. Every mark is only a licence (the loop is still correct run
    sequentially), so one OpenMP cannot nest is dropped. Inside a `simd` region no OpenMP
    construct but `simd`, `ordered simd`, `loop` and `atomic` may appear (gcc rejects a
    nested `parallel for`), and OpenMP before 5.0 forbids a nested `simd` too: a loop inside
    a printed `simd` loop drops both `parallel` and `simd` (the outer loop's lanes are the
    vectorization the schedule asked for). Inside a printed `parallel` loop the team already
    exists and a nested `parallel for` would fork a team per outer iteration (of one thread
    by default, oversubscribing with nesting enabled): the loop drops `parallel`. Marks nest
    this way when a transform puts loops into a marked one after marking it (a cache copy
    loop in a vectorized loop) or marks a loop inside a parallel one."""
    nest: list[affine.ForOp] = [op]
    parent = op.parent_op()
    while parent is not None:
        if isinstance(parent, affine.ForOp):
            nest.append(parent)
        parent = parent.parent_op()
    in_parallel = in_simd = False
    printed: set[str] = set()
    for loop in reversed(nest):  # outermost first
        printed = set(loop.attributes)
        if in_simd:
            printed -= {PARALLEL_ATTR, VECTORIZE_ATTR}
        elif in_parallel:
            printed.discard(PARALLEL_ATTR)
        in_parallel = in_parallel or PARALLEL_ATTR in printed
        in_simd = in_simd or VECTORIZE_ATTR in printed
    return printed


def _yield(w: _Writer, op: affine.YieldOp | scf.YieldOp) -> None:
    parent = op.parent_op()
    assert parent is not None
    w.assign_yield(parent.results, op.operands)


def _scf_for(w: _Writer, op: scf.ForOp) -> None:
    step = op.step.owner
    if not (isinstance(step, arith.ConstantOp) and isinstance(step.value, IntegerAttr)):
        raise InternalCompilerError(f"{w.t.name} target: scf.for with a non-constant step")
    names = w.carried(op.results, op.iter_args)
    for arg, name in zip(op.body.block.args[1:], names):
        w.names[arg] = name
    w.for_loop(
        op.body.block.args[0], w.value(op.lb), w.value(op.ub), step.value.value.data,
        op.body.block,
    )


def _scf_if(w: _Writer, op: scf.IfOp) -> None:
    w.carried(op.results, ())
    w.open(f"if ({w.value(op.cond).text})")
    w.block(op.true_region.block)
    if op.false_region.blocks and (
        op.results or len(op.false_region.block.ops) > 1
    ):
        w.close("} else {")
        w.depth += 1
        w.scopes.append(set())
        w.block(op.false_region.block)
    w.close()


def _store(w: _Writer, op: affine.StoreOp | memref.StoreOp) -> None:
    if isinstance(op, affine.StoreOp):
        index = w.flat_affine(op.memref, op.map.data, op.indices)
    else:
        index = w.flat_values(op.memref, op.indices)
    w.line(f"{w.access(op.memref, index)} = {w.value(op.value).text};")


def _alloc(w: _Writer, op: memref.AllocOp) -> None:
    t = op.memref.type
    element = w.ctype(t.get_element_type())
    hint = op.attributes.get("ein.name")
    name = w.declare(op.memref, hint.data if isinstance(hint, StringAttr) else None, buffer=True)
    w.line(w.t.alloc(element, math.prod(t.get_shape()), name))


def _alloca(w: _Writer, op: memref.AllocaOp) -> None:
    """A local array of the loop body (a staged tile: small, fixed shape)."""
    t = op.memref.type
    hint = op.attributes.get("ein.name")
    name = w.declare(op.memref, hint.data if isinstance(hint, StringAttr) else None, buffer=True)
    w.line(w.t.local_array(w.ctype(t.get_element_type()), math.prod(t.get_shape()), name))


def _dealloc(w: _Writer, op: memref.DeallocOp) -> None:
    w.line(w.t.free(w.value(op.memref).text))


def _return(w: _Writer, op: func.ReturnOp) -> None:
    """Kernels return nothing; the return ending the function body is implicit in C."""
    if op.operands:
        raise InternalCompilerError(f"{w.t.name} target: a kernel returns no values")


def _affine_load(w: _Writer, op: affine.LoadOp) -> Expr:
    return Expr(w.access(op.memref, w.flat_affine(op.memref, op.map.data, op.indices)))


def _memref_load(w: _Writer, op: memref.LoadOp) -> Expr:
    return Expr(w.access(op.memref, w.flat_values(op.memref, op.indices)))


def _affine_apply(w: _Writer, op: affine.ApplyOp) -> Expr:
    m = dims_to_operands(op.map.data)
    return w.affine_expr(m.results[0], op.mapOperands)


def _affine_min(w: _Writer, op: affine.MinOp) -> Expr:
    return w.bound(op.map.data, op.operands, "minsi")


def _vector_lane_accesses(w: _Writer, buffer: SSAValue, index: Expr, n: int) -> list[str]:
    return [
        w.access(buffer, index if k == 0 else Expr(f"{index.operand(ADD)} + {k}", ADD))
        for k in range(n)
    ]


def _vload(w: _Writer, op: egpu.VLoadOp) -> Expr:
    t = op.result.type
    assert isinstance(t, VectorType)
    index = w.flat_values(op.memref, op.indices)
    lanes = _vector_lane_accesses(w, op.memref, index, t.get_shape()[0])
    text = w.vector_spelling(
        w.t.vector_load, t, p=f"&{w.access(op.memref, index)}", lanes=", ".join(lanes)
    )
    return Expr(text)


def _vstore(w: _Writer, op: egpu.VStoreOp) -> None:
    t = op.value.type
    assert isinstance(t, VectorType)
    index = w.flat_values(op.memref, op.indices)
    value = w.value(op.value)
    if w.t.vector_store:
        p = f"&{w.access(op.memref, index)}"
        w.line(w.vector_spelling(w.t.vector_store, t, p=p, v=value.text))
        return
    if op.value not in w.names:  # stored lane by lane: name an expression once
        name = w.declare(op.value)
        w.line(f"{w.ctype(t)} {name} = {value.text};")
        value = Expr(name)
    for k, lane in enumerate(_vector_lane_accesses(w, op.memref, index, t.get_shape()[0])):
        w.line(f"{lane} = {w.lane(value.text, str(k))};")


def _vbroadcast(w: _Writer, op: egpu.VBroadcastOp) -> Expr:
    t = op.result.type
    assert isinstance(t, VectorType)
    return Expr(w.vector_spelling(w.t.vector_broadcast, t, w.value(op.value).operand(UNARY)))


_REDUCE_OPS: dict[tuple[egpu.ReduceKind, bool], type[Operation]] = {
    (egpu.ReduceKind.ADD, True): arith.AddfOp, (egpu.ReduceKind.MUL, True): arith.MulfOp,
    (egpu.ReduceKind.MAX, True): arith.MaximumfOp, (egpu.ReduceKind.MIN, True): arith.MinimumfOp,
    (egpu.ReduceKind.ADD, False): arith.AddiOp, (egpu.ReduceKind.MUL, False): arith.MuliOp,
    (egpu.ReduceKind.MAX, False): arith.MaxSIOp, (egpu.ReduceKind.MIN, False): arith.MinSIOp,
}  # fmt: skip
"""The scalar combine of a lane reduction (floats: NaN-propagating max/min, as einsum's)."""


def _vreduce(w: _Writer, op: egpu.VReduceOp) -> Expr:
    t = op.vector.type
    assert isinstance(t, VectorType)
    element = t.get_element_type()
    kind = op.kind.data
    combine = w.scalar_spelling(
        _REDUCE_OPS[(kind, isinstance(element, AnyFloat))], ["r", f"({w.lane('a', 'k')})"], element
    )
    scalar = w.ctype(element)
    body = (
        f"{scalar} r = {w.lane('a', '0')}; for (int k = 1; k < {t.get_shape()[0]}; k++) "
        f"r = {combine}; return r;"
    )
    function = w.lanewise_helper(f"vreduce_{kind.value}", t, [(w.ctype(t), "a")], scalar, body)
    return Expr(f"{function}({w.value(op.vector).text})")


def _vconvert(w: _Writer, op: egpu.VConvertOp) -> Expr:
    t, source = op.result.type, op.vector.type
    assert isinstance(t, VectorType) and isinstance(source, VectorType)
    if w.t.vector_convert:
        return Expr(w.vector_spelling(w.t.vector_convert, t, w.value(op.vector).text))
    T, S = w.ctype(t), w.ctype(source)
    scalar = w.ctype(t.get_element_type())
    body = (
        f"{T} r; for (int k = 0; k < {t.get_shape()[0]}; k++) "
        f"{w.lane('r', 'k')} = ({scalar}){w.lane('a', 'k')}; return r;"
    )
    function = w.lanewise_helper(f"vconvert_{w.suffix(source)}", t, [(S, "a")], T, body)
    return Expr(f"{function}({w.value(op.vector).text})")


def _vfma(w: _Writer, op: egpu.VFmaOp) -> Expr:
    t = op.result.type
    assert isinstance(t, VectorType)
    lanes = [f"({w.lane(n, 'k')})" for n in "abc"]
    scalar = w.scalar_spelling(mathd.FmaOp, lanes, t.get_element_type())
    T = w.ctype(t)
    body = f"{T} r; for (int k = 0; k < {t.get_shape()[0]}; k++) {w.lane('r', 'k')} = {scalar}; return r;"
    function = w.lanewise_helper("vfma", t, [(T, n) for n in "abc"], T, body)
    return Expr(f"{function}({', '.join(w.value(o).text for o in op.operands)})")


_VECTOR_STATEMENTS: dict[type[Operation], Callable[[_Writer, Operation], None]] = {
    egpu.VStoreOp: _vstore,  # type: ignore[dict-item]
}
_VECTOR_EXPRESSIONS: dict[type[Operation], Callable[[_Writer, Operation], Expr]] = {
    egpu.VLoadOp: _vload,  # type: ignore[dict-item]
    egpu.VBroadcastOp: _vbroadcast,  # type: ignore[dict-item]
    egpu.VConvertOp: _vconvert,  # type: ignore[dict-item]
    egpu.VReduceOp: _vreduce,  # type: ignore[dict-item]
    egpu.VFmaOp: _vfma,  # type: ignore[dict-item]
}
"""Printers of the vector ops: their results are always named (never inlined)."""


_STATEMENTS: dict[type[Operation], Callable[[_Writer, Operation], None]] = {
    affine.ForOp: _affine_for,  # type: ignore[dict-item]
    affine.YieldOp: _yield,  # type: ignore[dict-item]
    affine.StoreOp: _store,  # type: ignore[dict-item]
    scf.ForOp: _scf_for,  # type: ignore[dict-item]
    scf.IfOp: _scf_if,  # type: ignore[dict-item]
    scf.YieldOp: _yield,  # type: ignore[dict-item]
    memref.StoreOp: _store,  # type: ignore[dict-item]
    memref.AllocOp: _alloc,  # type: ignore[dict-item]
    memref.AllocaOp: _alloca,  # type: ignore[dict-item]
    memref.DeallocOp: _dealloc,  # type: ignore[dict-item]
    func.ReturnOp: _return,  # type: ignore[dict-item]
}
_INLINE_INTO_STATEMENTS = (affine.StoreOp, memref.StoreOp, affine.YieldOp, scf.YieldOp, scf.IfOp)
"""Statements whose operands may be inlined expressions (not loop bounds or carried inits:
those are printed before the loop and must not move past other statements)."""

_EXPRESSIONS: dict[type[Operation], Callable[[_Writer, Operation], Expr]] = {
    affine.LoadOp: _affine_load,  # type: ignore[dict-item]
    memref.LoadOp: _memref_load,  # type: ignore[dict-item]
    affine.ApplyOp: _affine_apply,  # type: ignore[dict-item]
    affine.MinOp: _affine_min,  # type: ignore[dict-item]
}

__all__ = ["CLikeTarget", "Expr", "Spelling", "call", "helper", "infix"]


Writer = _Writer
"""The printer state a target's hooks receive (`signature`, `function`, ...)."""
