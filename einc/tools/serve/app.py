"""`einc serve`: the codegen service, a Starlette app on uvicorn. A framework plugin (or any
client) posts a program and gets the target's source and launch manifest back, without the
compiler or the target's toolchain on its side (Antares' "codegen service").

    POST /compile   {"ir", "input_dict", "target", "schedule"?, "extra_outputs"?, "use_records"?}
                    -> 200 {"source", "manifest", "record", "schedule_source", "schedule", "target",
                            "compile_s", "tuning"?}
                    -> 400 {"error": "<ir>:1:14: error: unknown tensor 'x'\n..."}  (a user's mistake)
                    -> 413 (body over --max-body), 504 (compile over --timeout), 500 (a bug in einc)
    POST /tune      {"ir", "input_dict", "target", "extra_outputs"?, "trials"}
                    -> 202 {"id", "state": "queued", ...}; 400 as /compile; 429 (queue full, Retry-After)
    GET  /tune/{id} {"id", "state": "queued" | "running" | "done" | "failed", "progress", "best", ...}
                    -> 404 for an id the service does not know
    GET  /health, / {"status": "ok", ...}
    GET  /targets   {"targets": [...], "default": "c"}

The request and answer are described in `einc.tools.serve.jobs`. Compiles run in a pool of worker
processes (pebble), one request per worker at a time: requests are compiled in parallel up to
the pool's size (later ones wait for a worker), and a compile over the time limit is cut off
by killing its worker, which the pool replaces. The workers are forked from a forkserver that
has compiled a tiny program for every target (`einc.tools.serve.warm`), so each starts warm. Tuning
records are used as `einc compile` uses them: the best record for the program on this
machine's device, from `--db` or `$EINC_TUNING_DB`; `schedule_source` says which schedule an
answer has, and `tuning` names a job tuning the program now (a compile never waits for one).

Tuning jobs (`einc.tools.serve.tuning`) are checked in a compile worker (the program compiled
once: a mistake is a located 400), then queued per target and device and run one at a time
on each, every job in its own process; their records go to the same database.
"""

from __future__ import annotations

import asyncio
import errno
import json
import logging
import multiprocessing
import os
import socket
import sys
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass

from pebble import ProcessExpired, ProcessPool
from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from einc.errors import EincError, SourceLocation, UsageError, einc_version
from einc.tools.serve.jobs import (
    IR_FILE, REQUEST_FILE, CompileRequest, JobResult, RequestError, compile_job, parse_request, parse_tune_request,
    tune_check,
)  # fmt: skip
from einc.tools.serve.tuning import TuneJob, TuneQueues

LOG = logging.getLogger("einc.serve")
DISCONNECT_POLL_S = 0.25
"""How often a waiting request checks that its client is still there (a compile nobody
waits for is stopped)."""
DRAIN_LIMIT = 64 << 20
"""An oversize body is read (and dropped) up to this many bytes before the 413 is sent, so
that a client writing all of its body before reading the answer gets the answer."""


@dataclass(frozen=True)
class Settings:
    workers: int = 2
    """Worker processes: requests compiled at once."""
    timeout_s: float = 30.0
    """Longest compile; a longer one is cut off (504)."""
    max_body: int = 1 << 20
    """Largest request body in bytes (413 above)."""
    db: str | None = None
    """The tuning database (None: `$EINC_TUNING_DB`, else the user cache)."""
    max_connections: int = 256
    """Connections served at once (uvicorn's `limit_concurrency`); more are answered 503."""
    tune_queue: int = 8
    """Tuning jobs that may wait per target and device (past them, 429)."""
    max_trials: int = 1000
    """The most trials one tuning job may ask for (400 above)."""
    tune_workers: int | None = None
    """Build processes of a tuning job (None: the tuner's default, cores, at most 4)."""


class BodyTooLarge(Exception):
    pass


