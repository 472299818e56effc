"""The shared base of device targets: `CLikeTarget` tables plus the printing of `egpu` ops
and the launch manifest.

A device target's `pipeline` outlines kernels (`convert-affine-to-egpu`) and legalizes
types; `emit` checks every launch against the target's description (TargetError before any
code is printed) and prints the kernels (`egpu.func`) only: the host function is described
by `manifest(module)`, which the runtimes launch from. Subclasses set tables: the work-item
index spellings (`work_item_index`, keyed `"block_id.x"`, `"thread_id.x"`,
`"global_id.x"`, `"block_dim.x"`, `"grid_dim.x"`), the barrier, the shared-memory
declaration, the subgroup reductions and the narrow-float load/store spellings.

A `memref.alloca` left in a kernel (a tile staged in "local" memory, a compute_at box) is
the work-item's own array (`private_array`: `float a[16];`); the launch check refuses a
kernel whose local arrays exceed the description's `private_memory` per work-item. That
each work-item may own it (it lies inside the bound loops) is checked after the schedule
(einc.schedule.checks.check_private_buffers).
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Mapping, Sequence
from typing import ClassVar, Protocol, TypeVar

import numpy as np
from xdsl.dialects import affine, func, memref
from xdsl.dialects.builtin import (
    AnyFloat,
    IntegerAttr,
    IntegerType,
    MemRefType,
    ModuleOp,
    StringAttr,
    UnitAttr,
    bf16,
    f16,
    f32,
)
from xdsl.ir import Attribute, Operation, SSAValue

from einc.dialects import egpu
from einc.errors import InternalCompilerError, RuntimeMissingError, TargetError, ToolchainError
from einc.runtime.manifest import Buffer, KernelLaunch, LaunchManifest, Role
from einc.targets import bfloat16
from einc.targets.clike import CLikeTarget
from einc.targets.op_printers import expression, statement
from einc.targets.spelling import Expr
from einc.targets.writer import Writer
from einc.targets.descriptions import TargetDescription

from einc.ir.attrs import ALIGN_ATTR, DTYPE_ATTR, NAME_ATTR, OUTPUT_ATTR, dtype_name
from einc.ir.locations import at_op

Runner = Callable[[Mapping[str, np.ndarray], Mapping[str, np.ndarray]], object]

OpT = TypeVar("OpT", bound=Operation)


def numpy_dtype(t: Attribute) -> str:
    if isinstance(t, AnyFloat):
        return dtype_name(t)
    if isinstance(t, IntegerType):
        return "bool" if t.width.data == 1 else f"int{t.width.data}"
    raise InternalCompilerError(f"no NumPy dtype for element type {t}")


def _name(attrs: Mapping[str, Attribute], fallback: str) -> str:
    name = attrs.get(NAME_ATTR)
    return name.data if isinstance(name, StringAttr) else fallback


def host_function(module: ModuleOp) -> func.FuncOp:
    hosts = [op for op in module.ops if isinstance(op, func.FuncOp) and op.body.blocks]
    if len(hosts) != 1:
        raise InternalCompilerError(f"expected one host function, found {len(hosts)}")
    return hosts[0]


def host_buffers(module: ModuleOp) -> list[tuple[SSAValue, Buffer]]:
    """(host value, manifest buffer) of the host function's arguments then allocations."""
    host = host_function(module)
    attrs = [a.data for a in host.arg_attrs.data] if host.arg_attrs is not None else []
    found: list[tuple[SSAValue, Buffer]] = []
    values: list[tuple[SSAValue, Mapping[str, Attribute]]]
    values = [(a, attrs[k] if k < len(attrs) else {}) for k, a in enumerate(host.body.block.args)]
    values += [(op.memref, op.attributes) for op in host.walk() if isinstance(op, memref.AllocOp)]
    for k, (value, a) in enumerate(values):
        t = value.type
        assert isinstance(t, MemRefType)
        stored = numpy_dtype(t.get_element_type())
        declared = a.get(DTYPE_ATTR)
        dtype = declared.data if isinstance(declared, StringAttr) else stored
        role: Role = "temp" if isinstance(value.owner, memref.AllocOp) else (
            "output" if isinstance(a.get(OUTPUT_ATTR), UnitAttr) else "input"
        )
        found.append((value, Buffer(
            _name(a, f"buf{k}"), dtype, tuple(t.get_shape()), role,
            storage_dtype=stored if stored != dtype else None,
        )))  # fmt: skip
    return found


