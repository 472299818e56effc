"""Interleaved same-process A/B of `transform.einc.stream_stores` (non-temporal copy-out of
output tiles, issue 26): each operator's default CPU schedule against the same schedule with
every local output tile streamed (einc.schedule.policies.cpu.Choices(stream=True), the tuning
space's `policy.stream` sketch), and large copies (a transpose, an elementwise op) staged by
row with and without it.

    env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE OMP_NUM_THREADS=1 PYTHONPATH=$PWD \\
        .venv/bin/python benchmarks/stream_stores_ab.py [ROUNDS] [KEY:BATCH ...]

Both kernels of a pair are compiled as einc compiles kernels, checked against NumPy
(float64) and called through ctypes on 64-byte aligned outputs; each round times both in
turn (the order swapped every other round) for ~$SAMPLE seconds (0.05) by thread CPU time
and wall time. Printed per pair: medians (ms), the median of the per-round paired ratios
plain/streamed (>1: streaming is faster), the output's size, the load, and the STREAM triad
and FMA peak (benchmarks/machine.py) measured in the same run.
"""

import os
import statistics
import sys
import time

sys.path.insert(0, "benchmarks")
import numpy as np  # noqa: E402
from cpu_operators import Op, _bmm, f32, ops, task_of  # noqa: E402
from machine import fma_peak_gflops, l3_bytes, stream_bandwidth_gbs  # noqa: E402

from einc.errors import ScheduleError  # noqa: E402
from einc.runtime.c import load_c_kernel  # noqa: E402
from einc.runtime.signature import KernelSignature  # noqa: E402
from einc.schedule.policies import cpu as policy  # noqa: E402
from einc.targets import get_target  # noqa: E402

ROW_SCRIPT = """builtin.module {{
  transform.named_sequence @__transform_main(%root: !transform.any_op) {{
    %n = transform.einc.match stmt "output0" axis "N" in %root
    %c = transform.einc.match stmt "output0" axis "C" in %root
    %co, %ci = transform.einc.tile %c by {tile}
    %t = transform.einc.cache_write "output0" at %co
    transform.einc.vectorize %ci
    {extra}
    transform.yield
  }}
}}
"""
"""A copy staged by row chunk: `tile` outputs computed into a local tile, then copied out
(plain, or streamed with `extra`)."""

BIG = {
    "matmul_wide": lambda: _bmm("matmul 4096x32x4096 (64 MiB out)", 1, 4096, 32, 4096),
    "matmul_k256": lambda: _bmm("matmul 2048x256x2048 (16 MiB out)", 1, 2048, 256, 2048),
}
"""Matmuls with outputs larger than a core's share of the last-level cache."""

COPIES = {
    "transpose": Op("transpose 4096x4096 (64 MiB out)", "output0[N, C] = input0[C, N]",
                    {"input0": f32(4096, 4096)}, 0.0, lambda a: a["input0"].T,
                    lambda t, x: x["input0"].T.contiguous()),
    "axpy": Op("elementwise 2*x+y 4096x4096 (64 MiB out)", "output0[N, C] = input0[N, C] * 2.0 + input1[N, C]",
               {"input0": f32(4096, 4096), "input1": f32(4096, 4096)}, 0.0,
               lambda a: a["input0"] * 2.0 + a["input1"],
               lambda t, x: x["input0"] * 2.0 + x["input1"]),
}  # fmt: skip


def _built(task: object, schedule: object) -> tuple[str, KernelSignature]:
    comp = task.compilation(schedule)  # type: ignore[attr-defined]
    source = comp.run_until("source")
    return source, KernelSignature.from_module(comp.results["target"])


