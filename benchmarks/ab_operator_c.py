"""Same-process A/B of C sources of one benchmarks/cpu_operators.py operator: each source is
compiled, checked against the operator's NumPy reference (float64) on random inputs, then
the sources are timed in alternated rounds by thread CPU time (one thread: the time slices
other processes take are not counted). Run from the repository root:

    PYTHONPATH=. .venv/bin/python benchmarks/ab_operator_c.py --dump layernorm 1 ln.c   # today's default C
    env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE OMP_NUM_THREADS=1 PYTHONPATH=. .venv/bin/python \\
        benchmarks/ab_operator_c.py layernorm 1 old.c ln.c [--rounds 11]

`--wall` times by wall clock instead, with the OpenMP threads the environment gives, in rounds
of 5 calls (a parallel kernel, e.g. at batch 1 on 2 threads):

    env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE OMP_NUM_THREADS=2 PYTHONPATH=. .venv/bin/python \\
        benchmarks/ab_operator_c.py --wall conv2d_stride 1 old.c new.c --rounds 100

On a shared machine the median of a parallel kernel waits for time slices the other processes
hold (a barrier waits for the slowest thread): there the minimum, the quietest round, is the
figure to compare.

The kernel's parameters are matched by name from each source's `void kernel(...)` line.
Prints each source's median and minimum per call and their ratios to the first's."""

from __future__ import annotations

import argparse
import ctypes
import re
import statistics
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).parent))
import cpu_operators  # noqa: E402

WALL_CALLS = 5
"""Calls per timed round with `--wall`."""


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--dump", action="store_true", help="write the default C of OP at BATCH to the one file given")
    p.add_argument("op", help="an operator key of benchmarks/cpu_operators.py")
    p.add_argument("batch", type=int)
    p.add_argument("files", nargs="+")
    p.add_argument("--rounds", type=int, default=11)
    p.add_argument("--wall", action="store_true", help="wall clock, OMP_NUM_THREADS threads, rounds of 5 calls")
    a = p.parse_args()
    op = cpu_operators.ops(a.batch)[a.op]
    if a.dump:
        import einc

        Path(a.files[0]).write_text(einc.compile(op.ir, op.inputs, target="c", use_records=False).source)
        return
    from einc.runtime.arrays import aligned_empty
    from einc.runtime.c import compile_c
    from einc.semantics.compare import max_error, tolerance

    rng = np.random.default_rng(0)
    arrays = {k: rng.uniform(-1, 1, v["shape"]).astype(np.float32) for k, v in op.inputs.items()}
    want = op.numpy({k: v.astype(np.float64) for k, v in arrays.items()})
    out = aligned_empty(want.shape, np.float32)  # as einc allocates outputs (streaming stores need it)
    calls = {}
    for f in a.files:
        source = Path(f).read_text()
        params = re.search(r"void kernel\(([^)]*)\)", source)
        assert params, f"{f}: no kernel"
        names = [q.split()[-1].lstrip("*") for q in params.group(1).split(",")]
        pointers = [(out if n == "output0" else arrays[n]).ctypes.data_as(ctypes.c_void_p) for n in names]
        kernel = ctypes.CDLL(str(compile_c(source).path)).kernel
        out[...] = np.nan
        kernel(*pointers)
        err = max_error(out, want)  # the benchmark's own check (relative to the output's magnitude)
        print(f"{f}: max error {err:.2e}")
        assert err <= tolerance("float32"), f
        calls[f] = (kernel, pointers)
    clock = time.perf_counter if a.wall else time.thread_time
    once = calls[a.files[0]]
    t = clock()
    once[0](*once[1])
    per = WALL_CALLS if a.wall else max(1, int(0.05 / max(clock() - t, 1e-6)))
    times: dict[str, list[float]] = {f: [] for f in a.files}
    for _ in range(a.rounds):
        for f, (kernel, pointers) in calls.items():
            t = clock()
            for _ in range(per):
                kernel(*pointers)
            times[f].append((clock() - t) / per)
    median, least = statistics.median(times[a.files[0]]), min(times[a.files[0]])
    for f, ts in times.items():
        m = statistics.median(ts)
        print(f"{f}: median {m * 1e3:.4f} ms ({median / m:.2f}x the first), min {min(ts) * 1e3:.4f} ms ({least / min(ts):.2f}x)")


if __name__ == "__main__":
    main()
