"""The shared printers of single ops, the walk's op tables: loops, ifs, yields, stores,
allocations, loads, affine applies and minimums, and the vector ops (`egpu.vload`, `vstore`,
`vbroadcast`, `vreduce`, `vconvert`, `vfma`). Each is `printer(writer, op)`; a statement
printer writes lines, an expression printer returns an `Expr`. `Writer.statement` and
`Writer.expression` (einc.targets.writer) look ops up here first, then in the target's own
`statement_printers` / `expression_printers`."""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import TYPE_CHECKING, TypeVar

from xdsl.dialects import affine, arith, func, memref, scf
from xdsl.dialects import math as mathd
from xdsl.dialects.builtin import AnyFloat, IntegerAttr, StringAttr, VectorType
from xdsl.ir import Operation, SSAValue

from einc.dialects import egpu
from einc.errors import InternalCompilerError
from einc.ir.attrs import ALIGN_ATTR, PARALLEL_ATTR, STORE_LANES_ATTR, STREAM_ATTR, VECTORIZE_ATTR, element_bits, vector_bytes
from einc.transforms.affine_index import dims_to_operands
from einc.targets.spelling import ADD, ATOM, UNARY, Expr

if TYPE_CHECKING:
    from einc.targets.writer import Writer

OpT = TypeVar("OpT", bound=Operation)


def statement(kind: type[OpT], printer: Callable[[Writer, OpT], None]) -> Callable[[Writer, Operation], None]:
    """`printer` of the ops of `kind` as a `statement_printers` entry (looked up by type)."""

    def print_op(w: Writer, op: Operation) -> None:
        assert isinstance(op, kind), op
        printer(w, op)

    return print_op


def expression(kind: type[OpT], printer: Callable[[Writer, OpT], Expr]) -> Callable[[Writer, Operation], Expr]:
    """`printer` of the ops of `kind` as an `expression_printers` entry (looked up by type)."""

    def print_op(w: Writer, op: Operation) -> Expr:
        assert isinstance(op, kind), op
        return printer(w, op)

    return print_op


def _affine_for(w: Writer, op: affine.ForOp) -> None:
    n_lb, n_ub = len(op.lowerBoundOperands), len(op.upperBoundOperands)
    lower = w.bound(op.lowerBoundMap.data, op.operands[:n_lb], "maxsi")
    upper = w.bound(op.upperBoundMap.data, op.operands[n_lb : n_lb + n_ub], "minsi")
    names = w.carried(op.results, op.inits)
    for arg, name in zip(op.body.block.args[1:], names):
        w.names[arg] = name  # carried values live in the results' variables
    printed = _pragma_marks(op)
    for marks, pragma in w.t.loop_pragmas.items():
        if all(mark in printed for mark in marks):
            w.line(pragma)
            break
    _barrier_loop_pragma(w, op)
    outline = w.t.outline_parallel_loops and PARALLEL_ATTR in printed and VECTORIZE_ATTR not in printed
    if outline and w.parallel_loop(op, lower, upper, op.step.value.data):
        return
    w.for_loop(op.body.block.args[0], lower, upper, op.step.value.data, op.body.block)


def _barrier_loop_pragma(w: Writer, op: affine.ForOp | scf.ForOp) -> None:
    """The target's `barrier_loop_pragma` before a loop holding a barrier or inside one that
    does. The loops holding barriers are found once per function (the barriers' enclosing
    loops), so a deep nest costs its depth per loop, not a walk of every subtree."""
    pragma = w.t.barrier_loop_pragma
    if pragma is None:
        return
    chain: list[Operation] = []
    loop: Operation | None = op
    while loop is not None and not isinstance(loop, (func.FuncOp, egpu.FuncOp)):
        chain.append(loop)
        loop = loop.parent_op()
    if loop is None:
        return
    holding = w.barrier_loops.get(loop)
    if holding is None:
        found: set[Operation] = set()
        for barrier in loop.walk():
            if isinstance(barrier, egpu.BarrierOp):
                outer = barrier.parent_op()
                while outer is not None and outer is not loop and outer not in found:
                    if isinstance(outer, (affine.ForOp, scf.ForOp)):
                        found.add(outer)
                    outer = outer.parent_op()
        holding = w.barrier_loops[loop] = frozenset(found)
    if any(enclosing in holding for enclosing in chain):
        w.line(pragma)


