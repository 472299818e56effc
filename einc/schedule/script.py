"""Schedules: transform-dialect scripts applied to the loop module by einc's interpreter.

    sched = Schedule.parse(text, "s.mlir")     # ops keep their file:line:col
    sched.knobs()                              # {"tile_n": Knob("tile_n", [8, 16, 32], 32)}
    faster = sched.with_values({"tile_n": 16}) # a clone with the knob set in memory
    scheduled = faster.apply(loops)            # a transformed clone of `loops`

The entry point is `transform.named_sequence @__transform_main(%root: !transform.any_op)`;
`%root` is the payload module. einc's `transform.einc.*` ops (einc/dialects/einc_transform.py) are
interpreted by `EincTransformFunctions`, an extension of xDSL's `TransformFunctions` (which
keeps `transform.structured.match` and `apply_registered_pass`). An illegal transform raises
ScheduleError at the op's location; the payload clone is then discarded, so no caller ever
sees half-rewritten IR.
"""

from __future__ import annotations

import weakref
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, TypeVar

from xdsl.dialects import affine, memref, transform
from xdsl.dialects.builtin import IntegerAttr, LocationAttr, ModuleOp, NameLoc, NoneAttr, StringAttr
from xdsl.interpreter import (
    Interpreter,
    InterpreterFunctions,
    PythonValues,
    impl,
    register_impls,
)
from xdsl.interpreters.transform import OperationHandle
from xdsl.context import Context
from xdsl.ir import AttributeInvT, Operation, SSAValue
from xdsl.parser import Parser, UnresolvedOperand
from xdsl.utils.exceptions import ParseError as XdslParseError
from xdsl.utils.exceptions import VerifyException
from xdsl.utils.lexer import Span

from einc.dialects.context import make_context
from einc.dialects import einc_transform as et
from einc.errors import (
    EincError,
    InternalCompilerError,
    ScheduleError,
    SourceLocation,
    span_location,
)
from einc.ir import locations
from einc.transforms import loop_transforms as lt
from einc.transforms.loops import LoopIndex
from einc.transforms.rfactor import rfactor_loop

if TYPE_CHECKING:
    from einc.transforms.compute_at import ComputeAtPlan

T = TypeVar("T")

ENTRY = "__transform_main"
OpT = TypeVar("OpT", bound=Operation)


@dataclass(frozen=True)
class Knob:
    name: str
    options: tuple[int, ...]
    selected: int


class _LocatingParser(Parser):
    """xDSL's parser, remembering where each operation starts (ops carry no location) and
    where each value is first used before a definition (xDSL reports undefined values at
    the end of the input)."""

    def __init__(self, ctx: Context, input: str, name: str = "<unknown>") -> None:
        super().__init__(ctx, input, name)
        self.offsets: dict[Operation, int] = {}
        self.first_uses: dict[str, Span] = {}
        self.failed_at: int | None = None

    def parse_operation(self) -> Operation:
        start = self._current_token.span.start
        try:
            op = super().parse_operation()
        except VerifyException:  # an attribute or op verified while parsed: the innermost op
            self.failed_at = start if self.failed_at is None else self.failed_at
            raise
        self.offsets[op] = start
        return op

    def resolve_operand(self, operand: UnresolvedOperand, type: AttributeInvT) -> SSAValue[AttributeInvT]:
        if operand.operand_name not in self.ssa_values:
            self.first_uses.setdefault(operand.operand_name, operand.span)
        return super().resolve_operand(operand, type)

    def schedule_error(self, err: XdslParseError) -> ScheduleError:
        """xDSL's parse error as a ScheduleError at its own position; an undefined handle
        at its first use."""
        undefined = [self.first_uses[n] for n in self.forward_ssa_references if n in self.first_uses]
        if err.msg.startswith("values used but not defined") and undefined:
            span = min(undefined, key=lambda s: s.start)
            return ScheduleError(
                f"undefined handle {span.text}: no op before its use defines it", span_location(span)
            )
        return ScheduleError(f"malformed schedule: {err.msg}", span_location(err.span))

    def locations(self, text: str, filename: str, line_offset: int = 0) -> dict[Operation, SourceLocation]:
        """Each parsed op's location in `text` (its lines counted from `line_offset`, for a
        chunk of a split file)."""
        source = "\n" * line_offset + text
        return {
            op: _location(source, filename, line_offset + offset, len(op.name))
            for op, offset in self.offsets.items()
        }


