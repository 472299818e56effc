"""einc's C kernels against NumPy (OpenBLAS for MatMul) in the same run.

    .venv/bin/python benchmarks/kernels_vs_numpy.py [--quick]

Reports median time, GFLOP/s or GB/s, and the ratio einc / NumPy (above 1: einc is slower).
Nothing is asserted: the numbers are for reading.
"""

from __future__ import annotations

import argparse
import platform
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

import einc  # noqa: E402
from common import measure, table  # noqa: E402


@dataclass(frozen=True)
class Case:
    name: str
    ir: str
    inputs: dict[str, tuple[int, ...]]
    numpy_fn: Callable[..., np.ndarray]
    flops: float  # 0 for memory-bound cases
    bytes_moved: float


def cases(quick: bool) -> list[Case]:
    n = 256 if quick else 1024
    conv = (4, 32, 34, 34, 64, 3) if quick else (8, 64, 58, 58, 128, 3)
    b, c, h, w, f, k = conv
    ho = h - k + 1
    rows, cols = (512, 1024) if quick else (4096, 1024)

    def conv_ref(input0: np.ndarray, input1: np.ndarray) -> np.ndarray:
        x, wt = input0, input1
        win = np.lib.stride_tricks.sliding_window_view(x, (k, k), axis=(2, 3))
        return np.einsum("nchwij,fcij->nfhw", win, wt, optimize=True)

    def softmax_ref(input0: np.ndarray) -> np.ndarray:
        x = input0
        e = np.exp(x - x.max(axis=1, keepdims=True))
        return e / e.sum(axis=1, keepdims=True)

    return [
        Case(
            f"MatMul {n}^3",
            "output0[N, M] +=! input0[N, K] * input1[K, M]",
            {"input0": (n, n), "input1": (n, n)},
            lambda input0, input1: input0 @ input1,
            2.0 * n**3,
            3 * 4 * n * n,
        ),
        Case(
            f"Conv2D {b}x{c}x{h}x{w} * {f}x{c}x{k}x{k}",
            "output0[N, F, HO, WO] +=! input0[N, C, HO + KH, WO + KW] * input1[F, C, KH, KW]"
            f" where HO in {ho}, WO in {ho}",
            {"input0": (b, c, h, w), "input1": (f, c, k, k)},
            conv_ref,
            2.0 * b * f * ho * ho * c * k * k,
            4 * (b * c * h * w + f * c * k * k + b * f * ho * ho),
        ),
        Case(
            f"Softmax {rows}x{cols}",
            "temp0[N] >=! input0[N, C]; temp1[N] +=! (input0[N, C] - temp0[N]).call(`exp`);"
            " output0[N, C] = (input0[N, C] - temp0[N]).call(`exp`) / temp1[N]",
            {"input0": (rows, cols)},
            softmax_ref,
            0.0,
            2 * 4 * rows * cols,
        ),
        Case(
            f"ReduceSum {rows}x{cols}",
            "output0[N] +=! input0[N, C]",
            {"input0": (rows, cols)},
            lambda input0: input0.sum(axis=1),
            0.0,
            4 * rows * cols,
        ),
    ]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--quick", action="store_true", help="small sizes (a smoke run)")
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    rng = np.random.default_rng()
    rows = []
    for case in cases(args.quick):
        arrays = {k: rng.uniform(-1, 1, s).astype(np.float32) for k, s in case.inputs.items()}
        input_dict = {k: {"dtype": "float32", "shape": list(s)} for k, s in case.inputs.items()}
        kernel = einc.compile(case.ir, input_dict, target="c")
        out = kernel(**arrays)
        result = next(iter(out.values()))
        expected = case.numpy_fn(**{k: v.astype(np.float64) for k, v in arrays.items()})
        err = float(np.max(np.abs(result - expected)) / max(1e-30, np.max(np.abs(expected))))
        t_einc = measure(lambda: kernel(**arrays), repeat=args.repeat)
        t_np = measure(lambda: case.numpy_fn(**arrays), repeat=args.repeat)
        if case.flops:
            rate = lambda t: f"{case.flops / t / 1e9:.2f} GFLOP/s"  # noqa: E731
        else:
            rate = lambda t: f"{case.bytes_moved / t / 1e9:.2f} GB/s"  # noqa: E731
        rows.append(
            [
                case.name,
                f"{t_einc.median_s * 1e3:.3f} ms",
                rate(t_einc.median_s),
                f"{t_np.median_s * 1e3:.3f} ms",
                rate(t_np.median_s),
                f"{t_einc.median_s / t_np.median_s:.2f}",
                f"{err:.1e}",
            ]
        )
        print(f"done: {case.name}", file=sys.stderr)
    print(f"# einc C kernels vs NumPy {np.__version__} ({platform.processor() or platform.machine()})")
    print(
        table(
            rows,
            ["case", "einc", "einc rate", "NumPy", "NumPy rate", "einc/NumPy time", "max rel err"],
        )
    )


if __name__ == "__main__":
    main()
