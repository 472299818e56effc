"""Build candidates in parallel and measure them in an isolated worker: measurement that cannot
be fooled. `LocalBuilder` compiles in a process pool (a refusal, a compiler bug or a dying build
worker is a result, never an exception); `LocalRunner` runs each build in a persistent worker
subprocess (`einc.tune.worker`), checks its outputs against the float64 NumPy reference before
its time counts, and records a crash (signal), a hang (timeout) or wrong numbers as a failure.
Timing: warm-up, enough runs per repeat to last `min_repeat_s`, the median of `repeats`
repeats; foreign load (the process's CPU time vs wall time, its threads' run-queue wait, the
spread of repeats) makes the runner measure again instead of ranking noise.
"""

from __future__ import annotations

import math
import multiprocessing
import os
import signal
import subprocess
import sys
import tempfile
import time
import weakref
from collections.abc import Callable, Sequence
from concurrent.futures import FIRST_COMPLETED, Future, ProcessPoolExecutor, wait
from concurrent.futures.process import BrokenProcessPool
from dataclasses import dataclass, field
from multiprocessing.connection import Connection
from multiprocessing.process import BaseProcess
from pathlib import Path
from typing import Protocol, Self

import numpy as np

from einc.errors import EincError, InternalCompilerError, ToolchainError
from einc.runtime.exits import describe_exit
from einc.runtime.manifest import LaunchManifest
from einc.runtime.openmp import timing_env, user_policy
from einc.runtime.signature import KernelSignature
from einc.schedule.choice import ScheduleChoice
from einc.tune.timing import MeasureSettings, NoiseLimits, Timing
from einc.tune.types import EARLY_STOP, BuildResult, Candidate, MeasureResult, Status, TuneTask


class Builder(Protocol):
    def build(self, task: TuneTask, candidates: Sequence[Candidate]) -> list[BuildResult]: ...


class Runner(Protocol):
    def run(self, task: TuneTask, builds: Sequence[BuildResult]) -> list[MeasureResult]: ...


# ---- artifacts -----------------------------------------------------------------------------------
@dataclass(frozen=True)
class CArtifact:
    """A built C kernel: the shared library's path and its calling convention (the runner loads
    it with ctypes, without compiling again)."""

    library: str
    signature: KernelSignature


@dataclass(frozen=True)
class RebuildArtifact:
    """A kernel for a target whose runtime builds in-process (OpenCL, HLSL, SYCL, Poplar, CUDA):
    the source the builder compiled and its launch manifest; the runner's worker loads it with
    the target's runtime (`DeviceTarget.load`: the toolchains cache the binary the builder
    made), without compiling the candidate again."""

    source: str
    manifest: LaunchManifest


def c_artifact(source: str, signature: KernelSignature) -> CArtifact:
    """C `source` compiled (or found in the build cache) into a CArtifact."""
    from einc.runtime.c import compile_c

    return CArtifact(str(compile_c(source).path), signature)


def plain_task(task: TuneTask) -> TuneTask:
    """The task without its cached properties (a parsed program need not be picklable)."""
    return TuneTask(task.source, task.target, task.filename, task.input_dict, task.extra_outputs)


def build_candidate(task: TuneTask, candidate: Candidate) -> BuildResult:
    """Compile one candidate (the builder's job, run in a pool process). An EincError is a
    refusal (REFUSED, located); a ToolchainError (the target's compiler rejecting generated
    code) or an InternalCompilerError is an einc bug (INTERNAL)."""
    from einc.runtime.signature import KernelSignature

    start = time.perf_counter()

    def result(status: Status, reason: str = "", artifact: object = None) -> BuildResult:
        return BuildResult(candidate, status, reason, artifact, time.perf_counter() - start)

    try:
        comp = task.compilation(ScheduleChoice.of(candidate.schedule, "<candidate>"))
        if comp.target_obj.shared_library:
            source = comp.source_text()
            signature = KernelSignature.from_module(comp.module("target"))
            return result(Status.OK, artifact=c_artifact(source, signature))
        comp.kernel()  # builds with the target's toolchain (and warms its cache for the runner)
        manifest = comp.target_obj.manifest(comp.module("target"))
        assert manifest is not None, comp.target  # only C makes a shared library, and has none
        return result(Status.OK, artifact=RebuildArtifact(comp.source_text(), manifest))
    except (EincError, InternalCompilerError) as err:
        return result(*build_failure(err))


