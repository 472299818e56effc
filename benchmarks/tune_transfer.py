"""Transfer across shapes (issue 23 item 3): trials a second shape needs with and without the
records of the first.

1. A database of the first shapes: a MatMul and a 3x3 padded convolution, each tuned with
   `--trials` trials (Bayesian search, no final rounds: the seeds come from the fastest trials).
2. For each second shape (a MatMul of other sizes, a convolution of other channels and image
   size), two searches of `--trials` trials, each on its own copy of that database: without
   transfer (`transfer=False`: the search a first shape gets) and with it (the cost model
   warm-started from the first shapes' trials, the first batch seeded with their best schedules
   re-fitted to the new shape).
3. The goal is 0.9 of the speed of the fastest trial of the search without transfer; for each
   search, the first trial (1-based) whose fastest-so-far reaches it. Trials saved = trials
   without transfer - trials with transfer. Also, for each search, the speed of its fastest
   trial after `--early` trials (8) as a fraction of that fastest trial without transfer.

Each trial is measured once (the tuner's search measurement), so on a shared machine the
numbers are noisy; the benchmark sets `EINC_NOISE_LIMITS=lenient` (unless set) so that a
trial measured under load is flagged rather than given up (`noisy`: no time, which would
count as a trial that found nothing); the load average is printed with the results. `--repeats N` runs step 2 N times with search seeds 0..N-1 (the first
shapes' database is made once) and reports each and the medians.

    .venv/bin/python benchmarks/tune_transfer.py [--target opencl] [--trials 64] [--repeats 1]
        [--json out.json] [--keep DIR]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(ROOT))
os.environ.setdefault("EINC_NOISE_LIMITS", "lenient")

from einc.tune.tuner import TuneResult, tune  # noqa: E402
from einc.tune.types import TuneTask  # noqa: E402


def matmul(n: int, k: int, m: int) -> str:
    return f"input A: float32[{n}, {k}]\ninput B: float32[{k}, {m}]\n\nC[N, M] +=! A[N, K] * B[K, M]\n"


def conv(c: int, hw: int, f: int) -> str:
    """A 3x3 convolution with padding 1 of a batch of one image, c channels of hw x hw, f filters."""
    return (f"input X: float32[1, {c}, {hw}, {hw}]\ninput W: float32[{f}, {c}, 3, 3]\n\n"
            f"Y[N, F, HO, WO] +=! X[N, C, HO + KH - 1, WO + KW - 1].when(\n"
            f"    [HO + KH - 1 >= 0, HO + KH - 1 < {hw}, WO + KW - 1 >= 0, WO + KW - 1 < {hw}], 0.0)"
            f" * W[F, C, KH, KW] where HO in {hw}, WO in {hw}\n")  # fmt: skip


FIRST = {"matmul 256x256x256": matmul(256, 256, 256), "conv 16->32 ch, 32x32": conv(16, 32, 32)}
SECOND = {"matmul 384x512x256": (matmul(384, 512, 256), "matmul 256x256x256"),
          "conv 32->64 ch, 16x16": (conv(32, 16, 64), "conv 16->32 ch, 32x32")}  # fmt: skip
"""The second shapes and the first shape of the same structure (what their seeds come from)."""


def search(source: str, name: str, target: str, trials: int, db: Path, seed: int, transfer: bool) -> TuneResult:
    task = TuneTask(source, target, f"<{name}>")
    return tune(task, trials=trials, db=db, seed=seed, decide_best=False, transfer=transfer)


def trials_to(result: TuneResult, goal_s: float) -> int | None:
    """The first trial (1-based) whose fastest trial so far is at most `goal_s`."""
    return next((i + 1 for i, _, best in result.best_so_far() if best <= goal_s), None)


def fraction(result: TuneResult, trials: int, best_s: float) -> float:
    """The speed of `result`'s fastest trial among its first `trials`, as a fraction of `best_s`'s."""
    curve = result.best_so_far()[:trials]
    return best_s / curve[-1][2] if curve and curve[-1][2] < float("inf") else 0.0


def curve(result: TuneResult) -> list[float | None]:
    return [None if best == float("inf") else best for _, _, best in result.best_so_far()]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--target", default="opencl")
    parser.add_argument("--trials", type=int, default=64)
    parser.add_argument("--repeats", type=int, default=1)
    parser.add_argument("--early", type=int, default=8, help="report the fastest trial after this many trials")
    parser.add_argument("--json", help="write every number and curve here")
    parser.add_argument("--keep", help="keep the databases in this folder")
    args = parser.parse_args(argv)
    folder = Path(args.keep) if args.keep else Path(tempfile.mkdtemp(prefix="einc-transfer-"))
    folder.mkdir(parents=True, exist_ok=True)
    base = folder / "first.db"
    base.unlink(missing_ok=True)
    first: dict[str, object] = {}
    out: dict[str, object] = {"target": args.target, "trials": args.trials, "first": first}
    start = time.perf_counter()
    for name, source in FIRST.items():
        r = search(source, name, args.target, args.trials, base, 0, transfer=False)
        fastest = r.fastest.median_s if r.fastest is not None else None
        first[name] = {"fastest_s": fastest, "seconds": r.seconds}
        print(f"first shape {name}: {args.trials} trials in {r.seconds:.0f} s, fastest trial "
              f"{fastest * 1e3 if fastest else float('nan'):.3f} ms", flush=True)  # fmt: skip
    rows = []
    for name, (source, _) in SECOND.items():
        for rep in range(args.repeats):
            runs = {}
            for transfer in (False, True):
                db = folder / f"second-{len(rows)}-{'with' if transfer else 'without'}.db"
                shutil.copyfile(base, db)
                runs[transfer] = search(source, name, args.target, args.trials, db, rep, transfer)
            without, with_ = runs[False], runs[True]
            assert without.fastest is not None, name
            goal = without.fastest.median_s / 0.9
            n_without, n_with = trials_to(without, goal), trials_to(with_, goal)
            plan = with_.transfer
            row = {
                "shape": name, "seed": rep, "best_without_s": without.fastest.median_s,
                "best_with_s": with_.fastest.median_s if with_.fastest is not None else None,
                "goal_s": goal, "trials_without": n_without, "trials_with": n_with,
                "saved": None if n_without is None or n_with is None else n_without - n_with,
                "early_without": fraction(without, args.early, without.fastest.median_s),
                "early_with": fraction(with_, args.early, without.fastest.median_s),
                "seeds": [] if plan is None else [{"from": s.task_key, "summary": s.summary, "distance": s.distance,
                                                   "seeds": s.seeds, "refused": s.refused} for s in plan.sources],
                "prior_rows": 0 if plan is None else len(plan.prior),
                "curve_without": curve(without), "curve_with": curve(with_),
                "seconds_without": without.seconds, "seconds_with": with_.seconds,
            }  # fmt: skip
            rows.append(row)
            print(f"[load {os.getloadavg()[0]:.1f}] {name} (seed {rep}): goal {goal * 1e3:.3f} ms (0.9 of the fastest without transfer, "
                  f"{without.fastest.median_s * 1e3:.3f} ms); trials to it: without {n_without}, with {n_with}, "
                  f"saved {row['saved']}; seeds {plan.describe()[1:] if plan else []}", flush=True)  # fmt: skip
    out["second"] = rows
    print()
    print(f"| second shape | seed | fastest without (ms) | fastest with (ms) | trials to 0.9 without | with | saved "
          f"| after {args.early} trials without | with |")  # fmt: skip
    print("|---|---|---|---|---|---|---|---|---|")
    for row in rows:
        best_with = row["best_with_s"]
        print(f"| {row['shape']} | {row['seed']} | {row['best_without_s'] * 1e3:.3f} | "
              f"{best_with * 1e3 if best_with else float('nan'):.3f} | {row['trials_without']} | {row['trials_with']} | "
              f"{row['saved']} | {row['early_without']:.2f} | {row['early_with']:.2f} |")  # fmt: skip
    for name in SECOND:
        saved = [r["saved"] for r in rows if r["shape"] == name and r["saved"] is not None]
        if saved:
            print(f"{name}: median trials saved {statistics.median(saved)} over {len(saved)} repeat(s)")
    load = os.getloadavg()
    out["load_average_end"] = load
    print(f"total {time.perf_counter() - start:.0f} s; load average at the end {load[0]:.1f} {load[1]:.1f} "
          f"{load[2]:.1f}; databases in {folder}")  # fmt: skip
    if args.json:
        Path(args.json).write_text(json.dumps(out, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
