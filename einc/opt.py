"""`einc-opt`: xDSL's opt driver with einc's dialects, passes, targets and `.ein` frontend.

    einc-opt prog.ein --pass-pipeline=convert-ein-to-affine --print-ir-after-all
    einc-opt lowered.mlir -t c
    einc-opt prog.ein --load-pass-plugin my_passes.py -p 'convert-ein-to-affine,my-pass{factor=2}'
    einc-opt --list-passes [--all]          einc-opt --list-targets

mlir-opt's habits hold (docs/PLUGINS.md): IR dumps and `--timing` go to stderr,
`--split-input-file` reports every chunk's error, `--verify-diagnostics` checks
`expected-error` comments against einc's errors, `-t TARGET` refuses a module above the
target's level (naming the pipeline to run), a closed pipe ends it quietly.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import io
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import IO, TYPE_CHECKING, NoReturn

from xdsl.dialects.builtin import ModuleOp
from xdsl.ir import Operation
from xdsl.passes import ModulePass, PassPipeline
from xdsl.utils.arg_spec import parse_spec
from xdsl.utils.exceptions import ArgSpecParseError, DiagnosticException, ShrinkException
from xdsl.utils.exceptions import ParseError as XdslParseError
from xdsl.xdsl_opt_main import xDSLOptMain

from einc.dialects.context import einc_dialects, load_einc_transform_ops
from einc.errors import (
    EincError,
    InternalCompilerError,
    ParseError,
    SourceLocation,
    UsageError,
    span_location,
)
from einc.ir.depth import allow_deep_nests
from einc.ir.pass_statistics import Statistics, instrumenting, requested
from einc.tools.opt_support import (
    Instrumentation,
    check_diagnostics,
    expected_diagnostics,
    has_expectations,
    list_passes,
    list_targets,
    target_level_error,
    verify_located,
)

if TYPE_CHECKING:
    from einc.tools.numerics.types import NumericsReport


class ChunksFailed(Exception):
    """Some chunks of a split input failed (each error already printed): exit status 1."""


class EincOptMain(xDSLOptMain):
    chunk_line_offset: int = 0
    """The first line of the chunk being parsed (`--split-input-file`), for op locations."""

    def __init__(self, description: str, args: Sequence[str]):
        self.argv = list(args)  # for the locations of command-line errors
        super().__init__(description=description, args=args)

    def register_all_dialects(self) -> None:
        super().register_all_dialects()
        for name, factory in einc_dialects().items():
            self.ctx.register_dialect(name, factory)  # type: ignore[arg-type]
        load_einc_transform_ops(self.ctx)

    def register_all_frontends(self) -> None:
        super().register_all_frontends()

        def parse_ein(io: IO[bytes]) -> ModuleOp:
            from einc.frontend import build_module, parse_program

            text = "\n" * self.chunk_line_offset + io.read().decode()  # a chunk's lines keep their numbers
            program = parse_program(text, filename=self.get_input_name())
            return build_module(program)

        self.available_frontends["ein"] = parse_ein

        def parse_mlir(io: IO[bytes]) -> ModuleOp:
            from einc.schedule.script import PARSED_AT, parse_with_locations

            module, locations = parse_with_locations(
                self.ctx, io.read().decode(), self.get_input_name(), self.chunk_line_offset,
                not self.args.no_implicit_module,
            )  # fmt: skip
            PARSED_AT.update(locations)
            return module

        self.available_frontends["mlir"] = parse_mlir

    def register_all_passes(self) -> None:
        super().register_all_passes()
        from einc.tools.opt_support import einc_transform_interpreter
        from einc.compiler.registry import get_all_passes

        for name, factory in get_all_passes().items():
            self.register_pass(name, factory)
        self.register_pass("transform-interpreter", einc_transform_interpreter)

    def register_all_targets(self) -> None:
        """einc's targets and xDSL's `mlir` (the IR as text). xDSL's other targets (arm-asm,
        csl, llvm, mps, riscv-asm, wat, wgsl, x86-asm) print dialects no einc pipeline lowers
        to: on einc's IR they crashed or printed nothing, so `-t` refuses them."""
        from einc.targets import get_all_xdsl_targets

        self.available_targets.update(get_all_xdsl_targets())
        super().register_all_targets()
        ours = set(get_all_xdsl_targets()) | {"mlir"}
        self.available_targets = {name: t for name, t in self.available_targets.items() if name in ours}

    def register_all_arguments(self, arg_parser: argparse.ArgumentParser) -> None:
        from einc.cli import usage_error

        def error(message: str) -> NoReturn:  # exit status 1 at the option, not argparse's 2
            raise usage_error(message, self.argv, "einc-opt", "einc-opt")

        arg_parser.error = error
        from einc.compiler.registry import builtin_passes

        every_pass, self.available_passes = self.available_passes, dict(builtin_passes())
        try:  # xDSL's -p help lists the passes registered now: einc's, not xDSL's ~150
            super().register_all_arguments(arg_parser)
        finally:
            self.available_passes = every_pass
        arg_parser.epilog = (
            "einc-opt --list-passes lists einc's passes (and the plugins') with their options; "
            "--list-passes --all adds xDSL's. einc-opt --list-targets shows each target's pipeline."
        )
        arg_parser.add_argument(
            "--pass-pipeline",
            default=None,
            help="the passes to run, comma-separated, each with optional {opt=value} "
            "(same as -p; an MLIR-style builtin.module(...) wrapper is accepted)",
        )
        arg_parser.add_argument(
            "--load-pass-plugin", action="append", default=[], metavar="PATH",
            help="a Python file whose xdsl ModulePass subclasses become passes, by their `name` "
            "(repeatable; docs/PLUGINS.md)",
        )  # fmt: skip
        arg_parser.add_argument("--list-passes", action="store_true", help="list einc's and the plugins' passes with their options, and exit")
        arg_parser.add_argument("--all", action="store_true", help="with --list-passes: xDSL's passes too")
        arg_parser.add_argument("--list-targets", action="store_true", help="list the targets and each one's pipeline, and exit")
        for when, what in (("before-all", "before every pass"), ("after-all", "after every pass"),
                           ("after-change", "after every pass that changed it"),
                           ("after-failure", "after a pass that failed")):  # fmt: skip
            arg_parser.add_argument(f"--print-ir-{when}", action="store_true", help=f"print the IR {what} (on stderr)")
        arg_parser.add_argument("--timing", action="store_true", help="a table of each pass's time on stderr")
        arg_parser.add_argument(
            "--pass-statistics", action="store_true",
            help="after the run, each pass's ops created and erased and, for passes that rewrite with "
            "patterns, its rewrites per pattern (on stderr)",
        )  # fmt: skip
        arg_parser.add_argument(
            "--debug-counter", action="append", default=[], metavar="PASS-skip=N,PASS-count=M",
            help="apply only some of a pass's pattern rewrites: skip the first N, apply the next M "
            "(-1: all), skip the rest; to bisect inside a pass (repeatable)",
        )  # fmt: skip
        arg_parser.add_argument(
            "--reproducer", metavar="FILE",
            help="when the run fails (an internal error, a verifier failure, an error, a --check-numerics "
            "mismatch), write a reproducer here: replay it with --run-reproducer, shrink it with `einc reduce`",
        )  # fmt: skip
        arg_parser.add_argument(
            "--run-reproducer", metavar="FILE",
            help="replay a reproducer (written by --reproducer or for an internal error) and say whether "
            "it still fails the same way (exit status 0 when it does)",
        )  # fmt: skip
        arg_parser.add_argument(
            "--verify-each",
            action="store_true",
            help="after every pass, also run verify-egpu (the kernel-level checks); a failure "
            "is an internal compiler error",
        )
        from einc.tools.numerics.command import add_arguments

        add_arguments(arg_parser)

    def get_input_stream(self) -> tuple[IO[bytes], str]:
        where = SourceLocation(self.get_input_name(), 1, 1)
        try:
            stream, extension = super().get_input_stream()
        except OSError as err:
            raise UsageError(f"cannot read the input: {err.strerror or err}", where) from None
        if (self.args.frontend or extension) not in self.available_frontends:
            stream.close()
            raise UsageError(
                f"no frontend for '.{extension}' files (known: "
                f"{', '.join(sorted(self.available_frontends))}; or choose one with -f)", where,
            )  # fmt: skip
        return stream, extension

    def prepare_output(self) -> IO[str]:
        try:
            return super().prepare_output()
        except OSError as err:
            from einc.cli import argument_location

            where = argument_location(self.argv, "-o", "--output-file", tool="einc-opt")
            raise UsageError(f"cannot write the output: {err.strerror or err}", where) from None

    def parse_chunk(self, chunk: IO[bytes], file_extension: str, start_offset: int = 0) -> ModuleOp | None:
        """The input must be UTF-8: a ParseError at the first byte that is not."""
        data = chunk.read()
        self.chunk_line_offset = start_offset
        try:
            data.decode()
        except UnicodeDecodeError as err:
            line_start = data.rfind(b"\n", 0, err.start) + 1
            line = start_offset + data.count(b"\n", 0, err.start) + 1
            col = len(data[line_start : err.start].decode(errors="replace")) + 1
            raise ParseError(
                f"the input is not UTF-8 text (byte 0x{data[err.start]:02x} cannot start a character)",
                SourceLocation(self.get_input_name(), line, col),
            ) from None
        return super().parse_chunk(io.BytesIO(data), file_extension, start_offset)

    def setup_pipeline(self) -> None:
        from einc.passes.pipeline import parse_passes, strip_module_wrapper
        from einc.compiler.registry import load_pass_plugins

        for name in load_pass_plugins(self.args.load_pass_plugin, self.argv, tool="einc-opt"):
            self.register_pass(name, lambda name=name: _plugin_class(name))
        spec = self.args.pass_pipeline
        if spec is not None:
            self.args.passes = strip_module_wrapper(spec)
        self.pipeline = PassPipeline(parse_passes(self.args.passes, self.available_passes, "pass-pipeline"))
        from einc.ir.locations import keeping_locations

        self.pipeline = keeping_locations(self.pipeline)  # ops a pass makes keep a location
        if self.args.verify_each:
            from einc.passes.verify_egpu import verifying

            self.pipeline = verifying(self.pipeline)
        a = self.args
        self.instrumentation = Instrumentation(
            before_all=a.print_ir_before_all, after_all=a.print_ir_after_all or a.print_between_passes,
            after_change=a.print_ir_after_change, after_failure=a.print_ir_after_failure,
            timing=a.timing or a.time_passes,
        )  # fmt: skip

    def where(self, op: Operation | None) -> SourceLocation:
        """Where einc-opt found `op` in its input (an MLIR input's ops), else the input."""
        from einc.schedule.script import PARSED_AT

        found = PARSED_AT.get(op) if op is not None else None
        return found or SourceLocation(self.get_input_name(), 1, 1)

    def apply_passes(self, prog: ModuleOp) -> None:
        def verify(after: ModulePass | None) -> None:
            if not self.args.disable_verify:
                verify_located(prog, self.where, after.name if after is not None else None)

        self.instrumentation.run(self.pipeline, self.ctx, prog, verify)

    def output_resulting_program(self, prog: ModuleOp) -> str:
        error = target_level_error(prog, parse_spec(self.args.target).name, self.where)
        if error is not None:
            raise error
        return super().output_resulting_program(prog)

    def run(self) -> None:
        """Each chunk parsed, transformed, printed. With --split-input-file every chunk's
        error is reported and the next chunk goes on (exit status 1 at the end); with
        --verify-diagnostics the errors are checked against the `expected-error` comments
        (when the input has some; else printed on stdout, exit status 0, as xDSL does)."""
        start = time.perf_counter()
        chunks, extension = self.prepare_input()
        texts = [(chunk.read(), offset) for chunk, offset in chunks]
        for chunk, _ in chunks:
            chunk.close()
        output = self.prepare_output()
        name = self.get_input_name()
        checking = self.args.verify_diagnostics and any(has_expectations(t.decode(errors="replace")) for t, _ in texts)
        failed = 0
        output_s = 0.0
        try:
            for index, (data, offset) in enumerate(texts):
                if index > 0:
                    output.write("// -----\n")
                errors: list[EincError] = []
                try:
                    module = self.parse_chunk(io.BytesIO(data), extension, offset)
                    if module is not None:
                        self.apply_passes(module)
                        begin = time.perf_counter()
                        output.write(self.output_resulting_program(module))
                        output_s += time.perf_counter() - begin
                    output.flush()
                except (EincError, DiagnosticException, XdslParseError) as err:
                    located = self.as_einc_error(err, offset, data)
                    parsing = self.args.parsing_diagnostics and isinstance(err, XdslParseError | ParseError)
                    if not (self.args.split_input_file or self.args.verify_diagnostics or parsing):
                        raise located from None
                    errors.append(located)
                if checking:
                    text = data.decode(errors="replace")
                    complaints = check_diagnostics(errors, expected_diagnostics(text, name, offset), name)
                    for complaint in complaints:
                        print(complaint, file=sys.stderr)
                    failed += bool(complaints)
                elif self.args.verify_diagnostics or self.args.parsing_diagnostics:
                    for err in errors:  # xDSL's meaning: the diagnostic on stdout, exit status 0
                        print(err.render())
                else:
                    for err in errors:
                        print(err.render(), file=sys.stderr)
                    failed += bool(errors)
        except ShrinkException:  # xDSL's --shrink protocol
            print("Success, can shrink")
            raise SystemExit(0) from None
        finally:
            if output is not sys.stdout:
                output.close()
        if self.args.shrink:
            print("Failure, can't shrink")
            raise SystemExit(1)
        if self.instrumentation.timing:
            passes_s = sum(s for _, s in self.instrumentation.times)
            parse_s = max(0.0, time.perf_counter() - start - passes_s - output_s)
            sys.stderr.write(self.instrumentation.report([("Parser and input", parse_s), ("Output", output_s)]))
        if failed:
            raise ChunksFailed(failed)

    def as_einc_error(self, err: Exception, offset: int, data: bytes = b"") -> EincError:
        """A chunk's failure as a located einc error (an xDSL parse error at its span, a
        verifier error; an einc error without a place of its own at the chunk's first
        non-blank line, never as a bare `einc: error:`)."""
        if isinstance(err, XdslParseError):
            err.span = dataclasses.replace(err.span, line_offset=offset)
            return mlir_parse_error(err)
        if isinstance(err, DiagnosticException):  # a pass failed (PassFailedException, ...)
            err = EincError(str(err).splitlines()[0] if str(err) else type(err).__name__)
        assert isinstance(err, EincError)
        if err.loc is None:
            lines = data.decode(errors="replace").splitlines()
            first = next((i for i, line in enumerate(lines) if line.strip()), 0)
            source = "\n" * offset + "\n".join(lines)
            err.loc = SourceLocation(self.get_input_name(), 1 + offset + first, 1, 1, source)
        return err


