"""The tuner's search policies and cost model (einc.tune.search, einc.tune.model) on a small
fake search space with a synthetic cost: the contracts (no repeats, no failed points, default
first, exhaustion, resume), never the search's quality (benchmarks measure that)."""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence

import numpy as np
import pytest

from einc.tune.model import CostModel, FeasibilityModel, expected_improvement
from einc.tune.search import BayesianSearch, RandomSearch, make_policy
from einc.tune.types import Candidate, MeasureResult, Point, Status


class FakeSpace:
    """Sketches with independent knobs (every combination is a point), features = one-hot
    sketch + log2 of every knob + pairwise products of the log2 knobs of the same sketch."""

    def __init__(self, options: dict[str, dict[str, tuple[int, ...]]], default: Point):
        self._options = options
        self.sketches = {name: f"<sketch {name}>" for name in options}
        self._default = default
        self._knobs = sorted({k for opts in options.values() for k in opts})

    def default_point(self) -> Point:
        return self._default

    def knob_options(self, sketch: str) -> dict[str, tuple[int, ...]]:
        return dict(self._options[sketch])

    def random_point(self, rng: np.random.Generator) -> Point:
        names = sorted(self._options)
        sketch = names[int(rng.integers(len(names)))]
        return Point.of(sketch, {k: v[int(rng.integers(len(v)))] for k, v in self._options[sketch].items()})

    def mutate(self, point: Point, rng: np.random.Generator) -> Point:
        opts = self._options[point.sketch]
        knobs = [k for k, v in opts.items() if len(v) > 1]
        if not knobs:
            return self.random_point(rng)
        knob = knobs[int(rng.integers(len(knobs)))]
        values = point.values()
        others = [v for v in opts[knob] if v != values[knob]]
        values[knob] = others[int(rng.integers(len(others)))]
        return Point.of(point.sketch, values)

    def crossover(self, a: Point, b: Point, rng: np.random.Generator) -> Point:
        if a.sketch != b.sketch:
            return self.mutate(a, rng)
        va, vb = a.values(), b.values()
        return Point.of(a.sketch, {k: (va[k] if rng.random() < 0.5 else vb[k]) for k in va})

    def features(self, points: Sequence[Point]) -> np.ndarray:
        names = sorted(self._options)
        rows = []
        for p in points:
            logs = [math.log2(p.values()[k]) if k in p.values() else 0.0 for k in self._knobs]
            pairs = [a * b for a, b in itertools.combinations(logs, 2)]
            rows.append([float(p.sketch == s) for s in names] + logs + pairs)
        return np.array(rows, dtype=np.float64)

    def size(self) -> int:
        return sum(math.prod(len(v) for v in opts.values()) for opts in self._options.values())

    def points(self) -> list[Point]:
        return [Point.of(s, dict(zip(opts, combo)))
                for s, opts in self._options.items() for combo in itertools.product(*opts.values())]  # fmt: skip


POW2 = (1, 2, 4, 8, 16, 32, 64)


def medium_space() -> FakeSpace:
    options = {"tile": {"ti": POW2, "tj": POW2, "tk": POW2},
               "pack": {"ti": POW2, "tj": POW2, "vec": (1, 4, 8)}}  # fmt: skip
    return FakeSpace(options, Point.of("tile", {"ti": 1, "tj": 1, "tk": 1}))


def tiny_space() -> FakeSpace:
    options = {"a": {"x": (1, 2, 3), "y": (1, 2)}, "b": {"z": (1, 2, 4, 8, 16, 32)}}
    return FakeSpace(options, Point.of("a", {"x": 1, "y": 1}))


def measure(point: Point) -> MeasureResult:
    """The synthetic cost: a bowl in log2 of the knobs (best near 8/16), refused when the tile
    is too large, and a wrong kernel at one tile shape of the "pack" sketch."""
    v = point.values()
    logs = {k: math.log2(x) for k, x in v.items()}
    candidate = Candidate(point, "<schedule>")
    if point.sketch == "tile" and v["ti"] * v["tj"] * v["tk"] > 4096:
        return MeasureResult(candidate, Status.REFUSED, "tile too large")
    if point.sketch == "pack" and v["ti"] == 64:
        return MeasureResult(candidate, Status.WRONG, "outputs differ")
    seconds = 1e-3 * (1 + sum((x - 3.5) ** 2 for x in logs.values()) / 4) * (1.3 if point.sketch == "pack" else 1)
    return MeasureResult(candidate, Status.OK, times=(seconds * 1.01, seconds, seconds * 1.02))


