"""The lexer: source text to tokens.

Statements end at `;` or at a newline outside brackets, so the lexer emits a NEWLINE token only
at bracket depth 0 (a newline inside `(...)` or `[...]` continues the statement).

Comments run from `#` to the end of the line. `//` is also floor division, so it starts a
comment only where an operator cannot stand: as the first token of a line, or right after a
`;`, both outside brackets. (`x[N] = y[N] // 2` divides; write `# note` for a trailing comment.)
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum, auto

from einc.frontend.ast import Span
from einc.frontend.diagnostics import SourceText


class Kind(Enum):
    IDENT = auto()
    INT = auto()
    FLOAT = auto()
    STRING = auto()
    OP = auto()
    NEWLINE = auto()
    EOF = auto()


@dataclass(frozen=True)
class Token:
    kind: Kind
    text: str
    span: Span
    value: int | float | str | None = None
    first_on_line: bool = False

    def describe(self) -> str:
        """How a diagnostic names this token."""
        match self.kind:
            case Kind.EOF:
                return "end of input"
            case Kind.NEWLINE:
                return "end of line"
            case Kind.STRING:
                return f"string {self.text}"
            case Kind.INT | Kind.FLOAT:
                return f"number '{self.text}'"
            case Kind.IDENT:
                return f"'{self.text}'"
            case Kind.OP:
                return f"'{self.text}'"


# Longest first, so that `+=!` wins over `+=` and `+`.
OPERATORS = (
    "+=!", ">=!", "<=!", "*=!", "&=!", "|=!",
    "+=", "*=", "&=", "|=", "==", "!=", "<=", ">=", "<<", ">>", "//",
    "+", "-", "*", "/", "%", "<", ">", "=", "&", "|", "~",
    "(", ")", "[", "]", ",", ";", ".", ":",
)  # fmt: skip

QUOTES = "`\"'"
MAX_INT_DIGITS = 40


def _is_ident_start(ch: str) -> bool:
    return ch == "_" or ("a" <= ch <= "z") or ("A" <= ch <= "Z")


def _is_ident_char(ch: str) -> bool:
    return _is_ident_start(ch) or ("0" <= ch <= "9")


def _is_digit(ch: str) -> bool:
    return "0" <= ch <= "9"


class Lexer:
    def __init__(self, source: SourceText):
        self.source = source
        self.text = source.text
        self.pos = 0
        self.line = 1
        self.line_start = 0
        self.depth = 0
        self.tokens: list[Token] = []
        self.line_has_token = False

    def span(self, start: int, end: int) -> Span:
        return Span(start, end, self.line, start - self.line_start + 1)

    def emit(self, kind: Kind, start: int, value: int | float | str | None = None) -> None:
        text = self.text[start : self.pos]
        first = not self.line_has_token
        self.tokens.append(Token(kind, text, self.span(start, self.pos), value, first))
        self.line_has_token = True

    def at_comment(self) -> bool:
        if self.text.startswith("#", self.pos):
            return True
        if not self.text.startswith("//", self.pos) or self.depth > 0:
            return False
        if not self.line_has_token:
            return True
        last = self.tokens[-1]
        return last.kind == Kind.OP and last.text == ";"

    def tokenize(self) -> list[Token]:
        text = self.text
        while self.pos < len(text):
            ch = text[self.pos]
            if ch == "\n":
                if self.depth == 0:
                    self.tokens.append(
                        Token(Kind.NEWLINE, "\n", self.span(self.pos, self.pos + 1))
                    )
                self.pos += 1
                self.line += 1
                self.line_start = self.pos
                self.line_has_token = False
            elif ch in " \t\r\f\v":
                self.pos += 1
            elif self.at_comment():
                end = text.find("\n", self.pos)
                self.pos = len(text) if end < 0 else end
            elif _is_digit(ch) or (
                ch == "." and self.pos + 1 < len(text) and _is_digit(text[self.pos + 1])
            ):
                self.number()
            elif _is_ident_start(ch):
                start = self.pos
                while self.pos < len(text) and _is_ident_char(text[self.pos]):
                    self.pos += 1
                self.emit(Kind.IDENT, start, text[start : self.pos])
            elif ch in QUOTES:
                self.string(ch)
            else:
                self.operator()
        self.tokens.append(Token(Kind.EOF, "", self.span(self.pos, self.pos)))
        return self.tokens

    def number(self) -> None:
        text = self.text
        start = self.pos
        while self.pos < len(text) and _is_digit(text[self.pos]):
            self.pos += 1
        is_float = False
        # `1.5` is a float; `1.cast(...)` is the integer 1 followed by a method call.
        if (
            self.pos < len(text)
            and text[self.pos] == "."
            and self.pos + 1 < len(text)
            and _is_digit(text[self.pos + 1])
        ):
            is_float = True
            self.pos += 1
            while self.pos < len(text) and _is_digit(text[self.pos]):
                self.pos += 1
        if self.pos < len(text) and text[self.pos] in "eE":
            exp = self.pos + 1
            if exp < len(text) and text[exp] in "+-":
                exp += 1
            if exp < len(text) and _is_digit(text[exp]):
                is_float = True
                self.pos = exp
                while self.pos < len(text) and _is_digit(text[self.pos]):
                    self.pos += 1
            else:
                self.pos = exp
                self.source.parse_error(
                    f"malformed number '{text[start:self.pos]}': the exponent has no digits",
                    self.span(start, self.pos),
                )
        if self.pos < len(text) and _is_ident_start(text[self.pos]):
            end = self.pos
            while end < len(text) and _is_ident_char(text[end]):
                end += 1
            self.source.parse_error(
                f"malformed number '{text[start:end]}'", self.span(start, end)
            )
        literal = text[start : self.pos]
        if is_float:
            self.emit(Kind.FLOAT, start, float(literal))
            return
        if len(literal.lstrip("0")) > MAX_INT_DIGITS:
            self.source.parse_error(
                f"integer literal with {len(literal)} digits is too large",
                self.span(start, self.pos),
            )
        self.emit(Kind.INT, start, int(literal))

    def string(self, quote: str) -> None:
        text = self.text
        start = self.pos
        end = self.pos + 1
        while end < len(text) and text[end] != quote and text[end] != "\n":
            end += 1
        if end >= len(text) or text[end] != quote:
            self.source.parse_error(
                f"unterminated string: missing the closing {quote}", self.span(start, end)
            )
        self.pos = end + 1
        self.emit(Kind.STRING, start, text[start + 1 : end])

    def operator(self) -> None:
        start = self.pos
        for op in OPERATORS:
            if self.text.startswith(op, start):
                self.pos += len(op)
                if op in ("(", "["):
                    self.depth += 1
                elif op in (")", "]"):
                    self.depth = max(0, self.depth - 1)
                self.emit(Kind.OP, start, op)
                return
        ch = self.text[start]
        self.source.parse_error(
            f"unexpected character {ch!r}", self.span(start, start + 1)
        )


def tokenize(source: SourceText) -> list[Token]:
    """The tokens of `source`, ending with an EOF token."""
    return Lexer(source).tokenize()
