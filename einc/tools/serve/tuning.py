"""Tuning through the codegen service: `POST /tune` jobs, queued per device and run one at a
time on each, every job in its own process.

    queues = TuneQueues(settings)             # the app's, for as long as it runs
    job = TuneJob.new(request, check.body)    # a checked TuneRequest and tune_check's answer
    queues.submit(job)                        # None (queued), or the Retry-After of a full queue
    queues.get(job.id).to_json()              # {"state": "queued" | "running" | "done" | "failed", ...}
    await queues.stop()                       # the server's shutdown: running jobs stopped, records kept

A job runs `einc.tune.tune` (what `einc tune` runs: the search, then the final rounds that
decide the best) in a process of its own (`tune_process`), started from the service's warm
forkserver; its builds and measurements are the tuner's own isolated processes. The process
reports each trial over a pipe, and its records go to the server's database as `einc tune`'s
do, so `POST /compile` applies the job's decision as soon as it is recorded. Its death (a
signal, out of memory) fails the job with the exit status, never the server; the trials it
measured are in the database already. Stopping a job (the server's shutdown) interrupts it
as Ctrl-C interrupts `einc tune`: the candidate in flight ends, every trial is kept, nothing
is decided. The job's process also stops itself when the server's end of its lifeline
closes (a server that died without stopping it).

Queues: one per target and device (`tune_check`'s `device`, the device the records name); a
queue runs one job at a time and holds at most `Settings.tune_queue` waiting jobs (past that,
429 with an estimate of when a place frees). Finished jobs are remembered (`GET /tune/{id}`)
up to `KEEP_FINISHED`, the oldest forgotten first.
"""

from __future__ import annotations

import asyncio
import logging
import math
import multiprocessing
import os
import signal
import sys
import threading
import time
import types
import uuid
from collections import OrderedDict, deque
from collections.abc import Callable
from dataclasses import dataclass, field
from multiprocessing.connection import Connection
from multiprocessing.process import BaseProcess
from pathlib import Path
from types import FrameType
from typing import cast

from einc.errors import EincError, InternalCompilerError, RuntimeMissingError, SourceLocation
from einc.tools.serve.jobs import IR_FILE, JSON, TuneRequest

LOG = logging.getLogger("einc.serve")
KEEP_FINISHED = 1000
"""Finished jobs remembered for `GET /tune/{id}` (older ones answer 404)."""
RETRY_AFTER_S = 30
"""Retry-After of a full queue whose running job has not measured a trial yet."""
STOP_WAIT_S = 30.0
"""How long the server's shutdown waits for a stopped job's process to end (its candidate
in flight measured and recorded) before killing it."""

Message = tuple[str, JSON]
"""What a job's process reports: ("trial", ...) per trial, then one of ("done", ...),
("failed", ...) or ("stopped", ...)."""


@dataclass
class Best:
    """The best schedule of a job so far: during the search its fastest trial (measured once),
    once done the decision of the final rounds."""

    time_s: float
    default_s: float | None
    schedule: str
    measured: str  # "a search trial, measured once" | "the final rounds"

    def to_json(self) -> JSON:
        vs = self.default_s / self.time_s if self.default_s is not None and self.time_s > 0 else None
        return {"time_s": self.time_s, "default_s": self.default_s,
                "vs_default": round(vs, 4) if vs is not None else None, "schedule": self.schedule,
                "measured": self.measured}  # fmt: skip


