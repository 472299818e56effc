"""The convergence plot of `einc tune --report`: best-so-far throughput against trials and
against seconds, one line per search policy (matplotlib, written as PNG/SVG/PDF)."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING

from einc.tune.workload import throughput

if TYPE_CHECKING:
    from einc.tune.tuner import TuneResult


def plot_convergence(results: Mapping[str, TuneResult], path: str | Path, title: str = "") -> Path:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (by_trial, by_time) = plt.subplots(1, 2, figsize=(11, 4), sharey=True)
    unit = "GFLOP/s"
    for name, result in results.items():
        curve = [(i + 1, s, b) for i, s, b in result.best_so_far() if b != float("inf")]
        if not curve:
            continue
        speeds = [throughput(result.task, b) for _, _, b in curve]
        unit = speeds[0][1]
        ys = [v for v, _ in speeds]
        by_trial.step([c[0] for c in curve], ys, where="post", label=name)
        by_time.step([c[1] for c in curve], ys, where="post", label=name)
        if result.default is not None and result.default.ok:
            by_trial.axhline(throughput(result.task, result.default.median_s)[0], color="grey",
                             linestyle=":", label="default schedule" if name == next(iter(results)) else None)  # fmt: skip
    by_trial.set_xlabel("trials")
    by_time.set_xlabel("seconds of tuning")
    by_trial.set_ylabel(f"best so far ({unit})")
    for ax in (by_trial, by_time):
        ax.grid(True, alpha=0.3)
        ax.legend(loc="lower right")
    fig.suptitle(title or "einc tune: best-so-far")
    fig.tight_layout()
    out = Path(path)
    fig.savefig(out, dpi=110)
    plt.close(fig)
    return out
