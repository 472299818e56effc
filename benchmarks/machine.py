"""The machine's ceilings, measured with small C kernels built like einc's C target's kernels
(`einc.runtime.c.compile_c`: the same compiler, CFLAGS, -march=native, OpenMP).

    fma_peak_gflops(threads)      float32 FMA throughput on full-width vectors (per CPU second)
    stream_bandwidth_gbs(threads) STREAM triad (or copy) on arrays well over the L3 cache
    clock_ghz()                   the core clock under load (a chain of dependent integer adds)

    .venv/bin/python benchmarks/machine.py [--threads 1,2]
"""

from __future__ import annotations

import argparse
import ctypes
import functools
import os
import re
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from einc.runtime.c import compile_c, native_vector_bits

FMA_SOURCE = r"""
#include <omp.h>
#include <time.h>
typedef float vf __attribute__((vector_size(%(BYTES)d), aligned(%(BYTES)d)));

static double thread_cpu_seconds(void) {
  struct timespec ts;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return ts.tv_sec + 1e-9 * ts.tv_nsec;
}

/* Each thread runs %(CHAINS)d independent chains acc = acc * a + b (one FMA each) for `iters`
   rounds and stores its CPU seconds in cpu[thread]; returns the wall seconds of the region. */
double fma_run(long iters, int threads, double *cpu, float *sink) {
  double t0 = omp_get_wtime();
  float total = 0.0f;
#pragma omp parallel num_threads(threads) reduction(+ : total)
  {
    vf a, b;
    for (int l = 0; l < %(LANES)d; l++) { a[l] = 0.999999f; b[l] = 1e-6f * (l + 1); }
    float seed = (float)omp_get_thread_num();
    double c0 = thread_cpu_seconds();
    %(DECLARE)s
    for (long i = 0; i < iters; i++) {
      %(UPDATE)s
      /* keeps the accumulators in registers and the loop unreduced */
      %(BARRIERS)s
    }
    vf s = %(SUM)s;
    cpu[omp_get_thread_num()] = thread_cpu_seconds() - c0;
    for (int l = 0; l < %(LANES)d; l++) total += s[l];
  }
  double t = omp_get_wtime() - t0;
  *sink = total;
  return t;
}

/* CPU seconds of this thread (time another process took the core away is not counted) for
   `iters` rounds of 100 dependent 1-cycle integer adds (x86-64), or -1. The adds are
   register to register: Intel's Golden Cove cores (Sapphire Rapids) fold an add of an
   immediate into the renamer, and a chain of those ran 5.8x faster than the clock. */
double clock_run(long iters) {
#if defined(__x86_64__)
  double t0 = thread_cpu_seconds();
  long x = 0, one = 1;
  for (long i = 0; i < iters; i++) {
    __asm__ volatile(
#define A10 "add %%1, %%0\n\t" "add %%1, %%0\n\t" "add %%1, %%0\n\t" "add %%1, %%0\n\t" "add %%1, %%0\n\t" \
            "add %%1, %%0\n\t" "add %%1, %%0\n\t" "add %%1, %%0\n\t" "add %%1, %%0\n\t" "add %%1, %%0\n\t"
        A10 A10 A10 A10 A10 A10 A10 A10 A10 A10
        : "+r"(x) : "r"(one));
  }
  double t = thread_cpu_seconds() - t0;
  return x == iters * 100 ? t : -1.0;
#else
  (void)iters;
  return -1.0;
#endif
}
"""

STREAM_SOURCE = r"""
#include <omp.h>
#include <stddef.h>
#include <time.h>

static double thread_cpu_seconds(void) {
  struct timespec ts;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return ts.tv_sec + 1e-9 * ts.tv_nsec;
}

void stream_init(float *a, float *b, float *c, long n, int threads) {
#pragma omp parallel for schedule(static) num_threads(threads)
  for (long i = 0; i < n; i++) { a[i] = 1.0f; b[i] = 2.0f; c[i] = 0.0f; }
}

/* kind 0: copy c = a; kind 1: triad a = b + s * c. Returns the wall seconds; each thread's CPU
   seconds (its share of the loop, statically scheduled) in cpu[thread]. */
double stream_run(float *restrict a, float *restrict b, float *restrict c, long n, int threads,
                  int kind, double *cpu) {
  const float s = 3.0f;
  double t0 = omp_get_wtime();
#pragma omp parallel num_threads(threads)
  {
    double c0 = thread_cpu_seconds();
    if (kind == 0) {
#pragma omp for schedule(static) nowait
      for (long i = 0; i < n; i++) c[i] = a[i];
    } else {
#pragma omp for schedule(static) nowait
      for (long i = 0; i < n; i++) a[i] = b[i] + s * c[i];
    }
    cpu[omp_get_thread_num()] = thread_cpu_seconds() - c0;
  }
  return omp_get_wtime() - t0;
}
"""


def vector_lanes() -> int:
    """float32 lanes of the C target's vectors (16 with AVX-512, 8 with AVX2)."""
    return native_vector_bits() // 32


