"""Device kernels: the default schedule, a hand schedule and a tuned one on every executable
device target, with the performance model's prediction beside each measurement, and the vendor
library (torch: cuBLAS / cuDNN, TF32 off) on an NVIDIA GPU.

    .venv/bin/python benchmarks/device_kernels.py [--targets opencl,sycl,hlsl,poplar]
        [--size host|gpu] [--trials 0] [--model h100] [--json FILE] [--markdown] [--facts FILE]

Kernels: MatMul, batch MatMul, Conv2D (3x3, valid), Softmax, LayerNorm and ReduceSum
(`--size gpu`: MatMul 4096^3, a float16 one (float32 accumulation; its hand schedule on the
tensor cores) and the sizes a GPU needs; `--size host`, the default: sizes the
CPU-backed devices here run in seconds). Each variant is checked against a NumPy float64
reference on fresh random inputs before it is timed. Hand schedules: the sets of
benchmarks/device_schedules.py (register-tiled matmuls and batch matmuls with and without
shared input tiles, cross-thread and private-accumulator row reductions for Softmax, LayerNorm
and ReduceSum; on Poplar, which refuses those, POPLAR_HANDS: the reductions unrolled, the
mapping left to the vertex split), each timed (`hand: NAME`); `--trials N` adds einc's tuner (N trials, a
temporary record database; where it keeps the default, the default is timed again as `tuned`,
and the finalists of its final rounds are timed as `finalist N: SKETCH`).

The variants of a kernel on a target are timed in `--rounds` interleaved rounds (each a
median of 5 calls; each round starts one variant later, so none is always timed first), and
each variant's time is the median of its rounds, so that a shared machine's load falls on all
of them alike. A summary follows the table: per target and
kernel the default, the best hand schedule and the tuned one, with their speeds relative to
the best hand schedule (above 1: faster than it).

Times: on CUDA, device arrays (torch CUDA tensors) are passed to the kernel, so a time is the
launch and the kernel, taken with CUDA events, as torch's is; on the other targets a call
is einc's host side as a user calls a kernel: HLSL and Poplar copy inputs in and outputs out;
OpenCL (PoCL) and SYCL pass the arrays to the kernels as they are (their runtimes' in-place
paths: the arrays here are 128-byte aligned, `einc.runtime.arrays.aligned_empty`, as einc
allocates its own); `--copies` also times each OpenCL variant with `$EINC_OPENCL_COPY=1`
(every array copied through device buffers) as `copied: VARIANT`, in the same rounds. NumPy's
time on the host is given for scale. `model` is `Kernel.model(DEVICE)` of the CUDA kernel of the same
program and schedule (NVRTC builds it; no GPU needed) - a prediction for that GPU, compared with
the measurement only where the run is on that GPU (`model/measured`). `model here` is the
model's prediction for the device actually measured: on CUDA the GPU there (a device of the
model's table, by its name), on OpenCL and SYCL this machine's CPU as that device, described
from measured facts (benchmarks/host_device.py), plus the host side of the call the time
includes; `measured/model` is the measured time over it (docs/PERFMODEL.md).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import measure, table  # noqa: E402
from device_schedules import (  # noqa: E402
    HAND_BATCH_MATMUL,
    HAND_LAYERNORM,
    HAND_MATMUL,
    HAND_ROWSUM,
    HAND_SOFTMAX,
    MATMUL,
    POPLAR_HANDS,
    script,
)

BMM = "output0[B, N, M] +=! input0[B, N, K] * input1[B, K, M]"
CONV = "output0[N, F, HO, WO] +=! input0[N, C, HO + KH, WO + KW] * input1[F, C, KH, KW] where HO in {ho}, WO in {wo}"
SOFTMAX = """temp0[N] >=! input0[N, C]
temp1[N] +=! (input0[N, C] - temp0[N]).call(`exp`)
output0[N, C] = (input0[N, C] - temp0[N]).call(`exp`) / temp1[N]"""
LAYERNORM = """mean[N] +=! input0[N, C] / {c}.0
var[N] +=! (input0[N, C] - mean[N]) * (input0[N, C] - mean[N]) / {c}.0
output0[N, C] = (input0[N, C] - mean[N]) * (var[N] + 1e-5).call(`rsqrt`) * gamma[C] + beta[C]"""
ROWSUM = "output0[N] +=! input0[N, C]"
HALF = "output0[N, M] +=! input0[N, K].cast(`float32`) * input1[K, M].cast(`float32`)"
# float16 inputs through the tensor cores (`--size gpu` only): one warp per 16 x 16 output tile,
# the whole K loop one tile op (mma.sync; benchmarks/device_predictions.py swaps in MFMA for HIP)
TENSORIZE = [
    '%n = transform.einc.match stmt "output0" axis "N" in %root',
    '%m = transform.einc.match stmt "output0" axis "M" in %root',
    "%no, %ni = transform.einc.tile %n by 16",
    "%mo, %mi = transform.einc.tile %m by 16",
    "%r:4 = transform.einc.reorder %no, %mo, %ni, %mi",
    'transform.einc.bind %r#0 to "block.y"',
    'transform.einc.bind %r#1 to "block.x"',
    '%lanes = transform.einc.tensorize %r#2 "mma.m16n8k16"',
]

def f32(*shape: int) -> dict[str, Any]:
    return {"dtype": "float32", "shape": list(shape)}


def f16(*shape: int) -> dict[str, Any]:
    return {"dtype": "float16", "shape": list(shape)}


@dataclass
class Case:
    name: str
    ir: str
    inputs: dict[str, Any]
    flops: float  # 0: a memory-bound kernel, reported in GB/s
    numpy: Callable[[dict[str, np.ndarray]], np.ndarray]  # float64 reference of output0
    torch: Callable[[Any, dict[str, Any]], Any] | None = None
    hands: dict[str, list[str]] = field(default_factory=dict[str, list[str]])  # hand schedules (script lines)

    def hands_on(self, target: str) -> dict[str, list[str]]:
        """The hand schedules timed on `target`: on Poplar its own set (POPLAR_HANDS, the
        device sets being refused there), else `hands`."""
        if target == "poplar":
            return next((h for prefix, h in POPLAR_HANDS.items() if self.name.split(" ")[0] == prefix), {})
        return self.hands


def _softmax(a: dict[str, np.ndarray]) -> np.ndarray:
    x = a["input0"].astype(np.float64)
    e = np.exp(x - x.max(axis=1, keepdims=True))
    return e / e.sum(axis=1, keepdims=True)


def _layernorm(a: dict[str, np.ndarray]) -> np.ndarray:
    x = a["input0"].astype(np.float64)
    mean = x.mean(axis=1, keepdims=True)
    var = ((x - mean) ** 2).mean(axis=1, keepdims=True)
    return (x - mean) / np.sqrt(var + 1e-5) * a["gamma"] + a["beta"]


def _conv(a: dict[str, np.ndarray]) -> np.ndarray:
    x, w = a["input0"].astype(np.float64), a["input1"].astype(np.float64)
    win = np.lib.stride_tricks.sliding_window_view(x, w.shape[2:], axis=(2, 3))  # N C HO WO KH KW
    return np.einsum("nchwij,fcij->nfhw", win, w, optimize=True)


def cases(size: str) -> list[Case]:
    gpu = size == "gpu"
    n = 4096 if gpu else 512
    b, bn, bk = (32, 512, 64) if gpu else (8, 128, 64)
    cn, cc, cf, hw = (16, 64, 256, 34) if gpu else (1, 64, 64, 30)
    rows, cols = (8192, 4096) if gpu else (1024, 1024)
    ho = hw - 2
    half = [Case(f"MatMul {n}^3 fp16", HALF, {"input0": f16(n, n), "input1": f16(n, n)}, 2.0 * n**3,
                 lambda a: a["input0"].astype(np.float64) @ a["input1"],
                 lambda t, x: t.matmul(x["input0"], x["input1"]), {"tensor cores": TENSORIZE})] if gpu else []  # fmt: skip
    return half + [
        Case(f"MatMul {n}^3", MATMUL, {"input0": f32(n, n), "input1": f32(n, n)}, 2.0 * n**3,
             lambda a: a["input0"].astype(np.float64) @ a["input1"],
             lambda t, x: t.matmul(x["input0"], x["input1"]), HAND_MATMUL),
        Case(f"BatchMatMul {b}x{bn}x{bn}x{bk}", BMM, {"input0": f32(b, bn, bk), "input1": f32(b, bk, bn)},
             2.0 * b * bn * bn * bk, lambda a: a["input0"].astype(np.float64) @ a["input1"],
             lambda t, x: t.bmm(x["input0"], x["input1"]), HAND_BATCH_MATMUL),
        Case(f"Conv2D {cn}x{cc}x{hw}x{hw} 3x3 {cf}", CONV.format(ho=ho, wo=ho),
             {"input0": f32(cn, cc, hw, hw), "input1": f32(cf, cc, 3, 3)}, 2.0 * cn * cf * cc * 9 * ho * ho,
             _conv, lambda t, x: t.nn.functional.conv2d(x["input0"], x["input1"])),
        Case(f"Softmax {rows}x{cols}", SOFTMAX, {"input0": f32(rows, cols)}, 0.0, _softmax,
             lambda t, x: t.softmax(x["input0"], dim=1), HAND_SOFTMAX),
        Case(f"LayerNorm {rows}x{cols}", LAYERNORM.format(c=cols),
             {"input0": f32(rows, cols), "gamma": f32(cols), "beta": f32(cols)}, 0.0, _layernorm,
             lambda t, x: t.nn.functional.layer_norm(x["input0"], (cols,), x["gamma"], x["beta"], 1e-5),
             HAND_LAYERNORM),
        Case(f"ReduceSum {rows}x{cols}", ROWSUM, {"input0": f32(rows, cols)}, 0.0,
             lambda a: a["input0"].astype(np.float64).sum(axis=1), lambda t, x: x["input0"].sum(dim=1),
             HAND_ROWSUM),
    ]  # fmt: skip


@dataclass
class Row:
    target: str
    kernel: str
    variant: str
    ms: float | None = None
    rate: str = ""
    vs: str = ""  # torch's (CUDA) or NumPy's (host) time over this one's
    error: float | None = None
    model_ms: float | None = None
    model_bound: str = ""
    here_ms: float | None = None  # the model's prediction for the device measured (see predict_here)
    here_bound: str = ""
    note: str = ""
    extra: dict[str, Any] = field(default_factory=dict)


def predict(case: Case, schedule: str | None, device: str) -> tuple[float | None, str]:
    """The model's time (ms) and bound for the CUDA kernel of `case` under `schedule`."""
    import einc

    try:
        kernel = einc.compile(case.ir, case.inputs, target="cuda", schedule=schedule or "default", use_records=False)
        report = kernel.model(device)
    except einc.EincError as err:
        return None, f"model: {str(err).splitlines()[0][:60]}"
    return report.time_s * 1e3, str(report.bound)


