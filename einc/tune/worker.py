"""The runner's worker process: `python -m einc.tune.worker JOB_FD REPLY_FD LIFELINE_FD`.

It reads jobs from JOB_FD and answers on REPLY_FD (pickled, `multiprocessing.connection`
frames; its stdout and stderr are the runner's log, so a kernel's printing cannot corrupt the
answers). A job loads one build, checks its outputs against the reference, times it, and
answers; while it works, a "beat" (at most every 0.1 s: after loading, after a run of the
warm-up, after a repeat) tells the runner it is alive.
A kernel that kills the process (a signal, abort, exit) is the runner's to report.
"""

from __future__ import annotations

import ctypes
import glob
import math
import signal
import sys
import time
import traceback
from collections.abc import Callable
from multiprocessing.connection import Connection

import numpy as np

from einc.compiler.kernel import Kernel, MissingRuntime, Runner
from einc.errors import EincError, InternalCompilerError, RuntimeMissingError, ToolchainError
from einc.runtime.arrays import poisoned
from einc.semantics.compare import max_error
from einc.targets import get_target
from einc.targets.gpu import DeviceTarget
from einc.tune.measure import CArtifact, RebuildArtifact, TaskData, die_with_parent
from einc.tune.timing import MeasureSettings, NoiseLimits, Timing, others_cpu, run_queue_wait, system_busy
from einc.tune.types import Status, TuneTask

MAX_COPIES = 64
GUARD_BYTES = 256
"""Bytes of 0x5A before and after every input and output, checked with the outputs: a kernel
that writes out of bounds (a vector tail past the end) is WRONG even when its outputs are
right. A multiple of 64, so the arrays keep the buffers' alignment."""
FIRST_RUNS = 3
"""The first runs (while they take under 10 ms in all) whose quickest decides whether a kernel
is rotated through copies of its data and whether it is stopped early (the cut-off)."""
ROTATE_BELOW_S = 1e-3
"""Kernels whose first run takes longer than this are timed on one copy of their data: where
their data sit when a run starts changes their time by a few microseconds at most."""


def loaded_kernel(task: TuneTask, artifact: RebuildArtifact) -> Kernel:
    """The builder's kernel loaded here with the target's runtime (no compilation: the source
    and manifest come from the builder), called as einc.compile's kernels are."""
    target = get_target(task.target)
    assert issubclass(target, DeviceTarget), target  # a shared library (C) is a CArtifact
    runner: Runner | MissingRuntime
    try:
        runner = target.load(artifact.source, artifact.manifest)
    except RuntimeMissingError as err:  # as einc.compile: calling the kernel says what is missing
        runner = MissingRuntime(task.target, err.message)
    return Kernel(source=artifact.source, program=task.program, runner=runner, target=task.target,
                  manifest=artifact.manifest, compile_check=target.compile_check)  # fmt: skip

class Failed(Exception):
    """A job's end other than a measurement: a status and a reason."""

    def __init__(self, status: Status, reason: str):
        super().__init__(reason)
        self.status = status
        self.reason = reason


def l2_bytes() -> int:
    """The L2 cache of one core (sysfs), 1 MiB where it does not say."""
    for path in sorted(glob.glob("/sys/devices/system/cpu/cpu0/cache/index*/")):
        try:
            with open(path + "level") as level, open(path + "size") as size:
                if level.read().strip() == "2":
                    text = size.read().strip().upper()
                    scale = {"K": 1 << 10, "M": 1 << 20}.get(text[-1:], 1)
                    return int(text.rstrip("KM")) * scale
        except (OSError, ValueError):
            continue
    return 1 << 20


def rotation_copies(nbytes: int, l2: int) -> int:
    """How many copies of one run's inputs and outputs the runs rotate through: enough to span
    twice the L2 cache (at most MAX_COPIES), one when a run's data do not fit in L2 anyway."""
    if nbytes >= l2:
        return 1
    return min(MAX_COPIES, max(1, math.ceil(2 * l2 / max(1, nbytes))))


