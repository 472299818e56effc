"""Schedules on the executable device targets, against NumPy in the same run (reported, not
asserted): a float32 matmul with the target's default schedule (einc/schedule/policies/gpu.py),
with no schedule (the default mapping: one output per work-item), a 4x4 register tile per
work-item (`cache_write ... in "local"`), that tile plus shared-memory input tiles, a 32x32
work-group tile with a 4x8 register tile, and optionally a tuned schedule (`--tuned FILE`, the
script `einc tune -o FILE` wrote); a row sum with the default schedule, no schedule (one row
per work-item) and with the reduction bound to 64 threads (a cross-thread reduction).

    .venv/bin/python benchmarks/device_schedules.py [--targets opencl,sycl,hlsl] [--n 512] [--tuned FILE]

Times include einc's host side (copies in and out of device buffers), as a user calls a
kernel. On this project's machines the devices are CPUs (PoCL, Intel's OpenCL CPU runtime,
lavapipe), so the numbers say how schedules compare on one device, not what a GPU does.
"""

from __future__ import annotations

import argparse

import numpy as np

MATMUL = "output0[N, M] +=! input0[N, K] * input1[K, M]"
ROWSUM = "output0[N] +=! input0[N, C]"

TILES = [
    '%n = transform.einc.match stmt "output0" axis "N" in %root',
    '%m = transform.einc.match stmt "output0" axis "M" in %root',
    '%k = transform.einc.match stmt "output0" axis "K" in %root',
    "%no, %ni = transform.einc.tile %n by 16",
    "%mo, %mi = transform.einc.tile %m by 16",
    "%nt, %nr = transform.einc.tile %ni by 4",
    "%mt, %mr = transform.einc.tile %mi by 4",
]
BINDS = [
    'transform.einc.bind %a to "block.y"',
    'transform.einc.bind %b to "block.x"',
    'transform.einc.bind %c to "thread.y"',
    'transform.einc.bind %d to "thread.x"',
    '%w = transform.einc.cache_write "output0" at %d in "local"',
]
REGISTER_TILE = [*TILES, "%a, %b, %c, %d, %e, %f, %g = transform.einc.reorder %no, %mo, %nt, %mt, %k, %nr, %mr",
                 *BINDS, "transform.einc.unroll %g by 4", "transform.einc.unroll %f by 4"]  # fmt: skip
SHARED_TILES = [*TILES, "%ko, %ki = transform.einc.tile %k by 8",
                "%a, %b, %c, %d, %e, %f, %g, %h = transform.einc.reorder %no, %mo, %nt, %mt, %ko, %ki, %nr, %mr",
                *BINDS, '%s0 = transform.einc.cache_read "input0" at %e in "shared"',
                '%s1 = transform.einc.cache_read "input1" at %e in "shared"',
                "transform.einc.unroll %h by 4", "transform.einc.unroll %g by 4"]  # fmt: skip
HAND_32 = [
    '%n = transform.einc.match stmt "output0" axis "N" in %root',
    '%m = transform.einc.match stmt "output0" axis "M" in %root',
    '%k = transform.einc.match stmt "output0" axis "K" in %root',
    "%no, %ni = transform.einc.tile %n by 32",
    "%mo, %mi = transform.einc.tile %m by 32",
    "%nt, %nr = transform.einc.tile %ni by 4",
    "%mt, %mr = transform.einc.tile %mi by 8",
    "%a, %b, %c, %d, %e, %f, %g = transform.einc.reorder %no, %mo, %nt, %mt, %k, %nr, %mr",
    *BINDS, "transform.einc.unroll %g by 8", "transform.einc.unroll %f by 4",
]
ROW_THREADS = [
    '%n = transform.einc.match stmt "output0" axis "N" in %root',
    '%c = transform.einc.match stmt "output0" axis "C" in %root',
    'transform.einc.bind %n to "block.x"',
    "%co, %ci = transform.einc.tile %c by 64",
    'transform.einc.bind %ci to "thread.x"',
]


