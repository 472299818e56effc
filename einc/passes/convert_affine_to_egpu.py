"""`convert-affine-to-egpu{target=T}`: every statement of a loop-level program becomes one
device kernel (`egpu.func`), launched in order by the host function (`egpu.launch`).

    affine.for %N = 0 to 64 {            // parallel: each N writes its own temp0[N]
      affine.for %C = 0 to 1024 { ... affine.store %v, %temp0[%N] }
    }
becomes
    egpu.launch @kernel_temp0(%input0, %temp0) : ...
    egpu.func @kernel_temp0(%input0: ..., %temp0: ...) grid [1, 1, 1] block [64, 1, 1] {
      %N = egpu.global_id x
      affine.for %C = 0 to 1024 { ... affine.store %v, %temp0[%N] }
      egpu.return
    }

Without a schedule, the outer parallel (output) loops are flattened onto the global thread
index x in blocks of the target's default size (`block=` overrides it), with a bounds check
when the last block overshoots and a grid-stride loop when the target's grid is too small;
reduction loops stay sequential in each thread, and a reduction's identity fill joins its
kernel. Where the target writes memory in granules wider than an output element (the IPU's
32-bit words), the statement runs in one thread per block, so that no two threads write
neighbouring halves or bytes at once. Loops a schedule bound to work-item coordinates
(`einc.bind = "block.x"`, ...) map directly onto `egpu.block_id` / `egpu.thread_id`; a bind
that cannot be mapped is a ScheduleError at its bind op. A reduction loop bound to a thread
axis becomes a cross-thread reduction: per-thread partials in registers, combined by a
tree in shared memory, or by one `egpu.subgroup_reduce` where the target description has
clustered (warp-shuffle) reductions that fit (`_combine_partials`).
Tiles a schedule staged in shared memory become `egpu.alloc_shared` buffers with a
cooperative copy and barriers, and a kernel whose staged bytes break the target's
`shared_bytes_per_block` is a TargetError. Intermediates stay host allocations (temp
buffers of the launch manifest). The mechanism: `einc.transforms.gpu_mapping` (how
iterations map onto work-items), `outline` (building the kernels), `cross_thread_reduce` and
`shared_staging`.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from xdsl.context import Context
from xdsl.dialects import affine, func, memref
from xdsl.dialects.builtin import ModuleOp, f32, f64, i32, i64
from xdsl.ir import Block
from xdsl.rewriter import InsertPoint, Rewriter

from einc.dialects import egpu
from einc.transforms import gpu_mapping
from einc.transforms.loop_build import describe
from einc.transforms.outline import (
    buffer_name,
    enclose_private_buffers,
    erase_statement,
    host_order,
    outline,
)
from einc.passes.targeted import TargetedPass
from einc.targets.descriptions import TargetDescription


def _written_name(stmt: gpu_mapping.Statement) -> str:
    for op in stmt.main.walk():
        if isinstance(op, affine.StoreOp | memref.StoreOp) and not isinstance(op.memref.owner, memref.AllocaOp):
            name = buffer_name(op.memref)
            if name:
                return name
    return "stmt"


@dataclass(frozen=True)
class ConvertAffineToEgpuPass(TargetedPass):
    name = "convert-affine-to-egpu"

    target: str = "opencl"
    """Whose description gives the default block size and grid limit."""
    block: int = 0
    """Work-items per work-group of the flattened mapping (0: the target's default)."""

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        desc = self.limits()
        block = self.block or desc.default_block
        for host in [f for f in op.ops if isinstance(f, func.FuncOp) and f.body.blocks]:
            body = host.body.block
            names: set[str] = set()
            enclose_private_buffers(body)
            pending = gpu_mapping.statements(body)
            order = host_order(body)
            while pending:
                stmt = pending.pop(0)
                mapping = self._mapping(stmt, block)
                if not gpu_mapping.fill_fits(stmt, mapping):  # the fill runs as a kernel of its own
                    assert stmt.fill is not None
                    pending[:0] = [gpu_mapping.Statement(stmt.fill), gpu_mapping.Statement(stmt.main)]
                    continue
                name = f"{host.sym_name.data}_{_written_name(stmt)}"
                base, k = name, 1
                while name in names:
                    name, k = f"{base}_{k}", k + 1
                names.add(name)
                kernel, buffers = outline(stmt, mapping, name, body, order)
                kernel.location = stmt.main.location  # the statement's (the schedule op's)
                if kernel.shared_bytes() > desc.shared_bytes_per_block:  # staged tiles: refused here
                    desc.check_launch(name, mapping.launch.grid, mapping.launch.block, kernel.shared_bytes(),
                                      origin=kernel.location)  # fmt: skip
                Rewriter.insert_op(kernel, InsertPoint.after(host))
                launch = egpu.LaunchOp(name, buffers)
                launch.location = kernel.location
                Rewriter.insert_op(launch, InsertPoint.before(stmt.ops[0]))
                erase_statement(stmt)
            _erase_host_leftovers(body)
        # kernels follow their host function in launch order
        _order_kernels(op)

    def _mapping(self, stmt: gpu_mapping.Statement, block: int) -> gpu_mapping.Mapping:
        """Bound loops map onto their coordinates; otherwise the parallel prefix is
        flattened onto x."""
        desc = self.limits()
        reduction = gpu_mapping.cross_thread_reduction(stmt.main)
        levels = gpu_mapping.bound_loops(stmt.main, reduction)
        if reduction is not None:
            mapping = gpu_mapping.bound_mapping(levels)
            sizes = list(mapping.launch.block)
            sizes[reduction.dim.index] = reduction.threads
            mapping.launch = gpu_mapping.Launch(mapping.launch.grid, (sizes[0], sizes[1], sizes[2]))
            mapping.reduction = _combine_partials(reduction, desc)
            return mapping
        if levels:
            return gpu_mapping.bound_mapping(levels)
        prefix = gpu_mapping.parallel_prefix(stmt.main)
        width = gpu_mapping.narrowest_store_bytes(stmt)
        threads = block if width >= desc.write_granule else 1
        return gpu_mapping.flat_mapping(prefix, threads, desc.max_grid[0])


def _combine_partials(
    reduction: gpu_mapping.CrossThread, desc: TargetDescription
) -> gpu_mapping.CrossThread:
    """How the block combines a cross-thread reduction's partials on this target: with
    `egpu.subgroup_reduce` where the target has clustered subgroup reductions of the
    element type (warp shuffles; their max/min propagate NaN) and the reduction runs along
    x: one cluster when its thread count is a power of two up to the smallest subgroup,
    two stages when it is a multiple of it (each warp, then the warp totals); else a tree
    in shared memory. Raises ScheduleError on a target with neither (Poplar: a vertex's
    workers are not threads that can exchange partials)."""
    n = reduction.threads
    dtype = _DTYPES.get(reduction.store.value.type)
    if not desc.subgroup_reduce and desc.shared_bytes_per_block == 0:
        raise gpu_mapping.schedule_error(
            f"the {desc.name} target cannot combine partial results across threads: "
            f"{describe(reduction.loop)} is a reduction bound to thread.{reduction.dim.value} "
            "(keep the reduction sequential)", reduction.loop
        )
    warp = desc.subgroup_size
    if desc.subgroup_reduce == "clustered" and dtype in desc.subgroup_reduce_dtypes and reduction.dim == egpu.Dim.X:
        if n & (n - 1) == 0 and n <= warp:
            return dataclasses.replace(reduction, subgroup=True, cluster=n)
        if n % warp == 0 and n // warp <= warp:  # a warp's reduction, then one of the totals
            return dataclasses.replace(reduction, subgroup=True, cluster=warp, two_stage=True)
    return reduction


_DTYPES = {f32: "float32", f64: "float64", i32: "int32", i64: "int64"}


def _erase_host_leftovers(body: Block) -> None:
    """The values statements used (constants, loads of scalars, ...) were cloned into their
    kernels: the host keeps only allocations, launches, deallocations and the return."""
    for op in reversed(list(body.ops)):
        if isinstance(op, _HOST_OPS) or any(r.uses for r in op.results):
            continue
        Rewriter.erase_op(op)


_HOST_OPS = (memref.AllocOp, memref.DeallocOp, egpu.LaunchOp, func.ReturnOp)


def _order_kernels(module: ModuleOp) -> None:
    launches = [l.callee.string_value() for l in module.walk() if isinstance(l, egpu.LaunchOp)]
    kernels_by_name = {k.sym_name.data: k for k in module.ops if isinstance(k, egpu.FuncOp)}
    for name in launches:
        kernel = kernels_by_name.get(name)
        if kernel is not None:
            kernel.detach()
            module.body.block.add_op(kernel)
