"""einc's transform interpreter: `interpret(schedule, payload, passes)` runs a schedule's
`@__transform_main` on the payload module with

- `EincTransformFunctions`: the `transform.einc.*` ops (einc/dialects/einc_transform.py), each
  resolving its handles and params, calling its einc.transforms utility and turning a Failure
  into a ScheduleError at the op;
- `RegisteredPassFunctions`: xDSL's transform interpreter (`transform.structured.match`,
  `transform.apply_registered_pass`), its registered passes taking the op's options (xDSL
  drops them) from the registry the caller hands in, every mistake a ScheduleError at the op;
- `LocatingListener`: the payload ops each transform makes, located at the statement and
  the schedule op (einc.ir.locations).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import TYPE_CHECKING, TypeVar, cast

from xdsl.context import Context
from xdsl.dialects import affine, memref, transform
from xdsl.dialects.builtin import (
    AnyFloat,
    ArrayAttr,
    FloatAttr,
    IndexType,
    IntegerAttr,
    IntegerType,
    LocationAttr,
    ModuleOp,
    NameLoc,
    NoneAttr,
    StringAttr,
    i64,
)
from xdsl.interpreter import Interpreter, InterpreterFunctions, PythonValues, impl, register_impls
from xdsl.interpreters.transform import OperationHandle, TransformFunctions
from xdsl.ir import Attribute, Operation
from xdsl.passes import PassPipeline
from xdsl.utils.exceptions import DiagnosticException

from einc.dialects import einc_transform as et
from einc.dialects.context import make_context
from einc.errors import EincError, InternalCompilerError, ScheduleError
from einc.ir import locations
from einc.ir.attrs import PAD_ATTR, STAGED_LOC_ATTR
from einc.passes.pipeline import PassFactories, parse_passes
from einc.passes.unswitch import MAX_VERSIONS, unswitch_guards
from einc.transforms import loop_transforms as lt
from einc.transforms.double_buffer import mark_double_buffer
from einc.transforms.compute_at import apply_compute_at, compute_at, reverse_compute_at
from einc.transforms.coalesce import coalesce_loops
from einc.transforms.distribute import distribute_loop
from einc.transforms.group_lanes import group_lanes
from einc.transforms.prefetch import prefetch
from einc.transforms.distribute import pieces as distribute_pieces
from einc.transforms.loop_build import describe
from einc.transforms.index_split import split_conditions, split_conditions_inside, split_phases
from einc.transforms.loop_cse import reuse_values
from einc.transforms.loops import LoopIndex
from einc.transforms.reduction_order import rotate_band
from einc.transforms.rfactor import rfactor_loop
from einc.transforms.staging import cache_tensor
from einc.transforms.hoist_fill import hoist_fill
from einc.transforms.pack_rows import pack_rows
from einc.transforms.stream_stores import mark_stream_stores
from einc.transforms.tensorize import tensorize
from einc.transforms.vectorize import mark_reduction_loop

if TYPE_CHECKING:
    from einc.schedule.script import Schedule
    from einc.transforms.compute_at import ComputeAtPlan

T = TypeVar("T")


def interpret(
    schedule: Schedule, module: ModuleOp, passes: PassFactories, listeners: Sequence[Interpreter.Listener] = ()
) -> None:
    """Run `schedule`'s `@__transform_main` on `module` (in place). `passes` is what its
    `transform.apply_registered_pass` ops may name, given by the caller (as xDSL's
    `TransformFunctions(ctx, available_passes)`); nothing here fetches a registry.
    `listeners` observe each schedule op. A transform's refusal is a ScheduleError at its op;
    any other exception is an InternalCompilerError carrying the schedule."""
    interpreter = Interpreter(schedule.module, listeners=(LocatingListener(schedule, module), *listeners))
    interpreter.register_implementations(RegisteredPassFunctions(schedule, make_context(), passes))
    interpreter.register_implementations(EincTransformFunctions(schedule, module))
    try:
        interpreter.call_op(schedule.entry(), (OperationHandle(module),))
        locations.fill_locations(module)  # what a transform made outside the ops it was given
    except EincError:
        raise
    except Exception as exc:  # noqa: BLE001 - an interpreter or transform bug
        text = schedule.source if schedule.source is not None else str(schedule.module)
        raise InternalCompilerError.wrap(exc, "schedule", schedule=text)


# ---- transform.apply_registered_pass -------------------------------------------------------------


@register_impls
class RegisteredPassFunctions(TransformFunctions):
    """xDSL's transform interpreter, its `transform.apply_registered_pass` taking the op's
    `options` (xDSL ignores them) and refusing an unknown pass (with the closest names), an
    option the pass lacks, a bad value, or a pass that fails on the loops as a ScheduleError
    at the op (not as a bug in einc)."""

    def __init__(self, schedule: Schedule, ctx: Context, passes: PassFactories):
        super().__init__(ctx, dict(passes))
        self.schedule = schedule

    @impl(transform.ApplyRegisteredPassOp)
    def run_apply_registered_pass_op(
        self, interpreter: Interpreter, op: transform.ApplyRegisteredPassOp, args: PythonValues
    ) -> PythonValues:
        (targets,) = args
        options = " ".join(f"{k}={_option_text(v)}" for k, v in op.options.data.items())
        spec = f"{op.pass_name.data}{{{options}}}" if options else op.pass_name.data
        try:
            pipeline = PassPipeline(parse_passes(spec, self.passes, "transform.apply_registered_pass"))
        except EincError as err:
            raise self.schedule.error(op, f"transform.apply_registered_pass: {err.message}") from None
        for target in handle_ops(targets):
            if not isinstance(target, ModuleOp):
                raise self.schedule.error(op, "transform.apply_registered_pass applies to the module (%root) only")
            try:
                pipeline.apply(self.ctx, target)
            except DiagnosticException as err:
                raise self.schedule.error(op, f"pass '{op.pass_name.data}' failed: {err}") from None
            except EincError as err:  # a plugin pass refusing an option's value: at this op
                if err.loc is None or err.loc.file != "transform.apply_registered_pass":
                    raise
                raise self.schedule.error(op, f"transform.apply_registered_pass: {err.message}") from None
        return (targets,)


def handle_ops(handle: object) -> tuple[Operation, ...]:
    """The payload ops of a transform handle (an OperationHandle: the interpreter's value of
    every `!transform.any_op`)."""
    assert isinstance(handle, OperationHandle), handle
    return cast("OperationHandle[Operation]", handle).ops


def _option_text(value: Attribute) -> str:
    """A pass option's attribute as pipeline text (`size=32`, `target="cuda"`, `flag=true`)."""
    if isinstance(value, StringAttr):
        return f'"{value.data}"'
    if isinstance(value, IntegerAttr):
        integer = cast("IntegerAttr[IntegerType | IndexType]", value)
        if integer.type == IntegerType(1):
            return "true" if integer.value.data else "false"
        return str(integer.value.data)
    if isinstance(value, FloatAttr):
        return str(cast("FloatAttr[AnyFloat]", value).value.data)
    if isinstance(value, ArrayAttr):
        return ",".join(_option_text(v) for v in cast("ArrayAttr[Attribute]", value).data)
    return str(value)


