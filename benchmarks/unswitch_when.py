"""Same-process interleaved comparison of a padded 3x3 convolution (float32, pad 1) with its
padded read's `.when` left in the column loops (`guarded`: `einc-unswitch{when=false}`, what
the pass did before) against the loops versioned on the row test (`unswitched`: the pass
as it is, einc/passes/unswitch.py), per target: the default schedule on the device targets
(OpenCL on PoCL, SYCL, Poplar's CPU harness), and on C a schedule that reads the input
directly (no framed pack: WO tiled by 8, what tuner-sampled schedules without the pack do).

    env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE OMP_NUM_THREADS=1 PYTHONPATH=. \\
        .venv/bin/python benchmarks/unswitch_when.py [--rounds 9] [--targets c,opencl] [NxCxHxF...]

Every kernel is checked against NumPy (float64) first; then each round calls each variant
once (the order reversed every other round), and the medians of the call's wall time and of
the process's CPU time are printed with the speedup over `guarded`. The load average is
printed before and after: the machine is shared, only the ratios of one run mean anything.
"""

from __future__ import annotations

import os
import statistics
import sys
import time

import numpy as np

from einc.compiler.driver import Compilation

CONV = (
    "output0[N, F, HO, WO] +=! (input0[N, C, HO + KH - 1, WO + KW - 1].when("
    "[HO + KH - 1 >= 0, HO + KH - 1 < {h}, WO + KW - 1 >= 0, WO + KW - 1 < {h}], 0.0) * input1[F, C, KH, KW]) "
    "where HO in {h}, WO in {h}"
)
C_SCHEDULE = (
    "builtin.module {\n  transform.named_sequence @__transform_main(%root: !transform.any_op) {\n"
    '    %wo = transform.einc.match stmt "output0" axis "WO" in %root\n'
    "    %o, %i = transform.einc.tile %wo by 8\n    transform.yield\n  }\n}\n"
)


def build(target: str, shape: tuple[int, ...], guarded: bool):  # noqa: ANN201 (a Kernel)
    n, c, h, f = shape
    inputs = {"input0": {"dtype": "float32", "shape": [n, c, h, h]}, "input1": {"dtype": "float32", "shape": [f, c, 3, 3]}}
    comp = Compilation(CONV.format(h=h), "<unswitch-ab>", inputs, None, target, C_SCHEDULE if target == "c" else None)
    if guarded:
        base = comp.target_obj
        pipeline = base.pipeline.replace("einc-unswitch,", "einc-unswitch{when=false},")
        assert pipeline != base.pipeline
        comp.target_obj = type(f"Guarded{base.__name__}", (base,), {"pipeline": pipeline})
    comp.run_until("source")
    return comp, comp.kernel()


def reference(x: np.ndarray, w: np.ndarray) -> np.ndarray:
    n, c, h, _ = x.shape
    p = np.pad(x.astype(np.float64), ((0, 0), (0, 0), (1, 1), (1, 1)))
    out = np.zeros((n, w.shape[0], h, h))
    for kh in range(3):
        for kw in range(3):
            out += np.einsum("nchw,fc->nfhw", p[:, :, kh:kh + h, kw:kw + h], w[:, :, kh, kw].astype(np.float64))
    return out


def main() -> None:
    argv = sys.argv[1:]
    rounds, targets = 9, ["c", "opencl"]
    if "--rounds" in argv:
        at = argv.index("--rounds")
        rounds = int(argv[at + 1])
        del argv[at:at + 2]
    if "--targets" in argv:
        at = argv.index("--targets")
        targets = argv[at + 1].split(",")
        del argv[at:at + 2]
    shapes = [tuple(int(x) for x in s.split("x")) for s in argv] or [(1, 32, 28, 32)]
    print(f"load average {os.getloadavg()[0]:.2f} {os.getloadavg()[1]:.2f}")
    rng = np.random.default_rng(0)
    for target in targets:
        for shape in shapes:
            n, c, h, f = shape
            x = rng.uniform(-2, 2, (n, c, h, h)).astype(np.float32)
            w = rng.uniform(-2, 2, (f, c, 3, 3)).astype(np.float32)
            want = reference(x, w)
            kernels = {}
            for name, guarded in (("guarded", True), ("unswitched", False)):
                comp, kernel = build(target, shape, guarded)
                got = kernel(input0=x, input1=w)["output0"]
                np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-3)
                kernels[name] = kernel
            times: dict[str, list[tuple[float, float]]] = {name: [] for name in kernels}
            for r in range(rounds):
                for name in list(kernels) if r % 2 == 0 else list(kernels)[::-1]:
                    wall, cpu = time.perf_counter(), time.process_time()
                    for _ in range(5):
                        kernels[name](input0=x, input1=w)
                    times[name].append(((time.perf_counter() - wall) / 5, (time.process_time() - cpu) / 5))
            med = {name: (statistics.median(a for a, _ in t), statistics.median(b for _, b in t)) for name, t in times.items()}
            g = med["guarded"]
            shown = ", ".join(f"{name} {a * 1e3:.2f} ms wall / {b * 1e3:.2f} ms cpu ({g[0] / a:.2f}x wall, {g[1] / b:.2f}x cpu)"
                              for name, (a, b) in med.items())  # fmt: skip
            print(f"{target} {'x'.join(map(str, shape))}: equal to NumPy; {shown} ({rounds} rounds x 5 calls, medians)")
    print(f"load average {os.getloadavg()[0]:.2f} {os.getloadavg()[1]:.2f}")


if __name__ == "__main__":
    main()
