"""Torch tensors on einc's side: dtypes, example tensors as an `input_dict`, the checks of a
call's tensors, and `launch`, the one place an einc kernel runs on torch tensors."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import cast

import numpy as np
import torch

from einc.compiler.kernel import Kernel
from einc.errors import RuntimeInputError, SourceLocation, UsageError
from einc.frontend import TensorInfo
from einc.ir.attrs import BFLOAT16
from einc.targets import get_all_targets, get_target

TORCH_DTYPES: dict[str, torch.dtype] = {
    "float16": torch.float16,
    "bfloat16": torch.bfloat16,
    "float32": torch.float32,
    "float64": torch.float64,
    "int8": torch.int8,
    "int16": torch.int16,
    "int32": torch.int32,
    "int64": torch.int64,
    "bool": torch.bool,
}
"""einc's dtype names and the torch dtypes of the same bits (einc stores a comparison's
result as int8, so outputs are never torch.bool)."""

EINC_DTYPES: dict[torch.dtype, str] = {t: name for name, t in TORCH_DTYPES.items()}

def device_type(target: str) -> str:
    """The torch device type of `target`'s tensors (its `torch_device`): "cuda" for CUDA and
    HIP (ROCm builds of torch call their devices `cuda` too), else "cpu" (OpenCL, SYCL, HLSL
    and Poplar copy host tensors over)."""
    return get_target(target).torch_device


def targets_on(device: str) -> list[str]:
    """The targets whose tensors are on torch device type `device`."""
    return [name for name, target in get_all_targets().items() if target().torch_device == device]


@dataclass(frozen=True)
class TensorSpec:
    """What an op takes or gives at one position: the program's name, torch dtype and shape."""

    name: str
    dtype: torch.dtype
    shape: tuple[int, ...]

    @classmethod
    def of(cls, info: TensorInfo) -> TensorSpec:
        return cls(info.name, TORCH_DTYPES[info.dtype], tuple(info.shape))

    def describe(self) -> str:
        return f"{str(self.dtype).removeprefix('torch.')}{list(self.shape)}"


def einc_dtype(dtype: torch.dtype, what: str, loc: SourceLocation) -> str:
    """einc's name of a torch dtype, or a UsageError naming the ones einc has."""
    name = EINC_DTYPES.get(dtype)
    if name is None or name == "bool":
        known = ", ".join(f"torch.{n}" for n in TORCH_DTYPES if n != "bool")
        raise UsageError(f"{what} is {dtype}, which einc has no dtype for (einc takes {known})", loc)
    return name


def example_input_dict(
    examples: Mapping[str, object] | Sequence[torch.Tensor], target: str, loc: SourceLocation
) -> dict[str, Mapping[str, object]]:
    """An `input_dict` from example tensors: a mapping of input names to tensors (or to
    einc.compile's `{"dtype", "shape"}` entries), or a sequence of tensors named input0,
    input1, ... (Antares' names). Each tensor's dtype must be one einc has, and its device
    the target's (a UsageError otherwise)."""
    if isinstance(examples, Mapping):
        items = list(examples.items())
    else:
        items = [(f"input{i}", t) for i, t in enumerate(examples)]
    wanted = device_type(target)
    spec: dict[str, Mapping[str, object]] = {}
    for name, value in items:
        if not isinstance(value, torch.Tensor):
            spec[name] = cast("Mapping[str, object]", value)  # einc.compile checks it, with a location
            continue
        if value.device.type != wanted:
            gpu = targets_on(value.device.type) if value.device.type != "cpu" else []
            other = " or ".join(f"'{n}'" for n in gpu) if gpu else "'c' (or another CPU target)"
            raise UsageError(
                f"the example tensor '{name}' is on {value.device}, but target '{target}' runs on "
                f"{wanted} tensors; use target={other}",
                loc,
            )
        spec[name] = {"dtype": einc_dtype(value.dtype, f"the example tensor '{name}'", loc),
                      "shape": list(value.shape)}  # fmt: skip
    return spec


