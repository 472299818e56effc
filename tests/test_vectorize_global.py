"""Global vector loads and stores (`einc-vectorize-global`) and the alignment contract.

- Differential: elementwise and matmul programs whose shapes divide the vector width (vector
  accesses) and whose shapes do not (the scalar path), against NumPy float64 on fresh random
  data, on every target that runs here and prints vectors (OpenCL, SYCL, HLSL), and through the
  egpu interpreter for CUDA and HIP, which faults on a vector access whose address is not
  aligned as its `egpu.align` claims.
- The contract: the manifest states each buffer's alignment, the source says it in a comment,
  a caller's device array that is not aligned is refused naming the buffer and the bytes, a
  misaligned host array (a NumPy slice, a torch view with a storage offset) is copied into the
  launcher's own aligned allocation and gives the right numbers.
- NVRTC's PTX (compile only): 16-byte global accesses in the default matmul and elementwise
  kernels.
"""

from __future__ import annotations

import functools
import re
from collections import Counter
from collections.abc import Callable

import numpy as np
import pytest
from xdsl.dialects.builtin import IntegerAttr, ModuleOp, i64

import einc
from einc.compiler.driver import Compilation
from einc.dialects import egpu
from einc.errors import RuntimeInputError
from einc.ir.attrs import ALIGN_ATTR
from einc.runtime.arrays import DeviceArray
from einc.runtime.device import stage
from einc.runtime.manifest import LaunchManifest
from einc.semantics.egpu import KernelFault, run_lowered
from tests.test_conformance import fresh_seed
from tests.test_device_targets import require, require_run

Reference = Callable[[dict[str, np.ndarray]], np.ndarray]

PROGRAMS: dict[str, tuple[str, Reference]] = {
    "elementwise": (
        "input A: float32[64, 96]\ninput B: float32[64, 96]\nC[N, M] = A[N, M] * B[N, M] + 1.0\n",
        lambda a: a["A"].astype(np.float64) * a["B"] + 1.0,
    ),
    "elementwise_tail": (
        "input A: float32[13, 37]\ninput B: float32[13, 37]\nC[N, M] = A[N, M] * B[N, M] + 1.0\n",
        lambda a: a["A"].astype(np.float64) * a["B"] + 1.0,
    ),
    "matmul": (
        "input A: float32[64, 32]\ninput B: float32[32, 64]\nC[N, M] +=! A[N, K] * B[K, M]\n",
        lambda a: a["A"].astype(np.float64) @ a["B"],
    ),
    "matmul_tail": (
        "input A: float32[67, 33]\ninput B: float32[33, 45]\nC[N, M] +=! A[N, K] * B[K, M]\n",
        lambda a: a["A"].astype(np.float64) @ a["B"],
    ),
}
VECTORIZED = {"elementwise", "matmul"}
"""Programs whose default kernels get aligned global vector accesses on every target below."""


@functools.cache
def compilation(target: str, name: str) -> Compilation:
    comp = Compilation(PROGRAMS[name][0], f"<{name}>", None, None, target, None, use_records=False)
    comp.run_until("source")
    return comp


@functools.cache
def kernel(target: str, name: str) -> einc.Kernel:
    return einc.compile(PROGRAMS[name][0], target=target, use_records=False, debug=True)


def global_vector_accesses(module: ModuleOp) -> int:
    """Aligned vector accesses (and copies) of kernel arguments: global memory."""
    return sum(
        1
        for op in module.walk()
        if isinstance(op, egpu.VLoadOp | egpu.VStoreOp | egpu.CopyAsyncOp)
        and ALIGN_ATTR in op.attributes
        and not isinstance(op.operands[0].owner, egpu.AllocSharedOp)
    )


def inputs(name: str, seed: int) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    shapes = re.findall(r"input (\w+): float32\[([\d, ]+)\]", PROGRAMS[name][0])
    return {n: rng.standard_normal([int(d) for d in s.split(",")]).astype(np.float32) for n, s in shapes}


