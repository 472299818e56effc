"""Transfer between programs: a new search learns from the records of every other program tuned
on the same target under the same context (device, ISA flags or driver, compiler, flags, search
space version: einc.compiler.records.RecordContext) before it measures anything.

    plan = plan_transfer(task, space, db, context)   # what the records offer this task
    apply_transfer(policy, plan)                     # warm start and seeds

1. Warm start. Every search trial of another program under the context whose record keeps its
   features (`extra["transfer"]`, `record_info`) becomes a training row of the cost model:
   the features are program-independent (`SearchSpace.aggregates`: iterations, bytes,
   intensity, threads, ... per tile level; the sketch and knob columns match by name), and the
   target is the log of the throughput (operations of one run of its program per second), so
   that programs of different sizes compare. The model is fitted before the first measurement.
2. Seeds. The nearest programs (`program_distance`: the same normalised program but for its
   sizes) give their best schedules: the tuner's decision and the fastest trials, each
   re-fitted to this program's shape (`refit`: every knob value mapped to an option of this
   space, a tile or thread count that spanned its axis spanning the new one, one that divided
   its axis dividing the new one where an option does; where that is illegal, the values kept
   as they were: `refits`) and checked legal by lowering it (`legal`) before the first batch
   measures it; a schedule none of whose re-fits is legal is dropped, never launched.

Records made before transfer (no `extra["transfer"]`) still give seeds (their knob values are
mapped without their old extents) but no warm-start rows; a version 1 database gives nothing.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from einc.errors import EincError
from einc.tune.sketches.base import nearest
from einc.tune.types import Candidate, Point, Status

if TYPE_CHECKING:
    from einc.compiler.records import Record, RecordContext, RecordStore
    from einc.tune.space import SearchSpace
    from einc.tune.types import TuneTask

TRANSFER = "transfer"
"""The key of a record's `extra` that keeps what transfer needs (`record_info`)."""
PRIOR_LIMIT = 512
"""The latest this many trials of other programs warm-start the cost model: the model is refitted
before every batch, and a fit of the forest grows with its rows (measured on this 2-core
machine, shared: 0.35 s for 200 rows, 2.6 s for 2,000)."""
SEED_PROGRAMS = 3
"""Seeds come from at most this many nearest programs ..."""
SEEDS_PER_PROGRAM = 2
"""... at most this many from each (distinct points after re-fitting, legal ones only)."""

_SIZE = re.compile(r"(?<=[<x])\d+(?=x)|(?<== )\d+(?=[,\]])|(?<=constant )-?\d+(?= : (?:i\d+|index))")
"""The sizes of a printed `ein` module: tensor dimensions (`tensor<64x128xf32>`), loop extents
(`[N = 64, M = 32]`) and integer constants (bounds of padded accesses: `arith.constant 27 : i32`)."""


def shape_signature(normalized: str) -> tuple[str, tuple[int, ...]]:
    """A normalised program's structure (its text with every size replaced by `#`: names,
    statements, types, access maps) and its sizes, in order."""
    sizes = tuple(int(m.group()) for m in _SIZE.finditer(normalized))
    return _SIZE.sub("#", normalized), sizes


def program_distance(a: str, b: str) -> float:
    """How far apart two normalised programs are for transfer: infinite unless they have the
    same structure (the same statements on the same names, only sizes differ), else the sum
    over their sizes of |log2 ratio| (0: the same program; 1: one size doubled)."""
    (sa, xa), (sb, xb) = shape_signature(a), shape_signature(b)
    if sa != sb or len(xa) != len(xb):
        return math.inf
    return sum(abs(math.log2(1 + abs(p)) - math.log2(1 + abs(q))) for p, q in zip(xa, xb))


def nearest_programs(normalized: str, programs: Mapping[str, str], k: int = SEED_PROGRAMS) -> list[tuple[str, float]]:
    """The `k` programs of `programs` (key -> normalised text) nearest `normalized`, as (key,
    distance), nearest first (ties by key); the program itself and programs of another
    structure are never among them."""
    found = [(key, program_distance(normalized, text)) for key, text in programs.items() if text != normalized]
    return sorted(((key, d) for key, d in found if math.isfinite(d)), key=lambda kd: (kd[1], kd[0]))[:k]


def record_info(task: TuneTask, space: SearchSpace, point: Point) -> dict[str, object]:
    """What a record keeps for transfer (`extra["transfer"]`): the point's program-independent
    features, its program's work (operations of one run) and each knob's axis extent."""
    features = {name: round(value, 6) for name, value in space.aggregates(point).items()}
    return {"features": features, "work": int(task.flops), "extents": space.extents(point)}


