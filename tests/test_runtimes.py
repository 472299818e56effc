"""Device runtimes and harnesses (einc/runtime/{opencl,vulkan,sycl,poplar,cuda,hip}.py) on
hand-written kernels: each is run on random data against NumPy (outputs poisoned first), a
broken source must give a ToolchainError carrying the compiler's message, and the CUDA/HIP
compile checks must report resource usage.

The kernels are what the printers are contracted to emit (see each runtime's docstring):
`vadd` (c = a + b, with a bounds check) and a two-kernel program, `matmul_reduce` (one
work-group per output element, a tree reduction over K in local/shared memory) into a temp
`T`, then `add_bias` (C = T + bias).

A missing toolchain skips its tests, with the reason, except in CI (`CI=true`), where it
fails them. Select one target with its marker (`pytest -m opencl`). Built artifacts go to the
normal content-addressed einc cache, so only a first run pays for the SYCL shim (~12 s) and
the first SYCL kernel builds.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from einc.errors import RuntimeInputError, TargetError, ToolchainError
from einc.targets import toolchains
from einc.runtime.manifest import Buffer, KernelLaunch, LaunchManifest

M, N, K = 12, 20, 100  # K is not a multiple of the 64-wide work-group: strided partial sums
LEN = 1000  # not a multiple of the block: kernels bounds-check
BLOCK = 64

Runner = Callable[[Mapping[str, np.ndarray], Mapping[str, np.ndarray]], None]


def require(target: str) -> None:
    ok, why = toolchains.available(target)
    if ok:
        return
    if toolchains.required(target):
        pytest.fail(f"CI needs the {target} toolchain: {why}")
    pytest.skip(why)


# --- problems --------------------------------------------------------------------------


def vadd_manifest(target: str, dtype: str = "float32", storage: str | None = None) -> LaunchManifest:
    buffers = tuple(
        Buffer(name, dtype, (LEN,), role, storage_dtype=storage, binding=k)
        for k, (name, role) in enumerate((("a", "input"), ("b", "input"), ("c", "output")))
    )
    grid = (-(-LEN // BLOCK), 1, 1)
    return LaunchManifest(target, buffers, (KernelLaunch("vadd", ("a", "b", "c"), grid, (BLOCK, 1, 1)),))


def matmul_manifest(target: str) -> LaunchManifest:
    shapes = {"A": ((M, K), "input"), "B": ((K, N), "input"), "T": ((M, N), "temp"),
              "bias": ((N,), "input"), "C": ((M, N), "output")}  # fmt: skip
    buffers = tuple(
        Buffer(name, "float32", shape, role, binding=k) for k, (name, (shape, role)) in enumerate(shapes.items())
    )
    kernels = (
        KernelLaunch("matmul_reduce", ("A", "B", "T"), (N, M, 1), (BLOCK, 1, 1)),
        KernelLaunch("add_bias", ("T", "bias", "C"), (-(-(M * N) // BLOCK), 1, 1), (BLOCK, 1, 1)),
    )
    return LaunchManifest(target, buffers, kernels)


def random_inputs(manifest: LaunchManifest, seed: int = 7) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    inputs = {}
    for b in manifest.buffers:
        if b.role != "input":
            continue
        if np.dtype(b.dtype).kind == "f":
            inputs[b.name] = rng.standard_normal(b.shape).astype(b.dtype)
        else:
            info = np.iinfo(b.dtype)
            inputs[b.name] = rng.integers(info.min, info.max, b.shape, endpoint=True, dtype=b.dtype)
    return inputs


def poisoned_outputs(manifest: LaunchManifest) -> dict[str, np.ndarray]:
    outputs = {}
    for b in manifest.buffers:
        if b.role != "output":
            continue
        array = np.empty(b.shape, b.dtype)
        if array.dtype.kind == "f":
            array.fill(np.nan)
        else:
            array.view(np.uint8).fill(0xA5)
        outputs[b.name] = array
    return outputs


def check_vadd(run: Runner, manifest: LaunchManifest) -> None:
    inputs, outputs = random_inputs(manifest), poisoned_outputs(manifest)
    c = outputs["c"]
    run(inputs, outputs)
    assert outputs["c"] is c
    a, b = inputs["a"], inputs["b"]
    if a.dtype.kind == "f":  # the device adds in its storage type, then rounds back
        want = (a.astype(np.float32) + b.astype(np.float32)).astype(a.dtype)
    else:
        want = a + b  # wraps, as the storage type's sum converted back does
    np.testing.assert_array_equal(c, want)


def check_matmul(run: Runner, manifest: LaunchManifest) -> None:
    inputs, outputs = random_inputs(manifest), poisoned_outputs(manifest)
    run(inputs, outputs)
    want = inputs["A"].astype(np.float64) @ inputs["B"].astype(np.float64) + inputs["bias"]
    np.testing.assert_allclose(outputs["C"], want, rtol=1e-5, atol=1e-4)


def check_rejects(load: Callable[[], object], *needles: str) -> None:
    with pytest.raises(ToolchainError) as caught:
        load()
    for needle in needles:
        assert needle in str(caught.value)


# --- OpenCL ----------------------------------------------------------------------------

OPENCL = f"""
__kernel void vadd(__global const float *a, __global const float *b, __global float *c) {{
  const size_t i = get_global_id(0);
  if (i < {LEN}) c[i] = a[i] + b[i];
}}

