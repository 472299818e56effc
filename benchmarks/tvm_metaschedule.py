"""MatMul N^3 float32 tuned with TVM MetaSchedule on the host CPU, for comparison with einc's tuner
at the same trial budget (issue 13). Runs in its own venv (TVM is no dependency of einc):

    python3 -m venv /work/tvmvenv; /work/tvmvenv/bin/pip install apache-tvm "apache-tvm-ffi==0.1.14.post1" xgboost cloudpickle psutil
    /work/tvmvenv/bin/python benchmarks/tvm_metaschedule.py --trials 64 --json out.json

Reports the wall seconds of tuning, the trials recorded, the best kernel's GFLOP/s (checked against
NumPy, float64) and NumPy's in the same process, and the best-so-far curve over the trials (from
MetaSchedule's database, in commit order). Without an importable `tvm` it says so and exits 0.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trials", type=int, default=64, help="MetaSchedule trials (global)")
    parser.add_argument("--per-iter", type=int, default=16,
                        help="trials per search iteration (the cost model retrains between)")
    parser.add_argument("--n", type=int, default=1024, help="MatMul size (N x N x N)")
    parser.add_argument("--cores", type=int, default=2, help="threads (target -num-cores)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--work-dir", help="MetaSchedule's logs and database (default: a temp dir)")
    parser.add_argument("--json", help="write the results here")
    return parser.parse_args()


def _preload_tensor_intrin() -> None:
    """The builder's worker initializer. MetaSchedule's default build imports
    `tvm.s_tir.tensor_intrin` in each fresh builder process (the pool restarts at every search
    iteration); that import took 40-60 s on a loaded 2-core machine, past the 30 s build
    timeout, so every build failed. Imported here, it is not counted against the timeout (it
    still costs wall time, which `tune_seconds` includes)."""
    import tvm.s_tir.tensor_intrin  # noqa: F401


def _run_secs_in_commit_order(path: Path) -> list[list[float]]:
    """The run times of each measured candidate, in the order they were measured: the JSON
    database appends one line `[workload, [trace, run_secs, target, args]]` per candidate (its
    in-memory records are sorted by speed instead)."""
    out: list[list[float]] = []
    try:
        for line in path.read_text().splitlines():
            if line.strip():
                secs = json.loads(line)[1][1]
                out.append([float(s) for s in secs] if secs else [])
    except (OSError, ValueError, TypeError, IndexError) as error:  # another TVM's file format
        print(f"tvm_metaschedule: cannot read {path}: {error}; no curve", file=sys.stderr)
    return out


def write(path: str | None, result: dict) -> None:
    print(json.dumps(result, indent=1))
    if path:
        Path(path).write_text(json.dumps(result, indent=1))


def main() -> None:
    args = parse_args()
    # Both runtimes read their thread counts once, at start-up.
    os.environ["TVM_NUM_THREADS"] = str(args.cores)
    os.environ["OPENBLAS_NUM_THREADS"] = str(args.cores)
    os.environ["OMP_NUM_THREADS"] = str(args.cores)
    try:
        import tvm
        from tvm import te
        from tvm.s_tir import meta_schedule as ms
    except Exception as error:  # noqa: BLE001 (ImportError, or a broken install failing at import)
        print(f"tvm_metaschedule: skipped, TVM is not importable here: {type(error).__name__}: "
              f"{error}", file=sys.stderr)  # fmt: skip
        write(args.json, {"skipped": f"{type(error).__name__}: {error}"})
        return
    import numpy as np

    n = args.n
    a = te.placeholder((n, n), name="A", dtype="float32")
    b = te.placeholder((n, n), name="B", dtype="float32")
    k = te.reduce_axis((0, n), name="k")
    c = te.compute((n, n), lambda i, j: te.sum(a[i, k] * b[k, j], axis=[k]), name="C")
    mod = tvm.IRModule({"main": te.create_prim_func([a, b, c])})
    # `llvm -mcpu=native -num-cores N`. TVM 0.27 takes targets as dicts only, and the PyPI
    # wheel's LLVM turns "native" into "generic" (no AVX) under its default triple
    # (x86_64-conda-linux-gnu), so the host CPU's name is asked of LLVM instead.
    from tvm.target import codegen

    mcpu = codegen.llvm_get_system_cpu()
    target = tvm.target.Target({"kind": "llvm", "mcpu": mcpu, "num-cores": args.cores})

    with tempfile.TemporaryDirectory() as tmp:
        work_dir = args.work_dir or tmp
        start = time.perf_counter()
        builder = ms.builder.LocalBuilder(max_workers=args.cores, timeout_sec=60.0,
                                          initializer=_preload_tensor_intrin)  # fmt: skip
        database = ms.tune_tir(mod, target, work_dir, max_trials_global=args.trials,
                               num_trials_per_iter=min(args.per_iter, args.trials),
                               builder=builder, num_tuning_cores=args.cores,
                               seed=args.seed)  # fmt: skip
        tune_s = time.perf_counter() - start
        run_secs = _run_secs_in_commit_order(Path(work_dir) / "database_tuning_record.json")
        sch = ms.tir_integration.compile_tir(database, mod, target)
    if sch is None:
        write(args.json, {"error": "MetaSchedule found no valid schedule", "trials_recorded": len(run_secs),
                          "tune_seconds": tune_s})  # fmt: skip
        return

    flops = 2.0 * n**3
    curve, best = [], float("inf")
    for secs in run_secs:
        if secs and statistics.median(secs) < 1e9:  # failed runs are recorded as 1e10 seconds
            best = min(best, statistics.median(secs))
        curve.append(flops / best / 1e9 if best < float("inf") else 0.0)

    lib = tvm.compile(sch.mod, target=target)
    dev = tvm.cpu(0)
    rng = np.random.default_rng(0)
    a_np = rng.uniform(-1, 1, (n, n)).astype(np.float32)
    b_np = rng.uniform(-1, 1, (n, n)).astype(np.float32)
    a_tv, b_tv = tvm.runtime.tensor(a_np, dev), tvm.runtime.tensor(b_np, dev)
    c_tv = tvm.runtime.tensor(np.zeros((n, n), np.float32), dev)
    lib["main"](a_tv, b_tv, c_tv)
    want = a_np.astype(np.float64) @ b_np.astype(np.float64)
    err = float(np.max(np.abs(c_tv.numpy() - want)) / np.max(np.abs(want)))
    evaluator = lib.mod.time_evaluator("main", dev, number=5, repeat=7, min_repeat_ms=200)
    tvm_s = statistics.median(evaluator(a_tv, b_tv, c_tv).results)

    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from common import measure

    numpy_s = measure(lambda: a_np @ b_np, repeat=7, min_time=0.2).median_s
    write(args.json, {
        "workload": f"MatMul {n}^3 float32", "target": str(target), "threads": args.cores,
        "tvm_version": tvm.__version__, "trials_requested": args.trials,
        "trials_recorded": len(run_secs), "trials_per_iter": min(args.per_iter, args.trials),
        "tune_seconds": tune_s, "best_gflops": flops / tvm_s / 1e9,
        "numpy_gflops": flops / numpy_s / 1e9, "max_rel_err": err,
        "correct": err < 1e-4, "best_so_far_gflops": curve,
    })  # fmt: skip


if __name__ == "__main__":
    main()
