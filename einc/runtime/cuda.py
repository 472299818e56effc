"""Compile-check generated CUDA with NVRTC (resource usage per kernel); run it where a GPU is.

Contract with the CUDA printer:
- one source text, compilable by NVRTC (no host code, no `#include` of host headers;
  `cuda_fp16.h` resolves where a CUDA toolkit's include directory is found);
- one `extern "C" __global__ void <name>(...)` per manifest kernel, `<name>` =
  `KernelLaunch.name` (C linkage: the cubin symbol is the name);
- parameters: `T *__restrict__` per buffer of `KernelLaunch.args`, in that order, `T` the
  buffer's storage dtype;
- launched with `gridDim = grid`, `blockDim = block` and `KernelLaunch.shared_bytes` of
  dynamic shared memory (`extern __shared__`), kernels in manifest order on one stream.

`compile_check_cuda(source, manifest, arch)` compiles to a cubin for `arch` (`sm_80`,
`sm_90`, ...) with `-Xptxas=-v` and reports, per kernel, registers, spill bytes and static
shared memory from ptxas's log. The kernels present are read from the cubin (an ELF file),
and so are their resources where the log has none: NVRTC 13.0 often returns an empty log
(always once the process has called `cuInit`). Reports are cached on disk by hash of the
source, arch, options and NVRTC version.

`load_cuda_kernel` runs through cuda-python's driver API and needs an NVIDIA GPU and its
driver (`libcuda`); without one it raises RuntimeMissingError (a TargetError). Nothing is loaded at import.

Thread safety: the GPU's primary context is retained once per process under a lock; each
call makes it current on its own thread. A kernel's cached device allocations (one per
buffer the caller passes as a host array, and per temp: allocated on first use, reused by
later calls, freed with the kernel) are its state: a call holds the kernel's lock from the
uploads to the read-backs. Device arrays of the caller (torch/CuPy/JAX CUDA arrays, through
`__cuda_array_interface__` or DLPack) are passed to the launch as they are, without copies.
Untested here (no GPU on the development machine): the tests cover the marshalling only.
"""

from __future__ import annotations

import importlib

import functools
import json
import threading
import weakref
import os
import re
import shlex
import shutil
import struct
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from einc.errors import RuntimeInputError, RuntimeMissingError, ToolchainError
from einc.runtime.arrays import CUDA, CUDA_MANAGED, DeviceArray
from einc.runtime.cache import cached_artifact, content_key
from einc.runtime.device import CompileReport, KernelResources, check_allocation, check_manifest, missing_kernels, nbytes, stage
from einc.runtime.manifest import Buffer, LaunchManifest
from einc.runtime.finders import INSTALL_HINT, known, reason
from einc.runtime.once import locked_cache

ARCHS: tuple[str, ...] = ("sm_80", "sm_90")
NVRTC_OPTIONS: tuple[str, ...] = ("-Xptxas=-v", "--std=c++17")


def _nvrtc() -> Any:
    try:
        nvrtc = importlib.import_module("cuda.bindings.nvrtc")  # a binary module: no stubs
    except ImportError as error:
        raise RuntimeMissingError(
            f"CUDA compile checks need NVRTC through cuda-python ({error}); "
            "pip install cuda-python nvidia-cuda-nvrtc, or scripts/install_toolchains.sh"
        ) from error
    return nvrtc


def nvrtc_version() -> str:
    err, major, minor = _nvrtc().nvrtcVersion()
    return f"{major}.{minor}"


@functools.cache
def cuda_include_dirs() -> tuple[str, ...]:
    """Directories holding the toolkit's device headers (cuda_fp16.h and friends)."""
    candidates: list[Path] = []
    for var in ("CUDA_HOME", "CUDA_PATH"):
        if os.environ.get(var):
            candidates.append(Path(os.environ[var]) / "include")
    nvcc = shutil.which("nvcc")
    if nvcc is not None:
        candidates.append(Path(nvcc).resolve().parent.parent / "include")
    candidates += sorted(Path("/usr/local").glob("cuda*/include"), reverse=True)
    for site in sys.path:
        candidates += sorted(Path(site).glob("nvidia/*/include"))
    found = [str(c) for c in candidates if (c / "cuda_fp16.h").is_file()]
    return tuple(dict.fromkeys(found[:1]))


