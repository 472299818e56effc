"""The parts of `einc-opt` beyond xDSL's driver: pass and target listings, the pass
instrumentation (IR dumps before/after passes, per-pass times) and MLIR-style
`--verify-diagnostics` (`expected-error` comments checked against einc's errors)."""

from __future__ import annotations

import dataclasses
import re
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import IO, get_type_hints

from xdsl.context import Context
from xdsl.dialects.builtin import ModuleOp
from xdsl.ir import Operation
from xdsl.passes import ModulePass, PassPipeline
from xdsl.printer import Printer
from xdsl.utils.exceptions import DiagnosticException
from xdsl.utils.hints import type_repr

from einc.errors import EincError, SourceLocation
from einc.ir.pass_statistics import pass_scope

# ---- listings --------------------------------------------------------------------------------


def summary(cls: type) -> str:
    """A pass's one-line summary: the first sentence of its class's docstring (its module's
    when the class has none), without a leading `spec`: usage."""
    doc = cls.__dict__.get("__doc__") or ""
    if not doc.strip() or doc.startswith(f"{cls.__name__}("):  # none, or a dataclass's generated one
        module = sys.modules.get(cls.__module__)
        doc = (module.__doc__ if module is not None else None) or ""
    paragraph = " ".join(doc.strip().split("\n\n")[0].split())
    paragraph = re.sub(r"^`[^`]*`:\s*", "", paragraph)
    sentence = re.split(r"(?<=[.;:])\s", paragraph, maxsplit=1)[0]
    return sentence[:1].upper() + sentence[1:] if sentence else "(no description)"


def options(cls: type[ModulePass]) -> list[str]:
    """`name: type = default` for each option of a pass (its dataclass fields)."""
    try:
        hints = get_type_hints(cls)
    except Exception:  # noqa: BLE001 - an annotation that does not resolve: show its text
        hints = {}
    shown: list[str] = []
    for f in dataclasses.fields(cls):
        if not f.init or f.name == "name":
            continue
        kind = type_repr(hints[f.name]) if f.name in hints else str(f.type)
        if f.default is not dataclasses.MISSING:
            shown.append(f"{f.name.replace('_', '-')}: {kind} = {_value(f.default)}")
        elif f.default_factory is not dataclasses.MISSING:
            shown.append(f"{f.name.replace('_', '-')}: {kind} = {_value(f.default_factory())}")
        else:
            shown.append(f"{f.name.replace('_', '-')}: {kind} (required)")
    return shown


def _value(value: object) -> str:
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, str):
        return f'"{value}"'
    return str(value)


def list_passes(available: dict[str, Callable[[], type[ModulePass]]], show_all: bool) -> str:
    """`einc-opt --list-passes [--all]`: einc's passes, then the plugins', then (with
    `show_all`) xDSL's, each with its summary and options."""
    from einc.compiler.registry import builtin_passes, plugin_passes

    ours = builtin_passes()
    plugins = plugin_passes()
    sections: list[tuple[str, list[str]]] = [
        ("einc's passes", sorted(ours)),
        ("plugin passes", sorted(plugins)),
    ]
    if show_all:
        sections.append(("xDSL's passes", sorted(n for n in available if n not in ours and n not in plugins)))
    lines: list[str] = []
    for title, names in sections:
        if not names:
            continue
        lines.append(f"{title}:")
        for name in names:
            cls = available[name]() if name in available else ours[name]()
            origin = f" [from {plugins[name].origin}]" if name in plugins else ""
            lines.append(f"  {name}  {summary(cls)}{origin}")
            lines += [f"      {o}" for o in options(cls)]
    if not show_all:
        lines.append("(einc-opt --list-passes --all also lists xDSL's passes)")
    return "\n".join(lines) + "\n"


def list_targets() -> str:
    """`einc-opt --list-targets`: each target and the pipeline that reaches its level."""
    from einc.passes.pipeline import LOOPS_PIPELINE
    from einc.targets import get_all_targets

    lines = ["targets (-t NAME prints a module at the target's level; from the loops, run its pipeline first):"]
    for name, factory in sorted(get_all_targets().items()):
        lines.append(f"  {name:8} {factory().pipeline}")
    lines.append(f"  (from a .ein program or the ein level, put {LOOPS_PIPELINE} before the pipeline)")
    lines.append("  mlir     the module as MLIR text (the default)")
    return "\n".join(lines) + "\n"


