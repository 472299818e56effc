"""Packed accesses of 16-bit floats kept only in memory (`einc-vectorize-global`'s shape 5):
an elementwise loop over W consecutive float16/bfloat16 elements (W = 2, 4 or 8: at most 16
bytes) whose loads are `egpu.load_extf` and stores `egpu.store_truncf` becomes one aligned
vector load per loaded buffer (`vector<W x f16>`, widened to float32 lanes by
`egpu.vconvert`: exact), the body unrolled W times on the extracted lanes in float32 with
its `egpu.round`s as they were (the scalar path's arithmetic, op for op: the same bits), and
one aligned vector store per stored buffer (the lanes packed by `egpu.vbroadcast` and
`egpu.vshuffle`, narrowed by `egpu.vconvert`: round to nearest even, as `store_truncf`).
Where the target keeps the 16-bit type itself (HIP's `_Float16`: plain `affine.load`s and
`affine.store`s of the buffer, the body's own `arith.extf`/`truncf` around its float32
ops), the lanes are extracted and packed in that type and no conversion is added.

Legal when the loop runs from a multiple of W by 1 exactly W times, its body holds no
regions, no carried values and no side effects but loads and stores, every store is of a
16-bit float kernel argument at indices that move by one in the last dimension (unit
stride) and whose flat index is a multiple of W at the first iteration (aligned: the launch
contract aligns each argument to what `record_alignment` states), each stored buffer is
stored once and never loaded (no carried dependence and no read of a lane another lane
wrote first). Loads of that kind are packed too; any other load (a float32 input, an
element every lane reads, an unaligned one) stays a scalar load in each lane.

Where the target computes in packed 16-bit instructions for T (`packed_narrow_arithmetic`:
CUDA's float16 and bfloat16, HIP's float16) and every op of the body is an add, sub or mul
whose float32 result is rounded once to the 16-bit type T (`egpu.round`, or `arith.truncf`
where the target keeps T: its next use widened again by `arith.extf`), with float32
constants T holds, the body is not unrolled: the loads stay `vector<W x T>`, each op becomes
one op on them, the store stores the result (`pack_narrow_arithmetic`). The same bits: a float32 add, sub or mul rounded to T is T's
correctly rounded op, since float32's 24 bits are at least 2p + 2 (p = 11, 8).

A work-item's chunk cut short at the end of the extent (`for i = L to min(L + W, e(...))`:
a chunk of 4 over 1002 elements, the last work-item's 2) is versioned (`version_partial_chunk`):
`if (e(...) >= L + W)` the loop with constant bounds, packed as above, else the loop as it
was (the scalar tail: the elements past the last full chunk).
"""

from __future__ import annotations

from collections.abc import Callable, Collection

from xdsl.dialects import affine, arith, scf
from xdsl.dialects.builtin import (
    AffineMapAttr,
    AnyFloat,
    IndexType,
    FloatAttr,
    IntegerAttr,
    MemRefType,
    VectorType,
    bf16,
    f16,
    f32,
    i64,
)
from xdsl.ir import Attribute, Block, Operation, Region, SSAValue
from xdsl.ir.affine import AffineConstantExpr, AffineMap
from xdsl.rewriter import InsertPoint, Rewriter
from xdsl.traits import is_side_effect_free

from einc.dialects import egpu
from einc.ir.attrs import ALIGN_ATTR
from einc.transforms.affine_index import dims_to_operands
from einc.transforms.alignment import expr_step, flat_divisor, identity_map
from einc.transforms.loop_analysis import trip_count

NARROW_FLOATS = (f16, bf16)
WIDTHS = (8, 4, 2)


def _element(v: SSAValue) -> Attribute:
    t = v.type
    assert isinstance(t, MemRefType)
    return t.get_element_type()


def _narrow_buffer(v: SSAValue) -> bool:
    t = v.type
    return isinstance(t, MemRefType) and t.get_element_type() in NARROW_FLOATS


