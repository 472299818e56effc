"""The `einc explain` page: one self-contained HTML document (inline CSS, script and SVG, no
network) built from a NumericsReport and its PageContext.

    summary   program, target, seed, shapes, the verdict (a link to the first bad step)
    checks    each step's execution against the oracle (✔ ✘ –, level, errors, first bad index)
    steps     each step's IR beside the IR before it, changes marked; unchanged steps folded
    schedule  the schedule script, each transform op linked to its step and its effect
    source    the final source, highlighted (Pygments)
    times     each step's time (SVG bars) and each stage's total

Everything taken from the report is escaped (IR holds `<`, `&`, `"`).
"""

from __future__ import annotations

import re
from html import escape
from importlib.resources import files

from einc.tools.explain.chart import stage_color, stage_totals, times_chart
from einc.tools.explain.collect import PageContext
from einc.tools.explain.diff import DiffStats, diff_stats, side_by_side
from einc.tools.explain.highlight import highlight_source, highlight_styles
from einc.tools.explain.verdicts import (
    Overall,
    Verdict,
    duration,
    index_text,
    number,
    overall,
    short_name,
    verdict,
)
from einc.tools.numerics.types import NumericsReport, PipelineStep

FULL_IR_BUDGET = 16 << 20
"""Characters of full-IR listings the page carries at most (beyond it, diffs only)."""
OPEN_ALL_UP_TO = 8
"""With at most this many changed steps, all are shown open; with more, only the first bad."""
FOLD_UNCHANGED = 2
"""Runs of at least this many unchanged steps fold into one line."""
_LOCATION = re.compile(r":(\d+)(?::(\d+))?$")
_OP_NAME = re.compile(r"\btransform\.[\w.]+")


def _asset(name: str) -> str:
    return files("einc.tools.explain").joinpath(name).read_text(encoding="utf-8")


def render_page(report: NumericsReport, context: PageContext | None = None) -> str:
    """The whole page as one HTML string."""
    context = context or PageContext()
    steps = report.steps
    befores, afters = _texts(steps)
    stats = [
        diff_stats(befores[i] or "", afters[i]) if s.changed and s.kind != "printer" else DiffStats(0, 0)
        for i, s in enumerate(steps)
    ]
    verdicts = [verdict(s.check) for s in steps]
    op_lines = schedule_lines(steps, context.schedule)
    head = overall(report)
    title = f"einc explain: {report.program} → {report.target}"
    body = "".join(
        [
            _nav(steps, verdicts),
            '<main id="main">',
            _summary(report, context, head, stats),
            _checks(steps, verdicts),
            _steps(steps, befores, afters, stats, verdicts, head, op_lines),
            _schedule(steps, context, stats, verdicts, op_lines),
            _source(steps, report.target, context.source),
            _times(steps),
            "</main>",
        ]
    )
    return (
        '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        f"<title>{escape(title)}</title><style>{_asset('page.css')}\n{highlight_styles()}</style></head>"
        f'<body class="{head.css}">{body}<script>{_asset("page.js")}</script></body></html>\n'
    )


def _texts(steps: list[PipelineStep]) -> tuple[list[str | None], list[str]]:
    """Each step's IR before and after it, as its diff shows them: the custom form (as
    einc-opt prints) where both sides have one, else the generic form, so a diff never sets
    one form against the other. The IR before a step is the previous step's (the printer's
    text excepted); None for the first step."""
    befores: list[str | None] = []
    afters: list[str] = []
    last: PipelineStep | None = None
    for step in steps:
        if step.kind == "printer":
            befores.append(None if last is None else last.ir_shown)
            afters.append(step.ir_after)
            continue
        custom = step.ir_custom is not None and (last is None or last.ir_custom is not None)
        befores.append(None if last is None else last.ir_custom if custom else last.ir_after)
        afters.append(step.ir_shown if custom else step.ir_after)
        last = step
    return befores, afters


def schedule_lines(steps: list[PipelineStep], schedule: str | None) -> dict[int, int]:
    """Position of each transform step -> its line in the schedule: from its location, else
    the next line (in order) holding the same op, as the interpreter applies them in order."""
    lines = (schedule or "").splitlines()
    found: dict[int, int] = {}
    after = 0  # lines already matched
    for position, step in enumerate(steps):
        if step.kind != "transform":
            continue
        located = _LOCATION.search(step.location or "")
        if located is not None:
            found[position] = int(located.group(1))
            after = max(after, found[position])
            continue
        op = _OP_NAME.search(step.name)
        for number_ in range(after, len(lines)):
            if op is not None and op.group(0) in _OP_NAME.findall(lines[number_]):
                found[position] = after = number_ + 1
                break
    return found


def _anchor(position: int) -> str:
    return f"step-{position}"


