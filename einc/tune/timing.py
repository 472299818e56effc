"""What a measurement is and when it is noise: `Timing` (each repeat's time per run, and the
CPU time, wall time and run-queue wait the process got while timed), `NoiseLimits` (when a
timing is noisy and must be measured again, and when hopeless: not to be ranked) and
`MeasureSettings` (how the worker measures a job). Used by the runner (`einc.tune.measure`)
and its worker subprocess (`einc.tune.worker`)."""

from __future__ import annotations

import glob
import math
import os
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TypedDict

import numpy as np


@dataclass(frozen=True)
class Timing:
    """One measurement: each repeat's time per run, and what the process got while timed: CPU
    time of all its threads, wall time, and its threads' total run-queue wait (the time they
    were ready to run but another process had the core; None where the kernel does not say)."""

    times: tuple[float, ...]
    cpu_s: float
    wall_s: float
    wait_s: float | None = None
    others_s: float | None = None
    """CPU seconds other processes took while it was timed (`others_cpu`; None where unknown)."""

    @property
    def foreign_wait_s(self) -> float | None:
        """The run-queue wait that other processes' load can account for (`foreign_wait`)."""
        return None if self.wait_s is None else foreign_wait(self.wait_s, self.others_s)

    @property
    def median(self) -> float:
        return float(np.median(self.times)) if self.times else math.inf

    @property
    def spread(self) -> float:
        """(p75 - p25) / median of the repeats."""
        if len(self.times) < 2 or self.median <= 0:
            return 0.0
        p25, p75 = np.percentile(self.times, [25, 75])
        return float(p75 - p25) / self.median


@dataclass(frozen=True)
class NoiseLimits:
    """When a measurement is noisy, and when hopeless. The kernel's calling thread is busy
    all the time it is timed, so a process that got less CPU than `min_cpu` of the wall time,
    or whose threads waited on the run queue more than `max_wait` of it, shared its cores
    with foreign load; `max_spread` bounds (p75 - p25) / median of the repeats."""

    max_spread: float = 0.10
    min_cpu: float = 0.90
    max_wait: float = 0.05
    hopeless_spread: float = 0.50
    hopeless_cpu: float = 0.25

    @classmethod
    def from_env(cls) -> NoiseLimits:
        """The default limits; `EINC_NOISE_LIMITS=lenient` never gives up on a measurement
        (noisy ones are still re-measured and flagged in `extra`): for test suites on
        shared machines, where a hopeless measurement must not decide a test."""
        if os.environ.get("EINC_NOISE_LIMITS") == "lenient":
            return cls(hopeless_spread=float("inf"), hopeless_cpu=0.0)
        return cls()

    def noise(self, t: Timing) -> str:
        """Why `t` is noisy ("" when it is clean)."""
        reasons = []
        if t.spread > self.max_spread:
            reasons.append(f"repeats spread {t.spread:.0%} of the median")
        if t.wall_s > 0 and t.cpu_s < self.min_cpu * t.wall_s:
            reasons.append(f"the process ran {t.cpu_s / t.wall_s:.0%} of the wall time")
        wait = t.foreign_wait_s
        if wait is not None and t.wall_s > 0 and wait > self.max_wait * t.wall_s:
            reasons.append(f"its threads waited {wait / t.wall_s:.0%} of the wall time for a core")
        return "; ".join(reasons)

    def hopeless(self, t: Timing) -> bool:
        return t.spread > self.hopeless_spread or (t.wall_s > 0 and t.cpu_s < self.hopeless_cpu * t.wall_s)

    def retry(self, attempts: Sequence[Timing], max_retries: int) -> bool:
        """Whether to measure again after `attempts`."""
        return bool(self.noise(attempts[-1])) and len(attempts) <= max_retries

    def verdict(self, attempts: Sequence[Timing]) -> tuple[Timing, str, bool]:
        """The measurement kept (the clean one, else the fastest median), why it is noisy ("" when
        clean), and whether it is hopeless (Status.NOISY: not to be ranked)."""
        clean = [t for t in attempts if not self.noise(t)]
        best = min(clean or attempts, key=lambda t: (t.median, t.spread))
        return best, self.noise(best), self.hopeless(best)


class MeasureSettings(TypedDict):
    """How the worker measures a job (from the LocalRunner's fields)."""

    repeats: int
    min_repeat_s: float
    check: bool
    max_retries: int
    noise: NoiseLimits
    cutoff_s: float | None


def run_queue_wait() -> float | None:
    """Seconds the process's threads have waited on a run queue (`/proc/self/task/*/schedstat`,
    second field, ns); None where the kernel does not say."""
    total = 0
    found = False
    for path in glob.glob("/proc/self/task/*/schedstat"):
        try:
            with open(path) as f:
                total += int(f.read().split()[1])
                found = True
        except (OSError, ValueError, IndexError):
            continue  # a thread that ended meanwhile
    return total / 1e9 if found else None


BUSY_FIELDS = (0, 1, 2, 5, 6, 7)
"""The fields of /proc/stat's `cpu` line that are busy time: user, nice, system, irq, softirq,
steal (not idle and iowait; guest time is within user)."""


def system_busy() -> float | None:
    """Seconds all the machine's CPUs together have been busy (`/proc/stat`, `BUSY_FIELDS`,
    in clock ticks of 1 / `SC_CLK_TCK` s); None where the kernel does not say."""
    try:
        with open("/proc/stat") as f:
            fields = f.readline().split()
        if not fields or fields[0] != "cpu":
            return None
        ticks = [int(x) for x in fields[1:]]
        return sum(ticks[i] for i in BUSY_FIELDS if i < len(ticks)) / os.sysconf("SC_CLK_TCK")
    except (OSError, ValueError):
        return None


MIN_SPAN_S = 0.1
"""The shortest span whose busy time `others_cpu` trusts: ten clock ticks of 10 ms."""


def others_cpu(busy_s: float | None, own_cpu_s: float, span_s: float) -> float | None:
    """CPU seconds other processes took over a span of `span_s` wall seconds in which the
    machine's CPUs were busy `busy_s` seconds (`system_busy` after less before) and this
    process's threads ran `own_cpu_s` (`time.process_time`, every thread: a device runtime's
    worker threads included); None where `busy_s` is unknown or the span shorter than
    `MIN_SPAN_S` (the busy time is counted in clock ticks, each CPU's up to one off at either
    end). At least 0."""
    if busy_s is None or span_s < MIN_SPAN_S:
        return None
    return max(0.0, busy_s - own_cpu_s)


def foreign_wait(wait_s: float, others_s: float | None) -> float:
    """The part of a measurement's run-queue wait `wait_s` (its threads' total, every thread of
    the process) that other processes' load can account for: at most the CPU time `others_s`
    they took meanwhile. At any moment, the threads of ours that other processes keep from a
    core are at most the cores those processes hold: so this bounds the foreign wait from above,
    and what is left is the wait of our own threads for each other (a device runtime's thread
    pool, e.g. PoCL's, busy with the kernel while the calling thread also runs): a quiet
    machine with such a runtime is then seen as quiet. The whole wait where `others_s` is
    unknown."""
    return wait_s if others_s is None else max(0.0, min(wait_s, others_s))
