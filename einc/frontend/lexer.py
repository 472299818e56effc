"""The lexer: source text to tokens.

Statements end at `;` or at a newline outside brackets, so the lexer emits a NEWLINE token only
at bracket depth 0 (a newline inside `(...)` or `[...]` continues the statement).

Comments run from `#` to the end of the line. `//` is also floor division, so it starts a
comment only where an operator cannot stand: as the first token of a line, or right after a
`;`, both outside brackets. (`x[N] = y[N] // 2` divides; write `# note` for a trailing comment.)
"""

from __future__ import annotations

import re
from enum import Enum, auto
from typing import NamedTuple, NoReturn

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


class Token(NamedTuple):
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


# Matched longest first, so that `+=!` wins over `+=` and `+`.
OPERATORS = (
    "+=!", ">=!", "<=!", "*=!", "&=!", "|=!",
    "+=", "*=", "&=", "|=", "==", "!=", "<=", ">=", "<<", ">>", "//",
    "+", "-", "*", "/", "%", "<", ">", "=", "&", "|", "~",
    "(", ")", "[", "]", ",", ";", ".", ":",
)  # fmt: skip
QUOTES = "`\"'"
MAX_INT_DIGITS = 40

# One pattern for every token; the lexer loop only tracks lines, bracket depth and comments.
TOKEN_PATTERN = re.compile(
    r"(?P<space>[ \t\r\f\v]+)"
    r"|(?P<newline>\n)"
    r"|(?P<comment>\#[^\n]*)"
    r"|(?P<number>(?:[0-9]+(?:\.[0-9]+)?|\.[0-9]+)(?P<exponent>[eE][+-]?[0-9]*)?)"
    r"|(?P<ident>[A-Za-z_][A-Za-z0-9_]*)"
    r"|(?P<string>`[^`\n]*`|\"[^\"\n]*\"|'[^'\n]*')"
    r"|(?P<op>" + "|".join(re.escape(op) for op in OPERATORS) + ")"
)
IDENT_CHARS = re.compile(r"[A-Za-z0-9_]*")
IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def is_identifier(name: str) -> bool:
    """Whether `name` is an identifier of the language (ASCII letters, digits, `_`)."""
    return IDENTIFIER.fullmatch(name) is not None


class Lexer:
    """Lexes on demand: `token(i)` lexes just far enough to return the i-th token, so an error
    early in a large input is found without lexing the rest."""

    def __init__(self, source: SourceText):
        self.source = source
        self.text = source.text
        self.pos = 0
        self.line = 1
        self.line_start = 0
        self.depth = 0
        self.tokens: list[Token] = []
        self.line_has_token = False
        self.done = False

    def token(self, index: int) -> Token:
        """The token at `index`; the EOF token for any index past the end."""
        tokens = self.tokens
        if index < len(tokens):  # lexed already (the parser looks at each token many times)
            return tokens[index]
        while len(self.tokens) <= index and not self.done:
            self.step()
        return self.tokens[min(index, len(self.tokens) - 1)]

    def span(self, start: int, end: int) -> Span:
        return Span(start, end, self.line, start - self.line_start + 1)

    def emit(self, kind: Kind, start: int, end: int, value: int | float | str | None) -> None:
        first = not self.line_has_token
        self.tokens.append(Token(kind, self.text[start:end], self.span(start, end), value, first))
        self.line_has_token = True

    def slashes_start_comment(self) -> bool:
        """Whether a `//` here is a comment: outside brackets, first on its line or after `;`."""
        if self.depth > 0:
            return False
        if not self.line_has_token:
            return True
        last = self.tokens[-1]
        return last.kind == Kind.OP and last.text == ";"

    def step(self) -> None:
        """Lexes until at least one more token (possibly EOF) is produced."""
        text = self.text
        count = len(self.tokens)
        while len(self.tokens) == count:
            pos = self.pos
            if pos >= len(text):
                self.tokens.append(Token(Kind.EOF, "", self.span(len(text), len(text))))
                self.done = True
                return
            m = TOKEN_PATTERN.match(text, pos)
            if m is None:
                self.bad_character(pos)
            kind, end = m.lastgroup, m.end()
            match kind:
                case "space" | "comment":
                    pass
                case "newline":
                    if self.depth == 0:
                        self.tokens.append(Token(Kind.NEWLINE, "\n", self.span(pos, end)))
                    self.line += 1
                    self.line_start = end
                    self.line_has_token = False
                case "number" | "exponent":
                    self.number(m)
                case "ident":
                    self.emit(Kind.IDENT, pos, end, m.group())
                case "string":
                    self.emit(Kind.STRING, pos, end, m.group()[1:-1])
                case _:
                    op = m.group()
                    if op == "//" and self.slashes_start_comment():
                        newline = text.find("\n", pos)
                        end = len(text) if newline < 0 else newline
                    else:
                        if op in ("(", "["):
                            self.depth += 1
                        elif op in (")", "]"):
                            self.depth = max(0, self.depth - 1)
                        self.emit(Kind.OP, pos, end, op)
            self.pos = end

    def bad_character(self, pos: int) -> NoReturn:
        ch = self.text[pos]
        if ch in QUOTES:
            end = self.text.find("\n", pos)
            end = len(self.text) if end < 0 else end
            self.source.parse_error(
                f"unterminated string: missing the closing {ch}", self.span(pos, end)
            )
        self.source.parse_error(f"unexpected character {ch!r}", self.span(pos, pos + 1))

    def number(self, m: re.Match[str]) -> None:
        start, end = m.span()
        literal = m.group("number")
        exponent = m.group("exponent") or ""
        if exponent and not exponent[-1].isdigit():
            self.source.parse_error(
                f"malformed number '{literal}': the exponent has no digits",
                self.span(start, end),
            )
        tail = IDENT_CHARS.match(self.text, end)
        glued = tail.end() if tail else end
        if glued > end:
            self.source.parse_error(
                f"malformed number '{self.text[start:glued]}'", self.span(start, glued)
            )
        if "." in literal or exponent:
            self.emit(Kind.FLOAT, start, end, float(literal))
            return
        if len(literal.lstrip("0")) > MAX_INT_DIGITS:
            self.source.parse_error(
                f"integer literal with {len(literal)} digits is too large", self.span(start, end)
            )
        self.emit(Kind.INT, start, end, int(literal))


def tokenize(source: SourceText) -> list[Token]:
    """All the tokens of `source`, ending with an EOF token."""
    lexer = Lexer(source)
    while not lexer.done:
        lexer.step()
    return lexer.tokens
