"""How long `einc.semantics.egpu.run_lowered` takes on each module a target's pipeline passes through.

    PYTHONPATH=. python benchmarks/interp_egpu.py [--targets c,cuda,...] [--repeat 3]

For each program (a 16x16x16 matmul, an 8x32 softmax, a 2x4x7x7 convolution with a 5x5
window) and target (default schedule): the scheduled loops and the module after each pass of
the target's `pipeline`, each run `--repeat` times on fresh random inputs; prints the best
time per module (milliseconds) and the slowest module per target, and checks every result
against the oracle (a mismatch is printed, not timed away).
"""

from __future__ import annotations

import argparse
import re
import time

import numpy as np

from einc.compiler.driver import Compilation
from einc.semantics.compare import max_error, random_inputs, tolerance
from einc.semantics.egpu import run_lowered
from einc.compiler.registry import run_pipeline
from einc.semantics.reference import run_reference

PROGRAMS = {
    "matmul 16x16x16": ("output0[N, M] +=! input0[N, K] * input1[K, M]",
                        {"input0": [16, 16], "input1": [16, 16]}, None),
    "softmax 8x32": (("mx[N] >=! input0[N, C]; sm[N] +=! (input0[N, C] - mx[N]).call(`exp`); "
                      "output0[N, C] = (input0[N, C] - mx[N]).call(`exp`) / sm[N]"), {"input0": [8, 32]}, ["output0"]),
    "conv 2x4x7x7 (5x5, pad 2)": (
        ("output0[N, F, HO, WO] +=! input0[N, C, HO + KH - 2, WO + KW - 2].when([HO + KH >= 2, HO + KH < 9, "
         "WO + KW >= 2, WO + KW < 9], 0.0) * input1[F, C, KH, KW] where HO in 7, WO in 7"),
        {"input0": [2, 4, 7, 7], "input1": [6, 4, 5, 5]}, None),
}  # fmt: skip
TARGETS = ("c", "opencl", "cuda", "hip", "hlsl", "sycl", "poplar")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--targets", default=",".join(TARGETS))
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    for name, (text, shapes, extra) in PROGRAMS.items():
        inputs_dict = {k: {"dtype": "float32", "shape": s} for k, s in shapes.items()}
        print(f"== {name}")
        for target in args.targets.split(","):
            comp = Compilation(text, "<bench>", inputs_dict, extra, target, use_records=False)
            module = comp.module("scheduled").clone()
            steps = ["(scheduled)", *[p for p in re.split(r",(?![^{]*})", comp.target_obj.pipeline) if p]]
            times: list[tuple[float, str]] = []
            for step in steps:
                if step != "(scheduled)":
                    run_pipeline(comp.ctx, module, step)
                best = float("inf")
                for r in range(args.repeat):
                    inputs = random_inputs(comp.program, np.random.default_rng(r))
                    start = time.perf_counter()
                    got = run_lowered(module, inputs, target=target)
                    best = min(best, time.perf_counter() - start)
                    want = run_reference(comp.module("ein"), inputs)
                    for out, w in want.items():
                        err = max_error(got[out], w)
                        if not err <= tolerance(str(got[out].dtype)):
                            print(f"   MISMATCH {target} after {step}: {out} error {err:.3g}")
                times.append((best, step))
            per_step = " ".join(f"{t * 1e3:.0f}" for t, _ in times)
            slowest = max(times)
            print(f"  {target:7s} ms per module: {per_step}   (slowest {slowest[0] * 1e3:.0f} ms after {slowest[1]})")


if __name__ == "__main__":
    main()
