"""Compile latency per program of the conformance suite (every AntaresIR.md example), per stage.

    .venv/bin/python benchmarks/compile_latency.py [--target c]

Stages are the driver's (ein, loops, scheduled, target, source) plus the target's build
(the C compiler, with an empty cache so every build is cold).
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "benchmarks"))
sys.path.insert(0, str(ROOT))

from common import table  # noqa: E402

COLUMNS = ("ein", "loops", "scheduled", "target", "source", "build")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--target", default="c")
    args = parser.parse_args()
    os.environ["EINC_CACHE_DIR"] = tempfile.mkdtemp(prefix="einc-bench-cache-")
    from einc.compiler.driver import Compilation
    from tests.programs import PROGRAMS

    rows, totals = [], []
    for prog in PROGRAMS:
        comp = Compilation(prog.ir, prog.name, prog.input_dict, prog.extra_outputs, args.target)
        comp.kernel()
        ms = [comp.seconds.get(c, 0.0) * 1e3 for c in COLUMNS]
        totals.append(sum(ms))
        rows.append([prog.name, *(f"{m:.1f}" for m in ms), f"{sum(ms):.0f}"])
    print(f"# compile latency in ms, target {args.target}, {len(rows)} programs")
    print(table(rows, ["program", *COLUMNS, "total"]))
    print(
        f"\nmedian total {statistics.median(totals):.0f} ms, "
        f"max {max(totals):.0f} ms, sum {sum(totals) / 1e3:.1f} s"
    )


if __name__ == "__main__":
    main()
