"""`convert-ein-to-affine`: ein tensors and einsums to memrefs and `affine.for` nests.

    func.func @kernel(%A: tensor<4x3xf32> {ein.name = "A"}, ...) -> tensor<4x5xf32>

becomes

    func.func @kernel(%A: memref<4x3xf32> {ein.name = "A"}, ...,
                      %C: memref<4x5xf32> {ein.name = "C", ein.output})

Inputs keep their position; outputs are appended in result order and marked `ein.output`;
the function returns nothing. A returned einsum writes straight into its output argument,
any other into a `memref.alloc {ein.name = ...}` freed before the return. A reduction first
fills its output with the combiner's identity in a nest of its own, then runs the nest over
all axes (output axes outermost) with the body inlined: `ein.load` becomes `affine.load`
when its indices are affine in the loop variables, `memref.load` otherwise, and the yielded
value is combined into the output element (or stored, for `assign`).

Every `affine.for` is tagged with the statement it computes and the axis it iterates
(`{einc.stmt = "C", einc.axis = "K"}`), the fill nest also with `einc.init`, a copy nest with
`einc.copy`: schedules match loops by these tags (einc/dialects/einc_transform.py).

Stage 1 converts the signature, bridging each buffer to the tensor uses with
`bufferization.to_tensor` and each returned tensor to its output argument with
`bufferization.materialize_in_destination`; stage 2 lowers einsums, loads and the remaining
materializations (copies: an input or a result returned twice) and drops the bridges; the
index computations folded into `affine.load` maps are then removed as dead code.

Integer division is total (docs/LANGUAGE.md, "Integer division"): before the einsums are
lowered, every signed integer `floordivsi`/`divsi`/`ceildivsi`/`remsi` whose divisor is not a
constant other than 0 and -1 divides by `select(b == 0 || b == -1, 1, b)`, and a quotient
selects 0 where b == 0 and `0 - a` where b == -1 (a remainder by 1 is already 0). So
`a // 0 == a % 0 == 0` and `MIN // -1 == MIN` on every target without per-printer code, and no
target ever executes a trapping division. Floats and constant divisors (`x // 2`) are
untouched.

Shifts are total too (docs/LANGUAGE.md, "Shifts"): an amount outside [0, W) of a W-bit
integer, read as unsigned (a negative amount is then at least W), gives `x << n == 0` and
`x >> n == (x < 0 ? -1 : 0)`, NumPy's results. Before lowering, every `shli` whose amount is
not a constant in [0, W) becomes `select(n <u W, x << (n & (W - 1)), 0)` and every `shrsi`
such a one shifts by `select(n <u W, n, W - 1)`, so no target ever shifts out of range (C
and SYCL leave that undefined, OpenCL, HLSL and Poplar take the amount modulo W).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from xdsl.builder import Builder
from xdsl.context import Context
from xdsl.dialects import affine, arith, bufferization, func, memref, scf
from xdsl.dialects.builtin import (
    AffineMapAttr,
    ArrayAttr,
    DictionaryAttr,
    FunctionType,
    IndexType,
    IntegerAttr,
    IntegerType,
    MemRefType,
    ModuleOp,
    StringAttr,
    TensorType,
    UnitAttr,
)
from xdsl.ir import Block, BlockArgument, Operation, SSAValue
from xdsl.passes import ModulePass
from xdsl.pattern_rewriter import (
    GreedyRewritePatternApplier,
    PatternRewriter,
    PatternRewriteWalker,
    RewritePattern,
    op_type_rewrite_pattern,
)
from xdsl.rewriter import InsertPoint, Rewriter
from xdsl.transforms.dead_code_elimination import region_dce
from xdsl.utils.exceptions import PassFailedException

from einc.ir.locations import Located
from einc.dialects import ein
from einc.transforms.affine_index import affine_access
from einc.transforms.combiner import build_combine, identity_constant
from einc.transforms.loop_analysis import is_a, walk_ops
from einc.transforms.loops import build_elementwise_nest, build_loop_nest, enclosing_loops

from einc.ir.attrs import AXIS_ATTR, COPY_ATTR, INIT_ATTR, NAME_ATTR, OUTPUT_ATTR, STMT_ATTR


def tag_loops(
    loops: tuple[affine.ForOp, ...], stmt: str, axes: Sequence[str], role: str | None = None
) -> None:
    """Mark each loop of a nest with its statement and axis (and `role`, a unit attribute)."""
    for loop, axis in zip(loops, axes, strict=True):
        loop.attributes[STMT_ATTR] = StringAttr(stmt)
        loop.attributes[AXIS_ATTR] = StringAttr(axis)
        if role is not None:
            loop.attributes[role] = UnitAttr()


def buffer_type(t: TensorType) -> MemRefType:
    """The identity-layout (row-major) memref holding a tensor of type `t`."""
    return MemRefType(t.get_element_type(), t.get_shape())


def tensor_name(value: SSAValue, fallback: str) -> str:
    """The `ein.name` of an input argument or the name of an einsum's output."""
    if isinstance(bridge := value.owner, bufferization.ToTensorOp):
        value = bridge.memref
    if isinstance(einsum := value.owner, ein.EinsumOp | ein.ScatterOp):
        return einsum.output_name.data
    if isinstance(value, BlockArgument) and isinstance(f := value.block.parent_op(), func.FuncOp):
        if f.arg_attrs is not None and isinstance(
            name := f.arg_attrs.data[value.index].data.get(NAME_ATTR), StringAttr
        ):
            return name.data
    return fallback


