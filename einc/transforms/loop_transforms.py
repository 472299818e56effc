"""Loop transformations on `affine.for` nests: the mechanism behind einc's schedule ops
(einc/dialects/einc_transform.py) and the standalone passes (einc/passes/tile_loops.py, ...).

Every function checks legality first and returns a `Failure` (a value, with the reason)
without touching the IR when the rewrite is illegal or unsupported; when it succeeds the
rewrite keeps every result identical (the same operations in the same per-element order;
only `rfactor` reassociates a reduction). Loops keep their `einc.stmt`/`einc.axis` tags;
tiling axis `A` gives loops `A.o` and `A.i`.
"""

from __future__ import annotations

from collections.abc import Sequence

from xdsl.dialects import affine, arith, memref, scf
from xdsl.dialects.builtin import (
    AffineMapAttr,
    DenseArrayBase,
    IndexType,
    IntegerAttr,
    StringAttr,
    UnitAttr,
    i32,
)
from xdsl.ir import Operation, SSAValue
from xdsl.ir.affine import AffineConstantExpr, AffineExpr, AffineMap
from xdsl.rewriter import InsertPoint, Rewriter

from einc.transforms.affine_fold import _offset_iv, fold_applies
from einc.transforms.affine_index import dims_to_operands
from einc.transforms.loop_analysis import (
    band_permutation_breaks,
    bound_operands,
    bounds_dominate,
    buffer_name,
    carried_dependence,
    constant_bounds,
    accesses,
    conflicts,
    induction_var,
    perfect_band,
    separates_all,
    step_of,
    trip_count,
    written_groups,
)
from einc.transforms.loop_build import Failure, _depends_on_loop, _new_loop, _retag, describe

# (AXIS_ATTR, STMT_ATTR: read as lt.AXIS_ATTR, lt.STMT_ATTR by the schedule code and tests)
from einc.ir.attrs import (
    AXIS_ATTR, BIND_ATTR, BIND_AXES, BIND_LOC_ATTR, PARALLEL_ATTR, STMT_ATTR, TAIL_ATTR, UNROLL_ATTR,
    VECTORIZE_ATTR,
)  # fmt: skip
from einc.transforms.ranges import max_trip_count


# ---- tile -------------------------------------------------------------------------------------


def tile_loop(loop: affine.ForOp, size: int) -> tuple[affine.ForOp, affine.ForOp] | Failure:
    """Strip-mine `loop` into `outer` (step `size * step`) and `inner` (`0` to
    `min(size * step, ub - outer)`, the min only when `size` does not divide the trip
    count): the iterations run in the same order. Always legal for a positive size."""
    if size <= 0:
        return Failure(f"tile size must be positive, got {size}")
    if len(loop.lowerBoundMap.data.results) != 1 or loop.results:
        return Failure(f"cannot tile {describe(loop)}: its lower bound is a max")
    step = step_of(loop)
    lb_ops, ub_ops = bound_operands(loop)
    ub_map = dims_to_operands(loop.upperBoundMap.data)
    width = size * step
    bounds = constant_bounds(loop)
    hint = induction_var(loop).name_hint or "i"
    outer = _new_loop(lb_ops, ub_ops, loop.lowerBoundMap.data, loop.upperBoundMap.data, width, hint + "_o")
    io = induction_var(outer)
    n = ub_map.num_dims
    if bounds is not None and (bounds[1] - bounds[0]) % width == 0:
        inner_ub: AffineMap = AffineMap(0, 0, (AffineExpr.constant(width),))
        inner_ops: list[SSAValue] = []
    else:
        results = [AffineExpr.constant(width)] + [r - AffineExpr.dimension(n) for r in ub_map.results]
        inner_ub, inner_ops = AffineMap(n + 1, 0, tuple(results)), [*ub_ops, io]
    attributes = dict(loop.attributes)
    region = loop.detach_region(loop.body)
    region.block.args[0].name_hint = hint + "_i"
    inner = affine.ForOp.from_region((), inner_ops, (), (), 0, AffineMapAttr(inner_ub), region, step)
    outer.body.block.insert_op_before(inner, outer.body.block.first_op)  # type: ignore[arg-type]
    Rewriter.replace_op(loop, outer)
    _offset_iv(region.block, io)
    fold_applies(inner)
    _retag(outer, attributes, ".o")
    _retag(inner, attributes, ".i")
    return outer, inner


