"""Errors raised for user mistakes. Each carries a source location and renders as

    file:line:col: error: message
        <source line>
             ^~~~

A bug in einc is an `InternalCompilerError` instead: not an `EincError` (no user mistake to
locate), raised wherever einc meets an exception it did not expect (a frontend stage, a
driver stage, the schedule interpreter, a printer), the original kept as `__cause__`. The
command-line tools write a reproducer for it (`write_reproducer`) and exit with status 2.
"""

from __future__ import annotations

import hashlib
import os
import traceback
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Self


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

    @classmethod
    def parse(cls, text: str) -> SourceLocation:
        """The location `str()` printed (`file:line:col`; the file may hold colons)."""
        file, line, col = text.rsplit(":", 2)
        return cls(file, int(line), int(col))


def span_location(span: object) -> SourceLocation:
    """The location of an xDSL parser span (`xdsl.utils.lexer.Span`: its file, line, column
    and length; the source text for the caret when the span holds it)."""
    where = span.get_location()  # type: ignore[attr-defined]
    chunk = span.input.content  # type: ignore[attr-defined] - a chunk starts line_offset lines in
    source = "\n" * span.line_offset + chunk if isinstance(chunk, str) else None  # type: ignore[attr-defined]
    return SourceLocation(where.file, where.line, int(where.col), max(1, span.len), source)  # type: ignore[attr-defined]


Notes = tuple[tuple[SourceLocation, str], ...]
"""An error's notes: each a place and what it says there."""


class EincError(Exception):
    """Base class of every user-facing error of einc. `loc` is a SourceLocation, or None
    (no place: the tools put it at the input's start), or the pair `einc.ir.locations.at_op`
    gives for an op (its statement and the notes at the schedule ops that made it), so that
    `EincError(message, at_op(op.location))` and `EincError(message, *at_op(op.location))`
    say the same."""

    def __init__(self, message: str, loc: SourceLocation | tuple[SourceLocation | None, Notes] | None = None,
                 notes: Notes = ()):  # fmt: skip
        super().__init__(message)
        if isinstance(loc, tuple) and len(loc) == 2 and isinstance(loc[1], tuple):
            loc, notes = loc[0], (*loc[1], *notes)
        if not (loc is None or isinstance(loc, SourceLocation)) or not all(
            isinstance(n, tuple) and len(n) == 2 and isinstance(n[0], SourceLocation) for n in notes
        ):
            raise TypeError(
                f"{type(self).__name__}'s location is a SourceLocation, None or at_op(op.location) "
                f"(with notes as (SourceLocation, text) pairs), not {type(loc).__name__}"
            )
        self.message = message
        self.loc: SourceLocation | None = loc
        self.notes: Notes = notes
        """More places the error involves, MLIR-style `file:line:col: note: ...` lines (the
        schedule op that made the op an error is about)."""

    def render(self) -> str:
        """The diagnostic in `file:line:col: error: message` form, with a caret under the span;
        then each note, the same way. An error with no place in any source (a kernel or a
        PyTorch op called with the wrong arrays, whose message names the call and argument) is
        `einc: error: message`, as a command-line tool reports an error of its own."""
        if self.loc is None:
            text = f"einc: error: {self.message}"
        else:
            text = f"{self.loc}: error: {self.message}" + _caret(self.loc)
        for loc, note in self.notes:
            text += f"\n{loc}: note: {note}" + _caret(loc)
        return text

    def with_sources(self, sources: dict[str, str]) -> Self:
        """This error, its locations given the text of their file from `sources` (file name ->
        text) where they lack one (for the caret); itself, changed in place."""

        def filled(loc: SourceLocation) -> SourceLocation:
            text = sources.get(loc.file)
            return loc if loc.source is not None or text is None else replace(loc, source=text)

        if self.loc is not None:
            self.loc = filled(self.loc)
        self.notes = tuple((filled(loc), note) for loc, note in self.notes)
        return self

    def __str__(self) -> str:
        return self.render()


def _caret(loc: SourceLocation) -> str:
    """The source line of `loc` with a caret under its span ("" without the source)."""
    if loc.source is None:
        return ""
    lines = loc.source.splitlines()
    if not 0 < loc.line <= len(lines):
        return ""
    caret = " " * (loc.col - 1) + "^" + "~" * max(0, loc.length - 1)
    return f"\n{lines[loc.line - 1]}\n{caret}"


