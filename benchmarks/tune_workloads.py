"""The tuning benchmark (issue 13): for each workload and thread count, NumPy, the default C
schedule and the tuned one, as GFLOP/s or GB/s and as fractions of the FMA peak or the STREAM
triad bandwidth measured in the same run; trials and seconds to 90% of the final best;
Bayesian against random search at the same budget (best-so-far curves as JSON and a plot).

    .venv/bin/python benchmarks/tune_workloads.py [--trials 64] [--workloads matmul,softmax]
        [--threads 1,2] [--json out.json] [--plot benchmarks/out/convergence.png]
        [--tvm-python /work/tvmvenv/bin/python | --tvm-json tvm64.json]

Each thread count runs in its own subprocess (OpenBLAS and OpenMP read their thread counts
once). Workload shapes are schedules_vs_numpy.py's. NumPy, default and tuned kernels are timed
by one harness (common.measure) after tuning; the tuner's own medians give the curves.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent))

from schedules_vs_numpy import BASELINES, Bench, benches

WORKLOADS = ("matmul", "batchmatmul", "conv2d", "softmax", "layernorm", "reducesum")


def workload_key(bench: Bench) -> str:
    return bench.name.split()[0].lower()


def all_workloads() -> dict[str, Bench]:
    return {workload_key(b): b for b in benches(quick=False)}


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trials", type=int, default=64)
    parser.add_argument("--time-budget", type=float, default=None, help="seconds per tuning run")
    parser.add_argument("--workloads", default=",".join(WORKLOADS),
                        help=f"comma-separated, of: {', '.join(all_workloads())}")
    parser.add_argument("--threads", default="1,2", help="comma-separated thread counts")
    parser.add_argument("--policies", default="bayes,random")
    parser.add_argument("--workers", type=int, default=2, help="parallel C builds")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--json", help="write every number and curve here")
    parser.add_argument("--plot", default=str(HERE / "out" / "convergence.png"))
    parser.add_argument("--tvm-python", help="a Python with TVM: tune MatMul with MetaSchedule too")
    parser.add_argument("--tvm-json", help="or: a tvm_metaschedule.py result to report beside")
    parser.add_argument("--worker", type=int, help=argparse.SUPPRESS)  # one thread count
    parser.add_argument("--out", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    known = all_workloads()
    args.workloads = [w.strip().lower() for w in args.workloads.split(",") if w.strip()]
    for w in args.workloads:
        if w not in known:
            parser.error(f"unknown workload {w!r}; known: {', '.join(known)}")
    args.threads = [int(t) for t in args.threads.split(",")]
    args.policies = [p.strip() for p in args.policies.split(",") if p.strip()]
    return args


# ---- one thread count, in its own process -------------------------------------------------------
def _rate(bench: Bench, nbytes: int, seconds: float) -> float:
    """GFLOP/s (compute-bound) or GB/s (memory-bound) for a time; 0 when there is none."""
    if not (seconds > 0 and math.isfinite(seconds)):
        return 0.0
    return (bench.flops or nbytes) / seconds / 1e9


def _history(result: Any) -> list[tuple[int, float, Any]]:
    """(trial index, elapsed seconds, MeasureResult) of each trial (a Trial or a tuple)."""
    rows = []
    for t in result.history:
        rows.append((t.index, t.elapsed_s, t.result) if hasattr(t, "result") else tuple(t))
    return rows


def _curve(result: Any) -> list[list[float]]:
    """[trial, elapsed seconds, best median seconds so far (inf before the first success)]."""
    best, curve = math.inf, []
    for index, elapsed, measured in _history(result):
        if measured.ok:
            best = min(best, measured.median_s)
        curve.append([index, elapsed, best])
    return curve


def _reached(curve: list[list[float]], fraction: float = 0.9) -> tuple[int, float] | None:
    """The first (trials, seconds) at which the best so far is `fraction` of the final best's
    throughput (its time at most final / fraction)."""
    if not curve or not math.isfinite(curve[-1][2]):
        return None
    goal = curve[-1][2] / fraction
    for index, elapsed, best in curve:
        if best <= goal:
            return int(index) + 1, elapsed
    return None


def run_one(bench: Bench, args: argparse.Namespace, threads: int) -> dict[str, Any]:
    from common import measure
    from einc.tune.tuner import tune

    from einc.tune.types import TuneTask

    source, input_dict, filename = bench.compile_args()
    task = TuneTask(source, "c", filename, input_dict)
    rng = np.random.default_rng(args.seed)
    arrays = {k: rng.uniform(-1, 1, v["shape"]).astype(v["dtype"]) for k, v in bench.inputs.items()}
    fn = eval(bench.numpy, BASELINES)
    want = fn({k: a.astype(np.float64) for k, a in arrays.items()})

    def timed(kernel: Any) -> tuple[float, float]:
        outs = {o.name: np.empty(o.shape, o.dtype) for o in kernel.outputs}
        kernel.run(arrays, outs)
        got = outs["output0"]
        err = float(np.max(np.abs(got - want)) / max(1.0, float(np.max(np.abs(want)))))
        return measure(lambda: kernel.run(arrays, outs), repeat=3, min_time=0.1).median_s, err

    nbytes = sum(a.nbytes for a in arrays.values()) + int(np.prod(want.shape)) * 4
    row: dict[str, Any] = {"name": bench.name, "flops": bench.flops, "bytes": nbytes, "runs": {}}
    for policy in args.policies:
        result = tune(task, policy=policy, trials=args.trials, time_budget_s=args.time_budget,
                      workers=args.workers, threads=threads, db=None, seed=args.seed)  # fmt: skip
        curve = _curve(result)
        hit = _reached(curve)
        best = result.best
        row["runs"][policy] = {
            "trials": len(curve), "seconds": result.seconds,
            "failures": sum(1 for _, _, m in _history(result) if not m.ok),
            "failures_by_status": dict(result.failures),
            "best_s": best.median_s if best is not None else None,
            "best_point": best.candidate.point.describe() if best is not None else None,
            "best_schedule": best.candidate.schedule if best is not None else None,
            "default_s": result.default.median_s if result.default is not None and result.default.ok else None,
            "reach90_trials": hit[0] if hit else None, "reach90_seconds": hit[1] if hit else None,
            "curve": [[i, e, b if math.isfinite(b) else None] for i, e, b in curve],
        }  # fmt: skip
    row["numpy_s"] = measure(lambda: fn(arrays), repeat=5, min_time=0.2).median_s
    tuned = next((r for r in row["runs"].values() if r["best_schedule"]), None)
    if "bayes" in row["runs"] and row["runs"]["bayes"]["best_schedule"]:
        tuned = row["runs"]["bayes"]
    kernels = {"default": task.compilation(None).kernel()}
    if tuned is not None:
        kernels["tuned"] = task.compilation(tuned["best_schedule"]).kernel()
    # default and tuned timed in alternation (three rounds each), so that a drift of the
    # machine between two separate timings does not decide their ratio
    samples: dict[str, list[float]] = {k: [] for k in kernels}
    errors: dict[str, float] = {}
    for _ in range(3):
        for name, kernel in kernels.items():
            seconds, errors[name] = timed(kernel)
            samples[name].append(seconds)
    for name in kernels:
        row[f"{name}_s"], row[f"{name}_err"] = float(np.median(samples[name])), errors[name]
    return row


def worker(args: argparse.Namespace) -> None:
    from machine import fma_peak_gflops, stream_bandwidth_gbs

    threads = args.worker
    out: dict[str, Any] = {"threads": threads, "peak_gflops": fma_peak_gflops(threads),
                           "triad_gbs": stream_bandwidth_gbs(threads), "rows": []}  # fmt: skip
    known = all_workloads()
    for name in args.workloads:
        print(f"[{threads}T] tuning {known[name].name} ...", file=sys.stderr, flush=True)
        out["rows"].append({"key": name, **run_one(known[name], args, threads)})
    Path(args.out).write_text(json.dumps(out))


# ---- the parent: thread counts, TVM, tables, JSON, plot ------------------------------------------
def run_tvm(args: argparse.Namespace) -> dict[str, Any] | None:
    if args.tvm_json:
        return json.loads(Path(args.tvm_json).read_text())
    if not args.tvm_python:
        return None
    with tempfile.NamedTemporaryFile(suffix=".json", delete=False) as f:
        path = f.name
    cores = max(args.threads)
    cmd = [args.tvm_python, str(HERE / "tvm_metaschedule.py"), "--trials", str(args.trials),
           "--cores", str(cores), "--json", path]  # fmt: skip
    print(f"tuning MatMul with TVM MetaSchedule: {' '.join(cmd)}", file=sys.stderr, flush=True)
    done = subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, check=False)
    if done.returncode != 0:
        return {"error": f"exit {done.returncode}: {done.stderr.strip().splitlines()[-1:]}"}
    return json.loads(Path(path).read_text())


def _fmt_rate(rate: float, ceiling: float) -> str:
    return f"{rate:.1f} ({rate / ceiling:.2f})" if rate else "-"


def tables(results: dict[int, dict[str, Any]], policies: list[str]) -> str:
    from common import table

    out = []
    for threads, res in results.items():
        out.append(f"{threads} thread(s): FMA peak {res['peak_gflops']:.1f} GFLOP/s, STREAM triad "
                   f"{res['triad_gbs']:.1f} GB/s; rate (fraction of peak or triad bandwidth)")  # fmt: skip
        rows = []
        for r in res["rows"]:
            ceiling = res["peak_gflops"] if r["flops"] else res["triad_gbs"]
            work = r["flops"] or r["bytes"]

            def bench_rate(s: float | None, work: float = work) -> float:
                return work / s / 1e9 if s else 0.0

            cells = [r["name"], "GFLOP/s" if r["flops"] else "GB/s",
                     _fmt_rate(bench_rate(r["numpy_s"]), ceiling),
                     _fmt_rate(bench_rate(r["default_s"]), ceiling),
                     _fmt_rate(bench_rate(r.get("tuned_s")), ceiling),
                     f"{r['default_s'] / r['tuned_s']:.2f}" if r.get("tuned_s") else "-"]  # fmt: skip
            for p in policies:
                run = r["runs"].get(p)
                if run is None:
                    cells += ["-", "-"]
                    continue
                cells.append(_fmt_rate(bench_rate(run["best_s"]), ceiling))
                cells.append(f"{run['reach90_trials']} / {run['reach90_seconds']:.0f} s"
                             if run["reach90_trials"] else "-")  # fmt: skip
            cells.append(f"{max(r['default_err'], r.get('tuned_err', 0.0)):.1e}")
            rows.append(cells)
        header = ["workload", "unit", "NumPy", "default", "tuned", "tuned/default"]
        for p in policies:
            header += [f"{p} best", f"{p} 90% at (trials / s)"]
        out.append(table(rows, header + ["max rel err"]))
    return "\n\n".join(out)


def plot(results: dict[int, dict[str, Any]], path: str, tvm: dict[str, Any] | None = None) -> None:
    """Best so far against trials and against seconds, one row per workload; MetaSchedule's
    MatMul curve (against trials only: it does not time its trials) beside einc's."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    keys = [r["key"] for r in next(iter(results.values()))["rows"]]
    fig, axes = plt.subplots(len(keys), 2, figsize=(11, 3.2 * len(keys)), squeeze=False)
    styles = {"bayes": "-", "random": "--"}
    for k, key in enumerate(keys):
        for threads, res in results.items():
            r = next(x for x in res["rows"] if x["key"] == key)
            unit = "GFLOP/s" if r["flops"] else "GB/s"
            for policy, run in r["runs"].items():
                pts = [(i + 1, e, (r["flops"] or r["bytes"]) / b / 1e9) for i, e, b in run["curve"] if b]
                if not pts:
                    continue
                label = f"{policy}, {threads}T"
                for col, x in ((0, [p[0] for p in pts]), (1, [p[1] for p in pts])):
                    axes[k][col].step(x, [p[2] for p in pts], where="post", label=label,
                                      linestyle=styles.get(policy, ":"))  # fmt: skip
            if r["default_s"]:
                axes[k][0].axhline((r["flops"] or r["bytes"]) / r["default_s"] / 1e9, color="grey",
                                   linestyle=":", linewidth=0.8)  # fmt: skip
            axes[k][0].set_ylabel(f"{r['name']}\nbest so far ({unit})")
        if key == "matmul" and tvm is not None and tvm.get("best_so_far_gflops"):
            curve = tvm["best_so_far_gflops"]
            axes[k][0].step(range(1, len(curve) + 1), curve, where="post", color="black",
                            label=f"TVM MetaSchedule, {tvm['threads']}T")  # fmt: skip
        for col, xlabel in ((0, "trials"), (1, "seconds of tuning")):
            axes[k][col].set_xlabel(xlabel)
            axes[k][col].grid(True, alpha=0.3)
            axes[k][col].legend(fontsize=7, loc="lower right")
        axes[k][1].set_xlim(left=0)
    fig.suptitle("einc tune: Bayesian vs random search, best so far (dotted: default schedule)")
    fig.tight_layout()
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=100)
    plt.close(fig)


