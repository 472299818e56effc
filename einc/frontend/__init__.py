"""The einc frontend: Antares IR text to a verified `ein`-level module.

    program = parse_program("output0[N, M] +=! input0[N, K] * input1[K, M]",
                            input_dict={"input0": {"dtype": "float32", "shape": [64, 32]},
                                        "input1": {"dtype": "float32", "shape": [32, 16]}})
    module = build_module(program)

Stages: `lexer` (tokens) -> `parser` (syntax tree, `ast`) -> `sema` (checked program,
`checked`) -> `irgen` (xDSL module). Every user mistake raises an `EincError` with a location.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from math import prod
from typing import TypeVar

from xdsl.dialects.builtin import ModuleOp

from einc.errors import EincError, InternalCompilerError, SemanticError
from einc.frontend import ast, checked, irgen, parser, sema
from einc.frontend.checked import TensorInfo
from einc.frontend.diagnostics import SourceText
from einc.ir.depth import allow_deep_nests

__all__ = [
    "MAX_PROGRAM_BYTES", "InternalCompilerError", "Program", "TensorInfo", "build_module", "parse_program",
]  # fmt: skip

MAX_PROGRAM_BYTES = 1 << 33
"""The most memory a program's tensors may take together (its inputs, its intermediate
tensors and its results): 8 GiB (docs/LANGUAGE.md). Each dimension is also at most 2^31 - 1."""

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
        )


def parse_program(
    source: str,
    filename: str = "<string>",
    input_dict: Mapping[str, Mapping[str, object]] | None = None,
    extra_outputs: Sequence[str] | None = None,
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
        allow_deep_nests()
        module = parser.parse(text)
        inputs, outputs, statements = sema.Checker(text).check(module, input_dict, extra_outputs)
        check_total_size(text, module, inputs, statements)
        return Program(inputs, outputs, statements, source, filename)

    return _guarded(text, run, "parse")


def _nbytes(tensor: TensorInfo) -> int:
    """The tensor's size in bytes (the dtype's width is the number in its name, `bool` 1)."""
    width = re.search(r"\d+", tensor.dtype)
    return prod(tensor.shape) * (int(width.group()) // 8 if width else 1)


def _gib(nbytes: int) -> str:
    return f"{nbytes / (1 << 30):.3g} GiB"


def check_total_size(
    text: SourceText, module: ast.Module, inputs: list[TensorInfo], statements: list[checked.Statement]
) -> None:
    """A SemanticError when the program's tensors take more than MAX_PROGRAM_BYTES together:
    at the input declaration or statement whose tensor passes the limit (line 1 for an
    `input_dict` input), naming the largest tensors."""
    spans = {d.name: d.span for d in module.inputs} | {s.output: s.output_span for s in module.statements}
    tensors = [*inputs, *(s.output for s in statements)]
    total = 0
    for tensor in tensors:
        total += _nbytes(tensor)
        if total > MAX_PROGRAM_BYTES:
            break
    else:
        return
    total = sum(_nbytes(t) for t in tensors)
    largest = sorted(tensors, key=lambda t: -_nbytes(t))[:3]
    listed = ", ".join(
        f"{t.name}: {t.dtype}{list(t.shape)} = {_gib(_nbytes(t))}"
        for t in largest
    )
    raise SemanticError(
        f"the program's tensors take {_gib(total)} ({total} bytes) together, more than einc's "
        f"limit of {_gib(MAX_PROGRAM_BYTES)} for a program's inputs, intermediate tensors and "
        f"results (the largest: {listed})",
        text.location(spans.get(tensor.name)),
    )


def build_module(program: Program) -> ModuleOp:
    """The verified `ein`-level module of a checked program: one `func.func @kernel`."""
    text = SourceText(program.source, program.filename)
    return _guarded(
        text, lambda: irgen.build(program.inputs, program.outputs, program.statements, program.filename), "ein"
    )
