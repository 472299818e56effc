"""Seeds of the tests' random data: fresh in a developer's run, fixed in CI.

`fresh_seed()` draws from os.urandom on a developer's machine (every run tries new data; the
seed is in every failure message). With `CI` set, or `EINC_TEST_SEED` set to any text, it is
a hash of that text, the running test's id and how many seeds the test drew before: the
same command draws the same data on every run, so CI is never red or green by luck, and
`EINC_TEST_SEED=<text>` replays a run (scripts/explore.py prints the text it used).
"""

from __future__ import annotations

import hashlib
import os
from collections import Counter

_DRAWN: Counter[str] = Counter()


def ci() -> bool:
    """Whether the suite runs in CI (`CI` set to anything but empty, 0 or false)."""
    return os.environ.get("CI", "").strip().lower() not in ("", "0", "false", "no")


def base_seed() -> str | None:
    """The text the seeds derive from: EINC_TEST_SEED, else "ci" in CI, else None (fresh)."""
    given = os.environ.get("EINC_TEST_SEED")
    if given:
        return given
    return "ci" if ci() else None


def fresh_seed() -> int:
    """A 64-bit seed for the running test's next random data (see the module docstring)."""
    base = base_seed()
    if base is None:
        return int.from_bytes(os.urandom(8), "little")
    test = os.environ.get("PYTEST_CURRENT_TEST", "").rsplit(" (", 1)[0]
    n = _DRAWN[test]
    _DRAWN[test] += 1
    digest = hashlib.sha256(f"{base}\0{test}\0{n}".encode()).digest()
    return int.from_bytes(digest[:8], "little")
