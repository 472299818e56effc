"""`--check-numerics`: a deliberately wrong pass (examples/plugins/wrong_pass.py) is named as
the first step that changes the numbers, and not the passes before it, on C and on OpenCL;
a clean pipeline passes; a wrong transform op in a schedule is named with its location."""

from __future__ import annotations

import re
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType

import pytest
from xdsl.context import Context
from xdsl.dialects import affine
from xdsl.dialects.builtin import AffineMapAttr, ModuleOp
from xdsl.ir.affine import AffineConstantExpr, AffineMap
from xdsl.passes import ModulePass

import einc.compiler.registry
from einc.compiler.driver import Compilation
from einc.tools.numerics import NumericsReport, check_compilation, check_pipeline, render
from einc.tools.numerics.check import with_extra_passes
from einc.tools.numerics.scale import WORK_BUDGET, candidate_scales, scale_program
from tests.modules import load_module

ROOT = Path(__file__).resolve().parent.parent
EXAMPLES = ROOT / "examples"
MATMUL = (EXAMPLES / "matmul.ein").read_text()
SOFTMAX = (EXAMPLES / "softmax.ein").read_text()


def _load_wrong_passes() -> ModuleType:
    return load_module(EXAMPLES / "plugins" / "wrong_pass.py")


WRONG = _load_wrong_passes()


@pytest.fixture
def wrong_passes_registered(monkeypatch: pytest.MonkeyPatch) -> None:
    """The wrong passes in einc's registry, as `--load-pass-plugin` registers a plugin's."""
    builtin = einc.compiler.registry.get_all_passes

    def with_plugins() -> dict[str, Callable[[], type[ModulePass]]]:
        passes = builtin()
        passes["flip-subf"] = lambda: WRONG.FlipSubfPass
        passes["shorten-reduction"] = lambda: WRONG.ShortenReductionPass
        return passes

    monkeypatch.setattr(einc.compiler.registry, "get_all_passes", with_plugins)


def _first_bad(report: NumericsReport) -> str:
    assert report.first_bad is not None, render(report)
    return report.steps[report.first_bad].name


def _agreed_before(report: NumericsReport) -> None:
    """Every step before the first bad one that ran agreed with the oracle, and some ran."""
    assert report.first_bad is not None
    before = [s for s in report.steps[: report.first_bad] if s.check is not None and s.check.ran]
    assert before and all(s.check is not None and s.check.ok for s in before), render(report)


# ---- einc-opt's pipeline ----------------------------------------------------------------------


def test_plugin_pass_object_is_named_on_c() -> None:
    report = check_pipeline(SOFTMAX, "softmax.ein",
                            ["convert-ein-to-affine,canonicalize", WRONG.FlipSubfPass(), "cse"], target="c")  # fmt: skip
    assert _first_bad(report) == "flip-subf"
    bad = report.steps[report.first_bad or 0]
    assert bad.kind == "plugin" and bad.stage == "loops"
    _agreed_before(report)
    check = bad.check
    assert check is not None and not check.ok
    out = check.outputs[0]
    assert out.name == "output0" and out.first_bad_index is not None and out.got != out.want
    assert out.max_abs > out.tolerance
    printed = report.steps[-1]
    assert printed.kind == "printer" and printed.check is not None and printed.check.ran
    assert not printed.check.ok  # the C kernel computes the wrong numbers too ...
    assert printed.check.inherited and printed.check.inherits_from == bad.index  # ... the plugin's, unchanged
    assert check.inherits_from is None and check.previous_step == 1  # the culprit: against convert-ein-to-affine
    text = render(report)
    assert "↳   5 source    printer" in text and "inherited from step 3" in text
    diff = text.split("+++ after step 3 (flip-subf [plugin])")[1]  # in the custom form, as einc-opt prints
    assert "-        %7 = arith.subf %5, %6 : f32" in diff and "+        %7 = arith.addf %5, %6 : f32" in diff


