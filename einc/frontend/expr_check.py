"""Types the expression of one statement (`ExprChecker`): accesses and their range checks,
operators with weak-literal folding, constants, casts, built-in calls and `.when` guards.
"""

from __future__ import annotations

import difflib
import math
from typing import TYPE_CHECKING, NoReturn

from einc.dialects.ein import Combiner
from einc.frontend import ast
from einc.frontend import checked as c
from einc.frontend.affine_ranges import const_value, interval, is_affine
from einc.frontend.ast import Span
from einc.frontend.checked import DTYPES, AxisInfo, TensorInfo, is_float, is_int
from einc.frontend.dtype_rules import (
    ARITH_OPS,
    COMPARE_OPS,
    FLOAT_FUNCTIONS,
    FUNCTIONS,
    INT64_MAX,
    INT64_MIN,
    LOGICAL_OPS,
    ROUNDING_FUNCTIONS,
    SHIFT_OPS,
    UNARY_FUNCTIONS,
    Value,
    Weak,
    common_dtype,
    convert,
    identity,
)

if TYPE_CHECKING:
    from einc.frontend.sema import Checker


class ExprChecker:
    """Types the expression of one statement (whose names `Checker.check_statement` has
    resolved: every bare name is an axis with a range)."""

    def __init__(
        self, checker: Checker, stmt: ast.Statement, axes: dict[str, AxisInfo], combiner: Combiner
    ):
        self.checker = checker
        self.stmt = stmt
        self.axes = axes
        self.extents = [a.extent for a in axes.values()]
        self.combiner = combiner

    def error(self, message: str, span: Span | None) -> NoReturn:
        self.checker.error(message, span)

    # ---- weak literals ---------------------------------------------------------------------
    def materialize(self, weak: Weak, dtype: str) -> c.Constant:
        if dtype == "bool":
            return c.Constant(weak.value != 0, dtype, weak.span)
        if is_float(dtype):
            return c.Constant(float(weak.value), dtype, weak.span)
        assert not weak.is_float, "a float literal never takes an int dtype by promotion"
        lo, hi = c.int_bounds(dtype)
        if not lo <= weak.value <= hi:
            self.error(f"integer literal {weak.value} does not fit in {dtype}", weak.span)
        return c.Constant(int(weak.value), dtype, weak.span)

    def strong(self, value: Value, dtype: str) -> c.Expr:
        """`value` converted to `dtype`."""
        if isinstance(value, Weak):
            return self.materialize(value, dtype)
        return convert(value, dtype)

    def boolean(self, value: Value) -> c.Expr:
        return self.strong(value, "bool")

    def fold(self, op: str, a: Weak, b: Weak, span: Span) -> Value:
        """Evaluates an operator on two literals."""
        floats = a.is_float or b.is_float
        x, y = (float(a.value), float(b.value)) if floats else (a.value, b.value)
        if op in COMPARE_OPS:
            result = {"==": x == y, "!=": x != y, "<": x < y, "<=": x <= y, ">": x > y,
                      ">=": x >= y}[op]  # fmt: skip
            return c.Constant(result, "bool", span)
        if op in LOGICAL_OPS:
            result = (x != 0) and (y != 0) if op == "&" else (x != 0) or (y != 0)
            return c.Constant(result, "bool", span)
        value: int | float | None
        if op in SHIFT_OPS:
            if floats:
                self.error(f"type error: '{op}' needs integer operands, found float literals", span)
            num, count = int(x), int(y)
            if count < 0:
                self.error(f"negative shift count {count}", span)
            if op == ">>":
                value = num >> min(count, 64)
            else:
                value = num << count if count < 64 or num == 0 else None
        else:
            try:
                value = {
                    "+": lambda: x + y, "-": lambda: x - y, "*": lambda: x * y,
                    "/": lambda: x / y if floats else x // y, "//": lambda: x // y,
                    "%": lambda: x % y,
                }[op]()  # fmt: skip
            except ZeroDivisionError:
                self.error("division by zero in a constant expression", span)
        if not floats and (value is None or not INT64_MIN <= value <= INT64_MAX):
            self.error("constant expression overflows int64", span)
        assert value is not None
        return Weak(value, floats, span)

    # ---- expressions -----------------------------------------------------------------------
    def check(self, expr: ast.Expr, guarded: bool) -> Value:
        """Types `expr`; `guarded` is true under a `.when` branch, where accesses are not
        range-checked."""
        match expr:
            case ast.Number(value=value, is_float=floats):
                return Weak(value, floats, expr.span)
            case ast.String():
                self.error(
                    f"unexpected string {self.checker.text(expr.span)}: strings only name a "
                    "dtype or a function",
                    expr.span,
                )
            case ast.Name(name=name):
                return c.Axis(name, self.axes[name].index, "int32", expr.span)
            case ast.Access():
                return self.check_access(expr, guarded)
            case ast.Unary():
                return self.check_unary(expr, guarded)
            case ast.Binary():
                return self.check_binary(expr, guarded)
            case ast.Const():
                return self.check_const(expr)
            case ast.Cast():
                return self.check_cast(expr, guarded)
            case ast.Call():
                return self.check_call(expr, guarded)
            case ast.When():
                return self.check_when(expr, guarded)
            case ast.DtypeOf():
                self.error(
                    "'.dtype()' gives a dtype, not a value; use it as .cast(x.dtype()) or "
                    "const(v, x.dtype())",
                    expr.span,
                )
            case ast.AxisVal(operand=operand):
                if not isinstance(operand, ast.Name):
                    self.error("'.val()' applies to an axis, as in N.val()", expr.span)
                return c.Constant(self.axes[operand.name].extent, "int32", expr.span)
        raise AssertionError(f"unhandled syntax node {expr}")

    def check_access(self, expr: ast.Access, guarded: bool) -> c.Expr:
        info = self.checker.lookup(expr, self.stmt)
        indices = self.indices(expr.tensor, info, expr.indices, guarded)
        return c.Load(expr.tensor, tuple(indices), info.dtype, expr.span)

    def indices(
        self, tensor: str, info: TensorInfo, exprs: tuple[ast.Expr, ...], guarded: bool
    ) -> list[c.Expr]:
        """The indices of an element of `tensor`: integers, range-checked where affine and
        not `guarded`."""
        indices = []
        for dim, idx in enumerate(exprs):
            value = self.check(idx, guarded)
            if isinstance(value, Weak):
                if value.is_float:
                    self.error(
                        f"index {dim} of '{tensor}' is the float {value.value}; indices "
                        "must be integers",
                        idx.span,
                    )
                value = self.materialize(value, "int32")
            if is_float(value.dtype):
                self.error(
                    f"index {dim} of '{tensor}' has dtype {value.dtype}; indices must be "
                    "integers (a gather's index tensor needs an integer dtype)",
                    idx.span,
                )
            value = convert(value, "int32") if value.dtype == "bool" else value
            if not guarded and is_affine(value):
                lo, hi = interval(value, self.extents)
                extent = info.shape[dim]
                if lo < 0 or hi >= extent:
                    self.error(
                        f"index {dim} of '{tensor}' ({self.checker.text(idx.span)}) ranges "
                        f"over [{lo}, {hi}] but the dimension has extent {extent}; guard the "
                        "access with .when(...) if that is intended",
                        idx.span,
                    )
            indices.append(value)
        return indices

    def check_unary(self, expr: ast.Unary, guarded: bool) -> Value:
        value = self.check(expr.operand, guarded)
        if expr.op == "~":
            if isinstance(value, Weak):
                return c.Constant(value.value == 0, "bool", expr.span)
            return c.Unary("not", self.boolean(value), "bool", expr.span)
        if isinstance(value, Weak):
            return Weak(-value.value, value.is_float, expr.span)
        if value.dtype == "bool":
            value = convert(value, "int32")
        return c.Unary("neg", value, value.dtype, expr.span)

    def check_binary(self, expr: ast.Binary, guarded: bool) -> Value:
        op = expr.op
        lhs = self.check(expr.lhs, guarded)
        rhs = self.check(expr.rhs, guarded)
        if isinstance(lhs, Weak) and isinstance(rhs, Weak):
            return self.fold(op, lhs, rhs, expr.span)
        if op in LOGICAL_OPS:
            return c.Binary(LOGICAL_OPS[op], self.boolean(lhs), self.boolean(rhs), "bool", expr.span)
        dtype = common_dtype([lhs, rhs])
        if dtype == "bool":
            dtype = "int32"
        a, b = self.strong(lhs, dtype), self.strong(rhs, dtype)
        if op in COMPARE_OPS:
            return c.Compare(COMPARE_OPS[op], a, b, "bool", expr.span)
        if op in SHIFT_OPS:
            if not is_int(dtype):
                self.error(
                    f"type error: '{op}' needs integer operands, found {dtype}", expr.op_span
                )
            amount = const_value(b)
            if amount is not None and not 0 <= amount < c.BITS[dtype]:
                self.error(
                    f"shift amount {amount} is out of range for {dtype} (0 to "
                    f"{c.BITS[dtype] - 1}; a computed amount outside it shifts every bit out)",
                    expr.rhs.span,
                )
            return c.Binary(SHIFT_OPS[op], a, b, dtype, expr.span)
        name = ARITH_OPS[op]
        if is_int(dtype):
            if name == "div":
                name = "floordiv"
            if name in ("floordiv", "mod") and const_value(b) == 0:
                self.error("integer division by zero", expr.rhs.span)
        return c.Binary(name, a, b, dtype, expr.span)

    def resolve_dtype(self, expr: ast.Expr) -> str:
        """The dtype named by a string or a `.dtype()` expression."""
        match expr:
            case ast.String(value=name):
                if name not in DTYPES:
                    self.error(self.checker.unknown_dtype(name), expr.span)
                return name
            case ast.DtypeOf(operand=ast.Name(name=name)) if name in self.checker.tensors:
                return self.checker.tensors[name].dtype
            case ast.DtypeOf(operand=operand):
                # Only the dtype is used: the operand is never evaluated, so not range-checked.
                value = self.check(operand, guarded=True)
                if isinstance(value, Weak):
                    return "float32" if value.is_float else "int32"
                return c.stored_dtype(value.dtype)
        self.error(
            f"expected a dtype such as `float32` or x.dtype(), found "
            f"'{self.checker.text(expr.span)}'",
            expr.span,
        )

    def constant_as(self, weak: Weak, dtype: str, span: Span) -> c.Constant:
        """A literal converted to `dtype` as by `.cast`: floats truncate toward zero, ints wrap."""
        value = weak.value
        if is_float(dtype):
            return c.Constant(float(value), dtype, span)
        if weak.is_float:
            if not math.isfinite(value) or not INT64_MIN <= int(value) <= INT64_MAX:
                self.error(f"constant {value} is out of range for {dtype}", span)
            value = int(value)
            lo, hi = c.int_bounds(dtype)
            if not lo <= value <= hi:
                self.error(f"constant {weak.value} is out of range for {dtype}", span)
        bits = c.BITS[dtype]
        value = (int(value) + (1 << (bits - 1))) % (1 << bits) - (1 << (bits - 1))
        return c.Constant(value, dtype, span)

    def check_const(self, expr: ast.Const) -> c.Expr:
        number = expr.value
        if expr.dtype is None:
            dtype = "float32" if number.is_float else "int32"
        else:
            dtype = self.resolve_dtype(expr.dtype)
        if is_int(dtype) and not number.is_float:
            lo, hi = c.int_bounds(dtype)
            if not lo <= number.value <= hi:
                hint = "" if expr.dtype is not None else "; write const(v, `int64`)"
                self.error(
                    f"integer constant {number.value} does not fit in {dtype}{hint}", number.span
                )
        return self.constant_as(Weak(number.value, number.is_float, number.span), dtype, expr.span)

    def check_cast(self, expr: ast.Cast, guarded: bool) -> c.Expr:
        value = self.check(expr.operand, guarded)
        dtype = self.resolve_dtype(expr.dtype)
        if isinstance(value, Weak):
            return self.constant_as(value, dtype, expr.span)
        return convert(value, dtype)

    def check_call(self, expr: ast.Call, guarded: bool) -> c.Expr:
        value = self.call_value(expr, guarded)
        if expr.dtype is None:
            return value
        return convert(value, self.resolve_dtype(expr.dtype))

    def call_value(self, expr: ast.Call, guarded: bool) -> c.Expr:
        fn = expr.function
        if fn not in FUNCTIONS:
            close = difflib.get_close_matches(fn, FUNCTIONS, n=1)
            hint = f"; did you mean `{close[0]}`?" if close else ""
            self.error(
                f"unknown function `{fn}`{hint} (known: {', '.join(FUNCTIONS)})",
                expr.function_span,
            )
        if fn in UNARY_FUNCTIONS:
            expected = "no extra arguments"
            ok = not expr.args
        elif fn == "pow":
            expected = "one extra argument (the exponent)"
            ok = len(expr.args) == 1
        else:
            expected, ok = "", True
        if not ok:
            self.error(
                f"function `{fn}` takes {expected}, found {len(expr.args)}", expr.function_span
            )
        values = [self.check(expr.operand, guarded)]
        values += [self.check(arg, guarded) for arg in expr.args]
        dtype = common_dtype(values)
        if fn in ROUNDING_FUNCTIONS:
            return self.rounding(fn, self.strong(values[0], dtype), expr.span)
        if fn in FLOAT_FUNCTIONS and not is_float(dtype):
            dtype = "float32"
        elif dtype == "bool":
            dtype = "int32"
        args = tuple(self.strong(v, dtype) for v in values)
        return c.Call(fn, args, dtype, expr.span)

    def rounding(self, fn: str, value: c.Expr, span: Span) -> c.Expr:
        """Antares' rounding functions (`ROUNDING_FUNCTIONS`). An integer is already whole:
        `rfloor`/`rceil` return it, `floor`/`ceil` convert it to int32 (as Antares does, also
        from int64), `remainder` is 0."""
        if value.dtype == "bool":
            value = convert(value, "int32")
        rounded = value
        if is_float(value.dtype):
            function = "ceil" if fn in ("ceil", "rceil") else "floor"
            rounded = c.Call(function, (value,), value.dtype, span)
        if fn == "remainder":
            return c.Binary("sub", value, rounded, value.dtype, span)
        if fn in ("floor", "ceil"):
            return convert(rounded, "int64" if value.dtype == "float64" else "int32")
        return rounded

    def check_when(self, expr: ast.When, guarded: bool) -> c.Expr:
        # Conditions short-circuit like C's && and ||: only the first is always evaluated.
        conditions = tuple(
            self.boolean(self.check(cond, guarded or i > 0))
            for i, cond in enumerate(expr.conditions)
        )
        then = self.check(expr.operand, guarded=True)
        otherwise = None if expr.otherwise is None else self.check(expr.otherwise, guarded=True)
        dtype = common_dtype([then] if otherwise is None else [then, otherwise])
        if otherwise is None:
            otherwise = c.Constant(identity(self.combiner, dtype), dtype, expr.span)
        return c.When(
            conditions,
            expr.merge_any,
            self.strong(then, dtype),
            self.strong(otherwise, dtype),
            dtype,
            expr.span,
        )
