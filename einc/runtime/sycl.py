"""Run generated SYCL source on NumPy arrays: runtime compilation on Intel's OpenCL CPU device.

Contract with the SYCL printer (checked with intel-sycl-rt 2026.2, libsycl 9):
- one source text, C++17, starting with the SYCL headers it uses; each manifest kernel is
  a free-function nd-range kernel with C linkage, named `KernelLaunch.name`:

      namespace syclext = sycl::ext::oneapi;
      namespace syclexp = sycl::ext::oneapi::experimental;
      extern "C" SYCL_EXT_ONEAPI_FUNCTION_PROPERTY((syclexp::nd_range_kernel<3>))
      void vadd(const float *a, const float *b, float *c) {
        sycl::nd_item<3> it = syclext::this_work_item::get_nd_item<3>();
        size_t x = it.get_global_id(2);  // manifest x is SYCL dimension 2
        ...
      }

- parameters: one USM pointer `T *` per buffer of `KernelLaunch.args`, in that order, `T`
  the buffer's storage dtype (`double` and `sycl::half` work on this device); no other
  parameters;
- the launch is `nd_range<3>(global, local)` with local = (block.z, block.y, block.x)
  and global = grid * block in the same reversed order: manifest x is SYCL dimension 2,
  the fastest-varying one (as SYCLomatic maps CUDA's x), so `get_global_id(2)`,
  `get_local_id(2)` and `get_group(2)` are x;
- work-group memory is static: `syclexp::work_group_static<float[256]> tile;` declared in
  the kernel body, `sycl::group_barrier(it.get_group())` between phases;
  `KernelLaunch.shared_bytes` must be 0 (`get_work_group_scratch_memory()` crashes this
  runtime's compiler);
- kernels run in manifest order on an in-order queue.

The host side: `einc/runtime/sycl_shim.cpp`, a C ABI over the SYCL runtime, built once with
g++ against the pip wheels' headers (cached by hash under the einc cache dir) and loaded
with ctypes. Intel's CPU driver is named in `OCL_ICD_FILENAMES` before the runtime loads
(the wheel's .icd file holds a placeholder path); the system's ICDs stay listed, so
pyopencl in the same process still sees PoCL. Built bundles are cached per process; the
SYCL runtime's persistent cache (`SYCL_CACHE_PERSISTENT=1`, under the einc cache dir) makes
a rebuild in a new process take about 1 s instead of 3-9 s.

Memory: where the device takes system-allocated memory (`aspect::usm_system_allocations`,
as Intel's OpenCL CPU device does) the kernels read and write the caller's arrays
themselves, each aligned as the manifest says (else copied through the kernel's own
allocation): no copy in or out. The copies, launches and read-backs of a call are enqueued
and one wait ends it.

Thread safety: the shim and its queue are made once per process under a lock, a bundle
once per source, a kernel handle once per name. A kernel's device allocations (its `temp`
buffers, and arrays not used in place) are made on its first call and kept (freed with the
kernel): a call holds the kernel's lock from the uploads to the read-backs. Launches of one bundle's kernels are submitted under the bundle's lock (the
runtime sets a shared kernel's arguments when it enqueues it). The queue is shared and
in order, so a call's wait also waits for other threads' work submitted before it.

SYCL is an optional extra (`pip install -e '.[sycl]'`): without it `load_sycl_kernel` raises
TargetError saying how to install.
"""

from __future__ import annotations

import ctypes
import functools
import os
import re
import threading
import subprocess
import weakref
from collections.abc import Mapping
from pathlib import Path

import numpy as np

from einc.errors import RuntimeMissingError, TargetError, ToolchainError
from einc.runtime.cache import cache_dir, cached_artifact, content_key
from einc.runtime.device import check_allocation, check_manifest, nbytes, stage
from einc.runtime.manifest import Buffer, LaunchManifest
from einc.runtime.once import locked_cache
from einc.runtime.finders import INSTALL_HINT, cxx_compiler, intel_opencl_cpu_library, known, sycl_prefix, tool_version

SHIM_SOURCE = Path(__file__).with_name("sycl_shim.cpp")
SHIM_FLAGS: tuple[str, ...] = ("-std=c++17", "-O2", "-shared", "-fPIC")
INSTALL = "pip install -e '.[sycl]' (the intel-sycl-rt and intel-opencl-rt wheels, ~1.6 GB)"

_void_p = ctypes.c_void_p
_error_p = ctypes.POINTER(ctypes.c_void_p)
_size3 = ctypes.c_size_t * 3


def _prefix() -> Path:
    prefix = sycl_prefix()
    if prefix is None:
        raise RuntimeMissingError(f"the SYCL target needs the SYCL runtime: {INSTALL}")
    return prefix