def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    if args.worker is not None:
        worker(args)
        return
    results: dict[int, dict[str, Any]] = {}
    for threads in args.threads:
        env = {**os.environ, "OMP_NUM_THREADS": str(threads), "OPENBLAS_NUM_THREADS": str(threads),
               "MKL_NUM_THREADS": str(threads)}  # fmt: skip
        with tempfile.NamedTemporaryFile(suffix=".json", delete=False) as f:
            path = f.name
        forwarded = [a for a in (argv if argv is not None else sys.argv[1:])]
        subprocess.run([sys.executable, __file__, *forwarded, "--worker", str(threads), "--out", path],
                       env=env, check=True)  # fmt: skip
        results[threads] = json.loads(Path(path).read_text())
        os.unlink(path)
    tvm = run_tvm(args)
    from machine import clock_ghz, cpu_model

    ghz = clock_ghz()
    print(f"CPU: {cpu_model()}, clock under load " + (f"{ghz:.2f} GHz" if ghz else "unknown")
          + f"; {args.trials} trials per search, {args.workers} build workers")  # fmt: skip
    print(tables(results, args.policies))
    if tvm is not None:
        print()
        if "best_gflops" in tvm:
            mm = next((r for r in results.get(tvm["threads"], {}).get("rows", []) if r["key"] == "matmul"), None)
            line = (f"TVM MetaSchedule {tvm.get('tvm_version', '')}, MatMul {tvm['threads']}T: "
                    f"{tvm['trials_recorded']} trials in {tvm['tune_seconds']:.0f} s, best "
                    f"{tvm['best_gflops']:.1f} GFLOP/s (NumPy {tvm['numpy_gflops']:.1f} in its run)")  # fmt: skip
            if tvm["threads"] in results:
                line += f", {tvm['best_gflops'] / results[tvm['threads']]['peak_gflops']:.2f} of peak"
            if mm is not None and "bayes" in mm["runs"]:
                run = mm["runs"]["bayes"]
                line += (f"; einc bayes: {run['trials']} trials in {run['seconds']:.0f} s, best "
                         f"{mm['flops'] / run['best_s'] / 1e9:.1f} GFLOP/s" if run["best_s"] else "")
            print(line)
        else:
            print(f"TVM MetaSchedule: {tvm.get('skipped') or tvm.get('error')}")
    if args.plot:
        plot(results, args.plot, tvm)
        print(f"convergence plot: {args.plot}")
    if args.json:
        Path(args.json).write_text(json.dumps({"results": results, "tvm": tvm}, indent=1))


if __name__ == "__main__":
    main()
