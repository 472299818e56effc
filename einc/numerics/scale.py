"""Small shapes for `--check-numerics`: a `.ein` program with its input shapes scaled down.

    scaled = scale_program(text, filename, factor)   # the text with smaller declared shapes
    factor = default_scale(text, filename)           # the largest 1/2^k under the work budget

Each declared dimension `d` becomes `max(min(d, MIN_DIM), ceil(d * factor))`; equal
dimensions stay equal (a contraction's two sides still agree). A dimension whose value is
written as an integer literal in a statement (a `where HO in 27`, a bound `HO + KH - 2 < 27`)
is kept as it is: the literal may be tied to it. A scaled text the frontend refuses is not
used (the next larger scale is tried).
"""

from __future__ import annotations

import math
from collections.abc import Iterator

from einc.errors import EincError
from einc.frontend import ast

MIN_DIM = 4
"""Dimensions are not scaled below this (nor is a smaller one scaled at all)."""

WORK_BUDGET = 2048
"""The default scale's budget: iteration points of all statements together. einc's loop
interpreter runs ~20k points/s, so one loop-level execution takes ~0.1 s."""

MAX_HALVINGS = 12


def _numbers(expr: ast.Expr) -> Iterator[int]:
    if isinstance(expr, ast.Number) and not expr.is_float and isinstance(expr.value, int):
        yield expr.value
    if isinstance(expr, ast.Const) and isinstance(expr.value, int):
        yield expr.value
    for child in ast.children(expr):
        yield from _numbers(child)


def _pinned(module: ast.Module) -> set[int]:
    """The integers written in the statements (dimensions equal to one are not scaled)."""
    found: set[int] = set()
    for statement in module.statements:
        for expr in (*statement.indices, statement.expr, *(w.extent for w in statement.where)):
            found.update(_numbers(expr))
    return found


def _parse(text: str, filename: str) -> ast.Module:
    from einc.frontend.diagnostics import SourceText
    from einc.frontend.parser import parse

    return parse(SourceText(text, filename))


def scaled_dim(d: int, factor: float) -> int:
    return d if d <= MIN_DIM else max(MIN_DIM, math.ceil(d * factor))


def scale_program(text: str, filename: str, factor: float) -> str:
    """`text` with each declared input dimension scaled by `factor` (see the module's doc)."""
    if factor >= 1.0:
        return text
    module = _parse(text, filename)
    pinned = _pinned(module)
    edits: list[tuple[int, int, str]] = []
    for decl in module.inputs:
        for dim in decl.dims:
            if isinstance(dim, ast.Number) and isinstance(dim.value, int) and not dim.is_float:
                if dim.value not in pinned and scaled_dim(dim.value, factor) != dim.value:
                    edits.append((dim.span.start, dim.span.end, str(scaled_dim(dim.value, factor))))
    for start, end, new in sorted(edits, reverse=True):
        text = text[:start] + new + text[end:]
    return text


def work(text: str, filename: str) -> int:
    """Iteration points of all the program's statements (what one loop-level run executes)."""
    from einc.frontend import parse_program

    program = parse_program(text, filename)
    return sum(math.prod(size for _, size in s.axes) for s in program.statements)


def candidate_scales(text: str, filename: str, budget: int = WORK_BUDGET) -> list[float]:
    """The scales to try, best first: the largest 1/2^k whose program fits `budget` (or the
    smallest one reachable), then the larger ones up to 1 (should a schedule not fit)."""
    try:
        if work(text, filename) <= budget:
            return [1.0]
    except EincError:
        return [1.0]
    factors = [2.0**-k for k in range(MAX_HALVINGS + 1)]
    chosen = len(factors) - 1
    previous = None
    for k, factor in enumerate(factors):
        scaled = scale_program(text, filename, factor)
        if scaled == previous:  # nothing left to scale: the smallest reachable
            chosen = k - 1
            break
        previous = scaled
        try:
            if work(scaled, filename) <= budget:
                chosen = k
                break
        except EincError:
            continue
    return [factors[k] for k in range(chosen, -1, -1)]
