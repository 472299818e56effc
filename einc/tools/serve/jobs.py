"""The codegen service's work, apart from HTTP: a `POST /compile` body checked into a
`CompileRequest`, and `compile_job`, which runs in the service's worker processes and answers
with an HTTP status and a JSON body.

A request:

    {"ir": "output0[N] = input0[N] + input1[N]",              Antares IR or a .ein program
     "input_dict": {"input0": {"dtype": "float32", "shape": [1024]}, ...},   as einc.compile
     "target": "cuda",                                         default "c"
     "schedule": "transform.named_sequence ...",               optional: a schedule script,
                                                               "none" or "default"
     "extra_outputs": ["t0"],                                  optional, as einc.compile
     "use_records": true,                                      optional (default true)
     "model": "h100"}                                          optional: a device of the performance
                                                               model whose modelled records (`einc tune
                                                               --model`) stand in where no measured one
                                                               applies (a service without the GPU)

The answer (200): `source`, `manifest` (what `einc compile -o OUT` writes to OUT.json for a
device target: buffers, kernels in launch order with their argument order, grid and block;
for C, the function's name, prototype and argument order), `record` (the tuning record whose
schedule was applied, or null), `schedule_source` (which schedule that is: `record 12
(tuned)`, `record 12 (the default schedule, kept by the tuner)`, `records 12, 15 (of 2 of
the program's 3 tasks)`, `default`, `none` or `request`), `schedule` (the text of the schedule applied, or null), `target` and `compile_s`. A user's mistake is 400 with `error`, the located
`file:line:col: error: ...` text: the request itself is `<request>`, the IR `<ir>`, the
schedule `<schedule>`. A bug in einc is 500 with the error's text (the reproducer goes to
the service's log, not to the client).

A tuning request (`POST /tune`, `parse_tune_request`) is a compile request without
`schedule` and `use_records` (the tuner searches the schedules) and with `"trials"`, a whole
number from 1 to the server's `--max-trials`; `tune_check` compiles its program once in a
worker (a mistake is the same located 400) and names the device its job measures on.

`warm_up` runs in the service's forkserver (`einc.tools.serve.warm`) before it forks the workers,
so each worker, one started after a timed-out one included, starts with the compiler loaded.
"""

from __future__ import annotations

import json
import math
import re
import sys
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import TypeVar, cast

from einc.compiler.driver import Compilation, resolve_target
from einc.compiler.records import Record, program_key, record_context
from einc.errors import EincError, InternalCompilerError, SourceLocation
from einc.runtime.manifest import Buffer
from einc.runtime.signature import KernelSignature
from einc.schedule.choice import Kind

REQUEST_FILE = "<request>"
IR_FILE = "<ir>"
FIELDS = ("ir", "input_dict", "target", "schedule", "extra_outputs", "use_records", "model")
TUNE_FIELDS = ("ir", "input_dict", "target", "extra_outputs", "trials")
JSON = dict[str, object]
T = TypeVar("T")
MAX_SHOWN_LINE = 400
MAX_DEPTH = 32
"""The deepest nesting of arrays and objects a request may have (a compile request has 4)."""
_TOKENS = re.compile(r'"(?:[^"\\]|\\.)*"|[\[\]{}]|-?\d+(?:\.\d+)?(?:[eE][-+]?\d+)?')
"""A JSON text's strings, brackets and numbers, in order."""
_ESCAPES = re.compile(r"\\(?:u([0-9a-fA-F]{4})|.)")


class RequestError(EincError):
    """A compile request the service cannot use: not JSON, a missing or unknown field, a
    value of the wrong type, a body over the size limit, nested too deep, an integer Python
    does not read, a lone surrogate."""


@dataclass(frozen=True)
class CompileRequest:
    ir: str
    input_dict: object = None  # checked by the frontend, with located errors
    target: str = "c"
    schedule: str | None = None
    extra_outputs: list[str] | None = None
    use_records: bool = True
    model: str | None = None


@dataclass(frozen=True)
class TuneRequest:
    """A `POST /tune` body: the program (as a compile request with the default schedule)
    and how many candidates to measure."""

    program: CompileRequest
    trials: int


