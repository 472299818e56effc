"""Outlining a loop-level program into device kernels: the mechanism of
`convert-affine-to-egpu` (the pass decides the launch shapes; this builds the IR).

A host function after `convert-ein-to-affine` is a sequence of *statements* at its top
level: `affine.for` nests and bare stores (rank-0 statements), with constants and other
side-effect-free ops floating between them, plus `memref.alloc` / `memref.dealloc` of
intermediates. Each statement becomes one kernel; an identity fill directly followed by the
reduction accumulating into the same elements becomes one kernel (each thread fills its
element, then reduces into it). A local buffer (`memref.alloca`) left at the top level, with
the statements filling and reading it, becomes one kernel too (`enclose_private_buffers`):
a private array never crosses kernels.

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
  (`_cross_thread`: a shared-memory tree, or one `egpu.subgroup_reduce` where the pass
  says the target can);
- tensors a schedule staged in shared memory (cache.py, `einc.memory = "shared"`) become
  `egpu.alloc_shared` buffers filled cooperatively between barriers (`stage_shared`);
- otherwise the *parallel prefix* of the nest (the outermost loops whose iterations write
  distinct elements and read none written by another iteration) is flattened onto the
  global thread index x, with a bounds check when the grid overshoots and a grid-stride loop
  when the target's grid is too small; the remaining loops stay sequential in each thread.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from xdsl.builder import Builder
from xdsl.dialects import affine, arith, func, memref, scf
from xdsl.dialects.builtin import (
    AnyFloat,
    DictionaryAttr,
    IndexType,
    IntegerAttr,
    MemRefType,
    StringAttr,
)
from xdsl.ir import Attribute, Block, Operation, Region, SSAValue
from xdsl.ir.affine import AffineConstantExpr, AffineDimExpr, AffineExpr, AffineMap
from xdsl.rewriter import InsertPoint, Rewriter
from xdsl.traits import is_side_effect_free

from einc.dialects import egpu
from einc.errors import ScheduleError, SourceLocation
from einc.passes.utils.affine_index import dims_to_operands
from einc.passes.utils.cache import MEMORY_ATTR, SHARED_COPY_ATTR
from einc.dialects.ein import Combiner
from einc.passes.utils.combiner import accumulation, build_combine, identity_constant
from einc.passes.utils.loop_transforms import BIND_ATTR, BIND_AXES, BIND_LOC_ATTR, describe
from einc.passes.utils.loops import constant_trip_range, induction_var
from einc.ir.attrs import NAME_ATTR


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


_STATEMENT_OPS = (affine.ForOp, affine.StoreOp, memref.StoreOp)


def enclose_private_buffers(host: Block) -> None:
    """Keep each local buffer of the host's top level in one kernel. A `memref.alloca` is a
    private array of one work-item; at the top level (the loop whose iteration it belonged to
    was unrolled away) the statements that fill and read it would become kernels of their
    own, each with its own uninitialised copy. The top-level ops from the buffer to the last
    one that depends on it (through the buffer or through values computed from it) move, in
    order, into a loop of one iteration: one statement, one kernel, one work-item. Left in
    place: host allocations, and pure ops of values computed before (constants, index
    arithmetic: the kernel clones them); deallocations in the span follow the new loop."""
    for alloca in [op for op in host.ops if _is_private_alloca(op)]:
        if alloca.parent_block() is not host:  # moved with an earlier buffer's span
            continue
        span = _dependent_span(host, alloca)
        if sum(isinstance(op, _STATEMENT_OPS) for op in span) < 2:
            continue  # one statement: its kernel clones the buffer and the ops it needs
        inside = set(span)
        body = Block(arg_types=[IndexType()])
        body.args[0].name_hint = "once"
        body.add_op(affine.YieldOp.get())
        once = affine.ForOp.from_region((), (), (), (), 0, 1, Region(body), 1)
        Rewriter.insert_op(once, InsertPoint.after(span[-1]))
        after: Operation = once
        for op in span:
            if isinstance(op, memref.DeallocOp):
                op.detach()
                Rewriter.insert_op(op, InsertPoint.after(after))
                after = op
            elif isinstance(op, memref.AllocOp) or (
                _pure(op) and not any(o.owner in inside for o in op.operands)
            ):
                inside.discard(op)
            else:
                op.detach()
                body.insert_op_before(op, body.last_op)  # type: ignore[arg-type]


def _is_private_alloca(op: Operation) -> bool:
    return isinstance(op, memref.AllocaOp) and op.attributes.get(MEMORY_ATTR) != StringAttr("shared")


def _dependent_span(host: Block, alloca: Operation) -> list[Operation]:
    """The top-level ops of `host` from `alloca` to the last one that uses the buffer or a
    value computed, in the span, from it (closed: every use of a value the span defines is
    in the span)."""
    ops = list(host.ops)
    position = {op: k for k, op in enumerate(ops)}

    def top(op: Operation) -> Operation:
        while op.parent_block() is not host:
            op = op.parent_op()  # type: ignore[assignment]
        return op

    start = end = position[alloca]
    k = start
    while k <= end:
        for inner in ops[k].walk():
            for result in inner.results:
                for use in result.uses:
                    end = max(end, position[top(use.operation)])
        k += 1
    return ops[start : end + 1]


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


def parallel_prefix(root: Operation) -> list[affine.ForOp]:
    """The outermost loops of the nest at `root` whose iterations are independent: every
    access to a buffer written in the nest is one and the same affine access, holding each
    of these loops' variables as a whole index. Loops must count 0..n by 1. A local buffer
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
    if any(len(k) != 1 for k in by_buffer.values()):
        return []
    prefix: list[affine.ForOp] = []
    for loop in perfect_chain(root):
        bounds = constant_trip_range(loop)
        if bounds is None or bounds[0] != 0 or loop.step.value.data != 1 or loop.results:
            break
        iv = induction_var(loop)
        if not all(iv in _bare_dims(key) for _, key in keys):
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
    return _pure(owner) and all(_reads_no_memory(o) for o in owner.operands)