def is_examples(value: object) -> bool:
    """Whether `value` is example tensors (a sequence of tensors, or a mapping holding one)."""
    if isinstance(value, Mapping):
        return any(isinstance(v, torch.Tensor) for v in value.values())
    return isinstance(value, list | tuple) and len(value) > 0 and all(isinstance(v, torch.Tensor) for v in value)


def check_inputs(
    op: str, specs: Sequence[TensorSpec], tensors: Sequence[torch.Tensor], device: str,
    describe: Callable[[int], str] | None = None,
) -> None:  # fmt: skip
    """RuntimeInputError unless `tensors` match `specs` one by one (count, dtype, rank) and
    all lie on one device of type `device`; their sizes are the op's shapes' to check
    (einc.torch.shapes). `describe(k)`: input k in words (default: its spec's dtype and
    shape). Works on fake tensors too (the compile-time check)."""
    words = describe or (lambda k: specs[k].describe())
    if len(tensors) != len(specs):
        raise RuntimeInputError(
            f"{op} takes {len(specs)} tensors ({', '.join(f'{s.name}: {words(k)}' for k, s in enumerate(specs))}), "
            f"got {len(tensors)}"
        )
    first: torch.device | None = None
    for k, (spec, t) in enumerate(zip(specs, tensors)):
        if (
            isinstance(t, torch.Tensor) and t.dtype == spec.dtype and t.dim() == len(spec.shape)
            and t.device.type == device and (first is None or t.device == first)
        ):  # fmt: skip
            first = t.device
            continue
        where = f"{op}: argument {k} ('{spec.name}')"
        if not isinstance(t, torch.Tensor):
            raise RuntimeInputError(f"{where} must be a torch.Tensor of {words(k)}, got {type(t).__name__}")
        if t.dtype != spec.dtype:
            raise RuntimeInputError(f"{where} has dtype {t.dtype}, the op was made for {spec.dtype}")
        if t.dim() != len(spec.shape):
            raise RuntimeInputError(
                f"{where} has shape {list(t.shape)}, {t.dim()} dimension{'s' if t.dim() != 1 else ''}; "
                f"the op takes {words(k)}, {len(spec.shape)}"
            )
        if t.device.type != device:
            raise RuntimeInputError(
                f"{where} is on {t.device}, but the op runs on {device} tensors "
                f"(its target is {'a CPU target' if device == 'cpu' else 'a GPU target'})"
            )
        raise RuntimeInputError(f"{where} is on {t.device}, the earlier arguments on {first}")


def _host(t: torch.Tensor) -> np.ndarray:
    """A NumPy view of a CPU tensor's memory (no copy; bfloat16, which NumPy lacks, as
    ml_dtypes' bfloat16 over its bits)."""
    t = t.detach() if t.requires_grad else t
    if t.dtype == torch.bfloat16:
        return t.view(torch.int16).numpy().view(BFLOAT16)
    return t.numpy()


def launch(kernel: Kernel, inputs: Sequence[torch.Tensor], outputs: Sequence[torch.Tensor]) -> None:
    """Run `kernel` on `inputs` (checked, contiguous), writing `outputs` (allocated by the
    caller with torch.empty on the inputs' device, in the kernel's output order).

    Zero-copy on every device: CPU tensors go in as NumPy views (`Tensor.numpy()`, the
    fastest path into the C trampoline); device tensors go in as themselves, and the device
    runtime takes their pointers from `__dlpack__` / `__cuda_array_interface__`, so their
    buffers stay on the device (einc.runtime.arrays). The CUDA runtime launches on the legacy
    default stream and synchronises before returning, which orders it with torch's default
    stream; work on other torch streams must be synchronised by the caller. (Not run on a
    GPU here.)"""
    names_in = [i.name for i in kernel.inputs]
    names_out = [o.name for o in kernel.outputs]
    if all(t.device.type == "cpu" for t in outputs):  # the inputs are on the outputs' device
        kernel.run({n: _host(t) for n, t in zip(names_in, inputs)}, {n: _host(t) for n, t in zip(names_out, outputs)})
        return
    kernel.run(dict(zip(names_in, inputs)), dict(zip(names_out, outputs)))
