"""`verify-egpu`: the checks of the GPU/SIMD level that op verifiers cannot make, because
they concern a whole kernel (or a kernel and its launch) rather than one op:

- every value an op of an `egpu.func` uses is defined before the use inside that kernel
  (earlier in its block or in an enclosing one), or is a kernel argument;
- every private buffer (`memref.alloca` in a kernel: one work-item's array) is written and
  read in that kernel, written before it is first read; none is launched from the host;
- every `egpu.alloc_shared` buffer written and then read by another work-item has an
  `egpu.barrier` between the write and the read on every path (loops are followed around
  their back edge). A read of exactly the element the same work-item wrote, at an index
  computed from its thread or global id, needs none.

A failure is a bug in einc (an earlier pass built the IR), raised as
`InternalCompilerError`, never as a user's `EincError`. The pass changes nothing.
`EINC_VERIFY_EACH=1` (`einc.compiler.registry.run_pipeline`, so every driver stage) and
`einc-opt --verify-each` run it, with xDSL's op verifiers, after every pass of a pipeline
(after a pass that left the IR exactly as it was last verified, `ir_state`, the answer is the
same and is not computed again).
"""

from __future__ import annotations

from dataclasses import dataclass

from xdsl.context import Context
from xdsl.dialects import affine, memref, scf
from xdsl.dialects.builtin import ModuleOp, StringAttr
from xdsl.ir.affine import AffineDimExpr, AffineSymExpr
from xdsl.ir import Block, BlockArgument, ErasedSSAValue, Operation, OpResult, SSAValue
from xdsl.passes import ModulePass, PassPipeline
from xdsl.utils.exceptions import VerifyException

from einc.dialects import egpu
from einc.errors import InternalCompilerError

_READS = (affine.LoadOp, memref.LoadOp, egpu.VLoadOp, egpu.VLoadRepeatOp, egpu.LoadExtfOp)
_WRITES = (affine.StoreOp, memref.StoreOp, egpu.VStoreOp, egpu.StoreTruncfOp, egpu.CopyAsyncOp)
_Access = (
    affine.LoadOp | memref.LoadOp | egpu.VLoadOp | egpu.VLoadRepeatOp | egpu.LoadExtfOp
    | affine.StoreOp | memref.StoreOp | egpu.VStoreOp | egpu.StoreTruncfOp | egpu.CopyAsyncOp
)
"""The ops of `_READS` and `_WRITES`: a `memref` operand at `indices`."""
_LOOPS = (affine.ForOp, scf.ForOp, scf.WhileOp, scf.ParallelOp, affine.ParallelOp)
_THREAD_IDS = (egpu.ThreadIdOp, egpu.GlobalIdOp)


@dataclass(frozen=True)
class VerifyEgpuPass(ModulePass):
    name = "verify-egpu"

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        verify_egpu(op)


def verify_egpu(module: Operation, after: str | None = None) -> None:
    """Raise InternalCompilerError at the first broken rule of the module's kernels
    (`after`: the pass that ran last, for the message)."""
    try:
        for op in module.walk():
            if isinstance(op, egpu.FuncOp):
                _verify_kernel(op)
            elif isinstance(op, egpu.LaunchOp):
                _verify_launch(op)
    except _Broken as broken:
        where = f"after {after}: " if after else ""
        raise InternalCompilerError(f"{where}{broken}", stage="verify-egpu") from None


def verify_after_pass(previous: ModulePass | None, module: ModuleOp, _next: ModulePass | None) -> None:
    """A PassPipeline callback: xDSL's op verifiers and `verify_egpu` after each pass."""
    if previous is None:
        return
    verify_egpu(module, previous.name)
    try:
        module.verify()
    except VerifyException as err:
        raise InternalCompilerError(f"after {previous.name}: {err}", stage="verify-egpu") from err


def ir_state(module: Operation) -> list[object]:
    """Everything the verifiers read, by identity where it is mutable: each op in walk order
    with its block, operands, results and their types, properties, attributes, location and
    successors, each region's blocks with their arguments and types. Attributes are immutable
    (compared by value); ops, blocks, regions and values compare by identity. Two equal states
    are the same IR, so its verification gives the same answer."""
    state: list[object] = []
    add, extend = state.append, state.extend
    for op in module.walk():
        add(op)
        add(op.parent)
        extend(op.operands)
        add(len(op.operands))
        for result in op.results:
            add(result)
            add(result.type)
        add(len(op.results))
        add(tuple(op.properties.items()))
        add(tuple(op.attributes.items()))
        add(op.location)
        add(tuple(op.successors))  # a copy: OpSuccessors reads the op's current ones
        for region in op.regions:
            add(region)
            for block in region.blocks:
                add(block)
                for arg in block.args:
                    add(arg)
                    add(arg.type)
                add(len(block.args))
            add(None)
        add(len(op.regions))
    return state


