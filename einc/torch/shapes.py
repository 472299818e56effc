"""The shapes an einc op takes: which input dimensions may vary from call to call, which
must agree, and its outputs' shapes, from the program's shape relations
(einc.frontend.dims). Works on concrete sizes (the kernel: one compiled kernel per shape
signature) and on symbolic ones (the fake kernel under `torch.compile` with dynamic shapes and
`torch.export` with a `Dim`: the outputs' sizes are the inputs' SymInts, and each equality the
program needs is a `torch._check`)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import torch

from einc.errors import RuntimeInputError, SourceLocation, UsageError
from einc.frontend.dims import Dim, ShapeRelations
from einc.torch.tensors import TensorSpec

Size = int | torch.SymInt
Shape = Sequence[Size]


@dataclass(frozen=True)
class _Group:
    """A class of input dimensions that are equal in every call, and its size where it
    cannot vary."""

    dims: tuple[tuple[int, int], ...]
    """(input position, dimension), in input order."""
    axis: str | None
    fixed: int | None
    why: str
    """Why it is fixed (the program's constant, or the op's `dynamic`)."""
    loc: SourceLocation | None


class OpShapes:
    """What an op made from one example takes.

    `dynamic`: True (every dimension may vary, as far as the program allows), False (the
    example's shapes only), or the names of the axes whose extents may vary (the others are
    the example's). A dimension the program fixes (a declared input, a `where` range) never
    varies."""

    def __init__(self, qualname: str, relations: ShapeRelations, inputs: Sequence[TensorSpec],
                 outputs: Sequence[TensorSpec], dynamic: bool | Sequence[str]):  # fmt: skip
        self.qualname = qualname
        self.relations = relations
        self.inputs = tuple(inputs)
        self.outputs = tuple(outputs)
        source = relations.source
        axes = {a for g in relations.groups if g.dims for a in g.axes}
        if not isinstance(dynamic, bool):
            unknown = [a for a in dynamic if a not in axes]
            if unknown:
                raise UsageError(
                    f"dynamic names '{unknown[0]}', which is no axis indexing an input dimension of the program "
                    f"(those are {', '.join(sorted(axes)) or 'none'})", source.location(None),
                )  # fmt: skip
        groups: list[_Group] = []
        for g in relations.groups:
            if not g.dims:
                continue
            dims = tuple((d.index, d.dim) for d in g.dims)
            axis = g.axes[0] if g.axes else None
            example = self.inputs[dims[0][0]].shape[dims[0][1]]
            loc = source.location(g.span) if g.span is not None else self._where(g.dims[0])
            if g.size is not None:
                fixed, why = g.size, g.why
            elif dynamic is True or (not isinstance(dynamic, bool) and any(a in dynamic for a in g.axes)):
                fixed, why = None, ""
            elif dynamic is False:
                fixed, why = example, "the op was made with dynamic=False"
            else:
                named = f"axis '{axis}'" if axis else "a dimension no axis indexes"
                fixed, why = example, f"{named} is not in the op's dynamic={list(dynamic)}"
            groups.append(_Group(dims, axis, fixed, why, loc))
        self.groups = tuple(groups)
        self._group_of = {d: k for k, g in enumerate(self.groups) for d in g.dims}
        self.pairs = tuple((g.dims[0], other) for g in self.groups for other in g.dims[1:])
        """Input dimensions that must be equal: (first of its class, another)."""
        self.fixed = tuple((d, g.fixed) for g in self.groups if g.fixed is not None for d in g.dims)
        self.dynamic = tuple(sorted({g.axis or "*" for g in self.groups if g.fixed is None}))
        """The axes whose extents may vary (`*` for a varying dimension no axis indexes)."""
        self._outputs = tuple(
            tuple(self._source_of(group) for group in row) for row in relations.output_groups
        )

    def _where(self, dim: Dim) -> SourceLocation | None:
        binding = self.relations.binding(dim)
        return None if binding is None else self.relations.source.location(binding.span)

    def _source_of(self, group: int) -> tuple[int, int] | int:
        """An output dimension's size: an input dimension (input position, dimension) or a
        constant."""
        g = self.relations.groups[group]
        if g.dims:
            first = (g.dims[0].index, g.dims[0].dim)
            fixed = self.groups[self._group_of[first]].fixed
            return first if fixed is None else fixed
        assert g.size is not None, g
        return g.size

    # ---- the example's words ----------------------------------------------------------------
    def describe(self, k: int) -> str:
        """Input `k` as `float32[N, 784]`: a dimension that may vary by its axis (`*` without one)."""
        spec = self.inputs[k]
        dims = []
        for d, size in enumerate(spec.shape):
            g = self.groups[self._group_of[(k, d)]]
            dims.append(str(size) if g.fixed is not None else g.axis or "*")
        return f"{str(spec.dtype).removeprefix('torch.')}[{', '.join(dims)}]"

    def signature(self) -> str:
        return ", ".join(f"{s.name}: {self.describe(k)}" for k, s in enumerate(self.inputs))

    # ---- checks -----------------------------------------------------------------------------
    def accepts(self, tensors: Sequence[object]) -> bool:
        """Whether the op takes these tensors (count, dtype, rank, sizes; the device is the
        kernel's to check): plain comparisons, so Dynamo traces them as guards."""
        if len(tensors) != len(self.inputs):
            return False
        for t, spec in zip(tensors, self.inputs):
            if not isinstance(t, torch.Tensor) or t.dtype != spec.dtype or t.dim() != len(spec.shape):
                return False
        return self.fits([t.shape for t in tensors if isinstance(t, torch.Tensor)])

    def fits(self, shapes: Sequence[Shape]) -> bool:
        """Whether input shapes of the right ranks fit (plain comparisons: under Dynamo, each
        is a guard)."""
        for (a, da), (b, db) in self.pairs:
            if shapes[a][da] != shapes[b][db]:
                return False
        for (a, da), size in self.fixed:
            if shapes[a][da] != size:
                return False
        return True

    def problem(self, shapes: Sequence[Shape]) -> RuntimeInputError | None:
        """The error for input shapes (of the right ranks) the program cannot take."""
        for (a, da), (b, db) in self.pairs:
            if shapes[a][da] != shapes[b][db]:
                return self._mismatch(shapes, (a, da), (b, db))
        for (a, da), size in self.fixed:
            if shapes[a][da] != size:
                return self._not_fixed(shapes, (a, da), size)
        return None

    def output_shapes(self, shapes: Sequence[Shape]) -> list[list[Size]]:
        """The outputs' shapes for input shapes (concrete or symbolic, of the right ranks): a
        RuntimeInputError where concrete sizes disagree, a `torch._check` for each equality
        between symbolic ones."""
        for first, other in self.pairs:
            self._require(shapes, other, shapes[first[0]][first[1]], lambda o=other, f=first: self._mismatch(shapes, f, o))
        for dim, size in self.fixed:
            self._require(shapes, dim, size, lambda d=dim, s=size: self._not_fixed(shapes, d, s))
        return [[size if isinstance(size, int) else shapes[size[0]][size[1]] for size in row] for row in self._outputs]

    @staticmethod
    def _require(shapes: Sequence[Shape], dim: tuple[int, int], want: Size, error: Callable[[], RuntimeInputError]) -> None:
        """Dimension `dim` equals `want`: compared where both are concrete, else a
        `torch._check` (a guard under Dynamo, a runtime assertion in an exported program)."""
        got = shapes[dim[0]][dim[1]]
        if isinstance(got, int) and isinstance(want, int):
            if got != want:
                raise error()
            return
        torch._check(got == want, lambda: error().render())

    # ---- messages ---------------------------------------------------------------------------
    def _arg(self, k: int, shapes: Sequence[Shape]) -> str:
        return f"{self.qualname}: argument {k} ('{self.inputs[k].name}') has shape {_list(shapes[k])}"

    def _mismatch(self, shapes: Sequence[Shape], first: tuple[int, int], other: tuple[int, int]) -> RuntimeInputError:
        g = self.groups[self._group_of[first]]
        (a, da), (b, db) = first, other
        what = f"axis {g.axis}" if g.axis else "the same extent"
        loc_b = self._where(Dim(b, self.inputs[b].name, db))
        loc_a = self._where(Dim(a, self.inputs[a].name, da))
        notes = () if loc_a is None else ((loc_a, f"axis {g.axis} takes its extent from dimension {da} of '{self.inputs[a].name}' here"),)
        return RuntimeInputError(
            f"{self._arg(b, shapes)}: its dimension {db} is {what}, which is {shapes[a][da]} in argument {a} "
            f"('{self.inputs[a].name}', its dimension {da}); the program needs them equal",
            loc_b, notes,
        )  # fmt: skip

    def _not_fixed(self, shapes: Sequence[Shape], dim: tuple[int, int], size: int) -> RuntimeInputError:
        k, d = dim
        g = self.groups[self._group_of[dim]]
        axis = f", axis {g.axis}," if g.axis else ""
        return RuntimeInputError(
            f"{self._arg(k, shapes)}, the op was made for {list(self.inputs[k].shape)}: its dimension {d}{axis} "
            f"is {size} ({g.why})",
            g.loc,
        )


def _list(shape: Shape) -> str:
    return "[" + ", ".join(str(s) for s in shape) + "]"
