"""Staging a tensor's tile in a local buffer (`transform.einc.cache_read/_write`).

`cache_read(loop, "B")`: at the top of `loop`'s body, a `memref.alloca` of the footprint box
of B's accesses inside the loop (indices defined outside the body fixed, inner indices over
their ranges), a copy-in nest filling it, and every load of B inside redirected to it with
the box offset subtracted. `cache_write(loop, "C")`: the same for the written tensor, plus a
copy-out nest at the end of the body (the whole box is written back; elements the body does
not write are written back unchanged). With the accumulation in a small local array of
fixed shape, a C compiler keeps it in registers across the reduction loops.

Contract: legal when every access to the tensor inside the loop is an affine load/store
whose index is linear in loop variables of bounded range (in local memory, a term that is
not, such as the `4 * (l floordiv 4)` of a grouped convolution's lanes over two groups
(group_lanes), counts when it reads only loops inside: bounded through its range, the box
holds every value it reaches, and the local's index keeps the term), every access has the same outer
part per dimension (one box), and (cache_read) the tensor is not written inside the loop.
Otherwise a Failure is returned and the IR is unchanged. A box that may reach outside the
tensor (a partial tile, `min(4, N - i)`) is copied in and out without the elements outside,
which no iteration touches. No loop inside `loop` may be bound to a GPU coordinate (the
staging would sit between bound loops).

On a device target a local buffer inside a kernel is the private memory of one work-item
(`float a[16];`), so it must lie inside every bound loop of its nest, and a written-back
tile must be the work-item's own: `private_buffer_failure`, checked after the whole
schedule (binds may come after the cache op) by einc.schedule.checks.check_private_buffers.

`memory = "shared"` (GPU work-group memory, as TVM's `cache_read(..., "shared")` plus
compute_at): the box is the footprint of *all threads of the block* in one iteration of
`loop`, so the variables of the enclosing thread-bound loops range over their trip counts
like the loops inside. The alloca is marked `einc.memory = "shared"` and the outermost loop
of each copy nest `einc.shared = "in" | "out"`; `convert-affine-to-egpu` hoists the buffer to
`egpu.alloc_shared`, splits each copy among the block's threads and puts barriers around
the copies (shared_staging.py). Extra contract: `loop` lies inside a bound loop and is not
bound itself, the box's offset and the trip counts of `loop` and of the loops between it and
the thread-bound loops do not depend on a thread id (every thread reaches each barrier), and
(cache_write) the boxes of two blocks never overlap. Whether a target holds float16/bfloat16
tiles in shared memory is the schedule layer's check (einc.schedule.checks: CUDA and HIP
do; OpenCL without cl_khr_fp16 has no half arrays). A box may reach outside the tensor (a
partial tile): the copies skip those elements, which no in-range thread reads.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, cast

from xdsl.dialects import affine, arith, memref, scf
from xdsl.dialects.builtin import (
    AffineMapAttr,
    AnyFloat,
    IndexType,
    IntegerType,
    MemRefType,
    StringAttr,
    UnitAttr,
)
from xdsl.ir import Attribute, BlockArgument, Operation, SSAValue
from xdsl.ir.affine import AffineBinaryOpExpr, AffineBinaryOpKind, AffineConstantExpr, AffineDimExpr, AffineExpr, AffineMap
from xdsl.rewriter import InsertPoint, Rewriter

from einc.transforms.loop_analysis import (
    Access,
    accesses,
    buffer_name,
    constant_bounds,
    defined_inside,
    induction_var,
    linear_form,
    named_accesses,
    separates,
    step_of,
    trip_count,
    value_range,
    first_nonlinear,
    view_results,
)
from einc.transforms.affine_fold import fold_one_apply
from einc.transforms.halo import Guard, bounds_guard, drop_guard
from einc.transforms.loop_build import Failure, _new_loop, describe
from einc.transforms.loop_transforms import AXIS_ATTR, BIND_ATTR, STMT_ATTR, VECTORIZE_ATTR

MAX_LOCAL_ELEMENTS = 1 << 14
"""Boxes larger than this (64 KiB of float32) are refused: they belong on the heap, not the stack."""

Terms = dict[SSAValue, int]

from einc.ir.attrs import FRAGMENT_ATTR, MEMORY_ATTR, SHARED_COPY_ATTR, dtype_name

if TYPE_CHECKING:
    from einc.errors import SourceLocation


@dataclass
class Box:
    """The footprint: per dimension, the outer terms (fixed in one iteration), the lowest
    inner offset and the extent; each access's inner linear form per dimension."""

    outer: list[Terms]
    low: list[int]
    shape: list[int]
    inner: dict[Access, list[tuple[Terms, int]]]
    sizes: list[int]
    """The tensor's shape."""
    overhang: list[tuple[bool, bool]]
    """Per dimension: the box may reach below 0 / past the end of the tensor (shared boxes of
    partial tiles)."""
    step: list[int] = field(default_factory=list[int])
    """Per dimension (empty: all 1): the distance between the elements the box holds; a
    `compact` footprint whose accesses all reach every `s`-th element of a dimension (a
    transposed convolution's phase: output columns `2 * WO + 1`, filter taps `2 * KH + 1`)
    holds only those, element `x` of the box at `low + s * x`."""

    view: int | None = None
    """None: the box's dimensions are the tensor's. k: the tensor's dimensions k and after are
    one dimension of the box (their row-major flat position), the tensor seen as
    `shape[:k] + [prod(shape[k:])]`: a coalesced loop's `x[.., p floordiv 28, p mod 28]` is
    `x'[.., p]` of the view (`view_results`), a tile of p a box of it."""

    split: tuple[int, int] | None = None
    """(d, F): the box's dimensions d and d + 1 are the tensor's dimension d split into
    `x floordiv F` and `x mod F` (`split_box`): the tensor's index there is `F * x_d +
    x_{d+1}`."""

    def steps(self) -> list[int]:
        return self.step or [1] * len(self.shape)


