"""Running a compiled kernel in a forked child, so that generated code that crashes (a bad
access, a miscompiled guard) fails one test instead of killing the whole test run."""

from __future__ import annotations

import multiprocessing
import pickle
from collections.abc import Callable
from typing import Any


class KernelCrashed(AssertionError):
    """The child process died (a signal or an exit) without returning a result."""


def run_isolated(fn: Callable[..., Any], *args: Any, timeout: float = 120.0) -> Any:
    """`fn(*args)` in a forked child: its result, or its exception re-raised here."""
    ctx = multiprocessing.get_context("fork")
    receiver, sender = ctx.Pipe(duplex=False)

    def child() -> None:
        try:
            outcome: tuple[str, Any] = ("ok", fn(*args))
        except BaseException as err:  # noqa: BLE001 - everything goes back to the parent
            outcome = ("error", err)
        try:
            sender.send_bytes(pickle.dumps(outcome))
        except Exception:  # an unpicklable result or exception
            sender.send_bytes(pickle.dumps(("error", RuntimeError(repr(outcome[1])))))

    proc = ctx.Process(target=child, daemon=True)
    proc.start()
    sender.close()
    try:
        ready = receiver.poll(timeout)
        data = receiver.recv_bytes() if ready else None
    except EOFError:
        data = None
    proc.join(5)
    if proc.is_alive():
        proc.kill()
        proc.join()
    if data is None:
        code = proc.exitcode
        how = f"signal {-code}" if code is not None and code < 0 else f"exit code {code}"
        if not ready:
            how = f"no result within {timeout:.0f} s"
        raise KernelCrashed(f"the kernel process died: {how}")
    status, value = pickle.loads(data)
    if status == "error":
        raise value
    return value
