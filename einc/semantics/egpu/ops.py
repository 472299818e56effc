"""What each op does: a compiler per op type turning the op into a step, a closure over the
`env` slots of its operands and results that runs it for the lanes of a mask (machine.py)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

import numpy as np
from xdsl.dialects import affine, arith, memref, scf
from xdsl.dialects import math as mathd
from xdsl.dialects.builtin import (
    DenseIntOrFPElementsAttr,
    FloatAttr,
    IntegerAttr,
    VectorType,
)
from xdsl.ir import Attribute, Operation, SSAValue

from einc.ir.attrs import STORE_LANES_ATTR
from einc.dialects import egpu
from einc.dialects.egpu_mma import owned
from einc.semantics.loops import wrap
from einc.semantics.egpu import values as V
from einc.semantics.egpu.affine_eval import Evaluator, evaluators
from einc.semantics.egpu.state import Step, memref_shape, merge, poison
from einc.semantics.egpu.memory import Buffer, KernelFault
from einc.semantics.egpu.values import Lanes, UnsupportedIR, dtype_of, lanes, select

if TYPE_CHECKING:
    from einc.semantics.egpu.machine import Machine

Compiler = Callable[["Machine", Operation], Step]
COMPILERS: dict[type[Operation], Compiler] = {}


def compiles(*types: type[Operation]) -> Callable[[Compiler], Compiler]:
    def register(fn: Compiler) -> Compiler:
        for t in types:
            COMPILERS[t] = fn
        return fn

    return register


def _is_vector(t: Attribute) -> bool:
    return isinstance(t, VectorType)


def _fixed(dtype: np.dtype) -> Callable[[Lanes], Lanes]:
    def fix(x: Lanes) -> Lanes:
        return x if getattr(x, "dtype", None) == dtype else np.asarray(x).astype(dtype)

    return fix


def _compute(m: Machine, op: Operation, fn: Callable[..., Lanes]) -> Step:
    """A step computing `fn(*operands)` into the op's one result."""
    env = m.env
    ins = [m.slot(o) for o in op.operands]
    out = m.slot(op.results[0])
    if len(ins) == 1:
        (a,) = ins

        def unary(mask: Lanes | None) -> None:
            env[out] = fn(env[a])

        return unary
    if len(ins) == 2:
        a, b = ins

        def binary(mask: Lanes | None) -> None:
            env[out] = fn(env[a], env[b])

        return binary

    def nary(mask: Lanes | None) -> None:
        env[out] = fn(*[env[s] for s in ins])

    return nary


# ---- arith and math ------------------------------------------------------------------------------


@compiles(arith.ConstantOp)
def _constant(m: Machine, op: Operation) -> Step:
    assert isinstance(op, arith.ConstantOp)
    t, attr = op.result.type, op.value
    dtype = dtype_of(t)
    value: Lanes
    if isinstance(attr, FloatAttr):
        value = dtype.type(attr.value.data)
    elif isinstance(attr, IntegerAttr):
        v = attr.value.data
        value = lanes(np.bool_(v & 1) if dtype == np.bool_ else dtype.type(wrap(v, V.element_type(t))))
    elif isinstance(attr, DenseIntOrFPElementsAttr) and _is_vector(t):
        value = np.asarray(attr.get_values(), dtype).reshape(-1)
    else:
        raise UnsupportedIR(op, f"constant {attr}")
    env, out = m.env, m.slot(op.result)

    def constant(mask: Lanes | None) -> None:
        env[out] = value

    return constant


def _table(table: dict[type[Operation], Callable[[Lanes, Lanes], Lanes]]) -> Compiler:
    def compile_binary(m: Machine, op: Operation) -> Step:
        fn, fix = table[type(op)], _fixed(dtype_of(op.results[0].type))
        return _compute(m, op, lambda a, b: fix(fn(a, b)))

    return compile_binary


