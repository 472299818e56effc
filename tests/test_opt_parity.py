"""einc-opt as an mlir-opt user expects it (issue 14, item 4): every chunk's error with
--split-input-file, --verify-diagnostics against `expected-error` comments for einc's
errors, targets that refuse a module above their level, IR dumps and timings on stderr,
located pipeline mistakes with did-you-mean, a quiet end on a closed pipe; and `einc
check --schedule`, `einc compile --progress`."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from einc import cli, opt

ROOT = Path(__file__).resolve().parent.parent
BIN = Path(sys.executable).parent

LOOPS = """\
func.func @kernel(%a: memref<8xf32> {ein.name = "a"}, %o: memref<8xf32> {ein.name = "o", ein.output}) {
  affine.for %N = 0 to 8 {
    %x = affine.load %a[%N] : memref<8xf32>
    affine.store %x, %o[%N] : memref<8xf32>
  } {einc.stmt = "o", einc.axis = "N"}
  func.return
}
"""


def opt_main(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = opt.main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def write(tmp_path: Path, name: str, text: str) -> str:
    path = tmp_path / name
    path.write_text(text)
    return str(path)


# ---- --split-input-file and --verify-diagnostics ---------------------------------------------


def test_split_input_file_reports_every_chunk(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = write(tmp_path, "chunks.ein", "input a: float32[8]\nout[N] = a[N] + * 2\n// -----\n"
                 "input a: float32[8]\nout[N] = b[N]\n// -----\ninput a: float32[8]\nout[N] = a[N] * 2.0\n")  # fmt: skip
    code, out, err = opt_main(capsys, path, "--split-input-file")
    assert code == 1
    assert f"{path}:2:17: error:" in err  # the parse error of chunk 1
    assert f"{path}:5:10: error: unknown tensor 'b'" in err  # chunk 2, at its line in the file
    assert out.count("ein.einsum") == 1 and "// -----" in out  # chunk 3 still printed


EIN_EXPECTED = """\
input a: float32[8]
# expected-error @+1 {{expected an expression}}
out[N] = a[N] + * 2
// -----
input a: float32[8]
out[N] = b[N]
# expected-error @-1 {{unknown tensor 'b'}}
"""

MLIR_EXPECTED = """\
func.func @f() {
  // expected-error @+1 {{type expected}}
  %x = arith.constant 1 : badtype
}
// -----
func.func @load_rank_mismatch(%a: tensor<4x3xf32>) -> tensor<4xf32> {
  %0 = ein.einsum "o" assign parallel [N = 4] : tensor<4xf32> {
  ^bb0(%n: index):
    // expected-error @below {{Operation does not verify: ein.load: 1 indices for a tensor of rank 2}}
    %x = ein.load %a[%n] : tensor<4x3xf32>
    ein.yield %x : f32
  }
  func.return %0 : tensor<4xf32>
}
// -----
func.func @host(%a: memref<8xf64> {ein.name = "a", ein.output}) { // expected-error {{the hlsl target cannot store float64 buffers}}
  egpu.launch @k(%a) : memref<8xf64>
  func.return
}
egpu.func @k(%a: memref<8xf64>) grid [1, 1, 1] block [8, 1, 1] {
  %i = egpu.global_id x
  %x = affine.load %a[%i] : memref<8xf64>
  affine.store %x, %a[%i] : memref<8xf64>
  egpu.return
}
// -----
func.func @g(%a: memref<8xf32>) {
  func.return
}
transform.named_sequence @__transform_main(%root: !transform.any_op) {
  // expected-error @+1 {{transform.apply_registered_pass: unknown pass 'canonicalise' (did you mean 'canonicalize'?)}}
  %r = transform.apply_registered_pass "canonicalise" to %root : (!transform.any_op) -> !transform.any_op
  transform.yield
}
"""


def test_verify_diagnostics_checks_expected_errors_of_every_class(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """ParseError, SemanticError (.ein), xDSL's parse error, a verifier error, TargetError,
    ScheduleError (MLIR), UsageError (-t): each matched by its expected-error comment."""
    code, _, err = opt_main(capsys, write(tmp_path, "e.ein", EIN_EXPECTED), "--split-input-file", "--verify-diagnostics")
    assert (code, err) == (0, ""), err
    pipeline = "legalize-storage-dtypes{target=hlsl},einc-apply-schedule"
    code, _, err = opt_main(capsys, write(tmp_path, "e.mlir", MLIR_EXPECTED), "--split-input-file",
                            "--verify-diagnostics", "-p", pipeline)  # fmt: skip
    assert (code, err) == (0, ""), err
    text = "// expected-error @+2 {{-t cuda prints egpu kernels, but this module is at the loop level}}\n" + LOOPS
    code, _, err = opt_main(capsys, write(tmp_path, "t.mlir", text), "--verify-diagnostics", "-t", "cuda")
    assert (code, err) == (0, ""), err


def test_verify_diagnostics_reports_unexpected_and_missing_errors(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    text = EIN_EXPECTED.replace("{{unknown tensor 'b'}}", "{{unknown tensor 'c'}}")
    text += "// -----\ninput a: float32[8]\n# expected-error @+1 {{never}}\nout[N] = a[N]\n"
    path = write(tmp_path, "e.ein", text)
    code, _, err = opt_main(capsys, path, "--split-input-file", "--verify-diagnostics")
    assert code == 1
    assert f"{path}:6:10: error: unexpected error: unknown tensor 'b'" in err
    assert f"{path}:7:1: error: expected error \"unknown tensor 'c'\" was not produced (on line 6)" in err
    assert f"{path}:10:1: error: expected error \"never\" was not produced (on line 11)" in err
    assert "expected an expression" not in err  # chunk 1 matched


def test_verify_diagnostics_without_expectations_prints_errors(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Without expected-error comments, xDSL's meaning: each error on stdout, exit status 0."""
    path = write(tmp_path, "e.ein", "input a: float32[8]\nout[N] = b[N]\n// -----\ninput a: float32[8]\nout[N] = c[N]\n")
    code, out, _ = opt_main(capsys, path, "--split-input-file", "--verify-diagnostics")
    assert code == 0 and "unknown tensor 'b'" in out and "unknown tensor 'c'" in out


