"""`einc explain FILE -t T [--schedule S] [--seed N] [--shape-scale S] -o PAGE.html`."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from einc.compiler.driver import Compilation, read_program
from einc.schedule.choice import ScheduleChoice
from einc.tools.jobs import say_record
from einc.tools.explain.collect import collect, page_context
from einc.tools.explain.page import render_page
from einc.tools.explain.verdicts import overall
from einc.tools.numerics.types import NumericsReport


@dataclass(frozen=True)
class ExplainResult:
    report: NumericsReport
    html: str

    @property
    def ok(self) -> bool:
        return overall(self.report).css != "bad"

    def summary(self, output: str) -> str:
        """One line for the terminal: where the page is, how many steps, the verdict."""
        changed = sum(1 for s in self.report.steps if s.changed)
        return (
            f"einc: wrote {output}: {len(self.report.steps)} steps ({changed} changed the IR); "
            f"{overall(self.report).headline}"
        )


def explain_file_command(
    path: str,
    target: str = "c",
    schedule: str | None = None,
    seed: int = 0,
    shape_scale: float | None = None,
    use_records: bool = True,
    db: str | None = None,
    extra_passes: Mapping[str, Sequence[str]] | None = None,
) -> ExplainResult:
    """Compile `path` step by step and build the page (the caller writes it)."""
    comp = Compilation(read_program(path), path, target=target, schedule=ScheduleChoice.read(schedule),
                       use_records=use_records, db=db, extra_passes=dict(extra_passes or {}))  # fmt: skip
    report = collect(comp, seed=seed, shape_scale=shape_scale)
    say_record(comp)
    html = render_page(report, page_context(comp, schedule))
    return ExplainResult(report, html)


def write_page(html: str, output: str) -> None:
    Path(output).write_text(html, encoding="utf-8")
