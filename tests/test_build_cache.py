"""The on-disk build cache (einc/runtime/cache.py): entries are validated before use and
rebuilt when empty, truncated, corrupted or unloadable; a key is built once however many
threads and processes miss it together; an unusable EINC_CACHE_DIR is a clear error.

Every test uses its own empty cache directory.
"""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
import textwrap
import threading
import uuid
from pathlib import Path

import numpy as np
import pytest

import einc
from einc.errors import ToolchainError
from einc.runtime.c import compile_c
from einc.runtime.cache import DIGEST_SUFFIX, cached_artifact
from einc.runtime.signature import BufferSpec, KernelSignature

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture(autouse=True)
def empty_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    directory = tmp_path / "einc-cache"
    monkeypatch.setenv("EINC_CACHE_DIR", str(directory))
    return directory


class Builder:
    """A build that writes `content` and counts its calls."""

    def __init__(self, content: bytes = b"artifact contents\n"):
        self.content = content
        self.calls = 0

    def __call__(self, path: Path) -> None:
        self.calls += 1
        path.write_bytes(self.content)


def entry(empty_cache: Path, key: str = "k", suffix: str = ".bin") -> Path:
    return empty_cache / "test" / f"{key}{suffix}"


# --- validation -------------------------------------------------------------------------


def test_a_second_lookup_is_a_hit(empty_cache: Path) -> None:
    build = Builder()
    first = cached_artifact("test", "k", ".bin", build)
    second = cached_artifact("test", "k", ".bin", build)
    assert (first.hit, second.hit, build.calls) == (False, True, 1)
    assert second.path.read_bytes() == build.content
    assert Path(f"{second.path}{DIGEST_SUFFIX}").is_file()


@pytest.mark.parametrize("damage", ["empty", "truncated", "same size, one byte changed", "no digest"])
def test_a_damaged_entry_is_rebuilt(empty_cache: Path, damage: str) -> None:
    build = Builder(bytes(range(256)) * 8)
    path = cached_artifact("test", "k", ".bin", build).path
    if damage == "empty":
        path.write_bytes(b"")
    elif damage == "truncated":
        path.write_bytes(build.content[:100])
    elif damage == "same size, one byte changed":
        data = bytearray(build.content)
        data[1000] ^= 0xFF
        path.write_bytes(bytes(data))
    else:
        Path(f"{path}{DIGEST_SUFFIX}").unlink()
    again = cached_artifact("test", "k", ".bin", build)
    assert (again.hit, build.calls) == (False, 2)
    assert again.path.read_bytes() == build.content
    assert cached_artifact("test", "k", ".bin", build).hit


def test_an_empty_file_left_in_the_cache_is_never_a_hit(empty_cache: Path) -> None:
    """What an older einc, a crash or a full disk can leave: a 0-byte artifact, no digest."""
    stale = entry(empty_cache)
    stale.parent.mkdir(parents=True)
    stale.write_bytes(b"")
    build = Builder()
    assert not cached_artifact("test", "k", ".bin", build).hit
    assert stale.read_bytes() == build.content


def test_an_entry_failing_validation_is_rebuilt(empty_cache: Path) -> None:
    checks: list[bytes] = []

    def validate(path: Path) -> None:
        checks.append(path.read_bytes())
        if path.read_bytes() != b"good":
            raise OSError("cannot load")

    bad = Builder(b"bad!")
    cached_artifact("test", "k", ".bin", bad)  # no validation: stored with its digest
    good = Builder(b"good")
    again = cached_artifact("test", "k", ".bin", good, validate=validate)
    assert (again.hit, good.calls) == (False, 1)
    assert again.path.read_bytes() == b"good"
    assert checks == [b"bad!", b"bad!", b"good"]  # the fast path, under the lock, the fresh build


def test_a_fresh_build_failing_validation_is_an_error(empty_cache: Path) -> None:
    def validate(path: Path) -> None:
        raise OSError("invalid ELF header")

    with pytest.raises(ToolchainError, match="cannot use it: invalid ELF header"):
        cached_artifact("test", "k", ".bin", Builder(), validate=validate)
    assert not Path(f"{entry(empty_cache)}{DIGEST_SUFFIX}").exists()


def test_a_failed_build_leaves_nothing(empty_cache: Path) -> None:
    def build(path: Path) -> None:
        path.write_bytes(b"half")
        raise ToolchainError("compiler crashed")

    with pytest.raises(ToolchainError, match="compiler crashed"):
        cached_artifact("test", "k", ".bin", build)
    left = sorted(p.name for p in (empty_cache / "test").iterdir())
    assert left == ["k.bin.lock"], left


def test_a_build_writing_nothing_is_an_error(empty_cache: Path) -> None:
    with pytest.raises(ToolchainError, match="wrote nothing"):
        cached_artifact("test", "k", ".bin", lambda path: None)
    assert not entry(empty_cache).exists()


# --- the C runtime on a damaged cache -----------------------------------------------------

SIGNATURE = KernelSignature(
    "twice", (BufferSpec("x", np.dtype(np.float32), (8,), False), BufferSpec("y", np.dtype(np.float32), (8,), True))
)


def twice_source() -> str:
    """A kernel no other test built (a fresh cache key, a path this process never loaded)."""
    return f"/* {uuid.uuid4().hex} */\nvoid twice(const float *x, float *y) {{ for (int i = 0; i < 8; ++i) y[i] = 2 * x[i]; }}\n"


