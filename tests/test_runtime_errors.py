"""Runtime failures reported as what they are: an OpenCL kernel that cannot be created for
another reason than its name, and an HLSL buffer larger than the Vulkan device can bind.
"""

from __future__ import annotations

from typing import Any

import pytest

import einc
from einc.errors import TargetError, ToolchainError
from tests.test_device_targets import require



IR = "output0[N] = input0[N] + input1[N]"


def inputs(*shape: int) -> dict[str, Any]:
    return {name: {"dtype": "float32", "shape": list(shape)} for name in ("input0", "input1")}


@pytest.mark.opencl
def test_opencl_kernel_creation_failure_gives_the_runtimes_reason(monkeypatch: pytest.MonkeyPatch) -> None:
    """A kernel the program does define, whose creation fails (e.g. INVALID_CONTEXT when
    contexts were mixed up): the message used to say the program "has no kernel
    'kernel_output0' (it defines: kernel_output0)"."""
    require("opencl")
    import pyopencl

    def refuse(program: Any, name: str) -> Any:
        raise pyopencl.LogicError("clCreateKernel failed: INVALID_CONTEXT")

    monkeypatch.setattr(pyopencl, "Kernel", refuse)
    with pytest.raises(ToolchainError) as caught:
        einc.compile(IR, inputs(64), target="opencl")
    message = caught.value.message
    assert "creating OpenCL kernel 'kernel_output0' failed" in message, message
    assert "INVALID_CONTEXT" in message and "has no kernel" not in message, message


@pytest.mark.opencl
def test_opencl_missing_kernel_still_names_the_kernels_defined() -> None:
    require("opencl")
    from einc.runtime.manifest import Buffer, KernelLaunch, LaunchManifest
    from einc.runtime.opencl import load_opencl_kernel

    manifest = LaunchManifest(
        "opencl", (Buffer("a", "float32", (4,), "output"),), (KernelLaunch("wanted", ("a",), (1, 1, 1), (4, 1, 1)),)
    )
    source = "__kernel void other(__global float *a) { a[get_global_id(0)] = 1.0f; }"
    with pytest.raises(ToolchainError, match=r"has no kernel 'wanted' \(it defines: other\)"):
        load_opencl_kernel(source, manifest)


@pytest.mark.hlsl
def test_hlsl_buffer_over_the_storage_binding_limit_is_a_target_error() -> None:
    """1024x255x255 float32 is 266 MB, over lavapipe's 128 MiB storage-buffer binding: it
    used to escape at the first call as wgpu's GPUValidationError."""
    require("hlsl")
    from einc.runtime.vulkan import _gpu

    limit = _gpu().device.limits["max-storage-buffer-binding-size"]
    with pytest.raises(TargetError) as caught:
        einc.compile("output0[N, H, W] = input0[N, H, W] + input1[N, H, W]", inputs(1024, 255, 255), target="hlsl")
    message = caught.value.message
    assert "HLSL input buffer 'input0' (float32[1024, 255, 255], 266,342,400 bytes)" in message, message
    assert f"storage-buffer binding limit of {limit:,} bytes" in message, message


@pytest.mark.hlsl
def test_hlsl_buffers_up_to_the_limit_are_accepted() -> None:
    """The boundary: buffers of exactly the limit build (nothing is allocated until a call)."""
    require("hlsl")
    from einc.runtime.vulkan import _gpu

    limit = _gpu().device.limits["max-storage-buffer-binding-size"]
    einc.compile(IR, inputs(limit // 4), target="hlsl")
    with pytest.raises(TargetError, match="storage-buffer binding limit"):
        einc.compile(IR, inputs(limit // 4 + 1), target="hlsl")
