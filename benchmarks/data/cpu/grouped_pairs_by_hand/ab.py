"""A/B of the default and the hand-made pair form of conv2d_grouped (README.md here); run from the worktree root.
ROUNDS=n (environment): alternated rounds, 7 unless set; WINDOW=5: a 5x5 filter (pad 2) instead of 3x3."""
import sys, time, ctypes, statistics
sys.path.insert(0, 'benchmarks')
import numpy as np
import cpu_operators as c
from einc.runtime.c import compile_c
from machine import fma_peak_gflops
batch = int(sys.argv[1]); files = sys.argv[2:]
window = int(__import__("os").environ.get("WINDOW", 3))  # WINDOW=5: the same grouped convolution with a 5x5 filter, pad 2
op = c.ops(batch)['conv2d_grouped'] if window == 3 else c.Conv(256, 256, (28, 28), (window, window), pad=window // 2, groups=32).op(f"grouped {window}x{window}", batch)
rng = np.random.default_rng(0)
x = rng.uniform(-1, 1, op.inputs['input0']['shape']).astype(np.float32)
w = rng.uniform(-1, 1, op.inputs['input1']['shape']).astype(np.float32)
ref = op.numpy({'input0': x.astype(np.float64), 'input1': w.astype(np.float64)})
P = ctypes.POINTER(ctypes.c_float)
libs = {}
for f in files:
    dll = ctypes.CDLL(str(compile_c(open(f).read()).path))
    out = np.zeros(ref.shape, np.float32)
    call = lambda dll=dll, out=out: dll.kernel(x.ctypes.data_as(P), w.ctypes.data_as(P), out.ctypes.data_as(P))
    call(); err = np.abs(out - ref).max(); print(f, 'max error', err); assert err < 1e-3
    libs[f] = call
peak = fma_peak_gflops(1)
times = {f: [] for f in files}
calls = max(1, int(0.1 / (op.flops / 80e9)))
for _ in range(int(__import__("os").environ.get("ROUNDS", 7))):
    for f, call in libs.items():
        t0 = time.thread_time()
        for _ in range(calls): call()
        times[f].append((time.thread_time() - t0) / calls)
for f, ts in times.items():
    m = statistics.median(ts)
    print(f"{f}: median {m*1e3:.3f} ms, min {min(ts)*1e3:.3f}, {op.flops / m / 1e9:.1f} GFLOP/s, {op.flops / m / 1e9 / peak:.2f} of peak {peak:.0f}")
