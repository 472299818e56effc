"""Staging a tensor's tile in a local buffer (`transform.einc.cache_read/_write`).

`cache_read(loop, "B")`: at the top of `loop`'s body, a `memref.alloca` of the footprint box
of B's accesses inside the loop (indices defined outside the body fixed, inner indices over
their ranges), a copy-in nest filling it, and every load of B inside redirected to it with
the box offset subtracted. `cache_write(loop, "C")`: the same for the written tensor, plus a
copy-out nest at the end of the body (the whole box is written back; elements the body does
not write are written back unchanged). With the accumulation in a small local array of
fixed shape, a C compiler keeps it in registers across the reduction loops.

Contract: legal when every access to the tensor inside the loop is an affine load/store
whose index is linear in loop variables of bounded range, every access has the same outer
part per dimension (one box), the box provably lies inside the tensor, and (cache_read) the
tensor is not written inside the loop. Otherwise a Failure is returned and the IR is
unchanged. Shared (GPU) memory is not implemented yet.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from xdsl.dialects import affine, memref
from xdsl.dialects.builtin import AffineMapAttr, MemRefType, StringAttr, UnitAttr
from xdsl.ir import BlockArgument, SSAValue
from xdsl.ir.affine import AffineExpr, AffineMap
from xdsl.rewriter import InsertPoint, Rewriter

from einc.passes.utils.loop_analysis import (
    Access,
    accesses,
    buffer_name,
    constant_bounds,
    defined_inside,
    induction_var,
    linear_form,
    step_of,
    trip_count,
    value_range,
)
from einc.passes.utils.loop_transforms import (
    AXIS_ATTR,
    STMT_ATTR,
    VECTORIZE_ATTR,
    Failure,
    _new_loop,
    describe,
)

MAX_LOCAL_ELEMENTS = 1 << 14
"""Boxes larger than this (64 KiB of float32) are refused: they belong on the heap, not the stack."""

Terms = dict[SSAValue, int]


@dataclass
class _Box:
    """The footprint: per dimension, the outer terms (fixed in one iteration), the lowest
    inner offset and the extent; each access's inner linear form per dimension."""

    outer: list[Terms]
    low: list[int]
    shape: list[int]
    inner: dict[Access, list[tuple[Terms, int]]]


def _value_range(v: SSAValue) -> tuple[int | None, int | None]:
    """value_range, with the last iterate of a constant-bound stepped loop (a tile loop
    `0 to 20 step 4` ends at 16, not 19)."""
    if isinstance(v, BlockArgument) and isinstance(loop := v.block.parent_op(), affine.ForOp):
        bounds, n = constant_bounds(loop), trip_count(loop)
        if bounds is not None and n:
            return bounds[0], bounds[0] + (n - 1) * step_of(loop)
    return value_range(v)


def _range_of(terms: Terms, const: int) -> tuple[int, int] | None:
    lo = hi = const
    for v, c in terms.items():
        v_lo, v_hi = _value_range(v)
        if v_lo is None or v_hi is None:
            return None
        lo += min(c * v_lo, c * v_hi)
        hi += max(c * v_lo, c * v_hi)
    return lo, hi


def _footprint(loop: affine.ForOp, tensor: str, accs: list[Access]) -> _Box | Failure:
    where = f"'{tensor}' inside {describe(loop)}"
    buffer_type = accs[0].buffer.type
    assert isinstance(buffer_type, MemRefType)
    dims = buffer_type.get_shape()
    iv = induction_var(loop)
    outer: list[Terms | None] = [None] * len(dims)
    ranges: list[list[tuple[int, int]]] = [[] for _ in dims]
    inner: dict[Access, list[tuple[Terms, int]]] = {}
    for a in accs:
        if a.map is None:
            return Failure(f"cannot cache {where}: an access is not affine")
        forms = []
        for d, e in enumerate(a.map.results):
            form = linear_form(e, a.operands)
            if form is None:
                return Failure(f"cannot cache {where}: an index is not affine in the loops")
            terms, const = form
            out = {v: c for v, c in terms.items() if v is iv or not defined_inside(v, loop)}
            ins = {v: c for v, c in terms.items() if v not in out}
            if outer[d] is None:
                outer[d] = out
            elif outer[d] != out:
                return Failure(f"cannot cache {where}: its accesses are not one tile (dimension {d} is offset differently)")
            span = _range_of(ins, const)
            if span is None:
                return Failure(f"cannot cache {where}: an index inside has no bounded range")
            ranges[d].append(span)
            forms.append((ins, const))
        inner[a] = forms
    low = [min(lo for lo, _ in r) for r in ranges]
    shape = [max(hi for _, hi in r) - lo + 1 for r, lo in zip(ranges, low)]
    for d, size in enumerate(dims):
        span = _range_of(outer[d] or {}, 0)
        if span is None or span[0] + low[d] < 0 or span[1] + low[d] + shape[d] > size:
            return Failure(f"cannot cache {where}: the tile may reach outside the tensor (dimension {d})")
    if math.prod(shape) > MAX_LOCAL_ELEMENTS:
        return Failure(f"cannot cache {where}: its tile {'x'.join(map(str, shape))} is larger than {MAX_LOCAL_ELEMENTS} elements")
    return _Box([o or {} for o in outer], low, shape, inner)


