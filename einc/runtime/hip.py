"""Compile-check generated HIP for AMD GPUs, with register, spill and LDS usage per kernel.

Contract with the HIP printer:
- one source text, `#include <hip/hip_runtime.h>` first; no host code is needed;
- one `extern "C" __global__ void <name>(...)` per manifest kernel, `<name>` =
  `KernelLaunch.name`, optionally `__launch_bounds__(threads)`;
- parameters: `T *__restrict__` per buffer of `KernelLaunch.args`, in that order, `T` the
  buffer's storage dtype; launched (on an AMD GPU) with grid/block as in CUDA and
  `KernelLaunch.shared_bytes` of dynamic LDS (`extern __shared__`).

`compile_check_hip(source, manifest, arch)` builds a device code object for `arch`
(`gfx90a`, `gfx908`, `gfx1030`, `gfx940`; Debian's HIP 5.2 has no gfx1100 device library)
with `HIP_PLATFORM=amd hipcc --offload-arch=<arch> --genco -O3`, or Debian's clang++-15
with the ROCm device libraries when hipcc is absent, and
`-Rpass-analysis=kernel-resource-usage`, whose remarks give VGPRs, SGPRs, AGPRs, spills,
scratch and LDS per kernel. Reports are cached on disk by hash of the source, arch and
compiler. There is no AMD GPU to run on: `load_hip_kernel` raises RuntimeMissingError (a TargetError).
"""

from __future__ import annotations

import functools
import json
import os
import re
import shlex
import subprocess
import tempfile
from pathlib import Path
from typing import NoReturn

from einc.errors import RuntimeMissingError, ToolchainError
from einc.runtime.cache import cached_artifact, content_key
from einc.runtime.device import CompileReport, KernelResources, check_manifest, missing_kernels
from einc.runtime.manifest import LaunchManifest
from einc.runtime.finders import HIP_DEVICE_LIBS, INSTALL_HINT, first_line, hip_compiler, tool_version

ARCHS: tuple[str, ...] = ("gfx90a", "gfx1030")
FLAGS: tuple[str, ...] = ("-O3", "-Rpass-analysis=kernel-resource-usage")


def _command(kind: str, compiler: str, arch: str, source: Path, output: Path) -> list[str]:
    if kind == "hipcc":
        return [compiler, f"--offload-arch={arch}", "--genco", *FLAGS, str(source), "-o", str(output)]
    return [
        compiler, "-x", "hip", f"--offload-arch={arch}", "--cuda-device-only", "--rocm-path=/usr",
        f"--rocm-device-lib-path={HIP_DEVICE_LIBS}", "-c", *FLAGS, str(source), "-o", str(output),
    ]  # fmt: skip


_REMARK = re.compile(r"remark:\s+(.*?):\s+(\S+)\s+\[-Rpass-analysis=kernel-resource-usage\]")
_FIELDS = {
    "SGPRs": "sgprs",
    "VGPRs": "vgprs",
    "AGPRs": "agprs",
    "ScratchSize [bytes/lane]": "scratch_bytes_per_lane",
    "Occupancy [waves/SIMD]": "occupancy_waves_per_simd",
    "SGPRs Spill": "sgpr_spills",
    "VGPRs Spill": "vgpr_spills",
    "LDS Size [bytes/block]": "lds_bytes",
}


def parse_resource_remarks(log: str) -> tuple[KernelResources, ...]:
    """Per-kernel resources from clang's kernel-resource-usage remarks."""
    found: dict[str, dict[str, int]] = {}
    current: str | None = None
    for line in log.splitlines():
        match = _REMARK.search(line)
        if match is None:
            continue
        label, value = match.group(1).strip(), match.group(2)
        if label == "Function Name":
            current = str(value)
            found[current] = {}
        elif current is not None and label in _FIELDS and value.isdigit():
            found[current][_FIELDS[label]] = int(value)
    return tuple(
        KernelResources(
            name,
            registers=values.get("vgprs", 0),
            spills=values.get("sgpr_spills", 0) + values.get("vgpr_spills", 0),
            shared_bytes=values.get("lds_bytes", 0),
            details={k: v for k, v in values.items() if k not in ("vgprs", "lds_bytes")},
        )
        for name, values in found.items()
    )


