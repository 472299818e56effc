"""The C target: C11 for gcc/clang, one exported `void kernel(...)` per module.

Buffers are `restrict` pointers (the runtime refuses overlapping outputs), read-only ones
`const`; f16 is `_Float16` (storage only: `legalize-f16-for-c` computes it in f32).
Integer wrap-around relies on `-fwrapv` (see einc.runtime.c).

Vector math: `exp`, `log`, `sin`, `cos` (and `tanh` from glibc 2.35) are redeclared with
`__attribute__((__simd__("notinbranch")))` when a kernel calls them, on x86-64 glibc with
gcc: what glibc's own `<bits/math-vector.h>` declares under `-ffast-math`. gcc then calls
glibc's libmvec (`_ZGVeN16v_expf`, 16 lanes with AVX-512; einc.runtime.c links `-lmvec`) in
loops it vectorizes, including the lane-wise helpers that `einc-vectorize-loops` makes of
these ops (`SIMD_MATH`), with no `-ffast-math`: libmvec keeps NaN, infinities and the
special cases, at a documented accuracy of at most 4 ulp (glibc's manual; the scalar
functions are within 1-2 ulp), so results may differ from the scalar ones in the last bits.
float32 `exp` of 16 lanes with AVX-512 is einc's own inline where its arguments are ordinary
(`EXP_F32X16`: at most 0.98 ulp), libmvec's for any vector with a special lane.
"""

from __future__ import annotations

import math as pymath
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import ClassVar

import numpy as np
from xdsl.dialects import affine, arith, func, math, memref, scf
from xdsl.dialects.builtin import FloatAttr, ModuleOp, VectorType, f32
from xdsl.ir import Operation, SSAValue

from einc.dialects import egpu
from einc.targets.clike import CLikeTarget
from einc.targets.op_printers import expression
from einc.targets.spelling import Expr
from einc.targets.writer import Writer

SIMD_MATH: Mapping[type[Operation], str] = {
    math.ExpOp: "exp", math.LogOp: "log", math.SinOp: "sin", math.CosOp: "cos", math.TanhOp: "tanh",
}  # fmt: skip
"""The math ops with a libmvec vector variant, by C function name (double; `f`: float)."""

_SINCE_2_35 = frozenset({"tanh"})
"""libmvec functions added in glibc 2.35 (the others are there since 2.22)."""


def simd_declarations(functions: set[str]) -> str:
    """The `__simd__` redeclarations of the C math `functions` (names of `SIMD_MATH`, float
    and double), for x86-64 glibc with gcc only; "" for none."""
    if not functions:
        return ""
    lines = ["#if defined(__x86_64__) && defined(__GLIBC__) && defined(__GNUC__) && !defined(__clang__)"]
    for name in sorted(functions):
        decl = (
            f'__attribute__((__simd__("notinbranch"))) float {name}f(float);\n'
            f'__attribute__((__simd__("notinbranch"))) double {name}(double);'
        )
        if name in _SINCE_2_35:
            decl = f"#if __GLIBC_PREREQ(2, 35)\n{decl}\n#endif"
        lines.append(decl)
    lines.append("#endif")
    return "\n".join(lines)


