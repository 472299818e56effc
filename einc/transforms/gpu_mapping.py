"""How a loop-level program's statements map onto GPU work-items: the analysis half of
`convert-affine-to-egpu` (the pass decides the launch shapes; `outline` builds the kernels).

A host function after `convert-ein-to-affine` is a sequence of *statements* at its top
level: `affine.for` nests and bare stores (rank-0 statements), with constants and other
side-effect-free ops floating between them, plus `memref.alloc` / `memref.dealloc` of
intermediates. Each statement becomes one kernel; an identity fill directly followed by the
reduction accumulating into the same elements becomes one kernel (each thread fills its
element, then reduces into it).

Mapping rules (`Mapping`):
- *bound* loops (attribute `einc.bind = "block.x"`, `"thread.y"`, ... set by a schedule)
  must be reached from the top of the nest through bound loops, unit loops (their variable
  is their lower bound) and pure index arithmetic (run in every work-item), else
  ScheduleError; they need a constant lower bound and an upper bound with a constant term,
  and become the work-item coordinate `lb + id * step`; the launch shape along that
  dimension is the largest trip count; a bound whose trip count varies (a partial tile:
  `min(64, N - i_o)`) is checked in the kernel. A reduction's fill joins the kernel when the
  mapped loops lead its parallel prefix (its remaining loops run in the work-item), else it
  is a kernel of its own;
- a *reduction* loop bound to a thread axis (bind_loop's cross-thread reductions) is not
  a level: it must stand below the bound levels, reached through sequential loops of the
  reduction only, with every output loop bound; its dimension of the block is its largest
  trip count, each work-item accumulates a private partial, and the block combines them
  (`cross_thread_reduce.py`);
- tensors a schedule staged in shared memory (staging.py, `einc.memory = "shared"`) become
  `egpu.alloc_shared` buffers filled cooperatively between barriers (`shared_staging.py`);
- otherwise the *parallel prefix* of the nest (the outermost loops whose iterations write
  distinct elements and read none written by another iteration) is flattened onto the
  global thread index x, with a bounds check when the grid overshoots and a grid-stride loop
  when the target's grid is too small; the remaining loops stay sequential in each thread.

Also here: the work-item coordinates the kernel builders share (`delinearize`,
`linear_thread_id`).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field

from xdsl.builder import Builder
from xdsl.dialects import affine, arith, memref
from xdsl.dialects.builtin import (
    AffineMapAttr,
    AnyFloat,
    IndexType,
    IntegerAttr,
    StringAttr,
)
from xdsl.ir import Block, Operation, SSAValue
from xdsl.ir.affine import AffineBinaryOpExpr, AffineBinaryOpKind, AffineDimExpr, AffineExpr, AffineMap
from xdsl.traits import is_side_effect_free

from einc.dialects.egpu_mma import MmaOp
from einc.dialects import egpu
from einc.dialects.ein import Combiner
from einc.errors import ScheduleError, SourceLocation
from einc.transforms.affine_index import dims_to_operands
from einc.transforms.combiner import accumulation
from einc.transforms.loop_build import describe
from einc.ir.attrs import BIND_ATTR, BIND_AXES, BIND_LOC_ATTR
from einc.transforms.loops import constant_trip_range, induction_var
from einc.transforms.ranges import Range, expr_range, max_trip_count, value_range


@dataclass
class Statement:
    """Top-level ops that form one kernel: an optional fill, then the main op."""

    main: Operation
    fill: Operation | None = None

    @property
    def ops(self) -> list[Operation]:
        return [op for op in (self.fill, self.main) if op is not None]


@dataclass(frozen=True)
class Launch:
    grid: tuple[int, int, int]
    block: tuple[int, int, int]


@dataclass
class Mapping:
    """How a statement's iterations map onto work-items."""

    launch: Launch
    loops: tuple[affine.ForOp, ...]
    """The loops replaced by work-item coordinates, outermost first."""
    bound: dict[affine.ForOp, tuple[str, egpu.Dim]] = field(default_factory=dict)
    """For bound loops: ("block" | "thread", dimension)."""
    stride: int | None = None
    """Flattened mapping: work-items in the launch (grid x block), if fewer than points."""
    reduction: CrossThread | None = None
    """A reduction loop bound to threads: the work-items along its dimension combine."""