def _pragma_marks(op: affine.ForOp) -> set[str]:
    """The schedule marks of `op` its pragma may print, given the marks printed on the
    enclosing loops. Every mark is only a licence (the loop is still correct run
    sequentially), so one OpenMP cannot nest is dropped. Inside a `simd` region no OpenMP
    construct but `simd`, `ordered simd`, `loop` and `atomic` may appear (gcc rejects a
    nested `parallel for`), and OpenMP before 5.0 forbids a nested `simd` too: a loop inside
    a printed `simd` loop drops both `parallel` and `simd` (the outer loop's lanes are the
    vectorization the schedule asked for). Inside a printed `parallel` loop the team already
    exists and a nested `parallel for` would fork a team per outer iteration (of one thread
    by default, oversubscribing with nesting enabled): the loop drops `parallel`. Marks nest
    this way when a transform puts loops into a marked one after marking it (a cache copy
    loop in a vectorized loop) or marks a loop inside a parallel one."""
    nest: list[affine.ForOp] = [op]
    parent = op.parent_op()
    while parent is not None:
        if isinstance(parent, affine.ForOp):
            nest.append(parent)
        parent = parent.parent_op()
    in_parallel = in_simd = False
    printed: set[str] = set()
    for loop in reversed(nest):  # outermost first
        printed = set(loop.attributes)
        if in_simd:
            printed -= {PARALLEL_ATTR, VECTORIZE_ATTR}
        elif in_parallel:
            printed.discard(PARALLEL_ATTR)
        in_parallel = in_parallel or PARALLEL_ATTR in printed
        in_simd = in_simd or VECTORIZE_ATTR in printed
    return printed


def _yield(w: Writer, op: affine.YieldOp | scf.YieldOp) -> None:
    parent = op.parent_op()
    assert parent is not None
    w.assign_yield(parent.results, op.operands)


def _scf_for(w: Writer, op: scf.ForOp) -> None:
    step = op.step.owner
    if not (isinstance(step, arith.ConstantOp) and isinstance(step.value, IntegerAttr)):
        raise InternalCompilerError(f"{w.t.name} target: scf.for with a non-constant step")
    names = w.carried(op.results, op.iter_args)
    for arg, name in zip(op.body.block.args[1:], names):
        w.names[arg] = name
    _barrier_loop_pragma(w, op)
    w.for_loop(
        op.body.block.args[0], w.value(op.lb), w.value(op.ub), step.value.value.data,
        op.body.block,
    )


def _scf_if(w: Writer, op: scf.IfOp) -> None:
    w.carried(op.results, ())
    w.open(f"if ({w.value(op.cond).text})")
    w.block(op.true_region.block)
    if op.false_region.blocks and (
        op.results or len(op.false_region.block.ops) > 1
    ):
        w.close("} else {")
        w.depth += 1
        w.scopes.append(set())
        w.block(op.false_region.block)
    w.close()


def _store(w: Writer, op: affine.StoreOp | memref.StoreOp) -> None:
    if isinstance(op, affine.StoreOp):
        index = w.flat_affine(op.memref, op.map.data, op.indices)
    else:
        index = w.flat_values(op.memref, op.indices)
    w.line(f"{w.access(op.memref, index)} = {w.value(op.value).text};")


def _prefetch(w: Writer, op: egpu.PrefetchOp) -> None:
    """A cache hint where the target has one (`prefetch_hint`: C's `__builtin_prefetch`);
    nothing elsewhere (the op reads and writes nothing)."""
    if w.t.prefetch_hint:
        w.line(f"{w.t.prefetch_hint}(&{w.access(op.memref, w.flat_values(op.memref, op.indices))});")


def _alloc(w: Writer, op: memref.AllocOp) -> None:
    t = op.memref.type
    element = w.ctype(t.get_element_type())
    hint = op.attributes.get("ein.name")
    name = w.declare(op.memref, hint.data if isinstance(hint, StringAttr) else None, buffer=True)
    w.line(w.t.alloc(element, math.prod(t.get_shape()), name))