# ---- transform.einc.* -------------------------------------------------------------------------


class LocatingListener(Interpreter.Listener):
    """Locates the payload ops each transform op makes (new ones, and clones) at
    `fused[statement loc, schedule op loc]` (einc.ir.locations.derived_from). An op that
    raises leaves its watch behind: `forget()` drops it."""

    def __init__(self, schedule: Schedule, payload: ModuleOp):
        self.schedule = schedule
        self.payload = payload
        self.watches: list[locations.Watch | None] = []

    def will_interpret_op(self, op: Operation, args: PythonValues) -> None:
        if not isinstance(op, _NOT_TRANSFORMS):
            targets = [t for a in args if isinstance(a, OperationHandle) for t in handle_ops(cast(object, a))]
            self.watches.append(locations.Watch.around(self.payload, targets))

    def forget(self) -> None:
        self.watches.clear()

    def did_interpret_op(self, op: Operation, results: PythonValues) -> None:
        if isinstance(op, _NOT_TRANSFORMS) or not self.watches:
            return
        watch = self.watches.pop()
        if watch is None:  # too much to watch: its ops are located after the schedule
            return
        loc = self.schedule.locations.get(op)
        by: LocationAttr = (
            locations.file_location(loc) if loc is not None
            else op.location if locations.has_location(op) else NameLoc(StringAttr(op.name), NoneAttr())
        )  # fmt: skip
        watch.locate_made(by)


