"""What a device target can launch and compute: limits and supported dtypes. The class is
here; each target's own numbers are its class's `limits` (einc/targets/<t>.py).

The mapping pass (`convert-affine-to-egpu{target=T}`) picks its default work-group size from
here, and `check_launch` refuses, with a TargetError and before any code is generated, a
kernel whose launch shape or work-group memory breaks a limit. The legalization passes read
`storage_dtypes` / `arith_dtypes` to decide what to widen.

The numbers are those of the device each target is checked on (PoCL on the CPU, lavapipe,
Intel's OpenCL CPU device) or of the architectures it is compile-checked for (CUDA sm_80 /
sm_90, HIP gfx90a / gfx1030), taking the smaller where two differ; the Poplar numbers are
the Mk2 IPU's (a block is one MultiVertex of six workers, the grid 1: einc/targets/poplar.py
spreads a kernel's points over up to 1472 such vertices, one per tile).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from xdsl.ir import Attribute

from einc.errors import SourceLocation, TargetError

ALL_DTYPES = frozenset(
    {"float64", "float32", "float16", "bfloat16", "int64", "int32", "int16", "int8", "bool"}
)


@dataclass(frozen=True)
class TargetDescription:
    name: str
    max_threads_per_block: int
    max_block: tuple[int, int, int]
    """Largest work-group size per dimension (x, y, z)."""
    max_grid: tuple[int, int, int]
    """Largest number of work-groups per dimension."""
    shared_bytes_per_block: int
    subgroup_size: int
    """Threads of a warp / subgroup / wave (the smallest the target may pick)."""
    vector_width: int
    """float32 lanes of the widest native vector the printers use."""
    default_block: int
    """Work-items per work-group of the default (unscheduled) mapping."""
    storage_dtypes: frozenset[str]
    """Element types a device buffer may have."""
    arith_dtypes: frozenset[str]
    """Types the device computes in (others are computed in a wider type)."""
    subgroup_reduce: str = ""
    """Which `egpu.subgroup_reduce` convert-affine-to-egpu may use for a reduction bound to
    threads: "clustered" (any power-of-two cluster of lanes up to `subgroup_size`: warp
    shuffles), "" (none: the partials combine in shared memory). Not HLSL: lavapipe's wave
    may be 4 lanes, and naga (wgpu 0.32) panicked on WaveActiveSum of a loop's result."""
    subgroup_reduce_dtypes: frozenset[str] = frozenset()
    """Element types `egpu.subgroup_reduce` may have on this target."""
    write_granule: int = 1
    """Bytes a store writes at least (the IPU writes 32-bit words): threads of one block must
    not write narrower neighbouring elements concurrently."""
    tiles: int = 1
    """Processors a launch's work may be spread over (the IPU's tiles, each running one
    block's worth of workers); 1 where the grid covers that."""
    tile_memory: int = 0
    """Bytes of memory one tile has for a vertex's data (the IPU's per-tile SRAM); 0 where
    the target has no tiles to check."""
    dtype_notes: tuple[tuple[str, str], ...] = ()
    """Why a dtype is missing, for the refusal's message: (dtype, reason) pairs."""
    compute_capability: int = 0
    """NVIDIA's architecture the code is compiled for at least, as 10 * major + minor (80:
    sm_80, whose `cp.async` `einc-async-copies` uses); 0 for the other targets."""
    shared_banks: int = 32
    """Banks of 4-byte words shared memory is split into (32 on NVIDIA and AMD GPUs; the
    CPU devices here have none, the number is what `einc-pad-shared` pads for)."""
    private_memory: int = 64 * 1024
    """Bytes of local arrays (`memref.alloca`: staged tiles, compute_at boxes) one work-item
    of a kernel may hold: registers first, then the device's per-thread stack (CUDA/HIP
    local memory, SPIR-V Function storage). Beyond a few hundred bytes they spill."""

    shared_on_chip: bool = True
    """Whether work-group (shared) memory is on-chip memory that staging a reused tile in pays
    for (a GPU's shared memory / LDS). False for the CPU runtimes the OpenCL, SYCL and HLSL
    targets are checked on (PoCL, Intel's OpenCL CPU runtime, lavapipe): there it is ordinary
    cached memory, and each barrier splits the work-group's work-item loop, so the register
    tile of every work-item is spilled across it (MatMul 256^3, a 64x64 tile with 8x8 registers
    per work-item, both inputs staged against none: lavapipe 1.3 against 5.7 GFLOP/s, SYCL 2.2
    against 7.2; shared machine). The default device schedules stage inputs in shared memory
    and share reductions across work-items only where it is True
    (einc/schedule/policies/gpu.py)."""

    items_vectorized: bool = False
    """Whether the runtime runs a work-group's work-items as the lanes of vectors (Intel's SYCL
    CPU runtime: consecutive work-items along x are the lanes of one SIMD instruction, their
    consecutive elements one vector load). The default device schedule then gives a two-axis
    contraction a work-item per output column (`Variant.columns` in
    einc/schedule/policies/gpu.py: MatMul 512^3 on the SYCL CPU device went from 0.18x to
    0.96x the best hand schedule, benchmarks/device_kernels.py, README). Not PoCL: its
    work-item loop vectorizes only where work-items run no loop of their own, and its fastest
    matmul is the 8x8 register tile (the 256x128/16x1 one-column hand schedule 0.07x it);
    nor lavapipe (HLSL), where the 128x64/8x1 one is 0.28x it (MatMul 512^3, shared machine,
    benchmarks/device_kernels.py --trials 0). The performance model reads it too: on a CPU
    device it counts such a runtime's kernels with work-items as lanes where they have no vectors
    of their own and contiguous accesses (einc/perfmodel/model.py)."""

    loop_barriers: bool = False
    """Whether a work-group barrier costs a split of the work-group's loop over its work-items,
    made when the kernel is compiled (PoCL; Intel's OpenCL/SYCL CPU runtime), not a switch
    between coroutines at run time (lavapipe: llvmpipe runs a work-group's lanes as
    coroutines that each barrier suspends and resumes). Where it is True the default device
    schedule shares a row reduction across work-items on a device whose shared memory is
    ordinary memory (einc/schedule/policies/gpu.py `shares_reductions`: Softmax and ReduceSum
    1024x1024 on PoCL and SYCL, benchmarks/device_kernels.py); on lavapipe a row per
    work-item stays the faster (Softmax 1024x1024: the 32- to 256-work-item hand schedules
    0.4-0.8x it, a loaded machine)."""

    def stores(self, dtype: str) -> bool:
        """Whether a buffer of `dtype` can live on the device (narrow ones are widened)."""
        if dtype in self.storage_dtypes:
            return True
        wide = "float32" if "float" in dtype else "int32"
        return _BITS[dtype] < 32 and wide in self.storage_dtypes

    def computes(self, dtype: str) -> bool:
        """Whether values of `dtype` can be computed (in it or in a wider type of its kind)."""
        return any(
            _kind(d) == _kind(dtype) and _BITS[d] >= _BITS[dtype] for d in self.arith_dtypes
        )

    def refuse_dtype(self, dtype: str, what: str, loc: SourceLocation | None) -> TargetError:
        """The TargetError for a tensor (`what` = "tensor 'x'") or a value of a dtype this
        target lacks."""
        note = dict(self.dtype_notes).get(dtype)
        if what.startswith("tensor"):
            why = f"the {self.name} target cannot store {dtype} buffers"
        else:
            short = "bf16" if dtype == "bfloat16" else f"{dtype[0]}{_BITS[dtype]}"
            why = f"the {self.name} target has no type for {short}"
        message = f"{self.name} target: {dtype} {what} is not supported ({why}"
        return TargetError(message + (f": {note})" if note else ")"), loc)

    def check_launch(
        self, kernel: str, grid: tuple[int, ...], block: tuple[int, ...], shared_bytes: int = 0,
        private_bytes: int = 0, loc: SourceLocation | None = None, tensor: str | None = None,
        origin: Attribute | None = None,
    ) -> None:
        """Raise TargetError if the launch of `kernel` breaks a limit of this target (at
        `loc` when given: the schedule op that made the kernel's largest local array; else a
        KernelError naming `tensor`, the kernel's output, when given, and carrying `origin`,
        the kernel's location)."""
        problems = []
        threads = math.prod(block)
        if threads > self.max_threads_per_block:
            problems.append(
                f"{threads} threads per block (at most {self.max_threads_per_block})"
            )
        for axis, size, limit in zip("xyz", block, self.max_block):
            if size > limit:
                problems.append(f"block size {size} in {axis} (at most {limit})")
        for axis, size, limit in zip("xyz", grid, self.max_grid):
            if size > limit:
                problems.append(f"grid size {size} in {axis} (at most {limit})")
        if shared_bytes > self.shared_bytes_per_block:
            problems.append(
                f"{shared_bytes} bytes of shared memory (at most {self.shared_bytes_per_block})"
            )
        if private_bytes > self.private_memory:
            problems.append(
                f"{private_bytes} bytes of local arrays per work-item (at most {self.private_memory})"
            )
        if problems:
            message = f"{self.name} target: kernel {kernel} cannot be launched: " + "; ".join(problems)
            if loc is None and (tensor is not None or origin is not None):
                raise KernelError(message, SourceLocation("<target>", 1, 1), tensor, origin)
            raise TargetError(message, loc or SourceLocation("<target>", 1, 1))