ACCESSES = (egpu.LoadExtfOp, egpu.StoreTruncfOp, affine.LoadOp, affine.StoreOp)
Access = egpu.LoadExtfOp | egpu.StoreTruncfOp | affine.LoadOp | affine.StoreOp


def _lane_type(op: Access) -> Attribute:
    """A lane's scalar type: float32 for the widening/narrowing accesses (CUDA's storage-only
    halves), the buffer's own for plain ones (HIP's `_Float16`)."""
    return op.result.type if isinstance(op, egpu.LoadExtfOp | affine.LoadOp) else op.value.type


def _access_map(op: Access) -> tuple[AffineMap, list[SSAValue]]:
    if isinstance(op, affine.LoadOp | affine.StoreOp):
        return dims_to_operands(op.map.data), list(op.indices)
    return identity_map(len(op.indices)), list(op.indices)


def _index_values(op: Access) -> list[SSAValue]:
    """The element's index values (one `affine.apply` per dimension of an affine access,
    before it)."""
    if not isinstance(op, affine.LoadOp | affine.StoreOp):
        return list(op.indices)
    m = dims_to_operands(op.map.data)
    values: list[SSAValue] = []
    for e in m.results:
        apply = affine.ApplyOp(list(op.indices), AffineMapAttr(AffineMap(m.num_dims, 0, (e,))))
        Rewriter.insert_op(apply, InsertPoint.before(op))
        values.append(apply.result)
    return values


def _unpackable(op: Access, loop: affine.ForOp, width: int, is_argument: Callable[[SSAValue], bool]) -> str | None:
    """Why the access `op` is not one of a packed vector, or None (a load that is not
    stays a scalar load in each lane: a float32 input, an element every lane reads)."""
    if not (is_argument(op.memref) and _narrow_buffer(op.memref) and _lane_type(op) in (f32, *NARROW_FLOATS)):
        return "an access that is not of a 16-bit float argument"
    iv = loop.body.block.args[0]
    m, operands = _access_map(op)
    steps = [expr_step(e, operands, iv, loop, width, {iv: width}) for e in m.results]
    if not (steps and steps[-1] == 1 and all(s == 0 for s in steps[:-1])):
        return "not unit-stride"
    memory = op.memref.type
    assert isinstance(memory, MemRefType)
    if flat_divisor(memory, m, operands, {iv: width}) % width:
        return "unaligned"
    return None


def narrow_loop_failure(loop: affine.ForOp, is_argument: Callable[[SSAValue], bool]) -> str | None:
    """Why `loop` is not shape 5 (module docstring), or None."""
    width = trip_count(loop)
    if width not in WIDTHS or loop.step.value.data != 1:
        return "trip count"
    if loop.results:
        return "carried values"
    lb = loop.lowerBoundMap.data
    if loop.lowerBoundOperands or len(lb.results) != 1 or lb.eval([], [])[0] % width:
        return "bounds"
    body = loop.body.block
    stored: dict[SSAValue, int] = {}
    loaded: set[SSAValue] = set()
    for op in body.ops:
        if op.regions:
            return "body"
        if isinstance(op, ACCESSES):
            store = isinstance(op, egpu.StoreTruncfOp | affine.StoreOp)
            why = _unpackable(op, loop, width, is_argument)
            if store and why is not None:
                return why
            if store:
                stored[op.memref] = stored.get(op.memref, 0) + 1
            else:
                loaded.add(op.memref)
        elif isinstance(op, affine.YieldOp):
            continue
        elif not (isinstance(op, affine.ApplyOp | egpu.RoundOp) or is_side_effect_free(op)):
            return "body"
    if not stored or any(c > 1 for c in stored.values()) or loaded & set(stored):
        return "a stored buffer stored twice or loaded"
    return None


