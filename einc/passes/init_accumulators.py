"""`einc-init-accumulators`: a register tile of accumulators starts at the reduction's
identity instead of being read back from a filled tensor.

A `+=!` statement is a fill nest (`einc.init`: every element of the output set to the
identity) followed by the reduction nest. A schedule that stages the output's tile in
work-item memory (`cache_write "C" at %l in "local"`) copies the tile in from C at the start
of each iteration of `%l` and back at its end. When the tile is staged once per element (the
loops around the staging point give their iterations disjoint tiles, so no reduction loop
encloses it), what the copy-in reads is always the fill's identity: the copy-in stores the
identity constant instead, and no thread reads C before writing it. When, besides, the
tiles of the staging loops cover every element of C (constant loop bounds, each dimension
of C indexed by its own loops), the fill nest is dead and goes (on a device, one kernel and
one pass over C fewer).

    affine.for %i ... {                      // fill: C[i, j] = 0
    affine.for %io ... { affine.for %jo ... {
      %t = memref.alloca() : memref<8x8xf32>
      affine.for %c0 = 0 to 8 { affine.for %c1 = 0 to 8 {
        %v = affine.load %C[%io + %c0, %jo + %c1]          // becomes the identity 0.0
        affine.store %v, %t[%c0, %c1] } }
      ... reduce into %t ...
      affine.for ... { affine.store (load %t), %C[...] }   // the copy-out: unchanged
    } }

Conservative: anything else (another access to C in the nest or between the fill and the
nest, a second staged tile of C, a staging point inside a reduction loop, shared memory)
leaves the IR as it was. Run before `convert-affine-to-egpu` (it reads the loop-level
statements). The numbers are unchanged: each element's copy-in read the identity the fill
had just written.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from collections.abc import Sequence

import numpy as np

from xdsl.context import Context
from xdsl.dialects import affine, arith, func, memref
from xdsl.dialects.builtin import MemRefType, ModuleOp
from xdsl.ir import Operation, SSAValue
from xdsl.ir.affine import AffineMap
from xdsl.passes import ModulePass

from einc.ir.attrs import COPY_ATTR, INIT_ATTR, MEMORY_ATTR
from einc.transforms.loop_analysis import (
    accesses,
    constant_bounds,
    induction_var,
    linear_form,
    separates,
    step_of,
    walk_ops,
)

MAX_TILE_ORIGINS = 1 << 16
"""Coverage is checked by listing the staging loops' iterations; above this many the fill stays."""
MAX_COVERAGE_ELEMENTS = 1 << 24
"""...and marking the tiles in a map of the output's elements; above this many the fill stays."""
MAX_COVERAGE_RANK = 32
"""...of at most this rank (NumPy's arrays hold at most 64 dimensions); above it the fill stays."""


def _fill(op: Operation) -> tuple[SSAValue, SSAValue] | None:
    """(tensor, constant) of a fill nest: loops marked `einc.init` around one store of a
    constant, else None."""
    if not isinstance(op, affine.ForOp) or INIT_ATTR not in op.attributes:
        return None
    stores = [o for o in walk_ops(op) if isinstance(o, affine.StoreOp | memref.StoreOp)]
    if len(stores) != 1 or not isinstance(stores[0], affine.StoreOp):
        return None
    value = stores[0].value
    if not isinstance(value.owner, arith.ConstantOp) or value.owner.parent_op() is not op.parent_op():
        return None
    return stores[0].memref, value


def _uses(op: Operation, buffer: SSAValue) -> bool:
    return any(buffer in o.operands for o in walk_ops(op))


def _copy_nests(alloca: memref.AllocaOp) -> tuple[affine.ForOp, affine.ForOp] | None:
    """The copy-in nest right after a cache_write's alloca and the copy-out nest ending its block."""
    copy_in = alloca.next_op
    block = alloca.parent_block()
    copy_out = block.last_op.prev_op if block is not None and block.last_op is not None else None
    if not (isinstance(copy_in, affine.ForOp) and isinstance(copy_out, affine.ForOp)):
        return None
    if copy_in is copy_out or COPY_ATTR not in copy_in.attributes or COPY_ATTR not in copy_out.attributes:
        return None
    return copy_in, copy_out


def _enclosing_loops(op: Operation, top: Operation) -> list[affine.ForOp] | None:
    """The affine.for loops from `top` down to `op`'s parent, or None when something else
    (a conditional, a non-affine loop) lies between."""
    loops: list[affine.ForOp] = []
    parent = op.parent_op()
    while parent is not None:
        if not isinstance(parent, affine.ForOp):
            return None
        loops.append(parent)
        if parent is top:
            return loops[::-1]
        parent = parent.parent_op()
    return None


