"""`einc-index-width`: marks each kernel whose index arithmetic fits 32 bits
(`egpu.index_bits = 32`), so the printers spell `index` as the target's 32-bit int.

GPUs compute 32-bit integers at full rate and 64-bit ones as pairs of 32-bit instructions
(NVIDIA: `mad.lo.s64` is two or more instructions, 64-bit indices cost registers too), so a
kernel whose indices are all small should use `int`. The decision is the pass's, not the
printer's: the printer reads the attribute.

A kernel is marked when an interval analysis bounds every index value it computes inside
[-2^31, 2^31 - 1]:
- work-item coordinates (from the launch shape), integer constants, `affine.apply`,
  `affine.min` and the index arithmetic of `arith` (add, sub, mul, div, rem,
  min, max, select), every intermediate of an affine expression included;
- loop variables of `affine.for` / `scf.for` from their bounds, and the variable's value after
  the last increment (`i += step` runs once past the last iteration);
- the row-major flat index of every memory access (`affine.load/store`, `memref.load/store`,
  `egpu.vload/vstore`, the last lane of a vector included), each partial sum of the
  linearisation as the printer writes it (`flat_affine`), and every buffer's element count.
Anything else producing an index (an `index_cast` of a loaded integer, a loop-carried index)
is unbounded, and the kernel keeps 64-bit indices. Kernels are unchanged otherwise; run it
last in a device pipeline (after the passes that make index arithmetic).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from xdsl.context import Context
from xdsl.dialects import affine, arith, memref, scf
from xdsl.dialects.builtin import IndexType, IntegerAttr, MemRefType, ModuleOp, VectorType, i64
from xdsl.ir import Operation, SSAValue
from xdsl.ir.affine import AffineBinaryOpExpr, AffineBinaryOpKind, AffineExpr, AffineMap
from xdsl.passes import ModulePass

from einc.dialects import egpu
from einc.ir.attrs import INDEX_BITS_ATTR
from einc.transforms.affine_index import dims_to_operands, shared_dims, simplify_flat
from einc.transforms.loop_analysis import walk_ops
from einc.transforms.ranges import Range, binary_range, expr_range

LOW, HIGH = -(2**31), 2**31 - 1


class _Wide(Exception):
    """A value the kernel computes may not fit 32 bits (or is unbounded)."""


def _fits(r: Range) -> tuple[int, int]:
    lo, hi = r
    if lo is None or hi is None or lo < LOW or hi > HIGH:
        raise _Wide
    return lo, hi


def _expr(e: AffineExpr, operands: Sequence[Range]) -> tuple[int, int]:
    """The range of `e` (a map over operands as dims), every sub-expression checked (each
    sub-expression's range computed once, bottom-up)."""
    if isinstance(e, AffineBinaryOpExpr):
        a = _expr(e.lhs, operands)
        b = _expr(e.rhs, operands)
        if e.kind == AffineBinaryOpKind.CeilDiv:  # printed as (a + c - 1) / c
            _fits((a[0], a[1] + abs(b[1])))
        return _fits(binary_range(e.kind, a, b))
    return _fits(expr_range(e, operands))


def _map(m: AffineMap, operands: Sequence[Range]) -> list[tuple[int, int]]:
    m = dims_to_operands(m)
    return [_expr(r, operands) for r in m.results]


class _Ranges:
    def __init__(self) -> None:
        self.known: dict[SSAValue, tuple[int, int]] = {}

    def of(self, v: SSAValue) -> tuple[int, int]:
        found = self.known.get(v)
        if found is None:
            raise _Wide
        return found

    def flat(self, buffer: SSAValue, results: Sequence[AffineExpr] | None, indices: Sequence[SSAValue], lanes: int = 1) -> None:
        """The flat index of an access (the printer's linearisation), its last lane included."""
        t = buffer.type
        assert isinstance(t, MemRefType)
        shape = t.get_shape()
        strides = [math.prod(shape[d + 1 :]) for d in range(len(shape))]
        operands = [self.of(i) for i in indices]
        if results is None:  # memref.load/store, egpu.vload/vstore: indices times strides
            lo = hi = 0
            for (i_lo, i_hi), stride in zip(operands, strides):
                _fits((i_lo * stride, i_hi * stride))
                lo, hi = _fits((lo + i_lo * stride, hi + i_hi * stride))
        else:
            flat: AffineExpr = AffineExpr.constant(0)
            for result, stride in zip(results, strides):
                flat = flat + result * stride
            lo, hi = _expr(simplify_flat(flat), operands)
        _fits((lo, hi + lanes - 1))

    def visit(self, op: Operation) -> None:
        index_results = [r for r in op.results if isinstance(r.type, IndexType)]
        if isinstance(op, egpu.IndexOp):
            self.known[op.results[0]] = _fits(op.index_range())
        elif isinstance(op, arith.ConstantOp):
            if isinstance(op.value, IntegerAttr) and index_results:
                v = op.value.value.data
                self.known[op.result] = _fits((v, v))
        elif isinstance(op, affine.ApplyOp):
            self.known[op.result] = _map(op.map.data, [self.of(o) for o in op.mapOperands])[0]
        elif isinstance(op, affine.MinOp):
            results = _map(op.map.data, [self.of(o) for o in op.operands])
            self.known[op.results[0]] = (min(r[0] for r in results), min(r[1] for r in results))
        elif isinstance(op, affine.ForOp):
            if op.results or len(op.body.block.args) != 1:
                raise _Wide  # loop-carried values: index ones are not bounded here
            lower = _map(op.lowerBoundMap.data, [self.of(o) for o in op.lowerBoundOperands])
            upper = _map(op.upperBoundMap.data, [self.of(o) for o in op.upperBoundOperands])
            lo, hi = max(r[0] for r in lower), min(r[1] for r in upper) - 1
            step = op.step.value.data
            _fits((lo, max(lo, hi) + step))
            self.known[op.body.block.args[0]] = (lo, max(lo, hi))
        elif isinstance(op, scf.ForOp):
            if any(isinstance(a.type, IndexType) for a in op.body.block.args[1:]):
                raise _Wide
            if isinstance(op.lb.type, IndexType):
                lo, _ = self.of(op.lb)
                _, hi = self.of(op.ub)
                _, step = self.of(op.step)
                _fits((lo, max(lo, hi - 1) + step))
                self.known[op.body.block.args[0]] = (lo, max(lo, hi - 1))
        elif isinstance(op, affine.LoadOp | affine.StoreOp):
            self.flat(op.memref, shared_dims(op.map.data, op.indices).results, op.indices)
        elif isinstance(op, memref.LoadOp | memref.StoreOp):
            self.flat(op.memref, None, op.indices)
        elif isinstance(op, egpu.VLoadOp):
            assert isinstance(op.result.type, VectorType)
            self.flat(op.memref, None, op.indices, op.result.type.get_shape()[0])
        elif isinstance(op, egpu.VLoadRepeatOp):
            self.flat(op.memref, None, op.indices, op.run.value.data)
        elif isinstance(op, egpu.VStoreOp):
            assert isinstance(op.value.type, VectorType)
            self.flat(op.memref, None, op.indices, op.value.type.get_shape()[0])
        elif index_results:
            self.arith(op)
        for r in op.results:
            if isinstance(r.type, MemRefType):
                _fits((0, math.prod(r.type.get_shape())))

    def arith(self, op: Operation) -> None:
        """Index arithmetic of `arith`; anything else making an index is unbounded."""
        if isinstance(op, arith.SelectOp):
            a, b = self.of(op.lhs), self.of(op.rhs)
            self.known[op.result] = (min(a[0], b[0]), max(a[1], b[1]))
            return
        if isinstance(op, arith.IndexCastOp):
            raise _Wide  # an integer (a loaded index) is not bounded here
        if len(op.operands) != 2 or len(op.results) != 1:
            raise _Wide
        (a_lo, a_hi), (b_lo, b_hi) = self.of(op.operands[0]), self.of(op.operands[1])
        if isinstance(op, arith.AddiOp):
            r = (a_lo + b_lo, a_hi + b_hi)
        elif isinstance(op, arith.SubiOp):
            r = (a_lo - b_hi, a_hi - b_lo)
        elif isinstance(op, arith.MuliOp):
            corners = [a_lo * b_lo, a_lo * b_hi, a_hi * b_lo, a_hi * b_hi]
            r = (min(corners), max(corners))
        elif isinstance(op, arith.DivSIOp | arith.FloorDivSIOp | arith.CeilDivSIOp | arith.RemSIOp):
            if b_lo <= 0:
                raise _Wide
            bound = max(abs(a_lo), abs(a_hi))
            r = (-bound, bound)
        elif isinstance(op, arith.MinSIOp | arith.MaxSIOp):
            r = (min(a_lo, b_lo), max(a_hi, b_hi))
        else:
            raise _Wide
        self.known[op.results[0]] = _fits(r)


def index_bits(kernel: egpu.FuncOp) -> int:
    """32 when every index value of `kernel` fits a signed 32-bit integer, else 64."""
    ranges = _Ranges()
    try:
        for arg in kernel.body.block.args:
            assert isinstance(arg.type, MemRefType)
            _fits((0, math.prod(arg.type.get_shape())))
        for grid, block in zip(kernel.grid_size, kernel.block_size):
            _fits((0, grid * block))
        for op in walk_ops(kernel)[1:]:
            ranges.visit(op)
    except _Wide:
        return 64
    return 32


@dataclass(frozen=True)
class IndexWidthPass(ModulePass):
    name = "einc-index-width"

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        for kernel in op.ops:
            if isinstance(kernel, egpu.FuncOp) and index_bits(kernel) == 32:
                kernel.attributes[INDEX_BITS_ATTR] = IntegerAttr(32, i64)


__all__ = ["IndexWidthPass", "index_bits"]