def _pure(op: Operation) -> bool:
    """An op a work-item may run on its own without changing what the others see."""
    return not op.regions and is_side_effect_free(op)


def _next_level(loop: affine.ForOp) -> affine.ForOp | None:
    """The one loop of `loop`'s body when every other op there is pure (index arithmetic a
    tiling left between two loops), else None."""
    loops = [op for op in loop.body.block.ops if isinstance(op, affine.ForOp)]
    others = [op for op in loop.body.block.ops if not isinstance(op, affine.ForOp | affine.YieldOp)]
    if len(loops) != 1 or not all(_pure(op) for op in others):
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
        if not stores or not all(any(_defined_inside(v, loop) for v in s.indices) for s in stores)
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
    else at the schedule's first line (the mapping pass runs after the schedule)."""
    loc = SourceLocation("<schedule>", 1, 1)
    recorded = loop.attributes.get(BIND_LOC_ATTR) if loop is not None else None
    if isinstance(recorded, StringAttr):
        file, line, col = recorded.data.rsplit(":", 2)
        loc = SourceLocation(file, int(line), int(col))
    return ScheduleError(f"convert-affine-to-egpu: {message}", loc)


def max_trip_count(loop: affine.ForOp) -> int | None:
    """The trip count of a loop with a constant lower bound, the largest one when its upper
    bound is a min with a constant term; None otherwise."""
    lb, ub = loop.lowerBoundMap.data, loop.upperBoundMap.data
    if lb.num_dims or lb.num_symbols or len(lb.results) != 1:
        return None
    lower = lb.eval([], [])[0]
    constants = [r.value for r in ub.results if isinstance(r, AffineConstantExpr)]
    if not constants:
        return None
    return max(0, -(-(min(constants) - lower) // loop.step.value.data))


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
    loops beyond the fill's nest have one iteration."""
    if stmt.fill is None:
        return True
    chain, prefix = perfect_chain(stmt.fill), parallel_prefix(stmt.main)
    n = min(len(chain), len(mapping.loops))
    if list(mapping.loops[:n]) != prefix[:n]:
        return False
    return all(max_trip_count(loop) == 1 for loop in mapping.loops[len(chain):])


# ---- building ---------------------------------------------------------------------------------


def _buffer_name(value: SSAValue) -> str | None:
    owner = value.owner
    if isinstance(owner, memref.AllocOp):
        name = owner.attributes.get(NAME_ATTR)
        return name.data if isinstance(name, StringAttr) else None
    if isinstance(owner, Block) and isinstance(f := owner.parent_op(), func.FuncOp):
        if f.arg_attrs is not None:
            name = f.arg_attrs.data[value.index].data.get(NAME_ATTR)  # type: ignore[attr-defined]
            return name.data if isinstance(name, StringAttr) else None
    return value.name_hint


def _host_values(stmt: Statement, host: Block) -> tuple[list[SSAValue], list[Operation]]:
    """The buffers the statement uses (host block arguments and allocations, in order) and
    the floating host ops it needs, in program order."""
    needed: set[Operation] = set()
    buffers: set[SSAValue] = set()

    def visit(value: SSAValue) -> None:
        owner = value.owner
        if isinstance(owner, Block):
            if owner is host:
                buffers.add(value)
            return
        if owner.parent_block() is not host:
            return
        if isinstance(owner, memref.AllocOp):
            buffers.add(value)
            return
        if owner in needed:
            return
        needed.add(owner)
        for o in owner.operands:
            visit(o)
        for inner in owner.walk():
            for o in inner.operands:
                visit(o)

    for op in stmt.ops:
        for inner in op.walk():
            for o in inner.operands:
                visit(o)
    order = {op: k for k, op in enumerate(host.ops)}
    args = [a for a in host.args if a in buffers]
    allocs = sorted((b for b in buffers if b not in host.args), key=lambda b: order[b.owner])  # type: ignore[index]
    floating = sorted(needed, key=order.__getitem__)
    return args + allocs, floating


def _delinearize(
    b: Builder, flat: SSAValue, loops: Sequence[affine.ForOp]
) -> list[SSAValue]:
    """Row-major coordinates of `flat` in the loops' iteration space."""
    extents = [trip_count(loop) for loop in loops]
    if len(extents) == 1:
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
        apply = b.insert(affine.ApplyOp([flat], affine.AffineMapAttr(AffineMap(1, 0, (e,)))))
        apply.result.name_hint = induction_var(loops[k]).name_hint
        ivs.append(apply.result)
    return ivs


def _index_constant(b: Builder, value: int) -> SSAValue:
    return b.insert(arith.ConstantOp(IntegerAttr(value, IndexType()))).result


def outline(
    stmt: Statement, mapping: Mapping, name: str, host: Block
) -> tuple[egpu.FuncOp, list[SSAValue]]:
    """Build the kernel `name` computing `stmt` with `mapping`; returns it and the host
    buffers to launch it with. The statement's ops are left in place (the caller erases
    them)."""
    buffers, floating = _host_values(stmt, host)
    arg_attrs = [
        DictionaryAttr({NAME_ATTR: StringAttr(n)} if (n := _buffer_name(v)) else {})
        for v in buffers
    ]
    kernel = egpu.FuncOp(name, [v.type for v in buffers], mapping.launch.grid,
                         mapping.launch.block, arg_attrs=arg_attrs)  # fmt: skip
    block = kernel.body.block
    mapper: dict[SSAValue, SSAValue] = {}
    for value, arg in zip(buffers, block.args):
        arg.name_hint = _buffer_name(value)
        mapper[value] = arg
    b = Builder(InsertPoint.at_end(block))
    # Without loops a reduction's body floats here too: its fill must come before its first
    # read of memory (the accumulator load), as it does on the host.
    early_fill = stmt.fill is not None and not mapping.loops
    for op in floating:
        if early_fill and isinstance(op, affine.LoadOp | memref.LoadOp):
            b.insert(stmt.fill.clone(mapper))  # type: ignore[union-attr]
            early_fill = False
        b.insert(op.clone(mapper))
    fill_pending = stmt.fill is not None and (bool(mapping.loops) or early_fill)

    # the work-item's point, and the ops that run there
    body: Builder = b
    staged = has_shared_staging(stmt)
    if staged and not mapping.bound:
        raise schedule_error("a tensor staged in shared memory needs loops bound to GPU blocks or threads")
    reduction = mapping.reduction
    if staged and reduction is not None:
        raise schedule_error(
            f"{describe(reduction.loop)} is a reduction bound to threads: staging a tensor in shared "
            "memory in its statement is not supported", reduction.loop
        )
    conds: list[SSAValue] = []  # staged, reduction: the partial-tile checks, applied later
    if mapping.bound or reduction is not None:
        for k, loop in enumerate(mapping.loops):
            lower = loop.lowerBoundMap.data.eval([], [])[0]
            if loop in mapping.bound:
                level, dim = mapping.bound[loop]
                index_op = egpu.BlockIdOp(dim) if level == "block" else egpu.ThreadIdOp(dim)
                coordinate = b.insert(index_op).result
                step = loop.step.value.data
                coordinate.name_hint = induction_var(loop).name_hint
                if lower or step != 1:
                    coordinate.name_hint = f"{level}_{dim.value}"
                    m = AffineMap(1, 0, (AffineExpr.dimension(0) * step + lower,))
                    coordinate = b.insert(affine.ApplyOp([coordinate], affine.AffineMapAttr(m))).result
                    coordinate.name_hint = induction_var(loop).name_hint
            else:  # a unit loop between bound loops: its one value
                coordinate = _index_constant(b, lower)
                coordinate.name_hint = induction_var(loop).name_hint
            mapper[induction_var(loop)] = coordinate
            if k + 1 < len(mapping.loops):  # index arithmetic between two mapped loops
                for op in loop.body.block.ops:
                    if op is not mapping.loops[k + 1] and not isinstance(op, affine.YieldOp):
                        b.insert(op.clone(mapper))
        for loop in mapping.loops:
            coordinate = mapper[induction_var(loop)]
            if constant_trip_range(loop) is None:  # a partial tile: check the upper bound
                n_lb = len(loop.lowerBoundOperands)
                operands = [mapper.get(o, o) for o in loop.operands[n_lb:]]
                upper = body.insert(affine.MinOp(operands, loop.upperBoundMap)).result
                cond = body.insert(arith.CmpiOp(coordinate, upper, "slt")).result
                if staged or reduction is not None:
                    conds.append(cond)
                else:
                    guard = body.insert(scf.IfOp(cond, [], [scf.YieldOp()]))
                    body = Builder(InsertPoint.before(guard.true_region.block.last_op))  # type: ignore[arg-type]
    elif mapping.loops:
        points = math.prod(trip_count(loop) for loop in mapping.loops)
        gid = b.insert(egpu.GlobalIdOp(egpu.Dim.X)).result
        single = len(mapping.loops) == 1 and mapping.stride is None
        gid.name_hint = induction_var(mapping.loops[0]).name_hint if single else "gid"
        launched = math.prod(mapping.launch.grid) * math.prod(mapping.launch.block)
        flat = gid
        if mapping.stride is not None:
            step_block = Block(arg_types=[IndexType()])
            step_block.args[0].name_hint = (
                induction_var(mapping.loops[0]).name_hint if len(mapping.loops) == 1 else "point"
            )
            step_block.add_op(scf.YieldOp())
            b.insert(scf.ForOp(gid, _index_constant(b, points), _index_constant(b, mapping.stride), [],
                               Region(step_block)))  # fmt: skip
            flat = step_block.args[0]
            body = Builder(InsertPoint.before(step_block.last_op))  # type: ignore[arg-type]
        elif launched > points:
            cond = b.insert(arith.CmpiOp(gid, _index_constant(b, points), "slt")).result
            guard = b.insert(scf.IfOp(cond, [], [scf.YieldOp()]))
            body = Builder(InsertPoint.before(guard.true_region.block.last_op))  # type: ignore[arg-type]
        for loop, iv in zip(mapping.loops, _delinearize(body, flat, mapping.loops)):
            mapper[induction_var(loop)] = iv

    if reduction is not None:
        start = list(mapping.loops[-1].body.block.ops) if mapping.loops else [stmt.main]
        _cross_thread(b, start, mapper, stmt, mapping, conds, kernel)
        b.insert(egpu.ReturnOp())
        return kernel, buffers

    if fill_pending:
        assert stmt.fill is not None
        chain = perfect_chain(stmt.fill)
        store = chain[-1].body.block.first_op if chain else stmt.fill
        assert store is not None
        for fill_loop, loop in zip(chain, mapping.loops):
            mapper[induction_var(fill_loop)] = mapper[induction_var(loop)]
        if len(chain) > len(mapping.loops):  # the fill's remaining loops run in this work-item
            body.insert(chain[len(mapping.loops)].clone(mapper))
        else:
            body.insert(store.clone(mapper))

    inner = mapping.loops[-1].body.block.ops if mapping.loops else [stmt.main]
    for op in inner:
        if isinstance(op, affine.YieldOp):
            continue
        body.insert(op.clone(mapper))
    if staged:
        stage_shared(kernel, mapping.launch, conds)
    b.insert(egpu.ReturnOp())
    return kernel, buffers


# ---- cross-thread reductions ------------------------------------------------------------------

_REDUCE_KINDS = {Combiner.ADD: egpu.ReduceKind.ADD, Combiner.MUL: egpu.ReduceKind.MUL,
                 Combiner.MAX: egpu.ReduceKind.MAX, Combiner.MIN: egpu.ReduceKind.MIN}  # fmt: skip


def _cross_thread(
    b: Builder, start: Sequence[Operation], mapper: dict[SSAValue, SSAValue], stmt: Statement,
    mapping: Mapping, conds: Sequence[SSAValue], kernel: egpu.FuncOp,
) -> None:
    """Build, at `b` (the work-item's point: its mapped coordinates are in `mapper`), the
    kernel body of a statement with a reduction loop bound to threads (`mapping.reduction`);
    `start` holds the ops below the mapped levels, `conds` the partial-tile checks of the
    mapped loops. Every work-item:
    1. accumulates a private partial from the combiner's identity over its share of the
       reduction (the loops around the bound loop run in it, carrying the partial; the bound
       loop's variable is `lb + thread id * step`; a work-item past a partial tile, or whose
       output element is out of range, contributes the identity);
    2. combines the partials of its block's work-items along the reduction's dimension:
       `egpu.subgroup_reduce` (`reduction.subgroup`), or a tree in an `egpu.alloc_shared`
       array (one slot per work-item; `ceil(log2 n)` halving steps, each a guarded combine
       then `egpu.barrier`, which every work-item reaches);
    3. the work-item with id 0 along the dimension (and an output element in range) runs the
       statement's fill if it has one, then combines the total into the output element."""
    red = mapping.reduction
    assert red is not None
    element = red.store.value.type
    tid = b.insert(egpu.ThreadIdOp(red.dim)).result
    tid.name_hint = f"thread_{red.dim.value}"
    identity = b.insert(identity_constant(red.combiner, element)).result
    in_range: SSAValue | None = None
    for cond in conds:
        in_range = cond if in_range is None else b.insert(arith.AndIOp(in_range, cond)).result
    loops = [op for op in start if isinstance(op, affine.ForOp)]
    for op in start:  # index arithmetic below the levels: every work-item runs it
        if not isinstance(op, affine.ForOp | affine.YieldOp):
            b.insert(op.clone(mapper))
    assert len(loops) == 1

    def accumulate(inner: Builder) -> SSAValue:
        return _accumulate(inner, loops[0], mapper, identity, red, tid)

    partial = accumulate(b) if in_range is None else _select_region(b, in_range, element, accumulate, identity)
    partial.name_hint = "partial"

    total: SSAValue | Callable[[Builder], SSAValue]
    if red.threads == 1:
        total = partial
    elif red.subgroup and red.two_stage:
        total = _two_stage(b, partial, tid, identity, red, mapping.launch, kernel)
    elif red.subgroup:
        total = b.insert(egpu.SubgroupReduceOp(_REDUCE_KINDS[red.combiner], partial, red.cluster)).result
        total.name_hint = "total"
    else:
        total = _tree(b, partial, tid, red, mapping.launch, kernel)

    first = b.insert(arith.CmpiOp(tid, _index_constant(b, 0), "eq")).result
    if in_range is not None:
        first = b.insert(arith.AndIOp(first, in_range)).result
    guard = b.insert(scf.IfOp(first, [], [scf.YieldOp()]))
    inner = Builder(InsertPoint.before(guard.true_region.block.last_op))  # type: ignore[arg-type]
    value = total if isinstance(total, SSAValue) else total(inner)
    if stmt.fill is not None:  # the fill's loops beyond the mapped ones run here
        chain = perfect_chain(stmt.fill)
        store = chain[-1].body.block.first_op if chain else stmt.fill
        assert store is not None
        for fill_loop, loop in zip(chain, mapping.loops):
            mapper[induction_var(fill_loop)] = mapper[induction_var(loop)]
        inner.insert(chain[len(mapping.loops)].clone(mapper) if len(chain) > len(mapping.loops) else store.clone(mapper))
    acc = inner.insert(red.load.clone(mapper)).results[0]
    mapper[red.store.value] = build_combine(inner, red.combiner, acc, value)
    inner.insert(red.store.clone(mapper))


def _accumulate(
    b: Builder, op: affine.ForOp, mapper: dict[SSAValue, SSAValue], acc: SSAValue,
    red: CrossThread, tid: SSAValue,
) -> SSAValue:
    """Clone the loop `op` of the reduction's nest at `b`, its accumulator carried in
    registers from `acc` (the loads of the output element read the carried value, the
    store updates it): a sequential loop carries it as an `iter_args` value; the bound loop
    becomes the work-item's coordinate, under a check when it is a partial tile. Returns the
    accumulator after `op`."""
    if op is red.loop:
        step, lower = op.step.value.data, op.lowerBoundMap.data.eval([], [])[0]
        coordinate = tid
        if lower or step != 1:
            m = AffineMap(1, 0, (AffineExpr.dimension(0) * step + lower,))
            coordinate = b.insert(affine.ApplyOp([tid], affine.AffineMapAttr(m))).result
        mapper[induction_var(op)] = coordinate
        body = list(op.body.block.ops)
        if constant_trip_range(op) is not None:
            return _carry(b, body, mapper, acc, red, tid)
        n_lb = len(op.lowerBoundOperands)
        upper = b.insert(affine.MinOp([mapper.get(o, o) for o in op.operands[n_lb:]], op.upperBoundMap)).result
        cond = b.insert(arith.CmpiOp(coordinate, upper, "slt")).result
        return _select_region(b, cond, acc.type, lambda inner: _carry(inner, body, mapper, acc, red, tid), acc)
    n_lb, n_ub = len(op.lowerBoundOperands), len(op.upperBoundOperands)
    operands = [mapper.get(o, o) for o in op.operands[: n_lb + n_ub]]
    block = Block(arg_types=[IndexType(), acc.type])
    block.args[0].name_hint = induction_var(op).name_hint
    block.args[1].name_hint = "partial"
    loop = b.insert(affine.ForOp.from_region(
        operands[:n_lb], operands[n_lb:], [acc], [acc.type], op.lowerBoundMap, op.upperBoundMap,
        Region(block), op.step,
    ))  # fmt: skip
    mapper[induction_var(op)] = block.args[0]
    inner = Builder(InsertPoint.at_end(block))
    inner.insert(affine.YieldOp.get(_carry(inner, list(op.body.block.ops), mapper, block.args[1], red, tid)))
    return loop.results[0]


def _carry(
    b: Builder, ops: Sequence[Operation], mapper: dict[SSAValue, SSAValue], acc: SSAValue,
    red: CrossThread, tid: SSAValue,
) -> SSAValue:
    """Clone `ops` (a loop body of the reduction's nest) at `b`, carrying the accumulator
    `acc`; returns its value after them."""
    for op in ops:
        if isinstance(op, affine.YieldOp):
            continue
        if op is red.load:
            mapper[red.load.result] = acc
        elif op is red.store:
            acc = mapper[red.store.value]
        elif isinstance(op, affine.ForOp) and (op is red.loop or op.is_ancestor(red.store)):
            acc = _accumulate(b, op, mapper, acc, red, tid)
        else:
            b.insert(op.clone(mapper))
    return acc


def _select_region(
    b: Builder, cond: SSAValue, result_type: Attribute, build: Callable[[Builder], SSAValue], otherwise: SSAValue
) -> SSAValue:
    """`cond ? build() : otherwise` as an `scf.if` with a result; `build` inserts the true
    branch's ops with the builder it gets."""
    true_block, false_block = Block(), Block()
    false_block.add_op(scf.YieldOp(otherwise))
    branch = b.insert(scf.IfOp(cond, [result_type], Region(true_block), Region(false_block)))
    inner = Builder(InsertPoint.at_end(true_block))
    inner.insert(scf.YieldOp(build(inner)))
    return branch.results[0]


def _two_stage(
    b: Builder, partial: SSAValue, tid: SSAValue, identity: SSAValue, red: CrossThread,
    launch: Launch, kernel: egpu.FuncOp,
) -> SSAValue:
    """Combine the partials along x (`red.threads`, a multiple of the warp `red.cluster`, so
    that no warp straddles two rows of the block) in two subgroup reductions: every warp
    reduces its lanes, its lane 0 stores the warp's total in an `egpu.alloc_shared` array
    (one slot per warp of the block, a row's warps side by side), barrier, then the first
    `w` lanes of each row (`w`: the row's warps rounded up to a power of two) reduce the
    row's totals, lanes past them contributing the identity. Every work-item reaches the
    barrier and both reductions. Returns the total (right in the row's lane 0)."""
    assert red.cluster is not None
    warp = red.cluster
    per_row = red.threads // warp
    lanes = 1 << (per_row - 1).bit_length()
    shared = egpu.AllocSharedOp(MemRefType(partial.type, [math.prod(launch.block) // warp]))
    shared.memref.name_hint = "warp_totals"
    Rewriter.insert_op(shared, InsertPoint.at_start(kernel.body.block))
    kind = _REDUCE_KINDS[red.combiner]
    mine = b.insert(egpu.SubgroupReduceOp(kind, partial, warp)).result
    mine.name_hint = "warp_total"
    linear = _linear_thread_id(b, launch.block)
    d0, d1 = AffineExpr.dimension(0), AffineExpr.dimension(1)
    lane = b.insert(affine.ApplyOp([tid], affine.AffineMapAttr(AffineMap(1, 0, (d0 % warp,))))).result
    leader = b.insert(arith.CmpiOp(lane, _index_constant(b, 0), "eq")).result
    guard = b.insert(scf.IfOp(leader, [], [scf.YieldOp()]))
    inner = Builder(InsertPoint.before(guard.true_region.block.last_op))  # type: ignore[arg-type]
    inner.insert(affine.StoreOp(mine, shared.memref, [linear], affine.AffineMapAttr(AffineMap(1, 0, (d0 // warp,)))))
    b.insert(egpu.BarrierOp())
    present = b.insert(arith.CmpiOp(tid, _index_constant(b, per_row), "slt")).result
    # the row's first slot is (linear - x) / warp: a row is `threads` work-items
    rows = math.prod(launch.block) // red.threads
    slot = AffineMap(2, 0, ((d0 - d1) // warp + d1,)) if rows > 1 else AffineMap(2, 0, (d1,))
    value = _select_region(
        b, present, partial.type,
        lambda at: at.insert(affine.LoadOp(shared.memref, [linear, tid], affine.AffineMapAttr(slot))).result,
        identity,
    )  # fmt: skip
    total = b.insert(egpu.SubgroupReduceOp(kind, value, lanes)).result
    total.name_hint = "total"
    return total


def _tree(
    b: Builder, partial: SSAValue, tid: SSAValue, red: CrossThread, launch: Launch, kernel: egpu.FuncOp
) -> Callable[[Builder], SSAValue]:
    """Combine the partials along the reduction's dimension in an `egpu.alloc_shared` array
    with one slot per work-item of the block (its linear id; `tid` is its id along the
    reduction's dimension): store, barrier, then while `n`
    partials remain, the first `n - ceil(n / 2)` work-items combine the slot `ceil(n / 2)`
    ahead into theirs, and barrier (but after the last step, which only id 0 runs). Returns
    a builder of the total (read by id 0 only)."""
    element = partial.type
    shared = egpu.AllocSharedOp(MemRefType(element, [math.prod(launch.block)]))
    shared.memref.name_hint = "partials"
    Rewriter.insert_op(shared, InsertPoint.at_start(kernel.body.block))
    slot = tid if math.prod(launch.block) == red.threads else _linear_thread_id(b, launch.block)
    stride = math.prod(launch.block[: red.dim.index])

    def at(offset: int) -> affine.AffineMapAttr:
        return affine.AffineMapAttr(AffineMap(1, 0, (AffineExpr.dimension(0) + offset,)))

    b.insert(affine.StoreOp(partial, shared.memref, [slot], at(0)))
    b.insert(egpu.BarrierOp())
    n = red.threads
    while n > 1:
        half = -(-n // 2)
        active = b.insert(arith.CmpiOp(tid, _index_constant(b, n - half), "slt")).result
        guard = b.insert(scf.IfOp(active, [], [scf.YieldOp()]))
        step = Builder(InsertPoint.before(guard.true_region.block.last_op))  # type: ignore[arg-type]
        mine = step.insert(affine.LoadOp(shared.memref, [slot], at(0))).result
        other = step.insert(affine.LoadOp(shared.memref, [slot], at(half * stride))).result
        step.insert(affine.StoreOp(build_combine(step, red.combiner, mine, other), shared.memref, [slot], at(0)))
        if half > 1:  # after the last step only work-item 0 reads, its own slot
            b.insert(egpu.BarrierOp())
        n = half

    def total(inner: Builder) -> SSAValue:
        value = inner.insert(affine.LoadOp(shared.memref, [slot], at(0))).result
        value.name_hint = "total"
        return value

    return total


# ---- shared-memory staging --------------------------------------------------------------------


def _is_shared_alloca(op: Operation) -> bool:
    return isinstance(op, memref.AllocaOp) and op.attributes.get(MEMORY_ATTR) == StringAttr("shared")


def has_shared_staging(stmt: Statement) -> bool:
    """Whether a schedule staged a tensor of the statement in shared memory (cache.py)."""
    return any(_is_shared_alloca(inner) for op in stmt.ops for inner in op.walk())


def stage_shared(kernel: egpu.FuncOp, launch: Launch, conds: Sequence[SSAValue]) -> None:
    """Lower the shared staging of cache.py in `kernel` (before its return is built):
    - each marked `memref.alloca` becomes an `egpu.alloc_shared` at the kernel's top level;
    - each copy nest becomes one loop in which the block's threads split the box's elements
      (linear thread id, strided by the block size), so a thread copies out exactly the
      elements it copied in;
    - in each staging loop body, `egpu.barrier` after the copy-in nests and after the
      compute (before the copy-out nests, or at the end of the body: before the next
      iteration overwrites the buffer);
    - the partial-tile checks `conds` guard the compute only: every thread runs the copies
      and reaches every barrier. Raises ScheduleError when a guarded value is used across a
      barrier (the guard cannot be split there)."""
    block = kernel.body.block
    for alloca in [op for op in kernel.walk() if _is_shared_alloca(op)]:
        assert isinstance(alloca, memref.AllocaOp)
        shared = egpu.AllocSharedOp(alloca.memref.type)  # type: ignore[arg-type]
        shared.memref.name_hint = alloca.memref.name_hint
        Rewriter.insert_op(shared, InsertPoint.at_start(block))
        alloca.memref.replace_all_uses_with(shared.memref)
        Rewriter.erase_op(alloca)
    top = Builder(InsertPoint.after(_last_alloc_shared(block)))
    tid = _linear_thread_id(top, launch.block)
    threads = math.prod(launch.block)
    copies: dict[Block, tuple[list[Operation], list[Operation]]] = {}
    for nest in [op for op in kernel.walk() if isinstance(op, affine.ForOp) and SHARED_COPY_ATTR in op.attributes]:
        assert isinstance(nest, affine.ForOp)
        kind = nest.attributes[SHARED_COPY_ATTR]
        copy = _distribute(nest, tid, threads)
        ins, outs = copies.setdefault(copy.parent_block(), ([], []))  # type: ignore[arg-type]
        (ins if kind == StringAttr("in") else outs).append(copy)
    sync: set[Operation] = set()
    for body, (ins, outs) in copies.items():
        for point in (
            [InsertPoint.after(ins[-1])] if ins else []
        ) + [InsertPoint.before(outs[0]) if outs else InsertPoint.before(body.last_op)]:  # type: ignore[arg-type]
            barrier = egpu.BarrierOp()
            Rewriter.insert_op(barrier, point)
            sync.add(barrier)
        sync.update(ins + outs)
    if conds:  # computed in order at the top level: each `and` right after its check
        in_range = conds[0]
        for cond in conds[1:]:
            both = arith.AndIOp(in_range, cond)
            Rewriter.insert_op(both, InsertPoint.after(cond.owner))  # type: ignore[arg-type]
            in_range = both.result
        start = block.get_operation_index(in_range.owner) + 1  # type: ignore[arg-type]
        _guard_block(block, start, in_range, sync)


def _last_alloc_shared(block: Block) -> Operation:
    last = block.first_op
    for op in block.ops:
        if not isinstance(op, egpu.AllocSharedOp):
            break
        last = op
    assert last is not None
    return last


def _linear_thread_id(b: Builder, sizes: tuple[int, int, int]) -> SSAValue:
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
        return _index_constant(b, 0)
    if len(ids) == 1:
        return ids[0]
    tid = b.insert(affine.ApplyOp(ids, affine.AffineMapAttr(AffineMap(len(ids), 0, (expr,))))).result
    tid.name_hint = "tid"
    return tid


def _distribute(nest: affine.ForOp, tid: SSAValue, threads: int) -> Operation:
    """Replace a copy nest over a box by `for e = tid to size step threads`, the body at the
    box point `e` (row-major)."""
    loops = perfect_chain(nest)
    points = math.prod(trip_count(loop) for loop in loops)
    b = Builder(InsertPoint.before(nest))
    step_block = Block(arg_types=[IndexType()])
    step_block.args[0].name_hint = "e"
    step_block.add_op(scf.YieldOp())
    copy = b.insert(scf.ForOp(tid, _index_constant(b, points), _index_constant(b, threads), [],
                              Region(step_block)))  # fmt: skip
    inner = Builder(InsertPoint.before(step_block.last_op))  # type: ignore[arg-type]
    mapper: dict[SSAValue, SSAValue] = {}
    for loop, iv in zip(loops, _delinearize(inner, step_block.args[0], loops)):
        mapper[induction_var(loop)] = iv
    for op in loops[-1].body.block.ops:
        if not isinstance(op, affine.YieldOp):
            inner.insert(op.clone(mapper))
    Rewriter.erase_op(nest)
    return copy


_TRAPPING = (arith.DivSIOp, arith.DivUIOp, arith.RemSIOp, arith.RemUIOp, arith.FloorDivSIOp,
             arith.CeilDivSIOp, arith.CeilDivUIOp)
"""Pure ops that may trap on a CPU device (integer division by zero): out-of-range threads
must not run them."""


def _guard_block(block: Block, start: int, cond: SSAValue, sync: set[Operation]) -> None:
    """Put the ops of `block` from `start` on under `scf.if cond`, in runs between the ops of
    `sync` (copies, barriers); loops holding one are entered instead. Pure ops of unguarded
    values (but integer divisions) stay outside, above the guard."""
    group: list[Operation] = []
    values: set[SSAValue] = set()
    between: list[Operation] = []  # pure ops left outside, among the group's ops

    def flush() -> None:
        if not group:
            return
        for op in between:  # the guarded ops may use them: they move above the guard
            op.detach()
            Rewriter.insert_op(op, InsertPoint.before(group[0]))
        between.clear()
        guard = scf.IfOp(cond, [], [scf.YieldOp()])
        Rewriter.insert_op(guard, InsertPoint.before(group[0]))
        end = guard.true_region.block.last_op
        for op in group:
            op.detach()
            Rewriter.insert_op(op, InsertPoint.before(end))  # type: ignore[arg-type]
        for op in group:
            for result in op.results:
                if any(not guard.is_ancestor(use.operation) for use in result.uses):
                    raise schedule_error(
                        "a value of a partial tile's guarded compute is used across a "
                        "shared-memory barrier: stage at another loop"
                    )
        group.clear()

    for op in list(block.ops)[start:]:
        if isinstance(op, affine.YieldOp | scf.YieldOp | egpu.ReturnOp):
            break
        if op in sync:
            flush()
        elif any(inner in sync for inner in op.walk()):
            flush()
            for region in op.regions:
                for inner_block in region.blocks:
                    _guard_block(inner_block, 0, cond, sync)
        elif (_pure(op) or isinstance(op, memref.AllocaOp)) and not isinstance(op, _TRAPPING) and not any(
            o in values for o in op.operands
        ):  # (a work-item's local array may be declared outside the guard)
            if group:
                between.append(op)
        else:
            group.append(op)
            values.update(op.results)
    flush()


def erase_statement(stmt: Statement) -> None:
    for op in reversed(stmt.ops):
        Rewriter.erase_op(op)


__all__ = [
    "BIND_ATTR",
    "CrossThread",
    "cross_thread_reduction",
    "Launch",
    "Mapping",
    "Statement",
    "bound_loops",
    "bound_mapping",
    "enclose_private_buffers",
    "erase_statement",
    "fill_fits",
    "has_shared_staging",
    "stage_shared",
    "flat_mapping",
    "outline",
    "parallel_prefix",
    "perfect_chain",
    "schedule_error",
    "statements",
]