# ---- re-fitting a point to another shape ---------------------------------------------------------
def refit_value(value: int, old_extent: int, new_extent: int, options: Sequence[int]) -> int:
    """A knob's value on an axis of `old_extent` (0: unknown) re-fitted to one of `options` on
    the axis's new extent (0: unknown): a value that spanned the old axis spans the new one; a
    value that divided it divides the new one where an option does; otherwise the option
    nearest the value clipped to the new extent. A knob with a 0 option is no size (an order
    or a switch, as `reduce_order`): its value is kept where it is an option."""
    if 0 in options:
        return value if value in options else nearest(list(options), value)
    want = value
    pool = list(options)
    if old_extent > 0 and new_extent > 0:
        if value >= old_extent:
            want = new_extent
        want = min(want, new_extent)
        if old_extent % max(value, 1) == 0:
            pool = [o for o in options if new_extent % o == 0] or pool
    elif new_extent > 0:
        want = min(want, new_extent)
    return nearest(pool, want)


def refit(point: Point, extents: Mapping[str, int] | None, space: SearchSpace) -> Point | None:
    """`point` of another program (its knobs' axis extents `extents`, where its record kept
    them) as a point of `space`: the same sketch with every knob re-fitted (`refit_value`); a
    knob the point lacks takes the sketch's default. None where `space` has no such sketch."""
    if point.sketch not in space.sketches:
        return None
    old = point.values()
    default = space.sketch_default(point.sketch).values()
    roles = space.sketches[point.sketch].roles
    values: dict[str, int] = {}
    for knob, options in space.knob_options(point.sketch).items():
        if knob not in old:
            values[knob] = default[knob]
            continue
        new_extent = roles[knob].extent if knob in roles else 0
        old_extent = int((extents or {}).get(knob, 0) or 0)
        values[knob] = refit_value(old[knob], old_extent, new_extent, options)
    return Point.of(point.sketch, values)


def refits(record: Record, space: SearchSpace) -> list[Point]:
    """The points of `space` a record's point may become, in the order to try them: re-fitted
    with its knobs' old extents (`refit`: whole axes kept whole, divisors kept divisors), then
    with its values kept as they were where options allow (a tile that spanned a 256 axis stays
    256 on a 512 one: the spanning one may be refused, e.g. a cached tile grown too large)."""
    info = record.extra.get(TRANSFER)
    extents = info.get("extents") if isinstance(info, dict) else None
    found = [refit(record.point(), extents if isinstance(extents, dict) else None, space), refit(record.point(), None, space)]
    return list(dict.fromkeys(p for p in found if p is not None))


def legal(task: TuneTask, candidate: Candidate) -> str | None:
    """Why `candidate` is illegal for `task` (its schedule refused when lowered to the target's
    module), or None when it is legal. Nothing is built or launched."""
    from einc.schedule.choice import ScheduleChoice

    try:
        task.compilation(ScheduleChoice.of(candidate.schedule, "<transferred schedule>")).module("target")
    except EincError as err:
        return err.render()
    return None


# ---- the plan ------------------------------------------------------------------------------------
@dataclass(frozen=True)
class PriorRow:
    """One trial of another program, as the cost model learns from it: its sketch, knob values,
    program-independent features, and score (log of operations per second; None: it failed)."""

    sketch: str
    knobs: Mapping[str, int]
    features: Mapping[str, float]
    score: float | None


@dataclass(frozen=True)
class Source:
    """A program the seeds came from: its key, summary (first statement), distance, how many
    seeds it gave and how many of its re-fitted points were refused before launch."""

    task_key: str
    summary: str
    distance: float
    seeds: int
    refused: int = 0


@dataclass
class TransferPlan:
    """What the records offer a new search (`plan_transfer`)."""

    prior: list[PriorRow] = field(default_factory=list[PriorRow])
    programs: int = 0  # the other programs the prior rows come from
    seeds: list[Point] = field(default_factory=list[Point])
    sources: list[Source] = field(default_factory=list[Source])
    work: int = 1  # operations of one run of the task (its scores are log(work / seconds))
    seed_of: dict[Point, str] = field(default_factory=dict[Point, str])  # seed -> the program key it came from

    @property
    def empty(self) -> bool:
        return not self.prior and not self.seeds

    def describe(self) -> list[str]:
        """The tune summary's lines about transfer."""
        if self.empty:
            return ["transfer: no other program tuned on this device and target to learn from"]
        ok = sum(r.score is not None for r in self.prior)
        lines = [f"transfer: cost model warm-started from {_count(len(self.prior), 'trial')} ({ok} ok) of "
                 f"{_count(self.programs, 'other program')} on this device and target"]  # fmt: skip
        if self.sources:
            parts = [f"{s.seeds} from {s.task_key} `{s.summary}` (distance {s.distance:.2f}"
                     + (f", {s.refused} refused before launch" if s.refused else "") + ")" for s in self.sources]
            lines.append(f"  seeds: {_count(len(self.seeds), 're-fitted schedule')} of the nearest programs: "
                         + "; ".join(parts))  # fmt: skip
        else:
            lines.append("  seeds: none (no program of the same structure was tuned here)")
        return lines


