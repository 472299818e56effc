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


CHECKING = '''
from dataclasses import dataclass
from xdsl.dialects import arith
from xdsl.dialects.builtin import ModuleOp
from xdsl.passes import ModulePass
from einc.errors import TargetError
from einc.ir.locations import at_op


@dataclass(frozen=True)
class CheckedAtParse(ModulePass):
    """Refuses a factor below 1 when the pipeline is parsed."""

    name = "checked-at-parse"
    factor: int = 1

    def __post_init__(self) -> None:
        if self.factor < 1:
            raise ValueError(f"factor must be at least 1, got {self.factor}")

    def apply(self, ctx, op: ModuleOp) -> None:
        pass


@dataclass(frozen=True)
class CheckedAtRun(ModulePass):
    """Refuses a tile_size below 1 when it runs."""

    name = "checked-at-run"
    tile_size: int = 1

    def apply(self, ctx, op: ModuleOp) -> None:
        if self.tile_size < 1:
            raise ValueError(f"tile-size must be at least 1, got {self.tile_size}")


@dataclass(frozen=True)
class BadDefault(CheckedAtRun):
    """Refuses its own default when it runs: a bug of the plugin, not of the pipeline."""

    name = "bad-default"
    tile_size: int = 0


@dataclass(frozen=True)
class RefuseConstants(ModulePass):
    """Refuses the first float constant, at its op (at_op's pair given whole, or spread)."""

    name = "refuse-constants"
    spread: bool = False

    def apply(self, ctx, op: ModuleOp) -> None:
        for c in op.walk():
            if isinstance(c, arith.ConstantOp):
                if self.spread:
                    raise TargetError("this pass refuses constants", *at_op(c.location))
                raise TargetError("this pass refuses constants", at_op(c.location))
'''


@pytest.mark.parametrize("spread", ["false", "true"])
def test_a_plugin_error_at_an_ops_place_renders_in_einc_opt(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                            spread: str) -> None:  # fmt: skip
    """`EincError(message, at_op(op.location))` (the pair as one argument) crashed the
    renderer with a traceback; it means the same as the spread form."""
    path = plugin(tmp_path, "checking", body=CHECKING)
    code, out, err = opt_main(capsys, "examples/softmax.ein", "--load-pass-plugin", str(path),
                              "-p", f"convert-ein-to-affine,refuse-constants{{spread={spread}}}")  # fmt: skip
    assert (code, out) == (1, "")
    assert err == "examples/softmax.ein:4:1: error: this pass refuses constants\ntemp0[N] >=! input0[N, C]\n^\n"


def test_an_error_location_of_another_type_is_refused_when_the_error_is_made() -> None:
    """Not later, when the error is printed (a traceback from the renderer)."""
    from typing import cast

    from einc.errors import EincError, SourceLocation

    with pytest.raises(TypeError, match="EincError's location is a SourceLocation, None or at_op"):
        EincError("x", cast(SourceLocation, "prog.ein:1:1"))
    notes = ((SourceLocation("s", 1, 1), "n"),)
    assert EincError("x", (SourceLocation("a", 2, 3), notes)).render() == "a:2:3: error: x\ns:1:1: note: n"


@pytest.mark.parametrize(
    ("name", "option", "message"),
    [("checked-at-parse", "factor=0", "pass 'checked-at-parse' option 'factor': factor must be at least 1, got 0"),
     ("checked-at-run", "tile-size=-2", "pass 'checked-at-run' option 'tile_size' (= -2): tile-size must be at least 1, "
      "got -2")],
)  # fmt: skip
def test_a_plugins_value_error_for_an_option_is_located_at_the_option(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], name: str, option: str, message: str
) -> None:
    """It was an internal error when raised while the pass ran (and at the pass's name when
    raised while the pipeline was parsed)."""
    path = plugin(tmp_path, "checking", body=CHECKING)
    pipeline = f"convert-ein-to-affine,canonicalize,{name}{{{option}}}"
    code, _, err = opt_main(capsys, "examples/softmax.ein", "--load-pass-plugin", str(path), "-p", pipeline)
    assert code == 1
    col = pipeline.index(option) + 1
    caret = " " * (col - 1) + "^" + "~" * (len(option) - 1)
    assert err == f"pass-pipeline:1:{col}: error: {message}\n{pipeline}\n{caret}\n"


def test_a_plugin_refusing_its_own_default_is_the_plugins_bug(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                              monkeypatch: pytest.MonkeyPatch) -> None:  # fmt: skip
    monkeypatch.setenv("EINC_REPRO_DIR", str(tmp_path))
    path = plugin(tmp_path, "checking", body=CHECKING)
    code, _, err = opt_main(capsys, "examples/softmax.ein", "--load-pass-plugin", str(path), "-p", "bad-default")
    assert code == 2
    assert err.startswith(f"einc-opt: internal error in plugin pass 'bad-default' (from {path}): ValueError: tile-size")


def test_an_option_refused_when_the_pass_runs_is_located_on_every_path(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A stage hook (at its text on the command line), a schedule's apply_registered_pass (at
    the op) and extra_passes= (in its text)."""
    from einc import cli as einc_cli
    from einc.errors import ScheduleError
    from einc.schedule.script import Schedule

    path = plugin(tmp_path, "checking", body=CHECKING)
    argv = ["compile", "examples/softmax.ein", "--load-pass-plugin", str(path), "--pipeline-hook",
            "loops=checked-at-run{tile_size=0}"]  # fmt: skip
    assert einc_cli.main(argv) == 1
    col = len(" ".join(["einc", *argv])) - len("tile_size=0}") + 1
    assert capsys.readouterr().err.startswith(
        f"<command line>:1:{col}: error: pass 'checked-at-run' option 'tile_size' (= 0): tile-size must be")
    schedule = tmp_path / "s.mlir"
    schedule.write_text("transform.named_sequence @__transform_main(%root: !transform.any_op) {\n"
                        '  %m = transform.apply_registered_pass "checked-at-run" with options = {"tile_size" = 0 : i64}'
                        " to %root : (!transform.any_op) -> !transform.any_op\n  transform.yield\n}\n")  # fmt: skip
    program = (ROOT / "examples" / "softmax.ein").read_text()
    with pytest.raises(ScheduleError) as info:
        einc.compile(program, schedule=Schedule.parse(schedule.read_text(), str(schedule)))
    assert info.value.render().startswith(f"{schedule}:2:3: error: transform.apply_registered_pass: pass "
                                          "'checked-at-run' option 'tile_size' (= 0)")  # fmt: skip
    with pytest.raises(UsageError) as refused:
        einc.compile(program, extra_passes={"scheduled": ["checked-at-run{tile_size=0}"]})
    assert refused.value.render().startswith("extra_passes['scheduled']:1:16: error: pass 'checked-at-run' option")


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
