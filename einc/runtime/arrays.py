"""The caller's arrays: anything with `__dlpack__` (NumPy, PyTorch, JAX, CuPy), taken without
copies, and the outputs given back in the caller's array type.

- Host memory (DLPack device CPU, CUDA-host, ROCm-host, CUDA-managed) becomes a NumPy view
  through `numpy.from_dlpack` (zero-copy).
- Device memory, for runtimes that take it (`DEVICE_TYPES` of a runner, e.g. CUDA), becomes a
  `DeviceArray`: the device pointer, read from `__cuda_array_interface__` where the object has
  one, else from its DLPack capsule (`dlpack_view`), with the object kept alive beside it.
- Outputs go back as the type of the first input that is not a NumPy array, through that
  library's `from_dlpack` (cupy.from_dlpack, jax.numpy.from_dlpack; torch.from_numpy, the
  same zero-copy view, cheaper; else the `from_dlpack` of the type's top-level module),
  zero-copy; NumPy otherwise. Torch CPU tensors are read with `Tensor.numpy()` (zero-copy).
- `aligned_empty`: the arrays einc creates (outputs, scratch) start on a 128-byte boundary
  (`ALIGNMENT`): a cache line and one AVX-512 vector, and PoCL's buffer alignment (its OpenCL
  kernels take them in place): NumPy's own allocation places large
  arrays 16 bytes past one, where every 64-byte row store of a kernel spans two lines and
  non-temporal stores fault.
- `poisoned` / `poison`: outputs filled with a value no correct kernel leaves behind (debug
  mode, the tuner's runner, the tests).
"""

from __future__ import annotations

import ctypes
import importlib
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, cast

import numpy as np

from einc.errors import RuntimeInputError
from einc.ir.attrs import BFLOAT16

if TYPE_CHECKING:
    from numpy import _SupportsDLPack

CPU, CUDA, CUDA_HOST, OPENCL, VULKAN, METAL, ROCM, ROCM_HOST, CUDA_MANAGED, ONEAPI = 1, 2, 3, 4, 7, 8, 10, 11, 13, 14
DEVICE_NAMES = {CPU: "cpu", CUDA: "cuda", CUDA_HOST: "cuda_host", OPENCL: "opencl", VULKAN: "vulkan",
                METAL: "metal", ROCM: "rocm", ROCM_HOST: "rocm_host", CUDA_MANAGED: "cuda_managed",
                ONEAPI: "oneapi"}  # fmt: skip
HOST_TYPES = frozenset({CPU, CUDA_HOST, ROCM_HOST, CUDA_MANAGED})
"""DLPack device types whose memory the host can read and write."""


def device_name(device: tuple[int, int]) -> str:
    return f"{DEVICE_NAMES.get(device[0], f'device type {device[0]}')}:{device[1]}"


@dataclass(frozen=True)
class DeviceArray:
    """An array in device memory: its address, dtype, shape, strides in elements (None:
    C-contiguous) and DLPack device; `owner` keeps the memory alive."""

    ptr: int
    dtype: np.dtype
    shape: tuple[int, ...]
    strides: tuple[int, ...] | None
    device: tuple[int, int]
    owner: object
    readonly: bool = False

    @property
    def size(self) -> int:
        return int(np.prod(self.shape, dtype=np.int64))

    @property
    def nbytes(self) -> int:
        return self.size * self.dtype.itemsize

    @property
    def c_contiguous(self) -> bool:
        if self.strides is None or self.size <= 1:
            return True
        expected = 1
        for extent, stride in zip(reversed(self.shape), reversed(self.strides)):
            if extent != 1 and stride != expected:
                return False
            expected *= extent
        return True


def _torch_cpu_tensor(obj: object) -> bool:
    """Whether `obj` is a torch tensor in host memory (read through `Tensor.numpy()`, a few
    times faster than torch's Python-level `__dlpack__`)."""
    torch = sys.modules.get("torch")
    return torch is not None and isinstance(obj, torch.Tensor) and getattr(obj, "is_cpu", False) is True


def dlpack_device(obj: object) -> tuple[int, int]:
    """`obj.__dlpack_device__()`, CPU for NumPy arrays and torch CPU tensors."""
    if type(obj) is np.ndarray or _torch_cpu_tensor(obj):
        return (CPU, 0)
    get = getattr(obj, "__dlpack_device__", None)
    if get is None:
        return (CPU, 0)
    device_type, device_id = get()
    return (int(device_type), int(device_id))


def describe(obj: object) -> str:
    return f"{type(obj).__module__}.{type(obj).__qualname__}"


