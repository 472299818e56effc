"""Compile latency per program of the conformance suite (every AntaresIR.md example), per stage.

    .venv/bin/python benchmarks/compile_latency.py

Stages: frontend (parse + ein IR), lowering to loops, C source, C compiler (cold, no cache).
"""

from __future__ import annotations

import os
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "benchmarks"))
sys.path.insert(0, str(ROOT))

from common import table  # noqa: E402


def main() -> None:
    os.environ["EINC_CACHE_DIR"] = tempfile.mkdtemp(prefix="einc-bench-cache-")
    import einc
    from einc import driver
    from tests.programs import PROGRAMS

    rows = []
    totals = [0.0] * 4
    for prog in PROGRAMS:
        t0 = time.perf_counter()
        driver.lower_to_stage(prog.ir, prog.input_dict, prog.extra_outputs, stage="ein")
        t1 = time.perf_counter()
        driver.lower_to_stage(prog.ir, prog.input_dict, prog.extra_outputs, stage="loops")
        t2 = time.perf_counter()
        kernel_src = driver.lower_to_stage(prog.ir, prog.input_dict, prog.extra_outputs, stage="source")
        t3 = time.perf_counter()
        einc.compile(prog.ir, prog.input_dict, extra_outputs=prog.extra_outputs)
        t4 = time.perf_counter()
        # each later stage re-runs the earlier ones: report the increments
        stage = [t1 - t0, (t2 - t1) - (t1 - t0), (t3 - t2) - (t2 - t1), (t4 - t3) - (t3 - t2)]
        totals = [a + max(b, 0.0) for a, b in zip(totals, stage)]
        rows.append([prog.name, *(f"{max(s, 0.0) * 1e3:.1f}" for s in stage), f"{(t4 - t3) * 1e3:.0f}", str(len(str(kernel_src).splitlines()))])
    rows.append(["total", *(f"{t * 1e3:.0f}" for t in totals), "", ""])
    print("# compile latency (ms)")
    print(table(rows, ["program", "frontend", "+loops", "+C source", "+cc build", "einc.compile total", "C lines"]))


if __name__ == "__main__":
    main()
