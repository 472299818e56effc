"""The tuner's search space: sketches derived from the program by rules (einc.tune.sketches),
each a transform script whose knobs a search sets; a point is a sketch and a value per knob.

    space = SearchSpace.from_task(TuneTask.from_file("matmul.ein"))
    p = space.default_point()              # the target's default schedule: never worse than untuned
    q = space.mutate(p, rng); space.candidate(q).schedule   # the script with q's knob values
    space.features([p, q])                 # Ansor-like features from knob values and roles

A sampled point is legal or refused by the legality checks when applied (never wrong code).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

import numpy as np
from xdsl.dialects.builtin import ModuleOp

from einc.errors import ScheduleError, SourceLocation
from einc.schedule.choice import ScheduleChoice
from einc.schedule.default import default_schedule
from einc.schedule.script import Schedule
from einc.schedule.builder import ScheduleBuilder
from einc.targets import get_target
from einc.tune.sketches import rules_for
from einc.tune.sketches.base import KnobRole, Nest, RuleContext, Sketch, analyse
from einc.tune.types import Candidate, Point, TuneTask

__all__ = ["KnobRole", "SearchSpace", "Sketch", "loops_of"]

SKETCH_CHANGE_P = 0.1
"""How often `mutate` moves a point to another sketch."""


def loops_of(task: TuneTask) -> ModuleOp:
    """The task's loop-level module (what schedules apply to)."""
    return task.compilation(ScheduleChoice.NONE).module("loops")


def _lanes(target: str) -> int:
    return get_target(target).vector_lanes()


def _max_threads(target: str) -> int:
    try:
        from einc.targets import description

        return int(description(target).max_threads_per_block)
    except Exception:  # noqa: BLE001 - a target without a device description
        return 1


def default_roles(schedule: Schedule, nests: list[Nest]) -> dict[str, KnobRole]:
    """Roles of the default policies' knobs (einc.schedule.policies.cpu: `stmt.tile_i|j|k|rows`;
    einc.schedule.policies.gpu: `stmt.axis.threads|reg|ktile|items`)."""
    from einc.tune.sketches.cpu import policy_role as cpu_role
    from einc.tune.sketches.gpu import policy_role

    return {name: policy_role(name, nests) or cpu_role(name, nests) for name in schedule.knobs()}


