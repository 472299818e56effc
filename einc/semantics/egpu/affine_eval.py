"""Affine maps evaluated on lane values: each map compiled once into a Python function of its
operands (dimensions first, then symbols, as einc/semantics/loops.py reads maps parsed from text)."""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np
from xdsl.ir.affine import (
    AffineBinaryOpExpr,
    AffineBinaryOpKind,
    AffineConstantExpr,
    AffineDimExpr,
    AffineExpr,
    AffineMap,
    AffineSymExpr,
)

from einc.semantics.egpu.values import Lanes, UnsupportedIR

Evaluator = Callable[[Sequence[Lanes]], Lanes]


def _compile(e: AffineExpr, dims: int) -> Evaluator:
    match e:
        case AffineConstantExpr(value=v):
            c = np.array(v, np.int64)
            return lambda ops: c
        case AffineDimExpr(position=p):
            return lambda ops: ops[p]
        case AffineSymExpr(position=p):
            q = dims + p
            return lambda ops: ops[q]
        case AffineBinaryOpExpr(kind=kind, lhs=lhs, rhs=rhs):
            a, b = _compile(lhs, dims), _compile(rhs, dims)
            if kind == AffineBinaryOpKind.Add:
                return lambda ops: a(ops) + b(ops)
            if kind == AffineBinaryOpKind.Mul:
                return lambda ops: a(ops) * b(ops)
            if kind == AffineBinaryOpKind.FloorDiv:
                return lambda ops: np.floor_divide(a(ops), b(ops))
            if kind == AffineBinaryOpKind.CeilDiv:
                return lambda ops: -np.floor_divide(-a(ops), b(ops))
            if kind == AffineBinaryOpKind.Mod:
                return lambda ops: np.mod(a(ops), b(ops))
    raise UnsupportedIR("affine map", f"expression {e}")


_CACHE: dict[AffineMap, tuple[Evaluator, ...]] = {}


def evaluators(m: AffineMap) -> tuple[Evaluator, ...]:
    """One function per result of `m`."""
    found = _CACHE.get(m)
    if found is None:
        found = tuple(_compile(r, m.num_dims) for r in m.results)
        if len(_CACHE) > 4096:
            _CACHE.clear()
        _CACHE[m] = found
    return found


def evaluate(m: AffineMap, operands: Sequence[Lanes]) -> list[Lanes]:
    ops = [np.asarray(o, np.int64) for o in operands]
    return [f(ops) for f in evaluators(m)]