# ---- printers of egpu ops --------------------------------------------------------------------


def device(w: Writer) -> type[DeviceTarget]:
    """The target `w` prints for: a device target (the egpu printers are only its own)."""
    t = w.t
    assert issubclass(t, DeviceTarget), t
    return t


def index_expression(w: Writer, op: egpu.IndexOp) -> Expr:
    key = f"{op.name.removeprefix('egpu.')}.{op.dimension.value}"
    spelling = w.t.work_item_index.get(key)
    if w.index_bits == 32 and spelling is not None:
        narrow = device(w).work_item_index_32.get(key)
        spelling = narrow if narrow is not None else f"({w.index_ctype()})({spelling})"
    if spelling is not None:
        return Expr(spelling)
    lo, hi = op.index_range()
    if lo != hi:
        raise InternalCompilerError(f"{w.t.name} target: no spelling of {key}")
    return Expr(str(lo))  # a launch constant (block or grid size)


def _return(w: Writer, op: Operation) -> None:
    """The end of a kernel's body: implicit."""


def _barrier(w: Writer, op: Operation) -> None:
    w.line(w.t.barrier)


def _alloc_shared(w: Writer, op: egpu.AllocSharedOp) -> None:
    t = op.memref.type
    assert isinstance(t, MemRefType)
    name = w.declare(op.memref, op.memref.name_hint or "shared", buffer=True)
    count = math.prod(t.get_shape())
    w.line(device(w).shared_decl.format(t=w.ctype(t.get_element_type()), name=name, n=count))


def use_text(w: Writer, key: str, text: str) -> None:
    """Print `text` (helper functions) once, before the kernels."""
    if text and (key, "") not in w.helpers_used:
        w.helpers_used[(key, "")] = text


def _half_support(w: Writer) -> None:
    use_text(w, "half", device(w).half_support.format(p=w.t.helper_prefix))


def _load_extf(w: Writer, op: egpu.LoadExtfOp) -> Expr:
    if bfloat16.is_bf16_buffer(op.memref.type):
        return bfloat16.load_extf(w, op)
    _half_support(w)
    index = w.flat_values(op.memref, op.indices)
    fmt = device(w).load_extf
    return Expr(fmt.format(buf=w.value(op.memref).text, i=index.text))


def narrow_lane_conversion(w: Writer, source: Attribute, result: Attribute) -> str | None:
    """C++ device languages whose 16-bit floats are `unsigned short` storage (CUDA, HIP):
    one lane's conversion, as `egpu.load_extf`/`store_truncf` convert (exact widening,
    round to nearest even)."""
    if (source, result) in ((f16, f32), (f32, f16)) and device(w).half_support:  # else a native half: a cast
        _half_support(w)
        return "einc_half_to_float" if source == f16 else "einc_float_to_half"
    if (source, result) in ((bf16, f32), (f32, bf16)):
        bfloat16.use_helpers(w)
        return "einc_bf16_to_f32" if source == bf16 else "einc_f32_to_bf16"
    return None


def _store_truncf(w: Writer, op: egpu.StoreTruncfOp) -> None:
    if bfloat16.is_bf16_buffer(op.memref.type):
        return bfloat16.store_truncf(w, op)
    _half_support(w)
    index = w.flat_values(op.memref, op.indices)
    fmt = device(w).store_truncf
    w.line(fmt.format(v=w.value(op.value).text, buf=w.value(op.memref).text, i=index.text) + ";")


def _round(w: Writer, op: egpu.RoundOp) -> Expr:
    if op.as_type == bf16 and op.result.type == f32:
        return bfloat16.round_bf16(w, op)
    if op.as_type != f16 or op.result.type != f32:
        raise InternalCompilerError(f"{w.t.name} target: cannot round {op.result.type} to {op.as_type}")
    _half_support(w)
    body = device(w).round_f16
    use_text(w, "round_f16", f"{w.t.helper_prefix} float einc_round_f16(float a) {{ {body} }}")
    return Expr(f"einc_round_f16({w.value(op.value).text})")


