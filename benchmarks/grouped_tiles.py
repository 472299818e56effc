"""The ceiling of each register-tile form a grouped convolution's hot loop can take on this
host (issue 26: the grouped convolution at 0.47 of the FMA peak on an AVX-512 Xeon): the
inner loop of cpu_operators' `conv2d_grouped` (8 channels per group, 3x3 window, 8 input
channels per group, 14 output columns of accumulators), written by hand in each form, built
like einc's kernels (einc.runtime.c.compile_c: the same compiler and flags) and timed by the
thread's CPU time, as a fraction of the FMA peak measured in the same run
(machine.fma_peak_gflops). Data stay in L1: what the instruction mix allows, not a kernel;
every form computes the same tile of the convolution from one input (`tile`, checked
against NumPy by tests/test_grouped_tiles_bench.py).

    env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE PYTHONPATH=. .venv/bin/python benchmarks/grouped_tiles.py [--repeat 5]

The forms (V = the vector's lanes, two groups of V/2 channels per vector but `half`):
- runs      the default today (transform.einc.group_lanes, egpu.vbroadcast_runs): each FMA's
            input a vector of two runs, one group's value over each half: two scalar loads
            and a lane insert (a shuffle, on the port that also does FMAs on Intel) per FMA;
- runs_kw   the same with the window column inside the unrolled columns, so that the compiler
            builds each input column's vector once for the three taps that read it;
- half      one group per half-width vector (sketch policy.nogroup): one broadcast load per
            FMA, half the lanes;
- replicated the input packed beforehand with each group's value repeated over its lanes:
            one vector load per FMA (the packing not counted);
- pairs     the lanes interleaved over the two groups (lane 2f + g, the filter packed the
            same way) and the input packed with the two groups' values side by side: one
            64-bit broadcast load per FMA, no shuffle (the packing not counted);
- pairs_kw  the same with the window column inside the unrolled columns (each column's
            broadcast built once for its three taps: more live registers).
"""

from __future__ import annotations

import argparse
import ctypes
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from einc.runtime.c import compile_c  # noqa: E402
from machine import fma_peak_gflops, vector_lanes  # noqa: E402

SOURCE = r"""
#include <string.h>
#include <time.h>
#define V %(LANES)d
#define H (V / 2)
#define COLS 14
#define PLANE (8 * 3 * 32)
typedef float vf __attribute__((vector_size(V * 4)));
typedef float hf __attribute__((vector_size(H * 4)));
typedef double vd __attribute__((vector_size(V * 4)));
static float X[2 * PLANE] __attribute__((aligned(64)));      /* [g][c][kh][col] */
static float XP[PLANE * 2] __attribute__((aligned(64)));     /* [c][kh][col][g]: the pairs */
static float XR[PLANE * V] __attribute__((aligned(64)));     /* [c][kh][col][lane]: replicated */
static float W[72 * V] __attribute__((aligned(64)));         /* [c][kh][kw][g * H + f] */
static float WP[72 * V] __attribute__((aligned(64)));        /* [c][kh][kw][2 * f + g] */
static float O[COLS * V] __attribute__((aligned(64)));
static double cpu(void) { struct timespec t; clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t); return t.tv_sec + 1e-9 * t.tv_nsec; }
static vf runs(const float* p) { float a = p[0], b = p[PLANE]; return (vf){%(RUNS)s}; }  /* as egpu.vbroadcast_runs prints */
static vf pair(const float* p) { double d; memcpy(&d, p, 8); return (vf)(vd){%(PAIRS)s}; }

/* x[g][c][kh][col] (2 x 8 x 3 x 32) and w[g][f][c][kh][kw] (2 x H x 8 x 3 x 3) laid out for
   every form; O zeroed. */
void load(const float* x, const float* w) {
  for (int g = 0; g < 2; g++) for (int i = 0; i < PLANE; i++) {
    X[g * PLANE + i] = x[g * PLANE + i];
    XP[i * 2 + g] = x[g * PLANE + i];
    for (int f = 0; f < H; f++) XR[i * V + g * H + f] = x[g * PLANE + i];
  }
  for (int g = 0; g < 2; g++) for (int f = 0; f < H; f++) for (int k = 0; k < 72; k++) {
    W[k * V + g * H + f] = w[(g * H + f) * 72 + k];
    WP[k * V + 2 * f + g] = w[(g * H + f) * 72 + k];
  }
  memset(O, 0, sizeof O);
}
/* the tile's sums, out[j][g][f] (the pair forms' lanes 2f + g put back) */
void result(float* out, int pairs) {
  for (int j = 0; j < COLS; j++) for (int g = 0; g < 2; g++) for (int f = 0; f < H; f++)
    out[(j * 2 + g) * H + f] = O[j * V + (pairs ? 2 * f + g : g * H + f)];
  memset(O, 0, sizeof O);
}

#define TILE(NAME, T, WEIGHTS, INPUT)                                                    \
  double NAME(long reps) {                                                               \
    double t0 = cpu();                                                                   \
    for (long r = 0; r < reps; r++) {                                                    \
      T acc[COLS] = {};                                                                  \
      for (int c = 0; c < 8; c++) for (int kh = 0; kh < 3; kh++) for (int kw = 0; kw < 3; kw++) { \
        T w = *(T*)&WEIGHTS[((c * 3 + kh) * 3 + kw) * V];                                \
        _Pragma("GCC unroll 14") for (int j = 0; j < COLS; j++) acc[j] += (INPUT) * w;  \
      }                                                                                  \
      for (int j = 0; j < COLS; j++) *(T*)&O[j * V] += acc[j];                           \
    }                                                                                    \
    return cpu() - t0;                                                                   \
  }
TILE(t_runs, vf, W, runs(&X[(c * 3 + kh) * 32 + j + kw]))
TILE(t_half, hf, W, X[(c * 3 + kh) * 32 + j + kw] - (hf){})
TILE(t_replicated, vf, W, *(vf*)&XR[((c * 3 + kh) * 32 + j + kw) * V])
TILE(t_pairs, vf, WP, pair(&XP[((c * 3 + kh) * 32 + j + kw) * 2]))

#define TILE_KW(NAME, WEIGHTS, INPUT)                                                     \
  double NAME(long reps) {                                                                \
    double t0 = cpu();                                                                    \
    for (long r = 0; r < reps; r++) {                                                     \
      vf acc[COLS] = {};                                                                  \
      for (int c = 0; c < 8; c++) for (int kh = 0; kh < 3; kh++) {                        \
        vf w[3];                                                                          \
        for (int kw = 0; kw < 3; kw++) w[kw] = *(vf*)&WEIGHTS[((c * 3 + kh) * 3 + kw) * V]; \
        _Pragma("GCC unroll 14") for (int j = 0; j < COLS; j++)                           \
          _Pragma("GCC unroll 3") for (int kw = 0; kw < 3; kw++) acc[j] += (INPUT) * w[kw]; \
      }                                                                                   \
      for (int j = 0; j < COLS; j++) *(vf*)&O[j * V] += acc[j];                           \
    }                                                                                     \
    return cpu() - t0;                                                                    \
  }
TILE_KW(t_runs_kw, W, runs(&X[(c * 3 + kh) * 32 + j + kw]))
TILE_KW(t_pairs_kw, WP, pair(&XP[((c * 3 + kh) * 32 + j + kw) * 2]))
"""

