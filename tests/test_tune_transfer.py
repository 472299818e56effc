"""Transfer across programs (einc.tune.transfer, issue 23 item 3): the nearest programs, re-fitting
a point to another shape, the cost model warm-started from other programs' records before the
first measurement, seeds that are legal and compute the right numbers on OpenCL, the
`--no-transfer` switch, and databases made before transfer.

Searches here use a fake builder and runner (a synthetic time per point) except where seeds are
built and run for real; the tests read the space through its interface (sketches, knob options,
roles), never particular knobs."""

from __future__ import annotations

import math
import zlib
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pytest

from einc.cli import main
from einc.compiler.records import RecordContext
from einc.targets import toolchains
from einc.tune.records import RecordDB
from einc.tune.search import BayesianSearch
from einc.tune.space import SearchSpace
from einc.tune.transfer import (TRANSFER, apply_transfer, nearest_programs, plan_transfer, program_distance, record_info,
                                refit, refit_value, refits, shape_signature)  # fmt: skip
from einc.tune.tuner import measure_points, tune
from einc.tune.types import BuildResult, Candidate, MeasureResult, Point, Status, TuneTask

DEV = RecordContext("a device", "", "driver 1", "compiler 1", "", "gpu.test")
"""A made-up context: the records here are never used by a compile on this machine."""


def matmul(n: int, k: int, m: int) -> str:
    return f"input A: float32[{n}, {k}]\ninput B: float32[{k}, {m}]\n\nC[N, M] +=! A[N, K] * B[K, M]\n"


def conv(c: int, hw: int, f: int) -> str:
    return (f"input X: float32[1, {c}, {hw}, {hw}]\ninput W: float32[{f}, {c}, 3, 3]\n\n"
            f"Y[N, F, HO, WO] +=! X[N, C, HO + KH - 1, WO + KW - 1].when(\n"
            f"    [HO + KH - 1 >= 0, HO + KH - 1 < {hw}, WO + KW - 1 >= 0, WO + KW - 1 < {hw}], 0.0)"
            f" * W[F, C, KH, KW] where HO in {hw}, WO in {hw}\n")  # fmt: skip


FIRST = TuneTask(matmul(64, 32, 128), "opencl", "<first>")
SECOND = TuneTask(matmul(24, 40, 48), "opencl", "<second>")
"""Two shapes of one MatMul (the second's extents are no powers of two: re-fitting clips)."""


@pytest.fixture(scope="module")
def spaces() -> dict[str, SearchSpace]:
    return {"first": SearchSpace.from_task(FIRST), "second": SearchSpace.from_task(SECOND)}


def seconds(point: Point) -> float:
    """A synthetic time per point (deterministic, distinct)."""
    return 1e-3 * (1 + zlib.crc32(point.describe().encode()) % 97 / 10)


def spanning(space: SearchSpace) -> list[Point]:
    """Per sketch with knobs, the point whose every knob takes its largest option, and the one
    whose every knob takes its smallest."""
    points = []
    for sketch in space.sketches:
        options = space.knob_options(sketch)
        if options:
            points.append(Point.of(sketch, {k: max(v) for k, v in options.items()}))
            points.append(Point.of(sketch, {k: min(v) for k, v in options.items()}))
    return points


def measured(space: SearchSpace, point: Point, status: Status = Status.OK, trial: bool = True) -> MeasureResult:
    candidate = space.candidate(point)
    times = (seconds(point),) * 3 if status is Status.OK else ()
    return MeasureResult(candidate, status, "" if status is Status.OK else "refused", times,
                         extra={"trial": True} if trial else {})  # fmt: skip


def record_first(db: RecordDB, space: SearchSpace, with_info: bool = True, task: TuneTask = FIRST) -> list[Point]:
    """Records of `task`'s spanning points (the last one failed) under DEV, as a search of an
    einc with transfer (`with_info`) or before it makes them; the points."""
    points = spanning(space)
    results = [measured(space, p, Status.OK if i < len(points) - 1 else Status.REFUSED) for i, p in enumerate(points)]
    if with_info:
        results = [MeasureResult(r.candidate, r.status, r.reason, r.times,
                                 extra={**r.extra, TRANSFER: record_info(task, space, r.candidate.point)})
                   for r in results]  # fmt: skip
    db.add_many(task, DEV, results, tuner="bayes-test")
    return points