# ---- reorder ------------------------------------------------------------------------------------


def _depth(op: Operation) -> int:
    d, parent = 0, op.parent_op()
    while parent is not None:
        d, parent = d + 1, parent.parent_op()
    return d


def reorder_loops(loops: Sequence[affine.ForOp]) -> list[affine.ForOp] | Failure:
    """Permute a perfect band so that `loops` (given in the wanted order, outermost first)
    run in that order. Legal when the loops form a perfect band, bounds stay dominated, and
    for every written buffer the loops that do not separate it keep their relative order.
    Returns the new loops in the given order."""
    if len({id(x) for x in loops}) != len(loops):
        return Failure("reorder lists a loop twice")
    band = sorted(loops, key=_depth)
    if not perfect_band(band) or any(
        band[k + 1].parent_op() is not band[k] for k in range(len(band) - 1)
    ):
        return Failure("reorder needs loops of one perfect nest (each body holds only the next loop)")
    order = [band.index(x) for x in loops]
    if not bounds_dominate(band, order):
        return Failure("reorder would move a loop outside the loop its bounds depend on")
    broken = band_permutation_breaks(band, order)
    if broken is not None:
        return Failure(
            f"reorder would reverse a dependence through '{buffer_name(broken)}' "
            "(the order of its reduction or non-separable loops must stay)"
        )
    return _rebuild_band(band, order)


def _rebuild_band(band: list[affine.ForOp], order: list[int]) -> list[affine.ForOp]:
    headers = []
    for loop in band:
        lb_ops, ub_ops = bound_operands(loop)
        headers.append((lb_ops, ub_ops, loop.lowerBoundMap.data, loop.upperBoundMap.data,
                        step_of(loop), dict(loop.attributes), induction_var(loop).name_hint))
    new: list[affine.ForOp] = []
    point = InsertPoint.before(band[0])
    for k in order:
        lb_ops, ub_ops, lb, ub, step, attrs, hint = headers[k]
        loop = _new_loop(lb_ops, ub_ops, lb, ub, step, hint)
        for name, value in attrs.items():
            loop.attributes[name] = value
        Rewriter.insert_op(loop, point)
        point = InsertPoint.before(loop.body.block.last_op)  # type: ignore[arg-type]
        new.append(loop)
    innermost = band[-1].body.block
    for op in list(innermost.ops)[:-1]:
        op.detach()
        Rewriter.insert_op(op, point)
    for k, loop in zip(order, new):
        induction_var(band[k]).replace_all_uses_with(induction_var(loop))
    for loop in new[:-1]:  # only an innermost loop stays vectorized
        loop.attributes.pop(VECTORIZE_ATTR, None)
    band[0].detach()
    band[0].erase()
    return new


# ---- unroll -----------------------------------------------------------------------------------


def _clone_body(loop: affine.ForOp, point: InsertPoint, iv: SSAValue) -> None:
    mapper: dict[SSAValue, SSAValue] = {induction_var(loop): iv}
    for op in list(loop.body.block.ops)[:-1]:
        Rewriter.insert_op(op.clone(value_mapper=mapper), point)


MAX_UNROLL_FACTOR = 1024
"""The largest number of copies of a body an unroll makes (the factor, or the trip count
when that is smaller); docs/SCHEDULES.md."""
MAX_UNROLLED_OPS = 1 << 16
"""The most ops an unroll may create (copies x ops of the body, nested ops included)."""