def build_failure(err: EincError | InternalCompilerError) -> tuple[Status, str]:
    """What a candidate's build that raised `err` is: an EincError a refusal (REFUSED, located),
    a ToolchainError (the target's compiler rejecting generated code) or an
    InternalCompilerError an einc bug (INTERNAL)."""
    if isinstance(err, ToolchainError):
        return Status.INTERNAL, err.render()
    if isinstance(err, EincError):
        return Status.REFUSED, err.render()
    return Status.INTERNAL, str(err)


BuildJob = Callable[[TuneTask, Candidate], BuildResult]


class _BuildTimeout(BaseException):
    """Raised by the build worker's timer: a BaseException, so that no `except Exception` on
    the way (a driver stage's, which makes an InternalCompilerError of it) swallows it."""


def _on_alarm(signum: int, frame: object) -> None:
    raise _BuildTimeout()


def _init_build_worker() -> None:
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is the parent's to handle
    signal.signal(signal.SIGALRM, _on_alarm)
    parent = multiprocessing.parent_process()
    if parent is not None:  # a spawned worker: its sentinel is a pipe the parent holds open
        die_with_parent(parent.sentinel)


def die_with_parent(fd: int) -> None:
    """End this process (SIGKILL) as soon as `fd` reads end-of-file: the read end of a pipe
    whose only write end the parent holds, which the system closes when the parent dies, however
    it dies (`kill -9` included, where no clean-up of the parent's runs). A daemon thread waits
    on it, without polling; whatever the main thread is doing (a build, a kernel run), the
    process does not outlive its parent."""
    import threading

    def watch() -> None:
        try:
            while os.read(fd, 1):
                pass
        except OSError:
            pass
        os.kill(os.getpid(), signal.SIGKILL)

    threading.Thread(target=watch, name="einc-lifeline", daemon=True).start()


def _run_build_job(job: BuildJob, task: TuneTask, candidate: Candidate, timeout_s: float) -> BuildResult:
    """`job(task, candidate)` within `timeout_s` (an interval timer interrupts it), any
    unexpected exception an INTERNAL result."""
    start = time.perf_counter()
    signal.setitimer(signal.ITIMER_REAL, timeout_s)
    try:
        return job(task, candidate)
    except _BuildTimeout:
        return BuildResult(candidate, Status.TIMEOUT, f"the build ran past {timeout_s:g} s",
                           seconds=time.perf_counter() - start)  # fmt: skip
    except Exception as err:  # noqa: BLE001 - a build's failure is a result
        return BuildResult(candidate, Status.INTERNAL, f"build failed: {type(err).__name__}: {err}",
                           seconds=time.perf_counter() - start)  # fmt: skip
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)