# ---- the nearest programs ------------------------------------------------------------------------------
def test_the_nearest_programs_are_those_of_the_same_structure_by_size() -> None:
    texts = {
        "near": TuneTask(matmul(64, 32, 256), "c").normalized,  # one size doubled
        "far": TuneTask(matmul(512, 512, 512), "c").normalized,
        "renamed": TuneTask(matmul(64, 32, 128).replace("C[", "D["), "c").normalized,  # another statement name
        "conv": TuneTask(conv(4, 8, 8), "c").normalized,
        "itself": FIRST.normalized,
    }
    mine = TuneTask(FIRST.source, "c").normalized
    assert program_distance(mine, mine) == 0
    assert program_distance(mine, texts["near"]) == pytest.approx(program_distance(texts["near"], mine))
    assert program_distance(mine, texts["conv"]) == math.inf
    assert program_distance(mine, texts["renamed"]) == math.inf
    found = nearest_programs(mine, {**texts, "itself": mine}, k=5)
    assert [key for key, _ in found] == ["near", "far"]
    assert 0 < found[0][1] < found[1][1]
    assert nearest_programs(mine, texts, k=1) == found[:1]
    structure, sizes = shape_signature(TuneTask(conv(4, 8, 8), "c").normalized)
    other, other_sizes = shape_signature(TuneTask(conv(8, 16, 4), "c").normalized)
    assert structure == other and sizes != other_sizes and 16 in other_sizes  # the padding bound is a size


# ---- re-fitting ----------------------------------------------------------------------------------------
def test_refit_value_spans_divides_and_clips() -> None:
    assert refit_value(64, 64, 24, (1, 2, 4, 8, 16, 24)) == 24  # spanned its axis: spans the new one
    assert refit_value(4, 64, 24, (1, 2, 4, 8, 16, 24)) == 4  # divided it, and divides the new one
    assert refit_value(16, 48, 40, (1, 2, 4, 8, 16, 32, 40)) == 8  # 16 does not divide 40: the nearest divisor
    assert refit_value(32, 0, 20, (1, 2, 4, 8, 16)) == 16  # no old extent: clipped to the new axis
    # A knob whose options include 0 (cpu.11's reduce_order: an order, not a size) on an axis
    # with extents: 0 is no divisor (a whole-suite CPU tune crashed here with ZeroDivisionError).
    assert refit_value(0, 128, 64, (0, 1, 2, 3)) == 0
    assert refit_value(2, 128, 64, (0, 1, 2, 3)) == 2
    assert refit_value(6, 64, 64, (1, 2, 4, 8)) in (4, 8)  # not dividing: the nearest option


def test_refit_points_are_points_of_the_new_space(spaces: dict[str, SearchSpace]) -> None:
    first, second = spaces["first"], spaces["second"]
    for point in spanning(first):
        fitted = refit(point, first.extents(point), second)
        assert fitted is not None and fitted.sketch == point.sketch
        second.candidate(fitted)  # every knob set, every value an option of the new space
        roles = second.sketches[point.sketch].roles
        for knob, value in point.values().items():
            extent = first.extents(point)[knob]
            new = roles[knob].extent if knob in roles else 0
            if value == extent and new in second.knob_options(point.sketch)[knob]:
                assert fitted.values()[knob] == new  # a whole axis stays a whole axis
    assert refit(Point.of("no such sketch", {}), None, second) is None


# ---- warm start and seeds ------------------------------------------------------------------------------
class FakeBuilder:
    def build(self, task: TuneTask, candidates: Sequence[Candidate]) -> list[BuildResult]:
        return [BuildResult(c, Status.OK) for c in candidates]


class FakeRunner:
    """Synthetic times; notes what the search's model had learnt when the first batch ran."""

    def __init__(self, policy: BayesianSearch):
        self.policy = policy
        self.first_batch: list[Point] = []
        self.fitted_before: bool | None = None

    def run(self, task: TuneTask, builds: Sequence[BuildResult]) -> list[MeasureResult]:
        if self.fitted_before is None:
            self.fitted_before = self.policy.model.fitted
            self.first_batch = [b.candidate.point for b in builds]
        return [MeasureResult(b.candidate, Status.OK, "", (seconds(b.candidate.point),) * 3) for b in builds]


def fake_tune(space: SearchSpace, db: RecordDB, transfer: bool = True, trials: int = 6):
    policy = BayesianSearch(space, seed=0)
    runner = FakeRunner(policy)
    result = tune(SECOND, policy=policy, trials=trials, batch=4, space=space, builder=FakeBuilder(), runner=runner,
                  db=db, device=DEV, decide_best=False, transfer=transfer)  # fmt: skip
    return result, policy, runner


def no_check(task: TuneTask, candidate: Candidate) -> str | None:
    return None


