"""The calling convention of a lowered kernel, and checking NumPy arrays against it.

After `convert-ein-to-affine` a kernel is `func.func @kernel(inputs..., outputs...)` whose
arguments are identity-layout memrefs carrying `{ein.name = "..."}`, outputs also
`ein.output`. Every runtime (the interpreter, the C runtime, later GPU runtimes) binds
arrays to it through `KernelSignature`.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

import numpy as np
from xdsl.dialects import func
from xdsl.dialects.builtin import (
    MemRefType,
    ModuleOp,
    StringAttr,
)

from einc.errors import RuntimeInputError
from einc.runtime.arrays import aligned_empty
from einc.ir.attrs import NAME_ATTR, OUTPUT_ATTR, numpy_dtype


@dataclass(frozen=True)
class BufferSpec:
    """One kernel argument: a row-major, C-contiguous array."""

    name: str
    dtype: np.dtype
    shape: tuple[int, ...]
    is_output: bool

    def describe(self) -> str:
        dims = ", ".join(str(d) for d in self.shape)
        return f"{self.dtype}[{dims}]"


def kernel_function(module: ModuleOp) -> func.FuncOp:
    """The module's kernel: its only defined `func.func`, else the one named `kernel`."""
    funcs = [op for op in module.ops if isinstance(op, func.FuncOp) and op.body.blocks]
    if len(funcs) == 1:
        return funcs[0]
    for f in funcs:
        if f.sym_name.data == "kernel":
            return f
    raise ValueError(f"expected one kernel function in the module, found {len(funcs)}")


@dataclass(frozen=True)
class KernelSignature:
    name: str
    buffers: tuple[BufferSpec, ...]

    @classmethod
    def from_function(cls, f: func.FuncOp) -> KernelSignature:
        attrs = f.arg_attrs.data if f.arg_attrs is not None else ()
        specs: list[BufferSpec] = []
        for k, t in enumerate(f.function_type.inputs):
            if not isinstance(t, MemRefType):
                raise ValueError(f"kernel argument {k} is {t}, not a memref (lower it first)")
            arg = attrs[k].data if k < len(attrs) else {}
            name = arg.get(NAME_ATTR)
            specs.append(
                BufferSpec(
                    name.data if isinstance(name, StringAttr) else f"arg{k}",
                    numpy_dtype(t.get_element_type()),
                    tuple(t.get_shape()),
                    OUTPUT_ATTR in arg,
                )
            )
        return cls(f.sym_name.data, tuple(specs))

    @classmethod
    def from_module(cls, module: ModuleOp) -> KernelSignature:
        return cls.from_function(kernel_function(module))

    @property
    def inputs(self) -> tuple[BufferSpec, ...]:
        return tuple(b for b in self.buffers if not b.is_output)

    @property
    def outputs(self) -> tuple[BufferSpec, ...]:
        return tuple(b for b in self.buffers if b.is_output)

    def bind(
        self,
        inputs: Mapping[str, np.ndarray],
        outputs: Mapping[str, np.ndarray] | None = None,
        allocate: Callable[[BufferSpec], np.ndarray] | None = None,
    ) -> list[np.ndarray]:
        """The arrays in argument order, each checked against its spec. Missing outputs
        are made by `allocate` (default `aligned_empty`: 128-byte aligned), as is the second array of an output
        returned twice. Raises RuntimeInputError for a missing
        or unknown name, a wrong dtype or shape, a non-contiguous array, a read-only
        output, or an output overlapping another argument."""
        outputs = outputs or {}
        known_in = {b.name for b in self.inputs}
        known_out = {b.name for b in self.outputs}
        for name in inputs:
            if name not in known_in:
                raise RuntimeInputError(
                    f"unknown input '{name}' (the kernel takes {_names(self.inputs)})"
                )
        for name in outputs:
            if name not in known_out:
                raise RuntimeInputError(
                    f"unknown output '{name}' (the kernel produces {_names(self.outputs)})"
                )
        make = allocate or (lambda b: aligned_empty(b.shape, b.dtype))
        arrays: list[np.ndarray] = []
        bound_outputs: set[str] = set()
        for spec in self.buffers:
            source = outputs if spec.is_output else inputs
            if spec.is_output and spec.name in bound_outputs:
                # the same result returned twice: a scratch copy, `restrict` forbids aliasing
                array = make(spec)
            elif spec.name in source:
                array = source[spec.name]
                check_array(spec, array)
            elif spec.is_output:
                array = make(spec)
            else:
                raise RuntimeInputError(
                    f"missing input '{spec.name}' ({spec.describe()}); the kernel takes "
                    f"{_names(self.inputs)}"
                )
            arrays.append(array)
            if spec.is_output:
                bound_outputs.add(spec.name)
        check_no_overlap(self.buffers, arrays)
        return arrays

    def outputs_by_name(self, arrays: Sequence[np.ndarray]) -> dict[str, np.ndarray]:
        """The output arrays of a bound argument list, by name (the first of repeats)."""
        named: dict[str, np.ndarray] = {}
        for spec, array in zip(self.buffers, arrays):
            if spec.is_output:
                named.setdefault(spec.name, array)
        return named


def check_array(spec: BufferSpec, array: object) -> None:
    """Raise RuntimeInputError unless `array` can be passed as `spec` without a copy."""
    role = "output" if spec.is_output else "input"
    if not isinstance(array, np.ndarray):
        raise RuntimeInputError(
            f"{role} '{spec.name}' must be a numpy.ndarray of {spec.describe()}, "
            f"got {type(array).__name__} (use numpy.asarray)"
        )
    if array.dtype != spec.dtype:
        raise RuntimeInputError(
            f"{role} '{spec.name}' has dtype {array.dtype}, expected {spec.dtype}"
        )
    if tuple(array.shape) != spec.shape:
        raise RuntimeInputError(
            f"{role} '{spec.name}' has shape {list(array.shape)}, expected {list(spec.shape)}"
        )
    if not array.flags.c_contiguous:
        raise RuntimeInputError(
            f"{role} '{spec.name}' is not C-contiguous (use numpy.ascontiguousarray)"
        )
    if spec.is_output and not array.flags.writeable:
        raise RuntimeInputError(f"output '{spec.name}' is read-only")


def check_no_overlap(specs: Sequence[BufferSpec], arrays: Sequence[np.ndarray]) -> None:
    """Outputs may not share memory with any other argument (inputs may alias each other)."""
    for i, (spec, array) in enumerate(zip(specs, arrays)):
        if not spec.is_output:
            continue
        for j, other in enumerate(arrays):
            if j != i and array.size and other.size and np.may_share_memory(array, other):
                raise RuntimeInputError(
                    f"output '{spec.name}' overlaps argument '{specs[j].name}'"
                )


def _names(specs: Sequence[BufferSpec]) -> str:
    return ", ".join(f"{b.name}: {b.describe()}" for b in specs) or "nothing"