def copy_nest(builder: Builder, source: SSAValue, dest: SSAValue) -> None:
    """Insert an element-by-element copy between two buffers of the same type."""
    assert isinstance(dest.type, MemRefType)

    def body(b: Builder, ivs: Sequence[SSAValue]) -> None:
        value = b.insert(affine.LoadOp(source, ivs)).result
        b.insert(affine.StoreOp(value, dest, ivs))

    names = [f"i{k}" for k in range(dest.type.get_num_dims())]
    nest = build_elementwise_nest(builder, dest.type, body, names)
    tag_loops(nest.loops, tensor_name(dest, "out"), names, COPY_ATTR)


class BufferizeSignature(RewritePattern):
    """Tensor arguments become memrefs, returned tensors become output arguments."""

    @op_type_rewrite_pattern
    def match_and_rewrite(self, op: func.FuncOp, rewriter: PatternRewriter) -> None:
        func_type = op.function_type
        if not any(isinstance(t, TensorType) for t in (*func_type.inputs, *func_type.outputs)):
            return
        block = op.body.block
        old_attrs = (
            list(op.arg_attrs.data)
            if op.arg_attrs is not None
            else [DictionaryAttr({})] * len(block.args)
        )
        for arg in tuple(block.args):
            if not isinstance(arg.type, TensorType):
                continue
            tensor_type = arg.type
            buffer = rewriter.replace_value_with_new_type(arg, buffer_type(tensor_type))
            bridge = bufferization.ToTensorOp(buffer, restrict=True)
            rewriter.insert(bridge, InsertPoint.at_start(block))
            buffer.replace_uses_with_if(bridge.tensor, lambda use: use.operation is not bridge)

        ret = block.last_op
        assert isinstance(ret, func.ReturnOp)
        new_attrs: list[DictionaryAttr] = []
        for k, value in enumerate(ret.arguments):
            assert isinstance(value.type, TensorType), "einsum kernels return tensors"
            out = rewriter.insert_block_argument(block, len(block.args), buffer_type(value.type))
            name = tensor_name(value, f"out{k}")
            out.name_hint = name
            new_attrs.append(
                DictionaryAttr({NAME_ATTR: StringAttr(name), OUTPUT_ATTR: UnitAttr()})
            )
            rewriter.insert(
                bufferization.MaterializeInDestinationOp.build(
                    operands=[value, out],
                    properties={"restrict": UnitAttr(), "writable": UnitAttr()},
                    result_types=[[]],
                ),
                InsertPoint.before(ret),
            )
        rewriter.replace(ret, func.ReturnOp())
        op.function_type = FunctionType.from_lists(block.arg_types, [])
        op.arg_attrs = ArrayAttr([*old_attrs, *new_attrs])
        rewriter.notify_op_modified(op)


