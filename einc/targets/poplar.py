"""The Poplar target: one `poplar::MultiVertex` codelet class per kernel (named by the kernel
and a digest of its IR), and the host-side graph description (`einc_build_graph`) that
connects and launches them, one compute set per kernel. A launch is one block of at most six
workers; loops bound to block / thread ids run in every worker (`_work_items`). How a kernel
spreads over tiles is decided by the `split-poplar-vertices` pass and read here from its
`#egpu.tile_split` attribute: this file only prints it (`split_vertices`). docs/POPLAR.md
has the design: codelet and graph layout, tiles, slices and tile memory.
"""

from __future__ import annotations

import dataclasses
import hashlib
import math
from collections.abc import Sequence
from typing import ClassVar

from xdsl.dialects import func, scf
from xdsl.dialects.builtin import (
    IndexType,
    MemRefType,
    ModuleOp,
    StringAttr,
    bf16,
    f16,
    f32,
    i1,
    i8,
    i16,
    i32,
    i64,
)
from xdsl.ir import Operation, SSAValue
from xdsl.ir.affine import AffineExpr, AffineMap

from einc.dialects import egpu
from einc.transforms.affine_index import dims_to_operands
from einc.transforms.vertex_boxes import clipped
from einc.transforms.vertex_split import READS, WRITES, point_loop, written
from einc.runtime.manifest import LaunchManifest
from einc.targets.c_lexicon import c_identifier
from einc.targets.bfloat16 import CXX_BF16
from einc.targets.descriptions import ALL_DTYPES, TargetDescription
from einc.targets.gpu import DeviceTarget, Runner, TargetRuntime, host_buffers
from einc.targets.gpu import index_expression as _device_index
from einc.targets.spelling import ADD, MUL, Expr
from einc.targets.writer import Writer

TILE_SPLIT = egpu.TileSplitAttr.name


def vertex_type(kernel: egpu.FuncOp) -> str:
    """The codelet class of a kernel: its name and a digest of its IR (without its tile
    split, which follows from the IR). Vertex types are global in a Poplar graph (and in the
    process running einc's mirror), so two programs' `kernel_output0` must not share one."""
    ir = kernel
    if TILE_SPLIT in kernel.attributes:
        ir = kernel.clone()
        del ir.attributes[TILE_SPLIT]
    digest = hashlib.sha1(str(ir).encode()).hexdigest()[:8]
    return f"{kernel.sym_name.data}_{digest}"


def _writes_narrow(kernel: egpu.FuncOp) -> bool:
    """Whether the kernel stores elements narrower than the IPU's 32-bit write granule into
    a buffer argument (two workers storing neighbouring bytes of one word would race)."""
    granule = PoplarTarget.limits.write_granule
    for arg in kernel.body.block.args:
        assert isinstance(arg.type, MemRefType)
        bits = max(arg.type.get_element_type().bitwidth, 8)  # type: ignore[attr-defined]
        if bits // 8 < granule and any(isinstance(u.operation, WRITES) and u.index == 1 for u in arg.uses):
            return True
    return False


