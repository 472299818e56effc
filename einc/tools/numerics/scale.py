"""Small shapes for `--check-numerics`: a `.ein` program with its input shapes scaled down.

    scaled = scale_program(text, filename, factor)   # the text with smaller declared shapes
    factor = default_scale(text, filename)           # the largest 1/2^k under the work budget

Each declared dimension `d` becomes `max(min(d, MIN_DIM), ceil(d * factor))`; equal
dimensions stay equal (a contraction's two sides still agree), and an integer literal of the
same value in a statement (a `where HO in 27`, a bound `HO + KH - 2 < 27`) is scaled with it,
as it is most likely tied to it. Should the frontend refuse that program, the literals are
kept and only the dimensions not written in a statement are scaled ("pinned"); a scaled text
the frontend refuses in both ways is not used (the next larger scale is tried). The scaled
program is a program of its own, checked against its own oracle: a literal scaled by
coincidence changes what is computed, not whether the check is sound.
"""

from __future__ import annotations

import math
from collections.abc import Iterator

from einc.errors import EincError
from einc.frontend import ast

MIN_DIM = 4
"""Dimensions are not scaled below this (nor is a smaller one scaled at all)."""

WORK_BUDGET = 16384
"""The default scale's budget: the statements' iteration points, each weighted by the size
of its statement (syntax nodes), together. einc's loop interpreter runs ~150k such node-points
a second, so one loop-level execution takes ~0.1 s (matmul: 1024 points of 7 nodes)."""

MAX_HALVINGS = 12

MAX_INTERPRETED_POINTS = 200_000
"""Above this many iteration points (~10 s a run), the interpreted levels are not executed."""


def interpreted_too_big(program_work: int) -> str | None:
    """Why a program of this much work is not interpreted, or None."""
    from einc.tools.numerics.execute import fast_interpreter

    limit = MAX_INTERPRETED_POINTS * (16 if fast_interpreter() else 1)
    if program_work <= limit:
        return None
    return (f"not run: {program_work} iteration points, too many for the interpreter "
            f"(at most {limit}; choose a smaller --shape-scale)")  # fmt: skip


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


def _int_literals(expr: ast.Expr) -> Iterator[ast.Number]:
    if isinstance(expr, ast.Number) and not expr.is_float and isinstance(expr.value, int):
        yield expr
    for child in ast.children(expr):
        yield from _int_literals(child)


def scale_program(text: str, filename: str, factor: float, pinned: bool | None = None) -> str:
    """`text` with each declared input dimension scaled by `factor` (see the module's doc):
    `pinned=False` scales the statements' literals of the same values too, `True` keeps them
    (and their dimensions), None tries False and falls back to True if the frontend refuses."""
    if factor >= 1.0:
        return text
    if pinned is None:
        scaled = scale_program(text, filename, factor, pinned=False)
        try:
            work(scaled, filename)
            return scaled
        except EincError:
            return scale_program(text, filename, factor, pinned=True)
    module = _parse(text, filename)
    keep = _pinned(module) if pinned else set()
    dims = [d for decl in module.inputs for d in decl.dims
            if isinstance(d, ast.Number) and isinstance(d.value, int) and not d.is_float]  # fmt: skip
    sizes = {int(d.value) for d in dims if d.value not in keep and scaled_dim(int(d.value), factor) != d.value}
    targets = list(dims)
    if not pinned:
        for statement in module.statements:
            for expr in (*statement.indices, statement.expr, *(w.extent for w in statement.where)):
                targets.extend(_int_literals(expr))
    edits = {(n.span.start, n.span.end, str(scaled_dim(int(n.value), factor))) for n in targets if n.value in sizes}
    for start, end, new in sorted(edits, reverse=True):
        text = text[:start] + new + text[end:]
    return text


def _size(expr: ast.Expr) -> int:
    return 1 + sum(_size(child) for child in ast.children(expr))


def work(text: str, filename: str) -> int:
    """The statements' iteration points, each weighted by its statement's size: what one
    loop-level execution costs."""
    from einc.frontend import parse_program

    program = parse_program(text, filename)
    return sum(math.prod(size for _, size in s.axes) * (1 + _size(s.syntax.expr)) for s in program.statements)


FAST_WORK_BUDGET = 16 * WORK_BUDGET
"""The budget when einc.semantics.egpu runs the loop levels (its lanes are 50-100x faster)."""


def default_budget() -> int:
    from einc.tools.numerics.execute import fast_interpreter

    return FAST_WORK_BUDGET if fast_interpreter() else WORK_BUDGET


def candidate_scales(text: str, filename: str, budget: int | None = None) -> list[float]:
    """The scales to try, best first: the largest 1/2^k whose program fits `budget` (default
    `default_budget()`), or the smallest one reachable, then the larger ones up to 1 (should a
    schedule not fit)."""
    budget = default_budget() if budget is None else budget
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
