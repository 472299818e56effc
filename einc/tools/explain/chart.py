"""Per-step times as an inline SVG bar chart (no script, no external file)."""

from __future__ import annotations

from html import escape

from einc.tools.explain.verdicts import duration, short_name
from einc.tools.numerics.types import PipelineStep

STAGE_COLORS = {
    "ein": "#6f42c1",
    "loops": "#0969da",
    "scheduled": "#bf8700",
    "target": "#1a7f37",
    "source": "#cf222e",
}
ROW = 18
LABEL = 300
BAR = 420
VALUE = 90
LABEL_CHARS = 42


def stage_color(stage: str) -> str:
    return STAGE_COLORS.get(stage, "#57606a")


def times_chart(steps: list[PipelineStep]) -> str:
    """One bar per step (pipeline order), coloured by stage, the bar's length its share of the
    slowest step; each row links to its step."""
    if not steps:
        return "<p>No steps.</p>"
    slowest = max(s.seconds for s in steps) or 1.0
    width = LABEL + BAR + VALUE
    height = ROW * len(steps) + 4
    rows = []
    for position, step in enumerate(steps):
        y = ROW * position + 2
        label = f"#{step.index} {short_name(step)}"
        short = label if len(label) <= LABEL_CHARS else label[: LABEL_CHARS - 1] + "…"
        length = max(1.0, BAR * step.seconds / slowest)
        tip = f"{label} ({step.stage}, {step.kind}): {duration(step.seconds)}"
        rows.append(
            f'<a href="#step-{position}"><g class="bar-row"><title>{escape(tip)}</title>'
            f'<text x="{LABEL - 6}" y="{y + 13}" text-anchor="end">{escape(short)}</text>'
            f'<rect x="{LABEL}" y="{y + 2}" width="{length:.1f}" height="{ROW - 4}" '
            f'fill="{stage_color(step.stage)}"/>'
            f'<text x="{LABEL + length + 4:.1f}" y="{y + 13}">{escape(duration(step.seconds))}</text></g></a>'
        )
    return (
        f'<svg class="times" xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
        f'viewBox="0 0 {width} {height}" role="img" aria-label="time of each step">' + "".join(rows) + "</svg>"
    )


def stage_totals(steps: list[PipelineStep]) -> str:
    """A small table: each stage's steps and total time."""
    totals: dict[str, tuple[int, float]] = {}
    for step in steps:
        count, seconds = totals.get(step.stage, (0, 0.0))
        totals[step.stage] = (count + 1, seconds + step.seconds)
    rows = "".join(
        f'<tr><td><span class="swatch" style="background:{stage_color(stage)}"></span>{escape(stage)}</td>'
        f'<td class="num">{count}</td><td class="num">{escape(duration(seconds))}</td></tr>'
        for stage, (count, seconds) in totals.items()
    )
    total = sum(s.seconds for s in steps)
    return (
        '<table class="totals"><thead><tr><th>stage</th><th>steps</th><th>time</th></tr></thead>'
        f"<tbody>{rows}</tbody><tfoot><tr><td>all</td><td class=\"num\">{len(steps)}</td>"
        f'<td class="num">{escape(duration(total))}</td></tr></tfoot></table>'
    )