__kernel void matmul_reduce(__global const float *A, __global const float *B, __global float *T) {{
  __local float partial[{BLOCK}];
  const int n = get_group_id(0), m = get_group_id(1), t = get_local_id(0);
  float s = 0.0f;
  for (int k = t; k < {K}; k += {BLOCK}) s += A[m * {K} + k] * B[k * {N} + n];
  partial[t] = s;
  barrier(CLK_LOCAL_MEM_FENCE);
  for (int w = {BLOCK // 2}; w > 0; w >>= 1) {{
    if (t < w) partial[t] += partial[t + w];
    barrier(CLK_LOCAL_MEM_FENCE);
  }}
  if (t == 0) T[m * {N} + n] = partial[0];
}}

__kernel void add_bias(__global const float *T, __global const float *bias, __global float *C) {{
  const int i = get_global_id(0);
  if (i < {M * N}) C[i] = T[i] + bias[i % {N}];
}}
"""


@pytest.mark.opencl
class TestOpenCL:
    @pytest.fixture(autouse=True)
    def _require(self) -> None:
        require("opencl")

    def test_vector_add(self) -> None:
        from einc.runtime.opencl import load_opencl_kernel

        check_vadd(load_opencl_kernel(OPENCL, vadd_manifest("opencl")), vadd_manifest("opencl"))

    def test_half_buffers_stored_as_float(self) -> None:
        # PoCL has no fp16 arithmetic: half tensors live in float32 on the device
        from einc.runtime.opencl import load_opencl_kernel

        manifest = vadd_manifest("opencl", "float16", storage="float32")
        check_vadd(load_opencl_kernel(OPENCL, manifest), manifest)

    def test_matmul_reduction_through_a_temp(self) -> None:
        from einc.runtime.opencl import load_opencl_kernel

        check_matmul(load_opencl_kernel(OPENCL, matmul_manifest("opencl")), matmul_manifest("opencl"))

    def test_broken_source(self) -> None:
        from einc.runtime.opencl import load_opencl_kernel

        broken = OPENCL.replace("a[i] + b[i]", "a[i] + undefined_b[i]")
        check_rejects(lambda: load_opencl_kernel(broken, vadd_manifest("opencl")), "undefined_b")

    def test_missing_kernel(self) -> None:
        from einc.runtime.opencl import load_opencl_kernel

        renamed = OPENCL.replace("void vadd(", "void vadd2(")
        check_rejects(lambda: load_opencl_kernel(renamed, vadd_manifest("opencl")), "no kernel 'vadd'")

    def test_bad_arrays(self) -> None:
        from einc.runtime.opencl import load_opencl_kernel

        manifest = vadd_manifest("opencl")
        run = load_opencl_kernel(OPENCL, manifest)
        inputs, outputs = random_inputs(manifest), poisoned_outputs(manifest)
        with pytest.raises(RuntimeInputError, match="dtype float64"):
            run({**inputs, "a": inputs["a"].astype(np.float64)}, outputs)
        with pytest.raises(RuntimeInputError, match="missing input 'b'"):
            run({"a": inputs["a"]}, outputs)
        with pytest.raises(RuntimeInputError, match="missing output 'c'"):
            run(inputs, {})
        with pytest.raises(RuntimeInputError, match="unknown input 'z'"):
            run({**inputs, "z": inputs["a"]}, outputs)
        with pytest.raises(RuntimeInputError, match="overlaps"):
            run(inputs, {"c": inputs["a"]})

    def test_arrays_used_in_place_over_repeated_calls(self, monkeypatch: pytest.MonkeyPatch) -> None:
        # PoCL's CPU device shares the host's memory: the kernels read and write the caller's
        # arrays (USE_HOST_PTR buffers, no copies) where they are aligned as the manifest and
        # the device (128 bytes) say; an array 16 bytes past that is copied through the
        # kernel's own buffer; each call sees its arrays' current contents
        from einc.runtime import opencl
        from einc.runtime.arrays import aligned_empty

        monkeypatch.delenv(opencl.COPY_ENV, raising=False)
        assert opencl.arrays_in_place() and opencl._device().base_alignment == 128
        aligned = vadd_manifest("opencl")
        aligned = LaunchManifest("opencl", tuple(Buffer(b.name, b.dtype, b.shape, b.role, align=16) for b in aligned.buffers),
                                 aligned.kernels)  # fmt: skip
        kernel = opencl.load_opencl_kernel(OPENCL, aligned)
        rng = np.random.default_rng(5)
        a = aligned_empty(LEN, np.float32)
        a[:] = rng.standard_normal(LEN)
        b = aligned_empty(LEN + 4, np.float32)[4:]  # 16-byte aligned (the manifest's), not 128 (the device's)
        b[:] = rng.standard_normal(LEN)
        seen = []
        original = opencl.OpenCLKernel._in_place
        monkeypatch.setattr(opencl.OpenCLKernel, "_in_place", lambda self, buffer, host: seen.append(
            (buffer.name, r := original(self, buffer, host))) or r)  # fmt: skip
        c = aligned_empty(LEN, np.float32)
        for step in range(3):
            c.fill(np.nan)
            kernel({"a": a, "b": b}, {"c": c})
            np.testing.assert_array_equal(c, a + b)
            a *= -2.0  # the same arrays changed between calls: read afresh
            b += 1.0
        assert dict(seen) == {"a": True, "b": False, "c": True}
        # inputs may alias each other; an output may not alias an input
        a.flags.writeable = False  # (a read-only input too)
        kernel({"a": a, "b": a}, {"c": c})
        np.testing.assert_array_equal(c, a + a)
        assert seen[-3:] == [("a", True), ("b", True), ("c", True)]
        a.flags.writeable = True
        with pytest.raises(RuntimeInputError, match="output 'c' overlaps argument 'a'"):
            kernel({"a": a, "b": b}, {"c": a})
        # a temp between two kernels (the kernel's own buffer) beside in-place arrays
        manifest = matmul_manifest("opencl")
        inputs = {k: _aligned_copy(v) for k, v in random_inputs(manifest).items()}
        outputs = {k: _aligned_copy(v) for k, v in poisoned_outputs(manifest).items()}
        seen.clear()
        opencl.load_opencl_kernel(OPENCL, manifest)(inputs, outputs)
        assert dict(seen) == {"A": True, "B": True, "bias": True, "T": False, "C": True}
        want = inputs["A"].astype(np.float64) @ inputs["B"].astype(np.float64) + inputs["bias"]
        np.testing.assert_allclose(outputs["C"], want, rtol=1e-5, atol=1e-4)

    def test_copied_path_matches(self, monkeypatch: pytest.MonkeyPatch) -> None:
        # $EINC_OPENCL_COPY=1 (a device with its own memory's path): every array copied in and out
        from einc.runtime import opencl

        monkeypatch.setenv(opencl.COPY_ENV, "1")
        assert not opencl.arrays_in_place()
        seen = []
        original = opencl.OpenCLKernel._in_place
        monkeypatch.setattr(opencl.OpenCLKernel, "_in_place", lambda self, buffer, host: seen.append(
            r := original(self, buffer, host)) or r)  # fmt: skip
        manifest = matmul_manifest("opencl")
        kernel = opencl.load_opencl_kernel(OPENCL, manifest)
        for _ in range(2):
            inputs = {k: _aligned_copy(v) for k, v in random_inputs(manifest).items()}
            outputs = {k: _aligned_copy(v) for k, v in poisoned_outputs(manifest).items()}
            kernel(inputs, outputs)
            want = inputs["A"].astype(np.float64) @ inputs["B"].astype(np.float64) + inputs["bias"]
            np.testing.assert_allclose(outputs["C"], want, rtol=1e-5, atol=1e-4)
        assert seen and not any(seen)


def _aligned_copy(array: np.ndarray) -> np.ndarray:
    from einc.runtime.arrays import aligned_empty

    copy = aligned_empty(array.shape, array.dtype)
    copy[...] = array
    return copy


# --- HLSL on Vulkan --------------------------------------------------------------------

HLSL_VADD = f"""
RWStructuredBuffer<float> a : register(u0);
RWStructuredBuffer<float> b : register(u1);
RWStructuredBuffer<float> c : register(u2);