class CodegenService:
    """The app and its worker pool (which lives as long as the app runs: its lifespan).
    `on_ready`: a line printed to stderr once the pool is up."""

    def __init__(self, settings: Settings, on_ready: str | None = None):
        self.settings = settings
        self.on_ready = on_ready
        self.pool: ProcessPool | None = None
        self.tunes = TuneQueues(settings.tune_queue, settings.db, settings.tune_workers)
        routes = [
            Route("/", self.health, methods=["GET"]),
            Route("/health", self.health, methods=["GET"]),
            Route("/targets", self.targets, methods=["GET"]),
            Route("/compile", self.compile, methods=["POST"]),
            Route("/tune", self.tune, methods=["POST"]),
            Route("/tune/{id}", self.tune_status, methods=["GET"]),
        ]
        handlers = {HTTPException: http_error, Exception: unexpected_error}
        self.app = Starlette(routes=routes, lifespan=self.lifespan, exception_handlers=handlers)

    @asynccontextmanager
    async def lifespan(self, _: Starlette) -> AsyncIterator[None]:
        context = multiprocessing.get_context("forkserver")
        context.set_forkserver_preload(["einc.tools.serve.warm"])
        self.pool = ProcessPool(max_workers=self.settings.workers, context=context)
        # Ready means warm: the forkserver has run the warm-up and forked a worker.
        await asyncio.wrap_future(self.pool.schedule(os.getpid))
        if self.on_ready is not None:
            print(self.on_ready, file=sys.stderr, flush=True)
        try:
            yield
        finally:
            await self.tunes.stop()  # before the pool: a job is started from its forkserver
            self.pool.stop()
            self.pool.join(timeout=10)

    async def health(self, _: Request) -> Response:
        s = self.settings
        return JSONResponse({"status": "ok", "service": "einc codegen", "einc": einc_version(),
                             "workers": s.workers, "timeout_s": s.timeout_s, "max_body_bytes": s.max_body,
                             "tune_queue": s.tune_queue, "max_trials": s.max_trials})  # fmt: skip

    async def targets(self, _: Request) -> Response:
        from einc.targets import get_all_targets

        return JSONResponse({"targets": sorted(get_all_targets()), "default": "c"})

    async def compile(self, request: Request) -> Response:
        body = await self._body(request)
        if isinstance(body, Response):
            return body
        try:
            job = parse_request(body)
        except EincError as err:
            return error(400, err.render())
        result = await self._in_worker(request, compile_job, (job, self.settings.db), job)
        if isinstance(result, Response):
            return result
        if result.status == 200 and result.task_key is not None:
            tuning = self.tunes.active(result.task_key, job.target)
            if tuning is not None:  # the answer has the best so far; a better one may come
                result.body["tuning"] = {"id": tuning.id, "state": tuning.state, "progress": tuning.progress()}
        return Answer(result.body, status_code=result.status)

    async def tune(self, request: Request) -> Response:
        """`POST /tune`: the request checked (its program compiled once, in a worker), then
        queued; 202 with the job's id at once."""
        body = await self._body(request)
        if isinstance(body, Response):
            return body
        try:
            tune_request = parse_tune_request(body, self.settings.max_trials)
        except EincError as err:
            return error(400, err.render())
        checked = await self._in_worker(request, tune_check, (tune_request.program,), tune_request.program)
        if isinstance(checked, Response):
            return checked
        if checked.status != 200:
            return Answer(checked.body, status_code=checked.status)
        if self.tunes.stopping:
            return error(503, "the service is shutting down: it starts no tuning job")
        job = TuneJob.new(tune_request, checked.body)
        retry_after = self.tunes.submit(job)
        if retry_after is not None:
            message = (f"the tuning queue for {job.queue} is full: a job is running and {self.settings.tune_queue} "
                       f"wait (einc serve --tune-queue); ask again in about {retry_after} s")  # fmt: skip
            return Answer({"error": message, "retry_after_s": retry_after}, status_code=429,
                          headers={"Retry-After": str(retry_after)})  # fmt: skip
        LOG.info("tune job %s queued: %d trials for %s", job.id, tune_request.trials, job.queue)
        return Answer(job.to_json(self.tunes.position(job)), status_code=202, headers={"Location": f"/tune/{job.id}"})

    async def tune_status(self, request: Request) -> Response:
        job = self.tunes.get(request.path_params["id"])
        if job is None:
            return error(404, f"no tuning job '{request.path_params['id']}' (ids are answered by POST /tune; the "
                              "service forgets a job when it restarts, and its oldest finished ones)")  # fmt: skip
        return Answer(job.to_json(self.tunes.position(job)))

    async def _body(self, request: Request) -> bytes | Response:
        """The request's body, or the 413 for one over --max-body."""
        settings = self.settings
        try:
            return await read_body(request, settings.max_body)
        except BodyTooLarge:
            message = f"the request body is larger than the service's limit of {settings.max_body} bytes (einc serve --max-body)"
            return error(413, RequestError(message, SourceLocation(REQUEST_FILE, 1, 1)).render())

    async def _in_worker(self, request: Request, work: Callable[..., JobResult], args: tuple[object, ...],
                         job: CompileRequest) -> JobResult | Response:  # fmt: skip
        """`work(*args)` in a compile worker: its result, or the error answer (504 over the
        time limit, 499 when the client went away, 500 when the worker died)."""
        settings = self.settings
        assert self.pool is not None, "the app's lifespan starts the pool"
        future = self.pool.schedule(work, args=args, timeout=settings.timeout_s)
        waiter = asyncio.wrap_future(future)
        try:
            while not waiter.done():
                await asyncio.wait({waiter}, timeout=DISCONNECT_POLL_S)
                if not waiter.done() and await request.is_disconnected():
                    future.cancel()  # pebble stops the worker running it, and replaces it
                    LOG.info("the client went away: its %s compile was stopped", job.target)
                    return Response(status_code=499)  # nobody reads it (nginx's "client closed request")
            result: JobResult = waiter.result()
        except TimeoutError:
            LOG.warning("a %s compile took longer than %g s and was stopped", job.target, settings.timeout_s)
            message = (f"compiling took longer than the service's limit of {settings.timeout_s:g} s "
                       "(einc serve --timeout) and was stopped")  # fmt: skip
            return error(504, EincError(message, SourceLocation(IR_FILE, 1, 1, 1, job.ir)).render())
        except ProcessExpired as exc:  # the worker died (a signal, out of memory)
            LOG.error("a compile worker died (exit code %s) compiling for %s:\n%s", exc.exitcode, job.target, job.ir)
            return error(500, f"internal compiler error: the compile worker died (exit code {exc.exitcode})")
        except Exception as exc:  # noqa: BLE001 - the pool's own failure: a bug, logged, a 500
            LOG.exception("the compile pool failed on a %s request", job.target)
            return error(500, f"internal compiler error in the service: {type(exc).__name__}: {exc}")
        if result.log is not None:
            LOG.error("internal compiler error:\n%s", result.log)
        return result


