"""What a host needs to launch a compiled program on a device target: the launch manifest.

`einc compile --target T` writes it beside the source as JSON. A program of several statements
is several kernels launched in order (a device-wide barrier between them); buffers are the
program's inputs and outputs plus the intermediates (`temp`) the host allocates.

The alignment contract: each buffer's `align` states the bytes its first element must be
aligned to (16 where a kernel reads or writes it with 16-byte vectors; 0 means the element's
size). A host that launches the kernels itself must pass buffers aligned so; einc's own
launchers do (README, "The launch manifest and alignment").
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from typing import Literal

import numpy as np

Role = Literal["input", "output", "temp"]


@dataclass(frozen=True)
class Buffer:
    name: str
    dtype: str  # NumPy dtype name of the program's tensor, e.g. "float32"
    shape: tuple[int, ...]
    role: Role
    storage_dtype: str | None = None  # the dtype the device stores it as, if legalized (e.g. "int32" for int8 on HLSL)
    binding: int | None = None  # HLSL register / descriptor binding, where the target has them
    align: int = 0
    """Bytes the kernels assume the buffer's first element is aligned to (vector accesses,
    `einc-vectorize-global`); 0: its element's size. A launcher passes only memory aligned
    to `alignment()`: its own allocations are, and a caller's device array that is not is
    refused (`einc.runtime.device.stage`)."""

    def alignment(self) -> int:
        """The alignment the kernels assume, in bytes (at least the stored element's size)."""
        return max(self.align, np.dtype(self.storage_dtype or self.dtype).itemsize)


@dataclass(frozen=True)
class KernelLaunch:
    name: str  # entry point
    args: tuple[str, ...]  # buffer names in parameter order
    grid: tuple[int, int, int]  # work-groups (blocks) per dimension
    block: tuple[int, int, int]  # work-items (threads) per work-group
    shared_bytes: int = 0

    @property
    def global_size(self) -> tuple[int, int, int]:
        return (
            self.grid[0] * self.block[0],
            self.grid[1] * self.block[1],
            self.grid[2] * self.block[2],
        )


@dataclass(frozen=True)
class LaunchManifest:
    target: str
    buffers: tuple[Buffer, ...]
    kernels: tuple[KernelLaunch, ...]
    extra: dict[str, object] = field(default_factory=dict)  # JSON values a host may add

    def buffer(self, name: str) -> Buffer:
        return next(b for b in self.buffers if b.name == name)

    def to_json(self) -> str:
        return json.dumps(asdict(self), indent=2)

    @classmethod
    def from_json(cls, text: str) -> LaunchManifest:
        data = json.loads(text)
        return cls(
            target=data["target"],
            buffers=tuple(
                Buffer(**{**b, "shape": tuple(b["shape"])}) for b in data["buffers"]
            ),
            kernels=tuple(
                KernelLaunch(
                    **{**k, "args": tuple(k["args"]), "grid": tuple(k["grid"]), "block": tuple(k["block"])}
                )
                for k in data["kernels"]
            ),
            extra=data.get("extra", {}),
        )