def host_array(role: str, name: str, obj: object) -> np.ndarray:
    """`obj` as a NumPy array without a copy (its own memory, through DLPack or the buffer
    protocol), or RuntimeInputError naming the argument."""
    if isinstance(obj, np.ndarray):
        return obj
    if _torch_cpu_tensor(obj):
        try:
            if str(getattr(obj, "dtype")) == "torch.bfloat16":  # NumPy has none: its bits, viewed
                bits = getattr(obj, "view")(sys.modules["torch"].int16)
                return getattr(bits, "numpy")().view(BFLOAT16)
            return getattr(obj, "numpy")()
        except (RuntimeError, TypeError) as error:  # requires grad, a dtype NumPy lacks (bfloat16)
            hint = " (call .detach() first)" if "grad" in str(error) else ""
            raise RuntimeInputError(f"{role} '{name}' ({describe(obj)}) cannot be read as an array: {error}{hint}") from None
    if hasattr(obj, "__dlpack__"):
        try:
            return np.from_dlpack(cast("_SupportsDLPack[None]", obj))
        except (BufferError, RuntimeError, TypeError, ValueError) as error:
            hint = " (call .detach() first)" if "grad" in str(error) else ""
            raise RuntimeInputError(f"{role} '{name}' ({describe(obj)}) cannot be read through DLPack: {error}{hint}") from None
    raise RuntimeInputError(
        f"{role} '{name}' must be an array with __dlpack__ (NumPy, PyTorch, JAX, CuPy), got "
        f"{type(obj).__name__}" + (" (use numpy.asarray)" if isinstance(obj, (int, float, complex, list, tuple)) else "")
    )


# --- DLPack capsules read with ctypes (device pointers without the producing library) ---------


class _DLDevice(ctypes.Structure):
    _fields_ = [("device_type", ctypes.c_int32), ("device_id", ctypes.c_int32)]


class _DLDataType(ctypes.Structure):
    _fields_ = [("code", ctypes.c_uint8), ("bits", ctypes.c_uint8), ("lanes", ctypes.c_uint16)]


class _DLTensor(ctypes.Structure):
    _fields_ = [
        ("data", ctypes.c_void_p),
        ("device", _DLDevice),
        ("ndim", ctypes.c_int32),
        ("dtype", _DLDataType),
        ("shape", ctypes.POINTER(ctypes.c_int64)),
        ("strides", ctypes.POINTER(ctypes.c_int64)),
        ("byte_offset", ctypes.c_uint64),
    ]


_DL_KINDS = {0: "i", 1: "u", 2: "f", 4: "bf", 6: "b"}
_get_pointer = ctypes.pythonapi.PyCapsule_GetPointer
_get_pointer.restype = ctypes.c_void_p
_get_pointer.argtypes = [ctypes.py_object, ctypes.c_char_p]


def dlpack_view(role: str, name: str, obj: object) -> DeviceArray:
    """The device pointer, dtype, shape and strides of `obj`'s DLPack tensor. The capsule
    is not consumed (its destructor frees the export when the DeviceArray goes)."""
    try:
        capsule = getattr(obj, "__dlpack__")()
    except (BufferError, RuntimeError, TypeError, ValueError) as error:
        raise RuntimeInputError(f"{role} '{name}' ({describe(obj)}) cannot be exported through DLPack: {error}") from None
    address = _get_pointer(capsule, b"dltensor")
    if not address:
        raise RuntimeInputError(f"{role} '{name}': its DLPack capsule holds no tensor")
    tensor = _DLTensor.from_address(address)  # DLManagedTensor starts with its DLTensor
    kind = _DL_KINDS.get(tensor.dtype.code)
    if kind is None or tensor.dtype.lanes != 1:
        raise RuntimeInputError(f"{role} '{name}' has a DLPack dtype (code {tensor.dtype.code}, "
                                f"{tensor.dtype.bits} bits, {tensor.dtype.lanes} lanes) einc does not take")  # fmt: skip
    if kind == "bf" and tensor.dtype.bits != 16:
        raise RuntimeInputError(f"{role} '{name}' has a {tensor.dtype.bits}-bit DLPack bfloat einc does not take")
    dtype = np.dtype(bool) if kind == "b" else BFLOAT16 if kind == "bf" else np.dtype(f"{kind}{tensor.dtype.bits // 8}")
    shape = tuple(int(tensor.shape[d]) for d in range(tensor.ndim))
    strides = tuple(int(tensor.strides[d]) for d in range(tensor.ndim)) if tensor.strides else None
    device = (int(tensor.device.device_type), int(tensor.device.device_id))
    pointer = int(tensor.data or 0) + int(tensor.byte_offset)
    return DeviceArray(pointer, dtype, shape, strides, device, (obj, capsule))


