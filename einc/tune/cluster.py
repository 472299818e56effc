"""Measurement on a `dask.distributed` cluster: `einc tune --runner dask-local --workers N` (a
`LocalCluster` of N worker processes on this machine) or `--runner dask://HOST:PORT` (a running
scheduler, its workers on any machines); `--runner local` (the default) is the LocalBuilder and
LocalRunner of `einc.tune.measure`.

Each candidate is one Dask task (`einc.tune.dask_worker.measure_candidate`): built and measured
on one worker by that worker's own LocalBuilder and LocalRunner, so every guarantee of a
measurement on one machine holds there (the kernel runs in a subprocess of the worker; a crash,
a hang or wrong numbers are the candidate's result, and the worker lives on). Each worker
advertises the fingerprint of its device as a resource (`DeviceResources`), and a candidate
asks for the resource of the device the records are keyed by, so it runs only where that
device is, one at a time per worker. At most one candidate per worker is in flight: a worker
that dies (killed, its machine gone) costs only the candidate it was measuring, recorded as
`crashed` (the local cluster's scheduler allows no retry: `allowed-failures` 0), and the tune
goes on with the other workers (a local cluster's nanny restarts the dead one). Results come
back to the tuner, which alone writes the records database.

`DaskRunner` is both the tuner's builder (a candidate is built where it is measured, so the
builder only passes it on) and its runner.
"""

from __future__ import annotations

import copy
import dataclasses
import logging
import re
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Self

from einc.errors import RuntimeMissingError, SourceLocation, UsageError
from einc.tune.types import EARLY_STOP, BuildResult, Candidate, MeasureResult, Status, TuneTask

if TYPE_CHECKING:
    from distributed import Client, Future, LocalCluster
    from distributed.scheduler import Scheduler

    from einc.tune.measure import LocalRunner

RUNNERS = "local, dask-local or dask://HOST:PORT"
CONNECT_TIMEOUT_S = 10.0
"""How long `dask://` waits for its scheduler before the tune is refused."""
ORPHANED_S = 60.0
"""How long candidates wait while no worker of their device is in the cluster before the tune
stops (a local cluster's nanny restarts a dead worker in seconds)."""


@dataclass(frozen=True)
class RunnerSpec:
    """A `--runner` value: `local`, `dask-local`, or `dask` with the scheduler's address."""

    kind: str
    address: str | None = None

    @property
    def dask(self) -> bool:
        return self.kind != "local"


def parse_runner(text: str, loc: SourceLocation | None = None) -> RunnerSpec:
    """`local`, `dask-local` or `dask://HOST:PORT` (UsageError at `loc` otherwise)."""
    if text in ("local", "dask-local"):
        return RunnerSpec(text)
    match = re.fullmatch(r"dask://(\[[0-9A-Fa-f:.]+\]|[A-Za-z0-9_.-]+):(\d{1,5})", text)
    if match is None or not 0 < int(match.group(2)) < 65536:
        why = ("a dask:// runner is the scheduler's HOST:PORT, e.g. dask://10.0.0.5:8786" if text.startswith("dask://")
               else f"the runner is {RUNNERS}")  # fmt: skip
        raise UsageError(f"--runner '{text}': {why}", loc)
    return RunnerSpec("dask", f"tcp://{match.group(1)}:{int(match.group(2))}")


MeasureJob = Callable[[TuneTask, Candidate, Mapping[str, object], float], MeasureResult]
"""What a Dask task runs: (task, candidate, the runner's settings, the build's time limit) ->
the measurement (`einc.tune.dask_worker.measure_candidate`)."""


