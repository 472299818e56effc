"""Run generated OpenCL C on NumPy arrays, with pyopencl on a CPU device (PoCL).

Contract with the OpenCL printer:
- one source text, OpenCL C 1.2, with one `__kernel void <name>(...)` per manifest kernel,
  `<name>` = `KernelLaunch.name`;
- parameters: `__global T *` for each buffer of `KernelLaunch.args`, in that order, `T` the
  buffer's storage dtype (`storage_dtype` or `dtype`); if `KernelLaunch.shared_bytes` > 0,
  one more parameter, `__local uchar *` of that many bytes (dynamic local memory);
- launched with local size = `block` and global size = `grid * block` per dimension
  (x is OpenCL dimension 0), kernels in manifest order, each finishing before the next;
- PoCL has no `cl_khr_fp16` arithmetic: half data must be legalized (storage_dtype
  float32, or `vload_half`/`vstore_half`); `cl_khr_fp64` works.

The device: PoCL's CPU device, chosen by platform name; else any CPU device; created on
first use (PoCL's worker threads spin after a launch, so nothing is started at import).
Built programs are cached per process by source and options; PoCL keeps its own on-disk
cache of compiled kernels. A program with a barrier is first built and launched for one
work-group in a helper process (einc.runtime.opencl_isolate): PoCL compiles work-group
functions at a kernel's first launch, and an assertion there aborts the process that
launched it; the helper's crash is a ToolchainError (`CompilerCrash`) instead.

Thread safety: the device, its context and queue are made once per process under a lock
(two threads creating contexts at once left kernels built on one context launched on the
other: INVALID_CONTEXT), and a program is built once per key. A kernel's device buffers
are made on its first call and kept (no allocation per call); they and the kernel objects'
arguments (`clSetKernelArg`) are shared state, so a call holds the kernel's lock from the
uploads to the read-backs: calls from several threads run one after the other.

Memory: on a device that shares the host's memory (`CL_DEVICE_HOST_UNIFIED_MEMORY`, or a CPU
device: PoCL's) the kernels read and write the caller's arrays themselves: each is wrapped,
per call, in a `CL_MEM_USE_HOST_PTR` buffer (about 1 us to make and release on PoCL; none is
kept, so no buffer outlives its array or points at a later one at the same address) where it
is aligned to both the manifest's alignment and the device's `CL_DEVICE_MEM_BASE_ADDR_ALIGN`
(PoCL: 1024 bits, 128 bytes; einc's own arrays are 128-byte aligned, NumPy's large ones are
not). Outputs are mapped for reading (and unmapped) before the call returns, so the results are
in the caller's array as the OpenCL memory model says (on PoCL the map is the array itself).
Anything else (a misaligned array, a device with its own memory) is copied through the
kernel's kept buffers. Arrays may alias as `einc.runtime.device.stage` allows (inputs each
other; an output nothing: refused), as on SYCL. `$EINC_OPENCL_COPY=1` forces the copies
(benchmarks: the A/B of the two paths in one process).
"""

from __future__ import annotations

import functools
import os
import shlex
import sys
import threading
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from einc.errors import RuntimeMissingError, TargetError, ToolchainError
from einc.runtime.device import check_manifest, nbytes, stage
from einc.runtime.finders import INSTALL_HINT, known, reason
from einc.runtime.manifest import Buffer, LaunchManifest
from einc.runtime.once import locked_cache
from einc.runtime.opencl_isolate import check_build, needs_isolation, receive_request, send

if TYPE_CHECKING:
    import pyopencl

BUILD_OPTIONS: tuple[str, ...] = ()
COPY_ENV = "EINC_OPENCL_COPY"
"""Set to 1: every array is copied to and from the kernel's buffers (the path of a device with
its own memory), for benchmarks comparing it with the in-place one."""


