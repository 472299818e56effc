"""`einc-opt`: xDSL's opt driver with einc's dialects, passes, targets and `.ein` frontend.

    einc-opt prog.ein --pass-pipeline=convert-ein-to-affine --print-ir-after-all
    einc-opt lowered.mlir -t c
"""

from __future__ import annotations

import os
import sys
import traceback
from collections.abc import Sequence
from typing import IO

from xdsl.dialects.builtin import ModuleOp
from xdsl.passes import ModulePass, PassPipeline
from xdsl.printer import Printer
from xdsl.utils.exceptions import ArgSpecParseError, DiagnosticException
from xdsl.utils.exceptions import ParseError as XdslParseError
from xdsl.xdsl_opt_main import xDSLOptMain

from einc.context import einc_dialects, load_einc_transform_ops
from einc.errors import EincError, ParseError, SourceLocation


class EincOptMain(xDSLOptMain):
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

    def register_all_passes(self) -> None:
        super().register_all_passes()
        from einc.passes import get_all_passes

        for name, factory in get_all_passes().items():
            self.register_pass(name, factory)

    def register_all_targets(self) -> None:
        from einc.targets import get_all_xdsl_targets

        self.available_targets.update(get_all_xdsl_targets())
        super().register_all_targets()

    def register_all_arguments(self, arg_parser) -> None:  # type: ignore[no-untyped-def]
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

    def setup_pipeline(self) -> None:
        self._setup_pipeline()
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
        if not self.args.print_ir_after_all:
            super().setup_pipeline()
            return

        def callback(previous: ModulePass | None, module: ModuleOp, _next: ModulePass | None) -> None:
            if not self.args.disable_verify:
                module.verify()
            if previous is not None:
                print(f"// -----// IR Dump After {previous.name} //----- //")
                Printer(stream=sys.stdout).print_op(module)
                print("\n")

        self.pipeline = PassPipeline.parse_spec(self.available_passes, self.args.passes, callback)


def mlir_parse_error(err: XdslParseError) -> ParseError:
    """xDSL's parse error at its span, as einc's (`file:line:col: error:` and a caret)."""
    where = err.span.get_location()
    chunk = err.span.input.content  # a chunk of the file starts line_offset lines into it
    source = "\n" * err.span.line_offset + chunk if isinstance(chunk, str) else None
    loc = SourceLocation(where.file, where.line, int(where.col), max(1, err.span.len), source)
    return ParseError(err.msg, loc)


def pipeline_error(text: str) -> str:
    """xDSL's pipeline parse error ('Error parsing ...', 'pass-pipeline:L:C', the spec, the
    caret, the reason) as `pass-pipeline:L:C: error: reason` over the spec and its caret."""
    lines = text.splitlines()
    if len(lines) >= 5 and lines[1].startswith("pass-pipeline:"):
        return f"{lines[1]}: error: {lines[4].strip()}\n{lines[2]}\n{lines[3]}"
    return f"einc-opt: error: {text}"


def main(argv: Sequence[str] | None = None) -> int:
    try:
        EincOptMain(description="einc modular optimizer driver", args=argv).run()
        return 0
    except EincError as err:
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
    except (OSError, ValueError) as err:
        print(f"einc-opt: error: {err}", file=sys.stderr)
        return 1
    except Exception as exc:
        if os.environ.get("EINC_DEBUG"):
            traceback.print_exc()
        print(
            f"einc-opt: internal error: {type(exc).__name__}: {exc}\n"
            "(this is a bug in einc; rerun with EINC_DEBUG=1 for the traceback)",
            file=sys.stderr,
        )
        return 2


if __name__ == "__main__":
    sys.exit(main())