@dataclass
class CrossThread:
    """A reduction loop a schedule bound to a thread axis (bind_loop's cross-thread
    reductions): each work-item along `dim` accumulates a private partial over its share of
    the reduction, then the block combines the partials and one work-item (`dim` id 0)
    combines the total into the output element."""

    loop: affine.ForOp
    dim: egpu.Dim
    combiner: Combiner
    load: affine.LoadOp
    """The accumulator's load and store (same element) in the reduction body."""
    store: affine.StoreOp
    threads: int
    """Work-items along `dim`: the loop's largest trip count."""
    subgroup: bool = False
    """Combine with one `egpu.subgroup_reduce` (else a tree in shared memory)."""
    cluster: int | None = None
    """With `subgroup`: the cluster size of the reduction (None: the whole subgroup)."""
    two_stage: bool = False
    """With `subgroup` along x, `threads` a multiple of `cluster` (a warp): reduce each warp,
    pass the warp totals through shared memory, reduce them in a second cluster."""


# ---- analysis ---------------------------------------------------------------------------------


def statements(body: Block) -> list[Statement]:
    """The statements of a host function body, in order; fills are paired with the
    reduction they initialise."""
    found: list[Statement] = []
    for op in body.ops:
        if isinstance(op, affine.ForOp | affine.StoreOp | memref.StoreOp):
            found.append(Statement(op))
    merged: list[Statement] = []
    for stmt in found:
        if merged and merged[-1].fill is None and _fills_for(merged[-1].main, stmt.main):
            merged[-1] = Statement(stmt.main, fill=merged[-1].main)
        else:
            merged.append(stmt)
    return merged


def perfect_chain(root: Operation) -> list[affine.ForOp]:
    """The loops of a perfect nest from `root` down (each body holds only the next loop)."""
    chain: list[affine.ForOp] = []
    op: Operation | None = root
    while isinstance(op, affine.ForOp):
        chain.append(op)
        ops = list(op.body.block.ops)
        op = ops[0] if len(ops) == 2 and isinstance(ops[0], affine.ForOp) else None
    return chain


def _access_key(op: Operation) -> tuple[AffineMap, tuple[SSAValue, ...]] | None:
    """An affine access as (map over dims only, operands); None for a memref access."""
    if isinstance(op, affine.StoreOp | affine.LoadOp):
        return dims_to_operands(op.map.data), tuple(op.indices)
    return None


def _bare_dims(key: tuple[AffineMap, tuple[SSAValue, ...]]) -> list[SSAValue]:
    m, operands = key
    return [
        operands[r.position] for r in m.results if isinstance(r, AffineDimExpr)
    ]


def _offset_range(e: AffineExpr, operands: Sequence[SSAValue], root: Operation) -> tuple[int, int] | None:
    """The range of `e` where each of its operands is the induction variable of a loop of
    constant bounds inside `root` (einc.transforms.ranges.expr_range); None for anything else."""

    def inner(v: SSAValue) -> Range:
        owner = v.owner
        loop = owner.parent_op() if isinstance(owner, Block) else None
        if isinstance(loop, affine.ForOp) and root.is_ancestor(loop) and v is induction_var(loop):
            return value_range(v)
        return None, None

    lo, hi = expr_range(e, [inner(v) for v in operands], [(None, None)] * len(operands))
    return None if lo is None or hi is None else (lo, hi)


def _owned_position(key: tuple[AffineMap, tuple[SSAValue, ...]], loop: affine.ForOp, root: Operation) -> int | None:
    """The index position of an access that holds `loop`'s variable as `iv + e`, e within
    [0, step) and free of the loop's variable (e over loops inside `root`: a register tile's
    element of the loop's `step` outputs; where the step is 1, e is 0: the bare variable,
    or a batch index `B + c0` over a unit loop of a `cache_write`'s copy), so that the
    loop's iterations touch disjoint elements; else None."""
    m, operands = key
    iv, step = induction_var(loop), loop.step.value.data
    for position, result in enumerate(m.results):
        if isinstance(result, AffineDimExpr) and operands[result.position] is iv:
            return position
        if isinstance(result, AffineBinaryOpExpr) and result.kind == AffineBinaryOpKind.Add:
            for mine, rest in ((result.lhs, result.rhs), (result.rhs, result.lhs)):
                if isinstance(mine, AffineDimExpr) and operands[mine.position] is iv:
                    span = _offset_range(rest, operands, root)
                    if span is not None and span[0] >= 0 and span[1] < step:
                        return position
    return None