def _work_items(kernel: egpu.FuncOp) -> tuple[int, int, int, dict[str, Expr]] | None:
    """How a kernel's launch runs in one MultiVertex when it is not the plain form (one
    block of at most six threads along x, thread `workerId`): None for the plain form, else
    (blocks, threads, workers, spellings). The blocks run one after another in every worker
    (`einc_block`), the block's threads are spread over `workers` workers (`einc_thread`;
    one worker, the threads in turn, when the kernel stores elements narrower than a 32-bit
    word, which two workers must not write at once), and `spellings` gives each work-item
    index (`"block_id.y"`, ...) from `einc_block` and `einc_thread`."""
    grid, block = kernel.grid_size, kernel.block_size
    blocks, threads = math.prod(grid), math.prod(block)
    serial = threads > 1 and _writes_narrow(kernel)
    if blocks == 1 and block[1] == block[2] == 1 and not serial:
        return None
    workers = 1 if serial else threads
    spellings: dict[str, Expr] = {}
    for level, sizes, var in (("block_id", grid, "einc_block"), ("thread_id", block, "einc_thread")):
        below = 1
        for dim, size in zip("xyz", sizes):
            if size == 1:
                text, prec = "0", None
            elif below == 1 and size == math.prod(sizes):
                text, prec = var, None
            elif below == 1:
                text, prec = f"{var} % {size}", MUL
            elif below * size == math.prod(sizes):
                text, prec = f"{var} / {below}", MUL
            else:
                text, prec = f"{var} / {below} % {size}", MUL
            spellings[f"{level}.{dim}"] = Expr(text) if prec is None else Expr(text, prec)
            below *= size
    for dim, size in zip("xyz", block):
        b, t = spellings[f"block_id.{dim}"], spellings[f"thread_id.{dim}"]
        spellings[f"global_id.{dim}"] = Expr(f"{b.operand(MUL)} * {size} + {t.operand(ADD + 1)}", ADD)
    return blocks, threads, workers, spellings


def _poplar_index(w: Writer, op: egpu.IndexOp) -> Expr:
    """A work-item index: the kernel's own spelling (`_work_items`), else the table's."""
    key = f"{op.name.removeprefix('egpu.')}.{op.dimension.value}"
    spellings = w.spellings if isinstance(w, _PoplarWriter) else {}
    return spellings[key] if key in spellings else _device_index(w, op)


def _field_kind(arg: SSAValue) -> str:
    written = any(isinstance(u.operation, WRITES) and u.index == 1 for u in arg.uses)
    read = any(isinstance(u.operation, READS) for u in arg.uses)
    if written:
        return "InOut" if read else "Output"
    return "Input"


def _linear(s: int, c: int, var: str) -> str:
    """`s * var + c` as C, without unit factors and zero terms."""
    text = var if s == 1 else f"{var} * {s}"
    return text if c == 0 else f"{text} + {c}" if c > 0 else f"{text} - {-c}"


def _linear_slice(
    first: Sequence[int], end: Sequence[int], begins: list[int], stops: list[int]
) -> tuple[str, str] | None:
    """`first[t]` and `end[t]` as C of vertex t's point range `begin`, `end` (first = s *
    begin + a, end = s * end + b), when they are such functions; else None."""
    if len(begins) < 2 or (first[1] - first[0]) % (begins[1] - begins[0]):
        return None
    s = (first[1] - first[0]) // (begins[1] - begins[0])
    a, b = first[0] - s * begins[0], end[0] - s * stops[0]
    if s < 0 or any(f != s * x + a for f, x in zip(first, begins)) or any(e != s * x + b for e, x in zip(end, stops)):
        return None
    if s == 0:
        return str(a), str(b)
    return _linear(s, a, "begin"), _linear(s, b, "end")


def tile_split(kernel: egpu.FuncOp) -> egpu.TileSplit | None:
    """The kernel's split over tiles, None for one vertex on tile 0. `split-poplar-vertices`
    decides it; a kernel without its attribute is a compiler bug (the pass did not run)."""
    attr = kernel.attributes.get(TILE_SPLIT)
    if not isinstance(attr, egpu.TileSplitAttr):
        raise AssertionError(
            f"poplar target: kernel {kernel.sym_name.data} has no {TILE_SPLIT} attribute "
            "(the split-poplar-vertices pass did not run)"
        )
    return attr.data if attr.data.split else None


def _shape(value: SSAValue) -> tuple[int, ...]:
    """A kernel argument's memref shape."""
    assert isinstance(value.type, MemRefType)
    return tuple(value.type.get_shape())


