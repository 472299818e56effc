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
    """✔ (all outputs within tolerance), ✘ (this step changed the numbers: an output differs
    from the oracle and from the step before, or the step crashed), ↳ (wrong numbers
    inherited: those of the step before it, unchanged), – (not run)."""
    css: str
    """ok, bad, inherited, skip."""
    level: str
    why: str
    """One line: the worst output's error, the crash, or why the step was not executed."""


INHERITED = "↳"


def verdict(check: LevelRun | None) -> Verdict:
    if check is None:
        return Verdict("–", "skip", "", "not executed: no numeric check was collected for this step")
    if not check.ran:
        return Verdict("–", "skip", check.level, f"not executed: {check.reason or 'no reason given'}")
    if check.crashed:
        return Verdict("✘", "bad", check.level, f"crashed: {check.reason or 'no message'}")
    bad = [o for o in check.outputs if not o.ok]
    if bad and check.inherited:
        source = "its numbers" if check.previous_step == check.inherits_from else f"the numbers of #{check.previous_step} before it"
        return Verdict(
            INHERITED, "inherited", check.level,
            f"inherits the error of #{check.inherits_from}: {source}, unchanged (no difference of its own); "
            + "; ".join(describe_output(o) for o in bad),
        )  # fmt: skip
    if bad:
        why = "; ".join(describe_output(o) for o in bad)
        moved = [o for o in check.against_previous if not o.ok]
        if check.previous_step is not None and moved:
            why += f"; its numbers differ from those of #{check.previous_step} before it too: this step changed them"
        return Verdict("✘", "bad", check.level, why)
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
    downstream: str = ""
    """What the steps after the first bad one did: how many inherit its error, which
    changed the numbers again ("" when none ran)."""


def overall(report: NumericsReport) -> Overall:
    """The page's headline: the first step whose numbers differ, all agree, or nothing ran."""
    steps = report.steps
    bad = report.first_bad if report.first_bad is not None else first_failing(steps)
    if bad is not None and 0 <= bad < len(steps):
        step = steps[bad]
        return Overall("bad", f"✘ first bad step: #{step.index} {step.name}", bad, downstream(steps[bad + 1 :]))
    if bad is not None:  # an index outside the steps: still a failure
        return Overall("bad", f"✘ a step differs from the oracle (step {bad})", None)
    ran = [s for s in steps if s.check is not None and s.check.ran]
    if not ran:
        return Overall("skip", "– no step was executed: numbers not checked", None)
    return Overall("ok", f"✔ all {len(ran)} executed steps agree with the oracle", None)


def first_failing(steps: list[PipelineStep]) -> int | None:
    """The position of the first step whose check is ✘ (for reports without first_bad)."""
    return next((i for i, s in enumerate(steps) if verdict(s.check).css == "bad"), None)


def downstream(later: list[PipelineStep]) -> str:
    """The steps after the first bad one, in words: those that only carry an error on (↳),
    those that fail on their own (✘)."""
    verdicts = [(s, verdict(s.check)) for s in later]
    inherited = [s for s, v in verdicts if v.css == "inherited"]
    again = [s for s, v in verdicts if v.css == "bad"]
    parts = []
    if again:
        parts.append(", ".join(f"#{s.index} {short_name(s)}" for s in again)
                     + f" {'fails' if len(again) == 1 else 'fail'} on {'its' if len(again) == 1 else 'their'} own "
                     "(✘: the numbers changed again, or a crash)")  # fmt: skip
    if inherited:
        n = len(inherited)
        parts.append(f"{n} later executed step{'s' if n > 1 else ''} only {'carry' if n > 1 else 'carries'} "
                     f"the error on ({INHERITED}: the numbers of the step before, unchanged)")  # fmt: skip
    return "; ".join(parts)
