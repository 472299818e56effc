"""Global vector loads and stores (`einc-vectorize-global`) on a device target: the default
kernels with the pass and without it, timed in turn in one run.

    PYTHONPATH=. .venv/bin/python benchmarks/global_vectors.py [--target opencl] [--repeats 25] [--rounds 3]

Rows: an elementwise kernel (4096x1024, `C = A * B + 1`) and MatMul 512^3, each compiled
twice (the target's default schedule; "scalar": the pass switched off), checked against
NumPy float64, then called in alternation (`rounds` rounds of `repeats` calls of each), so a
change of machine load touches both alike. A call includes the launcher's copies to and from
the device. Prints the median and the best call of each and the ratio of the medians.
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Callable

import numpy as np

import einc
import einc.passes.vectorize_global as vectorize_global

PROGRAMS: dict[str, tuple[str, float, Callable[[dict[str, np.ndarray]], np.ndarray]]] = {
    "elementwise 4096x1024": (
        "input A: float32[4096, 1024]\ninput B: float32[4096, 1024]\nC[N, M] = A[N, M] * B[N, M] + 1.0\n",
        2 * 4096 * 1024,
        lambda a: a["A"].astype(np.float64) * a["B"] + 1.0,
    ),
    "matmul 512^3": (
        "input A: float32[512, 512]\ninput B: float32[512, 512]\nC[N, M] +=! A[N, K] * B[K, M]\n",
        2 * 512**3,
        lambda a: a["A"].astype(np.float64) @ a["B"],
    ),
}


def compile_both(source: str, target: str) -> tuple[einc.Kernel, einc.Kernel]:
    vectors = einc.compile(source, target=target, use_records=False)
    apply = vectorize_global.VectorizeGlobalPass.apply
    try:
        setattr(vectorize_global.VectorizeGlobalPass, "apply", lambda self, ctx, op: None)
        scalar = einc.compile(source, target=target, use_records=False)
    finally:
        setattr(vectorize_global.VectorizeGlobalPass, "apply", apply)
    return vectors, scalar


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--target", default="opencl")
    parser.add_argument("--repeats", type=int, default=25)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    rng = np.random.default_rng(0)
    for name, (source, work, reference) in PROGRAMS.items():
        kernels = dict(zip(("vectors", "scalar"), compile_both(source, args.target)))
        assert kernels["vectors"].source != kernels["scalar"].source, "the pass changed nothing"
        inputs = {t.name: rng.standard_normal(t.shape).astype(np.float32) for t in kernels["vectors"].inputs}
        want = reference(inputs)
        times: dict[str, list[float]] = {k: [] for k in kernels}
        for label, kernel in kernels.items():
            out = {"C": np.empty(want.shape, np.float32)}
            kernel.run(inputs, out)
            np.testing.assert_allclose(out["C"], want, rtol=1e-4, atol=1e-4 * float(np.abs(want).max()))
        for _ in range(args.rounds):
            for label, kernel in kernels.items():
                out = {"C": np.empty(want.shape, np.float32)}
                for _ in range(args.repeats):
                    start = time.perf_counter()
                    kernel.run(inputs, out)
                    times[label].append(time.perf_counter() - start)
        medians = {k: statistics.median(v) for k, v in times.items()}
        for label in kernels:
            print(f"{args.target} {name} {label:7s}: median {medians[label] * 1e3:7.2f} ms "
                  f"({work / medians[label] / 1e9:6.2f} G/s), best {min(times[label]) * 1e3:7.2f} ms")  # fmt: skip
        print(f"{args.target} {name}: scalar / vectors = {medians['scalar'] / medians['vectors']:.2f}")


if __name__ == "__main__":
    main()
