"""Bad inputs get a located user error (exit status 1), never an internal error, a wrong
answer, or a hang: schedule literals, API arguments, program sizes, command-line options,
einc-opt inputs, schedule mistakes, binds on C, Kernel.run without outputs, huge unrolls."""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

import einc
from einc import cli, opt
from einc.compiler.driver import lower_to_stage
from einc.errors import EincError, RuntimeInputError, ScheduleError, SemanticError
from einc.frontend import MAX_PROGRAM_BYTES
from einc.schedule.script import Schedule

MATMUL = "output0[N, M] +=! input0[N, K] * input1[K, M]"
MM = {"input0": {"dtype": "float32", "shape": [8, 4]}, "input1": {"dtype": "float32", "shape": [4, 6]}}
PROGRAM = """input input0: float32[8, 4]
input input1: float32[4, 2]
output0[N, M] +=! input0[N, K] * input1[K, M]
"""


def script(*lines: str) -> str:
    body = "\n".join(f"    {line}" for line in [*lines, "transform.yield"])
    return (
        "builtin.module {\n  transform.named_sequence @__transform_main(%root: !transform.any_op) {\n"
        f"{body}\n  }}\n}}\n"
    )


def schedule_error(text: str, ir: str = MATMUL, inputs: dict | None = MM, target: str = "c") -> ScheduleError:
    with pytest.raises(ScheduleError) as info:
        einc.compile(ir, inputs, target=target, schedule=Schedule.parse(text, "s.mlir") if "{" in text else text)
    return info.value


def at(err: EincError, line: int, col: int, file: str = "s.mlir") -> None:
    assert err.loc is not None, err
    assert (err.loc.file, err.loc.line, err.loc.col) == (file, line, col), err


# ---- integer literals beyond 64 bits --------------------------------------------------------------

N_MATCH = '%n = transform.einc.match stmt "output0" axis "N" in %root'


@pytest.mark.parametrize("value", [10**23, 2**64 - 616, 2**63])
@pytest.mark.parametrize(
    "line, what",
    [
        ("%o, %i = transform.einc.tile %n by {v}", "tile size"),
        ("%l = transform.einc.unroll %n by {v}", "unroll size"),
        ('%k = transform.einc.knob "t" = {v} from [{v}]', "knob 't': value"),
        ('%k = transform.einc.knob "t" = 4 from [4, {v}]', "knob 't': option"),
        ('transform.einc.bind %n to "block.x" max_threads {v}', "max_threads"),
    ],
)
def test_literal_beyond_64_bits_is_located_with_its_real_value(value: int, line: str, what: str) -> None:
    text = script(N_MATCH, line.format(v=value))
    with pytest.raises(ScheduleError) as info:
        Schedule.parse(text, "s.mlir")
    err = info.value
    assert f"{what} {value} does not fit in a signed 64-bit integer" in err.message
    assert "-" not in err.message.split("fit")[0]  # no wrapped, negative number
    at(err, 4, text.splitlines()[3].index(str(value)) + 1)


def test_largest_64_bit_literal_is_accepted() -> None:
    sched = Schedule.parse(script(N_MATCH, f"%o, %i = transform.einc.tile %n by {2**63 - 1}"), "s.mlir")
    assert f"by {2**63 - 1}" in str(sched)


# ---- API arguments -----------------------------------------------------------------------------


@pytest.mark.parametrize("input_dict", [[1, 2], "input0", 5])
def test_input_dict_of_wrong_type_is_a_located_error(input_dict: object) -> None:
    with pytest.raises(SemanticError, match="input_dict must be a dict") as info:
        einc.compile(MATMUL, input_dict)  # type: ignore[arg-type]
    at(info.value, 1, 1, "<string>")


def test_extra_outputs_as_one_string_is_one_name() -> None:
    ir = "temp[N] = input0[N] * 2.0; output0[N] = temp[N] + 1.0"
    kernel = einc.compile(ir, {"input0": {"dtype": "float32", "shape": [5]}}, extra_outputs="temp")
    assert [o.name for o in kernel.outputs] == ["temp", "output0"]
    x = np.arange(1, 6, dtype=np.float32)
    got = kernel(input0=x)
    np.testing.assert_allclose(got["temp"], x * 2)
    np.testing.assert_allclose(got["output0"], x * 2 + 1)


