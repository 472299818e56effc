"""Run generated HLSL compute shaders on NumPy arrays: glslang to SPIR-V, then Vulkan.

Contract with the HLSL printer:
- one source text holding every kernel: one `[numthreads(X, Y, Z)] void <name>(...)`
  compute entry per manifest kernel, `<name>` = `KernelLaunch.name`, `(X, Y, Z)` =
  `KernelLaunch.block`; thread indices from `SV_DispatchThreadID`, `SV_GroupThreadID`,
  `SV_GroupID`;
- every buffer is a global in descriptor set 0 at the manifest buffer's `binding`:
  `RWStructuredBuffer<T> name : register(uB);` (or `StructuredBuffer<T> ... register(tB)`
  for a read-only input, or `[[vk::binding(B, 0)]]`), `T` the buffer's storage dtype;
  glslang maps `register(uB)` and `register(tB)` both to binding B, so the numbers must be
  distinct across all buffers; no constant buffers (the manifest has none);
- work-group memory is `groupshared` and static (`KernelLaunch.shared_bytes` must be 0);
- dispatched as `dispatch_workgroups(*grid)`, kernels in manifest order, each seeing the
  writes of the previous ones;
- HLSL has no 8-bit buffers: such buffers need `storage_dtype` (e.g. `int32`), which this
  runtime converts at the boundary, as it does for any buffer with a storage dtype.

Compilation: `glslangValidator -D -V -S comp --target-env vulkan1.1 -e <name>` per entry
(SPIR-V 1.3: wave intrinsics need it; glslang keeps only the globals the entry uses), then
`spirv-val --target-env vulkan1.1`; the SPIR-V is cached on disk by hash of the source,
entry and glslang version. Execution: `wgpu` on a Vulkan CPU adapter (Mesa lavapipe), with a
bind-group layout built from the SPIR-V's own declarations (read-only buffers need a
read-only binding), and wgpu's subgroup feature requested where the adapter has it
(`WaveActiveSum` and friends work). wgpu translates SPIR-V through naga, which can refuse
SPIR-V that spirv-val accepts (e.g. `WaveIsFirstLane`, OpGroupNonUniformElect: use
`WaveGetLaneIndex() == 0`); that is reported as a ToolchainError naming naga.

Limits: every buffer is one storage binding, so a buffer larger than the device's
`max-storage-buffer-binding-size` (128 MiB on lavapipe) or `max-buffer-size` is refused
when the kernel is built, with a TargetError naming the buffer and the limit.

Thread safety: the wgpu device is made once per process under a lock, and every use of it
(pipeline creation; a call's uploads, dispatches and read-backs) holds one device lock:
wgpu-py's queue and buffer mapping are not safe to drive from several threads at once.
Calls from several threads are therefore serialised; SPIR-V compilation is not.
"""

from __future__ import annotations

import functools
import os
import shlex
import shutil
import struct
import subprocess
import tempfile
import threading
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from einc.errors import RuntimeMissingError, TargetError, ToolchainError
from einc.runtime.cache import cached_artifact, content_key
from einc.runtime.device import Staged, check_manifest, nbytes, stage, storage_dtype
from einc.runtime.manifest import Buffer, KernelLaunch, LaunchManifest
from einc.runtime.once import locked_cache
from einc.runtime.finders import INSTALL_HINT, first_line, known, reason, tool_version

GLSLANG_FLAGS: tuple[str, ...] = ("-D", "-V", "-S", "comp", "--target-env", "vulkan1.1")
SPIRV_ENV = "vulkan1.1"
WANTED_FEATURES = ("shader-f16", "shader-f64", "shader-int64", "shader-i16", "subgroup", "subgroup-barrier")


def _tool(name: str) -> str:
    path = shutil.which(name)
    if path is None:
        raise RuntimeMissingError(
            f"the HLSL target needs {name} (apt glslang-tools spirv-tools, or "
            "scripts/install_toolchains.sh)"
        )
    return path