def test_clean_pipeline_agrees() -> None:
    report = check_pipeline(MATMUL, "matmul.ein", "convert-ein-to-affine,canonicalize,cse", target="c")
    assert report.ok, render(report)
    ran = [s for s in report.steps if s.check is not None and s.check.ran]
    assert {s.check.level for s in ran if s.check is not None} == {"ein", "loops", "source:c"}


def test_einc_opt_names_the_registered_pass(wrong_passes_registered: None, capsys: pytest.CaptureFixture[str]) -> None:
    from einc.opt import main

    path = str(EXAMPLES / "matmul.ein")
    status = main([path, "--pass-pipeline=convert-ein-to-affine,canonicalize,shorten-reduction,cse",
                   "--check-numerics", "--seed", "3", "-t", "c"])  # fmt: skip
    out = capsys.readouterr().out
    assert status == 1, out
    assert "step 3, plugin 'shorten-reduction', stage loops, is the first that changes the numbers" in out
    assert "+++ after step 3 (shorten-reduction [plugin])" in out
    clean = main([path, "--pass-pipeline=convert-ein-to-affine,canonicalize", "--check-numerics"])
    assert clean == 0, capsys.readouterr().out


# ---- einc compile's pipeline ---------------------------------------------------------------


def _compilation(text: str, target: str, extra: dict[str, list[str]] | None = None, **kw: object) -> Compilation:
    from einc.schedule.choice import ScheduleChoice
    from einc.schedule.script import Schedule

    schedule = kw.get("schedule")
    assert schedule is None or isinstance(schedule, Schedule | ScheduleChoice)
    return with_extra_passes(Compilation(text, "prog.ein", target=target, schedule=schedule, use_records=False), extra or {})


def test_compilation_clean_on_c() -> None:
    report = check_compilation(_compilation(MATMUL, "c"))
    assert report.ok, render(report)
    kinds = {s.kind for s in report.steps}
    assert {"frontend", "pass", "transform", "printer"} <= kinds  # the default schedule's ops are steps
    assert report.shape_scale < 1.0


def test_compilation_names_plugin_on_c(wrong_passes_registered: None) -> None:
    report = check_compilation(_compilation(MATMUL, "c", {"loops": ["shorten-reduction"]}), seed=1)
    assert _first_bad(report) == "shorten-reduction"
    assert report.steps[report.first_bad or 0].kind == "plugin"
    _agreed_before(report)


def _device(target: str) -> None:
    from einc.targets.toolchains import available, required

    ok, why = available(target)
    if not ok and not required(target):
        pytest.skip(why)


def test_compilation_names_plugin_on_opencl(wrong_passes_registered: None) -> None:
    _device("opencl")
    report = check_compilation(_compilation(SOFTMAX, "opencl", {"loops": ["flip-subf"]}))
    assert _first_bad(report) == "flip-subf"
    _agreed_before(report)
    source = report.steps[-1]
    assert source.check is not None and source.check.level == "source:opencl"
    assert source.check.ran and not source.check.ok, render(report)  # PoCL runs the wrong kernel


def test_wrong_pass_below_the_loops_on_opencl(wrong_passes_registered: None) -> None:
    """After convert-affine-to-egpu: named by the egpu interpreter where there is one, else the
    OpenCL run shows the difference and the report lists the unexecuted plugin as a suspect."""
    _device("opencl")
    report = check_compilation(_compilation(SOFTMAX, "opencl", {"target": ["flip-subf"]}))
    plugin = next(s for s in report.steps if s.name == "flip-subf")
    assert report.first_bad is not None
    if plugin.check is not None and plugin.check.ran:
        assert report.first_bad == plugin.index
    else:
        assert report.steps[report.first_bad].kind == "printer"
        assert f"{plugin.index} (flip-subf)" in render(report)
    _agreed_before(report)