class LowerEinsum(RewritePattern):
    """An einsum becomes its loop nests writing into its destination buffer."""

    @op_type_rewrite_pattern
    def match_and_rewrite(self, op: ein.EinsumOp, rewriter: PatternRewriter) -> None:
        builder = Builder(InsertPoint.before(op))
        dest = _destination(op, rewriter)
        element_type = op.result_type.get_element_type()
        combiner = op.combiner.data
        rank = op.num_parallel
        stmt = op.output_name.data
        if op.is_reduction:
            init = identity_constant(combiner, element_type)
            builder.insert(init)

            def fill(b: Builder, ivs: Sequence[SSAValue]) -> None:
                b.insert(affine.StoreOp(init.result, dest, ivs))

            fill_nest = build_elementwise_nest(
                builder, buffer_type(op.result_type), fill, op.axis_names
            )
            tag_loops(fill_nest.loops, stmt, op.axis_names[:rank], INIT_ATTR)

        nest = build_loop_nest(builder, op.axis_extents, op.axis_names)
        tag_loops(nest.loops, stmt, op.axis_names)
        yield_op = op.yield_op
        rewriter.inline_block(op.block, nest.body, nest.ivs)
        out_ivs = nest.ivs[:rank]
        body = Builder(InsertPoint.before(yield_op))
        value = yield_op.value
        if op.is_reduction:
            acc = body.insert(affine.LoadOp(dest, out_ivs)).result
            value = build_combine(body, combiner, acc, value)
        body.insert(affine.StoreOp(value, dest, out_ivs))
        rewriter.erase(yield_op)
        rewriter.replace(op, bufferization.ToTensorOp(dest, restrict=True))


def _destination(op: ein.EinsumOp | ein.ScatterOp, rewriter: PatternRewriter) -> SSAValue:
    """The output argument the result is first materialized in, else a fresh allocation
    (later materializations of the same result become copies)."""
    materializations = [
        use.operation
        for use in op.result.uses
        if isinstance(use.operation, bufferization.MaterializeInDestinationOp)
    ]
    if materializations:
        block = op.parent_block()
        assert block is not None
        first = min(materializations, key=block.get_operation_index)
        rewriter.erase(first)
        return first.dest
    alloc = memref.AllocOp.get(
        op.result_type.get_element_type(), shape=op.result_type.get_shape()
    )
    alloc.memref.name_hint = op.output_name.data
    alloc.attributes[NAME_ATTR] = op.output_name  # name hints drop `_<digits>` suffixes
    rewriter.insert(alloc, InsertPoint.before(op))
    block = op.parent_block()
    assert block is not None and block.last_op is not None
    rewriter.insert(memref.DeallocOp.get(alloc), InsertPoint.before(block.last_op))
    return alloc.memref


class LowerScatter(RewritePattern):
    """A scatter becomes a copy of its source into its destination (a nest tagged
    `einc.copy`), then the nest over its axes storing each point's value at its indices:
    `affine.store` when they are affine in the loop variables (sema checked their range),
    else `memref.store` under an `scf.if` that skips indices outside the buffer. The nest
    carries a dependence through the stored buffer, so schedules keep it sequential (last
    write wins in loop order)."""

    @op_type_rewrite_pattern
    def match_and_rewrite(self, op: ein.ScatterOp, rewriter: PatternRewriter) -> None:
        bridge = op.source.owner
        if not isinstance(bridge, bufferization.ToTensorOp):
            return  # its source is lowered first
        builder = Builder(InsertPoint.before(op))
        dest = _destination(op, rewriter)
        copy_nest(builder, bridge.memref, dest)
        stmt = op.output_name.data
        nest = build_loop_nest(builder, op.axis_extents, op.axis_names)
        tag_loops(nest.loops, stmt, op.axis_names)
        yield_op = op.yield_op
        rewriter.inline_block(op.block, nest.body, nest.ivs)
        body = Builder(InsertPoint.before(yield_op))
        indices, value = tuple(yield_op.indices), yield_op.value
        access = affine_access(indices, nest.ivs)
        if access is None:
            body = self._in_bounds(body, indices, nest.ivs, dest)
        combiner = op.combiner.data
        if access is not None:
            access_map, operands = access
            if combiner != ein.Combiner.ASSIGN:
                acc = body.insert(affine.LoadOp(dest, operands, AffineMapAttr(access_map)))
                value = build_combine(body, combiner, acc.result, value)
            body.insert(affine.StoreOp(value, dest, operands, AffineMapAttr(access_map)))
        else:
            if combiner != ein.Combiner.ASSIGN:
                acc = body.insert(memref.LoadOp.get(dest, indices))
                value = build_combine(body, combiner, acc.res, value)
            body.insert(memref.StoreOp.get(value, dest, indices))
        rewriter.erase(yield_op)
        rewriter.replace(op, bufferization.ToTensorOp(dest, restrict=True))

    @staticmethod
    def _in_bounds(
        builder: Builder, indices: Sequence[SSAValue], ivs: Sequence[SSAValue], dest: SSAValue
    ) -> Builder:
        """A builder inside `scf.if (0 <= index < extent)` for each index that is not affine
        in `ivs` (sema range-checked the affine ones), inserted at `builder`."""
        assert isinstance(dest.type, MemRefType)
        zero = builder.insert(arith.ConstantOp(IntegerAttr(0, IndexType()))).result
        inside: SSAValue | None = None
        for index, extent in zip(indices, dest.type.get_shape()):
            if affine_access([index], ivs) is not None:
                continue
            bound = builder.insert(arith.ConstantOp(IntegerAttr(extent, IndexType()))).result
            low = builder.insert(arith.CmpiOp(index, zero, "sge")).result
            high = builder.insert(arith.CmpiOp(index, bound, "slt")).result
            both = builder.insert(arith.AndIOp(low, high)).result
            inside = both if inside is None else builder.insert(arith.AndIOp(inside, both)).result
        assert inside is not None, "some index is not affine"
        then = Block()
        then.add_op(yield_op := scf.YieldOp())
        builder.insert(scf.IfOp(inside, [], [then]))
        return Builder(InsertPoint.before(yield_op))


