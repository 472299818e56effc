"""Schedules: transform-dialect scripts applied to the loop module by einc's interpreter.

    sched = Schedule.parse(text, "s.mlir")     # ops keep their file:line:col
    sched.knobs()                              # {"tile_n": Knob("tile_n", [8, 16, 32], 32)}
    faster = sched.with_values({"tile_n": 16}) # a clone with the knob set in memory
    scheduled = faster.apply(loops, get_all_passes())   # a transformed clone of `loops`

The entry point is `transform.named_sequence @__transform_main(%root: !transform.any_op)`;
`%root` is the payload module. einc's interpreter (einc/schedule/interpreter.py) runs it, with
the passes its `transform.apply_registered_pass` ops may name given by the caller. An illegal
transform raises ScheduleError at the op's location; the payload clone is then discarded, so
no caller ever sees half-rewritten IR.
"""

from __future__ import annotations

import weakref
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TypeVar

from xdsl.context import Context
from xdsl.dialects import transform
from xdsl.dialects.builtin import IntegerAttr, ModuleOp
from xdsl.interpreter import Interpreter
from xdsl.ir import AttributeInvT, Operation, SSAValue
from xdsl.parser import Parser, UnresolvedOperand
from xdsl.utils.exceptions import ParseError as XdslParseError
from xdsl.utils.exceptions import VerifyException
from xdsl.utils.lexer import Span

from einc.dialects import einc_transform as et
from einc.dialects.context import make_context
from einc.errors import InternalCompilerError, ParseError, ScheduleError, SourceLocation, span_location
from einc.ir import locations
from einc.passes.pipeline import PassFactories

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
        self.built_on: tuple[ModuleOp, ModuleOp] | None = None
        """(a module, the schedule applied to a clone of it) when a ScheduleBuilder made
        this schedule by applying each op as it made it (`take_applied`)."""

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

    def same_as(self, other: Schedule) -> bool:
        """Whether the two scripts are the same ops with the same attributes (knob values
        included), compared as IR: what printing both and comparing the texts would say,
        without printing."""
        return self.module.is_structurally_equivalent(other.module)

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

    def take_applied(self, payload: ModuleOp, passes: PassFactories) -> ModuleOp:
        """`apply(payload, passes)`: what the ScheduleBuilder that made this schedule from
        `payload` (the default schedule of a loop module) already applied to its clone while
        making it, where `payload` is that module, once (the module must not have changed
        since); else the schedule applied anew. A schedule is then interpreted once per
        compile."""
        built, self.built_on = self.built_on, None
        if built is None or built[0] is not payload:
            return self.apply(payload, passes)
        module = built[1]
        try:
            locations.fill_locations(module)  # as interpret does, after the last op
        except Exception as exc:  # noqa: BLE001 - as interpret
            text = self.source if self.source is not None else str(self.module)
            raise InternalCompilerError.wrap(exc, "schedule", schedule=text)
        return module

    def apply(self, payload: ModuleOp, passes: PassFactories) -> ModuleOp:
        """A clone of `payload` with the schedule applied (the argument is not modified).
        `passes`: what `transform.apply_registered_pass` may name (the caller's registry,
        einc.compiler.registry.get_all_passes() in the compiler)."""
        module = payload.clone()
        self.apply_in_place(module, passes)
        return module

    def apply_in_place(
        self, module: ModuleOp, passes: PassFactories, listeners: Sequence[Interpreter.Listener] = ()
    ) -> None:
        """Apply to `module` itself: on ScheduleError it may be partly transformed, so callers
        that keep the module on failure should use `apply` (a clone). `listeners` observe
        each schedule op as it is interpreted (`--check-numerics` steps through them)."""
        from einc.schedule.interpreter import interpret  # the xDSL interpreters load only to apply a script

        interpret(self, module, passes, listeners)

    def __str__(self) -> str:
        return str(self.module)