def _range_bodies() -> dict[tuple[str, str, int], str]:
    """The vector maximum/minimum helpers (IEEE 754-2019, as the scalar `maximumf`/`minimumf`
    helpers: NaN from either operand, -0 below +0) through AVX512DQ's VRANGEPS/VRANGEPD
    (imm 5: the larger, 4: the smaller, each with its own sign: -0 < +0), right wherever
    neither operand is NaN; a vector with a NaN lane (one unordered compare into a mask
    register) calls the lane loop (`{lanes}`: cold, never inlined), which keeps the scalar
    helper's NaN (`a`'s before `b`'s, signalling ones as they are). The lane loop of selects
    gcc makes of the scalar helper is five compares into mask registers and a mask `or` per
    vector, whose throughput bounds a row maximum: softmax 1536x128, AVX-512 (Zen 4), 1
    thread, shared machine: 0.14 -> 0.09 ms; the NaN selects inline after VRANGEPS (four
    more operations per vector, two of them on the accumulator's chain) took 17% of a
    softmax with an inline `exp` (24576x128, Zen 4, 1 thread: 1.83 -> 1.51 ms with the
    branch). Bit-exact with the scalar helper on every pair of specials (NaNs with payloads,
    signalling, infinities, signed zeros, subnormals: tests/test_c_vector_helpers.py). Other
    compilers, hosts without AVX512DQ (and AVX512VL below 512 bits) keep the lane loop."""
    found = {}
    for suffix, letter, kind in (("f32", "s", "ps"), ("f64", "d", "pd")):
        for bits, (lanes32, tail, vl) in {512: (16, ", 4", ""), 256: (8, "", " && defined(__AVX512VL__)"),
                                          128: (4, "", " && defined(__AVX512VL__)")}.items():  # fmt: skip
            lanes = lanes32 if letter == "s" else lanes32 // 2
            for name, imm in (("vmaximumf", 5), ("vminimumf", 4)):
                found[(name, suffix, lanes)] = (
                    f"\n#if defined(__AVX512DQ__){vl} && defined(__GNUC__) && !defined(__clang__)\n"
                    f"  {{T}} r = __builtin_ia32_range{kind}{bits}_mask(a, b, {imm}, a, -1{tail});\n"
                    f"  if (__builtin_expect(__builtin_ia32_cmp{kind}{bits}_mask(a, b, 3, -1{tail}) != 0, 0)) "
                    "return {lanes}(a, b);\n  return r;\n#else\n  {generic}\n#endif\n"
                )
    return found


EXP_F32X16 = (
    "\n#if defined(__AVX512F__) && defined(__GNUC__) && !defined(__clang__)\n"
    "  typedef unsigned i_t __attribute__((vector_size(64))); {T} z = {{}};\n"
    "  unsigned short fast = __builtin_ia32_cmpps512_mask(({T})((i_t)a & 0x7fffffff), z + 87.0f, 18, (unsigned short)-1, 4);\n"
    "  unsigned short zero = __builtin_ia32_cmpps512_mask(a, z - 104.0f, 18, (unsigned short)-1, 4);\n"
    "  {T} t = __builtin_ia32_vfmaddps512_mask(a, z + 0x1.715476p+0f, z + 0x1.8p23f, (unsigned short)-1, 4), n = t - 0x1.8p23f;\n"
    "  {T} r = __builtin_ia32_vfmaddps512_mask(-n, z + 0x1.62e4p-1f, a, (unsigned short)-1, 4);\n"
    "  r = __builtin_ia32_vfmaddps512_mask(-n, z + 0x1.7f7d1cp-20f, r, (unsigned short)-1, 4);\n"
    "  {T} p = __builtin_ia32_vfmaddps512_mask(z + 0x1.6d431ep-10f, r, z + 0x1.120b66p-7f, (unsigned short)-1, 4);\n"
    "  p = __builtin_ia32_vfmaddps512_mask(p, r, z + 0x1.5554eap-5f, (unsigned short)-1, 4);\n"
    "  p = __builtin_ia32_vfmaddps512_mask(p, r, z + 0x1.5554dcp-3f, (unsigned short)-1, 4);\n"
    "  p = __builtin_ia32_vfmaddps512_mask(p, r, z + 0.5f, (unsigned short)-1, 4);\n"
    "  p = __builtin_ia32_vfmaddps512_mask(p, r, z + 1.0f, (unsigned short)-1, 4);\n"
    "  p = __builtin_ia32_vfmaddps512_mask(p, r, z + 1.0f, (unsigned short)-1, 4);\n"
    "  if (__builtin_expect((unsigned short)(fast | zero) != (unsigned short)0xffff, 0)) return {lanes}(a);\n"
    "  return __builtin_ia32_blendmps_512_mask(({T})((i_t)p + ((i_t)t << 23)), z, zero);\n"
    "#else\n  {generic}\n#endif\n"
)
"""`exp` of 16 float32 lanes (AVX-512, gcc) inline, where every lane is within [-87, 87]
(result normal and finite) or at most -104 (+0: exp(x) < 2^-150 rounds to it, -inf
included); a vector with any other lane (NaN, +inf, overflow, a subnormal result) calls
the lane loop, which gcc vectorizes through libmvec as before (`{lanes}`: cold, never
inlined), so every special case keeps libmvec's result bit for bit. The fast path: n =
RN(x log2 e) (one FMA against 1.5 * 2^23, whose low bits hold n), r = x - n ln2 in two
FMAs (ln2's head has 17 bits: n times it is exact), exp(r) on |r| <= ln2/2 by a degree-6
polynomial (1 + r + r^2 P(r), P fitted on Chebyshev nodes, float32 coefficients) in Horner
FMAs, and 2^n added to its exponent bits (the result is normal). At most 0.98 ulp from the
exact result over every float32 of [-87, 87] (measured exhaustively against the float64
`exp`; the language promises 4 ulps, libmvec documents 4), about 14 vector operations and no
call: libmvec's call clobbers every vector register, so a softmax row's values were spilled
around each of its 8 calls. Softmax 24576x128, Zen 4, 1 thread, thread CPU time: 2.06 ->
1.79 ms (benchmarks/ab_operator_c.py). tests/test_c_vector_helpers.py checks it."""


