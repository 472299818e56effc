"""Thread-safe memoisation for the runtimes' one-time set-up (devices, contexts, programs).

`functools.cache` lets two threads that miss at the same time both run the function: two
OpenCL contexts or two wgpu devices are made, one is kept, and objects built on the other
are then used with it (OpenCL answers INVALID_CONTEXT). `locked_cache` runs the function
once per key: the first caller computes while later callers of that key wait for it
(callers of other keys go on); a raised error is not remembered, so the next call tries
again, as with `functools.cache`.
"""

from __future__ import annotations

import functools
import threading
from collections.abc import Callable, Hashable
from typing import Generic, TypeVar

T = TypeVar("T")


class LockedCache(Generic[T]):
    """A function memoised by `locked_cache`; `cache_clear()` forgets every result."""

    def __init__(self, fn: Callable[..., T]):
        self._fn = fn
        self._results: dict[tuple[Hashable, ...], T] = {}
        self._locks: dict[tuple[Hashable, ...], threading.RLock] = {}
        self._guard = threading.Lock()
        functools.update_wrapper(self, fn)

    def __call__(self, *args: Hashable) -> T:
        if args in self._results:
            return self._results[args]
        with self._guard:
            lock = self._locks.setdefault(args, threading.RLock())
        with lock:
            if args not in self._results:
                self._results[args] = self._fn(*args)
            return self._results[args]

    def cache_clear(self) -> None:
        with self._guard:
            self._results.clear()
            self._locks.clear()


def locked_cache(fn: Callable[..., T]) -> LockedCache[T]:
    """`fn` memoised on its positional arguments, computed once per key across threads."""
    return LockedCache(fn)