@dataclass(frozen=True)
class JobResult:
    """A worker's answer: the HTTP status, the JSON body, and what the server should log
    (an internal error's reproducer), if anything; `task_key`, the program's key in the
    tuning records, when it was compiled."""

    status: int
    body: JSON
    log: str | None = None
    task_key: str | None = None


# ---- the request ---------------------------------------------------------------------------
def parse_request(body: bytes) -> CompileRequest:
    """The compile request in `body` (JSON), or a RequestError located in the body's text
    (a TargetError for an unknown target)."""
    fields, text = _fields(body, FIELDS)
    return _program(fields, text)


def parse_tune_request(body: bytes, max_trials: int) -> TuneRequest:
    """The tuning request in `body` (JSON): a compile request's fields but `schedule` and
    `use_records`, and `trials` from 1 to `max_trials`; or a located RequestError."""
    fields, text = _fields(body, TUNE_FIELDS, refused=("schedule", "use_records"))
    what = f"a whole number from 1 to {max_trials}"
    if "trials" not in fields:
        raise RequestError(f"the tuning request has no 'trials' (how many candidates to measure: {what})",
                           _at(text, 1, 1, 1))  # fmt: skip
    trials = fields["trials"]
    if not isinstance(trials, int) or isinstance(trials, bool):
        shown = json.dumps(trials) if isinstance(trials, float) else _json_type(trials)
        raise RequestError(f"'trials' is {what}, not {shown}", _key_location(text, "trials"))
    if not 1 <= trials <= max_trials:
        raise RequestError(f"'trials' must be from 1 to {max_trials} (the server's --max-trials), got {trials}",
                           _key_location(text, "trials"))  # fmt: skip
    return TuneRequest(_program(fields, text), trials)


def _fields(body: bytes, known: tuple[str, ...], refused: tuple[str, ...] = ()) -> tuple[JSON, str]:
    """The fields of the JSON object in `body` and its text, each field one of `known` (a
    located RequestError for any other: `refused` ones are another endpoint's)."""
    try:
        text = body.decode("utf-8")
    except UnicodeDecodeError as err:
        raise RequestError(f"the request body is not UTF-8 text: {err}", SourceLocation(REQUEST_FILE, 1, 1)) from None
    try:
        data = json.loads(text)
    except json.JSONDecodeError as err:
        raise RequestError(
            f"the request body is not JSON: {err.msg}", _at(text, err.lineno, err.colno, 1)
        ) from None
    except RecursionError:  # nested past Python's recursion limit: past MAX_DEPTH too
        raise _too_deep(text) from None
    except ValueError:  # Python's limit on the digits of an integer
        raise _too_long_number(text) from None
    _check_values(data, text)
    if not isinstance(data, dict):
        raise RequestError(
            f'the request body is a JSON object like {{"ir": ..., "input_dict": ..., "target": ...}}, '
            f"not {_json_type(data)}",
            _at(text, 1, 1, 1),
        )
    fields = cast(JSON, data)
    unknown = [k for k in fields if k not in known]
    if unknown and unknown[0] in refused:
        raise RequestError(
            f"a tuning request takes no '{unknown[0]}': the tuner searches the schedules, and its best "
            f"is what POST /compile then applies (the fields are {', '.join(known)})",
            _key_location(text, unknown[0]),
        )
    if unknown:
        raise RequestError(
            f"unknown field '{unknown[0]}' (the fields are {', '.join(known)})", _key_location(text, unknown[0])
        )
    return fields, text


