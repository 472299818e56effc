"""The convergence plot of `einc tune --report`: the fastest trial so far against trials and
against seconds, one line per search policy (matplotlib, written as PNG/SVG/PDF), and the
decision the summary reports: the default schedule and the best as the final rounds measured
them (the search's trials were measured once each, so the curve may end above or below them)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from einc.tune.workload import throughput

if TYPE_CHECKING:
    from einc.tune.tuner import TuneResult


@dataclass(frozen=True)
class Marks:
    """The horizontal lines of the plot, in its unit: the default schedule and the best, as the
    decision measured them (the summary's figures); None where there is none."""

    unit: str
    default: float | None
    best: float | None
    best_label: str


def marks(result: TuneResult) -> Marks:
    """What the plot draws of `result`'s decision (the same measurements as its summary)."""
    unit = throughput(result.task, 1.0)[1]
    default = throughput(result.task, result.default.median_s)[0] if result.default is not None and result.default.ok else None
    best = throughput(result.task, result.best.median_s)[0] if result.best is not None and result.best.ok else None
    label = "best: none decided" if result.decision is None else f"best: {result.best_line()}"
    return Marks(unit, default, best if result.decision is not None else None, label)


def plot_convergence(results: Mapping[str, TuneResult], path: str | Path, title: str = "") -> Path:
    """Plot `results` (the first is the one whose decision was recorded) to `path`."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (by_trial, by_time) = plt.subplots(1, 2, figsize=(11, 4), sharey=True)
    first = next(iter(results.values()))
    decided = marks(first)
    for name, result in results.items():
        curve = [(i + 1, s, b) for i, s, b in result.best_so_far() if b != float("inf")]
        if not curve:
            continue
        ys = [throughput(result.task, b)[0] for _, _, b in curve]
        by_trial.step([c[0] for c in curve], ys, where="post", label=f"{name}: fastest trial so far")
        by_time.step([c[1] for c in curve], ys, where="post", label=f"{name}: fastest trial so far")
    for ax in (by_trial, by_time):
        if decided.default is not None:
            ax.axhline(decided.default, color="grey", linestyle=":", label="default schedule (final rounds)")
        if decided.best is not None:
            ax.axhline(decided.best, color="black", linestyle="--", label=decided.best_label)
    by_trial.set_xlabel("trials")
    by_time.set_xlabel("seconds of tuning")
    by_trial.set_ylabel(f"speed ({decided.unit})")
    for ax in (by_trial, by_time):
        ax.grid(True, alpha=0.3)
        ax.legend(loc="lower right", fontsize="small")
    fig.suptitle(title or "einc tune: fastest trial so far, and the decision")
    fig.tight_layout()
    out = Path(path)
    fig.savefig(out, dpi=110)
    plt.close(fig)
    return out
