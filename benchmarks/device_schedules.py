"""Hand schedules on the executable device targets, against NumPy in the same run (reported,
not asserted): a float32 matmul with the target's default schedule (einc/schedule/policies/gpu.py),
with no schedule (the default mapping: one output per work-item) and with each hand schedule of
`HAND_MATMUL` (work-group tiles of work-items x register tiles, `cache_write ... in "local"`,
unrolled; with or without shared-memory input tiles); a row sum with the default schedule, no
schedule and each of `HAND_ROWSUM` (cross-thread reductions of 16 to 256 work-items per row,
one row per work-item with a private accumulator); optionally a tuned schedule (`--tuned
FILE`, the script `einc tune -o FILE` wrote). The best hand schedule per target is marked.

    .venv/bin/python benchmarks/device_schedules.py [--targets opencl,sycl,hlsl] [--n 512] [--tuned FILE]

Times include einc's host side (copies in and out of device buffers), as a user calls a
kernel. On this project's machines the devices are CPUs (PoCL, Intel's OpenCL CPU runtime,
lavapipe), so the numbers say how schedules compare on one device, not what a GPU does.

The sets (`HAND_MATMUL`, `HAND_BATCH_MATMUL`, `HAND_ROWSUM`, `HAND_SOFTMAX`, `HAND_LAYERNORM`)
are what benchmarks/device_kernels.py times as "hand" beside the default and the tuned
schedule; they are the schedules a GPU programmer writes first, not a search: which one is
fastest differs per device (on PoCL the 64x64/8x8 register tiling, on Intel's SYCL CPU device
a 32-wide tile with a 4x8 or 8x4 register tile; a row sum's best width is 64 work-items on
PoCL and 16 on SYCL, measured here).
"""

from __future__ import annotations

import argparse

import numpy as np

MATMUL = "output0[N, M] +=! input0[N, K] * input1[K, M]"
ROWSUM = "output0[N] +=! input0[N, C]"


def matmul_lines(block: tuple[int, int], reg: tuple[int, int], ktile: int = 0, staged: tuple[str, ...] = (),
                 kunroll: int = 0, batch: bool = False) -> list[str]:  # fmt: skip
    """A register-tiled matmul: work-group tiles `block` (rows, columns) on block.y/x, each
    work-item a `reg` tile of outputs accumulated in private memory (`cache_write ... in
    "local"`) with its register loops unrolled; with `ktile`, the reduction tiled and the
    `staged` inputs' tiles copied into shared memory at the reduction tile loop, its inner
    loop unrolled by `kunroll`; `batch`: the batch axis B on block.z."""
    (bn, bm), (rn, rm) = block, reg
    lines = ['%bb = transform.einc.match stmt "output0" axis "B" in %root', 'transform.einc.bind %bb to "block.z"'] if batch else []
    lines += [
        '%n = transform.einc.match stmt "output0" axis "N" in %root',
        '%m = transform.einc.match stmt "output0" axis "M" in %root',
        '%k = transform.einc.match stmt "output0" axis "K" in %root',
        f"%no, %ni = transform.einc.tile %n by {bn}",
        f"%mo, %mi = transform.einc.tile %m by {bm}",
        f"%nt, %nr = transform.einc.tile %ni by {rn}",
        f"%mt, %mr = transform.einc.tile %mi by {rm}",
    ]
    if ktile:
        lines += [f"%ko, %ki = transform.einc.tile %k by {ktile}",
                  "%a, %b, %c, %d, %e, %f, %g, %h = transform.einc.reorder %no, %mo, %nt, %mt, %ko, %ki, %nr, %mr"]  # fmt: skip
    else:
        lines.append("%a, %b, %c, %d, %e, %g, %h = transform.einc.reorder %no, %mo, %nt, %mt, %k, %nr, %mr")
    lines += [
        'transform.einc.bind %a to "block.y"',
        'transform.einc.bind %b to "block.x"',
        'transform.einc.bind %c to "thread.y"',
        'transform.einc.bind %d to "thread.x"',
        '%w = transform.einc.cache_write "output0" at %d in "local"',
    ]
    lines += [f'%s{i} = transform.einc.cache_read "{t}" at %e in "shared"' for i, t in enumerate(staged)]
    lines += [f"transform.einc.unroll %h by {rm}", f"transform.einc.unroll %g by {rn}"]
    if ktile and kunroll:
        lines.append(f"transform.einc.unroll %f by {kunroll}")
    return lines