class DaskRunner:
    """Builds and measures candidates on a Dask cluster (see the module): `address` a
    scheduler's (`tcp://HOST:PORT`), or None for a LocalCluster of `workers` processes started
    here (closed with the runner). `device` is the fingerprint candidates must be measured on
    (default: this machine's for the task's target, the one the tuner records); `template`
    holds the measurement's settings (a LocalRunner's fields: threads, seed, repeats, ...),
    `job` replaces `measure_candidate` (to inject faults in tests). Errors reaching the
    cluster, or a cluster with no worker of the device, are EincErrors at `where` (the
    `--runner` option)."""

    def __init__(self, address: str | None = None, *, workers: int = 2, device: str | None = None,
                 template: LocalRunner | None = None, build_timeout_s: float = 120.0,
                 connect_timeout_s: float | None = None, job: MeasureJob | None = None,
                 where: SourceLocation | None = None):  # fmt: skip
        from einc.tune.measure import LocalRunner

        self.address = address
        self.workers = max(1, int(workers))
        self.device = device
        self.template = template or LocalRunner()
        self.build_timeout_s = build_timeout_s
        self.connect_timeout_s = CONNECT_TIMEOUT_S if connect_timeout_s is None else connect_timeout_s
        self.job = job
        self.where = where
        self._client: Client | None = None
        self._cluster: LocalCluster | None = None
        self._targets: tuple[str, ...] = ()
        self._capable: list[str] = []
        self._sticky: str | None = None
        self._owner = True

    @property
    def name(self) -> str:
        return self.address or f"a local Dask cluster of {self.workers} worker{'s' if self.workers > 1 else ''}"

    # ---- the builder's side: a candidate is built where it is measured --------------------------
    def build(self, task: TuneTask, candidates: Sequence[Candidate]) -> list[BuildResult]:
        return [BuildResult(c, Status.OK) for c in candidates]  # built by the Dask worker that measures it

    # ---- the runner's side ----------------------------------------------------------------------
    def set_best(self, best_s: float | None, factor: float = EARLY_STOP) -> None:
        self.template.set_best(best_s, factor)

    def reseeded(self, seed: int) -> DaskRunner:
        """This runner on the same cluster measuring on inputs of `seed`, timing every candidate
        in full (closing it leaves the cluster open)."""
        other = copy.copy(self)
        other.template = dataclasses.replace(self.template, seed=seed, cutoff_s=None)
        other._owner = False
        return other

    @property
    def parallelism(self) -> int:
        """Candidates measured at once: the workers of the device (before the first
        measurement, the workers asked for)."""
        return len(self._capable) or self.workers

    def device_of(self, task: TuneTask) -> str:
        if self.device is not None:
            return self.device
        from einc.tune.dask_worker import local_device

        return local_device(task.target)

    def start(self, task: TuneTask) -> None:
        """Reach the cluster and make sure it measures `task`'s device (an EincError at
        `where` otherwise): before any search."""
        self._ready(task)

    def run(self, task: TuneTask, builds: Sequence[BuildResult]) -> list[MeasureResult]:
        from einc.tune.dask_worker import device_resource, measure_candidate, runner_settings
        from einc.tune.measure import plain_task

        client = self._ready(task)
        resource = device_resource(self.device_of(task))
        settings = runner_settings(self.template)
        job = self.job or measure_candidate
        plain = plain_task(task)
        results: list[MeasureResult | None] = [None] * len(builds)
        waiting = []
        for i, build in enumerate(builds):
            if build.status is Status.OK:
                waiting.append(i)
            else:
                results[i] = MeasureResult(build.candidate, build.status, build.reason, build_s=build.seconds)
        running: dict[Future, int] = {}
        orphaned: float | None = None
        try:
            while waiting or running:
                capable = self._capable_workers(resource)
                while waiting and len(running) < max(1, len(capable)):
                    i = waiting.pop(0)
                    args = (job, plain, builds[i].candidate, settings, self.build_timeout_s)
                    if len(builds) == 1 and self._sticky in capable:  # the final rounds: on one worker
                        future = client.submit(*args, resources={resource: 1}, pure=False, workers=[self._sticky],
                                               allow_other_workers=True)  # fmt: skip
                    else:
                        future = client.submit(*args, resources={resource: 1}, pure=False)
                    running[future] = i
                done = self._wait(list(running), timeout=1.0)
                for future in done:
                    i = running.pop(future)
                    results[i] = self._collect(future, builds[i])
                if capable or done:
                    orphaned = None
                elif orphaned is None:
                    orphaned = time.monotonic()
                elif time.monotonic() - orphaned > ORPHANED_S:
                    raise RuntimeMissingError(
                        f"no worker of {self.name} has this device ({self.device_of(task)}) any more: none for "
                        f"{ORPHANED_S:g} s; the trials measured so far are recorded (--resume goes on)", self.where)
        except BaseException:
            for future in running:
                future.cancel()
            raise
        if len(builds) == 1 and results[0] is not None:
            worker = results[0].extra.get("worker")
            self._sticky = worker if isinstance(worker, str) else self._sticky
        return [r for r in results if r is not None]

    @staticmethod
    def _wait(futures: list[Future], timeout: float) -> list[Future]:
        """The futures done within `timeout` seconds (the first ones: polled, as a client that
        is not dask's default one has no `wait`)."""
        deadline = time.monotonic() + timeout
        while True:
            done = [f for f in futures if f.done()]
            if done or time.monotonic() >= deadline:
                return done
            time.sleep(0.01)

    def _collect(self, future: Future, build: BuildResult) -> MeasureResult:
        from distributed import KilledWorker

        candidate = build.candidate
        try:
            measured = future.result()
        except KilledWorker as err:
            last = getattr(err, "last_worker", None)
            where = f" ({getattr(last, 'address', last)})" if last is not None else ""
            return MeasureResult(candidate, Status.CRASHED, f"the Dask worker measuring it died{where}")
        except Exception as err:  # noqa: BLE001 - a task's failure is the candidate's result
            if self._client is not None and self._client.status not in ("running", "connecting"):
                raise RuntimeMissingError(f"lost the Dask scheduler at {self.name}: {err}; the trials measured so "
                                          "far are recorded (--resume goes on)", self.where) from None  # fmt: skip
            return MeasureResult(candidate, Status.INTERNAL, f"the Dask task failed: {type(err).__name__}: {err}")
        return measured

    def _capable_workers(self, resource: str) -> list[str]:
        assert self._client is not None
        workers = self._client.run_on_scheduler(_workers_with, resource)
        assert isinstance(workers, list), workers  # a synchronous client's answer
        return sorted(workers)

    # ---- the cluster ----------------------------------------------------------------------------
    def _ready(self, task: TuneTask) -> Client:
        """The client, connected, with the plugin advertising `task.target`'s device and at
        least one worker of the device."""
        from einc.tune.dask_worker import DeviceResources, device_resource, worker_report

        if self._client is None:
            self._client = self._connect()
        client = self._client
        device = self.device_of(task)
        if task.target not in self._targets:
            self._targets = (*self._targets, task.target)
            client.register_plugin(DeviceResources(self._targets))
        resource = device_resource(device)
        self._capable = self._capable_workers(resource)
        if self._capable:
            return client
        reports = client.run(worker_report, task.target)
        assert isinstance(reports, dict), reports  # a synchronous client's answer: {address: WorkerReport}
        if not reports:
            raise RuntimeMissingError(f"the Dask cluster at {self.name} has no workers", self.where)
        daemonic = [a for a, r in reports.items() if r["daemon"]]
        lines = [f"  {a}: {r['device']}" + (" (a daemonic process)" if r["daemon"] else "") +
                 (f", advertising {', '.join(r['resources'])}" if r["resources"] else "")
                 for a, r in sorted(reports.items())]  # fmt: skip
        why = f"no worker of the Dask cluster at {self.name} measures on this device: {device} ({device_resource(device)})"
        if daemonic:
            why += ("; a worker that is a daemonic process (dask's default) cannot start einc's build process: "
                    "start workers with DASK_DISTRIBUTED__WORKER__DAEMON=False")  # fmt: skip
        raise RuntimeMissingError(why + "; its workers:\n" + "\n".join(lines), self.where)

    def _connect(self) -> Client:
        try:
            from distributed import Client
        except ImportError as err:
            raise UsageError(f"--runner {'dask-local' if self.address is None else 'dask://'} needs dask.distributed "
                             f"({err}): pip install 'einc[dask]'", self.where) from None  # fmt: skip
        if self.address is not None:
            try:
                return Client(self.address, timeout=self.connect_timeout_s, set_as_default=False)
            except (OSError, TimeoutError) as err:
                raise UsageError(f"cannot reach the Dask scheduler at {self.address} in "
                                 f"{self.connect_timeout_s:g} s: {err}", self.where) from None  # fmt: skip
        from einc.tune.main_guard import check_main_guard

        check_main_guard("einc's Dask cluster")  # its worker processes ('spawn') import the main script again
        self._cluster = start_local_cluster(self.workers)
        return Client(self._cluster, set_as_default=False)

    def close(self) -> None:
        if not self._owner:
            return
        client, cluster, self._client, self._cluster = self._client, self._cluster, None, None
        self._targets, self._capable = (), []
        if client is not None:
            client.close()
        if cluster is not None:
            cluster.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _workers_with(resource: str, dask_scheduler: Scheduler) -> list[str]:
    """(On the scheduler) the workers advertising `resource`."""
    return [a for a, ws in dask_scheduler.workers.items() if ws.resources.get(resource, 0) >= 1]


