"""What sketch rules share: a sketch and its knobs' roles, a statement nest as the rules see
it (`Nest`: its loops, extents, which are spatial and which reductions, the tensors it touches
and along which axes), and knob candidate lists.

A rule is `rule(ctx) -> list[Sketch]`: it builds ordinary transform scripts with a
ScheduleBuilder on a clone of the loop module; a rule that does not apply returns [] and
one that fails raises (the space records the failure and goes on without it).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

from xdsl.dialects import affine, func
from xdsl.dialects.builtin import MemRefType, ModuleOp
from xdsl.ir import SSAValue

from einc.transforms import loop_transforms as lt
from einc.transforms.loop_analysis import (
    band_from,
    accesses,
    buffer_name,
    determined_loops,
    induction_var,
    linear_form,
    perfect_band,
    trip_count,
    written_groups,
)
from einc.schedule.script import Schedule

MAX_OPTIONS = 12
"""The longest candidate list of a knob (a spread of the divisors and powers of two)."""


@dataclass(frozen=True)
class KnobRole:
    """What a knob controls, for features: the statement and axis it tiles (or unrolls, ...),
    its tile level (0 outermost; a `tile` knob at level l is how many iterations of the level
    below one iteration of level l covers), the axis's extent and the kind of knob."""

    stmt: str
    axis: str
    level: int
    extent: int
    kind: str  # "tile" | "unroll" | "rfactor" | "parallel" | "thread" | "order" (a rotation: no size)


@dataclass
class Sketch:
    """One structure of schedule: a transform script whose knobs a search sets."""

    name: str
    schedule: Schedule
    description: str
    roles: dict[str, KnobRole] = field(default_factory=dict)
    seed: bool = False
    """Its default point is measured early (right after the space's default point, by the
    `bayes` search): a structure its rule expects to matter, whatever the random draws."""


@dataclass(frozen=True)
class Tensor:
    name: str
    axes: frozenset[str]  # the statement axes its index moves with
    itemsize: int
    written: bool
    unit_axis: str | None  # the axis its last index moves with at stride 1


@dataclass(frozen=True)
class Nest:
    """A top-level statement nest of the loop module (its position among the function's
    top-level loops, so a rule finds its clone in a builder's payload)."""

    position: int
    stmt: str
    init: bool
    perfect: bool  # a perfect band of tagged loops writing one tensor
    axes: tuple[str, ...]
    extents: tuple[int, ...]
    spatial: tuple[str, ...]  # loops the written element determines, in band order
    reduction: tuple[str, ...]
    tensors: tuple[Tensor, ...]
    ops: int  # arithmetic ops of the body (per iteration point)

    def extent(self, axis: str) -> int:
        return self.extents[self.axes.index(axis)]

    @property
    def points(self) -> int:
        return math.prod(self.extents)

    def output(self) -> Tensor | None:
        return next((t for t in self.tensors if t.written), None)


def tag(loop: affine.ForOp, key: str) -> str | None:
    attr = loop.attributes.get(key)
    return getattr(attr, "data", None)


def top_loops(module: ModuleOp) -> list[affine.ForOp]:
    """The top-level loops of the module's functions, in order."""
    return [op for f in module.walk() if isinstance(f, func.FuncOp) and f.body.blocks
            for op in f.body.block.ops if isinstance(op, affine.ForOp)]  # fmt: skip


def analyse(module: ModuleOp) -> list[Nest]:
    """Every top-level statement nest of a loop-level module."""
    nests = []
    for k, top in enumerate(top_loops(module)):
        band = band_from(top)
        stmt = tag(top, lt.STMT_ATTR)
        tagged = all(tag(x, lt.STMT_ATTR) == stmt and tag(x, lt.AXIS_ATTR) for x in band)
        tagged = tagged and not any("einc.copy" in x.attributes for x in band)
        axes = tuple(tag(x, lt.AXIS_ATTR) or "?" for x in band)
        extents = tuple(trip_count(x) or 0 for x in band)
        ivs = [induction_var(x) for x in band]
        axis_of: dict[SSAValue, str] = dict(zip(ivs, axes))
        groups = written_groups(top)
        perfect = bool(stmt) and tagged and perfect_band(band) and len(groups) == 1 and all(extents)
        spatial: tuple[str, ...] = axes
        if len(groups) == 1:
            ((_, group),) = groups.items()
            fixed = determined_loops(group, ivs)
            spatial = tuple(a for iv, a in zip(ivs, axes) if iv in fixed)
        written = set(groups)
        tensors: dict[str, Tensor] = {}
        for a in accesses(top):
            name = buffer_name(a.buffer)
            moving: set[str] = set()
            unit = None
            results = a.map.results if a.map is not None else ()
            for r, e in enumerate(results):
                form = linear_form(e, a.operands)
                if form is None:
                    moving |= set(axes)
                    continue
                moving |= {axis_of[v] for v, c in form[0].items() if c and v in axis_of}
                if r == len(results) - 1:
                    unit = next((axis_of[v] for v, c in form[0].items() if c == 1 and v in axis_of), None)
            old = tensors.get(name)
            buffer_type = a.buffer.type
            assert isinstance(buffer_type, MemRefType), buffer_type  # affine accesses are to memrefs
            elem = buffer_type.get_element_type()
            size = max(1, getattr(elem, "bitwidth", 32) // 8)
            axes_set = frozenset(moving) | (old.axes if old else frozenset())
            tensors[name] = Tensor(name, axes_set, size, a.buffer in written, unit if old is None else old.unit_axis)
        ops = sum(1 for op in band[-1].body.walk() if op.dialect_name() in ("arith", "math"))
        nests.append(Nest(k, stmt or "?", "einc.init" in top.attributes, perfect, axes, extents,
                          spatial, tuple(a for a in axes if a not in spatial), tuple(tensors.values()), ops))  # fmt: skip
    return nests


def _spread(values: list[int], limit: int) -> list[int]:
    """At most `limit` of the sorted `values`, the smallest and largest among them."""
    if len(values) <= limit:
        return values
    picks = {values[round(k * (len(values) - 1) / (limit - 1))] for k in range(limit)}
    return sorted(picks)


def divisors(n: int) -> list[int]:
    return [d for d in range(1, n + 1) if n % d == 0]


def tile_options(extent: int, lo: int = 1, hi: int | None = None, dividing: bool = False,
                 limit: int = MAX_OPTIONS) -> tuple[int, ...]:  # fmt: skip
    """Divisors and powers of two of `extent` in [lo, hi] (the extent itself included when
    it is in range; only divisors with `dividing`), at most `limit` of them."""
    hi = extent if hi is None else min(hi, extent)
    found = {d for d in divisors(extent) if lo <= d <= hi}
    if not dividing:
        found |= {1 << p for p in range(31) if lo <= 1 << p <= hi}
    if lo <= extent <= hi:
        found.add(extent)
    return tuple(_spread(sorted(found), limit)) or (max(1, min(extent, lo)),)


def nearest(options: Iterable[int], want: int) -> int:
    """The option closest to `want` (the smaller on a tie)."""
    return min(options, key=lambda v: (abs(math.log2(v) - math.log2(max(want, 1))), v))


Rule = Callable[["RuleContext"], list[Sketch]]


@dataclass
class RuleContext:
    """What a rule is given: the loop module (never modified: rules build on clones), its
    nests, the target's name and vector lanes."""

    loops: ModuleOp
    nests: list[Nest]
    target: str
    lanes: int
    max_threads: int = 256
