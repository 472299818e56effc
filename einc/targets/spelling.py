"""How ops print as C expressions: C's operator precedences, `Spelling` (an op's format,
its precedence and its operands' required precedences), the builders of the spelling tables
(`infix`, `call`, `helper`, `compare`, `CAST`) and `Expr`, a printed expression with its
precedence. The target tables (`einc.targets.clike`) are built from these."""

from __future__ import annotations

from dataclasses import dataclass

# C operator precedence, loosest to tightest (parenthesise an operand looser than required)
TERNARY, LOR, LAND, BOR, BXOR, BAND, EQUALITY, RELATIONAL, SHIFT, ADD, MUL, UNARY, ATOM = range(
    1, 14
)


@dataclass(frozen=True)
class Spelling:
    """How an op prints as an expression. `fmt` fields: `{0}`.. operands, `{t}` the result's
    C type, `{s}` its type suffix (`f32`, `i64`: helper names), `{f}` its math-function
    suffix (`f` for float), `{ut}` the unsigned C type of operand 0. `prec` is the result's
    precedence; operand k is parenthesised when looser than `operands[k]` (the last entry
    repeats); `helper` names a helper function the expression calls."""

    fmt: str
    prec: int = ATOM
    operands: tuple[int, ...] = (UNARY,)
    helper: str | None = None
    may_overflow: bool = False
    """An integer result C may compute wider than its type (`int8_t + int8_t` is an int)."""

    def required(self, k: int) -> int:
        return self.operands[min(k, len(self.operands) - 1)]


def infix(symbol: str, prec: int) -> Spelling:
    """A left-associative binary operator. Operands of bitwise operators are always
    parenthesised unless simple: C's precedences there surprise readers."""
    may_overflow = symbol in ("+", "-", "*", "/", "<<")
    if prec in (SHIFT, BAND, BXOR, BOR):
        return Spelling(f"{{0}} {symbol} {{1}}", prec, (UNARY,), may_overflow=may_overflow)
    return Spelling(f"{{0}} {symbol} {{1}}", prec, (prec, prec + 1), may_overflow=may_overflow)


def call(name: str, arity: int = 1) -> Spelling:
    args = ", ".join(f"{{{k}}}" for k in range(arity))
    return Spelling(f"{name}{{f}}({args})", ATOM, (0,))


def helper(name: str, arity: int = 2) -> Spelling:
    args = ", ".join(f"{{{k}}}" for k in range(arity))
    return Spelling(f"einc_{name}_{{s}}({args})", ATOM, (0,), helper=name)


def compare(fmt: str) -> Spelling:
    """A comparison template: a plain relational/equality operator, or a compound form whose
    operands must be simple (they may be repeated)."""
    for symbol, prec in (("==", EQUALITY), ("!=", EQUALITY), ("<=", RELATIONAL),
                         (">=", RELATIONAL), ("<", RELATIONAL), (">", RELATIONAL)):  # fmt: skip
        if fmt == f"{{0}} {symbol} {{1}}":
            return Spelling(fmt, prec, (SHIFT, SHIFT + 1))
    prec = LOR if "||" in fmt else LAND if "&&" in fmt else UNARY if fmt[0] == "!" else (
        RELATIONAL if fmt[0] == "(" else ATOM
    )
    return Spelling(fmt, prec, (UNARY,))


CAST = Spelling("({t}){0}", UNARY, (UNARY,))


@dataclass(frozen=True)
class Expr:
    text: str
    prec: int = ATOM

    def operand(self, required: int) -> str:
        return f"({self.text})" if self.prec < required else self.text
