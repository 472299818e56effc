"""Testing reducer candidates: each in a forked child process (a candidate that hangs, or
crashes the interpreter, costs its child only), `jobs` at a time, within a time budget.

    tester = Tester(still_fails, jobs=2, budget=Budget(60.0))
    index = tester.first([candidate_a, candidate_b, ...])   # the first that is interesting

`first` is deterministic: it answers the lowest index whose candidate is interesting, whatever
order the children finish in (the others are stopped once it is known).
"""

from __future__ import annotations

import os
import select
import signal
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from einc.tools.reduce.reproducer import Reproducer


@dataclass
class Budget:
    """A time budget on `clock` (wall time by default; a benchmark may count CPU time)."""

    seconds: float
    clock: Callable[[], float] = time.perf_counter
    started: float = field(default=-1.0)

    def __post_init__(self) -> None:
        if self.started < 0:
            self.started = self.clock()

    def spent(self) -> float:
        return self.clock() - self.started

    def left(self) -> float:
        return self.seconds - self.spent()

    @property
    def expired(self) -> bool:
        return self.left() <= 0


def cpu_clock() -> float:
    """This process's CPU time and its finished children's (the forked tests)."""
    own = os.times()
    return own.user + own.system + own.children_user + own.children_system


def default_jobs() -> int:
    """The cores this process may use, at most 4."""
    try:
        cores = len(os.sched_getaffinity(0))
    except AttributeError:  # pragma: no cover - not Linux
        cores = os.cpu_count() or 1
    return max(1, min(4, cores))


@dataclass
class _Child:
    pid: int
    fd: int
    started: float


class Tester:
    """Runs `test(candidate)` in children (see the module's doc); `timeout` bounds one test."""

    def __init__(self, test: Callable[[Reproducer], bool], jobs: int, budget: Budget, timeout: float = 60.0):
        self.test = test
        self.jobs = max(1, jobs)
        self.budget = budget
        self.timeout = timeout
        self.tests = 0
        self.cache: dict[str, bool] = {}

    def first(self, candidates: Sequence[Reproducer]) -> int | None:
        """The lowest index of an interesting candidate, or None (none is, or the budget ran out)."""
        keys = [c.render() for c in candidates]
        results: list[bool | None] = [self.cache.get(k) for k in keys]
        running: dict[int, _Child] = {}
        following = 0
        try:
            while True:
                answer = _decided(results)
                if answer is not False:
                    return answer if isinstance(answer, int) and not isinstance(answer, bool) else None
                while len(running) < self.jobs and following < len(candidates) and not self.budget.expired:
                    if results[following] is None:
                        running[following] = self._start(candidates[following])
                    following += 1
                if not running:
                    if following >= len(candidates) or self.budget.expired:
                        answer = _decided(results)
                        return None if answer is False else answer
                    continue
                self._collect(running, results, keys)
        finally:
            for child in running.values():
                _stop(child)

    def _start(self, candidate: Reproducer) -> _Child:
        read, write = os.pipe()
        pid = os.fork()
        if pid == 0:  # the child: test, answer one byte, leave without cleanup
            ok = False
            try:
                os.close(read)
                devnull = os.open(os.devnull, os.O_WRONLY)
                os.dup2(devnull, 1)
                os.dup2(devnull, 2)
                ok = bool(self.test(candidate))
            except BaseException:  # noqa: BLE001 - any failure of the test: not interesting
                ok = False
            finally:
                try:
                    os.write(write, b"1" if ok else b"0")
                finally:
                    os._exit(0)
        os.close(write)
        self.tests += 1
        return _Child(pid, read, time.perf_counter())

    def _collect(self, running: dict[int, _Child], results: list[bool | None], keys: list[str]) -> None:
        fds = {child.fd: index for index, child in running.items()}
        wait = max(0.01, min(0.2, self.budget.left()))
        ready, _, _ = select.select(list(fds), [], [], wait)
        for fd in ready:
            index = fds[fd]
            child = running.pop(index)
            answer = os.read(fd, 1)
            os.close(fd)
            os.waitpid(child.pid, 0)
            results[index] = answer == b"1"
            self.cache[keys[index]] = results[index] is True
        now = time.perf_counter()
        for index, child in list(running.items()):
            if now - child.started > self.timeout or self.budget.expired:
                _stop(running.pop(index))
                results[index] = False
                if not self.budget.expired:
                    self.cache[keys[index]] = False


def _stop(child: _Child) -> None:
    try:
        os.kill(child.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    try:
        os.waitpid(child.pid, 0)
    except ChildProcessError:
        pass
    try:
        os.close(child.fd)
    except OSError:
        pass


def _decided(results: Sequence[bool | None]) -> int | None | bool:
    """The first interesting index once every earlier one is known not to be; None when all
    are known and none is; False while undecided."""
    for index, result in enumerate(results):
        if result is None:
            return False
        if result:
            return index
    return None
