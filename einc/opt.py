"""`einc-opt`: xDSL's opt driver with einc's dialects, passes, targets and `.ein` frontend.

    einc-opt prog.ein --pass-pipeline=convert-ein-to-affine --print-ir-after-all
    einc-opt lowered.mlir -t c
"""

from __future__ import annotations

import argparse
import io
import re
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import IO, NoReturn

from xdsl.dialects.builtin import ModuleOp
from xdsl.passes import ModulePass, PassPipeline
from xdsl.printer import Printer
from xdsl.utils.arg_spec import parse_pipeline
from xdsl.utils.exceptions import ArgSpecParseError, DiagnosticException
from xdsl.utils.exceptions import ParseError as XdslParseError
from xdsl.xdsl_opt_main import xDSLOptMain

from einc.context import einc_dialects, load_einc_transform_ops
from einc.errors import (
    EincError,
    InternalCompilerError,
    ParseError,
    SourceLocation,
    UsageError,
    span_location,
)


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

            program = parse_program(io.read().decode(), filename=self.get_input_name())
            return build_module(program)

        self.available_frontends["ein"] = parse_ein

        def parse_mlir(io: IO[bytes]) -> ModuleOp:
            from einc.schedule import PARSED_AT, parse_with_locations

            module, locations = parse_with_locations(
                self.ctx, io.read().decode(), self.get_input_name(), self.chunk_line_offset,
                not self.args.no_implicit_module,
            )  # fmt: skip
            PARSED_AT.update(locations)
            return module

        self.available_frontends["mlir"] = parse_mlir

    def register_all_passes(self) -> None:
        super().register_all_passes()
        from einc.passes import get_all_passes

        for name, factory in get_all_passes().items():
            self.register_pass(name, factory)

    def register_all_targets(self) -> None:
        from einc.targets import get_all_xdsl_targets

        self.available_targets.update(get_all_xdsl_targets())
        super().register_all_targets()

    def register_all_arguments(self, arg_parser: argparse.ArgumentParser) -> None:
        from einc.cli import usage_error

        def error(message: str) -> NoReturn:  # exit status 1 at the option, not argparse's 2
            raise usage_error(message, self.argv, "einc-opt", "einc-opt")

        arg_parser.error = error
        super().register_all_arguments(arg_parser)
        arg_parser.add_argument(
            "--pass-pipeline",
            default=None,
            help="the passes to run, comma-separated, each with optional {opt=value} "
            "(same as -p; an MLIR-style builtin.module(...) wrapper is accepted)",
        )
        arg_parser.add_argument(
            "--print-ir-after-all",
            action="store_true",
            help="print the IR after every pass",
        )
        arg_parser.add_argument(
            "--verify-each",
            action="store_true",
            help="after every pass, also run verify-egpu (the kernel-level checks); a failure "
            "is an internal compiler error",
        )

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
        from einc.ir.locations import keeping_locations

        self._setup_pipeline()
        self.pipeline = keeping_locations(self.pipeline)  # ops a pass makes keep a location
        if self.args.verify_each:
            from einc.passes.verify_egpu import verifying

            self.pipeline = verifying(self.pipeline)

    def _setup_pipeline(self) -> None:
        spec = self.args.pass_pipeline
        if spec is not None:
            spec = spec.strip()
            if spec.startswith("builtin.module(") and spec.endswith(")"):
                spec = spec[len("builtin.module(") : -1]
            self.args.passes = spec
        self.check_pass_names(self.args.passes)
        if not self.args.print_ir_after_all:
            try:
                super().setup_pipeline()
            except ValueError as err:  # a pass option it does not have, a bad option value
                raise UsageError(str(err), self.pipeline_location()) from None
            return

        def callback(previous: ModulePass | None, module: ModuleOp, _next: ModulePass | None) -> None:
            if not self.args.disable_verify:
                module.verify()
            if previous is not None:
                print(f"// -----// IR Dump After {previous.name} //----- //")
                Printer(stream=sys.stdout).print_op(module)
                print("\n")

        try:
            self.pipeline = PassPipeline.parse_spec(self.available_passes, self.args.passes, callback)
        except ValueError as err:
            raise UsageError(str(err), self.pipeline_location()) from None

    def pipeline_location(self) -> SourceLocation:
        spec = self.args.passes
        return SourceLocation("pass-pipeline", 1, 1, max(1, len(spec)), spec)

    def check_pass_names(self, spec: str) -> None:
        """A UsageError at the first pass of the pipeline `spec` that is not registered."""
        for arg_spec in parse_pipeline(spec):
            if arg_spec.name in self.available_passes:
                continue
            found = re.search(rf"(?<![\w.-]){re.escape(arg_spec.name)}(?![\w.-])", spec)
            col = found.start() + 1 if found else 1
            raise UsageError(
                f"unknown pass '{arg_spec.name}' (see einc-opt --help for the passes)",
                SourceLocation("pass-pipeline", 1, col, len(arg_spec.name), spec),
            )


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
    try:
        opt = EincOptMain(description="einc modular optimizer driver", args=argv)
        opt.run()
        return 0
    except EincError as err:
        if opt is not None and opt.args.input_file:  # an op's location has no text for the caret
            try:
                err.with_sources({opt.get_input_name(): Path(opt.args.input_file).read_text()})
            except (OSError, UnicodeDecodeError):
                pass
        print(err.render(), file=sys.stderr)
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
        report_internal_error(ice, "einc-opt", **context)
        return 2


if __name__ == "__main__":
    sys.exit(main())
