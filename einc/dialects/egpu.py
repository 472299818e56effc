"""The `egpu` dialect: einc's GPU/SIMD kernels, with assembly formats that read well.

After `convert-affine-to-egpu` a program is a host function launching kernels in order:

    func.func @kernel(%x: memref<64x16xf32> {ein.name = "x"}, %y: memref<64xf32> {...}) {
      egpu.launch @kernel_y(%x, %y) : memref<64x16xf32>, memref<64xf32>
      func.return
    }
    egpu.func @kernel_y(%x: memref<64x16xf32>, %y: memref<64xf32>) grid [1, 1, 1] block [64, 1, 1] {
      %i = egpu.global_id x
      ...
      egpu.return
    }

An `egpu.func` is one kernel: buffer (memref) arguments, a launch shape (`grid` work-groups
of `block` work-items, per dimension x y z) and a body that runs once per work-item. Its
index ops (`egpu.block_id x`, `egpu.thread_id y`, ...) read the work-item's coordinates;
their ranges follow from the launch shape. `egpu.barrier` synchronises a work-group,
`egpu.alloc_shared` is work-group (shared/local) memory, `egpu.subgroup_reduce` reduces over
a warp/subgroup. Vector ops (`egpu.vload`, `egpu.vstore`, `egpu.vbroadcast`, `egpu.vconvert`,
`egpu.vfma`, `egpu.vreduce`, `egpu.vextract`, `egpu.vshuffle`) work on builtin `vector<NxT>` values of a target's vector width
(`einc-vectorize-loops` makes them; elementwise arithmetic on vectors is xDSL's `arith`). `egpu.load_extf`,
`egpu.store_truncf` and `egpu.round` are legalization ops: a narrow float kept only in memory
(f16 on devices without half arithmetic), read widened and written narrowed. `egpu.mma` is a
16 x 16 tile of a float16/bfloat16 contraction on tensor cores, executed by a warp together
(`transform.einc.tensorize`).

This module is the dialect and its namespace (`egpu.FuncOp`, `egpu.Dim`, ...); the ops and
attributes live beside it by noun: `egpu_kernel` (kernels, launches, work-item coordinates,
barriers, shared memory, asynchronous copies, subgroup reductions), `egpu_vector`, `egpu_narrow` (narrow floats),
`egpu_mma` (tensor cores),
`egpu_attrs` (dimensions, reduction kinds, Poplar tile splits).
"""

from __future__ import annotations

from xdsl.ir import Dialect

from einc.dialects.egpu_attrs import (
    Dim,
    DimAttr,
    ReduceKind,
    ReduceKindAttr,
    TileSplit,
    TileSplitAttr,
)
from einc.dialects.egpu_kernel import (
    AllocSharedOp,
    AsyncWaitOp,
    BarrierOp,
    BlockDimOp,
    BlockIdOp,
    CopyAsyncOp,
    FuncOp,
    GlobalIdOp,
    GridDimOp,
    IndexOp,
    LaunchOp,
    PrefetchOp,
    ReturnOp,
    SubgroupReduceOp,
    ThreadIdOp,
    kernel_of,
)
from einc.dialects.egpu_mma import MmaOp
from einc.dialects.egpu_narrow import (
    LoadExtfOp,
    RoundOp,
    StoreTruncfOp,
)
from einc.dialects.egpu_vector import (
    VECTOR_WIDTHS,
    VBroadcastOp,
    VBroadcastRunsOp,
    VLoadRepeatOp,
    VConvertOp,
    VExtractOp,
    VFmaOp,
    VLoadOp,
    VReduceOp,
    VShuffleOp,
    VStoreOp,
)

EGPU = Dialect(
    "egpu",
    [
        FuncOp,
        ReturnOp,
        LaunchOp,
        BlockIdOp,
        ThreadIdOp,
        GlobalIdOp,
        BlockDimOp,
        GridDimOp,
        BarrierOp,
        AllocSharedOp,
        CopyAsyncOp,
        AsyncWaitOp,
        PrefetchOp,
        VLoadOp,
        VStoreOp,
        VBroadcastOp,
        VBroadcastRunsOp,
        VLoadRepeatOp,
        VConvertOp,
        VExtractOp,
        VFmaOp,
        VReduceOp,
        VShuffleOp,
        SubgroupReduceOp,
        LoadExtfOp,
        StoreTruncfOp,
        RoundOp,
        MmaOp,
    ],
    [DimAttr, ReduceKindAttr, TileSplitAttr],
)

__all__ = [
    "EGPU",
    "VECTOR_WIDTHS",
    "AllocSharedOp",
    "AsyncWaitOp",
    "BarrierOp",
    "BlockDimOp",
    "BlockIdOp",
    "CopyAsyncOp",
    "Dim",
    "DimAttr",
    "FuncOp",
    "GlobalIdOp",
    "GridDimOp",
    "PrefetchOp",
    "IndexOp",
    "LaunchOp",
    "LoadExtfOp",
    "MmaOp",
    "ReduceKind",
    "ReduceKindAttr",
    "ReturnOp",
    "RoundOp",
    "StoreTruncfOp",
    "SubgroupReduceOp",
    "ThreadIdOp",
    "TileSplit",
    "TileSplitAttr",
    "VBroadcastOp",
    "VBroadcastRunsOp",
    "VLoadRepeatOp",
    "VConvertOp",
    "VExtractOp",
    "VFmaOp",
    "VLoadOp",
    "VReduceOp",
    "VShuffleOp",
    "VStoreOp",
    "kernel_of",
]
