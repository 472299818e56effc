"""The checked program: what `sema` proves about the syntax tree, and what `irgen` lowers.

Every expression node carries its dtype; all conversions are explicit `Convert` nodes and all
literals are `Constant`s of a concrete dtype, so IR generation makes no typing decisions.
dtypes are the language's names (`float32`, `int8`, ...) plus `bool` for comparisons and
logical operators.
"""

from __future__ import annotations

import operator

from dataclasses import dataclass

from einc.dialects.ein import Combiner
from einc.frontend import ast
from einc.frontend.ast import Span

# The integer operators an index expression (and an affine map) is built from, by name:
# Python's `//` and `%` are floor division and floor modulo, as in Antares and affine maps.
INDEX_BINARY_OPS = {
    "add": operator.add,
    "sub": operator.sub,
    "mul": operator.mul,
    "floordiv": operator.floordiv,
    "mod": operator.mod,
}

FLOAT_DTYPES = ("float64", "float32", "float16", "bfloat16")
INT_DTYPES = ("int64", "int32", "int16", "int8")
DTYPES = FLOAT_DTYPES + INT_DTYPES
BITS = {"float64": 64, "float32": 32, "float16": 16, "bfloat16": 16, "int64": 64, "int32": 32, "int16": 16,
        "int8": 8, "bool": 1}  # fmt: skip


def is_float(dtype: str) -> bool:
    return dtype in FLOAT_DTYPES


def is_int(dtype: str) -> bool:
    return dtype in INT_DTYPES


def int_bounds(dtype: str) -> tuple[int, int]:
    bits = BITS[dtype]
    return -(1 << (bits - 1)), (1 << (bits - 1)) - 1


def stored_dtype(dtype: str) -> str:
    """The dtype a statement result is stored in: `bool` is stored as int8."""
    return "int8" if dtype == "bool" else dtype


@dataclass(frozen=True)
class TensorInfo:
    """An input or a statement result: name, dtype, shape (`()` for a scalar)."""

    name: str
    dtype: str
    shape: tuple[int, ...]


# ---- expressions ---------------------------------------------------------------------------


@dataclass
class AxisInfo:
    """An axis of the statement being checked: its position and its extent."""

    index: int
    extent: int


@dataclass(frozen=True)
class Axis:
    """Axis number `index` of the statement, used as an index or as an int32 value."""

    name: str
    index: int
    dtype: str
    span: Span


@dataclass(frozen=True)
class Constant:
    value: int | float | bool
    dtype: str
    span: Span


@dataclass(frozen=True)
class Load:
    tensor: str
    indices: tuple[Expr, ...]
    dtype: str
    span: Span


@dataclass(frozen=True)
class Unary:
    """`neg` (arithmetic negation) or `not` (logical, on bool)."""

    op: str
    operand: Expr
    dtype: str
    span: Span


@dataclass(frozen=True)
class Binary:
    """Operands and result share `dtype`.

    ops: `add sub mul div` (true division, floats), `floordiv mod` (floor semantics, ints and
    floats), `shl shr` (ints; arithmetic right shift), `and or` (on bool).
    """

    op: str
    lhs: Expr
    rhs: Expr
    dtype: str
    span: Span


@dataclass(frozen=True)
class Compare:
    """`eq ne lt le gt ge` on two operands of the same dtype; the result is bool."""

    op: str
    lhs: Expr
    rhs: Expr
    dtype: str
    span: Span


@dataclass(frozen=True)
class Convert:
    """Converts `operand` to `dtype`: to bool is `!= 0`; float to int truncates; int to int
    wraps; bool to a number is 0/1."""

    operand: Expr
    dtype: str
    span: Span


@dataclass(frozen=True)
class Call:
    """A math function; every argument has the call's `dtype`."""

    function: str
    args: tuple[Expr, ...]
    dtype: str
    span: Span


@dataclass(frozen=True)
class When:
    """`then` if the bool conditions all hold (any, with `merge_any`), else `otherwise`. Only
    the chosen branch is evaluated. A left-out else value is filled in by sema."""

    conditions: tuple[Expr, ...]
    merge_any: bool
    then: Expr
    otherwise: Expr
    dtype: str
    span: Span


Expr = Axis | Constant | Load | Unary | Binary | Compare | Convert | Call | When


def children(expr: Expr) -> tuple[Expr, ...]:
    """The direct subexpressions of `expr`."""
    match expr:
        case Axis() | Constant():
            return ()
        case Load(indices=indices):
            return indices
        case Unary(operand=operand) | Convert(operand=operand):
            return (operand,)
        case Binary(lhs=lhs, rhs=rhs) | Compare(lhs=lhs, rhs=rhs):
            return (lhs, rhs)
        case Call(args=args):
            return args
        case When(conditions=conditions, then=then, otherwise=otherwise):
            return (*conditions, then, otherwise)


# ---- statements ------------------------------------------------------------------------------


@dataclass(frozen=True)
class Statement:
    """One checked statement. `axes` are the output axes in output order, then the reduction
    axes in order of first appearance; `expr` has the output's dtype."""

    output: TensorInfo
    combiner: Combiner
    axes: tuple[tuple[str, int], ...]
    expr: Expr
    syntax: ast.Statement
    scatter: tuple[Expr, ...] | None = None
    """A scatter (`=.`, `+=.`): the indices of the element of `output` (which keeps the name,
    dtype and shape of the tensor it updates) each point writes; every axis is a loop axis."""

    @property
    def num_parallel(self) -> int:
        return len(self.axes) if self.scatter is not None else len(self.output.shape)
