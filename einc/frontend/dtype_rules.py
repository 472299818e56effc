"""The value rules of the language: the operator, combiner and built-in function tables,
weak literals, dtype promotion, conversion, and a combiner's neutral element (what a `.when`
without an else value yields).

Literals are *weak* while only literals take part (`1 + 2`, `-0.5`): `expr_check` folds them
and they take the dtype of the operand beside them; alone they are float32 or int32.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass

from einc.dialects.ein import Combiner
from einc.frontend import checked as c
from einc.frontend.ast import Span
from einc.frontend.checked import is_float, is_int

COMBINERS = {
    "=": Combiner.ASSIGN, "+=!": Combiner.ADD, "+=": Combiner.ADD, "*=!": Combiner.MUL,
    ">=!": Combiner.MAX, "<=!": Combiner.MIN, "&=!": Combiner.AND, "|=!": Combiner.OR,
}  # fmt: skip

FLOAT_FUNCTIONS = ("exp", "log", "log2", "log10", "sqrt", "rsqrt", "tanh", "sigmoid", "erf",
                   "normcdf", "round", "sin", "cos", "tan", "exp2")  # fmt: skip
"""Computed in a float dtype: an integer (or bool) argument is converted to float32."""
ROUNDING_FUNCTIONS = ("floor", "ceil", "rfloor", "rceil", "remainder")
"""Antares' rounding functions (its built-in table, lang/einstein_v2.py `OpTensor.call`):
`floor`/`ceil` give an integer (int64 from float64, else int32), `rfloor`/`rceil` keep the
argument's dtype, `remainder(x) = x - rfloor(x)`."""
FUNCTIONS = FLOAT_FUNCTIONS + ROUNDING_FUNCTIONS + ("abs", "max", "min", "pow")
UNARY_FUNCTIONS = FLOAT_FUNCTIONS + ROUNDING_FUNCTIONS + ("abs",)

ARITH_OPS = {"+": "add", "-": "sub", "*": "mul", "/": "div", "//": "floordiv", "%": "mod"}
SHIFT_OPS = {"<<": "shl", ">>": "shr"}
LOGICAL_OPS = {"&": "and", "|": "or"}
COMPARE_OPS = {"==": "eq", "!=": "ne", "<": "lt", "<=": "le", ">": "gt", ">=": "ge"}
INT64_MIN, INT64_MAX = c.int_bounds("int64")


@dataclass(frozen=True)
class Weak:
    """A literal (or an expression of literals, folded) whose dtype is not decided yet."""

    value: int | float
    is_float: bool
    span: Span


Value = c.Expr | Weak


def identity(combiner: Combiner, dtype: str) -> int | float | bool:
    """The value a `.when` without an else value yields: the combiner's neutral element (0 for
    an assignment)."""
    if dtype == "bool":
        return combiner in (Combiner.MUL, Combiner.AND, Combiner.MIN)
    lo, hi = c.int_bounds(dtype) if is_int(dtype) else (-math.inf, math.inf)
    value: int | float = {
        Combiner.ASSIGN: 0, Combiner.ADD: 0, Combiner.OR: 0, Combiner.MUL: 1, Combiner.AND: 1,
        Combiner.MAX: lo, Combiner.MIN: hi,
    }[combiner]  # fmt: skip
    return float(value) if is_float(dtype) else value


def promote(a: str, b: str) -> str:
    """The wider of two dtypes: any float beats any int, bool yields to the other."""
    if a == b or b == "bool":
        return a
    if a == "bool":
        return b
    if is_float(a) != is_float(b):
        return a if is_float(a) else b
    if {a, b} == {"float16", "bfloat16"}:
        return "float32"  # neither holds the other (NumPy's ml_dtypes and PyTorch agree)
    return a if c.BITS[a] >= c.BITS[b] else b


def common_dtype(values: Iterable[Value]) -> str:
    """The dtype a group of operands is computed in; weak literals adapt to the others."""
    values = list(values)
    strong = [v.dtype for v in values if not isinstance(v, Weak)]
    weak_float = any(isinstance(v, Weak) and v.is_float for v in values)
    weak_int = any(isinstance(v, Weak) and not v.is_float for v in values)
    if not strong:
        return "float32" if weak_float else "int32"
    dtype = strong[0]
    for other in strong[1:]:
        dtype = promote(dtype, other)
    if weak_float and not is_float(dtype):
        return "float32"
    if weak_int and dtype == "bool":
        return "int32"
    return dtype


def convert(value: c.Expr, dtype: str) -> c.Expr:
    if value.dtype == dtype:
        return value
    return c.Convert(value, dtype, value.span)
