"""The CUDA target: `extern "C" __global__` kernels for NVRTC (no headers needed).

NVRTC sees no C library headers: types are spelled as built-ins (`long long`), limits and
infinities as literals, and halves are `unsigned short` storage converted with PTX `cvt`
(`legalize-f16-storage` computes them in float). Compile-checked for sm_80 / sm_90; it runs
where a GPU and driver are present.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from typing import ClassVar

from xdsl.dialects import func
from xdsl.dialects.builtin import AnyFloat, IndexType, MemRefType, bf16, f16, f32, f64, i1, i8, i16, i32, i64
from xdsl.ir import Operation

from einc.dialects import egpu
from einc.runtime.manifest import LaunchManifest
from einc.targets.bfloat16 import Bf16Spelling
from einc.targets.descriptions import ALL_DTYPES, SHUFFLED, TargetDescription
from einc.targets.clike import CompileCheck
from einc.targets import tensor_cores as tc
from einc.targets.gpu import ALIGNED_VECTOR_HELPERS, DeviceTarget, Runner, TargetRuntime, narrow_lane_conversion
from einc.targets.op_printers import statement
from einc.targets.writer import Writer

_AXES = "xyz"


class CudaFamily(DeviceTarget):
    """What CUDA and HIP share: the `__global__` kernel shape, `__syncthreads`, `__shared__`
    arrays, device helpers, the built-in index names, warp-shuffle cluster reductions, and a
    compile check by the vendor's compiler against a register file of 64 K registers."""
    bf16_spelling = Bf16Spelling("unsigned short", "unsigned int", "__float_as_uint(f)", "__uint_as_float(u)")

    kernel_prefix: ClassVar[str] = 'extern "C" __global__ '
    buffer_prefix: ClassVar[str] = ""
    buffer_suffix: ClassVar[str] = " __restrict__"
    barrier: ClassVar[str] = "__syncthreads();"
    shared_decl: ClassVar[str] = "__shared__ {t} {name}[{n}] __attribute__((aligned(16)));"
    """Aligned to 16 bytes: `egpu.vload`s marked aligned (`einc-vectorize-shared-loads`) read
    them with 128-bit loads."""
    packed_narrow_access = True
    narrow_lane_conversion = narrow_lane_conversion
    aligned_vector_load: ClassVar[str] = "einc_vloada_{s}x{n}({p})"
    aligned_vector_store: ClassVar[str] = "einc_vstorea_{s}x{n}({p}, {v});"
    vector_helpers: ClassVar[Mapping[str, str]] = {**DeviceTarget.vector_helpers, **ALIGNED_VECTOR_HELPERS}
    private_array: ClassVar[str] = "{t} {name}[{n}];"  # registers, or local memory
    helper_prefix: ClassVar[str] = "static __device__ inline"
    reserved_words: ClassVar[frozenset[str]] = frozenset({"threadIdx", "blockIdx", "blockDim", "gridDim", "warpSize"})
    subgroup_reduce = {k: "einc_warp_{kind}_{s}({0}, {n})" for k in egpu.ReduceKind}
    subgroup_clusters: ClassVar[bool] = True
    subgroup_lanes: ClassVar[str] = "warpSize"
    torch_device: ClassVar[str] = "cuda"  # ROCm builds of torch call their devices `cuda` too
    lexer: ClassVar[str] = "cuda"

    @classmethod
    def signature(cls, w: Writer, f: func.FuncOp, params: Sequence[str]) -> str:
        """`__launch_bounds__(threads per block)` before the kernel's name: the compiler may
        then give each thread the registers the block leaves (hipcc assumes 1024 threads and
        caps a thread at 128 VGPRs otherwise: an 8x8 register tile spills)."""
        header = super().signature(w, f, params)
        if not isinstance(f, egpu.FuncOp):
            return header
        name = f.sym_name.data
        return header.replace(f"void {name}(", f"void __launch_bounds__({math.prod(f.block_size)}) {name}(", 1)


_CP_ASYNC_UNITS = {4: "unsigned int", 8: "unsigned long long", 16: "uint4"}

_CP_ASYNC = """{p} void einc_cp_async_{n}(void* d, const void* s) {{
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  asm volatile("cp.async.ca.shared.global [%0], [%1], {n};" :: "r"((unsigned int)__cvta_generic_to_shared(d)), "l"(s) : "memory");
#else
  *({u}*)d = *(const {u}*)s;
#endif
}}"""
"""One element (or an aligned vector of them) copied global -> shared without waiting (sm_80+: `cp.async`; older
architectures: a plain copy, complete at once)."""

_CP_ASYNC_WAIT = """{p} void einc_cp_async_wait() {{
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  asm volatile("cp.async.commit_group;" ::: "memory");
  asm volatile("cp.async.wait_group 0;" ::: "memory");
#endif
}}"""