def script(lines: list[str]) -> str:
    body = "\n".join("    " + line for line in [*lines, "transform.yield"])
    return ("builtin.module {\n  transform.named_sequence @__transform_main(%root: !transform.any_op) {\n"
            f"{body}\n  }}\n}}\n")  # fmt: skip


def main() -> None:
    import einc
    from common import measure, table

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--targets", default="opencl,sycl,hlsl")
    parser.add_argument("--n", type=int, default=512)
    parser.add_argument("--tuned", help="a tuned MatMul schedule script (einc tune -o FILE)")
    args = parser.parse_args()
    n = args.n
    rng = np.random.default_rng()
    mm_in = {"input0": {"dtype": "float32", "shape": [n, n]}, "input1": {"dtype": "float32", "shape": [n, n]}}
    rows, cols = 8 * n, 1024
    rs_in = {"input0": {"dtype": "float32", "shape": [rows, cols]}}
    cases = [
        ("MatMul %d^3" % n, MATMUL, mm_in, "default schedule", "default", 2.0 * n**3),
        ("MatMul %d^3" % n, MATMUL, mm_in, "default mapping", "none", 2.0 * n**3),
        ("MatMul %d^3" % n, MATMUL, mm_in, "4x4 register tile", script(REGISTER_TILE), 2.0 * n**3),
        ("MatMul %d^3" % n, MATMUL, mm_in, "+ shared input tiles", script(SHARED_TILES), 2.0 * n**3),
        ("MatMul %d^3" % n, MATMUL, mm_in, "32x32 tile, 4x8 registers", script(HAND_32), 2.0 * n**3),
        *([("MatMul %d^3" % n, MATMUL, mm_in, "tuned (--tuned)", open(args.tuned).read(), 2.0 * n**3)]
          if args.tuned else []),
        ("RowSum %dx%d" % (rows, cols), ROWSUM, rs_in, "default schedule", "default", 0.0),
        ("RowSum %dx%d" % (rows, cols), ROWSUM, rs_in, "default mapping", "none", 0.0),
        ("RowSum %dx%d" % (rows, cols), ROWSUM, rs_in, "64 threads per row", script(ROW_THREADS), 0.0),
    ]
    out_rows = []
    for target in args.targets.split(","):
        for name, ir, inputs, label, schedule, flops in cases:
            arrays = {k: rng.uniform(-1, 1, v["shape"]).astype(v["dtype"]) for k, v in inputs.items()}
            numpy = (lambda a=arrays: a["input0"] @ a["input1"]) if ir == MATMUL else (lambda a=arrays: a["input0"].sum(axis=1))
            try:
                kernel = einc.compile(ir, inputs, target=target, schedule=schedule)
            except einc.EincError as err:
                out_rows.append([target, name, label, "refused", "", "", str(err).splitlines()[0][:60]])
                continue
            outs = {o.name: np.full(o.shape, np.nan, o.dtype) for o in kernel.outputs}
            kernel.run(arrays, outs)
            want = numpy().astype(np.float64)
            err = float(np.max(np.abs(outs["output0"] - want)) / max(1.0, float(np.max(np.abs(want)))))
            t = measure(lambda: kernel.run(arrays, outs), repeat=5, min_time=0.2).median_s
            t_np = measure(numpy, repeat=5, min_time=0.2).median_s
            work = f"{flops / t / 1e9:.1f} GFLOP/s" if flops else f"{sum(a.nbytes for a in arrays.values()) / t / 1e9:.2f} GB/s"
            out_rows.append([target, name, label, f"{t * 1e3:.1f}", work, f"{t_np / t:.2f}", f"{err:.1e}"])
            print(" | ".join(out_rows[-1]), flush=True)
    print(table(out_rows, ["target", "kernel", "schedule", "ms", "rate", "÷ NumPy", "max rel err"]))


if __name__ == "__main__":
    main()