def start_local_cluster(workers: int) -> LocalCluster:
    """A LocalCluster of `workers` worker processes of one thread, for einc's measurements:
    its scheduler's HTTP server on a free port (not 8787: two tuners may run at once), no memory limit (the measurement subprocess is not the worker), worker
    processes that are not daemonic (they start einc's build process: the setting is made in
    this process, whose nannies read it whenever they start a worker, a restart included),
    and a scheduler that gives a task no second worker after its worker died (the candidate
    is recorded as crashed)."""
    import dask.config
    from distributed import LocalCluster

    dask.config.set({"distributed.worker.daemon": False})
    with dask.config.set({"distributed.scheduler.allowed-failures": 0}):
        return LocalCluster(n_workers=workers, threads_per_worker=1, processes=True, memory_limit=0,
                            dashboard_address=":0", silence_logs=logging.ERROR)  # fmt: skip


def make_runner(spec: RunnerSpec, *, workers: int | None, template: LocalRunner, device: str | None = None,
                where: SourceLocation | None = None) -> DaskRunner:  # fmt: skip
    """The DaskRunner of a `dask-local` or `dask://` spec."""
    assert spec.dask, spec
    if spec.address is not None and workers is not None:
        raise UsageError(f"--workers sizes a local pool or a dask-local cluster; the workers of {spec.address} are "
                         "the ones started there (dask worker ...)", where)  # fmt: skip
    return DaskRunner(spec.address, workers=workers or 2, device=device, template=template, where=where)

