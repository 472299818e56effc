"""Where this machine's compilers and SDKs are: the cheap finders the runtimes and the
toolchain checks (each runtime's `toolchain_check`) share, and the version lines that go into build
cache keys. Nothing here imports a runtime."""

from __future__ import annotations

import functools
import os
import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

from einc.errors import ToolchainError


INSTALL_HINT = "scripts/install_toolchains.sh"
"""Where a toolchain check's message points for installing everything at once."""


def reason(error: Exception) -> str:
    """An exception as one short line for a toolchain check (einc's errors without their
    location prefix)."""
    return getattr(error, "message", None) or f"{error.__class__.__name__}: {error}"


def known(what: Callable[[], str]) -> str:
    """`what()`, or `unknown (why)` where it fails: a part of a tuning record's key that cannot
    be known here (the build or the device reports the failure itself when it is used)."""
    try:
        return what()
    except Exception as error:  # noqa: BLE001 - any failure is the reason
        return f"unknown ({reason(error)})"


def first_line(text: str) -> str:
    return (text.strip().splitlines() or [""])[0]


def compiler() -> str:
    return os.environ.get("CC") or "cc"


@functools.cache
def compiler_identity(cc: str) -> str:
    """`cc --version`, part of the cache key (a different compiler rebuilds)."""
    try:
        done = subprocess.run([cc, "--version"], capture_output=True, text=True, check=True)
    except (OSError, subprocess.CalledProcessError) as error:
        raise ToolchainError(f"the C compiler '{cc}' cannot be run: {error}") from error
    return done.stdout


def venv_prefix() -> Path:
    return Path(sys.prefix)


def sycl_prefix() -> Path | None:
    """The prefix holding `include/sycl/sycl.hpp` and `lib/libsycl.so` (the pip wheels
    `intel-sycl-rt` and `intel-opencl-rt` install into the environment's prefix)."""
    for prefix in (venv_prefix(), Path(sys.base_prefix)):
        if (prefix / "include" / "sycl" / "sycl.hpp").is_file() and any(
            (prefix / "lib").glob("libsycl.so*")
        ):
            return prefix
    return None


def intel_opencl_cpu_library(prefix: Path) -> Path | None:
    """Intel's OpenCL CPU driver, `lib/libintelocl.so.<version>` (its .icd file holds a
    placeholder path, so the runtime names the library in OCL_ICD_FILENAMES)."""
    versioned = sorted((prefix / "lib").glob("libintelocl.so.*"))
    if versioned:
        return versioned[-1]
    plain = prefix / "lib" / "libintelocl.so"
    return plain if plain.is_file() else None


def cxx_compiler() -> str | None:
    return shutil.which(os.environ.get("CXX") or "g++")


HIP_DEVICE_LIBS = Path("/usr/lib/x86_64-linux-gnu/amdgcn/bitcode")


def hip_compiler() -> tuple[str, str] | None:
    """`("hipcc", path)` or `("clang", path)`: hipcc (with HIP_PLATFORM=amd) where
    installed, else Debian's clang++-15 with the ROCm device libraries."""
    hipcc = shutil.which("hipcc")
    if hipcc is not None:
        return ("hipcc", hipcc)
    clang = shutil.which("clang++-15")
    if clang is not None and HIP_DEVICE_LIBS.is_dir():
        return ("clang", clang)
    return None


@functools.cache
def tool_version(path: str, *args: str) -> str:
    """The first line of `path --version` (part of cache keys)."""
    try:
        done = subprocess.run(
            [path, *(args or ("--version",))],
            capture_output=True,
            text=True,
            timeout=60,
            env={**os.environ, "HIP_PLATFORM": "amd"},
        )
    except (OSError, subprocess.TimeoutExpired) as error:
        return f"unknown ({error})"
    return (done.stdout or done.stderr).strip()