def test_wrong_transform_op_is_named_with_its_location(wrong_passes_registered: None, tmp_path: Path) -> None:
    schedule = tmp_path / "sched.mlir"
    schedule.write_text(
        "transform.named_sequence @__transform_main(%root: !transform.any_op) {\n"
        '  %n = transform.einc.match stmt "output0" axis "N" in %root\n'
        "  transform.einc.parallelize %n\n"
        '  %r = transform.apply_registered_pass "shorten-reduction" to %root : (!transform.any_op) -> !transform.any_op\n'
        "  transform.yield\n"
        "}\n"
    )
    from einc.schedule.choice import ScheduleChoice

    report = check_compilation(_compilation(MATMUL, "c", schedule=ScheduleChoice.read(str(schedule))))
    bad = report.steps[report.first_bad or 0]
    assert report.first_bad is not None and bad.kind == "transform", render(report)
    assert "apply_registered_pass" in bad.name
    assert bad.location == f"{schedule}:4:3"
    _agreed_before(report)


def test_einc_compile_cli(capsys: pytest.CaptureFixture[str]) -> None:
    from einc.cli import main

    status = main(["compile", str(EXAMPLES / "softmax.ein"), "--check-numerics", "--shape-scale", "1/8",
                   "--no-records"])  # fmt: skip
    out = capsys.readouterr().out
    assert status == 0, out
    assert "shapes scaled by 1/8: input0: float32[8, 128]" in out and "✔" in out
    bad = main(["compile", str(EXAMPLES / "softmax.ein"), "--check-numerics", "--shape-scale", "2"])
    assert bad == 1 and "--shape-scale" in capsys.readouterr().err


@pytest.mark.parametrize("target", ["c", "opencl"])
def test_einc_compile_check_numerics_writes_the_output(target: str, tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                       monkeypatch: pytest.MonkeyPatch) -> None:  # fmt: skip
    """`-o` was ignored (no file, exit status 0): the source is written as `einc compile -o`
    writes it (a device target's manifest beside it)."""
    from einc.cli import main

    monkeypatch.chdir(tmp_path)
    program = str(EXAMPLES / "softmax.ein")
    assert main(["compile", program, "-t", target, "--no-records", "-o", "plain"]) == 0
    status = main(["compile", program, "-t", target, "--no-records", "--check-numerics", "--shape-scale", "1/8",
                   "-o", "checked"])  # fmt: skip
    assert status == 0, capsys.readouterr().out
    assert (tmp_path / "checked").read_text() == (tmp_path / "plain").read_text()
    assert (tmp_path / "checked.json").exists() == (target != "c") == (tmp_path / "plain.json").exists()
    if target != "c":
        assert (tmp_path / "checked.json").read_text() == (tmp_path / "plain.json").read_text()