def run(policy, trials: int, batch: int = 8) -> list[Point]:
    proposed: list[Point] = []
    while len(proposed) < trials:
        points = policy.propose(batch)
        if not points:
            break
        proposed += points
        policy.observe([(p, measure(p)) for p in points])
    return proposed


POLICIES = ["random", "bayes"]


def small_bayes(space, seed: int = 0, **kw) -> BayesianSearch:
    kw = {"initial": 6, "population": 48, "generations": 2, **kw}
    return BayesianSearch(space, seed=seed, **kw)


def policy_named(name: str, space, seed: int = 0):
    return small_bayes(space, seed) if name == "bayes" else RandomSearch(space, seed)


@pytest.mark.parametrize("name", POLICIES)
def test_default_point_comes_first(name):
    space = medium_space()
    first = policy_named(name, space).propose(4)
    assert first[0] == space.default_point() and len(first) == 4


@pytest.mark.parametrize("name", POLICIES)
def test_propose_never_repeats_and_skips_failures(name):
    space = medium_space()
    policy = policy_named(name, space, seed=3)
    proposed = run(policy, 80)
    assert len(proposed) == 80 and len(set(proposed)) == 80
    statuses = {measure(p).status for p in proposed}
    assert Status.OK in statuses and statuses - {Status.OK}  # the run saw failures
    best = policy.best()
    assert best is not None and measure(best[0]).ok
    assert best[1] == min(measure(p).median_s for p in proposed if measure(p).ok)


@pytest.mark.parametrize("name", POLICIES)
def test_never_proposes_points_observed_as_failed(name):
    space = medium_space()
    failed = [Point.of("pack", {"ti": 64, "tj": tj, "vec": vec}) for tj in POW2 for vec in (1, 4, 8)]
    failed.append(space.default_point())
    policy = policy_named(name, space, seed=1)
    policy.observe([(p, MeasureResult(Candidate(p, ""), Status.CRASHED, "signal 11")) for p in failed])
    proposed = run(policy, 64)
    assert not set(proposed) & set(failed)
    assert policy.best() is None or policy.best()[0] not in failed


@pytest.mark.parametrize("name", POLICIES)
def test_exhausts_a_tiny_space_exactly(name):
    space = tiny_space()
    policy = policy_named(name, space, seed=2) if name == "random" else small_bayes(space, 2, initial=3)
    proposed: list[Point] = []
    for _ in range(10):
        points = policy.propose(5)
        proposed += points
        ok = [(p, MeasureResult(Candidate(p, ""), Status.OK, times=(1.0 / (1 + len(proposed)),))) for p in points]
        policy.observe(ok)
    assert sorted(proposed) == sorted(space.points()) and len(proposed) == space.size() == 12
    assert policy.propose(5) == []


def test_bayes_with_every_point_failing_still_covers_the_space():
    space = tiny_space()
    policy = small_bayes(space, 4, initial=2)
    proposed: list[Point] = []
    for _ in range(space.size()):
        points = policy.propose(3)
        proposed += points
        statuses = (Status.REFUSED, Status.TIMEOUT, Status.INTERNAL)
        policy.observe([(p, MeasureResult(Candidate(p, ""), statuses[i % 3], "no")) for i, p in enumerate(points)])
    assert sorted(proposed) == sorted(space.points()) and policy.propose(3) == []
    assert policy.best() is None


def test_bayes_model_phase_mixes_failures_and_noise():
    """Past the initial points the model picks; failed and noisy results neither crash it nor
    enter the fit (a point once wrong is never ranked, even after an OK measurement)."""
    space = medium_space()
    policy = small_bayes(space, seed=5)
    proposed = run(policy, 24)
    noisy = [p for p in space.points() if p not in proposed][:3]
    policy.observe([(p, MeasureResult(Candidate(p, ""), Status.NOISY, "load")) for p in noisy])
    fastest = Point.of("tile", {"ti": 8, "tj": 8, "tk": 16})
    policy.observe([(fastest, MeasureResult(Candidate(fastest, ""), Status.OK, times=(1e-9,))),
                    (fastest, MeasureResult(Candidate(fastest, ""), Status.WRONG, "differs"))])  # fmt: skip
    assert policy.best() is not None and policy.best()[0] != fastest
    later = policy.propose(8)
    assert len(later) == 8 and not set(later) & (set(proposed) | set(noisy) | {fastest})