def _pack(lanes: list[SSAValue], before: Operation) -> SSAValue:
    """A `vector<W x f32>` of the scalar `lanes`: broadcasts joined pairwise by shuffles
    (each partial vector holds its run of lanes first)."""
    width = len(lanes)
    t = VectorType(lanes[0].type, [width])
    parts: list[SSAValue] = []
    for v in lanes:
        splat = egpu.VBroadcastOp(v, t)
        Rewriter.insert_op(splat, InsertPoint.before(before))
        parts.append(splat.result)
    run = 1
    while len(parts) > 1:
        mask = [*range(run), *(width + j for j in range(run))] + [0] * (width - 2 * run)
        joined: list[SSAValue] = []
        for a, b in zip(parts[::2], parts[1::2]):
            shuffle = egpu.VShuffleOp(a, b, mask)
            Rewriter.insert_op(shuffle, InsertPoint.before(before))
            joined.append(shuffle.result)
        parts, run = joined, run * 2
    return parts[0]


def pack_narrow_loop(loop: affine.ForOp, is_argument: Callable[[SSAValue], bool]) -> int:
    """Shape 5 of the module docstring, its legality already checked
    (`narrow_loop_failure`); returns the width."""
    width = trip_count(loop)
    assert width is not None
    start = loop.lowerBoundMap.data.eval([], [])[0]
    body = loop.body.block
    iv = body.args[0]
    packed = {
        op for op in body.ops
        if isinstance(op, egpu.LoadExtfOp | affine.LoadOp) and _unpackable(op, loop, width, is_argument) is None
    }  # fmt: skip
    loads: dict[Operation, SSAValue] = {}  # a packed load -> its lanes' vector
    stores: dict[Operation, list[SSAValue]] = {}  # a store -> each lane's value
    first_store: dict[Operation, Access] = {}  # -> lane 0's clone
    for k in range(width):
        position = arith.ConstantOp(IntegerAttr(start + k, IndexType()))
        Rewriter.insert_op(position, InsertPoint.before(loop))
        mapping: dict[SSAValue, SSAValue] = {iv: position.result}
        for op in body.ops:
            if isinstance(op, affine.YieldOp):
                continue
            if op in packed and k:
                lane = egpu.VExtractOp(loads[op], k)
                Rewriter.insert_op(lane, InsertPoint.before(loop))
                mapping[op.results[0]] = lane.result
                continue
            if isinstance(op, egpu.StoreTruncfOp | affine.StoreOp):
                stores.setdefault(op, []).append(mapping.get(op.value, op.value))
                if k == 0:
                    clone = op.clone(value_mapper=dict(mapping))
                    assert isinstance(clone, egpu.StoreTruncfOp | affine.StoreOp)
                    Rewriter.insert_op(clone, InsertPoint.before(loop))
                    first_store[op] = clone  # its indices: the vector store's
                continue
            clone = op.clone(value_mapper=dict(mapping))
            Rewriter.insert_op(clone, InsertPoint.before(loop))
            for old, new in zip(op.results, clone.results):
                mapping[old] = new
            if op in packed:  # lane 0: the vector load in its place
                assert isinstance(clone, egpu.LoadExtfOp | affine.LoadOp)
                element = _element(clone.memref)
                vload = egpu.VLoadOp(clone.memref, _index_values(clone), VectorType(element, [width]))
                vload.attributes[ALIGN_ATTR] = IntegerAttr(2 * width, i64)
                Rewriter.insert_op(vload, InsertPoint.before(clone))
                lanes = vload.result
                if clone.result.type != element:  # egpu.load_extf: widened exactly
                    wide = egpu.VConvertOp(vload.result, VectorType(clone.result.type, [width]))
                    Rewriter.insert_op(wide, InsertPoint.before(clone))
                    lanes = wide.result
                lane = egpu.VExtractOp(lanes, 0)
                Rewriter.insert_op(lane, InsertPoint.before(clone))
                Rewriter.erase_op(clone)
                mapping[op.results[0]] = lane.result
                loads[op] = lanes
    for op, values in stores.items():
        clone = first_store[op]
        clone.detach()  # after every lane's value
        Rewriter.insert_op(clone, InsertPoint.before(loop))
        element = _element(clone.memref)
        assert isinstance(element, AnyFloat)
        packed = _pack(values, clone)
        if values[0].type != element:  # egpu.store_truncf: rounded to nearest even
            narrow = egpu.VConvertOp(packed, VectorType(element, [width]))
            Rewriter.insert_op(narrow, InsertPoint.before(clone))
            packed = narrow.result
        vstore = egpu.VStoreOp(packed, clone.memref, _index_values(clone))
        vstore.attributes[ALIGN_ATTR] = IntegerAttr(2 * width, i64)
        Rewriter.insert_op(vstore, InsertPoint.before(clone))
        Rewriter.erase_op(clone)
    Rewriter.erase_op(loop)
    return width


