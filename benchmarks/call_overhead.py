"""The cost of calling an einc kernel, beside NumPy in the same run (issue 15, item 1).

    .venv/bin/python benchmarks/call_overhead.py [--samples 41] [--sample-ms 20] [--threads 1]

Rows, per problem (a tiny elementwise add of 4 floats: the call overhead; an add of 512K
floats: the work):
- einc `kernel(**arrays)` (outputs allocated) and `kernel(**arrays, out=c)`, through the C
  trampoline (einc.runtime.fastcall);
- the same call through `ctypes_call` (the trampoline's fallback: the same checks in Python,
  a ctypes function with prebuilt argtypes, each array's address read from Python), and
  through the general Python path (what DLPack objects and copies take);
- debug mode (outputs NaN-filled before every run, as the test suite runs);
- torch tensors in and out (when torch is installed);
- NumPy: `np.add(a, b, out=c)` and `a + b`.

The rows of one problem are sampled in turn (row 1, row 2, ..., row 1, ...), each sample
looping the call for about 20 ms, so a change of machine load touches them all alike; each
row reports the median and the best of its samples, and both against `np.add(a, b, out=c)`
(the best sample: the one least disturbed on a shared machine).
"""

from __future__ import annotations

import argparse
import os
import statistics
import time
import sys
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "benchmarks"))
sys.path.insert(0, str(ROOT))

import numpy as np  # noqa: E402

from common import table  # noqa: E402

IR = "output0[N] = input0[N] + input1[N]"


def rows_for(n: int) -> list[tuple[str, Callable[[], object]]]:
    import einc
    from einc.runtime.c import CtypesSpec, ctypes_call
    from einc.compiler.kernel import Kernel

    spec = {"input0": {"dtype": "float32", "shape": [n]}, "input1": {"dtype": "float32", "shape": [n]}}
    kernel = einc.compile(IR, spec, use_records=False, debug=False)
    assert getattr(kernel._fast, "__module__", None) == "_einc_fastcall", "the C trampoline could not be built"
    owner = getattr(kernel._runner, "__self__")
    lean = Kernel(kernel.source, kernel.program, kernel._runner, "c", debug=False)
    lean._fast = ctypes_call  # the fallback: prebuilt argtypes, addresses read from Python
    lean._spec = CtypesSpec(owner._function, [(b.name, b.dtype, b.shape, b.is_output) for b in owner.signature.buffers])
    slow = Kernel(kernel.source, kernel.program, kernel._runner, "c", debug=False)
    slow._fast = None  # the general Python path
    debug = einc.compile(IR, spec, use_records=False, debug=True)
    rng = np.random.default_rng(0)
    a, b = (rng.uniform(0.5, 2.0, n).astype(np.float32) for _ in range(2))
    c = np.empty(n, np.float32)
    np.testing.assert_allclose(kernel(input0=a, input1=b)["output0"], a + b, rtol=1e-6)
    rows: list[tuple[str, Callable[[], object]]] = [
        ("einc kernel(**arrays)", lambda: kernel(input0=a, input1=b)),
        ("einc kernel(**arrays, out=c)", lambda: kernel(input0=a, input1=b, out=c)),
        ("einc via ctypes_call, kernel(**arrays)", lambda: lean(input0=a, input1=b)),
        ("einc via ctypes_call, out=c", lambda: lean(input0=a, input1=b, out=c)),
        ("einc Python path (no fast call)", lambda: slow(input0=a, input1=b)),
        ("einc debug=True (poisoned outputs)", lambda: debug(input0=a, input1=b)),
    ]
    try:
        import torch
    except ImportError:
        pass
    else:
        ta, tb, tc = torch.from_numpy(a), torch.from_numpy(b), torch.empty(n)
        torch.testing.assert_close(kernel(input0=ta, input1=tb)["output0"], ta + tb)
        rows += [
            ("einc, torch tensors in/out", lambda: kernel(input0=ta, input1=tb)),
            ("einc, torch tensors, out=tc", lambda: kernel(input0=ta, input1=tb, out=tc)),
            ("torch.add(ta, tb, out=tc)", lambda: torch.add(ta, tb, out=tc)),
        ]
    rows += [("numpy np.add(a, b, out=c)", lambda: np.add(a, b, out=c)), ("numpy a + b", lambda: a + b)]
    return rows


def run(n: int, samples_per_row: int, sample_s: float) -> str:
    """Every row sampled in turn, `samples_per_row` times: each sample loops the call for
    about `sample_s` seconds (the loop count calibrated once per row)."""
    rows = rows_for(n)
    inner: dict[str, int] = {}
    for name, fn in rows:
        fn()
        start = time.perf_counter()
        fn()
        once = time.perf_counter() - start
        inner[name] = max(1, int(sample_s / max(once, 1e-9)))
    samples: dict[str, list[float]] = {name: [] for name, _ in rows}
    for _ in range(samples_per_row):
        for name, fn in rows:
            count = inner[name]
            start = time.perf_counter()
            for _ in range(count):
                fn()
            samples[name].append((time.perf_counter() - start) / count)
    medians = {name: statistics.median(times) for name, times in samples.items()}
    best = {name: min(times) for name, times in samples.items()}
    base, base_best = medians["numpy np.add(a, b, out=c)"], best["numpy np.add(a, b, out=c)"]
    return table(
        [[name, f"{medians[name] * 1e6:.3f}", f"{medians[name] / base:.2f}x", f"{best[name] * 1e6:.3f}",
          f"{best[name] / base_best:.2f}x"] for name, _ in rows],  # fmt: skip
        ["call", "µs per call (median)", "median vs np.add(out=)", "µs (best sample)", "best vs np.add(out=)"],
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--samples", type=int, default=41, help="samples per row (rows sampled in turn)")
    parser.add_argument("--sample-ms", type=float, default=20.0, help="each sample loops the call this long")
    parser.add_argument("--sizes", default="4,524288", help="elements of the adds (comma-separated)")
    parser.add_argument("--threads", type=int, default=None,
                        help="OMP_NUM_THREADS for einc's kernels (and torch): default, the OpenMP runtime's choice")  # fmt: skip
    args = parser.parse_args()
    if args.threads is not None:  # before any OpenMP runtime starts (einc's kernels, torch)
        os.environ["OMP_NUM_THREADS"] = str(args.threads)
    print(f"OMP_NUM_THREADS={os.environ.get('OMP_NUM_THREADS', '(unset)')}, {os.cpu_count()} CPUs, "
          f"load average {os.getloadavg()[0]:.1f}")
    for n in (int(s) for s in args.sizes.split(",")):
        print(f"\nelementwise add of {n} float32 ({args.samples} samples per row of ~{args.sample_ms:g} ms, rows in turn)\n")
        print(run(n, args.samples, args.sample_ms / 1e3))


if __name__ == "__main__":
    main()
