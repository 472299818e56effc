"""`einc.Kernel`: a compiled program, called as `kernel(**inputs, out=None)`.

The call path:
- Inputs are anything with `__dlpack__` (NumPy, PyTorch, JAX, CuPy), taken without copies:
  host memory as NumPy views (`numpy.from_dlpack`), device memory as device pointers for
  runtimes that take them (CUDA). Each is checked against the program: dtype, shape, device
  and C-contiguity; a mismatch is a RuntimeInputError naming the input, expected vs got. A
  non-contiguous input is copied only where the kernel allows it (`einc.compile(...,
  allow_copy=True)`, or `kernel.allow_copy = True`).
- Outputs are freshly allocated and returned as a dict by name, in the caller's array type
  (torch tensors in, torch tensors out, through `from_dlpack`: zero-copy), or written into
  `out=` arrays: a dict name -> array, or one array for a kernel with one output. `out=`
  arrays are checked like inputs, must be writable and must not overlap any other argument;
  the call returns them (the caller's own objects) by name.
- Debug mode (`einc.compile(..., debug=True)`, else `$EINC_DEBUG=1` when compiled) fills
  every output with NaN (0x5A bytes for integers) before the kernel runs, so an output the
  kernel leaves unwritten cannot pass a check; the test suite runs in debug mode.
- The C target's calls go through a small C extension (`einc.runtime.fastcall`): about a
  microsecond per call for NumPy arrays; anything else (DLPack objects, out= of other types,
  copies, debug) takes the Python path here, then the same C call.
- A kernel whose runtime is missing here (no NVIDIA driver, no AMD GPU, no pyopencl...) is
  still a kernel: `.source`, `.manifest` and `.check()` work; calling it raises a
  ToolchainError saying what is missing (`available` is False, `unavailable` says why).
- `kernel.model("h100")`: the device performance model of the kernel's lowered kernels on a
  device (einc.perfmodel): FLOPs, memory sectors, bank conflicts, occupancy, roofline time.
  Modelled, not measured: it needs neither the device nor its runtime.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, cast

import numpy as np

from einc.errors import RuntimeInputError, RuntimeMissingError, TargetError
from einc.runtime.arrays import (
    HOST_TYPES,
    DeviceArray,
    aligned_empty,
    converter_for,
    describe,
    device_array,
    device_name,
    dlpack_device,
    empty_like_library,
    host_array,
    poison,
)

if TYPE_CHECKING:
    from xdsl.dialects.builtin import ModuleOp

    from einc.frontend import Program, TensorInfo
    from einc.perfmodel import Device, ModelReport
    from einc.runtime.device import CompileReport
    from einc.runtime.manifest import LaunchManifest
    from einc.targets.clike import CompileCheck
    from einc.compiler.records import Record

Arg = np.ndarray | DeviceArray
Runner = Callable[..., object]
"""`runner(inputs, outputs)`: arrays by name (NumPy, or DeviceArray for runners whose
`device_types` name the memory), outputs written in place."""
DEBUG_ENV = "EINC_DEBUG"


def debug_from_env() -> bool:
    """`$EINC_DEBUG` set to anything but "", "0", "false", "no", "off"."""
    return os.environ.get(DEBUG_ENV, "").strip().lower() not in ("", "0", "false", "no", "off")


class MissingRuntime:
    """The runner of a kernel whose runtime is missing here: calling it says what is missing."""

    def __init__(self, target: str, why: str):
        self.target = target
        self.why = why

    def __call__(self, inputs: Mapping[str, object], outputs: Mapping[str, object]) -> None:
        why = self.why if "cannot run here" in self.why else f"the {self.target} kernel cannot run here: {self.why}"
        raise RuntimeMissingError(
            f"{why}; its source, manifest and compile check (kernel.source, kernel.manifest, "
            "kernel.check()) work without it"
        )


class Kernel:
    """A compiled program; see the module's docstring for the call path."""

    def __init__(
        self,
        source: str,
        program: Program,
        runner: Runner,
        target: str,
        record: Record | None = None,
        *,
        manifest: LaunchManifest | None = None,
        compile_check: CompileCheck | None = None,
        debug: bool | None = None,
        allow_copy: bool = False,
        lowered: ModuleOp | None = None,
        task_records: Sequence[Record] = (),
    ):
        self.source = source
        self.program = program
        self.target = target
        self.record = record
        """The tuning record whose schedule the kernel was compiled with, if any."""
        self.task_records = list(task_records)
        """The tuning records of the program's tasks the kernel was compiled with (a program of
        several kernels tuned task by task: einc.compiler.tasks), one per kernel that had one."""
        self.manifest = manifest
        """The launch manifest (device targets: kernels, launch geometry, argument order), or None (C)."""
        self._compile_check = compile_check
        self.lowered = lowered
        """The lowered module the source was printed from (the driver's `target` stage), or None."""
        self.debug = debug_from_env() if debug is None else bool(debug)
        """Poison outputs before each run (see the module's docstring)."""
        self.allow_copy = allow_copy
        """Copy non-contiguous inputs (and write non-contiguous out= arrays through a copy)."""
        self._runner = runner
        owner = getattr(runner, "__self__", runner)
        self._device_types: frozenset[int] = getattr(owner, "device_types", frozenset())
        fast = getattr(owner, "fast_call", None)
        self._fast: Callable[..., dict[str, object] | None] | None = None
        self._spec: object = None
        if fast is not None:
            self._fast, self._spec = fast()  # the C trampoline, or ctypes_call
        self._ins = {t.name: t for t in program.inputs}
        self._outs = {t.name: t for t in program.outputs}
        self._one_out = next(iter(self._outs)) if len(self._outs) == 1 else None
        self._out_is_input = "out" in self._ins
        self._dtypes = {t.name: np.dtype(t.dtype) for t in (*program.inputs, *program.outputs)}

    @property
    def inputs(self) -> list[TensorInfo]:
        return list(self.program.inputs)

    @property
    def outputs(self) -> list[TensorInfo]:
        return list(self.program.outputs)

    @property
    def available(self) -> bool:
        """Whether the kernel can run here (False: its runtime is missing; see `unavailable`)."""
        return not isinstance(self._runner, MissingRuntime)

    @property
    def unavailable(self) -> str | None:
        """What is missing to run the kernel here, or None."""
        return self._runner.why if isinstance(self._runner, MissingRuntime) else None

    def check(self, archs: Sequence[str] | None = None) -> list[CompileReport]:
        """Compile the kernel's device code with the target's real compiler for each
        architecture (default: the target's) and return the reports (ToolchainError when
        the compiler rejects it). Needs no GPU; targets `einc check` does not cover raise
        a TargetError naming those it does."""
        spec = self._compile_check
        if spec is None or self.manifest is None:
            raise TargetError(f"the {self.target} target has no compile check (einc check); call the kernel to test it")
        check = spec.checker()
        return [check(self.source, self.manifest, arch).check() for arch in archs or spec.archs]

    def model(self, device: str | Device = "h100") -> ModelReport:
        """The performance model of the kernel's device kernels on `device` (a name the model
        knows: h100, a100, mi250x, rtx4090, a770, ipu-m2000; a JSON file describing one; or an
        `einc.perfmodel.Device`): per kernel FLOPs, global sectors, shared bank conflicts,
        registers (from the target's compiler where it builds for the device), occupancy and a
        roofline time with what bounds it (`report.render()`, `report.to_json_dict()`).
        Modelled, not measured: it needs no device. A TargetError for a target without device
        kernels (C) or a kernel built without its lowered module."""
        from einc.perfmodel import get_device, model_module
        from einc.targets import get_target

        target = get_target(self.target)
        if self.lowered is None or target.limits is None:
            raise TargetError(f"the performance model covers device kernels; the {self.target} kernel has none")
        return model_module(self.lowered, get_device(device), target, source=self.source, manifest=self.manifest)

    # ---- calling -------------------------------------------------------------------------------
    def __call__(self, /, out: object = None, **arrays: object) -> dict[str, np.ndarray]:
        """The outputs by name: NumPy arrays for NumPy inputs, else in the inputs' array type
        (typed as NumPy arrays for the common case). A program with an input named `out`
        takes that input by this keyword: give its output arrays with `run` instead."""
        if self._out_is_input:
            if out is not None:
                arrays["out"] = out
            out = None
        fast = self._fast
        if out is None and fast is not None and not self.debug:  # the common case, inline
            result = fast(self._spec, arrays, None)
            if result is not None:
                return cast("dict[str, np.ndarray]", result)
        return self._invoke(arrays, out)

    def _invoke(self, arrays: dict[str, object], out: object) -> dict[str, np.ndarray]:
        fast = self._fast
        if fast is not None and not self.debug:
            kind = type(out)  # (not narrowing `out`: it stays any object below)
            if out is None:
                result = fast(self._spec, arrays, None)
            elif kind is dict:
                result = fast(self._spec, arrays, cast("dict[str, object]", out))
            elif kind is np.ndarray and self._one_out is not None:
                result = fast(self._spec, arrays, {self._one_out: out})
            else:
                result = None
            if result is None:
                result = self._torch_fast(arrays, out)
            if result is not None:
                return cast("dict[str, np.ndarray]", result)
        return cast("dict[str, np.ndarray]", self._call(arrays, out))

    def _torch_fast(self, arrays: Mapping[str, object], out: object) -> dict[str, object] | None:
        """torch CPU tensors (no autograd) through the trampoline: `Tensor.numpy()` views in,
        `torch.from_numpy` views out (or the caller's out= tensors); None for anything else."""
        torch = sys.modules.get("torch")
        if torch is None or self._fast is None:
            return None
        tensor = torch.Tensor
        given: dict[str, object]
        if type(out) is tensor and self._one_out is not None:
            given = {self._one_out: out}
        elif out is None:
            given = {}
        elif type(out) is dict:
            given = cast("dict[str, object]", out)
        else:
            return None
        for value in (*arrays.values(), *given.values()):
            if type(value) is not tensor or not getattr(value, "is_cpu") or getattr(value, "requires_grad"):
                return None
        views = {name: getattr(value, "numpy")() for name, value in arrays.items()}
        out_views = {name: getattr(value, "numpy")() for name, value in given.items()} if given else None
        result = self._fast(self._spec, views, out_views)
        if result is None:
            return None
        if given:
            return {name: given[name] for name in result}
        return {name: torch.from_numpy(value) for name, value in result.items()}

    def run(self, arrays: Mapping[str, object], outputs: Mapping[str, object]) -> None:
        """Run into caller-provided output arrays (no allocation): `outputs` holds every
        output of the kernel (RuntimeInputError otherwise: results written to scratch arrays
        nobody sees are a mistake). The same as `kernel(**arrays, out=outputs)`."""
        missing = [o for o in self._outs if o not in outputs]
        if missing:
            raise RuntimeInputError(
                f"Kernel.run writes into the arrays it is given, but none is given for "
                f"{', '.join(repr(m) for m in missing)} (the kernel produces "
                f"{', '.join(self._outs)}); call the kernel "
                "with keyword arguments to get freshly allocated outputs"
            )
        self._invoke(dict(arrays), dict(outputs))

    def _call(self, arrays: Mapping[str, object], out: object) -> dict[str, object]:
        """The general path: DLPack conversion, checks with precise errors, copies where
        allowed, poisoning in debug mode, outputs in the caller's type."""
        if not self.available:
            self._runner({}, {})  # raises what is missing
        given = self._out_dict(out)
        for name in arrays:
            if name not in self._ins:
                raise RuntimeInputError(f"unknown input '{name}' (the kernel takes {_names(self._ins.values())})")
        inputs: dict[str, Arg] = {}
        example: object = None
        for info in self._ins.values():
            if info.name not in arrays:
                raise RuntimeInputError(
                    f"missing input '{info.name}' ({_describe(info)}); the kernel takes {_names(self._ins.values())}"
                )
            obj = arrays[info.name]
            if example is None and not _is_numpy(obj):
                example = obj
            inputs[info.name] = self._take("input", info, obj)
        on_device = next((a for a in inputs.values() if isinstance(a, DeviceArray)), None)
        outputs: dict[str, Arg] = {}
        written_back: list[tuple[np.ndarray, np.ndarray]] = []
        made: dict[str, object] = {}
        for info in self._outs.values():
            if info.name in given:
                arg = self._take("output", info, given[info.name], writing=True)
                if isinstance(arg, np.ndarray) and not arg.flags.c_contiguous:  # allowed: through a copy
                    scratch = aligned_empty(arg.shape, arg.dtype)
                    written_back.append((arg, scratch))
                    arg = scratch
            elif on_device is not None:
                made[info.name] = empty_like_library(example, info.shape, self._dtypes[info.name], "output", info.name)
                arg = self._take("output", info, made[info.name], writing=True)
            else:
                arg = aligned_empty(info.shape, self._dtypes[info.name])
                made[info.name] = arg
            outputs[info.name] = arg
        _check_no_overlap(inputs, outputs)
        if self.debug:
            for name, arg in outputs.items():
                if isinstance(arg, np.ndarray):
                    poison(arg)
        fast = self._fast
        if fast is None or self.debug or fast(self._spec, inputs, outputs) is None:
            self._runner(inputs, outputs)
        for target, scratch in written_back:
            np.copyto(target, scratch)
        if given:
            return {name: given.get(name, made.get(name)) for name in self._outs}
        convert = converter_for(example) if example is not None and on_device is None else None
        return {name: convert(value) if convert is not None else value for name, value in made.items()}

    def _out_dict(self, out: object) -> dict[str, object]:
        if out is None:
            return {}
        if isinstance(out, Mapping):
            given = cast("Mapping[str, object]", out)
            for name in given:
                if name not in self._outs:
                    raise RuntimeInputError(f"unknown output '{name}' (the kernel produces {_names(self._outs.values())})")
            return dict(given)
        if len(self._outs) != 1:
            raise RuntimeInputError(
                f"out= is one array, but the kernel produces {len(self._outs)} outputs "
                f"({_names(self._outs.values())}); pass a dict name -> array"
            )
        return {next(iter(self._outs)): out}

    def _take(self, role: str, info: TensorInfo, obj: object, writing: bool = False) -> Arg:
        """The argument checked against `info`: a host array (zero-copy), or a DeviceArray
        for runners that take the object's device memory."""
        device = dlpack_device(obj)
        if device[0] not in HOST_TYPES:
            if device[0] not in self._device_types:
                raise RuntimeInputError(
                    f"{role} '{info.name}' is on {device_name(device)}, but the {self.target} kernel "
                    + ("runs on the host" if not self._device_types else "takes host arrays or device arrays of its own GPU")
                    + " (move it, e.g. tensor.cpu(), or compile for its device)"
                )
            array = device_array(role, info.name, obj)
            self._check(role, info, array.dtype, array.shape, obj)
            if not array.c_contiguous:
                raise RuntimeInputError(
                    f"{role} '{info.name}' is not C-contiguous (strides {list(array.strides or ())} elements); "
                    "device arrays are not copied: make it contiguous (tensor.contiguous())"
                )
            if writing and array.readonly:
                raise RuntimeInputError(f"output '{info.name}' is read-only")
            return array
        host = host_array(role, info.name, obj)
        self._check(role, info, host.dtype, host.shape, obj)
        if writing and not host.flags.writeable:
            raise RuntimeInputError(f"output '{info.name}' is read-only")
        if not (host.flags.c_contiguous and host.flags.aligned):
            if not self.allow_copy:
                raise RuntimeInputError(
                    f"{role} '{info.name}' is not C-contiguous (strides {list(host.strides)} bytes); "
                    "einc copies it only when allowed: einc.compile(..., allow_copy=True) or "
                    "kernel.allow_copy = True (or pass numpy.ascontiguousarray / tensor.contiguous())"
                )
            if not writing:
                host = np.ascontiguousarray(host)
        return host

    def _check(self, role: str, info: TensorInfo, dtype: np.dtype, shape: tuple[int, ...], obj: object) -> None:
        want = self._dtypes[info.name]
        if dtype != want:
            raise RuntimeInputError(f"{role} '{info.name}' has dtype {dtype}, expected {want} ({describe(obj)})")
        if tuple(shape) != tuple(info.shape):
            raise RuntimeInputError(f"{role} '{info.name}' has shape {list(shape)}, expected {list(info.shape)}")