@pytest.mark.parametrize(
    "damage, with_digest",
    [(b"", False), (b"\x7fELF" + bytes(4000), False), (b"\x7fELF" + bytes(4000), True)],
    ids=["empty", "garbage", "garbage with a matching digest"],
)
def test_a_damaged_c_library_is_rebuilt_in_a_fresh_process(damage: bytes, with_digest: bool) -> None:
    """A 0-byte or garbage .so used to be loaded on every compile (`OSError: file too
    short`); now the next process rebuilds it. The digest proves the bytes are those
    written, not that they load: a library is also loaded before it is returned, and
    rebuilt when that fails."""
    source = twice_source()
    library = compile_c(source)
    # damage a new inode, as another process would: truncating the file in place would pull
    # the pages from under this process's own mapping of it (SIGBUS on the next walk of the
    # loaded libraries, e.g. by the Vulkan loader)
    damaged = library.path.with_suffix(".damaged")
    damaged.write_bytes(damage)
    os.replace(damaged, library.path)
    if with_digest:
        digest = hashlib.sha256(damage).hexdigest()
        Path(f"{library.path}{DIGEST_SUFFIX}").write_text(f"{digest} {len(damage)}\n")
    script = textwrap.dedent(f"""
        import sys
        sys.path.insert(0, {str(ROOT)!r})
        import numpy as np
        from einc.runtime.c import CKernel, compile_c
        from tests.test_build_cache import SIGNATURE
        library = compile_c({source!r})
        x = np.arange(1, 9, dtype=np.float32)
        y = np.zeros(8, np.float32)
        CKernel(library, SIGNATURE)(x, y)
        assert not library.cache_hit, "the damaged library was taken as a hit"
        assert (y == 2 * x).all(), y
    """)
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, env=os.environ, check=False)
    assert done.returncode == 0, done.stderr[-3000:]
    assert library.path.read_bytes() != damage


# --- concurrent builds of one key -----------------------------------------------------------


def test_threads_missing_one_key_build_it_once(empty_cache: Path) -> None:
    calls: list[int] = []
    barrier = threading.Barrier(6)

    def build(path: Path) -> None:
        calls.append(1)
        path.write_bytes(b"x" * 100_000)

    results: list[bool] = []

    def work() -> None:
        barrier.wait()
        results.append(cached_artifact("test", "k", ".bin", build).hit)

    workers = [threading.Thread(target=work) for _ in range(6)]
    for w in workers:
        w.start()
    for w in workers:
        w.join()
    assert len(calls) == 1 and sorted(results) == [False] + [True] * 5


PROCESS_BUILD = """
import sys, time
sys.path.insert(0, {root!r})
from pathlib import Path
from einc.runtime.cache import cached_artifact
counter = Path(sys.argv[1])
def build(path):
    with open(counter, "a") as f:
        f.write("built\\n")
    time.sleep(0.3)
    path.write_bytes(b"y" * 200_000)
start = float(sys.argv[2])
while time.time() < start:
    time.sleep(0.001)
artifact = cached_artifact("test", "shared", ".bin", build)
assert artifact.path.read_bytes() == b"y" * 200_000
"""


def test_processes_missing_one_key_build_it_once(empty_cache: Path, tmp_path: Path) -> None:
    import time

    counter = tmp_path / "builds"
    start = time.time() + 1.5
    script = PROCESS_BUILD.format(root=str(ROOT))
    children = [
        subprocess.Popen([sys.executable, "-c", script, str(counter), str(start)], stderr=subprocess.PIPE, text=True)
        for _ in range(3)
    ]
    for child in children:
        _, err = child.communicate(timeout=120)
        assert child.returncode == 0, err[-2000:]
    assert counter.read_text().count("built") == 1
    leftovers = [p.name for p in (empty_cache / "test").iterdir() if ".tmp" in p.name]
    assert not leftovers


# --- an unusable cache directory ----------------------------------------------------------


def test_cache_dir_that_is_a_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    blocker = tmp_path / "not-a-directory"
    blocker.write_text("")
    monkeypatch.setenv("EINC_CACHE_DIR", str(blocker))
    with pytest.raises(ToolchainError) as caught:
        einc.compile("output0[N] = input0[N] * 2.0", {"input0": {"dtype": "float32", "shape": [4]}})
    message = caught.value.message
    assert f"EINC_CACHE_DIR={blocker}" in message and "writable directory" in message, message


def test_cache_dir_under_a_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("")
    monkeypatch.setenv("EINC_CACHE_DIR", str(blocker / "cache"))
    with pytest.raises(ToolchainError, match=f"EINC_CACHE_DIR={blocker / 'cache'}: .* but {blocker} is a file"):
        cached_artifact("test", "k", ".bin", Builder())


def test_cli_reports_an_unusable_cache_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                           capsys: pytest.CaptureFixture[str]) -> None:  # fmt: skip
    from einc.cli import main

    program = tmp_path / "double.ein"
    program.write_text("input x: float32[4]\noutput0[N] = x[N] * 2.0\n")
    blocker = tmp_path / "cache-file"
    blocker.write_text("")
    monkeypatch.setenv("EINC_CACHE_DIR", str(blocker))
    assert main(["run", str(program)]) == 1
    err = capsys.readouterr().err
    assert f"{program}:1:1: error: EINC_CACHE_DIR={blocker}" in err, err
    assert "internal error" not in err