def unroll_loop(loop: affine.ForOp, factor: int) -> list[affine.ForOp] | Failure:
    """Unroll by `factor`: the body repeated `factor` times per iteration, a tail loop
    (`einc.tail`) for the remaining iterations. A factor of at least the trip count unrolls
    completely (no loop left). Needs constant bounds, and at most MAX_UNROLL_FACTOR copies
    of at most MAX_UNROLLED_OPS ops in all. A clipped tile loop (a constant lower bound, an
    upper bound `min(c, e...)` with a constant c: a tile that does not divide its axis)
    unrolls completely only (`_unroll_clipped`). Returns the loops left."""
    if clipped_bound(loop) is not None and not loop.results:
        return _unroll_clipped(loop, factor)
    failure = _constant_loop_failure("unroll", "unroll factor", loop, factor)
    if failure is not None:
        return failure
    bounds, n = constant_bounds(loop), trip_count(loop)
    assert bounds is not None and n is not None
    if factor == 1 or n == 0:
        return [loop]
    factor = min(factor, n)
    body_ops = sum(1 for _ in loop.body.walk()) - 1  # the yield is not copied
    if factor > MAX_UNROLL_FACTOR or factor * body_ops > MAX_UNROLLED_OPS:
        return Failure(
            f"unrolling {describe(loop)} by {factor} would make {factor} copies of its "
            f"{body_ops} ops ({factor * body_ops} ops); the limit is {MAX_UNROLL_FACTOR} copies "
            f"and {MAX_UNROLLED_OPS} ops (unroll by a smaller factor, or tile first)"
        )
    step, lb = step_of(loop), bounds[0]
    main_trips = n // factor
    split = lb + main_trips * factor * step
    left: list[affine.ForOp] = []
    tail = _split_at(loop, split)
    if main_trips == 1:
        point = InsertPoint.before(loop)
        for k in range(factor):
            const = arith.ConstantOp(IntegerAttr(lb + k * step, IndexType()))
            Rewriter.insert_op(const, point)
            _clone_body(loop, point, const.result)
        Rewriter.erase_op(loop)
    else:
        main = _new_loop((), (), lb, split, step * factor, induction_var(loop).name_hint)
        for name, value in loop.attributes.items():
            main.attributes[name] = value
        main.attributes[UNROLL_ATTR] = IntegerAttr(factor, 64)
        Rewriter.insert_op(main, InsertPoint.before(loop))
        body_end = InsertPoint.before(main.body.block.last_op)  # type: ignore[arg-type]
        iv = induction_var(main)
        for k in range(factor):
            if k == 0:
                _clone_body(loop, body_end, iv)
                continue
            shifted = affine.ApplyOp([iv], AffineMapAttr(AffineMap(1, 0, (AffineExpr.dimension(0) + k * step,))))
            Rewriter.insert_op(shifted, body_end)
            _clone_body(loop, body_end, shifted.result)
        Rewriter.erase_op(loop)
        fold_applies(main)
        left.append(main)
    if tail is not None:
        left.append(tail)
    return left


def clipped_bound(loop: affine.ForOp) -> tuple[int, list[AffineExpr]] | None:
    """A clipped tile loop's largest trip count and the non-constant terms of its upper
    bound's min (over the bound's operands as dims), when the loop has a constant lower
    bound and an upper bound `min(c, e...)` with at least one constant c and one other term
    (`tile_loop`'s `min(size * step, ub - outer)`); else None."""
    ub = loop.upperBoundMap.data
    n = max_trip_count(loop)
    if n is None or constant_bounds(loop) is not None or ub.num_symbols:
        return None
    terms = [r for r in ub.results if not isinstance(r, AffineConstantExpr)]
    return (n, terms) if terms else None