for _ops in (V.INT_BINARY, V.FLOAT_BINARY):
    compiles(*_ops)(_table(_ops))


@compiles(*V.FLOAT_UNARY)
def _float_unary(m: Machine, op: Operation) -> Step:
    fn, fix = V.FLOAT_UNARY[type(op)], _fixed(dtype_of(op.results[0].type))
    return _compute(m, op, lambda x: fix(fn(x)))


@compiles(*V.CASTS, egpu.VConvertOp)
def _cast(m: Machine, op: Operation) -> Step:
    t = op.results[0].type
    return _compute(m, op, lambda x: V.cast(op, x, t))


@compiles(arith.CmpiOp)
def _cmpi(m: Machine, op: Operation) -> Step:
    assert isinstance(op, arith.CmpiOp)
    predicate = op.predicate.value.data
    return _compute(m, op, lambda a, b: V.cmpi(predicate, a, b))


@compiles(arith.CmpfOp)
def _cmpf(m: Machine, op: Operation) -> Step:
    assert isinstance(op, arith.CmpfOp)
    predicate = op.predicate.value.data
    return _compute(m, op, lambda a, b: V.cmpf(predicate, a, b))


@compiles(arith.SelectOp)
def _select(m: Machine, op: Operation) -> Step:
    assert isinstance(op, arith.SelectOp)
    vector, fix = _is_vector(op.result.type), _fixed(dtype_of(op.result.type))

    def choose(c: Lanes, a: Lanes, b: Lanes) -> Lanes:
        if np.ndim(c) == 0:
            return a if c else b
        return fix(select(c, a, b, vector))

    return _compute(m, op, choose)


@compiles(mathd.FmaOp, egpu.VFmaOp)
def _fma(m: Machine, op: Operation) -> Step:
    dtype = dtype_of(op.results[0].type)
    return _compute(m, op, lambda a, b, c: V.fma(a, b, c, dtype))


@compiles(mathd.AbsIOp)
def _absi(m: Machine, op: Operation) -> Step:
    fix = _fixed(dtype_of(op.results[0].type))
    return _compute(m, op, lambda x: fix(np.abs(x)))


@compiles(mathd.IPowIOp)
def _ipowi(m: Machine, op: Operation) -> Step:
    t = op.results[0].type
    return _compute(m, op, lambda a, b: V.ipowi(a, b, t))


@compiles(mathd.FPowIOp)
def _fpowi(m: Machine, op: Operation) -> Step:
    dtype = dtype_of(op.results[0].type)
    fix = _fixed(dtype)
    return _compute(m, op, lambda x, e: fix(np.power(x, np.asarray(e).astype(dtype))))


@compiles(egpu.RoundOp)
def _round(m: Machine, op: Operation) -> Step:
    assert isinstance(op, egpu.RoundOp)
    narrow, wide = dtype_of(op.as_type), dtype_of(op.result.type)
    return _compute(m, op, lambda x: np.asarray(x).astype(narrow).astype(wide))


@compiles(egpu.VBroadcastOp)
def _vbroadcast(m: Machine, op: Operation) -> Step:
    assert isinstance(op, egpu.VBroadcastOp)
    width = _width(op.result.type)
    return _compute(m, op, lambda x: np.repeat(np.asarray(x)[..., None], width, axis=-1))


@compiles(egpu.VBroadcastRunsOp)
def _vbroadcast_runs(m: Machine, op: Operation) -> Step:
    assert isinstance(op, egpu.VBroadcastRunsOp)
    run = _width(op.result.type) // len(op.values)
    return _compute(m, op, lambda *xs: np.concatenate([np.repeat(np.asarray(x)[..., None], run, axis=-1) for x in xs], axis=-1))


@compiles(egpu.VShuffleOp)
def _vshuffle(m: Machine, op: Operation) -> Step:
    assert isinstance(op, egpu.VShuffleOp)
    lanes = list(op.lanes)
    return _compute(m, op, lambda a, b: np.concatenate([np.asarray(a), np.asarray(b)], axis=-1)[..., lanes])