FORMS = {"runs": 1.0, "runs_kw": 1.0, "half": 0.5, "replicated": 1.0, "pairs": 1.0, "pairs_kw": 1.0}
"""Each form's vector width as a fraction of the host's (the `half` form's FMAs do half the flops)."""

FMAS_PER_REP = 8 * 3 * 3 * 14
COLS = 14


def library(lanes: int) -> ctypes.CDLL:
    """The forms built for `lanes`-lane vectors (two groups of lanes / 2 channels)."""
    half = lanes // 2
    source = SOURCE % {"LANES": lanes, "RUNS": ", ".join(["a"] * half + ["b"] * half), "PAIRS": ", ".join(["d"] * half)}
    dll = ctypes.CDLL(str(compile_c(source).path))
    for name in FORMS:
        fn = getattr(dll, f"t_{name}")
        fn.argtypes, fn.restype = [ctypes.c_long], ctypes.c_double
    return dll


def tile(dll: ctypes.CDLL, lanes: int, form: str, x: np.ndarray, w: np.ndarray) -> np.ndarray:
    """One tile computed by `form`: x [2 groups, 8 channels, 3 rows, 32 columns], w [2
    groups, lanes / 2 filters, 8 channels, 3, 3] -> [14 columns, 2 groups, lanes / 2 filters]
    (`half` fills only the first group)."""
    half = lanes // 2
    x, w = np.ascontiguousarray(x, np.float32), np.ascontiguousarray(w, np.float32)
    assert x.shape == (2, 8, 3, 32) and w.shape == (2, half, 8, 3, 3), (x.shape, w.shape)
    pointer = ctypes.POINTER(ctypes.c_float)
    dll.load(x.ctypes.data_as(pointer), w.ctypes.data_as(pointer))
    getattr(dll, f"t_{form}")(1)
    out = np.zeros((COLS, 2, half), np.float32)
    dll.result(out.ctypes.data_as(pointer), int(form.startswith("pairs")))
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeat", type=int, default=5, help="samples per form (interleaved; the best is kept)")
    parser.add_argument("--reps", type=int, default=100_000, help="tile computations per sample")
    args = parser.parse_args()
    lanes = vector_lanes()
    if lanes < 8:
        raise SystemExit(f"grouped_tiles: {lanes}-lane vectors hold no two groups of 4 channels")
    dll = library(lanes)
    peak = fma_peak_gflops(1)
    best = dict.fromkeys(FORMS, float("inf"))
    for _ in range(args.repeat):
        for name in FORMS:
            best[name] = min(best[name], getattr(dll, f"t_{name}")(args.reps))
    peak2 = fma_peak_gflops(1)
    print(f"FMA peak {peak:.1f} GFLOP/s before, {peak2:.1f} after (1 thread, {lanes} lanes)")
    for name, seconds in best.items():
        gflops = 2.0 * lanes * FORMS[name] * FMAS_PER_REP * args.reps / seconds / 1e9
        print(f"  {name:<11} {gflops:7.1f} GFLOP/s  {gflops / max(peak, peak2):.2f} of the FMA peak")


if __name__ == "__main__":
    main()