BOTH = ("input0", "input1")
HAND_MATMUL_SPECS: dict[str, dict] = {
    "16x16 tile, 4x4 registers": dict(block=(16, 16), reg=(4, 4)),
    "16x16/4x4, shared inputs, K tile 8": dict(block=(16, 16), reg=(4, 4), ktile=8, staged=BOTH, kunroll=0),
    "32x32 tile, 4x8 registers": dict(block=(32, 32), reg=(4, 8)),
    "64x32 tile, 8x4 registers": dict(block=(64, 32), reg=(8, 4)),
    "32x64 tile, 4x8 registers": dict(block=(32, 64), reg=(4, 8)),
    "64x64 tile, 8x8 registers": dict(block=(64, 64), reg=(8, 8)),
    "32x32/4x8, shared inputs, K tile 16": dict(block=(32, 32), reg=(4, 8), ktile=16, staged=BOTH, kunroll=4),
    "64x64/8x8, shared inputs, K tile 16": dict(block=(64, 64), reg=(8, 8), ktile=16, staged=BOTH, kunroll=4),
    "32x32/4x8, shared input1, K tile 16": dict(block=(32, 32), reg=(4, 8), ktile=16, staged=("input1",), kunroll=4),
    "64x64/8x8, shared input1, K tile 16": dict(block=(64, 64), reg=(8, 8), ktile=16, staged=("input1",), kunroll=4),
    "128x64 tile, 8x1 registers": dict(block=(128, 64), reg=(8, 1)),
    "256x128 tile, 16x1 registers": dict(block=(256, 128), reg=(16, 1)),
}
"""The matmul hand schedules (arguments of `matmul_lines`): the issue's 32x32 work-group tile
with a 4x8 register tile, the classic shapes around it, shared-memory staged variants, and
register tiles one column wide (a work-item per column of its rows: consecutive work-items
along x read consecutive elements, which a CPU runtime that vectorizes across work-items
loads as one vector; added after `einc tune` found that shape fastest on Intel's SYCL CPU
device)."""
HAND_MATMUL = {name: matmul_lines(**spec) for name, spec in HAND_MATMUL_SPECS.items()}
HAND_BATCH_MATMUL = {name: matmul_lines(**spec, batch=True) for name, spec in HAND_MATMUL_SPECS.items()}

# the older names (device_kernels.py's first hand schedules)
REGISTER_TILE = HAND_MATMUL["16x16 tile, 4x4 registers"]
SHARED_TILES = HAND_MATMUL["16x16/4x4, shared inputs, K tile 8"]
HAND_32 = HAND_MATMUL["32x32 tile, 4x8 registers"]


def cross_thread_lines(stmt: str, threads: int, row: str = "N", col: str = "C") -> list[str]:
    """`stmt`'s rows on work-groups (block.x), its reduction over `col` tiled by `threads`
    and the tile bound to the work-items (a cross-thread reduction; consecutive work-items
    read consecutive elements)."""
    p = f"%{stmt}"
    return [f'{p}_n = transform.einc.match stmt "{stmt}" axis "{row}" in %root',
            f'{p}_c = transform.einc.match stmt "{stmt}" axis "{col}" in %root',
            f"{p}_co, {p}_ci = transform.einc.tile {p}_c by {threads}",
            f'transform.einc.bind {p}_n to "block.x"', f'transform.einc.bind {p}_ci to "thread.x"']  # fmt: skip


def private_lines(stmt: str, threads: int, row: str = "N", col: str = "C") -> list[str]:
    """One row of `stmt` per work-item (`threads` per work-group), its accumulator in a
    private register across the reduction."""
    p = f"%{stmt}"
    return [f'{p}_n = transform.einc.match stmt "{stmt}" axis "{row}" in %root',
            f'{p}_c = transform.einc.match stmt "{stmt}" axis "{col}" in %root',
            f"{p}_no, {p}_ni = transform.einc.tile {p}_n by {threads}",
            f"{p}_a, {p}_b, {p}_d = transform.einc.reorder {p}_no, {p}_ni, {p}_c",
            f'transform.einc.bind {p}_a to "block.x"', f'transform.einc.bind {p}_b to "thread.x"',
            f'{p}_w = transform.einc.cache_write "{stmt}" at {p}_b in "local"']  # fmt: skip


def rowwise_lines(stmt: str, threads: int, items: int, row: str = "N", col: str = "C") -> list[str]:
    """An elementwise statement over rows: a row per block.y, `items` consecutive elements
    per work-item, `threads` work-items per work-group along the row."""
    p = f"%{stmt}"
    return [f'{p}_n = transform.einc.match stmt "{stmt}" axis "{row}" in %root',
            f'{p}_c = transform.einc.match stmt "{stmt}" axis "{col}" in %root',
            f"{p}_q, {p}_i = transform.einc.tile {p}_c by {items}", f"{p}_o, {p}_t = transform.einc.tile {p}_q by {threads}",
            f'transform.einc.bind {p}_n to "block.y"', f'transform.einc.bind {p}_o to "block.x"',
            f'transform.einc.bind {p}_t to "thread.x"']  # fmt: skip