def _count(n: int, noun: str) -> str:
    return f"{n} {noun}{'' if n == 1 else 's'}"


def _prior(records: Sequence[Record]) -> tuple[list[PriorRow], int]:
    rows: list[PriorRow] = []
    programs: set[str] = set()
    for r in records:
        info = r.extra.get(TRANSFER)
        if not isinstance(info, dict) or r.status == Status.NOISY.value:
            continue
        features, work = info.get("features"), info.get("work")
        if not isinstance(features, dict) or not isinstance(work, int | float) or work <= 0:
            continue
        score = None
        if r.ok:
            if not (math.isfinite(r.median_s) and r.median_s > 0):
                continue
            score = math.log(work / r.median_s)
        clean = {str(k): float(v) for k, v in features.items() if isinstance(v, int | float) and not isinstance(v, bool)}
        rows.append(PriorRow(r.sketch, dict(r.knobs), clean, score))
        programs.add(r.task_key)
    return rows, len(programs)


def _ranked(store: RecordStore, key: str, target: str, context: RecordContext) -> list[Record]:
    """A program's schedules, best first: its decision (when it crowned a schedule), then its
    OK trials by time (trials stopped early excluded)."""
    best = store.best(key, target, context)
    trials = [t for t in store.trials(key, target, context) if t.ok and t.extra.get("cut") is not True]
    ranked = [best] if best is not None and best.ok and not best.kept_default else []
    return ranked + sorted(trials, key=lambda t: (t.median_s, t.id))


def plan_transfer(task: TuneTask, space: SearchSpace, store: RecordStore, context: RecordContext, *,
                  check: Callable[[TuneTask, Candidate], str | None] = legal,
                  seed_programs: int = SEED_PROGRAMS, seeds_per_program: int = SEEDS_PER_PROGRAM,
                  prior_limit: int = PRIOR_LIMIT) -> TransferPlan:  # fmt: skip
    """What `store`'s records of other programs on `task`'s target under `context` offer a new
    search of `task` in `space`: the cost model's prior rows and the re-fitted, legal seeds
    of the nearest programs (`check` says why a candidate is illegal)."""
    plan = TransferPlan(work=max(int(task.flops), 1))
    plan.prior, plan.programs = _prior(store.records_under(task.target, context, exclude=task.key, limit=prior_limit))
    programs = store.programs_under(task.target, context)
    taken = {space.default_point()}
    for key, distance in nearest_programs(task.normalized, programs, seed_programs):
        given = refused = 0
        for record in _ranked(store, key, task.target, context)[: 4 * seeds_per_program]:
            if given == seeds_per_program:
                break
            tried = False
            for point in refits(record, space):
                if point in taken:
                    continue
                taken.add(point)
                tried = True
                try:
                    why = check(task, space.candidate(point))
                except EincError as err:
                    why = err.render()
                if why is None:
                    plan.seeds.append(point)
                    plan.seed_of[point] = key
                    given += 1
                    break
            else:
                refused += tried
        if given or refused:
            plan.sources.append(Source(key, store.summary(key), distance, given, refused))
    return plan


def apply_transfer(policy: object, plan: TransferPlan) -> None:
    """Give `policy` the plan: its seeds (a policy with `add_seeds`) and its prior rows (a
    policy with `warm_start`: the Bayesian search's cost model, fitted at once); the plan is
    kept as `policy.transfer` (a policy given one is given no other: `tune`)."""
    if hasattr(policy, "transfer"):
        setattr(policy, "transfer", plan)
    if plan.seeds and (add_seeds := getattr(policy, "add_seeds", None)) is not None:
        add_seeds(plan.seeds)
    if plan.prior and (warm_start := getattr(policy, "warm_start", None)) is not None:
        warm_start([(r.sketch, r.knobs, r.features, r.score) for r in plan.prior], math.log(plan.work))
