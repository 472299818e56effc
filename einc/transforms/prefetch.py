"""Software prefetching of a tensor's next tile (`transform.einc.prefetch`).

`prefetch(loop, "X", distance)`: at the top of `loop`'s body, one `egpu.prefetch` per cache
line of the part of X's footprint box (staging.footprint: the elements X's accesses inside
the loop touch in one iteration) that iteration `i + distance * step` touches and iteration
`i + (distance - 1) * step` does not: the box's leading edge along the one dimension that
moves with the loop (a 3x3 convolution's input rows inside its output-row loop: row
`HO + distance + 1`, one row per iteration), the whole box where several dimensions move.
Where the moving dimension's index depends on the loop alone and the nearest enclosing loop
of more than one iteration moves the box in another dimension (the grouped convolution's
loop over pairs of groups around its output-row loop), the rows past the tensor's end wrap
into that loop's next iteration (`(HO + 2) % 28` of the channels 16 further on, those of
the next pair of groups: its first input rows fetched during this pair's last rows, where
they would start cold). Where that carry adds exactly one to the dimension just outside
(a loop over channel tiles wrapping into the next image's first channels: row-major, the
same address), the index is left unwrapped and clamped to the tensor's last element instead
(`_flat_carry`: no division or remainder per prefetch). Another index that may pass the tensor's end (the rows after the last iteration's, the
last outer iteration's channels) is clamped to its last element (an `affine.min`: no new condition for index-set splitting to cut the
loop at); one that may lie below 0 is guarded (`scf.if`); a constant range (a padded row's
columns) is cut to the tensor. A prefetch reads and writes nothing: the program computes the same values on every
target; C prints `__builtin_prefetch`, the other targets nothing.

`prefetch(loop, "X", distance, spread, evenly=True)`: the tile (one run of X) spread over
every iteration of the loops from `loop`'s body down to `spread`, a few elements further each
step (`_evenly`): a batched matmul's next head over this head's k steps.

Why: a grouped convolution at batch 16 reads each image's input once from DRAM, sixteen
channel rows at a time, rows of 112 bytes in planes 3 KiB apart; the hardware prefetchers
do not follow so many short streams and the hot loop waits (README, the grouped
convolution).

Contract: `distance >= 1`; X is accessed inside the loop with affine indices whose box
staging.footprint can bound (a division of inner variables, the grouped convolution's
`8 * (l floordiv 8)`, counts through its range); some dimension of the box moves with the
loop; at most MAX_PREFETCHES lines an iteration. Otherwise a Failure and the IR is
unchanged. A later `cache_read`/`cache_write` of X at a loop around the prefetch is refused
(an op other than a load or store uses X there): stage first, then prefetch.
"""

from __future__ import annotations

import dataclasses
import math

from xdsl.dialects import affine
from xdsl.dialects.builtin import AffineMapAttr, MemRefType, UnitAttr
from xdsl.ir import Operation, SSAValue
from xdsl.ir.affine import AffineExpr, AffineMap
from xdsl.rewriter import InsertPoint, Rewriter

from einc.dialects import egpu
from einc.transforms.loop_analysis import constant_bounds, induction_var, named_accesses, step_of
from einc.transforms.loop_build import Failure, _new_loop, describe
from einc.transforms.ranges import trip_count
from einc.transforms.staging import Box, Terms, _drop, _inside_tensor, _range_of, _unfold_divisions, footprint, linear_map

LINE_BYTES = 64
"""The cache line one prefetch brings (x86, Arm Neoverse)."""

MAX_PREFETCHES = 256
"""The most prefetch instructions one iteration may issue (more costs more than it hides)."""

PREFETCH_ATTR = "einc.prefetch"
"""Marks the loops of a prefetch nest (not part of the computation: schedule ops leave them)."""


