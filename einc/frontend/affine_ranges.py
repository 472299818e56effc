"""Affine index expressions of the checked program: constant folding (`const_value`), the
affine test (`is_affine`) and exact bounds over an iteration space (`interval`), which sema
uses to range-check accesses and irgen to emit affine maps.
"""

from __future__ import annotations

from einc.frontend import checked as c
from einc.frontend.checked import is_int


def const_value(expr: c.Expr) -> int | None:
    """The value of an integer expression without axes or loads, if it is one."""
    match expr:
        case c.Constant(value=value, dtype=dtype) if is_int(dtype):
            return int(value)
        case c.Unary(op="neg", operand=operand):
            inner = const_value(operand)
            return None if inner is None else -inner
        case c.Binary(op=op, lhs=lhs, rhs=rhs) if is_int(expr.dtype):
            a, b = const_value(lhs), const_value(rhs)
            if a is None or b is None:
                return None
            if op not in c.INDEX_BINARY_OPS or (op in ("floordiv", "mod") and b == 0):
                return None
            return c.INDEX_BINARY_OPS[op](a, b)
    return None


def is_affine(expr: c.Expr) -> bool:
    """Whether an integer expression is affine in the axes: constants, `+ -`, `*` by a
    constant, floor division and modulo by a positive constant."""
    if not is_int(expr.dtype):
        return False
    match expr:
        case c.Axis() | c.Constant():
            return True
        case c.Unary(op="neg", operand=operand):
            return is_affine(operand)
        case c.Binary(op="add" | "sub", lhs=lhs, rhs=rhs):
            return is_affine(lhs) and is_affine(rhs)
        case c.Binary(op="mul", lhs=lhs, rhs=rhs):
            constant = const_value(lhs) is not None or const_value(rhs) is not None
            return constant and is_affine(lhs) and is_affine(rhs)
        case c.Binary(op="floordiv" | "mod", lhs=lhs, rhs=rhs):
            divisor = const_value(rhs)
            return divisor is not None and divisor > 0 and is_affine(lhs)
    return False


def _linear(expr: c.Expr) -> tuple[dict[int, int], int] | None:
    """`expr` as `sum(coef * axis) + constant` when it has no division or modulo."""
    value = const_value(expr)
    if value is not None:
        return {}, value
    match expr:
        case c.Axis(index=index):
            return {index: 1}, 0
        case c.Unary(op="neg", operand=operand):
            inner = _linear(operand)
            return None if inner is None else ({k: -v for k, v in inner[0].items()}, -inner[1])
        case c.Binary(op="add" | "sub", lhs=lhs, rhs=rhs):
            a, b = _linear(lhs), _linear(rhs)
            if a is None or b is None:
                return None
            sign = 1 if expr.op == "add" else -1
            coefs = dict(a[0])
            for k, v in b[0].items():
                coefs[k] = coefs.get(k, 0) + sign * v
            return coefs, a[1] + sign * b[1]
        case c.Binary(op="mul", lhs=lhs, rhs=rhs):
            factor, other = const_value(lhs), rhs
            if factor is None:
                factor, other = const_value(rhs), lhs
            inner = _linear(other) if factor is not None else None
            if inner is None or factor is None:
                return None
            return {k: v * factor for k, v in inner[0].items()}, inner[1] * factor
    return None


def interval(expr: c.Expr, extents: list[int]) -> tuple[int, int]:
    """Bounds of an affine expression over the iteration space (exact for linear ones)."""
    linear = _linear(expr)
    if linear is not None:
        coefs, const = linear
        lo = const + sum(min(0, k * (extents[i] - 1)) for i, k in coefs.items())
        hi = const + sum(max(0, k * (extents[i] - 1)) for i, k in coefs.items())
        return lo, hi
    match expr:
        case c.Unary(op="neg", operand=operand):
            lo, hi = interval(operand, extents)
            return -hi, -lo
        case c.Binary(op="add", lhs=lhs, rhs=rhs):
            (a, b), (p, q) = interval(lhs, extents), interval(rhs, extents)
            return a + p, b + q
        case c.Binary(op="sub", lhs=lhs, rhs=rhs):
            (a, b), (p, q) = interval(lhs, extents), interval(rhs, extents)
            return a - q, b - p
        case c.Binary(op="mul", lhs=lhs, rhs=rhs):
            factor, other = const_value(lhs), rhs
            if factor is None:
                factor, other = const_value(rhs), lhs
            assert factor is not None
            lo, hi = interval(other, extents)
            return min(lo * factor, hi * factor), max(lo * factor, hi * factor)
        case c.Binary(op="floordiv", lhs=lhs, rhs=rhs):
            divisor = const_value(rhs)
            assert divisor is not None and divisor > 0
            lo, hi = interval(lhs, extents)
            return lo // divisor, hi // divisor
        case c.Binary(op="mod", lhs=lhs, rhs=rhs):
            divisor = const_value(rhs)
            assert divisor is not None and divisor > 0
            lo, hi = interval(lhs, extents)
            if lo // divisor != hi // divisor:
                return 0, divisor - 1
            return lo % divisor, hi % divisor
    raise AssertionError(f"interval of a non-affine expression {expr}")
