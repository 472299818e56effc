"""The Dask worker's side of measurement on a cluster (`einc.tune.cluster`): the plugin that
advertises the worker's device as a resource, and the task that builds and measures one
candidate there. Imported on the workers (by unpickling) and by the tuner (to register the
plugin); it needs `dask.distributed`.

A task builds its candidate with the worker's own `LocalBuilder` (a pool of one build process,
with its time limit) and measures it with the worker's own `LocalRunner` (the isolated
measurement subprocess: outputs checked against the float64 reference, crashes, hangs and
wrong numbers reported as results), exactly as `einc tune` does on one machine; the Dask worker
process itself runs no candidate's code. Both live as long as the worker process and die with
it (their lifeline pipes: `einc.tune.measure.die_with_parent`)."""

from __future__ import annotations

import asyncio
import dataclasses
import multiprocessing
import threading
from collections.abc import Mapping
from typing import TYPE_CHECKING, TypedDict

from distributed import WorkerPlugin, get_worker

from einc.tune.measure import LocalBuilder, LocalRunner
from einc.tune.types import Candidate, MeasureResult, TuneTask

if TYPE_CHECKING:
    from distributed import Worker

    from einc.compiler.records import RecordContext

RESOURCE_PREFIX = "einc-device-"


def device_resource(device: str) -> str:
    """The Dask resource naming `device` (a device fingerprint, `einc.compiler.records`):
    `einc-device-` and 16 hex digits of its SHA-256 (a fingerprint holds spaces and commas,
    which `dask worker --resources` cannot take)."""
    import hashlib

    return RESOURCE_PREFIX + hashlib.sha256(device.encode()).hexdigest()[:16]


def context_name(context: RecordContext) -> str:
    """A record context as the device a worker advertises: its device fingerprint and the
    digest of the whole context (ISA flags or driver, compiler, flags, search space), so a
    candidate is measured only where every field of its records' key holds."""
    return f"{context.device} [context {context.key}]"


def local_device(target: str) -> str:
    """This machine's record context for `target` as a device name (what the tuner records
    under and a worker advertises)."""
    from einc.compiler.records import record_context
    from einc.targets import get_target

    return context_name(record_context(get_target(target)))


_ADVERTISED: set[str] = set()
"""The device resources this process's plugin added (any other `einc-device-*` resource was
given on the worker's command line)."""


class DeviceResources(WorkerPlugin):
    """Advertises, on every worker (those that join later included), the resource of its
    device for each target tuned through the cluster: `{device_resource(fingerprint): 1}`, so
    a candidate is measured only on a worker of its device, one at a time per worker. A worker
    started with `--resources einc-device-...=1` keeps what it was given and gets nothing
    more; a daemonic worker process (dask's default) gets nothing: it cannot start the build
    process (`worker_report` says why)."""

    name = "einc-device-resources"
    idempotent = False

    def __init__(self, targets: tuple[str, ...]):
        self.targets = targets

    async def setup(self, worker: Worker) -> None:
        given = {r for r, q in worker.state.total_resources.items() if r.startswith(RESOURCE_PREFIX) and q > 0}
        given -= _ADVERTISED
        if given or multiprocessing.current_process().daemon:
            return
        devices = await asyncio.to_thread(lambda: [local_device(t) for t in self.targets])
        new = {device_resource(d): 1.0 for d in devices if device_resource(d) not in worker.state.total_resources}
        if new:
            _ADVERTISED.update(new)
            await worker.set_resources(**new)

    def teardown(self, worker: Worker) -> None:
        """When the worker closes (not when the plugin is replaced): its builder and runners
        closed, their processes ended (they would die with the worker anyway, a moment later)."""
        if worker.status.name in ("closing", "closing_gracefully", "closed", "failed"):
            close_local()


class WorkerReport(TypedDict):
    """`worker_report`'s answer."""

    device: str
    resources: list[str]
    daemon: bool


def close_local() -> None:
    """This worker's builder and runners closed (their processes ended), unless a task is
    using them (they die with the worker process then: their lifelines)."""
    global _BUILDER
    if not _LOCK.acquire(blocking=False):
        return
    try:
        builder, _BUILDER = _BUILDER, None
        runners = list(_RUNNERS.values())
        _RUNNERS.clear()
    finally:
        _LOCK.release()
    if builder is not None:
        builder.close()
    for runner in runners:
        runner.close()


def worker_report(target: str, dask_worker: Worker) -> WorkerReport:
    """What the tuner checks of a worker (`Client.run`): its fingerprint for `target`, its
    einc device resources and whether it is a daemonic process."""
    return {
        "device": local_device(target),
        "resources": sorted(r for r, q in dask_worker.state.total_resources.items()
                            if r.startswith(RESOURCE_PREFIX) and q > 0),
        "daemon": bool(multiprocessing.current_process().daemon),
    }  # fmt: skip


_LOCK = threading.Lock()
_BUILDER: LocalBuilder | None = None
_RUNNERS: dict[tuple[object, ...], LocalRunner] = {}


def _local(settings: Mapping[str, object], build_timeout_s: float) -> tuple[LocalBuilder, LocalRunner]:
    """This worker's builder and a runner with `settings` (LocalRunner's fields): one runner
    (one measurement subprocess) per seed and thread count, whose other fields are set per call."""
    global _BUILDER
    if _BUILDER is None:
        _BUILDER = LocalBuilder(workers=1, timeout_s=build_timeout_s)
    _BUILDER.timeout_s = build_timeout_s
    key = (settings["seed"], settings["threads"])
    runner = _RUNNERS.get(key)
    if runner is None:
        runner = _RUNNERS[key] = LocalRunner()
    for name, value in settings.items():
        setattr(runner, name, value)
    return _BUILDER, runner


def measure_candidate(task: TuneTask, candidate: Candidate, settings: Mapping[str, object],
                      build_timeout_s: float) -> MeasureResult:  # fmt: skip
    """The Dask task: `candidate` built and measured on this worker (one at a time per worker
    process), as on one machine; `extra["worker"]` is the worker's address."""
    with _LOCK:
        builder, runner = _local(settings, build_timeout_s)
        (build,) = builder.build(task, [candidate])
        (measured,) = runner.run(task, [build])
    return dataclasses.replace(measured, extra={**measured.extra, "worker": get_worker().address})


def runner_settings(runner: LocalRunner) -> dict[str, object]:
    """`runner`'s fields (what `measure_candidate` sets its worker's runner to)."""
    return {f.name: getattr(runner, f.name) for f in dataclasses.fields(runner) if f.init}


def main(argv: list[str] | None = None) -> int:
    """`python -m einc.tune.dask_worker [--target T ...]`: the `dask worker --resources` flag of
    this machine's device for each target (for a worker that must measure only on it)."""
    import argparse
    import sys

    from einc.errors import EincError

    parser = argparse.ArgumentParser(prog="python -m einc.tune.dask_worker",
                                     description="print this machine's einc device resource for dask worker")
    parser.add_argument("-t", "--target", action="append", help="target (repeatable; default: c)")
    args = parser.parse_args(argv)
    targets = args.target or ["c"]
    try:
        devices = {t: local_device(t) for t in targets}
    except EincError as err:
        print(err.render(), file=sys.stderr)
        return 1
    print("--resources " + ",".join(dict.fromkeys(f"{device_resource(d)}=1" for d in devices.values())))
    for target, device in devices.items():
        print(f"# {target}: {device}")
    return 0


if __name__ == "__main__":
    import sys

    sys.exit(main())
