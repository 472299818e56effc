"""Compile time against program size: a chain of N statements, per stage.

    .venv/bin/python benchmarks/compile_scaling.py [--sizes 100,200,500,1000,2000] [--target c]
        [--kind elementwise|mixed] [--repeat 3]

`elementwise`: `temp0[N] = input0[N] + 1.0`, `temp{k}[N] = temp{k-1}[N] + input0[N]`, ...,
`output0[N] = temp{K}[N] * 2.0`; the C default schedule fuses the whole chain into one loop.
`mixed` (tests/default_schedule_golden.py `mixed_chain_program`): over a 64 x 256 matrix,
elementwise steps with a row reduction every tenth statement (the next one subtracting it:
a normalisation) and a contraction with a 256 x 256 input every twentieth.
Stages are the driver's (ein: parsing and the ein module; loops; scheduled; target; source);
`scheduled` is split into building the default schedule (`policy`) and applying it
(`apply`: with the default schedule, taking the payload the policy transformed as it built
the schedule). Times are the process's CPU time (the machine may be shared), each size
compiled after a collection of the garbage the compiles before left. The last column is the
time per statement: a compiler linear in program size keeps it flat as N grows; a second
table gives each stage's time per statement and its ratio, largest size over smallest.
"""

from __future__ import annotations

import argparse
import gc
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "benchmarks"))
sys.path.insert(0, str(ROOT))

from common import table

from tests.default_schedule_golden import chain_program, mixed_chain_program

COLUMNS = ("ein", "loops", "policy", "apply", "target", "source")


def stage_seconds(statements: int, target: str = "c", kind: str = "elementwise") -> dict[str, float]:
    """CPU seconds per stage compiling a chain of `statements` statements to source text
    (process time: the machine may be shared, and every stage runs on one thread)."""
    from einc.compiler.driver import Compilation, fewer_collections
    from einc.schedule.default import default_schedule
    from einc.targets import get_target

    program = chain_program(statements) if kind == "elementwise" else mixed_chain_program(statements)
    comp = Compilation(program, f"chain{statements}.ein", target=target, use_records=False)
    seconds: dict[str, float] = {}

    def timed(name: str, fn: Callable[[], Any]) -> Any:
        start = time.process_time()
        with fewer_collections():  # as the driver runs each stage
            result = fn()
        seconds[name] = time.process_time() - start
        return result

    timed("ein", lambda: comp.run_until("ein"))
    loops = timed("loops", lambda: comp.run_until("loops"))
    schedule = timed("policy", lambda: default_schedule(get_target(target), loops))
    comp.schedule = schedule if schedule is not None else "none"
    for stage, name in (("scheduled", "apply"), ("target", "target"), ("source", "source")):
        timed(name, lambda: comp.run_until(stage))  # noqa: B023
    return seconds


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", default="100,200,500,1000,2000")
    parser.add_argument("--target", default="c")
    parser.add_argument("--kind", default="elementwise", choices=("elementwise", "mixed"))
    parser.add_argument("--repeat", type=int, default=1, help="compiles per size; the median one is shown")
    args = parser.parse_args()
    rows = []
    per_statement: list[dict[str, float]] = []  # ms per statement, each stage and the total
    stage_seconds(10, args.target, args.kind)  # imports and first-use caches out of the table
    for n in (int(s) for s in args.sizes.split(",")):
        runs = []
        for _ in range(max(1, args.repeat)):
            gc.collect()  # the garbage of the compiles before, outside the times
            runs.append(stage_seconds(n, args.target, args.kind))
        runs.sort(key=lambda seconds: sum(seconds[c] for c in COLUMNS))
        seconds = runs[len(runs) // 2]
        total = sum(seconds[c] for c in COLUMNS)
        per_statement.append({c: seconds[c] / n * 1e3 for c in COLUMNS} | {"total": total / n * 1e3})
        rows.append([str(n), *(f"{seconds[c]:.2f}" for c in COLUMNS), f"{total:.2f}", f"{total / n * 1e3:.2f}"])
        print(f"{n} statements: {total:.2f} s", file=sys.stderr, flush=True)
    print(f"# compile time in CPU seconds per stage, target {args.target}, {args.kind} chains"
          + (f", the median of {args.repeat} compiles" if args.repeat > 1 else ""))
    print(table(rows, ["statements", *COLUMNS, "total", "ms/stmt"]))
    sizes = args.sizes.split(",")
    first, last = per_statement[0], per_statement[-1]
    ratios = [f"{last[c] / first[c]:.2f}" if first[c] > 0 else "-" for c in (*COLUMNS, "total")]
    print(f"\n# ms per statement per stage; the last row: at {sizes[-1]} statements over at {sizes[0]}")
    print(table([[n, *(f"{ms[c]:.3f}" for c in (*COLUMNS, "total"))] for n, ms in zip(sizes, per_statement)]
                + [[f"{sizes[-1]}/{sizes[0]}", *ratios]], ["statements", *COLUMNS, "total"]))


if __name__ == "__main__":
    main()
