"""The HIP target: CUDA's kernel shape for AMD GPUs (`hipcc --genco`), with the C library.

`hip_runtime.h` brings `<stdint.h>` and `<math.h>`, so C's type and literal spellings stand;
`_Float16` is a native storage type (its arithmetic is computed in float, as in C; a packed
elementwise loop of adds, subs and muls each rounded to float16 computes in clang's half
vectors: gfx90a's `v_pk_add_f16`/`v_pk_mul_f16`, einc.transforms.narrow_access). Waves
are 64 lanes on CDNA (gfx90a) and 32 on RDNA (gfx1030): warp reductions use `warpSize`.
Compile-checked for gfx90a and gfx1030.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import ClassVar

from xdsl.dialects import arith, func
from xdsl.dialects.builtin import AnyFloat, MemRefType, VectorType, f16
from xdsl.ir import Operation

from einc.dialects import egpu
from einc.runtime.manifest import LaunchManifest
from einc.targets import tensor_cores as tc
from einc.targets.op_printers import statement
from einc.targets.descriptions import ALL_DTYPES, SHUFFLED, TargetDescription
from einc.targets.clike import CompileCheck
from einc.targets.cuda import CUDATarget, CudaFamily
from einc.targets.gpu import Runner, TargetRuntime
from einc.targets.writer import Writer

_AXES = "xyz"


_COPY_UNITS = {8: "uint2", 16: "uint4"}

CONTRACTION_OFF = "#pragma clang fp contract(off)"


def _plain_copy(w: Writer, op: Operation) -> None:
    """`egpu.copy_async` of a vector pair (`plain_vector_copies`): one plain copy of its
    8 or 16 bytes (both addresses aligned to it: `einc-vectorize-global`)."""
    assert isinstance(op, egpu.CopyAsyncOp)
    memory = op.memref.type
    assert isinstance(memory, MemRefType)
    element = memory.get_element_type()
    n = (element.bitwidth // 8 if isinstance(element, AnyFloat) else getattr(element, "width").data // 8) * op.width
    dst = w.access(op.memref, w.flat_values(op.memref, op.indices))
    src = w.access(op.source, w.flat_values(op.source, op.source_indices))
    w.line(f"*({_COPY_UNITS[n]}*)&{dst} = *(const {_COPY_UNITS[n]}*)&{src};")


def _no_wait(w: Writer, op: Operation) -> None:
    """The copies above were plain ones: complete already."""


def _packed_f16(op: str, n: int) -> str:
    """A lane-wise helper's body: the `_Float16` lanes in pairs through clang's two-lane
    half vectors, one packed instruction per pair on CDNA (gfx90a: `v_pk_add_f16`,
    `v_pk_mul_f16`; a subtraction `v_pk_add_f16` of the negation), rounded to nearest
    even. Contraction off: HIP's default `-ffp-contract=fast` would fuse a helper's
    product into the next helper's sum (one rounding instead of the language's two)."""
    sign = {"add": "+", "sub": "-", "mul": "*"}[op]
    return (
        f"\n{CONTRACTION_OFF}\n"
        "typedef _Float16 einc_h2 __attribute__((ext_vector_type(2))); {T} r; "
        f"for (int k = 0; k < {n}; k += 2) {{{{ einc_h2 x = {{{{a.v[k], a.v[k + 1]}}}}, y = {{{{b.v[k], b.v[k + 1]}}}}; "
        f"einc_h2 z = x {sign} y; r.v[k] = z.x; r.v[k + 1] = z.y; }}}} return r;"
    )


PACKED_F16_BODIES = {(f"v{op}f", "f16", n): _packed_f16(op, n) for op in ("add", "sub", "mul") for n in (2, 4, 8)}
"""`arith.addf/subf/mulf` on vectors of `_Float16` (`packed_narrow_arithmetic`): gfx90a
has packed float16 instructions, no packed bfloat16 arithmetic (bfloat16 keeps float32
lanes)."""


def _rounds_a_product_to_f16(f: func.FuncOp) -> bool:
    """Whether `f` rounds a float32 product to float16 (`(_Float16)(a * b)`, a lane of one
    included), the rounding the language puts between a float16 product and the sum it
    feeds."""
    for op in f.walk():
        if isinstance(op, arith.TruncFOp) and isinstance(op.input.owner, arith.MulfOp):
            out = op.result.type
            if (out.element_type if isinstance(out, VectorType) else out) == f16:
                return True
    return False


class HIPTarget(CudaFamily):
    tensor_cores = frozenset({"mfma.16x16x16"})
    narrow_shared_tiles = True
    plain_vector_copies = True
    packed_narrow_arithmetic = frozenset({f16})
    mma_k_contiguous = True
    lanewise_bodies = PACKED_F16_BODIES
    statement_printers = {
        **CudaFamily.statement_printers, egpu.MmaOp: statement(egpu.MmaOp, tc.mfma),
        egpu.CopyAsyncOp: _plain_copy, egpu.AsyncWaitOp: _no_wait,
    }  # fmt: skip
    memory_ops = (*CudaFamily.memory_ops, egpu.CopyAsyncOp, egpu.AsyncWaitOp)
    name: ClassVar[str] = "hip"
    pipeline: ClassVar[str] = (
        "legalize-f16-for-c,einc-widen-narrow-buffers{target=hip},legalize-float-to-int,"
        "einc-init-accumulators,convert-affine-to-egpu{target=hip},einc-pad-shared{target=hip},"
        "legalize-bf16-storage,einc-unswitch{when=false},einc-vectorize-loops{target=hip},einc-vectorize-global{target=hip},einc-vectorize-shared-loads,einc-async-copies{target=hip},einc-ldmatrix,canonicalize,cse,einc-index-width"
    )
    limits = TargetDescription(
        "hip", max_threads_per_block=1024, max_block=(1024, 1024, 1024),
        max_grid=(2**31 - 1, 65535, 65535), shared_bytes_per_block=64 * 1024,
        subgroup_size=32, vector_width=4, default_block=256,
        storage_dtypes=ALL_DTYPES, arith_dtypes=ALL_DTYPES - {"float16"},
        subgroup_reduce="clustered", subgroup_reduce_dtypes=SHUFFLED,
    )  # fmt: skip
    compile_check = CompileCheck(("gfx90a", "gfx1030"), 65536, lambda: _checker())
    includes: ClassVar[tuple[str, ...]] = ("hip/hip_runtime.h",)
    index_type: ClassVar[str] = "int64_t"
    work_item_index = {
        **{f"block_id.{d}": f"(int64_t)blockIdx.{d}" for d in _AXES},
        **{f"thread_id.{d}": f"(int64_t)threadIdx.{d}" for d in _AXES},
        **{f"global_id.{d}": f"((int64_t)blockIdx.{d} * blockDim.{d} + threadIdx.{d})"
           for d in _AXES},
        **{f"block_dim.{d}": f"(int64_t)blockDim.{d}" for d in _AXES},
        **{f"grid_dim.{d}": f"(int64_t)gridDim.{d}" for d in _AXES},
    }  # fmt: skip
    work_item_index_32 = CUDATarget.work_item_index_32
    # wavefronts of 64 (gfx90a) or 32 (gfx1030) lanes: `warpSize` at run time; a cluster of
    # w lanes shuffles within its aligned w-lane segment
    subgroup_helper: ClassVar[str] = (
        "{p} {t} einc_warp_{kind}_{s}({t} a, int w) {{ for (int o = w / 2; o > 0; o >>= 1) "
        "{{ {t} b = __shfl_xor(a, o, w); a = {combine}; }} return a; }}"
    )

    @classmethod
    def body_pragmas(cls, f: func.FuncOp) -> Sequence[str]:
        """Contraction off in a kernel that rounds a product to float16. HIP compiles with
        `-ffp-contract=fast`, and hipcc narrows `(_Float16)((float)a * (float)b)` and the
        rounded sum after it to float16 operations, then fuses the two into `v_fma_f16`
        (`v_pk_fma_f16` where it vectorizes the loop): one rounding where the language
        (docs/LANGUAGE.md, float16) has two, and not the bits of the packed helpers
        (`_packed_f16`) or of the other targets. A kernel with no such product keeps
        float32 contraction (allowed: einc.runtime.c)."""
        return (CONTRACTION_OFF,) if _rounds_a_product_to_f16(f) else ()

    @classmethod
    def cannot_run(cls) -> str | None:
        """HIP source runs on an AMD GPU; hipcc here only compiles it."""
        return "HIP source runs on an AMD GPU, none here (einc check -t hip compile-checks it)"

    @classmethod
    def runtime(cls) -> TargetRuntime:
        from einc.runtime import hip

        return hip

    @classmethod
    def load(cls, source: str, manifest: LaunchManifest) -> Runner:
        """No AMD GPU executor: TargetError; compile checks with
        `einc.runtime.hip.compile_check_hip(source, manifest, arch)`."""
        from einc.runtime.hip import load_hip_kernel

        return load_hip_kernel(source, manifest)


def _checker():
    from einc.runtime.hip import compile_check_hip

    return compile_check_hip
