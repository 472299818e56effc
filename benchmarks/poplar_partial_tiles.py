"""Same-process interleaved comparison of a float32 matmul on the Poplar CPU harness: the
default (register tiles, the last one partial where the tile does not divide the axis) with
its partial tiles' guards inside the reduction loop K (`guarded`: the Poplar pipeline without
`einc-unswitch`, what main did before it) against the default as it is (`unswitched`: the
guards tested once before K, einc/passes/unswitch.py); with `--unscheduled`, also the
unscheduled kernel (one output element per point).

    PYTHONPATH=. .venv/bin/python benchmarks/poplar_partial_tiles.py [--rounds 5] [--unscheduled] NxKxM...

Every kernel is checked against NumPy (float64) first; then each round calls each once (the
order reversed every other round), and the medians of the call's wall time and of the
process's CPU time are printed with each one's speedup over the first. The load average is
printed before and after: the machine is shared, only the ratios of one run mean anything.
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
from einc.targets.poplar import PoplarTarget

MM = "output0[N, M] +=! input0[N, K] * input1[K, M]"


class GuardedPoplar(PoplarTarget):
    """Poplar with the guards left inside the loops (its pipeline without einc-unswitch)."""

    pipeline = ",".join(p for p in PoplarTarget.pipeline.split(",") if p != "einc-unswitch")


def build(n: int, k: int, m: int, schedule: ScheduleChoice | None, guarded: bool) -> tuple[Compilation, Runner]:
    inputs = {"input0": {"dtype": "float32", "shape": [n, k]}, "input1": {"dtype": "float32", "shape": [k, m]}}
    comp = Compilation(MM, "<poplar-ab>", inputs, None, "poplar", schedule)
    if guarded:
        comp.target_obj = GuardedPoplar
    comp.run_until("source")
    return comp, comp.target_obj.build(comp.results["source"], comp.results["target"])


def main() -> None:
    argv = sys.argv[1:]
    rounds = 5
    if "--rounds" in argv:
        at = argv.index("--rounds")
        rounds = int(argv[at + 1])
        del argv[at:at + 2]
    variants: list[tuple[str, ScheduleChoice | None, bool]] = [("guarded", None, True), ("unswitched", None, False)]
    if "--unscheduled" in argv:
        argv.remove("--unscheduled")
        variants.insert(0, ("unscheduled", ScheduleChoice.NONE, False))
    shapes = [tuple(int(x) for x in s.split("x")) for s in argv] or [(499, 499, 499), (500, 300, 997)]
    print(f"load average {os.getloadavg()[0]:.2f} {os.getloadavg()[1]:.2f}")
    rng = np.random.default_rng(0)
    for n, k, m in shapes:
        values = {"input0": rng.uniform(-2, 2, (n, k)).astype(np.float32),
                  "input1": rng.uniform(-2, 2, (k, m)).astype(np.float32)}  # fmt: skip
        want = values["input0"].astype(np.float64) @ values["input1"].astype(np.float64)
        runners: dict[str, Runner] = {}
        for name, schedule, guarded in variants:
            comp, runner = build(n, k, m, schedule, guarded)
            split = [op.attributes["egpu.tile_split"] for op in comp.results["target"].ops if "egpu.tile_split" in op.attributes]
            out = {"output0": poisoned((n, m), "float32")}
            runner(values, out)
            np.testing.assert_allclose(out["output0"], want, rtol=1e-4, atol=1e-3)
            local = "output0_local[" in comp.results["source"]
            loops = comp.results["source"].count("for (int K = ")
            print(f"{n}x{k}x{m} {name}: equal to NumPy; register tiles {local}; {loops} K loops; {str(split[-1])[:110]}")
            runners[name] = runner
        times: dict[str, list[tuple[float, float]]] = {name: [] for name in runners}
        for r in range(rounds):
            order = list(runners) if r % 2 == 0 else list(runners)[::-1]
            for name in order:
                out = {"output0": poisoned((n, m), "float32")}
                wall, cpu = time.perf_counter(), time.process_time()
                runners[name](values, out)
                times[name].append((time.perf_counter() - wall, time.process_time() - cpu))
        med = {name: (statistics.median(w for w, _ in t), statistics.median(c for _, c in t)) for name, t in times.items()}
        first = med[variants[0][0]]
        shown = ", ".join(
            f"{name} {w * 1e3:.0f} ms wall / {c * 1e3:.0f} ms cpu ({first[0] / w:.2f}x wall, {first[1] / c:.2f}x cpu)"
            for name, (w, c) in med.items()
        )
        print(f"{n}x{k}x{m}: {shown} ({rounds} rounds, medians; speedups over {variants[0][0]})")
    print(f"load average {os.getloadavg()[0]:.2f} {os.getloadavg()[1]:.2f}")


if __name__ == "__main__":
    main()
