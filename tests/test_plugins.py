"""Pass plugins: a pass in a separate file (or an installed package's `einc.passes` entry
point) runs inside einc-opt, `einc compile`/`einc run` (stage hooks) and `einc.compile`."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

import einc
from einc import opt
from einc.compiler import registry
from einc.errors import UsageError

ROOT = Path(__file__).resolve().parent.parent
BIN = Path(sys.executable).parent
EXAMPLE = ROOT / "examples" / "plugins" / "double_constants.py"

PASS = '''
from dataclasses import dataclass
from xdsl.dialects import arith
from xdsl.dialects.builtin import FloatAttr, ModuleOp, StringAttr
from xdsl.passes import ModulePass


@dataclass(frozen=True)
class {cls}(ModulePass):
    """Mark each float constant with its scaled value (a note, numbers unchanged)."""

    name = "{name}"
    factor: int = 1

    def apply(self, ctx, op: ModuleOp) -> None:
        for c in op.walk():
            if isinstance(c, arith.ConstantOp) and isinstance(c.value, FloatAttr):
                c.attributes["note"] = StringAttr(f"x{{self.factor}}")
'''


@pytest.fixture(autouse=True)
def clean_registry() -> Iterator[None]:
    """Each test registers its own plugins; the registry is put back afterwards."""
    saved, files = dict(registry._PLUGINS), dict(registry._LOADED_FILES)
    yield
    registry._PLUGINS.clear()
    registry._PLUGINS.update(saved)
    registry._LOADED_FILES.clear()
    registry._LOADED_FILES.update(files)


def plugin(tmp_path: Path, name: str, cls: str = "NotePass", body: str | None = None) -> Path:
    path = tmp_path / f"{name.replace('-', '_')}.py"
    path.write_text(body if body is not None else PASS.format(cls=cls, name=name))
    return path


def opt_main(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = opt.main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def cli(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(BIN / args[0]), *args[1:]], check=False, capture_output=True, text=True, timeout=300, cwd=ROOT, env=env)


# ---- einc-opt --------------------------------------------------------------------------------


def test_plugin_pass_runs_in_einc_opt_with_options(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = plugin(tmp_path, "note-consts")
    code, out, err = opt_main(capsys, "examples/softmax.ein", "--load-pass-plugin", str(path),
                              "--pass-pipeline", "convert-ein-to-affine,note-consts{factor=2}")  # fmt: skip
    assert code == 0, err
    assert out.count('note = "x2"') == 2  # softmax's two float constants (-inf and 0)
    assert registry.load_pass_plugin(str(path)) == ["note-consts"]  # loading again: the same names


def test_list_passes_shows_einc_and_plugin_passes_with_options(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = opt_main(capsys, "--list-passes", "--load-pass-plugin", str(EXAMPLE))
    assert code == 0
    assert "  einc-tile  Strip-mine the loops of one statement's axis." in out
    assert '      size: int = 32' in out
    assert "  annotate-constants  Tag each floating-point constant" in out and 'tag: str = "constant"' in out
    assert f"[from {EXAMPLE}]" in out
    assert "arith-add-fastmath" not in out and "--list-passes --all" in out
    code, out, _ = opt_main(capsys, "--list-passes", "--all")
    assert code == 0 and "xDSL's passes:" in out and "  arith-add-fastmath" in out


def test_help_lists_eincs_passes_not_xdsls() -> None:
    res = cli("einc-opt", "--help")
    assert res.returncode == 0
    assert "convert-ein-to-affine" in res.stdout and "--list-passes --all" in res.stdout
    assert "arith-add-fastmath" not in res.stdout
    assert "--load-pass-plugin" in res.stdout and "--print-ir-after-change" in res.stdout


@pytest.mark.parametrize(
    "body, message",
    [
        ("def broken(:\n", "SyntaxError"),
        ("import no_such_module_for_einc\n", "ModuleNotFoundError: No module named 'no_such_module_for_einc'"),
        ("X = 1\n", "defines no pass"),
        (PASS.format(cls="Cse", name="cse"), "defines pass 'cse' (Cse), a name already taken by einc or xDSL"),
    ],
)
def test_broken_plugins_are_located_errors(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], body: str, message: str
) -> None:
    path = plugin(tmp_path, "bad", body=body)
    code, _, err = opt_main(capsys, "examples/softmax.ein", "--load-pass-plugin", str(path))
    assert code == 1 and "Traceback" not in err
    assert err.startswith("<command line>:1:") and message in err, err
    assert f"--load-pass-plugin {path}" in err.splitlines()[1]  # the caret line shows the option
    assert "^~~" in err.splitlines()[2]


def test_two_plugins_with_one_name_clash(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    first = plugin(tmp_path, "twin")
    (tmp_path / "other").mkdir()
    second = plugin(tmp_path / "other", "twin")
    code, _, err = opt_main(capsys, "examples/softmax.ein", "--load-pass-plugin", str(first), "--load-pass-plugin", str(second))
    assert code == 1 and f"a name already taken by {first}" in err
    code, _, err = opt_main(capsys, "examples/softmax.ein", "--load-pass-plugin", str(tmp_path / "missing.py"))
    assert code == 1 and "no such file" in err


def test_a_plugin_pass_that_raises_names_the_plugin(tmp_path: Path) -> None:
    path = plugin(tmp_path, "boom", body=PASS.format(cls="Boom", name="boom").replace(
        "for c in op.walk():", "raise ZeroDivisionError('oops')\n        for c in op.walk():"))  # fmt: skip
    res = cli("einc-opt", "examples/softmax.ein", "--load-pass-plugin", str(path), "-p", "convert-ein-to-affine,boom",
              env={**_env(), "EINC_REPRO_DIR": str(tmp_path)})  # fmt: skip
    assert res.returncode == 2 and "Traceback" not in res.stderr
    assert f"internal error in plugin pass 'boom' (from {path}): ZeroDivisionError: oops" in res.stderr
    assert "the pass came from the plugin" in res.stderr and "a bug in einc" not in res.stderr
    res = cli("einc", "compile", "examples/softmax.ein", "--load-pass-plugin", str(path), "--pipeline-hook", "loops=boom",
              env={**_env(), "EINC_REPRO_DIR": str(tmp_path)})  # fmt: skip
    assert res.returncode == 2 and "plugin pass 'boom'" in res.stderr and "a bug in einc" not in res.stderr


# ---- einc compile / run and einc.compile -----------------------------------------------------


def test_example_plugin_in_einc_compile_and_run() -> None:
    res = cli("einc", "compile", "examples/softmax.ein", "--load-pass-plugin", str(EXAMPLE),
              "--pipeline-hook", "loops=annotate-constants{tag=seen}", "--dump-after", "scheduled")  # fmt: skip
    assert res.returncode == 0, res.stderr
    assert 'einc.note = "seen #0"' in res.stdout and 'einc.note = "seen #1"' in res.stdout
    res = cli("einc", "run", "examples/softmax.ein", "--load-pass-plugin", str(EXAMPLE), "--seed", "3",
              "--pipeline-hook", "target=annotate-constants", "--pipeline-hook", "ein=canonicalize", "--repeat", "1")  # fmt: skip
    assert res.returncode == 0, res.stdout + res.stderr
    assert "ok" in res.stdout and "MISMATCH" not in res.stdout


def test_example_plugin_in_einc_compile_api() -> None:
    kernel = einc.compile(
        (ROOT / "examples" / "softmax.ein").read_text(), pass_plugins=[str(EXAMPLE)],
        extra_passes={"loops": ["annotate-constants{tag=api}"], "scheduled": ["canonicalize"]},
        schedule="default",
    )  # fmt: skip
    rng = np.random.default_rng(0)
    x = rng.uniform(0.5, 2.0, (64, 1024)).astype(np.float32)
    got = kernel(input0=x)["output0"]
    e = np.exp(x.astype(np.float64) - x.max(axis=1, keepdims=True))
    np.testing.assert_allclose(got, e / e.sum(axis=1, keepdims=True), rtol=1e-4, atol=1e-6)


def test_the_hooked_pass_ran_at_its_stage() -> None:
    from einc.compiler.driver import Compilation
    from einc.compiler.registry import load_pass_plugin

    load_pass_plugin(str(EXAMPLE))
    source = (ROOT / "examples" / "softmax.ein").read_text()
    comp = Compilation(source, extra_passes={"scheduled": ["annotate-constants{tag=late}"]}, schedule="none")
    assert "late #" not in str(comp.module("loops")) and 'einc.note = "late #0"' in str(comp.module("scheduled"))
    assert "late #" not in str(Compilation(source, schedule="none").module("scheduled"))


@pytest.mark.parametrize(
    "extra, message",
    [
        ({"loop": ["cse"]}, "unknown stage 'loop' (did you mean 'loops'?)"),
        ({"loops": "cse"}, "extra_passes['loops'] is a list of pipeline texts"),
        ({"loops": ["csee"]}, "extra_passes['loops']:1:1: error: unknown pass 'csee' (did you mean 'cse'?)"),
        ({"loops": ["einc-tile{sise=4}"]}, "pass 'einc-tile' has no option 'sise' (did you mean 'size'?)"),
    ],
)
def test_extra_passes_mistakes(extra: dict[str, object], message: str) -> None:
    with pytest.raises(UsageError) as info:
        einc.compile("output0[N] = input0[N] + 1.0", {"input0": {"dtype": "float32", "shape": [8]}},
                     extra_passes=extra)  # type: ignore[arg-type]  # fmt: skip
    assert message in info.value.render()


@pytest.mark.parametrize(
    "hook, message, caret",
    [
        ("lops=cse", "unknown stage 'lops' (did you mean 'loops'?)", "lops=cse"),
        ("loops=canonicalise", "unknown pass 'canonicalise' (did you mean 'canonicalize'?)", "canonicalise"),
        ("loops=einc-tile{size=x}", "pass 'einc-tile' option 'size': 'x' is not a value of type int", "size"),
        ("loops", "--pipeline-hook takes STAGE=PASSES", "loops"),
    ],
)
def test_pipeline_hook_mistakes_at_the_command_line(
    capsys: pytest.CaptureFixture[str], hook: str, message: str, caret: str
) -> None:
    from einc import cli as einc_cli

    argv = ["compile", "examples/softmax.ein", "--pipeline-hook", hook]
    assert einc_cli.main(argv) == 1
    err = capsys.readouterr().err
    assert err.startswith("<command line>:1:") and message in err, err
    line, marks = err.splitlines()[1:3]
    start = marks.index("^")
    assert line[start : start + len(caret)] == caret and len(marks.strip()) == len(caret)


# ---- entry points ----------------------------------------------------------------------------


def _env(*extra_path: Path) -> dict[str, str]:
    import os

    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([*(str(p) for p in extra_path), str(ROOT)])
    return env


def test_entry_point_passes_of_an_installed_package(tmp_path: Path) -> None:
    """A real distribution on sys.path: dist-info with entry_points.txt naming a class and
    a module; a broken entry point is a warning and the others still load."""
    package = tmp_path / "einc_demo_passes"
    package.mkdir()
    (package / "__init__.py").write_text(PASS.format(cls="DemoPass", name="demo-note"))
    (package / "more.py").write_text(PASS.format(cls="MorePass", name="more-note"))
    info = tmp_path / "einc_demo_passes-0.1.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: einc-demo-passes\nVersion: 0.1\n")
    (info / "entry_points.txt").write_text(textwrap.dedent("""\
        [einc.passes]
        demo = einc_demo_passes:DemoPass
        more = einc_demo_passes.more
        broken = einc_demo_passes:NoSuchThing
        """))  # fmt: skip
    res = cli("einc-opt", "examples/softmax.ein", "-p", "convert-ein-to-affine,demo-note{factor=3},more-note",
              env=_env(tmp_path))  # fmt: skip
    assert res.returncode == 0, res.stderr
    assert res.stdout.count('note = "x1"') == 2  # more-note ran last, over demo-note's x3
    assert "warning: einc.passes entry point 'broken = einc_demo_passes:NoSuchThing' of einc-demo-passes" in res.stderr
    res = cli("einc-opt", "--list-passes", env=_env(tmp_path))
    assert "  demo-note  Mark each float constant" in res.stdout
    assert "[from entry point 'demo = einc_demo_passes:DemoPass' of einc-demo-passes]" in res.stdout
    res = cli("einc", "compile", "examples/softmax.ein", "--pipeline-hook", "loops=demo-note{factor=5}",
              "--dump-after", "loops", env=_env(tmp_path))  # fmt: skip
    assert res.returncode == 0 and 'note = "x5"' in res.stdout