def _log(nvrtc: Any, program: Any) -> str:
    err, size = nvrtc.nvrtcGetProgramLogSize(program)
    log = b" " * size
    nvrtc.nvrtcGetProgramLog(program, log)
    return log.rstrip(b"\0 ").decode(errors="replace")


def ptx(source: str, arch: str = "sm_80") -> str:
    """The PTX NVRTC makes of `source` for `arch` (`compute_80` for `sm_80`): what a test
    reads to see which instructions a kernel uses (`mma.sync`, ...). ToolchainError when
    NVRTC rejects the source."""
    nvrtc = _nvrtc()
    flags = [f"--gpu-architecture={arch.replace('sm_', 'compute_')}", "--std=c++17",
             *(f"--include-path={d}" for d in cuda_include_dirs())]  # fmt: skip
    err, program = nvrtc.nvrtcCreateProgram(source.encode(), b"kernel.cu", 0, [], [])
    try:
        (err,) = nvrtc.nvrtcCompileProgram(program, len(flags), [f.encode() for f in flags])
        if err != nvrtc.nvrtcResult.NVRTC_SUCCESS:
            raise ToolchainError(f"NVRTC ({' '.join(flags)}): {err.name}\n{_log(nvrtc, program)}")
        err, size = nvrtc.nvrtcGetPTXSize(program)
        text = b" " * size
        nvrtc.nvrtcGetPTX(program, text)
        return text.rstrip(b"\0 ").decode()
    finally:
        nvrtc.nvrtcDestroyProgram(program)


@dataclass(frozen=True)
class _Compiled:
    ok: bool
    log: str
    cubin: bytes


def _compile(source: str, arch: str, options: Sequence[str]) -> _Compiled:
    nvrtc = _nvrtc()
    flags = [f"--gpu-architecture={arch}", *options, *(f"--include-path={d}" for d in cuda_include_dirs())]
    err, program = nvrtc.nvrtcCreateProgram(source.encode(), b"kernel.cu", 0, [], [])
    if err != nvrtc.nvrtcResult.NVRTC_SUCCESS:
        raise ToolchainError(f"nvrtcCreateProgram failed: {err}")
    try:
        (err,) = nvrtc.nvrtcCompileProgram(program, len(flags), [f.encode() for f in flags])
        log = _log(nvrtc, program)
        if err != nvrtc.nvrtcResult.NVRTC_SUCCESS:
            return _Compiled(False, f"NVRTC ({' '.join(flags)}): {err.name}\n{log}", b"")
        err, size = nvrtc.nvrtcGetCUBINSize(program)
        cubin = b" " * size
        nvrtc.nvrtcGetCUBIN(program, cubin)
        return _Compiled(True, log, cubin)
    finally:
        nvrtc.nvrtcDestroyProgram(program)


_ENTRY = re.compile(r"Compiling entry function '([^']+)' for '([^']+)'")
_NUMBERS = {
    "registers": re.compile(r"Used (\d+) registers"),
    "barriers": re.compile(r"used (\d+) barriers"),
    "shared_bytes": re.compile(r"(\d+) bytes smem"),
    "stack_bytes": re.compile(r"(\d+) bytes stack frame"),
    "spill_stores": re.compile(r"(\d+) bytes spill stores"),
    "spill_loads": re.compile(r"(\d+) bytes spill loads"),
    "constant_bytes": re.compile(r"(\d+) bytes cmem\[0\]"),
}


_PROPERTIES = re.compile(r"Function properties for (\S+)")


