"""A NumericsReport as text for a terminal: one line per step, then the first failing step
with its output, index, errors and the IR diff across it (difflib). Colours only when asked
(the CLIs ask when stdout is a TTY)."""

from __future__ import annotations

import difflib

from einc.tools.numerics.types import LevelRun, NumericsReport, OutputCheck, PipelineStep

MAX_DIFF_LINES = 400
NAME_WIDTH = 44

_COLOURS = {"ok": "\033[32m", "bad": "\033[1;31m", "dim": "\033[2m", "bold": "\033[1m",
            "add": "\033[32m", "del": "\033[31m", "hunk": "\033[36m"}  # fmt: skip
_RESET = "\033[0m"


class _Paint:
    def __init__(self, colour: bool):
        self.colour = colour

    def __call__(self, kind: str, text: str) -> str:
        return f"{_COLOURS[kind]}{text}{_RESET}" if self.colour else text


def _ms(seconds: float) -> str:
    return f"{seconds * 1e3:.0f} ms" if seconds >= 0.0995 else f"{seconds * 1e3:.1f} ms"


def _max_error(run: LevelRun) -> float:
    return max((o.max_abs for o in run.outputs), default=0.0)


def _name(step: PipelineStep) -> str:
    name = step.name if step.kind != "plugin" else f"{step.name} [plugin]"
    return name if len(name) <= NAME_WIDTH else name[: NAME_WIDTH - 1] + "…"


def step_line(step: PipelineStep, paint: _Paint, bad: bool = False) -> str:
    head = f"{step.index:>3} {step.stage:<9} {_name(step):<{NAME_WIDTH}}"
    check = step.check
    if check is None:
        return paint("dim", f"  - {head} not executed (after the first failure)")
    if not check.ran:
        return paint("dim", f"  - {head} {check.level:<9} {check.reason}")
    if check.crashed:
        return paint("bad", f"  ✘ {head} {check.level:<9} crashed: {check.reason}")
    times = f"{_ms(check.seconds)} run, {_ms(step.seconds)} step"
    if check.ok:
        return f"  {paint('ok', '✔')} {head} {check.level:<9} max error {_max_error(check):.1e}  {paint('dim', times)}"
    worst = next(o for o in check.outputs if not o.ok)
    if check.inherited:  # downstream of the culprit: the numbers of the step before, unchanged
        return paint("dim", f"  ↳ {head} {check.level:<9} {worst.name}: max error {worst.max_abs:.2e}, "
                            f"inherited from step {check.inherits_from}  {times}")  # fmt: skip
    return paint("bad", f"  ✘ {head} {check.level:<9} {worst.name}: max error {worst.max_abs:.2e}") + f"  {paint('dim', times)}"


def render(report: NumericsReport, colour: bool = False) -> str:
    paint = _Paint(colour)
    executed = sum(1 for s in report.steps if s.check is not None and s.check.ran)
    lines = [paint("bold", f"check-numerics: {report.program}, target {report.target}, seed {report.seed}")]
    lines += [f"  {note}" for note in report.notes]
    lines += [step_line(step, paint) for step in report.steps]
    if report.first_bad is None:
        lines.append(paint("ok", f"all {executed} executed steps of {len(report.steps)} agree with the "
                                 "float64 reference"))  # fmt: skip
        return "\n".join(lines) + "\n"
    lines += later(report, paint)
    lines.append("")
    lines += failure(report, report.steps[report.first_bad], paint)
    return "\n".join(lines) + "\n"


def later(report: NumericsReport, paint: _Paint) -> list[str]:
    """What the executed steps after the first bad one did: inherit its error (↳: their
    numbers are the step's before them) or fail on their own (✘)."""
    assert report.first_bad is not None
    after = [s for s in report.steps[report.first_bad + 1 :] if s.check is not None and s.check.ran]
    inherited = [s for s in after if s.check is not None and s.check.inherited]
    own = [s for s in after if s.check is not None and not s.check.ok and not s.check.inherited]
    lines = []
    if inherited:
        n = len(inherited)
        lines.append(f"↳ {n} later step{'s' if n > 1 else ''} only {'carry' if n > 1 else 'carries'} the error on "
                     f"(the numbers of the step before {'them' if n > 1 else 'it'}, unchanged)")  # fmt: skip
    if own:
        names = ", ".join(f"{s.index} ({_name(s)})" for s in own)
        lines.append(paint("bad", f"✘ later steps that change the numbers again or crash: {names}"))
    return lines


