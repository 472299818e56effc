"""The tuner's own cost per candidate, beside building and running kernels (issue 13's goal:
at most 100 ms): `tune` with the real search space, policy and SQLite records, but a builder
and runner that cost nothing (a synthetic time per point), so what is measured is proposing
(model fit, evolutionary search, expected improvement), making the candidate's script,
recording and bookkeeping.

    .venv/bin/python benchmarks/tuner_overhead.py [--trials 200] [--program examples/matmul.ein]
"""

from __future__ import annotations

import argparse
import math
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))

from einc.tune.records import RecordDB
from einc.tune.space import SearchSpace
from einc.tune.tuner import tune
from einc.tune.types import BuildResult, Candidate, MeasureResult, Status, TuneTask


class NoBuilder:
    def build(self, task: TuneTask, candidates: list[Candidate]) -> list[BuildResult]:
        return [BuildResult(c, Status.OK, artifact=None) for c in candidates]


class SyntheticRunner:
    """A time per point from its knob values (a smooth bowl with noise-free cliffs)."""

    def run(self, task: TuneTask, builds: list[BuildResult]) -> list[MeasureResult]:
        out = []
        for b in builds:
            values = b.candidate.point.values()
            cost = 1e-3 * (1 + sum((math.log2(max(v, 1)) - 3) ** 2 for v in values.values()) / 10)
            out.append(MeasureResult(b.candidate, Status.OK, times=(cost,) * 5))
        return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trials", type=int, default=200)
    parser.add_argument("--program", default=str(HERE.parent / "examples" / "matmul.ein"))
    parser.add_argument("--policy", default="bayes")
    args = parser.parse_args()
    t0 = time.perf_counter()
    import einc.tune.search  # noqa: F401 - scikit-learn's import, once per process
    import_s = time.perf_counter() - t0
    task = TuneTask.from_file(args.program)
    t0 = time.perf_counter()
    space = SearchSpace.from_task(task)
    space_s = time.perf_counter() - t0
    with tempfile.TemporaryDirectory() as tmp, RecordDB(Path(tmp) / "o.db") as db:
        start = time.perf_counter()
        result = tune(task, space=space, policy=args.policy, trials=args.trials, builder=NoBuilder(),
                      runner=SyntheticRunner(), db=db, verify=False)  # fmt: skip
        total = time.perf_counter() - start
    print(f"{args.program}: {len(space.sketches)} sketches, {space.size()} points; space built in "
          f"{space_s:.2f} s; the search's imports (scikit-learn) {import_s:.2f} s, once")  # fmt: skip
    print(f"{args.policy}: {result.trials} candidates in {total:.2f} s: {total / result.trials * 1e3:.1f} ms "
          "per candidate (propose, script, record; no build, no run)")  # fmt: skip


if __name__ == "__main__":
    main()