def test_an_embedded_schedule_without_entry_is_located(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = write(tmp_path, "l.mlir", LOOPS)
    code, _, err = opt_main(capsys, path, "-p", "einc-apply-schedule")
    assert code == 1 and err.startswith(f"{path}:1:1: error: einc-apply-schedule: no file given and no")
    assert "<unknown>" not in err


def test_embedded_schedule_errors_are_located(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    schedule = ('transform.named_sequence @__transform_main(%root: !transform.any_op) {\n'
                '  %o, %i = transform.einc.tile %n by 2\n'
                '  %n = transform.einc.match stmt "o" axis "N" in %root\n  transform.yield\n}\n')  # fmt: skip
    path = write(tmp_path, "l.mlir", LOOPS + schedule)
    code, _, err = opt_main(capsys, path, "-p", "einc-apply-schedule")
    assert code == 1 and err.startswith(f"{path}:9:3: error: %n is used before its definition"), err


# ---- targets ---------------------------------------------------------------------------------


def test_a_target_refuses_a_module_above_its_level(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from einc.targets.cuda import CUDATarget

    path = write(tmp_path, "l.mlir", LOOPS)
    code, out, err = opt_main(capsys, path, "-t", "cuda")
    assert code == 1 and out == ""
    assert err.startswith(f"{path}:2:3: error: -t cuda prints egpu kernels, but this module is at the loop level")
    assert f"-p '{CUDATarget.pipeline}'" in err
    code, out, err = opt_main(capsys, path, "-p", CUDATarget.pipeline, "-t", "cuda")
    assert code == 0 and "__global__" in out, err
    code, out, err = opt_main(capsys, "examples/softmax.ein", "-t", "c")
    assert code == 1 and "this module is at the ein level (ein.einsum)" in err and "convert-ein-to-affine," in err
    code, out, _ = opt_main(capsys, "--list-targets")
    assert code == 0 and f"  cuda     {CUDATarget.pipeline}" in out


# ---- instrumentation -------------------------------------------------------------------------


def test_ir_dumps_and_timing_go_to_stderr(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = opt_main(capsys, "examples/softmax.ein", "-p", "convert-ein-to-affine,cse,cse",
                              "--print-ir-before-all", "--print-ir-after-change", "--timing")  # fmt: skip
    assert code == 0 and "IR Dump" not in out and "Execution time report" not in out
    assert out.startswith("builtin.module")
    assert err.count("// -----// IR Dump Before ") == 3
    assert "IR Dump After convert-ein-to-affine //" in err
    assert err.count("IR Dump After cse //") <= 1  # the second cse changes nothing: no dump
    table = err[err.index("Execution time report") :]
    for row in ("convert-ein-to-affine", "cse", "Parser and input", "Output", "Total"):
        assert row in table
    assert "(100.0%)  Total" in table


def test_print_ir_after_failure(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = write(tmp_path, "l.mlir", LOOPS)
    code, out, err = opt_main(capsys, path, "-p", "canonicalize,einc-tile{stmt=o axis=Q}", "--print-ir-after-failure")
    assert code == 1 and out == ""
    assert "// -----// IR Dump After Failure einc-tile //----- //" in err and "affine.for" in err
    assert "einc-tile: no loop Q of o" in err


XDSL_TARGETS = ("arm-asm", "csl", "llvm", "mps", "riscv-asm", "wat", "wgsl", "x86-asm")


def test_help_lists_only_the_targets_that_print_eincs_ir(capsys: pytest.CaptureFixture[str]) -> None:
    from einc.targets import get_all_targets

    with pytest.raises(SystemExit):
        opt.main(["--help"])
    listed = capsys.readouterr().out.split("Available targets are:")[1].split("-o OUTPUT_FILE")[0]
    assert "".join(listed.split()) == ",".join([*get_all_targets(), "mlir"])


@pytest.mark.parametrize("target", XDSL_TARGETS)
def test_xdsls_own_targets_are_refused_at_the_option(target: str, tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                     monkeypatch: pytest.MonkeyPatch) -> None:  # fmt: skip
    """xDSL's printers of its own dialects: on einc's IR five crashed ('bug in einc', a crash
    file) and three printed nothing with exit status 0."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("EINC_REPRO_DIR", raising=False)
    code, out, err = opt_main(capsys, str(ROOT / "examples/matmul.ein"), "-p", "convert-ein-to-affine", "-t", target)
    assert code == 1 and out == ""
    col = len(f"einc-opt {ROOT / 'examples/matmul.ein'} -p convert-ein-to-affine ") + 1
    assert err.startswith(f"<command line>:1:{col}: error: argument -t/--target: invalid choice: '{target}' "
                          "(choose from c, opencl, cuda, hip, hlsl, sycl, poplar, mlir)")  # fmt: skip
    assert not list(tmp_path.iterdir())  # no crash file


# ---- pipelines -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "pipeline, message, caret",
    [
        ("convert-ein-to-afine", "unknown pass 'convert-ein-to-afine' (did you mean 'convert-ein-to-affine'?)",
         "convert-ein-to-afine"),
        ("cse,einc-tile{sise=4}", "pass 'einc-tile' has no option 'sise' (did you mean 'size'?) (its options: stmt, axis, size)", "sise"),
        ("einc-tile{size=x}", "pass 'einc-tile' option 'size': 'x' is not a value of type int", "size"),
        ("builtin.module(einc-tile{stmt=o axis=N size=1,2})", "pass 'einc-tile' option 'size': '1,2' is not a value of type int", "size"),
    ],
)  # fmt: skip
def test_pipeline_mistakes_are_located(capsys: pytest.CaptureFixture[str], pipeline: str, message: str, caret: str) -> None:
    code, _, err = opt_main(capsys, "examples/softmax.ein", "--pass-pipeline", pipeline)
    assert code == 1 and err.startswith("pass-pipeline:1:") and message in err, err
    line, marks = err.splitlines()[1:3]
    start = marks.index("^")
    assert line[start : start + len(caret)] == caret


def test_apply_registered_pass_mistakes_are_schedule_errors(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    def schedule(op: str) -> str:
        return ('transform.named_sequence @__transform_main(%root: !transform.any_op) {\n'
                f'  %r = {op} to %root : (!transform.any_op) -> !transform.any_op\n  transform.yield\n}}\n')  # fmt: skip

    path = write(tmp_path, "a.mlir", LOOPS + schedule('transform.apply_registered_pass "einc-tlie"'))
    code, _, err = opt_main(capsys, path, "-p", "einc-apply-schedule")
    assert code == 1 and "internal" not in err and "bug in einc" not in err
    assert err.startswith(f"{path}:9:3: error: transform.apply_registered_pass: unknown pass 'einc-tlie' (did you mean 'einc-tile'?)")
    # its options are honoured (xDSL drops them), and a failing pass is the schedule's error
    op = 'transform.apply_registered_pass "einc-tile" with options = {stmt = "o", axis = "N", size = 4}'
    code, out, err = opt_main(capsys, write(tmp_path, "b.mlir", LOOPS + schedule(op)), "-p", "einc-apply-schedule")
    assert code == 0 and "step 4" in out, err
    op = op.replace('axis = "N"', 'axis = "K"')
    path = write(tmp_path, "c.mlir", LOOPS + schedule(op))
    code, _, err = opt_main(capsys, path, "-p", "einc-apply-schedule")
    assert code == 1 and err.startswith(f"{path}:9:3: error: pass 'einc-tile' failed: einc-tile: no loop K of o")


def test_transform_interpreter_points_to_einc_apply_schedule(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    schedule = ('transform.named_sequence @__transform_main(%root: !transform.any_op) {\n'
                '  %n = transform.einc.match stmt "o" axis "N" in %root\n  transform.yield\n}\n')  # fmt: skip
    path = write(tmp_path, "s.mlir", LOOPS + schedule)
    code, _, err = opt_main(capsys, path, "-p", "transform-interpreter")
    assert code == 1 and err.startswith(f"{path}:9:3: error: transform-interpreter is xDSL's and does not know einc's")
    assert "-p einc-apply-schedule" in err
    code, _, err = opt_main(capsys, write(tmp_path, "l.mlir", LOOPS), "-p", "transform-interpreter")
    assert code == 1 and "could not find a nested named sequence" in err and "einc-apply-schedule" in err
    assert "ModuleOp(" not in err


def test_a_closed_pipe_ends_quietly(tmp_path: Path) -> None:
    big = tmp_path / "big.mlir"
    big.write_text("".join(f"func.func @f{i}() {{\n  func.return\n}}\n" for i in range(6000)))
    res = subprocess.run(f"'{BIN / 'einc-opt'}' '{big}' | head -1", shell=True, check=False, capture_output=True,
                         text=True, timeout=300, cwd=ROOT)  # fmt: skip
    assert res.stdout == "builtin.module {\n"
    assert res.stderr == ""


# ---- einc check / compile --------------------------------------------------------------------


def test_check_takes_the_users_schedule(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    missing = str(tmp_path / "none.mlir")
    assert cli.main(["check", "examples/matmul.ein", "-t", "cuda", "--schedule", missing]) == 1
    assert capsys.readouterr().err.startswith(f"{missing}:1:1: error: cannot read schedule")
    res = subprocess.run([str(BIN / "einc"), "check", "--help"], check=False, capture_output=True, text=True, timeout=300)
    assert "--schedule" in res.stdout and "--load-pass-plugin" in res.stdout and "--pipeline-hook" in res.stdout


@pytest.mark.cuda
def test_check_with_schedules(tmp_path: Path) -> None:
    schedule = write(tmp_path, "s.mlir", (  # the user's own: a block per 4 rows, a thread per element
        'transform.named_sequence @__transform_main(%root: !transform.any_op) {\n'
        '  %n = transform.einc.match stmt "output0" axis "N" in %root\n'
        '  %m = transform.einc.match stmt "output0" axis "M" in %root\n'
        '  %no, %ni = transform.einc.tile %n by 4\n'
        '  transform.einc.bind %no to "block.x"\n'
        '  transform.einc.bind %ni to "thread.y"\n'
        '  transform.einc.bind %m to "thread.x"\n'
        '  transform.yield\n}\n'))  # fmt: skip
    for given in (schedule, "none", "default"):
        res = subprocess.run([str(BIN / "einc"), "check", "examples/matmul.ein", "-t", "cuda", "--arch", "sm_80",
                              "--schedule", given], check=False, capture_output=True, text=True, timeout=300, cwd=ROOT)  # fmt: skip
        assert res.returncode == 0 and "sm_80: compiled" in res.stdout, res.stdout + res.stderr
    # the schedule is the one applied: one einc refuses is refused at its op
    Path(schedule).write_text(Path(schedule).read_text().replace('  transform.einc.bind %ni to "thread.y"\n', ""))
    res = subprocess.run([str(BIN / "einc"), "check", "examples/matmul.ein", "-t", "cuda", "--schedule", schedule],
                         check=False, capture_output=True, text=True, timeout=300, cwd=ROOT)  # fmt: skip
    assert res.returncode == 1 and res.stderr.startswith(f"{schedule}:6:3: error: convert-affine-to-egpu: loop M"), res.stderr


def test_progress_only_when_asked_or_on_a_terminal() -> None:
    args = [str(BIN / "einc"), "compile", "examples/softmax.ein", "--no-records"]
    quiet = subprocess.run(args, check=False, capture_output=True, text=True, timeout=300, cwd=ROOT)
    assert quiet.returncode == 0 and quiet.stderr == ""
    loud = subprocess.run([*args, "--progress"], check=False, capture_output=True, text=True, timeout=300, cwd=ROOT)
    assert loud.returncode == 0 and loud.stdout == quiet.stdout
    stages = [line.split()[1] for line in loud.stderr.splitlines()]
    assert stages == ["ein", "loops", "scheduled", "target", "source"], loud.stderr


def test_progress_on_a_terminal_starts_after_two_seconds(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.stage_progress(False) is None  # pytest's stderr is no terminal
    monkeypatch.setattr(sys.stderr, "isatty", lambda: True)
    report = cli.stage_progress(False)
    assert report is not None
    for stage, seconds in (("ein", 0.5), ("loops", 1.0), ("scheduled", 1.5), ("target", 0.25)):
        report(stage, seconds)
    assert capsys.readouterr().err.splitlines() == [
        "einc: scheduled done in 1.50 s (3.00 s so far)", "einc: target done in 0.25 s (3.25 s so far)"]