def failure(report: NumericsReport, step: PipelineStep, paint: _Paint) -> list[str]:
    check = step.check
    assert check is not None
    where = f" ({step.location})" if step.location else ""
    what = {"transform": "transform op", "printer": "printer", "frontend": "frontend"}.get(step.kind, step.kind)
    verdict = "fails" if check.crashed else "changes the numbers"
    lines = [paint("bad", f"error: step {step.index}, {what} '{step.name}'{where}, stage {step.stage}, "
                          f"is the first that {verdict}")]  # fmt: skip
    agreed = [s for s in report.steps[: step.index] if s.check is not None and s.check.ok]
    if agreed:
        last = agreed[-1]
        lines.append(f"  the module agreed with the reference after step {last.index} ({last.name}, {last.check.level if last.check else ''} level)")
    suspects = unexecuted_before(report, step)
    if suspects:
        names = ", ".join(f"{s.index} ({s.name})" for s in suspects)
        lines.append(f"  not executed since the module last agreed, so possibly at fault too: step {names}")
    if check.crashed and check.reason.startswith("the step raised"):
        lines.append(f"  {check.reason[len('the step '):]} (a bug in the {what})")
    elif check.crashed:
        lines.append(f"  executing the module after it at the {check.level} level failed: {check.reason}")
    for out in check.outputs:
        if not out.ok:
            lines += _output_lines(out)
    if step.rewrite is not None:
        lines.append(f"  the first rewrite that changes them: {step.rewrite}")
    lines.append("")
    lines += diff_lines(report, step, paint)
    return lines


def unexecuted_before(report: NumericsReport, step: PipelineStep) -> list[PipelineStep]:
    """The steps between the last one that ran and agreed and `step` that changed the IR but
    were not executed (no interpreter for their level): the change may be theirs."""
    suspects: list[PipelineStep] = []
    for earlier in reversed(report.steps[: step.index]):
        if earlier.check is not None and earlier.check.ran:
            break
        reason = earlier.check.reason if earlier.check is not None else "unchanged"
        if earlier.changed and reason != "unchanged" and not reason.startswith("only attributes"):
            suspects.append(earlier)
    return suspects[::-1]


def _output_lines(out: OutputCheck) -> list[str]:
    if out.first_bad_index is None:
        return [f"  {out.name}: missing or of the wrong shape"]
    index = ", ".join(map(str, out.first_bad_index))
    return [
        f"  {out.name}[{index}] is the first element that differs: got {out.got:.7g}, want {out.want:.7g}",
        (f"  {out.name}: max abs error {out.max_abs:.3e}, max rel error {out.max_rel:.3e} "
         f"(tolerance {out.tolerance:.0e} of the reference's largest magnitude)"),
    ]


def diff_lines(report: NumericsReport, step: PipelineStep, paint: _Paint) -> list[str]:
    """The IR before and after `step` as a unified diff (the printer: the IR and the source),
    in the custom form where both sides have one (as einc-opt prints), else the generic."""
    previous = report.steps[step.index - 1] if step.index > 0 else None
    before = "" if previous is None else previous.ir_after
    after = step.ir_after
    if previous is not None and previous.ir_custom is not None and (step.ir_custom is not None or step.kind == "printer"):
        before = previous.ir_custom
        after = step.ir_custom if step.ir_custom is not None else step.ir_after
    if step.kind == "printer":
        return [f"--- the IR the printer was given (step {step.index - 1}), then the printed source:",
                *before.splitlines(), "+++", *after.splitlines()]  # fmt: skip
    diff = list(difflib.unified_diff(before.splitlines(), after.splitlines(),
                                     f"after step {step.index - 1} (the IR before)",
                                     f"after step {step.index} ({_name(step)})", lineterm=""))  # fmt: skip
    if not diff:
        return ["(the IR is the same before and after the step)"]
    shown = diff[:MAX_DIFF_LINES]
    lines = [_diff_paint(line, paint) for line in shown]
    if len(diff) > len(shown):
        lines.append(f"... {len(diff) - len(shown)} more diff lines")
    return lines


def _diff_paint(line: str, paint: _Paint) -> str:
    if line.startswith(("+++", "---")):
        return paint("bold", line)
    if line.startswith("@@"):
        return paint("hunk", line)
    if line.startswith("+"):
        return paint("add", line)
    if line.startswith("-"):
        return paint("del", line)
    return line
