"""The frontend's check of a program against a target's dtypes: run before any lowering, so
a refusal points at the source text that needs the dtype."""

from __future__ import annotations

from typing import TYPE_CHECKING

from einc.frontend import checked
from einc.frontend.diagnostics import SourceText

if TYPE_CHECKING:
    from einc.frontend import Program
    from einc.targets.descriptions import TargetDescription


def check_program_dtypes(desc: TargetDescription | None, program: Program) -> None:
    """Refuse, before any lowering, a checked frontend program (einc.frontend.Program) that
    stores a tensor or computes a value of a dtype the device target lacks (`desc`: its
    limits, given by the caller): TargetError naming the tensor (or the value) and its dtype,
    at the first place in the source that needs it (a tensor's first read or its statement's
    output; an input read nowhere, at line 1). Targets without limits (C) accept every dtype."""
    if desc is None:
        return
    text = SourceText(program.source, program.filename)
    dtypes = {t.name: t.dtype for t in (*program.inputs, *program.outputs)}
    read: set[str] = set()

    def visit(expr: checked.Expr) -> None:  # operands first: a tensor is named before its arithmetic
        for child in checked.children(expr):
            visit(child)
        if isinstance(expr, checked.Load):
            read.add(expr.tensor)
            dtype = dtypes.get(expr.tensor)
            if dtype is not None and not desc.stores(dtype):
                raise desc.refuse_dtype(dtype, f"tensor '{expr.tensor}'", text.location(expr.span))
        elif not desc.computes(expr.dtype) and expr.dtype != "bool":
            raise desc.refuse_dtype(expr.dtype, "value", text.location(expr.span))

    for statement in program.statements:
        for expr in (*(statement.scatter or ()), statement.expr):  # a scatter's indices too
            visit(expr)
        out = statement.output
        dtypes[out.name] = out.dtype
        if not desc.stores(out.dtype):
            loc = text.location(statement.syntax.output_span)
            raise desc.refuse_dtype(out.dtype, f"tensor '{out.name}'", loc)
    for tensor in program.inputs:
        if tensor.name not in read and not desc.stores(tensor.dtype):
            raise desc.refuse_dtype(tensor.dtype, f"tensor '{tensor.name}'", text.location(None))
