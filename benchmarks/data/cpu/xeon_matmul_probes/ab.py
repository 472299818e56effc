"""Interleaved timing of C variants of one operator of benchmarks/cpu_operators.py.

    env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE OMP_NUM_THREADS=1 PYTHONPATH=$PWD \\
        .venv/bin/python benchmarks/data/cpu/xeon_matmul_probes/ab.py KEY BATCH ROUNDS A.c B.c ...

Each source is compiled as einc compiles kernels (einc.runtime.c.load_c_kernel), checked
against NumPy (float64; files named `*one{store,load}*` are probes and skip the check), and
called through ctypes directly (no Python-side checks). The output array is 64-byte aligned;
a file name ending in `@16` runs on an output at 16 bytes past a 64-byte boundary (where
NumPy puts large arrays). Each round times every variant in turn (the order reversed every
other round) for ~$SAMPLE seconds (0.03) by wall and thread CPU time. Printed per variant:
medians (fraction of the FMA peak, best of benchmarks/machine.py before and after), the
best sample, the first variant's median over this one's, and the median of the per-round
ratios (`paired`: each round's two samples are adjacent in time, so a change of machine
speed between rounds cancels).
"""

import os
import pathlib
import statistics
import sys
import time

sys.path.insert(0, "benchmarks")
import numpy as np  # noqa: E402
from cpu_operators import ops, task_of  # noqa: E402
from machine import fma_peak_gflops  # noqa: E402

from einc.runtime.c import load_c_kernel  # noqa: E402
from einc.runtime.signature import KernelSignature  # noqa: E402

key, batch, rounds, files = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4:]
op = ops(batch)[key]
comp = task_of(op).compilation(None)
comp.run_until("source")
sig = KernelSignature.from_module(comp.results["target"])
rng = np.random.default_rng(0)
arrays = {n: rng.uniform(-1, 1, v["shape"]).astype(np.float32) for n, v in op.inputs.items()}
want = op.numpy({n: a.astype(np.float64) for n, a in arrays.items()})
kernels, buffers = [], []
for f in files:
    buf = np.empty(want.size + 64, np.float32)
    buffers.append(buf)
    start = (-buf.ctypes.data) % 64 // 4 + (4 if f.endswith("@16") else 0)
    out = buf[start:start + want.size].reshape(want.shape)
    kernel = load_c_kernel(pathlib.Path(f.removesuffix("@16")).read_text(), sig)
    out.fill(np.nan)
    kernel.run(arrays, {"output0": out})
    error = float(np.max(np.abs(out - want)) / max(1.0, np.max(np.abs(want))))
    if "onestore" not in f and "oneload" not in f and not error < 1e-4:
        raise SystemExit(f"{f}: wrong (error {error:.1e})")
    kernels.append((kernel._function, [a.ctypes.data for a in sig.bind(arrays, {"output0": out})]))
calls = []
for fn, pointers in kernels:
    t = time.perf_counter()
    fn(*pointers)
    fn(*pointers)
    calls.append(max(1, int(float(os.environ.get("SAMPLE", "0.03")) / ((time.perf_counter() - t) / 2))))
peak = fma_peak_gflops(1)
walls: list[list[float]] = [[] for _ in files]
cpus: list[list[float]] = [[] for _ in files]
for r in range(rounds):
    for i in range(len(files)) if r % 2 == 0 else reversed(range(len(files))):
        fn, pointers = kernels[i]
        w, c = time.perf_counter(), time.thread_time()
        for _ in range(calls[i]):
            fn(*pointers)
        walls[i].append((time.perf_counter() - w) / calls[i])
        cpus[i].append((time.thread_time() - c) / calls[i])
peak = max(peak, fma_peak_gflops(1))
print(f"{op.name}: FMA peak {peak:.1f} GFLOP/s, load {os.getloadavg()[0]:.1f}, {rounds} rounds")
for f, w, c in zip(files, walls, cpus):
    mw, mc = statistics.median(w), statistics.median(c)
    paired = statistics.median(a / b for a, b in zip(cpus[0], c))
    print(f"  {pathlib.Path(f).name:34s} wall {mw * 1e3:7.3f} ms ({op.flops / mw / 1e9 / peak:.2f})"
          f"  cpu {mc * 1e3:7.3f} ms ({op.flops / mc / 1e9 / peak:.2f}, best {op.flops / min(c) / 1e9 / peak:.2f})"
          f"  first/this {statistics.median(cpus[0]) / mc:.2f} paired {paired:.2f}")