[numthreads({BLOCK}, 1, 1)]
void vadd(uint3 id : SV_DispatchThreadID) {{
  if (id.x < {LEN}) c[id.x] = a[id.x] + b[id.x];
}}
"""

HLSL_VADD_INT8 = HLSL_VADD.replace("<float>", "<int>")  # int8 tensors stored as int32

HLSL_MATMUL = f"""
StructuredBuffer<float> A : register(t0);
StructuredBuffer<float> B : register(t1);
RWStructuredBuffer<float> T : register(u2);
StructuredBuffer<float> bias : register(t3);
RWStructuredBuffer<float> C : register(u4);

groupshared float partial[{BLOCK}];

[numthreads({BLOCK}, 1, 1)]
void matmul_reduce(uint3 group : SV_GroupID, uint3 local : SV_GroupThreadID) {{
  const uint n = group.x, m = group.y, t = local.x;
  float s = 0.0f;
  for (uint k = t; k < {K}; k += {BLOCK}) s += A[m * {K} + k] * B[k * {N} + n];
  partial[t] = s;
  GroupMemoryBarrierWithGroupSync();
  for (uint w = {BLOCK // 2}; w > 0; w >>= 1) {{
    if (t < w) partial[t] += partial[t + w];
    GroupMemoryBarrierWithGroupSync();
  }}
  if (t == 0) T[m * {N} + n] = partial[0];
}}