class Job:
    """One build on its task's data: copies of the inputs and outputs (one to begin with), and
    a call of the kernel on the k-th."""

    def __init__(self, task: TuneTask, artifact: object, data: TaskData):
        self.data = data
        self.inputs: list[dict[str, np.ndarray]] = []
        self.outputs: list[dict[str, np.ndarray]] = []
        self.guards: list[tuple[str, np.ndarray]] = []  # ("input 'x'", its guarded buffer)
        self.pointers: list[tuple[int, ...]] = []
        self.artifact = artifact
        self.add_copies(1)
        self.call = self._load(task, artifact)

    @property
    def copies(self) -> int:
        return len(self.inputs)

    def add_copies(self, n: int) -> None:
        """`n` more copies of the inputs, and poisoned outputs for each."""
        for _ in range(n):
            inputs = {k: self._guarded(f"input '{k}'", v.shape, v.dtype) for k, v in self.data.inputs.items()}
            for k, v in self.data.inputs.items():
                inputs[k][...] = v
            outputs = {k: self._guarded(f"output '{k}'", v.shape, np.dtype(self.data.dtypes[k]))
                       for k, v in self.data.reference.items()}  # fmt: skip
            for array in outputs.values():
                array[...] = poisoned((), str(array.dtype))
            self.inputs.append(inputs)
            self.outputs.append(outputs)
            if isinstance(self.artifact, CArtifact):
                arrays = self.artifact.signature.bind(inputs, outputs)
                self.pointers.append(tuple(a.ctypes.data for a in arrays))

    def _guarded(self, what: str, shape: tuple[int, ...], dtype: np.dtype[np.generic]) -> np.ndarray:
        """An array inside a buffer with GUARD_BYTES of 0x5A bytes before and after it, which
        `check` finds unchanged unless the kernel wrote out of the array's bounds."""
        nbytes = math.prod(shape) * dtype.itemsize
        buffer = np.full(nbytes + 2 * GUARD_BYTES, 0x5A, np.uint8)
        self.guards.append((what, buffer))
        return buffer[GUARD_BYTES : GUARD_BYTES + nbytes].view(dtype).reshape(shape)

    def _load(self, task: TuneTask, artifact: object) -> Callable[[int], None]:
        if isinstance(artifact, CArtifact):
            try:
                dll = ctypes.CDLL(artifact.library)
                function = getattr(dll, artifact.signature.name)
            except (OSError, AttributeError) as err:
                raise Failed(Status.INTERNAL, f"cannot load the built kernel: {err}") from None
            function.argtypes = [ctypes.c_void_p] * len(artifact.signature.buffers)
            function.restype = None
            pointers = self.pointers
            return lambda k: function(*pointers[k])
        assert isinstance(artifact, RebuildArtifact), artifact
        try:
            kernel = loaded_kernel(task, artifact)
        except ToolchainError as err:
            raise Failed(Status.INTERNAL, err.render()) from None
        except EincError as err:
            raise Failed(Status.REFUSED, err.render()) from None
        except InternalCompilerError as err:
            raise Failed(Status.INTERNAL, str(err)) from None
        return lambda k: kernel.run(self.inputs[k], self.outputs[k])

    def check(self, copies: range, when: str) -> None:
        """Each output of each copy against the reference, each input against the original, and
        the guards around every array (all copies) untouched."""
        for what, buffer in self.guards:
            if np.any(buffer[:GUARD_BYTES] != 0x5A):
                raise Failed(Status.WRONG, f"the kernel wrote before the start of its {what} {when}")
            if np.any(buffer[buffer.size - GUARD_BYTES :] != 0x5A):
                raise Failed(Status.WRONG, f"the kernel wrote past the end of its {what} {when}")
        for k in copies:
            for name, want in self.data.reference.items():
                got = self.outputs[k][name]
                if got.dtype.kind == "f":
                    left = int(np.count_nonzero(np.isnan(got) & ~np.isnan(want)))
                    if left:
                        raise Failed(Status.WRONG, f"output '{name}' {when}: {left} of {got.size} elements are "
                                     "NaN where the reference is not (unwritten: outputs are poisoned with NaN)")
                error = max_error(got, want)
                tol = self.data.tolerances[name]
                if not error <= tol:
                    raise Failed(Status.WRONG, f"output '{name}' {when}: max error {error:.3g} vs the float64 "
                                 f"reference (tolerance {tol:.1g})")  # fmt: skip
            for name, original in self.data.inputs.items():
                if not np.array_equal(self.inputs[k][name], original, equal_nan=original.dtype.kind == "f"):
                    raise Failed(Status.WRONG, f"the kernel wrote into its input '{name}' {when}")


def calibrate(job: Job, min_repeat_s: float, beat: Callable[[], None]) -> int:
    """Runs per repeat: enough to last `min_repeat_s`, from one rotation through the copies,
    then (when that asks for more runs) from that many runs."""
    runs = job.copies
    for _ in range(2):
        start = time.perf_counter()
        for k in range(runs):
            job.call(k % job.copies)
        per_run = (time.perf_counter() - start) / runs
        beat()
        wanted = max(1, math.ceil(min_repeat_s / max(per_run, 1e-9)))
        if wanted <= runs:
            return wanted
        runs = wanted
    return runs