def target_level_error(module: ModuleOp, target: str, where: Callable[[Operation | None], SourceLocation]) -> EincError | None:
    """A UsageError when `module` is above the level `target`'s printer takes (ein ops, or
    loops outside any kernel for a device target), naming the pipeline to run first."""
    from einc.errors import UsageError
    from einc.passes.pipeline import LOOPS_PIPELINE
    from einc.targets import get_all_targets

    targets = get_all_targets()
    if target not in targets:
        return None
    pipeline = targets[target]().pipeline
    device = "convert-affine-to-egpu" in pipeline
    ein_op = next((op for op in module.walk() if op.name.startswith("ein.")), None)
    if ein_op is not None:
        return UsageError(
            f"-t {target} prints the target's level, but this module is at the ein level "
            f"({ein_op.name}); run the passes first: -p '{LOOPS_PIPELINE},{pipeline}' "
            "(einc-opt --list-targets shows each target's pipeline)", where(ein_op),
        )  # fmt: skip
    if device and not any(op.name.startswith("egpu.") for op in module.walk()):
        loop = next((op for op in module.walk() if op.name.startswith(("affine.", "scf."))), None)
        return UsageError(
            f"-t {target} prints egpu kernels, but this module is at the loop level (no egpu op); "
            f"run the target's pipeline first: -p '{pipeline}' "
            "(einc-opt --list-targets shows each target's pipeline)", where(loop),
        )  # fmt: skip
    return None


# ---- instrumentation -------------------------------------------------------------------------


@dataclass
class Instrumentation:
    """MLIR's pass instrumentation flags: IR dumps on `stream` (stderr: never mixed with the
    result on stdout) and per-pass wall times."""

    before_all: bool = False
    after_all: bool = False
    after_change: bool = False
    after_failure: bool = False
    timing: bool = False
    stream: IO[str] = field(default_factory=lambda: sys.stderr)
    times: list[tuple[str, float]] = field(default_factory=list)

    def dump(self, module: ModuleOp, when: str, name: str) -> None:
        print(f"// -----// IR Dump {when} {name} //----- //", file=self.stream)
        Printer(stream=self.stream).print_op(module)
        print("\n", file=self.stream, flush=True)

    def run(
        self, pipeline: PassPipeline, ctx: Context, module: ModuleOp, verify: Callable[[ModulePass | None], None]
    ) -> None:
        """`pipeline` applied pass by pass (its callback kept), `verify(pass)` after each
        (`verify(None)` first: the input)."""
        passes = pipeline.passes
        verify(None)
        if pipeline.callback is not None:
            pipeline.callback(None, module, passes[0] if passes else None)
        for index, p in enumerate(passes):
            if self.before_all:
                self.dump(module, "Before", p.name)
            before = str(module) if self.after_change else None
            start = time.perf_counter()
            try:
                with pass_scope(p, module):
                    p.apply(ctx, module)
            except BaseException:
                if self.after_failure:
                    self.dump(module, "After Failure", p.name)
                raise
            finally:
                self.times.append((p.name, time.perf_counter() - start))
            verify(p)
            if self.after_all or (self.after_change and str(module) != before):
                self.dump(module, "After", p.name)
            if pipeline.callback is not None:
                pipeline.callback(p, module, passes[index + 1] if index + 1 < len(passes) else None)

    def report(self, phases: Sequence[tuple[str, float]]) -> str:
        """MLIR's `-mlir-timing` table: each phase and pass, its seconds and share."""
        rows = [phases[0], *self.times, *phases[1:]] if phases else list(self.times)
        total = sum(s for _, s in rows) or 1e-12
        rule = "===" + "-" * 73 + "==="
        lines = [rule, "Execution time report".center(79).rstrip(), rule,
                 f"  Total Execution Time: {total:.4f} seconds", "", "  ----Wall Time----  ----Name----"]  # fmt: skip
        lines += [f"  {s:8.4f} ({s / total * 100:5.1f}%)  {name}" for name, s in rows]
        lines.append(f"  {total:8.4f} (100.0%)  Total")
        return "\n".join(lines) + "\n"


# ---- --verify-diagnostics --------------------------------------------------------------------

_EXPECTED = re.compile(r"(?://|#)\s*expected-(error|warning|note|remark)\s*(@([+-]\d+|above|below))?\s*\{\{(.*?)\}\}")


@dataclass
class Expected:
    line: int
    message: str
    comment: SourceLocation
    seen: bool = False