[numthreads({BLOCK}, 1, 1)]
void add_bias(uint3 id : SV_DispatchThreadID) {{
  if (id.x < {M * N}) C[id.x] = T[id.x] + bias[id.x % {N}];
}}
"""


@pytest.mark.hlsl
class TestHLSL:
    @pytest.fixture(autouse=True)
    def _require(self) -> None:
        require("hlsl")

    def test_vector_add(self) -> None:
        from einc.runtime.vulkan import load_hlsl_kernel

        check_vadd(load_hlsl_kernel(HLSL_VADD, vadd_manifest("hlsl")), vadd_manifest("hlsl"))

    def test_int8_buffers_stored_as_int32(self) -> None:
        from einc.runtime.vulkan import load_hlsl_kernel

        manifest = vadd_manifest("hlsl", "int8", storage="int32")
        check_vadd(load_hlsl_kernel(HLSL_VADD_INT8, manifest), manifest)

    def test_matmul_reduction_through_a_temp(self) -> None:
        from einc.runtime.vulkan import load_hlsl_kernel

        check_matmul(load_hlsl_kernel(HLSL_MATMUL, matmul_manifest("hlsl")), matmul_manifest("hlsl"))

    def test_spirv_reflection_sees_read_only_buffers(self) -> None:
        from einc.runtime.vulkan import compile_hlsl, reflect_spirv

        # glslang keeps only the globals an entry uses
        module = reflect_spirv(compile_hlsl(HLSL_MATMUL, "matmul_reduce"))
        assert module.entry_points == ("matmul_reduce",)
        assert {b.binding: b.read_only for b in module.bindings} == {0: True, 1: True, 2: False}
        module = reflect_spirv(compile_hlsl(HLSL_MATMUL, "add_bias"))
        assert {b.binding: b.read_only for b in module.bindings} == {2: False, 3: True, 4: False}

    def test_subgroup_sums(self) -> None:
        # wave intrinsics need SPIR-V 1.3 (glslang --target-env vulkan1.1) and wgpu's
        # subgroup feature; lavapipe's waves are 8 lanes wide on AVX2, 16 on AVX-512
        from einc.runtime.vulkan import load_hlsl_kernel

        source = f"""
RWStructuredBuffer<float> a : register(u0);
RWStructuredBuffer<float> b : register(u1);
RWStructuredBuffer<float> c : register(u2);
[numthreads({BLOCK}, 1, 1)]
void vadd(uint3 id : SV_DispatchThreadID) {{
  float lanes = WaveActiveSum(1.0f);
  if (id.x < {LEN}) c[id.x] = a[id.x] + b[id.x] + (lanes - WaveGetLaneCount());
}}
"""
        check_vadd(load_hlsl_kernel(source, vadd_manifest("hlsl")), vadd_manifest("hlsl"))

    def test_spirv_naga_refuses(self) -> None:
        # WaveIsFirstLane is OpGroupNonUniformElect, which spirv-val accepts and naga (in
        # wgpu 0.32) does not: printers use WaveGetLaneIndex() == 0 instead
        from einc.runtime.vulkan import load_hlsl_kernel

        source = HLSL_VADD.replace("if (id.x <", "if (WaveIsFirstLane() && id.x <")
        assert source != HLSL_VADD
        check_rejects(lambda: load_hlsl_kernel(source, vadd_manifest("hlsl")), "naga", "GroupNonUniformElect")

    def test_broken_source(self) -> None:
        from einc.runtime.vulkan import load_hlsl_kernel

        broken = HLSL_VADD.replace("a[id.x] + b[id.x]", "a[id.x] + undefined_b[id.x]")
        check_rejects(lambda: load_hlsl_kernel(broken, vadd_manifest("hlsl")), "glslang", "undefined_b")

    def test_binding_outside_the_manifest(self) -> None:
        from einc.runtime.vulkan import load_hlsl_kernel

        stray = HLSL_VADD.replace("register(u2)", "register(u7)")
        check_rejects(lambda: load_hlsl_kernel(stray, vadd_manifest("hlsl")), "binding 7")


# --- SYCL ------------------------------------------------------------------------------

SYCL = f"""
#include <sycl/sycl.hpp>
namespace syclext = sycl::ext::oneapi;
namespace syclexp = sycl::ext::oneapi::experimental;

extern "C" SYCL_EXT_ONEAPI_FUNCTION_PROPERTY((syclexp::nd_range_kernel<3>))
void vadd(const float *a, const float *b, float *c) {{
  sycl::nd_item<3> it = syclext::this_work_item::get_nd_item<3>();
  const size_t i = it.get_global_id(2);
  if (i < {LEN}) c[i] = a[i] + b[i];
}}

extern "C" SYCL_EXT_ONEAPI_FUNCTION_PROPERTY((syclexp::nd_range_kernel<3>))
void matmul_reduce(const float *A, const float *B, float *T) {{
  sycl::nd_item<3> it = syclext::this_work_item::get_nd_item<3>();
  syclexp::work_group_static<float[{BLOCK}]> partial;
  const int n = it.get_group(2), m = it.get_group(1), t = it.get_local_id(2);
  float s = 0.0f;
  for (int k = t; k < {K}; k += {BLOCK}) s += A[m * {K} + k] * B[k * {N} + n];
  partial[t] = s;
  sycl::group_barrier(it.get_group());
  for (int w = {BLOCK // 2}; w > 0; w >>= 1) {{
    if (t < w) partial[t] += partial[t + w];
    sycl::group_barrier(it.get_group());
  }}
  if (t == 0) T[m * {N} + n] = partial[0];
}}

