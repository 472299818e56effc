"""Compile time against program size: a chain of N elementwise statements, per stage.

    .venv/bin/python benchmarks/compile_scaling.py [--sizes 50,100,200,400,1000,2000] [--target c]

The program is `temp0[N] = input0[N] + 1.0`, `temp{k}[N] = temp{k-1}[N] + input0[N]`, ...,
`output0[N] = temp{K}[N] * 2.0`; the C default schedule fuses the whole chain into one loop.
Stages are the driver's (parse+ein, loops, scheduled, target, source); `scheduled` is split
into building the default schedule (`policy`) and applying it (`apply`). The last column is
the time per statement; a compiler linear in program size keeps it flat as N grows.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "benchmarks"))
sys.path.insert(0, str(ROOT))

from common import table  # noqa: E402

COLUMNS = ("ein", "loops", "policy", "apply", "target", "source")


def chain_program(statements: int, length: int = 1024) -> str:
    """A `.ein` program of `statements` elementwise statements, each reading the previous."""
    assert statements >= 2
    lines = [f"input input0: float32[{length}]", "temp0[N] = input0[N] + 1.0"]
    for k in range(1, statements - 1):
        lines.append(f"temp{k}[N] = temp{k - 1}[N] + input0[N]")
    lines.append(f"output0[N] = temp{statements - 2}[N] * 2.0")
    return "\n".join(lines) + "\n"


def stage_seconds(statements: int, target: str = "c") -> dict[str, float]:
    """Seconds per stage compiling a chain of `statements` statements to source text."""
    from einc.driver import Compilation
    from einc.schedule import resolve_schedule

    comp = Compilation(chain_program(statements), f"chain{statements}.ein", target=target)
    comp.run_until("loops")
    loops = comp.results["loops"]
    start = time.perf_counter()
    schedule = resolve_schedule(None, target, loops)
    policy = time.perf_counter() - start
    comp.schedule = schedule if schedule is not None else "none"
    comp.run_until("source")
    seconds = dict(comp.seconds)
    seconds["policy"] = policy
    seconds["apply"] = seconds.pop("scheduled")
    return seconds


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", default="50,100,200,400,1000,2000")
    parser.add_argument("--target", default="c")
    args = parser.parse_args()
    rows = []
    for n in (int(s) for s in args.sizes.split(",")):
        seconds = stage_seconds(n, args.target)
        total = sum(seconds[c] for c in COLUMNS)
        rows.append([str(n), *(f"{seconds[c]:.2f}" for c in COLUMNS), f"{total:.2f}", f"{total / n * 1e3:.2f}"])
        print(f"{n} statements: {total:.2f} s", file=sys.stderr, flush=True)
    print(f"# compile time in s per stage, target {args.target}, elementwise chains")
    print(table(rows, ["statements", *COLUMNS, "total", "ms/stmt"]))


if __name__ == "__main__":
    main()