def split_box(box: Box, d: int, factor: int, where: str) -> Box | Failure:
    """`box` with its dimension d split into two: `q = x floordiv factor` and `r = x mod
    factor` of the tensor's index x (a grouped convolution's channel `8 * g + c` as group x
    channel-in-group, so that a layout can put the groups innermost: the pair form's input
    of two groups side by side). Each access's index there must be a sum of terms whose
    coefficients are multiples of `factor` (the q part, its outer terms too) and terms whose
    range, with the constant's remainder, lies in 0..factor-1 (the r part); the tensor's
    extent a multiple of `factor`, the box inside the tensor there and not strided."""
    rank = len(box.shape)
    if not 0 <= d < rank:
        return Failure(f"cannot split dimension {d} of {where}: its tile has {rank} dimensions")
    if factor < 2 or box.sizes[d] % factor:
        return Failure(f"cannot split dimension {d} of {where} by {factor}: it does not divide its {box.sizes[d]} elements")
    if box.view is not None or box.split is not None or box.steps()[d] != 1 or box.overhang[d] != (False, False):
        return Failure(f"cannot split dimension {d} of {where} by {factor}: its tile there is strided, merged or reaches outside the tensor")
    outer = box.outer[d]
    if any(c % factor for c in outer.values()):
        return Failure(f"cannot split dimension {d} of {where} by {factor}: its offset there is not a multiple of {factor}")
    inner: dict[Access, list[tuple[Terms, int]]] = {}
    q_ranges: list[tuple[int, int]] = []
    r_ranges: list[tuple[int, int]] = []
    for a, forms in box.inner.items():
        terms, const = forms[d]
        q_terms = {v: c // factor for v, c in terms.items() if c % factor == 0}
        r_terms = {v: c for v, c in terms.items() if c % factor}
        q_const, r_const = divmod(const, factor)
        q_span, r_span = _range_of(q_terms, q_const), _range_of(r_terms, r_const)
        if q_span is None or r_span is None or r_span[0] < 0 or r_span[1] >= factor:
            return Failure(f"cannot split dimension {d} of {where} by {factor}: an index there is not a group times "
                           f"{factor} plus a value in 0..{factor - 1}")
        q_ranges.append(q_span)
        r_ranges.append(r_span)
        inner[a] = [*forms[:d], (q_terms, q_const), (r_terms, r_const), *forms[d + 1 :]]
    q_low, r_low = min(lo for lo, _ in q_ranges), min(lo for lo, _ in r_ranges)
    shape = [max(hi for _, hi in q_ranges) - q_low + 1, max(hi for _, hi in r_ranges) - r_low + 1]
    step = [*box.step[:d], 1, 1, *box.step[d + 1 :]] if box.step else []
    return Box([*box.outer[:d], {v: c // factor for v, c in outer.items()}, {}, *box.outer[d + 1 :]],
               [*box.low[:d], q_low, r_low, *box.low[d + 1 :]], [*box.shape[:d], *shape, *box.shape[d + 1 :]],
               inner, [*box.sizes[:d], box.sizes[d] // factor, factor, *box.sizes[d + 1 :]],
               [*box.overhang[:d], (False, False), (False, False), *box.overhang[d + 1 :]], step, None, (d, factor))  # fmt: skip


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


def footprint(
    loop: affine.ForOp, tensor: str, accs: list[Access], spread: set[SSAValue] | None = None,
    partial: bool = False, compact: bool = False, view: bool = False,
) -> Box | Failure:
    """The box of `accs` (accesses to `tensor` inside `loop`) one iteration of `loop`
    touches, or a Failure. `spread` (shared memory): variables of enclosing loops that range
    over the box like inner ones (the thread-bound loops), and the box may overhang the
    tensor; `partial`: the box may overhang the tensor (a partial tile: the copies skip the
    elements outside, which no iteration touches); `compact`: a dimension every access
    reaches only every `s`-th element of (its inner coefficients and offsets multiples of
    `s`) holds only those (`Box.step`); `view`: indices that are not linear but whose
    flat position from some dimension on is (a coalesced loop's) give a box of the tensor
    seen with those dimensions merged (`Box.view`), the same merge for every access."""
    where = f"'{tensor}' inside {describe(loop)}"
    spread = spread or set()
    may_overhang = bool(spread) or partial
    buffer_type = accs[0].buffer.type
    assert isinstance(buffer_type, MemRefType)
    dims = list(buffer_type.get_shape())
    results = {a: list(a.map.results) for a in accs if a.map is not None}
    merged: int | None = None
    if view and len(results) == len(accs):
        starts = [k for a in accs if (k := first_nonlinear(a)) is not None]
        views = [view_results(a, dims, min(starts)) for a in accs] if starts else []
        if starts and None not in views:
            merged = min(starts)
            results = {a: v[1] for a, v in zip(accs, views) if v is not None}
            dims = [*dims[:merged], math.prod(dims[merged:])]
    iv = induction_var(loop)
    outer: list[Terms | None] = [None] * len(dims)
    ranges: list[list[tuple[int, int]]] = [[] for _ in dims]
    inner: dict[Access, list[tuple[Terms, int]]] = {}
    for a in accs:
        if a.map is None:
            return Failure(f"cannot cache {where}: an access is not affine")
        forms = []
        for d, e in enumerate(results[a]):
            form = linear_form(e, a.operands)
            if form is None:
                return Failure(f"cannot cache {where}: an index is not affine in the loops")
            terms, const = form
            out = {v: c for v, c in terms.items() if v not in spread and (v is iv or not defined_inside(v, loop))}
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
    step = [1] * len(dims)
    if compact:
        for d in range(len(dims)):
            g = 0
            for forms in inner.values():
                terms, const = forms[d]
                g = math.gcd(g, const - low[d], *terms.values())
            if g > 1:
                step[d], shape[d] = g, (shape[d] - 1) // g + 1
    overhang = []
    for d, size in enumerate(dims):
        span = _range_of(outer[d] or {}, 0)
        if span is None:
            return Failure(f"cannot cache {where}: the tile may reach outside the tensor (dimension {d})")
        extent = (shape[d] - 1) * step[d] + 1
        below, past = span[0] + low[d] < 0, span[1] + low[d] + extent > size
        if (below or past) and not may_overhang:
            return Failure(f"cannot cache {where}: the tile may reach outside the tensor (dimension {d})")
        overhang.append((below, past))
    if not spread and math.prod(shape) > MAX_LOCAL_ELEMENTS:
        return Failure(f"cannot cache {where}: its tile {'x'.join(map(str, shape))} is larger than {MAX_LOCAL_ELEMENTS} elements")
    return Box([o or {} for o in outer], low, shape, inner, list(dims), overhang, step if compact else [], merged)


def linear_map(forms: list[tuple[Terms, int]], operands: list[SSAValue]) -> AffineMap:
    """The map of `operands` whose result d is `forms[d]` (terms over the operands, constant)."""
    results = []
    for terms, const in forms:
        e: AffineExpr = AffineExpr.constant(const)
        for v, c in terms.items():
            e = e + AffineExpr.dimension(operands.index(v)) * c
        results.append(e)
    return AffineMap(len(operands), 0, tuple(results))


def _copy_nest(
    loop: affine.ForOp, point: InsertPoint, box: Box, tensor: SSAValue, local: SSAValue,
    into_local: bool, shared: bool = False, layout: tuple[int, ...] | None = None, local_order: bool = False,
    clamp: bool = False,
) -> None:
    """A nest over the box copying tensor[offset + x] -> local[x] (or back), x in the
    local's dimension order `layout` (None: the tensor's); elements outside the tensor (an
    overhanging shared box) are skipped. The loops follow the tensor's order, a local
    buffer's outermost dimension first; with `local_order` the local's order (`layout`'s):
    its innermost loop runs along the local. A shared buffer's copies keep the tensor's
    order (the block's threads split them). `clamp` (a halo's copy-in): a dimension whose
    offset is constant runs only over its part inside the tensor, instead of testing each
    element (the rest of the box holds the halo's fill)."""
    stmt = loop.attributes.get(STMT_ATTR)
    name = buffer_name(tensor)
    order = list(range(len(box.shape)))
    if layout is not None and local_order:
        order = list(layout)
    elif layout is not None and not shared:
        # the local's outermost dimension outermost, the rest in the tensor's order: each
        # block of the local it indexes is filled whole while it is in L1 (a filter [F, C,
        # KH, KW] packed [C, KH, KW, F]: per C, a block of F x taps, each F's taps read
        # contiguously; F outermost, the taps of one F are written across the whole local,
        # a 3x3 convolution on a 7x7 map, AVX-512: 2.7 -> 1.9 ms)
        order = [layout[0], *(d for d in order if d != layout[0])]
    overhang = list(box.overhang)
    span = {d: (0, box.shape[d]) for d in order}
    if clamp:
        for d, inside in clamped_spans(box).items():
            span[d] = inside
            overhang[d] = (False, False)
    by_dim: dict[int, affine.ForOp] = {}
    loops = []
    for d in order:
        f = _copy_loop(span[d], f"{name}_c{d}", f"{name}.{'in' if into_local else 'out'}{d}", stmt, point)
        loops.append(f)
        by_dim[d] = f
        point = InsertPoint.before(f.body.block.last_op)  # type: ignore[arg-type]
    guarded = any(below or past for below, past in overhang)
    if loops and not shared and not guarded and layout is None:  # a rank-0 tensor is one element: no loop
        loops[-1].attributes[VECTORIZE_ATTR] = UnitAttr()
    if loops and shared:
        loops[0].attributes[SHARED_COPY_ATTR] = StringAttr("in" if into_local else "out")
    ivs = [induction_var(by_dim[d]) for d in range(len(box.shape))]
    outer_vars = list(dict.fromkeys(v for terms in box.outer for v in terms))
    operands = [*outer_vars, *ivs]
    forms = [({**terms, iv: s}, low) for terms, low, iv, s in zip(box.outer, box.low, ivs, box.steps())]
    far = AffineMapAttr(_tensor_map(linear_map(forms, operands), box, tensor))
    if guarded:
        point = _inside_tensor(point, box, forms, operands, overhang)
    element = tensor.type.get_element_type()  # type: ignore[attr-defined]
    near = ivs if layout is None else [ivs[d] for d in layout]
    if into_local:
        load = affine.LoadOp(tensor, operands, far, element)
        store = affine.StoreOp(load.result, local, near)
    else:
        load = affine.LoadOp(local, near, None, element)
        store = affine.StoreOp(load.result, tensor, operands, far)
    Rewriter.insert_op(load, point)
    Rewriter.insert_op(store, point)


def clamped_spans(box: Box) -> dict[int, tuple[int, int]]:
    """Per dimension of the box that overhangs the tensor at a constant offset with step 1:
    its part inside the tensor, the range a halo's copy-in runs over (`_copy_nest`'s
    `clamp`)."""
    return {d: (max(0, -box.low[d]), min(box.shape[d], box.sizes[d] - box.low[d]))
            for d in range(len(box.shape))
            if box.overhang[d] != (False, False) and not box.outer[d] and box.steps()[d] == 1}  # fmt: skip


def _tensor_map(m: AffineMap, box: Box, tensor: SSAValue) -> AffineMap:
    """`m` (indices of the box's view of `tensor`) as the tensor's own indices: the merged
    flat position `f` of a view (`Box.view`) is `f floordiv S_k`, `(f floordiv S_j) mod
    n_j`, ..., `f mod n_last` again (which the printers linearise back to `f`)."""
    if box.split is not None:
        d, factor = box.split
        return AffineMap(m.num_dims, 0, (*m.results[:d], m.results[d] * factor + m.results[d + 1], *m.results[d + 2 :]))
    if box.view is None:
        return m
    assert isinstance(tensor.type, MemRefType)
    shape = list(tensor.type.get_shape())
    k = box.view
    flat = m.results[k]
    results = list(m.results[:k])
    for j in range(k, len(shape)):
        stride = math.prod(shape[j + 1 :])
        e = flat if stride == 1 else flat // stride
        results.append(e if j == k else e % shape[j])
    return AffineMap(m.num_dims, 0, tuple(results))


def _inside_tensor(point: InsertPoint, box: Box, forms: list[tuple[Terms, int]], operands: list[SSAValue],
                   overhang: list[tuple[bool, bool]] | None = None) -> InsertPoint:  # fmt: skip
    """Insert at `point` the test that the copied element lies inside the tensor (in the
    `overhang`ing dimensions) and return the point inside its `scf.if`."""
    cond: SSAValue | None = None
    for form, size, (below, past) in zip(forms, box.sizes, box.overhang if overhang is None else overhang):
        if not (below or past):
            continue
        index = affine.ApplyOp(operands, AffineMapAttr(linear_map([form], operands)))
        Rewriter.insert_op(index, point)
        for needed, bound, predicate in ((below, 0, "sge"), (past, size, "slt")):
            if not needed:
                continue
            limit = arith.ConstantOp.from_int_and_width(bound, IndexType())
            test = arith.CmpiOp(index.result, limit.result, predicate)
            ops: list[Operation] = [limit, test]
            if cond is not None:
                ops.append(arith.AndIOp(cond, test.result))
            for op in ops:
                Rewriter.insert_op(op, point)
            cond = ops[-1].results[0]
    assert cond is not None
    guard = scf.IfOp(cond, [], [scf.YieldOp()])
    Rewriter.insert_op(guard, point)
    return InsertPoint.before(guard.true_region.block.last_op)  # type: ignore[arg-type]


def _bind_of(loop: Operation) -> str | None:
    attr = loop.attributes.get(BIND_ATTR)
    return attr.data if isinstance(attr, StringAttr) else None


def _depends_on(value: SSAValue, ivs: set[SSAValue], depth: int = 0) -> bool:
    """Whether `value` is computed from one of `ivs` (through ops' operands)."""
    if value in ivs:
        return True
    owner = value.owner
    if not isinstance(owner, Operation) or depth > 32:
        return False
    return any(_depends_on(o, ivs, depth + 1) for o in owner.operands)


def _shared_failure(loop: affine.ForOp, tensor: str, write: bool, box: Box, threads: set[SSAValue]) -> Failure | None:
    """The shared-memory conditions of the module docstring, checked on the box."""
    kind = "cache_write" if write else "cache_read"
    for d, terms in enumerate(box.outer):
        if any(_depends_on(v, threads) for v in terms):
            return Failure(
                f"cannot {kind} '{tensor}' at {describe(loop)} in shared memory: the tile's "
                f"offset in dimension {d} depends on a thread id (every thread of the block "
                "must stage the same tile)"
            )
    op: Operation | None = loop
    while op is not None and not (_bind_of(op) or "").startswith("thread."):
        if isinstance(op, affine.ForOp) and any(_depends_on(v, threads) for v in op.operands):
            return Failure(
                f"cannot {kind} '{tensor}' at {describe(loop)} in shared memory: the trip "
                f"count of {describe(op)} depends on a thread id (every thread must reach "
                "each barrier)"
            )
        op = op.parent_op()
    if write:
        blocks = [v for terms in box.outer for v in terms if isinstance(v, BlockArgument)
                  and (_bind_of(v.block.parent_op()) or "").startswith("block.")]  # type: ignore[arg-type]
        for b in dict.fromkeys(blocks):
            step = step_of(b.block.parent_op())  # type: ignore[arg-type]
            if not any(
                set(terms) & set(blocks) == {b} and abs(terms[b] * step) >= box.shape[d]
                for d, terms in enumerate(box.outer)
            ):
                return Failure(
                    f"cannot cache_write '{tensor}' at {describe(loop)} in shared memory: the "
                    "tiles of two blocks may overlap"
                )
    return None


def cache_tensor(
    loop: affine.ForOp, tensor: str, write: bool, memory: str, layout: tuple[int, ...] | None = None,
    halo: bool = False, split: tuple[int, int] | None = None,
) -> memref.AllocaOp | Failure:
    """Stage `tensor`'s tile in a local buffer for each iteration of `loop` (see the module
    docstring for the contract), its dimensions in the order `layout` (the buffer's
    dimension d is the tensor's dimension layout[d]; None: the tensor's order): a packed
    layout, e.g. a filter's output channels innermost so that a vector loop over them reads
    it contiguously. `halo` (a local read only): the box with its part outside the tensor,
    filled with the value the reads' bounds guards give there, and those reads unguarded
    (einc.transforms.halo). `split` (d, F): the tensor's dimension d staged as two, `x
    floordiv F` and `x mod F` (`split_box`; `layout` then orders rank + 1 dimensions).
    Returns the `memref.alloca`."""
    kind = "cache_write" if write else "cache_read"
    if memory not in ("local", "shared"):
        return Failure(f"{kind} of '{tensor}' at {describe(loop)}: unknown memory '{memory}' (local or shared)")
    if halo and (write or memory != "local"):
        return Failure(f"cannot {kind} '{tensor}' at {describe(loop)} with its halo: a halo is for a tensor read into local memory")
    inside = [op for op in loop.body.walk() if isinstance(op, affine.ForOp) and _bind_of(op)]
    if inside:
        hint = "" if memory == "shared" else (
            '; a local buffer is private to one work-item: use "shared" for a tile shared by the block\'s threads'
        )
        return Failure(
            f"cannot {kind} '{tensor}' at {describe(loop)}: {describe(inside[0])} inside it is bound "
            f"to {_bind_of(inside[0])} (stage at a loop inside the bound loops{hint})"
        )
    shared = memory == "shared"
    threads: set[SSAValue] = set()
    if shared:
        if _bind_of(loop):
            return Failure(f"cannot {kind} '{tensor}' at {describe(loop)} in shared memory: the loop is bound to {_bind_of(loop)} (stage at a loop inside the bound loops)")
        enclosing = []
        parent = loop.parent_op()
        while parent is not None:
            if isinstance(parent, affine.ForOp) and _bind_of(parent):
                enclosing.append(parent)
            parent = parent.parent_op()
        if not enclosing:
            return Failure(f"cannot {kind} '{tensor}' at {describe(loop)} in shared memory: no enclosing loop is bound to a GPU block or thread")
        threads = {induction_var(f) for f in enclosing if (_bind_of(f) or "").startswith("thread.")}
    accs = named_accesses(loop, tensor)
    if isinstance(accs, str):
        return Failure(f"{kind}: {accs} {describe(loop)}")
    buffer = accs[0].buffer
    ops = {a.op for a in accs}
    # inside the loop (walked already by `accesses`), not through the buffer's uses: an
    # input read by every statement has one per statement
    if any(op not in ops and any(v is buffer for v in op.operands) for op in loop.walk()):
        return Failure(f"cannot {kind} '{tensor}' at {describe(loop)}: an operation other than a load or store uses it inside")
    # a staging buffer an earlier op allocated in the loop's body (compute_at, rfactor): the
    # copies go after its allocation; allocated deeper, each inner iteration has its own
    start = InsertPoint.at_start(loop.body.block)
    owner = buffer.owner
    if isinstance(owner, Operation) and loop.is_ancestor(owner):
        if owner.parent_block() is not loop.body.block:
            inner = owner.parent_op()
            while inner is not None and not isinstance(inner, affine.ForOp):
                inner = inner.parent_op()
            assert inner is not None, "a buffer inside `loop` has a loop above it"
            return Failure(
                f"cannot {kind} '{tensor}' at {describe(loop)}: it is allocated anew in each "
                f"iteration of {describe(inner)} inside (stage it at that loop or inside it)"
            )
        start = InsertPoint.after(owner)
    written = any(a.write for a in accs)
    if write and not written:
        return Failure(f"cannot cache_write '{tensor}' at {describe(loop)}: it is not written inside (use cache_read)")
    if not write and written:
        return Failure(f"cannot cache_read '{tensor}' at {describe(loop)}: it is written inside (use cache_write)")
    if shared and not buffer.type.get_shape():  # type: ignore[attr-defined]
        return Failure(f"cannot {kind} '{tensor}' at {describe(loop)} in shared memory: it is a scalar")
    box = footprint(loop, tensor, accs, threads if shared else None, partial=not shared, compact=not shared,
                    view=not shared and layout is None and not halo and split is None)  # fmt: skip
    unfolded: list[affine.ApplyOp] = []
    if isinstance(box, Failure) and not shared:
        # an index with a division of inner variables (a grouped convolution's lanes over
        # two groups read their input channel `8 * (l floordiv 8)`): the division an operand
        # of its own (an affine.apply, whose range the footprint bounds), folded back after
        staged = _unfold_divisions(loop, accs)
        if staged is not None:
            box2 = footprint(loop, tensor, staged[0], None, partial=True, compact=True)
            if isinstance(box2, Failure):
                _drop(staged[0], staged[1])
            else:
                for old_access, new_access in zip(accs, staged[0]):
                    if isinstance(old_access.op, affine.LoadOp):
                        assert isinstance(new_access.op, affine.LoadOp)
                        old_access.op.result.replace_all_uses_with(new_access.op.result)
                    Rewriter.erase_op(old_access.op)
                accs, box, unfolded = staged[0], box2, staged[1]
    if isinstance(box, Failure):
        return box
    # a halo's guards test the tensor's own indices: found before a split renumbers the box's
    # dimensions (the split keeps the reads, and a split dimension never overhangs)
    guards: dict[Access, Guard] = {}
    if halo:
        guards = {a: g for a in box.inner if (g := bounds_guard(a, box.sizes)) is not None}
        failure = None
        if not guards:
            failure = Failure(
                f"cannot cache_read '{tensor}' at {describe(loop)} with its halo: no read of it inside is guarded "
                "by its bounds alone (`.when` of its indices inside the tensor, a constant outside)"
            )
        elif len({str(g.fill) for g in guards.values()}) > 1:
            failure = Failure(
                f"cannot cache_read '{tensor}' at {describe(loop)} with its halo: its guarded reads give "
                "different values outside the tensor"
            )
        if failure is not None:
            _fold_back(unfolded)
            return failure
    if split is not None:
        box = split_box(box, split[0], split[1], f"'{tensor}' at {describe(loop)}")
        if isinstance(box, Failure):
            _fold_back(unfolded)
            return box
    if layout is not None and sorted(layout) != list(range(len(box.shape))):
        return Failure(f"cannot {kind} '{tensor}' at {describe(loop)}: layout {list(layout)} is not a permutation of its {len(box.shape)} dimensions")
    if layout == tuple(range(len(box.shape))):
        layout = None
    if shared:
        failure = _shared_failure(loop, tensor, write, box, threads)
        if failure is not None:
            return failure
    element = buffer.type.get_element_type()  # type: ignore[attr-defined]
    alloca = memref.AllocaOp.get(element, 64, box.shape if layout is None else [box.shape[d] for d in layout])
    suffix = "shared" if shared else "local"
    alloca.attributes["ein.name"] = StringAttr(f"{tensor}_{suffix}")
    if shared:
        alloca.attributes[MEMORY_ATTR] = StringAttr("shared")
    alloca.memref.name_hint = f"{tensor}_{suffix}"
    local = alloca.memref
    body = loop.body.block
    Rewriter.insert_op(alloca, start)
    # an output tile with a layout (a convolution's channels innermost) is copied in the
    # local's order: its copy-out reads the register tile contiguously, a vector of
    # channels at a time (a 4x4 transposed convolution, AVX-512: 0.57 -> 0.86 of the FMA
    # peak; in the tensor's order the 32 channels of a column, 4 KiB apart, one by one)
    local_order = write and not shared
    # a read staged with its split groups innermost (the pair form's input: two groups'
    # values of a pixel side by side) is copied in the local's order too: each pixel's
    # pair stored together, a row of pairs from two rows of the tensor, which GCC vectorizes
    # (in the tensor's order, stores 2 apart one by one: a quarter of the kernel's time)
    if split is not None and layout is not None and layout[-1] == split[0] and not shared:
        local_order = True
    _copy_nest(loop, InsertPoint.after(alloca), box, buffer, local, into_local=True, shared=shared, layout=layout,
               local_order=local_order, clamp=halo)  # fmt: skip
    if guards:  # the halo's fill, before the copy-in
        fill = next(iter(guards.values())).fill
        # the frame around the copy-in's box only where every overhanging dimension is
        # clamped (else the copy-in skips elements the fill must write)
        inside = clamped_spans(box)
        if len(inside) != sum(o != (False, False) for o in box.overhang):
            inside = {}
        order = list(layout) if layout is not None else list(range(len(box.shape)))
        _fill_nest(loop, InsertPoint.after(alloca), local, fill, element,
                   {k: inside[d] for k, d in enumerate(order) if d in inside})  # fmt: skip
    if write:
        _copy_nest(loop, InsertPoint.before(body.last_op), box, buffer, local, into_local=False, shared=shared,  # type: ignore[arg-type]
                   layout=layout, local_order=local_order)  # fmt: skip
    redirected: list[Operation] = []
    for a, forms in box.inner.items():
        shifted = [({v: c // s for v, c in terms.items()}, (const - low) // s)
                   for (terms, const), low, s in zip(forms, box.low, box.steps())]  # fmt: skip
        if layout is not None:
            shifted = [shifted[d] for d in layout]
        operands = list(dict.fromkeys(v for terms, _ in shifted for v in terms))
        new_map = AffineMapAttr(linear_map(shifted, operands))
        new: Operation
        if isinstance(a.op, affine.LoadOp):
            new = affine.LoadOp(local, operands, new_map, element)
        else:
            assert isinstance(a.op, affine.StoreOp)
            new = affine.StoreOp(a.op.value, local, operands, new_map)
        guard = guards.get(a)
        Rewriter.replace_op(a.op, new)
        if guard is not None:
            assert isinstance(new, affine.LoadOp)
            drop_guard(new, guard.op)
        redirected.append(new)
    for op in redirected:  # the divisions back into the local's indices
        while (folded := fold_one_apply(op)) is not None:
            op = folded
    for apply in unfolded:
        if not apply.result.uses:
            Rewriter.erase_op(apply)
    return alloca


def _fold_back(unfolded: list[affine.ApplyOp]) -> None:
    """The divisions `_unfold_divisions` made operands of their own folded back into the
    accesses that read them (a refused staging leaves the IR as it was)."""
    for apply in unfolded:
        for use in list(apply.result.uses):
            op = use.operation
            while (folded := fold_one_apply(op)) is not None:
                op = folded
        if not apply.result.uses:
            Rewriter.erase_op(apply)


def _copy_loop(bounds: tuple[int, int], iv_name: str, axis: str, stmt: Attribute | None, point: InsertPoint) -> affine.ForOp:
    """A unit-step loop over `bounds` of a staging copy (or fill) nest, tagged with the
    statement `stmt` and the axis `axis`, inserted at `point`."""
    f = _new_loop((), (), bounds[0], bounds[1], 1, iv_name)
    if isinstance(stmt, StringAttr):
        f.attributes[STMT_ATTR] = stmt
    f.attributes[AXIS_ATTR] = StringAttr(axis)
    f.attributes["einc.copy"] = UnitAttr()
    Rewriter.insert_op(f, point)
    return f


FILL_VECTOR_MIN = 4
"""The shortest innermost extent `_fill_nest` vectorizes."""


def _fill_nest(loop: affine.ForOp, point: InsertPoint, local: SSAValue, value: Attribute, element: Attribute,
               interior: dict[int, tuple[int, int]] | None = None) -> None:  # fmt: skip
    """Nests storing the constant `value` into the elements of `local` (a halo's fill). The
    whole buffer, its innermost loop vectorized, when that spans FILL_VECTOR_MIN elements or
    more (a depthwise convolution's padded plane: whole-row vector stores). Shorter (a pair
    form's input, its two groups innermost: vectors of 2 would take a store per pair, and the
    buffer is larger than L1) and given the `interior` the copy-in writes (per dimension of
    `local`, its range there; None or empty: none), only the frame around it, plain nests
    the C compiler stores: per dimension with an interior range, the elements before and
    after it, the earlier such dimensions over their interior (no element twice)."""
    stmt = loop.attributes.get(STMT_ATTR)
    name = (local.name_hint or "local").removesuffix("_local")
    constant = arith.ConstantOp.create(properties={"value": value}, result_types=[element])
    Rewriter.insert_op(constant, point)
    point = InsertPoint.after(constant)
    shape = cast("MemRefType[Attribute]", local.type).get_shape()
    whole = [(0, extent) for extent in shape]
    if (shape and shape[-1] >= FILL_VECTOR_MIN) or not interior:
        boxes = [whole]
    else:
        boxes = []
        for d in sorted(interior):
            lo, hi = interior[d]
            for part in ((0, lo), (hi, shape[d])):
                if part[1] > part[0]:
                    boxes.append([interior[x] if x in interior and x < d else part if x == d else whole[x]
                                  for x in range(len(shape))])  # fmt: skip
    for ranges in boxes:
        at = point
        ivs = []
        loops = []
        for d, bounds in enumerate(ranges):
            f = _copy_loop(bounds, f"{name}_h{d}", f"{name}.halo{d}", stmt, at)
            loops.append(f)
            ivs.append(induction_var(f))
            at = InsertPoint.before(cast(Operation, f.body.block.last_op))
        if loops and ranges == whole and shape[-1] >= FILL_VECTOR_MIN:
            loops[-1].attributes[VECTORIZE_ATTR] = UnitAttr()
        Rewriter.insert_op(affine.StoreOp(constant.result, local, ivs), at)
        if loops:
            point = InsertPoint.after(loops[0])


def _unfold_divisions(loop: affine.ForOp, accs: list[Access], outer: bool = False) -> tuple[list[Access], list[affine.ApplyOp]] | None:
    """Each access of `accs` rebuilt (inserted before it, the old one left in place) with every
    term of an index that is not linear (`c * (l floordiv 8)`) and reads only variables
    defined inside `loop` as `c * q`, q an `affine.apply` of the term inserted before it: the
    same values, indices linear in the operands, which `footprint` bounds through the applies'
    ranges. None when an index has a non-linear term reading a variable from outside `loop`
    (or `loop`'s own), or none has a non-linear term. `outer`: a term may read variables from
    outside `loop` too (not `loop`'s own), bounded through their whole ranges: a box that
    holds each iteration's, larger than it where they vary (prefetch.py's, a hint)."""
    iv = induction_var(loop)
    plans: list[tuple[Access, list[AffineExpr], list[AffineExpr]]] = []
    for a in accs:
        if a.map is None:
            return None
        results: list[AffineExpr] = []
        divisions: list[AffineExpr] = []
        for e in a.map.results:
            if linear_form(e, a.operands) is not None:
                results.append(e)
                continue
            rebuilt: AffineExpr = AffineExpr.constant(0)
            for term in _sum_terms(e):
                if linear_form(term, a.operands) is not None:
                    rebuilt = rebuilt + term
                    continue
                scale, inner = _scaled(term)
                if linear_form(inner, a.operands) is not None or not all(
                    a.operands[d] is not iv and (outer or defined_inside(a.operands[d], loop)) for d in _dims_of(inner)
                ):
                    return None
                divisions.append(inner)
                rebuilt = rebuilt + AffineExpr.dimension(len(a.operands) + len(divisions) - 1) * scale
            results.append(rebuilt)
        plans.append((a, results, divisions))
    if not any(divisions for _, _, divisions in plans):
        return None
    made: list[Access] = []
    applies: list[affine.ApplyOp] = []
    for a, results, divisions in plans:
        point = InsertPoint.before(a.op)
        values: list[SSAValue] = []
        for division in divisions:
            apply = affine.ApplyOp(list(a.operands), AffineMapAttr(AffineMap(len(a.operands), 0, (division,))))
            Rewriter.insert_op(apply, point)
            applies.append(apply)
            values.append(apply.result)
        operands = [*a.operands, *values]
        new_map = AffineMap(len(operands), 0, tuple(results))
        new: Operation
        if isinstance(a.op, affine.LoadOp):
            new = affine.LoadOp(a.buffer, operands, AffineMapAttr(new_map), a.op.result.type)
        else:
            assert isinstance(a.op, affine.StoreOp)
            new = affine.StoreOp(a.op.value, a.buffer, operands, AffineMapAttr(new_map))
        new.attributes.update(a.op.attributes)
        Rewriter.insert_op(new, point)
        made.append(Access(new, a.buffer, new_map, tuple(operands), a.write))
    return made, applies


def _drop(made: list[Access], applies: list[affine.ApplyOp]) -> None:
    """Erase what `_unfold_divisions` inserted (the accesses, then their applies)."""
    for a in made:
        Rewriter.erase_op(a.op)
    for apply in applies:
        Rewriter.erase_op(apply)


def _sum_terms(e: AffineExpr) -> list[AffineExpr]:
    if isinstance(e, AffineBinaryOpExpr) and e.kind == AffineBinaryOpKind.Add:
        return _sum_terms(e.lhs) + _sum_terms(e.rhs)
    return [e]


def _scaled(term: AffineExpr) -> tuple[int, AffineExpr]:
    """`c * x` as (c, x); any other term as (1, term)."""
    if isinstance(term, AffineBinaryOpExpr) and term.kind == AffineBinaryOpKind.Mul:
        for var, const in ((term.lhs, term.rhs), (term.rhs, term.lhs)):
            if isinstance(const, AffineConstantExpr):
                return const.value, var
    return 1, term


def _dims_of(e: AffineExpr) -> set[int]:
    if isinstance(e, AffineDimExpr):
        return {e.position}
    if isinstance(e, AffineBinaryOpExpr):
        return _dims_of(e.lhs) | _dims_of(e.rhs)
    return set()


def private_buffer_failure(alloca: memref.AllocaOp) -> Failure | None:
    """Why a local (not shared) buffer cannot be the private memory of a GPU work-item, or
    None. In a device kernel a `memref.alloca` is per work-item (registers or stack), so:
    - it lies inside every loop of its nest bound to a block or thread: no bound loop runs
      inside its scope (else each thread would use its own copy, filled by the others);
    - a buffer written back to a tensor (cache_write) holds a tile no other work-item
      touches: every bound loop around it gives its iterations disjoint elements of the
      tensor (the whole tile is copied back, elements the body did not write included)."""
    name = buffer_name(alloca.memref)
    scope = alloca.parent_op()
    block = alloca.parent_block()
    if scope is None or block is None:
        return None
    where = f"the local buffer '{name}'" + (f" at {describe(scope)}" if isinstance(scope, affine.ForOp) else "")
    for op in block.walk():
        if isinstance(op, affine.ForOp) and (axis := _bind_of(op)):
            return Failure(
                f"{where} lies outside {describe(op)}, which is bound to {axis}: a local buffer is "
                "private to one work-item (stage at a loop inside the bound loops, or use "
                '"shared" for a tile shared by the block\'s threads)'
            )
    if FRAGMENT_ATTR in alloca.attributes:
        # a tensor-core fragment (einc.transforms.tensorize): each lane copies its own
        # elements of the warp's tile (the hardware's layout, disjoint by construction)
        return None
    written_back = {
        a.buffer for a in accesses(scope)
        if a.write and isinstance(a.op, affine.StoreOp) and isinstance(load := a.op.value.owner, affine.LoadOp)
        and load.memref is alloca.memref
    }  # fmt: skip
    for tensor in written_back:
        group = [a for a in accesses(scope) if a.buffer is tensor]
        loop: Operation | None = scope
        while loop is not None:
            if isinstance(loop, affine.ForOp) and (axis := _bind_of(loop)):
                if not separates(induction_var(loop), step_of(loop), group):
                    return Failure(
                        f"{where} is written back to '{buffer_name(tensor)}', but the tiles of two "
                        f"iterations of {describe(loop)} (bound to {axis}) may overlap: each "
                        "work-item writes its whole tile back"
                    )
            loop = loop.parent_op()
    return None


def staged_location(root: Operation) -> SourceLocation | None:
    """The location (an einc.errors.SourceLocation) of the schedule op that made the largest
    local buffer inside `root` (its `einc.staged_loc`), or None when no schedule op made one."""
    from einc.errors import SourceLocation
    from einc.ir.attrs import STAGED_LOC_ATTR

    best: tuple[int, str] | None = None
    for op in root.walk():
        if not isinstance(op, memref.AllocaOp):
            continue
        recorded = op.attributes.get(STAGED_LOC_ATTR)
        if isinstance(recorded, StringAttr):
            memory = op.memref.type
            assert isinstance(memory, MemRefType)
            size = math.prod(memory.get_shape()) * _bytes(memory.get_element_type())
            if best is None or size > best[0]:
                best = (size, recorded.data)
    if best is None:
        return None
    return SourceLocation.parse(best[1])


def _bytes(element: Attribute) -> int:
    if isinstance(element, IntegerType):
        return max(1, element.width.data // 8)
    return max(1, element.bitwidth // 8) if isinstance(element, AnyFloat) else 8