def test_einc_compile_check_numerics_writes_no_output_when_a_step_is_wrong(
    wrong_passes_registered: None, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from einc.cli import main

    out = tmp_path / "k.c"
    status = main(["compile", str(EXAMPLES / "matmul.ein"), "--no-records", "--pipeline-hook", "loops=shorten-reduction",
                   "--check-numerics", "--shape-scale", "1/8", "-o", str(out)])  # fmt: skip
    assert status == 1 and not out.exists()
    assert f"einc: {out} not written: the numerics check failed" in capsys.readouterr().err


def test_einc_compile_check_numerics_refuses_dump_after(capsys: pytest.CaptureFixture[str]) -> None:
    from einc.cli import main

    argv = ["compile", str(EXAMPLES / "softmax.ein"), "--check-numerics", "--dump-after", "loops"]
    assert main(argv) == 1
    col = len("einc " + " ".join(argv[:3])) + 2
    assert capsys.readouterr().err.startswith(f"<command line>:1:{col}: error: --check-numerics checks the compiled "
                                              "source and prints its report; --dump-after prints a stage's IR")  # fmt: skip


def test_einc_opt_check_numerics_writes_the_output_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from einc.opt import main

    path, out = str(EXAMPLES / "matmul.ein"), tmp_path / "out.c"
    pipeline = "--pass-pipeline=convert-ein-to-affine,canonicalize"
    assert main([path, pipeline, "--check-numerics", "-t", "c", "-o", str(out)]) == 0
    assert main([path, pipeline, "-t", "c", "-o", str(tmp_path / "plain.c")]) == 0
    assert out.read_text() == (tmp_path / "plain.c").read_text() and "void kernel(" in out.read_text()
    assert "agree with the float64 reference" in capsys.readouterr().out


# ---- scaling -------------------------------------------------------------------------------------


def test_scaling_keeps_the_program_legal() -> None:
    conv = (EXAMPLES / "conv2d_pad.ein").read_text()
    scaled = scale_program(conv, "conv.ein", 1 / 8)
    assert "float32[2, 4, 4, 4]" in scaled and "< 4]" in scaled and "HO in 4" in scaled
    assert candidate_scales(MATMUL, "m.ein", budget=WORK_BUDGET)[0] == 1 / 32
    assert candidate_scales(MATMUL, "m.ein", budget=16 * WORK_BUDGET)[0] == 1 / 16
    assert candidate_scales(MATMUL, "m.ein")[-1] == 1.0


# ---- the ein level and crashes --------------------------------------------------------------


def test_a_pass_on_the_ein_module_is_checked_at_the_ein_level() -> None:
    """flip-subf on the ein module itself (softmax's einsum bodies subtract): executed by the
    ein-level executor, named before any lowering."""
    report = check_pipeline(SOFTMAX, "softmax.ein", [WRONG.FlipSubfPass(), "convert-ein-to-affine"])
    assert _first_bad(report) == "flip-subf"
    bad = report.steps[report.first_bad or 0]
    assert bad.check is not None and bad.check.level == "ein" and bad.stage == "ein"
    assert report.steps[-1].check is not None and not report.steps[-1].check.ok  # still wrong lowered


@dataclass(frozen=True)
class OverrunPass(ModulePass):
    """Every constant upper loop bound one past the end: an out-of-bounds access."""

    name = "overrun"

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        for loop in op.walk():
            if isinstance(loop, affine.ForOp):
                (bound,) = loop.upperBoundMap.data.results
                if isinstance(bound, AffineConstantExpr):
                    loop.upperBoundMap = AffineMapAttr(AffineMap(0, 0, (AffineConstantExpr(bound.value + 1),)))


@dataclass(frozen=True)
class RaisingPass(ModulePass):
    name = "raising"

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        raise KeyError("a bug in the pass")


def test_an_out_of_bounds_module_is_a_crashed_step() -> None:
    report = check_pipeline(MATMUL, "matmul.ein", ["convert-ein-to-affine", OverrunPass(), "canonicalize"])
    bad = report.steps[report.first_bad or 0]
    assert bad.name == "overrun" and bad.check is not None and bad.check.crashed, render(report)
    assert "out of bounds" in bad.check.reason or "bounds" in bad.check.reason.lower()
    assert "crashed" in render(report)


def test_a_pass_that_raises_is_the_failing_step() -> None:
    report = check_pipeline(MATMUL, "matmul.ein", ["convert-ein-to-affine", RaisingPass(), "canonicalize"])
    assert _first_bad(report) == "raising"
    bad = report.steps[-1]
    assert bad.name == "raising" and bad.check is not None and bad.check.crashed
    assert "KeyError" in bad.check.reason


@dataclass(frozen=True)
class NeedsSixteenPass(ModulePass):
    """Refuses (an EincError, as a schedule whose tiles do not fit) buffers under 16 wide."""

    name = "needs-sixteen"

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        from xdsl.dialects.builtin import MemRefType

        from einc.errors import ScheduleError

        for block_op in op.walk():
            for region in block_op.regions:
                for block in region.blocks:
                    for block_arg in block.args:
                        if isinstance(block_arg.type, MemRefType) and min(block_arg.type.get_shape()) < 16:
                            raise ScheduleError("a tile of 16 does not fit")


def test_a_scale_the_pipeline_refuses_is_passed_over() -> None:
    report = check_pipeline(MATMUL, "matmul.ein", ["convert-ein-to-affine", NeedsSixteenPass()],
                            shape_scale=1 / 32)  # fmt: skip
    assert report.ok and report.shape_scale == 1.0, render(report)
    assert any("scale 1/32 refused (" in note and "a tile of 16 does not fit" in note for note in report.notes)
    assert "shapes as written: input0: float32[256, 512]" in render(report)


def test_an_mlir_input_with_an_embedded_schedule(tmp_path: Path) -> None:
    """A loop-level module holding its schedule: the input, executed, is the reference; each
    op of the embedded schedule is a step."""
    small = MATMUL.replace("256", "8").replace("512", "8")
    loops = str(Compilation(small, "m.ein", use_records=False).module("loops")).rstrip()
    schedule = "\n".join(line for line in (EXAMPLES / "matmul_schedule.mlir").read_text().splitlines()
                         if not line.startswith("//"))  # fmt: skip
    path = tmp_path / "loops.mlir"
    path.write_text(loops[:-1] + schedule + "\n}\n")
    report = check_pipeline(path.read_text(), str(path), "einc-apply-schedule,canonicalize", target="c")
    assert report.ok, render(report)
    assert [s.name for s in report.steps if s.kind == "transform"][:2] == [
        '%t = transform.einc.knob "tile_m" = 64 from [8, 32, 64]',
        '%n = transform.einc.match stmt "output0" axis "N" in %root',
    ]
    assert report.steps[-1].check is not None and report.steps[-1].check.ran  # the C kernel ran
    assert any("the reference is the input module itself" in n for n in report.notes)


# ---- the real plugin mechanism, from the command lines ------------------------------------------

BIN = Path(sys.executable).parent
WRONG_PASS = str(EXAMPLES / "plugins" / "wrong_pass.py")


def _run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(BIN / args[0]), *args[1:]], capture_output=True, text=True, timeout=300, cwd=ROOT, check=False)


