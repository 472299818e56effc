"""What every device runtime shares: binding NumPy arrays to a launch manifest, and the
report of a compile-only check.

A device runner is called as `runner(inputs, outputs)`: every manifest input and output by
name, outputs written in place. `stage` checks the arrays (RuntimeInputError) and gives the
host-side array of each buffer *in its storage dtype* (a converted copy where the manifest
sets `storage_dtype`, else the caller's array itself); `Staged.finish` converts the
device's results back into the caller's outputs. Outputs are not uploaded (kernels write
every element of them); temps never leave the device: runtimes allocate them from
`Buffer.shape` and `storage_dtype(buffer)`.

The alignment contract (`Buffer.align`, set where kernels use vector accesses): host arrays
are always copied into the runtime's own allocations, which are aligned (`check_allocation`;
a NumPy slice at any address works); a caller's device array (CUDA) is passed as it is, so
one not aligned to `Buffer.alignment()` is refused with a RuntimeInputError naming it.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

import numpy as np

from einc.errors import RuntimeInputError, TargetError, ToolchainError
from einc.runtime.arrays import DeviceArray, aligned_empty
from einc.runtime.manifest import Buffer, LaunchManifest
from einc.runtime.signature import BufferSpec, check_array, check_no_overlap


def storage_dtype(buffer: Buffer) -> np.dtype:
    """The dtype the device holds `buffer` in."""
    return np.dtype(buffer.storage_dtype or buffer.dtype)


def nbytes(buffer: Buffer) -> int:
    return int(np.prod(buffer.shape, dtype=np.int64)) * storage_dtype(buffer).itemsize


def check_manifest(manifest: LaunchManifest) -> None:
    """Raise TargetError if kernels name buffers the manifest does not declare."""
    known = {b.name for b in manifest.buffers}
    if len(known) != len(manifest.buffers):
        raise TargetError(f"the {manifest.target} manifest declares a buffer name twice")
    for kernel in manifest.kernels:
        for name in kernel.args:
            if name not in known:
                raise TargetError(
                    f"kernel '{kernel.name}' of the {manifest.target} manifest takes "
                    f"buffer '{name}', which the manifest does not declare"
                )
        if any(n < 1 for n in (*kernel.grid, *kernel.block)):
            raise TargetError(
                f"kernel '{kernel.name}' has grid {kernel.grid} and block {kernel.block}; "
                "every extent must be at least 1"
            )


@dataclass
class Staged:
    """Host arrays of the manifest's inputs and outputs, in storage dtype, C-contiguous."""

    manifest: LaunchManifest
    host: dict[str, np.ndarray]
    outputs: Mapping[str, object]
    device: dict[str, DeviceArray] = field(default_factory=dict)
    """Arguments already in device memory (runners with `device_types`), passed as they are."""

    def finish(self) -> None:
        """Copy outputs held in a storage dtype back into the caller's arrays."""
        for buffer in self.manifest.buffers:
            if buffer.role != "output" or buffer.name in self.device:
                continue
            staged, target = self.host[buffer.name], self.outputs[buffer.name]
            assert isinstance(target, np.ndarray)
            if staged is not target:
                np.copyto(target, staged, casting="unsafe")


def stage(
    manifest: LaunchManifest,
    inputs: Mapping[str, np.ndarray | DeviceArray],
    outputs: Mapping[str, np.ndarray | DeviceArray],
) -> Staged:
    """Check the caller's arrays against the manifest and stage them for the device.

    Raises RuntimeInputError for a missing or unknown name, a wrong dtype or shape, a
    non-contiguous or read-only array, or an output overlapping another argument. A
    `DeviceArray` (device memory, for runtimes that take it) must already be in the buffer's
    storage dtype, shape and C order; it is passed on in `Staged.device`.
    """
    ins = [b for b in manifest.buffers if b.role == "input"]
    outs = [b for b in manifest.buffers if b.role == "output"]
    for given, declared, role in ((inputs, ins, "input"), (outputs, outs, "output")):
        names = {b.name for b in declared}
        for name in given:
            if name not in names:
                raise RuntimeInputError(
                    f"unknown {role} '{name}' (the kernel's {role}s are "
                    f"{_describe(declared)})"
                )
        for buffer in declared:
            if buffer.name not in given:
                raise RuntimeInputError(
                    f"missing {role} '{buffer.name}' "
                    f"({buffer.dtype}[{', '.join(map(str, buffer.shape))}])"
                )
    device: dict[str, DeviceArray] = {}
    host_buffers: list[Buffer] = []
    arrays: list[np.ndarray] = []
    for buffer in (*ins, *outs):
        given = (inputs if buffer.role == "input" else outputs)[buffer.name]
        if isinstance(given, DeviceArray):
            device[buffer.name] = _device_argument(buffer, given)
        else:
            host_buffers.append(buffer)
            arrays.append(given)
    specs = [_spec(b) for b in host_buffers]
    for spec, array in zip(specs, arrays):
        check_array(spec, array)
    check_no_overlap(specs, arrays)
    host: dict[str, np.ndarray] = {}
    for buffer, array in zip(host_buffers, arrays):
        wanted = storage_dtype(buffer)
        if array.dtype == wanted:
            host[buffer.name] = array
        elif buffer.role == "input":
            host[buffer.name] = np.ascontiguousarray(array.astype(wanted))
        else:
            host[buffer.name] = aligned_empty(buffer.shape, wanted)
    return Staged(manifest, host, outputs, device)