def expected_diagnostics(text: str, filename: str, line_offset: int = 0) -> list[Expected]:
    """The `expected-error {{...}}` comments of a chunk (`// ...` in MLIR, `# ...` in .ein):
    the line each names (`@+N`, `@-N`, `@above`, `@below`, or its own line) and the message."""
    found: list[Expected] = []
    lines = text.splitlines()
    for number, line in enumerate(lines, start=1):
        for match in _EXPECTED.finditer(line):
            here = line_offset + number
            at = match.group(3)
            if at is None:
                target = here
            elif at == "above":
                target = here - 1
            elif at == "below":
                target = here + 1
            else:
                target = here + int(at)
            where = SourceLocation(filename, here, match.start() + 1, match.end() - match.start(), "\n" * line_offset + text)
            found.append(Expected(target, match.group(4), where))
    return found


def has_expectations(text: str) -> bool:
    return _EXPECTED.search(text) is not None


def check_diagnostics(errors: Sequence[EincError], expected: list[Expected], filename: str) -> list[str]:
    """Match the errors a chunk produced against its expectations (same line, the expected
    text contained in the message); the complaints, in MLIR's words."""
    complaints: list[str] = []
    for err in errors:
        loc = err.loc
        line = loc.line if loc is not None and loc.file == filename else None
        match = next((e for e in expected if not e.seen and e.line == line and e.message in err.message), None)
        if match is None:
            match = next((e for e in expected if not e.seen and e.line == line and e.message in err.render()), None)
        if match is not None:
            match.seen = True
            continue
        shown = EincError(f"unexpected error: {err.message}", loc if line is not None else None)
        complaints.append(shown.render() if line is not None else f"{err.render()}\n(an unexpected error, outside the input file)")
    for e in expected:
        if not e.seen:
            complaints.append(EincError(f'expected error "{e.message}" was not produced (on line {e.line})', e.comment).render())
    return complaints


class InvalidIR(EincError):
    """A module that does not verify: at the failing op where einc-opt knows its place."""


def verify_located(module: ModuleOp, where: Callable[[Operation | None], SourceLocation], after: str | None) -> None:
    """`module.verify()`; a failure as InvalidIR at the first op that fails on its own
    (xDSL's verifier error names no place)."""
    try:
        module.verify()
    except DiagnosticException as whole:
        failing: Operation | None = None
        message = str(whole).splitlines()[0] if str(whole) else "the module does not verify"
        for op in module.walk():
            try:
                op.verify(verify_nested_ops=False)
            except DiagnosticException as err:
                failing, message = op, (str(err).splitlines() or [message])[0]
                break
        if not message.startswith("Operation does not verify"):
            message = f"Operation does not verify: {message}"
        if after is not None:
            message = message.replace("Operation does not verify", f"Operation does not verify after pass '{after}'", 1)
        raise InvalidIR(message, where(failing)) from None


# ---- xDSL's transform-interpreter on einc's schedules ----------------------------------------


def einc_transform_interpreter() -> type[ModulePass]:
    """xDSL's `transform-interpreter`, refusing einc's schedules (`transform.einc.*` ops,
    which only einc's interpreter knows) with a pointer to `einc-apply-schedule`, and its
    failures as located errors instead of a dump of the module."""
    from xdsl.transforms.transform_interpreter import TransformInterpreterPass

    from einc.errors import UsageError
    from einc.schedule.script import PARSED_AT

    @dataclass(frozen=True)
    class EincTransformInterpreter(TransformInterpreterPass):
        """xDSL's transform interpreter (einc's schedules: use einc-apply-schedule)."""

        def apply(self, ctx: Context, op: ModuleOp) -> None:
            hint = "einc's schedules run with einc-apply-schedule: -p einc-apply-schedule (or einc-apply-schedule{file=s.mlir})"
            ours = next((o for o in op.walk() if o.name.startswith("transform.einc.")), None)
            if ours is not None:
                raise UsageError(f"transform-interpreter is xDSL's and does not know einc's {ours.name}; {hint}", PARSED_AT.get(ours))
            try:
                super().apply(ctx, op)
            except EincError:
                raise
            except Exception as err:  # noqa: BLE001 - xDSL's interpreter on einc's IR: point the way
                message = str(err).splitlines()[-1] if str(err) else type(err).__name__
                message = re.sub(r"^.*\) could not find", "could not find", message)
                raise UsageError(f"transform-interpreter: {message}; {hint}") from None

    return EincTransformInterpreter