_DIVIDE_PROLOGUE = (
    " unsigned ad; __builtin_memcpy(&ad, &d, 4);\n"
    "  int in = (ad & 0x7fffffffu) - 0x26800000u < 0x32000000u;\n"
    "  {t} y = in ? 1.0f / d : __builtin_nanf(\"\");\n"
    "  {T} yv = y - ({T}){{}}, dv = d - ({T}){{}}, q = x * yv;\n"
)
"""The start both paths of DIVIDE_BY_SCALAR share: the divisor's range test, its reciprocal
(NaN outside the range), the splats and q = x y."""


DIVIDE_BY_SCALAR = (
    "static __attribute__((noinline, cold)) {T} einc_vdivs_lanes_{s}x{n}({T} x, {T} d) {{ return x / d; }}\n"
    "{P} {T} einc_vdivs_{s}x{n}({T} x, {t} d) {{\n"
    "#if {n} == 16 && defined(__AVX512F__) && defined(__GNUC__) && !defined(__clang__)\n"
    "  typedef int i_t __attribute__((vector_size(64)));" + _DIVIDE_PROLOGUE +
    "  unsigned short ok = __builtin_ia32_ucmpd512_mask(((i_t)q & 0x7fffffff) - 0x26800000, "
    "(i_t){{}} + 0x58000000, 1, (unsigned short)-1);\n"
    "  unsigned short zero = __builtin_ia32_ptestnmd512((i_t)x, (i_t){{}} + 0x7fffffff, (unsigned short)-in);\n"
    "  {T} e = __builtin_ia32_vfmaddps512_mask(-q, dv, x, (unsigned short)-1, 4);\n"
    "  {T} r = __builtin_ia32_blendmps_512_mask(__builtin_ia32_vfmaddps512_mask(e, yv, q, (unsigned short)-1, 4), q, zero);\n"
    "  if (__builtin_expect(!__builtin_ia32_kortestchi(ok, zero), 0)) r = einc_vdivs_lanes_{s}x{n}(x, dv);\n"
    "  return r;\n"
    "#elif {n} == 8 && defined(__AVX2__) && defined(__FMA__) && defined(__GNUC__) && !defined(__clang__)\n"
    "  typedef int i_t __attribute__((vector_size(32)));" + _DIVIDE_PROLOGUE +
    "  i_t aq = (i_t)q & 0x7fffffff, zero = (((i_t)x & 0x7fffffff) == 0) & -in;\n"
    "  {T} r = __builtin_ia32_vfmaddps256(__builtin_ia32_vfmaddps256(-q, dv, x), yv, q);\n"
    "  r = ({T})(((i_t)q & zero) | ((i_t)r & ~zero));\n"
    "  if (__builtin_expect(__builtin_ia32_movmskps256(({T})(((aq >= 0x26800000) & (aq < 0x7e800000)) | zero)) != 0xff, 0))\n"
    "    r = einc_vdivs_lanes_{s}x{n}(x, dv);\n"
    "  return r;\n"
    "#else\n"
    "  return x / d;\n"
    "#endif\n"
    "}}"
)
"""`x / d` of a float32 vector by a scalar (`arith.divf` by an `egpu.vbroadcast`), correctly
rounded as the division, in two FMAs where they are proven exact: y = RN(1/d) once (one
scalar division, which gcc hoists from a loop where d is invariant: the softmax's row sum, a
mean's divisor; NaN for a divisor outside the range below, which sends every lane, zeros
included, to the division), q = RN(x y), e = x - q d (exact, one FMA) and q + e y rounded once, which is
RN(x / d) by Markstein's theorem (y within half an ulp of 1/d, q within one ulp of x/d) where
nothing over- or underflows: |d| in [2^-50, 2^50) (y normal), |q| in [2^-50, 2^126) (so
|x| >= 2^-101 and the residual's grid ulp(q) ulp(d) >= 2^-146 is representable; no
overflow). Zero lanes take q (x y: the quotient's signed zero); a vector with any other lane
outside (NaN, infinities, subnormal or huge quotients) divides in a function of its own,
`cold` and never inlined (gcc if-converts a branch around an inline division into a division
masked on every vector, which holds the divider as long as an unmasked one), as do
hosts without AVX-512 (16 lanes) or AVX2 + FMA (8 lanes) and other compilers. A 16-lane
division (vdivps zmm) takes about 10 cycles of one divider; this about 8 vector operations on
two ports (tests/test_c_divide.py checks it bit for bit against the division on every
special and exhaustively over the mantissas)."""