def _device_argument(buffer: Buffer, array: DeviceArray) -> DeviceArray:
    role = "output" if buffer.role == "output" else "input"
    wanted = storage_dtype(buffer)
    if array.dtype != wanted:
        stored = f" (the device stores {buffer.dtype} as {wanted}: pass a host array)" if wanted != np.dtype(buffer.dtype) else ""
        raise RuntimeInputError(f"{role} '{buffer.name}' has dtype {array.dtype}, expected {wanted}{stored}")
    if tuple(array.shape) != tuple(buffer.shape):
        raise RuntimeInputError(f"{role} '{buffer.name}' has shape {list(array.shape)}, expected {list(buffer.shape)}")
    if not array.c_contiguous:
        raise RuntimeInputError(f"{role} '{buffer.name}' is not C-contiguous (device arrays are not copied)")
    if role == "output" and array.readonly:
        raise RuntimeInputError(f"output '{buffer.name}' is read-only")
    align = buffer.alignment()
    if array.ptr % align:
        raise RuntimeInputError(
            f"{role} '{buffer.name}' starts at device address {array.ptr:#x}, which is not a multiple of "
            f"{align} bytes: the kernel reads and writes it with {align}-byte vector accesses (the "
            f"manifest's align). Device arrays are not copied: pass an aligned one (a view with a "
            f"storage offset is not; tensor.clone() is) or a host array"
        )
    return array


def check_allocation(buffer: Buffer, pointer: int, runtime: str) -> int:
    """`pointer`, a runtime's own allocation for `buffer`, if aligned as the manifest says
    (the launch contract); a ToolchainError otherwise (the runtime broke its promise)."""
    if pointer % buffer.alignment():
        raise ToolchainError(
            f"the {runtime} runtime allocated buffer '{buffer.name}' at {pointer:#x}, not aligned to the "
            f"{buffer.alignment()} bytes its kernels' vector accesses assume"
        )
    return pointer


def _spec(buffer: Buffer) -> BufferSpec:
    return BufferSpec(buffer.name, np.dtype(buffer.dtype), tuple(buffer.shape), buffer.role == "output")


def _describe(buffers: list[Buffer]) -> str:
    return ", ".join(f"{b.name}: {b.dtype}[{', '.join(map(str, b.shape))}]" for b in buffers) or "none"


@dataclass(frozen=True)
class KernelResources:
    """What the device compiler reports for one kernel.

    `registers`: 32-bit registers per thread (CUDA) or VGPRs per lane (AMD).
    `spills`: bytes of spill stores (CUDA's ptxas), or registers spilled, SGPRs plus
    VGPRs (AMD). `shared_bytes`: static shared memory / LDS per block. `details` holds
    everything else the compiler said, by name (e.g. `spill_loads`, `stack_bytes`,
    `barriers`, `sgprs`, `agprs`, `scratch_bytes_per_lane`, `occupancy_waves_per_simd`).
    """

    name: str
    registers: int
    spills: int
    shared_bytes: int
    details: Mapping[str, int] = field(default_factory=dict)


@dataclass(frozen=True)
class CompileReport:
    """The result of compiling a source for one architecture, without running it."""

    target: str
    arch: str
    ok: bool
    log: str
    kernels: tuple[KernelResources, ...] = ()
    binary_bytes: int = 0

    def kernel(self, name: str) -> KernelResources:
        for k in self.kernels:
            if k.name == name:
                return k
        raise KeyError(f"no resource report for kernel '{name}' ({self.target} {self.arch})")

    def check(self) -> CompileReport:
        """Self, or ToolchainError with the compiler's log if the compile failed."""
        if not self.ok:
            raise ToolchainError(
                f"the {self.target} compiler rejected the generated kernel for {self.arch}\n"
                f"{self.log.strip()}"
            )
        return self

    def to_json_dict(self) -> dict[str, object]:
        return {
            "target": self.target,
            "arch": self.arch,
            "ok": self.ok,
            "log": self.log,
            "binary_bytes": self.binary_bytes,
            "kernels": [
                {
                    "name": k.name,
                    "registers": k.registers,
                    "spills": k.spills,
                    "shared_bytes": k.shared_bytes,
                    "details": dict(k.details),
                }
                for k in self.kernels
            ],
        }

    @classmethod
    def from_json_dict(cls, data: Mapping[str, object]) -> CompileReport:
        kernels = data["kernels"]
        binary_bytes = data.get("binary_bytes", 0)
        assert isinstance(kernels, list) and isinstance(binary_bytes, int)
        return cls(
            target=str(data["target"]),
            arch=str(data["arch"]),
            ok=bool(data["ok"]),
            log=str(data["log"]),
            binary_bytes=binary_bytes,
            kernels=tuple(
                KernelResources(
                    k["name"], k["registers"], k["spills"], k["shared_bytes"], k["details"]
                )
                for k in kernels
            ),
        )


def missing_kernels(manifest: LaunchManifest, found: set[str]) -> list[str]:
    """Manifest kernel names the compiled output does not define."""
    return [k.name for k in manifest.kernels if k.name not in found]
