"""`einc` and `einc-opt` as a user runs them: exit codes, diagnostics, no tracebacks."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
BIN = Path(sys.executable).parent


def run(tool: str, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(BIN / tool), *args], capture_output=True, text=True, timeout=300, cwd=ROOT
    )


def write(tmp_path: Path, text: str, name: str = "prog.ein") -> str:
    path = tmp_path / name
    path.write_text(text)
    return str(path)


def test_compile_prints_c(tmp_path: Path) -> None:
    res = run("einc", "compile", "examples/matmul.ein", "--target", "c")
    assert res.returncode == 0, res.stderr
    assert "void kernel(" in res.stdout


def test_compile_writes_output_file(tmp_path: Path) -> None:
    out = tmp_path / "k.c"
    res = run("einc", "compile", "examples/softmax.ein", "-o", str(out))
    assert res.returncode == 0, res.stderr
    written = out.read_text()
    assert written.startswith("#include") and "void kernel(" in written
    assert "float expf(float);" in written  # softmax's exp: libmvec's vector expf, declared


@pytest.mark.parametrize("stage", ["ein", "loops", "scheduled", "target"])
def test_dump_after_stage(stage: str) -> None:
    res = run("einc", "compile", "examples/matmul.ein", "--dump-after", stage)
    assert res.returncode == 0, res.stderr
    assert "func.func @kernel" in res.stdout
    assert ("ein.einsum" in res.stdout) == (stage == "ein")


def test_run_checks_against_numpy() -> None:
    res = run("einc", "run", "examples/softmax.ein", "--repeat", "2")
    assert res.returncode == 0, res.stdout + res.stderr
    assert "max error" in res.stdout and " ok" in res.stdout


@pytest.mark.parametrize(
    "text, expected",
    [
        ("input a: float32[4]\nout[N] = a[N] + b[N]\n", "prog.ein:2:17: error: unknown tensor 'b'"),
        ("input a: float32[4]\nout[N] = a[N] +\n", "prog.ein:2:"),
        ("input a: float32[4, 4]\nout[N] = a[N]\n", "prog.ein:2:"),
        ("input a: float33[4]\nout[N] = a[N]\n", "prog.ein:1:"),
        ("input a: float32[4]\nout[N] = a[N].call(`nope`)\n", "prog.ein:2:"),
    ],
)
def test_bad_programs_get_located_diagnostics(tmp_path: Path, text: str, expected: str) -> None:
    res = run("einc", "compile", write(tmp_path, text))
    assert res.returncode == 1
    assert expected in res.stderr
    assert "error:" in res.stderr
    assert "Traceback" not in res.stderr + res.stdout
    assert "^" in res.stderr


def test_unknown_target_and_missing_file() -> None:
    res = run("einc", "compile", "examples/matmul.ein", "-t", "fortran")
    assert res.returncode == 1 and "examples/matmul.ein:1:1: error: unknown target 'fortran'" in res.stderr
    res = run("einc", "compile", "examples/nope.ein")
    assert res.returncode == 1 and "examples/nope.ein:1:1: error: cannot read program" in res.stderr


def test_opt_runs_passes_on_ein_files() -> None:
    res = run("einc-opt", "examples/matmul.ein", "--pass-pipeline=convert-ein-to-affine")
    assert res.returncode == 0, res.stderr
    assert "affine.for" in res.stdout and "ein.einsum" not in res.stdout


def test_opt_print_ir_after_all_and_c_target() -> None:
    res = run(
        "einc-opt", "examples/matmul.ein", "--pass-pipeline=convert-ein-to-affine,canonicalize",
        "--print-ir-after-all", "-t", "c",
    )
    assert res.returncode == 0, res.stderr
    # the dumps go to stderr (as mlir-opt's), never mixed with the result on stdout
    assert "IR Dump After convert-ein-to-affine" in res.stderr
    assert "IR Dump After canonicalize" in res.stderr
    assert "void kernel(" in res.stdout and "IR Dump" not in res.stdout


def test_opt_reports_errors_without_traceback(tmp_path: Path) -> None:
    res = run("einc-opt", write(tmp_path, "out[N] = a[N]\n"))
    assert res.returncode == 1
    assert "prog.ein:1:10: error: unknown tensor 'a'" in res.stderr
    assert "Traceback" not in res.stderr
    res = run("einc-opt", "examples/matmul.ein", "--pass-pipeline=no-such-pass")
    assert res.returncode == 1 and "Traceback" not in res.stderr
    # malformed MLIR (xDSL's ParseError): a user error at its place, not an internal one
    bad = tmp_path / "bad.mlir"
    bad.write_text("func.func @g() {\n  func.return\n}\n// -----\nfunc.func @f() {\n  %x = arith.constant 1 : badtype\n}\n")
    res = run("einc-opt", "--split-input-file", str(bad))
    assert res.returncode == 1 and "Traceback" not in res.stderr and "internal error" not in res.stderr
    assert res.stderr.splitlines()[:3] == [f"{bad}:6:27: error: type expected",
                                           "  %x = arith.constant 1 : badtype", " " * 26 + "^~~~~~~"]  # fmt: skip
    # a malformed pipeline (xDSL raises a BaseException for it): located, with a caret
    res = run("einc-opt", "examples/matmul.ein", "--pass-pipeline=convert-ein-to-affine,einc-apply-schedule{file=a/b.mlir}")
    assert res.returncode == 1 and "Traceback" not in res.stderr
    assert res.stderr.startswith("pass-pipeline:1:49: error: Unknown token\n"), res.stderr
    assert res.stderr.splitlines()[2] == " " * 48 + "^"


@pytest.mark.cuda
def test_check_reports_cuda_resources() -> None:
    res = run("einc", "check", "examples/softmax.ein", "-t", "cuda", "--arch", "sm_90")
    assert res.returncode == 0, res.stdout + res.stderr
    assert "sm_90: compiled" in res.stdout
    assert "kernel_output0:" in res.stdout and "registers" in res.stdout and "B spills" in res.stdout


def test_check_refuses_executable_targets() -> None:
    res = run("einc", "check", "examples/softmax.ein", "-t", "opencl")
    assert res.returncode == 1
    assert "examples/softmax.ein:1:1: error: 'einc check' compile-checks cuda, hip" in res.stderr


def test_runtime_errors_point_at_the_program() -> None:
    res = run("einc", "run", "examples/matmul.ein", "-t", "hip")
    assert res.returncode == 1
    assert res.stderr.startswith("examples/matmul.ein:1:1: error: HIP kernels cannot run here")


def test_run_rank0_input(tmp_path: Path) -> None:
    """`einc run` draws a 0-d array for a rank-0 input (a NumPy scalar was refused)."""
    prog = write(tmp_path, "input s: float32[]\ninput v: float32[5]\nout[N] = v[N] * s[]\n")
    res = run("einc", "run", prog, "--seed", "3")
    assert res.returncode == 0, res.stderr
    assert "out: max error" in res.stdout and " ok" in res.stdout


# ---- a closed pipe (`einc ... | head`) ends quietly -------------------------------------------------
@contextmanager
def closed_stdout() -> Iterator[None]:
    """stdout is a pipe whose reader is gone (`| head` after its lines): every write fails."""
    read, write_end = os.pipe()
    os.close(read)
    stream, before = open(write_end, "w"), sys.stdout  # noqa: SIM115 - closed below
    sys.stdout = stream
    try:
        yield
    finally:
        sys.stdout = before
        stream.close()  # einc pointed the descriptor at /dev/null: this last flush succeeds


@pytest.fixture(scope="module")
def records_db(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from einc.tune.records import RecordDB
    from einc.compiler.records import record_context
    from einc.targets import get_target
    from einc.tune.types import Candidate, MeasureResult, Point, Status, TuneTask

    path = tmp_path_factory.mktemp("records") / "records.db"
    task = TuneTask("output0[N] = input0[N] * 2.0", "c", "<ir>", {"input0": {"dtype": "float32", "shape": [8]}})
    schedule = "transform.named_sequence @__transform_main(%root: !transform.any_op) {\n  transform.yield\n}\n"
    with RecordDB(path) as db:
        db.add(task, record_context(get_target("c")), MeasureResult(Candidate(Point.of("hand", {}), schedule), Status.OK,
                                                            times=(1e-3,)), tuner="test")  # fmt: skip
    return path


@pytest.mark.parametrize(
    "args",
    [["records", "show", "1", "--db", "{db}"], ["records", "list", "--db", "{db}"],
     ["records", "export", "--db", "{db}"], ["sketches", "examples/matmul.ein"],
     ["compile", "examples/matmul.ein", "--dump-after", "loops"], ["compile", "examples/matmul.ein"]],
    ids=["records show", "records list", "records export", "sketches", "compile --dump-after", "compile"],
)  # fmt: skip
def test_a_closed_pipe_ends_einc_quietly(args: list[str], records_db: Path, capsys: pytest.CaptureFixture[str],
                                         monkeypatch: pytest.MonkeyPatch) -> None:  # fmt: skip
    """It was an internal error (a BrokenPipeError and a crash file)."""
    from einc import cli

    monkeypatch.chdir(ROOT)
    with closed_stdout():
        assert cli.main([a.format(db=records_db) for a in args]) == 141
    assert capsys.readouterr().err == ""
