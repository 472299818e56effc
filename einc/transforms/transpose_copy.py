"""Copies that transpose, as W x W vector tiles: the mechanism behind the packing copies'
vector form in `einc-vectorize-loops` (targets with `vector_shuffle`).

A packing copy (a staging copy with a layout: `cache_read` of a filter `[F, C, KH, KW]` into
a local `[C, KH, KW, F]`, its output channels innermost) reads its source along one set of
loops and writes its local along another: each scalar copy is a load and a store, and
neither loop order is unit-stride on both sides, so the compiler cannot vectorize it (a 3x3
convolution on a 7x7 map at batch 1 spent about 45% of its time there). As tiles, it is a
transpose: W rows of the source (W consecutive source elements each) loaded as W vectors,
transposed in registers by log2(W) stages of W shuffles (`egpu.vshuffle`), stored as W
vectors of the local.

Contract of `transpose_copy(root, lanes_f32)`:

- Input: a perfect nest of `affine.for` loops with constant bounds from 0, step 1, whose
  innermost body is one `affine.load` and one `affine.store` of the loaded value to another
  buffer (no guard, nothing else), every index linear in the loop variables.
- The flat (row-major) positions: a loop `a` moves the destination by 1 and the source by
  S (neither 0 nor 1), or a group of loops moves the destination as one mixed-radix lane
  index within a tile (1, T1, T1 * T2, ...: the pair form's filter, lane 2 f + g, g moving it
  by 1 and f by 2, each its own source stride); a run of other loops moves the source by 1,
  T1, T1 * T2, ... (contiguous in the source: a run of R elements) and the destination by
  more than 1, each its own way (each transposed row is stored at its own place: the pair
  form's copy-out, lane 2 f + g to group g's channel f). W: `lanes_f32` float32 lanes scaled
  by the element size (a power of two of egpu.VECTOR_WIDTHS), at least 4. The lanes' span a
  multiple of W, or over W / 2 and under W where the target stores part of such a vector in
  one instruction (`partial_bytes`; one partial tile: its rows loaded, the rest repeating
  the last, each stored vector marked `egpu.lanes` = the span, its first lanes only). R a
  multiple of W, or over W where the target has partial vectors: its last R mod W columns
  one partial tile after the loop (each row's first columns by a masked load, `egpu.lanes`
  on the `egpu.vload`; only those transposed rows stored).
- Output on success: the nest replaced by `for (other loops) for a0 step W: for r0 step W:`
  W `egpu.vload`s (source rows a0 + i, from run position r0), the shuffles, W
  `egpu.vstore`s (destination rows r0 + j, from a0), and the partial tile of the run after
  the r0 loop. The same elements copied, each once, nothing read outside them. Returns the
  new outermost loop.
- Failure (a value; the IR untouched): anything else.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from xdsl.dialects import affine
from xdsl.dialects.builtin import IntegerAttr, MemRefType, VectorType
from xdsl.ir import Operation, SSAValue
from xdsl.ir.affine import AffineExpr, AffineMap
from xdsl.rewriter import InsertPoint, Rewriter

from einc.dialects import egpu
from einc.ir.attrs import STORE_LANES_ATTR
from einc.transforms.affine_fold import compose
from einc.transforms.affine_index import dims_to_operands, index_values
from einc.transforms.loop_analysis import constant_bounds, induction_var, linear_form, step_of
from einc.transforms.loop_build import Failure, _new_loop, describe


COPY_ATTR = "einc.copy"
"""The mark of a staging copy's loops (einc.transforms.staging)."""


def _bits(element: object) -> int:
    return getattr(element, "bitwidth", None) or getattr(getattr(element, "width", None), "data", 32)