def _alloca(w: Writer, op: memref.AllocaOp) -> None:
    """A local array of the loop body (a staged tile: small, fixed shape)."""
    t = op.memref.type
    hint = op.attributes.get("ein.name")
    name = w.declare(op.memref, hint.data if isinstance(hint, StringAttr) else None, buffer=True)
    w.line(w.t.local_array(w.ctype(t.get_element_type()), math.prod(t.get_shape()), name))


def _dealloc(w: Writer, op: memref.DeallocOp) -> None:
    w.line(w.t.free(w.value(op.memref).text))


def _return(w: Writer, op: func.ReturnOp) -> None:
    """Kernels return nothing; the return ending the function body is implicit in C."""
    if op.operands:
        raise InternalCompilerError(f"{w.t.name} target: a kernel returns no values")


def _affine_load(w: Writer, op: affine.LoadOp) -> Expr:
    return Expr(w.access(op.memref, w.flat_affine(op.memref, op.map.data, op.indices)))


def _memref_load(w: Writer, op: memref.LoadOp) -> Expr:
    return Expr(w.access(op.memref, w.flat_values(op.memref, op.indices)))


def _affine_apply(w: Writer, op: affine.ApplyOp) -> Expr:
    m = dims_to_operands(op.map.data)
    return w.affine_expr(m.results[0], op.mapOperands)


def _affine_min(w: Writer, op: affine.MinOp) -> Expr:
    return w.bound(op.map.data, op.operands, "minsi")


def _vector_lane_accesses(w: Writer, buffer: SSAValue, index: Expr, n: int) -> list[str]:
    return [
        w.access(buffer, index if k == 0 else Expr(f"{index.operand(ADD)} + {k}", ADD))
        for k in range(n)
    ]


def _aligned(op: egpu.VLoadOp | egpu.VStoreOp, t: VectorType) -> bool:
    """Whether `op` is marked aligned to its vector's size (`egpu.align`)."""
    align = op.attributes.get(ALIGN_ATTR)
    size = vector_bytes(t)
    return isinstance(align, IntegerAttr) and size > 0 and align.value.data >= size


def _vload(w: Writer, op: egpu.VLoadOp) -> Expr:
    t = op.result.type
    assert isinstance(t, VectorType)
    index = w.flat_values(op.memref, op.indices)
    lanes = _vector_lane_accesses(w, op.memref, index, t.get_shape()[0])
    fmt = w.t.vector_load
    if w.t.aligned_vector_load and _aligned(op, t):
        fmt = w.t.aligned_vector_load
    counted = op.attributes.get(STORE_LANES_ATTR)
    if isinstance(counted, IntegerAttr):  # the first elements only, the other lanes zero (an interleaving copy's last columns)
        # made only for targets with `partial_vector_store_bytes`, which spell this load too
        assert w.t.partial_vector_load, f"{w.t.name}: egpu.vload of the first lanes without a partial_vector_load"
        return Expr(w.vector_spelling(w.t.partial_vector_load, t, p=f"&{w.access(op.memref, index)}", k=str(counted.value.data)))
    text = w.vector_spelling(fmt, t, p=f"&{w.access(op.memref, index)}", lanes=", ".join(lanes))
    return Expr(text)


def _vload_repeat(w: Writer, op: egpu.VLoadRepeatOp) -> Expr:
    """A run of k elements repeated over the lanes: the target's load of a run of that many
    bytes broadcast (`repeat_loads`: C's 64-bit broadcast), else a lane-wise helper of the
    k elements."""
    t = op.result.type
    assert isinstance(t, VectorType)
    n, k = t.get_shape()[0], op.run.value.data
    index = w.flat_values(op.memref, op.indices)
    fmt = w.t.repeat_loads.get(k * element_bits(t.get_element_type()))
    if fmt:
        return Expr(w.vector_spelling(fmt, t, p=f"&{w.access(op.memref, index)}"))
    function = _lane_table_helper(w, f"vload_repeat{k}", t, k, lambda j: j % k, f"k % {k}")
    return Expr(f"{function}({', '.join(_vector_lane_accesses(w, op.memref, index, k))})")


def _vextract(w: Writer, op: egpu.VExtractOp) -> Expr:
    return Expr(w.lane(w.value(op.vector).operand(ATOM), str(op.lane.value.data)))