def test_warm_start_learns_from_other_programs_before_the_first_measurement(spaces: dict[str, SearchSpace],
                                                                              tmp_path: Path) -> None:  # fmt: skip
    first, second = spaces["first"], spaces["second"]
    with RecordDB(tmp_path / "t.db") as db:
        points = record_first(db, first)
        db.add_many(FIRST, RecordContext("another device", "", "d", "c", "", "gpu.test"),
                    [measured(first, p) for p in points], tuner="elsewhere")  # another context: never learnt from
        plan = plan_transfer(SECOND, second, db, DEV, check=no_check)
        assert len(plan.prior) == len(points) and plan.programs == 1
        assert [r.score is None for r in plan.prior].count(True) == 1  # the failure teaches feasibility
        assert plan.work == SECOND.flops
        ok = next(r for r in plan.prior if r.score is not None)
        assert ok.score == pytest.approx(math.log(FIRST.flops / seconds(Point.of(ok.sketch, ok.knobs))))
        policy = BayesianSearch(second, seed=0)
        assert not policy.model.fitted
        apply_transfer(policy, plan)
        assert policy.model.fitted  # trained on the other program's trials, nothing measured here
        mean, std = policy.model.predict(policy._featurize(spanning(second)))
        assert np.all(np.isfinite(mean)) and np.all(std >= 0)

        result, policy, runner = fake_tune(second, db)
    assert runner.fitted_before is True
    assert result.transfer is not None and len(result.transfer.prior) == len(points)
    assert runner.first_batch[0] == second.default_point()  # the default first, then the seeds
    assert runner.first_batch[1 : 1 + len(result.transfer.seeds)] == result.transfer.seeds[:3]
    summary = result.summary()
    assert f"warm-started from {len(points)} trials ({len(points) - 1} ok) of 1 other program" in summary
    assert f"from {FIRST.key} `C[N, M] +=! A[N, K] * B[K, M]`" in summary
    # The records of this search keep what transfer needs, for the next one.
    with RecordDB(tmp_path / "t.db") as db:
        mine = db.trials(SECOND.key, "opencl", DEV)
    assert mine and all(isinstance(info := r.extra.get(TRANSFER), dict) and set(info) == {"features", "work", "extents"}
                        for r in mine)  # fmt: skip


def test_a_policy_searched_in_several_calls_transfers_once(spaces: dict[str, SearchSpace], tmp_path: Path) -> None:
    """A whole program's task is searched round after round with one policy: its first call
    transfers (the plan is kept on the policy), the later ones plan nothing again."""
    with RecordDB(tmp_path / "t.db") as db:
        record_first(db, spaces["first"])
        policy = BayesianSearch(spaces["second"], seed=0)
        results = [tune(SECOND, policy=policy, trials=2, batch=2, space=spaces["second"], builder=FakeBuilder(),
                        runner=FakeRunner(policy), db=db, device=DEV, decide_best=False) for _ in range(3)]  # fmt: skip
    assert results[0].transfer is not None and results[0].transfer.seeds and policy.transfer is results[0].transfer
    assert [r.transfer for r in results[1:]] == [None, None]
    proposed = [t.result.candidate.point for r in results for t in r.history]
    assert len(proposed) == len(set(proposed)) == 6 and proposed[1] == results[0].transfer.seeds[0]


def test_no_transfer_learns_nothing(spaces: dict[str, SearchSpace], tmp_path: Path,
                                    monkeypatch: pytest.MonkeyPatch) -> None:  # fmt: skip
    with RecordDB(tmp_path / "t.db") as db:
        record_first(db, spaces["first"])
        result, policy, runner = fake_tune(spaces["second"], db, transfer=False)
    assert result.transfer is None and runner.fitted_before is False
    assert "transfer" not in result.summary()
    seen: dict[str, object] = {}

    def fake_command(*args: object, **kwargs: object) -> object:
        seen.update(kwargs)
        raise SystemExit(0)

    monkeypatch.setattr("einc.tune.command.tune_file_command", fake_command)
    for argv, want in ((["tune", "x.ein", "--no-transfer"], False), (["tune", "x.ein"], True)):
        with pytest.raises(SystemExit):
            main(argv)
        assert seen["transfer"] is want


def test_seeds_come_from_the_nearest_program_and_illegal_ones_are_refused(spaces: dict[str, SearchSpace],
                                                                         tmp_path: Path) -> None:  # fmt: skip
    """The fastest schedules of the nearest program, re-fitted (`refits`: the first legal one of
    each); a schedule all of whose re-fits are illegal is refused and counted, never a seed."""
    first, second = spaces["first"], spaces["second"]
    with RecordDB(tmp_path / "t.db") as db:
        record_first(db, first)
        ranked = sorted((r for r in db.trials(FIRST.key, "opencl", DEV) if r.ok), key=lambda r: (r.median_s, r.id))
        doomed = set(refits(ranked[0], second)) - {second.default_point()}
        assert doomed

        def refuse(task: TuneTask, candidate: Candidate) -> str | None:
            return "refused for the test" if candidate.point in doomed else None

        plan = plan_transfer(SECOND, second, db, DEV, check=refuse, seeds_per_program=2)
    taken, want = {second.default_point(), *doomed}, []
    for record in ranked[1:]:
        fitted = next((p for p in refits(record, second) if p not in taken), None)
        if fitted is not None:
            taken.add(fitted)
            want.append(fitted)
    assert plan.seeds == want[:2] and len(plan.seeds) == 2
    assert not doomed & set(plan.seeds) and second.default_point() not in plan.seeds
    [source] = plan.sources
    assert (source.task_key, source.seeds, source.refused) == (FIRST.key, 2, 1)
    assert all(plan.seed_of[p] == FIRST.key for p in plan.seeds)


