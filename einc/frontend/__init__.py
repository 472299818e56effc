"""The einc frontend: Antares IR text to a verified `ein`-level module.

    program = parse_program("output0[N, M] +=! input0[N, K] * input1[K, M]",
                            input_dict={"input0": {"dtype": "float32", "shape": [64, 32]},
                                        "input1": {"dtype": "float32", "shape": [32, 16]}})
    module = build_module(program)

Stages: `lexer` (tokens) -> `parser` (syntax tree, `ast`) -> `sema` (checked program,
`checked`) -> `irgen` (xDSL module). Every user mistake raises an `EincError` with a location.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TypeVar

from xdsl.dialects.builtin import ModuleOp

from einc.errors import EincError, InternalCompilerError, SemanticError
from einc.frontend import checked, irgen, parser, sema
from einc.frontend.checked import TensorInfo
from einc.frontend.diagnostics import SourceText

__all__ = ["InternalCompilerError", "Program", "TensorInfo", "build_module", "parse_program"]

_T = TypeVar("_T")


@dataclass(frozen=True)
class Program:
    """A checked program: its inputs (declaration / input_dict order), its results, and its
    statements with their axes, shapes and typed expressions."""

    inputs: list[TensorInfo]
    outputs: list[TensorInfo]
    statements: list[checked.Statement]
    source: str
    filename: str


def _guarded(source: SourceText, stage: Callable[[], _T], name: str) -> _T:
    """Runs a frontend stage; a Python exception other than `EincError` is a bug in einc and
    is raised as an `InternalCompilerError` (not an EincError: no user mistake to locate),
    the original as its cause, the program text in its reproducer context."""
    try:
        return stage()
    except EincError:
        raise
    except Exception as exc:  # noqa: BLE001 - the boundary of the frontend
        raise InternalCompilerError.wrap(
            exc, name, program=source.text, filename=source.filename
        ) from exc


def parse_program(
    source: str,
    filename: str = "<string>",
    input_dict: dict[str, Any] | None = None,
    extra_outputs: list[str] | None = None,
) -> Program:
    """Parses and checks a program.

    With `input_dict` (Antares' form), the inputs come from it, like
    `{"input0": {"dtype": "float32", "shape": [1024, 512]}}`; `.ein` declarations
    (`input x: float32[4]`, `output y`) may add to it but must agree. `extra_outputs` lists
    results besides the last statement's output, which is always one.
    """
    text = SourceText(source if isinstance(source, str) else "", filename)
    if not isinstance(source, str):
        raise SemanticError(f"the program must be a string, found {type(source).__name__}",
                        text.location(None))  # fmt: skip

    def run() -> Program:
        module = parser.parse(text)
        inputs, outputs, statements = sema.Checker(text).check(module, input_dict, extra_outputs)
        return Program(inputs, outputs, statements, source, filename)

    return _guarded(text, run, "parse")


def build_module(program: Program) -> ModuleOp:
    """The verified `ein`-level module of a checked program: one `func.func @kernel`."""
    text = SourceText(program.source, program.filename)
    return _guarded(
        text, lambda: irgen.build(program.inputs, program.outputs, program.statements), "ein"
    )