extern "C" SYCL_EXT_ONEAPI_FUNCTION_PROPERTY((syclexp::nd_range_kernel<3>))
void add_bias(const float *T, const float *bias, float *C) {{
  sycl::nd_item<3> it = syclext::this_work_item::get_nd_item<3>();
  const size_t i = it.get_global_id(2);
  if (i < {M * N}) C[i] = T[i] + bias[i % {N}];
}}
"""


@pytest.mark.sycl
class TestSYCL:
    @pytest.fixture(autouse=True)
    def _require(self) -> None:
        require("sycl")

    def test_vector_add(self) -> None:
        from einc.runtime.sycl import load_sycl_kernel

        check_vadd(load_sycl_kernel(SYCL, vadd_manifest("sycl")), vadd_manifest("sycl"))

    def test_matmul_reduction_through_a_temp(self) -> None:
        from einc.runtime.sycl import load_sycl_kernel

        check_matmul(load_sycl_kernel(SYCL, matmul_manifest("sycl")), matmul_manifest("sycl"))

    def test_broken_source(self) -> None:
        from einc.runtime.sycl import load_sycl_kernel

        broken = SYCL.replace("a[i] + b[i]", "a[i] + undefined_b[i]")
        check_rejects(lambda: load_sycl_kernel(broken, vadd_manifest("sycl")), "undefined_b")

    def test_missing_kernel(self) -> None:
        # what a kernel without C linkage looks like: its mangled name is not found
        from einc.runtime.sycl import load_sycl_kernel

        launch = KernelLaunch("vadd_cxx", ("a", "b", "c"), (1, 1, 1), (BLOCK, 1, 1))
        manifest = LaunchManifest("sycl", vadd_manifest("sycl").buffers, (launch,))
        check_rejects(lambda: load_sycl_kernel(SYCL, manifest), "no kernel 'vadd_cxx'", 'extern "C"')

    def test_arrays_used_in_place_over_repeated_calls(self, monkeypatch: pytest.MonkeyPatch) -> None:
        # Intel's CPU device takes system-allocated memory: the kernels read and write the
        # caller's arrays (no copies); an array not aligned as the manifest says is copied
        # through the kernel's own allocation; each call sees its arrays' current contents
        from einc.runtime import sycl

        aligned = vadd_manifest("sycl")
        aligned = LaunchManifest("sycl", tuple(Buffer(b.name, b.dtype, b.shape, b.role, align=16) for b in aligned.buffers),
                                 aligned.kernels)  # fmt: skip
        kernel = sycl.load_sycl_kernel(SYCL, aligned)
        assert sycl._shim().system_memory
        rng = np.random.default_rng(3)
        a = rng.standard_normal(LEN).astype(np.float32)
        # b a view 4 bytes into a 16-byte aligned block: copied; its neighbours in place
        block = np.zeros(LEN + 8, np.float32)
        start = next(k for k in range(1, 5) if (block[k:].ctypes.data % 16) == 4)
        b = block[start:start + LEN]
        b[:] = rng.standard_normal(LEN)
        seen = []
        original = sycl.SyclKernel._in_place
        monkeypatch.setattr(sycl.SyclKernel, "_in_place", lambda self, buffer, host: seen.append(
            (buffer.name, r := original(self, buffer, host))) or r)  # fmt: skip
        for step in range(3):
            c = np.full(LEN, np.nan, np.float32)
            kernel({"a": a, "b": b}, {"c": c})
            np.testing.assert_array_equal(c, a + b)
            a *= -2.0  # the same arrays changed between calls: read afresh
            b += 1.0
        assert dict(seen) == {"a": True, "b": False, "c": True}
        # inputs may alias each other; an output may not alias an input
        c = np.empty(LEN, np.float32)
        kernel({"a": a, "b": a}, {"c": c})
        np.testing.assert_array_equal(c, a + a)
        with pytest.raises(RuntimeInputError, match="output 'c' overlaps argument 'a'"):
            kernel({"a": a, "b": b}, {"c": a})

    def test_copied_path_matches(self, monkeypatch: pytest.MonkeyPatch) -> None:
        # a device without system-allocated memory: every array copied in and out
        from einc.runtime import sycl

        monkeypatch.setattr(sycl._shim(), "system_memory", False)
        kernel = sycl.load_sycl_kernel(SYCL, matmul_manifest("sycl"))
        for _ in range(2):
            check_matmul(kernel, matmul_manifest("sycl"))
        check_vadd(sycl.load_sycl_kernel(SYCL, vadd_manifest("sycl")), vadd_manifest("sycl"))


@pytest.mark.sycl
def test_sycl_not_installed_says_how_to_install(monkeypatch: pytest.MonkeyPatch) -> None:
    from einc.runtime import sycl

    monkeypatch.setattr(sycl, "sycl_prefix", lambda: None)
    with pytest.raises(TargetError, match=r"pip install -e '\.\[sycl\]'"):
        sycl.load_sycl_kernel(SYCL, vadd_manifest("sycl"))


# --- Poplar ----------------------------------------------------------------------------

POPLAR_VADD = f"""
#include <poplar/Vertex.hpp>

class EincVAdd : public poplar::MultiVertex {{
public:
  poplar::Input<poplar::Vector<float>> a;
  poplar::Input<poplar::Vector<float>> b;
  poplar::Output<poplar::Vector<float>> c;
  bool compute(unsigned worker) {{
    for (unsigned i = worker; i < c.size(); i += numWorkers()) c[i] = a[i] + b[i];
    return true;
  }}
}};

#ifdef EINC_POPLAR_HOST
#include <poplar/Graph.hpp>
#include <poplar/Program.hpp>
EINC_POPLAR_VERTEX(EincVAdd, a, b, c)