def test_same_seed_same_proposals():
    a, b = small_bayes(medium_space(), seed=7), small_bayes(medium_space(), seed=7)
    assert run(a, 32) == run(b, 32)


@pytest.mark.parametrize("name", POLICIES)
def test_resume_never_reproposes_old_observations(name):
    space = medium_space()
    old = run(policy_named(name, space, seed=11), 40)
    resumed = policy_named(name, space, seed=11)  # the same seed: it would draw the same points
    resumed.observe([(p, measure(p)) for p in old])
    new = run(resumed, 40)
    assert len(new) == 40 and len(set(new)) == 40 and not set(new) & set(old)
    assert space.default_point() not in new


def test_make_policy():
    space = tiny_space()
    assert isinstance(make_policy("bayes", space, 3), BayesianSearch)
    assert isinstance(make_policy("random", space), RandomSearch)
    assert make_policy("bayes", space).name == "bayes" and make_policy("random", space).name == "random"
    with pytest.raises(ValueError, match="unknown search policy 'grid'"):
        make_policy("grid", space)
    assert make_policy("random", space).propose(0) == []


def test_cost_model_predicts_with_uncertainty_growing_away_from_data():
    rng = np.random.default_rng(0)
    # Two clusters of measurements, around (0, 0) and (1, 1), with different scores.
    centres = np.array([[0.0, 0.0], [1.0, 1.0]])
    X = np.vstack([c + 0.05 * rng.standard_normal((10, 2)) for c in centres])
    y = np.repeat([0.0, 3.0], 10) + 0.1 * rng.standard_normal(20)
    model = CostModel(seed=0)
    model.fit(X, y)
    mean, std = model.predict(X)
    assert np.all(np.isfinite(mean)) and np.all(std >= 0)
    np.testing.assert_allclose(mean, y, atol=1e-6)  # measured points are reproduced ...
    assert std.max() < 1e-6  # ... with no uncertainty
    far = np.array([[0.0, 1.0], [1.0, 0.0], [0.5, 0.5], [3.0, -2.0]])
    far_mean, far_std = model.predict(far)
    assert np.all(np.isfinite(far_mean)) and np.all(far_mean >= y.min()) and np.all(far_mean <= y.max())
    assert far_std.min() > 0.3  # the trees disagree where no measurement is
    assert model.predict(np.zeros((0, 2)))[0].shape == (0,)
    with pytest.raises(ValueError):
        model.fit(X, y[:-1])
    with pytest.raises(RuntimeError):
        CostModel().predict(X)


def test_feasibility_model():
    X = np.array([[float(i)] for i in range(20)])
    ok = X[:, 0] < 10
    model = FeasibilityModel(seed=0)
    model.fit(X, ok)
    p = model.predict(np.array([[2.0], [17.0]]))
    assert p[0] > 0.9 and p[1] < 0.1
    model.fit(X, np.ones(20, dtype=bool))
    np.testing.assert_array_equal(model.predict(X[:3]), 1.0)


def test_expected_improvement_values():
    phi0 = 1 / math.sqrt(2 * math.pi)  # the standard normal density at 0
    ei = expected_improvement(np.array([1.01, 2.01, 0.0, 1.5, 0.5]), np.array([1.0, 1.0, 0.0, 0.0, 1e-9]), best=1.0)
    # gain 0, std 1: the density at 0; gain 1, std 1: Phi(1) + phi(1); std 0: max(gain, 0)
    np.testing.assert_allclose(ei, [phi0, 0.8413447460685429 + 0.24197072451914337, 0.0, 0.49, 0.0], rtol=1e-9, atol=1e-12)
    assert expected_improvement(np.array([0.0]), np.array([2.0]), 1.0, xi=0.0)[0] > \
        expected_improvement(np.array([0.0]), np.array([1.0]), 1.0, xi=0.0)[0] > 0  # fmt: skip
    assert np.all(expected_improvement(np.linspace(-5, 5, 11), np.full(11, 0.3), 0.0) >= 0)
