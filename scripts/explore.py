"""Exploration: the random suites at the `thorough` profile with fresh seeds, for a time budget.

    scripts/explore.sh --minutes N [--targets c,opencl,...] [--seed S] [--shrink-seconds 30]

Runs the differential, random-schedule and fuzz suites (SUITES) on every executable target,
one test at a time, each with its share of the N minutes (a test still running at the end of
its share is stopped: that is the budget, not a failure). Every run gets the same fresh seed
(`--hypothesis-seed S` and EINC_TEST_SEED=S for the tests' own data), printed first, and
shrinking is bounded (EINC_MAX_SHRINK_SECONDS). The schedule generator runs with every
widening (EINC_SCHEDULE_WIDEN=full, tests/oracle/genschedule.py; `--widen` picks others), CI's
generator none.

At the end it prints one line per distinct failure (exception type + message shape + target)
with its reproducer, the counts of compiled program x schedule candidates (ok, wrong numbers,
internal errors, refusals), and writes every failure of the case-based suites as a corpus
entry tests/regressions/<id>.json (run by tests/test_regressions.py); failures of the other
suites are printed with their pytest command and Hypothesis reproduction blob.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import secrets
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

TARGETS = ("c", "opencl", "hlsl", "sycl", "poplar")
SUITES = (
    "tests/test_differential.py",
    "tests/test_device_differential.py::test_random_programs_match_oracle",
    "tests/test_device_differential.py::test_random_bind_schedules_match_oracle",
    "tests/test_schedules.py::test_random_legal_schedules_match_oracle",
    "tests/test_schedules.py::test_random_schedule_scripts_match_oracle",
    "tests/test_random_schedules_devices.py",
    "tests/test_schedule_fuzz.py",
)
"""The suites explored (pytest selections; parametrized by target where they run on devices)."""


def collect(targets: set[str]) -> list[str]:
    """The test ids of SUITES on `targets` (a test without a target parameter runs on C)."""
    out = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "--collect-only",
                          *SUITES], cwd=ROOT, capture_output=True, text=True, env=_env({}), check=False)  # fmt: skip
    ids = [ln.strip() for ln in out.stdout.splitlines() if "::" in ln and not ln.startswith(" ")]
    chosen = []
    for test in ids:
        param = re.search(r"\[([^\]]*)\]$", test)
        target = param.group(1).split("-")[0] if param else "c"
        if target in TARGETS and target not in targets:
            continue
        if target not in TARGETS and "c" not in targets:
            continue
        chosen.append(test)
    return chosen


def _env(extra: dict[str, str]) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k != "CI"}
    env["PYTHONPATH"] = str(ROOT) + os.pathsep + env.get("PYTHONPATH", "")
    env.update(extra)
    return env


def first_error(output: str) -> tuple[str, str]:
    """(exception type, message) of the first `E   Type: message` line of a pytest report."""
    for line in output.splitlines():
        m = re.match(r"^E\s+([A-Za-z_][\w.]*(Error|Exception|Crashed|Unlocated)):\s*(.*)$", line)
        if m:
            return m.group(1).rsplit(".", 1)[-1], m.group(3)
    for line in output.splitlines():
        if line.startswith("E   "):
            return "Failure", line[4:].strip()
    return "Failure", "(no error line; see the log)"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--minutes", type=float, default=10.0)
    parser.add_argument("--targets", default=",".join(TARGETS))
    parser.add_argument("--seed", type=int, default=None, help="default: a fresh one (printed)")
    parser.add_argument("--shrink-seconds", type=int, default=30)
    parser.add_argument("--corpus", default=str(ROOT / "tests" / "regressions"))
    parser.add_argument("-k", default=None, help="only the test ids containing this text")
    parser.add_argument("--widen", default="full",
                        help="the generators' widenings (tests/oracle/genschedule.py): full, none, or a list")
    args = parser.parse_args()

    from tests.oracle.corpus import shape_of

    seed = args.seed if args.seed is not None else secrets.randbits(32)
    targets = set(args.targets.split(","))
    work = Path(tempfile.mkdtemp(prefix="einc-explore-"))
    pending, stats, logs = work / "pending", work / "stats", work / "logs"
    logs.mkdir(parents=True)
    print(f"explore: seed {seed}, {args.minutes:g} minutes, targets {sorted(targets)}, logs {logs}", flush=True)
    tests = [t for t in collect(targets) if args.k is None or args.k in t]
    if not tests:
        print("explore: no tests collected")
        return 2
    deadline = time.monotonic() + args.minutes * 60
    env = _env({
        "EINC_HYPOTHESIS_PROFILE": "thorough", "EINC_TEST_SEED": str(seed),
        "EINC_MAX_SHRINK_SECONDS": str(args.shrink_seconds), "EINC_SCHEDULE_WIDEN": "" if args.widen == "none" else args.widen,
        "EINC_CORPUS_PENDING": str(pending), "EINC_EXPLORE_STATS": str(stats),
    })  # fmt: skip
    failures: dict[str, tuple[str, str]] = {}  # signature -> (test, reproducer)
    for n, test in enumerate(tests):
        left = deadline - time.monotonic()
        if left <= 5:
            print(f"explore: time is up, {len(tests) - n} tests not run")
            break
        share = max(20.0, left / (len(tests) - n))
        before = set(pending.glob("*.json")) if pending.exists() else set()
        cmd = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-x", f"--hypothesis-seed={seed}", test]
        log = logs / (re.sub(r"[^\w.-]+", "_", test)[-120:] + ".log")
        start = time.monotonic()
        with open(log, "w") as f:
            proc = subprocess.Popen(cmd, cwd=ROOT, env=env, stdout=f, stderr=subprocess.STDOUT, start_new_session=True)
            try:
                rc = proc.wait(timeout=share)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, 9)
                proc.wait()
                rc = None
        took = time.monotonic() - start
        status = "budget" if rc is None else ("ok" if rc in (0, 5) else "FAILED")
        print(f"  {status:6} {took:6.0f}s  {test}", flush=True)
        new = sorted((set(pending.glob("*.json")) if pending.exists() else set()) - before)
        if rc in (None, 0, 5) and not new:
            continue
        output = log.read_text()
        kind, message = first_error(output)
        param = re.search(r"\[([^\]]*)\]$", test)
        target = param.group(1).split("-")[0] if param else "c"
        for path in new:  # the case-based suites' failures, each with its own signature
            data = json.loads(path.read_text())
            failures.setdefault(data["failure"]["signature"], (test, f"corpus entry {path.name}"))
        if not new:
            blob = re.search(r"@reproduce_failure\([^)]*\)", output)
            repro = " ".join(cmd[2:]) + (f"  ({blob.group(0)})" if blob else "")
            failures.setdefault(f"{kind}: {shape_of(message)} [{target}]", (test, repro + f"  log {log}"))

    counts = {"ok": 0, "wrong": 0, "internal": 0, "refused": 0}
    if stats.exists():
        for line in stats.read_text().split():
            counts[line] = counts.get(line, 0) + 1
    print(f"explore: {sum(counts.values())} compiled program x schedule candidates: {counts['ok']} right, "
          f"{counts['wrong']} wrong numbers, {counts['internal']} internal errors, {counts['refused']} refusals")  # fmt: skip
    corpus = Path(args.corpus)
    written = []
    if pending.exists():
        corpus.mkdir(parents=True, exist_ok=True)
        for path in sorted(pending.glob("*.json")):
            dest = corpus / f"explore-{seed}-{path.stem}.json"
            shutil.copy(path, dest)
            written.append(dest)
    print(f"explore: {len(failures)} distinct failures (seed {seed})")
    for sig, (test, repro) in sorted(failures.items()):
        print(f"FAIL {sig} -- {test} -- {repro}")
    for dest in written:
        print(f"corpus: {dest.relative_to(ROOT) if dest.is_relative_to(ROOT) else dest}")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