class SearchSpace:
    """The sketches of one task (the first is "default") and their knobs."""

    def __init__(self, task: TuneTask, sketches: dict[str, Sketch], nests: list[Nest], lanes: int,
                 skipped: dict[str, str] | None = None):  # fmt: skip
        self.task = task
        self.sketches = sketches
        self.nests = nests
        self.lanes = lanes
        self.skipped = dict(skipped or {})
        """rule -> why it produced nothing (its exception): a rule failing is a value."""
        self._knobs = {name: s.schedule.knobs() for name, s in sketches.items()}
        self._names = list(sketches)
        self._columns = [(s, k) for s in self._names for k in sorted(self._knobs[s])]
        counts = [math.prod(len(v.options) for v in self._knobs[s].values()) for s in self._names]
        weights = np.array([1.0 + math.log2(c) for c in counts])
        self._weights = weights / weights.sum()

    @classmethod
    def from_task(cls, task: TuneTask, rules: Sequence[str] | None = None) -> SearchSpace:
        """The space of `task`: its target's default schedule and the sketches of the target's
        rules (all, or the ones named in `rules`)."""
        loops = loops_of(task)
        nests = analyse(loops)
        lanes = _lanes(task.target)
        default = default_schedule(get_target(task.target), loops)
        if default is None:  # no default policy: the empty script schedules nothing, like it
            default = ScheduleBuilder(loops.clone(), "<default schedule>").finish()
        sketches = {"default": Sketch("default", default, f"the {task.target} target's default schedule",
                                      default_roles(default, nests))}  # fmt: skip
        ctx = RuleContext(loops, nests, task.target, lanes, _max_threads(task.target))
        skipped: dict[str, str] = {}
        for name, rule in rules_for(task.target).items():
            if rules is not None and name not in rules:
                continue
            try:
                made = rule(ctx)
            except Exception as err:  # noqa: BLE001 - a rule failing is a value: skip it
                skipped[name] = f"{type(err).__name__}: {err}"
                continue
            if not made:
                skipped[name] = "does not apply"
            for sketch in made:
                if not any(s.schedule.same_as(sketch.schedule) for s in sketches.values()):
                    sketches[sketch.name] = sketch
        return cls(task, sketches, nests, lanes, skipped)

    # ---- points -------------------------------------------------------------------------------
    def default_point(self) -> Point:
        return Point.of("default", {k: v.selected for k, v in self._knobs["default"].items()})

    def sketch_default(self, sketch: str) -> Point:
        return Point.of(sketch, {k: v.selected for k, v in self._knobs[sketch].items()})

    def seed_points(self) -> list[Point]:
        """Points a search proposes first, after the default: the
        default's neighbours (`default_neighbours`), then the default points of the sketches
        marked `seed` (the CPU `policy.*` sketches, the device space's staged, cross-thread,
        private, one-column and reduction-unrolled tilings), in the space's order. The
        neighbours come first so that they share the first batch with the default, timed in
        full: a later batch's points are stopped early against the fastest trial so far, and
        on a loaded machine a neighbour as fast as the default was stopped so."""
        seeds = [self.sketch_default(name) for name, s in self.sketches.items() if s.seed]
        return list(dict.fromkeys([*self.default_neighbours(), *seeds]))

    def default_neighbours(self) -> list[Point]:
        """The default point with one device register tile (a knob `stmt.axis.reg` of the
        device policy) one option larger, then each one option smaller: the constructed
        default's nearest tiles, which a 16-trial search should not have to stumble on (on
        PoCL's CPU device a 16 x 8 register tile beats the default's 8 x 8; on lavapipe 4 x 8,
        the hand schedule "32x64 tile, 4x8 registers", beats it); and the default with all its cross-thread
        reductions (knobs `stmt.axis.threads`, `axis` a reduction of `stmt`) one option narrower,
        and one wider, together (on PoCL a softmax's two reductions at 32 work-items per row
        beat the default's 64: a 32-trial search drawing each width alone rarely met both)."""
        knobs = self._knobs["default"]
        base = self.default_point().values()
        found = []
        regs = [name for name, knob in knobs.items() if name.endswith(".reg") and base[name] in knob.options]
        for step in (1, -1):
            for name in regs:
                at = knobs[name].options.index(base[name]) + step
                if 0 <= at < len(knobs[name].options):
                    found.append(Point.of("default", {**base, name: knobs[name].options[at]}))
        reductions = {f"{n.stmt}.{axis}.threads" for n in self.nests for axis in n.reduction}
        widths = [name for name in sorted(knobs) if name in reductions and base[name] in knobs[name].options]
        for step in (-1, 1):
            moved = {name: knobs[name].options[knobs[name].options.index(base[name]) + step] for name in widths
                     if 0 <= knobs[name].options.index(base[name]) + step < len(knobs[name].options)}  # fmt: skip
            if moved:
                found.append(Point.of("default", {**base, **moved}))
        return found

    def knob_options(self, sketch: str) -> dict[str, tuple[int, ...]]:
        return {k: v.options for k, v in self._knobs[sketch].items()}

    def random_point(self, rng: np.random.Generator) -> Point:
        """A sketch (weighted by 1 + log2 of its number of points: a one-point default is not
        drawn as often as a sketch of thousands) and a value per knob, uniformly."""
        return self._random_of(self._names[int(rng.choice(len(self._names), p=self._weights))], rng)

    def _random_of(self, sketch: str, rng: np.random.Generator) -> Point:
        return Point.of(sketch, {k: int(rng.choice(v.options)) for k, v in self._knobs[sketch].items()})

    def mutate(self, point: Point, rng: np.random.Generator) -> Point:
        """1 or 2 knob values changed (to a neighbouring option half the time); rarely, or
        when the sketch has no knob to change, a random point of another sketch."""
        knobs = self._knobs[point.sketch]
        movable = [k for k, v in knobs.items() if len(v.options) > 1]
        others = [s for s in self._names if s != point.sketch]
        if others and (not movable or rng.random() < SKETCH_CHANGE_P):
            return self._random_of(others[int(rng.integers(len(others)))], rng)
        if not movable:
            return point
        values = point.values()
        count = min(len(movable), 1 + int(rng.random() < 0.5))
        for k in rng.choice(movable, size=count, replace=False):
            options = knobs[str(k)].options
            at = options.index(values[str(k)]) if values.get(str(k)) in options else 0
            if rng.random() < 0.5:
                step = int(rng.choice([-1, 1]))
                new = min(max(at + step, 0), len(options) - 1)
                new = new if new != at else at - step
            else:
                new = int(rng.choice([x for x in range(len(options)) if x != at]))
            values[str(k)] = options[new]
        return Point.of(point.sketch, values)

    def crossover(self, a: Point, b: Point, rng: np.random.Generator) -> Point:
        """Each knob from `a` or `b` (same sketch); `a` itself for points of two sketches."""
        if a.sketch != b.sketch:
            return a
        va, vb = a.values(), b.values()
        return Point.of(a.sketch, {k: (va[k] if rng.random() < 0.5 else vb.get(k, va[k])) for k in va})

    def candidate(self, point: Point) -> Candidate:
        """The point's script: the sketch with its knobs set (ScheduleError for a point not
        in the space: an unknown sketch, a knob missing or unknown, a value not an option)."""
        sketch = self.sketches.get(point.sketch)
        where = SourceLocation("<search space>", 1, 1)
        if sketch is None:
            raise ScheduleError(f"no sketch '{point.sketch}' in the space (sketches: {', '.join(self._names)})", where)
        missing = set(self._knobs[point.sketch]) - set(point.values())
        if missing:
            raise ScheduleError(f"point {point.describe()} sets no value for {', '.join(sorted(missing))}", where)
        return Candidate(point, str(sketch.schedule.with_values(point.values())))

    def size(self) -> int:
        return sum(math.prod(len(v.options) for v in knobs.values()) for knobs in self._knobs.values())

    # ---- features -----------------------------------------------------------------------------
    def feature_names(self) -> list[str]:
        from einc.tune.sketches.features import AGGREGATES

        return ([f"sketch={s}" for s in self._names] + [f"{s}:{k}:log2" for s, k in self._columns]
                + list(AGGREGATES))  # fmt: skip

    def features(self, points: Sequence[Point]) -> np.ndarray:
        """(len(points), len(feature_names())) float64: the sketch (one-hot), each knob's
        value (log2, 0 outside its sketch), and per tile level the iterations, bytes touched,
        arithmetic intensity, vector width multiples, unrolled trip counts, divisibility and
        parallel iterations, from the knob values and their roles (nothing is applied)."""
        from einc.tune.sketches.features import aggregates

        n_sk, n_col = len(self._names), len(self._columns)
        names = self.feature_names()
        out = np.zeros((len(points), len(names)), dtype=np.float64)
        col = {c: n_sk + i for i, c in enumerate(self._columns)}
        for row, p in enumerate(points):
            if p.sketch not in self.sketches:
                continue
            out[row, self._names.index(p.sketch)] = 1.0
            for k, v in p.knobs:
                if (p.sketch, k) in col:
                    out[row, col[(p.sketch, k)]] = math.log2(max(v, 1))
            out[row, n_sk + n_col:] = aggregates(self.sketches[p.sketch].roles, p.values(), self.nests, self.lanes)
        return out

    def aggregates(self, point: Point) -> dict[str, float]:
        """The point's program-independent features (`features.AGGREGATES` by name): what a
        record keeps so that searches of other programs can learn from it (einc.tune.transfer)."""
        from einc.tune.sketches.features import AGGREGATES, aggregates

        if point.sketch not in self.sketches:
            return {}
        values = aggregates(self.sketches[point.sketch].roles, point.values(), self.nests, self.lanes)
        return dict(zip(AGGREGATES, values))

    def extents(self, point: Point) -> dict[str, int]:
        """The extent of the axis each of the point's knobs works on (its role's; 0 where
        unknown): what re-fitting the point to another shape of the program needs."""
        roles = self.sketches[point.sketch].roles if point.sketch in self.sketches else {}
        return {k: roles[k].extent if k in roles else 0 for k, _ in point.knobs}

    def foreign_features(self, rows: Sequence[tuple[str, Mapping[str, int], Mapping[str, float]]]) -> np.ndarray:
        """`features` of points of other programs, each given as its sketch's name, its knob
        values and its `aggregates` (as its record kept them), in this space's columns: the
        sketch and knob columns by name (0 where this space has no such sketch or knob), the
        aggregates as given (0 where one is missing)."""
        from einc.tune.sketches.features import AGGREGATES

        names = self.feature_names()
        column = {name: i for i, name in enumerate(names)}
        out = np.zeros((len(rows), len(names)), dtype=np.float64)
        for row, (sketch, knobs, aggregates) in enumerate(rows):
            if (i := column.get(f"sketch={sketch}")) is not None:
                out[row, i] = 1.0
            for knob, value in knobs.items():
                if (i := column.get(f"{sketch}:{knob}:log2")) is not None:
                    out[row, i] = math.log2(max(value, 1))
            for name, value in aggregates.items():
                if name in AGGREGATES and isinstance(value, int | float) and math.isfinite(value):
                    i = column[name]
                    out[row, i] = value
        return out