def predict_here(case: Case, schedule: str | None, target: str, torch: Any) -> tuple[float | None, str]:
    """The model's time (ms) and bound for the device `target` ran on here: the GPU (where the
    model's table knows it) for CUDA, this machine's CPU as the OpenCL / SYCL device
    (benchmarks/host_device.py, with the host side of a call) for those; None elsewhere."""
    import einc
    from einc.perfmodel.devices import device_for

    try:
        kernel = einc.compile(case.ir, case.inputs, target=target, schedule=schedule or "default", use_records=False)
        if target == "cuda":
            key = device_for(torch.cuda.get_device_name()) if torch is not None else None
            if key is None:
                return None, "GPU not in the model's table"
            report = kernel.model(key)
            return report.time_s * 1e3, str(report.bound)
        if target in ("opencl", "sycl"):
            from host_device import predict as host_predict

            seconds, bound, _ = host_predict(kernel, target)
            return seconds * 1e3, bound
    except einc.EincError as err:
        return None, f"model: {str(err).splitlines()[0][:60]}"
    return None, ""


def tune_schedule(case: Case, target: str, trials: int, db: str) -> list[tuple[str, str | None]]:
    """The tuner's best schedule for `case` on `target` (None: it kept the default) and, where
    its final decision kept the default (einc.tune.decide: on a loaded machine a finalist must
    beat the default by more than the load explains), also its finalists (the fastest trials
    it measured against the default in its final rounds) as `finalist: SKETCH`, timed here in
    the same rounds as the rest: what the decision chooses among on a quiet machine."""
    from einc.tune.tuner import tune
    from einc.tune.types import TuneTask

    task = TuneTask(case.ir, target=target, input_dict=case.inputs)
    result = tune(task, trials=trials, db=db, progress=True)
    if result.best is not None and not result.kept_default:
        return [(f"tuned ({result.trials} trials)", result.best.candidate.schedule)]
    found: list[tuple[str, str | None]] = [(f"tuned ({result.trials} trials): kept the default", None)]
    default = result.finals[0].candidate.point if result.finals else None
    seen = set()
    for final in result.finals:
        point = final.candidate.point
        if point != default and point not in seen:  # the default sketch's other points too (its neighbours)
            seen.add(point)
            found.append((f"finalist {len(seen)}: {point.describe()}", final.candidate.schedule))
    return found