def require_opencl() -> None:
    ok, why = toolchains.available("opencl")
    if not ok:
        if toolchains.required("opencl"):
            pytest.fail(f"CI needs the opencl toolchain: {why}")
        pytest.skip(why)


@pytest.mark.parametrize("program", ["matmul", "conv", "matmul on c"])
def test_refitted_seeds_are_legal_and_compute_the_right_numbers(spaces: dict[str, SearchSpace], tmp_path: Path,
                                                                program: str) -> None:  # fmt: skip
    """Seeds of another shape re-fitted to a MatMul's or a padded convolution's, checked legal
    by lowering, built and run on OpenCL (and C: its sketches' largest tiles are often illegal
    once re-fitted, and refused before launch): the runner compares every output with NumPy's
    float64 reference on random inputs."""
    from einc.tune.measure import LocalBuilder, LocalRunner

    if program == "matmul":
        old, new, first, second = FIRST, SECOND, spaces["first"], spaces["second"]
    elif program == "conv":
        old, new = TuneTask(conv(4, 12, 8), "opencl", "<conv>"), TuneTask(conv(3, 10, 6), "opencl", "<conv 2>")
        first, second = SearchSpace.from_task(old), SearchSpace.from_task(new)
    else:
        old, new = TuneTask(FIRST.source, "c", "<first>"), TuneTask(SECOND.source, "c", "<second>")
        first, second = SearchSpace.from_task(old), SearchSpace.from_task(new)
    if new.target == "opencl":
        require_opencl()
    with RecordDB(tmp_path / "t.db") as db:
        record_first(db, first, task=old)
        plan = plan_transfer(new, second, db, DEV, seeds_per_program=2 if program == "matmul" else 1)
    assert plan.seeds and [s.task_key for s in plan.sources] == [old.key]
    assert new.target == "c" or not plan.sources[0].refused
    with LocalBuilder(workers=2) as builder, LocalRunner(repeats=1, min_repeat_s=0.0) as runner:
        results = measure_points(new, second, plan.seeds, builder, runner)
    assert [r.status for r in results] == [Status.OK] * len(plan.seeds), [r.reason for r in results]


# ---- databases made before transfer --------------------------------------------------------------------
def test_records_made_before_transfer_give_seeds_but_no_warm_start(spaces: dict[str, SearchSpace],
                                                                     tmp_path: Path) -> None:  # fmt: skip
    with RecordDB(tmp_path / "t.db") as db:
        record_first(db, spaces["first"], with_info=False)
        plan = plan_transfer(SECOND, spaces["second"], db, DEV, check=no_check)
    assert plan.prior == [] and plan.programs == 0
    assert plan.seeds and plan.sources[0].task_key == FIRST.key


@pytest.mark.parametrize("opened", ["read-only", "migrated"])
def test_an_old_database_is_read_and_gives_nothing_to_transfer(tmp_path: Path, opened: str,
                                                               monkeypatch: pytest.MonkeyPatch) -> None:  # fmt: skip
    """A version 1 database (records without a context: never used) read as it is where einc
    cannot write it, or migrated: transfer reads it and finds nothing to learn from."""
    from einc.compiler.records import record_context
    from einc.targets import get_target
    from tests.test_tune_records import matmul_task, old_database

    db_path = tmp_path / "old.db"
    old_database(db_path)
    source = matmul_task().source.replace("input0: float32[256, 512]", "input0: float32[128, 512]")
    task = TuneTask(source, "c", "<other shape>")
    assert program_distance(task.normalized, matmul_task().normalized) < math.inf  # the old record's program is near
    if opened == "read-only":
        monkeypatch.setattr("einc.compiler.records.readonly_reason", lambda path: "the file is read-only")
    with RecordDB(db_path, create=False) as db:
        assert db.version == (1 if opened == "read-only" else 2) and len(db) == 1
        plan = plan_transfer(task, SearchSpace.from_task(task), db, record_context(get_target("c")), check=no_check)
    assert plan.empty and plan.describe() == ["transfer: no other program tuned on this device and target to learn from"]
