"""Does a tune on a busy machine record a slower best? For each program and run: a busy loop
pinned to one core (`taskset -c CORE`), `einc tune FILE --trials N` into a fresh database beside
it, the loop stopped; then, without the loop, the record `einc compile` applies (the recorded
best) timed against the default schedule.

    .venv/bin/python benchmarks/tune_under_load.py examples/softmax.ein examples/matmul.ein \
        [--trials 24] [--runs 2] [--core 0] [--rounds 20] [--threads N] [--einc-path CHECKOUT]

The timing after the tune loads both kernels in this process (OpenMP threads sleeping when they
wait, as einc's own timing has them) and measures them in alternating order (A B B A ...) for
`--rounds` rounds; each sample is the median of repeats of at least 20 ms. The ratio of a round
is the default's time over the best's (above 1: the best is faster); the median ratio and its
90% interval (order statistics) are reported. `--threads N` tunes and times with N OpenMP
threads (default: OpenMP's, one per core). `--einc-path` runs the tune with another checkout
of einc (e.g. an older one, to compare); the timing always uses this one.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(ROOT))
os.environ.setdefault("OMP_WAIT_POLICY", "passive")  # as einc's own timing (einc.runtime.openmp)

from einc.compiler.driver import Compilation
from einc.semantics.compare import random_inputs  # noqa: E402
from einc.tune.decide import median_interval  # noqa: E402
from einc.tune.records import RecordDB
from einc.compiler.records import record_context  # noqa: E402
from einc.targets import get_target  # noqa: E402
from einc.tune.types import TuneTask  # noqa: E402

BUSY = "while True:\n    pass\n"


def sample(fn: Callable[[], object], repeats: int = 5, min_s: float = 0.02) -> float:
    fn()
    start = time.perf_counter()
    fn()
    inner = max(1, int(min_s / max(time.perf_counter() - start, 1e-9)))
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        for _ in range(inner):
            fn()
        times.append((time.perf_counter() - t0) / inner)
    return statistics.median(times)


def tune_under_load(program: Path, db: Path, trials: int, core: int, einc_path: Path,
                    threads: int | None) -> tuple[str, float]:  # fmt: skip
    """`einc tune` beside a busy loop on `core`: its summary and seconds."""
    busy = subprocess.Popen(["taskset", "-c", str(core), sys.executable, "-c", BUSY])
    try:
        env = {**os.environ, "PYTHONPATH": str(einc_path)}
        env.pop("OMP_WAIT_POLICY", None)  # the tuner chooses (or not) for itself
        start = time.perf_counter()
        command = [sys.executable, "-m", "einc.cli", "tune", str(program), "--trials", str(trials), "--db", str(db),
                   "--quiet", *(["--threads", str(threads)] if threads else [])]  # fmt: skip
        done = subprocess.run(command, capture_output=True, text=True, env=env, cwd=einc_path)
        seconds = time.perf_counter() - start
    finally:
        busy.kill()
        busy.wait()
    if done.returncode != 0:
        raise SystemExit(f"einc tune failed ({done.returncode}):\n{done.stdout}\n{done.stderr}")
    return done.stdout.split("\nbuiltin.module", 1)[0], seconds


def compare(program: Path, db: Path, rounds: int) -> dict[str, object]:
    """The recorded best against the default schedule, both timed here in alternating rounds."""
    task = TuneTask.from_file(program)
    with RecordDB(db, create=False) as records:
        best = records.best(task.key, "c", record_context(get_target("c")))
    assert best is not None, "no best recorded"
    tuned = Compilation(task.source, str(program), schedule=best.schedule, use_records=False).kernel()
    default = Compilation(task.source, str(program), use_records=False).kernel()
    inputs = random_inputs(tuned.program, __import__("numpy").random.default_rng(0))
    kernels = {"default": lambda: default(**inputs), "best": lambda: tuned(**inputs)}
    ratios = []
    for r in range(rounds):
        order = ("default", "best") if r % 2 == 0 else ("best", "default")
        got = {name: sample(kernels[name]) for name in order}
        ratios.append(got["default"] / got["best"])
    low, high = median_interval(ratios)
    return {"record": best.describe(), "kept_default": best.kept_default, "decision": best.decision,
            "ratio": statistics.median(ratios), "low": low, "high": high}  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("programs", nargs="+", type=Path)
    parser.add_argument("--trials", type=int, default=24)
    parser.add_argument("--runs", type=int, default=2)
    parser.add_argument("--core", type=int, default=0)
    parser.add_argument("--rounds", type=int, default=20)
    parser.add_argument("--threads", type=int, default=None)
    parser.add_argument("--einc-path", type=Path, default=ROOT)
    args = parser.parse_args()
    if args.threads:
        os.environ["OMP_NUM_THREADS"] = str(args.threads)  # before this process loads OpenMP
    print(f"machine: {os.cpu_count()} cores, load average {os.getloadavg()[0]:.1f} at the start; "
          f"tuning with {args.einc_path}")  # fmt: skip
    with tempfile.TemporaryDirectory() as tmp:
        for program in args.programs:
            for run in range(args.runs):
                db = Path(tmp) / f"{program.stem}-{run}.db"
                summary, seconds = tune_under_load(program.resolve(), db, args.trials, args.core, args.einc_path,
                                                   args.threads)  # fmt: skip
                print(f"== {program} run {run + 1}: {args.trials} trials with core {args.core} busy, {seconds:.0f} s")
                print("\n".join("   " + line for line in summary.splitlines()))
                got = compare(program, db, args.rounds)
                print(f"   recorded best: {got['record']}" + (" (the default kept)" if got["kept_default"] else ""))
                print(f"   timed afterwards without the busy loop (load average {os.getloadavg()[0]:.1f}): the best "
                      f"runs at {got['ratio']:.2f}x the default's speed (90% interval {got['low']:.2f}-"
                      f"{got['high']:.2f}x, {args.rounds} alternating rounds)", flush=True)  # fmt: skip


if __name__ == "__main__":
    main()