def parse_ptxas_log(log: str) -> tuple[KernelResources, ...]:
    """Per-kernel resources from ptxas's verbose output (the properties ptxas lists for a
    kernel's non-inlined callees, e.g. a libdevice slow path, are not the kernel's)."""
    found: dict[str, dict[str, int]] = {}
    current: str | None = None
    scope: str | None = None
    for line in log.splitlines():
        entry = _ENTRY.search(line)
        if entry is not None:
            current = scope = str(entry.group(1))
            found[current] = {}
            continue
        properties = _PROPERTIES.search(line)
        if properties is not None:
            scope = properties.group(1)
            continue
        if current is None or scope != current:
            continue
        for name, pattern in _NUMBERS.items():
            match = pattern.search(line)
            if match is not None:
                found[current][name] = int(match.group(1))
    return tuple(
        KernelResources(
            name,
            registers=values.get("registers", 0),
            spills=values.get("spill_stores", 0),
            shared_bytes=values.get("shared_bytes", 0),
            details={k: v for k, v in values.items() if k not in ("registers", "shared_bytes")},
        )
        for name, values in found.items()
    )


# --- the cubin's own record of its kernels (an ELF file) -------------------------------

_STO_CUDA_ENTRY = 0x10
"""The `st_other` bit of a kernel's (`__global__` function's) symbol."""
_SYMBOL_ATTRIBUTES = {0x2F: "registers", 0x11: "stack_bytes"}
"""`.nv.info` attributes holding (symbol index, value): EIATTR_REGCOUNT, EIATTR_FRAME_SIZE."""
_NUM_BARRIERS = 0x4C
"""The `.nv.info.<kernel>` attribute holding its number of named barriers."""
_RESERVED_SHARED = 1024
"""sm_90 on: a kernel's `.nv.shared.<kernel>` section also counts the 1 KB the system
reserves (the cubin then has `.nv.shared.reserved.*` sections); ptxas reports without it."""


def _nv_info(data: bytes) -> list[tuple[int, bytes]]:
    """(attribute, value) of an `.nv.info` section: format byte, attribute byte, then a
    16-bit length and that many bytes (EIFMT_SVAL), or a 16-bit value."""
    found, p = [], 0
    while p + 4 <= len(data):
        fmt, attribute = data[p], data[p + 1]
        if fmt == 4:
            (size,) = struct.unpack_from("<H", data, p + 2)
            found.append((attribute, data[p + 4 : p + 4 + size]))
            p += 4 + size
        else:
            found.append((attribute, data[p + 2 : p + 4]))
            p += 4
    return found


