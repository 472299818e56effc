"""Which dimensions of a program's tensors are tied together: the relations behind the
frontend's shape inference (docs/LANGUAGE.md, "Axes and their ranges"), for callers that
reason about shapes without compiling, e.g. symbolically (einc.torch's fake kernels under
`torch.compile` and `torch.export`).

    relations = shape_relations(program)         # a checked Program (einc.frontend.parse_program)
    relations.groups                             # classes of dimensions that must be equal
    relations.input_groups[i][d]                 # the class of dimension d of input i
    relations.output_groups[j][d]                # the class of dimension d of output j

The rules, as `sema` applies them: an axis takes its extent from every dimension it indexes
plainly (`x[N, K]`: N is dimension 0 of x), and those must all agree; a statement's result
has its output axes' extents; an axis with `where X in E` is E; a scatter's result has its
target's shape; a declared input (`input x: float32[4]`) has the shape written. So every
dimension of every tensor is an input dimension or a constant, and a program takes a set of
input shapes when the dimensions of each class agree (and equal its constant, if it has one)
and its other checks pass (an index expression must stay in range: the frontend checks that
on concrete shapes; these relations do not).
"""

from __future__ import annotations

from dataclasses import dataclass

from einc.frontend import ast, parser, sema
from einc.frontend.ast import Span
from einc.frontend.diagnostics import SourceText


@dataclass(frozen=True)
class Dim:
    """Dimension `dim` of input number `index` (`name`), in the program's input order."""

    index: int
    name: str
    dim: int


@dataclass(frozen=True)
class Binding:
    """An input dimension an axis indexes plainly, and where (the index in the program)."""

    dim: Dim
    axis: str
    span: Span


@dataclass(frozen=True)
class DimGroup:
    """Dimensions that are equal in every shape the program takes."""

    dims: tuple[Dim, ...]
    """The input dimensions of the class, in input order (empty for a constant alone)."""
    axes: tuple[str, ...]
    """The axes whose extent the class is, by name, in order of first use."""
    size: int | None
    """The program's constant for the class (a declaration, a `where` range), or None."""
    why: str = ""
    """Where the constant comes from, in words."""
    span: Span | None = None
    """Where the constant is written."""


@dataclass(frozen=True)
class ShapeRelations:
    groups: tuple[DimGroup, ...]
    input_groups: tuple[tuple[int, ...], ...]
    """For each input, the group of each dimension (an input dimension no axis indexes
    plainly is a group of its own, without axes)."""
    output_groups: tuple[tuple[int, ...], ...]
    """For each output, the group of each dimension (each has an input dimension or a size)."""
    bindings: tuple[Binding, ...]
    """Where each input dimension is first indexed plainly, in program order."""
    declared: frozenset[str]
    """The inputs declared in the program text (`input x: ...`): their shapes are written."""
    source: SourceText

    def binding(self, dim: Dim) -> Binding | None:
        """Where `dim` is first indexed plainly, if it is."""
        return next((b for b in self.bindings if b.dim == dim), None)

    def axis_name(self, group: int) -> str | None:
        axes = self.groups[group].axes
        return axes[0] if axes else None


# A node of the union-find: an input dimension, a result's dimension, or a constant.
_Node = tuple[str, str, int]


class _Classes:
    """Union-find over dimension nodes."""

    def __init__(self) -> None:
        self.parent: dict[_Node, _Node] = {}

    def find(self, node: _Node) -> _Node:
        self.parent.setdefault(node, node)
        while self.parent[node] != node:
            self.parent[node] = self.parent[self.parent[node]]
            node = self.parent[node]
        return node

    def union(self, a: _Node, b: _Node) -> None:
        ra, rb = self.find(a), self.find(b)
        if ra != rb:
            self.parent[rb] = ra