def sources(key: str, batch: int) -> tuple[Op, list[tuple[str, str, KernelSignature]]]:
    """The operator and its (name, C source, signature) pair: plain, streamed."""
    if key in COPIES:
        op = COPIES[key]
        task = task_of(op)
        scripts = [("plain", ROW_SCRIPT.format(tile=256, extra="")),
                   ("stream", ROW_SCRIPT.format(tile=256, extra="transform.einc.stream_stores %t"))]  # fmt: skip
        return op, [(n, *_built(task, s)) for n, s in scripts]
    op = BIG[key]() if key in BIG else ops(batch)[key]
    task = task_of(op)
    loops = task.compilation(None).module("loops")
    target = get_target("c")
    out = []
    for name, choices in (("plain", policy.Choices(stream=False)), ("stream", policy.Choices(stream=True))):
        schedule = policy.default_schedule(target, loops, choices)
        assert schedule is not None
        out.append((name, *_built(task, schedule)))
    assert out[0][1] != out[1][1], f"{key}: streaming changed nothing"
    return op, out


def main() -> None:
    rounds = int(sys.argv[1]) if len(sys.argv) > 1 else 11
    cases = sys.argv[2:] or ["matmul_small:1", "matmul_small:16", "bmm_qk:1", "bmm_qk:16", "bmm_av:1",
                             "bmm_av:16", "matmul_wide:1", "matmul_k256:1", "transpose:1", "axpy:1"]  # fmt: skip
    sample = float(os.environ.get("SAMPLE", "0.05"))
    triad, peak = stream_bandwidth_gbs(1), fma_peak_gflops(1)
    print(f"STREAM triad {triad:.1f} GB/s, FMA peak {peak:.1f} GFLOP/s, L3 {l3_bytes() / 2**20:.0f} MiB, "
          f"load {os.getloadavg()[0]:.1f}, {rounds} rounds", flush=True)
    for case in cases:
        key, batch = case.split(":")
        try:
            op, pair = sources(key, int(batch))
        except ScheduleError as err:
            print(f"{key}: streaming refused: {err.message}", flush=True)
            continue
        rng = np.random.default_rng(0)
        arrays = {n: rng.uniform(-1, 1, v["shape"]).astype(np.float32) for n, v in op.inputs.items()}
        want = op.numpy({n: a.astype(np.float64) for n, a in arrays.items()})
        kernels = []
        for name, source, sig in pair:
            buf = np.empty(want.size + 16, np.float32)
            start = (-buf.ctypes.data) % 64 // 4
            out = buf[start:start + want.size].reshape(want.shape)
            kernel = load_c_kernel(source, sig)
            out.fill(np.nan)
            kernel.run(arrays, {"output0": out})
            error = float(np.max(np.abs(out - want)) / max(1.0, np.max(np.abs(want))))
            if not error < 1e-4:
                raise SystemExit(f"{op.name} {name}: wrong (error {error:.1e})")
            pointers = [a.ctypes.data for a in sig.bind(arrays, {"output0": out})]
            fn = kernel._function
            t = time.perf_counter()
            fn(*pointers)
            fn(*pointers)
            calls = max(1, int(sample / ((time.perf_counter() - t) / 2)))
            kernels.append((fn, pointers, calls, buf, kernel))
        cpus: list[list[float]] = [[], []]
        walls: list[list[float]] = [[], []]
        for r in range(rounds):
            for i in (0, 1) if r % 2 == 0 else (1, 0):
                fn, pointers, calls, _, _ = kernels[i]
                w, c = time.perf_counter(), time.thread_time()
                for _ in range(calls):
                    fn(*pointers)
                walls[i].append((time.perf_counter() - w) / calls)
                cpus[i].append((time.thread_time() - c) / calls)
        paired_cpu = statistics.median(a / b for a, b in zip(cpus[0], cpus[1]))
        paired_wall = statistics.median(a / b for a, b in zip(walls[0], walls[1]))
        mb = want.size * 4 / 2**20
        print(f"{op.name} (out {mb:.1f} MiB): plain cpu {statistics.median(cpus[0]) * 1e3:.3f} ms "
              f"wall {statistics.median(walls[0]) * 1e3:.3f} ms; stream cpu {statistics.median(cpus[1]) * 1e3:.3f} ms "
              f"wall {statistics.median(walls[1]) * 1e3:.3f} ms; plain/stream paired cpu {paired_cpu:.2f} "
              f"wall {paired_wall:.2f}; load {os.getloadavg()[0]:.1f}", flush=True)


if __name__ == "__main__":
    main()