def _unroll_clipped(loop: affine.ForOp, factor: int) -> list[affine.ForOp] | Failure:
    """A clipped tile loop (`clipped_bound`) unrolled completely: its body once per iterate
    `v` of its largest trip count, each copy under `if (v < e)` for every non-constant term e
    of its bound (an `scf.if`; a copy whose test the loop variables' ranges decide runs
    bare, or goes). The copies index the tile with constants (a register tile's
    accumulators stay registers); only the iterations the loop ran run, in the same order."""
    found = clipped_bound(loop)
    assert found is not None
    n, terms = found
    if factor <= 0:
        return Failure(f"unroll factor must be positive, got {factor}")
    if factor < n:
        return Failure(
            f"cannot unroll {describe(loop)} by {factor}: its upper bound is a min (a partial tile), "
            f"so it unrolls completely only (by {n} or more)"
        )
    body_ops = sum(1 for _ in loop.body.walk()) - 1
    if n > MAX_UNROLL_FACTOR or n * body_ops > MAX_UNROLLED_OPS:
        return Failure(
            f"unrolling {describe(loop)} by {n} would make {n} copies of its {body_ops} ops "
            f"({n * body_ops} ops); the limit is {MAX_UNROLL_FACTOR} copies and {MAX_UNROLLED_OPS} ops"
        )
    from einc.transforms.index_split import decide  # index_split builds on this module's neighbours

    lb = loop.lowerBoundMap.data.eval([], [])[0]
    step = step_of(loop)
    ub = loop.upperBoundMap.data
    point = InsertPoint.before(loop)
    limits = []
    for term in terms:
        apply = affine.ApplyOp(list(loop.upperBoundOperands), AffineMapAttr(AffineMap(ub.num_dims, 0, (term,))))
        Rewriter.insert_op(apply, point)
        limits.append(apply.result)
    for k in range(n):
        value = arith.ConstantOp(IntegerAttr(lb + k * step, IndexType()))
        Rewriter.insert_op(value, point)
        tests: list[arith.CmpiOp] = []
        for limit in limits:
            test = arith.CmpiOp(value.result, limit, "slt")
            Rewriter.insert_op(test, point)
            tests.append(test)
        decided = [decide(t) for t in tests]
        for test in tests:
            Rewriter.erase_op(test)
        if False in decided:
            Rewriter.erase_op(value)
            continue  # an iterate the loop never reaches
        cond: SSAValue | None = None
        for limit, known in zip(limits, decided):
            if known is None:
                test = arith.CmpiOp(value.result, limit, "slt")
                Rewriter.insert_op(test, point)
                if cond is not None:
                    test = arith.AndIOp(cond, test.result)
                    Rewriter.insert_op(test, point)
                cond = test.result
        if cond is None:
            _clone_body(loop, point, value.result)
            continue
        guard = scf.IfOp(cond, [], [scf.YieldOp()])
        Rewriter.insert_op(guard, point)
        yielded = guard.true_region.block.last_op
        assert yielded is not None  # the guard's scf.yield
        _clone_body(loop, InsertPoint.before(yielded), value.result)
    Rewriter.erase_op(loop)
    for limit in limits:
        if not limit.uses and isinstance(limit.owner, Operation):
            Rewriter.erase_op(limit.owner)
    return []


def peel_loop(loop: affine.ForOp, size: int) -> tuple[affine.ForOp, affine.ForOp | None] | Failure:
    """Split a constant-bound loop where its last whole chunk of `size` iterations ends
    (MLIR's `loop.peel` for size 1 on a stepped loop: the last, partial tile goes): `loop`
    keeps the iterations before `lb + (ub - lb) // (size * step) * size * step`, a copy
    (`einc.tail`) after it runs the rest; None when the chunks divide the range. In the kept
    loop, an inner loop's `min` upper bound that the kept range decides becomes that
    constant (a tile loop's `min(6, 256 - i)` is 6 for every whole tile): tiled by `size` it
    needs no `min`, and its tile loops unroll. The iterations run in the same order: always
    legal. Returns the two loops."""
    failure = _constant_loop_failure("peel", "peel size", loop, size)
    if failure is not None:
        return failure
    bounds = constant_bounds(loop)
    assert bounds is not None
    chunk = size * step_of(loop)
    if bounds[1] - bounds[0] < chunk:
        return Failure(f"cannot peel {describe(loop)} by {size}: it runs {trip_count(loop)} iterations")
    split = bounds[0] + (bounds[1] - bounds[0]) // chunk * chunk
    tail = _split_at(loop, split)
    if tail is not None:
        _fold_decided_mins(loop)
    return loop, tail