def parallel_prefix(root: Operation) -> list[affine.ForOp]:
    """The outermost loops of the nest at `root` whose iterations are independent: every
    access to a buffer written in the nest holds each of these loops' variables as a whole
    index, at one index position per buffer (one and the same affine access where a loop
    counts by 1), or, for a loop counting by a step s, as `iv + e` with e in [0, s) over
    loops inside (a register tile of s outputs per iteration, e.g. a `cache_write`'s copy-in
    and copy-out). Loops must count from 0. A local buffer
    allocated inside the nest (`memref.alloca`: a staged tile, a compute_at box) does not
    count: the prefix stops at the loop whose body allocates it (the body is not a single
    loop), so each iteration of the prefix has its own."""
    stores = [op for op in root.walk() if isinstance(op, affine.StoreOp | memref.StoreOp)]
    written = {
        s.memref for s in stores
        if not (isinstance(s.memref.owner, memref.AllocaOp) and root.is_ancestor(s.memref.owner))
    }
    keys = set()
    for op in root.walk():
        if isinstance(op, affine.StoreOp | memref.StoreOp | affine.LoadOp | memref.LoadOp):
            if op.memref in written:
                key = _access_key(op)
                if key is None:
                    return []
                keys.add((op.memref, key))
    by_buffer: dict[SSAValue, set] = {}
    for buffer, key in keys:
        by_buffer.setdefault(buffer, set()).add(key)
    prefix: list[affine.ForOp] = []
    for loop in perfect_chain(root):
        bounds = constant_trip_range(loop)
        if bounds is None or bounds[0] != 0 or loop.results:
            break
        if loop.step.value.data == 1 and any(len(k) != 1 for k in by_buffer.values()):
            break
        positions = [{_owned_position(key, loop, root) for key in found} for found in by_buffer.values()]
        if not all(len(p) == 1 and None not in p for p in positions):
            break
        prefix.append(loop)
    return prefix


def _fills_for(fill: Operation, main: Operation) -> bool:
    """`fill` stores one outside value to every element of a buffer that `main` then only
    accumulates into, one element per iteration of its parallel prefix (same extents)."""
    chain = perfect_chain(fill)
    store = chain[-1].body.block.first_op if chain else fill
    if not isinstance(store, affine.StoreOp) or (chain and len(chain[-1].body.block.ops) != 2):
        return False
    if any(constant_trip_range(loop) is None for loop in chain):
        return False
    ivs = [induction_var(loop) for loop in chain]
    key = _access_key(store)
    if key is None or _bare_dims(key) != ivs or len(key[0].results) != len(ivs):
        return False
    if store.value.owner is not None and _defined_inside(store.value, fill):
        return False
    if not _reads_no_memory(store.value):  # an unrolled accumulation step, not an identity fill
        return False
    main_stores = [op for op in main.walk() if isinstance(op, affine.StoreOp | memref.StoreOp)]
    if not main_stores or any(s.memref is not store.memref for s in main_stores):
        return False
    prefix = parallel_prefix(main)
    if any(loop.step.value.data != 1 for loop in prefix):
        return False
    if [constant_trip_range(loop) for loop in prefix] != [constant_trip_range(l) for l in chain]:
        return False
    key = _access_key(main_stores[0])
    return key is not None and _bare_dims(key) == [induction_var(loop) for loop in prefix]


def _defined_inside(value: SSAValue, op: Operation) -> bool:
    owner = value.owner
    block = owner if isinstance(owner, Block) else owner.parent_block()
    while block is not None:
        parent = block.parent_op()
        if parent is op:
            return True
        block = parent.parent_block() if parent is not None else None
    return False


def _reads_no_memory(value: SSAValue) -> bool:
    """Whether `value` is computed by pure ops alone (a constant, index arithmetic): a fill
    stores such a value, while a bare store of a value read from memory (an iteration of a
    reduction that an unroll left at the top level) is a statement of its own."""
    owner = value.owner
    if isinstance(owner, Block):
        return True
    return is_pure(owner) and all(_reads_no_memory(o) for o in owner.operands)


def is_pure(op: Operation) -> bool:
    """An op a work-item may run on its own without changing what the others see."""
    return not op.regions and is_side_effect_free(op)


