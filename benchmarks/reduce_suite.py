"""`einc reduce` on its benchmark suite: 20 seeded miscompiling plugin passes over the large
example programs (benchmarks/reducer/suite.py), each found with one command and reduced with
a second, as a researcher would.

    python benchmarks/reduce_suite.py [--budget 60] [--jobs 2] [--only NAME ...] [-o table.md]

For each case: the discovery command (`einc compile ... --check-numerics --reproducer R`, or
an internal error's reproducer, or `einc-opt ... --reproducer R`: not timed), then
`einc reduce R --time-budget B --cpu-time` (timed: the CPU time of einc reduce and its forked
tests, from the kernel's accounting of finished children, and the wall time), then
`einc-opt --run-reproducer` of the reduced file (the failure kept, by a full replay). The
table gives the `ein` ops (every op of the program's `ein` module but `builtin.module`) and
the schedule ops (the top-level ops of `@__transform_main` but its yield) before and after.
The goal: at least 18 of 20 at <= 10 ein ops and <= 3 schedule ops within 60 s, the failure
kept. The machine these figures come from is shared, so CPU time is what is compared.
"""

from __future__ import annotations

import argparse
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks" / "reducer"))

from suite import CASES, Case  # noqa: E402

from einc.tools.reduce.reducer import ein_ops  # noqa: E402
from einc.tools.reduce.reproducer import Reproducer  # noqa: E402
from einc.tools.reduce.schedule_edits import count_ops  # noqa: E402

BIN = Path(sys.executable).parent


def _tool(name: str) -> str:
    found = BIN / name
    return str(found) if found.exists() else name


def _children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def run_case(case: Case, folder: Path, budget: float, jobs: int) -> dict[str, object]:
    env = dict(os.environ, PYTHONPATH=f"{ROOT}{os.pathsep}{os.environ.get('PYTHONPATH', '')}")
    found = folder / f"{case.name}.txt"
    reduced = folder / f"{case.name}.reduced.txt"
    command = case.discover(str(found))
    command[0] = _tool(command[0])
    started = time.perf_counter()
    subprocess.run(command, cwd=ROOT, env=env, capture_output=True, text=True, timeout=600)
    discover_s = time.perf_counter() - started
    row: dict[str, object] = {"case": case.name, "program": Path(case.program).stem, "kind": case.kind,
                              "discover_s": discover_s}  # fmt: skip
    if not found.exists():
        row["note"] = "not found by the discovery command"
        return row
    before = Reproducer.read(str(found))
    row["stage"] = before.failure.stage or "?"
    row["ein_before"], row["sched_before"] = ein_ops(_at_scale(before)), count_ops(before.schedule)
    cpu, wall = _children_cpu(), time.perf_counter()
    reduce_run = subprocess.run(
        [_tool("einc"), "reduce", str(found), "-o", str(reduced), "--time-budget", f"{budget}s", "--cpu-time",
         "--jobs", str(jobs), "--quiet"], cwd=ROOT, env=env, capture_output=True, text=True, timeout=1800,
    )  # fmt: skip
    row["cpu_s"], row["wall_s"] = _children_cpu() - cpu, time.perf_counter() - wall
    tests = [line for line in reduce_run.stderr.splitlines() if "tests in" in line]
    row["tests"] = tests[-1].split("(")[1].split(" tests")[0] if tests else "?"
    if not reduced.exists():
        row["note"] = (reduce_run.stderr.strip().splitlines() or ["no output"])[-1]
        return row
    after = Reproducer.read(str(reduced))
    row["ein_after"], row["sched_after"] = ein_ops(after), count_ops(after.schedule)
    replayed = subprocess.run([_tool("einc-opt"), "--run-reproducer", str(reduced)], cwd=ROOT, env=env,
                              capture_output=True, text=True, timeout=600)  # fmt: skip
    row["kept"] = replayed.returncode == 0
    return row


def _at_scale(repro: Reproducer) -> Reproducer:
    from einc.tools.reduce.reducer import materialized

    return materialized(repro)


def goal(row: dict[str, object], budget: float) -> bool:
    ein, sched, cpu = row.get("ein_after"), row.get("sched_after"), row.get("cpu_s")
    return (isinstance(ein, int) and ein <= 10 and isinstance(sched, int) and sched <= 3 and isinstance(cpu, float)
            and cpu <= budget and row.get("kept") is True)  # fmt: skip


def table(rows: list[dict[str, object]], budget: float) -> str:
    head = "| pass | program | failure (stage) | ein ops | schedule ops | tests | CPU s | wall s | kept | goal |"
    lines = [head, "|" + "---|" * 10]
    for r in rows:
        ein = f"{r.get('ein_before', '?')} → {r.get('ein_after', '?')}"
        sched = f"{r.get('sched_before', '?')} → {r.get('sched_after', '?')}"
        cpu = f"{r['cpu_s']:.1f}" if isinstance(r.get("cpu_s"), float) else "-"
        wall = f"{r['wall_s']:.1f}" if isinstance(r.get("wall_s"), float) else "-"
        kept = "yes" if r.get("kept") is True else "NO" if r.get("kept") is False else "-"
        note = f" ({r['note']})" if r.get("note") else ""
        lines.append(f"| {r['case']} | {r['program']} | {r['kind']} ({r.get('stage', '?')}) | {ein} | {sched} | "
                     f"{r.get('tests', '-')} | {cpu} | {wall} | {kept} | {'✔' if goal(r, budget) else '✘'}{note} |")  # fmt: skip
    met = sum(goal(r, budget) for r in rows)
    lines.append("")
    lines.append(f"{met} of {len(rows)} reduced to <= 10 ein ops and <= 3 schedule ops within {budget:g} CPU s, the failure kept")
    return "\n".join(lines) + "\n"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--budget", type=float, default=60.0, help="einc reduce's budget, CPU seconds (default 60)")
    parser.add_argument("--jobs", type=int, default=2, help="einc reduce --jobs (default 2)")
    parser.add_argument("--only", nargs="*", help="only these cases (pass names)")
    parser.add_argument("--keep", help="keep the reproducers in this folder (default: a temporary one)")
    parser.add_argument("-o", "--output", help="also write the table here")
    args = parser.parse_args()
    folder = Path(args.keep or tempfile.mkdtemp(prefix="einc-reduce-suite-"))
    folder.mkdir(parents=True, exist_ok=True)
    rows = []
    for case in CASES:
        if args.only and case.name not in args.only:
            continue
        row = run_case(case, folder, args.budget, args.jobs)
        rows.append(row)
        print(f"{case.name}: {row}", file=sys.stderr, flush=True)
    text = table(rows, args.budget)
    sys.stdout.write(text)
    if args.output:
        Path(args.output).write_text(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
