"""Strip-mining a loop marked `einc.vectorize` into vector code: the mechanism behind
`einc-vectorize-loops` (einc/passes/vectorize_loops.py).

Contract of `vectorize_loop(loop, lanes_f32, element_types)`:

- Input: an innermost `affine.for` of step 1 without results, with a single-result lower
  bound (any upper bound: a constant, an affine expression, a `min` from tiling). The
  `einc.vectorize` mark is trusted to mean "no carried dependence" (transform.einc.vectorize
  checks it) except for the reduction pattern below, which the utility checks itself.
- Width W: `lanes_f32` float32 lanes scaled by element size (8-byte elements get half as
  many), the largest power of two of `VECTOR_WIDTHS` not above it, then not above the trip
  count when that is constant; the narrowest lane count over the loop's vector element
  types wins (one W per loop). Fewer than 2 lanes: no vectorization.
- Output on success: `for iv = lb to lb + W*floor((ub-lb)/W) step W` with a vector body,
  then the original loop as the scalar remainder from there to `ub` (dropped when a constant
  trip count is a multiple of W). Neither loop keeps the `einc.vectorize` mark (the pass is
  idempotent); the main loop keeps the other marks (`einc.parallel`, tags), the remainder
  (fewer than W iterations) all but `einc.parallel`.
- Body ops: `affine.load`/`affine.store` whose index is unit-stride in the loop variable
  (last index coefficient 1, the others 0) become `egpu.vload`/`egpu.vstore`; loads that do
  not depend on the loop variable stay scalar and are broadcast (`egpu.vbroadcast`) where a
  vector op uses them; a load whose last index reads the loop variable only as `iv mod k`
  (k dividing W, the vectors starting at multiples of k) and no other index reads it
  becomes `egpu.vload_repeat` (a run of k elements repeated over the lanes; where a
  vector op uses them; the elementwise arith ops of `ELEMENTWISE` apply to vectors as they
  are, the casts of `CASTS` become `egpu.vconvert`; other side-effect-free ops that do not
  depend on the loop variable are cloned as scalars, and so is an `scf.if` that only loads
  and computes from values that do not (a guarded load of a padded input, the same in
  every iteration: `_invariant_reads`).
- Reductions: `store(combine(load(B[I]), x), B[I])` with `I` invariant in the loop, `B`
  accessed nowhere else in the body and `combine` one of `REDUCTIONS`, becomes a vector
  accumulator carried by the main loop (initialised with the combiner's identity), reduced
  after it with `egpu.vreduce` and combined into `B[I]` once; the remainder loop continues
  from there. Integer add/mul/max/min and float max/min reassociate exactly. Float add/mul
  are reassociated too (W partial sums, then a lane reduction): the same licence as
  `#pragma omp simd reduction(+:...)` or `rfactor`, so the result differs from the
  sequential sum by rounding only (the tests bound it by the differential tests' tolerance).
  transform.einc.vectorize refuses loops with a carried reduction; such a loop is marked
  `einc.vectorize_reduction` instead, by `mark_reduction_loop` (transform.einc.
  vectorize_reduction, used by the default C schedule), which checks what the plain mark
  trusts. A loop with that mark the mechanism refuses stays scalar and prints no pragma
  (`omp simd` without a reduction clause would be wrong there).
- Failure (a value; the IR untouched): anything else in the body (a gather or non-unit
  stride, an op without a vector form such as a compare, a select or a math call outside
  `vector_math` (the pass passes the target's vector and lane-wise math), an element type
  outside `element_types`, nested regions other than such an `scf.if`), bounds outside the
  cases above, or no memory access to vectorize. The loop then stays scalar with its mark (C prints `omp simd`).
"""

from __future__ import annotations

import functools

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from xdsl.dialects import affine, arith, memref, scf
from xdsl.dialects.builtin import (
    AffineMapAttr,
    UnitAttr,
    AnyFloat,
    FloatAttr,
    IndexType,
    IntegerAttr,
    IntegerType,
    MemRefType,
    VectorType,
)
from xdsl.ir import Attribute, Block, Operation, Region, SSAValue, Use
from xdsl.ir.affine import AffineBinaryOpExpr, AffineBinaryOpKind, AffineConstantExpr, AffineDimExpr, AffineExpr, AffineMap
from xdsl.rewriter import InsertPoint, Rewriter
from xdsl.traits import is_side_effect_free

from einc.dialects import egpu
from einc.transforms.affine_index import dims_to_operands, index_values, shared_dims, simplify_flat
from einc.transforms.loop_analysis import constant_bounds, linear_form, step_of, uses_dim
from einc.transforms.affine_fold import compose
from einc.transforms.loop_build import Failure, describe
from einc.transforms.loop_transforms import PARALLEL_ATTR, VECTORIZE_ATTR

