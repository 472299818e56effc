"""The shape of CUDA code without a GPU: NVRTC's PTX of the classic SGEMM schedule
(tests/test_gpu_code.py::SGEMM: 128x128 block tiles, 8x8 register tiles, K tiles of 8, both
inputs in shared memory), counted per kernel and in the hot loop (the backward branch whose
body has the most FMAs, the shortest such).

    .venv/bin/python benchmarks/cuda_code_shape.py [--n 1024] [--unroll-k] [--double-buffer] [--source]
    .venv/bin/python benchmarks/cuda_code_shape.py --defaults [--source]

With `--defaults`, the DEFAULT schedule's kernels (no schedule given: einc.schedule.policies.gpu)
of each contraction of tests/test_gpu_default.py::CONTRACTIONS instead (matmul, batch matmul,
transposed A, transposed B, both, 2-d and 1-d convolution), one line per case: the hot loop's
FMAs, shared loads (vector ones), global loads and FMAs per shared load, and the kernel's
cp.async, barriers and vector global loads (a tile staged transposed is read 16 bytes at a
time into registers and stored down its shared column: cp.async cannot transpose); then the
tensor-core instructions of the float16 and bfloat16 default matmuls and the loads of the
innermost loop holding them (tiles staged in shared memory: no global loads).

Reports: kernels, per kernel the global loads (scalar and vector), shared loads, FMAs and
64-bit integer adds/multiplies (address arithmetic included), barriers (bar.sync) and
asynchronous copies (cp.async), and in the hot loop the FMAs per shared load instruction. Needs NVRTC (cuda-python), no GPU.
"""

from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

COUNTED = ("ld.global", "ld.shared", "st.global", "st.shared", "fma", "add.s64", "mul.wide", "mad.lo.s64", "add.s32",
           "bar.sync", "cp.async")


def ptx(source: str, arch: str) -> str:
    from cuda.bindings import nvrtc

    from einc.runtime.cuda import cuda_include_dirs

    err, program = nvrtc.nvrtcCreateProgram(source.encode(), b"kernel.cu", 0, [], [])
    flags = [f"--gpu-architecture={arch}".encode(), *(f"--include-path={d}".encode() for d in cuda_include_dirs())]
    (err,) = nvrtc.nvrtcCompileProgram(program, len(flags), flags)
    if err != nvrtc.nvrtcResult.NVRTC_SUCCESS:
        raise SystemExit(f"NVRTC failed: {err}")
    err, size = nvrtc.nvrtcGetPTXSize(program)
    text = b" " * size
    nvrtc.nvrtcGetPTX(program, text)
    nvrtc.nvrtcDestroyProgram(program)
    return text.rstrip(b"\0 ").decode()


def counts(lines: list[str]) -> dict[str, int]:
    found = dict.fromkeys(COUNTED, 0) | {"ld.global.v": 0, "ld.shared.v": 0, "st.global.v": 0}
    for line in lines:
        words = line.split()
        if not words:
            continue
        op = words[1] if words[0].startswith("@") and len(words) > 1 else words[0]
        for name in COUNTED:
            if op.startswith(name):
                found[name] += 1
        for space in ("global", "shared"):
            if re.match(rf"ld\.{space}(\.nc)?\.v\d", op):
                found[f"ld.{space}.v"] += 1
        if re.match(r"st\.global\.v\d", op):
            found["st.global.v"] += 1
    return found


Counts = dict[str, int]


def kernel_shapes(text: str) -> list[tuple[str, Counts, Counts | None, Counts | None]]:
    """Per kernel of a PTX text: its name, its counts, the counts of its hot loop (the
    backward branch whose body has the most FMAs, the shortest such) and of the loop around
    it (the shortest backward branch enclosing it: a K-tile loop); None where there is none."""
    shapes: list[tuple[str, Counts, Counts | None, Counts | None]] = []
    for body in re.split(r"\n(?=\.visible \.entry)", text)[1:]:
        head = re.match(r"\.visible \.entry (\w+)", body)
        name = head.group(1) if head else "?"
        rows = body.splitlines()
        labels = {m.group(1): i for i, row in enumerate(rows) if (m := re.match(r"\s*(\$L__\w+):", row))}
        loops = [(labels[m.group(1)], i) for i, row in enumerate(rows)
                 if (m := re.search(r"bra(?:\.uni)?\s+(\$L__\w+);", row)) and labels.get(m.group(1), i) < i]  # fmt: skip
        hot = around = None
        if loops:
            lo, hi = max(loops, key=lambda r: (counts(rows[r[0] : r[1]])["fma"], r[0] - r[1]))
            hot = counts(rows[lo:hi])
            outer = [r for r in loops if r[0] <= lo and hi <= r[1] and r != (lo, hi)]
            if outer:
                a, b = min(outer, key=lambda r: r[1] - r[0])
                around = counts(rows[a:b])
        shapes.append((name, counts(rows), hot, around))
    return shapes


