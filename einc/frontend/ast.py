"""The syntax tree of Antares IR programs, as the parser builds it.

Every node is a frozen dataclass with a `span` into the source text. The tree is untyped and
unresolved: a bare name may be an axis or a misused tensor, `.cast(...)` may hold anything;
`sema` decides and reports.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import NamedTuple


class Span(NamedTuple):
    """A source range: `start`/`end` are character offsets, `line`/`col` 1-based of `start`.
    (A named tuple rather than a dataclass: the lexer makes one per token.)"""

    start: int
    end: int
    line: int
    col: int

    def to(self, other: Span) -> Span:
        """The span from the start of `self` to the end of `other`."""
        return Span(self.start, max(self.end, other.end), self.line, self.col)


# ---- expressions ---------------------------------------------------------------------------


@dataclass(frozen=True)
class Number:
    """A numeric literal: `3`, `1.5`, `1e-5`. `is_float` is true when written with `.` or `e`."""

    value: int | float
    is_float: bool
    span: Span


@dataclass(frozen=True)
class String:
    """A quoted string (`` `float32` ``): a dtype or a function name."""

    value: str
    span: Span


@dataclass(frozen=True)
class Name:
    """A bare identifier: an axis (`N`) when used as a value or an index."""

    name: str
    span: Span


@dataclass(frozen=True)
class Access:
    """`tensor[i, j, ...]`; `indices` is empty for a scalar tensor (`x[]`)."""

    tensor: str
    tensor_span: Span
    indices: tuple[Expr, ...]
    span: Span


@dataclass(frozen=True)
class Unary:
    """`-x` or `~x`."""

    op: str
    operand: Expr
    span: Span


@dataclass(frozen=True)
class Binary:
    """`lhs op rhs` for arithmetic, shift, logical and comparison operators."""

    op: str
    lhs: Expr
    rhs: Expr
    op_span: Span
    span: Span


@dataclass(frozen=True)
class Const:
    """`const(v)` or `const(v, dtype)`; `value` is the (signed) literal."""

    value: Number
    dtype: Expr | None
    span: Span


@dataclass(frozen=True)
class Cast:
    """`x.cast(dtype)`; `dtype` is a `String` or a `DtypeOf` once checked."""

    operand: Expr
    dtype: Expr
    span: Span


@dataclass(frozen=True)
class Call:
    """``x.call(`fn`, [y, ...])``; `dtype` is Antares' ``dtype=`...` `` of the result."""

    operand: Expr
    function: str
    function_span: Span
    args: tuple[Expr, ...]
    span: Span
    dtype: Expr | None = None


@dataclass(frozen=True)
class When:
    """`x.when([c1, c2], y, merge_op=`any`)`; `otherwise` is None when `y` is left out."""

    operand: Expr
    conditions: tuple[Expr, ...]
    otherwise: Expr | None
    merge_any: bool
    span: Span


@dataclass(frozen=True)
class DtypeOf:
    """`x.dtype()`: the dtype of `x`, usable where a dtype is expected."""

    operand: Expr
    span: Span


@dataclass(frozen=True)
class AxisVal:
    """`A.val()`: the extent of axis `A`."""

    operand: Expr
    span: Span


Expr = Number | String | Name | Access | Unary | Binary | Const | Cast | Call | When | DtypeOf | AxisVal


# ---- statements and declarations ---------------------------------------------------------------


@dataclass(frozen=True)
class WhereRange:
    """`AX in N` in a `where` clause; `extent` is a constant integer expression."""

    axis: str
    axis_span: Span
    extent: Expr


@dataclass(frozen=True)
class Statement:
    """`OUT[A, B] op expr where ...`; `op` is the operator as written (`=`, `+=!`, `+=`, ...).
    A scatter (`op` `=.` or `+=.`) writes into an existing tensor `OUT` at `indices`, which
    may then be any integer expressions."""

    output: str
    output_span: Span
    indices: tuple[Expr, ...]
    op: str
    op_span: Span
    expr: Expr
    where: tuple[WhereRange, ...]
    span: Span

    @property
    def is_scatter(self) -> bool:
        return self.op.endswith(".")


@dataclass(frozen=True)
class InputDecl:
    """`input NAME: DTYPE[d0, d1, ...]` in a `.ein` file."""

    name: str
    name_span: Span
    dtype: str
    dtype_span: Span
    dims: tuple[Expr, ...]
    span: Span


@dataclass(frozen=True)
class OutputDecl:
    """`output NAME, NAME, ...` in a `.ein` file."""

    names: tuple[tuple[str, Span], ...]
    span: Span


@dataclass(frozen=True)
class Module:
    """A whole parsed source: declarations and statements in source order."""

    inputs: tuple[InputDecl, ...]
    outputs: tuple[OutputDecl, ...]
    statements: tuple[Statement, ...]


def children(expr: Expr) -> tuple[Expr, ...]:
    """The direct subexpressions of `expr`, in source order."""
    match expr:
        case Number() | String() | Name():
            return ()
        case Access(indices=indices):
            return indices
        case Unary(operand=operand) | DtypeOf(operand=operand) | AxisVal(operand=operand):
            return (operand,)
        case Binary(lhs=lhs, rhs=rhs):
            return (lhs, rhs)
        case Const(dtype=dtype):
            return () if dtype is None else (dtype,)
        case Cast(operand=operand, dtype=dtype):
            return (operand, dtype)
        case Call(operand=operand, args=args, dtype=dtype):
            return (operand, *args) if dtype is None else (operand, *args, dtype)
        case When(operand=operand, conditions=conditions, otherwise=otherwise):
            rest = () if otherwise is None else (otherwise,)
            return (operand, *conditions, *rest)