def _location(source: str, filename: str, offset: int, length: int = 1) -> SourceLocation:
    line = source.count("\n", 0, offset) + 1
    col = offset - (source.rfind("\n", 0, offset) + 1) + 1
    return SourceLocation(filename, line, col, length, source)


PARSED_AT: weakref.WeakKeyDictionary[Operation, SourceLocation] = weakref.WeakKeyDictionary()
"""Where einc-opt found each op of its MLIR input (xDSL ops carry no location): an embedded
`@__transform_main` that `einc-apply-schedule` takes out of the module reports its errors
there. Weak: an op that is gone leaves no entry."""


def parse_with_locations(
    ctx: Context, text: str, filename: str, line_offset: int = 0, implicit_module: bool = True
) -> tuple[ModuleOp, dict[Operation, SourceLocation]]:
    """`text` parsed, with each op's location (its lines counted from `line_offset`, for a
    chunk of a split file); xDSL's ParseError as it is."""
    parser = _LocatingParser(ctx, text, filename)
    try:
        module = parser.parse_module(implicit_module)
    except VerifyException as err:  # verified while parsed (an attribute's rules): at its op
        if parser.failed_at is None:
            raise
        from einc.errors import ParseError

        message = str(err).splitlines()[0] if str(err) else "the input does not verify"
        source = "\n" * line_offset + text
        raise ParseError(message, _location(source, filename, line_offset + parser.failed_at)) from None
    return module, parser.locations(text, filename, line_offset)