def _next_level(loop: affine.ForOp) -> affine.ForOp | None:
    """The one loop of `loop`'s body when every other op there is pure (index arithmetic a
    tiling left between two loops), else None."""
    loops = [op for op in loop.body.block.ops if isinstance(op, affine.ForOp)]
    others = [op for op in loop.body.block.ops if not isinstance(op, affine.ForOp | affine.YieldOp)]
    if len(loops) != 1 or not all(is_pure(op) for op in others):
        return None
    return loops[0]


def _unit_loop(loop: affine.ForOp) -> bool:
    bounds = constant_trip_range(loop)
    return bounds is not None and not loop.results and trip_count(loop) == 1


def bound_loops(
    root: Operation, reduction: CrossThread | None = None
) -> list[tuple[affine.ForOp, str | None, egpu.Dim | None]]:
    """The levels of the nest at `root` down to the innermost loop a schedule bound to a
    work-item coordinate, outermost first: (loop, "block" | "thread", dimension) for bound
    loops, (loop, None, None) for unit loops between them (their variable is their lower
    bound). Between two levels only pure ops may stand (they run in every work-item). The
    loop of `reduction` (`cross_thread_reduction`) is not a level: it is checked to stand
    below the levels, reached through sequential loops of the reduction only.
    Raises ScheduleError when a bound loop cannot be reached that way (inside a sequential
    loop, or beside other statements), or two loops are bound to the same coordinate."""
    found = [
        op for op in root.walk()
        if isinstance(op, affine.ForOp) and BIND_ATTR in op.attributes
        and (reduction is None or op is not reduction.loop)
    ]  # fmt: skip
    if not found and reduction is None:
        return []
    for loop in found:
        attr = loop.attributes[BIND_ATTR]
        if not isinstance(attr, StringAttr) or attr.data not in BIND_AXES:
            raise schedule_error(f"{describe(loop)}: {BIND_ATTR} = {attr}: expected \"block.x\" ... \"thread.z\"", loop)
    levels: list[tuple[affine.ForOp, str | None, egpu.Dim | None]] = []
    remaining = list(found)
    op: affine.ForOp | None = root if isinstance(root, affine.ForOp) else None
    while op is not None and remaining:
        if op in remaining:
            if max_trip_count(op) is None:
                raise schedule_error(
                    f"{describe(op)} is bound to {_axis(op)}: it needs a constant lower bound "
                    "and an upper bound with a constant term", op
                )
            level, dim = _axis(op).split(".")
            levels.append((op, level, egpu.Dim(dim)))
            remaining.remove(op)
        elif _unit_loop(op):
            levels.append((op, None, None))
        else:
            break
        op = _next_level(op) if remaining else None
    if remaining:
        loop = remaining[0]
        raise schedule_error(
            f"{describe(loop)} is bound to {_axis(loop)} but cannot be mapped onto work-items: "
            "a bound loop must be reached from the top of its statement through bound loops, "
            "unit loops and index arithmetic only (not inside a sequential loop or beside "
            "other statements of a loop body)", loop
        )
    seen = [(level, dim) for _, level, dim in levels if level is not None]
    if reduction is not None:
        _check_reduction_path(root, levels, reduction)
        seen.append(("thread", reduction.dim))
    if len(set(seen)) != len(seen):
        loop = reduction.loop if reduction is not None else levels[0][0]
        raise schedule_error(f"two loops of the nest of {describe(loop)} are bound to the same coordinate", loop)
    return levels


