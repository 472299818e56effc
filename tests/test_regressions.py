"""The regression corpus: every tests/regressions/*.json on every target it names.

An entry (written by scripts/explore.py for each failure it finds, or by hand; format in
tests/oracle/corpus.py `Case.to_json`, docs/TESTING.md) holds a program, a schedule's text
(null: the target's default, "none": no schedule), the targets, and either the inputs with
the oracle's float64 expectation -- the kernel's numbers must match it -- or the refusal
expected (error class, message pattern, location). Missing toolchains skip (fail in CI) as in
tests/test_device_targets.py.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from tests.oracle.corpus import Case, check_case
from tests.test_device_targets import require

CORPUS = Path(__file__).parent / "regressions"


def _entries() -> list[object]:
    params = []
    for path in sorted(CORPUS.glob("*.json")):
        data = json.loads(path.read_text())
        for target in data["targets"]:
            marks = [] if target == "c" else [getattr(pytest.mark, target)]
            params.append(pytest.param(path.name, target, marks=marks, id=f"{path.stem}-{target}"))
    return params


def test_corpus_is_not_empty() -> None:
    assert _entries(), f"no entries in {CORPUS}"


@pytest.mark.parametrize(("entry", "target"), _entries())
def test_corpus_entry(entry: str, target: str) -> None:
    if target != "c":
        require(target)
    case = Case.from_json(json.loads((CORPUS / entry).read_text()), target)
    refused = check_case(case)
    assert refused is None, f"{entry} on {target}: refused: {refused.render() if refused else ''}"


def test_ci_draws_the_same_data_and_examples_on_every_run(monkeypatch: pytest.MonkeyPatch) -> None:
    """With CI set, fresh_seed() is a function of the test id and the draw's index, and the
    `ci` Hypothesis profile is derandomized without a database (tests/conftest.py)."""
    from hypothesis import settings

    from tests.oracle import seeds

    monkeypatch.setenv("CI", "true")
    monkeypatch.delenv("EINC_TEST_SEED", raising=False)
    monkeypatch.setenv("PYTEST_CURRENT_TEST", "tests/test_x.py::test_y (call)")

    def draws() -> list[int]:
        monkeypatch.setattr(seeds, "_DRAWN", type(seeds._DRAWN)())
        return [seeds.fresh_seed() for _ in range(3)]

    first = draws()
    assert first == draws() and len(set(first)) == 3
    monkeypatch.setenv("PYTEST_CURRENT_TEST", "tests/test_x.py::test_z (call)")
    assert draws() != first
    monkeypatch.setenv("EINC_TEST_SEED", "42")
    assert draws() != first
    ci = settings.get_profile("ci")
    assert ci.derandomize and ci.database is None
    assert ci.max_examples == settings.get_profile("default").max_examples
    # The same without CI: the README's test command is deterministic for everyone; only
    # EINC_TEST_SEED=fresh (or the exploration script's text) draws new data.
    monkeypatch.delenv("CI")
    monkeypatch.delenv("EINC_TEST_SEED")
    monkeypatch.setenv("PYTEST_CURRENT_TEST", "tests/test_x.py::test_y (call)")
    assert draws() == first
    monkeypatch.setenv("EINC_TEST_SEED", "fresh")
    assert draws() != first
    if not os.environ.get("EINC_HYPOTHESIS_PROFILE"):
        assert settings().derandomize  # the profile the suite loaded without one named