def check(name: str, got: np.ndarray, given: dict[str, np.ndarray]) -> None:
    want = PROGRAMS[name][1](given)
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4 * float(np.abs(want).max()))


RUNS = [("opencl", n) for n in PROGRAMS] + [("sycl", "elementwise"), ("sycl", "matmul_tail"),
                                            ("hlsl", "matmul"), ("hlsl", "elementwise")]  # fmt: skip


@pytest.mark.parametrize(("target", "name"), RUNS)
def test_vector_kernels_match_numpy(target: str, name: str) -> None:
    require_run(target)
    k = kernel(target, name)
    assert k.lowered is not None
    if name in VECTORIZED:
        assert global_vector_accesses(k.lowered) > 0, k.source
    given = inputs(name, fresh_seed())
    check(name, k(**given)["C"], given)


@pytest.mark.parametrize(("target", "name"), [("cuda", "matmul"), ("cuda", "elementwise"), ("hip", "matmul"), ("cuda", "matmul_tail")])
def test_interpreter_runs_the_vector_kernels(target: str, name: str) -> None:
    """The egpu interpreter checks every aligned access's address against its claim."""
    module = compilation(target, name).module("target")
    if name in VECTORIZED:
        assert global_vector_accesses(module) > 0
    given = inputs(name, fresh_seed())
    check(name, run_lowered(module, given, target=target)["C"], given)


@pytest.mark.parametrize("target", ["cuda", "hip"])
def test_double_buffered_vector_copies_match_numpy(target: str) -> None:
    """The SGEMM schedule with both tiles double buffered (the copies write the other slot):
    16-byte copies (CUDA: cp.async of 4 lanes; HIP: `egpu.copy_async` of 4 lanes, printed as a uint4 copy), no race, right numbers."""
    from tests.test_gpu_code import DOUBLE_BUFFER, sgemm

    module = sgemm(128, target, DOUBLE_BUFFER).module("target")
    copies = [op.width for op in module.walk() if isinstance(op, egpu.CopyAsyncOp)]
    assert copies and copies == [4] * len(copies)
    assert global_vector_accesses(module) > 0
    rng = np.random.default_rng(fresh_seed())
    a, b = (rng.standard_normal((128, 128)).astype(np.float32) for _ in range(2))
    got = run_lowered(module, {"input0": a, "input1": b}, target=target)["output0"]
    np.testing.assert_allclose(got, a.astype(np.float64) @ b, rtol=1e-4, atol=1e-4)


def test_interpreter_faults_on_a_false_alignment_claim() -> None:
    module = compilation("cuda", "elementwise").module("target").clone()
    load = next(op for op in module.walk() if isinstance(op, egpu.VLoadOp) and ALIGN_ATTR in op.attributes)
    load.attributes[ALIGN_ATTR] = IntegerAttr(64, i64)  # 4 floats from a multiple of 4: not of 16
    with pytest.raises(KernelFault, match="misaligned vector access in egpu.vload"):
        run_lowered(module, inputs("elementwise", 0), target="cuda")


# ---- the contract ----------------------------------------------------------------------------


def test_manifest_and_source_state_the_alignment() -> None:
    comp = compilation("opencl", "elementwise")
    manifest = comp.target_obj.manifest(comp.module("target"))
    assert {b.name: b.alignment() for b in manifest.buffers} == {"A": 16, "B": 16, "C": 16}
    assert LaunchManifest.from_json(manifest.to_json()) == manifest
    source = comp.run_until("source")
    assert isinstance(source, str) and "// A, B, C: assumed 16-byte aligned" in source
    tail = compilation("opencl", "elementwise_tail")
    assert {b.alignment() for b in tail.target_obj.manifest(tail.module("target")).buffers} == {4}


