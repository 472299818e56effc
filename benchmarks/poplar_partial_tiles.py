"""Poplar: the default's register tiles on an output no register tile size divides, against
the unscheduled kernel (main's behaviour there: one output element per point), built side by
side and timed interleaved in one process on the Poplar CPU harness; both checked against
NumPy (float64). Prints per-round ms and the medians.

    env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE OMP_NUM_THREADS=1 \\
        PYTHONPATH=$PWD .venv/bin/python benchmarks/poplar_partial_tiles.py --shape 252,499,128 --rounds 5
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(__file__))
from common import measure  # noqa: E402

from einc.compiler.driver import Compilation  # noqa: E402
from einc.runtime.arrays import poisoned  # noqa: E402
from einc.schedule.choice import ScheduleChoice  # noqa: E402


def build(n: int, k: int, m: int, unscheduled: bool):  # noqa: ANN201
    inputs = {"input0": {"dtype": "float32", "shape": [n, k]}, "input1": {"dtype": "float32", "shape": [k, m]}}
    comp = Compilation("output0[N, M] +=! input0[N, K] * input1[K, M]", "<poplar>", inputs, None, "poplar",
                       ScheduleChoice.NONE if unscheduled else None)  # fmt: skip
    comp.run_until("source")
    return comp, comp.target_obj.build(comp.results["source"], comp.results["target"])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--shape", default="252,499,128", help="N,M,K")
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    n, m, k = (int(s) for s in args.shape.split(","))
    rng = np.random.default_rng(0)
    values = {"input0": rng.uniform(-2, 2, (n, k)).astype(np.float32), "input1": rng.uniform(-2, 2, (k, m)).astype(np.float32)}
    want = values["input0"].astype(np.float64) @ values["input1"].astype(np.float64)
    variants = {"unscheduled": build(n, k, m, True), "default": build(n, k, m, False)}
    for name, (comp, runner) in variants.items():
        kernels = sum("egpu.tile_split" in op.attributes for op in comp.results["target"].ops)
        outs = {o.name: poisoned(o.shape, o.dtype) for o in comp.program.outputs}
        runner(values, outs)
        np.testing.assert_allclose(outs["output0"], want, rtol=1e-4, atol=1e-3)
        print(f"{name}: {kernels} kernels, equal to NumPy")
    times: dict[str, list[float]] = {name: [] for name in variants}
    for r in range(args.rounds):
        for name, (comp, runner) in variants.items():
            outs = {o.name: np.empty(o.shape, o.dtype) for o in comp.program.outputs}
            t = measure(lambda: runner(values, outs), repeat=3, min_time=0.2)  # noqa: B023
            times[name].append(t.median_s * 1e3)
        print(f"round {r + 1}: " + ", ".join(f"{name} {times[name][-1]:.1f} ms" for name in variants), flush=True)
    med = {name: statistics.median(v) for name, v in times.items()}
    print(", ".join(f"{name} median {v:.1f} ms" for name, v in med.items())
          + f"; unscheduled / default {med['unscheduled'] / med['default']:.2f}x; load {os.getloadavg()}")  # fmt: skip


if __name__ == "__main__":
    main()
