"""`transform.apply_registered_pass` in einc's schedules: xDSL's implementation, with the
op's options taken (xDSL drops them) and every mistake a ScheduleError at the op."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING

from xdsl.context import Context
from xdsl.dialects import transform
from xdsl.dialects.builtin import (
    ArrayAttr,
    FloatAttr,
    IntegerAttr,
    IntegerType,
    ModuleOp,
    StringAttr,
)
from xdsl.interpreter import Interpreter, PythonValues, impl, register_impls
from xdsl.interpreters.transform import OperationHandle, TransformFunctions
from xdsl.ir import Attribute
from xdsl.passes import ModulePass
from xdsl.utils.exceptions import DiagnosticException

from einc.errors import EincError

if TYPE_CHECKING:
    from einc.schedule.script import Schedule


@register_impls
class RegisteredPassFunctions(TransformFunctions):
    """xDSL's transform interpreter, its `transform.apply_registered_pass` taking the op's
    `options` (xDSL ignores them) and refusing an unknown pass (with the closest names), an
    option the pass lacks, a bad value, or a pass that fails on the loops as a ScheduleError
    at the op (not as a bug in einc)."""

    def __init__(self, schedule: Schedule, ctx: Context, passes: Mapping[str, Callable[[], type[ModulePass]]]):
        super().__init__(ctx, dict(passes))
        self.schedule = schedule

    @impl(transform.ApplyRegisteredPassOp)
    def run_apply_registered_pass_op(
        self, interpreter: Interpreter, op: transform.ApplyRegisteredPassOp, args: PythonValues
    ) -> PythonValues:
        from xdsl.passes import PassPipeline

        from einc.passes import parse_passes

        (targets,) = args
        assert isinstance(targets, OperationHandle)
        options = " ".join(f"{k}={_option_text(v)}" for k, v in op.options.data.items())
        spec = f"{op.pass_name.data}{{{options}}}" if options else op.pass_name.data
        try:
            pipeline = PassPipeline(parse_passes(spec, self.passes, "transform.apply_registered_pass"))
        except EincError as err:
            raise self.schedule.error(op, f"transform.apply_registered_pass: {err.message}") from None
        for target in targets.ops:
            if not isinstance(target, ModuleOp):
                raise self.schedule.error(op, "transform.apply_registered_pass applies to the module (%root) only")
            try:
                pipeline.apply(self.ctx, target)
            except DiagnosticException as err:
                raise self.schedule.error(op, f"pass '{op.pass_name.data}' failed: {err}") from None
        return (targets,)


def _option_text(value: Attribute) -> str:
    """A pass option's attribute as pipeline text (`size=32`, `target="cuda"`, `flag=true`)."""
    if isinstance(value, StringAttr):
        return f'"{value.data}"'
    if isinstance(value, IntegerAttr):
        if value.type == IntegerType(1):
            return "true" if value.value.data else "false"
        return str(value.value.data)
    if isinstance(value, FloatAttr):
        return str(value.value.data)
    if isinstance(value, ArrayAttr):
        return ",".join(_option_text(v) for v in value.data)
    return str(value)