def _program(fields: JSON, text: str) -> CompileRequest:
    """The compile request of a request's checked `fields` (its JSON `text`, for errors)."""
    if "ir" not in fields:
        raise RequestError(
            "the request has no 'ir' (the program: Antares IR with 'input_dict', or a .ein program)",
            _at(text, 1, 1, 1),
        )
    ir = _typed(fields, "ir", str, "a string", text)
    target = _typed(fields, "target", str, "a string such as \"c\" or \"cuda\"", text, "c")
    schedule = _typed(fields, "schedule", str, 'a schedule script, "none" or "default"', text, None)
    use_records = _typed(fields, "use_records", bool, "true or false", text, True)
    extra = fields.get("extra_outputs")
    if isinstance(extra, str):
        extra = [extra]
    if extra is not None and not (isinstance(extra, list) and all(isinstance(x, str) for x in extra)):
        raise RequestError(
            f"'extra_outputs' is a list of tensor names, not {_json_type(extra)}", _key_location(text, "extra_outputs")
        )
    resolve_target(target, _key_location(text, "target"))  # an unknown target: a TargetError listing them
    model = _typed(fields, "model", str, 'a device name such as "h100"', text, None)
    if model is not None:
        from einc.perfmodel.devices import DEVICES, get_device

        if "/" in model or model.endswith(".json"):  # no files of the server's named by a client
            raise RequestError(f"'model' names a built-in device ({', '.join(sorted(DEVICES))})", _key_location(text, "model"))
        get_device(model, _key_location(text, "model"))
    return CompileRequest(ir, fields.get("input_dict"), target, schedule, cast("list[str] | None", extra), use_records,
                          model)  # fmt: skip


def _check_values(data: object, text: str) -> None:
    """A RequestError for what JSON allows but a request cannot hold: arrays and objects
    nested deeper than MAX_DEPTH, strings with a lone surrogate (`\\ud800`: no Unicode
    character, so neither a program nor a name). Iterative: the data may be ~1000 deep."""
    stack: list[tuple[object, int, str | None]] = [(data, 1, None)]
    while stack:
        value, depth, key = stack.pop()
        if isinstance(value, dict | list):
            if depth > MAX_DEPTH:
                raise _too_deep(text)
            items = cast(JSON, value).items() if isinstance(value, dict) else ((None, v) for v in cast(list[object], value))
            for k, v in items:
                if k is not None:
                    _check_string(k, key, text)
                stack.append((v, depth + 1, key if key is not None or k is None else k))
        elif isinstance(value, str):
            _check_string(value, key, text)


def _check_string(value: str, key: str | None, text: str) -> None:
    try:
        value.encode("utf-8")
    except UnicodeEncodeError as err:
        code = f"\\u{ord(value[err.start]):04x}"
        where = f"'{key}'" if key is not None else "the request"
        found = _lone_surrogate(text)
        raise RequestError(
            f"{where} holds a lone surrogate {code}, which is no Unicode character (JSON writes a "
            "character beyond U+FFFF as a high surrogate \\ud800-\\udbff followed by a low one "
            "\\udc00-\\udfff)",
            _offset_at(text, found, 6) if found is not None else _key_location(text, key or ""),
        ) from None


def _lone_surrogate(text: str) -> int | None:
    """The offset of the first `\\uXXXX` escape in `text` that is a surrogate without its pair."""
    pending: int | None = None  # a high surrogate's escape, waiting for its low one
    for escape in _ESCAPES.finditer(text):
        code = int(escape.group(1), 16) if escape.group(1) else -1
        if pending is not None:
            if 0xDC00 <= code <= 0xDFFF and escape.start() == pending + 6:
                pending = None
                continue
            return pending
        if 0xD800 <= code <= 0xDBFF:
            pending = escape.start()
        elif 0xDC00 <= code <= 0xDFFF:
            return escape.start()
    return pending


def _too_deep(text: str) -> RequestError:
    """The error for a body nested deeper than MAX_DEPTH, at the first bracket that is."""
    depth = 0
    for token in _TOKENS.finditer(text):
        bracket = token.group()
        if bracket in "[{":
            depth += 1
            if depth > MAX_DEPTH:
                what = "arrays" if bracket == "[" else "objects"
                return RequestError(
                    f"the request nests {what} more than {MAX_DEPTH} deep (a compile request needs 4 levels)",
                    _offset_at(text, token.start(), 1),
                )
        elif bracket in "]}":
            depth -= 1
    return RequestError(f"the request nests arrays or objects more than {MAX_DEPTH} deep", _at(text, 1, 1, 1))