@dataclass
class TuneJob:
    """One `POST /tune`: its request, what it is queued by, and where it stands."""

    id: str
    request: TuneRequest
    task_key: str
    device: str
    submitted: float = field(default_factory=time.time)
    state: str = "queued"  # queued | running | done | failed
    started: float | None = None
    ended: float | None = None
    trials_done: int = 0
    trials_failed: int = 0
    default_s: float | None = None
    best: Best | None = None
    reason: str | None = None  # failed: why
    outcome: JSON = field(default_factory=dict)  # done: the decision, its record, what /compile applies
    pid: int | None = None

    @classmethod
    def new(cls, request: TuneRequest, checked: JSON) -> TuneJob:
        return cls(uuid.uuid4().hex[:16], request, str(checked["task_key"]), str(checked["device"]))

    @property
    def target(self) -> str:
        return self.request.program.target

    @property
    def queue(self) -> str:
        """The queue's name: the target and the device its measurements run on."""
        return f"{self.target} on {self.device}"

    @property
    def finished(self) -> bool:
        return self.state in ("done", "failed")

    def apply(self, message: Message) -> None:
        """A report of the job's process."""
        kind, data = message
        if kind == "trial":
            self.trials_done += 1
            time_s = data.get("time_s")
            if not isinstance(time_s, float):
                self.trials_failed += 1
                return
            if data.get("default") is True and self.default_s is None:
                self.default_s = time_s
            if self.best is None or time_s < self.best.time_s:
                self.best = Best(time_s, None, str(data.get("schedule")), "a search trial, measured once")
            self.best.default_s = self.default_s
        elif kind == "done":
            self.state, self.ended, self.outcome = "done", time.time(), data
            best_s, default_s = data.get("best_s"), data.get("default_s")
            if isinstance(best_s, float):
                self.best = Best(best_s, default_s if isinstance(default_s, float) else None,
                                 str(data.get("schedule")), "the final rounds")  # fmt: skip
        else:  # failed, stopped
            self.fail(str(data.get("reason")))

    def fail(self, reason: str) -> None:
        self.state, self.ended, self.reason = "failed", time.time(), reason

    def progress(self) -> JSON:
        return {"done": self.trials_done, "total": self.request.trials, "failed": self.trials_failed}

    def to_json(self, position: int | None = None) -> JSON:
        """`GET /tune/{id}`'s answer (`position`: 1 for the next job of its queue)."""
        answer: JSON = {"id": self.id, "state": self.state, "target": self.target, "device": self.device,
                        "task_key": self.task_key, "progress": self.progress(),
                        "best": self.best.to_json() if self.best is not None else None}  # fmt: skip
        if position is not None:
            answer["queue_position"] = position
        if self.started is not None:
            answer["elapsed_s"] = round((self.ended or time.time()) - self.started, 3)
        if self.state == "done":
            answer.update(self.outcome)
            for key in ("best_s", "default_s", "schedule"):
                answer.pop(key, None)
        if self.state == "failed":
            answer["reason"] = self.reason
        return answer