def _clipped(split: egpu.TileSplit, args: Sequence[SSAValue]) -> dict[int, list[int]]:
    """A box split's written boxes (register tiles) clipped at the tensor's end in some
    dimension (`vertex_boxes.clipped`): argument -> those dimensions."""
    found = {}
    for k, extent, lows in split.boxes:
        dims = clipped(extent, lows, _shape(args[k]))
        if dims:
            found[k] = dims
    return found


def _box_extent(split: egpu.TileSplit, args: Sequence[SSAValue], k: int, extent: Sequence[int], prefix: str) -> tuple[int | str, ...]:
    """Argument k's box extents as the codelet (`prefix` "einc_") or the host loop sees them:
    a dimension past the first that a vertex's box is clipped in is its own (a field)."""
    dims = _clipped(split, args).get(k, [])
    return tuple(f"{prefix}extent{k}_{d}" if d in dims and d > 0 else e for d, e in enumerate(extent))


def _plain_fields(split: egpu.TileSplit | None, args: Sequence[SSAValue]) -> list[str]:
    """A split kernel's vertex fields besides its edges: its point range and the first
    element of each slice (in boxes, the extent of each clipped box's dimension that a
    stride depends on)."""
    if split is None:
        return []
    if split.in_boxes:
        tiled = [i for i, (p, t) in enumerate(zip(split.shape, split.tile)) if t < p]
        extents = [e for k, extent, _ in split.boxes for e in _box_extent(split, args, k, extent, "einc_") if isinstance(e, str)]
        return ["einc_count", *(f"einc_{f}{i}" for i in tiled for f in ("first", "size")),
                *(f"einc_base{k}" for k in split.bases), *extents]  # fmt: skip
    return ["einc_begin", "einc_end", *(f"einc_base{k}" for k in split.bases)]


class _PoplarWriter(Writer):
    """Indexes a split kernel's written slices from their first element."""

    loop: scf.ForOp | None = None
    """The current kernel's point loop, when it is split."""
    bases: dict[SSAValue, str]
    spellings: dict[str, Expr]
    splits: dict[str, egpu.TileSplit | None]
    """Every kernel's split, by name (read once, before printing)."""

    split: egpu.TileSplit | None = None
    in_box: set[SSAValue]
    """A box split's written buffers, indexed by the point's place in its box."""
    box_extents: dict[SSAValue, tuple[int | str, ...]]
    """Each box-connected buffer's extents: a number, or the field of a clipped one."""

    def __init__(self, target: type[DeviceTarget]):
        super().__init__(target)
        self.in_box = set()
        self.box_extents = {}
        self.bases = {}
        self.spellings = {}
        self.splits = {}

    def statement(self, op: Operation) -> None:
        """The split point loop runs over the vertex's own points: its range, or the place
        `einc_q` of each point in its box (row-major), decoded into the point."""
        loop = self.loop
        if loop is None or op is not loop:
            super().statement(op)
            return
        step = loop.step.owner.value.value.data  # type: ignore[union-attr]
        split = self.split
        if split is None or not split.in_boxes:
            lower = Expr(f"einc_begin + {self.value(loop.lb).operand(ADD + 1)}", ADD)
            self.for_loop(loop.body.block.args[0], lower, Expr("einc_end"), step, loop.body.block)
            return
        self.scopes.append(set())
        self.open(f"for (int einc_q = {self.value(loop.lb).text}; einc_q < einc_count; einc_q += {step})")
        point = self.declare(loop.body.block.args[0])
        dims = list(zip(split.shape, split.tile))
        for i in reversed(range(len(dims))):
            size, tile = dims[i]
            first, extent = (f"einc_first{i}", f"einc_size{i}") if tile < size else ("", str(size))
            rest = "einc_q" if i == len(dims) - 1 else "einc_r"
            coordinate = rest if i == 0 else f"{rest} % {extent}"
            coordinate = f"{first} + {coordinate}" if first else coordinate
            stride = math.prod(split.shape[i + 1:])
            term = coordinate if stride == 1 else f"({coordinate}) * {stride}"
            self.line(f"int {point} = {term};" if i == len(dims) - 1 else f"{point} += {term};")
            if i > 0:
                self.line(f"int einc_r = einc_q / {extent};" if i == len(dims) - 1 else f"einc_r /= {extent};")
        self.block(loop.body.block)
        self.close()
        self.scopes.pop()

    def access(self, buffer: SSAValue, index: Expr) -> str:
        if buffer in self.in_box:
            return f"{self.value(buffer).text}[einc_q]"
        base = self.bases.get(buffer)
        if base is None:
            return super().access(buffer, index)
        return f"{self.value(buffer).text}[{index.operand(ADD)} - {base}]"

    def flat_affine(self, buffer: SSAValue, m: AffineMap, operands: Sequence[SSAValue]) -> Expr:
        """A box-connected buffer is indexed row-major in its box (less its base)."""
        extent = self.box_extents.get(buffer)
        if extent is None:
            return super().flat_affine(buffer, m, operands)
        m = dims_to_operands(m)
        strides = _box_strides(extent)
        flat: AffineExpr = AffineExpr.constant(0)
        constant = [x for x in strides if isinstance(x, int)]
        if len(constant) == len(strides):
            for result, stride in zip(m.results, constant):
                flat = flat + result * stride
            return self.affine_expr(flat, operands)
        terms = []
        for result, stride in zip(m.results, strides):
            e = self.affine_expr(result, operands)
            terms.append(e if stride == 1 else Expr(f"{e.operand(MUL)} * {stride}", MUL))
        return Expr(" + ".join(t.operand(ADD + 1) for t in terms), ADD)

    def flat_values(self, buffer: SSAValue, indices: Sequence[SSAValue]) -> Expr:
        extent = self.box_extents.get(buffer)
        if extent is None:
            return super().flat_values(buffer, indices)
        terms = [
            Expr(f"{self.value(i).operand(MUL)} * {stride}", MUL) if stride != 1 else self.value(i)
            for i, stride in zip(indices, _box_strides(extent))
        ]
        return Expr(" + ".join(t.operand(ADD + 1) for t in terms), ADD) if terms else Expr("0")