class KernelError(TargetError):
    """A limit of the target a lowered kernel breaks, when no schedule op is responsible: at
    the kernel's location `origin` (an xDSL location: its statement, with a note at each
    schedule op that made its loops) when it has one; else at `loc` (`<target>:1:1`), and
    the driver places it at the statement writing `tensor`, the kernel's output."""

    def __init__(self, message: str, loc: SourceLocation, tensor: str | None, origin: Attribute | None = None):
        from einc.ir.locations import at_op

        located, notes = at_op(origin) if origin is not None else (None, ())
        super().__init__(message, located or loc, notes)
        self.tensor = tensor
        self.origin = origin


_BITS = {"float64": 64, "float32": 32, "float16": 16, "bfloat16": 16, "int64": 64, "int32": 32, "int16": 16,
         "int8": 8, "bool": 8}  # fmt: skip


def _kind(dtype: str) -> str:
    """"float" (bfloat16 included), "int" or "bool"."""
    return "float" if "float" in dtype else dtype.rstrip("0123456789")


_NO_NARROW = frozenset({"float64", "float32", "int64", "int32"})
GLSLANG_HLSL = frozenset({"float64", "float32", "int64", "int32"})  # int64 as uint64_t
SHUFFLED = frozenset({"float64", "float32", "int64", "int32"})  # CUDA/HIP warp shuffles
