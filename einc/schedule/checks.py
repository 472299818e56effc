"""What a target can run of a schedule, checked by the schedule layer from the target's facts
(the target holds facts only): before a schedule runs (`check_schedule`) and on what it made of
the loops (`check_scheduled`). Each refusal is a ScheduleError at the schedule op responsible.

- A target without kernels to launch (no `limits`: C) has no GPU blocks, threads or shared
  memory: a `bind`, or a cache op staging in "shared" memory, is refused before the schedule
  runs; so is shared memory on a device whose blocks have none (Poplar).
- On a device target (`limits`), a local buffer (`memref.alloca`) is each work-item's own: it
  must lie inside the bound loops, a tile written back must be the work-item's alone
  (einc.transforms.staging.private_buffer_failure), and its element type one the device
  computes in (`limits.arith_dtypes`); each statement's bound loops must map onto
  work-items (`check_bound_loops`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from xdsl.dialects import func, memref
from xdsl.dialects.builtin import AnyFloat, IntegerType, ModuleOp, StringAttr
from xdsl.ir import Attribute

from einc.dialects.einc_transform import BindOp, CacheOp, TensorizeOp
from einc.errors import ScheduleError, SourceLocation
from einc.ir.attrs import MEMORY_ATTR, NARROW_FLOATS, dtype_name
from einc.schedule.script import Schedule
from einc.transforms import gpu_mapping
from einc.transforms.loop_analysis import buffer_name
from einc.transforms.loop_build import Failure
from einc.transforms.staging import private_buffer_failure

if TYPE_CHECKING:
    from einc.targets.clike import CLikeTarget


def check_schedule(schedule: Schedule, target: type[CLikeTarget]) -> None:
    """Refuse, before it is applied, a schedule `target` cannot run (ScheduleError at the op
    responsible): on a target without kernels, shared memory and binds; on a device whose
    blocks have no shared memory (`shared_bytes_per_block` 0: Poplar), shared memory; on
    every target, a `tensorize` whose intrinsic the target lacks (`tensor_cores`)."""
    for op in schedule.ops(TensorizeOp):
        if op.intrinsic.data not in target.tensor_cores:
            has = f"its tensor-core intrinsic is {', '.join(repr(i) for i in sorted(target.tensor_cores))}" if target.tensor_cores else "it has no tensor cores"
            raise schedule.error(
                op,
                f"the {target.name} target cannot tensorize with '{op.intrinsic.data}': {has} "
                "(CUDA: 'mma.m16n8k16'; HIP on CDNA: 'mfma.16x16x16')",
            )
    if target.limits is not None:
        if target.limits.shared_bytes_per_block == 0:
            refuse_shared_memory(schedule, target.name, "shared memory",
                                 'cannot be staged there; stage it in "local" memory (a copy per work-item)')  # fmt: skip
        return
    refuse_shared_memory(schedule, target.name)
    for op in schedule.ops(BindOp):
        raise schedule.error(
            op,
            f"the {target.name} target has no GPU blocks or threads to bind a loop to "
            f'("{op.axis.data}"); parallelize the loop instead',
        )


def check_scheduled(schedule: Schedule, scheduled: ModuleOp, target: type[CLikeTarget]) -> None:
    """Refuse what `schedule` made of the loops (`scheduled`) when `target` cannot run it
    (ScheduleError at the schedule op that made it): on a device target, the local buffers."""
    if target.limits is not None:
        check_private_buffers(scheduled, schedule, target.name, target.limits.arith_dtypes)
        check_bound_loops(scheduled)


def check_bound_loops(module: ModuleOp) -> None:
    """On a device target, each statement's bound loops must map onto work-items as
    `convert-affine-to-egpu` maps them (einc.transforms.gpu_mapping.bound_loops: reached from
    the top of the statement through bound and unit loops): a bind that cannot is refused
    here, at its schedule op, instead of in the target stage."""
    for host in module.ops:
        if isinstance(host, func.FuncOp) and host.body.blocks:
            for stmt in gpu_mapping.statements(host.body.block):
                gpu_mapping.bound_loops(stmt.main, gpu_mapping.cross_thread_reduction(stmt.main))


def refuse_shared_memory(
    schedule: Schedule, target: str, lacks: str = "GPU shared memory",
    instead: str = 'needs a device target (stage in "local" memory on C)',
) -> None:  # fmt: skip
    """Raise ScheduleError at the first cache op of `schedule` staging in shared memory, which
    `target` lacks (C: no GPU; Poplar: no memory its workers share); `instead` says what to do."""
    for op in schedule.module.walk():
        if isinstance(op, CacheOp) and op.memory.data == "shared":
            raise ScheduleError(
                f"the {target} target has no {lacks}: {op.name} of '{op.tensor.data}' in \"shared\" {instead}",
                schedule.locations.get(op),
            )


def _dtype(element: Attribute) -> str:
    if isinstance(element, IntegerType):
        return "bool" if element.bitwidth == 1 else f"int{element.bitwidth}"
    return dtype_name(element) if isinstance(element, AnyFloat) else str(element)


def check_private_buffers(module: ModuleOp, schedule: Schedule, target: str, dtypes: frozenset[str]) -> None:
    """For device targets, after `schedule` made `module`: raise
    ScheduleError at the schedule op that made the first local buffer breaking
    `private_buffer_failure` (binds may come after the cache op in the script), or whose
    element type is not in `dtypes` (the types `target` computes in: OpenCL C without
    cl_khr_fp16 cannot declare a half array, HLSL has no 8- or 16-bit types). float16 and
    bfloat16 arrays pass: every device pipeline holds them as float32
    (`einc-widen-narrow-buffers`)."""
    for op in module.walk():
        if not isinstance(op, memref.AllocaOp) or op.attributes.get(MEMORY_ATTR) == StringAttr("shared"):
            continue
        failure = private_buffer_failure(op)
        element = op.memref.type.get_element_type()
        dtype = _dtype(element)
        if failure is None and dtype not in dtypes and not isinstance(element, NARROW_FLOATS):
            failure = Failure(
                f"the local buffer '{buffer_name(op.memref)}': the {target} target has no local "
                f"arrays of {dtype} (it computes {dtype} in a wider type)"
            )
        if failure is None:
            continue
        made_by = schedule.staged_by.get(op)
        loc = schedule.locations.get(made_by) if made_by is not None else None
        if loc is None:  # not made by a located op: the schedule's first line
            raise ScheduleError(
                f"{made_by.name if made_by else 'the schedule'}: {failure.message}",
                SourceLocation(schedule.filename, 1, 1, source=schedule.source),
            )
        raise ScheduleError(failure.message, loc)