void einc_build_graph(poplar::Graph &graph, const std::vector<poplar::Tensor> &buffers,
                      poplar::program::Sequence &prog) {{
  const unsigned tiles = 4, per_tile = ({LEN} + tiles - 1) / tiles;
  poplar::ComputeSet cs = graph.addComputeSet("vadd");
  for (unsigned t = 0; t < tiles; ++t) {{
    unsigned begin = t * per_tile, end = std::min<unsigned>(begin + per_tile, {LEN});
    std::vector<poplar::Tensor> parts;
    for (const poplar::Tensor &buffer : buffers) {{
      parts.push_back(buffer.slice(begin, end));
      graph.setTileMapping(parts.back(), t);
    }}
    poplar::VertexRef v = graph.addVertex(cs, "EincVAdd", {{{{"a", parts[0]}}, {{"b", parts[1]}}, {{"c", parts[2]}}}});
    graph.setTileMapping(v, t);
  }}
  prog.add(poplar::program::Execute(cs));
}}
#endif
"""

POPLAR_MATMUL = f"""
#include <poplar/Vertex.hpp>

// One output element: a dot product of a row of A and a column of B (a strided view).
class EincDot : public poplar::Vertex {{
public:
  poplar::Input<poplar::Vector<float>> row;
  poplar::Input<poplar::Vector<float>> column;
  poplar::Output<float> out;
  bool compute() {{
    float s = 0.0f;
    for (unsigned k = 0; k < row.size(); ++k) s += row[k] * column[k];
    *out = s;
    return true;
  }}
}};

// Rows of T plus bias: a list of edges, one per row.
class EincAddBias : public poplar::Vertex {{
public:
  poplar::Vector<poplar::Input<poplar::Vector<float>>> t;
  poplar::Input<poplar::Vector<float>> bias;
  poplar::Vector<poplar::Output<poplar::Vector<float>>> c;
  unsigned width;
  bool compute() {{
    for (unsigned r = 0; r < t.size(); ++r)
      for (unsigned j = 0; j < width; ++j) c[r][j] = t[r][j] + bias[j];
    return true;
  }}
}};

#ifdef EINC_POPLAR_HOST
#include <poplar/Graph.hpp>
#include <poplar/Program.hpp>
EINC_POPLAR_VERTEX(EincDot, row, column, out)
EINC_POPLAR_VERTEX(EincAddBias, t, bias, c, width)

void einc_build_graph(poplar::Graph &graph, const std::vector<poplar::Tensor> &buffers,
                      poplar::program::Sequence &prog) {{
  const poplar::Tensor &A = buffers[0], &B = buffers[1], &T = buffers[2], &bias = buffers[3], &C = buffers[4];
  graph.setTileMapping(B, 0);
  graph.setTileMapping(bias, 0);
  poplar::ComputeSet dots = graph.addComputeSet("matmul_reduce");
  const poplar::Tensor columns = B.transpose();
  for (unsigned m = 0; m < {M}; ++m) {{
    graph.setTileMapping(A[m], m);
    graph.setTileMapping(T[m], m);
    graph.setTileMapping(C[m], m);
    for (unsigned n = 0; n < {N}; ++n) {{
      poplar::VertexRef v = graph.addVertex(dots, "EincDot");
      graph.connect(v["row"], A[m]);
      graph.connect(v["column"], columns[n]);
      graph.connect(v["out"], T[m][n]);
      graph.setTileMapping(v, m);
    }}
  }}
  poplar::ComputeSet add = graph.addComputeSet("add_bias");
  for (unsigned m = 0; m < {M}; m += 4) {{
    poplar::VertexRef v = graph.addVertex(add, "EincAddBias");
    graph.connect(v["t"], T.slice(m, m + 4));
    graph.connect(v["bias"], bias);
    graph.connect(v["c"], C.slice(m, m + 4));
    graph.setInitialValue(v["width"], {N});
    graph.setTileMapping(v, m);
  }}
  prog.add(poplar::program::Execute(dots));
  prog.add(poplar::program::Execute(add));
}}
#endif
"""


@pytest.mark.poplar
class TestPoplar:
    @pytest.fixture(autouse=True)
    def _require(self) -> None:
        require("poplar")

    def test_vector_add(self) -> None:
        from einc.runtime.poplar import load_poplar_kernel

        check_vadd(load_poplar_kernel(POPLAR_VADD, vadd_manifest("poplar")), vadd_manifest("poplar"))

    def test_matmul_through_a_temp(self) -> None:
        from einc.runtime.poplar import load_poplar_kernel

        check_matmul(load_poplar_kernel(POPLAR_MATMUL, matmul_manifest("poplar")), matmul_manifest("poplar"))

    def test_broken_source(self) -> None:
        from einc.runtime.poplar import load_poplar_kernel

        broken = POPLAR_VADD.replace("a[i] + b[i]", "a[i] + undefined_b[i]")
        check_rejects(lambda: load_poplar_kernel(broken, vadd_manifest("poplar")), "g++", "undefined_b")

    def test_racing_vertices_are_reported(self) -> None:
        # Overlapping slices: two vertices of one compute set write the same elements of c.
        from einc.runtime.poplar import load_poplar_kernel

        racy = POPLAR_VADD.replace("begin + per_tile,", "begin + per_tile + 1,")
        manifest = vadd_manifest("poplar")
        run = load_poplar_kernel(racy, manifest)
        with pytest.raises(ToolchainError, match="race: both write element"):
            run(random_inputs(manifest), poisoned_outputs(manifest))

    def test_float64_has_no_ipu_type(self) -> None:
        from einc.runtime.poplar import load_poplar_kernel

        with pytest.raises(TargetError, match="float64"):
            load_poplar_kernel(POPLAR_VADD, vadd_manifest("poplar", "float64"))


# --- CUDA and HIP ----------------------------------------------------------------------

CUDA = f"""
extern "C" __global__ void vadd(const float *__restrict__ a, const float *__restrict__ b, float *__restrict__ c) {{
  const unsigned i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < {LEN}) c[i] = a[i] + b[i];
}}