def _constant_loop_failure(verb: str, what: str, loop: affine.ForOp, size: int) -> Failure | None:
    """Why `loop` cannot be unrolled or peeled by `size`, if it cannot."""
    if size <= 0:
        return Failure(f"{what} must be positive, got {size}")
    if constant_bounds(loop) is None or trip_count(loop) is None:
        return Failure(f"cannot {verb} {describe(loop)}: its bounds are not constant")
    if loop.results:
        return Failure(f"cannot {verb} {describe(loop)}: it carries values")
    return None


def _split_at(loop: affine.ForOp, split: int) -> affine.ForOp | None:
    """`loop` (constant bounds) ends at `split`; a copy (`einc.tail`) after it runs from
    there to the old end. None when `split` is the end already."""
    bounds = constant_bounds(loop)
    assert bounds is not None
    if split >= bounds[1]:
        return None
    tail = loop.clone()
    tail.properties["lowerBoundMap"] = AffineMapAttr(AffineMap(0, 0, (AffineExpr.constant(split),)))
    tail.attributes[TAIL_ATTR] = UnitAttr()
    Rewriter.insert_op(tail, InsertPoint.after(loop))
    loop.properties["upperBoundMap"] = AffineMapAttr(AffineMap(0, 0, (AffineExpr.constant(split),)))
    return tail


MIN_FOLD_MAX_POINTS = 4096
"""`_fold_decided_mins` evaluates a bound at every iterate of the peeled loop up to this many."""


def _fold_decided_mins(loop: affine.ForOp) -> None:
    """In `loop`'s body, a loop whose upper bound is a `min` over `loop`'s induction variable
    alone gets the constant that the min takes at every iterate of `loop`, when there is one."""
    bounds, n = constant_bounds(loop), trip_count(loop)
    if bounds is None or n is None or n > MIN_FOLD_MAX_POINTS:
        return
    iv, step = induction_var(loop), step_of(loop)
    points = range(bounds[0], bounds[1], step)
    for inner in list(loop.body.walk()):
        if not isinstance(inner, affine.ForOp) or inner is loop or inner.results:
            continue
        ub = inner.upperBoundMap.data
        if len(ub.results) < 2 or ub.num_symbols or not inner.upperBoundOperands:
            continue
        if any(operand is not iv for operand in inner.upperBoundOperands):
            continue
        values = {min(ub.eval([x] * ub.num_dims, [])) for x in points}
        if len(values) != 1:
            continue
        # in place (handles to the loop stay valid): the bound, its operands, their segments
        lower = tuple(inner.lowerBoundOperands)
        inner.properties["upperBoundMap"] = AffineMapAttr(AffineMap(0, 0, (AffineExpr.constant(values.pop()),)))
        inner.operands = lower
        inner.properties["operandSegmentSizes"] = DenseArrayBase.from_list(i32, [len(lower), 0, 0])


# ---- marks: parallel, vectorize, bind --------------------------------------------------------------


def _dependence_failure(what: str, loop: affine.ForOp) -> Failure | None:
    buffer = carried_dependence(loop)
    if buffer is None:
        return None
    return Failure(
        f"cannot {what} {describe(loop)}: its iterations both access '{buffer_name(buffer)}' "
        "(a carried dependence; split a reduction with rfactor first)"
    )