class TuneQueues:
    """The service's tuning jobs: a queue per target and device, each running one job at a
    time in its own process. Lives on the server's event loop (no locks: only the loop
    touches it)."""

    def __init__(self, limit: int, db: str | None, workers: int | None):
        self.limit, self.db, self.workers = limit, db, workers
        self.jobs: OrderedDict[str, TuneJob] = OrderedDict()
        self.waiting: dict[str, deque[TuneJob]] = {}
        self.running: dict[str, tuple[TuneJob, BaseProcess]] = {}
        self.drains: dict[str, asyncio.Task[None]] = {}
        self.stopping = False

    def get(self, job_id: str) -> TuneJob | None:
        return self.jobs.get(job_id)

    def position(self, job: TuneJob) -> int | None:
        """1 for the next job of its queue, 2 for the one after, ...; None unless queued."""
        waiting = list(self.waiting.get(job.queue, ()))
        return waiting.index(job) + 1 if job in waiting else None

    def active(self, task_key: str, target: str) -> TuneJob | None:
        """The running, else the first queued, job tuning this program on `target`."""
        found = [j for j in self.jobs.values() if not j.finished and j.task_key == task_key and j.target == target]
        return min(found, key=lambda j: (j.state != "running", j.submitted)) if found else None

    def submit(self, job: TuneJob) -> int | None:
        """Queue `job` (None), or the seconds after which to ask again when its queue is full."""
        waiting = self.waiting.setdefault(job.queue, deque())
        if len(waiting) >= self.limit:
            return self.retry_after(job.queue)
        waiting.append(job)
        self.jobs[job.id] = job
        self._forget_old()
        if job.queue not in self.drains:
            self.drains[job.queue] = asyncio.get_running_loop().create_task(self._drain(job.queue))
        return None

    def retry_after(self, queue: str) -> int:
        """An estimate of the seconds until the running job and those waiting in `queue` are
        done, at the running job's pace (RETRY_AFTER_S before it has one)."""
        job = self.running[queue][0] if queue in self.running else None
        if job is None or job.started is None or job.trials_done == 0:
            return RETRY_AFTER_S
        per_trial = (time.time() - job.started) / job.trials_done
        left = job.request.trials - job.trials_done + sum(j.request.trials for j in self.waiting.get(queue, ()))
        return max(1, min(3600, math.ceil(per_trial * left)))

    def _forget_old(self) -> None:
        finished = [k for k, j in self.jobs.items() if j.finished]
        for key in finished[: max(0, len(finished) - KEEP_FINISHED)]:
            del self.jobs[key]

    async def _drain(self, queue: str) -> None:
        """Run the jobs of `queue` one after another until it is empty."""
        try:
            waiting = self.waiting[queue]
            while waiting and not self.stopping:
                job = waiting.popleft()
                try:
                    await self._run(job)
                except Exception as exc:  # noqa: BLE001 - a bug in the service: this job fails, the queue goes on
                    LOG.exception("tune job %s: the service failed", job.id)
                    job.fail(f"internal compiler error in the service: {type(exc).__name__}: {exc}")
        finally:
            del self.drains[queue]

    async def _run(self, job: TuneJob) -> None:
        """Start `job`'s process, follow its reports, and fail the job if it ends without a
        last word (it died)."""
        job.state, job.started = "running", time.time()  # (its process starting)
        context = multiprocessing.get_context("forkserver")
        reports, report_end = context.Pipe(duplex=False)
        lifeline_end, lifeline = context.Pipe(duplex=False)
        process = context.Process(target=tune_process, args=(job.request, self.db, self.workers, report_end,
                                                             lifeline_end), name=f"einc tune job {job.id}")  # fmt: skip
        try:
            await asyncio.to_thread(process.start)
        except Exception as exc:  # noqa: BLE001 - no process (out of memory, no forkserver): the job fails
            LOG.exception("tune job %s could not start", job.id)
            job.fail(f"the service could not start the tuning process: {type(exc).__name__}: {exc}")
            for end in (reports, report_end, lifeline_end, lifeline):
                end.close()
            return
        report_end.close()
        lifeline_end.close()
        job.pid = process.pid
        self.running[job.queue] = (job, process)
        if self.stopping:  # the server began to shut down while the process started
            _signal(process, signal.SIGINT)
        LOG.info("tune job %s started in process %s: %d trials of program %s for %s", job.id, process.pid,
                 job.request.trials, job.task_key, job.queue)  # fmt: skip
        try:
            while True:
                await _readable(reports.fileno())
                try:
                    message = reports.recv()
                except (EOFError, OSError):  # the process ended (or died)
                    break
                except Exception:  # a report that is no report: a bug; the job cannot be followed
                    _signal(process, signal.SIGKILL)
                    raise
                if len(message) == 3:  # a failure with what the log should have (a reproducer)
                    LOG.error("tune job %s: internal compiler error:\n%s", job.id, message[2])
                    message = message[:2]
                job.apply(cast(Message, message))
            await _readable(process.sentinel)
            process.join()
        finally:
            reports.close()
            lifeline.close()
            del self.running[job.queue]
        if not job.finished:
            from einc.runtime.exits import describe_exit

            job.fail(f"the tuning process ended before the job did ({describe_exit(process.exitcode)}) after "
                     f"{job.trials_done} of {job.request.trials} trials (those are in the tuning records)")  # fmt: skip
        log = LOG.info if job.state == "done" else LOG.warning
        log("tune job %s %s: %s", job.id, job.state, job.reason or job.outcome.get("decision"))

    async def stop(self) -> None:
        """The server's shutdown: no job starts any more; the running ones are stopped as
        Ctrl-C stops `einc tune` (their trials kept), and killed if they take longer than
        STOP_WAIT_S; the waiting ones fail."""
        self.stopping = True
        for queue in self.waiting.values():
            for job in queue:
                job.fail("the server shut down before the job started")
            queue.clear()
        for job, process in list(self.running.values()):
            LOG.info("stopping tune job %s (process %s) after %d of %d trials", job.id, process.pid,
                     job.trials_done, job.request.trials)  # fmt: skip
            _signal(process, signal.SIGINT)
        drains = list(self.drains.values())
        if not drains:
            return
        _, late = await asyncio.wait(drains, timeout=STOP_WAIT_S)
        if late:
            for job, process in list(self.running.values()):
                LOG.warning("tune job %s did not stop in %g s: killed", job.id, STOP_WAIT_S)
                _signal(process, signal.SIGKILL)
            await asyncio.wait(late, timeout=STOP_WAIT_S)