class Schedule:
    """A parsed schedule: its module (holding `@__transform_main`) and each op's location."""

    def __init__(
        self, module: ModuleOp, filename: str = "<schedule>", source: str | None = None,
        locations: Mapping[Operation, SourceLocation] | None = None,
    ):
        self.module = module
        self.filename = filename
        self.source = source
        self.locations = dict(locations or {})
        self.staged_by: weakref.WeakKeyDictionary[Operation, Operation] = weakref.WeakKeyDictionary()
        """Each staging buffer (`memref.alloca`) an application made -> the op that made it
        (cache_read/_write, compute_at): checks after the schedule point at that op."""

    @classmethod
    def parse(cls, text: str, filename: str = "<schedule>") -> Schedule:
        ctx = make_context()
        parser = _LocatingParser(ctx, text, filename)
        try:
            module = parser.parse_module()
        except XdslParseError as err:
            raise parser.schedule_error(err) from None
        schedule = cls(module, filename, text, parser.locations(text, filename))
        schedule.verify()
        schedule.entry()  # fail early without an entry point
        return schedule

    def verify(self) -> None:
        """Each op's verifier (a knob's value among its options, one size per sized op, ...)
        and dominance (a handle is defined before its use: xDSL's parser resolves forward
        references): a ScheduleError at the first op that fails."""
        for op in self.module.walk():
            try:
                op.verify(verify_nested_ops=False)
            except VerifyException as err:
                cause = err.__cause__ if isinstance(err.__cause__, VerifyException) else err
                raise self.error(op, str(cause).splitlines()[-1] if str(cause) else op.name) from None
        self._check_dominance()

    def _check_dominance(self) -> None:
        """Every operand is a block argument or a result of an op before its user, in the same
        block or one enclosing it (the transform scripts are straight-line)."""
        for op in self.module.walk():
            for operand in op.operands:
                owner = operand.owner
                if not isinstance(owner, Operation):
                    continue
                user: Operation | None = op
                while user is not None and user.parent_block() is not owner.parent_block():
                    user = user.parent_op()
                if user is None or not owner.is_before_in_block(user):
                    name = f"%{operand.name_hint}" if operand.name_hint else "a handle"
                    raise self.error(op, f"{name} is used before its definition")

    def error(self, op: Operation, message: str) -> ScheduleError:
        """A ScheduleError at `op` (named in the message when it has no location)."""
        loc = self.locations.get(op)
        return ScheduleError(message if loc is not None else f"{op.name}: {message}", loc)

    def entry(self) -> transform.NamedSequenceOp:
        for op in self.module.walk():
            if isinstance(op, transform.NamedSequenceOp) and op.sym_name.data == ENTRY:
                return op
        raise ScheduleError(
            f"the schedule has no 'transform.named_sequence @{ENTRY}'",
            SourceLocation(self.filename, 1, 1, source=self.source),
        )

    def knobs(self) -> dict[str, Knob]:
        return {
            op.knob_name.data: Knob(op.knob_name.data, tuple(op.values), op.selected.value.data)
            for op in self.module.walk()
            if isinstance(op, et.KnobOp)
        }

    def ops(self, kind: type[OpT]) -> list[OpT]:
        """The schedule's ops of one kind (`et.TileOp`, ...), in order."""
        return [op for op in self.module.walk() if isinstance(op, kind)]

    def with_values(self, values: Mapping[str, int]) -> Schedule:
        """A clone with the named knobs set (each to one of its options)."""
        clone = self.module.clone()
        mapping = dict(zip(self.module.walk(), clone.walk()))
        knobs = {op.knob_name.data: op for op in clone.walk() if isinstance(op, et.KnobOp)}
        for name, value in values.items():
            if name not in knobs:
                raise ScheduleError(
                    f"the schedule has no knob '{name}' (knobs: {', '.join(sorted(knobs))})",
                    SourceLocation(self.filename, 1, 1, source=self.source),
                )
            op = knobs[name]
            if value not in op.values:
                loc = self.locations.get(next(o for o, c in mapping.items() if c is op))
                raise ScheduleError(f"knob '{name}': {value} is not one of {op.values}", loc)
            op.selected = IntegerAttr(value, op.selected.type)
        locations = {mapping[o]: loc for o, loc in self.locations.items() if o in mapping}
        return Schedule(clone, self.filename, self.source, locations)

    def apply(self, payload: ModuleOp) -> ModuleOp:
        """A clone of `payload` with the schedule applied (the argument is not modified)."""
        module = payload.clone()
        self.apply_in_place(module)
        return module

    def apply_in_place(self, module: ModuleOp, listeners: Sequence[Interpreter.Listener] = ()) -> None:
        """Apply to `module` itself: on ScheduleError it may be partly transformed, so callers
        that keep the module on failure should use `apply` (a clone). `listeners` observe
        each schedule op as it is interpreted (`--check-numerics` steps through them)."""
        ctx = make_context()
        from einc.passes import get_all_passes

        interpreter = Interpreter(self.module, listeners=(_LocatingListener(self, module), *listeners))
        from einc.schedule.interpreter import RegisteredPassFunctions

        interpreter.register_implementations(RegisteredPassFunctions(self, ctx, get_all_passes()))
        interpreter.register_implementations(EincTransformFunctions(self, module))
        try:
            interpreter.call_op(self.entry(), (OperationHandle(module),))
            locations.fill_locations(module)  # what a transform made outside the ops it was given
        except EincError:
            raise
        except Exception as exc:  # noqa: BLE001 - an interpreter or transform bug
            schedule = self.source if self.source is not None else str(self.module)
            raise InternalCompilerError.wrap(exc, "schedule", schedule=schedule)

    def __str__(self) -> str:
        return str(self.module)


def resolve_schedule(schedule: object, target: str, module: ModuleOp) -> Schedule | None:
    """The schedule to apply to `module`: a Schedule as is, schedule text parsed, None for
    the target's default schedule, "none" for no schedule at all."""
    if isinstance(schedule, Schedule):
        return schedule
    if schedule is None:
        from einc.targets import get_target

        default = get_target(target).default_schedule(module)
        assert default is None or isinstance(default, Schedule), default
        return default
    if isinstance(schedule, str):
        if schedule.strip() == "none":
            return None
        return Schedule.parse(schedule, "<schedule>")
    check_schedule_argument(schedule)
    raise AssertionError(schedule)


