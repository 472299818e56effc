"""Seeds of the tests' random data: fixed in every run of the test command, fresh only where
asked (the exploration script).

`fresh_seed()` is a hash of a text, the running test's id and how many seeds the test drew
before: the text is `EINC_TEST_SEED`, else "ci", so the same command draws the same data on
every run and every machine (never red or green by luck), and `EINC_TEST_SEED=<text>` replays
a run (scripts/explore.py passes the fresh text it used and prints it). `EINC_TEST_SEED=fresh`
draws from os.urandom instead (the seed is in every failure message).
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
    """The text the seeds derive from: EINC_TEST_SEED, else "ci"; None (fresh) for `fresh`."""
    given = os.environ.get("EINC_TEST_SEED", "").strip()
    if given == "fresh":
        return None
    return given or "ci"


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