def _mark(v: Verdict) -> str:
    return f'<span class="mark {v.css}" title="{escape(v.why)}">{v.mark}</span>'


def _stage(stage: str) -> str:
    return f'<span class="stage" style="--stage:{stage_color(stage)}">{escape(stage)}</span>'


def _delta(stats: DiffStats) -> str:
    if not stats.changed:
        return ""
    return f'<span class="delta"><span class="plus">+{stats.added}</span> <span class="minus">−{stats.removed}</span></span>'


# ---- navigation ---------------------------------------------------------------------------------
def _nav(steps: list[PipelineStep], verdicts: list[Verdict]) -> str:
    items = []
    for i, (step, v) in enumerate(zip(steps, verdicts, strict=True)):
        cls = f"{v.css} {'changed' if step.changed else 'unchanged'}"
        items.append(
            f'<li class="{cls}" data-name="{escape(step.name.lower())}"><a href="#{_anchor(i)}">{_mark(v)}'
            f'<span class="num">#{step.index}</span> <span class="nm">{escape(short_name(step))}</span>'
            f"{_stage(step.stage)}</a></li>"
        )
    sections = "".join(
        f'<a href="#{key}">{label}</a>'
        for key, label in (("summary", "Summary"), ("checks", "Checks"), ("steps", "Steps"),
                           ("schedule", "Schedule"), ("source", "Source"), ("times", "Times"))
    )  # fmt: skip
    return (
        '<nav id="nav"><div class="brand">einc explain</div>'
        f'<div class="sections">{sections}</div>'
        '<div class="tools"><input id="filter" type="search" placeholder="filter steps" aria-label="filter steps">'
        '<label><input id="changed-only" type="checkbox"> changed only</label>'
        '<button id="expand" type="button">expand all</button><button id="collapse" type="button">collapse all</button>'
        '</div><p class="keys">keys: <kbd>j</kbd>/<kbd>k</kbd> next/previous changed step, <kbd>b</kbd> first bad step</p>'
        f'<ol id="steplist">{"".join(items)}</ol></nav>'
    )


# ---- summary ------------------------------------------------------------------------------------
def _summary(report: NumericsReport, context: PageContext, head: Overall, stats: list[DiffStats]) -> str:
    steps = report.steps
    changed = sum(1 for s in steps if s.changed)
    verdict_html = escape(head.headline)
    if head.first_bad is not None:
        step = steps[head.first_bad]
        why = verdict(step.check).why
        verdict_html = (
            f'<a href="#{_anchor(head.first_bad)}" id="first-bad">{verdict_html}</a>'
            f'<div class="why">{escape(why)}</div>'
        )
        if step.rewrite is not None:  # a pattern pass bisected by its rewrites (einc.tools.reduce.bisect)
            verdict_html += f'<div class="why">the first rewrite that changes them: {escape(step.rewrite)}</div>'
        if head.downstream:
            verdict_html += f'<div class="downstream">after it: {escape(head.downstream)}</div>'
    rows = [
        ("program", escape(report.program)),
        ("target", escape(report.target)),
        ("seed", str(report.seed)),
        ("shape scale", escape(number(report.shape_scale)) + (
            "" if report.shape_scale == 1.0 else " (the steps below are of the program with its shapes scaled by this)")),
        ("inputs", "<br>".join(escape(t) for t in context.inputs) or "–"),
        ("outputs", "<br>".join(escape(t) for t in context.outputs) or "–"),
        ("schedule", escape(context.schedule_origin) if context.schedule is not None else "none"),
        ("steps", f"{len(steps)} ({changed} changed the IR, "
                  f"+{sum(s.added for s in stats)} −{sum(s.removed for s in stats)} lines)"),
        ("time", escape(duration(sum(s.seconds for s in steps)))),
    ]  # fmt: skip
    notes = [str(n) for n in getattr(report, "notes", ())]  # NumericsReport.notes, where the walk gives them
    if notes:
        rows.append(("notes", "<br>".join(escape(n) for n in notes)))
    table = "".join(f"<tr><th>{k}</th><td>{v}</td></tr>" for k, v in rows)
    program = ""
    if context.program:
        program = (
            f'<details class="program"><summary>program text</summary><pre class="listing">'
            f"{escape(context.program)}</pre></details>"
        )
    return (
        f'<header id="summary" class="section"><h1>{escape(report.program)} <span class="arrow">→</span> '
        f'{escape(report.target)}</h1><div class="verdict {head.css}">{verdict_html}</div>'
        f'<table class="facts">{table}</table>{program}</header>'
    )


