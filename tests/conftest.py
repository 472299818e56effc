"""Test-suite setup: `tests.*` importable from the repository root, and Hypothesis profiles.

Profiles (select with EINC_HYPOTHESIS_PROFILE): `default` (the CI budget: the differential
suite runs in under three minutes on two cores), `ci` (the default budget, derandomized: loaded
when `CI` is set and no profile is named), `thorough` (ten times the examples), `quick` (a
smoke run). Tests that set their own example count scale it with
`tests.oracle.budget.examples`.

Kernels run in debug mode (`EINC_DEBUG=1`: outputs poisoned before every run).

Every pipeline the tests run verifies the IR after each pass (`EINC_VERIFY_EACH`, the
kernel-level checks of verify-egpu and xDSL's op verifiers; set it to 0 to turn them off).

In CI (`CI` set, tests/oracle/seeds.py) every profile is derandomized: Hypothesis draws its
examples from a hash of each test (the same examples on every run, the same budget), keeps no
example database, and the tests' own random data (`fresh_seed`) is fixed per test, so CI is
never red or green by luck. Exploration (scripts/explore.py) runs `thorough` with a fresh
`--hypothesis-seed` instead, and bounds shrinking with EINC_MAX_SHRINK_SECONDS (Hypothesis
shrinks a failure for up to five minutes by default).
"""

from __future__ import annotations

import os
import tempfile
import sys
from pathlib import Path

import pytest
from hypothesis import HealthCheck, settings

os.environ.setdefault("EINC_VERIFY_EACH", "1")
# Kernels compiled by the tests poison their outputs before every run (NaN, 0x5A bytes), so a
# kernel that leaves an output unwritten cannot pass a check by reusing memory that happened to
# hold the right numbers (einc.compiler.kernel; tests of the non-debug path pass debug=False).
os.environ.setdefault("EINC_DEBUG", "1")
# Crash reproducers of internal errors go to a scratch folder, not the checkout (tests that
# check where a reproducer lands set EINC_REPRO_DIR or unset it themselves).
os.environ.setdefault("EINC_REPRO_DIR", tempfile.mkdtemp(prefix="einc-repro-"))
# Tuning records: a fresh database path (never created unless a test writes records), so no
# test reads its user's records and every compile without a schedule gets the default one.
os.environ["EINC_TUNING_DB"] = os.path.join(tempfile.mkdtemp(prefix="einc-tuning-"), "tuning.db")
# Tuning tests on a shared machine: a noisy measurement is flagged, never given up on (a
# hopeless one would otherwise decide a test by the load of the moment).
os.environ.setdefault("EINC_NOISE_LIMITS", "lenient")

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from tests.oracle.seeds import ci  # after the path insert

_COMMON: dict = {
    "deadline": None,
    "suppress_health_check": [HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.filter_too_much],
    "print_blob": True,
}
_DERANDOMIZED = {"derandomize": True, "database": None}
if ci():
    _COMMON.update(_DERANDOMIZED)
settings.register_profile("default", **_COMMON)
settings.register_profile("ci", **{**_COMMON, **_DERANDOMIZED})
settings.register_profile("thorough", max_examples=1000, **_COMMON)
settings.register_profile("quick", max_examples=10, **_COMMON)
# Derandomized unless a profile is asked for (the exploration script's `thorough`, with CI unset):
# the test command draws the same examples on every machine, CI or not.
settings.load_profile(os.environ.get("EINC_HYPOTHESIS_PROFILE") or "ci")

if os.environ.get("EINC_MAX_SHRINK_SECONDS"):
    from hypothesis.internal.conjecture import engine

    engine.MAX_SHRINKING_SECONDS = int(os.environ["EINC_MAX_SHRINK_SECONDS"])


# ---- the order tests start in -------------------------------------------------------------------
# `pytest -n 2 --dist worksteal` hands each worker half of the collected list and lets an idle
# worker take half of the other's remaining queue from its end: a long test late in the list
# leaves one worker running it while the other waits. The modules holding the suite's longest
# tests (measured with `--durations=0`) therefore start first, the longest of them at their head;
# every other module follows in collection order. Only the order changes: each module's tests
# stay together (its module-scoped fixtures are made once per worker).
LONG_FIRST = (
    "test_typing.py::test_pyright_errors_do_not_grow",
)
LONG_MODULES = (
    "test_typing.py", "test_compile_scaling.py", "test_tune.py", "test_torch_op.py", "test_tune_space.py",
    "test_cpu_operators_bench.py", "test_readme.py", "test_interp_egpu.py", "test_tune_program.py",
    "test_tune_dask.py", "test_tune_measure.py", "test_serve_tune.py", "test_math_accuracy.py",
    "test_egpu_verifier.py", "test_bad_inputs.py",
)  # fmt: skip


# ---- slow tests: CI runs them, the README's command on a developer's machine does not -------------
# The tests a quiet cold run timed at 2 s or more (tests/slow_tests.txt, written by
# scripts/slow_tests.py from a `--durations=0` report) and those marked `slow` are left out of
# a whole-suite run unless CI is set (`.ci/run`) or EINC_SLOW_TESTS=1: the README's test command
# then stays within minutes on two cores while CI runs every test. A run that names its tests
# (files, node ids, -k, -m) runs what it names.
SLOW_LIST = ROOT / "tests" / "slow_tests.txt"


def slow_tests() -> frozenset[str]:
    lines = SLOW_LIST.read_text().splitlines() if SLOW_LIST.exists() else []
    return frozenset(ln.strip() for ln in lines if ln.strip() and not ln.startswith("#"))


def runs_slow_tests(config: pytest.Config) -> bool:
    if ci() or os.environ.get("EINC_SLOW_TESTS", "").strip() not in ("", "0"):
        return True
    named = config.args_source is not pytest.Config.ArgsSource.TESTPATHS
    return named or bool(config.getoption("keyword")) or bool(config.getoption("markexpr"))


def pytest_report_header(config: pytest.Config) -> str:
    if runs_slow_tests(config):
        return "slow tests: run (CI, EINC_SLOW_TESTS=1, or tests named)"
    return (f"slow tests: not run ({len(slow_tests())} in tests/slow_tests.txt and those marked slow; "
            "CI=true or EINC_SLOW_TESTS=1 runs them)")  # fmt: skip


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    listed = slow_tests()
    for item in items:
        if item.nodeid in listed:
            item.add_marker(pytest.mark.slow)
    if not runs_slow_tests(config):
        slow = [item for item in items if item.get_closest_marker("slow") is not None]
        if slow:
            config.hook.pytest_deselected(items=slow)
            items[:] = [item for item in items if item.get_closest_marker("slow") is None]
    rank = {name: i for i, name in enumerate(LONG_MODULES)}

    def key(item: pytest.Item) -> tuple[int, int]:
        name = item.nodeid.split("/")[-1]
        module = name.split("::")[0]
        return rank.get(module, len(rank)), 0 if name in LONG_FIRST else 1

    items[:] = sorted(items, key=key)  # stable: collection order within each key
