"""An on-disk cache of build artifacts, keyed by content hash.

Artifacts live in `$EINC_CACHE_DIR` (default `~/.cache/einc`), one subdirectory per kind.
A build writes a temporary file beside its final path and renames it into place
(`os.replace` is atomic on POSIX), so concurrent builds of the same key never expose a
partial file: the last one wins with identical content.
"""

from __future__ import annotations

import hashlib
import os
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path


def cache_dir() -> Path:
    """The cache root, created if needed."""
    root = Path(os.environ.get("EINC_CACHE_DIR") or Path.home() / ".cache" / "einc")
    root.mkdir(parents=True, exist_ok=True)
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


def cached_artifact(
    kind: str, key: str, suffix: str, build: Callable[[Path], None]
) -> CachedArtifact:
    """The artifact `<cache>/<kind>/<key><suffix>`, made by `build(temporary_path)` if absent.

    `build` must write the file at the path it is given or raise; on failure nothing is
    left in the cache.
    """
    directory = cache_dir() / kind
    directory.mkdir(parents=True, exist_ok=True)
    final = directory / f"{key}{suffix}"
    if final.exists():
        return CachedArtifact(final, hit=True)
    temporary = directory / f".{key}.{os.getpid()}.{uuid.uuid4().hex}.tmp{suffix}"
    try:
        build(temporary)
        os.replace(temporary, final)
    finally:
        temporary.unlink(missing_ok=True)
    return CachedArtifact(final, hit=False)