# ---- checks -------------------------------------------------------------------------------------
def _checks(steps: list[PipelineStep], verdicts: list[Verdict]) -> str:
    rows = []
    for i, (step, v) in enumerate(zip(steps, verdicts, strict=True)):
        check = step.check
        outputs = check.outputs if check is not None else ()
        worst_abs = max((o.max_abs for o in outputs), default=None)
        worst_rel = max((o.max_rel for o in outputs), default=None)
        first = next((o for o in outputs if o.first_bad_index is not None), None)
        where = "" if first is None else f"{escape(first.name)}{escape(index_text(first.first_bad_index or ()))}"
        detail = v.why
        rows.append(
            f'<tr class="{v.css}"><td class="num"><a href="#{_anchor(i)}">#{step.index}</a></td>'
            f"<td>{escape(step.name)}</td><td>{_stage(step.stage)}</td><td>{escape(v.level) or '–'}</td>"
            f'<td class="verdict-cell">{_mark(v)}</td>'
            f'<td class="num">{"–" if worst_abs is None else escape(number(worst_abs))}</td>'
            f'<td class="num">{"–" if worst_rel is None else escape(number(worst_rel))}</td>'
            f"<td>{where or '–'}</td><td class=\"why\">{escape(detail or v.why)}</td></tr>"
        )
    return (
        '<section id="checks" class="section"><h2>Numeric checks</h2>'
        "<p>Each step's module executed at its level on the same seeded inputs and compared with "
        "the float64 NumPy oracle, and with the step executed before it. ✔ within the dtype's tolerance; "
        "✘ differs, and this step changed the numbers (or crashed); ↳ differs, but with the numbers of "
        "the step before it, unchanged: it inherits an earlier step's error; – not executed.</p>"
        '<div class="scroll"><table class="checks"><thead><tr><th>step</th><th>name</th><th>stage</th>'
        "<th>level</th><th></th><th>max abs</th><th>max rel</th><th>first bad index</th><th>detail</th>"
        f'</tr></thead><tbody>{"".join(rows)}</tbody></table></div></section>'
    )


# ---- steps --------------------------------------------------------------------------------------
def _steps(
    steps: list[PipelineStep],
    befores: list[str | None],
    afters: list[str],
    stats: list[DiffStats],
    verdicts: list[Verdict],
    head: Overall,
    op_lines: dict[int, int],
) -> str:
    changed = sum(1 for s in steps if s.changed)
    budget = FULL_IR_BUDGET
    parts: list[str] = []
    run: list[str] = []  # a run of unchanged steps, folded when long

    def flush() -> None:
        if len(run) >= FOLD_UNCHANGED:
            parts.append(f'<details class="group"><summary>{len(run)} steps without change</summary>{"".join(run)}</details>')
        else:
            parts.extend(run)
        run.clear()

    for i, step in enumerate(steps):
        v = verdicts[i]
        if not step.changed and v.css != "bad":
            run.append(_unchanged(i, step, v, op_lines.get(i)))
            continue
        flush()
        full = ""
        if step.kind != "printer" and len(afters[i]) <= budget:
            budget -= len(afters[i])
            full = afters[i]
        opened = i == head.first_bad or (changed <= OPEN_ALL_UP_TO and step.kind != "printer")
        parts.append(_changed(i, step, befores[i], afters[i], stats[i], v, full, opened, op_lines.get(i)))
    flush()
    return (
        '<section id="steps" class="section"><h2>Steps</h2>'
        "<p>The IR after each step beside the IR before it, in the custom form each dialect prints "
        "(as <code>einc-opt</code> prints it): removed lines on the left (red), added on the "
        "right (green), the words that changed inside a line marked. Unchanged steps are folded.</p>" + "".join(parts) + "</section>"
    )


def _step_head(step: PipelineStep, v: Verdict, stats: DiffStats, line: int | None) -> str:
    where = ""
    if line is not None:
        where = f' <a class="loc" href="#sched-{line}">{escape(step.location or f"schedule line {line}")}</a>'
    elif step.location:
        where = f' <span class="loc">{escape(step.location)}</span>'
    return (
        f'{_mark(v)}<span class="num">#{step.index}</span> <code class="nm">{escape(step.name)}</code>'
        f' <span class="kind">{escape(step.kind)}</span>{_stage(step.stage)}{_delta(stats)}'
        f'<span class="time">{escape(duration(step.seconds))}</span>{where}'
    )


def _unchanged(i: int, step: PipelineStep, v: Verdict, line: int | None) -> str:
    return (
        f'<div class="step unchanged {v.css}" id="{_anchor(i)}" data-name="{escape(step.name.lower())}">'
        f'{_step_head(step, v, DiffStats(0, 0), line)}<span class="nochange">no change</span></div>'
    )


