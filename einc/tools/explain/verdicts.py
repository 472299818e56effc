"""How a step's numeric check reads on the page: a mark (✔ ✘ –), a class, and words."""

from __future__ import annotations

import re
from dataclasses import dataclass

from einc.tools.numerics.types import LevelRun, NumericsReport, OutputCheck, PipelineStep


_RESULTS = re.compile(r"^\s*%[\w.$-]+(?:\s*,\s*%[\w.$-]+)*\s*=\s*")


def short_name(step: PipelineStep) -> str:
    """The step's name without a transform op's results and dialect (`%0, %1 =
    transform.einc.tile %2 by 8` -> `tile %2 by 8`), for narrow places."""
    if step.kind != "transform":
        return step.name
    return re.sub(r"^transform\.(einc\.)?", "", _RESULTS.sub("", step.name))


@dataclass(frozen=True)
class Verdict:
    mark: str
    """✔ (all outputs within tolerance), ✘ (an output differs, or the step crashed), – (not run)."""
    css: str
    """ok, bad, skip."""
    level: str
    why: str
    """One line: the worst output's error, the crash, or why the step was not executed."""


def verdict(check: LevelRun | None) -> Verdict:
    if check is None:
        return Verdict("–", "skip", "", "not executed: no numeric check was collected for this step")
    if not check.ran:
        return Verdict("–", "skip", check.level, f"not executed: {check.reason or 'no reason given'}")
    if check.crashed:
        return Verdict("✘", "bad", check.level, f"crashed: {check.reason or 'no message'}")
    bad = [o for o in check.outputs if not o.ok]
    if bad:
        return Verdict("✘", "bad", check.level, "; ".join(describe_output(o) for o in bad))
    if not check.outputs:
        return Verdict("✔", "ok", check.level, "ran (no outputs compared)")
    worst = max(check.outputs, key=lambda o: o.max_rel)
    return Verdict("✔", "ok", check.level, f"agrees with the oracle (max rel {number(worst.max_rel)})")


def describe_output(o: OutputCheck) -> str:
    text = f"{o.name}: max abs {number(o.max_abs)}, max rel {number(o.max_rel)} (tolerance {number(o.tolerance)})"
    if o.first_bad_index is not None:
        text += f", first bad index {index_text(o.first_bad_index)}"
        if o.got is not None and o.want is not None:
            text += f": got {number(o.got)}, want {number(o.want)}"
    return text


def index_text(index: tuple[int, ...]) -> str:
    return "[" + ", ".join(str(i) for i in index) + "]"


def number(x: float) -> str:
    """A short, exact-enough rendering: 0, 3.2e-07, 1.5, nan, inf."""
    if x == 0:
        return "0"
    if x != x or x in (float("inf"), float("-inf")):
        return str(x)
    return f"{x:.3g}" if 1e-3 <= abs(x) < 1e4 else f"{x:.2e}"


def duration(seconds: float) -> str:
    if seconds >= 1:
        return f"{seconds:.2f} s"
    if seconds >= 1e-3:
        return f"{seconds * 1e3:.1f} ms"
    return f"{seconds * 1e6:.0f} µs"


@dataclass(frozen=True)
class Overall:
    css: str
    headline: str
    first_bad: int | None


def overall(report: NumericsReport) -> Overall:
    """The page's headline: the first step whose numbers differ, all agree, or nothing ran."""
    steps = report.steps
    bad = report.first_bad if report.first_bad is not None else first_failing(steps)
    if bad is not None and 0 <= bad < len(steps):
        step = steps[bad]
        return Overall("bad", f"✘ first bad step: #{step.index} {step.name}", bad)
    if bad is not None:  # an index outside the steps: still a failure
        return Overall("bad", f"✘ a step differs from the oracle (step {bad})", None)
    ran = [s for s in steps if s.check is not None and s.check.ran]
    if not ran:
        return Overall("skip", "– no step was executed: numbers not checked", None)
    return Overall("ok", f"✔ all {len(ran)} executed steps agree with the oracle", None)


def first_failing(steps: list[PipelineStep]) -> int | None:
    """The position of the first step whose check is ✘ (for reports without first_bad)."""
    return next((i for i, s in enumerate(steps) if verdict(s.check).css == "bad"), None)