def test_extra_outputs_of_wrong_type_is_refused() -> None:
    with pytest.raises(SemanticError, match="extra_outputs must be a list of tensor names"):
        einc.compile(MATMUL, MM, extra_outputs=5)  # type: ignore[arg-type]


def test_schedule_of_wrong_type_is_refused_before_any_work() -> None:
    with pytest.raises(ScheduleError, match=r"schedule= takes a Schedule.*not int \(5\)") as info:
        lower_to_stage(MATMUL, MM, stage="ein", schedule=5)
    at(info.value, 1, 1, "<schedule argument>")
    assert "<unknown>" not in str(info.value)


# ---- the size of a program ------------------------------------------------------------------------


def test_program_size_limit_boundary() -> None:
    # 65536 x 32767 float32 and a 65536-element result: exactly 8 GiB, accepted (not allocated)
    rows = "output0[N] +=! input0[N, K]"
    at_limit = {"input0": {"dtype": "float32", "shape": [65536, 32767]}}
    assert 65536 * 32767 * 4 + 65536 * 4 == MAX_PROGRAM_BYTES
    lower_to_stage(rows, at_limit, stage="ein")
    over = {"input0": {"dtype": "float32", "shape": [65536, 32768]}}
    with pytest.raises(SemanticError, match="more than einc's limit of 8 GiB") as info:
        lower_to_stage(rows, over, stage="ein")
    assert "input0: float32[65536, 32768] = 8 GiB" in info.value.message
    at(info.value, 1, 1, "<string>")


def test_program_size_counts_intermediate_tensors(tmp_path: Path) -> None:
    (tmp_path / "p.ein").write_text(
        "input a: float32[50000, 20000]\nb[I, J] = a[I, J] + 1.0\nc[I, J] = b[I, J] * 2.0\n"
    )
    with pytest.raises(SemanticError, match=r"take 11.2 GiB \(12000000000 bytes\)") as info:
        lower_to_stage((tmp_path / "p.ein").read_text(), stage="ein", filename="p.ein")
    at(info.value, 3, 1, "p.ein")  # c passes the limit


def test_cli_run_of_a_huge_program_is_a_located_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    prog = tmp_path / "huge.ein"
    prog.write_text("input a: float32[100000, 100000]\nb[I, J] = a[I, J] + 1.0\n")
    assert cli.main(["run", str(prog)]) == 1
    err = capsys.readouterr().err
    assert err.startswith(f"{prog}:1:1: error: the program's tensors take 74.5 GiB")
    assert "a: float32[100000, 100000] = 37.3 GiB" in err and "internal" not in err


# ---- command-line options -------------------------------------------------------------------------


@pytest.fixture
def prog(tmp_path: Path) -> str:
    path = tmp_path / "p.ein"
    path.write_text(PROGRAM)
    return str(path)


@pytest.mark.parametrize(
    "args, message, flag",
    [
        (["-o", "{tmp}/missing/k.c"], "no directory '{tmp}/missing'", "-o"),
        (["-o", "{tmp}"], "it is a directory", "-o"),
        (["--output={tmp}"], "it is a directory", "--output={tmp}"),
    ],
)
def test_compile_output_path_errors(
    prog: str, tmp_path: Path, capsys: pytest.CaptureFixture[str], args: list[str], message: str, flag: str
) -> None:
    argv = ["compile", prog, *(a.format(tmp=tmp_path) for a in args)]
    assert cli.main(argv) == 1
    err = capsys.readouterr().err
    line = "einc " + " ".join(argv)
    col = line.index(" " + flag.format(tmp=tmp_path)) + 2
    assert err.startswith(f"<command line>:1:{col}: error: cannot write the output to ")
    assert message.format(tmp=tmp_path) in err and line in err


@pytest.mark.parametrize(
    "args, message",
    [(["--seed", "-5"], "--seed must be 0 or more, got -5"),
     (["--repeat", "-1"], "--repeat must be at least 1, got -1"),
     (["--repeat=0"], "--repeat must be at least 1, got 0")],
)  # fmt: skip
def test_run_option_values(prog: str, capsys: pytest.CaptureFixture[str], args: list[str], message: str) -> None:
    argv = ["run", prog, *args]
    assert cli.main(argv) == 1
    err = capsys.readouterr().err
    col = ("einc " + " ".join(argv)).index(" " + args[0]) + 2
    assert err.startswith(f"<command line>:1:{col}: error: {message}")