def _subgroup_reduce(w: Writer, op: egpu.SubgroupReduceOp) -> Expr:
    target = device(w)
    t = w.ctype(op.result.type)
    kind = op.kind.data
    fmt = target.subgroup_reduce.get(kind)
    if fmt is None:
        raise InternalCompilerError(f"{w.t.name} target: no subgroup {kind} reduction")
    if op.cluster_size is not None and not target.subgroup_clusters:
        raise InternalCompilerError(f"{w.t.name} target: no clustered subgroup reductions (egpu.subgroup_reduce cluster)")
    # max/min as arith.maximumf / minimumf (the `maximumf` helper's body): NaN from either
    # operand, -0 below +0; integers compare plainly
    float_max = "(a != a || b != b) ? a + b : ((a == 0) & (b == 0)) ? a + b : a > b ? a : b"
    float_min = "(a != a || b != b) ? a + b : ((a == 0) & (b == 0)) ? -(-a - b) : a < b ? a : b"
    floats = isinstance(op.result.type, AnyFloat)
    combine = {egpu.ReduceKind.ADD: "a + b", egpu.ReduceKind.MUL: "a * b",
               egpu.ReduceKind.MAX: float_max if floats else "a > b ? a : b",
               egpu.ReduceKind.MIN: float_min if floats else "a < b ? a : b"}[kind]  # fmt: skip
    suffix = w.suffix(op.result.type)
    helper = target.subgroup_helper
    use_text(w, f"subgroup_{kind}_{suffix}", helper.format(
        p=w.t.helper_prefix, t=t, kind=kind, s=suffix, combine=combine))  # fmt: skip
    lanes = str(op.cluster_size.value.data) if op.cluster_size is not None else target.subgroup_lanes
    return Expr(fmt.format(w.value(op.value).text, t=t, kind=kind, s=suffix, n=lanes))


class TargetRuntime(Protocol):
    """What a device target asks of its runtime module (einc/runtime/<module>.py) besides
    loading kernels: whether its toolchain is here, and the compiler's identity for records."""

    def toolchain_check(self) -> tuple[bool, str]: ...

    def toolchain_identity(self) -> tuple[str, str]: ...


ALIGNED_VECTOR_HELPERS: Mapping[str, str] = {
    "vloada": "{P} {T} einc_vloada_{s}x{n}(const {t}* a) {{ "
    "struct __attribute__((aligned({n} * sizeof({t})))) A {{ {t} v[{n}]; }}; "
    "A x = *(const A*)a; {T} r; for (int k = 0; k < {n}; k++) {lane_r} = x.v[k]; return r; }}",
    "vstorea": "{P} void einc_vstorea_{s}x{n}({t}* a, {T} v) {{ "
    "struct __attribute__((aligned({n} * sizeof({t})))) A {{ {t} v[{n}]; }}; "
    "A x; for (int k = 0; k < {n}; k++) x.v[k] = v.v[k]; *(A*)a = x; }}",
}
"""C++ device languages (CUDA, HIP, SYCL): a vector access of an address aligned to the
vector (`egpu.align`) through a struct of that alignment, which the compiler reads or writes
with one wide access (`ld.global.v4.f32` / `st.global.v4.f32` for 4 floats on NVIDIA)."""