class LowerLoad(RewritePattern):
    """`ein.load` of a bufferized tensor, once its einsum body is inlined into loops."""

    @op_type_rewrite_pattern
    def match_and_rewrite(self, op: ein.LoadOp, rewriter: PatternRewriter) -> None:
        if _inside_einsum(op):
            return
        bridge = op.tensor.owner
        if not isinstance(bridge, bufferization.ToTensorOp):
            return
        buffer = bridge.memref
        ivs = [loop.body.block.args[0] for loop in enclosing_loops(op)]
        access = affine_access(op.indices, ivs)
        new_op: Operation
        if access is None:
            new_op = memref.LoadOp.get(buffer, op.indices)
        else:
            access_map, operands = access
            new_op = affine.LoadOp(buffer, operands, AffineMapAttr(access_map))
        rewriter.replace(op, new_op)


class LowerMaterialize(RewritePattern):
    """A returned tensor that is not computed in place: copy its buffer to the output."""

    @op_type_rewrite_pattern
    def match_and_rewrite(
        self, op: bufferization.MaterializeInDestinationOp, rewriter: PatternRewriter
    ) -> None:
        bridge = op.source.owner
        if not isinstance(bridge, bufferization.ToTensorOp):
            return
        copy_nest(Builder(InsertPoint.before(op)), bridge.memref, op.dest)
        rewriter.erase(op)


class EraseDeadBridge(RewritePattern):
    @op_type_rewrite_pattern
    def match_and_rewrite(self, op: bufferization.ToTensorOp, rewriter: PatternRewriter) -> None:
        if not op.tensor.uses:
            rewriter.erase(op)


_QUOTIENTS = (arith.FloorDivSIOp, arith.DivSIOp, arith.CeilDivSIOp)
_INT_DIVISIONS = (*_QUOTIENTS, arith.RemSIOp)
_SHIFTS = (arith.ShLIOp, arith.ShRSIOp)


def _constant_int(value: SSAValue) -> int | None:
    if isinstance(op := value.owner, arith.ConstantOp) and isinstance(op.value, IntegerAttr):
        return op.value.value.data
    return None


def guard_integer_division(
    op: arith.FloorDivSIOp | arith.DivSIOp | arith.CeilDivSIOp | arith.RemSIOp,
) -> None:
    """Make a signed integer division total, in place: `a / 0` and `a rem 0` give 0 and
    `MIN / -1` gives MIN (wrapped), whatever the target's hardware does.

    Contract: a divisor that is a constant other than 0 and -1 leaves `op` unchanged (no
    guard: `x // 2` prints as before). Otherwise `op` divides by
    `select(b == 0 || b == -1, 1, b)`, so it never traps (x86 traps on both), and a
    quotient's uses read `select(b == 0, 0, select(b == -1, 0 - a, q))`: `0 - MIN` wraps to
    MIN with no width-dependent constant, which also serves `index` (its width is the
    target's). A remainder by 1 is already 0, the result for b == 0 and b == -1. A constant
    divisor -1 gives `0 - a` (quotients) or 0 (remainders), a constant 0 gives 0."""
    a, b = op.lhs, op.rhs
    divisor = _constant_int(b)
    if divisor is not None and divisor not in (0, -1):
        return
    t = op.result.type
    assert isinstance(t, IntegerType | IndexType)
    builder = Builder(InsertPoint.before(op))

    def constant(value: int) -> SSAValue:
        return builder.insert(arith.ConstantOp(IntegerAttr(value, t))).result

    is_rem = isinstance(op, arith.RemSIOp)
    zero = constant(0)
    if divisor is not None:
        if divisor == 0 or is_rem:
            op.result.replace_all_uses_with(zero)
        else:
            op.result.replace_all_uses_with(builder.insert(arith.SubiOp(zero, a)).result)
        Rewriter.erase_op(op)
        return
    by_zero = builder.insert(arith.CmpiOp(b, zero, "eq")).result
    by_minus_one = builder.insert(arith.CmpiOp(b, constant(-1), "eq")).result
    unsafe = builder.insert(arith.OrIOp(by_zero, by_minus_one)).result
    op.operands[1] = builder.insert(arith.SelectOp(unsafe, constant(1), b)).result
    if is_rem:
        return
    after = Builder(InsertPoint.after(op))
    negated = after.insert(arith.SubiOp(zero, a)).result
    by_sign = after.insert(arith.SelectOp(by_minus_one, negated, op.result)).result
    total = after.insert(arith.SelectOp(by_zero, zero, by_sign))
    op.result.replace_uses_with_if(
        total.result, lambda use: use.operation not in (by_sign.owner, total)
    )