def verifying(pipeline: PassPipeline) -> PassPipeline:
    """`pipeline` with `verify_after_pass` after each pass (and its own callback before). A
    pass that leaves the IR as it was last verified (`ir_state`) is not verified again: the
    same IR gets the same answer (most passes find nothing to do on most programs)."""
    own = pipeline.callback
    verified: list[object] | None = None

    def callback(previous: ModulePass | None, module: ModuleOp, following: ModulePass | None) -> None:
        nonlocal verified
        if own is not None:
            own(previous, module, following)
        if previous is None:
            return
        state = ir_state(module)
        if state == verified:
            return
        verify_after_pass(previous, module, following)
        verified = state

    return PassPipeline(pipeline.passes, callback)


class _Broken(Exception):
    """A broken rule, the message naming the kernel, the value or buffer and the op."""


# ---- names for the messages ---------------------------------------------------------------------


def _value(value: SSAValue) -> str:
    name = f"%{value.name_hint} " if value.name_hint else ""
    if isinstance(value, BlockArgument):
        parent = value.block.parent_op()
        return f"{name}(argument {value.index} of a block of {parent.name if parent else 'nothing'})"
    if isinstance(value, OpResult):
        return f"{name}(result {value.index} of {value.op.name})"
    assert isinstance(value, ErasedSSAValue), value
    return f"{name}(an erased value, once {_value(value.old_value)})"


def _buffer(value: SSAValue) -> str:
    owner = value.owner
    if isinstance(owner, Operation) and isinstance(n := owner.attributes.get("ein.name"), StringAttr):
        return f"'{n.data}' {_value(value)}"
    return _value(value)


def _kernel(kernel: egpu.FuncOp) -> str:
    return f"egpu.func @{kernel.sym_name.data}"


# ---- values defined before use ---------------------------------------------------------------------


def _verify_definitions(kernel: egpu.FuncOp) -> None:
    inside = set(kernel.walk())
    visible: set[SSAValue] = set()  # defined so far in the blocks enclosing the walk

    def visit(block: Block) -> None:
        scope: list[SSAValue] = list(block.args)
        visible.update(scope)
        for op in block.ops:
            for operand in op.operands:
                if operand in visible:
                    continue
                owner = operand.owner
                defined_here = (owner.parent_op() if isinstance(owner, Block) else owner) in inside
                how = "before its definition" if defined_here else "but is defined outside the kernel"
                raise _Broken(f"{_kernel(kernel)}: value {_value(operand)} is used by {op.name} {how}")
            for region in op.regions:
                for inner in region.blocks:
                    visit(inner)
            visible.update(op.results)
            scope += op.results
        visible.difference_update(scope)

    visit(kernel.body.block)


# ---- private buffers -----------------------------------------------------------------------------


def _verify_private(kernel: egpu.FuncOp) -> None:
    order = {op: k for k, op in enumerate(kernel.walk())}
    for alloca in [op for op in order if isinstance(op, memref.AllocaOp)]:
        buffer = alloca.memref
        uses = sorted({use.operation for use in buffer.uses}, key=order.__getitem__)
        reads = [op for op in uses if isinstance(op, _READS)]
        writes = [op for op in uses if isinstance(op, _WRITES)]
        what = f"{_kernel(kernel)}: private buffer {_buffer(buffer)}"
        if not writes:
            raise _Broken(f"{what} is read but never written in the kernel (its contents would come from another kernel)")
        if not reads:
            raise _Broken(f"{what} is written but never read in the kernel (its contents are meant for another kernel)")
        if reads[0] is uses[0]:
            raise _Broken(f"{what} is read by {reads[0].name} before it is written")


def _verify_launch(launch: egpu.LaunchOp) -> None:
    for buffer in launch.buffers:
        if isinstance(buffer.owner, memref.AllocaOp):
            raise _Broken(
                f"egpu.launch @{launch.callee.string_value()}: private buffer {_buffer(buffer)} of the "
                "host is passed to a kernel (a private buffer lives in one work-item of one kernel)"
            )


# ---- shared buffers and barriers -------------------------------------------------------------------

_Pending = frozenset[tuple[SSAValue, _Access, frozenset[Operation]]]
"""Writes to shared buffers since the last barrier on some path: (buffer, the write op, the
loops whose back edge it crossed)."""


def _verify_shared(kernel: egpu.FuncOp) -> None:
    shared: set[SSAValue] = {op.memref for op in kernel.body.block.ops if isinstance(op, egpu.AllocSharedOp)}
    if shared:
        _flow(kernel.body.block, frozenset(), shared, kernel)