def compile_hlsl(source: str, entry: str) -> bytes:
    """SPIR-V for the compute entry `entry` of an HLSL source, validated, cached on disk.

    Raises ToolchainError with glslang's or spirv-val's diagnostics.
    """
    glslang, spirv_val = _tool("glslangValidator"), _tool("spirv-val")
    key = content_key(source, entry, "\0".join(GLSLANG_FLAGS), tool_version(glslang), SPIRV_ENV)

    def build(path: Path) -> None:
        with tempfile.TemporaryDirectory(prefix="einc-hlsl-") as tmp:
            hlsl = Path(tmp) / "kernel.hlsl"
            hlsl.write_text(source)
            command = [glslang, *GLSLANG_FLAGS, "-e", entry, str(hlsl), "-o", str(path)]
            done = subprocess.run(command, capture_output=True, text=True)
            if done.returncode != 0:
                raise ToolchainError(
                    f"glslang rejected the generated HLSL kernel '{entry}'\n"
                    f"$ {' '.join(command)}\n{(done.stdout + done.stderr).strip()}\n"
                    f"--- source ---\n{source}"
                )
        command = [spirv_val, "--target-env", SPIRV_ENV, str(path)]
        done = subprocess.run(command, capture_output=True, text=True)
        if done.returncode != 0:
            raise ToolchainError(
                f"spirv-val rejected the SPIR-V of HLSL kernel '{entry}'\n"
                f"$ {' '.join(command)}\n{(done.stdout + done.stderr).strip()}"
            )

    return cached_artifact("hlsl", key, f".{entry}.spv", build, validate=_check_spirv).path.read_bytes()


def _check_spirv(path: Path) -> None:
    code = path.read_bytes()
    if len(code) % 4 or len(code) < 20 or code[:4] != (0x07230203).to_bytes(4, "little"):
        raise ToolchainError(f"{path} is no SPIR-V module")


# --- a minimal SPIR-V reflection: the storage buffers of descriptor set 0 -------------

_OP_ENTRY_POINT, _OP_TYPE_STRUCT, _OP_TYPE_POINTER, _OP_VARIABLE = 15, 30, 32, 59
_OP_DECORATE, _OP_MEMBER_DECORATE = 71, 72
_DEC_BLOCK, _DEC_BUFFER_BLOCK, _DEC_NON_WRITABLE = 2, 3, 24
_DEC_BINDING, _DEC_DESCRIPTOR_SET = 33, 34
_SC_UNIFORM, _SC_STORAGE_BUFFER = 2, 12


@dataclass(frozen=True)
class SpirvBinding:
    set: int
    binding: int
    read_only: bool
    uniform: bool  # a constant buffer rather than a storage buffer


@dataclass(frozen=True)
class SpirvModule:
    entry_points: tuple[str, ...]
    bindings: tuple[SpirvBinding, ...]