async def _readable(fd: int) -> None:
    """Wait, on the event loop (no thread), until `fd` can be read: a report has come, the
    pipe was closed, or (a process's sentinel) the process has ended."""
    loop = asyncio.get_running_loop()
    ready = loop.create_future()
    loop.add_reader(fd, lambda: ready.done() or ready.set_result(None))
    try:
        await ready
    finally:
        loop.remove_reader(fd)


def _signal(process: BaseProcess, sig: signal.Signals) -> None:
    if process.pid is not None:
        try:
            os.kill(process.pid, sig)
        except ProcessLookupError:
            pass


# ---- the job (in its own process) ---------------------------------------------------------------
def tune_process(request: TuneRequest, db: str | None, workers: int | None, reports: Connection,
                 lifeline: Connection) -> None:  # fmt: skip
    """A tuning job: `request` tuned into the database `db` (None: `$EINC_TUNING_DB`, else
    the user's) with `workers` build processes, each trial and the end reported on
    `reports`. SIGINT (once: a second one during the stop is ignored), or the server's end
    of `lifeline` closing, stops it as Ctrl-C stops `einc tune`."""
    # This process runs no script: the server's, which the forkserver imported as its
    # `__main__`, is nothing the tuner's spawn build workers need to import again (nor a
    # script whose top level calls the tuner, which einc.tune.main_guard would take it for,
    # seeing the forkserver's own `-c` frame).
    sys.modules["__main__"] = types.ModuleType("__main__")
    signal.signal(signal.SIGINT, _interrupt_once)
    threading.Thread(target=_watch, args=(lifeline,), daemon=True, name="lifeline").start()
    from einc.compiler.records import default_db_path

    program = request.program
    path = Path(db) if db else default_db_path()
    trials = 0

    def send(message: Message) -> None:
        nonlocal trials
        if message[0] == "trial":
            trials += 1
        signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT})  # a report is sent whole (a stop waits)
        try:
            reports.send(message)
        finally:
            signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT})

    try:
        message: tuple[object, ...] = _tune(request, path, workers, send)
    except KeyboardInterrupt:  # (the tuner's own stop is its result: this one came before or after it)
        message = ("stopped", {"reason": _stopped(trials, request.trials, path)})
    except EincError as err:
        if err.loc is None:
            err.loc = SourceLocation(IR_FILE, 1, 1, 1, program.ir)
        message = ("failed", {"reason": err.render()})
    except Exception as exc:  # noqa: BLE001 - a bug in einc: the job fails, its reproducer to the log
        ice = InternalCompilerError.wrap(exc, "tune", program=program.ir, target=program.target)
        message = ("failed", {"reason": str(ice)}, ice.reproducer())
    try:
        signal.signal(signal.SIGINT, signal.SIG_IGN)  # the last word is said in full
        reports.send(message)
    except (OSError, ValueError):  # the server is gone: nobody to tell
        pass