def _plugin_class(name: str) -> type[ModulePass]:
    from einc.compiler.registry import plugin_passes

    return plugin_passes()[name].cls


def mlir_parse_error(err: XdslParseError) -> ParseError:
    """xDSL's parse error at its span, as einc's (`file:line:col: error:` and a caret)."""
    return ParseError(err.msg, span_location(err.span))


def pipeline_error(text: str) -> str:
    """xDSL's pipeline parse error ('Error parsing ...', 'pass-pipeline:L:C', the spec, the
    caret, the reason) as `pass-pipeline:L:C: error: reason` over the spec and its caret."""
    lines = text.splitlines()
    if len(lines) >= 5 and lines[1].startswith("pass-pipeline:"):
        return f"{lines[1]}: error: {lines[4].strip()}\n{lines[2]}\n{lines[3]}"
    return f"einc-opt: error: {text}"


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    opt: EincOptMain | None = None
    allow_deep_nests()  # a loop per axis: walks as deep as the program's rank
    try:
        opt = EincOptMain(description="einc modular optimizer driver", args=argv)
        if opt.args.list_passes or opt.args.list_targets:
            sys.stdout.write(list_passes(opt.available_passes, opt.args.all) if opt.args.list_passes else list_targets())
            sys.stdout.flush()
            return 0
        if opt.args.run_reproducer:
            from einc.tools.reduce.command import run_reproducer_command

            return run_reproducer_command(opt.args.run_reproducer)
        stats = statistics_requested(opt, argv)
        try:
            with instrumenting(stats) if stats is not None else contextlib.nullcontext():
                status = _run(opt, argv)
        finally:
            if stats is not None and opt.args.pass_statistics:
                sys.stderr.write(stats.render())
        sys.stdout.flush()
        return status
    except BrokenPipeError:  # `einc-opt ... | head`: the reader is gone; end quietly
        from einc.cli import closed_stdout

        return closed_stdout()
    except ChunksFailed:
        return 1
    except EincError as err:
        if opt is not None and opt.args.input_file:  # an op's location has no text for the caret
            try:
                err.with_sources({opt.get_input_name(): Path(opt.args.input_file).read_text()})
            except (OSError, UnicodeDecodeError):
                pass
        print(err.render(), file=sys.stderr)
        if opt is not None and opt.args.reproducer and opt.args.input_file and not isinstance(err, UsageError):
            from einc.tools.reduce.command import write_for_error

            write_for_error("einc-opt", opt.args, argv, err, opt.args.reproducer)
        return 1
    except DiagnosticException as err:
        print(str(err), file=sys.stderr)
        return 1
    except XdslParseError as err:  # malformed MLIR input (an .ein file's errors are einc's own)
        print(mlir_parse_error(err).render(), file=sys.stderr)
        return 1
    except ArgSpecParseError as err:  # a BaseException in xDSL: a malformed --pass-pipeline
        print(pipeline_error(str(err)), file=sys.stderr)
        return 1
    except Exception as exc:  # noqa: BLE001 - an einc bug: a reproducer, exit status 2
        from einc.cli import report_internal_error

        ice = InternalCompilerError.wrap(exc, "einc-opt")
        context = {"command line": " ".join(["einc-opt", *argv])}
        if opt is not None:
            context["pass pipeline"] = str(opt.args.passes)
            context["target"] = str(opt.args.target)
            if opt.args.input_file:
                try:
                    context["input"] = Path(opt.args.input_file).read_text(errors="replace")
                except OSError:
                    pass
        writer: Callable[[], Path | None] | None = None
        if opt is not None and opt.args.input_file:
            from einc.tools.reduce.command import write_for_error

            args = opt.args
            writer = lambda: write_for_error("einc-opt", args, argv, ice, args.reproducer)  # noqa: E731
        report_internal_error(ice, "einc-opt", writer, **context)
        return 2


def _run(opt: EincOptMain, argv: Sequence[str]) -> int:
    """The run the arguments ask for: `--check-numerics`'s walk, else xDSL's driver's."""
    if opt.args.check_numerics:
        from einc.tools.numerics.command import opt_command

        on_failure: Callable[[NumericsReport, str | None], None] | None = None
        if opt.args.reproducer:
            from einc.tools.reduce.command import write_for_report

            args = opt.args

            def write_reproducer(report: NumericsReport, schedule_text: str | None) -> None:
                write_for_report("einc-opt", args, argv, report, args.reproducer)

            on_failure = write_reproducer

        return opt_command(opt, on_failure)
    opt.run()
    return 0


def statistics_requested(opt: EincOptMain, argv: Sequence[str]) -> Statistics | None:
    """The pass statistics `--pass-statistics` / `--debug-counter` ask for (None: neither)."""
    if not opt.args.pass_statistics and not opt.args.debug_counter:
        return None
    try:
        return requested(opt.args.pass_statistics, opt.args.debug_counter)
    except ValueError as err:
        from einc.cli import argument_location

        raise UsageError(f"--debug-counter: {err}", argument_location(argv, "--debug-counter", tool="einc-opt")) from None


if __name__ == "__main__":
    sys.exit(main())