@functools.cache
def _fma_library() -> ctypes.CDLL:
    lanes = vector_lanes()
    # Enough chains to cover FMA latency (4-5 cycles) x FMA ports (2) with room to spare, and
    # few enough to stay in registers (32 zmm with AVX-512, 16 ymm otherwise, 2 of them a, b).
    chains = 16 if lanes >= 16 else 12
    names = [f"acc{c}" for c in range(chains)]
    source = FMA_SOURCE % {
        "BYTES": lanes * 4, "LANES": lanes, "CHAINS": chains,
        "DECLARE": " ".join(f"vf {v} = a * (seed + {c}.0f);" for c, v in enumerate(names)),
        "UPDATE": " ".join(f"{v} = {v} * a + b;" for v in names),
        "BARRIERS": " ".join(  # an asm statement takes at most 30 operands ("+" counts 2)
            '__asm__ volatile("" : ' + ", ".join(f'"+v"({v})' for v in names[i:i + 8]) + ");"
            for i in range(0, chains, 8)),
        "SUM": " + ".join(names),
    }  # fmt: skip
    dll = ctypes.CDLL(str(compile_c(source).path))
    dll.fma_run.argtypes = [ctypes.c_long, ctypes.c_int, ctypes.POINTER(ctypes.c_double),
                            ctypes.POINTER(ctypes.c_float)]  # fmt: skip
    dll.fma_run.restype = ctypes.c_double
    dll.clock_run.argtypes = [ctypes.c_long]
    dll.clock_run.restype = ctypes.c_double
    dll.chains = chains  # type: ignore[attr-defined]
    return dll


def fma_peak_gflops(threads: int, runs: int = 7, seconds: float = 0.2, clock: str = "cpu") -> float:
    """Best-of-`runs` float32 GFLOP/s of `threads` threads each running independent FMA chains
    on full-width vectors (2 flops per lane per FMA).

    `clock="cpu"` (the default) divides each thread's flops by its own CPU time and sums over
    the threads: what the cores deliver while they run, unaffected by other processes taking
    them (this machine's 2 cores are shared). `clock="wall"`: the flops of all threads over
    the wall time of the parallel region (the same figure on an idle machine)."""
    if clock not in ("cpu", "wall"):
        raise ValueError(f"clock must be 'cpu' or 'wall', not {clock!r}")
    dll = _fma_library()
    flops_per_iter = 2.0 * vector_lanes() * dll.chains  # type: ignore[attr-defined]
    cpu = (ctypes.c_double * threads)()
    sink = ctypes.c_float()
    iters = 100_000
    while (t := dll.fma_run(iters, threads, cpu, ctypes.byref(sink))) < seconds / 4:
        iters *= 4
    iters = max(1, int(iters * seconds / t))
    best = 0.0
    for _ in range(runs):
        wall = dll.fma_run(iters, threads, cpu, ctypes.byref(sink))
        if clock == "wall":
            rate = flops_per_iter * iters * threads / wall
        else:
            rate = sum(flops_per_iter * iters / max(c, 1e-9) for c in cpu)
        best = max(best, rate)
    return best / 1e9


def clock_ghz(runs: int = 5) -> float | None:
    """The core's clock under load in GHz: one thread running dependent 1-cycle integer adds,
    timed by its own CPU time. None off x86-64."""
    dll = _fma_library()
    iters = 2_000_000
    times = [dll.clock_run(iters) for _ in range(runs)]
    if min(times) <= 0:
        return None
    return 100.0 * iters / min(times) / 1e9


FADD_SOURCE = r"""
#include <time.h>

/* CPU seconds of this thread for `iters` rounds of 100 dependent float adds (x86-64 addss),
   or -1 elsewhere. */
double fadd_run(long iters) {
#if defined(__x86_64__)
  struct timespec a, b;
  float x = 1.0f, y = 1e-7f;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &a);
  for (long i = 0; i < iters; i++) {
    __asm__ volatile(
#define A10 "addss %1, %0\n\t" "addss %1, %0\n\t" "addss %1, %0\n\t" "addss %1, %0\n\t" "addss %1, %0\n\t" \
            "addss %1, %0\n\t" "addss %1, %0\n\t" "addss %1, %0\n\t" "addss %1, %0\n\t" "addss %1, %0\n\t"
        A10 A10 A10 A10 A10 A10 A10 A10 A10 A10
        : "+x"(x) : "x"(y));
  }
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &b);
  return x > 0.0f ? (b.tv_sec - a.tv_sec) + 1e-9 * (b.tv_nsec - a.tv_nsec) : -1.0;
#else
  (void)iters;
  return -1.0;
#endif
}
"""


def fadd_latency_cycles(runs: int = 5) -> float | None:
    """Cycles one float add takes when the next depends on it (a chain of `addss`), timed by
    the thread's CPU time at `clock_ghz()`. None off x86-64."""
    dll = ctypes.CDLL(str(compile_c(FADD_SOURCE).path))
    dll.fadd_run.argtypes = [ctypes.c_long]
    dll.fadd_run.restype = ctypes.c_double
    ghz = clock_ghz()
    iters = 200_000
    times = [dll.fadd_run(iters) for _ in range(runs)]
    if ghz is None or min(times) <= 0:
        return None
    return min(times) * ghz * 1e9 / (100.0 * iters)