class LocalBuilder:
    """Builds candidates in a pool of `workers` processes ('spawn'; reused across calls). A
    build past `timeout_s` is TIMEOUT; a build worker that dies is INTERNAL ("build worker
    died") and the pool is recreated. `job` (a module-level function) replaces
    `build_candidate`, e.g. to inject faults in tests. As with any 'spawn' pool, a script
    using it needs the `if __name__ == "__main__":` guard (its workers import the script)."""

    def __init__(self, workers: int = os.cpu_count() or 1, timeout_s: float = 120.0,
                 job: BuildJob = build_candidate):  # fmt: skip
        self.workers = max(1, int(workers))
        self.timeout_s = timeout_s
        self.job = job
        self._executor: ProcessPoolExecutor | None = None
        self._processes: dict[int, BaseProcess] = {}  # the pool's processes (it forgets those that died)

    def _submit(self, task: TuneTask, candidate: Candidate) -> Future[BuildResult]:
        pool = self._pool()
        future = pool.submit(_run_build_job, self.job, task, candidate, self.timeout_s)
        self._processes.update(getattr(pool, "_processes", None) or {})
        return future

    def _pool(self) -> ProcessPoolExecutor:
        if self._executor is None:
            from einc.tune.main_guard import check_main_guard

            check_main_guard("einc's tuner")  # its spawn workers import the main script again
            self._executor = ProcessPoolExecutor(
                self.workers, mp_context=multiprocessing.get_context("spawn"), initializer=_init_build_worker
            )
        return self._executor

    def _kill_pool(self, broken: bool = False) -> str:
        """Kill the pool's processes. With `broken` (a worker died), how the dead ones ended,
        once the pool's own thread has reaped them (it may take a moment)."""
        pool, self._executor = self._executor, None
        processes, self._processes = list(self._processes.values()), {}
        if pool is None:
            return ""
        deadline = time.monotonic() + (3.0 if broken else 0.0)
        dead = [p for p in processes if p.exitcode not in (None, 0)]
        while broken and not dead and time.monotonic() < deadline:
            time.sleep(0.02)
            dead = [p for p in processes if p.exitcode not in (None, 0)]
        if not broken:  # let idle workers exit on their own (a killed one leaks its semaphores)
            pool.shutdown(wait=False, cancel_futures=True)
            for p in processes:
                p.join(timeout=max(0.0, 2.0 - (time.monotonic() - deadline)))
        for p in processes:
            if p.exitcode is None:
                p.kill()
        pool.shutdown(wait=True, cancel_futures=True)
        return ", ".join(describe_exit(p.exitcode) for p in dead)

    def build(self, task: TuneTask, candidates: Sequence[Candidate]) -> list[BuildResult]:
        plain = plain_task(task)
        results: list[BuildResult | None] = [None] * len(candidates)
        broken: list[int] = []
        try:
            futures = {self._submit(plain, c): i for i, c in enumerate(candidates)}
        except BrokenProcessPool:
            self._kill_pool()
            futures, broken = {}, list(range(len(candidates)))
        # a backstop beside the workers' own timers: every wave of `workers` builds in time
        deadline = time.monotonic() + self.timeout_s * (math.ceil(len(candidates) / self.workers) + 1) + 60
        pending = set(futures)
        while pending:
            done, pending = wait(pending, timeout=max(0.0, deadline - time.monotonic()), return_when=FIRST_COMPLETED)
            if not done:
                break
            for future in done:
                self._collect(future, futures[future], candidates, results, broken)
        for future in pending:
            i = futures[future]
            results[i] = BuildResult(candidates[i], Status.TIMEOUT, "the build worker did not answer in time")
        if pending or broken:
            self._kill_pool()
        for i in broken:  # alone now, so a death is this candidate's
            results[i] = self._build_alone(plain, candidates[i])
        return [r for r in results if r is not None]

    def _collect(self, future: Future[BuildResult], i: int, candidates: Sequence[Candidate],
                 results: list[BuildResult | None], broken: list[int]) -> None:  # fmt: skip
        try:
            results[i] = future.result()
        except BrokenProcessPool:
            broken.append(i)
        except Exception as err:  # noqa: BLE001 - e.g. a result that cannot be unpickled
            results[i] = BuildResult(candidates[i], Status.INTERNAL, f"build failed: {type(err).__name__}: {err}")

    def _build_alone(self, task: TuneTask, candidate: Candidate) -> BuildResult:
        start = time.perf_counter()
        try:
            future = self._submit(task, candidate)
            return future.result(timeout=self.timeout_s + 60)
        except BrokenProcessPool:
            how = self._kill_pool(broken=True)
            reason = "build worker died" + (f" ({how})" if how else "")
            return BuildResult(candidate, Status.INTERNAL, reason, seconds=time.perf_counter() - start)
        except TimeoutError:
            self._kill_pool()
            return BuildResult(candidate, Status.TIMEOUT, "the build worker did not answer in time",
                               seconds=time.perf_counter() - start)  # fmt: skip
        except Exception as err:  # noqa: BLE001
            return BuildResult(candidate, Status.INTERNAL, f"build failed: {type(err).__name__}: {err}",
                               seconds=time.perf_counter() - start)  # fmt: skip

    def close(self) -> None:
        self._kill_pool()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()




