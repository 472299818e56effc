"""Write tests/slow_tests.txt: the tests a `pytest --durations=0` report timed at THRESHOLD
seconds or more (call, setup and teardown together), which the README's test command leaves
to CI (`CI=true`) and to `EINC_SLOW_TESTS=1` runs (tests/conftest.py).

    .venv/bin/python -m pytest -n 2 --dist worksteal --durations=0 -p no:cacheprovider > report.txt
    .venv/bin/python scripts/slow_tests.py report.txt [more reports] --threshold 2.0 [--scale 1.0]

`--scale` divides a report's times (a report taken on a loaded machine: its wall times over a
quiet run's). A test in several reports counts with its largest time. The tests of the
previous list stay listed unless `--fresh` (a list only grows between measurements).
"""

from __future__ import annotations

import argparse
import re
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
LIST = ROOT / "tests" / "slow_tests.txt"
LINE = re.compile(r"\s*([\d.]+)s (call|setup|teardown)\s+(tests/\S+)")
HEADER = """# Tests the README's test command leaves to CI (CI=true) and to EINC_SLOW_TESTS=1 runs:
# those a quiet cold run timed at {threshold} s or more (scripts/slow_tests.py; tests/conftest.py).
"""


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("reports", nargs="+", help="pytest --durations=0 outputs")
    parser.add_argument("--threshold", type=float, default=2.0, help="seconds (default 2.0)")
    parser.add_argument("--scale", type=float, nargs="*", default=None, help="per report: divide its times by this")
    parser.add_argument("--fresh", action="store_true", help="forget the previous list")
    args = parser.parse_args()
    scales = args.scale or [1.0] * len(args.reports)
    if len(scales) != len(args.reports):
        parser.error("--scale takes one number per report")
    longest: Counter[str] = Counter()
    for report, scale in zip(args.reports, scales):
        per: Counter[str] = Counter()
        for line in Path(report).read_text().splitlines():
            if found := LINE.match(line):
                per[found.group(3)] += float(found.group(1)) / scale
        for test, seconds in per.items():
            longest[test] = max(longest[test], seconds)
    slow = {t for t, s in longest.items() if s >= args.threshold}
    if not args.fresh and LIST.exists():
        slow |= {ln.strip() for ln in LIST.read_text().splitlines() if ln.strip() and not ln.startswith("#")}
    LIST.write_text(HEADER.format(threshold=args.threshold) + "".join(f"{t}\n" for t in sorted(slow)))
    print(f"{len(slow)} slow tests in {LIST.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