def build_shim() -> Path:
    """The shim's shared library, built with g++ against the SYCL headers (cached)."""
    prefix = _prefix()
    cxx = cxx_compiler()
    if cxx is None:
        raise RuntimeMissingError("building einc's SYCL shim needs a C++ compiler (g++)")
    source = SHIM_SOURCE.read_text()
    version = (prefix / "include" / "sycl" / "version.hpp").read_text()
    libs = sorted(p.name for p in (prefix / "lib").glob("libsycl.so*"))
    key = content_key(source, cxx, tool_version(cxx), "\0".join(SHIM_FLAGS), str(prefix), version, *libs)

    def build(path: Path) -> None:
        command = [
            cxx, *SHIM_FLAGS, f"-I{prefix / 'include'}", str(SHIM_SOURCE), "-o", str(path),
            f"-L{prefix / 'lib'}", "-lsycl", f"-Wl,-rpath,{prefix / 'lib'}",
        ]  # fmt: skip
        done = subprocess.run(command, capture_output=True, text=True)
        if done.returncode != 0:
            raise ToolchainError(f"building einc's SYCL shim failed\n$ {' '.join(command)}\n{done.stderr.strip()}")

    return cached_artifact("sycl-shim", key, ".so", build).path


def _set_environment(prefix: Path) -> None:
    """Make Intel's OpenCL CPU driver visible and turn on SYCL's persistent cache. Only
    takes effect before the OpenCL ICD loader and the SYCL runtime initialise."""
    intel = intel_opencl_cpu_library(prefix)
    if intel is None:
        raise RuntimeMissingError(f"no Intel OpenCL CPU driver (libintelocl.so) in {prefix / 'lib'}: {INSTALL}")
    listed = [p for p in os.environ.get("OCL_ICD_FILENAMES", "").split(":") if p]
    if str(intel) not in listed:
        # ocl-icd reads only this list when it is set: keep the system's drivers (PoCL)
        system = [
            line.strip()
            for icd in sorted(Path("/etc/OpenCL/vendors").glob("*.icd"))
            for line in icd.read_text().splitlines()[:1]
            if line.strip()
        ]
        os.environ["OCL_ICD_FILENAMES"] = ":".join([str(intel), *listed, *system])
    os.environ.setdefault("SYCL_CACHE_PERSISTENT", "1")
    os.environ.setdefault("SYCL_CACHE_DIR", str(cache_dir() / "sycl-rt"))


class _Shim:
    """The loaded shim and one queue on Intel's OpenCL CPU device."""

    def __init__(self) -> None:
        prefix = _prefix()
        path = build_shim()
        _set_environment(prefix)
        lib = ctypes.CDLL(str(path))
        lib.einc_sycl_string_free.argtypes = [_void_p]
        lib.einc_sycl_queue_create.argtypes = [_error_p]
        lib.einc_sycl_queue_create.restype = _void_p
        lib.einc_sycl_device_name.argtypes = [_void_p]
        lib.einc_sycl_device_name.restype = _void_p
        lib.einc_sycl_bundle_build.argtypes = [
            _void_p, ctypes.c_char_p, ctypes.POINTER(ctypes.c_char_p), ctypes.c_int, _error_p, _error_p,
        ]  # fmt: skip
        lib.einc_sycl_bundle_build.restype = _void_p
        lib.einc_sycl_kernel_get.argtypes = [_void_p, ctypes.c_char_p, _error_p]
        lib.einc_sycl_kernel_get.restype = _void_p
        lib.einc_sycl_malloc_device.argtypes = [_void_p, ctypes.c_size_t, _error_p]
        lib.einc_sycl_malloc_device.restype = _void_p
        lib.einc_sycl_free.argtypes = [_void_p, _void_p]
        lib.einc_sycl_memcpy.argtypes = [_void_p, _void_p, _void_p, ctypes.c_size_t, _error_p]
        lib.einc_sycl_launch.argtypes = [
            _void_p, _void_p, ctypes.c_int, ctypes.POINTER(_void_p), ctypes.POINTER(ctypes.c_size_t),
            ctypes.POINTER(ctypes.c_size_t), _error_p,
        ]  # fmt: skip
        lib.einc_sycl_wait.argtypes = [_void_p, _error_p]
        lib.einc_sycl_system_memory.argtypes = [_void_p]
        lib.einc_sycl_system_memory.restype = ctypes.c_int
        self.lib = lib
        error = _void_p()
        self.queue = lib.einc_sycl_queue_create(ctypes.byref(error))
        if not self.queue:
            raise RuntimeMissingError(f"no SYCL queue on Intel's OpenCL CPU device: {self.take(error)}")
        self.system_memory = bool(lib.einc_sycl_system_memory(self.queue))
        """Whether kernels may read and write the caller's (system-allocated) arrays as they
        are (`aspect::usm_system_allocations`), without copies to and from device memory."""

    def take(self, text: _void_p) -> str:
        """The shim's malloc'd string, freed."""
        if not text.value:
            return ""
        value = ctypes.string_at(text.value).decode(errors="replace")
        self.lib.einc_sycl_string_free(text)
        return value

    def check(self, status: int, error: _void_p, what: str) -> None:
        if status != 0:
            raise ToolchainError(f"SYCL {what} failed: {self.take(error)}")

    def device_name(self) -> str:
        return self.take(_void_p(self.lib.einc_sycl_device_name(self.queue)))


