"""Timing helpers shared by the benchmarks: medians over repeats, CPU-time sanity filter."""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass


@dataclass(frozen=True)
class Timing:
    median_s: float
    runs: int
    discarded: int
    best_s: float = 0.0  # the fastest sample: on a loaded machine, the one least disturbed


def measure(fn: Callable[[], object], repeat: int = 7, min_time: float = 0.05) -> Timing:
    """Median wall time of `fn`, after one warm-up call.

    Each sample loops `fn` until it has run `min_time` seconds. A sample whose process CPU time
    is far below its wall time (another process took the core) is discarded, as long as at
    least three samples remain.
    """
    fn()
    once = time.perf_counter()
    fn()
    once = time.perf_counter() - once
    inner = max(1, int(min_time / max(once, 1e-9)))
    samples: list[tuple[float, float]] = []
    for _ in range(repeat):
        wall0, cpu0 = time.perf_counter(), time.process_time()
        for _ in range(inner):
            fn()
        wall, cpu = time.perf_counter() - wall0, time.process_time() - cpu0
        samples.append((wall / inner, cpu / max(wall, 1e-12)))
    # Multithreaded code uses more CPU than wall time; only drop samples well below one core.
    kept = [w for w, ratio in samples if ratio > 0.6]
    if len(kept) < 3:
        kept = [w for w, _ in samples]
    return Timing(statistics.median(kept), len(kept), len(samples) - len(kept), min(w for w, _ in samples))


def compile_default(source: str, input_dict: dict | None, filename: str = "<string>"):  # -> Kernel
    """`einc.compile` with the target's default schedule, never a tuning record (einc.compile
    picks records up where the tuner's records exist: `use_records=False` opts out)."""
    import inspect

    import einc

    no_records = {"use_records": False} if "use_records" in inspect.signature(einc.compile).parameters else {}
    return einc.compile(source, input_dict, filename=filename, **no_records)


def table(rows: list[list[str]], header: list[str]) -> str:
    """A GitHub-flavoured Markdown table."""
    widths = [max(len(r[i]) for r in [header, *rows]) for i in range(len(header))]

    def line(cells: list[str]) -> str:
        return "| " + " | ".join(c.ljust(w) for c, w in zip(cells, widths)) + " |"

    sep = "|" + "|".join("-" * (w + 2) for w in widths) + "|"
    return "\n".join([line(header), sep, *(line(r) for r in rows)])
