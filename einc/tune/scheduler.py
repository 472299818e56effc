"""Which task of a whole program gets the next round of trials: Ansor's gradient task
scheduler (Zheng et al., OSDI 2020, section 6), written for einc's tasks.

The program's time is f = sum_i w_i g_i, with g_i the best time found so far for task i (w_i
kernels of the program are task i) after t_i rounds. The next round goes to the task whose
round is expected to lower f the most, the most negative

    df/dt_i ~ w_i * (alpha * backward_i + (1 - alpha) * forward_i)

    backward_i = (g_i(t_i) - g_i(t_i - window)) / window      how fast it improved lately
                                                               (0 before `window` rounds)
    forward_i  = min(-g_i(t_i) / t_i,                          as much again as so far
                     beta * C_i / max_k V_k - g_i(t_i))        the speed of the fastest
                                                               similar task k (V_k = C_k / g_k,
                                                               C the task's operations)

The second forward term counts only where a similar task (same `kind`) other than i exists.
A task no longer searchable (its space exhausted, or nothing measured right in `GIVE_UP`
rounds) is left out; one with nothing measured right yet has gradient 0 (nothing known). Every
task first has one round (the warm-up, its default schedule). Ties go to the lower index: the
allocation is deterministic.

    s = GradientScheduler([TaskState(weight=3, flops=2e7, kind="matmul"), ...])
    s.observe(0, best_s=1.2e-3, trials=1)   # a round of task 0 ended; its best so far
    s.next_task()                           # the task of the next round, or None when none is left
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field

ALPHA = 0.2
BETA = 2.0
WINDOW = 3
"""Ansor's published settings: the weight of the backward gradient, the optimism of the
similar-task bound, and the window of the backward gradient (rounds)."""
GIVE_UP = 3
"""Rounds after which a task none of whose trials measured right gets no more."""


@dataclass
class TaskState:
    """What the scheduler knows of one task."""

    weight: int = 1
    """How many kernels of the program the task is (identical tasks are tuned once)."""
    flops: float = 1.0
    """Operations of one run (for the speed of similar tasks)."""
    kind: str = ""
    """Tasks of the same kind are similar (their speeds bound each other's)."""
    history: list[float] = field(default_factory=list[float])
    """The best time (seconds) after each of its rounds (inf while none measured right)."""
    trials: int = 0
    done: bool = False
    """No round is given to it any more (space exhausted, or nothing measured right)."""

    @property
    def rounds(self) -> int:
        return len(self.history)

    @property
    def best(self) -> float:
        return self.history[-1] if self.history else math.inf


class GradientScheduler:
    def __init__(self, tasks: Sequence[TaskState], alpha: float = ALPHA, beta: float = BETA, window: int = WINDOW):
        self.tasks = list(tasks)
        self.alpha, self.beta, self.window = alpha, beta, max(window, 1)

    def observe(self, index: int, best_s: float, trials: int, exhausted: bool = False) -> None:
        """A round of task `index` ended: `trials` measured, its best time so far `best_s`
        (inf when none measured right); `exhausted`: its search has nothing left to try."""
        task = self.tasks[index]
        task.history.append(min(best_s, task.best))
        task.trials += trials
        if exhausted or (task.rounds >= GIVE_UP and not math.isfinite(task.best)):
            task.done = True

    def gradient(self, index: int) -> float:
        """The expected change of the program's time (seconds, weighted) per round of task
        `index` (negative: faster)."""
        task = self.tasks[index]
        g, t = task.best, task.rounds
        if t == 0 or not math.isfinite(g):  # nothing known (no round, or none measured right yet)
            return 0.0
        w = self.window
        backward = (task.history[-1] - task.history[-1 - w]) / w if t > w else 0.0
        forward = -g / t
        speeds = [k.flops / k.best for j, k in enumerate(self.tasks)
                  if j != index and k.kind == task.kind and math.isfinite(k.best) and k.best > 0]  # fmt: skip
        if speeds:
            forward = min(forward, self.beta * task.flops / max(speeds) - g)
        return task.weight * (self.alpha * backward + (1 - self.alpha) * forward)

    def next_task(self) -> int | None:
        """The task of the next round: one without a round yet (the warm-up, in order), else
        the live task of the most negative gradient; None when every task is done."""
        for i, task in enumerate(self.tasks):
            if task.rounds == 0 and not task.done:
                return i
        live = [i for i, task in enumerate(self.tasks) if not task.done]
        if not live:
            return None
        return min(live, key=lambda i: (self.gradient(i), i))

    def share(self, index: int) -> float:
        """Task `index`'s share of the program's time (its weighted best over the total)."""
        total = sum(t.weight * t.best for t in self.tasks if math.isfinite(t.best))
        task = self.tasks[index]
        return task.weight * task.best / total if total > 0 and math.isfinite(task.best) else 0.0