@locked_cache
def _shim() -> _Shim:
    return _Shim()


def device_description() -> str:
    return f"SYCL: {_shim().device_name()}"


def driver_version() -> str:
    """The OpenCL CPU driver the SYCL runtime runs kernels on (its library's versioned name;
    part of tuning records' keys)."""
    library = intel_opencl_cpu_library(_prefix())
    return library.name if library is not None else "no Intel OpenCL CPU library"


def toolchain_identity() -> tuple[str, str]:
    """The SYCL runtime that compiles kernels (its libraries' versioned names) and einc's
    options for it (none), as tuning records key them."""
    def runtime() -> str:
        names = [p.name for p in (_prefix() / "lib").glob("libsycl.so.*") if re.fullmatch(r"libsycl\.so[.\d]+", p.name)]
        return "SYCL runtime " + (max(names, key=len) if names else "libsycl.so")

    return known(runtime), ""


class _Bundle:
    """An executable kernel bundle built from source and its kernels, kept for the process."""

    def __init__(self, shim: _Shim, source: str, options: tuple[str, ...]):
        self.shim = shim
        log, error = _void_p(), _void_p()
        flags = (ctypes.c_char_p * max(len(options), 1))(*(o.encode() for o in options))
        self.handle = shim.lib.einc_sycl_bundle_build(
            shim.queue, source.encode(), flags, len(options), ctypes.byref(log), ctypes.byref(error)
        )
        self.log = shim.take(log)
        if not self.handle:
            raise ToolchainError(
                f"the SYCL runtime compiler rejected the generated kernel\n{shim.take(error).strip()}\n"
                f"--- source ---\n{source}"
            )
        self._kernels: dict[str, int] = {}
        self.lock = threading.Lock()
        """Held to look up kernels and to submit launches."""

    def kernel(self, name: str) -> int:
        with self.lock:
            return self._kernel(name)

    def _kernel(self, name: str) -> int:
        if name not in self._kernels:
            error = _void_p()
            handle = self.shim.lib.einc_sycl_kernel_get(self.handle, name.encode(), ctypes.byref(error))
            if not handle:
                raise ToolchainError(
                    f"{self.shim.take(error)} (kernels must be `extern \"C\"` free functions "
                    "with SYCL_EXT_ONEAPI_FUNCTION_PROPERTY((syclexp::nd_range_kernel<3>)))"
                )
            self._kernels[name] = handle
        return self._kernels[name]


@locked_cache
def _bundle(source: str, options: tuple[str, ...]) -> _Bundle:
    return _Bundle(_shim(), source, options)