extern "C" __global__ void matmul_reduce(const float *__restrict__ A, const float *__restrict__ B,
                                         float *__restrict__ T) {{
  __shared__ float partial[{BLOCK}];
  const int n = blockIdx.x, m = blockIdx.y, t = threadIdx.x;
  float s = 0.0f;
  for (int k = t; k < {K}; k += {BLOCK}) s += A[m * {K} + k] * B[k * {N} + n];
  partial[t] = s;
  __syncthreads();
  for (int w = {BLOCK // 2}; w > 0; w >>= 1) {{
    if (t < w) partial[t] += partial[t + w];
    __syncthreads();
  }}
  if (t == 0) T[m * {N} + n] = partial[0];
}}

extern "C" __global__ void add_bias(const float *__restrict__ T, const float *__restrict__ bias,
                                    float *__restrict__ C) {{
  const unsigned i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < {M * N}) C[i] = T[i] + bias[i % {N}];
}}
"""

HIP = "#include <hip/hip_runtime.h>\n" + CUDA


def check_report(report: object, shared: dict[str, int]) -> None:
    from einc.runtime.device import CompileReport

    assert isinstance(report, CompileReport)
    assert report.ok, report.log
    assert report.binary_bytes > 0
    for name, shared_bytes in shared.items():
        kernel = report.kernel(name)
        assert kernel.registers > 0
        assert kernel.spills == 0
        assert kernel.shared_bytes == shared_bytes


@pytest.mark.cuda
class TestCUDA:
    @pytest.fixture(autouse=True)
    def _require(self) -> None:
        require("cuda")

    @pytest.mark.parametrize("arch", ["sm_80", "sm_90"])
    def test_compile_check_reports_resources(self, arch: str) -> None:
        from einc.runtime.cuda import compile_check_cuda

        report = compile_check_cuda(CUDA, matmul_manifest("cuda"), arch)
        check_report(report, {"matmul_reduce": BLOCK * 4, "add_bias": 0})
        assert report.kernel("matmul_reduce").details["barriers"] == 1

    def test_broken_source(self) -> None:
        from einc.runtime.cuda import compile_check_cuda

        broken = CUDA.replace("a[i] + b[i]", "a[i] + undefined_b[i]")
        report = compile_check_cuda(broken, vadd_manifest("cuda"), "sm_90")
        assert not report.ok and "undefined_b" in report.log
        check_rejects(report.check, "undefined_b")

    def test_kernel_without_c_linkage(self) -> None:
        from einc.runtime.cuda import compile_check_cuda

        mangled = CUDA.replace('extern "C" __global__ void vadd', "__global__ void vadd")
        report = compile_check_cuda(mangled, vadd_manifest("cuda"), "sm_90")
        assert not report.ok and "no kernel named vadd" in report.log

    @pytest.mark.parametrize("arch", ["sm_80", "sm_90"])
    def test_resources_reported_when_nvrtc_logs_nothing(
        self, arch: str, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
    ) -> None:
        """NVRTC 13.0 returned an empty log for `-Xptxas=-v` on an H100 machine (always after
        cuInit): every kernel was read as missing from the cubin. With the log emptied here,
        the kernels and their resources come from the cubin, as ptxas reports them."""
        from einc.runtime import cuda

        monkeypatch.setenv("EINC_CACHE_DIR", str(tmp_path))
        logged = cuda.compile_check_cuda(CUDA, matmul_manifest("cuda"), arch)
        compile_here = cuda._compile

        def silent(source: str, arch: str, options: Any) -> Any:
            compiled = compile_here(source, arch, options)
            return cuda._Compiled(compiled.ok, "", compiled.cubin)

        monkeypatch.setattr(cuda, "_compile", silent)
        monkeypatch.setenv("EINC_CACHE_DIR", str(tmp_path / "silent"))
        report = cuda.compile_check_cuda(CUDA, matmul_manifest("cuda"), arch)
        assert report.log == ""
        check_report(report, {"matmul_reduce": BLOCK * 4, "add_bias": 0})
        for kernel in logged.kernels:
            found = report.kernel(kernel.name)
            assert (found.registers, found.shared_bytes) == (kernel.registers, kernel.shared_bytes), kernel.name
            assert found.details == {"stack_bytes": kernel.details["stack_bytes"], "barriers": kernel.details["barriers"]}
        mangled = CUDA.replace('extern "C" __global__ void vadd', "__global__ void vadd")
        assert not cuda.compile_check_cuda(mangled, vadd_manifest("cuda"), arch).ok

    def test_cubin_records_a_stack_frame_as_ptxas_does(self) -> None:
        """A local array indexed by a runtime value lives in the stack frame."""
        from einc.runtime import cuda

        source = (
            'extern "C" __global__ void frame(float* __restrict__ a, const int* __restrict__ i) {\n'
            "  float local[256];\n  for (int k = 0; k < 256; ++k) local[k] = a[k * threadIdx.x];\n"
            "  a[threadIdx.x] = local[i[threadIdx.x] % 256];\n}\n"
        )
        compiled = cuda._compile(source, "sm_90", cuda.NVRTC_OPTIONS)
        (logged,) = cuda.parse_ptxas_log(compiled.log)
        recorded = cuda.cubin_kernels(compiled.cubin)["frame"]
        assert logged.details["stack_bytes"] == recorded["stack_bytes"] >= 1024
        assert logged.registers == recorded["registers"]

    def test_callee_properties_are_not_the_kernels(self) -> None:
        """ptxas lists the properties of a kernel's non-inlined callees after the kernel's
        (float64 `sin` calls a trig-reduction slow path): the callee's 0-byte stack frame
        was read as the kernel's, whose frame is 40 bytes (as its cubin records)."""
        from einc.runtime import cuda
        from tests.test_device_targets import compiled

        log = (
            "ptxas info    : Compiling entry function 'kernel_output0' for 'sm_90'\n"
            "ptxas info    : Function properties for kernel_output0\n"
            "ptxas         .     40 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads\n"
            "ptxas info    : Used 32 registers, used 0 barriers, 40 bytes cumulative stack size\n"
            "ptxas info    : Function properties for __internal_trig_reduction_slowpathd\n"
            "ptxas         .     8 bytes stack frame, 4 bytes spill stores, 4 bytes spill loads\n"
        )
        (kernel,) = cuda.parse_ptxas_log(log)
        assert (kernel.registers, kernel.spills, kernel.details["stack_bytes"]) == (32, 0, 40)
        source = compiled("cuda", "float64_math")[0]
        built = cuda._compile(source, "sm_90", cuda.NVRTC_OPTIONS)
        for logged in cuda.parse_ptxas_log(built.log):
            recorded = cuda.cubin_kernels(built.cubin)[logged.name]
            assert logged.details["stack_bytes"] == recorded["stack_bytes"] > 0

    def test_compile_check_after_running_a_kernel(self, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
        """The same on a GPU, for real: a kernel run first (cuInit), then a compile check."""
        require("cuda-gpu")
        from einc.runtime.cuda import compile_check_cuda, load_cuda_kernel

        check_vadd(load_cuda_kernel(CUDA, vadd_manifest("cuda")), vadd_manifest("cuda"))
        monkeypatch.setenv("EINC_CACHE_DIR", str(tmp_path))
        for arch in ("sm_80", "sm_90"):
            check_report(compile_check_cuda(CUDA, matmul_manifest("cuda"), arch), {"matmul_reduce": BLOCK * 4, "add_bias": 0})

    def test_runs_on_a_gpu(self) -> None:
        require("cuda-gpu")
        from einc.runtime.cuda import load_cuda_kernel

        check_vadd(load_cuda_kernel(CUDA, vadd_manifest("cuda")), vadd_manifest("cuda"))
        check_matmul(load_cuda_kernel(CUDA, matmul_manifest("cuda")), matmul_manifest("cuda"))


@pytest.mark.hip
class TestHIP:
    @pytest.fixture(autouse=True)
    def _require(self) -> None:
        require("hip")

    @pytest.mark.parametrize("arch", ["gfx90a", "gfx1030"])
    def test_compile_check_reports_resources(self, arch: str) -> None:
        from einc.runtime.hip import compile_check_hip

        report = compile_check_hip(HIP, matmul_manifest("hip"), arch)
        check_report(report, {"matmul_reduce": BLOCK * 4, "add_bias": 0})
        assert report.kernel("matmul_reduce").details["sgprs"] > 0

    def test_broken_source(self) -> None:
        from einc.runtime.hip import compile_check_hip

        broken = HIP.replace("a[i] + b[i]", "a[i] + undefined_b[i]")
        report = compile_check_hip(broken, vadd_manifest("hip"), "gfx90a")
        assert not report.ok
        check_rejects(report.check, "undefined_b")

    def test_cannot_run(self) -> None:
        from einc.runtime.hip import load_hip_kernel

        with pytest.raises(TargetError, match="compile_check_hip"):
            load_hip_kernel(HIP, vadd_manifest("hip"))


# --- toolchain detection ---------------------------------------------------------------


def test_missing_toolchains_fail_only_in_ci(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CI", "true")
    monkeypatch.delenv("EINC_OPTIONAL_TOOLCHAINS", raising=False)
    assert toolchains.required("sycl")
    assert not toolchains.required("cuda-gpu")  # hardware: never in CI
    monkeypatch.setenv("EINC_OPTIONAL_TOOLCHAINS", "sycl,poplar")
    assert not toolchains.required("sycl") and toolchains.required("hip")
    monkeypatch.delenv("CI")
    assert not toolchains.required("sycl")
    with pytest.raises(ValueError, match="unknown target"):
        toolchains.available("metal")
    with pytest.raises(ValueError, match="unknown target"):
        toolchains.available("c")  # needs only the C compiler: no toolchain check


def test_toolchain_checks_come_from_the_targets_themselves() -> None:
    """Every device target in the registry answers its own toolchain check (its runtime's
    `toolchain_check`), hardware comes from `hardware_checks`: nothing lists targets by hand."""
    from einc.targets import get_all_targets, get_target

    devices = {name for name in get_all_targets() if get_target(name).needs_toolchain}
    assert set(toolchains.toolchain_targets()) == devices and "c" not in devices
    for name in devices:
        ok, why = toolchains.available(name)
        assert isinstance(ok, bool) and why and "\n" not in why
    assert "cuda-gpu" in get_target("cuda").hardware_checks()