def reflect_spirv(code: bytes) -> SpirvModule:
    """Entry point names and buffer bindings declared by a SPIR-V module."""
    words: list[int] = list(struct.unpack(f"<{len(code) // 4}I", code))
    if not words or words[0] != 0x07230203:
        raise ToolchainError("not a SPIR-V module (bad magic number)")
    entries: list[str] = []
    decorations: dict[int, dict[int, int]] = {}
    member_non_writable: dict[int, set[int]] = {}
    struct_members: dict[int, int] = {}
    pointee: dict[int, tuple[int, int]] = {}  # pointer type -> (storage class, type)
    variables: list[tuple[int, int, int]] = []  # (id, pointer type, storage class)
    i = 5
    while i < len(words):
        count, opcode = words[i] >> 16, words[i] & 0xFFFF
        ops = words[i + 1 : i + count]
        if opcode == _OP_ENTRY_POINT:
            name = struct.pack(f"<{len(ops) - 2}I", *ops[2:])
            entries.append(name.split(b"\0", 1)[0].decode())
        elif opcode == _OP_DECORATE:
            decorations.setdefault(ops[0], {})[ops[1]] = ops[2] if len(ops) > 2 else 1
        elif opcode == _OP_MEMBER_DECORATE and ops[2] == _DEC_NON_WRITABLE:
            member_non_writable.setdefault(ops[0], set()).add(ops[1])
        elif opcode == _OP_TYPE_STRUCT:
            struct_members[ops[0]] = len(ops) - 1
        elif opcode == _OP_TYPE_POINTER:
            pointee[ops[0]] = (ops[1], ops[2])
        elif opcode == _OP_VARIABLE:
            variables.append((ops[1], ops[0], ops[2]))
        i += max(count, 1)
    bindings: list[SpirvBinding] = []
    for var, pointer, storage_class in variables:
        if storage_class not in (_SC_UNIFORM, _SC_STORAGE_BUFFER):
            continue
        block = pointee.get(pointer, (0, 0))[1]
        block_decorations = decorations.get(block, {})
        var_decorations = decorations.get(var, {})
        uniform = storage_class == _SC_UNIFORM and _DEC_BUFFER_BLOCK not in block_decorations
        members = struct_members.get(block, 0)
        read_only = _DEC_NON_WRITABLE in var_decorations or (
            members > 0 and len(member_non_writable.get(block, ())) == members
        )
        bindings.append(
            SpirvBinding(
                var_decorations.get(_DEC_DESCRIPTOR_SET, 0),
                var_decorations.get(_DEC_BINDING, 0),
                read_only,
                uniform,
            )
        )
    return SpirvModule(tuple(entries), tuple(bindings))


# --- the wgpu device -------------------------------------------------------------------


@dataclass(frozen=True)
class _Gpu:
    wgpu: Any
    adapter: Any
    device: Any


_device_lock = threading.Lock()
"""Held by every use of the wgpu device (see the module's docstring)."""


@locked_cache
def _gpu() -> _Gpu:
    if not os.environ.get("XDG_RUNTIME_DIR") or not os.path.isdir(os.environ["XDG_RUNTIME_DIR"]):
        # wgpu (through the Vulkan loader) complains about an unset or invalid one
        os.environ["XDG_RUNTIME_DIR"] = tempfile.mkdtemp(prefix="einc-xdg-")
    try:
        import wgpu
    except ImportError as error:
        raise RuntimeMissingError(
            f"the HLSL target runs shaders with wgpu ({error}); `pip install wgpu` and "
            "apt mesa-vulkan-drivers libvulkan1, or scripts/install_toolchains.sh"
        ) from error
    try:
        from wgpu.backends.wgpu_native.extras import set_instance_extras

        set_instance_extras(backends=["Vulkan"])  # skip probing OpenGL; fails if already made
    except Exception:  # noqa: BLE001 - an instance exists already: use it as it is
        pass
    adapters = [a for a in wgpu.gpu.enumerate_adapters_sync() if a.info.get("backend_type") == "Vulkan"]
    if not adapters:
        raise RuntimeMissingError(
            "no Vulkan adapter for wgpu (install apt mesa-vulkan-drivers libvulkan1 for "
            "the lavapipe CPU driver)"
        )
    # prefer the CPU driver (lavapipe) for reproducible results on any machine
    adapters.sort(key=lambda a: a.info.get("adapter_type") != "CPU")
    adapter = adapters[0]
    features = [f for f in WANTED_FEATURES if f in adapter.features]
    device = adapter.request_device_sync(required_features=features, required_limits=dict(adapter.limits))
    return _Gpu(wgpu, adapter, device)


def device_description() -> str:
    info = _gpu().adapter.info
    return f"Vulkan: {info['device']} ({info['description']}) through wgpu"


def driver_version() -> str:
    """The Vulkan driver (the adapter's description, e.g. `Mesa 22.3.6 (LLVM 15.0.6)`) and
    wgpu's version (part of tuning records' keys)."""
    gpu = _gpu()
    return f"{gpu.adapter.info['description']}, wgpu {getattr(gpu.wgpu, '__version__', '?')}"