HAND_ROWSUM = {**{f"{t} threads per row": cross_thread_lines("output0", t) for t in (16, 32, 64, 128, 256)},
               "a row per work-item, 64 per work-group": private_lines("output0", 64)}  # fmt: skip
"""Row sum hand schedules: cross-thread reductions of several widths, and private accumulators."""
ROW_THREADS = HAND_ROWSUM["64 threads per row"]


def _two_reductions(first: str, second: str) -> dict[str, list[str]]:
    found = {f"{t} threads per row": [*cross_thread_lines(first, t), *cross_thread_lines(second, t),
                                      *rowwise_lines("output0", 64, 4)] for t in (32, 64, 128, 256)}  # fmt: skip
    found["a row per work-item"] = [*private_lines(first, 64), *private_lines(second, 64), *rowwise_lines("output0", 64, 4)]
    return found


HAND_SOFTMAX = _two_reductions("temp0", "temp1")
"""Softmax (max, sum of exponentials, normalise): both reductions cross-thread at several
widths or a row per work-item; the normalisation 4 elements per work-item, 64 per work-group."""
HAND_LAYERNORM = _two_reductions("mean", "var")
"""LayerNorm (mean, variance, normalise): as HAND_SOFTMAX."""


def unrolled_lines(stmt: str, axis: str, by: int) -> list[str]:
    """`stmt`'s `axis` loop (its reduction) unrolled by `by`, nothing bound: the mapping pass
    gives each output element a work-item."""
    p = f"%{stmt}_{axis.lower()}"
    return [f'{p} = transform.einc.match stmt "{stmt}" axis "{axis}" in %root', f"{p}_u = transform.einc.unroll {p} by {by}"]


POPLAR_HANDS: dict[str, dict[str, list[str]]] = {
    "MatMul": {f"K unrolled by {u}": unrolled_lines("output0", "K", u) for u in (4, 8)},
    "BatchMatMul": {f"K unrolled by {u}": unrolled_lines("output0", "K", u) for u in (4, 8)},
    "Softmax": {f"reductions unrolled by {u}": [*unrolled_lines("temp0", "C", u), *unrolled_lines("temp1", "C", u)]
                for u in (4, 8)},
    "LayerNorm": {f"reductions unrolled by {u}": [*unrolled_lines("mean", "C", u), *unrolled_lines("var", "C", u)]
                  for u in (4, 8)},
    "ReduceSum": {f"C unrolled by {u}": unrolled_lines("output0", "C", u) for u in (4, 8)},
}  # fmt: skip
"""Hand schedules for the Poplar harness, by kernel name prefix: the sets above are refused
there (no shared memory; no cross-thread reduction between workers; loops bound to blocks and
threads, or private accumulators, make one vertex on one tile, which the kernel's data
overflow: "needs 3146112 bytes of tile memory per vertex"), so its hand schedules leave the
mapping to the vertex split (an output element per work-item, the kernel cut over the tiles)
and unroll the reductions."""


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
    mm = "MatMul %d^3" % n
    rs = "RowSum %dx%d" % (rows, cols)
    cases = [
        (mm, MATMUL, mm_in, "default schedule", "default", 2.0 * n**3),
        (mm, MATMUL, mm_in, "default mapping", "none", 2.0 * n**3),
        *((mm, MATMUL, mm_in, label, script(lines), 2.0 * n**3) for label, lines in HAND_MATMUL.items()),
        *([(mm, MATMUL, mm_in, "tuned (--tuned)", open(args.tuned).read(), 2.0 * n**3)] if args.tuned else []),
        (rs, ROWSUM, rs_in, "default schedule", "default", 0.0),
        (rs, ROWSUM, rs_in, "default mapping", "none", 0.0),
        *((rs, ROWSUM, rs_in, label, script(lines), 0.0) for label, lines in HAND_ROWSUM.items()),
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
    hands = {*HAND_MATMUL, *HAND_ROWSUM}
    for target in args.targets.split(","):
        for kernel_name in (mm, rs):
            timed = [r for r in out_rows if r[0] == target and r[1] == kernel_name and r[2] in hands and r[3] != "refused"]
            if timed:
                min(timed, key=lambda r: float(r[3]))[2] += " (best hand)"
    print(table(out_rows, ["target", "kernel", "schedule", "ms", "rate", "÷ NumPy", "max rel err"]))


if __name__ == "__main__":
    main()
