"""The Poplar target: one `poplar::MultiVertex` codelet class per kernel, and the host-side
graph description (`einc_build_graph`) that connects and launches them.

    class kernel_y_1f3a9c2e : public poplar::MultiVertex {   // vertex type: name + IR digest
    public:
      poplar::Input<poplar::Vector<float>> x;
      poplar::InOut<poplar::Vector<float>> y;
      bool compute(unsigned workerId) {
        for (int gid = workerId; gid < 64; gid += 6) { ... }
        return true;
      }
    };
    #ifdef EINC_POPLAR_HOST
    EINC_POPLAR_VERTEX(kernel_y_1f3a9c2e, x, y)
    void einc_build_graph(poplar::Graph &graph, const std::vector<poplar::Tensor> &buffers,
                          poplar::program::Sequence &prog) { ... one compute set per kernel ... }
    #endif

A kernel's launch is one vertex of the tile's six workers (the description allows a block
of at most 6 and a grid of 1; `convert-affine-to-egpu` strides larger spaces over them);
workers beyond the launch's block return at once. Buffers are whole flattened tensors on
tile 0, the vertex too: a kernel writes only its own output elements, so the vertex's
workers never write one element twice. The IPU has no float64: such programs are refused.
"""

from __future__ import annotations

import hashlib
from typing import ClassVar

from xdsl.dialects import affine, func, memref
from xdsl.dialects.builtin import IndexType, ModuleOp, StringAttr, f16, f32, i1, i8, i16, i32, i64
from xdsl.ir import Operation, SSAValue

from einc.dialects import egpu
from einc.targets.clike import _Writer, c_identifier  # pyright: ignore[reportPrivateUsage]
from einc.targets.gpu import DeviceTarget, Runner, host_buffers

_READS = (affine.LoadOp, memref.LoadOp, egpu.LoadExtfOp, egpu.VLoadOp)
_WRITES = (affine.StoreOp, memref.StoreOp, egpu.StoreTruncfOp, egpu.VStoreOp)


def vertex_type(kernel: egpu.FuncOp) -> str:
    """The codelet class of a kernel: its name and a digest of its IR. Vertex types are
    global in a Poplar graph (and in the process running einc's mirror), so two programs'
    `kernel_output0` must not share one."""
    digest = hashlib.sha1(str(kernel).encode()).hexdigest()[:8]
    return f"{kernel.sym_name.data}_{digest}"


def _field_kind(arg: SSAValue) -> str:
    written = any(isinstance(u.operation, _WRITES) and u.index == 1 for u in arg.uses)
    read = any(isinstance(u.operation, _READS) for u in arg.uses)
    if written:
        return "InOut" if read else "Output"
    return "Input"


