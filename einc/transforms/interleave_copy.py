"""Copies that interleave K source rows into lanes, as vector rows and two-source shuffles:
the mechanism behind the interleaving staging copies' vector form in `einc-vectorize-loops`
(targets with `vector_shuffle`).

The pair form of the grouped convolution stages the input of two groups with the group
innermost: `dest[..., x, k] = src[k][..., x]` (two channel rows of 28 floats interleaved into
56). As scalar code, GCC vectorizes it as interleaves with scalar inserts for the columns past
the last whole vector. As vectors: each chunk of W columns of the K source rows loaded as K
vectors (the last chunk's first n columns only where the row is no multiple of W, `egpu.lanes`
= n, the other lanes zero), interleaved in registers by log2(K) stages of K zips
(`egpu.vshuffle`: at each stage vectors i and i + K/2 give their low halves' and high halves'
lanes alternating), stored as K vectors (the last ones' first lanes only, `egpu.lanes`).

Contract of `interleave_copy(loop, lanes_f32, partial_bytes)`:

- Input: an `affine.for` `x` (constant bounds, step 1, no results) whose body is one
  `affine.for` `k` (constant bounds, step 1, K iterations, K a power of two below W) whose body
  is one `affine.load` and one `affine.store` of the loaded value to another buffer, every
  index linear in the loop variables. On the flat (row-major) positions, `x` moves the source
  by 1 and the destination by K, `k` moves the destination by 1 and the source by anything
  else (not 0). W: `lanes_f32` float32 lanes scaled by the element size (a power of two of
  egpu.VECTOR_WIDTHS), at least 4. X (x's trip count) a multiple of W, or not where the
  target loads and stores part of a vector in one instruction (`partial_bytes`: vectors of
  that many bytes; then the last chunk is partial).
- Output on success: `x` replaced by straight-line code (ceil(X / W) chunks of K
  `egpu.vload`s, K log2(K) `egpu.vshuffle`s and up to K `egpu.vstore`s); the same elements
  copied, each once, nothing read or written outside them. Returns the first op made.
- Failure (a value; the IR untouched): anything else.
"""

from __future__ import annotations

from collections.abc import Sequence

from xdsl.dialects import affine
from xdsl.dialects.builtin import IntegerAttr, VectorType
from xdsl.ir import Operation, SSAValue
from xdsl.ir.affine import AffineExpr
from xdsl.rewriter import InsertPoint, Rewriter

from einc.dialects import egpu
from einc.ir.attrs import STORE_LANES_ATTR
from einc.transforms.affine_index import index_values
from einc.transforms.loop_analysis import constant_bounds, induction_var, step_of
from einc.transforms.loop_build import Failure, describe
from einc.transforms.transpose_copy import _bits, _flat_form, _lanes, _map_of