async def http_error(_: Request, exc: Exception) -> Response:
    """404, 405, ... as JSON like the service's other errors."""
    assert isinstance(exc, HTTPException)
    return error(exc.status_code, exc.detail)


async def unexpected_error(_: Request, exc: Exception) -> Response:
    """A bug in the service itself (not in a compile): a JSON 500 like the others (Starlette
    logs the traceback)."""
    return error(500, f"internal compiler error in the service: {type(exc).__name__}: {exc}")


class Answer(JSONResponse):
    """JSON as Starlette writes it, except that a lone surrogate in a string (which UTF-8
    cannot encode) is written as its `\\udXXX` escape instead of failing the answer."""

    def render(self, content: object) -> bytes:
        return json.dumps(content, ensure_ascii=False, allow_nan=False, indent=None,
                          separators=(",", ":")).encode("utf-8", "backslashreplace")  # fmt: skip


def error(status: int, text: str) -> Response:
    return Answer({"error": text}, status_code=status)


async def read_body(request: Request, limit: int) -> bytes:
    """The request's body, or BodyTooLarge past `limit` bytes (at once when the declared
    length says so and the client waits for a go-ahead; else after reading the rest away)."""
    declared = request.headers.get("content-length", "")
    if declared.isdigit() and int(declared) > limit and request.headers.get("expect", "").lower() == "100-continue":
        raise BodyTooLarge
    chunks: list[bytes] = []
    size = 0
    async for chunk in request.stream():
        size += len(chunk)
        if size <= limit:
            chunks.append(chunk)
        elif size > DRAIN_LIMIT:
            break
    if size > limit:
        raise BodyTooLarge
    return b"".join(chunks)