def _vstore(w: Writer, op: egpu.VStoreOp) -> None:
    t = op.value.type
    assert isinstance(t, VectorType)
    index = w.flat_values(op.memref, op.indices)
    value = w.value(op.value)
    fmt = w.t.aligned_vector_store if w.t.aligned_vector_store and _aligned(op, t) else w.t.vector_store
    stored = op.attributes.get(STORE_LANES_ATTR)
    count = stored.value.data if isinstance(stored, IntegerAttr) else t.get_shape()[0]
    if count < t.get_shape()[0]:  # the first `count` lanes only (a transposing copy's partial tile)
        fmt = w.t.partial_vector_store
        if fmt:
            w.line(w.vector_spelling(fmt, t, p=f"&{w.access(op.memref, index)}", v=value.text, k=str(count)))
            return
    elif STREAM_ATTR in op.attributes:  # transform.einc.stream_stores (einc-stream-stores checked the size)
        fmt = w.t.stream_stores.get(vector_bytes(t), fmt)
    if fmt:
        p = f"&{w.access(op.memref, index)}"
        w.line(w.vector_spelling(fmt, t, p=p, v=value.text))
        return
    if op.value not in w.names:  # stored lane by lane: name an expression once
        name = w.declare(op.value)
        w.line(f"{w.ctype(t)} {name} = {value.text};")
        value = Expr(name)
    for k, lane in enumerate(_vector_lane_accesses(w, op.memref, index, count)):
        w.line(f"{lane} = {w.lane(value.text, str(k))};")


def _vbroadcast(w: Writer, op: egpu.VBroadcastOp) -> Expr:
    t = op.result.type
    assert isinstance(t, VectorType)
    return Expr(w.vector_spelling(w.t.vector_broadcast, t, w.value(op.value).operand(UNARY)))


def _lane_table_helper(w: Writer, name: str, t: VectorType, k: int, source: Callable[[int], int], c_source: str) -> str:
    """A lane-wise helper `name` of k scalar arguments a0..a(k-1) returning a vector of type
    `t` whose lane j is a`source(j)`: a vector literal where the target has one (gcc builds it
    from broadcasts), else a loop whose lane `k` takes v[`c_source`]."""
    n = t.get_shape()[0]
    T, scalar = w.ctype(t), w.ctype(t.get_element_type())
    if w.t.vector_literal:
        lanes = ", ".join(f"a{source(j)}" for j in range(n))
        body = f"return {w.vector_spelling(w.t.vector_literal, t, lanes)};"
    else:
        body = (
            f"{T} r; {scalar} v[{k}] = {{{', '.join(f'a{j}' for j in range(k))}}}; "
            f"for (int k = 0; k < {n}; k++) {w.lane('r', 'k')} = v[{c_source}]; return r;"
        )
    return w.lanewise_helper(name, t, [(scalar, f"a{j}") for j in range(k)], T, body)


