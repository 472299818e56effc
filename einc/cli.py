"""`einc` command line: argument parsing only; the work is in `einc.driver`."""

from __future__ import annotations

import argparse
import os
import sys
import traceback
from collections.abc import Sequence

from einc.errors import EincError, SourceLocation


def _parser() -> argparse.ArgumentParser:
    from einc.driver import STAGES

    parser = argparse.ArgumentParser(prog="einc", description="Compile Antares IR tensor programs.")
    sub = parser.add_subparsers(dest="command", required=True)

    comp = sub.add_parser("compile", help="compile a .ein program to target source code")
    comp.add_argument("file", help="the .ein program")
    comp.add_argument("-t", "--target", default="c", help="target language (default: c)")
    comp.add_argument(
        "-o",
        "--output",
        help="write the source here (default: stdout); device targets also write the launch "
        "manifest to OUTPUT.json",
    )
    comp.add_argument(
        "--schedule",
        help="a transform-dialect schedule script (.mlir); `none` keeps the loops untouched "
        "(default: the target's default schedule)",
    )
    comp.add_argument(
        "--dump-after",
        choices=STAGES,
        help="print the program after this stage instead of the final source",
    )

    run = sub.add_parser(
        "run", help="compile, run on random inputs, and check against the NumPy reference"
    )
    run.add_argument("file", help="the .ein program")
    run.add_argument("-t", "--target", default="c", help="target to execute on (default: c)")
    run.add_argument(
        "--schedule", help="a schedule script (.mlir), or `none` (default: the target's)"
    )
    run.add_argument("--repeat", type=int, default=5, help="timed runs (median is reported)")
    run.add_argument("--seed", type=int, default=None, help="seed of the random inputs")
    check = sub.add_parser(
        "check", help="compile-check device code (cuda, hip) and report registers, spills, shared memory"
    )
    check.add_argument("file", help="the .ein program")
    check.add_argument("-t", "--target", default="cuda", help="cuda or hip (default: cuda)")
    check.add_argument("--arch", action="append", help="architecture (repeatable; default: sm_80, sm_90 / gfx90a, gfx1030)")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    from einc import driver

    try:
        if args.command == "compile":
            text = driver.compile_file_command(
                args.file,
                target=args.target,
                schedule=args.schedule,
                dump_after=args.dump_after,
                manifest_path=f"{args.output}.json" if args.output else None,
            )
            if args.output:
                with open(args.output, "w") as f:
                    f.write(text)
            else:
                sys.stdout.write(text)
            return 0
        if args.command == "check":
            checked = driver.check_file_command(args.file, target=args.target, archs=args.arch)
            print(checked.render())
            return 0 if checked.ok else 1
        report = driver.run_file_command(
            args.file, target=args.target, schedule=args.schedule, repeat=args.repeat, seed=args.seed
        )
        print(report.render())
        return 0 if report.ok else 1
    except EincError as err:
        if err.loc is None:  # a runtime or toolchain error: point at the program itself
            err.loc = SourceLocation(args.file, 1, 1)
        print(err.render(), file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        return 130
    except Exception as exc:  # an einc bug: say so plainly, keep the trace for EINC_DEBUG=1
        if os.environ.get("EINC_DEBUG"):
            traceback.print_exc()
        print(
            f"einc: internal error: {type(exc).__name__}: {exc}\n"
            "(this is a bug in einc; rerun with EINC_DEBUG=1 for the traceback)",
            file=sys.stderr,
        )
        return 2


if __name__ == "__main__":
    sys.exit(main())