def prefetch(loop: affine.ForOp, tensor: str, distance: int, spread: affine.ForOp | None = None,
             evenly: bool = False) -> list[Operation] | Failure:  # fmt: skip
    """Prefetch `tensor`'s tile of iteration `i + distance * step` at the top of `loop`'s
    body, or a slice per iteration of `spread` (`evenly`: a run per iteration of every loop
    down to it; see the module docstring). Returns the prefetch ops."""
    where = f"prefetch of '{tensor}' at {describe(loop)}"
    if distance < 1:
        return Failure(f"{where}: the distance {distance} is not a positive number of iterations")
    spread_bounds = None
    if spread is not None:
        if spread is loop or not loop.is_ancestor(spread):
            return Failure(f"{where}: {describe(spread)} to spread it over is not a loop inside it")
        spread_bounds = constant_bounds(spread)
        if spread_bounds is None or step_of(spread) != 1:
            return Failure(f"{where}: {describe(spread)} to spread it over has no constant bounds and unit step")
    step = step_of(loop)
    accs = named_accesses(loop, tensor)
    if isinstance(accs, str):
        return Failure(f"{where}: {accs}")
    buffer = accs[0].buffer
    box = footprint(loop, tensor, accs, partial=True)
    if isinstance(box, Failure):
        staged = _unfold_divisions(loop, accs, outer=True)
        if staged is None:
            return box
        box = footprint(loop, tensor, staged[0], partial=True)
        _drop(staged[0], staged[1])
        if isinstance(box, Failure):
            return box
    iv = induction_var(loop)
    moving = [d for d, terms in enumerate(box.outer) if terms.get(iv, 0) != 0]
    if not moving:
        return Failure(f"{where}: its tile does not move with the loop (nothing new to prefetch)")
    ahead = distance * step
    # the slice of each dimension to prefetch: the leading edge of the one moving dimension
    lows, highs = [0] * len(box.shape), list(box.shape)
    if len(moving) == 1:
        d = moving[0]
        shift = box.outer[d][iv] * step
        if abs(shift) < box.shape[d]:
            if shift > 0:
                lows[d] = box.shape[d] - shift
            else:
                highs[d] = -shift
    for d, (terms, low, size) in enumerate(zip(box.outer, box.low, box.sizes)):
        if not terms:  # a constant range (a padded row's columns): only its part inside the tensor
            lows[d], highs[d] = max(lows[d], -low), min(highs[d], size - low)
    if any(lo >= hi for lo, hi in zip(lows, highs)):
        return Failure(f"{where}: its tile lies outside the tensor")
    per_line = max(1, LINE_BYTES // _element_bytes(buffer))
    if evenly:
        if spread is None:
            return Failure(f"{where}: evenly without a loop to spread over")
        return _evenly(loop, spread, buffer, box, lows, highs, ahead, per_line, where)
    last = len(box.shape) - 1
    # a line every `per_line` elements and the last element (the row need not start a line)
    points = list(range(lows[last], highs[last], per_line))
    if points[-1] != highs[last] - 1:
        points.append(highs[last] - 1)
    count = len(points)
    for d in range(last):
        count *= highs[d] - lows[d]
    # spread: the innermost dimension as long as the spread loop, indexed by its iteration
    spread_d = None
    if spread is not None and spread_bounds is not None:
        trips = spread_bounds[1] - spread_bounds[0]
        spread_d = next((d for d in reversed(range(last)) if highs[d] - lows[d] == trips > 1), None)
        if spread_d is None:
            return Failure(f"{where}: no dimension of its tile ({[hi - lo for lo, hi in zip(lows, highs)]}) as long "
                           f"as {describe(spread)} ({trips} iterations) to spread it over")
        count //= trips
    if count > MAX_PREFETCHES:
        return Failure(f"{where}: {count} cache lines an iteration (at most {MAX_PREFETCHES})")
    # iteration i + ahead: the loop's variable shifted in the outer terms
    point = InsertPoint.at_start(loop.body.block if spread is None else spread.body.block)
    loops: list[affine.ForOp] = []
    ivs: list[SSAValue | None] = []
    for d in range(last):
        extent = highs[d] - lows[d]
        if d == spread_d:
            assert spread is not None
            ivs.append(induction_var(spread))
            continue
        if extent == 1:
            ivs.append(None)
            continue
        f = _new_loop((), (), lows[d], highs[d], 1, f"{tensor}_p{d}")
        f.attributes[PREFETCH_ATTR] = UnitAttr()
        Rewriter.insert_op(f, point)
        loops.append(f)
        ivs.append(induction_var(f))
        point = InsertPoint.before(f.body.block.last_op)  # type: ignore[arg-type]
    outer_vars = list(dict.fromkeys(v for terms in box.outer for v in terms))
    made: list[Operation] = []
    inside = _overhang(box, lows, highs, iv, ahead, loop)
    wrap = _wrap(loop, box, moving, inside)
    for x in points:
        forms: list[tuple[Terms, int]] = []
        for d, (terms, low) in enumerate(zip(box.outer, box.low)):
            const = low + sum(c * ahead for v, c in terms.items() if v is iv)
            var = ivs[d] if d < last else None
            if var is not None and d == spread_d:  # the spread loop's iteration `iv - lb` from lows[d]
                assert spread_bounds is not None
                forms.append(({**terms, var: 1}, const + lows[d] - spread_bounds[0]))
            elif var is not None:
                forms.append(({**terms, var: 1}, const))
            else:
                forms.append((dict(terms), const + (x if d == last else lows[d])))
        operands = [*outer_vars, *(v for v in ivs if v is not None)]
        at = point
        # past the end only (the rows after the last iteration's): clamped to the last
        # element, prefetched again (a `min`, no test: index-set splitting of the loop sees
        # no new condition); below 0 too: guarded
        guarded = dataclasses.replace(inside, overhang=[(below, past and below) for below, past in inside.overhang])
        if any(below for below, _ in inside.overhang):
            at = _inside_tensor(point, guarded, forms, operands)
        indices = []
        exprs = [linear_map([form], operands).results[0] for form in forms]
        overhang = list(inside.overhang)
        limits: list[AffineExpr | None] = [None] * len(exprs)
        flat = wrap is not None and _flat_carry(box, *wrap)
        if wrap is not None and flat:
            # the carry lands one step further in the dimension just outside (a channel past
            # the image's last is the next image's first channel): the row-major address of
            # the index past the end is the wrapped one's, so the index stays unwrapped, only
            # clamped to the tensor's last element (no division or remainder to compute)
            d = wrap[0]
            limits[d] = AffineExpr.constant(box.sizes[d - 1] * box.sizes[d] - 1) - exprs[d - 1] * box.sizes[d]
            overhang[d] = (False, False)
        elif wrap is not None:  # past the moving dimension's end: the next outer iteration's first rows
            d, outer_var, outer_shift = wrap
            carry = exprs[d] // box.sizes[d]
            exprs[d] = exprs[d] % box.sizes[d]
            overhang[d] = (False, False)
            for e, terms in enumerate(box.outer):
                if e != d and terms.get(outer_var, 0) > 0:
                    exprs[e] = exprs[e] + carry * (terms[outer_var] * outer_shift)
                    overhang[e] = (overhang[e][0], True)  # the last outer iteration's: clamped
        for expr, (below, past), size, limit in zip(exprs, overhang, box.sizes, limits):
            if limit is None and past and not below:
                limit = AffineExpr.constant(size - 1)
            indices.append(_index(operands, expr, limit, at))
        op = egpu.PrefetchOp(buffer, indices)
        Rewriter.insert_op(op, at)
        made.append(op)
    return made


def _index(operands: list[SSAValue], expr: AffineExpr, bound: AffineExpr | None, at: InsertPoint) -> SSAValue:
    """`expr` of `operands` inserted at `at`: `min(expr, bound)` where a bound clamps it."""
    m = AffineMap(len(operands), 0, (expr,) if bound is None else (expr, bound))
    index = affine.ApplyOp(operands, AffineMapAttr(m)) if bound is None else affine.MinOp(operands, AffineMapAttr(m))
    Rewriter.insert_op(index, at)
    return index.results[0]


def _element_bytes(buffer: SSAValue) -> int:
    t = buffer.type
    assert isinstance(t, MemRefType)
    width = getattr(t.get_element_type(), "bitwidth", 32)
    return max(1, width // 8)


def _enclosing(loop: affine.ForOp) -> affine.ForOp | None:
    """The nearest loop around `loop` with more than one iteration (None: none)."""
    parent = loop.parent_op()
    while parent is not None:
        if isinstance(parent, affine.ForOp) and trip_count(parent) != 1:
            return parent
        parent = parent.parent_op()
    return None


def _wrap(loop: affine.ForOp, box: Box, moving: list[int], inside: Box) -> tuple[int, SSAValue, int] | None:
    """Where the one moving dimension's prefetched slice may pass the tensor's end, its
    index is a function of `loop` alone, and the nearest enclosing loop moves the box in
    another dimension (a grouped convolution's output-row loop inside the loop over pairs of
    groups): (the dimension, that loop's variable, its step). The rows past the end are then
    the next outer iteration's first rows, which its first iterations read (the next pair's
    input rows 0 and 1, fetched during this pair's last rows), not the last row again."""
    if len(moving) != 1:
        return None
    d, iv = moving[0], induction_var(loop)
    if inside.overhang[d] != (False, True) or set(box.outer[d]) != {iv} or box.outer[d][iv] <= 0:
        return None
    outer = _enclosing(loop)
    if outer is None:
        return None
    var = induction_var(outer)
    if not any(e != d and terms.get(var, 0) > 0 for e, terms in enumerate(box.outer)):
        return None
    return d, var, step_of(outer)


def _flat_carry(box: Box, d: int, var: SSAValue, step: int) -> bool:
    """Whether `_wrap`'s carry out of dimension `d` adds exactly one to the dimension just
    outside it and to no other (the loop over pairs of groups wrapping into the next
    image's first channels): the tensor is row-major, so the unwrapped index addresses the
    same element as the wrapped one wherever the wrapped one lies inside the tensor."""
    moved = [e for e, terms in enumerate(box.outer) if e != d and terms.get(var, 0) > 0]
    return d > 0 and moved == [d - 1] and box.outer[d - 1][var] * step == 1


def _overhang(box: Box, lows: list[int], highs: list[int], iv: SSAValue, ahead: int, loop: affine.ForOp) -> Box:
    """`box` whose `overhang` says per dimension whether the prefetched slice of iteration
    `i + ahead` may lie below 0 or past the tensor's end (the guard's dimensions)."""
    overhang = []
    for d, (terms, low, size) in enumerate(zip(box.outer, box.low, box.sizes)):
        span = _range_of(terms, 0)
        assert span is not None, f"the footprint of {describe(loop)} bounds its outer terms"
        shift = sum(c * ahead for v, c in terms.items() if v is iv)
        lo, hi = span[0] + shift + low + lows[d], span[1] + shift + low + highs[d] - 1
        overhang.append((lo < 0, hi >= size))
    return dataclasses.replace(box, overhang=overhang)


def _evenly(loop: affine.ForOp, spread: affine.ForOp, buffer: SSAValue, box: Box, lows: list[int], highs: list[int],
            ahead: int, per_line: int, where: str) -> list[Operation] | Failure:  # fmt: skip
    """`prefetch(..., evenly=True)`: the tile of iteration `i + ahead` (`lows`..`highs` of
    `box`), one run of E elements in the tensor's row-major layout, spread over the T
    iterations of the loops from `loop`'s body down to `spread` (each of constant bounds):
    iteration t (their row-major position) prefetches elements `t * E / T` on, a line every
    `per_line` elements up to the next iteration's start (at least one: where E / T is
    less than a line, a line several iterations in a row; the repeats hit the line already
    coming). A batched matmul's next head (A's 64 KiB), 4 elements a k step, instead of all
    at the top of the head's first tile, where a burst of 1024 misses would stall it. The
    flat index is clamped to the tensor's last element (past the last head: that line
    again) and split into an index per dimension as `x[e floordiv 16384, (e floordiv 128)
    mod 128, e mod 128]`, which the C printer merges back into `e`."""
    sizes = box.sizes
    iv = induction_var(loop)
    # one run: the dimensions after the first of more than one element whole
    first = next((d for d in range(len(sizes)) if highs[d] - lows[d] > 1), len(sizes) - 1)
    for d in range(first + 1, len(sizes)):
        if box.outer[d] or box.low[d] + lows[d] != 0 or highs[d] - lows[d] != sizes[d]:
            return Failure(f"{where}: its tile ({[hi - lo for lo, hi in zip(lows, highs)]} of {sizes}) is not one run "
                           f"of the tensor to spread evenly")
    elements = 1
    for lo, hi in zip(lows, highs):
        elements *= hi - lo
    # the loops from the spread loop out to `loop`'s body, each iteration's row-major position
    chain: list[affine.ForOp] = []
    f: Operation | None = spread
    while f is not None and f is not loop:
        if isinstance(f, affine.ForOp):
            if constant_bounds(f) is None:
                return Failure(f"{where}: {describe(f)} has no constant bounds to spread evenly over")
            chain.append(f)
        f = f.parent_op()
    trips = [trip_count(c) or 0 for c in chain]
    total = 1
    for t in trips:
        total *= t
    if total < 1:
        return Failure(f"{where}: no iteration to spread over")
    # element offset of iteration t: t * E / T, a whole number of elements per step of each loop
    terms: Terms = {}
    const = 0
    inner = 1
    for c, t in zip(chain, trips):
        lb = constant_bounds(c)
        assert lb is not None
        num, den = inner * elements, total * step_of(c)
        if num % den:
            return Failure(f"{where}: its {elements} elements do not spread evenly over {total} iterations "
                           f"(a whole number of elements a step of {describe(c)})")
        terms[induction_var(c)] = num // den
        const -= num // den * lb[0]
        inner *= t
    per_step = elements // total
    count = max(1, -(-per_step // per_line))
    if count > MAX_PREFETCHES:
        return Failure(f"{where}: {count} cache lines an iteration (at most {MAX_PREFETCHES})")
    inside = _overhang(box, lows, highs, iv, ahead, loop)
    if any(below for below, _ in inside.overhang):
        return Failure(f"{where}: its tile may lie below the tensor's start (not spread evenly)")
    strides = [1] * len(sizes)
    for d in reversed(range(len(sizes) - 1)):
        strides[d] = strides[d + 1] * sizes[d + 1]
    # the run's first element at iteration i + ahead
    for d, (outer, low) in enumerate(zip(box.outer, box.low)):
        for v, c in outer.items():
            terms[v] = terms.get(v, 0) + c * strides[d]
        const += (low + lows[d] + sum(c * ahead for v, c in outer.items() if v is iv)) * strides[d]
    operands = list(terms)
    last = math.prod(sizes)
    point = InsertPoint.at_start(spread.body.block)
    made: list[Operation] = []
    for k in range(count):
        flat = linear_map([(terms, const + k * per_line)], operands).results[0]
        bound = AffineExpr.constant(last - 1) if any(past for _, past in inside.overhang) else None
        clamped = _index(operands, flat, bound, point)
        e = AffineExpr.dimension(0)
        indices = []
        for d, (size, stride) in enumerate(zip(sizes, strides)):
            index = e // stride if stride != 1 else e
            if d > 0:
                index = index % size
            apply = affine.ApplyOp([clamped], AffineMapAttr(AffineMap(1, 0, (index,))))
            Rewriter.insert_op(apply, point)
            indices.append(apply.results[0])
        op = egpu.PrefetchOp(buffer, indices)
        Rewriter.insert_op(op, point)
        made.append(op)
    return made
