"""Two tuning measurements on a MatMul (examples/matmul.ein, C):

1. Candidates per second of a search with each runner: `local` (a build pool of 2 and the
   isolated measurement worker), `dask-local` with 1 and with 2 workers. The same random search
   (seed fixed: the same candidates), `--trials` candidates in batches of 4, no final rounds,
   `--early-stop` as given (1.5, einc's default: most candidates are stopped early and the
   builds dominate; 0: every candidate timed in full); the rate is candidates over the search's
   seconds (the builder's and runner's processes start within it, on the workers too; the
   cluster's own start is reported apart).
2. The measuring time `--early-stop` saves: the same random search with `early_stop=0` (every
   candidate timed in full) and `early_stop=1.5`, with the local runner; the measuring time is
   the sum of the candidates' run_s (each candidate's time in the runner: loading, checking,
   timing; builds not included), and the fastest trial of each search is reported beside it.

Each configuration runs `--runs` times in turn (A B C A B C ...); medians are reported.

    .venv/bin/python benchmarks/tune_dask.py [--trials 24] [--runs 3] [--threads 1] [--only rate|early]
        [--early-stop 1.5]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(ROOT))

from einc.tune.cluster import DaskRunner  # noqa: E402
from einc.tune.measure import LocalRunner  # noqa: E402
from einc.tune.tuner import TuneResult, tune  # noqa: E402
from einc.tune.types import TuneTask  # noqa: E402


def search(task: TuneTask, args: argparse.Namespace, runner: DaskRunner | None = None,
           early_stop: float = 1.5) -> TuneResult:  # fmt: skip
    return tune(task, policy="random", trials=args.trials, batch=4, threads=args.threads, seed=args.seed,
                builder=runner, runner=runner, decide_best=False, early_stop=early_stop)


def rates(task: TuneTask, args: argparse.Namespace) -> None:
    configs = {"local": None, "dask-local, 1 worker": 1, "dask-local, 2 workers": 2}
    rate: dict[str, list[float]] = {k: [] for k in configs}
    started: dict[str, list[float]] = {k: [] for k in configs}
    for run in range(args.runs):
        for name, workers in configs.items():
            if workers is None:
                result = search(task, args, early_stop=args.early_stop)
            else:
                start = time.perf_counter()
                runner = DaskRunner(workers=workers, template=LocalRunner(threads=args.threads, seed=args.seed))
                with runner:
                    runner.start(task)
                    started[name].append(time.perf_counter() - start)
                    result = search(task, args, runner, early_stop=args.early_stop)
            ok = sum(t.result.ok for t in result.history)
            failed = ", ".join(f"{n} {s}" for s, n in sorted(result.failures.items()))
            rate[name].append(result.trials / result.seconds)
            print(f"run {run + 1}: {name}: {result.trials} candidates ({ok} ok{', ' + failed if failed else ''}) in "
                  f"{result.seconds:.1f} s: {result.trials / result.seconds:.2f}/s", flush=True)  # fmt: skip
    print(f"\n--early-stop {args.early_stop:g}\n| runner | candidates/s (median) | runs | cluster start (median) |\n|---|---|---|---|")
    for name in configs:
        start = f"{statistics.median(started[name]):.1f} s" if started[name] else "-"
        print(f"| {name} | {statistics.median(rate[name]):.2f} | "
              f"{', '.join(f'{r:.2f}' for r in rate[name])} | {start} |")  # fmt: skip


def early(task: TuneTask, args: argparse.Namespace) -> None:
    factors = (0.0, 1.5)
    measuring: dict[float, list[float]] = {f: [] for f in factors}
    total: dict[float, list[float]] = {f: [] for f in factors}
    fastest: dict[float, list[float]] = {f: [] for f in factors}
    cut: dict[float, list[int]] = {f: [] for f in factors}
    for run in range(args.runs):
        for factor in factors:
            result = search(task, args, early_stop=factor)
            run_s = sum(t.result.run_s for t in result.history)
            measuring[factor].append(run_s)
            total[factor].append(result.seconds)
            fastest[factor].append(result.fastest.median_s if result.fastest else float("nan"))
            cut[factor].append(result.stopped_early)
            print(f"run {run + 1}: early_stop={factor:g}: measuring {run_s:.2f} s of {result.seconds:.1f} s, "
                  f"{result.stopped_early} stopped early, fastest trial "
                  f"{fastest[factor][-1] * 1e3:.3f} ms", flush=True)  # fmt: skip
    print("\n| early stop | measuring s (median) | search s (median) | stopped early | fastest trial ms (median) |")
    print("|---|---|---|---|---|")
    for factor in factors:
        print(f"| {'off (0)' if factor == 0 else f'{factor:g}x'} | {statistics.median(measuring[factor]):.2f} | "
              f"{statistics.median(total[factor]):.1f} | {statistics.median(cut[factor]):g} of {args.trials} | "
              f"{statistics.median(fastest[factor]) * 1e3:.3f} |")  # fmt: skip
    saved = 1 - statistics.median(measuring[1.5]) / statistics.median(measuring[0.0])
    print(f"\nmeasuring time saved by --early-stop 1.5: {saved:.0%}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--program", default=str(ROOT / "examples" / "matmul.ein"))
    parser.add_argument("--trials", type=int, default=24)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--only", choices=("rate", "early"))
    parser.add_argument("--early-stop", type=float, default=1.5, help="of the rate's searches (default: 1.5)")
    args = parser.parse_args()
    task = TuneTask.from_file(args.program)
    print(f"{args.program} on C, {args.trials} trials, {args.threads} thread(s) per kernel, {os.cpu_count()} cores; "
          f"load average {os.getloadavg()[0]:.1f}", flush=True)  # fmt: skip
    if args.only in (None, "rate"):
        rates(task, args)
    if args.only in (None, "early"):
        early(task, args)
    print(f"load average at the end {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    main()