def time_host(kernel: Any, arrays: dict[str, np.ndarray]) -> float:
    from einc.runtime.arrays import aligned_empty

    outs = {o.name: aligned_empty(o.shape, o.dtype) for o in kernel.outputs}
    return measure(lambda: kernel.run(arrays, outs), repeat=5, min_time=0.2).median_s


def copied(timer: Callable[[], float]) -> Callable[[], float]:
    """`timer` with the OpenCL runtime's copy path forced (`$EINC_OPENCL_COPY=1`)."""
    from einc.runtime.opencl import COPY_ENV

    def timed() -> float:
        os.environ[COPY_ENV] = "1"
        try:
            return timer()
        finally:
            del os.environ[COPY_ENV]

    return timed


def aligned_random(rng: np.random.Generator, shape: list[int], dtype: str) -> np.ndarray:
    """Uniform random numbers in [-1, 1) in a 128-byte aligned array (as einc allocates)."""
    from einc.runtime.arrays import aligned_empty

    array = aligned_empty(shape, dtype)
    array[...] = rng.uniform(-1, 1, shape)
    return array


def time_cuda(fn: Callable[[], object], torch: Any, reps: int = 20) -> float:
    fn()
    torch.cuda.synchronize()
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    best = float("inf")
    for _ in range(5):
        start.record()
        for _ in range(reps):
            fn()
        end.record()
        torch.cuda.synchronize()
        best = min(best, start.elapsed_time(end) / 1e3 / reps)
    return best


