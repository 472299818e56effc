"""The arrays einc allocates start on a 64-byte boundary (einc.runtime.arrays.aligned_empty):
outputs returned by the C trampoline, the ctypes call, the Python (debug) path and
`KernelSignature.bind`, the scratch of a non-contiguous `out=`, and the tuner's poisoned
outputs; caller-provided outputs stay where the caller put them. Results are unchanged.

The shapes are chosen so NumPy's own allocation would not be 64-byte aligned (large arrays
sit 16 bytes past a boundary); alignment is checked on the data pointer, so the test fails
whenever one of these paths allocates with plain `np.empty` and NumPy happens to misalign.
"""

from __future__ import annotations

import numpy as np
import pytest

import einc
from einc.compiler.kernel import Kernel
from einc.runtime.arrays import ALIGNMENT, aligned_empty, poisoned
from einc.runtime.c import CtypesSpec, ctypes_call

ADD = "output0[N, M] = input0[N, M] + input1[N, M] * 2"
SHAPE = (300, 70)  # 84 000 bytes: above glibc's mmap threshold in some runs, below it in others


def aligned(a: np.ndarray) -> bool:
    return a.ctypes.data % ALIGNMENT == 0


@pytest.fixture(scope="module")
def add() -> Kernel:
    spec = {"dtype": "float32", "shape": list(SHAPE)}
    return einc.compile(ADD, {"input0": spec, "input1": spec}, debug=False)


@pytest.fixture(scope="module")
def arrays() -> dict[str, np.ndarray]:
    rng = np.random.default_rng(26)
    return {n: rng.uniform(0.5, 2.0, SHAPE).astype(np.float32) for n in ("input0", "input1")}


def want(arrays: dict[str, np.ndarray]) -> np.ndarray:
    return arrays["input0"].astype(np.float64) + arrays["input1"].astype(np.float64) * 2


@pytest.mark.parametrize("shape,dtype", [((3,), "float32"), ((300, 70), "float32"), ((5, 7, 9), "int8"),
                                         ((), "float64"), ((0, 4), "float32"), (17, "float16")])
def test_aligned_empty(shape: tuple[int, ...] | int, dtype: str) -> None:
    for _ in range(8):  # several allocations: NumPy's own would land on different offsets
        a = aligned_empty(shape, dtype)
        assert (aligned(a) or a.size == 0) and a.dtype == np.dtype(dtype) and a.flags.c_contiguous and a.flags.writeable
        assert a.shape == ((shape,) if isinstance(shape, int) else shape)
        a[...] = 1  # the whole view is writable memory
    assert aligned(poisoned((300, 70), "float32"))


def test_outputs_aligned_every_path(add: Kernel, arrays: dict[str, np.ndarray]) -> None:
    debug = einc.compile(ADD, {n: {"dtype": "float32", "shape": list(SHAPE)} for n in arrays}, debug=True)
    results = [add(**arrays)["output0"], debug(**arrays)["output0"]]
    kernel = add._runner.__self__  # the C kernel (einc.runtime.c.CKernel)
    results.append(kernel.run(arrays)["output0"])  # KernelSignature.bind allocates
    assert add._fast is not None
    results.append(add._fast(add._spec, arrays, None)["output0"])  # the trampoline (ctypes where none)
    args = [(b.name, b.dtype, b.shape, b.is_output) for b in kernel.signature.buffers]
    results.append(ctypes_call(CtypesSpec(kernel._function, args), arrays, None)["output0"])
    for r in results:
        assert aligned(r)
        np.testing.assert_allclose(r, want(arrays), rtol=1e-6)


def test_caller_outputs_stay(add: Kernel, arrays: dict[str, np.ndarray]) -> None:
    raw = aligned_empty(SHAPE[0] * SHAPE[1] + 4, "float32")
    misaligned = raw[4:].reshape(SHAPE)  # 16 bytes past a boundary, as NumPy places large arrays
    assert misaligned.ctypes.data % ALIGNMENT == 16
    got = add(out=misaligned, **arrays)["output0"]
    assert got is misaligned
    np.testing.assert_allclose(misaligned, want(arrays), rtol=1e-6)
    strided = aligned_empty((SHAPE[0], SHAPE[1] * 2), "float32")[:, ::2]  # through an aligned scratch copy
    add.allow_copy = True
    try:
        add(out=strided, **arrays)
    finally:
        add.allow_copy = False
    np.testing.assert_allclose(strided, want(arrays), rtol=1e-6)


def test_torch_outputs_aligned(add: Kernel, arrays: dict[str, np.ndarray]) -> None:
    torch = pytest.importorskip("torch")
    out = add(**{n: torch.from_numpy(a) for n, a in arrays.items()})["output0"]
    assert isinstance(out, torch.Tensor) and out.data_ptr() % ALIGNMENT == 0
    np.testing.assert_allclose(out.numpy(), want(arrays), rtol=1e-6)