def toolchain_identity() -> tuple[str, str]:
    """glslang's version and einc's glslang flags, as tuning records key them."""
    return known(lambda: first_line(tool_version(_tool("glslangValidator")))), shlex.join(GLSLANG_FLAGS)


def _binding_buffers(manifest: LaunchManifest) -> dict[int, Buffer]:
    by_binding: dict[int, Buffer] = {}
    for buffer in manifest.buffers:
        if buffer.binding is None:
            raise TargetError(f"HLSL buffer '{buffer.name}' has no binding in the manifest")
        if buffer.binding in by_binding:
            raise TargetError(
                f"HLSL buffers '{by_binding[buffer.binding].name}' and '{buffer.name}' "
                f"share binding {buffer.binding}"
            )
        by_binding[buffer.binding] = buffer
    return by_binding


@dataclass(frozen=True)
class _Pipeline:
    name: str
    grid: tuple[int, int, int]
    pipeline: Any
    layout: Any
    bindings: tuple[tuple[int, str], ...]  # (binding, buffer name)


class VulkanKernel:
    """HLSL kernels compiled to SPIR-V and turned into compute pipelines."""

    def __init__(self, source: str, manifest: LaunchManifest):
        check_manifest(manifest)
        for launch in manifest.kernels:
            if launch.shared_bytes:
                raise TargetError(
                    f"HLSL kernel '{launch.name}' asks for {launch.shared_bytes} bytes of "
                    "dynamic shared memory; HLSL has only static groupshared arrays"
                )
        self.source = source
        self.manifest = manifest
        self.spirv = {launch.name: compile_hlsl(source, launch.name) for launch in manifest.kernels}
        by_binding = _binding_buffers(manifest)
        gpu = _gpu()
        _check_buffer_limits(manifest, gpu.device.limits, gpu.adapter.info)
        self._pipelines: list[_Pipeline] = []
        with _device_lock:
            for launch in manifest.kernels:
                self._pipelines.append(self._pipeline(gpu, launch, by_binding))

    def _pipeline(self, gpu: _Gpu, launch: KernelLaunch, by_binding: dict[int, Buffer]) -> _Pipeline:
        code = self.spirv[launch.name]
        module = reflect_spirv(code)
        entries: list[dict[str, object]] = []
        bound: list[tuple[int, str]] = []
        for b in sorted(module.bindings, key=lambda b: b.binding):
            if b.set != 0 or b.uniform or b.binding not in by_binding:
                what = "a constant buffer" if b.uniform else "a buffer"
                raise ToolchainError(
                    f"HLSL kernel '{launch.name}' declares {what} at set {b.set}, "
                    f"binding {b.binding}, which is no storage buffer of the manifest "
                    f"(bindings: {sorted(by_binding)})"
                )
            kind = "read-only-storage" if b.read_only else "storage"
            entries.append(
                {"binding": b.binding, "visibility": gpu.wgpu.ShaderStage.COMPUTE, "buffer": {"type": kind}}
            )
            bound.append((b.binding, by_binding[b.binding].name))
        entry = module.entry_points[0] if module.entry_points else launch.name
        try:
            shader = gpu.device.create_shader_module(label=launch.name, code=code)
            layout = gpu.device.create_bind_group_layout(entries=entries)
            pipeline = gpu.device.create_compute_pipeline(
                layout=gpu.device.create_pipeline_layout(bind_group_layouts=[layout]),
                compute={"module": shader, "entry_point": entry},
            )
        except Exception as error:  # wgpu raises GPUValidationError / GPUError subclasses
            raise ToolchainError(
                f"wgpu (naga) refused the SPIR-V of HLSL kernel '{launch.name}', which "
                f"spirv-val accepted:\n{error}"
            ) from error
        return _Pipeline(launch.name, launch.grid, pipeline, layout, tuple(bound))

    def __call__(self, inputs: Mapping[str, np.ndarray], outputs: Mapping[str, np.ndarray]) -> None:
        gpu = _gpu()
        staged = stage(self.manifest, inputs, outputs)
        with _device_lock:
            self._run(gpu, staged)
        staged.finish()

    def _run(self, gpu: _Gpu, staged: Staged) -> None:
        wgpu, device = gpu.wgpu, gpu.device
        usage = wgpu.BufferUsage.STORAGE | wgpu.BufferUsage.COPY_SRC | wgpu.BufferUsage.COPY_DST
        buffers: dict[str, Any] = {}
        for buffer in self.manifest.buffers:
            size = _padded(nbytes(buffer))
            buffers[buffer.name] = device.create_buffer(label=buffer.name, size=size, usage=usage)
            if buffer.role == "input" and nbytes(buffer):
                data = staged.host[buffer.name].tobytes()
                device.queue.write_buffer(buffers[buffer.name], 0, data + bytes(size - len(data)))
        encoder = device.create_command_encoder()
        for p in self._pipelines:
            group = device.create_bind_group(
                layout=p.layout,
                entries=[
                    {"binding": binding, "resource": {"buffer": buffers[name], "offset": 0, "size": buffers[name].size}}
                    for binding, name in p.bindings
                ],
            )
            compute = encoder.begin_compute_pass(label=p.name)
            compute.set_pipeline(p.pipeline)
            compute.set_bind_group(0, group)
            compute.dispatch_workgroups(*p.grid)
            compute.end()
        device.queue.submit([encoder.finish()])
        for buffer in self.manifest.buffers:
            if buffer.role != "output" or not nbytes(buffer):
                continue
            data = device.queue.read_buffer(buffers[buffer.name], 0, _padded(nbytes(buffer)))
            host = staged.host[buffer.name]
            host[...] = np.frombuffer(data, storage_dtype(buffer), host.size).reshape(host.shape)


