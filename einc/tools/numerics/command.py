"""The `--check-numerics` flags of `einc compile` and `einc-opt`: parsing and printing.

    einc compile FILE -t T [--schedule S] --check-numerics [--seed N] [--shape-scale S]
    einc-opt FILE --pass-pipeline=P --check-numerics [--seed N] [--shape-scale S] [-t T]

The report goes to stdout (coloured on a TTY); the exit status is 0 when every executed step
agrees with the reference, 1 otherwise.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Mapping, Sequence
from fractions import Fraction
from typing import TextIO

from einc.errors import SourceLocation, UsageError
from einc.tools.numerics.types import NumericsReport

SCALE_HELP = (
    "with --check-numerics: scale each input dimension by S (a number in (0, 1], e.g. 0.25 "
    "or 1/8; default: the largest 1/2^k at which the program runs at most ~2048 iteration points)"
)


def add_arguments(parser: argparse.ArgumentParser, seed: bool = True) -> None:
    """`--check-numerics`, `--shape-scale` (and `--seed` unless the command has one)."""
    parser.add_argument(
        "--check-numerics", action="store_true",
        help="execute the program after every pass and transform op on the same random inputs, "
        "compare with the float64 NumPy reference, and name the first step that changes the numbers",
    )  # fmt: skip
    if seed:
        parser.add_argument("--seed", type=int, default=0, help="with --check-numerics: the inputs' seed (default 0)")
    parser.add_argument("--shape-scale", type=scale_value, default=None, metavar="S", help=SCALE_HELP)


def scale_value(text: str) -> float:
    """`0.25` or `1/8` as a float (argparse's `type`)."""
    try:
        return float(Fraction(text.strip()))
    except (ValueError, ZeroDivisionError):
        raise argparse.ArgumentTypeError(f"a number in (0, 1] like 0.25 or 1/8, not {text!r}") from None


def parse_scale(value: float | str | None, where: SourceLocation | None = None) -> float | None:
    """The scale, checked to be in (0, 1] (a UsageError at `where` otherwise)."""
    if value is None:
        return None
    number = scale_value(value) if isinstance(value, str) else value
    if not 0.0 < number <= 1.0:
        raise UsageError(f"--shape-scale takes a number in (0, 1] like 0.25 or 1/8, not {value!r}", where)
    return number


def emit(report: NumericsReport, stream: TextIO | None = None) -> int:
    from einc.tools.numerics.render import render

    out = stream or sys.stdout
    out.write(render(report, colour=out.isatty()))
    out.flush()
    return 0 if report.ok else 1


def compile_command(
    path: str, target: str, schedule: str | None, seed: int, shape_scale: float | None,
    use_records: bool = True, db: str | None = None,
    extra_passes: Mapping[str, Sequence[str]] | None = None,
    output: str | None = None, output_at: SourceLocation | None = None,
    on_failure: Callable[[NumericsReport, str | None], None] | None = None,
) -> int:  # fmt: skip
    """`einc compile --check-numerics [-o OUTPUT]`: the report printed; the exit status.
    With `output`, the source (and a device target's manifest, OUTPUT.json) is written as
    `einc compile -o` writes it when every step agrees with the reference, and not written
    (said on stderr) when one does not; a write error is a UsageError at `output_at`."""
    from pathlib import Path

    from einc.compiler.driver import Compilation, read_program
    from einc.schedule.choice import ScheduleChoice
    from einc.tools.jobs import say_record, write_manifest
    from einc.tools.numerics.check import check_compilation, with_extra_passes

    comp = Compilation(read_program(path), path, target=target, schedule=ScheduleChoice.read(schedule),
                       use_records=use_records, db=db)  # fmt: skip
    comp = with_extra_passes(comp, extra_passes or {})
    report = check_compilation(comp, seed=seed, shape_scale=shape_scale)
    say_record(comp)
    status = emit(report)
    if not report.ok and on_failure is not None:  # `--reproducer FILE` (einc.tools.reduce.command)
        on_failure(report, comp.schedule_text)
    if output is not None:
        if not report.ok:
            print(f"einc: {output} not written: the numerics check failed", file=sys.stderr)
            return status
        try:
            Path(output).write_text(comp.source_text())
            write_manifest(comp, f"{output}.json")
        except OSError as err:
            raise UsageError(f"cannot write the output: {err.strerror or err}", output_at) from None
    return status


def opt_command(opt: object, on_failure: Callable[[NumericsReport, str | None], None] | None = None) -> int:
    """`einc-opt FILE --pass-pipeline=P --check-numerics`: `opt` is the EincOptMain whose
    arguments and pipeline are parsed (xDSL's driver does both on construction)."""
    from pathlib import Path

    from einc.tools.numerics.check import check_pipeline

    args = getattr(opt, "args")  # noqa: B009 - opt is einc.opt's EincOptMain (a higher floor)
    if not args.input_file:
        raise UsageError("--check-numerics needs an input file (a .ein program or an MLIR module)",
                         SourceLocation("<command line>", 1, 1))  # fmt: skip
    pipeline = getattr(opt, "pipeline", None)  # xDSL's opt driver parsed it (plugins included)
    passes = list(pipeline.passes) if pipeline is not None else []
    try:
        text = Path(args.input_file).read_text()
    except (OSError, UnicodeDecodeError) as err:
        raise UsageError(f"cannot read the input: {err}", SourceLocation(args.input_file, 1, 1)) from None
    scale = parse_scale(args.shape_scale, SourceLocation("--shape-scale", 1, 1))
    target = args.target if args.target != "mlir" else None
    report = check_pipeline(text, args.input_file, passes, seed=args.seed, shape_scale=scale, target=target)
    status = emit(report)
    if not report.ok and on_failure is not None:  # `--reproducer FILE` (einc.tools.reduce.command)
        on_failure(report, None)
    if args.output_file:  # the output as without --check-numerics, when the check passed
        if not report.ok:
            print(f"einc-opt: {args.output_file} not written: the numerics check failed", file=sys.stderr)
            return status
        getattr(opt, "run")()  # noqa: B009 - as above
    return status
