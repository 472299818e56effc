"""Tuning records: every measured candidate in an SQLite database (WAL mode, one short
transaction per record), keyed by the normalised program, the target and what the times were
measured under (`RecordContext`: the device, its ISA flags or driver, the compiler and its
flags, the search space's version). An input of the compiler: `einc compile`, `einc run` and
`einc.compile` apply the best record whose every key field is this machine's (`find_record`;
records that no longer apply are skipped with a note); the tuner adds them
(einc.tune.records.RecordDB).

    store = RecordStore(default_db_path())     # $EINC_TUNING_DB, else ~/.cache/einc/tuning.db
    store.best(program_key(text), "c", record_context(CTarget))   # the best record, or None

JSON lines (`export_jsonl` / `import_jsonl`) carry records between machines.
"""

from __future__ import annotations

import functools
import hashlib
import importlib
import json
import math
import os
import platform
import re
import sqlite3
import sys
import time
from collections.abc import Generator, Iterable, Iterator, Mapping
from contextlib import AbstractContextManager, contextmanager
from dataclasses import dataclass, field
from enum import Enum
from pathlib import Path
from typing import TYPE_CHECKING, Self, TextIO, TypedDict, cast

from einc.errors import EincError, SourceLocation
from einc.runtime.finders import known

if TYPE_CHECKING:
    from einc.perfmodel.devices import Device
    from einc.targets.clike import CLikeTarget

DB_ENV = "EINC_TUNING_DB"
SCHEMA_VERSION = 2
"""2: records keyed by their context too (`RecordContext`); a version 1 database (an einc
before) is migrated when it is opened writable, and read as it is otherwise; its records have
no context and are never used."""
EXPORT_FORMAT = "einc-tuning-record/2"
IMPORT_FORMATS = ("einc-tuning-record/1", EXPORT_FORMAT)
"""What `einc records import` reads (a /1 line has no key fields: its record is never used)."""
BUSY_TIMEOUT_MS = 60_000


class Row(TypedDict):
    """A record as the database stores it (what the tuner's `add` writes), in JSON types."""

    task_key: str
    target: str
    device: str
    sketch: str
    knobs: dict[str, int]
    schedule: str
    status: str
    reason: str
    times: list[float]
    build_s: float
    created: float
    tuner: str
    extra: dict[str, object]
    isa: str | None  # the key fields of `RecordContext` beside the device (None: a record
    driver: str | None  # of an einc before them, never used)
    compiler: str | None
    flags: str | None
    space: str | None


class ImportedRow(Row):
    """A record as a JSON line carries it (what import reads): its program too."""

    program: str
    summary: str


class TaskRow(TypedDict):
    """One task key, target and context of `RecordDB.tasks()`."""

    task_key: str
    target: str
    device: str
    context: RecordContext | None  # None: records of an einc before contexts (never used)
    summary: str  # the program's first statement
    trials: int
    ok: int
    best_s: float | None  # the best record's median (None without a best, or without a time)
    best_id: int | None
    best_note: str  # the best's sketch, "default kept", or "" without a best


class RecordError(EincError):
    """A tuning database or a records file einc cannot use (located at the file)."""


def default_db_path() -> Path:
    """`$EINC_TUNING_DB`, else `$XDG_CACHE_HOME/einc/tuning.db` (`~/.cache/einc/tuning.db`)."""
    if chosen := os.environ.get(DB_ENV):
        return Path(chosen).expanduser()
    cache = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(cache) / "einc" / "tuning.db"


def program_key(normalized: str) -> str:
    """The database key of a program from its printed `ein` module: sha256, 16 hex digits."""
    return hashlib.sha256(normalized.encode()).hexdigest()[:16]


@dataclass(frozen=True, order=True)
class Point:
    """One schedule of a space: a sketch and a value for each of its knobs (sorted by name)."""

    sketch: str
    knobs: tuple[tuple[str, int], ...] = ()

    @classmethod
    def of(cls, sketch: str, knobs: Mapping[str, int]) -> Point:
        return cls(sketch, tuple(sorted((str(k), int(v)) for k, v in knobs.items())))

    def values(self) -> dict[str, int]:
        return dict(self.knobs)

    def describe(self) -> str:
        return f"{self.sketch}(" + ", ".join(f"{k}={v}" for k, v in self.knobs) + ")"


class Status(str, Enum):
    """How a candidate ended. Only OK candidates have a time; every other status is a failure
    with a reason, recorded and never ranked."""

    OK = "ok"
    REFUSED = "refused"  # an EincError: the schedule is illegal for this program (expected)
    INTERNAL = "internal-error"  # an InternalCompilerError or a C compiler failure: an einc bug
    CRASHED = "crashed"  # the kernel killed its worker (signal, abort)
    TIMEOUT = "timeout"  # the kernel ran past the runner's time limit
    WRONG = "wrong"  # outputs differ from the NumPy float64 reference
    NOISY = "noisy"  # timings stayed unreliable after re-measuring (foreign load)


def readonly_reason(path: Path) -> str | None:
    """Why einc cannot write the database at `path` (an existing file, or where one is to be
    made), None when it can: a WAL database needs its file and its folder writable (SQLite
    makes its `-wal` and `-shm` files beside it)."""
    folder = path.parent
    if path.exists() and not os.access(path, os.W_OK):
        return "the file is read-only"
    if not os.access(folder, os.W_OK | os.X_OK):
        return f"its folder {folder} is read-only"
    return None


# ---- what a record applies to ---------------------------------------------------------------
KEY_FIELDS = ("device", "isa", "driver", "compiler", "flags", "space")
"""The fields of `RecordContext`, in the database's and the exported records' order."""