def _too_long_number(text: str) -> RequestError:
    """The error for a number with more digits than Python reads (sys.get_int_max_str_digits)."""
    limit = sys.get_int_max_str_digits()
    for token in _TOKENS.finditer(text):
        number = token.group().lstrip("-")
        if number[:1].isdigit() and number.isdigit() and len(number) > limit:
            return RequestError(
                f"the request has an integer of {len(number)} digits; the service reads integers of "
                f"at most {limit} digits", _offset_at(text, token.start(), len(token.group())),
            )  # fmt: skip
    return RequestError(f"the request has an integer of more than {limit} digits", _at(text, 1, 1, 1))


def _offset_at(text: str, offset: int, length: int) -> SourceLocation:
    """The place in the request's text at `offset`."""
    line = text.count("\n", 0, offset) + 1
    return _at(text, line, offset - (text.rfind("\n", 0, offset) + 1) + 1, length)


def _typed(fields: JSON, key: str, kind: type[T], what: str, text: str, default: object = ...) -> T:
    """`fields[key]` when it is a `kind` (or null/absent with a default)."""
    value = fields.get(key)
    if value is None and default is not ...:
        return cast(T, default)
    if not isinstance(value, kind) or (kind is not bool and isinstance(value, bool)):
        raise RequestError(f"'{key}' is {what}, not {_json_type(value)}", _key_location(text, key))
    return value


def _json_type(value: object) -> str:
    names = {dict: "an object", list: "an array", str: "a string", bool: "a boolean", int: "a number",
             float: "a number", type(None): "null"}  # fmt: skip
    return names.get(type(value), type(value).__name__)


def _key_location(text: str, key: str) -> SourceLocation:
    """Where `"key":` first appears in the request's text (its start when it does not)."""
    found = re.search(rf'"{re.escape(key)}"\s*:', text)
    if found is None:
        return _at(text, 1, 1, 1)
    line = text.count("\n", 0, found.start()) + 1
    col = found.start() - (text.rfind("\n", 0, found.start()) + 1) + 1
    return _at(text, line, col, len(key) + 2)


def _at(text: str, line: int, col: int, length: int) -> SourceLocation:
    """A place in the request's text, shown under the error when its line is short enough
    to read (a request is often one long line)."""
    lines = text.splitlines()
    shown = 0 < line <= len(lines) and len(lines[line - 1]) <= MAX_SHOWN_LINE
    return SourceLocation(REQUEST_FILE, line, col, length, text if shown else None)


# ---- the work (in a worker process) ----------------------------------------------------------
def compile_job(request: CompileRequest, db: str | None) -> JobResult:
    """Compile `request` to source and manifest (never builds or runs it: no runtime needed)."""
    start = time.perf_counter()

    def answer(comp: Compilation) -> JobResult:
        source = comp.source_text()
        body: JSON = {
            "target": request.target,
            "source": source,
            "manifest": manifest_of(comp),
            "record": record_json(comp),
            "schedule_source": schedule_source(comp),
            "schedule": comp.schedule_text,
            "compile_s": round(time.perf_counter() - start, 6),
        }
        return JobResult(200, body, task_key=program_key(str(comp.module("ein"))))

    return _compiled(request, answer, use_records=request.use_records, db=db, model=request.model)


def tune_check(request: CompileRequest) -> JobResult:
    """A tuning request's program compiled once with the target's default schedule (its
    mistakes are a compile's located 400s), and what its job is queued by: 200 with `task_key`
    (the program's key in the records) and `device` (the device the target measures on here,
    as the records name it)."""

    def answer(comp: Compilation) -> JobResult:
        comp.source_text()
        key = program_key(str(comp.module("ein")))
        return JobResult(200, {"task_key": key, "device": record_context(comp.target_obj).device}, task_key=key)

    return _compiled(CompileRequest(request.ir, request.input_dict, request.target, "default",
                                    request.extra_outputs, False), answer, use_records=False, db=None)  # fmt: skip


