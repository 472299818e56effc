"""The README's Python examples run as written: each ```python block of README.md is saved as
a script and run in a fresh interpreter (as a user pastes it into a file), with the
repository's `examples/` beside it. The one change: tuning trial counts become 1
(`trials=N` -> `trials=1`: the default schedule, measured, recorded and re-checked, without a
final ranking), so the tuning examples finish in seconds; their `__main__` guards, paths,
input names and arguments are the README's own."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import cast

import pytest

from einc.tune.types import BuildResult, Candidate, MeasureResult, Status, TuneTask
from tests.oracle.seeds import ci

ROOT = Path(__file__).resolve().parent.parent
README = ROOT / "README.md"
TRIALS = re.compile(r"\btrials=\d+")


def python_blocks() -> list[tuple[int, str]]:
    """Each ```python block of the README: its first line's number and its text."""
    text = README.read_text()
    return [(text.count("\n", 0, m.start(1)) + 1, m.group(1)) for m in re.finditer(r"^```python\n(.*?)^```", text, re.M | re.S)]


BLOCKS = python_blocks()


def block_ids(blocks: Sequence[tuple[int, str]]) -> list[str]:
    """A name for each block that stays put when lines above it move (so tests/slow_tests.txt
    keeps naming it): the title of the README section it is in, and its place there."""
    lines = README.read_text().splitlines()
    ids: list[str] = []
    for line, _ in blocks:
        fence = False
        title = "top"
        for text in lines[: line - 1]:
            fence ^= text.startswith("```")
            if not fence and text.startswith("#"):
                title = text.lstrip("#").strip()
        name = re.sub(r"[^A-Za-z0-9]+", "-", title).strip("-").lower()
        ids.append(f"{name}-{sum(i.startswith(name + '-') for i in ids) + 1}")
    return ids


def test_the_readme_has_its_python_examples() -> None:
    assert len(BLOCKS) >= 5 and any("tune(" in b for _, b in BLOCKS) and any("run_lowered" in b for _, b in BLOCKS)


@pytest.mark.parametrize(("line", "code"), BLOCKS, ids=block_ids(BLOCKS))
def test_a_readme_python_example_runs(line: int, code: str, tmp_path: Path) -> None:
    if re.search(r"^import torch|^from torch|einc\.torch", code, re.M):
        try:
            import torch  # noqa: F401
        except ImportError:
            if ci():
                pytest.fail("CI needs torch for the README's PyTorch examples")
            pytest.skip("torch is not installed")
    script = tmp_path / "example.py"
    script.write_text(TRIALS.sub("trials=1", code))
    (tmp_path / "examples").symlink_to(ROOT / "examples")
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    env.pop("EINC_VERIFY_EACH", None)  # as a user runs them (the suite verifies every pass elsewhere)
    res = subprocess.run([sys.executable, str(script)], cwd=tmp_path, env=env, capture_output=True, text=True,
                         timeout=600, check=False)  # fmt: skip
    assert res.returncode == 0, f"README.md:{line}:\n{res.stdout}\n{res.stderr}"
    assert "Traceback" not in res.stderr, res.stderr


# ---- what the tuning examples rely on -------------------------------------------------------------
UNGUARDED = """from einc.tune.tuner import tune
from einc.tune.types import TuneTask

result = tune(TuneTask.from_file("examples/matmul.ein"), trials=2, threads=1)
"""


def test_an_unguarded_tuning_script_is_refused_at_its_call(tmp_path: Path) -> None:
    """Every trial used to fail ('internal-error', 'no candidate computed the right numbers')
    after the spawn workers died importing the script; now nothing starts."""
    script = tmp_path / "tune_it.py"
    script.write_text(UNGUARDED)
    (tmp_path / "examples").symlink_to(ROOT / "examples")
    res = subprocess.run([sys.executable, str(script)], cwd=tmp_path, env={**os.environ, "PYTHONPATH": str(ROOT)},
                         capture_output=True, text=True, timeout=300, check=False)  # fmt: skip
    assert res.returncode == 1
    assert (f"{script}:4:1: error: einc's tuner starts worker processes with the 'spawn' method, which import "
            "this script again; a call at its top level runs again in each of them: put it under "
            '`if __name__ == "__main__":`') in res.stderr  # fmt: skip
    assert "bootstrapping phase" not in res.stderr and "internal-error" not in res.stdout


