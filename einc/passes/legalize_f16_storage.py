"""`legalize-f16-storage`: f16 kept only in memory, for devices that cannot even hold a half
in a variable (OpenCL without `cl_khr_fp16`, e.g. PoCL).

Run after `legalize-f16-for-c` (which computes every f16 operation in f32 and rounds its
result with `arith.truncf`), inside kernels:

    %x = affine.load %a[%i] : memref<8xf16>     ->  %x = egpu.load_extf %a[%i] : memref<8xf16> -> f32
    %r = arith.truncf %y : f32 to f16           ->  %r = egpu.round %y as f16 : f32
    %w = arith.extf %r : f16 to f32             ->  (uses %r)
    affine.store %r, %b[%i] : memref<8xf16>     ->  egpu.store_truncf %r, %b[%i] : f32, memref<8xf16>

f16 constants become f32 constants (exact), `sitofp` to f16 converts to f32 and rounds, and
every other f16 value (select, scf.if results, loop-carried values) becomes f32. The values
are the same as before: each f16 result is still rounded to f16 (`egpu.round`), only held in
a float. (An f64 -> f16 truncation rounds twice, through f32: it may differ from a direct
rounding in the last place of the half.)
"""

from __future__ import annotations

from dataclasses import dataclass

from xdsl.context import Context
from xdsl.dialects import affine, arith, func, memref
from xdsl.dialects.builtin import AffineMapAttr, AnyFloat, FloatAttr, MemRefType, ModuleOp, f16, f32
from xdsl.ir import Operation, SSAValue
from xdsl.ir.affine import AffineDimExpr, AffineMap
from xdsl.passes import ModulePass
from xdsl.pattern_rewriter import (
    GreedyRewritePatternApplier,
    PatternRewriter,
    PatternRewriteWalker,
    RewritePattern,
    op_type_rewrite_pattern,
)
from xdsl.rewriter import Rewriter

from einc.dialects import egpu
from einc.ir.locations import Located
from einc.transforms.affine_index import dims_to_operands


def _is_narrow_buffer(value: SSAValue, narrow: AnyFloat) -> bool:
    return isinstance(value.type, MemRefType) and value.type.get_element_type() == narrow


def _indices(op: affine.LoadOp | affine.StoreOp | memref.LoadOp | memref.StoreOp,
             rewriter: PatternRewriter) -> list[SSAValue]:  # fmt: skip
    """The access's indices as values (an affine map's results become `affine.apply`)."""
    if isinstance(op, memref.LoadOp | memref.StoreOp):
        return list(op.indices)
    m = dims_to_operands(op.map.data)
    values: list[SSAValue] = []
    for result in m.results:
        if isinstance(result, AffineDimExpr):
            values.append(op.indices[result.position])
            continue
        apply = affine.ApplyOp(
            op.indices, AffineMapAttr(AffineMap(m.num_dims, m.num_symbols, (result,)))
        )
        rewriter.insert(apply)
        values.append(apply.result)
    return values


def shared_copy(op: affine.LoadOp | memref.LoadOp) -> bool:
    """A load whose only use stores it, unchanged, into a shared tile of its element type (a
    staging copy, shared_staging.py): its 16 bits are moved as they are, never widened (only
    CUDA and HIP hold such tiles: einc.schedule.checks)."""
    (value,) = op.results
    if value.uses.get_length() != 1:
        return False
    store = next(iter(value.uses)).operation
    return (
        isinstance(store, affine.StoreOp | memref.StoreOp) and store.value is value
        and isinstance(store.memref.owner, egpu.AllocSharedOp)
    )  # fmt: skip


class LoadHalf(RewritePattern):
    def __init__(self, narrow: AnyFloat = f16):
        self.narrow = narrow

    @op_type_rewrite_pattern
    def match_and_rewrite(self, op: affine.LoadOp | memref.LoadOp, rewriter: PatternRewriter) -> None:
        if not _is_narrow_buffer(op.memref, self.narrow) or shared_copy(op):
            return
        rewriter.replace(op, egpu.LoadExtfOp(op.memref, _indices(op, rewriter), f32))