PACKED_ARITHMETIC = (arith.AddfOp, arith.SubfOp, arith.MulfOp)
"""The float32 ops whose result rounded once to a 16-bit float is the 16-bit op's own,
correctly rounded (float32's 24 bits are at least 2p + 2 for float16's p = 11 and
bfloat16's 8: the double rounding is innocuous), so a packed float16/bfloat16 instruction
gives the same bits. Not division (no packed instruction), not a fused multiply-add (the
language rounds the product)."""


def _exact_in(value: float, element: Attribute) -> bool:
    import ml_dtypes
    import numpy as np

    kind = np.float16 if element == f16 else ml_dtypes.bfloat16
    narrow = np.array([value], np.float32).astype(kind).astype(np.float32)[0]
    return bool(narrow == np.float32(value)) and not np.isnan(narrow)


def _rounding(op: Operation) -> bool:
    """Whether `op` rounds a float32 value once to a 16-bit float: `egpu.round` (the value
    kept in float32: CUDA's storage-only halves) or `arith.truncf` (the value in the type:
    HIP's `_Float16`)."""
    return isinstance(op, egpu.RoundOp) or (isinstance(op, arith.TruncFOp) and op.result.type in NARROW_FLOATS)


def narrow_arithmetic_failure(
    loop: affine.ForOp, is_argument: Callable[[SSAValue], bool], elements: Collection[Attribute] = NARROW_FLOATS
) -> str | None:
    """Why shape 5's loop (legal: `narrow_loop_failure`) does not compute in packed 16-bit
    arithmetic (`pack_narrow_arithmetic`), or None: its body only the loads of one 16-bit
    type T in `elements` (the types the target has packed instructions for; all loads
    packed), widened exactly to float32 (`egpu.load_extf`, or a plain load and `arith.extf`
    where the target keeps T itself), float32 constants T holds exactly, `PACKED_ARITHMETIC`
    ops each rounded to T by its only use (`egpu.round`, or `arith.truncf` widened again by
    `arith.extf` for a next op), and stores of rounded values."""
    width = trip_count(loop)
    assert width is not None
    element: Attribute | None = None
    rounded: set[SSAValue] = set()  # T's values: loaded (plain) or rounded
    widened: set[SSAValue] = set()  # their exact float32 values
    for op in loop.body.block.ops:
        if isinstance(op, ACCESSES):
            if _unpackable(op, loop, width, is_argument) is not None:
                return "an access that is not packed"
            if element not in (None, _element(op.memref)):
                return "two 16-bit types"
            element = _element(op.memref)
            if isinstance(op, egpu.LoadExtfOp):
                widened.add(op.result)
            elif isinstance(op, affine.LoadOp):
                rounded.add(op.result)
            elif op.value not in rounded:
                return "a store of a value not rounded"
        elif isinstance(op, arith.ConstantOp):
            continue  # checked where used
        elif isinstance(op, PACKED_ARITHMETIC):
            uses = list(op.result.uses)
            if op.result.type != f32 or len(uses) != 1 or not _rounding(uses[0].operation):
                return "an op not rounded once"
        elif _rounding(op):
            if not isinstance(op.operands[0].owner, PACKED_ARITHMETIC):
                return "a rounding of something else"
            rounded.add(op.results[0])
            if isinstance(op, egpu.RoundOp):  # the rounded value kept in float32
                widened.add(op.result)
        elif isinstance(op, arith.ExtFOp):
            if op.input not in rounded or op.result.type != f32:
                return "a widening of something else"
            widened.add(op.result)
        elif not isinstance(op, affine.ApplyOp | affine.YieldOp):
            return "another op"
    if element is None:
        return "no access"
    if element not in elements:
        return f"no packed {element} instructions"
    for op in loop.body.block.ops:
        if isinstance(op, egpu.RoundOp) and op.as_type != element:
            return "a rounding to another type"
        if isinstance(op, arith.TruncFOp) and op.result.type != element:
            return "a rounding to another type"
        if not isinstance(op, PACKED_ARITHMETIC):
            continue
        for v in op.operands:  # a packed value, or a float32 constant (maybe hoisted) T holds
            if v in widened:
                continue
            owner = v.owner
            if not (isinstance(owner, arith.ConstantOp) and isinstance(owner.value, FloatAttr) and v.type == f32):
                return "an operand that is neither packed nor a constant"
            if not _exact_in(owner.value.value.data, element):
                return "a constant the 16-bit type does not hold"
    return None