def shape_relations(program: object) -> ShapeRelations:
    """The shape relations of a checked program (`einc.frontend.Program`): its syntax is
    parsed again for the declarations, the statements' syntax trees come with it."""
    from einc.frontend import Program

    assert isinstance(program, Program)
    text = SourceText(program.source, program.filename)
    module = parser.parse(text)
    classes = _Classes()
    names = {t.name: i for i, t in enumerate(program.inputs)}
    current: dict[str, _Node] = {name: ("in", name, -1) for name in names}  # tensor -> its node prefix
    bindings: list[Binding] = []
    consts: dict[_Node, tuple[str, Span | None]] = {}
    axes_of: dict[_Node, list[str]] = {}

    def node(tensor: str, dim: int) -> _Node:
        kind, owner, _ = current[tensor]
        return (kind, owner, dim)

    def const(size: int, why: str, span: Span | None) -> _Node:
        key: _Node = ("const", f"{why} at {span.start if span else -1}", size)  # one node per place
        consts.setdefault(key, (why, span))
        classes.find(key)
        return key

    for decl in module.inputs:
        info = program.inputs[names[decl.name]]
        for d, (size, expr) in enumerate(zip(info.shape, decl.dims)):
            why = f"'{decl.name}' is declared {info.dtype}{list(info.shape)} in the program"
            classes.union(const(size, why, expr.span), node(decl.name, d))

    for stmt in program.statements:
        syntax = stmt.syntax
        extents = dict(stmt.axes)
        explicit = {r.axis: r for r in syntax.where}
        axis_nodes: dict[str, list[_Node]] = {}

        def bind(axis: str, target: str, dim: int, span: Span) -> None:
            n = node(target, dim)
            axis_nodes.setdefault(axis, []).append(n)
            if n[0] == "in":
                dim_ = Dim(names[n[1]], n[1], dim)
                if not any(b.dim == dim_ for b in bindings):
                    bindings.append(Binding(dim_, axis, span))

        exprs: tuple[ast.Expr, ...] = (syntax.expr,)
        if syntax.is_scatter:
            seen: set[str] = set()
            for dim, idx in enumerate(syntax.indices):
                if isinstance(idx, ast.Name) and idx.name not in seen and idx.name not in explicit:
                    seen.add(idx.name)
                    bind(idx.name, syntax.output, dim, idx.span)
            exprs = (*syntax.indices, syntax.expr)
        for expr in exprs:
            for n in sema.walk(expr):
                if isinstance(n, ast.Access) and n.tensor in current:
                    for dim, idx in enumerate(n.indices):
                        if isinstance(idx, ast.Name) and idx.name not in explicit:
                            bind(idx.name, n.tensor, dim, idx.span)
        for axis, found in axis_nodes.items():
            for other in found[1:]:
                classes.union(found[0], other)
        for axis, rng in explicit.items():
            axis_nodes[axis] = [const(extents[axis], f"the range of axis '{axis}' ('where {axis} in ...')", rng.axis_span)]
        for axis, found in axis_nodes.items():
            axes_of.setdefault(classes.find(found[0]), []).append(axis)

        result = stmt.output
        if syntax.is_scatter:
            target = [node(syntax.output, d) for d in range(len(result.shape))]
        else:
            outs = [idx.name for idx in syntax.indices if isinstance(idx, ast.Name)]
            target = [axis_nodes[a][0] for a in outs]
        for name in dict.fromkeys((syntax.output, result.name)):
            current[name] = ("res", result.name, -1)
        for d, n in enumerate(target):
            classes.union(n, ("res", result.name, d))

    # the classes, numbered by their first input dimension (then the constants, then results)
    order: dict[_Node, int] = {}
    members: list[list[Dim]] = []
    input_groups = []
    for i, info in enumerate(program.inputs):
        row = []
        for d in range(len(info.shape)):
            root = classes.find(("in", info.name, d))
            if root not in order:
                order[root] = len(members)
                members.append([])
            members[order[root]].append(Dim(i, info.name, d))
            row.append(order[root])
        input_groups.append(tuple(row))
    output_groups = []
    for out in program.outputs:
        row = []
        for d in range(len(out.shape)):
            root = classes.find(("res", out.name, d))
            if root not in order:
                order[root] = len(members)
                members.append([])
            row.append(order[root])
        output_groups.append(tuple(row))
    sizes: dict[int, tuple[int, str, Span | None]] = {}
    for key, (why, span) in consts.items():
        group = order.get(classes.find(key))
        if group is not None and group not in sizes:
            sizes[group] = (key[2], why, span)
    axes: dict[int, list[str]] = {}
    for root, names_ in axes_of.items():
        group = order.get(classes.find(root))
        if group is not None:
            axes.setdefault(group, []).extend(a for a in names_ if a not in axes.get(group, []))
    groups = []
    for g, dims in enumerate(members):
        size, why, span = sizes.get(g, (None, "", None))
        groups.append(DimGroup(tuple(dims), tuple(axes.get(g, ())), size, why, span))
    declared = frozenset(d.name for d in module.inputs)
    return ShapeRelations(tuple(groups), tuple(input_groups), tuple(output_groups), tuple(bindings), declared, text)