def test_misaligned_device_array_is_refused() -> None:
    comp = compilation("cuda", "elementwise")
    manifest = comp.target_obj.manifest(comp.module("target"))
    owner = object()

    def device(ptr: int) -> DeviceArray:
        return DeviceArray(ptr, np.dtype(np.float32), (64, 96), None, (2, 0), owner)

    aligned = {"A": device(0x10000), "B": device(0x20000)}
    assert set(stage(manifest, aligned, {"C": device(0x30000)}).device) == {"A", "B", "C"}
    with pytest.raises(RuntimeInputError, match=r"input 'B' starts at device address 0x20004, which is not a multiple of 16 bytes"):
        stage(manifest, {**aligned, "B": device(0x20004)}, {"C": device(0x30000)})
    with pytest.raises(RuntimeInputError, match=r"output 'C' .* 16 bytes"):
        stage(manifest, aligned, {"C": device(0x30008)})


def test_misaligned_host_arrays_are_copied() -> None:
    """A NumPy slice and a torch view starting 4 bytes past an alignment boundary: the
    launcher copies host arrays into its own (aligned) buffers."""
    require_run("opencl")
    k = kernel("opencl", "elementwise")
    given = inputs("elementwise", fresh_seed())
    storage = np.empty(given["A"].size + 1, np.float32)
    offset = 1 if storage.ctypes.data % 16 == 0 else (16 - storage.ctypes.data % 16) // 4 + 1
    storage = np.empty(given["A"].size + offset, np.float32)
    a = storage[offset:].reshape(given["A"].shape)
    a[...] = given["A"]
    assert a.ctypes.data % 16 != 0
    check("elementwise", k(A=a, B=given["B"])["C"], given)


def test_torch_view_with_a_storage_offset_is_copied() -> None:
    """The same through torch (a CPU tensor view one element into its storage)."""
    require_run("opencl")
    torch = pytest.importorskip("torch")
    k = kernel("opencl", "elementwise")
    given = inputs("elementwise", fresh_seed())
    b = torch.from_numpy(np.concatenate([[0.0], given["B"].ravel()]).astype(np.float32))[1:].view(64, 96)
    assert b.storage_offset() == 1
    check("elementwise", np.asarray(k(A=torch.from_numpy(given["A"]), B=b)["C"]), given)


# ---- PTX ---------------------------------------------------------------------------------------


def _ptx_counts(source: str, arch: str) -> Counter[str]:
    from einc.runtime.cuda import ptx

    text = ptx(source, arch)
    forms = re.findall(r"\b((?:ld|st)\.global(?:\.nc)?(?:\.v[24])?\.\w+)", text)
    copies = re.findall(r"cp\.async\.c[ag]\.shared\.global \[[^\]]*\], \[[^\]]*\], (\d+)", text)
    return Counter(forms + [f"cp.async.{n}" for n in copies])


def test_ptx_has_16_byte_global_accesses() -> None:
    require("cuda")
    matmul = einc.compile(
        "input A: float32[512, 512]\ninput B: float32[512, 512]\nC[N, M] +=! A[N, K] * B[K, M]\n",
        target="cuda", use_records=False,
    )  # fmt: skip
    counts = _ptx_counts(matmul.source, "sm_80")
    # B's staging copy is 16-byte; A's tile is staged transposed ([K, N]: the register tile's axis
    # innermost, for vector shared loads in the hot loop), which a cp.async cannot do but element
    # by element.
    assert counts["cp.async.16"] > 0 and counts["cp.async.4"] <= counts["cp.async.16"], counts
    assert counts["st.global.v4.f32"] > 0 and counts["st.global.f32"] == 0, counts  # the tile's store
    counts = _ptx_counts(matmul.source, "sm_75")  # below sm_80 the copies are plain 16-byte loads
    assert counts["ld.global.nc.v4.u32"] > 0 and counts["ld.global.nc.f32"] == 0, counts
    elementwise = kernel("cuda", "elementwise")
    counts = _ptx_counts(elementwise.source, "sm_80")
    assert counts["ld.global.nc.v4.f32"] == 2 and counts["st.global.v4.f32"] == 1, counts
    assert counts["ld.global.nc.f32"] == 0 and counts["st.global.f32"] == 0, counts