# ---- the command -----------------------------------------------------------------------------
def listen(host: str, port: int, host_at: SourceLocation, port_at: SourceLocation) -> socket.socket:
    """A socket listening on host:port, or a UsageError at the option to blame."""
    try:
        family, kind, proto, _, address = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM,
                                                             flags=socket.AI_PASSIVE)[0]  # fmt: skip
    except (OSError, UnicodeError) as err:
        raise UsageError(f"cannot listen on {host}: {getattr(err, 'strerror', None) or err}", host_at) from None
    sock = socket.socket(family, kind, proto)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(address)
        sock.listen(128)
    except OSError as err:
        sock.close()
        blame = port_at if err.errno in (errno.EADDRINUSE, errno.EACCES) else host_at
        raise UsageError(f"cannot listen on {host}:{port}: {err.strerror or err}", blame) from None
    return sock


def serve_command(host: str, port: int, settings: Settings, where: dict[str, SourceLocation]) -> int:
    """`einc serve`: listen, then serve until interrupted (SIGINT/SIGTERM: running tuning
    jobs are stopped, their trials kept). `where` locates the options ("host", "port",
    "workers", "timeout", "max_body", "tune_queue", "max_trials", "tune_workers") for errors."""
    import uvicorn

    if not 0 <= port <= 65535:
        raise UsageError(f"--port must be from 0 to 65535, got {port}", where["port"])
    if settings.workers < 1:
        raise UsageError(f"--workers must be at least 1, got {settings.workers}", where["workers"])
    if not settings.timeout_s > 0:
        raise UsageError(f"--timeout must be more than 0 seconds, got {settings.timeout_s:g}", where["timeout"])
    if settings.max_body < 1:
        raise UsageError(f"--max-body must be at least 1 byte, got {settings.max_body}", where["max_body"])
    if settings.tune_queue < 0:
        raise UsageError(f"--tune-queue must be 0 or more, got {settings.tune_queue}", where["tune_queue"])
    if settings.max_trials < 1:
        raise UsageError(f"--max-trials must be at least 1, got {settings.max_trials}", where["max_trials"])
    if settings.tune_workers is not None and settings.tune_workers < 1:
        raise UsageError(f"--tune-workers must be at least 1, got {settings.tune_workers}", where["tune_workers"])
    sock = listen(host, port, where["host"], where["port"])
    bound_host, bound_port = sock.getsockname()[:2]
    url = f"http://{f'[{bound_host}]' if ':' in bound_host else bound_host}:{bound_port}"
    workers = f"{settings.workers} worker{'s' if settings.workers != 1 else ''}"
    ready = (f"einc serve: listening on {url} ({workers}, {settings.timeout_s:g} s per compile, "
             f"bodies up to {settings.max_body} bytes; POST {url}/compile, POST {url}/tune)")  # fmt: skip
    logging.basicConfig(level=logging.INFO, format="%(levelname)s:     %(name)s: %(message)s")
    service = CodegenService(settings, on_ready=ready)
    config = uvicorn.Config(service.app, log_level="info", timeout_graceful_shutdown=5,
                            limit_concurrency=settings.max_connections)  # fmt: skip
    try:
        uvicorn.Server(config).run(sockets=[sock])
    finally:
        sock.close()
    return 0


def default_workers() -> int:
    """Compile workers by default: the cores this process may use, at most 4."""
    return max(1, min(4, len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1))
