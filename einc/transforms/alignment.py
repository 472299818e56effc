"""What divides an index, and how an index moves with a loop variable: the analysis behind
vector accesses of global memory (`einc-vectorize-global`).

- `divisor(v, known)`: a power of two (at most `MAX_DIVISOR`) dividing every value `v`
  takes: constants by themselves, `affine.for` variables by their constant lower bound and
  step, `affine.apply`s through their expression (sums, constant multiples, `x mod c`);
  `known` overrides it for given values; anything else (work-item ids, `floordiv`) 1.
- `flat_divisor(memref, map, operands, known)`: the same for the row-major flat element
  index of an access (each dimension's index times its stride).
- `lane_step(v, iv, width, known)`: the `s` with `v(iv + k) = v(iv) + s * k` for every
  `k < width`, given that `iv` is a multiple of `width` (`known[iv]`), or None: a value
  defined outside the loop body moves by 0, `iv` by 1, `affine.apply`s through sums and
  constant multiples, and `x mod c` / `x floordiv c` of an `x` moving by 1 whose value is a
  multiple of `width` where `c` is one too (the `width` lanes stay in one row).

Failures are values (1, None): a caller keeps its scalar accesses.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

from xdsl.dialects import affine, arith
from xdsl.dialects.builtin import IntegerAttr, MemRefType
from xdsl.ir import BlockArgument, Operation, SSAValue
from xdsl.ir.affine import (
    AffineBinaryOpExpr,
    AffineBinaryOpKind,
    AffineConstantExpr,
    AffineDimExpr,
    AffineExpr,
    AffineMap,
)

from einc.transforms.affine_index import dims_to_operands

MAX_DIVISOR = 64


def constant(v: SSAValue) -> int | None:
    """The integer `v` holds when an `arith.constant` defines it, else None."""
    owner = v.owner
    if isinstance(owner, arith.ConstantOp) and isinstance(owner.value, IntegerAttr):
        return owner.value.value.data
    return None


def _pow2(n: int) -> int:
    """The largest power of two (at most MAX_DIVISOR) dividing `n` (0: MAX_DIVISOR)."""
    return math.gcd(n, MAX_DIVISOR) or MAX_DIVISOR


def divisor(v: SSAValue, known: Mapping[SSAValue, int] | None = None, depth: int = 0) -> int:
    """A power of two dividing every value of `v` (module docstring)."""
    if known and v in known:
        return known[v]
    c = constant(v)
    if c is not None:
        return _pow2(c)
    if depth > 32:
        return 1
    if isinstance(v, BlockArgument):
        loop = v.block.parent_op()
        if isinstance(loop, affine.ForOp) and v.index == 0:
            lb = loop.lowerBoundMap.data
            if len(lb.results) == 1 and not loop.lowerBoundOperands:
                return math.gcd(_pow2(lb.eval([], [])[0]), _pow2(loop.step.value.data))
        return 1
    owner = v.owner
    if isinstance(owner, affine.ApplyOp):
        m = dims_to_operands(owner.map.data)
        return expr_divisor(m.results[0], list(owner.mapOperands), known, depth + 1)
    return 1


def expr_divisor(e: AffineExpr, operands: Sequence[SSAValue], known: Mapping[SSAValue, int] | None = None, depth: int = 0) -> int:
    """A power of two dividing every value of `e` over `operands`."""
    if isinstance(e, AffineConstantExpr):
        return _pow2(e.value)
    if isinstance(e, AffineDimExpr):
        return divisor(operands[e.position], known, depth)
    if not isinstance(e, AffineBinaryOpExpr):
        return 1
    if e.kind == AffineBinaryOpKind.Add:
        return math.gcd(expr_divisor(e.lhs, operands, known, depth), expr_divisor(e.rhs, operands, known, depth))
    if e.kind == AffineBinaryOpKind.Mul:
        a, b = expr_divisor(e.lhs, operands, known, depth), expr_divisor(e.rhs, operands, known, depth)
        return min(a * b, MAX_DIVISOR)
    if e.kind == AffineBinaryOpKind.Mod and isinstance(e.rhs, AffineConstantExpr):
        return math.gcd(expr_divisor(e.lhs, operands, known, depth), _pow2(e.rhs.value))
    return 1


def strides(memory: MemRefType) -> list[int]:
    shape = memory.get_shape()
    return [math.prod(shape[d + 1 :]) for d in range(len(shape))]


def flat_divisor(
    memory: MemRefType, m: AffineMap, operands: Sequence[SSAValue], known: Mapping[SSAValue, int] | None = None
) -> int:
    """A power of two dividing the row-major flat element index of `memory[m(operands)]`."""
    m = dims_to_operands(m)
    g = MAX_DIVISOR
    for e, stride in zip(m.results, strides(memory)):
        g = math.gcd(g, min(expr_divisor(e, operands, known) * _pow2(stride), MAX_DIVISOR))
    return g


def identity_map(n: int) -> AffineMap:
    return AffineMap(n, 0, tuple(AffineExpr.dimension(k) for k in range(n)))


def lane_step(
    v: SSAValue, iv: SSAValue, body: Operation, width: int, known: Mapping[SSAValue, int], depth: int = 0
) -> int | None:
    """How `v` moves with `iv` over `width` lanes (module docstring); `body` the loop whose
    ops may depend on `iv`."""
    if v is iv:
        return 1
    owner = v.owner
    if isinstance(owner, Operation):
        inside = body.is_ancestor(owner)
    else:
        parent = owner.parent_op()
        inside = parent is not None and body.is_ancestor(parent)
    if not inside:
        return 0
    if constant(v) is not None:
        return 0
    if depth > 32 or not isinstance(owner, affine.ApplyOp):
        return None
    m = dims_to_operands(owner.map.data)
    return expr_step(m.results[0], list(owner.mapOperands), iv, body, width, known, depth + 1)


def expr_step(
    e: AffineExpr,
    operands: Sequence[SSAValue],
    iv: SSAValue,
    body: Operation,
    width: int,
    known: Mapping[SSAValue, int],
    depth: int = 0,
) -> int | None:
    """`lane_step` of the expression `e` over `operands`."""
    if isinstance(e, AffineConstantExpr):
        return 0
    if isinstance(e, AffineDimExpr):
        return lane_step(operands[e.position], iv, body, width, known, depth)
    if not isinstance(e, AffineBinaryOpExpr):
        return None
    if e.kind == AffineBinaryOpKind.Add:
        a = expr_step(e.lhs, operands, iv, body, width, known, depth)
        b = expr_step(e.rhs, operands, iv, body, width, known, depth)
        return None if a is None or b is None else a + b
    if e.kind == AffineBinaryOpKind.Mul:
        for var, const in ((e.lhs, e.rhs), (e.rhs, e.lhs)):
            if isinstance(const, AffineConstantExpr):
                s = expr_step(var, operands, iv, body, width, known, depth)
                return None if s is None else s * const.value
        return None
    if e.kind in (AffineBinaryOpKind.Mod, AffineBinaryOpKind.FloorDiv) and isinstance(e.rhs, AffineConstantExpr):
        s = expr_step(e.lhs, operands, iv, body, width, known, depth)
        if s == 0:
            return 0
        # x, x + 1, ..., x + width - 1 with x a multiple of width, c too: one row of c
        if s == 1 and e.rhs.value > 0 and e.rhs.value % width == 0 and expr_divisor(e.lhs, operands, known) % width == 0:
            return 1 if e.kind == AffineBinaryOpKind.Mod else 0
        return None
    return None


__all__ = ["MAX_DIVISOR", "divisor", "expr_divisor", "expr_step", "flat_divisor", "identity_map", "lane_step", "strides"]