@compiles(egpu.VExtractOp)
def _vextract(m: Machine, op: Operation) -> Step:
    assert isinstance(op, egpu.VExtractOp)
    lane = op.lane.value.data
    return _compute(m, op, lambda v: np.asarray(v)[..., lane])


@compiles(egpu.VReduceOp)
def _vreduce(m: Machine, op: Operation) -> Step:
    assert isinstance(op, egpu.VReduceOp)
    kind = str(op.kind.data)

    def reduce(v: Lanes) -> Lanes:
        a = np.asarray(v)
        acc = a[..., 0]
        for j in range(1, a.shape[-1]):
            acc = V.combine(kind, acc, a[..., j])
        return np.asarray(acc).astype(a.dtype)

    return _compute(m, op, reduce)


def _width(t: Attribute) -> int:
    assert isinstance(t, VectorType), t
    return int(t.get_shape()[0])


# ---- affine index arithmetic --------------------------------------------------------------------


def _index_fn(fns: Sequence[Evaluator]) -> Callable[[Sequence[Lanes]], list[Lanes]]:
    return lambda ops: [f(ops) for f in fns]


def _ints(values: Sequence[object]) -> list[Lanes]:
    return [v if isinstance(v, np.ndarray) else lanes(np.int64(lanes(v))) for v in values]


@compiles(affine.ApplyOp, affine.MinOp)
def _affine_map(m: Machine, op: Operation) -> Step:
    assert isinstance(op, affine.ApplyOp | affine.MinOp)
    fns = evaluators(op.map.data)
    env, ins, out = m.env, [m.slot(o) for o in op.operands], m.slot(op.results[0])
    if len(fns) == 1:
        (f,) = fns

        def apply(mask: Lanes | None) -> None:
            env[out] = f(_ints([env[s] for s in ins]))

        return apply

    def extremum(mask: Lanes | None) -> None:
        ops = _ints([env[s] for s in ins])
        env[out] = np.minimum.reduce(np.broadcast_arrays(*[f(ops) for f in fns]))

    return extremum


# ---- memory --------------------------------------------------------------------------------------


@compiles(memref.AllocOp, memref.AllocaOp)
def _alloc(m: Machine, op: Operation) -> Step:
    shape, dtype = memref_shape(op.results[0].type)
    env, out, name = m.env, m.slot(op.results[0]), op.results[0].name_hint or "local"

    def alloc(mask: Lanes | None) -> None:
        grid = m.grid
        if grid.kernel is None:
            buffer = env[out] = Buffer(poison(shape, dtype), name)
            m.host_buffers.append(buffer)
        else:  # the work-item's own array
            env[out] = Buffer(poison((grid.lanes, *shape), dtype), name, per="lane", stamp=grid.expansion)

    return alloc


@compiles(egpu.AllocSharedOp)
def _alloc_shared(m: Machine, op: Operation) -> Step:
    shape, dtype = memref_shape(op.results[0].type)
    env, out, name = m.env, m.slot(op.results[0]), op.results[0].name_hint or "shared"

    def alloc(mask: Lanes | None) -> None:
        env[out] = Buffer(poison((m.grid.blocks, *shape), dtype), name, per="block")

    return alloc


@compiles(memref.DeallocOp)
def _dealloc(m: Machine, op: Operation) -> Step:
    return lambda mask: None


def _access(m: Machine, op: Operation, memref_value: SSAValue, indices: Sequence[SSAValue]) -> tuple[int, Callable[[], list[Lanes]]]:
    """The buffer's slot and a function giving the access's indices."""
    env, ins = m.env, [m.slot(i) for i in indices]
    if isinstance(op, affine.LoadOp | affine.StoreOp):
        amap = op.map.data
        if all(getattr(r, "position", -1) == k for k, r in enumerate(amap.results)) and amap.num_dims + amap.num_symbols == len(amap.results) and amap.num_symbols == 0:
            return m.slot(memref_value), lambda: [lanes(env[s]) for s in ins]
        fn = _index_fn(evaluators(amap))
        return m.slot(memref_value), lambda: fn(_ints([env[s] for s in ins]))
    return m.slot(memref_value), lambda: [lanes(env[s]) for s in ins]