def _changed(
    i: int,
    step: PipelineStep,
    before: str | None,
    after: str,
    stats: DiffStats,
    v: Verdict,
    full: str,
    opened: bool,
    line: int | None,
) -> str:
    check = f'<div class="check {v.css}">{_mark(v)} {escape(v.level) + ": " if v.level else ""}{escape(v.why)}</div>'
    if step.kind == "printer":
        body = '<p>The printer wrote the target source: see <a href="#source">the final source</a>.</p>'
    elif not step.changed:
        body = "<p>The IR did not change.</p>"
    elif before is None:
        body = f'<pre class="listing">{escape(after)}</pre>'
        full = ""
    else:
        body = side_by_side(before, after) or "<p>Only whitespace, order or the generic form's details changed.</p>"
    listing = ""
    if full:
        lines = full.count("\n") + 1
        listing = f'<details class="full"><summary>the whole IR after this step ({lines} lines)</summary><pre class="listing">{escape(full)}</pre></details>'
    return (
        f'<details class="step changed {v.css}" id="{_anchor(i)}" data-name="{escape(step.name.lower())}"'
        f'{" open" if opened else ""}><summary>{_step_head(step, v, stats, line)}</summary>'
        f'<div class="body">{check}{body}{listing}</div></details>'
    )


# ---- schedule -----------------------------------------------------------------------------------
def _schedule(
    steps: list[PipelineStep],
    context: PageContext,
    stats: list[DiffStats],
    verdicts: list[Verdict],
    op_lines: dict[int, int],
) -> str:
    head = '<section id="schedule" class="section"><h2>Schedule</h2>'
    if context.schedule is None:
        return head + "<p>No schedule: the loops were left as the lowering wrote them.</p></section>"
    transforms = [i for i, s in enumerate(steps) if s.kind == "transform"]
    by_line: dict[int, list[int]] = {}
    for i, line in op_lines.items():
        by_line.setdefault(line, []).append(i)
    if transforms:
        rows = "".join(
            f'<tr class="{verdicts[i].css}"><td class="num"><a href="#{_anchor(i)}">#{steps[i].index}</a></td>'
            f"<td><code>{escape(steps[i].name)}</code></td><td>{_line_link(op_lines.get(i), steps[i].location)}</td>"
            f"<td>{_delta(stats[i]) or 'no change'}</td><td>{_mark(verdicts[i])}</td></tr>"
            for i in transforms
        )
        ops = (
            '<table class="ops"><thead><tr><th>step</th><th>transform op</th><th>location</th><th>effect</th>'
            f"<th></th></tr></thead><tbody>{rows}</tbody></table>"
        )
    else:
        applied = [i for i, s in enumerate(steps) if s.stage == "scheduled"]
        links = ", ".join(f'<a href="#{_anchor(i)}">#{steps[i].index} {escape(steps[i].name)}</a>' for i in applied)
        ops = f"<p>The schedule was applied as a whole in {links or 'no step'} (its ops are not separate steps here).</p>"
    lines = []
    for number_, text in enumerate(context.schedule.splitlines(), 1):
        marks = "".join(
            f'<a class="effect {verdicts[i].css}" href="#{_anchor(i)}">→ #{steps[i].index} {_delta(stats[i]) or "no change"}</a>'
            for i in by_line.get(number_, [])
        )
        cls = ' class="op"' if marks else ""
        lines.append(
            f'<tr id="sched-{number_}"{cls}><td class="ln">{number_}</td><td class="code">{escape(text)}</td>'
            f'<td class="effects">{marks}</td></tr>'
        )
    return (
        head + f"<p>From {escape(context.schedule_origin)}.</p>{ops}"
        f'<table class="script">{"".join(lines)}</table></section>'
    )


def _line_link(line: int | None, location: str | None) -> str:
    if line is None:
        return escape(location or "–")
    return f'<a href="#sched-{line}">{escape(location or f"line {line}")}</a>'


# ---- source and times ---------------------------------------------------------------------------
def _source(steps: list[PipelineStep], target: str, own: str | None) -> str:
    """The final source: the compilation's own (at the program's shapes) when given, else
    the printer step's."""
    printed = [s for s in steps if s.kind == "printer"]
    head = '<section id="source" class="section"><h2>Final source</h2>'
    if own is None and not printed:
        return head + "<p>No source: the pipeline stopped before the printer.</p></section>"
    text = own if own is not None else printed[-1].ir_after
    lines = text.count("\n") + (0 if text.endswith("\n") else 1)
    note = ""
    if own is not None and printed and printed[-1].ir_after != own:
        note = " At the program's own shapes, as <code>einc compile</code> writes it (the printer step above printed the checks' scaled program)."
    return head + f"<p>{lines} lines of {escape(target)}.{note}</p>{highlight_source(text, target)}</section>"


def _times(steps: list[PipelineStep]) -> str:
    return (
        '<section id="times" class="section"><h2>Times</h2><p>Wall time of each step (compilation only; '
        "the numeric checks' executions are not counted). Click a bar for its step.</p>"
        f'<div class="times-wrap">{stage_totals(steps)}<div class="scroll">{times_chart(steps)}</div></div></section>'
    )
