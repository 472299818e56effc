"""Search policies: which points of a space to measure next. The tuner loop asks `propose(n)`,
measures, and hands the results back through `observe` (also with old records on resume).

    RandomSearch    the default point, then uniform random points (the baseline)
    BayesianSearch  Ansor-style: the default point, the seed sketches' own default points
                    (`SearchSpace.seed_points`: e.g. the device space's cross-thread
                    reductions, which a search should not have to stumble on), then a
                    cost model (model.py) fitted on the measurements scores an
                    evolutionary search (mutate / cross over the best points via the space);
                    each batch is picked by expected improvement with diversity, plus a few
                    random points. Failed points are never proposed again.

No policy proposes a point twice or a point already observed.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Iterable, Mapping, Sequence
from typing import Protocol

import numpy as np

from einc.tune.model import CostModel, FeasibilityModel, expected_improvement
from einc.tune.types import MeasureResult, Point, Status


class Space(Protocol):
    """What a policy uses of `einc.tune.space.SearchSpace`."""

    sketches: dict

    def default_point(self) -> Point: ...
    def knob_options(self, sketch: str) -> dict[str, tuple[int, ...]]: ...
    def random_point(self, rng: np.random.Generator) -> Point: ...
    def mutate(self, point: Point, rng: np.random.Generator) -> Point: ...
    def crossover(self, a: Point, b: Point, rng: np.random.Generator) -> Point: ...
    def features(self, points: Sequence[Point]) -> np.ndarray: ...
    def size(self) -> int: ...


class SearchPolicy(Protocol):
    name: str

    def propose(self, n: int) -> list[Point]: ...
    def observe(self, results: Sequence[tuple[Point, MeasureResult]]) -> None: ...


# Past this many points a space is never enumerated (random draws find new points instead).
_ENUMERATE_LIMIT = 100_000


class _History:
    """What both policies remember: every point proposed or observed, the OK times, the
    failures, and a random source of points never seen."""

    name = "history"

    def __init__(self, space: Space, seed: int = 0):
        self.space = space
        self.rng = np.random.default_rng(seed)
        self._seen: set[Point] = set()
        self._times: dict[Point, float] = {}  # OK points: their best median seconds
        self._failed: set[Point] = set()  # a non-OK status (NOISY excepted): never trusted
        self._all: list[Point] | None = None  # the whole space, when small enough to list
        # points to propose first, after the default: transfer's (add_seeds), then the
        # space's own (its seed sketches' default points)
        self._seeds: list[Point] = list(getattr(space, "seed_points", list)())

    def observe(self, results: Sequence[tuple[Point, MeasureResult]]) -> None:
        for point, result in results:
            self._seen.add(point)
            seconds = result.median_s
            if result.ok and math.isfinite(seconds) and seconds > 0:
                if point not in self._failed:
                    self._times[point] = min(seconds, self._times.get(point, math.inf))
            elif result.status is not Status.NOISY:  # noise says nothing about the point
                self._failed.add(point)
                self._times.pop(point, None)

    def best(self) -> tuple[Point, float] | None:
        """The fastest point observed OK and its median seconds, or None."""
        if not self._times:
            return None
        point = min(self._times, key=lambda p: (self._times[p], p))
        return point, self._times[point]

    def _take(self, point: Point, out: list[Point]) -> None:
        if point not in self._seen:
            self._seen.add(point)
            out.append(point)

    def _random_points(self, k: int, out: list[Point]) -> None:
        """Appends up to k points never seen: random draws, then (when the draws keep hitting
        seen points) the rest of a small space in random order."""
        goal = len(out) + k
        misses = 0
        while len(out) < goal and misses < 64 + 8 * k:
            before = len(out)
            self._take(self.space.random_point(self.rng), out)
            misses += len(out) == before
        if len(out) < goal:
            for point in self._unseen_points():
                self._take(point, out)
                if len(out) == goal:
                    break

    def _unseen_points(self) -> Iterable[Point]:
        if self._all is None:
            self._all = self._enumerate()
        return (p for p in self._all if p not in self._seen)

    def _enumerate(self) -> list[Point]:
        """Every point of the space in a random order, when the knob options' product is the
        space (its `size()`) and small; otherwise nothing (random draws are all there is)."""
        options = {s: self.space.knob_options(s) for s in self.space.sketches}
        total = sum(math.prod(len(v) for v in opts.values()) for opts in options.values())
        if total != self.space.size() or total > _ENUMERATE_LIMIT:
            return []
        points = [Point.of(s, dict(zip(opts, combo)))
                  for s, opts in options.items() for combo in itertools.product(*opts.values())]  # fmt: skip
        return [points[i] for i in self.rng.permutation(len(points))]

    def _start(self, n: int) -> list[Point]:
        """A batch's first points: the default one, until it has been seen, then the seeds not
        proposed yet."""
        out: list[Point] = []
        if n > 0:
            self._take(self.space.default_point(), out)
        while self._seeds and len(out) < n:
            self._take(self._seeds.pop(0), out)
        return out


class RandomSearch(_History):
    """The baseline: the space's default point first, then uniform random points."""

    name = "random"

    def propose(self, n: int) -> list[Point]:
        out = self._start(n)
        self._random_points(n - len(out), out)
        return out