def device_assembly(source: str, arch: str = "gfx90a") -> str:
    """The AMDGPU assembly the HIP compiler makes of `source` for `arch`: what a test reads to
    see which instructions a kernel uses (`v_mfma_...`). ToolchainError when it is rejected."""
    found = hip_compiler()
    if found is None:
        raise RuntimeMissingError("HIP assembly needs hipcc (apt hipcc libamdhip64-dev) or clang++-15 with ROCm device libs")
    kind, compiler = found
    with tempfile.TemporaryDirectory(prefix="einc-hip-") as tmp:
        src, out = Path(tmp) / "kernel.hip", Path(tmp) / "kernel.s"
        src.write_text(source)
        command = [c for c in _command(kind, compiler, arch, src, out) if c not in ("--genco", "-c")]
        command[1:1] = ["-S", "--cuda-device-only"] if kind == "hipcc" else ["-S"]
        done = subprocess.run(command, capture_output=True, text=True, env={**os.environ, "HIP_PLATFORM": "amd"})
        if done.returncode != 0 or not out.is_file():
            raise ToolchainError(f"$ {' '.join(command)}\n{(done.stdout + done.stderr).strip()}")
        return out.read_text()


def compile_check_hip(source: str, manifest: LaunchManifest, arch: str = "gfx90a") -> CompileReport:
    """Compile `source` for one AMD GPU architecture and report resources per kernel.

    A report with `ok=False` carries the compiler's diagnostics (`report.check()` raises
    them as a ToolchainError); a manifest kernel without a resource remark fails too.
    """
    check_manifest(manifest)
    found = hip_compiler()
    if found is None:
        raise RuntimeMissingError("HIP compile checks need hipcc (apt hipcc libamdhip64-dev) or clang++-15 with ROCm device libs")
    kind, compiler = found
    names = ",".join(k.name for k in manifest.kernels)
    key = content_key(source, arch, kind, compiler, tool_version(compiler), "\0".join(FLAGS), names)

    def build(path: Path) -> None:
        with tempfile.TemporaryDirectory(prefix="einc-hip-") as tmp:
            src, out = Path(tmp) / "kernel.hip", Path(tmp) / "kernel.co"
            src.write_text(source)
            command = _command(kind, compiler, arch, src, out)
            done = subprocess.run(command, capture_output=True, text=True, env={**os.environ, "HIP_PLATFORM": "amd"})
            log = f"$ {' '.join(command)}\n{(done.stdout + done.stderr).strip()}"
            ok = done.returncode == 0 and out.is_file()
            kernels = parse_resource_remarks(done.stderr) if ok else ()
            missing = missing_kernels(manifest, {k.name for k in kernels}) if ok else []
            if missing:
                ok = False
                log += f"\nno kernel named {', '.join(missing)} in the code object (kernels must be extern \"C\" __global__)"
            size = out.stat().st_size if out.is_file() else 0
        path.write_text(json.dumps(CompileReport("hip", arch, ok, log, kernels, size).to_json_dict()))

    path = cached_artifact(
        "hip-report", key, ".json", build,
        validate=lambda p: CompileReport.from_json_dict(json.loads(p.read_text())),
    ).path  # fmt: skip
    return CompileReport.from_json_dict(json.loads(path.read_text()))


def toolchain_identity() -> tuple[str, str]:
    """The HIP compiler's version and einc's flags, as tuning records key them."""
    found = hip_compiler()
    return ("no HIP compiler" if found is None else first_line(tool_version(found[1]))), shlex.join(FLAGS)


def load_hip_kernel(source: str, manifest: LaunchManifest) -> NoReturn:
    """No AMD GPU runtime is available to einc: HIP is a compile-only target."""
    raise RuntimeMissingError(
        "HIP kernels cannot run here: einc has no AMD GPU executor (HIP is compile-checked only: "
        "compile_check_hip reports resources)"
    )


@functools.cache
def toolchain_check() -> tuple[bool, str]:
    """Whether HIP source can be compiled here (hipcc, or clang++-15 with the ROCm device
    libraries), and a one-line reason (einc.targets.toolchains)."""
    found = hip_compiler()
    if found is None:
        return False, (
            "HIP: neither hipcc nor clang++-15 with the ROCm device libraries is installed "
            f"(install: apt hipcc libamdhip64-dev; or {INSTALL_HINT})"
        )
    kind, path = found
    return True, f"HIP: {kind} at {path} ({tool_version(path).splitlines()[0]})"