def _compiled(request: CompileRequest, answer: Callable[[Compilation], JobResult], use_records: bool,
              db: str | None, model: str | None = None) -> JobResult:  # fmt: skip
    """`answer` of `request`'s Compilation; a user's mistake is a 400 with the located error, a
    bug in einc a 500 (its reproducer to the log)."""
    comp: Compilation | None = None
    try:
        comp = Compilation(request.ir, IR_FILE, cast("dict[str, dict[str, object]] | None", request.input_dict),
                           request.extra_outputs, request.target, request.schedule,
                           use_records=use_records, db=db, model=model)  # fmt: skip
        return answer(comp)
    except EincError as err:
        if err.loc is None:
            err.loc = SourceLocation(IR_FILE, 1, 1, 1, request.ir)
        return JobResult(400, {"error": err.render()})
    except Exception as exc:  # noqa: BLE001 - a bug in einc: 500, its reproducer to the log
        context = comp.reproducer_context() if comp is not None else {"program": request.ir, "target": request.target}
        ice = InternalCompilerError.wrap(exc, "serve", **context)
        return JobResult(500, {"error": str(ice)}, log=ice.reproducer())


SOURCES = {Kind.BEST: "default", Kind.DEFAULT: "default", Kind.NONE: "none", Kind.GIVEN: "request"}
"""What a compile that applied no tuning record says of its schedule (`schedule_source`)."""


def schedule_source(comp: Compilation) -> str:
    """Which schedule a compile applied: `record 12 (tuned)` (a tuning record's),
    `record 12 (the default schedule, kept by the tuner)`, `records 12, 15 (of 2 of the
    program's 3 tasks)` (a program of several kernels tuned task by task), `default` (the
    target's default schedule), `none` (no schedule) or `request` (the script the request gave)."""
    if comp.record is not None:
        return schedule_source_of_record(comp.record)
    if comp.task_records:
        ids = list(dict.fromkeys(r.id for _, r in comp.task_records))
        return f"records {', '.join(map(str, ids))} (of {len(ids)} of the program's {comp.task_count} tasks)"
    return SOURCES[comp.choice.kind]


def schedule_source_of_record(record: Record | None) -> str:
    """What a compile that applies `record` (None: no record, the default schedule) says of it."""
    if record is None:
        return "default"
    return f"record {record.id} ({'the default schedule, kept by the tuner' if record.kept_default else 'tuned'})"


def manifest_of(comp: Compilation) -> JSON:
    """The manifest of a compiled program: a device target's launch manifest (as `einc
    compile -o OUT` writes it); for C, the buffers and the function's name, prototype and
    argument order."""
    module = comp.module("target")
    launch = comp.target_obj.manifest(module)
    if launch is not None:
        return cast(JSON, json.loads(launch.to_json()))
    signature = KernelSignature.from_module(module)
    prototype = re.search(rf"^[^\n]*\b{re.escape(signature.name)}\([^)]*\)", comp.source_text(), re.M)
    buffers = [asdict(Buffer(b.name, str(b.dtype), b.shape, "output" if b.is_output else "input"))
               for b in signature.buffers]  # fmt: skip
    return {
        "target": comp.target,
        "buffers": buffers,
        "function": {
            "name": signature.name,
            "args": [b.name for b in signature.buffers],
            "prototype": prototype.group(0).strip() if prototype else None,
        },
    }


def record_json(comp: Compilation) -> JSON | None:
    """The tuning record the compilation applied, with the database it came from."""
    record, path = comp.record, comp.record_db
    if record is None:
        return None
    return {
        "id": record.id, "db": str(Path(path)) if path is not None else None, "task_key": record.task_key,
        "device": record.device, "sketch": record.sketch, "knobs": record.knobs, "median_s": record.median_s if math.isfinite(record.median_s) else None,
        "tuner": record.tuner, "created": record.created, "description": record.describe(),
    }  # fmt: skip


def warm_up() -> None:
    """Compile a tiny program for every target once (source only), so that the lazily
    imported passes and the compiler's caches are loaded; never raises."""
    from einc.targets import get_all_targets

    inputs = {"input0": {"dtype": "float32", "shape": [64]}, "input1": {"dtype": "float32", "shape": [64]}}
    for name in get_all_targets():
        compile_job(CompileRequest("output0[N] = input0[N] + input1[N]", inputs, name, use_records=False), None)