def _vbroadcast_runs(w: Writer, op: egpu.VBroadcastRunsOp) -> Expr:
    """k runs of W/k lanes, each one value (a lane-wise helper on every target)."""
    t = op.result.type
    assert isinstance(t, VectorType)
    n, k = t.get_shape()[0], len(op.values)
    function = _lane_table_helper(w, f"vbroadcast_runs{k}", t, k, lambda j: j // (n // k), f"k / {n // k}")
    return Expr(f"{function}({', '.join(w.value(v).text for v in op.values)})")


def _vshuffle(w: Writer, op: egpu.VShuffleOp) -> Expr:
    """Lanes of two vectors by a constant mask: the target's shuffle, else a lane-wise helper."""
    t = op.result.type
    assert isinstance(t, VectorType)
    n, lanes = t.get_shape()[0], op.lanes
    a, b = w.value(op.a).text, w.value(op.b).text
    if w.t.vector_shuffle:
        return Expr(w.t.vector_shuffle.format(a=a, b=b, mask=", ".join(map(str, lanes))))
    T = w.ctype(t)
    picks = " ".join(f"{w.lane('r', str(j))} = {w.lane('a' if k < n else 'b', str(k % n))};" for j, k in enumerate(lanes))
    name = "vshuffle_" + "_".join(map(str, lanes))
    function = w.lanewise_helper(name, t, [(T, "a"), (T, "b")], T, f"{T} r; {picks} return r;")
    return Expr(f"{function}({a}, {b})")


_REDUCE_OPS: dict[tuple[egpu.ReduceKind, bool], type[Operation]] = {
    (egpu.ReduceKind.ADD, True): arith.AddfOp, (egpu.ReduceKind.MUL, True): arith.MulfOp,
    (egpu.ReduceKind.MAX, True): arith.MaximumfOp, (egpu.ReduceKind.MIN, True): arith.MinimumfOp,
    (egpu.ReduceKind.ADD, False): arith.AddiOp, (egpu.ReduceKind.MUL, False): arith.MuliOp,
    (egpu.ReduceKind.MAX, False): arith.MaxSIOp, (egpu.ReduceKind.MIN, False): arith.MinSIOp,
}  # fmt: skip
"""The scalar combine of a lane reduction (floats: NaN-propagating max/min, as einsum's)."""


def _vreduce(w: Writer, op: egpu.VReduceOp) -> Expr:
    t = op.vector.type
    assert isinstance(t, VectorType)
    element = t.get_element_type()
    kind = op.kind.data
    combine = w.scalar_spelling(
        _REDUCE_OPS[(kind, isinstance(element, AnyFloat))], ["r", f"({w.lane('a', 'k')})"], element
    )
    scalar = w.ctype(element)
    n = t.get_shape()[0]
    body = (
        f"{scalar} r = {w.lane('a', '0')}; for (int k = 1; k < {n}; k++) "
        f"r = {combine}; return r;"
    )
    tree = w.t.vector_shuffle and n > 1 and n & (n - 1) == 0  # a sum too: the shuffles' order
    if (tree or kind in (egpu.ReduceKind.MAX, egpu.ReduceKind.MIN)) and n > 2 and n & (n - 1) == 0:
        # a tree (halves, then quarters, ...): log2(n) dependent steps instead of n - 1 (a
        # row maximum's latency); max and min give the same value in any order (a NaN if
        # any lane holds one, +0 over -0)
        pair = w.scalar_spelling(_REDUCE_OPS[(kind, isinstance(element, AnyFloat))], ["x[k]", "x[k + h]"], element)
        body = (
            f"{scalar} x[{n}]; for (int k = 0; k < {n}; k++) x[k] = {w.lane('a', 'k')}; "
            f"for (int h = {n // 2}; h > 0; h /= 2) for (int k = 0; k < h; k++) x[k] = {pair}; return x[0];"
        )
    if tree:
        # the same tree in vector registers: halves folded onto the low lanes by shuffles
        # (a row sum's lanes added in log2(n) vector steps instead of n - 1 dependent scalar
        # adds and a trip through memory; the tree's order, not the sequential one)
        op_type = _REDUCE_OPS[(kind, isinstance(element, AnyFloat))]
        steps = []
        for h in (n >> k for k in range(1, n.bit_length())):
            moved = w.t.vector_shuffle.format(a="a", b="a", mask=", ".join(str(k + h if k + h < n else k) for k in range(n)))
            if op_type in w.t.vector_operators:
                steps.append(f"a = a {'+' if kind == egpu.ReduceKind.ADD else '*'} {moved};")
            else:
                steps.append(f"a = {w.lanewise_function(op_type, t, 2)}(a, {moved});")
        body = f"\n#if {w.t.vector_shuffle_guard}\n  {' '.join(steps)} return {w.lane('a', '0')};\n#else\n  {body}\n#endif\n"
    function = w.lanewise_helper(f"vreduce_{kind.value}", t, [(w.ctype(t), "a")], scalar, body)
    return Expr(f"{function}({w.value(op.vector).text})")


def _vconvert(w: Writer, op: egpu.VConvertOp) -> Expr:
    t, source = op.result.type, op.vector.type
    assert isinstance(t, VectorType) and isinstance(source, VectorType)
    if w.t.vector_convert:
        return Expr(w.vector_spelling(w.t.vector_convert, t, w.value(op.vector).text))
    T, S = w.ctype(t), w.ctype(source)
    scalar = w.ctype(t.get_element_type())
    convert = w.t.narrow_lane_conversion
    # a 16-bit float kept as its bits (CUDA, HIP): the target's own conversion per lane
    lane = convert(w, source.get_element_type(), t.get_element_type()) if convert is not None else None
    a = w.lane("a", "k")
    converted = f"{lane}({a})" if lane else f"({scalar}){a}"
    body = f"{T} r; for (int k = 0; k < {t.get_shape()[0]}; k++) {w.lane('r', 'k')} = {converted}; return r;"
    function = w.lanewise_helper(f"vconvert_{w.suffix(source)}", t, [(S, "a")], T, body)
    return Expr(f"{function}({w.value(op.vector).text})")


def _vfma(w: Writer, op: egpu.VFmaOp) -> Expr:
    t = op.result.type
    assert isinstance(t, VectorType)
    lanes = [f"({w.lane(n, 'k')})" for n in "abc"]
    scalar = w.scalar_spelling(mathd.FmaOp, lanes, t.get_element_type())
    T = w.ctype(t)
    body = f"{T} r; for (int k = 0; k < {t.get_shape()[0]}; k++) {w.lane('r', 'k')} = {scalar}; return r;"
    function = w.lanewise_helper("vfma", t, [(T, n) for n in "abc"], T, body)
    return Expr(f"{function}({', '.join(w.value(o).text for o in op.operands)})")


VECTOR_STATEMENTS: dict[type[Operation], Callable[[Writer, Operation], None]] = {
    egpu.VStoreOp: statement(egpu.VStoreOp, _vstore),
}
VECTOR_EXPRESSIONS: dict[type[Operation], Callable[[Writer, Operation], Expr]] = {
    egpu.VLoadOp: expression(egpu.VLoadOp, _vload),
    egpu.VLoadRepeatOp: expression(egpu.VLoadRepeatOp, _vload_repeat),
    egpu.VBroadcastOp: expression(egpu.VBroadcastOp, _vbroadcast),
    egpu.VBroadcastRunsOp: expression(egpu.VBroadcastRunsOp, _vbroadcast_runs),
    egpu.VConvertOp: expression(egpu.VConvertOp, _vconvert),
    egpu.VReduceOp: expression(egpu.VReduceOp, _vreduce),
    egpu.VFmaOp: expression(egpu.VFmaOp, _vfma),
}
"""Printers of the vector ops: their results are always named (never inlined)."""


STATEMENTS: dict[type[Operation], Callable[[Writer, Operation], None]] = {
    affine.ForOp: statement(affine.ForOp, _affine_for),
    affine.YieldOp: statement(affine.YieldOp, _yield),
    affine.StoreOp: statement(affine.StoreOp, _store),
    scf.ForOp: statement(scf.ForOp, _scf_for),
    scf.IfOp: statement(scf.IfOp, _scf_if),
    scf.YieldOp: statement(scf.YieldOp, _yield),
    memref.StoreOp: statement(memref.StoreOp, _store),
    memref.AllocOp: statement(memref.AllocOp, _alloc),
    memref.AllocaOp: statement(memref.AllocaOp, _alloca),
    memref.DeallocOp: statement(memref.DeallocOp, _dealloc),
    egpu.PrefetchOp: statement(egpu.PrefetchOp, _prefetch),
    func.ReturnOp: statement(func.ReturnOp, _return),
}
INLINE_INTO_STATEMENTS = (affine.StoreOp, memref.StoreOp, affine.YieldOp, scf.YieldOp, scf.IfOp)
"""Statements whose operands may be inlined expressions (not loop bounds or carried inits:
those are printed before the loop and must not move past other statements)."""

EXPRESSIONS: dict[type[Operation], Callable[[Writer, Operation], Expr]] = {
    affine.LoadOp: expression(affine.LoadOp, _affine_load),
    memref.LoadOp: expression(memref.LoadOp, _memref_load),
    affine.ApplyOp: expression(affine.ApplyOp, _affine_apply),
    affine.MinOp: expression(affine.MinOp, _affine_min),
    egpu.VExtractOp: expression(egpu.VExtractOp, _vextract),
    egpu.VShuffleOp: expression(egpu.VShuffleOp, _vshuffle),
}