def _linear_map(forms: list[tuple[Terms, int]], operands: list[SSAValue]) -> AffineMap:
    results = []
    for terms, const in forms:
        e: AffineExpr = AffineExpr.constant(const)
        for v, c in terms.items():
            e = e + AffineExpr.dimension(operands.index(v)) * c
        results.append(e)
    return AffineMap(len(operands), 0, tuple(results))


def _copy_nest(loop: affine.ForOp, point: InsertPoint, box: _Box, tensor: SSAValue, local: SSAValue, into_local: bool) -> None:
    """A nest over the box copying tensor[offset + x] -> local[x] (or back)."""
    stmt = loop.attributes.get(STMT_ATTR)
    name = buffer_name(tensor)
    loops = []
    for d, extent in enumerate(box.shape):
        f = _new_loop((), (), 0, extent, 1, f"{name}_c{d}")
        if isinstance(stmt, StringAttr):
            f.attributes[STMT_ATTR] = stmt
        f.attributes[AXIS_ATTR] = StringAttr(f"{name}.{'in' if into_local else 'out'}{d}")
        f.attributes["einc.copy"] = UnitAttr()
        Rewriter.insert_op(f, point)
        loops.append(f)
        point = InsertPoint.before(f.body.block.last_op)  # type: ignore[arg-type]
    if loops:  # a rank-0 tensor is one element: no loop
        loops[-1].attributes[VECTORIZE_ATTR] = UnitAttr()
    ivs = [induction_var(f) for f in loops]
    outer_vars = list(dict.fromkeys(v for terms in box.outer for v in terms))
    operands = [*outer_vars, *ivs]
    forms = [({**terms, iv: 1}, low) for terms, low, iv in zip(box.outer, box.low, ivs)]
    far = AffineMapAttr(_linear_map(forms, operands))
    element = tensor.type.get_element_type()  # type: ignore[attr-defined]
    if into_local:
        load = affine.LoadOp(tensor, operands, far, element)
        store = affine.StoreOp(load.result, local, ivs)
    else:
        load = affine.LoadOp(local, ivs, None, element)
        store = affine.StoreOp(load.result, tensor, operands, far)
    Rewriter.insert_op(load, point)
    Rewriter.insert_op(store, point)


def cache_tensor(loop: affine.ForOp, tensor: str, write: bool, memory: str) -> memref.AllocaOp | Failure:
    """Stage `tensor`'s tile in a local buffer for each iteration of `loop` (see the module
    docstring for the contract). Returns the `memref.alloca`."""
    kind = "cache_write" if write else "cache_read"
    if memory != "local":
        return Failure(f"{kind} of '{tensor}' at {describe(loop)} in {memory} memory is not implemented yet")
    accs = [a for a in accesses(loop) if buffer_name(a.buffer) == tensor]
    if not accs:
        return Failure(f"{kind}: '{tensor}' is not accessed inside {describe(loop)}")
    buffer = accs[0].buffer
    if any(a.buffer is not buffer for a in accs):
        return Failure(f"{kind}: two buffers are named '{tensor}' inside {describe(loop)}")
    ops = {a.op for a in accs}
    if any(loop.is_ancestor(use.operation) and use.operation not in ops for use in buffer.uses):
        return Failure(f"cannot {kind} '{tensor}' at {describe(loop)}: an operation other than a load or store uses it inside")
    written = any(a.write for a in accs)
    if write and not written:
        return Failure(f"cannot cache_write '{tensor}' at {describe(loop)}: it is not written inside (use cache_read)")
    if not write and written:
        return Failure(f"cannot cache_read '{tensor}' at {describe(loop)}: it is written inside (use cache_write)")
    box = _footprint(loop, tensor, accs)
    if isinstance(box, Failure):
        return box
    element = buffer.type.get_element_type()  # type: ignore[attr-defined]
    alloca = memref.AllocaOp.get(element, 64, box.shape)
    alloca.attributes["ein.name"] = StringAttr(f"{tensor}_local")
    alloca.memref.name_hint = f"{tensor}_local"
    local = alloca.memref
    body = loop.body.block
    Rewriter.insert_op(alloca, InsertPoint.at_start(body))
    _copy_nest(loop, InsertPoint.after(alloca), box, buffer, local, into_local=True)
    if write:
        _copy_nest(loop, InsertPoint.before(body.last_op), box, buffer, local, into_local=False)  # type: ignore[arg-type]
    for a, forms in box.inner.items():
        shifted = [(terms, const - low) for (terms, const), low in zip(forms, box.low)]
        operands = list(dict.fromkeys(v for terms, _ in shifted for v in terms))
        new_map = AffineMapAttr(_linear_map(shifted, operands))
        if isinstance(a.op, affine.LoadOp):
            Rewriter.replace_op(a.op, affine.LoadOp(local, operands, new_map, element))
        else:
            assert isinstance(a.op, affine.StoreOp)
            Rewriter.replace_op(a.op, affine.StoreOp(a.op.value, local, operands, new_map))
    return alloca