def device_array(role: str, name: str, obj: object) -> DeviceArray:
    """A device-memory array's pointer: `__cuda_array_interface__` (no export needed), else
    its DLPack capsule."""
    try:
        interface = getattr(obj, "__cuda_array_interface__", None)
    except (RuntimeError, TypeError, ValueError) as error:  # torch: a tensor that requires grad
        hint = " (call .detach() first)" if "grad" in str(error) else ""
        raise RuntimeInputError(f"{role} '{name}' ({describe(obj)}) cannot be read as a device array: {error}{hint}") from None
    if isinstance(interface, dict):
        pointer, readonly = interface["data"]
        dtype = np.dtype(interface["typestr"])
        shape = tuple(int(d) for d in interface["shape"])
        raw = interface.get("strides")
        strides = None if raw is None else tuple(int(s) // dtype.itemsize for s in raw)
        return DeviceArray(int(pointer or 0), dtype, shape, strides, dlpack_device(obj), obj, bool(readonly))
    return dlpack_view(role, name, obj)


# --- giving outputs back in the caller's type -------------------------------------------------

_FROM_DLPACK = {"torch": ("torch", "from_numpy"), "cupy": ("cupy", "from_dlpack"),
                "jax": ("jax.numpy", "from_dlpack"), "jaxlib": ("jax.numpy", "from_dlpack")}  # fmt: skip

Converter = Callable[[object], object]


def converter_for(example: object) -> Converter | None:
    """How to turn a NumPy output into `example`'s array type (None: keep NumPy)."""
    if isinstance(example, np.ndarray):
        return None
    top = type(example).__module__.split(".")[0]
    module_name, attribute = _FROM_DLPACK.get(top, (top, "from_dlpack"))
    module = sys.modules.get(module_name)
    if module is None:
        try:
            module = importlib.import_module(module_name)
        except ImportError:
            return None
    convert = getattr(module, attribute, None)
    return convert if callable(convert) and module is not np else None


def empty_like_library(example: object, shape: tuple[int, ...], dtype: np.dtype, role: str, name: str) -> object:
    """A new device array of `example`'s library on `example`'s device (torch, cupy), for
    the outputs of a call whose inputs live on a device."""
    top = type(example).__module__.split(".")[0]
    if top == "torch":
        torch = sys.modules["torch"]
        return torch.empty(shape, dtype=getattr(torch, dtype.name), device=getattr(example, "device"))
    if top == "cupy":
        cupy = sys.modules["cupy"]
        with cupy.cuda.Device(dlpack_device(example)[1]):
            return cupy.empty(shape, dtype)
    raise RuntimeInputError(
        f"{role} '{name}': einc cannot allocate device memory for {describe(example)} inputs; "
        "pass the output arrays with out="
    )


ALIGNMENT = 128
"""Bytes: where the arrays einc allocates start (a cache line, one 512-bit vector; 128: also an
OpenCL CPU device's buffer alignment, PoCL's CL_DEVICE_MEM_BASE_ADDR_ALIGN, so that OpenCL
kernels use them in place)."""


def aligned_empty(shape: Sequence[int] | int, dtype: str | np.dtype, alignment: int = ALIGNMENT) -> np.ndarray:
    """`np.empty(shape, dtype)` whose data starts on an `alignment`-byte boundary: a view into
    a byte buffer over-allocated by `alignment - 1` bytes (the view keeps it alive)."""
    dt = np.dtype(dtype)
    shape = (shape,) if isinstance(shape, int) else tuple(shape)
    count = 1
    for extent in shape:
        count *= extent
    raw = np.empty(count * dt.itemsize + alignment - 1, np.uint8)
    start = -raw.ctypes.data % alignment
    return raw[start : start + count * dt.itemsize].view(dt).reshape(shape)


def poisoned(shape: Sequence[int], dtype: str | np.dtype) -> np.ndarray:
    """An array filled with a value no correct kernel leaves behind: NaN, or 0x5A bytes."""
    out = aligned_empty(shape, dtype)
    poison(out)
    return out


def poison(out: np.ndarray) -> None:
    if out.dtype.kind in "fc":
        out.fill(np.nan)
    elif out.flags.c_contiguous:
        out.reshape(-1).view(np.uint8).fill(0x5A)
    else:
        out[...] = np.frombuffer(b"\x5a" * out.dtype.itemsize, out.dtype)[0]
