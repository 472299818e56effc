"""`einc-apply-schedule`: apply a transform-dialect schedule to the loop module.

    einc-opt prog.ein -p 'convert-ein-to-affine,einc-apply-schedule{file=s.mlir}'
    einc-opt loops_with_schedule.mlir -p einc-apply-schedule

With `file`, the schedule is read from there (errors point at its ops, file:line:col);
without, the module's own `transform.named_sequence @__transform_main` is taken out of it and
applied to the rest (errors point at its ops when einc-opt parsed the module, else name
the op). The interpreter is einc.schedule.script's.

With `target` (a device target, as `einc compile -t` would check it), the local buffers the
schedule made are checked to be each work-item's own, of a type the target has arrays of,
and a refusal points at the cache/compute_at op that made the buffer:

    einc-opt prog.ein -p 'convert-ein-to-affine,einc-apply-schedule{file="s.mlir" target="opencl"}'
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import ClassVar

from xdsl.context import Context
from xdsl.dialects import transform
from xdsl.dialects.builtin import ModuleOp
from xdsl.interpreter import Interpreter
from xdsl.passes import ModulePass

from einc.errors import ScheduleError, SourceLocation
from einc.passes.pipeline import PassFactories
from einc.schedule.checks import check_schedule, check_scheduled
from einc.schedule.script import ENTRY, PARSED_AT, Schedule


@dataclass(frozen=True)
class ApplySchedulePass(ModulePass):
    name = "einc-apply-schedule"

    file: str | None = None
    target: str | None = None

    available: ClassVar[Callable[[], PassFactories]] = dict
    """The passes the schedule's `transform.apply_registered_pass` ops may name: the registry
    this pass was registered with (`using`); none for the class itself."""

    @classmethod
    def using(cls, available: Callable[[], PassFactories]) -> type[ApplySchedulePass]:
        """This pass handing `available()` (a registry, read when the pass runs) to the
        schedule interpreter: what einc.compiler.registry registers."""
        attrs = {"available": staticmethod(available), "__module__": cls.__module__, "__doc__": cls.__doc__,
                 "__qualname__": cls.__qualname__}  # fmt: skip
        return type(cls.__name__, (cls,), attrs)

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        self.run(op, self.schedule_for(op))

    def schedule_for(self, op: ModuleOp) -> Schedule:
        """The schedule this pass applies to `op`: the file's, or the one embedded in `op`
        (then taken out of it)."""
        if self.file is not None:
            try:
                text = Path(self.file).read_text()
            except OSError as err:
                raise ScheduleError(f"cannot read schedule: {err}", SourceLocation(self.file, 1, 1)) from None
            return Schedule.parse(text, self.file)
        entries = [
            s for s in op.walk() if isinstance(s, transform.NamedSequenceOp) and s.sym_name.data == ENTRY
        ]
        if not entries:
            first = next(iter(op.body.block.ops), None)
            raise ScheduleError(
                f"einc-apply-schedule: no file given and no 'transform.named_sequence @{ENTRY}' in the module",
                PARSED_AT.get(first) if first is not None else None,
            )  # fmt: skip
        holder = ModuleOp([])
        for entry in entries:
            entry.detach()
        holder.body.block.add_op(entries[0])
        # ops einc-opt parsed carry their place in its input (einc.schedule.script.PARSED_AT)
        locations = {o: PARSED_AT[o] for o in holder.walk() if o in PARSED_AT}
        schedule = Schedule(holder, "<embedded schedule>", locations=locations)
        schedule.verify()  # as a schedule file is: a handle used before its definition, at its op
        return schedule

    def run(self, op: ModuleOp, schedule: Schedule, listeners: Sequence[Interpreter.Listener] = ()) -> None:
        """Apply `schedule` to `op`; with a target, its schedule checks run before and after
        (as in `einc compile`). `listeners` observe each schedule op (`--check-numerics`)."""
        from einc.targets import get_target

        target = get_target(self.target) if self.target is not None else None
        if target is not None:
            check_schedule(schedule, target)
        schedule.apply_in_place(op, self.available(), listeners)
        if target is not None:
            check_scheduled(schedule, op, target)