def prepare(case: Case, target: str, variant: str, schedule: str | None, torch: Any) -> tuple[Row, Callable[[], float] | None]:
    """The row of one variant, checked against NumPy, and a function timing one round of it
    (None where it was refused, cannot run, or computed wrong numbers)."""
    import einc

    row = Row(target, case.name, variant)
    rng = np.random.default_rng()
    arrays = {k: aligned_random(rng, v["shape"], v["dtype"]) for k, v in case.inputs.items()}
    try:
        kernel = einc.compile(case.ir, case.inputs, target=target, schedule=schedule or "default", use_records=False)
    except einc.EincError as err:
        row.note = "refused: " + str(err).splitlines()[0][:80]
        return row, None
    if not kernel.available:
        row.note = f"not run: {kernel.unavailable}"
        return row, None
    out = kernel(**arrays)["output0"]
    want = case.numpy(arrays)
    row.error = float(np.max(np.abs(out - want)) / max(1.0, float(np.max(np.abs(want)))))
    if row.error > 1e-3:
        row.note = "WRONG: not timed"
        return row, None
    row.extra["nbytes"] = sum(a.nbytes for a in arrays.values()) + out.nbytes
    if target == "cuda":
        dev = {k: torch.from_numpy(v).cuda() for k, v in arrays.items()}
        outs = {o.name: torch.empty(tuple(o.shape), dtype=torch.float32, device="cuda") for o in kernel.outputs}
        if case.torch is not None:
            t_ref = time_cuda(lambda: case.torch(torch, dev), torch)  # type: ignore[misc]
            row.extra["ref_s"] = t_ref
            row.extra["torch_ms"] = t_ref * 1e3
        return row, lambda: time_cuda(lambda: kernel.run(dev, outs), torch)
    row.extra["ref_s"] = measure(lambda: case.numpy(arrays), repeat=3, min_time=0.1).median_s
    return row, lambda: time_host(kernel, arrays)