@pytest.mark.parametrize(
    "args, start",
    [(["run", "{prog}", "--seed", "abc"], "<command line>:1:{col}: error: argument --seed: invalid int value: 'abc'"),
     (["compile", "{prog}", "-t"], "<command line>:1:{col}: error: argument -t/--target: expected one argument"),
     (["compile"], "<command line>:1:1: error: the following arguments are required: file")],
)  # fmt: skip
def test_argparse_usage_errors_exit_1_located(
    prog: str, capsys: pytest.CaptureFixture[str], args: list[str], start: str
) -> None:
    argv = [a.format(prog=prog) for a in args]
    assert cli.main(argv) == 1
    col = ("einc " + " ".join(argv)).index(" " + args[-2 if args[-1] == "abc" else -1]) + 2
    assert capsys.readouterr().err.startswith(start.format(col=col))


def test_run_seed_zero_and_repeat_one_are_fine(prog: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["run", prog, "--seed", "0", "--repeat", "1"]) == 0
    assert "inputs seeded with 0" in capsys.readouterr().out


# ---- einc-opt inputs ------------------------------------------------------------------------------


def test_einc_opt_missing_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    missing = str(tmp_path / "nope.ein")
    assert opt.main([missing]) == 1
    assert capsys.readouterr().err.startswith(f"{missing}:1:1: error: cannot read the input: No such file")


@pytest.mark.parametrize("suffix", ["ein", "mlir"])
def test_einc_opt_non_utf8_input_is_located_at_the_byte(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], suffix: str
) -> None:
    path = tmp_path / f"bad.{suffix}"
    path.write_bytes(b"input a: float32[4]\nb[N] = a[N] \xe9 2.0\n")
    assert opt.main([str(path)]) == 1
    err = capsys.readouterr().err
    assert err.startswith(f"{path}:2:13: error: the input is not UTF-8 text (byte 0xe9")