ELEMENTWISE: frozenset[type[Operation]] = frozenset({
    arith.AddfOp, arith.SubfOp, arith.MulfOp, arith.DivfOp, arith.NegfOp,
    arith.MaximumfOp, arith.MinimumfOp,
    arith.AddiOp, arith.SubiOp, arith.MuliOp, arith.MaxSIOp, arith.MinSIOp,
    arith.AndIOp, arith.OrIOp, arith.XOrIOp,
})  # fmt: skip
"""Ops applied to vectors as they are (same op, vector operand and result types)."""

CASTS: frozenset[type[Operation]] = frozenset({
    arith.ExtFOp, arith.TruncFOp, arith.SIToFPOp, arith.FPToSIOp, arith.ExtSIOp, arith.TruncIOp,
})  # fmt: skip
"""Conversions with C-cast semantics: `egpu.vconvert` on vectors."""

from einc.ir.attrs import REDUCTION_ATTR, STREAM_ATTR

REDUCTIONS: dict[type[Operation], egpu.ReduceKind] = {
    arith.AddfOp: egpu.ReduceKind.ADD, arith.MulfOp: egpu.ReduceKind.MUL,
    arith.MaximumfOp: egpu.ReduceKind.MAX, arith.MinimumfOp: egpu.ReduceKind.MIN,
    arith.AddiOp: egpu.ReduceKind.ADD, arith.MuliOp: egpu.ReduceKind.MUL,
    arith.MaxSIOp: egpu.ReduceKind.MAX, arith.MinSIOp: egpu.ReduceKind.MIN,
}  # fmt: skip
"""Combiners of the reduction pattern and the `egpu.vreduce` kind that finishes them."""


@dataclass
class _Access:
    """A load or store with its index flattened to one map over values defined outside the
    loop and the loop variable."""

    op: affine.LoadOp | affine.StoreOp
    map: AffineMap
    operands: list[SSAValue]
    unit: bool
    """Unit stride in the loop variable (else invariant, or runs)."""
    runs: int = 0
    """d > 0: the index moves with the loop variable only through `iv floordiv d` (each
    dividend `iv + d * (...)`): constant over each run of d iterations from a multiple of
    d (a load becomes `egpu.vbroadcast_runs` of one load per run)."""
    repeat: int = 0
    """k > 0: the last index reads the loop variable only as a term `(iv + k * (...)) mod
    k`, no other index reads it: k consecutive elements repeated over the lanes (a load
    becomes `egpu.vload_repeat`)."""


@dataclass
class _Reduction:
    load: affine.LoadOp
    combine: Operation
    store: affine.StoreOp
    value: SSAValue
    """The combine's operand that is not the accumulator."""
    access: _Access


@dataclass
class _Plan:
    loop: affine.ForOp
    width: int
    accesses: dict[Operation, _Access] = field(default_factory=dict)
    reductions: list[_Reduction] = field(default_factory=list)
    varying: set[SSAValue] = field(default_factory=set)


def _flatten(m: AffineMap, operands: Sequence[SSAValue]) -> tuple[AffineMap, list[SSAValue]]:
    m, ops = dims_to_operands(m), list(operands)
    while (folded := compose(m, ops)) is not None:
        m, ops = folded
    return m, ops