# ---- the runner ----------------------------------------------------------------------------------
@dataclass(frozen=True)
class TaskData:
    """What every candidate of a task runs on and is checked against: seeded inputs, the float64
    reference of each output and its tolerance."""

    key: str
    inputs: dict[str, np.ndarray]
    reference: dict[str, np.ndarray]
    tolerances: dict[str, float]
    dtypes: dict[str, str]

    @property
    def nbytes(self) -> int:
        """The bytes of one run's inputs and outputs."""
        outputs = sum(a.size * np.dtype(self.dtypes[k]).itemsize for k, a in self.reference.items())
        return sum(a.nbytes for a in self.inputs.values()) + outputs

    @classmethod
    def of(cls, task: TuneTask, seed: int) -> TaskData:
        from einc.semantics.compare import random_inputs, tolerance
        from einc.semantics.reference import run_reference

        comp = task.compilation(ScheduleChoice.NONE)
        module = comp.module("ein")
        inputs = random_inputs(comp.program, np.random.default_rng(seed))
        reference = run_reference(module, inputs)
        tolerances = {o.name: tolerance(o.dtype) for o in comp.program.outputs}
        dtypes = {o.name: str(o.dtype) for o in comp.program.outputs}
        key = f"{task_identity(task)}:{seed}"
        return cls(key, inputs, {k: reference[k] for k in tolerances}, tolerances, dtypes)


def task_identity(task: TuneTask) -> str:
    return repr((task.source, task.target, task.filename, sorted((task.input_dict or {}).items()), task.extra_outputs))


@dataclass
class _Worker:
    process: subprocess.Popen[bytes]
    send: Connection
    receive: Connection
    log: Path
    task_key: str | None = None
    log_start: int = 0  # where the current job's part of the log begins
    lifeline: int | None = None  # the write end of the worker's lifeline pipe (never written)

    def kill(self) -> None:
        if self.process.poll() is None:
            self.process.kill()
        self.process.wait()
        self.send.close()
        self.receive.close()
        if self.lifeline is not None:
            os.close(self.lifeline)
            self.lifeline = None




