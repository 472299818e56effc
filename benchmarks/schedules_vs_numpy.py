"""Default-schedule C kernels against NumPy and the machine's ceilings, 1 and 2 threads, in the
same run (reported, not asserted).

    .venv/bin/python benchmarks/schedules_vs_numpy.py [--quick] [--best] [--json OUT]

Each thread count runs in a subprocess with OMP_NUM_THREADS / OPENBLAS_NUM_THREADS set before
anything starts (both read them once): it measures the FMA peak and the STREAM triad bandwidth
(benchmarks/machine.py), then times einc and NumPy side by side; the parent prints one table.
GFLOP/s for matmul-like kernels, GB/s (inputs read once + outputs written once) for the others,
each with its fraction of the peak or of the triad bandwidth; `ratio` is einc / NumPy. Times are
medians of 5 samples of >= 0.2 s; `--best`: the fastest of 25 samples of >= 10 ms (on a loaded
machine, the run least disturbed by other processes).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent


@dataclass(frozen=True)
class Bench:
    name: str
    ir: str
    inputs: dict
    numpy: str  # a lambda over the input arrays, as text (evaluated in the worker)
    flops: float = 0.0  # 0: memory-bound, report GB/s
    file: str = ""  # a `.ein` file under the repository (then `ir` is its text, `inputs` its header)

    def compile_args(self) -> tuple[str, dict | None, str]:
        """(source, input_dict, filename) for einc.compile / TuneTask."""
        if self.file:
            return (ROOT / self.file).read_text(), None, self.file
        return self.ir, self.inputs, "<string>"


def f32(*shape: int) -> dict:
    return {"dtype": "float32", "shape": list(shape)}


def benches(quick: bool) -> list[Bench]:
    n = 512 if quick else 1024
    return [
        Bench("MatMul %d^3" % n, "output0[N, M] +=! input0[N, K] * input1[K, M]",
              {"input0": f32(n, n), "input1": f32(n, n)}, "lambda a: a['input0'] @ a['input1']",
              2.0 * n**3),
        Bench("BatchMatMul 8x256^3", "output0[B, N, M] +=! input0[B, N, K] * input1[B, K, M]",
              {"input0": f32(8, 256, 256), "input1": f32(8, 256, 256)},
              "lambda a: a['input0'] @ a['input1']", 2.0 * 8 * 256**3),
        Bench("Conv2D 8x64x32x32 k3", "output0[N, F, HO, WO] +=! input0[N, C, HO + KH, WO + KW] "
              "* input1[F, C, KH, KW] where HO in 30, WO in 30",
              {"input0": f32(8, 64, 32, 32), "input1": f32(64, 64, 3, 3)},
              "lambda a: conv(a['input0'], a['input1'])", 2.0 * 8 * 64 * 64 * 30 * 30 * 9),
        Bench("Softmax 4096x1024",
              "temp0[N] >=! input0[N, C]; temp1[N] +=! (input0[N, C] - temp0[N]).call(`exp`); "
              "output0[N, C] = (input0[N, C] - temp0[N]).call(`exp`) / temp1[N]",
              {"input0": f32(4096, 1024)},
              "lambda a: softmax(a['input0'])"),
        Bench("LayerNorm 4096x1024", "", {"input0": f32(4096, 1024), "gamma": f32(1024),
              "beta": f32(1024)}, "lambda a: layernorm(a['input0'], a['gamma'], a['beta'])",
              file="examples/layernorm.ein"),
        Bench("ReduceSum 4096x4096", "output0[N] +=! input0[N, C]", {"input0": f32(4096, 4096)},
              "lambda a: a['input0'].sum(axis=1)"),
        Bench("Add 16M", "output0[N] = input0[N] + input1[N]",
              {"input0": f32(1 << 24), "input1": f32(1 << 24)},
              "lambda a: np.add(a['input0'], a['input1'])"),
    ]


def conv(x: np.ndarray, w: np.ndarray) -> np.ndarray:
    """NumPy's best plain form: im2col with sliding_window_view, then one tensordot (BLAS)."""
    win = np.lib.stride_tricks.sliding_window_view(x, (3, 3), axis=(2, 3))  # N C HO WO KH KW
    return np.tensordot(win, w, axes=([1, 4, 5], [1, 2, 3])).transpose(0, 3, 1, 2)


def softmax(x: np.ndarray) -> np.ndarray:
    e = np.exp(x - x.max(axis=1, keepdims=True))
    return e / e.sum(axis=1, keepdims=True)