def parallelize_loop(loop: affine.ForOp) -> affine.ForOp | Failure:
    """Mark `loop` `einc.parallel` (C: `#pragma omp parallel for`) when its iterations are
    independent."""
    failure = _dependence_failure("parallelize", loop)
    if failure is not None:
        return failure
    loop.attributes[PARALLEL_ATTR] = UnitAttr()
    return loop


def vectorize_loop(loop: affine.ForOp) -> affine.ForOp | Failure:
    """Mark an innermost loop without carried dependences `einc.vectorize` (C:
    `#pragma omp simd`; a GPU/SIMD dialect lowers it properly later)."""
    if any(isinstance(op, affine.ForOp) for op in loop.body.walk()):
        return Failure(f"cannot vectorize {describe(loop)}: it is not an innermost loop")
    failure = _dependence_failure("vectorize", loop)
    if failure is not None:
        return failure
    loop.attributes[VECTORIZE_ATTR] = UnitAttr()
    return loop


def bind_loop(
    loop: affine.ForOp, axis: str, max_threads: int | None, loc: str | None = None
) -> affine.ForOp | Failure:
    """Mark `loop` `einc.bind = axis` (a GPU block or thread index), and `einc.bind_loc =
    loc` (the bind op's `file:line:col`, where convert-affine-to-egpu reports a bind it
    cannot map). Legal when its iterations are independent, or when it is a reduction loop
    bound to a thread axis that the threads can reduce together (`_cross_thread_failure`);
    and, for thread axes, the threads bound in the nest multiply to at most `max_threads`,
    counting each loop's largest trip count (a partial tile `min(32, N - i)` counts 32: the
    kernel checks the overshoot)."""
    if axis not in BIND_AXES:
        return Failure(f"unknown bind axis '{axis}' (one of {', '.join(BIND_AXES)})")
    failure = _dependence_failure("bind", loop)
    if failure is not None:
        failure = _cross_thread_failure(loop, axis)
    if failure is not None:
        return failure
    if axis.startswith("thread.") and max_threads is not None:
        threads = 1
        nest: list[affine.ForOp] = [loop]
        parent = loop.parent_op()
        while parent is not None:
            if isinstance(parent, affine.ForOp):
                nest.append(parent)
            parent = parent.parent_op()
        nest += [op for op in loop.body.walk() if isinstance(op, affine.ForOp)]
        for other in nest:
            bound = other.attributes.get(BIND_ATTR)
            if other is loop or (isinstance(bound, StringAttr) and bound.data.startswith("thread.")):
                n = max_trip_count(other)
                if n is None:
                    return Failure(f"cannot bind {describe(other)} to threads: its trip count has no constant bound")
                threads *= n
        if threads > max_threads:
            return Failure(
                f"binding {describe(loop)} to {axis} needs {threads} threads per block, "
                f"more than the limit {max_threads}"
            )
    if loc is not None:
        loop.attributes[BIND_LOC_ATTR] = StringAttr(loc)
    loop.attributes[BIND_ATTR] = StringAttr(axis)
    return loop