def _stopped(trials: int, total: int, path: Path) -> str:
    return f"stopped after {trials} of {total} trials (the server shut down); their records are kept in {path}"


_STOP = threading.Event()
"""Set by the job's SIGINT: a KeyboardInterrupt raised inside a finalizer (a weakref callback
the collector ran at that moment) is printed and dropped by Python, so the job's next trial
report raises it again at a point where the tuner's own Ctrl-C handling catches it."""


def _interrupt_once(signum: int, frame: FrameType | None) -> None:
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    _STOP.set()
    raise KeyboardInterrupt


def _watch(lifeline: Connection) -> None:
    """Stop this process (as Ctrl-C) when the server's end of `lifeline` closes."""
    try:
        lifeline.recv()
    except (EOFError, OSError):
        pass
    os.kill(os.getpid(), signal.SIGINT)


def _tune(request: TuneRequest, path: Path, workers: int | None,
          send: Callable[[Message], None]) -> tuple[object, ...]:  # fmt: skip
    """Tune `request` as `einc tune` does (the default kernel checked to run here first);
    the job's last word."""
    from einc.compiler.records import find_record
    from einc.targets import get_target
    from einc.tune import tuner
    from einc.tune.space import SearchSpace
    from einc.tune.types import TuneTask
    from einc.tools.serve.jobs import schedule_source_of_record

    program = request.program
    input_dict = cast("dict[str, dict[str, object]] | None", program.input_dict)
    task = TuneTask(program.ir, program.target, IR_FILE, input_dict,
                    tuple(program.extra_outputs) if program.extra_outputs else None)  # fmt: skip
    kernel = task.compilation(None).kernel()
    if kernel.unavailable is not None:  # compiled, but nothing runs it here: nothing to time
        why = kernel.unavailable
        why = why if "cannot run here" in why else f"{program.target} kernels cannot run here: {why}"
        raise RuntimeMissingError(f"{why}; nothing to time, so nothing to tune", SourceLocation(IR_FILE, 1, 1))
    space = SearchSpace.from_task(task)
    default_point = space.default_point()

    def on_trial(trial: tuner.Trial) -> None:
        m = trial.result
        send(("trial", {"time_s": m.median_s if m.ok else None, "default": m.candidate.point == default_point,
                        "schedule": m.candidate.point.describe(), "status": m.status.value}))  # fmt: skip
        if _STOP.is_set():  # a stop whose KeyboardInterrupt was lost in a finalizer
            raise KeyboardInterrupt

    result = tuner.tune(task, trials=request.trials, workers=workers, db=path, space=space, on_trial=on_trial)
    if result.stopped == "interrupted" or _STOP.is_set():
        return ("stopped", {"reason": _stopped(result.trials, request.trials, path)})
    best = result.best
    if best is None or result.decision is None or not best.ok:
        failures = ", ".join(f"{n} {s}" for s, n in sorted(result.failures.items())) or "none measured"
        why = result.decision.reason if result.decision is not None else "nothing was decided"
        return ("failed", {"reason": f"{why} (trials: {failures}); every trial is in {path}"})
    found = find_record(task.normalized, get_target(program.target), path)
    record = found[0] if found is not None else None
    default = result.default
    return ("done", {
        "decision": result.decision.reason,
        "kept_default": result.decision.kept_default,
        "record": record.id if record is not None else None,
        "schedule_source": schedule_source_of_record(record),
        "db": str(path),
        "summary": result.summary(),
        "best_s": best.median_s,
        "default_s": default.median_s if default is not None and default.ok else None,
        "schedule": best.candidate.point.describe(),
    })  # fmt: skip