def layernorm(x: np.ndarray, gamma: np.ndarray, beta: np.ndarray) -> np.ndarray:
    mean = x.mean(axis=1, keepdims=True)
    d = x - mean
    return d / np.sqrt((d * d).mean(axis=1, keepdims=True) + np.float32(1e-5)) * gamma + beta


BASELINES = {"np": np, "conv": conv, "softmax": softmax, "layernorm": layernorm}


def worker(quick: bool, best: bool) -> None:
    from common import compile_default, measure
    from machine import fma_peak_gflops, stream_bandwidth_gbs

    threads = int(os.environ["OMP_NUM_THREADS"])
    machine = {"peak": fma_peak_gflops(threads), "bandwidth": stream_bandwidth_gbs(threads)}
    rows = []
    rng = np.random.default_rng(0)
    for b in benches(quick):
        arrays = {k: rng.uniform(-1, 1, v["shape"]).astype(v["dtype"]) for k, v in b.inputs.items()}
        source, input_dict, filename = b.compile_args()
        kernel = compile_default(source, input_dict, filename)
        fn = eval(b.numpy, BASELINES)
        want = fn(arrays)
        outs = {o.name: np.empty(o.shape, o.dtype) for o in kernel.outputs}
        kernel.run(arrays, outs)
        got = outs["output0"]
        err = float(np.max(np.abs(got - want)) / max(1.0, float(np.max(np.abs(want)))))
        if best:
            t_einc = measure(lambda: kernel.run(arrays, outs), repeat=25, min_time=0.01).best_s
            t_np = measure(lambda: fn(arrays), repeat=25, min_time=0.01).best_s
        else:
            t_einc = measure(lambda: kernel.run(arrays, outs), repeat=5, min_time=0.2).median_s
            t_np = measure(lambda: fn(arrays), repeat=5, min_time=0.2).median_s
        nbytes = sum(a.nbytes for a in arrays.values()) + sum(o.nbytes for o in outs.values())
        rows.append({"name": b.name, "einc": t_einc, "numpy": t_np, "flops": b.flops,
                     "bytes": nbytes, "err": err})
    print(json.dumps({"machine": machine, "rows": rows}))


def main() -> None:
    quick, best = "--quick" in sys.argv, "--best" in sys.argv
    if "--worker" in sys.argv:
        worker(quick, best)
        return
    from common import table
    from machine import clock_ghz, cpu_model

    results = {}
    for threads in (1, 2):
        env = {**os.environ, "OMP_NUM_THREADS": str(threads), "OPENBLAS_NUM_THREADS": str(threads),
               "MKL_NUM_THREADS": str(threads)}
        args = [sys.executable, __file__, "--worker"] + (["--quick"] if quick else []) + (["--best"] if best else [])
        out = subprocess.run(args, env=env, capture_output=True, text=True, check=True)
        results[threads] = json.loads(out.stdout.strip().splitlines()[-1])
    ghz = clock_ghz()
    print(f"CPU: {cpu_model()}; clock under load " + (f"{ghz:.2f} GHz" if ghz else "unknown")
          + "; load average %.1f %.1f %.1f" % os.getloadavg())
    for threads, res in results.items():
        print(f"{threads}T: FMA peak {res['machine']['peak']:.1f} GFLOP/s, "
              f"STREAM triad {res['machine']['bandwidth']:.1f} GB/s")
    rows = []
    for k, r1 in enumerate(results[1]["rows"]):
        r2 = results[2]["rows"][k]
        unit = "GFLOP/s" if r1["flops"] else "GB/s"
        work = r1["flops"] or r1["bytes"]

        def rate(t: float, threads: int) -> str:
            ceiling = results[threads]["machine"]["peak" if r1["flops"] else "bandwidth"]
            return f"{work / t / 1e9:.1f} ({work / t / 1e9 / ceiling:.2f})"

        rows.append([r1["name"], unit, rate(r1["einc"], 1), rate(r1["numpy"], 1), f"{r1['numpy'] / r1['einc']:.2f}",
                     rate(r2["einc"], 2), rate(r2["numpy"], 2), f"{r2['numpy'] / r2['einc']:.2f}", f"{r1['err']:.1e}"])
    print("(rate (fraction of the FMA peak for GFLOP/s, of the triad bandwidth for GB/s))")
    print(table(rows, ["kernel", "unit", "einc 1T", "NumPy 1T", "ratio 1T", "einc 2T", "NumPy 2T",
                       "ratio 2T", "max rel err"]))
    if "--json" in sys.argv:
        Path(sys.argv[sys.argv.index("--json") + 1]).write_text(json.dumps(results, indent=1))


if __name__ == "__main__":
    main()
