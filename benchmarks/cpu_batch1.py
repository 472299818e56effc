"""CPU operators (batch 1, and a few batched contractions): einc's default C schedule before and after a change, and PyTorch
(oneDNN), timed interleaved in one process.

    env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE OMP_NUM_THREADS=2 \\
        PYTHONPATH=. .venv/bin/python benchmarks/cpu_batch1.py --baseline DIR [--repeat 9] [--clock cpu] [NAME...]

`--baseline DIR` is another einc tree (e.g. `git archive main | tar -x -C DIR`): this script
runs itself there (`--emit-sources`, PYTHONPATH=DIR) to get that tree's C source of each
operator under the default schedule. Both sources are built and loaded here with today's
signature, checked against a NumPy float64 reference on fresh random inputs (as is torch),
then torch, before and after are timed in rotating order `--repeat` times (each sample
loops one kernel for ~0.1 s); the table gives the medians, GFLOP/s (2 x multiply-adds),
`after/before` (above 1: the change is faster) and `einc/torch` (torch's time over einc's:
above 1, einc is faster) and `after/peak` (the fraction of the FMA peak that
benchmarks/machine.py measures with as many threads). Without `--baseline` only today's einc and torch are timed.
OMP_NUM_THREADS (default 2) sets einc's OpenMP threads and torch's intra-op threads. The
machine may be shared: only ratios of one run mean much. `--clock cpu` times with the
process's CPU time instead of the wall clock (with OMP_NUM_THREADS=1, time another process
took the core away is not counted, as the FMA peak's own clock; with more threads it also
counts the threads' spinning).
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

import numpy as np

PAD_CONV = (
    "output0[N, F, HO, WO] +=! (input0[N, C, HO + KH - {p}, WO + KW - {p}].when("
    "[HO + KH - {p} >= 0, HO + KH - {p} < {h}, WO + KW - {p} >= 0, WO + KW - {p} < {w}], 0.0)"
    " * input1[F, C, KH, KW]) where HO in {h}, WO in {w}"
)
DEPTHWISE = (
    "output0[N, C, HO, WO] +=! (input0[N, C, HO + KH - 1, WO + KW - 1].when("
    "[HO + KH - 1 >= 0, HO + KH - 1 < {h}, WO + KW - 1 >= 0, WO + KW - 1 < {w}], 0.0)"
    " * input1[C, KH, KW]) where HO in {h}, WO in {w}"
)
GROUPED = (
    "output0[N, F, HO, WO] +=! (input0[N, F // {g} * {g} + C, HO + KH - 1, WO + KW - 1].when("
    "[HO + KH - 1 >= 0, HO + KH - 1 < {h}, WO + KW - 1 >= 0, WO + KW - 1 < {w}], 0.0)"
    " * input1[F, C, KH, KW]) where HO in {h}, WO in {w}"
)  # channels per group {g} (as many in as out): the output channel's group is F // {g}
GROUPED_NHWC = (
    "output0[N, HO, WO, F] +=! (input0[N, HO + KH - 1, WO + KW - 1, F // {g} * {g} + C].when("
    "[HO + KH - 1 >= 0, HO + KH - 1 < {h}, WO + KW - 1 >= 0, WO + KW - 1 < {w}], 0.0)"
    " * input1[KH, KW, C, F]) where HO in {h}, WO in {w}"
)  # channels last (Ansor's layout): the vector loop runs over F, which the input index divides
TRANSPOSED_CONV = (
    "output0[N, F, HO, WO] +=! (input0[N, C, (HO + {p} - KH) // {s}, (WO + {p} - KW) // {s}] * input1[C, F, KH, KW]).when(["
    "(HO + {p} - KH) % {s} == 0, (WO + {p} - KW) % {s} == 0, (HO + {p} - KH) // {s} >= 0, (HO + {p} - KH) // {s} < {h}, "
    "(WO + {p} - KW) // {s} >= 0, (WO + {p} - KW) // {s} < {w}]) where HO in {ho}, WO in {wo}"
)
CONV1X1 = "output0[N, F, H, W] +=! input0[N, C, H, W] * input1[F, C]"
BMM = "output0[B, N, M] +=! input0[B, N, K] * input1[B, K, M]"
MATMUL = "output0[N, M] +=! input0[N, K] * input1[K, M]"
VALID_CONV = "output0[N, F, HO, WO] +=! input0[N, C, HO + KH, WO + KW] * input1[F, C, KH, KW] where HO in {h}, WO in {w}"
PAD_CONV3D = (
    "output0[N, F, DO, HO, WO] +=! (input0[N, C, DO + KD - 1, HO + KH - 1, WO + KW - 1].when("
    "[DO + KD - 1 >= 0, DO + KD - 1 < {d}, HO + KH - 1 >= 0, HO + KH - 1 < {h}, WO + KW - 1 >= 0, WO + KW - 1 < {w}], 0.0)"
    " * input1[F, C, KD, KH, KW]) where DO in {d}, HO in {h}, WO in {w}"
)


def f32(*shape: int) -> dict[str, Any]:
    return {"dtype": "float32", "shape": list(shape)}


@dataclass(frozen=True)
class Op:
    name: str
    ir: str
    inputs: dict[str, Any]
    flops: float
    numpy: Callable[[dict[str, np.ndarray]], np.ndarray]  # float64 reference
    torch: Callable[[Any, dict[str, Any]], Any]  # (torch module, tensors) -> output


def _conv_ref(a: dict[str, np.ndarray], pad: int) -> np.ndarray:
    x, w = a["input0"], a["input1"]
    x = np.pad(x, ((0, 0), (0, 0), (pad, pad), (pad, pad)))
    win = np.lib.stride_tricks.sliding_window_view(x, w.shape[2:], axis=(2, 3))  # N C HO WO KH KW
    return np.einsum("nchwij,fcij->nfhw", win, w, optimize=True)


def _conv3d_ref(a: dict[str, np.ndarray], pad: int) -> np.ndarray:
    x, w = a["input0"], a["input1"]
    x = np.pad(x, ((0, 0), (0, 0), (pad, pad), (pad, pad), (pad, pad)))
    win = np.lib.stride_tricks.sliding_window_view(x, w.shape[2:], axis=(2, 3, 4))  # N C DO HO WO KD KH KW
    return np.einsum("ncdhwijk,fcijk->nfdhw", win, w, optimize=True)


def _depthwise_ref(a: dict[str, np.ndarray]) -> np.ndarray:
    x = np.pad(a["input0"], ((0, 0), (0, 0), (1, 1), (1, 1)))
    win = np.lib.stride_tricks.sliding_window_view(x, (3, 3), axis=(2, 3))
    return np.einsum("nchwij,cij->nchw", win, a["input1"], optimize=True)


def _grouped_ref(a: dict[str, np.ndarray], groups: int) -> np.ndarray:
    x, w = np.pad(a["input0"], ((0, 0), (0, 0), (1, 1), (1, 1))), a["input1"]
    win = np.lib.stride_tricks.sliding_window_view(x, (3, 3), axis=(2, 3))  # N C HO WO KH KW
    n, c = win.shape[:2]
    win = win.reshape(n, groups, c // groups, *win.shape[2:])
    wg = w.reshape(groups, w.shape[0] // groups, *w.shape[1:])
    out = np.einsum("ngchwij,gfcij->ngfhw", win, wg, optimize=True)
    return out.reshape(n, w.shape[0], *out.shape[3:])
def _transposed_ref(a: dict[str, np.ndarray], stride: int, pad: int) -> np.ndarray:
    x, w = a["input0"], a["input1"]  # N C H W, C F KH KW
    n, _, h, wd = x.shape
    f, kh, kw = w.shape[1:]
    full = np.zeros((n, f, (h - 1) * stride + kh, (wd - 1) * stride + kw))
    for i in range(kh):
        for j in range(kw):
            full[:, :, i:i + (h - 1) * stride + 1:stride, j:j + (wd - 1) * stride + 1:stride] += np.einsum(
                "nchw,cf->nfhw", x, w[:, :, i, j], optimize=True)
    return full[:, :, pad:pad + (h - 1) * stride + kh - 2 * pad, pad:pad + (wd - 1) * stride + kw - 2 * pad]


def ops() -> list[Op]:
    return [
        Op("conv2d 3x3 pad 1, 1x64x56x56, 64 filters", PAD_CONV.format(p=1, h=56, w=56),
           {"input0": f32(1, 64, 56, 56), "input1": f32(64, 64, 3, 3)}, 2 * 64 * 64 * 9 * 56 * 56,
           lambda a: _conv_ref(a, 1), lambda t, x: t.nn.functional.conv2d(x["input0"], x["input1"], padding=1)),
        Op("conv2d 3x3 pad 1, 1x256x14x14, 256 filters", PAD_CONV.format(p=1, h=14, w=14),
           {"input0": f32(1, 256, 14, 14), "input1": f32(256, 256, 3, 3)}, 2 * 256 * 256 * 9 * 14 * 14,
           lambda a: _conv_ref(a, 1), lambda t, x: t.nn.functional.conv2d(x["input0"], x["input1"], padding=1)),
        Op("depthwise 3x3 pad 1, 1x32x112x112", DEPTHWISE.format(h=112, w=112),
           {"input0": f32(1, 32, 112, 112), "input1": f32(32, 3, 3)}, 2 * 32 * 9 * 112 * 112, _depthwise_ref,
           lambda t, x: t.nn.functional.conv2d(x["input0"], x["input1"][:, None], padding=1, groups=32)),
        Op("grouped conv2d 3x3 pad 1, 1x64x56x56, 4 groups", GROUPED.format(g=16, h=56, w=56),
           {"input0": f32(1, 64, 56, 56), "input1": f32(64, 16, 3, 3)}, 2 * 64 * 16 * 9 * 56 * 56,
           lambda a: _grouped_ref(a, 4),
           lambda t, x: t.nn.functional.conv2d(x["input0"], x["input1"], padding=1, groups=4)),
        Op("grouped conv2d 3x3 pad 1, 1x56x56x64 NHWC, 4 groups", GROUPED_NHWC.format(g=16, h=56, w=56),
           {"input0": f32(1, 56, 56, 64), "input1": f32(3, 3, 16, 64)}, 2 * 64 * 16 * 9 * 56 * 56,
           lambda a: _grouped_ref({"input0": a["input0"].transpose(0, 3, 1, 2),
                                   "input1": a["input1"].transpose(3, 2, 0, 1)}, 4).transpose(0, 2, 3, 1),
           lambda t, x: t.nn.functional.conv2d(x["input0"].permute(0, 3, 1, 2), x["input1"].permute(3, 2, 0, 1),
                                               padding=1, groups=4).permute(0, 2, 3, 1)),
        Op("transposed conv 4x4 stride 2 pad 1, 1x128x28x28, 64 filters",
           TRANSPOSED_CONV.format(p=1, s=2, h=28, w=28, ho=56, wo=56),
           {"input0": f32(1, 128, 28, 28), "input1": f32(128, 64, 4, 4)}, 2 * 128 * 64 * 16 * 28 * 28,
           lambda a: _transposed_ref(a, 2, 1),
           lambda t, x: t.nn.functional.conv_transpose2d(x["input0"], x["input1"], stride=2, padding=1)),
        Op("conv2d 1x1, 1x256x28x28, 128 filters", CONV1X1,
           {"input0": f32(1, 256, 28, 28), "input1": f32(128, 256)}, 2 * 128 * 256 * 28 * 28,
           lambda a: np.einsum("nchw,fc->nfhw", a["input0"], a["input1"], optimize=True),
           lambda t, x: t.nn.functional.conv2d(x["input0"], x["input1"][:, :, None, None])),
        Op("batch matmul 1x512x512x512", BMM,
           {"input0": f32(1, 512, 512), "input1": f32(1, 512, 512)}, 2 * 512**3,
           lambda a: a["input0"] @ a["input1"], lambda t, x: t.bmm(x["input0"], x["input1"])),
        Op("matmul 512x32x512 (K 32)", MATMUL,
           {"input0": f32(512, 32), "input1": f32(32, 512)}, 2 * 512 * 32 * 512,
           lambda a: a["input0"] @ a["input1"], lambda t, x: t.mm(x["input0"], x["input1"])),
        Op("batch matmul 16x128x32x128", BMM,
           {"input0": f32(16, 128, 32), "input1": f32(16, 32, 128)}, 2 * 16 * 128 * 32 * 128,
           lambda a: a["input0"] @ a["input1"], lambda t, x: t.bmm(x["input0"], x["input1"])),
        Op("conv3d 3x3x3 pad 1, 1x32x8x28x28, 32 filters", PAD_CONV3D.format(d=8, h=28, w=28),
           {"input0": f32(1, 32, 8, 28, 28), "input1": f32(32, 32, 3, 3, 3)}, 2 * 32 * 32 * 27 * 8 * 28 * 28,
           lambda a: _conv3d_ref(a, 1), lambda t, x: t.nn.functional.conv3d(x["input0"], x["input1"], padding=1)),
        Op("conv2d 3x3 pad 1, 1x512x7x7, 512 filters", PAD_CONV.format(p=1, h=7, w=7),
           {"input0": f32(1, 512, 7, 7), "input1": f32(512, 512, 3, 3)}, 2 * 512 * 512 * 9 * 7 * 7,
           lambda a: _conv_ref(a, 1), lambda t, x: t.nn.functional.conv2d(x["input0"], x["input1"], padding=1)),
        Op("conv2d 7x7 pad 3, 1x32x56x56, 64 filters", PAD_CONV.format(p=3, h=56, w=56),
           {"input0": f32(1, 32, 56, 56), "input1": f32(64, 32, 7, 7)}, 2 * 64 * 32 * 49 * 56 * 56,
           lambda a: _conv_ref(a, 3), lambda t, x: t.nn.functional.conv2d(x["input0"], x["input1"], padding=3)),
        Op("conv2d 3x3 valid, 16x64x32x32, 256 filters", VALID_CONV.format(h=30, w=30),
           {"input0": f32(16, 64, 32, 32), "input1": f32(256, 64, 3, 3)}, 2 * 16 * 256 * 64 * 9 * 30 * 30,
           lambda a: _conv_ref(a, 0), lambda t, x: t.nn.functional.conv2d(x["input0"], x["input1"])),
    ]  # fmt: skip


def _sources(names: list[str]) -> dict[str, str]:
    from einc.compiler.driver import Compilation

    found = {}
    for op in ops():
        if names and not any(n.lower() in op.name.lower() for n in names):
            continue
        found[op.name] = Compilation(op.ir, input_dict=op.inputs, use_records=False).run_until("source")
    return found


CLOCK = {"wall": time.perf_counter, "cpu": time.process_time}
clock = CLOCK["wall"]


def _time(fn: Callable[[], object], runs: int) -> float:
    start = clock()
    for _ in range(runs):
        fn()
    return (clock() - start) / runs


def interleaved(calls: dict[str, Callable[[], object]], repeat: int, sample_s: float = 0.1) -> dict[str, float]:
    """Median seconds of each call, timed in rotating order `repeat` times (each sample loops
    one call for ~`sample_s` seconds), so that a drift of the machine hits every side alike."""
    runs = {side: max(1, int(sample_s / max(_time(call, 1), 1e-9))) for side, call in calls.items()}
    samples: dict[str, list[float]] = {side: [] for side in calls}
    order = list(calls)
    for r in range(repeat):
        for side in order[r % len(order):] + order[: r % len(order)]:
            samples[side].append(_time(calls[side], runs[side]))
    return {side: statistics.median(s) for side, s in samples.items()}


def main() -> None:
    global clock
    argv = sys.argv[1:]
    baseline, repeat, names, emit = None, 9, [], False
    k = 0
    while k < len(argv):
        if argv[k] == "--baseline":
            baseline, k = Path(argv[k + 1]), k + 2
        elif argv[k] == "--repeat":
            repeat, k = int(argv[k + 1]), k + 2
        elif argv[k] == "--clock":
            clock, k = CLOCK[argv[k + 1]], k + 2
        elif argv[k] == "--emit-sources":
            emit, k = True, k + 1
        else:
            names, k = [*names, argv[k]], k + 1
    if emit:
        json.dump(_sources(names), sys.stdout)
        return
    threads = int(os.environ.setdefault("OMP_NUM_THREADS", "2"))
    before: dict[str, str] = {}
    if baseline is not None:
        env = {**os.environ, "PYTHONPATH": str(baseline.resolve())}
        out = subprocess.run([sys.executable, __file__, "--emit-sources", *names], env=env, check=True,
                             capture_output=True, text=True, cwd=baseline).stdout  # fmt: skip
        before = json.loads(out)
    import torch

    from einc.compiler.driver import Compilation
    from einc.runtime.c import load_c_kernel
    from einc.runtime.signature import KernelSignature
    from einc.semantics.compare import max_error, tolerance

    torch.set_num_threads(threads)
    rng = np.random.default_rng()
    rows = []
    for op in ops():
        if names and not any(n.lower() in op.name.lower() for n in names):
            continue
        comp = Compilation(op.ir, input_dict=op.inputs, use_records=False)
        source = comp.run_until("source")
        signature = KernelSignature.from_module(comp.results["target"])
        kernels = {"after": load_c_kernel(source, signature)}
        if op.name in before:
            kernels["before"] = load_c_kernel(before[op.name], signature)
        arrays = {name: rng.uniform(-1, 1, v["shape"]).astype(np.float32) for name, v in op.inputs.items()}
        want = op.numpy({name: a.astype(np.float64) for name, a in arrays.items()})
        tensors = {name: torch.from_numpy(a) for name, a in arrays.items()}
        outs = {"output0": np.empty(want.shape, np.float32)}
        calls: dict[str, Callable[[], object]] = {"torch": lambda: op.torch(torch, tensors)}  # noqa: B023
        for side, kernel in kernels.items():
            calls[side] = lambda kernel=kernel: kernel.run(arrays, outs)  # noqa: B023
        errors = {}
        with torch.inference_mode():
            for side, call in calls.items():
                outs["output0"].fill(np.nan)
                result = call()
                got = np.asarray(result) if side == "torch" else outs["output0"]
                errors[side] = max_error(got, want)
                if errors[side] > tolerance("float32"):
                    raise SystemExit(f"{op.name}: {side} is wrong (error {errors[side]:.2e})")
            median = interleaved(calls, repeat)
        rows.append((op, median, errors))
        cells = "  ".join(f"{side} {t * 1e3:8.3f} ms ({op.flops / t / 1e9:6.1f} GFLOP/s, err {errors[side]:.1e})"
                          for side, t in median.items())  # fmt: skip
        print(f"{op.name:44s} {cells}", file=sys.stderr, flush=True)
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from machine import fma_peak_gflops

    peak = fma_peak_gflops(threads)
    header = ["operator", "torch ms", "before ms", "after ms", "after GFLOP/s", "after/peak", "after/before",
              "einc/torch before", "einc/torch after"]  # fmt: skip
    print(f"OMP_NUM_THREADS={threads}, torch {torch.__version__} ({torch.get_num_threads()} threads), medians of {repeat} ({'CPU' if clock is time.process_time else 'wall'} time), "
          f"FMA peak {peak:.1f} GFLOP/s (benchmarks/machine.py, per CPU second)")
    print("| " + " | ".join(header) + " |")
    print("|" + "---|" * len(header))
    ratios: dict[str, list[float]] = {"after/before": [], "before": [], "after": []}
    for op, m, _ in rows:
        b = m.get("before")
        ratios["after"].append(m["torch"] / m["after"])
        cells = [op.name, f"{m['torch'] * 1e3:.3f}", f"{b * 1e3:.3f}" if b else "-", f"{m['after'] * 1e3:.3f}",
                 f"{op.flops / m['after'] / 1e9:.1f}", f"{op.flops / m['after'] / 1e9 / peak:.2f}", f"{b / m['after']:.2f}" if b else "-",
                 f"{m['torch'] / b:.2f}" if b else "-", f"{m['torch'] / m['after']:.2f}"]  # fmt: skip
        if b:
            ratios["after/before"].append(b / m["after"])
            ratios["before"].append(m["torch"] / b)
        print("| " + " | ".join(cells) + " |")

    def geo(xs: list[float]) -> str:
        return f"{float(np.exp(np.mean(np.log(xs)))):.2f}" if xs else "-"

    print(f"| geometric mean | | | | | | {geo(ratios['after/before'])} | {geo(ratios['before'])} | {geo(ratios['after'])} |")


if __name__ == "__main__":
    main()
