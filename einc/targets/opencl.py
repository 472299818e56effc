"""The OpenCL C target: one `__kernel` per statement, run through pyopencl (PoCL on the CPU).

OpenCL C math is overloaded (`exp`, not `expf`); `half` is storage only (PoCL has no
`cl_khr_fp16`): `legalize-f16-storage` computes in float and reads/writes halves with
`vload_half` / `vstore_half`, rounding intermediate halves by their bits (`round_f16`).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import ClassVar

from xdsl.dialects import math as mathd
from xdsl.dialects.builtin import IndexType, bf16, f16, f32, f64, i1, i8, i16, i32, i64

from einc.runtime.manifest import LaunchManifest
from einc.targets.bfloat16 import Bf16Spelling
from einc.targets.descriptions import ALL_DTYPES, TargetDescription
from einc.targets.clike import CLikeTarget
from einc.targets.gpu import DeviceTarget, Runner, TargetRuntime


class OpenCLTarget(DeviceTarget):
    name: ClassVar[str] = "opencl"
    runtime_device: ClassVar[str | None] = "opencl"
    pipeline: ClassVar[str] = (
        "legalize-f16-for-c,einc-widen-narrow-buffers{target=opencl},legalize-float-to-int,"
        "einc-init-accumulators,convert-affine-to-egpu{target=opencl},einc-pad-shared{target=opencl},"
        "legalize-f16-storage,legalize-bf16-storage,einc-unswitch{when=false},einc-vectorize-loops{target=opencl},einc-vectorize-global{target=opencl},einc-vectorize-shared-loads,canonicalize,cse,einc-index-width"
    )
    limits = TargetDescription(
        "opencl", max_threads_per_block=4096, max_block=(4096, 4096, 4096),
        max_grid=(2**31 - 1, 2**31 - 1, 2**31 - 1), shared_bytes_per_block=2 * 1024 * 1024,
        subgroup_size=1, vector_width=16, default_block=64,
        storage_dtypes=ALL_DTYPES, arith_dtypes=ALL_DTYPES - {"float16"}, shared_on_chip=False,
        loop_barriers=True,
    )  # fmt: skip
    buffer_prefix: ClassVar[str] = "__global "
    buffer_suffix: ClassVar[str] = " restrict"
    barrier: ClassVar[str] = "barrier(CLK_LOCAL_MEM_FENCE);"
    private_array: ClassVar[str] = "{t} {name}[{n}];"  # __private: the default in a kernel
    reserved_words: ClassVar[frozenset[str]] = frozenset({"half", "half2", "half4", "half8", "half16"})
    work_item_index = {
        **{f"block_id.{d}": f"get_group_id({k})" for k, d in enumerate("xyz")},
        **{f"thread_id.{d}": f"get_local_id({k})" for k, d in enumerate("xyz")},
        **{f"global_id.{d}": f"get_global_id({k})" for k, d in enumerate("xyz")},
        **{f"block_dim.{d}": f"get_local_size({k})" for k, d in enumerate("xyz")},
        **{f"grid_dim.{d}": f"get_num_groups({k})" for k, d in enumerate("xyz")},
    }
    work_item_index_32 = {k: f"(int){v}" for k, v in work_item_index.items()}
    types = {
        f64: "double", f32: "float", f16: "half", bf16: "ushort",
        i64: "long", i32: "int", i16: "short", i8: "char", i1: "bool", IndexType(): "long",
    }  # fmt: skip
    unsigned_types = {
        i64: "ulong", i32: "uint", i16: "ushort", i8: "uchar", i1: "bool", IndexType(): "ulong",
    }  # fmt: skip
    bf16_spelling = Bf16Spelling("ushort", "uint", "as_uint(f)", "as_float(u)")
    math_suffix = {f64: "", f32: ""}
    literal_suffix = {f64: "", f32: "f"}
    literal_names = {
        "INT64_MIN": "LONG_MIN", "INT64_MAX": "LONG_MAX", "INT32_MIN": "INT_MIN",
        "INT32_MAX": "INT_MAX", "INT16_MIN": "SHRT_MIN", "INT16_MAX": "SHRT_MAX",
        "INT8_MIN": "CHAR_MIN",
    }  # fmt: skip
    preamble = ("#pragma OPENCL EXTENSION cl_khr_fp64 : enable",)
    helper_prefix: ClassVar[str] = "inline"
    round_f16: ClassVar[str] = (
        "uint u = as_uint(a); uint s = u & 0x80000000u; uint m = u ^ s; "
        "if (m > 0x7f800000u) return a; "
        "if (m >= 0x477ff000u) return as_float(s | 0x7f800000u); "
        "if (m < 0x38800000u) return as_float(as_uint(rint(as_float(m) * 16777216.0f) * 5.9604644775390625e-8f) | s); "
        "return as_float(((m + 0xfffu + ((m >> 13) & 1u)) & 0xffffe000u) | s);"
    )
    """float32 `a` rounded to the nearest float16 (ties to even) by its bits, not through
    `vstore_half`/`vload_half` (PoCL: a float16 matmul 512^3 2.7x faster, a float16 row sum
    2.2-2.5x, benchmarks/narrow_contractions.py; a branch-free form, `rint` computed for every value, was 3.8x slower): NaN as it is,
    from 65520 up infinity (the tie above the largest half, 65504, rounds to even: up), below
    2^-14 to a multiple of 2^-24 (subnormal halves: `rint` of the exact scaled value, ties to
    even), else the significand rounded to 10 bits (a carry into the exponent is the next
    binade). tests/test_narrow_buffers.py checks it against NumPy on every float32 pattern of
    the tie bits."""

    lanewise_bodies: ClassVar[Mapping[tuple[str, str, int], str]] = {
        (name, suffix, lanes): (
            f"{{T}} r = select(b, a, a {op} b); r = select(r, b, b != b); r = select(r, a, a != a); "
            f"return select(r, {zeros}, (a == {zero}) & (b == {zero}));"
        )
        for name, op, zeros in (("vmaximumf", ">", "a + b"), ("vminimumf", "<", "-(-a - b)"))
        for suffix, zero in (("f32", "0.0f"), ("f64", "0.0"))
        for lanes in (2, 3, 4, 8, 16)
    }
    """IEEE maximum/minimum of vectors as the scalar helpers' selects (`CLikeTarget.helpers`),
    component-wise with OpenCL's `select` (the same lanes, NaN payloads included), instead of
    a lane loop calling the scalar helper: PoCL ran a 1024x1024 row maximum's loop lane by lane
    (1.1 ms; the row sum 0.18 ms)."""

    vector_type: ClassVar[str] = "{t}{n}"
    vector_typedef: ClassVar[str] = ""
    vector_lane: ClassVar[str] = "{v}[{k}]"
    vector_operators = CLikeTarget.vector_operators
    vector_load: ClassVar[str] = "vload{n}(0, {p})"
    vector_store: ClassVar[str] = "vstore{n}({v}, 0, {p});"
    vector_broadcast: ClassVar[str] = "({T})({0})"
    vector_literal: ClassVar[str] = "({T})({0})"
    vector_convert: ClassVar[str] = "convert_{T}({0})"
    vector_math = frozenset({
        mathd.ExpOp, mathd.Exp2Op, mathd.LogOp, mathd.Log2Op, mathd.Log10Op, mathd.SqrtOp,
        mathd.TanhOp, mathd.AbsFOp, mathd.FloorOp, mathd.CeilOp,
        mathd.TruncOp, mathd.PowFOp, mathd.FmaOp,
    })  # fmt: skip
    """OpenCL's math builtins are overloaded for `floatN`/`doubleN`: the same call on vectors.
    Not `sin`/`cos`: PoCL's `float4` ones are wrong on subnormal arguments (sin(-7.6e-42) gave
    -0.0078, cos(-1.4e-36) 0.99990; tests/test_math_accuracy.py), so they are called lane by
    lane (the scalar builtins keep the documented ulps)."""

    @classmethod
    def runtime(cls) -> TargetRuntime:
        from einc.runtime import opencl

        return opencl

    @classmethod
    def load(cls, source: str, manifest: LaunchManifest) -> Runner:
        from einc.runtime.opencl import load_opencl_kernel

        return load_opencl_kernel(source, manifest)