BUFFER_LIMITS: tuple[tuple[str, str], ...] = (
    ("max-storage-buffer-binding-size", "storage-buffer binding limit"),
    ("max-buffer-size", "buffer size limit"),
)


def _check_buffer_limits(manifest: LaunchManifest, limits: Mapping[str, int], info: Mapping[str, object]) -> None:
    """TargetError for a buffer the device cannot bind (wgpu would fail at dispatch with a
    GPUValidationError)."""
    for buffer in manifest.buffers:
        size = _padded(nbytes(buffer))
        for name, what in BUFFER_LIMITS:
            limit = limits.get(name)
            if limit is not None and size > limit:
                shape = ", ".join(map(str, buffer.shape))
                raise TargetError(
                    f"HLSL {buffer.role} buffer '{buffer.name}' ({storage_dtype(buffer)}[{shape}], "
                    f"{size:,} bytes) is larger than the Vulkan device's {what} of {limit:,} bytes "
                    f"({name} of {info.get('device', 'the adapter')}); split the problem into "
                    "smaller kernels"
                )


def _padded(size: int) -> int:
    """wgpu copies and bindings are in whole 4-byte words, and never empty."""
    return max(4, (size + 3) // 4 * 4)


def load_hlsl_kernel(source: str, manifest: LaunchManifest) -> VulkanKernel:
    """Compile (or fetch from the cache) every kernel of an HLSL source; return its runner."""
    return VulkanKernel(source, manifest)


load_vulkan_kernel = load_hlsl_kernel


@functools.cache
def toolchain_check() -> tuple[bool, str]:
    """Whether HLSL kernels can run here (glslang, spirv-val and a Vulkan device), and a
    one-line reason (einc.targets.toolchains)."""
    for tool in ("glslangValidator", "spirv-val"):
        if shutil.which(tool) is None:
            return False, (
                f"HLSL: {tool} is not on PATH (install: apt glslang-tools spirv-tools; "
                f"or {INSTALL_HINT})"
            )
    try:
        return True, device_description()
    except TargetError as error:  # says how to install
        return False, f"HLSL: {error.message}"
    except Exception as error:  # noqa: BLE001
        return False, (
            f"HLSL: no Vulkan executor: {reason(error)} (install: apt mesa-vulkan-drivers "
            f"libvulkan1; pip wgpu; or {INSTALL_HINT})"
        )