def cross_thread_reduction(root: Operation) -> CrossThread | None:
    """The reduction loop of the nest at `root` a schedule bound to a thread axis (one whose
    variable the nest's output indices do not use), or None. Raises ScheduleError when the
    nest is not one accumulation `acc = combine(acc, x)` with an associative and commutative
    combiner (bind_loop checks this; a later transform may have changed the nest) or two
    such loops are bound."""
    bound = [
        op for op in root.walk()
        if isinstance(op, affine.ForOp) and isinstance(a := op.attributes.get(BIND_ATTR), StringAttr)
        and a.data.startswith("thread.")
    ]  # fmt: skip
    stores = [
        op for op in root.walk() if isinstance(op, affine.StoreOp | memref.StoreOp)
        and not (isinstance(op.memref.owner, memref.AllocaOp) and root.is_ancestor(op.memref.owner))
    ]  # fmt: skip  (a local buffer of the nest is a work-item's own, never a shared accumulator)
    loops = [
        loop for loop in bound
        if (not stores or not all(any(_defined_inside(v, loop) for v in s.indices) for s in stores))
        and not any(isinstance(op, MmaOp) for op in loop.walk())  # its lanes own disjoint elements
    ]  # fmt: skip
    if not loops:
        return None
    loop = loops[0]
    found = accumulation(stores[0]) if len(stores) == 1 else None
    if found is None:
        raise schedule_error(
            f"{describe(loop)} is bound to {_axis(loop)} but its iterations share an "
            "accumulator that threads cannot combine (one element, combined with +, *, max or min)", loop
        )
    if len(loops) > 1:
        raise schedule_error(f"{describe(loops[1])}: a second reduction loop is bound to threads (bind one only)", loops[1])
    combiner, load = found
    store = stores[0]
    assert isinstance(store, affine.StoreOp) and isinstance(load, affine.LoadOp)
    threads = max_trip_count(loop)
    if threads is None:
        raise schedule_error(
            f"{describe(loop)} is bound to {_axis(loop)}: it needs a constant lower bound "
            "and an upper bound with a constant term", loop
        )
    return CrossThread(loop, egpu.Dim(_axis(loop).split(".")[1]), combiner, load, store, threads)


def _check_reduction_path(
    root: Operation, levels: Sequence[tuple[affine.ForOp, str | None, egpu.Dim | None]], reduction: CrossThread
) -> None:
    """The reduction's loop must be reached from below the levels through sequential loops
    whose variables the output indices do not use (the partial's own loops), each the one
    loop of its parent's body beside pure ops; no output index is computed below the levels."""
    op: affine.ForOp | None
    if levels:
        op = _next_level(levels[-1][0])
    else:
        op = root if isinstance(root, affine.ForOp) else None
    path: list[affine.ForOp] = []
    while op is not None and op is not reduction.loop:
        path.append(op)
        op = _next_level(op)
    top = path[0] if path else reduction.loop
    if op is None or any(_defined_inside(v, top) for v in reduction.store.indices):
        raise schedule_error(
            f"{describe(reduction.loop)} is a reduction loop bound to {_axis(reduction.loop)} but cannot "
            "be mapped onto work-items: the loops around it must be bound loops (every output loop "
            "among them), unit loops, and sequential loops of the reduction, each alone in its "
            "parent's body", reduction.loop
        )


def _axis(loop: affine.ForOp) -> str:
    attr = loop.attributes[BIND_ATTR]
    assert isinstance(attr, StringAttr)
    return attr.data


def schedule_error(message: str, loop: affine.ForOp | None = None) -> ScheduleError:
    """A ScheduleError at the bind op of `loop` (its `einc.bind_loc`, bind_loop records it),
    else at the loop's statement (its location; a note at each schedule op that made it),
    else at the schedule's first line (the mapping pass runs after the schedule)."""
    from einc.ir.locations import at_op

    loc = SourceLocation("<schedule>", 1, 1)
    notes: tuple[tuple[SourceLocation, str], ...] = ()
    recorded = loop.attributes.get(BIND_LOC_ATTR) if loop is not None else None
    if isinstance(recorded, StringAttr):
        loc = SourceLocation.parse(recorded.data)
    elif loop is not None:
        statement, notes = at_op(loop.location)
        loc = statement or loc
    return ScheduleError(f"convert-affine-to-egpu: {message}", loc, notes)