def zip_masks(width: int) -> tuple[list[int], list[int]]:
    """The two zips of `egpu.vshuffle`: (lo, hi); lo alternates the low halves' lanes of a and
    b (a0 b0 a1 b1 ...), hi their high halves'."""
    half = width // 2
    lo = [p // 2 + (width if p % 2 else 0) for p in range(width)]
    hi = [half + p // 2 + (width if p % 2 else 0) for p in range(width)]
    return lo, hi


def interleave_stages(k: int) -> list[list[tuple[int, int]]]:
    """The zips that interleave K vectors: per stage, the pairs (i, i + K/2) whose zip lo and
    hi become vectors 2i and 2i + 1 of the next stage; log2(K) stages."""
    stages, n = [], 1
    while n < k:
        stages.append([(i, i + k // 2) for i in range(k // 2)])
        n *= 2
    return stages


def _copy(x: affine.ForOp) -> tuple[affine.ForOp, affine.LoadOp, affine.StoreOp] | Failure:
    ops = [op for op in x.body.block.ops if not isinstance(op, affine.YieldOp)]
    if len(ops) != 1 or not isinstance(inner := ops[0], affine.ForOp):
        return Failure(f"{describe(x)} holds no single inner loop")
    body = [op for op in inner.body.block.ops if not isinstance(op, affine.YieldOp)]
    load, store = body if len(body) == 2 else (None, None)
    if not isinstance(load, affine.LoadOp) or not isinstance(store, affine.StoreOp):
        return Failure(f"{describe(inner)} is no copy (one load and one store)")
    if store.value is not load.result or store.memref is load.memref:
        return Failure(f"{describe(inner)} does not copy one buffer into another")
    for loop in (x, inner):
        if constant_bounds(loop) is None or step_of(loop) != 1 or loop.results:
            return Failure(f"{describe(loop)} has no constant bounds with step 1")
    return inner, load, store


def interleave_copy(x: affine.ForOp, lanes_f32: int, partial_bytes: int = 0) -> Operation | Failure:
    """See the module docstring."""
    found = _copy(x)
    if isinstance(found, Failure):
        return found
    inner, load, store = found
    element = load.result.type
    width = _lanes(element, lanes_f32)
    (x_lo, x_hi), (k_lo, k_hi) = constant_bounds(x) or (0, 0), constant_bounds(inner) or (0, 0)
    trips, k = x_hi - x_lo, k_hi - k_lo
    if width < 4 or k < 2 or k & (k - 1) or k >= width or trips <= 0:
        return Failure(f"{describe(x)}: {k} rows do not interleave into vectors of {width} {element}")
    src, dst = _flat_form(load), _flat_form(store)
    if src is None or dst is None:
        return Failure(f"{describe(x)}: an index is not linear")
    xv, kv = induction_var(x), induction_var(inner)
    if not (src[0].get(xv) == 1 and dst[0].get(xv) == k and dst[0].get(kv) == 1 and src[0].get(kv, 0) not in (0, 1)):
        return Failure(f"{describe(x)} is no interleaving copy")
    partial = partial_bytes > 0 and width * _bits(element) == 8 * partial_bytes
    if trips % width and not partial:
        return Failure(f"{describe(x)}: {trips} columns are no multiple of {width} lanes")

    body: list[Operation] = []

    def indices(access: affine.LoadOp | affine.StoreOp, at_x: int, at_k: int) -> list[SSAValue]:
        m, old = _map_of(access)
        operands = [o for o in old if o is not xv and o is not kv]
        exprs: list[AffineExpr] = []
        for o in old:
            if o is xv or o is kv:
                exprs.append(AffineExpr.constant(at_x if o is xv else at_k))
            else:
                exprs.append(AffineExpr.dimension(operands.index(o)))
        return index_values(body, operands, [e.replace_dims_and_symbols(exprs, []) for e in m.results])

    t = VectorType(element, [width])
    lo, hi = zip_masks(width)
    for c0 in range(x_lo, x_hi, width):
        n = min(width, x_hi - c0)
        rows: list[SSAValue] = []
        for j in range(k):
            v = egpu.VLoadOp(load.memref, indices(load, c0, k_lo + j), t)
            if n < width:  # the row's last columns: the other lanes zero
                v.attributes[STORE_LANES_ATTR] = IntegerAttr(n, 64)
            body.append(v)
            rows.append(v.result)
        for stage in interleave_stages(k):
            new: list[SSAValue] = []
            for i, j in stage:
                a, b = egpu.VShuffleOp(rows[i], rows[j], lo), egpu.VShuffleOp(rows[i], rows[j], hi)
                body += [a, b]
                new += [a.result, b.result]
            rows = new
        for i, v in enumerate(rows):
            valid = min(width, k * n - i * width)
            if valid <= 0:
                break
            s = egpu.VStoreOp(v, store.memref, indices(store, c0 + i * width // k, k_lo))
            if valid < width:
                s.attributes[STORE_LANES_ATTR] = IntegerAttr(valid, 64)
            body.append(s)
    Rewriter.insert_op(body, InsertPoint.before(x))
    x.detach()
    x.erase()
    return body[0]


__all__: Sequence[str] = ["interleave_copy", "interleave_stages", "zip_masks"]