def _lanes(element: object, lanes_f32: int) -> int:
    bits = _bits(element)
    wanted = max(1, lanes_f32 * 32 // max(8, bits))
    fits = [w for w in egpu.VECTOR_WIDTHS if w <= wanted and w & (w - 1) == 0]
    return max(fits, default=1)


def transpose_masks(width: int) -> list[tuple[int, list[int], list[int]]]:
    """The stages of a `width` x `width` transpose: (b, lo, hi) for b = W/2, W/4, ..., 1; at
    stage b rows i and i + b (i & b == 0) exchange their off-diagonal b x b blocks: row i
    becomes `shuffle(r[i], r[i + b], lo)`, row i + b `shuffle(r[i], r[i + b], hi)`."""
    stages = []
    b = width // 2
    while b >= 1:
        lo, hi = [], []
        for p in range(width):
            seg, q = p // (2 * b) * 2 * b, p % (2 * b)
            lo.append(p if q < b else width + seg + q - b)
            hi.append(p + b if q < b else width + p)
        stages.append((b, lo, hi))
        b //= 2
    return stages


def _map_of(op: affine.LoadOp | affine.StoreOp) -> tuple[AffineMap, list[SSAValue]]:
    """The access's map over dimensions only (symbols made dimensions, affine.apply operands
    composed in)."""
    m, operands = dims_to_operands(op.map.data), list(op.indices)
    while (folded := compose(m, operands)) is not None:
        m, operands = folded
    return m, list(operands)


def _flat_form(op: affine.LoadOp | affine.StoreOp) -> tuple[dict[SSAValue, int], int] | None:
    """The access's flat row-major position as a linear form over its index operands."""
    t = op.memref.type
    assert isinstance(t, MemRefType)
    shape = t.get_shape()
    if any(s < 0 for s in shape):
        return None
    m, operands = _map_of(op)
    terms: dict[SSAValue, int] = {}
    const = 0
    for d, e in enumerate(m.results):
        form = linear_form(e, operands)
        if form is None:
            return None
        stride = math.prod(shape[d + 1 :])
        for v, c in form[0].items():
            terms[v] = terms.get(v, 0) + c * stride
        const += form[1] * stride
    return {v: c for v, c in terms.items() if c}, const


def _nest(root: affine.ForOp) -> tuple[list[affine.ForOp], affine.LoadOp, affine.StoreOp] | Failure:
    loops = [root]
    while True:
        ops = [op for op in loops[-1].body.block.ops if not isinstance(op, affine.YieldOp)]
        if len(ops) == 1 and isinstance(ops[0], affine.ForOp):
            loops.append(ops[0])
            continue
        break
    load, store = ops if len(ops) == 2 else (None, None)
    if not isinstance(load, affine.LoadOp) or not isinstance(store, affine.StoreOp):
        return Failure(f"{describe(root)} is no copy nest (one load and one store innermost)")
    if store.value is not load.result or store.memref is load.memref:
        return Failure(f"{describe(root)} does not copy one buffer into another")
    for loop in loops:
        bounds = constant_bounds(loop)
        if bounds is None or bounds[0] != 0 or step_of(loop) != 1 or loop.results:
            return Failure(f"{describe(loop)} has no constant bounds from 0 with step 1")
    return loops, load, store


def transpose_copy(root: affine.ForOp, lanes_f32: int, partial_bytes: int = 0) -> affine.ForOp | Failure:
    """See the module docstring. `partial_bytes`: the vector size (bytes) whose partial store
    the target has as one instruction (C with AVX-512: 64); only tiles of W such elements may
    be partial (0: none)."""
    found = _nest(root)
    if isinstance(found, Failure):
        return found
    loops, load, store = found
    element = load.result.type
    width = _lanes(element, lanes_f32)
    if width < 4:
        return Failure(f"{describe(root)}: vectors of {element} narrower than 4 lanes")
    src, dst = _flat_form(load), _flat_form(store)
    if src is None or dst is None:
        return Failure(f"{describe(root)}: an index is not linear")
    ivs: list[SSAValue] = [induction_var(loop) for loop in loops]
    trips = {iv: (constant_bounds(loop) or (0, 0))[1] for iv, loop in zip(ivs, loops)}
    s_of = {iv: src[0].get(iv, 0) for iv in ivs}
    d_of = {iv: dst[0].get(iv, 0) for iv in ivs}
    # the loops along the destination's rows: one loop `a` moving it by 1 (the source by
    # neither 0 nor 1) and, while their span is no tile, loops moving it by the span so far (a
    # mixed-radix lane index within one tile: the pair form's filter, lane 2 f + g); the span a
    # multiple of W, or one partial tile over W / 2 rows (stored as the first lanes of each vector, `egpu.lanes`)
    partial = partial_bytes > 0 and width * _bits(element) == 8 * partial_bytes

    def whole(n: int) -> bool:
        return n % width == 0 or partial and width < 2 * n < 2 * width

    lanes: list[SSAValue] = []
    for start in [iv for iv in ivs if d_of[iv] == 1 and s_of[iv] not in (0, 1)]:
        group: list[SSAValue] = [start]
        span = trips[start]
        while not whole(span) and span < width:
            nxt = [iv for iv in ivs if iv not in group and d_of[iv] == span and s_of[iv] not in (0, 1)
                   and span * trips[iv] <= width]  # fmt: skip
            if not nxt:
                break
            group.append(nxt[0])
            span *= trips[nxt[0]]
        if whole(span):
            lanes = group
            break
    first = [iv for iv in ivs if s_of[iv] == 1 and d_of[iv] > 1 and iv not in lanes]
    if not lanes or len(first) != 1:
        return Failure(f"{describe(root)} is no transposing copy")
    a, b = lanes[-1], first[0]
    span = math.prod(trips[iv] for iv in lanes)
    run, size = [b], trips[b]
    while True:  # the run's next loop: the source moves by the run's size, the destination anyhow (each
        # transposed row is stored at its own place: the grouped convolution's lanes 2 f + g)
        nxt = [iv for iv in ivs if iv not in run and iv not in lanes and s_of[iv] == size and d_of[iv] > 1]
        if not nxt:
            break
        run.append(nxt[0])
        size *= trips[nxt[0]]
    # a run of no multiple of W: its last columns a partial tile (masked row loads, only the
    # transposed rows inside the run stored) where the target has partial vectors
    tail = size % width
    if tail and not (partial and size > width) or any(s_of[iv] == 0 and d_of[iv] == 0 for iv in ivs):
        return Failure(f"{describe(root)}: a run of {size} elements is no multiple of {width} lanes, or a loop copies nothing")
    others = [iv for iv in ivs if iv not in lanes and iv not in run]
    # the rest must not alias a tile: distinct (source, destination) positions per iteration
    if len({(s_of[iv], d_of[iv]) for iv in ivs}) != len(ivs):
        return Failure(f"{describe(root)}: two loops move the same way")

    by_iv = dict(zip(ivs, loops))
    mapping: dict[SSAValue, SSAValue] = {}
    made: list[affine.ForOp] = []
    for iv in others:
        made.append(_new_loop((), (), 0, trips[iv], 1, iv.name_hint))
        mapping[iv] = induction_var(made[-1])
    made.append(_new_loop((), (), 0, span, width, a.name_hint))
    made.append(_new_loop((), (), 0, size - tail, width, b.name_hint))
    for f, old in zip(made, [*(by_iv[iv] for iv in others), by_iv[a], by_iv[b]]):
        for k, v in old.attributes.items():
            f.attributes[k] = v
    Rewriter.insert_op(made[0], InsertPoint.before(root))
    for outer, f in zip(made, made[1:]):
        Rewriter.insert_op(f, InsertPoint.before(_last(outer)))
    ao, ro = made[-2], made[-1]
    body: list[Operation] = []
    a0, r0 = induction_var(ao), induction_var(ro)

    def strides(group: list[SSAValue]) -> list[int]:
        inner = [1]
        for iv in group[:-1]:
            inner.append(inner[-1] * trips[iv])
        return inner

    def digit(x: AffineExpr, group: list[SSAValue], k: int) -> AffineExpr:
        """Loop k of a mixed-radix group at flat position x: x mod (P_k T_k) floordiv P_k, x
        the position mod P_(k+1) T_(k+1), ... (the printers merge floordiv/mod pairs back)."""
        inner = strides(group)
        e = x
        for q in reversed(range(k, len(group) - 1)):
            e = e % (inner[q] * trips[group[q]])
        return e // inner[k] if inner[k] > 1 else e

    def indices(access: affine.LoadOp | affine.StoreOp, row: int, col: int, at: int | None = None) -> list[SSAValue]:
        """The access's indices at lane position a0 + row, run position r0 + col (`at` + col
        where given: the tail past the loop): one affine.apply per index over the new loops'
        variables."""
        m, old = _map_of(access)
        operands: list[SSAValue] = [a0, r0]
        exprs: list[AffineExpr] = []
        x = AffineExpr.constant(at + col) if at is not None else AffineExpr.dimension(1) + col
        y = AffineExpr.dimension(0) + row
        for o in old:
            if o in lanes:
                exprs.append(y if len(lanes) == 1 else digit(y, lanes, lanes.index(o)))
            elif o in run:
                exprs.append(digit(x, run, run.index(o)))
            else:
                operands.append(mapping.get(o, o))
                exprs.append(AffineExpr.dimension(len(operands) - 1))
        return index_values(body, operands, [e.replace_dims_and_symbols(exprs, []) for e in m.results])

    t = VectorType(element, [width])
    filled = min(span, width)  # a partial tile: the rows past it repeat its last (their lanes are not stored)

    def tile(columns: int, at: int | None) -> None:
        """One tile: `filled` rows of `columns` source elements (a masked load below W), the
        W x W transpose, the first `columns` transposed rows stored."""
        rows_v: list[SSAValue] = []
        for i in range(filled):
            v = egpu.VLoadOp(load.memref, indices(load, i, 0, at), t)
            if columns < width:
                v.attributes[STORE_LANES_ATTR] = IntegerAttr(columns, 64)
            body.append(v)
            rows_v.append(v.result)
        rows_v += [rows_v[-1]] * (width - filled)
        for half, lo, hi in transpose_masks(width):
            new = list(rows_v)
            for i in range(width):
                if i & half:
                    continue
                x, y = egpu.VShuffleOp(rows_v[i], rows_v[i + half], lo), egpu.VShuffleOp(rows_v[i], rows_v[i + half], hi)
                body.extend([x, y])
                new[i], new[i + half] = x.result, y.result
            rows_v = new
        for j in range(columns):
            body.append(egpu.VStoreOp(rows_v[j], store.memref, indices(store, 0, j, at)))
            if filled < width:
                body[-1].attributes[STORE_LANES_ATTR] = IntegerAttr(filled, 64)

    tile(width, None)  # the run holds a whole tile (a tail only past one)
    Rewriter.insert_op(body, InsertPoint.before(_last(ro)))
    if tail:
        body = []
        tile(tail, size - tail)
        Rewriter.insert_op(body, InsertPoint.before(_last(ao)))
    root.detach()
    root.erase()
    return made[0]


def _last(loop: affine.ForOp) -> Operation:
    last = loop.body.block.last_op
    assert last is not None
    return last


__all__: Sequence[str] = ["transpose_copy", "transpose_masks"]