@dataclass(frozen=True)
class RecordContext:
    """What a record was measured under, besides its program and target: a record is used only
    where every field is the one `record_context` gives for this machine.

    device    the CPU model, vector width and core count (`device_fingerprint`); on a device
              target the device name its runtime reports
    isa       CPU targets: the CPU's instruction-set flags (`isa_fingerprint`); "" on devices
    driver    device targets: the driver's version (`driver_fingerprint`); "" on CPU targets
    compiler  the compiler of the kernels: `$CC --version`'s first line, NVRTC's version, the
              OpenCL platform's, glslang's, ... (`CLikeTarget.toolchain_identity`)
    flags     the flags einc builds with (C: CFLAGS, a compile's `cflags`, `$EINC_CFLAGS`)
    space     the version of einc's search space for the target's schedule family (`cpu.8`:
              einc.schedule.default.SPACE_VERSIONS)"""

    device: str
    isa: str
    driver: str
    compiler: str
    flags: str
    space: str

    @property
    def key(self) -> str:
        """The fields' digest, which the database indexes (sha256, 16 hex digits)."""
        return hashlib.sha256(json.dumps([getattr(self, f) for f in KEY_FIELDS]).encode()).hexdigest()[:16]

    def changes(self, now: RecordContext) -> list[str]:
        """How a record made under this context differs from `now`, a phrase per field that
        differs (`made with gcc 12.1.0 (now gcc 12.2.0)`); [] when it applies."""
        phrases: list[str] = []
        if self.device != now.device:
            phrases.append(f"made on {_short(self.device)} (this is {_short(now.device)})")
        if self.isa != now.isa:
            phrases.append(f"made for other ISA flags (here {_token_changes(self.isa, now.isa)})")
        if self.driver != now.driver:
            phrases.append(f"made with driver {_short(self.driver)} (now {_short(now.driver)})")
        if self.compiler != now.compiler:
            phrases.append(f"made with {_short(self.compiler)} (now {_short(now.compiler)})")
        if self.flags != now.flags:
            phrases.append(f"made with other compiler flags (here {_token_changes(self.flags, now.flags)})")
        if self.space != now.space:
            phrases.append(f"made by search space {self.space} (now {now.space})")
        return phrases

    def differing(self, now: RecordContext) -> list[str]:
        """The names of the fields that differ from `now` (`einc records list`)."""
        return [f for f in KEY_FIELDS if getattr(self, f) != getattr(now, f)]


LEGACY = "made by an einc that did not record the compiler, flags and search space"
"""Why a record without a context (schema version 1, an export of format /1) is never used."""


def _short(text: str, width: int = 60) -> str:
    return text if len(text) <= width else text[: width - 3] + "..."


def _token_changes(old: str, new: str) -> str:
    """`+avx512f -avx2`: the words `new` has and `old` lacks, then those it lacks; `same words,
    another order` when only their order changed."""
    before, after = old.split(), new.split()
    added = [w for w in dict.fromkeys(after) if w not in before]
    removed = [w for w in dict.fromkeys(before) if w not in after]
    if not added and not removed:
        return "same words, another order"
    return _short(" ".join([*(f"+{w}" for w in added), *(f"-{w}" for w in removed)]))


def record_context(target: type[CLikeTarget], cflags: Iterable[str] = ()) -> RecordContext:
    """This machine's context for `target`'s records (a compile with extra C flags `cflags`):
    what a record must have been made under to be used here. Never raises (a part that cannot
    be known reads `unknown (why)`); cheap after the first call per process (the device, the
    compiler's version and the ISA flags are asked once)."""
    from einc.schedule.default import space_version  # loads the default policies: not at import

    cpu = target.runtime_device is None
    compiler, flags = target.toolchain_identity(tuple(cflags))
    return RecordContext(
        device=device_fingerprint(target), isa=isa_fingerprint() if cpu else "",
        driver="" if cpu else driver_fingerprint(target), compiler=compiler, flags=flags,
        space=space_version(target),
    )  # fmt: skip


MODEL_PREFIX = "model: "
"""How a modelled record's device field begins (`model: NVIDIA H100 SXM5 80GB`)."""
MODELLED = "none: modelled by einc's performance model"
"""The driver field of a modelled record: its times were predicted, not measured."""


def model_context(target: type[CLikeTarget], device: Device, cflags: Iterable[str] = ()) -> RecordContext:
    """The context of records whose times the performance model predicted for `device`
    (`einc tune --model DEVICE`, where the device is absent): the device is the modelled one,
    the driver says `modelled`, the compiler (which reports the registers the model uses), its
    flags and the search space are this machine's. Used by a compile asked for that device
    (`--model`, $EINC_MODEL_DEVICE) or running on it, where no measured record applies."""
    here = record_context(target, cflags)
    name = device.name if not device.key or device.key in _builtin_devices() else f"{device.name} ({device.key})"
    return RecordContext(device=MODEL_PREFIX + name, isa="", driver=MODELLED, compiler=here.compiler,
                         flags=here.flags, space=here.space)  # fmt: skip


def _builtin_devices() -> set[str]:
    from einc.perfmodel.devices import DEVICES

    return set(DEVICES)


def modelled_device(target: type[CLikeTarget], context: RecordContext, model: str | None = None) -> str | None:
    """The device whose modelled records may stand in for measured ones in a compile for
    `target` on this machine (context `context`): `model` (a compile's `--model`), else
    $EINC_MODEL_DEVICE, else the built-in device this machine's device is (a GPU the model
    knows by name); None on CPU targets and where none is named."""
    if target.runtime_device is None:
        return None
    from einc.perfmodel.devices import device_for

    return model or os.environ.get(MODEL_ENV) or device_for(context.device)


MODEL_ENV = "EINC_MODEL_DEVICE"


ISA_FLAGS = re.compile(
    r"sse\w*|pni|ssse3|avx\w*|fma\w*|f16c|bmi\d|amx\w*|popcnt|abm|lzcnt|movbe|xop"  # x86-64
    r"|asimd\w*|sve\w*|sme\d*|sme[bfi]\w*|fphp|i8mm|bf16|dotprod|neon|vfp\w*"  # Arm (not x86's smep)
)
"""The /proc/cpuinfo flags that change the code a compiler makes for this CPU (`-march=native`,
PoCL's LLVM): vector and fused multiply-add extensions. The other flags (security mitigations,
virtualisation, power management) come and go with kernels and hypervisors and are left out."""


@functools.cache
def isa_fingerprint() -> str:
    """This CPU's instruction-set flags (`ISA_FLAGS` of /proc/cpuinfo's first `flags` or, on
    Arm, `Features` line), sorted and space-separated; the machine's name where there is no
    /proc/cpuinfo."""
    try:
        with open("/proc/cpuinfo") as cpuinfo:
            line = next((ln for ln in cpuinfo if ln.split(":", 1)[0].strip() in ("flags", "Features")), "")
    except OSError:
        line = ""
    if ":" not in line:
        return platform.machine()
    return " ".join(sorted(f for f in line.split(":", 1)[1].split() if ISA_FLAGS.fullmatch(f)))