def _vector_indices(op: Access, mapping: dict[SSAValue, SSAValue], before: Operation) -> list[SSAValue]:
    """The indices of the vector access replacing `op` (its loop's variable as `mapping`
    says), inserted before `before`: an affine access's one `affine.apply` per dimension."""
    operands = [mapping.get(v, v) for v in op.indices]
    if not isinstance(op, affine.LoadOp | affine.StoreOp):
        return operands
    m = dims_to_operands(op.map.data)
    applies = [affine.ApplyOp(operands, AffineMapAttr(AffineMap(m.num_dims, 0, (e,)))) for e in m.results]
    Rewriter.insert_op(applies, InsertPoint.before(before))
    return [a.result for a in applies]


def pack_narrow_arithmetic(loop: affine.ForOp, is_argument: Callable[[SSAValue], bool]) -> int:
    """Shape 5 in packed 16-bit arithmetic (`narrow_arithmetic_failure` is None): each
    load one `vector<W x T>`, each rounded op one op on `vector<W x T>` (the same bits per
    lane; its widening and rounding the vector itself), each constant a float32 splat
    narrowed exactly, each store one vector store; returns the width."""
    width = trip_count(loop)
    assert width is not None
    start = loop.lowerBoundMap.data.eval([], [])[0]
    body = loop.body.block
    position = arith.ConstantOp(IntegerAttr(start, IndexType()))
    Rewriter.insert_op(position, InsertPoint.before(loop))
    mapping: dict[SSAValue, SSAValue] = {body.args[0]: position.result}
    vectors: dict[SSAValue, SSAValue] = {}
    element = _element(next(o for o in body.ops if isinstance(o, ACCESSES)).memref)
    for op in list(body.ops):
        if isinstance(op, affine.YieldOp):
            continue
        if isinstance(op, affine.ApplyOp):
            clone = op.clone(value_mapper=dict(mapping))
            Rewriter.insert_op(clone, InsertPoint.before(loop))
            mapping[op.result] = clone.result
        elif isinstance(op, egpu.LoadExtfOp | affine.LoadOp):
            vload = egpu.VLoadOp(op.memref, _vector_indices(op, mapping, loop), VectorType(element, [width]))
            vload.attributes[ALIGN_ATTR] = IntegerAttr(2 * width, i64)
            Rewriter.insert_op(vload, InsertPoint.before(loop))
            vectors[op.result] = vload.result
        elif isinstance(op, arith.ConstantOp):
            continue  # splat where used (its type: the vectors' element)
        elif isinstance(op, PACKED_ARITHMETIC):
            operands: list[SSAValue] = []
            for v in op.operands:
                if v in vectors:
                    operands.append(vectors[v])
                    continue
                owner = v.owner
                assert isinstance(owner, arith.ConstantOp)
                constant = arith.ConstantOp(owner.value, f32)
                splat = egpu.VBroadcastOp(constant.result, VectorType(f32, [width]))
                narrow = egpu.VConvertOp(splat.result, VectorType(element, [width]))  # exact
                Rewriter.insert_op([constant, splat, narrow], InsertPoint.before(loop))
                operands.append(narrow.result)
            packed = type(op)(operands[0], operands[1])
            Rewriter.insert_op(packed, InsertPoint.before(loop))
            vectors[op.result] = packed.result
        elif isinstance(op, egpu.RoundOp | arith.TruncFOp | arith.ExtFOp):
            vectors[op.results[0]] = vectors[op.operands[0]]
        elif isinstance(op, egpu.StoreTruncfOp | affine.StoreOp):
            vstore = egpu.VStoreOp(vectors[op.value], op.memref, _vector_indices(op, mapping, loop))
            vstore.attributes[ALIGN_ATTR] = IntegerAttr(2 * width, i64)
            Rewriter.insert_op(vstore, InsertPoint.before(loop))
    Rewriter.erase_op(loop)
    return width


