"""Turning spans into `SourceLocation`s, and raising located errors."""

from __future__ import annotations

from dataclasses import dataclass
from typing import NoReturn

from einc.errors import InternalCompilerError, ParseError, SemanticError, SourceLocation
from einc.frontend.ast import Span

__all__ = ["InternalCompilerError", "SourceText"]


@dataclass(frozen=True)
class SourceText:
    """A source text and the file name its diagnostics carry."""

    text: str
    filename: str

    def location(self, span: Span | None) -> SourceLocation:
        """The location of `span`; line 1, column 1 when there is none (API-level errors)."""
        if span is None:
            return SourceLocation(self.filename, 1, 1, 1, self.text)
        line_end = self.text.find("\n", span.start)
        if line_end < 0:
            line_end = len(self.text)
        length = max(1, min(span.end, line_end) - span.start)
        return SourceLocation(self.filename, span.line, span.col, length, self.text)

    def parse_error(self, message: str, span: Span | None) -> NoReturn:
        raise ParseError(message, self.location(span))

    def semantic_error(self, message: str, span: Span | None) -> NoReturn:
        raise SemanticError(message, self.location(span))