@pytest.mark.parametrize(
    ("body", "refused_at"),
    [("check()\n", 3), ("def f():\n    check()\n\n\nf()\n", 7),
     ('if __name__ == "__main__":\n    check()\n', None), ("def f():\n    check()\n\n\nif '__main__' == __name__:\n    f()\n", None),
     ('if __name__ == "__main__":\n    if True:\n        check()\n', None),
     ('if __name__ == "__main__":\n    pass\ncheck()\n', 5)],
    ids=["top level", "through a function", "guarded", "guarded, through a function", "nested in the guard",
         "after the guard"],
)  # fmt: skip
def test_the_main_guard_check(body: str, refused_at: int | None, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import types

    from einc.errors import UsageError

    path = tmp_path / "script.py"
    path.write_text("from einc.tune.main_guard import check_main_guard as check\n\n" + body)
    main = types.ModuleType("__main__")
    main.__file__ = str(path)
    monkeypatch.setitem(sys.modules, "__main__", main)
    code = compile(path.read_text(), str(path), "exec")
    if refused_at is None:
        exec(code, main.__dict__)
        return
    with pytest.raises(UsageError) as info:
        exec(code, main.__dict__)
    assert str(info.value.loc) == f"{path}:{refused_at}:1"


def test_the_main_guard_check_ignores_another_main_frame(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A frame that says `__name__ == "__main__"` but is not the main script's top level (a
    forkserver child's `-c` code, with `__main__.__file__` naming the server's script) is not
    the script calling the tuner at its top level."""
    import types

    path = tmp_path / "server.py"
    path.write_text("import einc\n\n\ncheck()\n")  # line 4 would be refused if this frame were the script
    main = types.ModuleType("__main__")
    main.__file__ = str(path)
    monkeypatch.setitem(sys.modules, "__main__", main)
    from einc.tune.main_guard import check_main_guard

    other = {"__name__": "__main__", "check": check_main_guard}  # not main.__dict__
    exec(compile("\n\n\ncheck()\n", "<forkserver>", "exec"), other)


class InstantBuilder:
    """Builds nothing: every candidate 'built'."""

    def build(self, task: TuneTask, candidates: Sequence[Candidate]) -> list[BuildResult]:
        return [BuildResult(c, Status.OK) for c in candidates]


class InstantRunner:
    """Measures nothing: every candidate takes 1 ms."""

    def run(self, task: TuneTask, builds: Sequence[BuildResult]) -> list[MeasureResult]:
        return [MeasureResult(b.candidate, Status.OK, times=(1e-3,)) for b in builds]


def test_tune_takes_the_path_of_its_database(tmp_path: Path) -> None:
    """`tune(db="path")` measured every trial, then raised AttributeError ('str' has no 'add')."""
    from einc.tune.records import RecordDB
    from einc.tune.tuner import tune

    task = TuneTask.from_file(str(ROOT / "examples" / "matmul.ein"))
    path = tmp_path / "records.db"
    result = tune(task, trials=3, builder=InstantBuilder(), runner=InstantRunner(), db=str(path), verify=False)
    assert result.trials == 3
    with RecordDB(path, create=False) as db:
        context = next(iter(db.tasks()))["context"]
        assert context is not None and len(db.trials(task.key, "c", context)) == 3
    with pytest.raises(TypeError, match=r"tune\(db=...\) takes a RecordDB or a path, not dict"):
        tune(task, trials=1, builder=InstantBuilder(), runner=InstantRunner(), db=cast(RecordDB, {}))