@dataclass
class LocalRunner:
    """Measures builds one after another in a persistent worker subprocess (`python -m
    einc.tune.worker`, restarted after a crash or a timeout; `OMP_NUM_THREADS=threads`).

    `timeout_s` bounds one run of the kernel (the worker reports after each repeat);
    `load_timeout_s` bounds starting the worker and loading (or rebuilding) the kernel.
    Inputs are `einc.semantics.compare.random_inputs(seed)`; the reference is computed once per task.
    Outputs are poisoned before the first run and checked against the reference after it and
    again after the timed runs (a kernel that accumulates across runs is wrong too); inputs
    must be left unchanged, and guard bytes around every array untouched (no write out of
    bounds). The worker is restarted after a WRONG kernel, which may have corrupted it.
    The worker's OpenMP threads sleep when they wait (`OMP_WAIT_POLICY=passive`, unless the user
    chose a policy: `einc.runtime.openmp`), and it dies with the runner's process (a lifeline
    pipe: `die_with_parent`). Inputs are rotated: when the inputs and outputs of one run are smaller than the L2 cache,
    the worker makes copies of them enough to span twice the L2 cache (at most 64) and each run
    takes the next copy, so a small kernel reads its data from L2/L3, not from where the run
    before left it in L1. `noise` decides when to measure again (up to `max_retries` times) and
    when to give up (Status.NOISY). `check=False` skips the checks (for benchmarks only)."""

    timeout_s: float = 10.0
    repeats: int = 7
    min_repeat_s: float = 0.05
    threads: int | None = None
    seed: int = 0
    max_retries: int = 2
    check: bool = True
    noise: NoiseLimits = field(default_factory=lambda: NoiseLimits.from_env())
    load_timeout_s: float = 120.0
    cutoff_s: float | None = None
    """A kernel whose first runs each take longer than this is checked and timed by those runs
    alone (no warm-up, calibration or repeats; `extra["cut"]`, with `extra["cutoff_s"]`): a
    search sets it from its best so far (`set_best`), since a candidate that much slower needs
    no precise time (and can never be the best: the tuner keeps it out of the final rounds)."""

    def set_best(self, best_s: float | None, factor: float = EARLY_STOP) -> None:
        """Time candidates slower than `factor` times `best_s` by their first runs only (no
        cut-off when `best_s` is None or `factor` is 0)."""
        self.cutoff_s = cutoff(best_s, factor)

    def __post_init__(self) -> None:
        self._worker: _Worker | None = None
        self._data: dict[str, TaskData] = {}
        self._finalizer = weakref.finalize(self, _kill_worker_of, self.__dict__)

    # ---- the worker ------------------------------------------------------------------------------
    def _start_worker(self) -> _Worker:
        job_read, job_write = os.pipe()
        reply_read, reply_write = os.pipe()
        life_read, life_write = os.pipe()  # the worker dies when this end closes (einc.tune.worker)
        env = timing_env(os.environ)  # OpenMP threads sleep when they wait (einc.runtime.openmp)
        root = str(Path(__file__).resolve().parents[2])  # the checkout (or site-packages) holding einc
        env["PYTHONPATH"] = os.pathsep.join([root, *filter(None, [env.get("PYTHONPATH")])])
        if self.threads is not None:
            env["OMP_NUM_THREADS"] = str(self.threads)
        fd, log = tempfile.mkstemp(prefix="einc-worker-", suffix=".log")
        try:
            process = subprocess.Popen(
                [sys.executable, "-m", "einc.tune.worker", str(job_read), str(reply_write), str(life_read)],
                stdin=subprocess.DEVNULL, stdout=fd, stderr=fd, env=env,
                pass_fds=(job_read, reply_write, life_read), start_new_session=True,
            )  # fmt: skip
        except BaseException:
            os.close(life_write)
            raise
        finally:
            os.close(fd)
            os.close(job_read)
            os.close(reply_write)
            os.close(life_read)
        os.set_inheritable(life_write, False)
        return _Worker(process, Connection(job_write, readable=False), Connection(reply_read, writable=False),
                       Path(log), lifeline=life_write)  # fmt: skip

    def _stop_worker(self) -> None:
        worker, self._worker = self._worker, None
        if worker is not None:
            worker.kill()
            worker.log.unlink(missing_ok=True)

    def close(self) -> None:
        self._stop_worker()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # ---- measuring -------------------------------------------------------------------------------
    def run(self, task: TuneTask, builds: Sequence[BuildResult]) -> list[MeasureResult]:
        results = []
        for build in builds:
            start = time.perf_counter()
            try:
                result = self._measure(task, build)
            except Exception as err:  # noqa: BLE001 - never a traceback out of run()
                self._stop_worker()
                result = MeasureResult(build.candidate, Status.INTERNAL, f"runner: {type(err).__name__}: {err}",
                                       build_s=build.seconds)  # fmt: skip
            except BaseException:  # Ctrl-C: the worker is mid-job, so it cannot serve the next one
                self._stop_worker()
                raise
            results.append(_with_run_s(result, time.perf_counter() - start))
        return results

    def _task_data(self, task: TuneTask) -> TaskData:
        identity = task_identity(task)
        if identity not in self._data:
            self._data[identity] = TaskData.of(task, self.seed)
        return self._data[identity]

    def _measure(self, task: TuneTask, build: BuildResult) -> MeasureResult:
        candidate = build.candidate

        def result(status: Status, reason: str = "", times: tuple[float, ...] = (),
                   extra: dict[str, object] | None = None) -> MeasureResult:  # fmt: skip
            return MeasureResult(candidate, status, reason, times, build.seconds, 0.0, extra or {})

        if build.status is not Status.OK:
            return result(build.status, build.reason)
        if not isinstance(build.artifact, CArtifact | RebuildArtifact):
            return result(Status.INTERNAL, f"the runner cannot load a {type(build.artifact).__name__} artifact")
        try:
            data = self._task_data(task)
        except EincError as err:
            return result(Status.REFUSED, err.render())
        except InternalCompilerError as err:
            return result(Status.INTERNAL, str(err))
        reply = self._exchange(plain_task(task), data, build.artifact)
        status, reason = Status(reply[0]), reply[1]
        if status is not Status.OK:
            return result(status, reason, extra=reply[2] if len(reply) > 2 else None)
        attempts: list[Timing] = reply[2]
        extra: dict[str, object] = dict(reply[3])
        best, noise, hopeless = self.noise.verdict(attempts)
        extra.update(cpu_s=best.cpu_s, wall_s=best.wall_s, wait_s=best.wait_s, others_s=best.others_s,
                     spread=best.spread, retries=len(attempts) - 1, threads=self.threads or inherited_threads(),
                     wait_policy=user_policy(os.environ) or "passive")  # fmt: skip
        if noise:
            extra["noisy"] = noise
        cut = bool(extra.get("cut"))
        if cut:  # its first runs: ranked only against the cut-off, never for the best
            extra["cutoff_s"] = self.cutoff_s
        if hopeless and not cut:
            extra["median_s"] = best.median
            return result(Status.NOISY, f"timings unreliable after {len(attempts)} measurements: {noise}",
                          extra=extra)  # fmt: skip
        return result(Status.OK, times=best.times, extra=extra)

    def _exchange(self, task: TuneTask, data: TaskData, artifact: CArtifact | RebuildArtifact) -> tuple:
        """Send one job to the worker (and the task's data when it lacks them) and wait for its
        answer: ("ok", reason, attempts, extra) or (status, reason[, extra])."""
        if self._worker is None or self._worker.process.poll() is not None:
            self._stop_worker()
            self._worker = self._start_worker()
        worker = self._worker
        settings = MeasureSettings(repeats=max(1, self.repeats), min_repeat_s=self.min_repeat_s, check=self.check,
                                   max_retries=max(0, self.max_retries), noise=self.noise,
                                   cutoff_s=self.cutoff_s)  # fmt: skip
        try:
            worker.log_start = worker.log.stat().st_size
            if worker.task_key != data.key:
                worker.send.send(("task", data))
                worker.task_key = data.key
            worker.send.send(("job", data.key, task, artifact, settings))
        except OSError:  # the worker died before reading
            return self._crashed(worker)
        deadline = time.monotonic() + self.load_timeout_s
        loaded = False
        while True:
            try:
                ready = worker.receive.poll(max(0.0, deadline - time.monotonic()))
                if not ready:
                    self._stop_worker()
                    if not loaded:
                        return (Status.TIMEOUT.value, f"the worker did not load it in {self.load_timeout_s:g} s")
                    return (Status.TIMEOUT.value, f"the kernel ran past the time limit ({self.timeout_s:g} s per run)")
                message = worker.receive.recv()
            except (EOFError, OSError):
                return self._crashed(worker)
            if message[0] == "beat":
                deadline, loaded = time.monotonic() + self.timeout_s, True
                continue
            if message[1] in (Status.WRONG.value, Status.INTERNAL.value):
                self._stop_worker()  # a kernel that misbehaved may have scribbled on the worker's memory
            return message[1:]

    def _crashed(self, worker: _Worker) -> tuple:
        try:
            code = worker.process.wait(timeout=5)
        except subprocess.TimeoutExpired:
            code = None
        tail = _tail(worker.log, worker.log_start)
        self._stop_worker()
        reason = f"the kernel crashed its worker: {describe_exit(code)}"
        return (Status.CRASHED.value, reason + (f"; it wrote: {tail}" if tail else ""))