@compiles(memref.LoadOp, affine.LoadOp, egpu.LoadExtfOp, egpu.VLoadOp)
def _load(m: Machine, op: Operation) -> Step:
    assert isinstance(op, memref.LoadOp | affine.LoadOp | egpu.LoadExtfOp | egpu.VLoadOp)
    buf, index = _access(m, op, op.memref, op.indices)
    env, out = m.env, m.slot(op.results[0])
    width = _width(op.result.type) if isinstance(op, egpu.VLoadOp) else 1
    fix = _fixed(dtype_of(op.result.type)) if isinstance(op, egpu.LoadExtfOp) else None
    counted = op.attributes.get(STORE_LANES_ATTR) if isinstance(op, egpu.VLoadOp) else None
    count = counted.value.data if isinstance(counted, IntegerAttr) else width  # egpu.lanes: the first elements only

    def load(mask: Lanes | None) -> None:
        b = env[buf]
        assert isinstance(b, Buffer)
        value = b.load(m.grid, op, index(), mask, count)
        if count < width:  # the other lanes zero
            value = value.reshape(*value.shape[: value.ndim - (count > 1)], count)
            value = np.concatenate([value, np.zeros((*value.shape[:-1], width - count), value.dtype)], axis=-1)
        env[out] = value if fix is None else fix(value)

    return load


@compiles(egpu.VLoadRepeatOp)
def _vload_repeat(m: Machine, op: Operation) -> Step:
    """The run's elements loaded (checked as a load of `run` elements), lane j element j mod run."""
    assert isinstance(op, egpu.VLoadRepeatOp)
    buf, index = _access(m, op, op.memref, op.indices)
    env, out = m.env, m.slot(op.result)
    run = op.run.value.data
    repeats = _width(op.result.type) // run

    def load(mask: Lanes | None) -> None:
        b = env[buf]
        assert isinstance(b, Buffer)
        env[out] = np.tile(b.load(m.grid, op, index(), mask, run), repeats)

    return load


@compiles(memref.StoreOp, affine.StoreOp, egpu.StoreTruncfOp, egpu.VStoreOp)
def _store(m: Machine, op: Operation) -> Step:
    assert isinstance(op, memref.StoreOp | affine.StoreOp | egpu.StoreTruncfOp | egpu.VStoreOp)
    buf, index = _access(m, op, op.memref, op.indices)
    env, value = m.env, m.slot(op.value)
    width = _width(op.value.type) if isinstance(op, egpu.VStoreOp) else 1
    stored = op.attributes.get(STORE_LANES_ATTR)
    count = stored.value.data if isinstance(stored, IntegerAttr) else width  # egpu.lanes: the first lanes only

    def store(mask: Lanes | None) -> None:
        b = env[buf]
        assert isinstance(b, Buffer)
        v = lanes(env[value])
        b.store(m.grid, op, index(), v[..., :count] if count < width else v, mask, count)

    return store


@compiles(egpu.CopyAsyncOp)
def _copy_async(m: Machine, op: Operation) -> Step:
    """The elements copied at once (complete before the wait the op only promises)."""
    assert isinstance(op, egpu.CopyAsyncOp)
    src, source_index = _access(m, op, op.source, op.source_indices)
    dst, index = _access(m, op, op.memref, op.indices)
    env, width = m.env, op.width

    def copy(mask: Lanes | None) -> None:
        source, dest = env[src], env[dst]
        assert isinstance(source, Buffer) and isinstance(dest, Buffer)
        dest.store(m.grid, op, index(), lanes(source.load(m.grid, op, source_index(), mask, width)), mask, width)

    return copy