def defaults(arch: str, show: bool) -> None:
    import einc
    from tests.test_gpu_default import CONTRACTIONS, mma_loop

    print(f"{'case':<12} {'fma':>5} {'ld.shared':>9} {'(vector)':>8} {'ld.global':>9} {'fma/ld.shared':>13}  cp.async bar.sync"
          "  ld.global.v (kernel)")
    for case, (ir, shapes) in CONTRACTIONS.items():
        dtype = "float32"
        kernel = einc.compile(ir, {k: {"dtype": dtype, "shape": v} for k, v in shapes.items()}, target="cuda")
        if show:
            print(kernel.source)
        for _name, found, hot, _around in kernel_shapes(ptx(kernel.source, arch)):
            if hot is None or hot["fma"] == 0:
                continue
            ratio = hot["fma"] / max(1, hot["ld.shared"])
            print(f"{case:<12} {hot['fma']:>5} {hot['ld.shared']:>9} {hot['ld.shared.v']:>8} {hot['ld.global']:>9} "
                  f"{ratio:>13.1f}  {found['cp.async']:>8} {found['bar.sync']:>8}  {found['ld.global.v']:>20}")
    half = "output0[N, M] +=! input0[N, K].cast(`float32`) * input1[K, M].cast(`float32`)"
    for dtype in ("float16", "bfloat16"):
        shape = {"dtype": dtype, "shape": [512, 512]}
        kernel = einc.compile(half, {"input0": shape, "input1": shape}, target="cuda")
        text = ptx(kernel.source, arch)
        hot = mma_loop(text)
        print(f"{dtype} matmul 512^3 (accumulated in float32): kernels {text.count('.entry')}, mma.sync instructions "
              f"{text.count('mma.sync')}, fma.rn.f32 {len(re.findall(r'fma[.]rn[.]f32', text))}, local memory "
              f"{'yes' if '.local' in text else 'none'}; the innermost loop holding mma.sync: "
              f"{hot.get('mma.sync', 0)} mma.sync, {hot.get('ldmatrix', 0)} ldmatrix, {hot.get('ld.shared', 0)} ld.shared, "
              f"{hot.get('ld.global', 0)} ld.global, {hot.get('st.global', 0)} st.global")


def main() -> None:
    import einc
    from tests.test_device_differential import script
    from tests.test_gpu_code import SGEMM

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=1024)
    parser.add_argument("--arch", default="compute_90")
    parser.add_argument("--unroll-k", action="store_true", help="also unroll the K tile loop (by 8)")
    parser.add_argument("--source", action="store_true", help="print the CUDA source")
    parser.add_argument("--double-buffer", action="store_true", help="double buffer both shared tiles")
    parser.add_argument("--defaults", action="store_true", help="the default kernels of the contraction cases")
    args = parser.parse_args()
    if args.defaults:
        defaults(args.arch, args.source)
        return
    lines = [*SGEMM, "transform.einc.unroll %f by 8"] if args.unroll_k else list(SGEMM)
    if args.double_buffer:
        lines += ["transform.einc.double_buffer %s0", "transform.einc.double_buffer %s1"]
    f32 = {"dtype": "float32", "shape": [args.n, args.n]}
    kernel = einc.compile("output0[N, M] +=! input0[N, K] * input1[K, M]", {"input0": f32, "input1": f32},
                          target="cuda", schedule=script(lines))  # fmt: skip
    source = kernel.source
    if args.source:
        print(source)
    text = ptx(source, args.arch)
    for name, found, hot, around in kernel_shapes(text):
        print(f"{name}: {found}")
        if hot is not None:
            print(f"  hot loop: {hot}; FMAs per shared load {hot['fma'] / max(1, hot['ld.shared']):.1f}")
        if around is not None:
            print(f"  the loop around it: barriers {around['bar.sync']}, global loads {around['ld.global']} "
                  f"({around['ld.global.v']} vector), cp.async {around['cp.async']}")

if __name__ == "__main__":
    main()