def check_schedule_argument(schedule: object) -> None:
    """Refuse a `schedule=` argument that is not a Schedule, schedule text, or None."""
    if schedule is None or isinstance(schedule, Schedule | str):
        return
    raise ScheduleError(
        f"schedule= takes a Schedule, the text of a schedule script or 'none', "
        f"not {type(schedule).__name__} ({schedule!r:.40})",
        SourceLocation("<schedule argument>", 1, 1),
    )


# ---- the interpreter ---------------------------------------------------------------------------


class _LocatingListener(Interpreter.Listener):
    """Locates the payload ops each transform op makes (new ones, and clones) at
    `fused[statement loc, schedule op loc]` (einc.ir.locations.derived_from)."""

    def __init__(self, schedule: Schedule, payload: ModuleOp):
        self.schedule = schedule
        self.payload = payload
        self.watches: list[locations.Watch | None] = []

    def will_interpret_op(self, op: Operation, args: PythonValues) -> None:
        if not isinstance(op, _NOT_TRANSFORMS):
            targets = [t for a in args if isinstance(a, OperationHandle) for t in a.ops]
            self.watches.append(locations.Watch.around(self.payload, targets))

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

    def loops(self, op: Operation, handle: object, what: str = "loop") -> list[affine.ForOp]:
        assert isinstance(handle, OperationHandle)
        result = []
        for payload_op in handle.ops:
            if not self._attached(payload_op):
                raise self.fail(op, f"the {what} handle refers to an op a previous transform replaced (match it again)")
            if not isinstance(payload_op, affine.ForOp):
                raise self.fail(op, f"expected affine.for ops, got '{payload_op.name}'")
            self.index.touch(payload_op)  # every einc transform changes only what it is given
            result.append(payload_op)
        return result

    def _attached(self, payload_op: Operation) -> bool:
        parent: Operation | None = payload_op
        while parent is not None:
            if parent is self.payload:
                return True
            parent = parent.parent_op()
        return False

    def size(self, op: et.SizedLoopOp, args: PythonValues) -> int:
        if op.static_size is not None:
            return op.static_size.value.data
        value = args[1]
        if isinstance(value, list | tuple):
            value = value[0] if len(value) == 1 else None
        if isinstance(value, IntegerAttr):
            value = value.value.data
        if not isinstance(value, int):
            raise self.fail(op, "the size param holds no single integer")
        return value

    def check(self, op: Operation, result: T | lt.Failure) -> T:
        if isinstance(result, lt.Failure):
            raise self.fail(op, result.message)
        if isinstance(result, memref.AllocaOp):
            self.staged(op, result)
        return result

    def staged(self, op: Operation, alloca: memref.AllocaOp) -> None:
        """Record that schedule op `op` made the local buffer `alloca` (located refusals)."""
        from einc.ir.attrs import STAGED_LOC_ATTR

        self.schedule.staged_by[alloca] = op
        loc = self.schedule.locations.get(op)
        if loc is not None:
            alloca.attributes[STAGED_LOC_ATTR] = StringAttr(f"{loc.file}:{loc.line}:{loc.col}")

    # -- ops --
    @impl(et.MatchOp)
    def run_match(self, interpreter: Interpreter, op: et.MatchOp, args: PythonValues) -> PythonValues:
        (roots,) = args
        assert isinstance(roots, OperationHandle)
        name = op.op_name.data if op.op_name is not None else affine.ForOp.name
        found = []
        for root in roots.ops:
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
        if not found and roots.ops:  # inside an empty handle (a peel with no rest): nothing
            raise self.fail(op, "matched no operation")
        return (OperationHandle(*found),)

    def _indexed_loops(self, op: et.MatchOp, stmt: StringAttr) -> list[affine.ForOp]:
        """The loops of `stmt` in the payload, from the index; anything but einc's transforms
        run since the last match (a pass) may have changed any loop: the index starts over."""
        prev = op.prev_op
        while prev is not None and prev is not self.last_match and isinstance(prev, INDEXED_OPS):
            prev = prev.prev_op
        if prev is not self.last_match:
            self.index.invalidate()
        self.last_match = op
        return self.index.loops_of(stmt)

    @impl(et.KnobOp)
    def run_knob(self, interpreter: Interpreter, op: et.KnobOp, args: PythonValues) -> PythonValues:
        return (op.selected.value.data,)

    @impl(transform.ParamConstantOp)
    def run_param_constant(self, interpreter: Interpreter, op: transform.ParamConstantOp, args: PythonValues) -> PythonValues:
        value = op.value
        if not isinstance(value, IntegerAttr):
            raise self.fail(op, "only integer params are supported")
        return (value.value.data,)

    @impl(et.TileOp)
    def run_tile(self, interpreter: Interpreter, op: et.TileOp, args: PythonValues) -> PythonValues:
        size = self.size(op, args)
        outers, inners = [], []
        for loop in self.loops(op, args[0]):
            outer, inner = self.check(op, lt.tile_loop(loop, size))
            outers.append(outer)
            inners.append(inner)
        return OperationHandle(*outers), OperationHandle(*inners)

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
        parts, combines = [], []
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
        loops = []
        for handle in args:
            found = self.loops(op, handle)
            if len(found) != 1:
                raise self.fail(op, f"each reorder handle must hold one loop, got {len(found)}")
            loops.append(found[0])
        new = self.check(op, lt.reorder_loops(loops))
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
        from einc.transforms.vectorize import mark_reduction_loop

        for loop in self.loops(op, args[0]):
            self.check(op, mark_reduction_loop(loop))
        return ()

    @impl(et.ReuseOp)
    def run_reuse(self, interpreter: Interpreter, op: et.ReuseOp, args: PythonValues) -> PythonValues:
        from einc.transforms.loop_cse import reuse_values

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

    @impl(et.FuseOp)
    def run_fuse(self, interpreter: Interpreter, op: et.FuseOp, args: PythonValues) -> PythonValues:
        firsts, seconds = self.loops(op, args[0]), self.loops(op, args[1])
        if len(firsts) != 1 or len(seconds) != 1:
            raise self.fail(op, "fuse handles must hold one loop each")
        return (OperationHandle(self.check(op, lt.fuse_loops(firsts[0], seconds[0]))),)

    @impl(et.ComputeAtOp)
    def run_compute_at(self, interpreter: Interpreter, op: et.ComputeAtOp, args: PythonValues) -> PythonValues:
        from einc.transforms.compute_at import apply_compute_at, compute_at

        producer, loop = self._nest_and_loop(op, args, "producer")
        plan, self.planned = self.planned, None
        if plan is not None and plan.producer is producer and plan.loop is loop:
            self.check(op, apply_compute_at(plan))
        else:
            self.check(op, compute_at(producer, loop))
        return ()

    @impl(et.ReverseComputeAtOp)
    def run_reverse_compute_at(self, interpreter: Interpreter, op: et.ReverseComputeAtOp, args: PythonValues) -> PythonValues:
        from einc.transforms.compute_at import reverse_compute_at

        consumer, loop = self._nest_and_loop(op, args, "consumer")
        self.check(op, reverse_compute_at(consumer, loop))
        return ()

    def _nest_and_loop(self, op: et.AtLoopOp, args: PythonValues, what: str) -> tuple[affine.ForOp, affine.ForOp]:
        """The one outermost loop of the statement handle (a `match stmt` handle holds every
        loop of the statement) and the one loop of the target handle."""
        found = self.loops(op, args[0], what)
        outermost = [x for x in found if not any(y is not x and y.is_ancestor(x) for y in found)]
        loops = self.loops(op, args[1])
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

    def _cache(self, op: et.CacheOp, args: PythonValues, write: bool) -> PythonValues:
        from einc.transforms.staging import cache_tensor

        allocs = []
        for loop in self.loops(op, args[0]):
            allocs.append(self.check(op, cache_tensor(loop, op.tensor.data, write, op.memory.data)))
        return (OperationHandle(*allocs),)


INDEXED_OPS = (*et.EINC_TRANSFORM_OPS, transform.ParamConstantOp)
"""Ops that keep `LoopIndex`'s contract: they change only the loops their handles give
(`EincTransformFunctions.loops` touches them)."""
