"""The type-checking ratchet: pyright (pinned in the test extra, configured in pyproject.toml:
basic mode, strict on einc/schedule and einc/compiler) checks the package, and three counts
may go down but never up: pyright's errors, the `type: ignore` / `pyright: ignore` comments,
and the uses of `Any` in einc/. Lower a ceiling when a change lowers its count (the failure
message says so), never raise it."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "einc"

PYRIGHT_ERRORS = 0
IGNORES = 94
ANY = 69

IGNORE = re.compile(r"#\s*(type|pyright):\s*ignore")
ANY_WORD = re.compile(r"\bAny\b")


def sources() -> list[Path]:
    return sorted(PACKAGE.rglob("*.py"))


def count(pattern: re.Pattern[str]) -> int:
    return sum(len(pattern.findall(p.read_text())) for p in sources())


def check(name: str, found: int, ceiling: int) -> None:
    assert found <= ceiling, f"{name}: {found}, above the ceiling {ceiling}: type the new code instead"
    if found < ceiling:
        print(f"{name}: {found}, below the ceiling {ceiling}: lower it in tests/test_typing.py")


def test_ignore_comments_do_not_grow() -> None:
    check("type/pyright ignore comments", count(IGNORE), IGNORES)


def test_any_does_not_grow() -> None:
    check("uses of Any", count(ANY_WORD), ANY)


def test_counters_see_what_they_count(tmp_path: Path) -> None:
    sample = "x: Any = 1  # type: ignore[assignment]\ny = f()  # pyright: ignore[reportX]\nAnything = 2\n"
    assert len(IGNORE.findall(sample)) == 2 and len(ANY_WORD.findall(sample)) == 1


def pyright() -> list[str] | None:
    exe = shutil.which("pyright", path=str(Path(sys.executable).parent)) or shutil.which("pyright")
    return [exe] if exe else None


@pytest.mark.slow
def test_pyright_errors_do_not_grow() -> None:
    cmd = pyright()
    if cmd is None:
        if os.environ.get("CI"):
            pytest.fail("pyright is not installed (the [test] extra pins it)")
        pytest.skip("pyright is not installed: pip install -e '.[test]'")
    res = subprocess.run(
        [*cmd, "--outputjson", "--pythonpath", sys.executable, str(PACKAGE)],
        cwd=ROOT, capture_output=True, text=True, timeout=900,
    )  # fmt: skip
    report = json.loads(res.stdout)
    errors = [d for d in report["generalDiagnostics"] if d["severity"] == "error"]
    listing = "\n".join(
        f"{Path(d['file']).relative_to(ROOT)}:{d['range']['start']['line'] + 1}: {d['message'].splitlines()[0]}"
        for d in errors
    )
    assert report["summary"]["filesAnalyzed"] > 50, report["summary"]
    assert len(errors) <= PYRIGHT_ERRORS, f"{len(errors)} pyright errors (ceiling {PYRIGHT_ERRORS}):\n{listing}"
    check("pyright errors", len(errors), PYRIGHT_ERRORS)


def test_the_schedule_and_compiler_folders_are_strict() -> None:
    """pyright checks einc/schedule and einc/compiler in strict mode (no unknown types, every
    function annotated): the layers every compile runs through."""
    import tomllib

    config = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["pyright"]
    assert {"einc/schedule", "einc/compiler"} <= set(config.get("strict", []))