def _is_numpy(obj: object) -> bool:
    return isinstance(obj, np.ndarray)


def _check_no_overlap(inputs: Mapping[str, Arg], outputs: Mapping[str, Arg]) -> None:
    """Outputs may share memory with no other argument (inputs may alias each other)."""
    everything = [("input", n, a) for n, a in inputs.items()] + [("output", n, a) for n, a in outputs.items()]
    for name, arg in outputs.items():
        for role, other_name, other in everything:
            if other is arg and role == "output" and other_name == name:
                continue
            if _overlap(arg, other):
                raise RuntimeInputError(f"output '{name}' overlaps {role} '{other_name}'")


def _overlap(a: Arg, b: Arg) -> bool:
    if isinstance(a, DeviceArray) or isinstance(b, DeviceArray):
        if not (isinstance(a, DeviceArray) and isinstance(b, DeviceArray)) or a.device != b.device:
            return False
        return bool(a.nbytes and b.nbytes and a.ptr < b.ptr + b.nbytes and b.ptr < a.ptr + a.nbytes)
    return bool(a.size and b.size and np.may_share_memory(a, b))


def _describe(info: TensorInfo) -> str:
    return f"{info.dtype}[{', '.join(str(d) for d in info.shape)}]"


def _names(infos: Iterable[TensorInfo]) -> str:
    return ", ".join(f"{t.name}: {_describe(t)}" for t in infos) or "nothing"
