"""A bug in einc is an InternalCompilerError, never an EincError: the API raises it with the
original exception as its cause; `einc` and `einc-opt` write a reproducer and exit with 2.

Each test makes one piece of einc fail (a printer, a pass, the frontend, a transform utility)
with monkeypatch and checks the class, the message, the reproducer and the exit status."""

from __future__ import annotations

from pathlib import Path

import pytest

import einc
from einc import cli, opt
from einc.errors import EincError, InternalCompilerError
from einc.compiler.registry import get_all_passes
from einc.passes.pipeline import LOOPS_PIPELINE
from einc.schedule.script import Schedule
from einc.targets.c import CTarget

PROGRAM = """input input0: float32[8, 4]
input input1: float32[4, 2]
output0[N, M] +=! input0[N, K] * input1[K, M]
"""
SCHEDULE = """builtin.module {
  transform.named_sequence @__transform_main(%root: !transform.any_op) {
    %n = transform.einc.match stmt "output0" axis "N" in %root
    %no, %ni = transform.einc.tile %n by 4
    transform.yield
  }
}
"""


class Boom(RuntimeError):
    pass


def boom(*_args: object, **_kwargs: object) -> None:
    raise Boom("the planted bug")


@pytest.fixture
def broken_printer(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(CTarget, "emit", classmethod(boom))


@pytest.fixture
def broken_loops_pass(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(get_all_passes()["convert-ein-to-affine"](), "apply", boom)


def test_not_an_einc_error() -> None:
    assert not issubclass(InternalCompilerError, EincError)
    from einc.frontend import InternalCompilerError as FrontendICE

    assert FrontendICE is InternalCompilerError


def test_api_printer_bug_propagates_with_cause_and_context(broken_printer: None) -> None:
    with pytest.raises(InternalCompilerError) as info:
        einc.compile(PROGRAM, schedule=SCHEDULE)
    ice = info.value
    assert isinstance(ice.__cause__, Boom)
    assert ice.stage == "source"
    assert "bug in einc" in str(ice) and "Boom: the planted bug" in str(ice)
    assert ice.context["program"] == PROGRAM and ice.context["target"] == "c"
    assert ice.context["schedule"] == SCHEDULE


def test_api_pass_bug_names_the_stage(broken_loops_pass: None) -> None:
    with pytest.raises(InternalCompilerError) as info:
        einc.compile(PROGRAM)
    assert info.value.stage == "loops" and isinstance(info.value.__cause__, Boom)
    assert info.value.context["pipeline"] == LOOPS_PIPELINE


def test_frontend_bug_is_internal(monkeypatch: pytest.MonkeyPatch) -> None:
    from einc.frontend import irgen

    monkeypatch.setattr(irgen, "build", boom)
    with pytest.raises(InternalCompilerError) as info:
        einc.compile(PROGRAM)
    assert info.value.stage == "ein" and isinstance(info.value.__cause__, Boom)
    assert info.value.context["program"] == PROGRAM


def test_schedule_interpreter_bug_is_internal(monkeypatch: pytest.MonkeyPatch) -> None:
    from einc.transforms import loop_transforms

    loops = einc.compiler.driver.lower_to_stage(PROGRAM, stage="loops")
    monkeypatch.setattr(loop_transforms, "tile_loop", boom)
    with pytest.raises(InternalCompilerError) as info:
        Schedule.parse(SCHEDULE, "s.mlir").apply(loops, get_all_passes())
    assert info.value.stage == "schedule" and isinstance(info.value.__cause__, Boom)
    assert info.value.context["schedule"] == SCHEDULE


def only_reproducer(folder: Path) -> str:
    found = list(folder.glob("einc-crash-*.txt"))
    assert len(found) == 1, found
    return found[0].read_text()


def test_cli_compile_writes_reproducer_and_exits_2(
    broken_printer: None, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    prog, sched = tmp_path / "p.ein", tmp_path / "s.mlir"
    prog.write_text(PROGRAM)
    sched.write_text(SCHEDULE)
    repro = tmp_path / "repro"
    monkeypatch.setenv("EINC_REPRO_DIR", str(repro))
    assert cli.main(["compile", str(prog), "--schedule", str(sched)]) == 2
    err = capsys.readouterr().err
    assert "internal compiler error in stage 'source'" in err and "bug in einc" in err
    text = only_reproducer(repro)
    assert str(next(repro.glob("einc-crash-*.txt"))) in err
    assert f"einc {einc.__version__}" in text and "stage: source" in text
    assert PROGRAM in text and SCHEDULE in text
    assert "\ntarget: c\n" in text and "\nkind: crash\n" in text and "\nstep: printer\n" in text
    assert "Traceback" in text and "Boom: the planted bug" in text
    assert f"einc compile {prog} --schedule {sched}" in text


def test_cli_run_writes_reproducer_in_cwd(
    broken_loops_pass: None, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "p.ein").write_text(PROGRAM)
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("EINC_REPRO_DIR", raising=False)
    assert cli.main(["run", "p.ein", "--seed", "1"]) == 2
    assert "stage 'loops'" in capsys.readouterr().err
    text = only_reproducer(tmp_path)
    assert PROGRAM in text and "stage: loops" in text and "Boom" in text


def test_cli_check_writes_reproducer(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from einc.targets.cuda import CUDATarget

    monkeypatch.setattr(CUDATarget, "emit", classmethod(boom))
    (tmp_path / "p.ein").write_text(PROGRAM)
    monkeypatch.setenv("EINC_REPRO_DIR", str(tmp_path))
    assert cli.main(["check", str(tmp_path / "p.ein"), "-t", "cuda"]) == 2
    assert "bug in einc" in capsys.readouterr().err
    text = only_reproducer(tmp_path)
    assert "\ntarget: cuda\n" in text and PROGRAM in text


def test_einc_opt_writes_reproducer(
    broken_loops_pass: None, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "p.ein").write_text(PROGRAM)
    monkeypatch.setenv("EINC_REPRO_DIR", str(tmp_path / "r"))
    assert opt.main([str(tmp_path / "p.ein"), "-p", "convert-ein-to-affine"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("einc-opt: internal compiler error") and "bug in einc" in err
    text = only_reproducer(tmp_path / "r")
    assert PROGRAM in text and "\npipeline: convert-ein-to-affine\n" in text and "\nmode: opt\n" in text
    assert "Boom: the planted bug" in text


def test_user_errors_still_exit_1_without_reproducer(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "p.ein").write_text("output0[N] = nothing[N]\n")
    monkeypatch.chdir(tmp_path)
    assert cli.main(["compile", "p.ein"]) == 1
    assert "p.ein:1:14: error:" in capsys.readouterr().err
    assert not list(tmp_path.glob("einc-crash-*"))


def test_a_device_buffer_named_twice_is_an_internal_error() -> None:
    """Two host buffers with one name (a pass's bug: an rfactor once named its partials twice)
    make no manifest: an InternalCompilerError, not a user-facing TargetError."""
    from xdsl.dialects import memref
    from xdsl.dialects.builtin import StringAttr

    from einc.compiler.driver import Compilation
    from einc.targets.gpu import host_function
    from einc.targets.opencl import OpenCLTarget

    comp = Compilation(
        "temp0[N] +=! input0[N, K]\noutput0[N] = temp0[N] * 2.0",
        input_dict={"input0": {"dtype": "float32", "shape": [8, 4]}},
        target="opencl",
        schedule="none",
        use_records=False,
    )
    module = comp.module("target").clone()
    allocs = [op for op in host_function(module).walk() if isinstance(op, memref.AllocOp)]
    assert allocs, "the temporary lives in a host allocation"
    allocs[0].attributes["ein.name"] = StringAttr("input0")
    with pytest.raises(InternalCompilerError, match="names buffer\\(s\\) input0 twice"):
        OpenCLTarget.manifest(module)