def _divf(w: Writer, op: arith.DivfOp) -> Expr:
    """A float32 vector of 8 or 16 lanes divided by a splat scalar in a loop that carries
    values (a vector reduction: a mean's terms, a variance's): `einc_vdivs` (the same numbers:
    DIVIDE_BY_SCALAR); any other division: C's `/`. Outside reductions the division stays:
    there the divider runs beside the loops around it, where the helper's eight vector
    operations take the ports those loops use (softmax's normalisation after its `exp` calls:
    0.84-0.88x with the helper, a reduction over a row 1.08-1.49x; benchmarks/ab_operator_c.py,
    README). A constant power of two stays a division too: gcc multiplies by its reciprocal."""
    t, divisor, loop = op.result.type, op.rhs.owner, op.parent_op()
    if (
        isinstance(t, VectorType) and t.get_element_type() == f32 and t.get_shape()[0] in (8, 16)
        and isinstance(divisor, egpu.VBroadcastOp) and divisor.value.type == f32
        and not _power_of_two(divisor.value)
        and isinstance(loop, affine.ForOp | scf.ForOp) and len(loop.results) > 0
    ):  # fmt: skip
        return Expr(w.vector_spelling("einc_vdivs_{s}x{n}({0}, {1})", t, w.value(op.lhs).text, w.value(divisor.value).text))
    return w.spell(op, w.t.ops[arith.DivfOp])


def _power_of_two(value: SSAValue) -> bool:
    """Whether `value` is a constant power of two (gcc multiplies by its exact reciprocal)."""
    op = value.owner
    if not (isinstance(op, arith.ConstantOp) and isinstance(op.value, FloatAttr)):
        return False
    mantissa, _ = pymath.frexp(abs(op.value.value.data))
    return mantissa == 0.5


def _stream_helper(size: int, feature: str, builtin: str) -> str:
    """The non-temporal store of a `size`-byte vector (`transform.einc.stream_stores`):
    `vmovntps` (gcc's builtin, clang's `__builtin_nontemporal_store`) where the address is a
    multiple of `size`, which it requires, a plain store where it is not (an output a caller
    placed off the line: the same numbers, no fault) or the host lacks the instruction."""
    return (
        f"{{P}} void einc_vstream{8 * size}_{{s}}x{{n}}({{t}}* a, {{T}} v) {{{{\n"
        f"#if defined(__clang__) && defined({feature})\n"
        f"  if (((uintptr_t)a & {size - 1}) == 0) {{{{ __builtin_nontemporal_store(v, ({{T}}*)a); return; }}}}\n"
        f"#elif defined(__GNUC__) && defined({feature})\n"
        f"  typedef float f_t __attribute__((vector_size({size})));\n"
        f"  if (((uintptr_t)a & {size - 1}) == 0) {{{{ {builtin}((float*)a, (f_t)v); return; }}}}\n"
        "#endif\n"
        "  *({T}_mem*)a = v;\n}}"
    )