def _cross_thread_failure(loop: affine.ForOp, axis: str) -> Failure | None:
    """None when `loop` (whose iterations share an accumulator) may be bound to a thread
    axis as a cross-thread reduction, which convert-affine-to-egpu lowers to per-thread
    partials combined across the block: the loop's nest stores one element, `acc =
    combine(acc, x)` with an associative and commutative combiner (+, *, max, min), at
    indices that vary with no loop inside it or of itself; no other reduction loop of the
    nest is bound to threads. Else the reason."""
    from einc.transforms.combiner import accumulation

    what = f"cannot bind {describe(loop)} to {axis}"
    if not axis.startswith("thread."):
        return Failure(
            f"{what}: it is a reduction loop, and blocks cannot combine their partial results "
            "(bind it to a thread axis)"
        )
    stores = [op for op in loop.walk() if isinstance(op, affine.StoreOp | memref.StoreOp)]
    found = accumulation(stores[0]) if len(stores) == 1 else None
    if found is None:
        return Failure(
            f"{what}: its iterations share an accumulator, and threads can only reduce one "
            "element with an associative and commutative combiner (+, *, max, min)"
        )
    store, (_, load) = stores[0], found
    assert isinstance(store, affine.StoreOp)
    others = [
        op for op in loop.walk()
        if isinstance(op, affine.LoadOp | memref.LoadOp) and op.memref is store.memref and op is not load
    ]  # fmt: skip
    if others or any(_depends_on_loop(v, loop) or v is induction_var(loop) for v in store.indices):
        return Failure(f"{what}: it reads or writes its output at more than one element")
    nest = [op for op in loop.walk() if isinstance(op, affine.ForOp) and op is not loop]
    parent = loop.parent_op()
    while isinstance(parent, affine.ForOp):
        nest.append(parent)
        parent = parent.parent_op()
    for other in nest:
        bound = other.attributes.get(BIND_ATTR)
        if not (isinstance(bound, StringAttr) and bound.data.startswith("thread.")):
            continue
        if not any(_depends_on_loop(v, other) or v is induction_var(other) for v in store.indices):
            return Failure(f"{what}: {describe(other)} is a reduction loop bound to threads already (bind one only)")
    return None


# ---- fuse -------------------------------------------------------------------------------------


def fuse_loops(first: affine.ForOp, second: affine.ForOp) -> affine.ForOp | Failure:
    """Fuse two sibling loops with the same bounds: `first`'s body runs at the start of
    `second`'s body, in `second`'s place (a fill into its reduction, two nests over the same
    rows). A producer computed inside a consumer's loop of any depth (with recomputation)
    and an epilogue after a reduction's loop are compute_at / reverse_compute_at
    (einc/transforms/compute_at.py). Legal when the
    ops between them do not touch what `first` touches, and the fused loop separates every
    buffer the two share with a write."""
    if first is second or first.parent_block() is not second.parent_block():
        return Failure("fuse needs two different loops in the same block")
    block = first.parent_block()
    assert block is not None
    if block.get_operation_index(first) > block.get_operation_index(second):
        return Failure(f"fuse: {describe(first)} must come before {describe(second)}")
    same = (
        first.lowerBoundMap == second.lowerBoundMap
        and first.upperBoundMap == second.upperBoundMap
        and first.step == second.step
        and bound_operands(first) == bound_operands(second)
    )
    if not same or first.results or second.results:
        return Failure(f"cannot fuse {describe(first)} and {describe(second)}: different bounds")
    op = first.next_op
    while op is not None and op is not second:
        if (buffer := conflicts(first, op)) is not None:
            return Failure(
                f"cannot fuse {describe(first)} into {describe(second)}: an operation between "
                f"them also accesses '{buffer_name(buffer)}'"
            )
        op = op.next_op
    groups_1, groups_2 = written_groups(first), written_groups(second)
    all_1, all_2 = accesses(first), accesses(second)
    shared = {a.buffer for a in all_1} & {a.buffer for a in all_2}
    for buffer in shared:
        if buffer not in groups_1 and buffer not in groups_2:
            continue
        items = [(induction_var(first), first, a) for a in all_1 if a.buffer is buffer]
        items += [(induction_var(second), second, a) for a in all_2 if a.buffer is buffer]
        if not separates_all(items, step_of(first)):
            return Failure(
                f"cannot fuse {describe(first)} into {describe(second)}: iterations would "
                f"read '{buffer_name(buffer)}' before it is written"
            )
    target = second.body.block
    anchor = target.first_op
    for inner in list(first.body.block.ops)[:-1]:
        inner.detach()
        target.insert_op_before(inner, anchor)  # type: ignore[arg-type]
    induction_var(first).replace_all_uses_with(induction_var(second))
    Rewriter.erase_op(first)
    return second
