"""A/B timing of the generated C against a saved earlier version, interleaved in one process.

    .venv/bin/python benchmarks/ab_c_sources.py --save DIR      # store today's C sources
    .venv/bin/python benchmarks/ab_c_sources.py --against DIR [--threads N] [--repeat 9] [NAME...]

`--save` writes each benchmark kernel's C source (default schedule) to DIR. `--against`
compiles the saved source (A) and today's (B), checks both against NumPy, then alternates A
and B `--repeat` times (ABBA order; each sample loops a kernel for ~0.2 s) and prints the
medians and `A/B` (above 1: today's code is faster) of wall time and of the process's CPU
time (with one thread, CPU time is the steadier measure when other processes share the
cores; with two it sums both threads). The machine is shared: only the ratio of the same
run means anything. Kernels are those of benchmarks/schedules_vs_numpy.py (NAME filters by
substring). OMP_NUM_THREADS is set from `--threads` before OpenMP starts.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path


def _args() -> tuple[str, Path, int, int, bool, list[str]]:
    argv = sys.argv[1:]
    mode, directory, threads, repeat, quick, names = "", Path("."), 1, 9, False, []
    k = 0
    while k < len(argv):
        a = argv[k]
        if a in ("--save", "--against"):
            mode, directory = a[2:], Path(argv[k + 1])
            k += 2
        elif a == "--threads":
            threads = int(argv[k + 1])
            k += 2
        elif a == "--repeat":
            repeat = int(argv[k + 1])
            k += 2
        elif a == "--quick":
            quick = True
            k += 1
        else:
            names.append(a)
            k += 1
    if not mode:
        raise SystemExit(__doc__)
    return mode, directory, threads, repeat, quick, names


def main() -> None:
    mode, directory, threads, repeat, quick, names = _args()
    os.environ["OMP_NUM_THREADS"] = os.environ["OPENBLAS_NUM_THREADS"] = str(threads)
    import statistics
    import time

    import numpy as np

    sys.path.insert(0, str(Path(__file__).parent))
    from schedules_vs_numpy import benches, conv, softmax

    from einc.compiler.driver import Compilation
    from einc.runtime.c import load_c_kernel
    from einc.runtime.signature import KernelSignature

    rng = np.random.default_rng(0)
    for b in benches(quick):
        slug = "".join(c if c.isalnum() else "_" for c in b.name)
        if names and not any(n.lower() in b.name.lower() for n in names):
            continue
        comp = Compilation(b.ir, input_dict=b.inputs)
        source = comp.run_until("source")
        if mode == "save":
            directory.mkdir(parents=True, exist_ok=True)
            (directory / f"{slug}.c").write_text(source)
            continue
        signature = KernelSignature.from_module(comp.results["target"])
        old = load_c_kernel((directory / f"{slug}.c").read_text(), signature)
        new = load_c_kernel(source, signature)
        arrays = {k: rng.uniform(-1, 1, v["shape"]).astype(v["dtype"]) for k, v in b.inputs.items()}
        want = eval(b.numpy, {"np": np, "conv": conv, "softmax": softmax})(arrays)
        errors = []
        for kernel in (old, new):
            out = np.full(want.shape, np.nan, np.float32)
            kernel.run(arrays, {"output0": out})
            errors.append(float(np.max(np.abs(out - want)) / max(1.0, float(np.max(np.abs(want))))))
        outs = {"output0": np.empty(want.shape, np.float32)}
        runs = []
        for kernel in (old, new):
            start = time.perf_counter()
            kernel.run(arrays, outs)
            runs.append(max(1, int(0.2 / max(time.perf_counter() - start, 1e-9))))
        walls: list[list[float]] = [[], []]
        cpus: list[list[float]] = [[], []]
        for r in range(repeat):
            for side in (0, 1) if r % 2 == 0 else (1, 0):  # ABBA: drift hits both sides alike
                kernel = (old, new)[side]
                start, cpu = time.perf_counter(), time.process_time()
                for _ in range(runs[side]):
                    kernel.run(arrays, outs)
                walls[side].append((time.perf_counter() - start) / runs[side])
                cpus[side].append((time.process_time() - cpu) / runs[side])
        a, b_ = statistics.median(walls[0]), statistics.median(walls[1])
        ca, cb = statistics.median(cpus[0]), statistics.median(cpus[1])
        print(f"{b.name:24s} threads={threads} A={a * 1e3:8.3f} ms  B={b_ * 1e3:8.3f} ms  "
              f"A/B wall={a / b_:5.2f} cpu={ca / cb:5.2f}  err A={errors[0]:.1e} B={errors[1]:.1e}", flush=True)


if __name__ == "__main__":
    main()