def cubin_kernels(cubin: bytes) -> dict[str, dict[str, int]]:
    """The kernels of a cubin by name, with what its `.nv.info` and `.nv.shared` sections
    record of each: `registers`, `stack_bytes`, `barriers` and `shared_bytes` (static)."""
    if cubin[:5] != b"\x7fELF\x02":
        raise ToolchainError("NVRTC returned a cubin that is not a 64-bit ELF file")
    (shoff,) = struct.unpack_from("<Q", cubin, 0x28)
    entsize, count, names_index = struct.unpack_from("<HHH", cubin, 0x3A)
    # (name, type, flags, address, offset, size, link, info, align, entsize) per section
    sections = [struct.unpack_from("<IIQQQQIIQQ", cubin, shoff + i * entsize) for i in range(count)]

    def string(table: int, offset: int) -> str:
        start = sections[table][4] + offset
        return cubin[start : cubin.index(b"\0", start)].decode()

    names = [string(names_index, section[0]) for section in sections]
    symbols: dict[int, str] = {}
    kernels: dict[str, dict[str, int]] = {}
    for section in sections:
        if section[1] != 2:  # SHT_SYMTAB
            continue
        for k in range(section[5] // 24):
            name, info, other = struct.unpack_from("<IBB", cubin, section[4] + 24 * k)
            symbols[k] = string(section[6], name)
            if info & 0xF == 2 and other & _STO_CUDA_ENTRY:  # STT_FUNC, a kernel
                kernels[symbols[k]] = {"registers": 0, "stack_bytes": 0, "barriers": 0, "shared_bytes": 0}
    reserved = _RESERVED_SHARED if any(n.startswith(".nv.shared.reserved.") for n in names) else 0
    for section, name in zip(sections, names):
        data = cubin[section[4] : section[4] + section[5]]
        if name.startswith(".nv.shared.") and name[11:] in kernels:
            kernels[name[11:]]["shared_bytes"] = max(0, section[5] - reserved)
        elif name == ".nv.info":
            for attribute, value in _nv_info(data):
                if attribute in _SYMBOL_ATTRIBUTES and len(value) == 8:
                    symbol, number = struct.unpack("<II", value)
                    if symbols.get(symbol) in kernels:
                        kernels[symbols[symbol]][_SYMBOL_ATTRIBUTES[attribute]] = number
        elif name.startswith(".nv.info.") and name[9:] in kernels:
            for attribute, value in _nv_info(data):
                if attribute == _NUM_BARRIERS:
                    kernels[name[9:]]["barriers"] = value[0]
    return kernels


def kernel_resources(log: str, cubin: bytes) -> tuple[KernelResources, ...]:
    """Per kernel of the cubin: ptxas's report from `log`, else what the cubin records (its
    `spills` then the stack frame's bytes, an upper bound: spill stores go to the frame)."""
    logged = {k.name: k for k in parse_ptxas_log(log)}
    found = []
    for name, values in cubin_kernels(cubin).items():
        if name in logged:
            found.append(logged[name])
            continue
        details = {"stack_bytes": values["stack_bytes"], "barriers": values["barriers"]}
        found.append(KernelResources(name, values["registers"], values["stack_bytes"], values["shared_bytes"], details))
    return tuple(found)


def compile_check_cuda(
    source: str, manifest: LaunchManifest, arch: str = "sm_90", *, options: Sequence[str] = NVRTC_OPTIONS
) -> CompileReport:
    """Compile `source` to a cubin for `arch` with NVRTC and report resources per kernel.

    A report with `ok=False` carries NVRTC's diagnostics (`report.check()` raises them as a
    ToolchainError); a kernel of the manifest missing from the cubin also fails the check.
    """
    check_manifest(manifest)
    names = ",".join(k.name for k in manifest.kernels)
    # "report 2": kernels read from the cubin (reports that an empty log failed are rebuilt)
    key = content_key("report 2", source, arch, "\0".join(options), nvrtc_version(), names, *cuda_include_dirs())

    def build(path: Path) -> None:
        compiled = _compile(source, arch, options)
        kernels = kernel_resources(compiled.log, compiled.cubin) if compiled.ok else ()
        ok, log = compiled.ok, compiled.log
        missing = missing_kernels(manifest, {k.name for k in kernels}) if ok else []
        if missing:
            ok = False
            log += f"\nno kernel named {', '.join(missing)} in the cubin (kernels must be extern \"C\" __global__)"
        report = CompileReport("cuda", arch, ok, log, kernels, len(compiled.cubin))
        path.write_text(json.dumps(report.to_json_dict()))

    path = cached_artifact("cuda-report", key, ".json", build, validate=_read_report).path
    return CompileReport.from_json_dict(json.loads(path.read_text()))


def _read_report(path: Path) -> CompileReport:
    return CompileReport.from_json_dict(json.loads(path.read_text()))


# --- execution (a GPU machine only) ---------------------------------------------------


def _check(result: Any, what: str) -> Any:
    """cuda-python returns (error, values...): raise on an error, return the values."""
    driver = importlib.import_module("cuda.bindings.driver")  # a binary module: no stubs

    err, *values = result if isinstance(result, tuple) else (result,)
    if err != driver.CUresult.CUDA_SUCCESS:
        _, text = driver.cuGetErrorString(err)
        raise ToolchainError(f"CUDA {what} failed: {err.name} ({text.decode() if text else ''})")
    return values[0] if len(values) == 1 else tuple(values)


@dataclass(frozen=True)
class _Gpu:
    device: Any
    context: Any
    arch: str
    name: str
    ordinal: int = 0
    """The device's CUDA ordinal (DLPack's device_id for its memory)."""


@locked_cache
def _gpu() -> _Gpu:
    try:
        driver = importlib.import_module("cuda.bindings.driver")  # a binary module: no stubs

        (err,) = driver.cuInit(0)
    except Exception as error:  # noqa: BLE001 - no libcuda: the driver is not installed
        raise RuntimeMissingError(f"no NVIDIA driver ({error.__class__.__name__}: {error})") from error
    if err != driver.CUresult.CUDA_SUCCESS:
        raise RuntimeMissingError(f"no usable NVIDIA GPU (cuInit: {err.name})")
    count = _check(driver.cuDeviceGetCount(), "cuDeviceGetCount")
    if count == 0:
        raise RuntimeMissingError("no NVIDIA GPU (cuDeviceGetCount = 0)")
    device = _check(driver.cuDeviceGet(0), "cuDeviceGet")
    attribute = driver.CUdevice_attribute
    major = _check(driver.cuDeviceGetAttribute(attribute.CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, device), "query")
    minor = _check(driver.cuDeviceGetAttribute(attribute.CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, device), "query")
    name = _check(driver.cuDeviceGetName(128, device), "cuDeviceGetName")
    context = _check(driver.cuDevicePrimaryCtxRetain(device), "cuDevicePrimaryCtxRetain")
    return _Gpu(device, context, f"sm_{major}{minor}", name.split(b"\0", 1)[0].decode())


def device_description() -> str:
    gpu = _gpu()
    return f"CUDA: {gpu.name} ({gpu.arch})"


def driver_version() -> str:
    """The CUDA driver's version (`cuDriverGetVersion`, e.g. 12040 as 12.4; part of tuning
    records' keys)."""
    driver = importlib.import_module("cuda.bindings.driver")  # a binary module: no stubs
    version = int(_check(driver.cuDriverGetVersion(), "cuDriverGetVersion"))
    return f"CUDA driver {version // 1000}.{version % 1000 // 10}"


def toolchain_identity() -> tuple[str, str]:
    """NVRTC's version and einc's NVRTC options, as tuning records key them."""
    return known(lambda: f"NVRTC {nvrtc_version()}"), shlex.join(NVRTC_OPTIONS)


class CudaKernel:
    """A CUDA source compiled for the local GPU; call it as `kernel(inputs, outputs)` with
    host arrays or `DeviceArray`s of this GPU's memory (`device_types`).

    `resources`: per kernel, as `compile_check_cuda` reports them."""

    device_types = frozenset({CUDA, CUDA_MANAGED})
    """The DLPack device types whose arrays are passed to the launch without copies."""

    def __init__(self, source: str, manifest: LaunchManifest, options: Sequence[str] = NVRTC_OPTIONS):
        driver = importlib.import_module("cuda.bindings.driver")  # a binary module: no stubs

        check_manifest(manifest)
        gpu = _gpu()
        compiled = _compile(source, gpu.arch, options)
        if not compiled.ok:
            raise ToolchainError(f"NVRTC rejected the generated CUDA kernel\n{compiled.log}\n--- source ---\n{source}")
        _check(driver.cuCtxSetCurrent(gpu.context), "cuCtxSetCurrent")
        self.source = source
        self.manifest = manifest
        self.resources = kernel_resources(compiled.log, compiled.cubin)
        image = np.frombuffer(compiled.cubin, np.uint8)  # passed by address, as in cuda-python's examples
        self._module = _check(driver.cuModuleLoadData(image.ctypes.data), "cuModuleLoadData")
        self._functions = []
        for launch in manifest.kernels:
            function = _check(driver.cuModuleGetFunction(self._module, launch.name.encode()), f"lookup of '{launch.name}'")
            if launch.shared_bytes > 48 * 1024:
                attribute = driver.CUfunction_attribute.CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES
                _check(driver.cuFuncSetAttribute(function, attribute, launch.shared_bytes), "cuFuncSetAttribute")
            self._functions.append(function)
        self._lock = threading.Lock()
        self._allocations: dict[str, tuple[int, int]] = {}
        weakref.finalize(self, _free, self._allocations)

    def _allocation(self, buffer: Buffer) -> int:
        """The kernel's own device allocation for `buffer` (host arrays are copied through
        it; temps live in it), made on first use and kept between calls."""
        size = max(nbytes(buffer), 1)
        found = self._allocations.get(buffer.name)
        if found is None or found[1] != size:
            driver = importlib.import_module("cuda.bindings.driver")  # a binary module: no stubs

            if found is not None:
                driver.cuMemFree(found[0])
            found = (check_allocation(buffer, int(_check(driver.cuMemAlloc(size), "cuMemAlloc")), "CUDA"), size)
            self._allocations[buffer.name] = found
        return found[0]

    def __call__(self, inputs: Mapping[str, np.ndarray | DeviceArray], outputs: Mapping[str, np.ndarray | DeviceArray]) -> None:
        """Run: device arrays (DLPack/`__cuda_array_interface__` pointers on this GPU) are
        passed to the launch as they are; host arrays go through the kernel's cached device
        allocations (copied in for inputs, back for outputs)."""
        driver = importlib.import_module("cuda.bindings.driver")  # a binary module: no stubs

        _check(driver.cuCtxSetCurrent(_gpu().context), "cuCtxSetCurrent")
        staged = stage(self.manifest, inputs, outputs)
        for name, array in staged.device.items():
            if array.device[0] not in self.device_types or array.device[1] != _gpu().ordinal:
                raise RuntimeInputError(
                    f"'{name}' is in the memory of device {array.device}, but einc runs CUDA kernels on GPU {_gpu().ordinal}"
                )
        with self._lock:  # the cached allocations are the kernel's state
            pointers: dict[str, int] = {}
            for buffer in self.manifest.buffers:
                if buffer.name in staged.device:
                    pointers[buffer.name] = staged.device[buffer.name].ptr
                    continue
                pointers[buffer.name] = self._allocation(buffer)
                if buffer.role == "input" and nbytes(buffer):
                    host = staged.host[buffer.name]
                    _check(driver.cuMemcpyHtoD(pointers[buffer.name], host.ctypes.data, nbytes(buffer)), "copy to GPU")
            for launch, function in zip(self.manifest.kernels, self._functions):
                values = [np.array([pointers[name]], dtype=np.uint64) for name in launch.args]
                params = np.array([v.ctypes.data for v in values], dtype=np.uint64)
                _check(
                    driver.cuLaunchKernel(
                        function, *launch.grid, *launch.block, launch.shared_bytes, 0, params.ctypes.data, 0
                    ),
                    f"launch of '{launch.name}'",
                )
            _check(driver.cuCtxSynchronize(), "kernel execution")
            for buffer in self.manifest.buffers:
                if buffer.role == "output" and nbytes(buffer) and buffer.name not in staged.device:
                    host = staged.host[buffer.name]
                    _check(driver.cuMemcpyDtoH(host.ctypes.data, pointers[buffer.name], nbytes(buffer)), "copy to host")
        staged.finish()


def _free(allocations: dict[str, tuple[int, int]]) -> None:
    """Free a kernel's cached device allocations (when the kernel is collected)."""
    try:
        driver = importlib.import_module("cuda.bindings.driver")  # a binary module: no stubs

        for pointer, _ in allocations.values():
            driver.cuMemFree(pointer)
    except Exception:  # noqa: BLE001 - at interpreter exit the driver may be gone already
        pass
    allocations.clear()


def load_cuda_kernel(source: str, manifest: LaunchManifest, *, options: Sequence[str] = NVRTC_OPTIONS) -> CudaKernel:
    """Compile for the local GPU and return the runner; RuntimeMissingError when there is no GPU."""
    return CudaKernel(source, manifest, options)


@functools.cache
def toolchain_check() -> tuple[bool, str]:
    """Whether CUDA source can be compiled here (NVRTC), and a one-line reason
    (einc.targets.toolchains)."""
    try:
        nvrtc = importlib.import_module("cuda.bindings.nvrtc")  # a binary module: no stubs

        err, major, minor = nvrtc.nvrtcVersion()
    except Exception as error:  # noqa: BLE001
        return False, (
            f"CUDA: NVRTC is not usable: {reason(error)} (install: pip cuda-python "
            f"nvidia-cuda-nvrtc; or {INSTALL_HINT})"
        )
    if err != nvrtc.nvrtcResult.NVRTC_SUCCESS:
        return False, f"CUDA: nvrtcVersion failed: {err}"
    return True, f"CUDA: NVRTC {major}.{minor}"


@functools.cache
def gpu_check() -> tuple[bool, str]:
    """Whether CUDA kernels can run here (an NVIDIA GPU and its driver: hardware, never
    required in CI), and a one-line reason."""
    try:
        return True, device_description()
    except Exception as error:  # noqa: BLE001
        return False, f"CUDA execution: {reason(error)}"