def l3_bytes() -> int:
    """The last-level cache's size (sysfs; 32 MiB when it cannot be read)."""
    for index in sorted(Path("/sys/devices/system/cpu/cpu0/cache").glob("index*"), reverse=True):
        try:
            text = (index / "size").read_text().strip()
        except OSError:
            continue
        m = re.fullmatch(r"(\d+)([KMG]?)", text)
        if m:
            return int(m.group(1)) * {"": 1, "K": 1 << 10, "M": 1 << 20, "G": 1 << 30}[m.group(2)]
    return 32 << 20


@functools.cache
def _stream_library() -> ctypes.CDLL:
    dll = ctypes.CDLL(str(compile_c(STREAM_SOURCE).path))
    ptr = ctypes.c_void_p
    dll.stream_init.argtypes = [ptr, ptr, ptr, ctypes.c_long, ctypes.c_int]
    dll.stream_init.restype = None
    dll.stream_run.argtypes = [ptr, ptr, ptr, ctypes.c_long, ctypes.c_int, ctypes.c_int,
                               ctypes.POINTER(ctypes.c_double)]  # fmt: skip
    dll.stream_run.restype = ctypes.c_double
    return dll


def stream_bandwidth_gbs(threads: int, kind: str = "triad", runs: int = 30, array_bytes: int = 0,
                         clock: str = "wall") -> float:  # fmt: skip
    """Best-of-`runs` STREAM bandwidth in GB/s (1e9 bytes), counting the bytes the loop reads
    and writes (copy: 8 per element, triad `a = b + s*c`: 12; write-allocate traffic is not
    counted, as STREAM does and as the einc benchmarks count their own kernels). Each array is
    4x the L3 size (at least 64 MiB), first touched by the threads that stream it.

    The triad is the default: its two reads and one write are the shape of the memory-bound
    kernels benchmarked (Add; Softmax and LayerNorm read more than they write).

    `array_bytes` sets each array's size instead (an in-cache bandwidth with arrays that fit
    in the L3 together).

    `clock="cpu"`: each thread's bytes over its own CPU time, summed over the threads (what
    the cores stream while they run, as `fma_peak_gflops`'s default; time another process
    holds a core is not counted)."""
    import numpy as np

    if clock not in ("cpu", "wall"):
        raise ValueError(f"clock must be 'cpu' or 'wall', not {clock!r}")
    if kind not in ("copy", "triad"):
        raise ValueError(f"kind must be 'copy' or 'triad', not {kind!r}")
    n = (array_bytes or max(4 * l3_bytes(), 64 << 20)) // 4
    a, b, c = (np.empty(n, np.float32) for _ in range(3))
    dll = _stream_library()
    dll.stream_init(a.ctypes.data, b.ctypes.data, c.ctypes.data, n, threads)
    code = 0 if kind == "copy" else 1
    cpu = (ctypes.c_double * threads)()
    dll.stream_run(a.ctypes.data, b.ctypes.data, c.ctypes.data, n, threads, code, cpu)  # warm-up
    best = 0.0
    for _ in range(runs):
        wall = dll.stream_run(a.ctypes.data, b.ctypes.data, c.ctypes.data, n, threads, code, cpu)
        per = (8 if kind == "copy" else 12) * n / threads
        best = max(best, per * threads / wall if clock == "wall" else sum(per / max(t, 1e-9) for t in cpu))
    return best / 1e9


def cpu_model() -> str:
    """`model name` of /proc/cpuinfo (what lscpu prints)."""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    import platform

    return platform.processor() or platform.machine()


def describe(threads: int) -> dict[str, float]:
    """Peak (CPU-time and wall-time), triad and copy bandwidth for one thread count."""
    return {"threads": threads, "fma_peak_gflops": fma_peak_gflops(threads),
            "fma_peak_wall_gflops": fma_peak_gflops(threads, clock="wall"),
            "triad_gbs": stream_bandwidth_gbs(threads, "triad"),
            "copy_gbs": stream_bandwidth_gbs(threads, "copy")}  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--threads", default="1,2", help="comma-separated thread counts")
    args = parser.parse_args()
    ghz = clock_ghz()
    print(f"CPU: {cpu_model()}, {os.cpu_count()} logical CPUs, {native_vector_bits()}-bit vectors, "
          f"L3 {l3_bytes() >> 20} MiB, clock under load "
          + (f"{ghz:.2f} GHz" if ghz else "unknown"))  # fmt: skip
    for threads in (int(t) for t in args.threads.split(",")):
        d = describe(threads)
        line = (f"{threads} thread(s): FMA peak {d['fma_peak_gflops']:.1f} GFLOP/s "
                f"(by wall time {d['fma_peak_wall_gflops']:.1f}), "
                f"triad {d['triad_gbs']:.1f} GB/s, copy {d['copy_gbs']:.1f} GB/s")  # fmt: skip
        if ghz:
            per_cycle = d["fma_peak_gflops"] / threads / ghz / 2
            line += f" ({per_cycle:.1f} float32 FMA lanes per cycle per core)"
        print(line)


if __name__ == "__main__":
    main()
