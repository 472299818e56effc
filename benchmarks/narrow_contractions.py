"""float16/bfloat16 kernels that accumulate in their own type, per device target: the default
schedule as it is (a contraction's register tile and a reduction's accumulator held as float32,
`einc-widen-narrow-buffers`; a row's partials shared among work-items where the target's default
does so) against the default mapping (`ScheduleChoice.NONE`: one output per work-item, the
accumulator read and written through global memory every step — what a float16 contraction
got before, since no device target could declare its register tile).

    env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE PYTHONPATH=. \\
        .venv/bin/python benchmarks/narrow_contractions.py [--rounds 7] [--targets opencl,sycl,hlsl]

Kernels: MatMul 512^3 in float16 and in bfloat16, a float16 row sum of 1024x1024. Each
variant is first checked bit for bit against NumPy's per-op rounding in the kernel's order
(the register tile keeps each output's order; the row sum's cross-thread order is checked
within its rounding bound instead). Then each round calls each variant 3 times (the order
reversed every other round) and the medians of the rounds are printed with the speedup over
the default mapping. The load average is printed before and after.
"""

from __future__ import annotations

import argparse
import os
import statistics
import time

import ml_dtypes
import numpy as np

from einc.compiler.driver import Compilation
from einc.schedule.choice import ScheduleChoice

MATMUL = "output0[N, M] +=! input0[N, K] * input1[K, M]"
ROWSUM = "output0[N] +=! input0[N, K]"
DTYPES = {"float16": np.dtype(np.float16), "bfloat16": np.dtype(ml_dtypes.bfloat16)}


def per_op_matmul(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    acc = np.zeros((a.shape[0], b.shape[1]), a.dtype)
    for k in range(a.shape[1]):
        p = (a[:, k, None].astype(np.float32) * b[None, k, :].astype(np.float32)).astype(a.dtype)
        acc = (acc.astype(np.float32) + p.astype(np.float32)).astype(a.dtype)
    return acc


def cases(n: int, rows: int) -> list[tuple[str, str, dict[str, np.ndarray], float]]:
    """(name, program, inputs, flops or bytes) per kernel."""
    rng = np.random.default_rng(0)
    out = []
    for dtype, t in DTYPES.items():
        values = {"input0": rng.uniform(-1, 1, (n, n)).astype(t), "input1": rng.uniform(-1, 1, (n, n)).astype(t)}
        out.append((f"MatMul {n}^3 {dtype}", MATMUL, values, 2.0 * n**3))
    out.append((f"ReduceSum {rows}x{rows} float16", ROWSUM,
                {"input0": rng.uniform(-1, 1, (rows, rows)).astype(np.float16)}, 2.0 * rows * rows))  # fmt: skip
    return out


def check(name: str, values: dict[str, np.ndarray], got: np.ndarray) -> None:
    if name.startswith("MatMul"):
        want = per_op_matmul(values["input0"], values["input1"])
        assert np.array_equal(got.view(np.uint16), want.view(np.uint16)), f"{name}: not NumPy's bits"
        return
    x = values["input0"].astype(np.float64)
    bound = (x.shape[1] + 1) * 2.0**-11 * np.abs(x).sum(axis=1)
    assert np.all(np.abs(got.astype(np.float64) - x.sum(axis=1)) <= bound), f"{name}: past its rounding bound"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--targets", default="opencl,sycl,hlsl")
    parser.add_argument("--n", type=int, default=512)
    parser.add_argument("--rows", type=int, default=1024)
    args = parser.parse_args()
    print(f"load average {os.getloadavg()[0]:.2f} {os.getloadavg()[1]:.2f}")
    print("| target | kernel | default mapping ms | default ms | rate (default) | speedup |")
    print("|---|---|---|---|---|---|")
    for target in args.targets.split(","):
        for name, program, values, work in cases(args.n, args.rows):
            shapes = {k: {"dtype": str(v.dtype), "shape": list(v.shape)} for k, v in values.items()}
            kernels = {}
            for variant, schedule in (("mapping", ScheduleChoice.NONE), ("default", "default")):
                comp = Compilation(program, f"<{name}>", shapes, None, target, schedule)
                comp.run_until("source")
                kernel = comp.kernel()
                check(name, values, kernel(**values)["output0"])
                kernels[variant] = kernel
            times: dict[str, list[float]] = {v: [] for v in kernels}
            for r in range(args.rounds):
                for variant in list(kernels) if r % 2 == 0 else list(kernels)[::-1]:
                    start = time.perf_counter()
                    for _ in range(3):
                        kernels[variant](**values)
                    times[variant].append((time.perf_counter() - start) / 3)
            base, new = statistics.median(times["mapping"]), statistics.median(times["default"])
            unit = "GFLOP/s" if name.startswith("MatMul") else "GB/s"
            rate = work / new / 1e9 if unit == "GFLOP/s" else values["input0"].nbytes / new / 1e9
            print(f"| {target} | {name} | {base * 1e3:.2f} | {new * 1e3:.2f} | {rate:.1f} {unit} | {base / new:.2f}x |", flush=True)
    print(f"load average {os.getloadavg()[0]:.2f} {os.getloadavg()[1]:.2f}")


if __name__ == "__main__":
    main()