def version_partial_chunk(loop: affine.ForOp, is_argument: Callable[[SSAValue], bool]) -> affine.ForOp | None:
    """A chunk cut short at the extent's end (module docstring): a loop from a constant L
    by 1 to `min(L + W, e1(...), ...)` (W in WIDTHS). When its full-chunk copy (upper bound
    L + W) is shape 5, the loop becomes `scf.if (every e_k >= L + W) {copy} else {loop}` and
    the copy is returned (to be packed); else None and nothing changes."""
    lb, ub = loop.lowerBoundMap.data, loop.upperBoundMap.data
    if loop.lowerBoundOperands or len(lb.results) != 1 or loop.step.value.data != 1 or len(ub.results) < 2:
        return None
    start = lb.eval([], [])[0]
    constants = [e.value for e in ub.results if isinstance(e, AffineConstantExpr)]
    if len(constants) != 1 or constants[0] - start not in WIDTHS:
        return None
    end = constants[0]
    region = Region()
    loop.body.clone_into(region)
    full = affine.ForOp.from_region((), (), (), (), start, end, region, 1)
    full.attributes.update(loop.attributes)
    Rewriter.insert_op(full, InsertPoint.before(loop))
    if narrow_loop_failure(full, is_argument) is not None:
        Rewriter.erase_op(full)
        return None
    full.detach()
    operands = list(loop.upperBoundOperands)
    conditions: list[Operation] = []
    condition: SSAValue | None = None
    for e in ub.results:
        if isinstance(e, AffineConstantExpr):
            continue
        bound = affine.ApplyOp(operands, AffineMapAttr(AffineMap(ub.num_dims, ub.num_symbols, (e,))))
        limit = arith.ConstantOp(IntegerAttr(end, IndexType()))
        test = arith.CmpiOp(bound, limit, "sge")
        conditions += [bound, limit, test]
        if condition is not None:
            both = arith.AndIOp(condition, test)
            conditions.append(both)
            test = both
        condition = test.result
    assert condition is not None
    Rewriter.insert_op(conditions, InsertPoint.before(loop))
    branch = scf.IfOp(condition, [], Region(Block([full, scf.YieldOp()])), Region(Block([scf.YieldOp()])))
    Rewriter.insert_op(branch, InsertPoint.before(loop))
    loop.detach()
    else_block = branch.false_region.block
    assert else_block.first_op is not None
    else_block.insert_op_before(loop, else_block.first_op)
    return full


__all__ = [
    "NARROW_FLOATS",
    "narrow_arithmetic_failure",
    "narrow_loop_failure",
    "pack_narrow_arithmetic",
    "pack_narrow_loop",
    "version_partial_chunk",
]
