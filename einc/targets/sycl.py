"""The SYCL target: free-function nd-range kernels for the oneAPI kernel_compiler extension.

    extern "C" SYCL_EXT_ONEAPI_FUNCTION_PROPERTY((syclexp::nd_range_kernel<3>))
    void kernel_y(const float* x, float* y) {
      int64_t N = syclext::this_work_item::get_nd_item<3>().get_global_id(2);
      ...

Manifest x is SYCL dimension 2 (the fastest), as the runtime launches `nd_range<3>` with
reversed extents. Math is SYCL's overloaded built-ins (`sycl::exp`); halves are
`sycl::half` in memory and computed in float (`legalize-f16-for-c`). Work-group memory is
`syclexp::work_group_static<T[N]>`.
"""

from __future__ import annotations

import dataclasses
from typing import ClassVar

from xdsl.dialects import math as mathd
from xdsl.dialects.builtin import f16, f32, f64

from einc.runtime.manifest import LaunchManifest
from einc.targets.bfloat16 import CXX_BF16
from einc.targets.descriptions import ALL_DTYPES, TargetDescription
from einc.targets.clike import CLikeTarget
from einc.targets.spelling import call
from einc.targets.writer import CALLEE
from einc.targets.cuda import CUDATarget
from einc.targets.gpu import DeviceTarget, Runner, TargetRuntime

_ITEM = "syclext::this_work_item::get_nd_item<3>()"
_DIMS = {"x": 2, "y": 1, "z": 0}


class SYCLTarget(DeviceTarget):
    name: ClassVar[str] = "sycl"
    lexer: ClassVar[str] = "cpp"
    runtime_device: ClassVar[str | None] = "sycl"
    pipeline: ClassVar[str] = (
        "legalize-f16-for-c,einc-widen-narrow-buffers{target=sycl},legalize-float-to-int,"
        "einc-init-accumulators,convert-affine-to-egpu{target=sycl},einc-pad-shared{target=sycl},"
        "legalize-bf16-storage,einc-unswitch{when=false},einc-vectorize-loops{target=sycl},einc-vectorize-global{target=sycl},einc-vectorize-shared-loads,canonicalize,cse,einc-index-width"
    )
    limits = TargetDescription(
        "sycl", max_threads_per_block=8192, max_block=(8192, 8192, 8192),
        max_grid=(2**31 - 1, 2**31 - 1, 2**31 - 1), shared_bytes_per_block=256 * 1024,
        subgroup_size=8, vector_width=16, default_block=64,
        storage_dtypes=ALL_DTYPES, arith_dtypes=ALL_DTYPES - {"float16"}, shared_on_chip=False,
        items_vectorized=True, loop_barriers=True,
    )  # fmt: skip
    includes: ClassVar[tuple[str, ...]] = (
        "cstdint", "limits", "sycl/builtins.hpp", "sycl/group_barrier.hpp", "sycl/half_type.hpp",
        "sycl/ext/oneapi/free_function_queries.hpp", "sycl/ext/oneapi/free_function_kernel_properties.hpp",
        "sycl/ext/oneapi/work_group_static.hpp",
    )
    """What the printed code uses, not all of `sycl/sycl.hpp`: the runtime compiler parses these
    in about a sixth of the time (0.24 s against 1.4 s of CPU for a small kernel)."""
    preamble: ClassVar[tuple[str, ...]] = (
        "namespace syclext = sycl::ext::oneapi;",
        "namespace syclexp = sycl::ext::oneapi::experimental;",
    )
    kernel_prefix: ClassVar[str] = (
        'extern "C" SYCL_EXT_ONEAPI_FUNCTION_PROPERTY((syclexp::nd_range_kernel<3>))\n'
    )
    buffer_prefix: ClassVar[str] = ""
    buffer_suffix: ClassVar[str] = ""
    index_type: ClassVar[str] = "int64_t"
    barrier: ClassVar[str] = "sycl::group_barrier(syclext::this_work_item::get_work_group<3>());"
    barrier_loop_pragma: ClassVar[str | None] = "#pragma clang loop unroll(disable)"
    """Intel's runtime compiler (intel-sycl-rt 2026.2, its default -O2) miscompiles some loops
    holding a `group_barrier` when it unrolls them: a work-item's stores to a
    `work_group_static` array written at an outer loop's index are lost (one work-item, two
    nested loops of 5 and 3 trips around copy-in, barrier, `s[i] += 1`, barrier, copy-out
    return zeros; `-fno-unroll-loops`, or this pragma on the loops holding the barriers and on
    the copy loops inside them, makes it right; on the barrier loops alone it does not: see
    tests/test_opencl_isolation.py). So the device compiler unrolls no loop that holds a
    barrier or lies inside one that does (einc's own `unroll` transform still unrolls what a
    schedule asks; loops outside, such as a reduction's accumulation loop before its barrier
    tree, keep the device compiler's unrolling)."""
    shared_decl: ClassVar[str] = "syclexp::work_group_static<{t}[{n}]> {name};"
    private_array: ClassVar[str] = "{t} {name}[{n}];"
    work_item_index = {
        **{f"block_id.{d}": f"(int64_t){_ITEM}.get_group({k})" for d, k in _DIMS.items()},
        **{f"thread_id.{d}": f"(int64_t){_ITEM}.get_local_id({k})" for d, k in _DIMS.items()},
        **{f"global_id.{d}": f"(int64_t){_ITEM}.get_global_id({k})" for d, k in _DIMS.items()},
        **{f"block_dim.{d}": f"(int64_t){_ITEM}.get_local_range({k})" for d, k in _DIMS.items()},
        **{f"grid_dim.{d}": f"(int64_t){_ITEM}.get_group_range({k})" for d, k in _DIMS.items()},
    }
    work_item_index_32 = {k: "(int)" + v.removeprefix("(int64_t)") for k, v in work_item_index.items()}
    types = {**CLikeTarget.types, f16: "sycl::half"}
    bf16_spelling = CXX_BF16
    literal_names = {
        **{k: v for k, v in CUDATarget.literal_names.items() if k.startswith("INT")},
        "INFINITY": "std::numeric_limits<float>::infinity()",
        "NAN": "std::numeric_limits<float>::quiet_NaN()",
    }
    """The runtime compiler's preprocessor sees no C headers' macros."""
    literal_cast = {f16: "(sycl::half)"}
    math_suffix = {f64: "", f32: ""}
    literal_suffix = {f64: "", f32: "f"}
    ops = {
        **{op: dataclasses.replace(s, fmt="sycl::" + s.fmt) if CALLEE.match(s.fmt) else s
           for op, s in CLikeTarget.ops.items()},
        mathd.RsqrtOp: call("sycl::rsqrt"),
    }  # fmt: skip
    """C's math functions as SYCL's overloaded built-ins (`sycl::exp`, `sycl::fmax`)."""

    @classmethod
    def runtime(cls) -> TargetRuntime:
        from einc.runtime import sycl

        return sycl

    @classmethod
    def load(cls, source: str, manifest: LaunchManifest) -> Runner:
        from einc.runtime.sycl import load_sycl_kernel

        return load_sycl_kernel(source, manifest)