class DeviceTarget(CLikeTarget):
    """A C-like device language: kernels, work-item indices, a launch manifest."""

    sketches: ClassVar[str] = "gpu"

    kernel_prefix: ClassVar[str] = "__kernel "
    index_type: ClassVar[str] = "long"
    work_item_index_32: ClassVar[Mapping[str, str]] = {}
    """`work_item_index` in a kernel whose indices are 32-bit (`egpu.index_bits`); a missing
    key is the 64-bit spelling cast to the 32-bit type."""
    shared_decl: ClassVar[str] = "__local {t} {name}[{n}];"
    load_extf: ClassVar[str] = "vload_half({i}, {buf})"
    store_truncf: ClassVar[str] = "vstore_half({v}, {i}, {buf})"
    round_f16: ClassVar[str] = "return a;"
    """Body of `float einc_round_f16(float a)`: `a` rounded to the nearest half."""
    half_support: ClassVar[str] = ""
    """Helpers the half loads, stores and rounding use (`{p}`: the helper prefix)."""
    subgroup_reduce: ClassVar[Mapping[egpu.ReduceKind, str]] = {}
    """Subgroup reductions by kind: `{0}` the value, `{t}` its type, `{kind}`, `{s}` the
    type suffix (`f32`) of a helper from `subgroup_helper`, `{n}` the lanes reduced together
    (the op's cluster size, else `subgroup_lanes`)."""
    subgroup_clusters: ClassVar[bool] = False
    """Whether `subgroup_reduce` reduces clusters (`egpu.subgroup_reduce ... cluster N`)."""
    subgroup_lanes: ClassVar[str] = ""
    """The subgroup's size as the language spells it (`{n}` of a whole-subgroup reduction)."""
    subgroup_helper: ClassVar[str] = ""
    """A helper function per kind and type the reductions call (`{p}` prefix, `{t}` type,
    `{kind}`, `{s}`, `{combine}` an expression of `a` and `b`)."""

    statement_printers: ClassVar[Mapping[type[Operation], Callable[[Writer, Operation], None]]] = {
        egpu.ReturnOp: _return,
        egpu.BarrierOp: _barrier,
        egpu.AllocSharedOp: statement(egpu.AllocSharedOp, _alloc_shared),
        egpu.StoreTruncfOp: statement(egpu.StoreTruncfOp, _store_truncf),
    }
    expression_printers: ClassVar[Mapping[type[Operation], Callable[[Writer, Operation], Expr]]] = {
        **{op: expression(egpu.IndexOp, index_expression) for op in (
            egpu.BlockIdOp, egpu.ThreadIdOp, egpu.GlobalIdOp, egpu.BlockDimOp, egpu.GridDimOp,
        )},  # fmt: skip
        egpu.LoadExtfOp: expression(egpu.LoadExtfOp, _load_extf),
        egpu.RoundOp: expression(egpu.RoundOp, _round),
        egpu.SubgroupReduceOp: expression(egpu.SubgroupReduceOp, _subgroup_reduce),
    }
    memory_ops = (egpu.BarrierOp, egpu.StoreTruncfOp, egpu.VStoreOp, egpu.SubgroupReduceOp, egpu.MmaOp)

    # vectors: C++ device languages (CUDA, HIP, SYCL, Poplar) get a struct of lanes and
    # lane-wise helpers (CUDA's float4 has no operators); OpenCL and HLSL use native types
    vector_typedef: ClassVar[str] = "struct {T} {{ {t} v[{n}]; }};"
    vector_lane: ClassVar[str] = "{v}.v[{k}]"
    vector_operators: ClassVar[frozenset[type[Operation]]] = frozenset()
    vector_load: ClassVar[str] = "{T}{{{{{lanes}}}}}"
    vector_store: ClassVar[str] = ""
    vector_broadcast: ClassVar[str] = "einc_vbroadcast_{s}x{n}({0})"
    vector_literal: ClassVar[str] = ""
    vector_convert: ClassVar[str] = ""

    @classmethod
    def vector_lanes(cls) -> int:
        return cls.description().vector_width

    limits: ClassVar[TargetDescription]
    """The device's limits and dtypes: every device target has them."""

    needs_toolchain: ClassVar[bool] = True

    @classmethod
    def runtime(cls) -> TargetRuntime:
        """The target's runtime module, imported when first asked (its toolchain may be
        absent): each device target names its own."""
        raise InternalCompilerError(f"the {cls.name} target names no runtime module")

    @classmethod
    def toolchain_check(cls) -> tuple[bool, str]:
        return cls.runtime().toolchain_check()

    @classmethod
    def toolchain_identity(cls, cflags: Sequence[str] = ()) -> tuple[str, str]:
        return cls.runtime().toolchain_identity()

    @classmethod
    def cannot_run(cls) -> str | None:
        """Why not, from the target's toolchain check."""
        check = cls.toolchain_check()
        return None if check is None or check[0] else check[1]

    @classmethod
    def description(cls) -> TargetDescription:
        return cls.limits

    @classmethod
    def top_level(cls, w: Writer, op: Operation) -> None:
        if isinstance(op, egpu.FuncOp):
            w.function(op)  # type: ignore[arg-type]
        elif isinstance(op, func.FuncOp):
            cls.host(w, op)
        else:
            raise InternalCompilerError(f"{cls.name} target: cannot print top-level {op.name}")

    @classmethod
    def host(cls, w: Writer, op: func.FuncOp) -> None:
        """The host function prints nothing (the manifest describes it)."""

    @classmethod
    def manifest(cls, module: ModuleOp) -> LaunchManifest:
        """The launches of a module after `pipeline`; TargetError if one breaks a limit."""
        from einc.transforms.staging import staged_location

        buffers = host_buffers(module)
        names = {id(value): b.name for value, b in buffers}
        declared = [b.name for _, b in buffers]
        if len(set(declared)) != len(declared):  # the passes name every buffer once
            twice = sorted({n for n in declared if declared.count(n) > 1})
            raise InternalCompilerError.wrap(
                AssertionError(f"the {cls.name} host function names buffer(s) {', '.join(twice)} twice"), "target"
            )
        kernels_by_name = {k.sym_name.data: k for k in module.ops if isinstance(k, egpu.FuncOp)}
        desc = cls.description()
        launches = []
        aligns: dict[str, int] = {}
        for launch in host_function(module).walk():
            if not isinstance(launch, egpu.LaunchOp):
                continue
            kernel = kernels_by_name[launch.callee.string_value()]
            shared = kernel.shared_bytes()
            local = kernel.private_bytes()
            loc = staged_location(kernel) if local > desc.private_memory else None
            desc.check_launch(kernel.sym_name.data, kernel.grid_size, kernel.block_size, shared, local, loc,
                              kernel.written_tensor(), kernel.location)
            launches.append(KernelLaunch(  # work-group memory is static: no shared_bytes
                kernel.sym_name.data, tuple(names[id(b)] for b in launch.buffers),
                kernel.grid_size, kernel.block_size,
            ))  # fmt: skip
            for k, attrs in enumerate(kernel.arg_attrs.data if kernel.arg_attrs is not None else ()):
                align = attrs.data.get(ALIGN_ATTR)
                if isinstance(align, IntegerAttr) and k < len(launch.buffers):
                    name = names[id(launch.buffers[k])]
                    aligns[name] = max(aligns.get(name, 0), align.value.data)
        declared_buffers = tuple(
            dataclasses.replace(b, align=aligns[b.name]) if b.name in aligns else b for _, b in buffers
        )  # the launch contract: what the kernels' vector accesses assume
        return LaunchManifest(cls.name, declared_buffers, tuple(launches))

    @classmethod
    def build(cls, source: str, module: ModuleOp) -> Runner:
        """The kernels of `source` loaded with the target's runtime (`load`), launched as the
        module's manifest says."""
        try:
            return cls.load(source, cls.manifest(module))
        except ToolchainError as err:
            name = getattr(err, "kernel", None)  # a device compiler's crash on one kernel (CompilerCrash)
            kernel = next((k for k in module.ops if isinstance(k, egpu.FuncOp) and k.sym_name.data == name), None)
            if err.loc is None and kernel is not None:
                err.loc, notes = at_op(kernel.location)
                err.notes = (*notes, *err.notes)
            raise

    @classmethod
    def load(cls, source: str, manifest: LaunchManifest) -> Runner:
        """A runner of the kernels of `source` (emitted from a lowered module whose launches
        `manifest` describes), built by the target's runtime; the tuner's runner loads a
        candidate this way without compiling it again."""
        raise RuntimeMissingError(f"the {cls.name} target has no runtime on this machine")

    @classmethod
    def emit(cls, module: ModuleOp) -> str:
        cls.manifest(module)  # refuse impossible launches before printing anything
        return super().emit(module)


__all__ = ["DeviceTarget", "device", "host_buffers", "host_function", "numpy_dtype"]
