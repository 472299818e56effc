"""Errors raised for user mistakes. Each carries a source location and renders as

    file:line:col: error: message
        <source line>
             ^~~~
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class SourceLocation:
    """A position in a source text: 1-based line and column, and the length of the span."""

    file: str
    line: int
    col: int
    length: int = 1
    source: str | None = None

    def __str__(self) -> str:
        return f"{self.file}:{self.line}:{self.col}"


class EincError(Exception):
    """Base class of every user-facing error of einc."""

    def __init__(self, message: str, loc: SourceLocation | None = None):
        super().__init__(message)
        self.message = message
        self.loc = loc

    def render(self) -> str:
        """The diagnostic in `file:line:col: error: message` form, with a caret under the span."""
        if self.loc is None:
            return f"<unknown>:0:0: error: {self.message}"
        text = f"{self.loc}: error: {self.message}"
        if self.loc.source is not None:
            lines = self.loc.source.splitlines()
            if 0 < self.loc.line <= len(lines):
                line = lines[self.loc.line - 1]
                caret = " " * (self.loc.col - 1) + "^" + "~" * max(0, self.loc.length - 1)
                text += f"\n{line}\n{caret}"
        return text

    def __str__(self) -> str:
        return self.render()


class ParseError(EincError):
    """Malformed program text."""


class SemanticError(EincError):
    """A well-formed program that breaks a rule: unknown tensor, shape or type mismatch, ..."""


class TargetError(EincError):
    """Unknown target, or a program the target cannot express."""


class ScheduleError(EincError):
    """An illegal or malformed schedule."""


class RuntimeInputError(EincError):
    """Arrays passed to a compiled kernel do not match its signature."""


class ToolchainError(EincError):
    """The target's compiler rejected the generated code (a bug in einc, reported with the source)."""


class InternalCompilerError(Exception):
    """A bug in einc (not an EincError: there is no user mistake to locate), met in `stage`."""

    def __init__(self, message: str, stage: str | None = None):
        where = f" in stage '{stage}'" if stage else ""
        super().__init__(f"internal compiler error{where}: {message}\n(this is a bug in einc, not in your program)")
        self.message = message
        self.stage = stage
