"""AntaresIR.md's programs at their published sizes on the Poplar harness (einc's CPU mirror
of the Poplar API): for each, how its kernels spread over tiles (ranges or boxes of points,
vertices, bytes per vertex), the compile, build and run times, and the largest error
against NumPy in float64; a refusal is printed as such.

    .venv/bin/python benchmarks/poplar_antares.py [--only matmul,avgpool]

Times are one run each on a shared machine (noisy); the harness runs every vertex on the
CPU one after another, so they say nothing of an IPU's speed.
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable
from typing import Any

import numpy as np

from einc.compiler.driver import Compilation
from einc.runtime.arrays import poisoned
from einc.errors import EincError


def f32(*shape: int) -> dict[str, Any]:
    return {"dtype": "float32", "shape": list(shape)}


def _winograd() -> str:
    n, ci, h, w, co = 16, 64, 32, 32, 256
    nh, nw = (h - 1) // 2, (w - 1) // 2
    p = n * nh * nw
    return (
        "helper4x3[N, M] = const(1.0).when([N * 3 + M == 0, N * 3 + M == 11], const(0.0).when([N * 3 + M == 1, "
        "N * 3 + M == 2, N * 3 + M == 9, N * 3 + M == 10], const(-0.5).when([N * 3 + M == 4], 0.5, "
        "merge_op=`any`), merge_op=`any`), merge_op=`any`) where N in 4, M in 3; transform_filter[EPS, NU, CI, CO] "
        "+=! ((input1[CO, CI, Rkh, Rkw] * helper4x3[EPS, Rkh] * helper4x3[NU, Rkw])); input_tile[C, B, EPS, NU] = "
        f"input0[B // ({nh} * {nw}), C, B // {nw} % {nh} * 2 + EPS, B % {nw} * 2 + NU] where C in {ci}, B in {p}, "
        "EPS in 4, NU in 4; helper4x4[N, M] = const(1.0).when([N * 4 + M == 0, N * 4 + M == 6, N * 4 + M == 9, "
        "N * 4 + M == 10, N * 4 + M == 15], const(-1.0).when([N * 4 + M == 5, N * 4 + M == 7, N * 4 + M == 8], "
        "0.0, merge_op=`any`), merge_op=`any`) where N in 4, M in 4; transform_input[EPS, NU, C, B] +=! "
        "input_tile[C, B, K1, K2] * helper4x4[K1, EPS] * helper4x4[K2, NU] where EPS in 4, NU in 4, "
        f"C in {ci}, B in {p}; batch_gemm[EPS, NU, K, B] +=! transform_filter[EPS, NU, CI, K] * "
        f"transform_input[EPS, NU, CI, B] where EPS in 4, NU in 4, K in {co}, B in {p}; helper4x2[N, M] = "
        "const(0.0) .when([N * 2 + M == 1, N * 2 + M == 6], const(-1.0).when([N * 2 + M == 3], 1.0, "
        "merge_op=`any`), merge_op=`any`) where N in 4, M in 2; inverse[K, B, VH, VW] +=! batch_gemm[K1, K2, K, B] "
        f"* helper4x2[K1, VH] * helper4x2[K2, VW] where K in {co}, B in {p}, VH in 2, VW in 2; "
        f"output0[N, K, H, W] = inverse[K, N * {nh} * {nw} + H // 2 * {nw} + W // 2, H % 2, W % 2] "
        f"where N in {n}, K in {co}, H in {h - 2}, W in {w - 2}"
    )


def _conv(x: np.ndarray, w: np.ndarray) -> np.ndarray:
    _, _, kh, kw = w.shape
    ho, wo = x.shape[2] - kh + 1, x.shape[3] - kw + 1
    return sum(np.einsum("nchw,fc->nfhw", x[:, :, i:i + ho, j:j + wo], w[:, :, i, j], optimize=True)
               for i in range(kh) for j in range(kw))  # fmt: skip


Expect = Callable[[dict[str, np.ndarray]], np.ndarray]

PROGRAMS: dict[str, tuple[str, dict[str, Any], Expect]] = {
    "matmul": ("output0[N, M] +=! input0[N, K] * input1[K, M]", {"input0": f32(1024, 512), "input1": f32(512, 512)},
               lambda x: x["input0"] @ x["input1"]),
    "batchmatmul": ("output0[B, N, M] +=! input0[B, N, K] * input1[B, K, M]",
                    {"input0": f32(3, 1024, 512), "input1": f32(3, 512, 512)}, lambda x: x["input0"] @ x["input1"]),
    "transposed": ("output0[F, P] +=! input0[C, P] * input1[C, F]", {"input0": f32(16, 16384), "input1": f32(16, 64)},
                   lambda x: x["input1"].T @ x["input0"]),
    "convnopad": (("output0[N, F, HO, WO] +=! input0[N, C, HO + KH, WO + KW] * input1[F, C, KH, KW] where HO in 30, "
                   "WO in 30"), {"input0": f32(16, 64, 32, 32), "input1": f32(256, 64, 3, 3)},
                  lambda x: _conv(x["input0"], x["input1"])),
    "winograd": (_winograd(), {"input0": f32(16, 64, 32, 32), "input1": f32(256, 64, 3, 3)},
                 lambda x: _conv(x["input0"], x["input1"])),
    "take": ("output0[F, C] = input0[input1[F], C]",
             {"input0": f32(30528, 1024), "input1": {"dtype": "int32", "shape": [3072]}},
             lambda x: x["input0"][x["input1"]]),
    "avgpool": (("temp0[NC, HO, WO] +=! input0[NC, HO * 3 + KH, WO * 3 + KW] where HO in 85, WO in 85, KW in 3, "
                 "KH in 3; output0[NC, HO, WO] = temp0[NC, HO, WO] * 0.111111"), {"input0": f32(1024, 255, 255)},
                lambda x: x["input0"].reshape(1024, 85, 3, 85, 3).sum(axis=(2, 4)) * np.float64(np.float32(0.111111))),
}


def run(name: str) -> None:
    ir, inputs, expect = PROGRAMS[name]
    start = time.perf_counter()
    comp = Compilation(ir, "<antares>", inputs, None, "poplar", None)
    try:
        comp.run_until("source")
    except EincError as e:
        print(f"{name}: refused after {time.perf_counter() - start:.1f} s: {str(e).splitlines()[0]}")
        return
    compiled = time.perf_counter() - start
    for kernel in comp.results["target"].ops:
        split = kernel.attributes.get("egpu.tile_split")
        if split is not None:
            d = split.data  # type: ignore[attr-defined]
            form = f"boxes of {list(d.tile)} in {list(d.shape)}" if d.in_boxes else f"ranges of {d.chunk} points"
            form = form if d.split else "one vertex"
            print(f"  {kernel.sym_name.data}: {d.vertices} vertices, {d.bytes} bytes each, {form}")  # type: ignore[attr-defined]
    rng = np.random.default_rng(0)
    values = {k: rng.uniform(-2, 2, spec["shape"]).astype(np.float32) for k, spec in inputs.items() if spec["dtype"] == "float32"}
    start = time.perf_counter()
    runner = comp.target_obj.build(comp.results["source"], comp.results["target"])
    built = time.perf_counter() - start
    outputs = {o.name: poisoned(o.shape, o.dtype) for o in comp.program.outputs}
    start = time.perf_counter()
    runner(values, outputs)
    ran = time.perf_counter() - start
    reference = expect({k: v.astype(np.float64) for k, v in values.items()})
    error = float(np.abs(outputs["output0"].astype(np.float64) - reference).max())
    print(f"{name}: compile {compiled:.1f} s, build {built:.1f} s, run {ran:.1f} s, max abs error {error:.2e}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", default=",".join(PROGRAMS), help="comma-separated: " + ", ".join(PROGRAMS))
    for name in parser.parse_args().only.split(","):
        run(name)


if __name__ == "__main__":
    main()