def test_einc_opt_names_a_plugin_loaded_from_its_file_on_c() -> None:
    res = _run("einc-opt", "examples/softmax.ein", "--load-pass-plugin", WRONG_PASS,
               "--pass-pipeline=convert-ein-to-affine,canonicalize,flip-subf,cse", "--check-numerics")  # fmt: skip
    assert res.returncode == 1, res.stdout + res.stderr
    assert "step 3, plugin 'flip-subf'" in res.stdout and "is the first that changes the numbers" in res.stdout
    assert "-        %7 = arith.subf %5, %6 : f32" in res.stdout and "+        %7 = arith.addf %5, %6 : f32" in res.stdout
    assert "✔   1 loops     convert-ein-to-affine" in res.stdout  # the pass before it agreed
    assert "Traceback" not in res.stderr


def test_einc_compile_names_a_hooked_plugin_on_opencl() -> None:
    res = _run("einc", "compile", "examples/matmul.ein", "-t", "opencl", "--no-records", "--load-pass-plugin", WRONG_PASS,
               "--pipeline-hook", "target=shorten-reduction", "--check-numerics")  # fmt: skip
    assert res.returncode == 1, res.stdout + res.stderr
    assert "plugin 'shorten-reduction' (after the target stage), stage target, is the first" in res.stdout
    # (numbered after the default schedule's ops, each a step of the scheduled stage)
    assert re.search(r"✔ +\d+ target +convert-affine-to-egpu", res.stdout), res.stdout
    bad = [line for line in res.stdout.splitlines() if line.lstrip().startswith("✘")]
    assert bad and "shorten-reduction" in bad[0], res.stdout  # nothing before it is blamed
    assert "Traceback" not in res.stderr


def test_einc_compile_with_a_correct_plugin_agrees() -> None:
    res = _run("einc", "compile", "examples/softmax.ein", "--no-records", "--load-pass-plugin",
               str(EXAMPLES / "plugins" / "double_constants.py"), "--pipeline-hook", "loops=annotate-constants",
               "--check-numerics")  # fmt: skip
    assert res.returncode == 0, res.stdout + res.stderr
    assert "✘" not in res.stdout and "annotate-constants" in res.stdout