def describe_sketches(path: str, target: str = "c", rule: str | None = None,
                      where: SourceLocation | None = None) -> str:  # fmt: skip
    """`einc sketches`: each sketch's name, description, knobs (options, role) and script;
    `rule`: only that rule's (`default`: the target's default schedule). An unknown rule is a
    UsageError at `where`."""
    from einc.errors import UsageError

    get_target(target, where)
    known = ["default", *rules_for(target)]
    if rule is not None and rule not in known:
        raise UsageError(f"no sketch rule '{rule}' for target '{target}' (rules: {', '.join(known)})", where)
    selected = None if rule is None else [] if rule == "default" else [rule]
    space = SearchSpace.from_task(TuneTask.from_file(path, target), selected)
    lines = []
    for name, sketch in space.sketches.items():
        if rule is not None and rule != "default" and name == "default":
            continue
        lines.append(f"// sketch {name}: {sketch.description}")
        for knob, options in space.knob_options(name).items():
            role = sketch.roles.get(knob)
            what = f" ({role.kind} of {role.stmt}.{role.axis}, level {role.level}, extent {role.extent})" if role else ""
            lines.append(f"//   knob {knob} in {list(options)}{what}")
        lines.append(str(sketch.schedule))
    if rule is not None and rule in space.skipped:
        lines.append(f"// rule {rule}: {space.skipped[rule]}")
    return "\n".join(lines) + "\n"
