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
from typing import Any, TypeVar

T = TypeVar("T")


def locked_cache(fn: Callable[..., T]) -> Callable[..., T]:
    """`fn` memoised on its positional arguments, computed once per key across threads."""
    results: dict[tuple[Hashable, ...], T] = {}
    locks: dict[tuple[Hashable, ...], threading.RLock] = {}
    guard = threading.Lock()

    @functools.wraps(fn)
    def cached(*args: Any) -> T:
        if args in results:
            return results[args]
        with guard:
            lock = locks.setdefault(args, threading.RLock())
        with lock:
            if args not in results:
                results[args] = fn(*args)
            return results[args]

    def cache_clear() -> None:
        with guard:
            results.clear()
            locks.clear()

    cached.cache_clear = cache_clear  # type: ignore[attr-defined]
    return cached
