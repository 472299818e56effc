"""Same-process interleaved A/B of a float32 matmul on the Poplar CPU harness: unscheduled
(one output element per point: what main's default leaves a matmul with an output axis no
register tile divides) against the default (register tiles, the last one partial where the
tile does not divide the axis).

    PYTHONPATH=. .venv/bin/python benchmarks/poplar_partial_tiles.py [--rounds 5] NxKxM...

Both kernels are checked against NumPy (float64) first; then each round calls A and B once
(ABBA order), and the medians of the call's wall time and of the process's CPU time are
printed with B's speedup (A / B). The load average is printed before and after: the machine
is shared, only the ratio of one run means anything.
"""

from __future__ import annotations

import os
import statistics
import sys
import time

import numpy as np

from einc.compiler.driver import Compilation
from einc.runtime.arrays import poisoned
from einc.schedule.choice import ScheduleChoice
from einc.targets.gpu import Runner

MM = "output0[N, M] +=! input0[N, K] * input1[K, M]"


def build(n: int, k: int, m: int, schedule: ScheduleChoice | None) -> tuple[Compilation, Runner]:
    inputs = {"input0": {"dtype": "float32", "shape": [n, k]}, "input1": {"dtype": "float32", "shape": [k, m]}}
    comp = Compilation(MM, "<poplar-ab>", inputs, None, "poplar", schedule)
    comp.run_until("source")
    return comp, comp.target_obj.build(comp.results["source"], comp.results["target"])


def main() -> None:
    argv = sys.argv[1:]
    rounds = 5
    if "--rounds" in argv:
        at = argv.index("--rounds")
        rounds = int(argv[at + 1])
        del argv[at:at + 2]
    shapes = [tuple(int(x) for x in s.split("x")) for s in argv] or [(499, 499, 499), (500, 300, 997)]
    print(f"load average {os.getloadavg()[0]:.2f} {os.getloadavg()[1]:.2f}")
    rng = np.random.default_rng(0)
    for n, k, m in shapes:
        values = {"input0": rng.uniform(-2, 2, (n, k)).astype(np.float32),
                  "input1": rng.uniform(-2, 2, (k, m)).astype(np.float32)}  # fmt: skip
        want = values["input0"].astype(np.float64) @ values["input1"].astype(np.float64)
        runners: dict[str, Runner] = {}
        for name, schedule in (("unscheduled", ScheduleChoice.NONE), ("default", None)):
            comp, runner = build(n, k, m, schedule)
            split = [op.attributes["egpu.tile_split"] for op in comp.results["target"].ops if "egpu.tile_split" in op.attributes]
            out = {"output0": poisoned((n, m), "float32")}
            runner(values, out)
            np.testing.assert_allclose(out["output0"], want, rtol=1e-4, atol=1e-3)
            local = "output0_local[" in comp.results["source"]
            print(f"{n}x{k}x{m} {name}: equal to NumPy; register tiles {local}; {str(split[-1])[:110]}")
            runners[name] = runner
        times: dict[str, list[tuple[float, float]]] = {name: [] for name in runners}
        for r in range(rounds):
            order = ["unscheduled", "default"] if r % 2 == 0 else ["default", "unscheduled"]
            for name in order:
                out = {"output0": poisoned((n, m), "float32")}
                wall, cpu = time.perf_counter(), time.process_time()
                runners[name](values, out)
                times[name].append((time.perf_counter() - wall, time.process_time() - cpu))
        med = {name: (statistics.median(w for w, _ in t), statistics.median(c for _, c in t)) for name, t in times.items()}
        a, b = med["unscheduled"], med["default"]
        print(f"{n}x{k}x{m}: unscheduled {a[0] * 1e3:.0f} ms wall / {a[1] * 1e3:.0f} ms cpu, default {b[0] * 1e3:.0f} / "
              f"{b[1] * 1e3:.0f} ms: {a[0] / b[0]:.1f}x wall, {a[1] / b[1]:.1f}x cpu ({rounds} rounds, medians)")
    print(f"load average {os.getloadavg()[0]:.2f} {os.getloadavg()[1]:.2f}")


if __name__ == "__main__":
    main()