class StoreHalf(RewritePattern):
    def __init__(self, narrow: AnyFloat = f16):
        self.narrow = narrow

    @op_type_rewrite_pattern
    def match_and_rewrite(self, op: affine.StoreOp | memref.StoreOp, rewriter: PatternRewriter) -> None:
        if not _is_narrow_buffer(op.memref, self.narrow) or op.value.type != f32:
            return
        rewriter.replace(op, egpu.StoreTruncfOp(op.value, op.memref, _indices(op, rewriter)))


class RoundInsteadOfTruncate(RewritePattern):
    """A result narrowed to f16 is rounded in f32 (through f32 from f64, or from an int)."""

    def __init__(self, narrow: AnyFloat = f16):
        self.narrow = narrow

    @op_type_rewrite_pattern
    def match_and_rewrite(
        self, op: arith.TruncFOp | arith.SIToFPOp | arith.UIToFPOp, rewriter: PatternRewriter
    ) -> None:
        if op.result.type != self.narrow:
            return
        wide = op.input
        new_ops: list[Operation] = []
        if wide.type != f32:
            convert = type(op)(wide, f32)
            new_ops.append(convert)
            wide = convert.result
        new_ops.append(rounded := egpu.RoundOp(wide, self.narrow))
        rewriter.replace(op, new_ops, [rounded.result])


class WidenConstant(RewritePattern):
    def __init__(self, narrow: AnyFloat = f16):
        self.narrow = narrow

    @op_type_rewrite_pattern
    def match_and_rewrite(self, op: arith.ConstantOp, rewriter: PatternRewriter) -> None:
        if op.result.type != self.narrow or not isinstance(op.value, FloatAttr):
            return
        rewriter.replace(op, arith.ConstantOp(FloatAttr(op.value.value.data, f32)))


class DropIdentityExtension(RewritePattern):
    """`arith.extf` of a former f16 value: now an f32 -> f32 no-op, or f32 -> f64."""

    @op_type_rewrite_pattern
    def match_and_rewrite(self, op: arith.ExtFOp, rewriter: PatternRewriter) -> None:
        if op.input.type == op.result.type:
            rewriter.replace(op, [], [op.input])


def _widen_remaining(module: Operation, narrow: AnyFloat = f16) -> None:
    """Every f16 value left (select, scf.if results, block arguments) becomes f32."""
    for op in list(module.walk()):
        if isinstance(op, affine.LoadOp | memref.LoadOp) and shared_copy(op):
            continue  # a staging copy's 16 bits, moved as they are
        for result in list(op.results):
            if result.type == narrow:
                Rewriter.replace_value_with_new_type(result, f32)
        for region in op.regions:
            for block in region.blocks:
                for arg in list(block.args):
                    if arg.type == narrow:
                        Rewriter.replace_value_with_new_type(arg, f32)


@dataclass(frozen=True)
class LegalizeF16StoragePass(ModulePass):
    name = "legalize-f16-storage"

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        for kernel in [k for k in op.ops if isinstance(k, egpu.FuncOp)]:
            legalize_storage(kernel, f16)


def legalize_storage(function: egpu.FuncOp | func.FuncOp, narrow: AnyFloat) -> None:
    """The rewrite of one function: `narrow` kept only in its buffers, computed in f32."""
    PatternRewriteWalker(
        Located(GreedyRewritePatternApplier(
            [LoadHalf(narrow), RoundInsteadOfTruncate(narrow), WidenConstant(narrow)]
        )),
        apply_recursively=False,
    ).rewrite_region(function.body)
    _widen_remaining(function, narrow)
    PatternRewriteWalker(
        Located(GreedyRewritePatternApplier([StoreHalf(narrow), DropIdentityExtension()])),
        apply_recursively=False,
    ).rewrite_region(function.body)