@compiles(egpu.AsyncWaitOp)
def _async_wait(m: Machine, op: Operation) -> Step:
    return lambda mask: None


# ---- control flow --------------------------------------------------------------------------------


def _results(m: Machine, op: Operation) -> Callable[[Sequence[object]], None]:
    env, outs = m.env, [m.slot(r) for r in op.results]

    def put(values: Sequence[object]) -> None:
        for s, v in zip(outs, values, strict=True):
            env[s] = v

    return put


@compiles(affine.ForOp)
def _affine_for(m: Machine, op: Operation) -> Step:
    assert isinstance(op, affine.ForOp)
    n_lb, n_ub = len(op.lowerBoundOperands), len(op.upperBoundOperands)
    env, ins = m.env, [m.slot(o) for o in op.operands]
    lows, highs = evaluators(op.lowerBoundMap.data), evaluators(op.upperBoundMap.data)
    step, put, iv_type = lanes(np.int64(op.step.value.data)), _results(m, op), op.body.block.args[0].type
    top = op.parent_block() is m.host_block

    def run(mask: Lanes | None) -> None:
        if top and m.parallel_nest(op):
            return
        values = [env[s] for s in ins]
        lo_ops, hi_ops = _ints(values[:n_lb]), _ints(values[n_lb : n_lb + n_ub])
        lo = [f(lo_ops) for f in lows]
        hi = [f(hi_ops) for f in highs]
        lb = lo[0] if len(lo) == 1 else np.maximum.reduce(np.broadcast_arrays(*lo))
        ub = hi[0] if len(hi) == 1 else np.minimum.reduce(np.broadcast_arrays(*hi))
        put(m.loop(op, op.body, lb, ub, step, values[n_lb + n_ub :], mask, iv_type))

    return run


@compiles(scf.ForOp)
def _scf_for(m: Machine, op: Operation) -> Step:
    assert isinstance(op, scf.ForOp)
    env, lb, ub, st = m.env, m.slot(op.lb), m.slot(op.ub), m.slot(op.step)
    carried, put, iv_type = [m.slot(o) for o in op.iter_args], _results(m, op), op.lb.type

    def run(mask: Lanes | None) -> None:
        low, high, step = _ints([env[lb], env[ub], env[st]])
        put(m.loop(op, op.body, low, high, step, [env[s] for s in carried], mask, iv_type))

    return run


@compiles(scf.IfOp)
def _scf_if(m: Machine, op: Operation) -> Step:
    assert isinstance(op, scf.IfOp)
    env, cond_slot, put = m.env, m.slot(op.cond), _results(m, op)
    has_else, n = bool(op.false_region.blocks), len(op.results)
    zeros = [np.zeros((), dtype_of(r.type)) for r in op.results]

    def run(mask: Lanes | None) -> None:
        cond = lanes(env[cond_slot])
        if np.ndim(cond) == 0:
            if cond:
                put(m.run_region(op.true_region, mask))
            elif has_else:
                put(m.run_region(op.false_region, mask))
            return
        c = np.asarray(cond, np.bool_)
        then_mask = c if mask is None else c & mask
        else_mask = ~c if mask is None else ~c & mask
        then = m.run_region(op.true_region, then_mask) if then_mask.any() else None
        other = m.run_region(op.false_region, else_mask) if has_else and else_mask.any() else None
        if not n:
            return
        if then is None or other is None:  # a branch no lane takes: the other's results
            put(then if then is not None else other if other is not None else zeros)
            return
        put([merge(c, t, e) for t, e in zip(then, other)])

    return run


# ---- kernels -------------------------------------------------------------------------------------


@compiles(egpu.LaunchOp)
def _launch(m: Machine, op: Operation) -> Step:
    assert isinstance(op, egpu.LaunchOp)

    def launch(mask: Lanes | None) -> None:
        if m.grid.kernel is not None:
            raise KernelFault("egpu.launch inside a kernel")
        m.launch(op)

    return launch


