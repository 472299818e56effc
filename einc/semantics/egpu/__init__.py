"""An interpreter for einc modules below the `ein` level: the loops (affine/scf/memref/arith/
math), every schedule's result, and each target's legalized IR (the module after any prefix
of its `pipeline`): `egpu` kernels and launches, work-item coordinates, barriers, shared and
private memory, subgroup reductions, vector ops, narrow-float storage ops and Poplar's
tile-split vertices.

    from einc.semantics.egpu import run_lowered
    outputs = run_lowered(module, {"input0": x, "input1": y})   # {"output0": array, ...}

The host function runs as one lane; each `egpu.launch` runs its kernel for all work-items at
once: every op is one NumPy operation over the work-items (lanes), masked where control flow
diverges (einc/semantics/egpu/machine.py), with the value semantics of einc/semantics/loops.py (each
element type its own dtype, so rounding and wrapping are the type's; total integer division;
saturating float -> integer conversion). Outputs and temporaries start poisoned (NaN,
0xA5 bytes), every access is bounds-checked, inputs cannot be written, and a data race
between work-items (a missing barrier), a barrier or subgroup reduction not reached by every
work-item of its block or cluster, or an access outside a Poplar vertex's slice raises
`KernelFault` naming the op and the work-item (einc/semantics/egpu/memory.py): these are
compiler bugs when the compiler made the module. An op the interpreter does not know raises
`UnsupportedIR` naming it.

Buffers a target stores widened (`legalize-storage-dtypes`: the host argument's `egpu.dtype`
names the program's dtype) are converted at the boundary, as the runtimes do: inputs are
given and outputs returned in the program's dtypes.
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np
from xdsl.dialects.builtin import MemRefType, ModuleOp, StringAttr, UnitAttr

from einc.errors import RuntimeInputError
from einc.semantics.egpu.machine import Machine
from einc.semantics.egpu.state import poison
from einc.semantics.egpu.memory import Buffer, KernelFault
from einc.semantics.egpu.values import UnsupportedIR, dtype_of
from einc.ir.attrs import DTYPE_ATTR, NAME_ATTR, OUTPUT_ATTR
from einc.runtime.signature import kernel_function


def _subgroup_size(target: str | None) -> int | None:
    if target is None:
        return None
    from einc.targets import get_target

    limits = get_target(target).limits
    return limits.subgroup_size if limits is not None else None


def run_lowered(
    module: ModuleOp,
    inputs: Mapping[str, np.ndarray],
    *,
    target: str | None = None,
    subgroup_size: int | None = None,
) -> dict[str, np.ndarray]:
    """Execute `module` (loops level or below) on `inputs` by name; its outputs by name, in the
    program's dtypes. `target` (or `subgroup_size`) gives the subgroup size an
    `egpu.subgroup_reduce` without `cluster` needs. Raises RuntimeInputError for inputs that do
    not match the kernel's arguments, KernelFault for a fault of the program (out of bounds,
    race, divergent barrier), UnsupportedIR for an op it cannot execute."""
    host = kernel_function(module)
    attrs = [a.data for a in host.arg_attrs.data] if host.arg_attrs is not None else []
    machine = Machine(module, subgroup_size or _subgroup_size(target))
    args: list[Buffer] = []
    outputs: list[tuple[str, np.ndarray, np.dtype]] = []
    known = set()
    for k, arg in enumerate(host.body.block.args):
        t = arg.type
        if not isinstance(t, MemRefType):
            raise UnsupportedIR("func.func", f"argument {k} of type {t} (kernels take buffers)")
        a = attrs[k] if k < len(attrs) else {}
        label = a.get(NAME_ATTR)
        name = label.data if isinstance(label, StringAttr) else f"arg{k}"
        storage = dtype_of(t.get_element_type())
        declared = a.get(DTYPE_ATTR)
        dtype = np.dtype(declared.data) if isinstance(declared, StringAttr) else storage
        shape = tuple(int(d) for d in t.get_shape())
        if isinstance(a.get(OUTPUT_ATTR), UnitAttr):
            data = poison(shape, storage)
            outputs.append((name, data, dtype))
            args.append(Buffer(data, name))
            continue
        known.add(name)
        if name not in inputs:
            raise RuntimeInputError(f"run_lowered: missing input '{name}' ({dtype}{list(shape)})")
        given = np.asarray(inputs[name])
        if given.shape != shape or given.dtype != dtype:
            raise RuntimeInputError(
                f"run_lowered: input '{name}' is {given.dtype}{list(given.shape)}, the kernel takes {dtype}{list(shape)}"
            )
        data = (given if given.flags.c_contiguous else np.ascontiguousarray(given)).astype(storage, copy=False).view()
        data.flags.writeable = False
        args.append(Buffer(data, name, readonly=True))
    for name in inputs:
        if name not in known:
            raise RuntimeInputError(f"run_lowered: unknown input '{name}' (the kernel takes {', '.join(sorted(known)) or 'none'})")
    machine.host_block = host.body.block
    machine.host_buffers = list(args)
    with np.errstate(all="ignore"):
        machine.run_region(host.body, None, args)
    result: dict[str, np.ndarray] = {}
    for name, data, dtype in outputs:
        result.setdefault(name, data.astype(dtype) if data.dtype != dtype else data)
    return result


__all__ = ["KernelFault", "UnsupportedIR", "run_lowered"]
