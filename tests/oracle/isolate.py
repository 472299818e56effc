"""Running compiled kernels in a separate worker process, so that generated code that crashes
(a bad access, a miscompiled name) fails one test instead of killing the whole test run.

The worker is a long-lived process started through multiprocessing's fork server, so it never
inherits the test process' OpenMP runtime: forking after OpenMP has run a parallel region
leaves the child's OpenMP pool dead (its first parallel region hangs). The worker compiles the
program itself (einc's on-disk cache makes that cheap after the parent's compile) and runs it.
A worker that dies or hangs is killed and replaced; the call raises KernelCrashed.
"""

from __future__ import annotations

import multiprocessing
from multiprocessing.connection import Connection
from typing import Any

import numpy as np


class KernelCrashed(AssertionError):
    """The worker died (a signal or an exit) or hung without returning a result."""


def compile_and_run(
    text: str,
    input_dict: dict[str, Any] | None,
    extra_outputs: list[str] | None,
    inputs: dict[str, np.ndarray],
    target: str = "c",
) -> dict[str, np.ndarray]:
    """What the worker does: `einc.compile(...)(**inputs)`."""
    import einc

    kernel = einc.compile(text, input_dict, target=target, extra_outputs=extra_outputs)
    return kernel(**inputs)


def _serve(conn: Connection) -> None:
    while True:
        try:
            fn, args = conn.recv()
        except EOFError:
            return
        try:
            outcome: tuple[str, Any] = ("ok", fn(*args))
        except BaseException as err:  # noqa: BLE001 - every failure goes back to the caller
            outcome = ("error", err)
        try:
            conn.send(outcome)
        except Exception:  # an unpicklable exception
            conn.send(("error", RuntimeError(f"{type(outcome[1]).__name__}: {outcome[1]}")))


class _Worker:
    def __init__(self) -> None:
        self.proc: multiprocessing.process.BaseProcess | None = None
        self.conn: Connection | None = None

    def start(self) -> None:
        ctx = multiprocessing.get_context("forkserver")
        ctx.set_forkserver_preload(["numpy", "einc"])
        self.conn, child = ctx.Pipe()
        self.proc = ctx.Process(target=_serve, args=(child,), daemon=True)
        self.proc.start()
        child.close()

    def stop(self) -> None:
        if self.proc is not None and self.proc.is_alive():
            self.proc.kill()
            self.proc.join()
        self.proc = self.conn = None

    def call(self, fn: Any, args: tuple[Any, ...], timeout: float) -> Any:
        if self.proc is None or not self.proc.is_alive():
            self.start()
        assert self.conn is not None and self.proc is not None
        self.conn.send((fn, args))
        try:
            ready = self.conn.poll(timeout)
            outcome = self.conn.recv() if ready else None
        except EOFError:
            outcome = None
        if outcome is None:
            self.proc.join(1)
            code = self.proc.exitcode
            self.stop()
            if code is None:
                raise KernelCrashed(f"the kernel gave no result within {timeout:.0f} s")
            how = f"signal {-code}" if code < 0 else f"exit code {code}"
            raise KernelCrashed(f"the kernel process died: {how}")
        status, value = outcome
        if status == "error":
            raise value
        return value


_WORKER = _Worker()


def run_isolated(fn: Any, *args: Any, timeout: float = 120.0) -> Any:
    """`fn(*args)` in the worker process (`fn` must be picklable: a module-level function)."""
    return _WORKER.call(fn, args, timeout)


def run_kernel_isolated(
    text: str,
    input_dict: dict[str, Any] | None,
    extra_outputs: list[str] | None,
    inputs: dict[str, np.ndarray],
    target: str = "c",
    timeout: float = 120.0,
) -> dict[str, np.ndarray]:
    """Compiles and runs a program in the worker process."""
    return run_isolated(compile_and_run, text, input_dict, extra_outputs, inputs, target,
                        timeout=timeout)  # fmt: skip
