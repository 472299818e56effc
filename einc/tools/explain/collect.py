"""What the page shows, gathered from a Compilation: the pipeline's steps (a NumericsReport)
and the context around them (shapes, the schedule text, the program).

`collect` is the one place that decides how the steps are obtained:
`einc.tools.numerics.check_compilation` (one step per pass and per transform op, each checked).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from einc.schedule.choice import Kind
from einc.compiler.driver import Compilation
from einc.tools.numerics.types import NumericsReport

if TYPE_CHECKING:
    from einc.frontend import TensorInfo


def collect(comp: Compilation, seed: int = 0, shape_scale: float | None = None) -> NumericsReport:
    """The steps of `comp`'s pipeline, each with its IR, time and (where executed) check:
    `--check-numerics`' walk (einc.tools.numerics)."""
    from einc.tools.numerics import check_compilation

    return check_compilation(comp, seed=seed, shape_scale=shape_scale)


@dataclass(frozen=True)
class PageContext:
    """What the page shows beside the steps."""

    program: str = ""
    """The program's text."""
    inputs: tuple[str, ...] = ()
    """`name: dtype[shape]` of each input, as declared."""
    outputs: tuple[str, ...] = ()
    schedule: str | None = None
    """The schedule script applied, None when the loops were left as they are."""
    schedule_origin: str = ""
    """Where the schedule came from: its file, the target's default, a tuning record."""
    source: str | None = None
    """The target source at the program's own shapes (what `einc compile` writes); None: the
    printer step's text is shown."""


def page_context(comp: Compilation, schedule_path: str | None = None) -> PageContext:
    """The context of a compilation (run to its source here if it was not)."""
    comp.run_until("scheduled")

    def describe(t: TensorInfo) -> str:
        return f"{t.name}: {t.dtype}[{', '.join(str(d) for d in t.shape)}]"

    if comp.record is not None:
        origin = f"tuning record {comp.record.id} ({comp.record_db})"
    elif comp.choice.kind is Kind.GIVEN:
        origin = str(schedule_path) if schedule_path is not None else comp.choice.filename
    else:
        origin = f"the default schedule of the {comp.target} target"
    return PageContext(
        program=comp.source,
        inputs=tuple(describe(t) for t in comp.program.inputs),
        outputs=tuple(describe(t) for t in comp.program.outputs),
        schedule=comp.schedule_text,
        schedule_origin=origin if comp.schedule_text is not None else "",
        source=comp.source_text(),
    )
