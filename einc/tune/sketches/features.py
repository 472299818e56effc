"""Ansor-like features of a point, from its knob values and their roles (einc.tune.space) and
the statements' access patterns: per tile level the iterations and bytes touched, the
arithmetic intensity of the inner tiles, vector width multiples, unrolled trip counts,
whether tiles divide their loops, parallel iterations and GPU threads. Cheap (no schedule is
built or applied): a few microseconds a point.
"""

from __future__ import annotations

import math
from collections.abc import Mapping

from einc.tune.sketches.base import KnobRole, Nest

AGGREGATES = (
    "l1.iters.log2", "l2.iters.log2", "l1.bytes.log2", "l2.bytes.log2", "l1.intensity", "l2.intensity",
    "vector.multiple", "vector.aligned", "unroll.trip.log2", "divides.frac", "parallel.iters.log2",
    "threads.log2", "blocks.log2", "rfactor.log2", "tuned.stmts",
)  # fmt: skip

SIZED = ("tile", "unroll", "parallel", "thread")


def _log2(x: float) -> float:
    return math.log2(x) if x > 0 else 0.0


def aggregates(roles: Mapping[str, KnobRole], values: Mapping[str, int], nests: list[Nest], lanes: int) -> list[float]:
    """The values of AGGREGATES for one point."""
    spans: dict[tuple[str, str], dict[int, int]] = {}
    unroll, divides, parallel, threads, blocks, rf = 1, 0, 0.0, 1, 0.0, 1
    vector = 0
    for name, role in roles.items():
        v = values.get(name)
        if v is None:
            continue
        if role.kind in SIZED:
            levels = spans.setdefault((role.stmt, role.axis), {})
            levels[role.level] = levels.get(role.level, 1) * v
        if role.kind == "unroll":
            unroll *= v
        if role.kind == "rfactor":
            rf *= v
            parallel += _log2(v)
        if role.kind == "thread":
            threads *= v
            blocks += _log2(math.ceil(role.extent / v)) if role.extent else 0.0
        if role.kind == "tile" and role.level == 2:
            vector = max(vector, v)
    for (stmt, axis), levels in spans.items():
        extent = next((r.extent for r in roles.values() if r.stmt == stmt and r.axis == axis), 0)
        span = math.prod(levels.values())
        divides += bool(extent) and extent % span == 0
        if extent and any(r.stmt == stmt and r.axis == axis and r.kind == "parallel" for r in roles.values()):
            parallel += _log2(math.ceil(extent / span))
    l1_it = l2_it = l1_b = l2_b = l1_f = l2_f = 0.0
    stmts = {r.stmt for r in roles.values()}
    for nest in nests:
        if nest.init or nest.stmt not in stmts:
            continue
        span1 = {a: _span(spans.get((nest.stmt, a)), 1, e) for a, e in zip(nest.axes, nest.extents)}
        span2 = {a: _span(spans.get((nest.stmt, a)), 2, e) for a, e in zip(nest.axes, nest.extents)}
        it1, it2 = math.prod(span1.values()), math.prod(span2.values())
        l1_it += it1
        l2_it += it2
        l1_f += it1 * max(nest.ops, 1)
        l2_f += it2 * max(nest.ops, 1)
        for t in nest.tensors:
            l1_b += t.itemsize * math.prod(span1[a] for a in t.axes if a in span1)
            l2_b += t.itemsize * math.prod(span2[a] for a in t.axes if a in span2)
    return [
        _log2(l1_it), _log2(l2_it), _log2(l1_b), _log2(l2_b),
        l1_f / l1_b if l1_b else 0.0, l2_f / l2_b if l2_b else 0.0,
        vector / lanes if lanes else 0.0, float(bool(vector) and vector % max(lanes, 1) == 0),
        _log2(unroll), divides / len(spans) if spans else 1.0, parallel,
        _log2(threads), blocks, _log2(rf), float(len(stmts)),
    ]  # fmt: skip


def _span(levels: dict[int, int] | None, level: int, extent: int) -> int:
    """Iterations of an axis inside one tile of `level`: the product of its tile knobs at that
    level and below; an axis no knob tiles runs whole in level 1 tiles and not in level 2."""
    if not levels:
        return extent if level == 1 else 1
    return max(1, min(extent or 1 << 30, math.prod(v for lv, v in levels.items() if lv >= level)))
