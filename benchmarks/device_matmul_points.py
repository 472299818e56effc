"""MatMul 512^3 on a device target: points of the tuner's device space (einc.tune.space) and
hand schedules of benchmarks/device_schedules.py timed in interleaved rounds, each round in
a rotating order (a median of 5 calls each), every variant checked against NumPy float64
first; per variant the median time and its speed relative to the first (the median of the
rounds' ratios, and in how many rounds it was faster). What the README's MatMul space figures
were measured with:

    PYTHONPATH=. .venv/bin/python benchmarks/device_matmul_points.py opencl 7 \\
        "hand:64x64 tile, 8x8 registers" "default:" "default:N.reg=16" "default:M.reg=16" "tile.kunroll:"
    PYTHONPATH=. .venv/bin/python benchmarks/device_matmul_points.py sycl 9 \\
        "hand:256x128 tile, 16x1 registers" "default:" "tile.kunroll:" "tile.kunroll:K.kunroll=2"

A variant is `hand:NAME` (HAND_MATMUL) or `SKETCH:AXIS.KNOB=V,...` (the sketch's default point
with those knobs of `output0` changed).
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import measure  # noqa: E402
from device_schedules import HAND_MATMUL, MATMUL, script  # noqa: E402

N = 512


def schedule_of(variant: str, target: str, spaces: dict) -> str:
    from einc.tune.space import SearchSpace
    from einc.tune.types import Point, TuneTask

    kind, _, rest = variant.partition(":")
    if kind == "hand":
        return script(HAND_MATMUL[rest])
    if target not in spaces:
        source = f"input input0: float32[{N}, {N}]\ninput input1: float32[{N}, {N}]\n{MATMUL}\n"
        spaces[target] = SearchSpace.from_task(TuneTask(source, target=target))
    space = spaces[target]
    values = space.sketch_default(kind).values()
    for item in filter(None, rest.split(",")):
        knob, _, value = item.partition("=")
        values[f"output0.{knob}"] = int(value)
    return space.candidate(Point.of(kind, values)).schedule


def main() -> None:
    import einc

    target, rounds, variants = sys.argv[1], int(sys.argv[2]), sys.argv[3:]
    inputs = {name: {"dtype": "float32", "shape": [N, N]} for name in ("input0", "input1")}
    rng = np.random.default_rng()
    arrays = {name: rng.uniform(-1, 1, (N, N)).astype(np.float32) for name in inputs}
    want = arrays["input0"].astype(np.float64) @ arrays["input1"]
    spaces: dict = {}
    kernels = []
    for variant in variants:
        kernel = einc.compile(MATMUL, inputs, target=target, schedule=schedule_of(variant, target, spaces),
                              use_records=False)  # fmt: skip
        error = float(np.max(np.abs(kernel(**arrays)["output0"] - want)) / np.max(np.abs(want)))
        if error > 1e-3:
            raise SystemExit(f"{variant}: wrong numbers (max relative error {error:.1e})")
        kernels.append(kernel)
    outs = {o.name: np.empty(o.shape, o.dtype) for o in kernels[0].outputs}
    times: list[list[float]] = [[] for _ in kernels]
    for r in range(rounds):
        for k in range(len(kernels)):
            i = (r + k) % len(kernels)
            times[i].append(measure(lambda i=i: kernels[i].run(arrays, outs), repeat=5, min_time=0.1).median_s)
    for variant, got in zip(variants, times):
        ratios = [b / t for b, t in zip(times[0], got)]
        print(f"{np.median(got) * 1e3:8.3f} ms  {np.median(ratios):.3f}x the first, faster in "
              f"{sum(x > 1 for x in ratios)}/{rounds} rounds  {variant}")


if __name__ == "__main__":
    main()