def cutoff(best_s: float | None, factor: float) -> float | None:
    """The first-run time past which a candidate is not timed further: `factor` times the best
    so far (None: no best yet, or `factor` 0)."""
    if best_s is None or not math.isfinite(best_s) or factor <= 0:
        return None
    return factor * best_s


def check_early_stop(factor: float) -> str:
    """Why `factor` is no early-stop factor ("" when it is one: 0, or at least 1; below 1 a
    candidate faster than the best could be stopped early)."""
    if not math.isfinite(factor) or (factor != 0 and factor < 1):
        return f"the early-stop factor is 0 (off) or at least 1 (a multiple of the best so far), not {factor:g}"
    return ""


def inherited_threads() -> int:
    """The OpenMP threads a worker started without `threads` gets: `$OMP_NUM_THREADS` (its
    first level), else one per CPU."""
    first = os.environ.get("OMP_NUM_THREADS", "").split(",")[0].strip()
    return int(first) if first.isdigit() and int(first) > 0 else os.cpu_count() or 1


def _tail(log: Path, start: int, chars: int = 300) -> str:
    """The end of what the worker wrote from `start` on (its stdout and stderr), on one line."""
    try:
        with open(log, "rb") as f:
            f.seek(max(start, log.stat().st_size - chars))
            text = f.read().decode(errors="replace").strip()
    except OSError:
        return ""
    return text.replace("\n", " | ")


def _kill_worker_of(state: dict[str, object]) -> None:
    worker = state.get("_worker")
    if isinstance(worker, _Worker):
        worker.kill()
        worker.log.unlink(missing_ok=True)


def _with_run_s(result: MeasureResult, run_s: float) -> MeasureResult:
    from dataclasses import replace

    return replace(result, run_s=run_s)