def guard_shift(op: arith.ShLIOp | arith.ShRSIOp) -> None:
    """Make a shift total, in place: an amount `n` outside [0, W), read as unsigned, gives
    `x << n == 0` and `x >> n == x >> (W - 1)` (0 or -1), whatever the target's hardware does.

    Contract: an amount that is a constant in [0, W) leaves `op` unchanged. Otherwise a left
    shift shifts by `n & (W - 1)` and its uses read `select(n <u W, x << that, 0)`; a right
    shift shifts by `select(n <u W, n, W - 1)`."""
    t = op.result.type
    assert isinstance(t, IntegerType | IndexType)
    width = 64 if isinstance(t, IndexType) else t.width.data
    amount = _constant_int(op.rhs)
    if amount is not None and 0 <= amount % (1 << width) < width:
        return
    builder = Builder(InsertPoint.before(op))

    def constant(value: int) -> SSAValue:
        return builder.insert(arith.ConstantOp(IntegerAttr(value, t))).result

    n = op.rhs
    in_range = builder.insert(arith.CmpiOp(n, constant(width), "ult")).result
    if isinstance(op, arith.ShRSIOp):
        op.operands[1] = builder.insert(arith.SelectOp(in_range, n, constant(width - 1))).result
        return
    op.operands[1] = builder.insert(arith.AndIOp(n, constant(width - 1))).result
    total = Builder(InsertPoint.after(op)).insert(arith.SelectOp(in_range, op.result, constant(0)))
    op.result.replace_uses_with_if(total.result, lambda use: use.operation is not total)


def _guard_integer_divisions(module: ModuleOp) -> None:
    """Guard the divisions and shifts in einsum bodies: the language's own arithmetic (the
    loops this pass builds, and IR already lowered by an earlier run, are left alone)."""
    divisions = [o for o in module.walk() if isinstance(o, _INT_DIVISIONS) and _inside_einsum(o)]
    for op in divisions:
        guard_integer_division(op)
    shifts = [o for o in module.walk() if isinstance(o, _SHIFTS) and _inside_einsum(o)]
    for op in shifts:
        guard_shift(op)


def _inside_einsum(op: Operation) -> bool:
    parent = op.parent_op()
    while parent is not None:
        if isinstance(parent, ein.EinsumOp | ein.ScatterOp):
            return True
        parent = parent.parent_op()
    return False


@dataclass(frozen=True)
class ConvertEinToAffinePass(ModulePass):
    name = "convert-ein-to-affine"

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        _guard_integer_divisions(op)
        PatternRewriteWalker(Located(BufferizeSignature()), apply_recursively=False).rewrite_module(op)
        PatternRewriteWalker(
            Located(GreedyRewritePatternApplier(
                [LowerEinsum(), LowerScatter(), LowerLoad(), LowerMaterialize(),
                 EraseDeadBridge()]
            ))
        ).rewrite_module(op)
        for leftover in walk_ops(op):
            if is_a(leftover, _LEFTOVERS):
                raise PassFailedException(
                    f"convert-ein-to-affine: could not lower {leftover.name} "
                    "(its tensor operand is not an argument or an einsum result)"
                )
        # index computations folded into affine.load maps are now unused
        region_dce(op.body)


_LEFTOVERS: tuple[type[Operation], ...] = (
    ein.EinsumOp,
    ein.ScatterOp,
    ein.LoadOp,
    bufferization.ToTensorOp,
    bufferization.MaterializeInDestinationOp,
)

__all__ = [
    "AXIS_ATTR", "ConvertEinToAffinePass", "INIT_ATTR", "NAME_ATTR", "OUTPUT_ATTR",
    "STMT_ATTR", "buffer_type", "tag_loops",
]