def _covers(copy_out: affine.ForOp, tensor: SSAValue, loops: list[affine.ForOp]) -> bool:
    """Whether the copy-outs of all iterations of `loops` write every element of `tensor`:
    the iterations are enumerated (bounds evaluated at each point, partial tiles' `min`
    bounds included) and each one's box marked in a map of the tensor's elements."""
    stores = [a for a in accesses(copy_out) if a.write and a.buffer is tensor]
    if len(stores) != 1:
        return False
    store = stores[0]
    store_map = store.map
    memory = tensor.type
    if store_map is None or not isinstance(memory, MemRefType):
        return False
    shape = memory.get_shape()
    if math.prod(shape) > MAX_COVERAGE_ELEMENTS or len(shape) > MAX_COVERAGE_RANK:
        return False
    copy_ivs: dict[SSAValue, affine.ForOp] = {induction_var(f): f for f in walk_ops(copy_out) if isinstance(f, affine.ForOp)}
    forms: list[tuple[dict[SSAValue, int], int, int]] = []  # outer terms, constant, extent
    for e in store_map.results:
        form = linear_form(e, store.operands)
        if form is None:
            return False
        terms, const = form
        inner = [(v, c) for v, c in terms.items() if v in copy_ivs]
        if len(inner) != 1 or inner[0][1] != 1:
            return False
        bounds = constant_bounds(copy_ivs[inner[0][0]])
        if bounds is None or bounds[0] != 0 or step_of(copy_ivs[inner[0][0]]) != 1:
            return False
        forms.append(({v: c for v, c in terms.items() if v not in copy_ivs}, const, bounds[1]))
    covered = np.zeros(shape, dtype=bool)
    points = 0
    env: dict[SSAValue, int] = {}

    def bound(m: AffineMap, operands: Sequence[SSAValue]) -> Sequence[int] | None:
        if any(o not in env for o in operands):
            return None
        return m.eval([env[o] for o in operands[: m.num_dims]], [env[o] for o in operands[m.num_dims :]])

    def visit(depth: int) -> bool:
        nonlocal points
        if depth == len(loops):
            points += 1
            if points > MAX_TILE_ORIGINS:
                return False
            box = []
            for (terms, const, extent), size in zip(forms, shape):
                if any(v not in env for v in terms):
                    return False
                origin = const + sum(c * env[v] for v, c in terms.items())
                box.append(slice(max(0, origin), max(0, min(size, origin + extent))))
            covered[tuple(box)] = True
            return True
        loop = loops[depth]
        lower = bound(loop.lowerBoundMap.data, loop.lowerBoundOperands)
        upper = bound(loop.upperBoundMap.data, loop.upperBoundOperands)
        if lower is None or upper is None:
            return False
        iv = induction_var(loop)
        for value in range(max(lower), min(upper), step_of(loop)):
            env[iv] = value
            if not visit(depth + 1):
                return False
        env.pop(iv, None)
        return True

    return visit(0) and bool(covered.all())


def init_accumulators(host: func.FuncOp) -> int:
    """Rewrite the staged accumulator tiles of `host` (module docstring); returns how many."""
    done = 0
    for fill_op in list(host.body.block.ops):
        found = _fill(fill_op)
        if found is None:
            continue
        tensor, identity = found
        nest = fill_op.next_op
        while nest is not None and not _uses(nest, tensor):
            nest = nest.next_op
        if not isinstance(nest, affine.ForOp):
            continue
        staged = [
            o for o in walk_ops(nest)
            if isinstance(o, memref.AllocaOp) and MEMORY_ATTR not in o.attributes
            and (copies := _copy_nests(o)) is not None and _uses(copies[0], tensor)
        ]  # fmt: skip
        if len(staged) != 1:
            continue
        alloca = staged[0]
        copies = _copy_nests(alloca)
        assert copies is not None
        copy_in, copy_out = copies
        inside = [a for a in accesses(nest) if a.buffer is tensor]
        loads = [a for a in inside if not a.write]
        if any(not (copy_in.is_ancestor(a.op) or copy_out.is_ancestor(a.op)) for a in inside):
            continue
        if len(loads) != 1 or not copy_in.is_ancestor(loads[0].op) or any(a.write for a in inside if copy_in.is_ancestor(a.op)):
            continue
        loops = _enclosing_loops(alloca, nest)
        if loops is None:
            continue
        if not all(separates(induction_var(f), step_of(f), [a for a in inside if f.is_ancestor(a.op)]) for f in loops):
            continue
        load = loads[0].op
        load.results[0].replace_all_uses_with(identity)
        load.detach()
        load.erase()
        if _covers(copy_out, tensor, loops):  # nothing between the fill and `nest` uses the tensor
            fill_op.detach()
            fill_op.erase()
        done += 1
    return done


@dataclass(frozen=True)
class InitAccumulatorsPass(ModulePass):
    name = "einc-init-accumulators"

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        for host in op.ops:
            if isinstance(host, func.FuncOp) and host.body.blocks:
                init_accumulators(host)


__all__ = ["InitAccumulatorsPass", "init_accumulators"]
