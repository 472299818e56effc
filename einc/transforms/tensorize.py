"""`tensorize`: a 16 x 16 x K float16/bfloat16 contraction nest onto tensor cores.

The loop given and the two loops alone inside it (a perfect band of three, in any order)
must compute `C[.., i, .., j] += f32(A[.., i, .., k]) * f32(B[.., k, .., j])` with A and B
both float16 or both bfloat16, C float32 (a matmul whose inputs are cast to float32: einc's
way to accumulate in float32), i and j running 0..16 and k a multiple of 16, each at unit
stride in one dimension of its buffers (transposed operands are fine), and A, B, C kernel
tensors or shared tiles (not a work-item's local array: the lanes read one another's data).
The band becomes one loop over the warp's lanes, bound to `thread.x`, holding `egpu.mma`
(einc.dialects.egpu_mma):

    affine.for %i = 0 to 16 {               affine.for %lane = 0 to 32 {einc.bind = "thread.x"}
      affine.for %j = 0 to 16 {       ->      egpu.mma %A[%io, 0], %B[0, %jo], %C[%io, %jo]
        affine.for %k = 0 to 64 {                 lane %lane {lanes = 32, k = 64, ...}
          C[io + i, jo + j] += ...

`intrinsic` picks the lanes: "mma.m16n8k16" (CUDA `mma.sync`, a warp of 32) or
"mfma.16x16x16" (HIP MFMA on CDNA, a wavefront of 64). Which targets have them is the
schedule layer's check (einc.schedule.checks); this utility is target-neutral. Refused
(a Failure naming what does not fit): another shape or dtype, a body that is not the
contraction, a lane loop nested in a loop bound to thread.x or around thread-bound loops.
Loops around it bound to thread.y / thread.z are the block's warps: each warp computes its
own 16 x 16 tile (a block of several warps shares the tiles it stages in shared memory).

The accumulator lives in registers for the whole reduction: where C's buffer and the indices
of its tile are defined outside the loops the lane loop wraps (a kernel tensor, not a shared
tile staged inside them) and nothing else inside them touches C, each lane gets a private fragment (`C_frag`, `einc.fragment`: its
`256 / lanes` elements of the tile, in the hardware's layout), copied in from C once before
the reduction's loops and out once after them; `egpu.mma` accumulates into the fragment
(its fragment form). `einc-init-accumulators` then starts the fragment at the fill's
identity (the fill nest, a kernel of its own on a device, goes):

    affine.for %lane = 0 to 32 {
      %f = memref.alloca() {einc.fragment} : memref<8xf32>
      affine.for %e = 0 to 8 { %f[%e] = C[io + lane floordiv 4 + 8 * (e floordiv 2 mod 2), ..] }
      affine.for %ko ... { copies; egpu.mma %A_s[..], %B_s[..], %f[%c0] lane %lane {c_dims = []} }
      affine.for %e = 0 to 8 { C[..] = %f[%e] }
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from xdsl.dialects import affine, arith, memref
from xdsl.dialects.builtin import (
    AffineMapAttr,
    BFloat16Type,
    Float16Type,
    Float32Type,
    IndexType,
    IntegerAttr,
    StringAttr,
    UnitAttr,
)
from xdsl.ir import Block, Operation, SSAValue
from xdsl.ir.affine import AffineExpr, AffineMap
from xdsl.rewriter import InsertPoint, Rewriter

from einc.dialects.egpu_mma import FRAGMENT, LANES, MmaOp, fragment_size
from einc.ir.attrs import (
    AXIS_ATTR,
    BIND_ATTR,
    COPY_ATTR,
    FRAGMENT_ATTR,
    MEMORY_ATTR,
    NAME_ATTR,
    SHARED_COPY_ATTR,
    STMT_ATTR,
    dtype_name,
)
from einc.transforms.affine_index import dims_to_operands
from einc.transforms.loop_analysis import band_from, constant_bounds, induction_var, split_linear
from einc.transforms.loop_build import Failure, _new_loop, describe


@dataclass(frozen=True)
class _Operand:
    """One buffer access of the contraction: the buffer, its access (a map over operands),
    and per loop role ("i", "j", "k") the dimension it moves at unit stride."""

    buffer: SSAValue
    map: AffineMap
    operands: tuple[SSAValue, ...]
    dims: dict[str, int]


def _load_of(value: SSAValue) -> affine.LoadOp | None:
    owner = value.owner
    return owner if isinstance(owner, affine.LoadOp) else None


def _widened_load(value: SSAValue) -> affine.LoadOp | None:
    """The narrow-float load `value` extends to f32 (`arith.extf` of an `affine.load`)."""
    owner = value.owner
    if isinstance(owner, arith.ExtFOp) and isinstance(owner.result.type, Float32Type):
        return _load_of(owner.input)
    return None


def _operand(what: str, access: affine.LoadOp | affine.StoreOp, ivs: dict[str, SSAValue]) -> _Operand | Failure:
    m = dims_to_operands(access.map.data)
    operands = tuple(access.indices)
    dims: dict[str, int] = {}
    for role, iv in ivs.items():
        positions = [p for p, v in enumerate(operands) if v is iv]
        for d, e in enumerate(m.results):
            coefficients = [split_linear(e, p) for p in positions]
            if any(c is None for c in coefficients):
                return Failure(f"{what}'s index {d} is not affine in the {role} loop")
            total = sum(c[0] for c in coefficients if c is not None)
            if total == 0:
                continue
            if total != 1 or role in dims:
                return Failure(f"{what} does not move at unit stride along one dimension with the {role} loop")
            dims[role] = d
    return _Operand(access.memref, m, operands, dims)


def _memory_failure(what: str, buffer: SSAValue) -> Failure | None:
    if isinstance(buffer.owner, Block):
        return None  # a tensor of the program
    if isinstance(buffer.owner, memref.AllocaOp | memref.AllocOp):
        kind = buffer.owner.attributes.get(MEMORY_ATTR)
        if isinstance(kind, StringAttr) and kind.data == "shared":
            return None
        if isinstance(buffer.owner, memref.AllocOp):
            return None  # an intermediate tensor in global memory
    return Failure(f"{what} is a work-item's local array: the warp's lanes read one another's elements (stage it in \"shared\" or not at all)")


def _bound_threads(op: Operation | None) -> bool:
    return isinstance(op, affine.ForOp) and isinstance(a := op.attributes.get(BIND_ATTR), StringAttr) and a.data.startswith("thread.")


def tensorize(loop: affine.ForOp, intrinsic: str) -> affine.ForOp | Failure:
    """Replace the contraction band at `loop` by a lane loop holding `egpu.mma` (the module
    docstring); return the lane loop."""
    what = f"cannot tensorize {describe(loop)}"
    lanes = LANES.get(intrinsic)
    if lanes is None:
        return Failure(f"{what}: unknown intrinsic '{intrinsic}' (one of {', '.join(sorted(LANES))})")
    band = band_from(loop)[:3]
    if len(band) < 3 or any(op.results for op in band):
        return Failure(f"{what}: it must be a band of three loops (rows, columns, reduction) around the contraction alone")
    extents: dict[SSAValue, int] = {}
    for b in band:
        bounds = constant_bounds(b)
        if bounds is None or bounds[0] != 0 or b.step.value.data != 1:
            return Failure(f"{what}: {describe(b)} does not run from 0 with constant bounds and step 1")
        extents[induction_var(b)] = bounds[1]
    parent = loop.parent_op()
    while parent is not None:
        if isinstance(parent, affine.ForOp) and _bound_threads(parent) and parent.attributes[BIND_ATTR] == StringAttr("thread.x"):
            return Failure(f"{what}: it lies inside a loop bound to thread.x ({describe(parent)}); the lanes are the warp's threads "
                           "(warps of a block: bind their loops to thread.y and thread.z)")
        parent = parent.parent_op()
    if any(_bound_threads(b) for b in band):
        return Failure(f"{what}: a loop of its band is bound to threads; the lanes are the warp's threads")

    body = [op for op in band[2].body.block.ops if not isinstance(op, affine.YieldOp)]
    store = body[-1]
    if not isinstance(store, affine.StoreOp) or not isinstance(add := store.value.owner, arith.AddfOp):
        return Failure(f"{what}: its body is not `C[i, j] += A[i, k] * B[k, j]`")
    c_load, product = _load_of(add.lhs), add.rhs.owner
    if c_load is None or c_load.memref is not store.memref:
        c_load, product = _load_of(add.rhs), add.lhs.owner
    if c_load is None or c_load.memref is not store.memref or not isinstance(product, arith.MulfOp):
        return Failure(f"{what}: its body is not `C[i, j] += A[i, k] * B[k, j]` (an accumulation of a product)")
    a_load, b_load = _widened_load(product.lhs), _widened_load(product.rhs)
    if a_load is None or b_load is None:
        return Failure(f"{what}: the product's factors must be float16 or bfloat16 tensors cast to float32 (`A[i, k].cast(`float32`)`)")
    types = [a_load.result.type, b_load.result.type, store.value.type]
    if not (isinstance(types[0], Float16Type | BFloat16Type) and types[0] == types[1] and isinstance(types[2], Float32Type)):
        names = ", ".join(dtype_name(t) for t in types)
        return Failure(f"{what}: tensor cores take float16 x float16 or bfloat16 x bfloat16 accumulated in float32, not {names}")
    if list(c_load.indices) != list(store.indices) or c_load.map != store.map:
        return Failure(f"{what}: it reads and writes its accumulator at different elements")
    if len(body) != 8:  # the three loads, two extensions, the product, the sum, the store
        return Failure(f"{what}: its body computes more than `C[i, j] += A[i, k] * B[k, j]`")

    # which loop is which: i moves A and C, j moves B and C, k moves A and B
    ivs = [induction_var(b) for b in band]
    accesses = {"A": a_load, "B": b_load, "C": store}
    used = {name: {iv for iv in ivs if iv in list(acc.indices)} for name, acc in accesses.items()}
    roles: dict[str, SSAValue] = {}
    for iv in ivs:
        key = (iv in used["A"], iv in used["B"], iv in used["C"])
        role = {(True, False, True): "i", (False, True, True): "j", (True, True, False): "k"}.get(key)
        if role is None or role in roles:
            return Failure(f"{what}: its loops are not the rows (A and C), columns (B and C) and reduction (A and B) of a matmul")
        roles[role] = iv
    if extents[roles["i"]] != FRAGMENT or extents[roles["j"]] != FRAGMENT or extents[roles["k"]] % FRAGMENT:
        shape = f"{extents[roles['i']]} x {extents[roles['j']]} x {extents[roles['k']]}"
        return Failure(f"{what}: the tile is {shape}; tensor cores need 16 x 16 x (a multiple of 16): tile the rows and columns by 16")
    operands: dict[str, _Operand] = {}
    for name, acc, needed in (("A", a_load, ("i", "k")), ("B", b_load, ("k", "j")), ("C", store, ("i", "j"))):
        o = _operand(name, acc, {r: roles[r] for r in needed})
        if isinstance(o, Failure):
            return Failure(f"{what}: {o.message}")
        if set(o.dims) != set(needed):
            return Failure(f"{what}: {name} does not move at unit stride along one dimension with each of its loops")
        if (failure := _memory_failure(name, o.buffer)) is not None:
            return Failure(f"{what}: {failure.message}")
        operands[name] = o

    # base indices: each access with the band's variables at 0, computed before the band
    rewriter = Rewriter()
    before = InsertPoint.before(loop)
    bases: dict[str, list[SSAValue]] = {}
    c_applies: list[affine.ApplyOp] = []
    for name, o in operands.items():
        outer = [v for v in o.operands if v not in ivs]
        zeros = [AffineExpr.constant(0) if v in ivs else AffineExpr.dimension(outer.index(v)) for v in o.operands]
        values: list[SSAValue] = []
        for e in o.map.results:
            e0 = e.replace_dims_and_symbols(zeros, [])
            apply = affine.ApplyOp(outer, AffineMapAttr(AffineMap(len(outer), 0, (e0,))))
            rewriter.insert_op(apply, before)
            values.append(apply.result)
            if name == "C":
                c_applies.append(apply)
        bases[name] = values
    lane_loop = _new_loop((), (), 0, lanes, 1, "lane")
    lane_loop.attributes[BIND_ATTR] = StringAttr("thread.x")
    stmt = loop.attributes.get(STMT_ATTR)
    if isinstance(stmt, StringAttr):
        lane_loop.attributes[STMT_ATTR] = stmt
    a, b, c = operands["A"], operands["B"], operands["C"]
    wrapped = _lane_scope(loop)
    if wrapped is not loop and (failure := _replicated_failure(wrapped, loop)) is not None:
        return Failure(f"{what}: {failure}")
    lane = induction_var(lane_loop)
    # the accumulator in registers: C's buffer and its tile's indices outside the wrapped loops
    outer_c = [v for v in c.operands if v not in ivs]
    in_registers = all(not _defined_in(v, wrapped) for v in (c.buffer, *outer_c)) and not any(
        c.buffer in op.operands for op in wrapped.walk() if not loop.is_ancestor(op))  # C used only by the band
    fragment: memref.AllocaOp | None = None
    c_buffer, c_indices, c_dims = c.buffer, bases["C"], (c.dims["i"], c.dims["j"])
    if in_registers:
        zero = arith.ConstantOp(IntegerAttr(0, IndexType()))
        rewriter.insert_op(zero, InsertPoint.before(wrapped))
        fragment = memref.AllocaOp.get(Float32Type(), 64, [fragment_size(lanes)])
        fragment.attributes[NAME_ATTR] = StringAttr(f"{_name(c.buffer)}_frag")
        fragment.attributes[FRAGMENT_ATTR] = UnitAttr()
        fragment.memref.name_hint = f"{_name(c.buffer)}_frag"
        c_buffer, c_indices, c_dims = fragment.memref, [zero.result], ()
        for apply in c_applies:  # the fragment's copies index C themselves
            rewriter.erase_op(apply)
    mma = MmaOp(
        a.buffer, bases["A"], b.buffer, bases["B"], c_buffer, c_indices, lane, lanes,
        extents[roles["k"]], ((a.dims["i"], a.dims["k"]), (b.dims["k"], b.dims["j"]), c_dims),
    )  # fmt: skip
    if wrapped is loop:
        rewriter.insert_op(mma, InsertPoint.at_start(lane_loop.body.block))
        rewriter.replace_op(loop, lane_loop)
    else:
        # sequential loops between the band and the bound loops around it (a reduction tile's
        # loop, its shared copies): the lane loop goes around them, below the bound loops, so
        # it maps onto the warp's threads like any bound loop (every lane runs the copies)
        rewriter.replace_op(loop, mma)
        rewriter.insert_op(lane_loop, InsertPoint.before(wrapped))
        wrapped.detach()
        rewriter.insert_op(wrapped, InsertPoint.at_start(lane_loop.body.block))
    if fragment is not None:
        body = lane_loop.body.block
        copy_in = _fragment_copy(c, ivs, lane, lanes, fragment.memref, into=True, stmt=stmt)
        copy_out = _fragment_copy(c, ivs, lane, lanes, fragment.memref, into=False, stmt=stmt)
        rewriter.insert_op([fragment, copy_in], InsertPoint.at_start(body))
        assert body.last_op is not None
        rewriter.insert_op(copy_out, InsertPoint.before(body.last_op))
    return lane_loop


def _name(buffer: SSAValue) -> str:
    return buffer.name_hint or "C"


def _defined_in(value: SSAValue, loop: affine.ForOp) -> bool:
    owner = value.owner
    op = owner.parent_op() if isinstance(owner, Block) else owner
    return op is not None and loop.is_ancestor(op)


def fragment_place(lane: AffineExpr, element: AffineExpr, lanes: int) -> tuple[AffineExpr, AffineExpr]:
    """(row, column) in the 16 x 16 tile of lane `lane`'s accumulator element `element`
    (einc.dialects.egpu_mma.owned as affine expressions): mma.m16n8k16 element n at row
    g + 8 (n / 2 mod 2), column 8 (n / 4) + 2 t + n mod 2 (g = lane / 4, t = lane mod 4);
    MFMA 16x16x16 element i at row 4 (lane / 16) + i, column lane mod 16."""
    if lanes == 32:
        return (lane // 4 + (element // 2 % 2) * 8,
                element // 4 * 8 + (lane % 4) * 2 + element % 2)  # fmt: skip
    return lane // 16 * 4 + element, lane % 16


def _fragment_copy(c: _Operand, ivs: Sequence[SSAValue], lane: SSAValue, lanes: int, fragment: SSAValue,
                   into: bool, stmt: object) -> affine.ForOp:  # fmt: skip
    """The loop copying the lane's accumulator elements between C's tile and the fragment
    (`into`: C -> fragment)."""
    size = fragment_size(lanes)
    loop = _new_loop((), (), 0, size, 1, "frag")
    loop.attributes[COPY_ATTR] = UnitAttr()
    loop.attributes[AXIS_ATTR] = StringAttr(f"{_name(c.buffer)}.{'in' if into else 'out'}frag")
    if isinstance(stmt, StringAttr):
        loop.attributes[STMT_ATTR] = stmt
    element = induction_var(loop)
    outer = [v for v in c.operands if v not in ivs]
    n = len(outer)
    row, col = fragment_place(AffineExpr.dimension(n), AffineExpr.dimension(n + 1), lanes)
    zeros = [AffineExpr.constant(0) if v in ivs else AffineExpr.dimension(outer.index(v)) for v in c.operands]
    results = []
    for d, e in enumerate(c.map.results):
        e0 = e.replace_dims_and_symbols(zeros, [])
        results.append(e0 + row if d == c.dims["i"] else e0 + col if d == c.dims["j"] else e0)
    far = AffineMapAttr(AffineMap(n + 2, 0, tuple(results)))
    operands = [*outer, lane, element]
    assert loop.body.block.last_op is not None
    point = InsertPoint.before(loop.body.block.last_op)
    if into:
        load = affine.LoadOp(c.buffer, operands, far, Float32Type())
        store = affine.StoreOp(load.result, fragment, [element])
    else:
        load = affine.LoadOp(fragment, [element], None, Float32Type())
        store = affine.StoreOp(load.result, c.buffer, operands, far)
    Rewriter.insert_op([load, store], point)
    return loop


def _replicated_failure(wrapped: affine.ForOp, band: affine.ForOp) -> str | None:
    """Why the code around the band in `wrapped`, which every lane runs, is not the same
    for one lane as for 32 (None where it is: loops, index arithmetic, buffers and the
    shared-memory copies of cache ops, which copy the same elements whoever runs them)."""
    for op in wrapped.walk():
        if band.is_ancestor(op):
            continue
        if isinstance(op, affine.StoreOp | memref.StoreOp) and not _in_copy(op, wrapped):
            return f"{describe(wrapped)} around it stores outside a shared-memory copy; every lane of the warp would run it"
    return None


def _in_copy(op: Operation, top: affine.ForOp) -> bool:
    parent = op.parent_op()
    while parent is not None and parent is not top:
        if SHARED_COPY_ATTR in parent.attributes:
            return True
        parent = parent.parent_op()
    return False


def _lane_scope(loop: affine.ForOp) -> affine.ForOp:
    """Where the lane loop goes: the outermost of `loop` and the unbound loops around it
    below the innermost loop bound to threads (a block's warps), or `loop` itself where no
    thread-bound loop is around it (loops a later bind may bind stay outside)."""
    scope = loop
    parent = loop.parent_op()
    while isinstance(parent, affine.ForOp) and BIND_ATTR not in parent.attributes:
        scope = parent
        parent = parent.parent_op()
    return scope if _bound_threads(parent) else loop