@functools.cache
def driver_fingerprint(target: type[CLikeTarget]) -> str:
    """The driver of the device a device target runs on (its runtime's `driver_version()`);
    `unknown (why)` where there is none."""
    runtime = target.runtime_device
    if runtime is None:
        return ""
    return known(lambda: str(importlib.import_module(f"einc.runtime.{runtime}").driver_version()))


@functools.cache
def device_fingerprint(target: type[CLikeTarget]) -> str:
    """The device a record's times are valid on (one field of `RecordContext`). C (and the
    targets run by a CPU harness): the CPU model, the C target's vector width and the core
    count. Device targets: the device name their runtime reports (`<target>: no device` where
    none is present)."""
    runtime = target.runtime_device
    if runtime is None:  # records are keyed by target too: the CPU alone names the machine
        return _cpu_fingerprint()
    try:
        return str(importlib.import_module(f"einc.runtime.{runtime}").device_description())
    except EincError:
        return f"{target.name}: no device"


def _cpu_fingerprint() -> str:
    from einc.runtime.c import native_vector_bits

    model = platform.processor() or platform.machine()
    try:
        with open("/proc/cpuinfo") as cpuinfo:
            names = [ln.split(":", 1)[1].strip() for ln in cpuinfo if ln.startswith("model name")]
        model = names[0] if names else model
    except OSError:
        pass
    try:
        bits = native_vector_bits()
    except EincError:  # a malformed $EINC_C_VECTOR_BITS: the compile reports it
        bits = 128
    return f"{model}, {bits}-bit vectors, {os.cpu_count() or 1} cores"


# ---- records --------------------------------------------------------------------------------
@dataclass(frozen=True)
class Record:
    """One measured candidate of one task on one target and device."""

    id: int
    task_key: str
    target: str
    device: str
    program: str  # the normalised program text (TuneTask.normalized)
    sketch: str
    knobs: dict[str, int]
    schedule: str
    status: str
    reason: str
    times: tuple[float, ...]
    median_s: float  # of the times when the status is ok, else inf (never ranked)
    build_s: float
    created: float  # seconds since the epoch
    tuner: str
    extra: dict[str, object] = field(default_factory=dict[str, object])
    context: RecordContext | None = None
    """What it was measured under (its `device` is `context.device`); None for a record of an
    einc before contexts: it is never used."""

    def point(self) -> Point:
        return Point.of(self.sketch, self.knobs)

    @property
    def ok(self) -> bool:
        return self.status == Status.OK.value

    @property
    def is_decision(self) -> bool:
        """Whether a tuner decided this record is the best (`extra["best"]`, with the reason)."""
        return self.extra.get("best") is True

    @property
    def modelled(self) -> bool:
        """Whether its times are the performance model's predictions (`einc tune --model`), not
        measurements."""
        return self.device.startswith(MODEL_PREFIX)

    @property
    def kept_default(self) -> bool:
        """Whether this is a decision that kept the default schedule (no finalist was faster)."""
        return self.is_decision and self.extra.get("kept_default") is True

    @property
    def decision(self) -> str:
        """Why the tuner decided this record is the best ("" for a record that is no decision)."""
        reason = self.extra.get("decision")
        return reason if self.is_decision and isinstance(reason, str) else ""

    def describe(self) -> str:
        """`record 12 (sketch ssrsrs, 1.234 ms, tuned 2026-11-25)`; a decision that kept the
        default: `record 12 (the default schedule, kept by the tuner, tuned 2026-11-25)`."""
        when = time.strftime("%Y-%m-%d", time.localtime(self.created))
        how = f"modelled for {self.device[len(MODEL_PREFIX):]}, " if self.modelled else ""
        if self.kept_default:
            return f"record {self.id} (the default schedule, kept by the tuner, {how}tuned {when})"
        time_text = f"{self.median_s * 1e3:.3f} ms" if math.isfinite(self.median_s) else self.status
        if self.modelled:
            time_text += f" modelled for {self.device[len(MODEL_PREFIX):]}"
        return f"record {self.id} (sketch {self.sketch}, {time_text}, tuned {when})"

    def to_json(self, summary: str = "") -> dict[str, object]:
        """The exported form (no id: ids are local to a database); the key fields beside the
        device are null for a record without a context."""
        context: dict[str, object] = {f: None if self.context is None else getattr(self.context, f) for f in KEY_FIELDS[1:]}
        return context | {
            "format": EXPORT_FORMAT, "task_key": self.task_key, "target": self.target,
            "device": self.device, "program": self.program, "summary": summary,
            "sketch": self.sketch, "knobs": self.knobs, "schedule": self.schedule,
            "status": self.status, "reason": self.reason, "times": list(self.times),
            "median_s": self.median_s if math.isfinite(self.median_s) else None,
            "build_s": self.build_s, "created": self.created, "tuner": self.tuner, "extra": self.extra,
        }  # fmt: skip


