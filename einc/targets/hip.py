"""The HIP target: CUDA's kernel shape for AMD GPUs (`hipcc --genco`), with the C library.

`hip_runtime.h` brings `<stdint.h>` and `<math.h>`, so C's type and literal spellings stand;
`_Float16` is a native storage type (its arithmetic is computed in float, as in C). Waves
are 64 lanes on CDNA (gfx90a) and 32 on RDNA (gfx1030): warp reductions use `warpSize`.
Compile-checked for gfx90a and gfx1030.
"""

from __future__ import annotations

from typing import ClassVar

from xdsl.dialects.builtin import ModuleOp

from einc.targets.cuda import CUDATarget
from einc.targets.gpu import DeviceTarget, Runner

_AXES = "xyz"


class HIPTarget(DeviceTarget):
    name: ClassVar[str] = "hip"
    pipeline: ClassVar[str] = (
        "convert-ein-to-affine,legalize-f16-for-c,legalize-float-to-int,"
        "convert-affine-to-egpu{target=hip},"
        "einc-vectorize-loops{target=hip},canonicalize,cse"
    )
    includes: ClassVar[tuple[str, ...]] = ("hip/hip_runtime.h",)
    kernel_prefix: ClassVar[str] = CUDATarget.kernel_prefix
    buffer_prefix: ClassVar[str] = ""
    buffer_suffix: ClassVar[str] = " __restrict__"
    index_type: ClassVar[str] = "int64_t"
    barrier: ClassVar[str] = CUDATarget.barrier
    shared_decl: ClassVar[str] = CUDATarget.shared_decl
    private_array: ClassVar[str] = CUDATarget.private_array
    helper_prefix: ClassVar[str] = CUDATarget.helper_prefix
    reserved_words: ClassVar[frozenset[str]] = CUDATarget.reserved_words
    work_item_index = {
        **{f"block_id.{d}": f"(int64_t)blockIdx.{d}" for d in _AXES},
        **{f"thread_id.{d}": f"(int64_t)threadIdx.{d}" for d in _AXES},
        **{f"global_id.{d}": f"((int64_t)blockIdx.{d} * blockDim.{d} + threadIdx.{d})"
           for d in _AXES},
        **{f"block_dim.{d}": f"(int64_t)blockDim.{d}" for d in _AXES},
        **{f"grid_dim.{d}": f"(int64_t)gridDim.{d}" for d in _AXES},
    }  # fmt: skip
    # wavefronts of 64 (gfx90a) or 32 (gfx1030) lanes: `warpSize` at run time; a cluster of
    # w lanes shuffles within its aligned w-lane segment
    subgroup_reduce = CUDATarget.subgroup_reduce
    subgroup_clusters: ClassVar[bool] = True
    subgroup_lanes: ClassVar[str] = "warpSize"
    subgroup_helper: ClassVar[str] = (
        "{p} {t} einc_warp_{kind}_{s}({t} a, int w) {{ for (int o = w / 2; o > 0; o >>= 1) "
        "{{ {t} b = __shfl_xor(a, o, w); a = {combine}; }} return a; }}"
    )
    archs: ClassVar[tuple[str, ...]] = ("gfx90a", "gfx1030")

    @classmethod
    def build(cls, source: str, module: ModuleOp) -> Runner:
        """No AMD GPU executor: TargetError; compile checks with
        `einc.runtime.hip.compile_check_hip(source, manifest, arch)`."""
        from einc.runtime.hip import load_hip_kernel

        return load_hip_kernel(source, cls.manifest(module))  # type: ignore[return-value]