@compiles(egpu.BlockIdOp, egpu.ThreadIdOp, egpu.GlobalIdOp, egpu.BlockDimOp, egpu.GridDimOp)
def _coordinate(m: Machine, op: Operation) -> Step:
    assert isinstance(op, egpu.IndexOp)
    env, out = m.env, m.slot(op.result)

    def coordinate(mask: Lanes | None) -> None:
        if m.grid.kernel is None:
            raise KernelFault(f"{op.name} outside a kernel")
        env[out] = m.coordinate(op)

    return coordinate


@compiles(egpu.PrefetchOp)
def _prefetch(m: Machine, op: Operation) -> Step:
    """A cache hint: nothing to do."""
    return lambda mask: None


@compiles(egpu.BarrierOp)
def _barrier(m: Machine, op: Operation) -> Step:
    return lambda mask: m.barrier(op, mask)


@compiles(egpu.SubgroupReduceOp)
def _subgroup_reduce(m: Machine, op: Operation) -> Step:
    assert isinstance(op, egpu.SubgroupReduceOp)
    env, value, out = m.env, m.slot(op.value), m.slot(op.result)

    def reduce(mask: Lanes | None) -> None:
        env[out] = m.subgroup_reduce(op, lanes(env[value]), mask)

    return reduce


@compiles(egpu.MmaOp)
def _mma(m: Machine, op: Operation) -> Step:
    """`egpu.mma`: each lane updates the accumulator elements it owns (einc.dialects.egpu_mma
    `owned`), `C + sum(A * B)` in float32 in k order, through the buffers' checked loads and
    stores (bounds, races) like the loop interpreter's `mma_lane`."""
    assert isinstance(op, egpu.MmaOp)
    env = m.env
    na, nb, nc = len(op.a_indices), len(op.b_indices), len(op.c_indices)
    slots = [m.slot(v) for v in op.operands]
    bufs, idx = slots[:3], slots[3:]
    groups = (idx[:na], idx[na : na + nb], idx[na + nb : na + nb + nc])
    lane_slot, count, k = idx[-1], op.lanes.value.data, op.k.value.data
    table = np.array([owned(lane, count) for lane in range(count)], np.int64)  # lane, element, (row, col)
    dims = (op.dims("a"), op.dims("b"), op.dims("c"))

    def at(base: list[np.ndarray], d: tuple[int, ...], first: Lanes | int, second: Lanes | int) -> list[Lanes]:
        index: list[Lanes] = list(base)
        index[d[0]] = index[d[0]] + first
        index[d[1]] = index[d[1]] + second
        return index

    def step(mask: Lanes | None) -> None:
        a, b, c = (env[s] for s in bufs)
        assert isinstance(a, Buffer) and isinstance(b, Buffer) and isinstance(c, Buffer)
        lane = np.asarray(lanes(env[lane_slot]), np.int64)
        if np.any((lane < 0) | (lane >= count)):
            raise KernelFault(f"egpu.mma: a lane index outside 0..{count - 1}")
        bases = [[np.asarray(lanes(env[s]), np.int64) for s in g] for g in groups]
        for e in range(table.shape[1]):
            rows, cols = table[lane, e, 0], table[lane, e, 1]
            # a fragment c (the lane's registers): the lane's element e at c_base + e
            where: list[Lanes] = [bases[2][0] + e] if op.fragment else at(bases[2], dims[2], rows, cols)
            total = np.asarray(c.load(m.grid, op, where, mask), np.float32)
            for q in range(k):
                x = np.asarray(a.load(m.grid, op, at(bases[0], dims[0], rows, q), mask), np.float32)
                y = np.asarray(b.load(m.grid, op, at(bases[1], dims[1], q, cols), mask), np.float32)
                total = (total + x * y).astype(np.float32)
            c.store(m.grid, op, where, total, mask)

    return step