class CTarget(CLikeTarget):
    name: ClassVar[str] = "c"
    pipeline: ClassVar[str] = (
        "legalize-f16-for-c,legalize-float-to-int,legalize-bf16-storage,einc-init-accumulators,einc-hoist-packs,"
        "einc-coalesce-stream-copies,einc-unswitch,"
        "einc-vectorize-loops{target=c},einc-stream-stores,canonicalize,cse"
    )
    includes: ClassVar[tuple[str, ...]] = ("math.h", "stdbool.h", "stdint.h", "stdlib.h")
    sketches: ClassVar[str] = "cpu"
    takes_cflags: ClassVar[bool] = True
    openmp: ClassVar[bool] = True
    shared_library: ClassVar[bool] = True
    buffer_suffix: ClassVar[str] = " restrict"
    prefetch_hint: ClassVar[str] = "__builtin_prefetch"
    vector_shuffle: ClassVar[str] = "__builtin_shufflevector({a}, {b}, {mask})"
    """GCC 12+ and Clang: a shuffle the compiler picks instructions for (a 16 x 16 transpose
    in 64 of them, where scalar copies cost a store per element)."""
    lanewise_vector_math: ClassVar[frozenset[type[Operation]]] = frozenset(SIMD_MATH)
    """Math ops `einc-vectorize-loops` may put on vectors although C's functions take
    scalars: printed as lane-wise helpers, which gcc vectorizes through libmvec."""

    @classmethod
    def local_array(cls, element: str, count: int, name: str) -> str:
        return f"{element} {name}[{count}] __attribute__((aligned(64)));"

    @classmethod
    def signature(cls, w: Writer, f: func.FuncOp, params: Sequence[str]) -> str:
        """A function with a guarded load in a loop (`scf.if` reading memory: `.when`
        padding) is compiled without gcc's loop if-conversion: gcc 12.2 with AVX2/AVX-512
        turned a max-reduction over one into a masked vector load that read zeros (wrong
        numbers; tests/test_regressions_gcc.py). Other functions keep it (it vectorizes
        their selects)."""
        header = super().signature(w, f, params)
        return f"{NO_IF_CONVERT} {header}" if _guarded_load_in_loop(f) else header

    repeat_loads: ClassVar[Mapping[int, str]] = {64: "einc_vrepeat64_{s}x{n}({p})"}
    vector_helpers: ClassVar[Mapping[str, str]] = {
        **CLikeTarget.vector_helpers,
        # the 8 bytes as one integer, splat, the bits read as the vector's elements: gcc
        # emits one broadcast load (vpbroadcastq zmm, [mem]: a load port, not the shuffle
        # port AVX-512's FMAs share; the pair form of README's grouped convolution)
        "vrepeat64": "{P} {T} einc_vrepeat64_{s}x{n}(const {t}* a) {{ "
        "typedef long long q_t __attribute__((vector_size(sizeof({T})))); long long q; "
        "__builtin_memcpy(&q, a, 8); return ({T})(q - (q_t){{}}); }}",
        # the first k lanes: AVX-512's masked store (vmovups with a k-mask) of a 16 x float32
        # vector, else lane by lane (gcc; the transposing copy's partial tile, e.g. 14 of 16)
        "vstoren": "{P} void einc_vstoren_{s}x{n}({t}* a, {T} v, int k) {{\n"
        "#if defined(__AVX512F__) && defined(__GNUC__) && !defined(__clang__)\n"
        "  if (sizeof(v) == 64 && sizeof(*a) == 4) {{ typedef float f_t __attribute__((vector_size(64))); "
        "__builtin_ia32_storeups512_mask((float*)a, (f_t)v, (unsigned short)((1u << k) - 1u)); return; }}\n"
        "#endif\n"
        "  for (int j = 0; j < k; j++) a[j] = v[j];\n}}",
        # the first k elements, the other lanes zero: AVX-512's masked load (vmovups with a
        # zeroing k-mask, which does not read past them), else lane by lane (an interleaving
        # copy's last columns: the pair form's input pack, 12 of 16)
        "vloadn": "{P} {T} einc_vloadn_{s}x{n}(const {t}* a, int k) {{\n"
        "#if defined(__AVX512F__) && defined(__GNUC__) && !defined(__clang__)\n"
        "  if (sizeof({T}) == 64 && sizeof(*a) == 4) {{ typedef float f_t __attribute__((vector_size(64))); "
        "return ({T})__builtin_ia32_loadups512_mask((const float*)a, (f_t){{}}, (unsigned short)((1u << k) - 1u)); }}\n"
        "#endif\n"
        "  {T} v = {{}};\n  for (int j = 0; j < k; j++) v[j] = a[j];\n  return v;\n}}",
        "vdivs": DIVIDE_BY_SCALAR,
        **{f"vstream{8 * size}": _stream_helper(size, feature, builtin) for size, feature, builtin in (
            (64, "__AVX512F__", "__builtin_ia32_movntps512"), (32, "__AVX__", "__builtin_ia32_movntps256"),
            (16, "__SSE__", "__builtin_ia32_movntps"))},  # fmt: skip
    }
    expression_printers: ClassVar[Mapping[type[Operation], Callable[[Writer, Operation], Expr]]] = {
        **CLikeTarget.expression_printers,
        arith.DivfOp: expression(arith.DivfOp, _divf),
    }
    partial_vector_store: ClassVar[str] = "einc_vstoren_{s}x{n}({p}, {v}, {k});"
    partial_vector_store_bytes: ClassVar[int] = 64  # AVX-512's masked store and load (16 floats)
    partial_vector_load: ClassVar[str] = "einc_vloadn_{s}x{n}({p}, {k})"
    stream_stores: ClassVar[Mapping[int, str]] = {
        64: "einc_vstream512_{s}x{n}({p}, {v});", 32: "einc_vstream256_{s}x{n}({p}, {v});",
        16: "einc_vstream128_{s}x{n}({p}, {v});",
    }
    stream_fence: ClassVar[tuple[str, str]] = (
        "einc_sfence();",
        "static inline void einc_sfence(void) {\n#if defined(__SSE__)\n  __builtin_ia32_sfence();\n#endif\n}",
    )
    outline_parallel_loops: ClassVar[bool] = True
    lanewise_bodies: ClassVar[Mapping[tuple[str, str, int], str]] = {**_range_bodies(), ("vexp", "f32", 16): EXP_F32X16}
    vector_shuffle_guard: ClassVar[str] = "defined(__clang__) || __GNUC__ >= 12"
    """gcc has `__builtin_shufflevector` from 12 (clang always): a row sum's lanes folded in
    registers, not 15 dependent scalar adds through memory: 2048x7x7 global average pool
    (coalesced rows), AVX-512, 1 thread, shared machine: 9.1 -> 5.4 us."""

    @classmethod
    def outlined_signature(cls, w: Writer, f: func.FuncOp, name: str, params: Sequence[str]) -> str:
        """As the kernel's (`signature`, printed already): without loop if-conversion where
        `f` has it."""
        header = super().outlined_signature(w, f, name, params)
        return header.replace("void ", f"{NO_IF_CONVERT} void ", 1) if w.header.startswith(NO_IF_CONVERT) else header

    @classmethod
    def declarations(cls, module: ModuleOp) -> list[str]:
        """The `__simd__` declarations of the vector-math functions the module calls."""
        text = simd_declarations({SIMD_MATH[type(op)] for op in module.walk() if type(op) in SIMD_MATH})
        return [text] if text else []

    @classmethod
    def toolchain_identity(cls, cflags: Sequence[str] = ()) -> tuple[str, str]:
        from einc.runtime.c import toolchain_identity

        return toolchain_identity(cflags)

    @classmethod
    def build(
        cls, source: str, module: ModuleOp, cflags: Sequence[str] = ()
    ) -> Callable[[Mapping[str, np.ndarray], Mapping[str, np.ndarray]], object]:
        from einc.runtime.c import load_c_kernel
        from einc.runtime.signature import KernelSignature

        return load_c_kernel(source, KernelSignature.from_module(module), extra_flags=cflags).run


NO_IF_CONVERT = '__attribute__((optimize("no-tree-loop-if-convert")))'


def _guarded_load_in_loop(f: func.FuncOp) -> bool:
    """Whether `f` has a load under an `scf.if` inside a loop."""
    for op in f.walk():
        if isinstance(op, scf.IfOp) and any(isinstance(p, (affine.ForOp, scf.ForOp)) for p in _ancestors(op)):
            if any(isinstance(o, (affine.LoadOp, memref.LoadOp)) for o in op.walk()):
                return True
    return False


def _ancestors(op: Operation) -> Iterator[Operation]:
    parent = op.parent_op()
    while parent is not None:
        yield parent
        parent = parent.parent_op()