def _flow(block: Block, pending: _Pending, shared: set[SSAValue], kernel: egpu.FuncOp) -> _Pending:
    """The shared writes pending after `block`, entered with `pending`; raises at a read of
    a pending write's buffer by another work-item."""
    for op in block.ops:
        if isinstance(op, egpu.BarrierOp):
            pending = frozenset()
        elif isinstance(op, _WRITES) and (buffer := _memref(op)) in shared:
            pending = pending | {(buffer, op, frozenset())}
        elif isinstance(op, _READS) and (buffer := _memref(op)) in shared:
            for written, write, carried in pending:
                if written is buffer and not _own_element(write, op) and not _other_slot(write, op, carried):
                    raise _Broken(
                        f"{_kernel(kernel)}: shared buffer {_value(buffer)} is written by {write.name} and "
                        f"read by {op.name} at an element of another work-item with no egpu.barrier between"
                    )
        elif op.regions:
            pending = _flow_regions(op, pending, shared, kernel)
    return pending


def _flow_regions(op: Operation, pending: _Pending, shared: set[SSAValue], kernel: egpu.FuncOp) -> _Pending:
    blocks = [b for region in op.regions for b in region.blocks]
    if isinstance(op, _LOOPS):  # around the back edge until nothing new is pending
        entry = pending
        while True:
            out: _Pending = frozenset().union(*(_flow(b, entry, shared, kernel) for b in blocks))
            back = frozenset((buffer, write, carried | {op}) for buffer, write, carried in out)
            if back <= entry:
                return entry
            entry = entry | back
    outs = [_flow(b, pending, shared, kernel) for b in blocks]
    if any(not region.blocks for region in op.regions) or not outs:  # a branch that runs nothing
        outs.append(pending)
    return frozenset().union(*outs)


def _memref(op: _Access) -> SSAValue:
    return op.memref


def _access(op: _Access) -> tuple[object, tuple[SSAValue, ...]]:
    m = op.map if isinstance(op, affine.LoadOp | affine.StoreOp) else None
    return (m.data if m is not None else None), tuple(op.indices)


def _own_element(write: _Access, read: _Access) -> bool:
    """Whether `read` reads exactly the element this same work-item wrote with `write`: the
    same index expression of the same values, one of them derived from the work-item's id."""
    access = _access(write)
    return access == _access(read) and any(_from_thread_id(v) for v in access[1])


MAX_SLOT_TRIPS = 4096


def _leading_index(op: _Access) -> SSAValue | None:
    """The value of `op`'s first index when it is an operand as it is (a bare dimension)."""
    m = op.map.data if isinstance(op, affine.LoadOp | affine.StoreOp) and op.map is not None else None
    if m is None:
        return op.indices[0] if op.indices else None
    first = m.results[0] if m.results else None
    if isinstance(first, AffineDimExpr):
        return op.indices[first.position]
    if isinstance(first, AffineSymExpr):
        return op.indices[m.num_dims + first.position]
    return None


def _other_slot(write: _Access, read: _Access, carried: frozenset[Operation]) -> bool:
    """Whether `read` and `write` (of the same loop iteration: the loop has not carried the
    write around its back edge) touch different slots of a double-buffered tile: their first
    indices are `affine.apply`s of the same loop's variable whose values differ at each of the
    loop's (constant) iterations (einc.transforms.double_buffer)."""
    w, r = _leading_index(write), _leading_index(read)
    if w is None or r is None or not isinstance(a := w.owner, affine.ApplyOp) or not isinstance(b := r.owner, affine.ApplyOp):
        return False
    if len(a.mapOperands) != 1 or len(b.mapOperands) != 1 or a.mapOperands[0] is not b.mapOperands[0]:
        return False
    iv = a.mapOperands[0]
    loop = iv.owner.parent_op() if isinstance(iv, BlockArgument) else None
    if not isinstance(loop, affine.ForOp) or loop in carried or loop.lowerBoundOperands or loop.upperBoundOperands:
        return False
    lbs, ubs = loop.lowerBoundMap.data.eval([], []), loop.upperBoundMap.data.eval([], [])
    if len(lbs) != 1 or len(ubs) != 1:
        return False
    values = range(lbs[0], ubs[0], loop.step.value.data)
    if len(values) > MAX_SLOT_TRIPS:
        return False
    wm, rm = a.map.data, b.map.data
    return all(wm.eval([v], []) != rm.eval([v], []) for v in values)


def _from_thread_id(value: SSAValue, seen: frozenset[SSAValue] = frozenset()) -> bool:
    if value in seen:
        return False
    owner = value.owner
    seen = seen | {value}
    if isinstance(owner, Block):  # a loop variable counting from a thread's own start
        loop = owner.parent_op()
        if isinstance(loop, scf.ForOp) and value is owner.args[0]:
            return _from_thread_id(loop.lb, seen)
        if isinstance(loop, affine.ForOp) and value is owner.args[0]:
            return any(_from_thread_id(v, seen) for v in loop.lowerBoundOperands)
        return False
    if isinstance(owner, _THREAD_IDS):
        return True
    return any(_from_thread_id(v, seen) for v in owner.operands)


def _verify_kernel(kernel: egpu.FuncOp) -> None:
    _verify_definitions(kernel)
    _verify_private(kernel)
    _verify_shared(kernel)


__all__ = ["VerifyEgpuPass", "verify_after_pass", "verify_egpu", "verifying"]
