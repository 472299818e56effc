"""Which device toolchains this machine has, and why not when one is missing.

`available(target)` answers `(True, what was found)` or `(False, why not, and how to
install it)`. Targets: `opencl`, `hlsl`, `sycl`, `poplar`, `cuda` and `hip` are
toolchains (`scripts/install_toolchains.sh --with-sycl` installs them all, so CI, where
`CI=true`, treats a missing one as a failure, except those listed in
`EINC_OPTIONAL_TOOLCHAINS`, e.g. `sycl` for a CI that skips the 1.6 GB SYCL wheels);
`cuda-gpu` is hardware (an NVIDIA GPU and its driver), which no CI machine has, so it is
never required.

The cheap finders the checks use (`sycl_prefix`, `hip_compiler`, ...) are in
einc.runtime.finders, shared with the runtimes. Answers are cached per process.
"""

from __future__ import annotations

import functools
import importlib
import os
import shutil

from einc.errors import TargetError
from einc.runtime.finders import cxx_compiler, hip_compiler, intel_opencl_cpu_library, sycl_prefix, tool_version

TOOLCHAIN_TARGETS: tuple[str, ...] = ("opencl", "hlsl", "sycl", "poplar", "cuda", "hip")
HARDWARE_TARGETS: tuple[str, ...] = ("cuda-gpu",)

INSTALL_HINT = "scripts/install_toolchains.sh"


def available(target: str) -> tuple[bool, str]:
    """Whether `target` can be used here, and a one-line reason."""
    checks = {
        "opencl": _opencl,
        "hlsl": _hlsl,
        "sycl": _sycl,
        "poplar": _poplar,
        "cuda": _cuda,
        "cuda-gpu": _cuda_gpu,
        "hip": _hip,
    }
    if target not in checks:
        raise ValueError(f"unknown target '{target}' (known: {', '.join(checks)})")
    return checks[target]()


def _reason(error: Exception) -> str:
    """An exception as one short line (einc's errors without their location prefix)."""
    return getattr(error, "message", None) or f"{error.__class__.__name__}: {error}"


def required(target: str) -> bool:
    """A missing toolchain fails the test suite in CI (`CI=true`) unless listed in
    `EINC_OPTIONAL_TOOLCHAINS` (comma-separated); hardware never does."""
    in_ci = os.environ.get("CI", "").lower() in ("1", "true", "yes")
    optional = {t.strip() for t in os.environ.get("EINC_OPTIONAL_TOOLCHAINS", "").split(",")}
    return in_ci and target in TOOLCHAIN_TARGETS and target not in optional


# --- the checks ----------------------------------------------------------------------


@functools.cache
def _opencl() -> tuple[bool, str]:
    try:
        from einc.runtime import opencl

        return True, opencl.device_description()
    except TargetError as error:  # says how to install
        return False, f"OpenCL: {error.message}"
    except Exception as error:  # noqa: BLE001 - any failure is the reason
        return False, (
            f"OpenCL: {_reason(error)} (install: apt pocl-opencl-icd ocl-icd-opencl-dev; "
            f"pip pyopencl; or {INSTALL_HINT})"
        )


@functools.cache
def _hlsl() -> tuple[bool, str]:
    for tool in ("glslangValidator", "spirv-val"):
        if shutil.which(tool) is None:
            return False, (
                f"HLSL: {tool} is not on PATH (install: apt glslang-tools spirv-tools; "
                f"or {INSTALL_HINT})"
            )
    try:
        from einc.runtime import vulkan

        return True, vulkan.device_description()
    except TargetError as error:  # says how to install
        return False, f"HLSL: {error.message}"
    except Exception as error:  # noqa: BLE001
        return False, (
            f"HLSL: no Vulkan executor: {_reason(error)} (install: apt mesa-vulkan-drivers "
            f"libvulkan1; pip wgpu; or {INSTALL_HINT})"
        )


@functools.cache
def _sycl() -> tuple[bool, str]:
    prefix = sycl_prefix()
    if prefix is None:
        return False, (
            "SYCL: the SYCL runtime is not installed in this environment (install: "
            f"pip install -e '.[sycl]', i.e. intel-sycl-rt intel-opencl-rt; or {INSTALL_HINT} --with-sycl)"
        )
    if intel_opencl_cpu_library(prefix) is None:
        return False, f"SYCL: no libintelocl.so in {prefix / 'lib'} (pip install intel-opencl-rt)"
    if cxx_compiler() is None:
        return False, "SYCL: no C++ compiler (g++) to build einc's SYCL shim"
    return True, f"SYCL runtime in {prefix}"


@functools.cache
def _poplar() -> tuple[bool, str]:
    popc = shutil.which("popc")
    cxx = cxx_compiler()
    if cxx is None:
        return False, "Poplar: no C++ compiler (g++) to build the codelet harness"
    if popc is not None:
        return True, f"Poplar: popc at {popc}; codelets run on einc's CPU mirror with {cxx}"
    return True, f"Poplar: einc's CPU mirror of the Poplar API, built with {cxx} (no popc)"


@functools.cache
def _cuda() -> tuple[bool, str]:
    try:
        nvrtc = importlib.import_module("cuda.bindings.nvrtc")  # a binary module: no stubs

        err, major, minor = nvrtc.nvrtcVersion()
    except Exception as error:  # noqa: BLE001
        return False, (
            f"CUDA: NVRTC is not usable: {_reason(error)} (install: pip cuda-python "
            f"nvidia-cuda-nvrtc; or {INSTALL_HINT})"
        )
    if err != nvrtc.nvrtcResult.NVRTC_SUCCESS:
        return False, f"CUDA: nvrtcVersion failed: {err}"
    return True, f"CUDA: NVRTC {major}.{minor}"


@functools.cache
def _cuda_gpu() -> tuple[bool, str]:
    try:
        from einc.runtime import cuda

        return True, cuda.device_description()
    except Exception as error:  # noqa: BLE001
        return False, f"CUDA execution: {_reason(error)}"


@functools.cache
def _hip() -> tuple[bool, str]:
    found = hip_compiler()
    if found is None:
        return False, (
            "HIP: neither hipcc nor clang++-15 with the ROCm device libraries is installed "
            f"(install: apt hipcc libamdhip64-dev; or {INSTALL_HINT})"
        )
    kind, path = found
    return True, f"HIP: {kind} at {path} ({tool_version(path).splitlines()[0]})"