def measure(job: Job, settings: MeasureSettings, beat: Callable[[], None]) -> tuple[list[Timing], int]:
    """Check, warm up, calibrate and time `job`: the measurements (one, plus one per retry) and
    the runs per repeat. A kernel quicker than ROTATE_BELOW_S gets `rotation_copies` of its
    data to rotate through."""
    check = settings["check"]
    first: list[float] = []
    # the quickest of a few first runs (at least FIRST_RUNS, while they stay short), so that a
    # run slowed by a cold cache, a page fault or a preemption does not decide it
    while not first or (sum(first) < 10 * ROTATE_BELOW_S and (len(first) < FIRST_RUNS or min(first) >= ROTATE_BELOW_S)):
        start = time.perf_counter()
        job.call(0)
        first.append(time.perf_counter() - start)
        beat()
        if check and len(first) == 1:
            job.check(range(1), "after the first run")
    cutoff = settings["cutoff_s"]
    if cutoff is not None and min(first) > cutoff:  # stopped early: over the factor times the best
        return [Timing(tuple(first), sum(first), sum(first), None)], 0
    if min(first) < ROTATE_BELOW_S:
        job.add_copies(rotation_copies(job.data.nbytes, l2_bytes()) - 1)
    for k in range(job.copies):  # warm-up: every copy once
        job.call(k)
        beat()
    if check:
        job.check(range(job.copies), "after the warm-up")
    runs = calibrate(job, settings["min_repeat_s"], beat)
    copies = job.copies
    noise: NoiseLimits = settings["noise"]
    attempts: list[Timing] = []
    turn = 0
    while not attempts or noise.retry(attempts, settings["max_retries"]):
        times, cpu, wall, waited = [], 0.0, 0.0, 0.0
        # the machine's busy time over the whole attempt (clock ticks: over one repeat too coarse)
        b0, s0, t0 = system_busy(), time.process_time(), time.perf_counter()
        for _ in range(settings["repeats"]):
            q0 = run_queue_wait()
            c0, w0 = time.process_time(), time.perf_counter()
            for _ in range(runs):
                job.call(turn % copies)
                turn += 1
            w1, c1 = time.perf_counter(), time.process_time()
            q1 = run_queue_wait()
            times.append((w1 - w0) / runs)
            cpu, wall = cpu + (c1 - c0), wall + (w1 - w0)
            waited = math.nan if q0 is None or q1 is None else waited + (q1 - q0)
            beat()
        b1, s1, t1 = system_busy(), time.process_time(), time.perf_counter()
        others = others_cpu(None if b0 is None or b1 is None else b1 - b0, s1 - s0, t1 - t0)
        attempts.append(Timing(tuple(times), cpu, wall, None if math.isnan(waited) else waited, others))
    if check:
        job.check(range(copies), "after the timed runs")
    return attempts, runs


class Heart:
    """Beats to the runner: at most one every `interval` seconds (a beat costs a pipe write,
    which must not slow a small kernel's warm-up or timing)."""

    def __init__(self, replies: Connection, interval: float = 0.1):
        self.replies, self.interval, self.last = replies, interval, -math.inf

    def __call__(self) -> None:
        now = time.monotonic()
        if now - self.last >= self.interval:
            self.replies.send(("beat",))
            self.last = now


def serve(jobs: Connection, replies: Connection) -> None:
    data: TaskData | None = None
    while True:
        try:
            message = jobs.recv()
        except EOFError:
            return
        if message[0] == "task":
            data = message[1]
            continue
        _, key, task, artifact, settings = message
        try:
            if data is None or data.key != key:
                raise Failed(Status.INTERNAL, "runner protocol: a job before its task's data")
            job = Job(task, artifact, data)
            beat = Heart(replies)
            beat()
            attempts, runs = measure(job, settings, beat)
            extra = {"copies": job.copies, "runs_per_repeat": runs} if runs else {"cut": True}
            replies.send(("done", Status.OK.value, "", attempts, extra))
        except Failed as failed:
            replies.send(("done", failed.status.value, failed.reason))
        except Exception as err:  # noqa: BLE001 - the runner reports it; the worker lives on
            where = traceback.extract_tb(err.__traceback__)[-1:]
            at = f" at {where[0].filename}:{where[0].lineno}" if where else ""
            replies.send(("done", Status.INTERNAL.value, f"the worker failed: {type(err).__name__}: {err}{at}"))


def main(argv: list[str]) -> int:
    """`JOB_FD REPLY_FD [LIFELINE_FD]`: the lifeline is a pipe whose write end the runner holds;
    the worker ends when it closes (the runner died, even by `kill -9`, mid-job included)."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is the runner's to handle
    if len(argv) > 2:
        die_with_parent(int(argv[2]))
    jobs = Connection(int(argv[0]), writable=False)
    replies = Connection(int(argv[1]), readable=False)
    serve(jobs, replies)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