def finish(case: Case, row: Row, times: list[float]) -> Row:
    """`row` with the median of its rounds' times."""
    t = float(np.median(times))
    row.ms = t * 1e3
    row.extra["rounds_ms"] = [x * 1e3 for x in times]
    row.vs = f"{row.extra.pop('ref_s') / t:.2f}"
    row.rate = f"{case.flops / t / 1e9:.1f} GFLOP/s" if case.flops else f"{row.extra['nbytes'] / t / 1e9:.1f} GB/s"
    return row


def summary(rows: list[Row]) -> list[list[str]]:
    """Per target and kernel: the default, the best hand schedule and the tuned one, their
    times and speeds relative to the best hand schedule."""
    out = []
    for key in dict.fromkeys((r.target, r.kernel) for r in rows):
        mine = [r for r in rows if (r.target, r.kernel) == key and r.ms is not None]
        hands = [r for r in mine if r.variant.startswith("hand")]
        default = next((r for r in mine if r.variant == "default"), None)
        tuned = next((r for r in mine if r.variant.startswith("tuned")), None)
        finalists = [r for r in mine if r.variant.startswith("finalist")]
        fastest = min(finalists, key=lambda r: r.ms or 0.0) if finalists else None
        best = min(hands, key=lambda r: r.ms or 0.0) if hands else None

        def ms(r: Row | None) -> str:
            return f"{r.ms:.3f}" if r is not None and r.ms is not None else ""

        def ratio(r: Row | None) -> str:
            return f"{best.ms / r.ms:.2f}" if best and best.ms and r is not None and r.ms else ""

        out.append([*key, ms(default), best.variant.removeprefix("hand: ") if best else "", ms(best), ms(tuned),
                    ms(fastest), ratio(default), ratio(tuned), ratio(fastest)])  # fmt: skip
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--targets", default="opencl,sycl,hlsl,poplar")
    parser.add_argument("--size", choices=["host", "gpu"], default="host")
    parser.add_argument("--trials", type=int, default=0, help="tune each kernel with N trials (0: no tuning)")
    parser.add_argument("--model", default="h100", help="the device the model predicts for (CUDA kernels)")
    parser.add_argument("--only", default="", help="comma-separated kernel name prefixes")
    parser.add_argument("--rounds", type=int, default=3, help="interleaved timing rounds per variant (median)")
    parser.add_argument("--hands", default="", help="comma-separated hand schedule name prefixes (default: all)")
    parser.add_argument("--copies", action="store_true",
                        help="OpenCL: also time each variant with every array copied ($EINC_OPENCL_COPY=1)")
    parser.add_argument("--json", help="write the rows here")
    parser.add_argument("--markdown", action="store_true", help="print only the Markdown table")
    parser.add_argument("--facts", metavar="FACTS.json",
                        help="the model's OpenCL/SYCL facts from this file where it holds them, else measured and added "
                             "(benchmarks/host_device.py --facts)")
    args = parser.parse_args()
    if args.facts:
        import host_device

        host_device.FACTS_FILE.append(args.facts)
    for var in ("OPENBLAS_CORETYPE", "OPENBLAS_L2_SIZE"):
        os.environ.pop(var, None)  # NumPy's own kernels, not a pinned older core type
    torch = None
    targets = args.targets.split(",")
    if "cuda" in targets:
        import torch as torch_module

        torch = torch_module
        torch.backends.cuda.matmul.allow_tf32 = False
        torch.backends.cudnn.allow_tf32 = False
    selected = [c for c in cases(args.size) if not args.only or any(c.name.startswith(p) for p in args.only.split(","))]
    rows: list[Row] = []
    with tempfile.TemporaryDirectory() as scratch:
        db = str(Path(scratch) / "tuning.db")
        for case in selected:
            for target in targets:
                variants: list[tuple[str, str | None]] = [("default", None)]
                variants += [(f"hand: {name}", script(lines)) for name, lines in case.hands_on(target).items()
                             if not args.hands or any(name.startswith(p) for p in args.hands.split(","))]  # fmt: skip
                tuned: list[tuple[str, str | None]] = []
                if args.trials:
                    try:
                        tuned = tune_schedule(case, target, args.trials, db)  # None: the default, timed again
                    except Exception as err:  # noqa: BLE001 - reported in the table
                        rows.append(Row(target, case.name, "tuned", note=f"tuning failed: {err}"[:90]))
                prepared = [prepare(case, target, variant, schedule, torch) for variant, schedule in [*variants, *tuned]]
                if args.copies and target == "opencl":  # the copy path's twins, in the same rounds
                    twins = [(Row(target, case.name, f"copied: {row.variant}", extra={"ref_s": row.extra.get("ref_s"),
                              "nbytes": row.extra.get("nbytes")}), copied(timer) if timer is not None else None)
                             for row, timer in prepared]  # fmt: skip
                    tuned = [*tuned, *[(row.variant, None) for row, _ in twins]]
                    prepared += twins
                times: list[list[float]] = [[] for _ in prepared]
                for r in range(max(args.rounds, 1)):
                    for k in range(len(prepared)):  # a rotating order: no variant always first
                        i = (r + k) % len(prepared)
                        if (timer := prepared[i][1]) is not None:
                            times[i].append(timer())
                for (row, timer), got, (_variant, schedule) in zip(prepared, times, [*variants, *tuned]):
                    if timer is not None:
                        finish(case, row, got)
                    if not row.variant.startswith("hand") and schedule is not None:
                        row.extra["schedule"] = schedule  # the tuned script (--json)
                    if row.variant.startswith("copied: "):
                        rows.append(row)
                        if not args.markdown:
                            print(" | ".join(str(v) for v in asdict(row).values()), flush=True)
                        continue
                    row.model_ms, row.model_bound = predict(case, schedule, args.model) if args.model else (None, "")
                    if row.ms is not None:
                        row.here_ms, row.here_bound = predict_here(case, schedule, target, torch)
                    rows.append(row)
                    if not args.markdown:
                        print(" | ".join(str(v) for v in asdict(row).values()), flush=True)
    header = ["target", "kernel", "schedule", "ms", "rate", "vs torch (cuda) / NumPy", "max rel err",
              f"model {args.model} ms", "bound", "model here ms", "bound here", "measured/model", "note"]  # fmt: skip
    print(table([[r.target, r.kernel, r.variant, f"{r.ms:.3f}" if r.ms is not None else "", r.rate, r.vs,
                  f"{r.error:.1e}" if r.error is not None else "",
                  f"{r.model_ms:.3f}" if r.model_ms is not None else "", r.model_bound,
                  f"{r.here_ms:.3f}" if r.here_ms is not None else "", r.here_bound,
                  f"{r.ms / r.here_ms:.2f}" if r.ms is not None and r.here_ms else "", r.note] for r in rows], header))  # fmt: skip
    within = [r.ms / r.here_ms for r in rows if r.ms is not None and r.here_ms]
    if within:
        inside = sum(1 / 2 <= x <= 2 for x in within)
        print(f"measured/model within 2x: {inside} of {len(within)} ({inside / len(within):.0%}); "
              f"load average at the end {os.getloadavg()[0]:.1f}")
    for target, facts in getattr(sys.modules.get("host_device"), "USED", {}).items():
        print(f"model here, {target}: {facts['name']}: {facts['sources']}")
    print()
    print(table(summary(rows), ["target", "kernel", "default ms", "best hand", "hand ms", "tuned ms", "best finalist ms",
                                "default ÷ hand (speed)", "tuned ÷ hand (speed)", "best finalist ÷ hand"]))  # fmt: skip
    if args.json:
        Path(args.json).write_text(json.dumps([asdict(r) for r in rows], indent=1))


if __name__ == "__main__":
    main()