def _copy_async(w: Writer, op: Operation) -> None:
    assert isinstance(op, egpu.CopyAsyncOp)
    memory = op.memref.type
    assert isinstance(memory, MemRefType)
    element = memory.get_element_type()
    n = (element.bitwidth // 8 if isinstance(element, AnyFloat) else getattr(element, "width").data // 8) * op.width
    w.helpers_used.setdefault((f"cp_async_{n}", ""), _CP_ASYNC.format(p=w.t.helper_prefix, n=n, u=_CP_ASYNC_UNITS[n]))
    dst = w.access(op.memref, w.flat_values(op.memref, op.indices))
    src = w.access(op.source, w.flat_values(op.source, op.source_indices))
    w.line(f"einc_cp_async_{n}(&{dst}, &{src});")


def _async_wait(w: Writer, op: Operation) -> None:
    w.helpers_used.setdefault(("cp_async_wait", ""), _CP_ASYNC_WAIT.format(p=w.t.helper_prefix))
    w.line("einc_cp_async_wait();")


def _packed_16bit(op: str, kind: str) -> str:
    """A lane-wise helper's body: pairs of 16-bit lanes (the lower index in the lower half)
    through one packed PTX instruction, rounded to nearest even. float16: `add|sub|mul.rn.f16x2`
    (sm_53+); bfloat16 (sm_80: no add/sub/mul.bf16x2 before sm_90) as exact fused forms:
    a + b = fma(a, 1, b), a - b = fma(b, -1, a), a * b = fma(a, b, -0) (the signed zeros
    as the plain ops give them)."""
    if kind == "f16":
        asm = f'asm("{op}.rn.f16x2 %0, %1, %2;" : "=r"(z) : "r"(x), "r"(y));'
    else:
        asm = {
            "add": 'asm("fma.rn.bf16x2 %0, %1, %2, %3;" : "=r"(z) : "r"(x), "r"(0x3f803f80u), "r"(y));',
            "sub": 'asm("fma.rn.bf16x2 %0, %1, %2, %3;" : "=r"(z) : "r"(y), "r"(0xbf80bf80u), "r"(x));',
            "mul": 'asm("fma.rn.bf16x2 %0, %1, %2, %3;" : "=r"(z) : "r"(x), "r"(y), "r"(0x80008000u));',
        }[op]
    body = (
        "{T} r; for (int k = 0; k < sizeof(r.v) / sizeof(r.v[0]); k += 2) { "
        "unsigned int x = a.v[k] | ((unsigned int)a.v[k + 1] << 16), y = b.v[k] | ((unsigned int)b.v[k + 1] << 16), z; "
        f"{asm} r.v[k] = (unsigned short)z; r.v[k + 1] = (unsigned short)(z >> 16); }} return r;"
    )
    return body.replace("{", "{{").replace("}", "}}").replace("{{T}}", "{T}")


PACKED_16BIT_BODIES = {
    (f"v{op}f", kind, n): _packed_16bit(op, kind) for op in ("add", "sub", "mul") for kind in ("f16", "bf16") for n in (2, 4, 8)
}
"""`arith.addf/subf/mulf` on vectors of 16-bit floats kept as bits (`packed_narrow_arithmetic`)."""


class CUDATarget(CudaFamily):
    name: ClassVar[str] = "cuda"
    tensor_cores = frozenset({"mma.m16n8k16"})
    narrow_shared_tiles = True
    packed_narrow_arithmetic = frozenset({f16, bf16})
    lanewise_bodies = PACKED_16BIT_BODIES
    runtime_device: ClassVar[str | None] = "cuda"
    pipeline: ClassVar[str] = (
        "legalize-f16-for-c,einc-widen-narrow-buffers{target=cuda},legalize-float-to-int,"
        "einc-init-accumulators,convert-affine-to-egpu{target=cuda},einc-pad-shared{target=cuda},"
        "legalize-f16-storage,legalize-bf16-storage,einc-unswitch{when=false},einc-vectorize-loops{target=cuda},einc-vectorize-global{target=cuda},einc-vectorize-shared-loads,einc-async-copies{target=cuda},einc-ldmatrix,canonicalize,cse,einc-index-width"
    )
    limits = TargetDescription(
        "cuda", max_threads_per_block=1024, max_block=(1024, 1024, 64),
        max_grid=(2**31 - 1, 65535, 65535), shared_bytes_per_block=48 * 1024,
        subgroup_size=32, vector_width=4, default_block=256,
        storage_dtypes=ALL_DTYPES, arith_dtypes=ALL_DTYPES - {"float16"},
        subgroup_reduce="clustered", subgroup_reduce_dtypes=SHUFFLED, compute_capability=80,
    )  # fmt: skip
    compile_check = CompileCheck(("sm_80", "sm_90"), 65536, lambda: _checker())
    statement_printers = {
        **CudaFamily.statement_printers, egpu.MmaOp: statement(egpu.MmaOp, tc.mma_sync),
        egpu.CopyAsyncOp: _copy_async, egpu.AsyncWaitOp: _async_wait,
    }  # fmt: skip
    memory_ops = (*DeviceTarget.memory_ops, egpu.CopyAsyncOp, egpu.AsyncWaitOp)
    index_type: ClassVar[str] = "long long"
    work_item_index = {
        **{f"block_id.{d}": f"(long long)blockIdx.{d}" for d in _AXES},
        **{f"thread_id.{d}": f"(long long)threadIdx.{d}" for d in _AXES},
        **{f"global_id.{d}": f"((long long)blockIdx.{d} * blockDim.{d} + threadIdx.{d})"
           for d in _AXES},
        **{f"block_dim.{d}": f"(long long)blockDim.{d}" for d in _AXES},
        **{f"grid_dim.{d}": f"(long long)gridDim.{d}" for d in _AXES},
    }  # fmt: skip
    work_item_index_32 = {
        **{f"block_id.{d}": f"(int)blockIdx.{d}" for d in _AXES},
        **{f"thread_id.{d}": f"(int)threadIdx.{d}" for d in _AXES},
        **{f"global_id.{d}": f"(int)(blockIdx.{d} * blockDim.{d} + threadIdx.{d})" for d in _AXES},
        **{f"block_dim.{d}": f"(int)blockDim.{d}" for d in _AXES},
        **{f"grid_dim.{d}": f"(int)gridDim.{d}" for d in _AXES},
    }
    types = {
        f64: "double", f32: "float", f16: "unsigned short", bf16: "unsigned short",
        i64: "long long", i32: "int", i16: "short", i8: "signed char", i1: "bool",
        IndexType(): "long long",
    }  # fmt: skip
    unsigned_types = {
        i64: "unsigned long long", i32: "unsigned int", i16: "unsigned short",
        i8: "unsigned char", i1: "bool", IndexType(): "unsigned long long",
    }  # fmt: skip
    literal_names = {
        "INT64_MIN": "(-9223372036854775807LL - 1)", "INT64_MAX": "9223372036854775807LL",
        "INT32_MIN": "(-2147483647 - 1)", "INT32_MAX": "2147483647",
        "INT16_MIN": "(-32767 - 1)", "INT16_MAX": "32767", "INT8_MIN": "(-127 - 1)",
        "INFINITY": "__int_as_float(0x7f800000)", "NAN": "__int_as_float(0x7fc00000)",
    }  # fmt: skip
    half_support: ClassVar[str] = (
        "{p} float einc_half_to_float(unsigned short h) "
        '{{ float f; asm("cvt.f32.f16 %0, %1;" : "=f"(f) : "h"(h)); return f; }}\n'
        "{p} unsigned short einc_float_to_half(float f) "
        '{{ unsigned short h; asm("cvt.rn.f16.f32 %0, %1;" : "=h"(h) : "f"(f)); return h; }}'
    )
    load_extf: ClassVar[str] = "einc_half_to_float({buf}[{i}])"
    store_truncf: ClassVar[str] = "{buf}[{i}] = einc_float_to_half({v})"
    round_f16: ClassVar[str] = "return einc_half_to_float(einc_float_to_half(a));"
    # clusters of w lanes (a power of two, w <= 32) of consecutive linear thread ids: the
    # mask names the lanes of this thread's cluster, the shuffles stay inside it
    subgroup_helper: ClassVar[str] = (
        "{p} {t} einc_warp_{kind}_{s}({t} a, int w) {{ "
        "unsigned lane = (threadIdx.x + blockDim.x * (threadIdx.y + blockDim.y * threadIdx.z)) & 31u; "
        "unsigned m = w == 32 ? 0xffffffffu : ((1u << w) - 1u) << (lane & ~(unsigned)(w - 1)); "
        "for (int o = w / 2; o > 0; o >>= 1) "
        "{{ {t} b = __shfl_xor_sync(m, a, o, w); a = {combine}; }} return a; }}"
    )

    @classmethod
    def cannot_run(cls) -> str | None:
        """CUDA source runs on an NVIDIA GPU (NVRTC alone compiles it)."""
        from einc.runtime.cuda import gpu_check

        ok, why = gpu_check()
        return None if ok else f"CUDA source runs on an NVIDIA GPU, none here ({why.split(' (')[0]})"

    @classmethod
    def hardware_checks(cls) -> Mapping[str, Callable[[], tuple[bool, str]]]:
        from einc.runtime.cuda import gpu_check

        return {"cuda-gpu": gpu_check}

    @classmethod
    def runtime(cls) -> TargetRuntime:
        from einc.runtime import cuda

        return cuda

    @classmethod
    def load(cls, source: str, manifest: LaunchManifest) -> Runner:
        """Runs where an NVIDIA GPU and driver are (TargetError elsewhere); compile checks
        everywhere: `einc.runtime.cuda.compile_check_cuda(source, manifest, arch)`."""
        from einc.runtime.cuda import load_cuda_kernel

        return load_cuda_kernel(source, manifest)


def _checker():
    from einc.runtime.cuda import compile_check_cuda

    return compile_check_cuda
