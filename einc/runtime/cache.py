"""An on-disk cache of build artifacts, keyed by content hash, shared by threads and processes.

Artifacts live in `$EINC_CACHE_DIR` (default `~/.cache/einc`), one subdirectory per kind:
`<kind>/<key><suffix>`, with a sidecar `<key><suffix>.sha256` holding the artifact's
SHA-256 and size. A cache directory that cannot be created or written is a ToolchainError
naming the variable and the path.

- Writing: a build writes a temporary file beside the final path; the artifact is renamed
  into place (`os.replace` is atomic on POSIX), then its sidecar, written the same way.
  Nobody ever sees a partial file.
- Reading: an entry is used only when its sidecar exists and the artifact's size and digest
  match it. An entry without a sidecar (a crash or a full disk between the two renames, an
  artifact damaged or truncated later, one left by an older einc) is rebuilt, not loaded.
  Callers may also pass `validate`, run on the artifact before it is returned (e.g. loading
  a shared library): an entry that fails it is rebuilt once; a fresh build that fails it is
  a ToolchainError.
- Concurrency: builds of one key are serialised by an exclusive `flock` on
  `<key><suffix>.lock` (across processes) and a lock per entry (across threads); whoever
  gets the lock checks the entry again, so a key is built once however many callers miss
  it together. Builds of different keys run in parallel.
- A digest, once checked, is remembered for the process by the artifact's inode, size and
  modification time, so a hit costs two small reads.
"""

from __future__ import annotations

import fcntl
import hashlib
import os
import threading
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from einc.errors import ToolchainError

CACHE_ENV = "EINC_CACHE_DIR"
DIGEST_SUFFIX = ".sha256"


def _describe_root(root: Path) -> str:
    configured = os.environ.get(CACHE_ENV)
    if configured:
        return f"{CACHE_ENV}={configured}"
    return f"the build cache {root} (set {CACHE_ENV} to use another directory)"


def _unusable(root: Path, path: Path, error: OSError) -> ToolchainError:
    blocker = next((p for p in (path, *path.parents) if p.exists()), None)
    if blocker is not None and not blocker.is_dir():
        detail = f"{blocker} is a file"
    else:
        detail = f"{path} cannot be written ({error.strerror or error})"
    return ToolchainError(f"{_describe_root(root)}: einc's build cache must be a writable directory, but {detail}")


def cache_dir() -> Path:
    """The cache root, created if needed; a ToolchainError if it is no writable directory."""
    root = Path(os.environ.get(CACHE_ENV) or Path.home() / ".cache" / "einc")
    try:
        root.mkdir(parents=True, exist_ok=True)
    except OSError as error:  # a file in the way, no permission, a read-only file system
        raise _unusable(root, Path(error.filename or root), error) from error
    if not os.access(root, os.W_OK | os.X_OK):
        raise _unusable(root, root, PermissionError(13, "Permission denied"))
    return root


def content_key(*parts: str | bytes) -> str:
    """A SHA-256 hex digest of the parts (length-prefixed, so boundaries matter)."""
    digest = hashlib.sha256()
    for part in parts:
        data = part.encode() if isinstance(part, str) else part
        digest.update(len(data).to_bytes(8, "little"))
        digest.update(data)
    return digest.hexdigest()


@dataclass(frozen=True)
class CachedArtifact:
    path: Path
    hit: bool
    """True when the artifact was already in the cache (nothing was built)."""


def _file_digest(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as file:
        for block in iter(lambda: file.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def _sidecar(final: Path) -> Path:
    return final.with_name(final.name + DIGEST_SUFFIX)


_verified: dict[Path, tuple[int, int, int, str]] = {}
"""Entries whose digest this process checked: path -> (inode, size, mtime, sidecar text)."""


def _intact(final: Path) -> bool:
    """Whether `final` exists and matches its sidecar's size and digest."""
    try:
        recorded = _sidecar(final).read_text()
        stat = final.stat()
    except OSError:
        return False
    identity = (stat.st_ino, stat.st_size, stat.st_mtime_ns, recorded)
    if _verified.get(final) == identity:
        return True
    fields = recorded.split()
    if len(fields) != 2 or fields[1] != str(stat.st_size):
        return False
    try:
        if _file_digest(final) != fields[0]:
            return False
    except OSError:
        return False
    _verified[final] = identity
    return True


def _write_atomically(path: Path, text: str) -> None:
    temporary = path.with_name(f".{path.name}.{os.getpid()}.{uuid.uuid4().hex}.tmp")
    try:
        temporary.write_text(text)
        os.replace(temporary, path)
    finally:
        temporary.unlink(missing_ok=True)


_entry_locks: dict[Path, threading.Lock] = {}
_entry_locks_guard = threading.Lock()


def _entry_lock(final: Path) -> threading.Lock:
    with _entry_locks_guard:
        return _entry_locks.setdefault(final, threading.Lock())


def _usable(final: Path, validate: Callable[[Path], object] | None) -> bool:
    if not _intact(final):
        return False
    if validate is None:
        return True
    try:
        validate(final)
    except Exception:  # noqa: BLE001 - any failure to use the entry: rebuild it
        return False
    return True


def cached_artifact(
    kind: str,
    key: str,
    suffix: str,
    build: Callable[[Path], None],
    *,
    validate: Callable[[Path], object] | None = None,
) -> CachedArtifact:
    """The artifact `<cache>/<kind>/<key><suffix>`, made by `build(temporary_path)` if it
    is absent or damaged.

    `build` must write the file at the path it is given or raise; on failure nothing is
    left in the cache. `validate(path)`, if given, must raise when the artifact cannot be
    used (it is called on every artifact returned).
    """
    root = cache_dir()
    directory = root / kind
    try:
        directory.mkdir(parents=True, exist_ok=True)
    except OSError as error:
        raise _unusable(root, directory, error) from error
    final = directory / f"{key}{suffix}"
    if _usable(final, validate):
        return CachedArtifact(final, hit=True)
    lock_path = directory / f"{key}{suffix}.lock"
    with _entry_lock(final):
        try:
            descriptor = os.open(lock_path, os.O_RDWR | os.O_CREAT, 0o666)
        except OSError as error:
            raise _unusable(root, lock_path, error) from error
        try:
            fcntl.flock(descriptor, fcntl.LOCK_EX)
            if _usable(final, validate):  # built by another thread or process meanwhile
                return CachedArtifact(final, hit=True)
            _build_entry(root, final, build, validate)
        finally:
            os.close(descriptor)  # releases the flock
    return CachedArtifact(final, hit=False)


def _build_entry(
    root: Path, final: Path, build: Callable[[Path], None], validate: Callable[[Path], object] | None
) -> None:
    _verified.pop(final, None)
    temporary = final.with_name(f".{final.stem}.{os.getpid()}.{uuid.uuid4().hex}.tmp{final.suffix}")
    try:
        try:
            temporary.touch()
        except OSError as error:
            raise _unusable(root, temporary.parent, error) from error
        build(temporary)
        size = temporary.stat().st_size if temporary.is_file() else 0
        if size == 0:
            raise ToolchainError(f"building {final.name} wrote nothing (an einc bug)")
        digest = _file_digest(temporary)
        os.replace(temporary, final)
        _write_atomically(_sidecar(final), f"{digest} {size}\n")
    finally:
        temporary.unlink(missing_ok=True)
    if validate is not None:
        try:
            validate(final)
        except Exception as error:  # a fresh artifact that cannot be used
            _sidecar(final).unlink(missing_ok=True)
            raise ToolchainError(f"einc built {final} but cannot use it: {error}") from error