def test_einc_opt_unknown_pass_is_located_in_the_pipeline(prog: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert opt.main([prog, "-p", "convert-ein-to-affine,bogus-pass"]) == 1
    err = capsys.readouterr().err
    assert err.startswith("pass-pipeline:1:23: error: unknown pass 'bogus-pass'")
    assert "convert-ein-to-affine,bogus-pass\n" + " " * 22 + "^~~~~~~~~~" in err


def test_einc_opt_unknown_pass_option_is_located(prog: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert opt.main([prog, "-p", "convert-ein-to-affine{foo=1}"]) == 1
    assert capsys.readouterr().err.startswith(
        "pass-pipeline:1:23: error: pass 'convert-ein-to-affine' has no option 'foo' (it has no options)\n"
    )


@pytest.mark.parametrize(
    "args, start",
    [(["{prog}", "-t", "bogus"], "<command line>:1:{col}: error: argument -t/--target: invalid choice: 'bogus'"),
     (["{prog}", "-o", "{tmp}/missing/out.mlir"], "<command line>:1:{col}: error: cannot write the output: No such file"),
     (["{tmp}/p.xyz"], "{tmp}/p.xyz:1:1: error: no frontend for '.xyz' files")],
)  # fmt: skip
def test_einc_opt_command_line_errors_exit_1_located(
    prog: str, tmp_path: Path, capsys: pytest.CaptureFixture[str], args: list[str], start: str,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # a folder of its own: other tests of this worker leave their reproducers in the suite's
    monkeypatch.setenv("EINC_REPRO_DIR", str(tmp_path / "repro"))
    (tmp_path / "p.xyz").write_text(PROGRAM)
    argv = [a.format(prog=prog, tmp=tmp_path) for a in args]
    assert opt.main(argv) == 1
    col = ("einc-opt " + " ".join(argv)).index(" " + args[-2]) + 2 if len(args) > 1 else 1
    assert capsys.readouterr().err.startswith(start.format(col=col, tmp=tmp_path))
    assert not list(Path().glob("einc-crash-*"))
    assert not list(Path(os.environ.get("EINC_REPRO_DIR", ".")).glob("einc-crash-*"))


# ---- schedule mistakes ----------------------------------------------------------------------------


def test_schedule_parse_error_at_its_real_position() -> None:
    err = schedule_error(script(N_MATCH, "%o, %i = transform.einc.tile %n by ,"))
    at(err, 4, 40)
    assert err.message == "malformed schedule: Expected integer literal"


def test_undefined_handle_is_reported_at_its_use() -> None:
    text = script(N_MATCH, "transform.einc.parallelize %n", "%o, %i = transform.einc.tile %zz by 4")
    err = schedule_error(text)
    at(err, 5, 34)
    assert err.message == "undefined handle %zz: no op before its use defines it"


@pytest.mark.parametrize(
    "knob, col, message",
    [('"t" = 7 from [8, 16]', 36, "knob 't': 7 is not one of [8, 16]"),
     ('"t" = 8 from []', 43, "knob 't' has no values to choose from")],
)  # fmt: skip
def test_knob_value_outside_its_list_is_refused_at_the_knob(knob: str, col: int, message: str) -> None:
    text = script(f"%k = transform.einc.knob {knob}", N_MATCH, "%o, %i = transform.einc.tile %n by %k")
    err = schedule_error(text)
    at(err, 3, col)
    assert err.message.endswith(message)


def test_unknown_knob_in_with_values_is_located() -> None:
    sched = Schedule.parse(script('%k = transform.einc.knob "t" = 8 from [8, 16]'), "s.mlir")
    with pytest.raises(ScheduleError, match="the schedule has no knob 'x' \\(knobs: t\\)") as info:
        sched.with_values({"x": 8})
    at(info.value, 1, 1)


def test_knob_built_in_memory_is_verified_at_the_op() -> None:
    from einc.dialects.einc_transform import KnobOp

    sched = Schedule.parse(script('%k = transform.einc.knob "t" = 8 from [8, 16]'), "s.mlir")
    knob = next(op for op in sched.module.walk() if isinstance(op, KnobOp))
    knob.options = KnobOp("t", [4], 4).options
    with pytest.raises(ScheduleError, match=r"knob 't': 8 is not one of \[4\]") as info:
        sched.verify()
    at(info.value, 3, 5)


def test_poplar_local_float64_array_points_at_the_cache_read(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    text = script('%k = transform.einc.match stmt "output0" axis "K" in %root',
                  '%s = transform.einc.cache_read "input1" at %k')  # fmt: skip
    f64 = {k: {"dtype": "float64", "shape": v["shape"]} for k, v in MM.items()}
    err = schedule_error(text, inputs=f64, target="poplar")
    at(err, 4, 5)
    assert "the poplar target has no local arrays of float64" in err.message
    (tmp_path / "s.mlir").write_text(text)
    (tmp_path / "p.ein").write_text(PROGRAM.replace("float32", "float64"))
    pipeline = f'convert-ein-to-affine,einc-apply-schedule{{file="{tmp_path}/s.mlir" target="poplar"}}'
    assert opt.main([str(tmp_path / "p.ein"), "-p", pipeline]) == 1
    assert capsys.readouterr().err.startswith(f"{tmp_path}/s.mlir:4:5: error: the local buffer")


def test_poplar_refusal_without_op_locations_names_the_op() -> None:
    text = script('%k = transform.einc.match stmt "output0" axis "K" in %root',
                  '%s = transform.einc.cache_read "input1" at %k')  # fmt: skip
    built = Schedule(Schedule.parse(text).module, "built")  # made in memory: no locations
    f64 = {k: {"dtype": "float64", "shape": v["shape"]} for k, v in MM.items()}
    with pytest.raises(ScheduleError) as info:
        einc.compile(MATMUL, f64, target="poplar", schedule=built)
    at(info.value, 1, 1, "built")
    assert info.value.message.startswith("transform.einc.cache_read: the local buffer 'input1_local'")


# ---- bind on C ------------------------------------------------------------------------------------


def test_bind_on_c_is_refused_at_the_bind(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    text = script(N_MATCH, 'transform.einc.bind %n to "block.x"')
    err = schedule_error(text)
    at(err, 4, 5)
    assert 'the c target has no GPU blocks or threads to bind a loop to ("block.x")' in err.message
    (tmp_path / "s.mlir").write_text(text)
    (tmp_path / "p.ein").write_text(PROGRAM)
    pipeline = f'convert-ein-to-affine,einc-apply-schedule{{file="{tmp_path}/s.mlir" target="c"}}'
    assert opt.main([str(tmp_path / "p.ein"), "-p", pipeline]) == 1
    assert capsys.readouterr().err.startswith(f"{tmp_path}/s.mlir:4:5: error: the c target has no GPU")


@pytest.mark.parametrize(
    "ir, inputs",
    [(MATMUL, {"input0": {"dtype": "float32", "shape": [64, 48]}, "input1": {"dtype": "float32", "shape": [48, 40]}}),
     ("temp0[N] >=! input0[N, C]; output0[N, C] = (input0[N, C] - temp0[N]).call(`exp`)",
      {"input0": {"dtype": "float32", "shape": [16, 33]}}),
     ("output0[N, F, H, W] +=! input0[N, C, H + KH, W + KW] * input1[F, C, KH, KW] where H in 8, W in 8",
      {"input0": {"dtype": "float32", "shape": [1, 3, 10, 10]}, "input1": {"dtype": "float32", "shape": [4, 3, 3, 3]}})],
)  # fmt: skip
def test_default_c_schedule_never_binds(ir: str, inputs: dict) -> None:
    from einc.schedule.default import default_schedule_text
    from einc.targets import get_target

    text = default_schedule_text(get_target("c"), lower_to_stage(ir, inputs, stage="loops"))
    assert text is not None and "transform.einc.bind" not in text
    einc.compile(ir, inputs)  # the driver's check accepts it


# ---- Kernel.run -----------------------------------------------------------------------------------


def test_kernel_run_needs_every_output() -> None:
    kernel = einc.compile(MATMUL, MM)
    a = np.full((8, 4), 2.0, np.float32)
    b = np.full((4, 6), 3.0, np.float32)
    with pytest.raises(RuntimeInputError, match="none is given for 'output0'"):
        kernel.run({"input0": a, "input1": b}, {})
    out = np.zeros((8, 6), np.float32)
    kernel.run({"input0": a, "input1": b}, {"output0": out})
    np.testing.assert_allclose(out, a @ b)


# ---- unroll limits --------------------------------------------------------------------------------


@pytest.mark.parametrize("factor", [1025, 10_000, 10**6])
def test_unroll_past_the_limit_is_refused_quickly(factor: int) -> None:
    ir = "output0[N] = input0[N] * 2.0"
    inputs = {"input0": {"dtype": "float32", "shape": [20000]}}
    start = time.perf_counter()
    err = schedule_error(script(N_MATCH, f"%l = transform.einc.unroll %n by {factor}"), ir, inputs)
    assert time.perf_counter() - start < 20
    at(err, 4, 5)
    assert f"by {min(factor, 20000)} would make" in err.message and "limit is 1024 copies" in err.message


def test_unroll_op_limit_counts_the_body() -> None:
    # 1000 copies of a body of 16 unrolled copies: under the copy limit, over the op limit
    ir = "output0[N, M] = input0[N, M] * 2.0 + 1.0"
    inputs = {"input0": {"dtype": "float32", "shape": [1000, 16]}}
    text = script(N_MATCH, '%m = transform.einc.match stmt "output0" axis "M" in %root',
                  "%u = transform.einc.unroll %m by 16", "%l = transform.einc.unroll %n by 1000")  # fmt: skip
    err = schedule_error(text, ir, inputs)
    at(err, 6, 5)
    assert "65536 ops" in err.message


def test_full_unroll_within_the_limit_is_correct() -> None:
    ir = "output0[N] = input0[N] * 2.0"
    inputs = {"input0": {"dtype": "float32", "shape": [12]}}
    kernel = einc.compile(ir, inputs, schedule=script(N_MATCH, "%l = transform.einc.unroll %n by 1000000"))
    x = np.arange(1, 13, dtype=np.float32)
    np.testing.assert_allclose(kernel(input0=x)["output0"], x * 2)


def test_handle_used_before_its_definition_is_located(tmp_path: Path) -> None:
    """xDSL's parser resolves forward references; a schedule checks dominance itself."""
    from einc.errors import ScheduleError
    from einc.schedule.script import Schedule

    text = (
        "transform.named_sequence @__transform_main(%root: !transform.any_op) {\n"
        "  transform.einc.parallelize %n\n"
        '  %n = transform.einc.match stmt "output0" axis "N" in %root\n'
        "  transform.yield\n"
        "}\n"
    )
    with pytest.raises(ScheduleError) as info:
        Schedule.parse(text, "s.mlir")
    assert info.value.render().startswith("s.mlir:2:3: error: %n is used before its definition")


# ---- deep loop nests: a loop per axis -------------------------------------------------------------
DEEP_TARGETS = ("c", "opencl", "cuda", "hip", "hlsl", "sycl", "poplar")


def deep_shape(rank: int) -> list[int]:
    return [1] * (rank - 2) + [3, 2, 2]


def deep_program(rank: int) -> tuple[str, dict[str, dict[str, object]]]:
    """A reduction whose output has `rank` axes (all but two of extent 1) and one more axis K."""
    axes = ", ".join(f"A{i}" for i in range(rank))
    return f"output0[{axes}] +=! input0[{axes}, K] * 2.0", {"input0": {"dtype": "float32", "shape": deep_shape(rank)}}


@pytest.fixture
def default_recursion_limit() -> Iterator[None]:
    """Python's default recursion limit (1000), as a fresh process has it: einc raises it."""
    before = sys.getrecursionlimit()
    sys.setrecursionlimit(1000)
    try:
        yield
    finally:
        sys.setrecursionlimit(max(before, sys.getrecursionlimit()))


@pytest.mark.parametrize("target", DEEP_TARGETS)
def test_a_rank_200_program_prints_on_every_target(target: str, default_recursion_limit: None) -> None:
    """200 nested loops: the passes, xDSL's printer and the target's printer walk them."""
    from einc.compiler.driver import Compilation

    ir, inputs = deep_program(200)
    comp = Compilation(ir, "<ir>", inputs, target=target, use_records=False)
    assert str(comp.module("target"))  # xDSL's printer
    assert "output0" in comp.source_text()


def test_a_rank_200_c_kernel_computes_the_reduction(default_recursion_limit: None) -> None:
    """NumPy makes no array of rank 200, so the C kernel is called on flat buffers."""
    import ctypes

    from einc.compiler.driver import Compilation
    from einc.runtime.c import compile_c
    from einc.runtime.signature import KernelSignature

    ir, inputs = deep_program(200)
    comp = Compilation(ir, "<ir>", inputs, target="c", use_records=False)
    assert str(comp.module("loops")).count("affine.for") > 200  # nested 201 deep
    signature = KernelSignature.from_module(comp.module("target"))
    function = getattr(ctypes.CDLL(str(compile_c(comp.source_text()).path)), signature.name)
    function.argtypes = [ctypes.c_void_p] * 2
    x = np.random.default_rng(12).standard_normal(12).astype(np.float32)
    out = np.full(6, np.nan, np.float32)
    function(x.ctypes.data, out.ctypes.data)
    np.testing.assert_allclose(out, (x.astype(np.float64).reshape(6, 2) * 2).sum(axis=1), rtol=1e-6)


def test_einc_opt_prints_a_rank_200_program(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                            default_recursion_limit: None) -> None:  # fmt: skip
    ir, _ = deep_program(200)
    shape = ", ".join(str(d) for d in deep_shape(200))
    path = tmp_path / "deep.ein"
    path.write_text(f"input input0: float32[{shape}]\n{ir}\n")
    assert opt.main([str(path), "-p", "convert-ein-to-affine", "-t", "c"]) == 0
    assert "output0" in capsys.readouterr().out


def test_a_statement_over_the_axis_limit_is_refused_at_the_axis() -> None:
    from einc.ir.depth import MAX_AXES

    ir, inputs = deep_program(MAX_AXES)  # MAX_AXES output axes and K: one too many
    with pytest.raises(SemanticError) as info:
        einc.compile(ir, inputs)
    col = ir.index(", K]") + 3
    assert info.value.render().startswith(
        f"<string>:1:{col}: error: statement has {MAX_AXES + 1} axes; einc compiles at most {MAX_AXES} axes "
        f"in one statement (its loops nest one per axis), and 'K' is axis {MAX_AXES + 1}")