def _reshape(buffer: SSAValue, arg: SSAValue) -> str:
    """`.reshape({...})` to the kernel argument's shape where the buffer's differs."""
    have, want = buffer.type, arg.type
    assert isinstance(have, MemRefType) and isinstance(want, MemRefType)
    if have.get_shape() == want.get_shape():
        return ""
    return f".reshape({{{', '.join(str(n) for n in want.get_shape())}}})"


def _box_strides(extent: Sequence[int | str]) -> list[int | str]:
    """Row-major strides of a box; a stride over a clipped extent (a name) is a product."""
    strides: list[int | str] = []
    for d in range(len(extent)):
        rest = extent[d + 1:]
        number = math.prod(e for e in rest if isinstance(e, int))
        names = [e for e in rest if isinstance(e, str)]
        strides.append(" * ".join([*names, *([str(number)] if number != 1 else [])]) if names else number)
    return strides


class PoplarTarget(DeviceTarget):
    name: ClassVar[str] = "poplar"
    lexer: ClassVar[str] = "cpp"
    pipeline: ClassVar[str] = (
        "legalize-f16-for-c,einc-widen-narrow-buffers{target=poplar},legalize-float-to-int,"
        "einc-init-accumulators,convert-affine-to-egpu{target=poplar},"
        "legalize-storage-dtypes{target=poplar},legalize-bf16-storage,einc-unswitch,einc-vectorize-loops{target=poplar},canonicalize,cse,"
        "split-poplar-vertices"
    )
    limits = TargetDescription(
        "poplar", max_threads_per_block=6, max_block=(6, 6, 6),
        max_grid=(1, 1, 1), shared_bytes_per_block=0,
        subgroup_size=1, vector_width=2, default_block=6,
        storage_dtypes=ALL_DTYPES - {"float64"},
        arith_dtypes=ALL_DTYPES - {"float64", "float16"}, write_granule=4, tiles=1472,
        tile_memory=624 * 1024, dtype_notes=(("float64", "the IPU has no double precision"),),
    )  # fmt: skip
    includes: ClassVar[tuple[str, ...]] = ("poplar/Vertex.hpp", "cmath")
    index_type: ClassVar[str] = "int"
    private_array: ClassVar[str] = "{t} {name}[{n}];"
    """A local array of compute() is on the worker's own stack (one copy per worker, counted
    in the vertex's tile memory by `vertex_bytes`)."""
    helper_prefix: ClassVar[str] = "static inline"
    reserved_words = frozenset({
        "workerId", "compute", "poplar", "half", "buffers", "graph", "prog", "einc_block",
        "einc_thread", "einc_begin", "einc_end", "einc_q", "einc_r", "einc_count",
    })  # fmt: skip
    work_item_index = {
        "global_id.x": "(int)workerId", "thread_id.x": "(int)workerId", "block_id.x": "0",
    }  # fmt: skip
    types = {
        f32: "float", f16: "half", bf16: "unsigned short", i64: "long long", i32: "int", i16: "short",
        i8: "signed char", i1: "bool", IndexType(): "int",
    }  # fmt: skip
    unsigned_types = {
        i64: "unsigned long long", i32: "unsigned", i16: "unsigned short", i8: "unsigned char",
        i1: "bool", IndexType(): "unsigned",
    }  # fmt: skip
    math_suffix = {f32: "f"}
    bf16_spelling = CXX_BF16
    literal_cast = {f16: "(half)"}
    literal_names = {
        "INT64_MIN": "(-9223372036854775807LL - 1)", "INT64_MAX": "9223372036854775807LL",
        "INT32_MIN": "(-2147483647 - 1)", "INT32_MAX": "2147483647",
        "INT16_MIN": "(-32767 - 1)", "INT16_MAX": "32767", "INT8_MIN": "(-127 - 1)",
    }  # fmt: skip

    expression_printers = {
        **DeviceTarget.expression_printers,
        **{op: _poplar_index for op in (egpu.BlockIdOp, egpu.ThreadIdOp, egpu.GlobalIdOp)},
    }  # type: ignore[assignment]

    @classmethod
    def description(cls) -> TargetDescription:
        """The Poplar description, except that a launch may have any grid: a kernel's
        blocks (from loops a schedule bound to block ids) run one after another in its
        vertex. The mapping pass reads `PoplarTarget.limits` itself, whose grid of one
        block keeps the unscheduled mapping a single point loop that `split-poplar-vertices`
        spreads over tiles."""
        return dataclasses.replace(cls.limits, max_grid=(2**31 - 1,) * 3)

    @classmethod
    def top_level(cls, w: Writer, op: Operation) -> None:
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
    def codelet(cls, w: Writer, kernel: egpu.FuncOp) -> None:
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
        split = w.splits[kernel.sym_name.data] if isinstance(w, _PoplarWriter) else tile_split(kernel)
        if isinstance(w, _PoplarWriter):
            w.loop = point_loop(kernel) if split is not None else None
            w.bases = {}
            w.split, w.in_box, w.box_extents = split, set(), {}
            if split is not None:
                args = kernel.body.block.args
                w.bases = {args[k]: f"einc_base{k}" for k in split.bases}
                if split.in_boxes:
                    w.in_box = {args[k] for k, _, _ in split.written}
                    w.box_extents = {args[k]: _box_extent(split, args, k, extent, "einc_") for k, extent, _ in split.boxes}
        fields += [f"int {field};" for field in _plain_fields(split, kernel.body.block.args)]
        w.line(f"class {vertex_type(kernel)} : public poplar::MultiVertex {{")
        w.line("public:")
        w.depth += 1
        for field in fields:
            w.line(field)
        w.open("bool compute(unsigned workerId)")
        work = _work_items(kernel)
        if work is None:
            block = kernel.block_size[0]
            if block < 6:
                w.line(f"if (workerId >= {block}) return true;")
            w.block(kernel.body.block)
        else:
            blocks, threads, workers, spellings = work
            if isinstance(w, _PoplarWriter):
                w.spellings = spellings
            if workers < 6:
                w.line(f"if (workerId >= {workers}) return true;")
            depth = w.depth
            if blocks > 1:
                w.open(f"for (int einc_block = 0; einc_block < {blocks}; ++einc_block)")
            if workers < threads:
                w.open(f"for (int einc_thread = 0; einc_thread < {threads}; ++einc_thread)")
            elif threads > 1:
                w.line("int einc_thread = (int)workerId;")
            w.block(kernel.body.block)
            while w.depth > depth:
                w.close()
        w.line("return true;")
        w.close()
        w.depth -= 1
        w.line("};")
        w.scopes.pop()
        if isinstance(w, _PoplarWriter):
            w.loop = None
            w.split, w.in_box, w.box_extents = None, set(), {}
            w.bases = {}
            w.spellings = {}

    @classmethod
    def graph(cls, w: Writer, module: ModuleOp) -> None:
        """`einc_build_graph`: every buffer on tile 0, then a compute set per kernel with one
        vertex on tile 0, or one vertex per tile for a split kernel, its written slices
        mapped to its tile."""
        index = {id(value): k for k, (value, _) in enumerate(host_buffers(module))}
        kernels = {k.sym_name.data: k for k in module.ops if isinstance(k, egpu.FuncOp)}
        launches = [op for op in module.walk() if isinstance(op, egpu.LaunchOp)]
        splits = w.splits if isinstance(w, _PoplarWriter) else {n: tile_split(k) for n, k in kernels.items()}
        w.line("")
        w.line("#ifdef EINC_POPLAR_HOST")
        w.line("#include <algorithm>")
        w.line("#include <poplar/Graph.hpp>")
        w.line("#include <poplar/Program.hpp>")
        w.line("")
        for name, kernel in kernels.items():
            fields = [w.names[a] for a in kernel.body.block.args] + _plain_fields(splits[name], kernel.body.block.args)
            w.line(f"EINC_POPLAR_VERTEX({vertex_type(kernel)}, {', '.join(fields)})")
        w.line("")
        w.open(
            "void einc_build_graph(poplar::Graph &graph, const std::vector<poplar::Tensor> "
            "&buffers, poplar::program::Sequence &prog)"
        )
        w.line("for (const poplar::Tensor &buffer : buffers) graph.setTileMapping(buffer, 0);")
        for k, launch in enumerate(launches):
            name = launch.callee.string_value()
            kernel, split = kernels[name], splits[name]
            args = kernel.body.block.args
            tensors = {
                pos: f"buffers[{index[id(buffer)]}].flatten()"
                for pos, buffer in enumerate(launch.buffers)
            }
            w.line(f'poplar::ComputeSet cs{k} = graph.addComputeSet("{name}");')
            vertex = vertex_type(kernel)
            if split is None:
                edges = ", ".join(f'{{"{w.names[a]}", {tensors[p]}}}' for p, a in enumerate(args))
                w.line(f'poplar::VertexRef v{k} = graph.addVertex(cs{k}, "{vertex}", {{{edges}}});')
                w.line(f"graph.setTileMapping(v{k}, 0);")
            elif split.in_boxes:
                shaped = {
                    pos: f"buffers[{index[id(buffer)]}]" + _reshape(buffer, args[pos])
                    for pos, buffer in enumerate(launch.buffers)
                }
                cls.box_vertices(w, k, vertex, split, [w.names[a] for a in args], tensors, shaped, args)
            else:
                cls.split_vertices(w, k, vertex, split, [w.names[a] for a in args], tensors, args)
            w.line(f"prog.add(poplar::program::Execute(cs{k}));")
        w.close()
        w.line("#endif  // EINC_POPLAR_HOST")

    @staticmethod
    def split_vertices(
        w: Writer, k: int, vertex: str, split: egpu.TileSplit, fields: list[str],
        tensors: dict[int, str], args: Sequence[SSAValue],
    ) -> None:  # fmt: skip
        """The loop adding compute set `cs<k>`'s vertices, one per tile: written slices
        at s * point + c, slices from `split.read` (a linear function of the range when it
        is one, else a table per vertex; a written one, a register tile per point, mapped
        to its vertex's tile like the others written)."""
        firsts: dict[int, str] = {pos: _linear(s, c, "begin") for pos, s, c in split.written}
        ends: dict[int, str] = {pos: _linear(s, c + 1 - s, "end") for pos, s, c in split.written}
        begins = [t * split.chunk for t in range(split.vertices)]
        stops = [min(b + split.chunk, split.points) for b in begins]
        for pos, first, end in split.read:
            linear = _linear_slice(first, end, begins, stops)
            if linear is not None:
                firsts[pos], ends[pos] = linear
                continue
            for name, values in (("first", first), ("end", end)):
                table = ", ".join(str(x) for x in values)
                w.line(f"static const unsigned einc_{name}{k}_{pos}[{split.vertices}] = {{{table}}};")
            firsts[pos], ends[pos] = f"einc_first{k}_{pos}[tile]", f"einc_end{k}_{pos}[tile]"
        slices = {pos: f"{tensors[pos]}.slice({firsts[pos]}, {ends[pos]})" for pos in firsts}
        w.open(f"for (unsigned tile = 0; tile < {split.vertices}; ++tile)")
        w.line(f"unsigned begin = tile * {split.chunk}, end = std::min(begin + {split.chunk}u, {split.points}u);")
        edges = ", ".join(
            f'{{"{name}", {slices.get(pos, tensors[pos])}}}' for pos, name in enumerate(fields)
        )
        w.line(f'poplar::VertexRef v = graph.addVertex(cs{k}, "{vertex}", {{{edges}}});')
        w.line('graph.setInitialValue(v["einc_begin"], begin);')
        w.line('graph.setInitialValue(v["einc_end"], end);')
        for pos in split.bases:
            w.line(f'graph.setInitialValue(v["einc_base{pos}"], {firsts[pos]});')
        w.line("graph.setTileMapping(v, tile);")
        for pos in [*(pos for pos, _, _ in split.written), *(pos for pos, _, _ in split.read if written(args[pos]))]:
            w.line(f"graph.setTileMapping({slices[pos]}, tile);")
        w.close()

    @staticmethod
    def box_vertices(
        w: Writer, k: int, vertex: str, split: egpu.TileSplit, fields: list[str],
        tensors: dict[int, str], shaped: dict[int, str], args: Sequence[SSAValue],
    ) -> None:  # fmt: skip
        """The loop adding compute set `cs<k>`'s vertices of a box split, one per tile: the
        tile's box of points (`first<i>`, `size<i>` per cut dimension), that box of each
        written buffer, and each read box (its low corner from a table per vertex where the
        box is not the whole dimension; a written one, register tiles of outputs, mapped to
        the tile)."""
        tiled = [i for i, (p, t) in enumerate(zip(split.shape, split.tile)) if t < p]
        lows: dict[tuple[int, int], str] = {}
        for pos, _, corner in split.boxes:
            for d, low in enumerate(corner):
                if low:
                    w.line(f"static const unsigned einc_low{k}_{pos}_{d}[{split.vertices}] = {{{', '.join(map(str, low))}}};")
                    lows[pos, d] = f"einc_low{k}_{pos}_{d}[tile]"
        w.open(f"for (unsigned tile = 0; tile < {split.vertices}; ++tile)")
        grid = split.grid
        for i in tiled:
            below = math.prod(grid[i + 1:])
            g = "tile" if below == 1 else f"tile / {below}"
            g = g if i == 0 else f"{g} % {grid[i]}"
            w.line(f"unsigned first{i} = {g} * {split.tile[i]}, size{i} = std::min({split.tile[i]}u, {split.shape[i]}u - first{i});")

        def box(lo: list[str], hi: list[str]) -> str:
            return f".slice({{{', '.join(lo)}}}, {{{', '.join(hi)}}}).flatten()"

        points_lo = [f"first{i}" if i in tiled else "0" for i in range(len(split.shape))]
        points_hi = [f"first{i} + size{i}" if i in tiled else str(n) for i, n in enumerate(split.shape)]
        edges: dict[int, str] = {pos: shaped[pos] + box(points_lo, points_hi) for pos, _, _ in split.written}
        bases: dict[int, str] = {}
        clipped_boxes = _clipped(split, args)
        for pos, extent, corner in split.boxes:
            lo = [lows.get((pos, d), "0") for d in range(len(extent))]
            hi = [f"{lo[d]} + {e}" if (pos, d) in lows else str(e) for d, e in enumerate(extent)]
            sizes = _shape(args[pos])
            for d in clipped_boxes.get(pos, []):  # the last box clipped to the tensor
                hi[d] = f"std::min({lo[d]} + {extent[d]}u, {sizes[d]}u)"
                if d > 0:
                    w.line(f"unsigned extent{pos}_{d} = {hi[d]} - {lo[d]};")
            edges[pos] = shaped[pos] + box(lo, hi)
            terms = [f"{lo[d]} * {stride}" if stride != 1 else lo[d]
                     for d, stride in enumerate(_box_strides(_box_extent(split, args, pos, extent, ""))) if (pos, d) in lows]  # fmt: skip
            bases[pos] = " + ".join(terms) or "0"
        listed = ", ".join(f'{{"{name}", {edges.get(pos, tensors[pos])}}}' for pos, name in enumerate(fields))
        w.line(f'poplar::VertexRef v = graph.addVertex(cs{k}, "{vertex}", {{{listed}}});')
        count = " * ".join(f"size{i}" if i in tiled else str(n) for i, n in enumerate(split.shape))
        w.line(f'graph.setInitialValue(v["einc_count"], {count});')
        for i in tiled:
            w.line(f'graph.setInitialValue(v["einc_first{i}"], first{i});')
            w.line(f'graph.setInitialValue(v["einc_size{i}"], size{i});')
        for pos in split.bases:
            w.line(f'graph.setInitialValue(v["einc_base{pos}"], {bases[pos]});')
        for pos, dims in clipped_boxes.items():
            for d in dims[1:] if dims[0] == 0 else dims:
                w.line(f'graph.setInitialValue(v["einc_extent{pos}_{d}"], extent{pos}_{d});')
        w.line("graph.setTileMapping(v, tile);")
        for pos in [*(pos for pos, _, _ in split.written), *(pos for pos, _, _ in split.boxes if written(args[pos]))]:
            w.line(f"graph.setTileMapping({edges[pos]}, tile);")
        w.close()

    @classmethod
    def emit(cls, module: ModuleOp) -> str:
        """Refuses impossible launches before printing; prints each kernel's tile split
        (`split-poplar-vertices`)."""
        cls.manifest(module)
        w = _PoplarWriter(cls)
        w.splits = {k.sym_name.data: tile_split(k) for k in module.ops if isinstance(k, egpu.FuncOp)}
        return w.module(module)

    @classmethod
    def runtime(cls) -> TargetRuntime:
        from einc.runtime import poplar

        return poplar

    @classmethod
    def load(cls, source: str, manifest: LaunchManifest) -> Runner:
        from einc.runtime.poplar import load_poplar_kernel

        return load_poplar_kernel(source, manifest)


__all__ = ["PoplarTarget"]