_NOT_TRANSFORMS = (transform.NamedSequenceOp, transform.YieldOp, et.KnobOp, transform.ParamConstantOp, et.MatchOp)
"""Ops that change no payload op."""


@register_impls
class EincTransformFunctions(InterpreterFunctions):
    """Implementations of `transform.einc.*`: each resolves its handles and params, calls the
    loop_transforms utility, and turns a Failure into ScheduleError at the op."""

    def __init__(self, schedule: Schedule, payload: ModuleOp):
        self.schedule = schedule
        self.payload = payload
        self.index = LoopIndex(payload)  # a statement's loops without a walk per match
        self.last_match: Operation | None = None
        self.planned: ComputeAtPlan | None = None
        """A compute_at plan made on the payload as it is now for the next compute_at op
        (einc.schedule.builder: a policy that planned to decide is not made to plan again)."""

    # -- helpers --
    def fail(self, op: Operation, message: str) -> ScheduleError:
        loc = self.schedule.locations.get(op)
        if loc is None:
            message = f"{op.name}: {message}"
        return ScheduleError(message, loc)

    def loops(self, op: Operation, handle: object, what: str = "loop", nested: bool = True) -> list[affine.ForOp]:
        """The loops `handle` holds, touched in the index (`nested`: LoopIndex.touch)."""
        result: list[affine.ForOp] = []
        for payload_op in handle_ops(handle):
            if not self._attached(payload_op):
                raise self.fail(op, f"the {what} handle refers to an op a previous transform replaced (match it again)")
            if not isinstance(payload_op, affine.ForOp):
                raise self.fail(op, f"expected affine.for ops, got '{payload_op.name}'")
            self.index.touch(payload_op, nested)  # every einc transform changes only what it is given
            result.append(payload_op)
        return result

    def _attached(self, payload_op: Operation) -> bool:
        parent: Operation | None = payload_op
        while parent is not None:
            if parent is self.payload:
                return True
            parent = parent.parent_op()
        return False

    def size(self, op: et.SizedLoopOp | et.RotateOp, args: PythonValues, at: int = 1, what: str = "size") -> int:
        """The op's static size, else the integer its param (operand `at`) holds."""
        if op.static_size is not None:
            return op.static_size.value.data
        value: object = args[at]
        if isinstance(value, list | tuple):
            values = cast("Sequence[object]", value)
            value = values[0] if len(values) == 1 else None
        if isinstance(value, IntegerAttr):
            value = cast("IntegerAttr[IntegerType | IndexType]", value).value.data
        if not isinstance(value, int):
            raise self.fail(op, f"the {what} param holds no single integer")
        return value

    def check(self, op: Operation, result: T | lt.Failure) -> T:
        if isinstance(result, lt.Failure):
            raise self.fail(op, result.message)
        if isinstance(result, memref.AllocaOp):
            self.staged(op, result)
        return result

    def staged(self, op: Operation, alloca: memref.AllocaOp) -> None:
        """Record that schedule op `op` made the local buffer `alloca` (located refusals)."""
        self.schedule.staged_by[alloca] = op
        loc = self.schedule.locations.get(op)
        if loc is not None:
            alloca.attributes[STAGED_LOC_ATTR] = StringAttr(f"{loc.file}:{loc.line}:{loc.col}")

    # -- ops --
    @impl(et.MatchOp)
    def run_match(self, interpreter: Interpreter, op: et.MatchOp, args: PythonValues) -> PythonValues:
        (roots,) = args
        name = op.op_name.data if op.op_name is not None else affine.ForOp.name
        found: list[Operation] = []
        for root in handle_ops(roots):
            if root is self.payload and name == affine.ForOp.name and op.stmt is not None:
                candidates: Iterable[Operation] = self._indexed_loops(op, op.stmt)
            else:
                candidates = root.walk()
            for candidate in candidates:
                if candidate is root or candidate.name != name:
                    continue
                attrs = candidate.attributes
                if op.stmt is not None and attrs.get(lt.STMT_ATTR) != op.stmt:
                    continue
                if op.axis is not None and attrs.get(lt.AXIS_ATTR) != op.axis:
                    continue
                if name == affine.ForOp.name and (("einc.init" in attrs) != (op.init is not None)):
                    continue
                found.append(candidate)
        if not found and handle_ops(roots):  # inside an empty handle (a peel with no rest): nothing
            raise self.fail(op, "matched no operation" + self._split_hint(op, roots))
        return (OperationHandle(*found),)

    @staticmethod
    def _split_hint(op: et.MatchOp, roots: object) -> str:
        """For a match of an axis the `loops` stage split (einc-split-index-axes: `F` divided
        by a constant became `F.q` and `F.r`), the axes to match instead; else ''."""
        if op.axis is None:
            return ""
        prefix = op.axis.data + "."
        split = sorted({axis.data for root in handle_ops(roots) for loop in root.walk()
                        if isinstance(axis := loop.attributes.get(lt.AXIS_ATTR), StringAttr)
                        and axis.data.startswith(prefix)
                        and (op.stmt is None or loop.attributes.get(lt.STMT_ATTR) == op.stmt)})  # fmt: skip
        if not split:
            return ""
        return (f" (axis '{op.axis.data}' is divided by a constant and was split into "
                f"{', '.join(repr(a) for a in split)} before the schedule, by einc-split-index-axes: match those)")

    def _indexed_loops(self, op: et.MatchOp, stmt: StringAttr) -> list[affine.ForOp]:
        """The loops of `stmt` in the payload, from the index."""
        self._sync_index(op)
        return self.index.loops_of(stmt)

    def _sync_index(self, op: Operation) -> None:
        """Before `op` reads the index: anything but einc's transforms run since the last op
        that read it (a pass) may have changed any loop and any store: the index starts
        over."""
        prev = op.prev_op
        while prev is not None and prev is not self.last_match and isinstance(prev, INDEXED_OPS):
            prev = prev.prev_op
        if prev is not self.last_match:
            self.index.invalidate()
        self.last_match = op

    @impl(et.KnobOp)
    def run_knob(self, interpreter: Interpreter, op: et.KnobOp, args: PythonValues) -> PythonValues:
        return (op.selected.value.data,)

    @impl(transform.ParamConstantOp)
    def run_param_constant(self, interpreter: Interpreter, op: transform.ParamConstantOp, args: PythonValues) -> PythonValues:
        value = op.value
        if not isinstance(value, IntegerAttr):
            raise self.fail(op, "only integer params are supported")
        return (value.value.data,)

    def loop_pairs(self, op: et.SizedLoopOp, args: PythonValues,
                   split: Callable[[affine.ForOp, int], tuple[affine.ForOp, affine.ForOp] | lt.Failure]) -> PythonValues:  # fmt: skip
        """A sized op making two loops of each matched loop (`split(loop, size)`: tile's outer
        and inner, group_lanes' outer and lanes): the two handles."""
        size = self.size(op, args)
        firsts: list[Operation] = []
        seconds: list[Operation] = []
        for loop in self.loops(op, args[0]):
            first, second = self.check(op, split(loop, size))
            firsts.append(first)
            seconds.append(second)
        return OperationHandle(*firsts), OperationHandle(*seconds)

    @impl(et.TileOp)
    def run_tile(self, interpreter: Interpreter, op: et.TileOp, args: PythonValues) -> PythonValues:
        return self.loop_pairs(op, args, lt.tile_loop)

    @impl(et.PeelOp)
    def run_peel(self, interpreter: Interpreter, op: et.PeelOp, args: PythonValues) -> PythonValues:
        size = self.size(op, args)
        mains: list[Operation] = []
        rests: list[Operation] = []
        for loop in self.loops(op, args[0]):
            main, rest = self.check(op, lt.peel_loop(loop, size))
            mains.append(main)
            rests += [rest] if rest is not None else []
        return OperationHandle(*mains), OperationHandle(*rests)

    @impl(et.SplitConditionsOp)
    def run_split_conditions(self, interpreter: Interpreter, op: et.SplitConditionsOp, args: PythonValues) -> PythonValues:
        pieces: list[Operation] = []
        split = split_conditions_inside if op.inside is not None else split_conditions
        for loop in self.loops(op, args[0]):
            pieces += self.check(op, split(loop))
        return (OperationHandle(*pieces),)

    @impl(et.SplitPhasesOp)
    def run_split_phases(self, interpreter: Interpreter, op: et.SplitPhasesOp, args: PythonValues) -> PythonValues:
        stride = self.size(op, args)
        phases: list[Operation] = []
        for loop in self.loops(op, args[0]):
            phases += self.check(op, split_phases(loop, stride))
        return (OperationHandle(*phases),)

    @impl(et.GroupLanesOp)
    def run_group_lanes(self, interpreter: Interpreter, op: et.GroupLanesOp, args: PythonValues) -> PythonValues:
        interleaved = op.interleaved is not None
        return self.loop_pairs(op, args, lambda loop, k: group_lanes(loop, k, interleaved=interleaved))

    @impl(et.DistributeOp)
    def run_distribute(self, interpreter: Interpreter, op: et.DistributeOp, args: PythonValues) -> PythonValues:
        count = op.count.value.data
        copies: list[list[Operation]] = [[] for _ in range(count)]
        for loop in self.loops(op, args[0]):
            n = len(distribute_pieces(loop))
            if max(n, 1) != count:
                raise self.fail(op, f"the body of {describe(loop)} holds {n} pieces, not {count}")
            for k, copy in enumerate(self.check(op, distribute_loop(loop))):
                copies[k].append(copy)
        return tuple(OperationHandle(*c) for c in copies)

    @impl(et.CoalesceOp)
    def run_coalesce(self, interpreter: Interpreter, op: et.CoalesceOp, args: PythonValues) -> PythonValues:
        depth = self.size(op, args)
        return (OperationHandle(*(self.check(op, coalesce_loops(loop, depth)) for loop in self.loops(op, args[0]))),)

    @impl(et.UnrollOp)
    def run_unroll(self, interpreter: Interpreter, op: et.UnrollOp, args: PythonValues) -> PythonValues:
        factor = self.size(op, args)
        left: list[Operation] = []
        for loop in self.loops(op, args[0]):
            left += self.check(op, lt.unroll_loop(loop, factor))
        return (OperationHandle(*left),)

    @impl(et.RfactorOp)
    def run_rfactor(self, interpreter: Interpreter, op: et.RfactorOp, args: PythonValues) -> PythonValues:
        factor = self.size(op, args)
        parts: list[affine.ForOp] = []
        combines: list[affine.ForOp] = []
        for loop in self.loops(op, args[0]):
            part, combine = self.check(op, rfactor_loop(loop, factor))
            for store in part.walk():  # partials private to an enclosing loop's iteration
                if isinstance(store, affine.StoreOp) and isinstance(store.memref.owner, memref.AllocaOp):
                    self.staged(op, store.memref.owner)
            parts.append(part)
            combines.append(combine)
        return OperationHandle(*parts), OperationHandle(*combines)

    @impl(et.ReorderOp)
    def run_reorder(self, interpreter: Interpreter, op: et.ReorderOp, args: PythonValues) -> PythonValues:
        loops: list[affine.ForOp] = []
        for handle in args:
            found = self.loops(op, handle)
            if len(found) != 1:
                raise self.fail(op, f"each reorder handle must hold one loop, got {len(found)}")
            loops.append(found[0])
        new = self.check(op, lt.reorder_loops(loops))
        return tuple(OperationHandle(loop) for loop in new)

    @impl(et.RotateOp)
    def run_rotate(self, interpreter: Interpreter, op: et.RotateOp, args: PythonValues) -> PythonValues:
        n = len(op.targets)
        k = self.size(op, args, n, "rotate")
        loops: list[affine.ForOp] = []
        for handle in args[:n]:
            found = self.loops(op, handle)
            if len(found) != 1:
                raise self.fail(op, f"each rotate handle must hold one loop, got {len(found)}")
            loops.append(found[0])
        new = self.check(op, rotate_band(loops, k))
        return tuple(OperationHandle(loop) for loop in new)

    @impl(et.ParallelizeOp)
    def run_parallelize(self, interpreter: Interpreter, op: et.ParallelizeOp, args: PythonValues) -> PythonValues:
        for loop in self.loops(op, args[0]):
            self.check(op, lt.parallelize_loop(loop))
        return ()

    @impl(et.VectorizeOp)
    def run_vectorize(self, interpreter: Interpreter, op: et.VectorizeOp, args: PythonValues) -> PythonValues:
        for loop in self.loops(op, args[0]):
            self.check(op, lt.vectorize_loop(loop))
        return ()

    @impl(et.VectorizeReductionOp)
    def run_vectorize_reduction(self, interpreter: Interpreter, op: et.VectorizeReductionOp, args: PythonValues) -> PythonValues:
        for loop in self.loops(op, args[0]):
            self.check(op, mark_reduction_loop(loop))
        return ()

    @impl(et.ReuseOp)
    def run_reuse(self, interpreter: Interpreter, op: et.ReuseOp, args: PythonValues) -> PythonValues:
        firsts, seconds = self.loops(op, args[0]), self.loops(op, args[1])
        if len(firsts) != 1 or len(seconds) != 1:
            raise self.fail(op, "reuse handles must hold one loop each")
        self.check(op, reuse_values(firsts[0], seconds[0]))
        return ()

    @impl(et.BindOp)
    def run_bind(self, interpreter: Interpreter, op: et.BindOp, args: PythonValues) -> PythonValues:
        limit = op.max_threads.value.data if op.max_threads is not None else None
        loc = self.schedule.locations.get(op)
        for loop in self.loops(op, args[0]):
            self.check(op, lt.bind_loop(loop, op.axis.data, limit, str(loc) if loc else None))
        return ()

    @impl(et.TensorizeOp)
    def run_tensorize(self, interpreter: Interpreter, op: et.TensorizeOp, args: PythonValues) -> PythonValues:
        loops = self.loops(op, args[0])
        if len(loops) != 1:
            raise self.fail(op, "tensorize takes a handle to one loop")
        return (OperationHandle(self.check(op, tensorize(loops[0], op.intrinsic.data))),)

    @impl(et.FuseOp)
    def run_fuse(self, interpreter: Interpreter, op: et.FuseOp, args: PythonValues) -> PythonValues:
        firsts, seconds = self.loops(op, args[0]), self.loops(op, args[1])
        if len(firsts) != 1 or len(seconds) != 1:
            raise self.fail(op, "fuse handles must hold one loop each")
        return (OperationHandle(self.check(op, lt.fuse_loops(firsts[0], seconds[0]))),)

    @impl(et.ComputeAtOp)
    def run_compute_at(self, interpreter: Interpreter, op: et.ComputeAtOp, args: PythonValues) -> PythonValues:
        producer, loop = self._nest_and_loop(op, args, "producer", inserts_only=True)
        plan, self.planned = self.planned, None
        if plan is not None and plan.producer is producer and plan.loop is loop:
            self.check(op, apply_compute_at(plan))
        else:
            self._sync_index(op)
            self.check(op, compute_at(producer, loop, self.index.unwritten()))
        return ()

    @impl(et.ReverseComputeAtOp)
    def run_reverse_compute_at(self, interpreter: Interpreter, op: et.ReverseComputeAtOp, args: PythonValues) -> PythonValues:
        consumer, loop = self._nest_and_loop(op, args, "consumer")
        self.check(op, reverse_compute_at(consumer, loop))
        return ()

    def _nest_and_loop(
        self, op: et.AtLoopOp, args: PythonValues, what: str, inserts_only: bool = False
    ) -> tuple[affine.ForOp, affine.ForOp]:
        """The one outermost loop of the statement handle (a `match stmt` handle holds every
        loop of the statement) and the one loop of the target handle (`inserts_only`: the
        transform only inserts loops into it, compute_at's copies of the producer)."""
        found = self.loops(op, args[0], what)
        outermost = [x for x in found if not any(y is not x and y.is_ancestor(x) for y in found)]
        loops = self.loops(op, args[1], nested=not inserts_only)
        if len(outermost) != 1:
            raise self.fail(op, f"the {what} handle must hold one statement's nest, it holds {len(outermost)}")
        if len(loops) != 1:
            raise self.fail(op, f"the loop handle must hold one loop, it holds {len(loops)}")
        return outermost[0], loops[0]

    @impl(et.CacheReadOp)
    def run_cache_read(self, interpreter: Interpreter, op: et.CacheReadOp, args: PythonValues) -> PythonValues:
        return self._cache(op, args, write=False)

    @impl(et.CacheWriteOp)
    def run_cache_write(self, interpreter: Interpreter, op: et.CacheWriteOp, args: PythonValues) -> PythonValues:
        return self._cache(op, args, write=True)

    @impl(et.DoubleBufferOp)
    def run_double_buffer(self, interpreter: Interpreter, op: et.DoubleBufferOp, args: PythonValues) -> PythonValues:
        for buffer in handle_ops(args[0]):
            if not self._attached(buffer):
                raise self.fail(op, "the buffer handle refers to an op a previous transform replaced")
            self.check(op, mark_double_buffer(buffer))
        return ()

    @impl(et.StreamStoresOp)
    def run_stream_stores(self, interpreter: Interpreter, op: et.StreamStoresOp, args: PythonValues) -> PythonValues:
        loc = self.schedule.locations.get(op)
        where = f"{loc.file}:{loc.line}:{loc.col}" if loc is not None else ""
        for buffer in handle_ops(args[0]):
            if not self._attached(buffer):
                raise self.fail(op, "the buffer handle refers to an op a previous transform replaced")
            self.check(op, mark_stream_stores(buffer, where))
        return ()

    @impl(et.UnswitchOp)
    def run_unswitch(self, interpreter: Interpreter, op: et.UnswitchOp, args: PythonValues) -> PythonValues:
        limit = op.max_versions.value.data if op.max_versions is not None else MAX_VERSIONS
        versions: list[Operation] = []
        for loop in self.loops(op, args[0]):
            versions += self.check(op, unswitch_guards(loop, limit))
        return (OperationHandle(*versions),)

    @impl(et.PackRowsOp)
    def run_pack_rows(self, interpreter: Interpreter, op: et.PackRowsOp, args: PythonValues) -> PythonValues:
        loops = self.loops(op, args[1])
        if len(loops) != 1:
            raise self.fail(op, f"the loop handle must hold one loop, it holds {len(loops)}")
        for buffer in handle_ops(args[0]):
            if not self._attached(buffer) or not isinstance(buffer, memref.AllocaOp):
                raise self.fail(op, "the buffer handle refers to an op a previous transform replaced")
            self.check(op, pack_rows(buffer, loops[0]))
        return ()

    @impl(et.HoistFillOp)
    def run_hoist_fill(self, interpreter: Interpreter, op: et.HoistFillOp, args: PythonValues) -> PythonValues:
        for buffer in handle_ops(args[0]):
            if not self._attached(buffer) or not isinstance(buffer, memref.AllocaOp):
                raise self.fail(op, "the buffer handle refers to an op a previous transform replaced")
            self.check(op, hoist_fill(buffer))
        return ()

    @impl(et.PrefetchOp)
    def run_prefetch(self, interpreter: Interpreter, op: et.PrefetchOp, args: PythonValues) -> PythonValues:
        made: list[Operation] = []
        spread = None
        if op.spread is not None:
            inner = self.loops(op, args[1])
            if len(inner) != 1:
                raise self.fail(op, f"the spread handle must hold one loop, it holds {len(inner)}")
            spread = inner[0]
        for loop in self.loops(op, args[0]):
            made += self.check(op, prefetch(loop, op.tensor.data, op.distance.value.data, spread, op.evenly is not None))
        return (OperationHandle(*made),)

    def _cache(self, op: et.CacheOp, args: PythonValues, write: bool) -> PythonValues:
        allocs: list[memref.AllocaOp] = []
        for loop in self.loops(op, args[0]):
            alloca = self.check(op, cache_tensor(loop, op.tensor.data, write, op.memory.data, op.layout_order,
                                                 halo=op.halo is not None, split=op.split_at))  # fmt: skip
            if op.pad_elements is not None:
                alloca.attributes[PAD_ATTR] = IntegerAttr(op.pad_elements, i64)
            allocs.append(alloca)
        return (OperationHandle(*allocs),)


INDEXED_OPS = (*et.EINC_TRANSFORM_OPS, transform.ParamConstantOp)
"""Ops that keep `LoopIndex`'s contract: they change only the loops their handles give
(`EincTransformFunctions.loops` touches them), and store into no buffer that had no store."""