@dataclass(frozen=True)
class _Device:
    context: pyopencl.Context
    queue: pyopencl.CommandQueue
    device: pyopencl.Device
    host_memory: bool
    """Whether kernels may use the host's arrays in place (`CL_MEM_USE_HOST_PTR` buffers without
    a copy): the device's memory is the host's (host-unified memory, or a CPU device)."""
    base_alignment: int
    """`CL_DEVICE_MEM_BASE_ADDR_ALIGN` in bytes (the device reports bits)."""


def _pyopencl():  # the module, imported when a runtime first needs it
    try:
        import pyopencl
    except ImportError as error:
        raise RuntimeMissingError(
            f"the OpenCL runtime needs pyopencl ({error}); install it with "
            "scripts/install_toolchains.sh or `pip install pyopencl` plus an OpenCL CPU "
            "driver (apt pocl-opencl-icd)"
        ) from error
    return pyopencl


@locked_cache
def _device() -> _Device:
    cl = _pyopencl()
    try:
        platforms = cl.get_platforms()
    except cl.Error as error:
        raise RuntimeMissingError(f"no OpenCL platform ({error}); install apt pocl-opencl-icd") from error
    cpus = [
        (platform, device)
        for platform in platforms
        for device in platform.get_devices()
        if device.type & cl.device_type.CPU
    ]
    if not cpus:
        seen = ", ".join(p.name for p in platforms) or "none"
        raise RuntimeMissingError(f"no OpenCL CPU device (platforms: {seen}); install apt pocl-opencl-icd")
    pocl = [d for p, d in cpus if "Portable Computing Language" in p.name or "pocl" in p.vendor.lower()]
    device = (pocl or [d for _, d in cpus])[0]
    context = cl.Context([device])
    host_memory = bool(device.host_unified_memory) or bool(device.type & cl.device_type.CPU)
    return _Device(context, cl.CommandQueue(context, device), device, host_memory, device.mem_base_addr_align // 8)


def device_description() -> str:
    device = _device().device
    return f"OpenCL: {device.name} ({device.platform.name}, {device.platform.version})"


def driver_version() -> str:
    """The OpenCL driver's version (part of tuning records' keys)."""
    return str(_device().device.driver_version)


def toolchain_identity() -> tuple[str, str]:
    """The compiler of OpenCL kernels (the platform's: its name and version, with its LLVM) and
    einc's build options, as tuning records key them."""
    def platform() -> str:
        device = _device().device
        return f"{device.platform.name}: {device.platform.version}"

    return known(platform), shlex.join(BUILD_OPTIONS)


@locked_cache
def _program(source: str, options: tuple[str, ...]) -> pyopencl.Program:
    cl = _pyopencl()
    try:
        return cl.Program(_device().context, source).build(options=list(options))
    except cl.Error as error:
        raise ToolchainError(
            f"the OpenCL compiler rejected the generated kernel\n{error}\n"
            f"--- source ---\n{source}"
        ) from error


class OpenCLKernel:
    """A built OpenCL program and its manifest; call it as `kernel(inputs, outputs)`."""

    def __init__(self, source: str, manifest: LaunchManifest, options: Sequence[str] = BUILD_OPTIONS):
        check_manifest(manifest)
        self.source = source
        self.manifest = manifest
        cl = _pyopencl()
        if needs_isolation(source):  # PoCL's work-group passes may abort: compiled in a helper first
            check_build(source, tuple(options), manifest)
        self._program = _program(source, tuple(options))
        self._kernels = []
        for launch in manifest.kernels:
            try:
                self._kernels.append(cl.Kernel(self._program, launch.name))
            except cl.Error as error:
                raise _kernel_error(self._program, launch.name, error) from error
        self._launch_lock = threading.Lock()
        self._device_buffers: dict[str, pyopencl.Buffer] | None = None

    def _buffers(self) -> dict[str, pyopencl.Buffer]:
        """The kernel's device buffers, made on first use and kept between calls (their
        sizes are the manifest's)."""
        if self._device_buffers is None:
            cl = _pyopencl()
            context = _device().context
            base = _device().base_alignment  # bytes every buffer is aligned to
            for b in self.manifest.buffers:
                if b.alignment() > base:
                    raise ToolchainError(
                        f"the OpenCL device aligns buffers to {base} bytes; buffer '{b.name}' needs "
                        f"{b.alignment()} (its kernels' vector accesses)"
                    )
            self._device_buffers = {
                b.name: cl.Buffer(context, cl.mem_flags.READ_WRITE, max(nbytes(b), 1)) for b in self.manifest.buffers
            }
        return self._device_buffers

    def _in_place(self, buffer: Buffer, host: np.ndarray | None) -> bool:
        """Whether the kernels use the caller's (staged) array for `buffer` as it is: on a
        device sharing the host's memory, an array C-contiguous and aligned as both the kernels'
        vector accesses and the device's buffers are (else it is copied through the kernel's
        own buffer)."""
        dev = _device()
        return (
            dev.host_memory and host is not None and nbytes(buffer) > 0 and host.flags.c_contiguous
            and host.ctypes.data % max(buffer.alignment(), dev.base_alignment) == 0
            and os.environ.get(COPY_ENV, "") != "1"
        )  # fmt: skip

    def __call__(self, inputs: Mapping[str, np.ndarray], outputs: Mapping[str, np.ndarray]) -> None:
        cl = _pyopencl()
        staged = stage(self.manifest, inputs, outputs)
        dev = _device()
        with self._launch_lock:  # the buffers and the kernels' arguments are the kernel's state
            # the caller's arrays themselves where the device shares the host's memory (a
            # USE_HOST_PTR buffer made for this call); else the kernel's buffers, inputs copied
            # in and outputs read back. One in-order queue; one finish ends the call.
            kept = self._buffers()
            buffers = dict(kept)
            wrapped: list[pyopencl.Buffer] = []
            mapped: list[Buffer] = []
            try:
                for buffer in self.manifest.buffers:
                    host = staged.host.get(buffer.name)
                    if self._in_place(buffer, host):
                        flags = cl.mem_flags.USE_HOST_PTR | (
                            cl.mem_flags.READ_ONLY if buffer.role == "input" else cl.mem_flags.READ_WRITE
                        )
                        buffers[buffer.name] = cl.Buffer(dev.context, flags, hostbuf=host)
                        wrapped.append(buffers[buffer.name])
                        if buffer.role == "output":
                            mapped.append(buffer)
                    elif buffer.role == "input" and nbytes(buffer) > 0:
                        cl.enqueue_copy(dev.queue, buffers[buffer.name], staged.host[buffer.name], is_blocking=False)
                for launch, kernel in zip(self.manifest.kernels, self._kernels):
                    args: list[pyopencl.Buffer | pyopencl.LocalMemory] = [buffers[name] for name in launch.args]
                    if launch.shared_bytes > 0:
                        args.append(cl.LocalMemory(launch.shared_bytes))
                    try:
                        kernel.set_args(*args)
                        cl.enqueue_nd_range_kernel(dev.queue, kernel, launch.global_size, launch.block)
                    except cl.Error as error:
                        raise ToolchainError(
                            f"launching OpenCL kernel '{launch.name}' (grid {launch.grid}, block "
                            f"{launch.block}, {len(args)} arguments) failed: {error}"
                        ) from error
                for buffer in self.manifest.buffers:
                    if buffer.role == "output" and nbytes(buffer) > 0 and buffers[buffer.name] is kept[buffer.name]:
                        cl.enqueue_copy(dev.queue, staged.host[buffer.name], buffers[buffer.name], is_blocking=False)
                for buffer in mapped:  # the results in the caller's array (on PoCL: the array itself)
                    host = staged.host[buffer.name]
                    view, _ = cl.enqueue_map_buffer(
                        dev.queue, buffers[buffer.name], cl.map_flags.READ, 0, (host.nbytes,), np.dtype(np.uint8), is_blocking=False
                    )
                    view.base.release(dev.queue)
            finally:
                dev.queue.finish()  # nothing enqueued outlives the call's arrays
                for wrapper in wrapped:
                    wrapper.release()
        staged.finish()


def _kernel_error(program: pyopencl.Program, name: str, error: Exception) -> ToolchainError:
    """Why `clCreateKernel(program, name)` failed: a name the program lacks, or what the
    OpenCL runtime said."""
    cl = _pyopencl()
    why = str(error)
    try:
        names = [n for n in str(program.get_info(cl.program_info.KERNEL_NAMES)).split(";") if n]
    except cl.Error as info_error:
        names, why = [], f"{error} (and listing its kernels failed: {info_error})"
    if names and name not in names:
        return ToolchainError(f"the generated OpenCL source has no kernel '{name}' (it defines: {', '.join(names)})")
    return ToolchainError(f"creating OpenCL kernel '{name}' failed: {why}")


def arrays_in_place() -> bool:
    """Whether a call passes the caller's arrays (aligned as the manifest and the device say)
    to the kernels as they are, with no copies in or out (the device shares the host's memory)."""
    return _device().host_memory and os.environ.get(COPY_ENV, "") != "1"


def load_opencl_kernel(
    source: str, manifest: LaunchManifest, *, options: Sequence[str] = BUILD_OPTIONS
) -> OpenCLKernel:
    """Build (or reuse) the OpenCL program and return its runner."""
    return OpenCLKernel(source, manifest, options)


def serve_builds() -> None:
    """The helper process of einc.runtime.opencl_isolate: for each request on stdin (a
    program's source, build options, its launches and the kernels to abort at, a test's fault
    injection), build the program and launch each kernel for one work-group of its size on
    zero-filled buffers, saying on stdout which kernel it launches, then that it is done. An
    OpenCL error is left to the caller's own build and launch, which report it with their
    context; a crash of the device's compiler ends this process, which is the point."""
    cl = _pyopencl()
    dev = _device()
    stdin = sys.stdin.buffer
    stdout = os.fdopen(os.dup(1), "wb")  # the replies' own channel: what the device prints goes to stderr
    os.dup2(2, 1)
    while True:
        try:
            source, options, todo, abort = receive_request(stdin)
        except EOFError:
            return
        try:
            program = cl.Program(dev.context, source).build(options=list(options))
            for launch in todo:
                send(stdout, ("kernel", launch.name))
                if launch.name in abort.split(","):
                    os.abort()
                kernel = cl.Kernel(program, launch.name)
                flags = cl.mem_flags.READ_WRITE | cl.mem_flags.COPY_HOST_PTR
                buffers = [cl.Buffer(dev.context, flags, hostbuf=np.zeros(n, np.uint8)) for n in launch.sizes]
                for i, buffer in enumerate(buffers):  # (kept alive until the launch has finished)
                    kernel.set_arg(i, buffer)
                cl.enqueue_nd_range_kernel(dev.queue, kernel, launch.block, launch.block)
                dev.queue.finish()
        except cl.Error:
            pass
        send(stdout, ("done",))


@functools.cache
def toolchain_check() -> tuple[bool, str]:
    """Whether OpenCL kernels can run here (pyopencl and a CPU device), and a one-line reason
    (einc.targets.toolchains)."""
    try:
        return True, device_description()
    except TargetError as error:  # says how to install
        return False, f"OpenCL: {error.message}"
    except Exception as error:  # noqa: BLE001 - any failure is the reason
        return False, (
            f"OpenCL: {reason(error)} (install: apt pocl-opencl-icd ocl-icd-opencl-dev; "
            f"pip pyopencl; or {INSTALL_HINT})"
        )