class ParseError(EincError):
    """Malformed program text."""


class SemanticError(EincError):
    """A well-formed program that breaks a rule: unknown tensor, shape or type mismatch, ..."""


class TargetError(EincError):
    """Unknown target, or a program the target cannot express."""


class ScheduleError(EincError):
    """An illegal or malformed schedule."""


class UsageError(EincError):
    """A command-line argument the tool cannot use: a negative seed, an output path in a
    missing folder, an input file it cannot read, an unknown pass."""


class RuntimeInputError(EincError):
    """Arrays passed to a compiled kernel do not match its signature."""


class ToolchainError(EincError):
    """The target's compiler rejected the generated code (a bug in einc, reported with the source)."""


class RuntimeMissingError(TargetError, ToolchainError):
    """The target's runtime is missing on this machine (no GPU driver, no pyopencl, ...).
    `einc.compile` still returns the kernel (source, manifest, compile check); calling it
    raises this as a ToolchainError. A TargetError too, for callers that load runtimes."""


class InternalCompilerError(Exception):
    """A bug in einc: an exception einc did not expect, met in `stage`. `context` holds what
    reproduces it (the program text, the schedule text, the target, ...), filled in by the
    layers it passes through (`add_context` keeps the innermost value)."""

    def __init__(self, message: str, stage: str | None = None, context: dict[str, str] | None = None):
        where = f" in stage '{stage}'" if stage else ""
        super().__init__(
            f"internal compiler error{where}: {message}\n"
            "(this is a bug in einc, not in your program; please report it with the reproducer)"
        )
        self.message = message
        self.stage = stage
        self.context: dict[str, str] = dict(context or {})

    @classmethod
    def wrap(cls, exc: BaseException, stage: str | None = None, **context: str) -> InternalCompilerError:
        """`exc` (unexpected) as an InternalCompilerError, `exc` its `__cause__`; an
        InternalCompilerError itself, with the context it lacked added."""
        if isinstance(exc, InternalCompilerError):
            exc.add_context(stage=stage, **context)
            return exc
        ice = cls(f"{type(exc).__name__}: {exc}", stage, context)
        ice.__cause__ = exc
        cause: BaseException | None = exc
        while cause is not None:  # where a pass or printer met it (einc.ir.locations.tag)
            where = getattr(cause, "einc_location", None)
            if isinstance(where, str):
                ice.add_context(location=where)
                break
            cause = cause.__cause__ or cause.__context__
        return ice

    def add_context(self, stage: str | None = None, **context: str) -> None:
        if self.stage is None and stage is not None:
            self.stage = stage
        for key, value in context.items():
            self.context.setdefault(key, value)

    def reproducer(self) -> str:
        """A self-contained report: einc's version, the stage, the context, the traceback."""
        __version__ = einc_version()

        parts = [f"einc internal compiler error (einc {__version__})", f"error: {self.message}"]
        parts.append(f"stage: {self.stage or 'unknown'}")
        for key, value in self.context.items():
            body = value if value.endswith("\n") else value + "\n"
            parts.append(f"--- {key} ---\n{body}--- end of {key} ---")
        trace = "".join(traceback.format_exception(self.__cause__ or self))
        parts.append(f"--- traceback ---\n{trace}--- end of traceback ---")
        return "\n".join(parts) + "\n"

    def write_reproducer(self, directory: str | None = None) -> Path:
        """Write `reproducer()` to `einc-crash-<hash>.txt` in `directory` (default: the
        EINC_REPRO_DIR environment variable, else the current directory); returns its path."""
        text = self.reproducer()
        digest = hashlib.sha256(text.encode()).hexdigest()[:12]
        folder = Path(directory or os.environ.get("EINC_REPRO_DIR") or ".")
        folder.mkdir(parents=True, exist_ok=True)
        path = folder / f"einc-crash-{digest}.txt"
        path.write_text(text)
        return path


def einc_version() -> str:
    """The installed einc's version (package metadata), or "unknown" when run from a tree
    that is not installed."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("einc")
    except PackageNotFoundError:
        return "unknown"
