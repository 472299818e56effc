"""Compile OpenCL work-group functions in a helper process first, so that a crash of the
device's kernel compiler is an error, not the end of the caller's process.

PoCL compiles a kernel for a work-group size at the kernel's first launch with that size (its
work-group function: the barrier and parallel-region passes, `lib/llvmopencl`), not at
`clBuildProgram`; an assertion there (`ParallelRegion.cc:346: ... Assertion 'exit != NULL'
failed`, seen on a random schedule in an exploration run) calls `abort()`, which would take
down the compiler, the tuner's worker or the test run that launched it, with nothing said
about the kernel. So before a program whose source has a barrier is built in this process
(`einc.runtime.opencl`), a helper subprocess (`einc.runtime.opencl.serve_builds`, one per
process, started on first use, kept) builds it and launches each of its kernels for one
work-group of its size, on zero-filled buffers of the manifest's sizes. PoCL keeps the
compiled work-group functions in its on-disk kernel cache, so the launch here reuses them
(the helper's is the compile; this process's build and first launch are cache hits: about
0.1 s). If the helper dies, the kernel it was launching is reported in a ToolchainError
(`CompilerCrash`: its kernel name, the signal and the tail of the helper's stderr, where
PoCL's assertion is), which the target locates at the statement the kernel computes; the
helper is started again for the next program. A program without a barrier is one parallel
region, which those passes do not split: it is built here directly.

Fault injection for tests: the helper aborts (SIGABRT, as PoCL's assertion does) before
launching a kernel named in the caller's `$EINC_OPENCL_HELPER_ABORT` (comma-separated names).
"""

from __future__ import annotations

import os
import pickle
import struct
import subprocess
import sys
import tempfile
import threading
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import IO

from einc.errors import ToolchainError
from einc.runtime.device import nbytes
from einc.runtime.exits import describe_exit
from einc.runtime.manifest import LaunchManifest

ABORT_ENV = "EINC_OPENCL_HELPER_ABORT"


class CompilerCrash(ToolchainError):
    """The OpenCL device's compiler (or the device) killed the helper process while it built
    or launched `kernel` for one work-group: a toolchain failure, not a wrong kernel."""

    def __init__(self, message: str, kernel: str | None = None):  # (a default: pickle calls it with the message)
        super().__init__(message)
        self.kernel = kernel


@dataclass(frozen=True)
class Launch:
    name: str
    block: tuple[int, ...]
    sizes: tuple[int, ...]  # bytes of each buffer argument, in order


def needs_isolation(source: str) -> bool:
    """Whether PoCL's work-group passes split `source`'s kernels into regions (a barrier)."""
    return "barrier(" in source


def launches(manifest: LaunchManifest) -> tuple[Launch, ...]:
    """The kernels the helper launches: all but those taking dynamic local memory
    (`shared_bytes`; einc's OpenCL kernels declare theirs statically, so none of its own)."""
    by_name = {b.name: b for b in manifest.buffers}
    return tuple(
        Launch(k.name, tuple(k.block), tuple(max(nbytes(by_name[a]), 1) for a in k.args))
        for k in manifest.kernels
        if k.shared_bytes == 0
    )


# ---- the client (the process that will run the kernels) -------------------------------------------
def send(stream: IO[bytes], obj: object) -> None:
    data = pickle.dumps(obj)
    stream.write(struct.pack("<Q", len(data)) + data)
    stream.flush()


def receive(stream: IO[bytes]) -> tuple[object, ...]:
    head = stream.read(8)
    if len(head) < 8:
        raise EOFError
    (size,) = struct.unpack("<Q", head)
    data = stream.read(size)
    if len(data) < size:
        raise EOFError
    message = pickle.loads(data)
    assert isinstance(message, tuple), type(message)
    return message


Request = tuple[str, tuple[str, ...], tuple[Launch, ...], str]
"""A program's source, its build options, its launches, the kernels to abort at (tests)."""


def receive_request(stream: IO[bytes]) -> Request:
    source, options, todo, abort = receive(stream)
    assert isinstance(source, str) and isinstance(options, tuple) and isinstance(todo, tuple) and isinstance(abort, str)
    return source, tuple(str(o) for o in options), tuple(t for t in todo if isinstance(t, Launch)), abort


class _Helper:
    """The helper process and its pipes; one request at a time."""

    def __init__(self) -> None:
        self.stderr = tempfile.TemporaryFile()
        env = dict(os.environ)
        root = str(Path(__file__).resolve().parents[2])  # this einc, however the caller found it
        env["PYTHONPATH"] = os.pathsep.join([root, *([env["PYTHONPATH"]] if env.get("PYTHONPATH") else [])])
        self.process = subprocess.Popen(
            [sys.executable, "-c", "from einc.runtime.opencl import serve_builds; serve_builds()"],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE,
            stderr=self.stderr, env=env,
        )  # fmt: skip

    def stderr_tail(self, limit: int = 2000) -> str:
        self.stderr.seek(0)
        text = self.stderr.read().decode(errors="replace")
        return text[-limit:].strip()

    def close(self) -> None:
        if self.process.poll() is None:
            self.process.kill()
        self.process.wait()
        self.stderr.close()


_lock = threading.Lock()
_helper: _Helper | None = None
_checked: set[Request] = set()  # built and launched by the helper


def check_build(source: str, options: Sequence[str], manifest: LaunchManifest) -> None:
    """Build `source` and launch each kernel of `manifest` for one work-group in the helper
    process; a CompilerCrash if the helper dies doing so. An OpenCL error there (a rejected
    source, a bad launch) is left to the caller's own build, which reports it as usual."""
    global _helper
    request: Request = (source, tuple(options), launches(manifest), os.environ.get(ABORT_ENV, ""))
    with _lock:
        if request in _checked:
            return
        helper = _helper if _helper is not None and _helper.process.poll() is None else None
        if helper is None:
            if _helper is not None:
                _helper.close()
            helper = _helper = _Helper()
        assert helper.process.stdin is not None and helper.process.stdout is not None
        current: str | None = None
        try:
            send(helper.process.stdin, request)
            while True:
                reply = receive(helper.process.stdout)
                if reply[0] == "kernel":
                    current = str(reply[1])
                elif reply[0] == "done":
                    _checked.add(request)
                    return
        except (EOFError, BrokenPipeError, OSError):
            code = helper.process.wait()
            tail = helper.stderr_tail()
            helper.close()
            _helper = None
        what = f"kernel '{current}'" if current is not None else "the program"
        stage = "launching" if current is not None else "building"
        raise CompilerCrash(
            f"the OpenCL device's compiler crashed ({describe_exit(code)}) {stage} {what} "
            f"(work-group functions are compiled at a kernel's first launch; einc did this in a helper "
            f"process, so only it died): a toolchain failure, not a wrong result; the device said:\n"
            f"{tail or '(nothing)'}\n--- source ---\n{source}",
            current,
        )