def narrowest_store_bytes(stmt: Statement) -> int:
    """Bytes of the narrowest element the statement stores."""
    widths = [8]
    for op in stmt.ops:
        for inner in op.walk():
            if isinstance(inner, affine.StoreOp | memref.StoreOp):
                element = inner.memref.type.get_element_type()  # type: ignore[union-attr]
                bits = element.bitwidth if isinstance(element, AnyFloat) else element.width.data
                widths.append(max(1, bits // 8))
    return min(widths)


def trip_count(loop: affine.ForOp) -> int:
    bounds = constant_trip_range(loop)
    assert bounds is not None
    step = loop.step.value.data
    return max(0, -(-(bounds[1] - bounds[0]) // step))


def flat_mapping(
    prefix: Sequence[affine.ForOp], block: int, max_grid: int
) -> Mapping:
    """The parallel prefix flattened onto x: `block` work-items per group (fewer if there are
    fewer points), at most `max_grid` groups (a grid-stride loop covers the rest)."""
    points = math.prod(trip_count(loop) for loop in prefix)
    block = max(1, min(block, points))
    grid = max(1, min(-(-points // block), max_grid))
    stride = grid * block if grid * block < points else None
    return Mapping(Launch((grid, 1, 1), (block, 1, 1)), tuple(prefix), stride=stride)


def bound_mapping(levels: Sequence[tuple[affine.ForOp, str | None, egpu.Dim | None]]) -> Mapping:
    """The launch of `bound_loops`' levels: each bound loop's largest trip count along its
    coordinate."""
    grid, block = [1, 1, 1], [1, 1, 1]
    for loop, level, dim in levels:
        if level is not None and dim is not None:
            (grid if level == "block" else block)[dim.index] = max_trip_count(loop)  # type: ignore[assignment]
    return Mapping(
        Launch(tuple(grid), tuple(block)),  # type: ignore[arg-type]
        tuple(loop for loop, _, _ in levels),
        bound={loop: (level, dim) for loop, level, dim in levels if level is not None and dim is not None},
    )


def fill_fits(stmt: Statement, mapping: Mapping) -> bool:
    """Whether the statement's fill can run in the kernel of its reduction with `mapping`:
    the mapped loops are the leading loops of the reduction's parallel prefix (the fill's
    remaining loops then run in the work-item that reduces into those elements), and mapped
    loops beyond the fill's nest have one iteration (and all count by 1: a stepped loop's work-item
    owns a register tile of outputs, which its fill does not index)."""
    if stmt.fill is None:
        return True
    chain, prefix = perfect_chain(stmt.fill), parallel_prefix(stmt.main)
    if any(loop.step.value.data != 1 for loop in mapping.loops):  # a register tile per work-item
        return False
    n = min(len(chain), len(mapping.loops))
    if list(mapping.loops[:n]) != prefix[:n]:
        return False
    return all(max_trip_count(loop) == 1 for loop in mapping.loops[len(chain):])



# ---- work-item coordinates -------------------------------------------------------------------


def index_constant(b: Builder, value: int) -> SSAValue:
    return b.insert(arith.ConstantOp(IntegerAttr(value, IndexType()))).result


def delinearize(
    b: Builder, flat: SSAValue, loops: Sequence[affine.ForOp]
) -> list[SSAValue]:
    """Row-major coordinates of `flat` in the loops' iteration space, each times its loop's
    step (the loops count from 0)."""
    extents = [trip_count(loop) for loop in loops]
    steps = [loop.step.value.data for loop in loops]
    if len(extents) == 1 and steps[0] == 1:
        return [flat]
    ivs = []
    inner = math.prod(extents)
    for k, extent in enumerate(extents):
        inner //= extent
        e: AffineExpr = AffineExpr.dimension(0)
        if inner > 1:
            e = e // inner
        if k > 0:
            e = e % extent
        if steps[k] != 1:
            e = e * steps[k]
        apply = b.insert(affine.ApplyOp([flat], AffineMapAttr(AffineMap(1, 0, (e,)))))
        apply.result.name_hint = induction_var(loops[k]).name_hint
        ivs.append(apply.result)
    return ivs


def linear_thread_id(b: Builder, sizes: tuple[int, int, int]) -> SSAValue:
    """`x + y * bx + z * bx * by` over the block's dimensions with more than one thread."""
    ids, expr = [], AffineExpr.constant(0)
    scale = 1
    for dim, size in zip(egpu.Dim, sizes):
        if size > 1:
            t = b.insert(egpu.ThreadIdOp(dim)).result
            t.name_hint = f"thread_{dim.value}"
            expr = expr + AffineExpr.dimension(len(ids)) * scale
            ids.append(t)
        scale *= size
    if not ids:
        return index_constant(b, 0)
    if len(ids) == 1:
        return ids[0]
    tid = b.insert(affine.ApplyOp(ids, AffineMapAttr(AffineMap(len(ids), 0, (expr,))))).result
    tid.name_hint = "tid"
    return tid


__all__ = [
    "BIND_ATTR",
    "CrossThread",
    "Launch",
    "Mapping",
    "Statement",
    "bound_loops",
    "bound_mapping",
    "cross_thread_reduction",
    "delinearize",
    "fill_fits",
    "flat_mapping",
    "index_constant",
    "is_pure",
    "linear_thread_id",
    "narrowest_store_bytes",
    "parallel_prefix",
    "perfect_chain",
    "schedule_error",
    "statements",
    "trip_count",
]