class SyclKernel:
    """A SYCL source built for Intel's OpenCL CPU device; call it as `kernel(inputs, outputs)`."""

    def __init__(self, source: str, manifest: LaunchManifest, options: tuple[str, ...] = ()):
        _prefix()  # TargetError with the install command when the SYCL runtime is absent
        check_manifest(manifest)
        for launch in manifest.kernels:
            if launch.shared_bytes:
                raise TargetError(
                    f"SYCL kernel '{launch.name}' asks for {launch.shared_bytes} bytes of dynamic "
                    "work-group memory; use syclexp::work_group_static in the kernel instead"
                )
        self.source = source
        self.manifest = manifest
        self._bundle = _bundle(source, options)
        self._kernels = [self._bundle.kernel(launch.name) for launch in manifest.kernels]
        self._call_lock = threading.Lock()
        self._pointers: dict[str, int] = {}
        self._nbytes = {buffer.name: nbytes(buffer) for buffer in manifest.buffers}
        weakref.finalize(self, _free, self._bundle.shim, self._pointers)

    def _pointer(self, name: str, size: int) -> int:
        """The kernel's device allocation for buffer `name`, made on first use and kept."""
        pointer = self._pointers.get(name)
        if pointer is None:
            shim, error = self._bundle.shim, _void_p()
            pointer = shim.lib.einc_sycl_malloc_device(shim.queue, max(size, 1), ctypes.byref(error))
            if not pointer:
                raise ToolchainError(f"SYCL allocation of '{name}' failed: {shim.take(error)}")
            self._pointers[name] = pointer
            check_allocation(self.manifest.buffer(name), pointer, "SYCL")
        return pointer

    def _in_place(self, buffer: Buffer, host: np.ndarray | None) -> bool:
        """Whether the kernels use the caller's (staged) array for `buffer` as it is: where
        the device takes system-allocated memory and the array is aligned as the kernels'
        vector accesses assume (else it is copied through the kernel's own allocation)."""
        return (
            self._bundle.shim.system_memory and host is not None and self._nbytes[buffer.name] > 0
            and host.ctypes.data % buffer.alignment() == 0
        )  # fmt: skip

    def __call__(self, inputs: Mapping[str, np.ndarray], outputs: Mapping[str, np.ndarray]) -> None:
        shim = self._bundle.shim
        lib, queue = shim.lib, shim.queue
        staged = stage(self.manifest, inputs, outputs)
        error = _void_p()
        with self._call_lock:  # the device allocations are the kernel's, kept between calls
            # the caller's arrays themselves where the device takes them (no copies); else the
            # kernel's allocations, inputs copied in and outputs read back. One in-order queue:
            # the copies, launches and read-backs are enqueued, and one wait ends the call.
            try:
                pointers: dict[str, int] = {}
                copied: list[Buffer] = []
                for buffer in self.manifest.buffers:
                    host = staged.host.get(buffer.name)
                    if self._in_place(buffer, host):
                        assert host is not None
                        pointers[buffer.name] = host.ctypes.data
                        continue
                    pointers[buffer.name] = self._pointer(buffer.name, self._nbytes[buffer.name])
                    if host is not None and self._nbytes[buffer.name]:
                        copied.append(buffer)
                for buffer in copied:
                    if buffer.role == "input":
                        status = lib.einc_sycl_memcpy(
                            queue, pointers[buffer.name], staged.host[buffer.name].ctypes.data, self._nbytes[buffer.name], ctypes.byref(error)
                        )  # fmt: skip
                        shim.check(status, error, f"copy of '{buffer.name}' to the device")
                for launch, kernel in zip(self.manifest.kernels, self._kernels):
                    args = (_void_p * max(len(launch.args), 1))(*(pointers[name] for name in launch.args))
                    with self._bundle.lock:
                        status = lib.einc_sycl_launch(
                            queue, kernel, len(launch.args), args, _size3(*launch.grid), _size3(*launch.block),
                            ctypes.byref(error),
                        )  # fmt: skip
                    shim.check(status, error, f"launch of kernel '{launch.name}'")
                for buffer in copied:
                    if buffer.role == "output":
                        status = lib.einc_sycl_memcpy(
                            queue, staged.host[buffer.name].ctypes.data, pointers[buffer.name], self._nbytes[buffer.name], ctypes.byref(error)
                        )  # fmt: skip
                        shim.check(status, error, f"copy of '{buffer.name}' to the host")
            except BaseException:
                lib.einc_sycl_wait(queue, ctypes.byref(_void_p()))  # nothing enqueued outlives the call's arrays
                raise
            shim.check(lib.einc_sycl_wait(queue, ctypes.byref(error)), error, "kernel execution")
        staged.finish()


def arrays_in_place() -> bool:
    """Whether a call passes the caller's arrays (aligned as the manifest says) to the kernels
    as they are, with no copies in or out (the device takes system-allocated memory)."""
    return _shim().system_memory


def _free(shim: object, pointers: dict[str, int]) -> None:
    """Free a kernel's device allocations (when the kernel is collected)."""
    try:
        for pointer in pointers.values():
            getattr(shim, "lib").einc_sycl_free(getattr(shim, "queue"), pointer)
    except Exception:  # noqa: BLE001 - at interpreter exit the runtime may be gone already
        pass
    pointers.clear()


def load_sycl_kernel(source: str, manifest: LaunchManifest, *, options: tuple[str, ...] = ()) -> SyclKernel:
    """Build (or reuse) the SYCL source on Intel's OpenCL CPU device and return its runner."""
    return SyclKernel(source, manifest, options)


@functools.cache
def toolchain_check() -> tuple[bool, str]:
    """Whether SYCL kernels can run here (the Intel SYCL and OpenCL CPU runtimes, g++), and a
    one-line reason (einc.targets.toolchains)."""
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