def _lanes(element: Attribute, lanes_f32: int) -> int:
    bits = element.bitwidth if isinstance(element, AnyFloat) else getattr(element, "width").data
    wanted = max(1, lanes_f32 * 32 // max(8, bits))
    fits = [w for w in egpu.VECTOR_WIDTHS if w <= wanted and w & (w - 1) == 0]
    return max(fits, default=1)


def _element(v: SSAValue | Attribute) -> Attribute:
    t = v.type if isinstance(v, SSAValue) else v
    return t.get_element_type() if isinstance(t, MemRefType) else t


def _access(op: affine.LoadOp | affine.StoreOp, iv: SSAValue, varying: set[SSAValue]) -> _Access | Failure:
    m, operands = _flatten(op.map.data, op.indices)
    for o in operands:
        if o is not iv and o in varying:
            return Failure(f"an index of {op.name} is a non-affine function of the loop variable")
    positions = [k for k, o in enumerate(operands) if o is iv]
    coefficients = []
    runs: set[int] = set()
    for k, result in enumerate(m.results):
        if not any(uses_dim(result, p) for p in positions):
            coefficients.append(0)
            continue
        form = linear_form(result, operands)
        if form is None:
            # a coalesced loop's `x[p floordiv W, p mod W]` of rows of W: consecutive in
            # the flat position; the vector starts at the first lane's (in-bounds) indices
            if _flat_coefficient(op, m, operands, iv) == 1:
                return _Access(op, m, operands, unit=True)
            if k == len(m.results) - 1 and isinstance(op, affine.LoadOp) and not runs and not any(coefficients):
                if (r := repeat_length(result, operands, iv)) is not None:
                    return _Access(op, m, operands, unit=False, repeat=r)
            d = run_length(result, operands, iv) if isinstance(op, affine.LoadOp) else None
            if d is None:
                return Failure(f"{op.name} index {k} is not linear in the loop variable (a gather)")
            runs.add(d)
            coefficients.append(0)
            continue
        coefficients.append(form[0].get(iv, 0))
    if runs:
        if len(runs) > 1 or any(coefficients):
            return Failure(f"{op.name} is not unit-stride in the loop variable (a gather)")
        return _Access(op, m, operands, unit=False, runs=runs.pop())
    if not any(coefficients):
        return _Access(op, m, operands, unit=False)
    if coefficients[-1] != 1 or any(coefficients[:-1]):
        return Failure(f"{op.name} is not unit-stride in the loop variable (a gather)")
    return _Access(op, m, operands, unit=True)


def _flat_coefficient(op: affine.LoadOp | affine.StoreOp, m: AffineMap, operands: Sequence[SSAValue], iv: SSAValue) -> int | None:
    """The coefficient of `iv` in the row-major flat position of `op`'s element (indices `m`
    over `operands`), when that position is linear in `iv` (its other terms values fixed in
    the loop); None otherwise."""
    memory = op.memref.type
    if not isinstance(memory, MemRefType):
        return None
    shape = memory.get_shape()
    shared = shared_dims(m, operands)
    flat: AffineExpr = AffineExpr.constant(0)
    stride = 1
    for e, extent in reversed(list(zip(shared.results, shape))):
        flat = e * stride + flat
        stride *= extent
    form = linear_form(simplify_flat(flat), operands)
    return None if form is None else form[0].get(iv, 0)


def run_length(e: AffineExpr, operands: Sequence[SSAValue], iv: SSAValue) -> int | None:
    """d when `e` reads the loop variable `iv` only through divisions `(iv + d * t) floordiv
    d` (t: any affine form of the other operands with integer coefficients, one d for every
    such division): then `e` is the same for the d iterations from each multiple of d. None
    otherwise."""
    found: set[int] = set()

    def visit(x: AffineExpr) -> bool:
        if isinstance(x, AffineDimExpr):
            return operands[x.position] is not iv
        if not isinstance(x, AffineBinaryOpExpr):
            return True
        if x.kind == AffineBinaryOpKind.FloorDiv and isinstance(x.rhs, AffineConstantExpr) and uses_iv(x.lhs):
            d, form = x.rhs.value, linear_form(x.lhs, operands)
            if d < 2 or form is None or form[0].get(iv) != 1 or form[1] % d:
                return False
            if any(not _multiple(v, c, d) for v, c in form[0].items() if v is not iv):
                return False
            found.add(d)
            return True
        return visit(x.lhs) and visit(x.rhs)

    def uses_iv(x: AffineExpr) -> bool:
        return any(uses_dim(x, p) for p, o in enumerate(operands) if o is iv)

    if not visit(e) or len(found) != 1:
        return None
    return found.pop()


def repeat_length(e: AffineExpr, operands: Sequence[SSAValue], iv: SSAValue) -> int | None:
    """k when `e` is a sum of terms of which exactly one reads the loop variable `iv`, and
    that one is `(iv + k * t) mod k` (coefficient 1; t: any affine form of the other
    operands with integer coefficients): over the iterations from a multiple of k, `e`
    takes k consecutive values, again and again. None otherwise."""

    def terms(x: AffineExpr) -> list[AffineExpr]:
        if isinstance(x, AffineBinaryOpExpr) and x.kind == AffineBinaryOpKind.Add:
            return terms(x.lhs) + terms(x.rhs)
        return [x]

    moving = [t for t in terms(e) if any(uses_dim(t, p) for p, o in enumerate(operands) if o is iv)]
    if len(moving) != 1:
        return None
    (t,) = moving
    if not (isinstance(t, AffineBinaryOpExpr) and t.kind == AffineBinaryOpKind.Mod and isinstance(t.rhs, AffineConstantExpr)):
        return None
    k, form = t.rhs.value, linear_form(t.lhs, operands)
    if k < 2 or form is None or form[0].get(iv) != 1 or form[1] % k:
        return None
    if any(not _multiple(v, c, k) for v, c in form[0].items() if v is not iv):
        return None
    return k


def _is_index_use(use: Use) -> bool:
    """Whether `use` is an index operand of an affine load, store or apply."""
    first = {affine.LoadOp: 1, affine.StoreOp: 2, affine.ApplyOp: 0}.get(type(use.operation))
    return first is not None and use.index >= first


def _defined_in(v: SSAValue, block: Block) -> bool:
    owner = v.owner
    if isinstance(owner, Block):
        return owner is block
    return owner.parent_block() is block


def _reduction(store_access: _Access, body: Block) -> _Reduction | Failure:
    store = store_access.op
    assert isinstance(store, affine.StoreOp)
    combine = store.value.owner
    if any(_defined_in(o, body) for o in store_access.operands):
        return Failure("the index of a reduction's accumulator is computed in the loop body")
    fail = Failure(
        f"{store.name} to an index invariant in the loop is not a reduction "
        "(acc = combine(acc, x) with add, mul, max or min)"
    )
    if not isinstance(combine, Operation) or type(combine) not in REDUCTIONS:
        return fail
    if len(list(combine.results[0].uses)) != 1:
        return fail
    for k in (0, 1):
        load = combine.operands[k].owner
        if (
            isinstance(load, affine.LoadOp)
            and load.memref is store.memref
            and load.parent_block() is body
            and len(list(load.result.uses)) == 1
        ):
            m, operands = _flatten(load.map.data, load.indices)
            if m == store_access.map and operands == store_access.operands:
                others = [
                    u.operation for u in store.memref.uses
                    if u.operation.parent_block() is body and u.operation not in (load, store)
                ]  # fmt: skip
                if others:
                    return Failure("the reduction's buffer is accessed again in the loop body")
                return _Reduction(load, combine, store, combine.operands[1 - k], store_access)
    return fail


@dataclass
class _Scan:
    """A loop body's loads and stores (in order), its reductions, and the values that vary
    with the loop variable."""

    accesses: dict[Operation, _Access]
    reductions: list[_Reduction]
    varying: set[SSAValue]


def _scan_body(
    loop: affine.ForOp,
    refuse: Callable[[str], Failure],
    visit: Callable[[Operation, _Access | None, bool], Failure | None],
) -> _Scan | Failure:
    """The body scan `_analyze` and `mark_reduction_loop` share: ops with regions are
    refused; each load and store gets its `_Access` (a load of unit stride varies), each
    store of invariant index must be a reduction (`_reduction`); the results of an op with a
    varying operand vary. `visit(op, access, varying)` sees each op in order (a load or
    store after its access; any other op with whether an operand varies) and may refuse it.
    Failures are `refuse(reason)`."""
    body = loop.body.block
    iv = body.args[0]
    scan = _Scan({}, [], {iv})
    for op in body.ops:
        if isinstance(op, affine.YieldOp):
            continue
        if op.regions:
            if not _invariant_reads(op, loop, scan.varying):
                return refuse(f"{op.name} has regions")
            if (failure := visit(op, None, False)) is not None:
                return failure
            continue
        if isinstance(op, affine.LoadOp | affine.StoreOp):
            access = _access(op, iv, scan.varying)
            if isinstance(access, Failure):
                return refuse(access.message)
            scan.accesses[op] = access
            if isinstance(op, affine.LoadOp) and (access.unit or access.runs or access.repeat):
                scan.varying.add(op.result)
            if isinstance(op, affine.StoreOp) and not access.unit:
                red = _reduction(access, body)
                if isinstance(red, Failure):
                    return refuse(red.message)
                scan.reductions.append(red)
            if (failure := visit(op, access, False)) is not None:
                return failure
            continue
        varying = any(o in scan.varying for o in op.operands)
        if (failure := visit(op, None, varying)) is not None:
            return failure
        if varying:
            scan.varying |= set(op.results)
    return scan


def _invariant_reads(op: Operation, loop: affine.ForOp, varying: set[SSAValue]) -> bool:
    """Whether an op with regions (a guarded load: `scf.if` yielding a load or a default)
    is the same in every iteration of `loop`: no operand inside or out is the loop variable
    or a value that varies, it only computes and loads (no store, no call), and nothing it
    loads is stored in the loop. It is then cloned as scalars into the vector body, like an
    invariant op without regions (a convolution's padded input, broadcast over a vector of
    output channels)."""
    stored = {o.memref for o in loop.body.walk() if isinstance(o, affine.StoreOp | memref.StoreOp)}
    for inner in op.walk():
        if any(v in varying for v in inner.operands):
            return False
        if isinstance(inner, affine.LoadOp | memref.LoadOp):
            if inner.memref in stored:
                return False
        elif inner is not op and not inner.regions and not is_side_effect_free(inner):
            return False
        elif inner is op and type(op) is not scf.IfOp:
            return False
    return True


def _analyze(
    loop: affine.ForOp, lanes_f32: int, element_types: frozenset[Attribute],
    vector_math: frozenset[type[Operation]],
) -> _Plan | Failure:
    where = describe(loop)
    if step_of(loop) != 1 or loop.results:
        return Failure(f"cannot vectorize {where}: only loops of step 1 without results")
    if len(loop.lowerBoundMap.data.results) != 1:
        return Failure(f"cannot vectorize {where}: its lower bound is a max")
    plan = _Plan(loop, 0)
    vector_types: set[Attribute] = set()

    def refuse(reason: str) -> Failure:
        return Failure(f"cannot vectorize {where}: {reason}")

    def visit(op: Operation, access: _Access | None, varying: bool) -> Failure | None:
        if access is not None:
            if access.unit or access.runs or access.repeat or isinstance(op, affine.StoreOp):  # a vector access, a reduction
                vector_types.add(_element(op.memref))  # type: ignore[attr-defined]
            return None
        if op.regions:  # an invariant guarded load (_invariant_reads): cloned as scalars
            return None
        if isinstance(op, affine.ApplyOp):
            # an index of the loop variable: folded into the accesses that use it
            if varying and not all(_is_index_use(u) for u in op.result.uses):
                return refuse("an index of the loop variable is used as a value")
            return None
        if not varying:
            if not is_side_effect_free(op):
                return refuse(f"{op.name} cannot be cloned into the vector body")
            return None
        if type(op) not in ELEMENTWISE and type(op) not in CASTS and type(op) not in vector_math:
            return refuse(f"{op.name} has no vector form")
        vector_types.update({op.results[0].type, *(o.type for o in op.operands)})
        return None

    scan = _scan_body(loop, refuse, visit)
    if isinstance(scan, Failure):
        return scan
    plan.accesses, plan.reductions, plan.varying = scan.accesses, scan.reductions, scan.varying
    for op, access in plan.accesses.items():
        if isinstance(op, affine.StoreOp) and access.unit and _element(op.memref) not in element_types:
            return refuse(f"no vectors of {_element(op.memref)} on this target")
    if not vector_types or not any(a.unit for a in plan.accesses.values()) and not plan.reductions:
        return refuse("no memory access varies with the loop variable")
    for t in vector_types:
        if t not in element_types:
            return refuse(f"no vectors of {t} on this target")
    width = min(_lanes(t, lanes_f32) for t in vector_types)
    trip = _max_trip(loop)
    if trip is not None:
        width = min(width, max([w for w in egpu.VECTOR_WIDTHS if w <= trip and w & (w - 1) == 0], default=1))
    if width < 2:
        return refuse("fewer than 2 lanes (trip count or element size)")
    for access in plan.accesses.values():
        if access.runs and not _runs_aligned(loop, access.runs, width):
            return refuse(f"{access.op.name} reads runs of {access.runs} iterations that its vectors of {width} "
                          "do not start at (a gather)")
        if access.repeat and (width % access.repeat or width == access.repeat
                              or not _runs_aligned(loop, access.repeat, width)):
            return refuse(f"{access.op.name} repeats runs of {access.repeat} elements that its vectors of {width} "
                          "do not hold whole from their first lane (a gather)")
    plan.width = width
    return plan


def _multiple(v: SSAValue, c: int, d: int) -> bool:
    """Whether `c * v` is a multiple of `d` for every value `v` takes: `c` is, or `v` is the
    variable of a loop from a constant whose start and step make it so (a tile loop `l.o`
    stepping by 16 over runs of 8)."""
    if c % d == 0:
        return True
    owner = v.owner
    if not isinstance(owner, Block) or not isinstance(loop := owner.parent_op(), affine.ForOp):
        return False
    bounds = constant_bounds(loop)
    return bounds is not None and (c * bounds[0]) % d == 0 and (c * step_of(loop)) % d == 0


def _runs_aligned(loop: affine.ForOp, d: int, width: int) -> bool:
    """Whether every vector of `width` lanes of `loop` (from its lower bound, step `width`)
    holds whole runs of `d` iterations (or lies in one): d and the width divide one another
    and the lower bound is a multiple of d whatever its operands."""
    if d % width and width % d:
        return False
    n_lb = len(loop.lowerBoundOperands)
    form = linear_form(dims_to_operands(loop.lowerBoundMap.data).results[0], loop.operands[:n_lb])
    return form is not None and form[1] % d == 0 and all(c % d == 0 for c in form[0].values())


def _max_trip(loop: affine.ForOp) -> int | None:
    """The largest trip count of a step-1 loop: constant bounds, or an upper bound (a min)
    with a result at a constant distance from the lower bound (`i = o to min(o + 32, N)`
    from tiling); None when unknown."""
    n_lb = len(loop.lowerBoundOperands)
    lb_map, ub_map = dims_to_operands(loop.lowerBoundMap.data), dims_to_operands(loop.upperBoundMap.data)
    lower = linear_form(lb_map.results[0], loop.operands[:n_lb])
    if lower is None:
        return None
    distances = []
    for result in ub_map.results:
        upper = linear_form(result, loop.operands[n_lb:])
        if upper is not None and upper[0] == lower[0]:
            distances.append(upper[1] - lower[1])
    return max(0, min(distances)) if distances else None


def _identity(kind: egpu.ReduceKind, t: Attribute) -> arith.ConstantOp:
    if isinstance(t, AnyFloat):
        value = {egpu.ReduceKind.ADD: -0.0, egpu.ReduceKind.MUL: 1.0,
                 egpu.ReduceKind.MAX: float("-inf"), egpu.ReduceKind.MIN: float("inf")}[kind]  # fmt: skip
        return arith.ConstantOp(FloatAttr(value, t))
    assert isinstance(t, IntegerType)
    bits = t.width.data
    value = {egpu.ReduceKind.ADD: 0, egpu.ReduceKind.MUL: 1,
             egpu.ReduceKind.MAX: -(1 << (bits - 1)), egpu.ReduceKind.MIN: (1 << (bits - 1)) - 1}[kind]  # fmt: skip
    return arith.ConstantOp(IntegerAttr(value, t))


def _bound_value(m: AffineMap, operands: Sequence[SSAValue], ops: list[Operation]) -> SSAValue:
    """A loop bound as one index value: the operand itself, else an affine.apply (one
    result) or affine.min (an upper bound's several results) appended to `ops`."""
    if len(m.results) == 1 and isinstance(m.results[0], AffineDimExpr):
        return operands[m.results[0].position]
    op = affine.ApplyOp(operands, AffineMapAttr(m)) if len(m.results) == 1 else affine.MinOp(operands, AffineMapAttr(m))
    ops.append(op)
    return op.results[0]


@functools.lru_cache(maxsize=256)
def _vector_type(element: Attribute, width: int) -> VectorType:
    """`vector<width x element>`, made once per element type and width (each vectorized
    loop makes several)."""
    return VectorType(element, [width])


def _map(n: int, *results: AffineExpr) -> AffineMapAttr:
    return AffineMapAttr(AffineMap(n, 0, tuple(results)))


def _load_runs(builder: list[Operation], access: _Access, mapping: dict[SSAValue, SSAValue], iv: SSAValue,
               width: int) -> SSAValue:
    """A load whose index is constant over runs of `access.runs` iterations as a vector:
    one scalar load per run (the index at `iv + r * d`) broadcast over the run's lanes
    (`egpu.vbroadcast_runs`), or one broadcast load where the vector lies in one run."""
    op = access.op
    assert isinstance(op, affine.LoadOp)
    d = access.runs
    values: list[SSAValue] = []
    for r in range(max(1, width // d)):
        shift = {p: AffineExpr.dimension(p) + r * d for p, o in enumerate(access.operands) if o is iv}
        results = tuple(e.replace_dims_and_symbols([shift.get(p, AffineExpr.dimension(p)) for p in range(access.map.num_dims)], [])
                        for e in access.map.results)  # fmt: skip
        shifted = _Access(op, AffineMap(access.map.num_dims, 0, results), access.operands, unit=False)
        load = affine.LoadOp(op.memref, _indices(builder, shifted, mapping), result_type=op.result.type)
        builder.append(load)
        values.append(load.result)
    t = _vector_type(op.result.type, width)
    splat = egpu.VBroadcastRunsOp(values, t) if len(values) > 1 else egpu.VBroadcastOp(values[0], t)
    builder.append(splat)
    return splat.result


def _indices(builder: list[Operation], access: _Access, mapping: dict[SSAValue, SSAValue]) -> list[SSAValue]:
    """One index value per result of the access's map (affine.apply ops appended)."""
    return index_values(builder, [mapping.get(o, o) for o in access.operands], access.map.results)


def vectorize_loop(
    loop: affine.ForOp, lanes_f32: int, element_types: frozenset[Attribute],
    vector_math: frozenset[type[Operation]] = frozenset(),
) -> tuple[affine.ForOp, affine.ForOp | None] | Failure:
    """Strip-mine `loop` (marked `einc.vectorize`) into a vector main loop and a scalar
    remainder (None when not needed); see the module docstring for the contract.
    `vector_math`: further elementwise ops (`math` functions) the target has vector forms of."""
    plan = _analyze(loop, lanes_f32, element_types, vector_math)
    if isinstance(plan, Failure):
        return plan
    W = plan.width
    before: list[Operation] = []
    d0, d1 = AffineExpr.dimension(0), AffineExpr.dimension(1)
    n_lb = len(loop.lowerBoundOperands)
    lb_ops, ub_ops = list(loop.operands[:n_lb]), list(loop.operands[n_lb:])
    lb_map, ub_map = loop.lowerBoundMap.data, loop.upperBoundMap.data
    bounds = constant_bounds(loop)
    tail_needed = True
    if bounds is not None:
        lo, hi = bounds
        end = lo + (hi - lo) // W * W
        tail_needed = end < hi
        main_lb: tuple[list[SSAValue], AffineMapAttr] = ([], _map(0, AffineExpr.constant(lo)))
        main_ub: tuple[list[SSAValue], AffineMapAttr] = ([], _map(0, AffineExpr.constant(end)))
        tail_lb: tuple[list[SSAValue], AffineMapAttr] = main_ub
    else:
        lb = _bound_value(dims_to_operands(lb_map), lb_ops, before)
        ub = _bound_value(dims_to_operands(ub_map), ub_ops, before)
        end = affine.ApplyOp([lb, ub], _map(2, d0 + ((d1 - d0) // W) * W))
        before.append(end)
        main_lb = ([lb], _map(1, d0))
        main_ub = ([end.result], _map(1, d0))
        # max(lb, end): no iteration when ub < lb, as in the original loop
        tail_lb = ([lb, end.result], _map(2, d0, d1))

    # reductions: vector accumulators carried by the main loop
    inits: list[SSAValue] = []
    kinds: list[egpu.ReduceKind] = []
    for red in plan.reductions:
        t = red.store.value.type
        kind = REDUCTIONS[type(red.combine)]
        identity = _identity(kind, t)
        splat = egpu.VBroadcastOp(identity.result, _vector_type(t, W))
        before += [identity, splat]
        inits.append(splat.result)
        kinds.append(kind)

    body = Block(arg_types=[IndexType(), *(v.type for v in inits)])
    old_body = loop.body.block
    body.args[0].name_hint = old_body.args[0].name_hint
    mapping: dict[SSAValue, SSAValue] = {old_body.args[0]: body.args[0]}
    vectors: dict[SSAValue, SSAValue] = {}
    ops: list[Operation] = []

    def vector(v: SSAValue) -> SSAValue:
        if v in vectors:
            return vectors[v]
        splat = egpu.VBroadcastOp(mapping.get(v, v), _vector_type(v.type, W))
        ops.append(splat)
        vectors[v] = splat.result
        return splat.result

    carried = dict(zip((r.combine for r in plan.reductions), body.args[1:]))
    skipped = {op for r in plan.reductions for op in (r.load, r.store)}
    yields: list[SSAValue] = []
    for op in old_body.ops:
        if isinstance(op, affine.YieldOp) or op in skipped:
            continue
        if op in carried:
            red = next(r for r in plan.reductions if r.combine is op)
            new = type(op).create(
                operands=[carried[op], vector(red.value)],
                result_types=[carried[op].type],
                properties=dict(op.properties),
            )
            ops.append(new)
            yields.append(new.results[0])
            continue
        access = plan.accesses.get(op)
        if access is not None and access.runs and isinstance(op, affine.LoadOp):
            vectors[op.result] = _load_runs(ops, access, mapping, old_body.args[0], W)
            continue
        if access is not None and access.repeat and isinstance(op, affine.LoadOp):
            # the first lane's indices: `iv mod k` is 0 there (the vectors start at multiples of k)
            repeat = egpu.VLoadRepeatOp(op.memref, _indices(ops, access, mapping), access.repeat,
                                        _vector_type(_element(op.memref), W))  # fmt: skip
            ops.append(repeat)
            vectors[op.result] = repeat.result
            continue
        if access is not None and access.unit:
            indices = _indices(ops, access, mapping)
            if isinstance(op, affine.LoadOp):
                vload = egpu.VLoadOp(op.memref, indices, _vector_type(_element(op.memref), W))
                ops.append(vload)
                vectors[op.result] = vload.result
            else:
                assert isinstance(op, affine.StoreOp)
                vstore = egpu.VStoreOp(vector(op.value), op.memref, indices)
                if STREAM_ATTR in op.attributes:  # transform.einc.stream_stores' mark
                    vstore.attributes[STREAM_ATTR] = op.attributes[STREAM_ATTR]
                ops.append(vstore)
            continue
        if isinstance(op, affine.ApplyOp) and op.result in plan.varying:
            continue  # folded into the accesses
        if type(op) in CASTS and op.results[0] in plan.varying:
            convert = egpu.VConvertOp(vector(op.operands[0]), _vector_type(op.results[0].type, W))
            ops.append(convert)
            vectors[op.results[0]] = convert.result
            continue
        if op.results and op.results[0] in plan.varying:
            new = type(op).create(
                operands=[vector(o) for o in op.operands],
                result_types=[_vector_type(r.type, W) for r in op.results],
                properties=dict(op.properties),
            )
            ops.append(new)
            vectors[op.results[0]] = new.results[0]
            continue
        new = op.clone(value_mapper=dict(mapping))
        ops.append(new)
        for old, res in zip(op.results, new.results):
            mapping[old] = res
    for op in ops:
        body.add_op(op)
    body.add_op(affine.YieldOp.get(*yields))

    main = affine.ForOp.from_region(
        main_lb[0], main_ub[0], inits, [v.type for v in inits],
        main_lb[1], main_ub[1], Region(body), W,
    )  # fmt: skip
    after: list[Operation] = []
    for red, kind, acc in zip(plan.reductions, kinds, main.results):
        reduced = egpu.VReduceOp(kind, acc)
        load = affine.LoadOp(red.load.memref, red.access.operands, AffineMapAttr(red.access.map), red.load.result.type)
        combine = type(red.combine).create(
            operands=[load.result, reduced.result] if red.combine.operands[0] is red.load.result else [reduced.result, load.result],
            result_types=[red.load.result.type],
            properties=dict(red.combine.properties),
        )
        store = affine.StoreOp(combine.results[0], red.store.memref, red.access.operands, AffineMapAttr(red.access.map))
        after += [reduced, load, combine, store]

    for name, value in loop.attributes.items():
        if name not in (VECTORIZE_ATTR, REDUCTION_ATTR):
            main.attributes[name] = value
    Rewriter.insert_op(before, InsertPoint.before(loop))
    Rewriter.insert_op([main, *after], InsertPoint.before(loop))
    if not tail_needed:
        Rewriter.erase_op(loop)
        return main, None
    tail = affine.ForOp.from_region(
        tail_lb[0], ub_ops, [], [], tail_lb[1], AffineMapAttr(ub_map), loop.detach_region(loop.body), 1
    )  # fmt: skip
    for name, value in loop.attributes.items():
        if name not in (VECTORIZE_ATTR, REDUCTION_ATTR, PARALLEL_ATTR):  # a short tail: no thread fork
            tail.attributes[name] = value
    Rewriter.replace_op(loop, tail)
    return main, tail


def mark_reduction_loop(loop: affine.ForOp) -> affine.ForOp | Failure:
    """Mark `loop` `einc.vectorize_reduction` (vectorized by `vectorize_loop` into vector
    partial accumulators) when its only carried dependences are reductions.

    Legal when `loop` is innermost, of step 1, without results, its body holds no op with
    regions or side effects other than affine loads and stores, at least one store has an
    index invariant in the loop and every such store is the reduction pattern of the module
    docstring (`B[I] = combine(B[I], x)`, `B` accessed nowhere else in the body), and every
    other buffer the body writes is accessed at one and the same index, unit-stride in the
    loop variable (each iteration touches its own element). Float add/mul reductions are
    reassociated when vectorized (rounding differs, as `omp simd reduction` would). Returns
    the loop, or a Failure with the IR untouched."""
    where = describe(loop)
    if any(isinstance(op, affine.ForOp) for op in loop.body.walk()):
        return Failure(f"cannot vectorize the reduction {where}: it is not an innermost loop")
    if step_of(loop) != 1 or loop.results:
        return Failure(f"cannot vectorize the reduction {where}: only loops of step 1 without results")

    def refuse(reason: str) -> Failure:
        return Failure(f"cannot vectorize the reduction {where}: {reason}")

    def visit(op: Operation, access: _Access | None, varying: bool) -> Failure | None:
        if access is None and not is_side_effect_free(op):
            return refuse(f"{op.name} has side effects")
        return None

    scan = _scan_body(loop, refuse, visit)
    if isinstance(scan, Failure):
        return scan
    by_buffer: dict[SSAValue, list[_Access]] = {}
    for op, access in scan.accesses.items():
        by_buffer.setdefault(op.memref, []).append(access)  # type: ignore[attr-defined]
    reduced = {red.store.memref for red in scan.reductions}
    if not reduced:
        return Failure(f"cannot vectorize the reduction {where}: it has no reduction (transform.einc.vectorize)")
    for buffer, accesses in by_buffer.items():
        if buffer in reduced or not any(isinstance(a.op, affine.StoreOp) for a in accesses):
            continue
        first = accesses[0]
        if any(a.map != first.map or a.operands != first.operands for a in accesses):
            return Failure(
                f"cannot vectorize the reduction {where}: it writes a buffer it also accesses "
                "at another index (a carried dependence)"
            )
    loop.attributes[REDUCTION_ATTR] = UnitAttr()
    return loop


__all__ = ["CASTS", "ELEMENTWISE", "REDUCTIONS", "REDUCTION_ATTR", "mark_reduction_loop", "run_length", "vectorize_loop"]