def _median(times: Iterable[float]) -> float:
    ordered = sorted(times)
    return ordered[len(ordered) // 2] if ordered else math.inf


def _digest(row: Mapping[str, object]) -> str:
    """What makes two records the same record (an import skips a record already present): a
    record without a context has the digest an einc before contexts gave it."""
    keys = ("task_key", "target", "device", "sketch", "knobs", "schedule", "status", "reason",
            "times", "build_s", "created", "tuner")  # fmt: skip
    if any(row.get(k) is not None for k in KEY_FIELDS[1:]):
        keys += KEY_FIELDS[1:]
    canon = json.dumps([row[k] for k in keys], sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(canon.encode()).hexdigest()


def program_summary(source: str, width: int = 60) -> str:
    """The first statement-like line of a program's text, for listings."""
    for line in source.splitlines():
        line = line.split("#", 1)[0].split("//", 1)[0].strip()
        if line and not line.startswith("input "):
            return line if len(line) <= width else line[: width - 3] + "..."
    return ""


_CONTEXT_COLUMNS = ("isa", "driver", "compiler", "flags", "space", "context")
"""The columns of schema version 2: the key fields beside the device, and `context`, their
digest with the device's (`RecordContext.key`: NULL for a record without a context)."""
_INDEXES = (
    "CREATE INDEX IF NOT EXISTS records_by_context ON records (task_key, target, context, status, median_s)",
    "CREATE INDEX IF NOT EXISTS records_decisions ON records (task_key, target, context, id)"
    " WHERE json_extract(extra, '$.best') = 1",
    "CREATE INDEX IF NOT EXISTS records_finals ON records (task_key, target, context, id)"
    " WHERE json_extract(extra, '$.final') IS NOT NULL",
    "CREATE INDEX IF NOT EXISTS records_ranked ON records (task_key, target, context, median_s)"
    " WHERE status = 'ok' AND median_s IS NOT NULL AND json_extract(extra, '$.final') IS NULL"
    " AND NOT coalesce(json_extract(extra, '$.trial') = 1, 0)",
)
"""A lookup (`best`, `trials`) is a search of `records_by_context` on (program, target,
context); the latest decision, the latest final ranking and the ranked records that are no
trials (`best`'s three steps) each a search of a partial index, whose WHERE the queries repeat
word for word (SQLite uses a partial index only then). Tests check the query plans among
100,000 records; benchmarks/records_lookup.py times them."""
_MIGRATION = (
    *(f"ALTER TABLE records ADD COLUMN {c} TEXT" for c in _CONTEXT_COLUMNS),
    "DROP INDEX IF EXISTS records_by_task",
    *_INDEXES,
)
"""Version 1 -> 2 (one transaction): the context's columns, NULL in every old record."""

_SCHEMA = """
CREATE TABLE IF NOT EXISTS schema_version (version INTEGER NOT NULL);
CREATE TABLE IF NOT EXISTS programs (
    task_key TEXT PRIMARY KEY, program TEXT NOT NULL, summary TEXT NOT NULL DEFAULT '');
CREATE TABLE IF NOT EXISTS records (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    task_key TEXT NOT NULL REFERENCES programs(task_key), target TEXT NOT NULL,
    device TEXT NOT NULL, sketch TEXT NOT NULL, knobs TEXT NOT NULL, schedule TEXT NOT NULL,
    status TEXT NOT NULL, reason TEXT NOT NULL, times TEXT NOT NULL, median_s REAL,
    build_s REAL NOT NULL, created REAL NOT NULL, tuner TEXT NOT NULL, extra TEXT NOT NULL,
    digest TEXT NOT NULL UNIQUE,
    isa TEXT, driver TEXT, compiler TEXT, flags TEXT, space TEXT, context TEXT);
""" + "".join(f"\n{statement};" for statement in _INDEXES)
"""Version 2's schema: the columns of version 1, then the context's (what `_MIGRATION` adds to
a version 1 database: NULL in its records), and the indexes."""

_COLUMNS = ("r.id, r.task_key, r.target, r.device, p.program, r.sketch, r.knobs, r.schedule, "
            "r.status, r.reason, r.times, r.median_s, r.build_s, r.created, r.tuner, r.extra")  # fmt: skip
_KEY_COLUMNS = {2: ", r.isa, r.driver, r.compiler, r.flags, r.space", 1: ", NULL, NULL, NULL, NULL, NULL"}
"""The key fields beside the device, by schema version (a version 1 database read as it is)."""
_FROM = "FROM records r JOIN programs p ON p.task_key = r.task_key"
_FINAL = "json_extract(r.extra, '$.final')"
"""A record's final rounds (the tuner run that re-measured its finalists), NULL for a trial."""
_DECISION = "json_extract(r.extra, '$.best') = 1"
"""A record a tuner decided is the best (the crowned finalist, or the default schedule kept)."""
_TRIAL = "json_extract(r.extra, '$.trial') = 1"
"""A trial of a search (measured once: never the best by itself)."""


class RecordStore:
    """A tuning database: opening (the schema made or checked), reading, and adding rows
    (`import_rows`, and the tuner's einc.tune.records.RecordDB). Safe for several processes at
    once (WAL, a busy timeout, one short transaction per write); `create=False` refuses a
    missing file instead of creating it.

    A database einc cannot write (a read-only file or folder, a read-only file system) is
    opened read-only (SQLite's `mode=ro`, else `immutable=1` where the folder cannot hold the
    WAL's shared-memory file): every read works, and a write is a RecordError saying why
    (`writable` and `readonly_reason` tell beforehand), never a record lost in silence."""

    def __init__(self, path: str | Path, *, create: bool = True):
        self.path = Path(path)
        self.loc = SourceLocation(str(self.path), 1, 1)
        if self.path.is_dir():
            raise RecordError("cannot use this as a tuning database: it is a directory", self.loc)
        if not create and not self.path.exists():
            raise RecordError("no tuning database here", self.loc)
        if create and not self.path.exists():
            try:
                self.path.parent.mkdir(parents=True, exist_ok=True)
            except OSError as err:
                raise RecordError(f"cannot create the tuning database's folder: {err}", self.loc) from None
            if (why := readonly_reason(self.path)) is not None:
                raise RecordError(f"cannot create a tuning database here: {why}", self.loc)
        self.readonly_reason = readonly_reason(self.path) if self.path.exists() else None
        """Why einc cannot write this database (None: it can)."""
        self.conn = self._connect()
        try:
            self._setup(create)
        except BaseException:
            self.conn.close()
            raise

    @property
    def writable(self) -> bool:
        return self.readonly_reason is None

    def _connect(self) -> sqlite3.Connection:
        """A connection: read-write, or for a database einc cannot write, read-only (`mode=ro`),
        else immutable (a folder where SQLite cannot make the `-shm` file a WAL reader needs;
        nothing can write the database there either)."""
        timeout = BUSY_TIMEOUT_MS / 1000
        if self.writable:
            try:
                return sqlite3.connect(self.path, timeout=timeout, isolation_level=None)
            except sqlite3.Error as err:
                raise RecordError(f"cannot open the tuning database: {err}", self.loc) from None
        uri = self.path.resolve().as_uri()
        error: sqlite3.Error | None = None
        for query in ("?mode=ro", "?mode=ro&immutable=1"):
            try:
                conn = sqlite3.connect(uri + query, timeout=timeout, isolation_level=None, uri=True)
            except sqlite3.Error as err:
                error = err
                continue
            try:
                conn.execute("SELECT count(*) FROM sqlite_master").fetchone()
                return conn
            except sqlite3.Error as err:  # e.g. "unable to open database file": no -shm possible
                conn.close()
                error = err
        raise RecordError(f"cannot open the tuning database ({self.readonly_reason}): {error}", self.loc)

    def _setup(self, create: bool) -> None:
        with self._guard("open"):
            tables = {r[0] for r in self.conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
            if "schema_version" not in tables:
                if not create:
                    raise RecordError("not an einc tuning database (no schema_version table)", self.loc)
                self.require_writable("create its tables in")
                self._create_schema()
            if self.writable:
                self.conn.execute(f"PRAGMA busy_timeout = {BUSY_TIMEOUT_MS}")
                if self.conn.execute("PRAGMA journal_mode").fetchone()[0].lower() != "wal":
                    self.conn.execute("PRAGMA journal_mode = WAL")
                self.conn.execute("PRAGMA synchronous = NORMAL")  # WAL: a killed process loses nothing committed
            version = self._version()
            if version == 1 and self.writable:
                version = self._migrate()
        if version not in (1, SCHEMA_VERSION):
            raise RecordError(
                f"tuning database schema version {version}; this einc reads versions 1 and {SCHEMA_VERSION}",
                self.loc,
            )
        self.version: int = version
        """The schema version: 2, or 1 for a database of an einc before contexts that einc
        cannot write (read as it is: its records are listed, shown and exported, never used)."""

    def _version(self) -> int | None:
        row = self.conn.execute("SELECT max(version) FROM schema_version").fetchone()
        return row[0] if row else None

    def _migrate(self) -> int | None:
        """Version 1 -> 2 in one transaction (another process may have done it meanwhile):
        the context's columns, NULL in every old record, so none of them is ever used."""
        with self._transaction():
            version = self._version()
            if version == 1:
                for statement in _MIGRATION:
                    self.conn.execute(statement)
                self.conn.execute("UPDATE schema_version SET version = ?", (SCHEMA_VERSION,))
                version = SCHEMA_VERSION
        return version

    def require_writable(self, what: str = "write records to") -> None:
        if self.readonly_reason is not None:
            raise RecordError(f"cannot {what} the tuning database: {self.readonly_reason} (it can be read, not "
                              f"written; give a writable one with --db or ${DB_ENV})", self.loc)  # fmt: skip

    def _create_schema(self) -> None:
        with self._transaction():
            for statement in _SCHEMA.split(";"):
                if statement.strip():
                    self.conn.execute(statement)
            if self.conn.execute("SELECT count(*) FROM schema_version").fetchone()[0] == 0:
                self.conn.execute("INSERT INTO schema_version VALUES (?)", (SCHEMA_VERSION,))

    # ---- plumbing -------------------------------------------------------------------------
    @contextmanager
    def _guard(self, what: str) -> Generator[None]:
        """SQLite errors of an operation as a RecordError at the database's path."""
        try:
            yield
        except sqlite3.Error as err:
            raise RecordError(f"cannot {what} the tuning database: {err}", self.loc) from None

    def _transaction(self) -> AbstractContextManager[None]:
        return _transaction(self.conn)

    def close(self) -> None:
        self.conn.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _insert_program(self, key: str, program: str, summary: str) -> None:
        self.conn.execute("INSERT OR IGNORE INTO programs VALUES (?, ?, ?)", (key, program, summary))

    def _insert(self, row: Row) -> tuple[int, bool]:
        """Insert `row` unless the same record is present: (its id, whether it was new)."""
        digest = _digest(row)
        median = _median(row["times"]) if row["status"] == Status.OK.value else math.inf
        context = _row_context(row)
        cursor = self.conn.execute(
            "INSERT OR IGNORE INTO records (task_key, target, device, sketch, knobs, schedule, status,"
            " reason, times, median_s, build_s, created, tuner, extra, digest, isa, driver, compiler,"
            " flags, space, context) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            (row["task_key"], row["target"], row["device"], row["sketch"], json.dumps(row["knobs"]),
             row["schedule"], row["status"], row["reason"], json.dumps(row["times"]),
             median if math.isfinite(median) else None, row["build_s"], row["created"], row["tuner"],
             json.dumps(row["extra"]), digest, row["isa"], row["driver"], row["compiler"], row["flags"],
             row["space"], None if context is None else context.key),
        )  # fmt: skip
        if cursor.rowcount == 1:
            assert cursor.lastrowid is not None
            return cursor.lastrowid, True
        return self.conn.execute("SELECT id FROM records WHERE digest = ?", (digest,)).fetchone()[0], False

    # ---- reading --------------------------------------------------------------------------
    def _records(self, where: str, args: tuple[object, ...], tail: str = "", index: str = "") -> list[Record]:
        """The records WHERE `where` (`index`: ` INDEXED BY name`, the index the query must
        search: SQLite's planner does not weigh a partial index's WHERE, so it would rather
        search the wider index on (program, target, context, status, median_s))."""
        columns = _COLUMNS + _KEY_COLUMNS[self.version]
        source = f"FROM records r{index} JOIN programs p ON p.task_key = r.task_key"
        with self._guard("read"):
            rows = self.conn.execute(f"SELECT {columns} {source} WHERE {where} {tail}", args).fetchall()
        return [_record(row) for row in rows]

    def _scope(self, task_key: str, target: str, context: RecordContext) -> tuple[str, tuple[object, ...]]:
        """The records of a task on a target made under `context` (WHERE, arguments): a search
        of the `records_by_context` index; none in a version 1 database (no record has one)."""
        if self.version < 2:
            return "0", ()
        return "r.task_key = ? AND r.target = ? AND r.context = ?", (task_key, target, context.key)

    def trials(self, task_key: str, target: str, context: RecordContext) -> list[Record]:
        """Every trial of a task on a target made under `context` (the same device, compiler,
        flags, ...), in the order they were added (not the finalists' paired re-measurements,
        which are no trials of a search)."""
        scope, args = self._scope(task_key, target, context)
        return self._records(f"{scope} AND {_FINAL} IS NULL", args, "ORDER BY r.id")

    def best(self, task_key: str, target: str, context: RecordContext) -> Record | None:
        """The best record of a task on a target among those made under `context` (every key
        field the same; `record_context` gives this machine's): what `einc compile` applies,
        `einc records list` names and the tuner's summary reported. That is

        1. the latest decision of a tuner (`extra["best"]`: the finalist its final rounds
           crowned, or the default schedule kept, with the reason in `extra["decision"]`);
        2. else (records of an einc before decisions) the fastest of the latest final ranking;
        3. else the fastest OK record that is no search trial (one added by hand or imported).

        A search's trials are never the best by themselves (a search interrupted before its
        decision leaves none): a trial was measured once, perhaps while the machine was busy."""
        return self._best(*self._scope(task_key, target, context))

    def _best(self, scope: str, args: tuple[object, ...]) -> Record | None:
        """`best` among the records of `scope` (WHERE, arguments)."""
        def indexed(name: str) -> str:  # a version 1 database has none of the partial indexes
            return f" INDEXED BY {name}" if self.version >= 2 else ""

        found = self._records(f"{scope} AND {_DECISION}", args, "ORDER BY r.id DESC LIMIT 1", indexed("records_decisions"))
        if found:
            return found[0]
        with self._guard("read"):
            latest = self.conn.execute(f"SELECT {_FINAL} FROM records r{indexed('records_finals')} WHERE {scope} AND"
                                       f" {_FINAL} IS NOT NULL ORDER BY r.id DESC LIMIT 1", args).fetchone()  # fmt: skip
        ranked = f"{scope} AND r.status = '{Status.OK.value}' AND r.median_s IS NOT NULL"
        if latest is not None:
            found = self._records(f"{ranked} AND {_FINAL} IS NOT NULL AND {_FINAL} = ?", (*args, latest[0]),
                                  "ORDER BY r.median_s, r.id LIMIT 1", indexed("records_finals"))  # fmt: skip
        if not found:
            found = self._records(f"{ranked} AND {_FINAL} IS NULL AND NOT coalesce({_TRIAL}, 0)", args,
                                  "ORDER BY r.median_s, r.id LIMIT 1", indexed("records_ranked"))  # fmt: skip
        return found[0] if found else None

    def others(self, task_key: str, target: str, context: RecordContext) -> list[tuple[RecordContext | None, int]]:
        """The records of a task on a target that were made under another context than
        `context` (or under none: an einc before contexts): each such context and how many
        records it has, the most first. What `find_record`'s note says is not used."""
        with self._guard("read"):
            if self.version < 2:
                row = self.conn.execute("SELECT count(*) FROM records WHERE task_key = ? AND target = ?",
                                        (task_key, target)).fetchone()  # fmt: skip
                return [(None, int(row[0]))] if row[0] else []
            rows = self.conn.execute(
                "SELECT device, isa, driver, compiler, flags, space, count(*) AS n, min(id) FROM records"
                " WHERE task_key = ? AND target = ? AND context IS NOT ? GROUP BY context ORDER BY n DESC",
                (task_key, target, context.key),
            ).fetchall()  # fmt: skip
        return [(_context(row[:6]), int(row[6])) for row in rows]

    def programs_under(self, target: str, context: RecordContext) -> dict[str, str]:
        """The programs with records on `target` made under `context` (any program: what a new
        search transfers from, einc.tune.transfer): task key -> normalised program text; none
        in a version 1 database (no record there has a context)."""
        if self.version < 2:
            return {}
        with self._guard("read"):
            rows = self.conn.execute(
                "SELECT p.task_key, p.program FROM programs p WHERE p.task_key IN"
                " (SELECT DISTINCT task_key FROM records WHERE target = ? AND context = ?) ORDER BY p.task_key",
                (target, context.key),
            ).fetchall()  # fmt: skip
        return {str(key): str(program) for key, program in rows}

    def records_under(self, target: str, context: RecordContext, *, exclude: str = "",
                      limit: int = 10_000) -> list[Record]:  # fmt: skip
        """The search trials on `target` made under `context` of every program but `exclude`,
        the latest `limit` first (what a new search's cost model is warm-started from)."""
        if self.version < 2:
            return []
        return self._records(f"r.target = ? AND r.context = ? AND r.task_key != ? AND {_FINAL} IS NULL",
                             (target, context.key, exclude, max(limit, 0)), "ORDER BY r.id DESC LIMIT ?")  # fmt: skip

    def has_task(self, task_key: str, target: str) -> bool:
        """Whether any record of the task on the target exists (any device): cheap, and no
        device needs to be asked for its name when there is none."""
        with self._guard("read"):
            row = self.conn.execute("SELECT 1 FROM records WHERE task_key = ? AND target = ? LIMIT 1",
                                    (task_key, target)).fetchone()  # fmt: skip
        return row is not None

    def get(self, record_id: int) -> Record | None:
        found = self._records("r.id = ?", (record_id,))
        return found[0] if found else None

    def summary(self, task_key: str) -> str:
        with self._guard("read"):
            row = self.conn.execute("SELECT summary FROM programs WHERE task_key = ?", (task_key,)).fetchone()
        return row[0] if row else ""

    def tasks(self) -> list[TaskRow]:
        """One row per (task_key, target, context): task_key, target, device, context (None
        for records of an einc before contexts), summary (the program's first statement),
        trials, ok, and the `best` record's median (best_s), id (best_id) and what it is
        (best_note: its sketch, or "default kept"); None and "" where there is no best. Records
        without a context are one row per device, their best chosen as an einc before chose it
        (for reading: it is never used)."""
        group = "r.context" if self.version >= 2 else "NULL"
        with self._guard("read"):
            rows = self.conn.execute(
                f"SELECT r.task_key, r.target, r.device, {group}, p.summary, count(*), sum(r.status = ?),"
                f" min(r.id) {_KEY_COLUMNS[self.version]} {_FROM} GROUP BY r.task_key, r.target, {group},"
                f" CASE WHEN {group} IS NULL THEN r.device END ORDER BY min(r.id)", (Status.OK.value,),
            ).fetchall()  # fmt: skip
        tasks: list[TaskRow] = []
        for key, target, device, context_key, summary, trials, ok, _, *fields in rows:
            context = _context((device, *fields)) if context_key is not None else None
            if context is not None:
                best = self.best(str(key), str(target), context)
            else:
                null = "r.context IS NULL AND " if self.version >= 2 else ""
                best = self._best(f"{null}r.task_key = ? AND r.target = ? AND r.device = ?", (key, target, device))
            best_s = best.median_s if best is not None and math.isfinite(best.median_s) else None
            note = "" if best is None else "default kept" if best.kept_default else best.sketch
            tasks.append(TaskRow(task_key=str(key), target=str(target), device=str(device), context=context,
                                 summary=str(summary),
                                 trials=int(trials), ok=int(ok), best_s=best_s,
                                 best_id=None if best is None else best.id, best_note=note))  # fmt: skip
        return tasks

    def __len__(self) -> int:
        with self._guard("read"):
            return int(self.conn.execute("SELECT count(*) FROM records").fetchone()[0])

    # ---- sharing --------------------------------------------------------------------------
    def export_jsonl(self, out: TextIO, task_key: str | None = None) -> int:
        """Write the records (of one task, or all) as JSON lines; how many."""
        where, args = ("r.task_key = ?", (task_key,)) if task_key else ("1", ())
        records = self._records(where, args, "ORDER BY r.id")
        summaries = {key: self.summary(key) for key in {r.task_key for r in records}}
        out.writelines(json.dumps(r.to_json(summaries[r.task_key]), sort_keys=True) + "\n" for r in records)
        return len(records)

    def import_jsonl(self, inp: TextIO, filename: str | None = None) -> int:
        """Read JSON lines written by `export_jsonl`: every line is checked first (a bad one
        is a RecordError at `file:line`, and nothing is imported), then the records not
        already present are added in one transaction; how many were added."""
        return self.import_rows(read_jsonl(inp, filename))

    def import_rows(self, rows: Iterable[ImportedRow]) -> int:
        """Add records read by `read_jsonl` (one transaction), skipping those present."""
        added = 0
        self.require_writable("import records into")
        with self._guard("write"), self._transaction():
            for row in rows:
                self._insert_program(row["task_key"], row["program"], row["summary"])
                added += self._insert(row)[1]
        return added


@contextmanager
def _transaction(conn: sqlite3.Connection) -> Generator[None]:
    """BEGIN IMMEDIATE (the write lock at once: writers queue on the busy timeout instead of
    failing on a lock upgrade) ... COMMIT, or ROLLBACK on an exception."""
    conn.execute("BEGIN IMMEDIATE")
    try:
        yield
    except BaseException:
        if conn.in_transaction:
            conn.execute("ROLLBACK")
        raise
    conn.execute("COMMIT")


_RecordRow = tuple[int, str, str, str, str, str, str, str, str, str, str, float | None, float, float, str, str,
                   str | None, str | None, str | None, str | None, str | None]
"""A row of `_COLUMNS` and `_KEY_COLUMNS` as sqlite returns it (the schema's types; knobs,
times and extra as JSON)."""


def _record(row: _RecordRow) -> Record:
    (id_, key, target, device, program, sketch, knobs, schedule, status, reason, times, median,
     build_s, created, tuner, extra, *fields) = row  # fmt: skip
    return Record(id_, key, target, device, program, sketch, json.loads(knobs), schedule, status,
                  reason, tuple(json.loads(times)), math.inf if median is None else median,
                  build_s, created, tuner, json.loads(extra), _context((device, *fields)))  # fmt: skip


def _context(fields: Iterable[object]) -> RecordContext | None:
    """The context of a record's key fields (`KEY_FIELDS` order); None where one is missing."""
    values = list(fields)
    if len(values) != len(KEY_FIELDS) or not all(isinstance(v, str) for v in values):
        return None
    return RecordContext(*cast("list[str]", values))


def _row_context(row: Row) -> RecordContext | None:
    return _context([row["device"], row["isa"], row["driver"], row["compiler"], row["flags"], row["space"]])


_FIELDS: dict[str, type | tuple[type, ...]] = {
    "task_key": str, "target": str, "device": str, "program": str, "sketch": str, "knobs": dict,
    "schedule": str, "status": str, "reason": str, "times": list, "build_s": (int, float),
    "created": (int, float), "tuner": str, "extra": dict,
}  # fmt: skip


def read_jsonl(inp: TextIO, filename: str | None = None) -> list[ImportedRow]:
    """The records of a JSON lines file, every line checked (a RecordError at `file:line`)."""
    name = str(filename or getattr(inp, "name", "<records>"))
    return [_parse_line(line, SourceLocation(name, lineno, 1)) for lineno, line in enumerate(inp, 1) if line.strip()]


def _parse_line(line: str, loc: SourceLocation) -> ImportedRow:
    """One exported record, checked: a RecordError at `loc` saying what is wrong."""
    try:
        row = json.loads(line)
    except json.JSONDecodeError as err:
        raise RecordError(f"not a JSON record: {err.msg} (column {err.colno})", loc) from None
    if not isinstance(row, dict):
        raise RecordError(f"a record is a JSON object, not {type(row).__name__}", loc)
    row = cast("dict[str, object]", row)
    if row.get("format") not in IMPORT_FORMATS:
        raise RecordError(f"not an einc tuning record (format {row.get('format')!r}, expected {EXPORT_FORMAT!r})", loc)
    fields = [row.get(f) for f in KEY_FIELDS[1:]]
    if any(f is not None and not isinstance(f, str) for f in fields):
        raise RecordError(f"the key fields {', '.join(KEY_FIELDS[1:])} are strings (or null)", loc)
    if any(f is None for f in fields) and any(f is not None for f in fields):
        raise RecordError(f"the key fields {', '.join(KEY_FIELDS[1:])} are all null or all set", loc)
    key = cast("list[str | None]", fields)
    for name, kind in _FIELDS.items():
        if name not in row:
            raise RecordError(f"the record has no '{name}'", loc)
        if not isinstance(row[name], kind) or isinstance(row[name], bool):
            raise RecordError(f"'{name}' has the wrong type ({type(row[name]).__name__})", loc)
    if row["status"] not in {s.value for s in Status}:
        raise RecordError(f"unknown status {row['status']!r}", loc)
    knobs = cast("dict[str, object]", row["knobs"])
    if not all(isinstance(v, int) and not isinstance(v, bool) for v in knobs.values()):
        raise RecordError("knob values must be integers", loc)
    times = cast("list[object]", row["times"])
    if not all(isinstance(t, int | float) and not isinstance(t, bool) and math.isfinite(t) and t >= 0 for t in times):
        raise RecordError("times must be non-negative numbers of seconds", loc)
    numbers = cast("list[float]", times)
    text = cast("dict[str, str]", row)  # the string fields, checked above
    if row["status"] == Status.OK.value and not times:
        raise RecordError("an ok record has no times", loc)
    if program_key(text["program"]) != text["task_key"]:
        raise RecordError("task_key is not the key of the record's program (edited or corrupt)", loc)
    summary = row.get("summary", "")
    return ImportedRow(task_key=text["task_key"], target=text["target"], device=text["device"], program=text["program"],
                       sketch=text["sketch"], knobs=cast("dict[str, int]", knobs), schedule=text["schedule"],
                       status=text["status"], reason=text["reason"], times=[float(t) for t in numbers],
                       build_s=float(cast(float, row["build_s"])), created=float(cast(float, row["created"])),
                       tuner=text["tuner"], extra=cast("dict[str, object]", row["extra"]),
                       isa=key[0], driver=key[1], compiler=key[2], flags=key[3], space=key[4],
                       summary=summary if isinstance(summary, str) else "")  # fmt: skip


# ---- the compiler's use of records ------------------------------------------------------------
def warn(message: str) -> None:
    print(f"einc: warning: {message}", file=sys.stderr)


def note(message: str) -> None:
    print(f"einc: note: {message}", file=sys.stderr)


_noted: set[tuple[str, str, str, str]] = set()
"""(database, program key, target, context key) whose stale records `find_record` noted."""


def stale_note(others: list[tuple[RecordContext | None, int]], now: RecordContext, target: str) -> str:
    """The one line saying why records of a program on `target` are not used here: how many,
    and how they differ from this machine's context `now` (each field that differs, for the
    contexts with the most records)."""
    count = sum(n for _, n in others)
    phrases = list(dict.fromkeys(p for context, _ in others for p in (context.changes(now) if context else [LEGACY])))
    shown = "; ".join(phrases[:3]) + (f"; and {len(phrases) - 3} more (`einc records list`)" if len(phrases) > 3 else "")
    records = "tuning record" if count == 1 else "tuning records"
    modelled = sorted({c.device[len(MODEL_PREFIX):] for c, _ in others if c is not None and c.device.startswith(MODEL_PREFIX)})
    hint = f"; those modelled for {', '.join(modelled)} apply with `--model`" if modelled else ""
    return (f"{count} {records} of this program for target {target} {'was' if count == 1 else 'were'} {shown}:"
            f" not used; re-tune (`einc tune`){hint}")  # fmt: skip


def find_record(program: str, target: type[CLikeTarget], db: str | Path | None = None,
                cflags: Iterable[str] = (), model: str | None = None) -> tuple[Record, Path] | None:  # fmt: skip
    """The best record for the normalised `program` on `target` whose every key field is this
    machine's (`record_context(target, cflags)`: the device, its ISA flags or driver, the
    compiler and its flags, the search space's version), with the database it came from; None
    when there is none. Records of the program and target that no longer apply are skipped
    with a one-line note on stderr (once per database, program, target and context in a
    process). On a device target, where no measured record applies, the best record the
    performance model made for the device (`modelled_device`: `model`, $EINC_MODEL_DEVICE, or
    the GPU here when the model knows it) stands in. Never creates a database; a database einc
    cannot read is a warning, not an error (the default schedule is used)."""
    path = Path(db) if db is not None else default_db_path()
    if not path.exists():
        if db is not None:
            warn(f"no tuning database at {path}; using the default schedule")
        return None
    key = program_key(program)
    try:
        with RecordStore(path, create=False) as records:
            if not records.has_task(key, target.name):
                return None
            context = record_context(target, cflags)
            record = records.best(key, target.name, context)
            if record is None and (device := modelled_device(target, context, model)) is not None:
                from einc.perfmodel.devices import get_device

                modelled = model_context(target, get_device(device), cflags)
                record = records.best(key, target.name, modelled)
            others = records.others(key, target.name, context) if record is None else []
    except EincError as err:
        warn(f"tuning records not used: {err.render()}")
        return None
    if others and (seen := (str(path.resolve()), key, target.name, context.key)) not in _noted:
        _noted.add(seen)
        note(stale_note(others, context, target.name))
    return (record, path) if record is not None else None


def used_line(record: Record, path: str | Path) -> str:
    """The line `einc compile` prints about the record it applied."""
    return f"einc: using tuning {record.describe()} from {path}"


def used_tasks_line(records: Iterable[Record], tasks: int, path: str | Path) -> str:
    """The line `einc compile` prints about the records it applied to a program's tasks."""
    ids = list(dict.fromkeys(r.id for r in records))
    others = " (the others: their default schedules)" if len(ids) < tasks else ""
    return (f"einc: using tuning records {', '.join(map(str, ids))} from {path} for {len(ids)} of the program's "
            f"{tasks} distinct tasks{others}")  # fmt: skip


def show_lines(r: Record, now: RecordContext | None = None) -> Iterator[str]:
    """`einc records show`: a record's fields (with `now`, this machine's context for its
    target: whether it applies here, else how it differs), then its schedule."""
    yield f"record {r.id}"
    yield f"  task      {r.task_key} on {r.target}, device {r.device}"
    if r.context is None:
        yield f"  key       none beside the device: {LEGACY} (never used)"
    else:
        for name in KEY_FIELDS[1:]:
            if value := getattr(r.context, name):
                yield f"  {name:<9} {value}"
    if now is not None:
        changes = [LEGACY] if r.context is None else r.context.changes(now)
        yield "  applies   " + ("yes (every key field is this machine's)" if not changes else "no: " + "; ".join(changes))
    yield f"  status    {r.status}" + (f": {r.reason}" if r.reason else "")
    if r.is_decision:
        what = "the default schedule, kept" if r.kept_default else "this schedule"
        yield f"  decision  the best is {what}: {r.decision}"
    if r.ok:
        over = "final rounds (each a median of repeats)" if "final" in r.extra else "runs"
        yield f"  median    {r.median_s * 1e3:.3f} ms over {len(r.times)} {over}"
    yield f"  point     {r.point().describe()}"
    yield f"  build     {r.build_s:.3f} s"
    yield f"  created   {time.strftime('%Y-%m-%d %H:%M:%S', time.localtime(r.created))}" + (
        f" by {r.tuner}" if r.tuner else ""
    )
    if r.extra:
        yield f"  extra     {json.dumps(r.extra, sort_keys=True)}"
    yield "  schedule:"
    yield from ("    " + line for line in r.schedule.splitlines())