class PoplarTarget(DeviceTarget):
    name: ClassVar[str] = "poplar"
    pipeline: ClassVar[str] = (
        "convert-ein-to-affine,legalize-f16-for-c,convert-affine-to-egpu{target=poplar},"
        "legalize-storage-dtypes{target=poplar},einc-vectorize-loops{target=poplar},canonicalize,cse"
    )
    includes: ClassVar[tuple[str, ...]] = ("poplar/Vertex.hpp", "cmath")
    index_type: ClassVar[str] = "int"
    helper_prefix: ClassVar[str] = "static inline"
    reserved_words = frozenset({"workerId", "compute", "poplar", "half", "buffers", "graph", "prog"})
    work_item_index = {
        "global_id.x": "(int)workerId", "thread_id.x": "(int)workerId", "block_id.x": "0",
    }  # fmt: skip
    types = {
        f32: "float", f16: "half", i64: "long long", i32: "int", i16: "short",
        i8: "signed char", i1: "bool", IndexType(): "int",
    }  # fmt: skip
    unsigned_types = {
        i64: "unsigned long long", i32: "unsigned", i16: "unsigned short", i8: "unsigned char",
        i1: "bool", IndexType(): "unsigned",
    }  # fmt: skip
    math_suffix = {f32: "f"}
    literal_cast = {f16: "(half)"}
    literal_names = {
        "INT64_MIN": "(-9223372036854775807LL - 1)", "INT64_MAX": "9223372036854775807LL",
        "INT32_MIN": "(-2147483647 - 1)", "INT32_MAX": "2147483647",
        "INT16_MIN": "(-32767 - 1)", "INT16_MAX": "32767", "INT8_MIN": "(-127 - 1)",
    }  # fmt: skip

    @classmethod
    def top_level(cls, w: _Writer, op: Operation) -> None:
        if isinstance(op, func.FuncOp):
            return  # the host part is printed after the last codelet
        if not isinstance(op, egpu.FuncOp):
            super().top_level(w, op)
            return
        cls.codelet(w, op)
        if op.next_op is None:
            module = op.parent_op()
            assert isinstance(module, ModuleOp)
            cls.graph(w, module)

    @classmethod
    def codelet(cls, w: _Writer, kernel: egpu.FuncOp) -> None:
        if w.lines:
            w.line("")
        attrs = kernel.arg_attrs.data if kernel.arg_attrs is not None else ()
        w.buffer_names = {
            c_identifier(name.data)
            for a in attrs
            if isinstance(name := a.data.get("ein.name"), StringAttr)
        }
        w.scopes.append(set())
        fields = []
        for k, arg in enumerate(kernel.body.block.args):
            hint = attrs[k].data.get("ein.name") if k < len(attrs) else None
            name = w.declare(arg, getattr(hint, "data", None), buffer=True)
            element = w.ctype(arg.type.get_element_type())  # type: ignore[union-attr]
            fields.append(f"poplar::{_field_kind(arg)}<poplar::Vector<{element}>> {name};")
        w.line(f"class {vertex_type(kernel)} : public poplar::MultiVertex {{")
        w.line("public:")
        w.depth += 1
        for field in fields:
            w.line(field)
        w.open("bool compute(unsigned workerId)")
        block = kernel.block_size[0]
        if block < 6:
            w.line(f"if (workerId >= {block}) return true;")
        w.block(kernel.body.block)
        w.line("return true;")
        w.close()
        w.depth -= 1
        w.line("};")
        w.scopes.pop()

    @classmethod
    def graph(cls, w: _Writer, module: ModuleOp) -> None:
        """`einc_build_graph`: every buffer and vertex on tile 0, a compute set per kernel."""
        index = {id(value): k for k, (value, _) in enumerate(host_buffers(module))}
        kernels = {k.sym_name.data: k for k in module.ops if isinstance(k, egpu.FuncOp)}
        launches = [op for op in module.walk() if isinstance(op, egpu.LaunchOp)]
        w.line("")
        w.line("#ifdef EINC_POPLAR_HOST")
        w.line("#include <poplar/Graph.hpp>")
        w.line("#include <poplar/Program.hpp>")
        w.line("")
        for kernel in kernels.values():
            fields = ", ".join(w.names[a] for a in kernel.body.block.args)
            w.line(f"EINC_POPLAR_VERTEX({vertex_type(kernel)}, {fields})")
        w.line("")
        w.open(
            "void einc_build_graph(poplar::Graph &graph, const std::vector<poplar::Tensor> "
            "&buffers, poplar::program::Sequence &prog)"
        )
        w.line("for (const poplar::Tensor &buffer : buffers) graph.setTileMapping(buffer, 0);")
        for k, launch in enumerate(launches):
            name = launch.callee.string_value()
            kernel = kernels[name]
            edges = ", ".join(
                f'{{"{w.names[arg]}", buffers[{index[id(buffer)]}].flatten()}}'
                for arg, buffer in zip(kernel.body.block.args, launch.buffers)
            )
            w.line(f'poplar::ComputeSet cs{k} = graph.addComputeSet("{name}");')
            vertex = vertex_type(kernel)
            w.line(f'poplar::VertexRef v{k} = graph.addVertex(cs{k}, "{vertex}", {{{edges}}});')
            w.line(f"graph.setTileMapping(v{k}, 0);")
            w.line(f"prog.add(poplar::program::Execute(cs{k}));")
        w.close()
        w.line("#endif  // EINC_POPLAR_HOST")

    @classmethod
    def build(cls, source: str, module: ModuleOp) -> Runner:
        from einc.runtime.poplar import load_poplar_kernel

        return load_poplar_kernel(source, cls.manifest(module))


__all__ = ["PoplarTarget"]
