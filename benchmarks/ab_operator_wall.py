"""Same-process A/B of C sources of one benchmarks/cpu_operators.py operator by wall clock, with
the OpenMP threads the environment gives (`benchmarks/ab_operator_c.py` times one thread by
its CPU time): each source is compiled, checked against the operator's NumPy reference
(float64) on random inputs, then timed in alternated rounds of 5 calls. Prints each source's
median and minimum per call and their ratios to the first. On a shared machine the median of a
parallel kernel waits for time slices the other processes hold (a barrier waits for the slowest
thread): the minimum, the quietest round, is the figure to compare. Run from the repository root:

    PYTHONPATH=. .venv/bin/python benchmarks/ab_operator_c.py --dump conv2d_stride 1 new.c
    env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE OMP_NUM_THREADS=2 PYTHONPATH=. .venv/bin/python \\
        benchmarks/ab_operator_wall.py conv2d_stride 1 old.c new.c [--rounds 100]
"""

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

CALLS = 5
"""Calls per timed round."""


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("op", help="an operator key of benchmarks/cpu_operators.py")
    p.add_argument("batch", type=int)
    p.add_argument("files", nargs="+")
    p.add_argument("--rounds", type=int, default=100)
    a = p.parse_args()
    op = cpu_operators.ops(a.batch)[a.op]
    from einc.runtime.c import compile_c

    rng = np.random.default_rng(0)
    arrays = {k: rng.uniform(-1, 1, v["shape"]).astype(np.float32) for k, v in op.inputs.items()}
    want = op.numpy({k: v.astype(np.float64) for k, v in arrays.items()})
    out = np.zeros(want.shape, np.float32)
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
        err = float(np.max(np.abs(out - want) / (1 + np.abs(want))))
        print(f"{f}: max error {err:.2e}")
        assert err < 1e-4, f
        calls[f] = (kernel, pointers)
    times: dict[str, list[float]] = {f: [] for f in a.files}
    for _ in range(a.rounds):
        for f, (kernel, pointers) in calls.items():
            t = time.perf_counter()
            for _ in range(CALLS):
                kernel(*pointers)
            times[f].append((time.perf_counter() - t) / CALLS)
    median, least = statistics.median(times[a.files[0]]), min(times[a.files[0]])
    for f, ts in times.items():
        m = statistics.median(ts)
        print(f"{f}: median {m * 1e3:.4f} ms ({median / m:.2f}x), min {min(ts) * 1e3:.4f} ms ({least / min(ts):.2f}x)")


if __name__ == "__main__":
    main()