class BayesianSearch(_History):
    """Ansor-style search guided by a cost model. The first batches are the default point and
    random points, until `initial` points have measured OK; then each batch comes from an
    evolutionary search of `generations` generations over a population of `population` (the
    best measured points and random points), scored by expected improvement times the
    predicted chance of measuring OK, and picked with diversity; `eps_random` of each batch
    stays random."""

    name = "bayes"

    def __init__(self, space: Space, seed: int = 0, initial: int = 8, population: int = 256,
                 generations: int = 4, eps_random: float = 0.1):  # fmt: skip
        super().__init__(space, seed)
        self.initial = max(initial, 2)
        self.population = max(population, 4)
        self.generations = max(generations, 0)
        self.eps_random = min(max(eps_random, 0.0), 1.0)
        self.model = CostModel(seed=seed)
        self.feasibility = FeasibilityModel(seed=seed)
        self._features: dict[Point, np.ndarray] = {}
        self._scale = 0.0  # added to -log(seconds): the log of the program's work once warm-started
        self._prior_X: np.ndarray | None = None  # other programs' trials (warm_start): features
        self._prior_y = np.zeros(0)  # their scores, nan where they failed
        self.transfer: object | None = None  # the einc.tune.transfer plan given (apply_transfer)

    # --- transfer (einc.tune.transfer) ---

    def add_seeds(self, points: Sequence[Point]) -> None:
        """Points to propose first (after the default point), ahead of the seeds not yet
        proposed (the space's seed sketches): schedules of other programs re-fitted to this
        one, measured evidence before the space's guesses."""
        self._seeds = list(dict.fromkeys([*points, *self._seeds]))

    def warm_start(self, rows: Sequence[tuple[str, Mapping[str, int], Mapping[str, float], float | None]],
                   scale: float) -> None:  # fmt: skip
        """Learn from other programs' trials before the first measurement: each row is a
        point's sketch, knob values, program-independent features (`space.aggregates`) and
        score (log of operations per second; None for a failure). `scale` is the log of this
        program's operations: its own scores become log(operations / seconds) too. The cost
        model is fitted at once when two rows or more measured OK, and the search proposes
        from it from the first batch."""
        rows = list(rows)
        if not rows:
            return
        foreign = getattr(self.space, "foreign_features", None)  # SearchSpace's; a space without it learns nothing
        if foreign is None:
            return
        X = np.asarray(foreign([(s, k, f) for s, k, f, _ in rows]), dtype=np.float64)
        codes = {s: i for i, s in enumerate(sorted(self.space.sketches))}
        column = np.array([[codes.get(s, -1)] for s, *_ in rows], dtype=np.float64)
        self._prior_X = np.hstack([X, column])
        self._prior_y = np.array([math.nan if y is None else float(y) for *_, y in rows])
        self._scale = float(scale)
        if self._prior_ok() >= 2:
            self._fit()

    def _prior_ok(self) -> int:
        return int(np.isfinite(self._prior_y).sum()) if self._prior_X is not None else 0

    def propose(self, n: int) -> list[Point]:
        out = self._start(n)
        if len(out) >= n:
            return out
        if len(self._times) + self._prior_ok() < self.initial:
            self._random_points(n - len(out), out)
            return out
        spread = n * self.eps_random
        n_random = int(spread) + int(self.rng.random() < spread - int(spread))
        n_model = max(n - len(out) - n_random, 0)
        if n_model:
            # Features are kept for seen points only: the candidates of the last search go.
            self._features = {p: f for p, f in self._features.items() if p in self._seen}
            self._fit()
            points, score, mean = self._evolve()
            for i in self._pick(points, score, mean, n_model):
                self._take(points[i], out)
        self._random_points(n - len(out), out)
        return out

    # --- the model ---

    def _featurize(self, points: Sequence[Point]) -> np.ndarray:
        """The space's features of each point, and its sketch's number as one more column (so
        that a sketch that keeps failing is learnt whatever the features show)."""
        missing = [p for p in dict.fromkeys(points) if p not in self._features]
        if missing:
            rows = np.asarray(self.space.features(missing), dtype=np.float64)
            if rows.ndim != 2 or rows.shape[0] != len(missing):
                raise ValueError(f"space.features gave shape {rows.shape} for {len(missing)} "
                                 "points")  # fmt: skip
            codes = {s: i for i, s in enumerate(sorted(self.space.sketches))}
            column = np.array([[codes.get(p.sketch, -1)] for p in missing], dtype=np.float64)
            self._features.update(zip(missing, np.hstack([rows, column])))
        if not points:
            return np.zeros((0, self._width()))
        return np.stack([self._features[p] for p in points])

    def _width(self) -> int:
        """The number of feature columns (the space's and the sketch's number)."""
        if self._features:
            return len(next(iter(self._features.values())))
        return len(self._featurize([self.space.default_point()])[0])

    def _fit(self) -> None:
        """The cost model and the feasibility model fitted on the points measured and the
        other programs' trials (`warm_start`); the best score EI improves on: the best
        measured, or before any, the 90th percentile of the other programs' OK scores."""
        ok = sorted(self._times)
        failed = sorted(self._failed)
        y = np.array([self._scale - math.log(self._times[p]) for p in ok])
        X_ok, X_failed = self._featurize(ok), self._featurize(failed)
        outcome = np.concatenate([np.ones(len(ok), dtype=bool), np.zeros(len(failed), dtype=bool)])
        X_all, y_ok = np.vstack([X_ok, X_failed]), y
        if self._prior_X is not None:
            good = np.isfinite(self._prior_y)
            X_ok = np.vstack([X_ok, self._prior_X[good]])
            y_ok = np.concatenate([y, self._prior_y[good]])
            X_all = np.vstack([X_all, self._prior_X])
            outcome = np.concatenate([outcome, good])
        self.model.fit(X_ok, y_ok)
        self._best_y = float(y.max()) if len(y) else float(np.quantile(y_ok, 0.9))
        self.feasibility.fit(X_all, outcome)

    def _score(self, points: Sequence[Point]) -> tuple[np.ndarray, np.ndarray]:
        """Acquisition (expected improvement x P(ok)) and predicted mean of each point."""
        X = self._featurize(points)
        mean, std = self.model.predict(X)
        ok = np.maximum(self.feasibility.predict(X), 0.01)
        return expected_improvement(mean, std, self._best_y) * ok, mean

    # --- the evolutionary search ---

    def _evolve(self) -> tuple[list[Point], np.ndarray, np.ndarray]:
        """Every unseen point the search scored, with its acquisition and predicted mean."""
        P = self.population
        measured = sorted(self._times, key=lambda p: (self._times[p], p))
        population = dict.fromkeys(measured[: max(P // 5, 1)])
        for _ in range(2 * P):
            if len(population) >= P:
                break
            population[self.space.random_point(self.rng)] = None
        scored: dict[Point, tuple[float, float]] = {}
        members = list(population)
        for generation in range(self.generations + 1):
            new = [p for p in members if p not in scored]
            if new:
                acq, mean = self._score(new)
                scored.update(zip(new, zip(acq.tolist(), mean.tolist())))
            if generation == self.generations:
                break
            members = self._next_generation(members, scored)
        points = [p for p in scored if p not in self._seen]
        acq = np.array([scored[p][0] for p in points])
        mean = np.array([scored[p][1] for p in points])
        return points, acq, mean

    def _next_generation(self, population: list[Point],
                         scored: dict[Point, tuple[float, float]]) -> list[Point]:  # fmt: skip
        """The best tenth of the population, then children of tournament winners: mutants, and
        one in five a crossover of two winners."""
        ranked = sorted(population, key=lambda p: (-scored[p][0], -scored[p][1], p))
        rng = self.rng

        def winner() -> Point:
            i, j = rng.integers(len(ranked), size=2)
            return ranked[min(i, j)]

        children = dict.fromkeys(ranked[: max(len(ranked) // 10, 1)])
        for _ in range(4 * self.population):
            if len(children) >= self.population:
                break
            if rng.random() < 0.2:
                child = self.space.crossover(winner(), winner(), rng)
            else:
                child = self.space.mutate(winner(), rng)
            children[child] = None
        return list(children)

    def _pick(self, points: list[Point], acq: np.ndarray, mean: np.ndarray, k: int) -> list[int]:
        """Greedy batch by acquisition, each pick shrinking the score of points near it (in
        standardised features) so that a batch does not spend itself on one neighbourhood."""
        if not points or k <= 0:
            return []
        order = np.lexsort((-mean, -acq))[: min(max(32 * k, 64), 512)]
        rank = np.empty(len(order))
        rank[np.argsort(-mean[order], kind="stable")] = np.arange(len(order))
        score = acq[order] + 1e-9 * (1 - rank / len(order))  # ties in acquisition: by mean
        Z = self._featurize([points[i] for i in order])
        Z = (Z - Z.mean(axis=0)) / np.maximum(Z.std(axis=0), 1e-12)
        sq = (Z * Z).sum(axis=1)
        d2 = np.maximum(sq[:, None] + sq[None, :] - 2 * Z @ Z.T, 0.0)
        np.fill_diagonal(d2, np.inf)
        nearest = d2.min(axis=1)
        finite = nearest[np.isfinite(nearest) & (nearest > 0)]
        length2 = float(np.median(finite)) if len(finite) else 1.0
        taken = np.zeros(len(order), dtype=bool)
        picked: list[int] = []
        for _ in range(min(k, len(order))):
            i = int(np.argmax(np.where(taken, -np.inf, score)))
            taken[i] = True
            picked.append(int(order[i]))
            score = score * (1 - np.exp(-0.5 * d2[i] / length2))
        return picked


def make_policy(name: str, space: Space, seed: int = 0) -> SearchPolicy:
    """The policy called `name`: "bayes" or "random"."""
    if name == "bayes":
        return BayesianSearch(space, seed)  # seeded with the space's seed points (SearchPolicy)
    if name == "random":
        return RandomSearch(space, seed)
    raise ValueError(f"unknown search policy {name!r} (expected 'bayes' or 'random')")
