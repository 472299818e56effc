"""IR generation: the checked program to an `ein`-level xDSL module.

    func.func @kernel(%input0 : tensor<...> {ein.name = "input0"}, ...) -> (outputs...) {
      %temp0 = ein.einsum "temp0" ... { ^bb0(%N : index, ...): ... ein.yield %v : f32 }
      ...
      func.return %output0 : tensor<...>
    }

Conventions the lowering relies on:
- an index that is a plain axis is the body's block argument; one that is affine in the axes is
  a single `affine.apply` over the axes it uses (dims in axis order, no symbols); a constant
  index is `arith.constant : index`; any other index is `arith` on `index` (`floordivsi`; floor
  modulo as `remsi`, then a `select` adding the divisor when the remainder's sign differs from
  it), with loaded integers brought in by `arith.index_cast`;
- an axis used as a value is `arith.index_cast` of its block argument, or of the
  `affine.apply` computing an affine expression of axes, to the expression's integer type;
- `.when` is an `scf.if` whose branches compute their values inside their own regions; its
  conditions are folded with `andi`/`ori`, except that a later condition reading a tensor is
  evaluated under an `scf.if` of the earlier ones (C's short-circuit `&&`/`||`);
- bool is `i1`; the einsum yields the output's element type (a bool result is `extui` to i8).

Locations (einc/ir/locations.py): the einsum/scatter carries `loc("FILE":L:C)` of its
statement (where its output is written), each body op the location of the sub-expression it
computes; the function and its return carry the program's start (`FILE:1:1`).
"""

from __future__ import annotations

import functools
import math as pymath
from typing import cast

from collections.abc import Callable, Sequence

import numpy as np
from xdsl.dialects import affine, arith, func, math, scf
from xdsl.dialects.builtin import (
    AffineMapAttr,
    AnyFloat,
    ArrayAttr,
    DictionaryAttr,
    FloatAttr,
    IndexType,
    IntegerAttr,
    IntegerType,
    ModuleOp,
    StringAttr,
    TensorType,
    bf16,
    f16,
    f32,
    f64,
    i1,
    i8,
    i16,
    i32,
    i64,
)
from xdsl.dialects.builtin import FileLineColLoc, IntAttr, UnknownLoc
from xdsl.ir import Attribute, Block, Operation, SSAValue
from xdsl.ir.affine import AffineExpr, AffineMap

from einc.dialects.ein import EinsumOp, LoadOp, ScatterOp, ScatterYieldOp, YieldOp
from einc.dialects.math_ext import ErfcOp
from einc.frontend import checked as c
from einc.frontend.ast import Span
from einc.ir.attrs import BFLOAT16
from einc.ir.locations import stamp
from einc.frontend.affine_ranges import const_value, is_affine
from einc.frontend.checked import TensorInfo, is_float, is_int

FLOAT_TYPES: dict[str, AnyFloat] = {"float64": f64, "float32": f32, "float16": f16, "bfloat16": bf16}
INT_TYPES: dict[str, IntegerType] = {"int64": i64, "int32": i32, "int16": i16, "int8": i8,
                                     "bool": i1}  # fmt: skip
NUMPY_FLOATS = {"float64": np.float64, "float32": np.float32, "float16": np.float16,
                "bfloat16": BFLOAT16.type}  # fmt: skip

BinaryBuilder = Callable[[SSAValue, SSAValue], Operation]
FLOAT_BINARY: dict[str, BinaryBuilder] = {
    "add": arith.AddfOp, "sub": arith.SubfOp, "mul": arith.MulfOp, "div": arith.DivfOp,
    "max": arith.MaximumfOp, "min": arith.MinimumfOp, "pow": math.PowFOp,
}  # fmt: skip
INT_BINARY: dict[str, BinaryBuilder] = {
    "add": arith.AddiOp, "sub": arith.SubiOp, "mul": arith.MuliOp,
    "floordiv": arith.FloorDivSIOp, "shl": arith.ShLIOp, "shr": arith.ShRSIOp,
    "and": arith.AndIOp, "or": arith.OrIOp, "max": arith.MaxSIOp, "min": arith.MinSIOp,
    "pow": math.IPowIOp,
}  # fmt: skip
FLOAT_PREDICATES = {"eq": "oeq", "ne": "une", "lt": "olt", "le": "ole", "gt": "ogt", "ge": "oge"}
INT_PREDICATES = {"eq": "eq", "ne": "ne", "lt": "slt", "le": "sle", "gt": "sgt", "ge": "sge"}
MATH_FUNCTIONS: dict[str, Callable[[SSAValue], Operation]] = {
    "exp": math.ExpOp, "log": math.LogOp, "log2": math.Log2Op, "log10": math.Log10Op,
    "sqrt": math.SqrtOp, "rsqrt": math.RsqrtOp, "tanh": math.TanhOp, "erf": math.ErfOp,
    "floor": math.FloorOp, "ceil": math.CeilOp, "round": math.RoundOp, "sin": math.SinOp,
    "cos": math.CosOp, "tan": math.TanOp, "exp2": math.Exp2Op,
}  # fmt: skip


def element_type(dtype: str) -> Attribute:
    return FLOAT_TYPES[dtype] if is_float(dtype) else INT_TYPES[dtype]


def tensor_type(info: TensorInfo) -> TensorType[Attribute]:
    return TensorType(element_type(info.dtype), info.shape)


def float_attr(value: float, dtype: str) -> FloatAttr:
    """A float attribute holding `value` rounded to `dtype` (overflow gives infinity)."""
    with np.errstate(over="ignore"):
        rounded = float(NUMPY_FLOATS[dtype](value))
    return FloatAttr(rounded, FLOAT_TYPES[dtype])


class BodyBuilder:
    """Emits the scalar body of one einsum into a block (and nested `scf.if` regions)."""

    def __init__(self, block: Block, tensors: dict[str, SSAValue], filename: str = "<string>"):
        self.block = block
        self.axes = block.args
        self.tensors = tensors
        self.filename = filename
        self.loc: FileLineColLoc | UnknownLoc = UnknownLoc()
        """The location of the sub-expression being built: the ops emitted carry it."""

    def emit(self, op: Operation) -> SSAValue:
        if isinstance(op.location, UnknownLoc):
            op.location = self.loc
        self.block.add_op(op)
        return op.results[0]

    def located(self, span: Span, build: Callable[[], SSAValue]) -> SSAValue:
        """`build()` with the ops it emits at `span` (restored after)."""
        saved = self.loc
        self.loc = span_loc(span, self.filename)
        try:
            return build()
        finally:
            self.loc = saved

    def terminate(self, terminator: Callable[[SSAValue], Operation], expr: c.Expr) -> None:
        """Ends the current block with `terminator` of the value of `expr`."""
        self.block.add_op(terminator(self.value(expr)))

    def in_block(self, block: Block, build: Callable[[], None]) -> None:
        saved, self.block = self.block, block
        try:
            build()
        finally:
            self.block = saved

    def constant(self, value: int | float | bool, dtype: str) -> SSAValue:
        if is_float(dtype):
            return self.emit(arith.ConstantOp(float_attr(float(value), dtype)))
        return self.emit(arith.ConstantOp(IntegerAttr(int(value), INT_TYPES[dtype])))

    def index_constant(self, value: int) -> SSAValue:
        return self.emit(arith.ConstantOp(IntegerAttr(value, IndexType())))

    # ---- indices -----------------------------------------------------------------------------
    def index(self, expr: c.Expr) -> SSAValue:
        """`expr` (an integer expression) as an `index` value."""
        return self.located(expr.span, lambda: self._index(expr))

    def _index(self, expr: c.Expr) -> SSAValue:
        if isinstance(expr, c.Axis):
            return self.axes[expr.index]
        value = const_value(expr)
        if value is not None:
            return self.index_constant(value)
        if is_affine(expr):
            return self.affine_apply(expr)
        match expr:
            case c.Binary(op="add" | "sub" | "mul" | "floordiv" | "mod" as op, lhs=lhs, rhs=rhs):
                a, b = self.index(lhs), self.index(rhs)
                return self.int_binary(op, a, b)
            case c.Unary(op="neg", operand=operand):
                return self.emit(arith.SubiOp(self.index_constant(0), self.index(operand)))
            case c.Convert(operand=operand) if is_int(operand.dtype) and (
                c.BITS[expr.dtype] >= c.BITS[operand.dtype]
            ):
                return self.index(operand)
        return self.emit(arith.IndexCastOp(self.value(expr), IndexType()))

    def affine_apply(self, expr: c.Expr) -> SSAValue:
        used = sorted(axes_in(expr))
        dims = {axis: pos for pos, axis in enumerate(used)}
        result = affine_expr(expr, dims)
        amap = AffineMap(len(used), 0, (result,))
        return self.emit(affine.ApplyOp([self.axes[a] for a in used], AffineMapAttr(amap)))

    def int_binary(self, op: str, a: SSAValue, b: SSAValue) -> SSAValue:
        if op != "mod":
            return self.emit(INT_BINARY[op](a, b))
        # Floor modulo: r = a rem b, plus b when r is non-zero and its sign differs from b's
        # (never overflows, unlike ((a rem b) + b) rem b).
        rem = self.emit(arith.RemSIOp(a, b))
        zero = self.emit(arith.ConstantOp(IntegerAttr(0, cast(IntegerType, a.type))))
        nonzero = self.emit(arith.CmpiOp(rem, zero, "ne"))
        signs_differ = self.emit(
            arith.CmpiOp(self.emit(arith.XOrIOp(rem, b)), zero, "slt")
        )
        adjust = self.emit(arith.AndIOp(nonzero, signs_differ))
        return self.emit(arith.SelectOp(adjust, self.emit(arith.AddiOp(rem, b)), rem))

    # ---- values ------------------------------------------------------------------------------
    def value(self, expr: c.Expr) -> SSAValue:
        """`expr` as a scalar of its dtype."""
        return self.located(expr.span, lambda: self._value(expr))

    def _value(self, expr: c.Expr) -> SSAValue:
        if not isinstance(expr, c.Axis) and is_affine(expr) and axes_in(expr):
            applied = self.affine_apply(expr)
            return self.emit(arith.IndexCastOp(applied, element_type(expr.dtype)))
        match expr:
            case c.Axis(index=axis):
                return self.emit(arith.IndexCastOp(self.axes[axis], element_type(expr.dtype)))
            case c.Constant(value=value, dtype=dtype):
                return self.constant(value, dtype)
            case c.Load(tensor=tensor, indices=indices):
                index_values = [self.index(i) for i in indices]
                return self.emit(LoadOp(self.tensors[tensor], index_values))
            case c.Unary(op="not", operand=operand):
                return self.emit(arith.XOrIOp(self.value(operand), self.constant(True, "bool")))
            case c.Unary(op="neg", operand=operand):
                if is_float(expr.dtype):
                    return self.emit(arith.NegfOp(self.value(operand)))
                zero = self.constant(0, expr.dtype)
                return self.emit(arith.SubiOp(zero, self.value(operand)))
            case c.Binary():
                return self.binary(expr)
            case c.Compare(op=op, lhs=lhs, rhs=rhs):
                a, b = self.value(lhs), self.value(rhs)
                if is_float(lhs.dtype):
                    return self.emit(arith.CmpfOp(a, b, FLOAT_PREDICATES[op]))
                return self.emit(arith.CmpiOp(a, b, INT_PREDICATES[op]))
            case c.Convert(operand=operand, dtype=dtype):
                return self.convert(self.value(operand), operand.dtype, dtype)
            case c.Call():
                return self.call(expr)
            case c.When():
                return self.when(expr)
        raise AssertionError(f"unhandled checked node {expr}")

    def binary(self, expr: c.Binary) -> SSAValue:
        a, b = self.value(expr.lhs), self.value(expr.rhs)
        if not is_float(expr.dtype):
            return self.int_binary(expr.op, a, b)
        if expr.op in FLOAT_BINARY:
            return self.emit(FLOAT_BINARY[expr.op](a, b))
        quotient = self.emit(math.FloorOp(self.emit(arith.DivfOp(a, b))))
        if expr.op == "floordiv":
            return quotient
        # Floor modulo (the sign of the divisor): a - floor(a / b) * b.
        return self.emit(arith.SubfOp(a, self.emit(arith.MulfOp(quotient, b))))

    def convert(self, value: SSAValue, src: str, dst: str) -> SSAValue:
        if src == dst:
            return value
        if dst == "bool":
            zero = self.constant(0, src)
            if is_float(src):
                return self.emit(arith.CmpfOp(value, zero, "une"))
            return self.emit(arith.CmpiOp(value, zero, "ne"))
        if is_float(dst):
            to_float = FLOAT_TYPES[dst]
            if src == "bool":
                return self.emit(arith.UIToFPOp(value, to_float))
            if is_int(src):
                return self.emit(arith.SIToFPOp(value, to_float))
            if {src, dst} == {"float16", "bfloat16"}:  # neither holds the other: exact to f32, one rounding
                return self.emit(arith.TruncFOp(self.emit(arith.ExtFOp(value, f32)), to_float))
            wider = c.BITS[dst] > c.BITS[src]
            return self.emit((arith.ExtFOp if wider else arith.TruncFOp)(value, to_float))
        to_int = INT_TYPES[dst]
        if src == "bool":
            return self.emit(arith.ExtUIOp(value, to_int))
        if is_float(src):
            return self.emit(arith.FPToSIOp(value, to_int))
        if c.BITS[dst] > c.BITS[src]:
            return self.emit(arith.ExtSIOp(value, to_int))
        return self.emit(arith.TruncIOp(value, to_int))

    def call(self, expr: c.Call) -> SSAValue:
        args = [self.value(a) for a in expr.args]
        floats = is_float(expr.dtype)
        match expr.function:
            case "sigmoid" | "normcdf":
                # computed as a whole in float32 for float16 and bfloat16 (as every math function of theirs)
                dtype = "float32" if expr.dtype in ("float16", "bfloat16") else expr.dtype
                x = self.convert(args[0], expr.dtype, dtype)
                build = self.sigmoid if expr.function == "sigmoid" else self.normcdf
                return self.convert(build(x, dtype), dtype, expr.dtype)
            case "abs":
                return self.emit(math.AbsFOp(args[0]) if floats else math.AbsIOp(args[0]))
            case "max" | "min" | "pow":
                combine = (FLOAT_BINARY if floats else INT_BINARY)[expr.function]
                result = args[0]
                for arg in args[1:]:
                    result = self.emit(combine(result, arg))
                return result
        return self.emit(MATH_FUNCTIONS[expr.function](args[0]))

    def sigmoid(self, x: SSAValue, dtype: str) -> SSAValue:
        """`1 / (1 + exp(-x))` as `select(x < 0, t, 1) / (1 + t)`, `t = exp(-|x|)`: exp never
        overflows, and where the result is tiny (subnormal) it is `t / (1 + t)`, not 0."""
        t = self.emit(math.ExpOp(self.emit(arith.NegfOp(self.emit(math.AbsFOp(x))))))
        one = self.constant(1.0, dtype)
        negative = self.emit(arith.CmpfOp(x, self.constant(0.0, dtype), "olt"))
        numerator = self.emit(arith.SelectOp(negative, t, one))
        return self.emit(arith.DivfOp(numerator, self.emit(arith.AddfOp(one, t))))

    def normcdf(self, x: SSAValue, dtype: str) -> SSAValue:
        """The standard normal CDF from `t = erfc(|x| / sqrt(2)) / 2` (`(1 + erf(x / sqrt(2))) /
        2` cancels to 0 in the lower tail): `t` for x <= 0, `1 - t` above.

        erfc's relative change is 2 A^2 times its argument A's, so A = |x| / sqrt(2) rounded
        would cost hundreds of ulps in the tail; and the rounding error of a product, as a
        value computed from it, is algebraically 0, which fast-math rewriting (the HLSL stack's)
        cancels. So A is split as `A0 + b`: `A0 = ah * ch` exact (|x| clamped to [0, B], beyond
        which the result is 0 or 1 already, NaN staying NaN, then cut by `floor` at 2^-8 for
        float32, 2^-20 for float64: `ah`, and `ch` = 1 / sqrt(2) cut to 12 or 26 bits, short
        enough for an exact product), `b = ah * cl + al * c` the small rest (`al = |x| - ah`,
        `cl` = 1 / sqrt(2) - ch; no identity cancels it), and, with `y = erfcx`, `y' / y = g =
        2 A0 - (2 / sqrt(pi)) exp(-A0^2) / erfc(A0)` and `y'' / y = 2 + 2 A0 g`:

            erfc(A) = erfc(A0) exp(-b (2 A0 + b)) (1 + b (g + b (1 + A0 g)))

        (exact but for the b^3 term of erfcx's Taylor series, ~2^-36 relative; the small
        exp by its Taylor series)."""
        bound, scale, bits = (16.0, 2.0**8, 12) if dtype == "float32" else (40.0, 2.0**20, 26)
        c = 0.5**0.5
        ch = _truncate(c, bits)

        def k(value: float) -> SSAValue:
            return self.constant(value, dtype)

        def mul(a: SSAValue, b: SSAValue) -> SSAValue:
            return self.emit(arith.MulfOp(a, b))

        def add(a: SSAValue, b: SSAValue) -> SSAValue:
            return self.emit(arith.AddfOp(a, b))

        def sub(a: SSAValue, b: SSAValue) -> SSAValue:
            return self.emit(arith.SubfOp(a, b))

        a = self.emit(arith.MinimumfOp(self.emit(math.AbsFOp(x)), k(bound)))
        ah = mul(self.emit(math.FloorOp(mul(a, k(scale)))), k(1 / scale))
        al = sub(a, ah)
        a0 = mul(ah, k(ch))
        b = add(mul(ah, k(_RSQRT2_LOW[bits])), mul(al, k(c)))
        tail = self.emit(ErfcOp(a0))
        slope = mul(self.emit(math.ExpOp(self.emit(arith.NegfOp(mul(a0, a0))))), k(2 / pymath.sqrt(pymath.pi)))
        positive = self.emit(arith.CmpfOp(tail, k(0.0), "ogt"))
        g = sub(add(a0, a0), self.emit(arith.DivfOp(slope, tail)))
        g = self.emit(arith.SelectOp(positive, g, k(0.0)))
        second = add(k(1.0), mul(a0, g))
        ratio = add(k(1.0), mul(b, add(g, mul(b, second))))
        # exp(-d), d = b (2 A0 + b) <= 0.09 (float32; 7e-5 float64): its Taylor series to d^5
        d = mul(b, add(add(a0, a0), b))
        shift = k(-1 / 120)
        for coefficient in (1 / 24, -1 / 6, 1 / 2, -1.0, 1.0):
            shift = add(k(coefficient), mul(d, shift))
        t = mul(mul(mul(tail, shift), ratio), k(0.5))
        upper = self.emit(arith.CmpfOp(x, k(0.0), "ogt"))
        return self.emit(arith.SelectOp(upper, sub(k(1.0), t), t))

    def when(self, expr: c.When) -> SSAValue:
        if not expr.conditions:
            return self.value(expr.then)
        condition = self.condition(expr.conditions, expr.merge_any)
        then_block, else_block = Block(), Block()
        self.in_block(then_block, lambda: self.terminate(scf.YieldOp, expr.then))
        self.in_block(else_block, lambda: self.terminate(scf.YieldOp, expr.otherwise))
        return self.emit(scf.IfOp(condition, [element_type(expr.dtype)], [then_block], [else_block]))

    def condition(self, conditions: Sequence[c.Expr], merge_any: bool) -> SSAValue:
        """The conditions folded with `andi` (`ori` for `any`) into one i1. Like C's `&&`/`||`,
        a later condition that reads a tensor is evaluated only when the earlier ones do not
        decide: it goes in an `scf.if` on them."""
        result = self.value(conditions[0])
        for cond in conditions[1:]:
            if not has_load(cond):
                merge = arith.OrIOp if merge_any else arith.AndIOp
                result = self.emit(merge(result, self.value(cond)))
                continue
            decided = Block()
            decided.add_op(known := arith.ConstantOp(IntegerAttr(int(merge_any), i1)))
            decided.add_op(scf.YieldOp(known))
            evaluate = Block()
            self.in_block(evaluate, lambda: self.terminate(scf.YieldOp, cond))
            then_block, else_block = (decided, evaluate) if merge_any else (evaluate, decided)
            result = self.emit(scf.IfOp(result, [i1], [then_block], [else_block]))
        return result


_RSQRT2_LOW = {12: 7.55311865475244e-05, 26: 1.210161710447897e-08}
"""1 / sqrt(2) minus `_truncate(0.5**0.5, bits)`, from its exact value (mpmath at 200 bits): the
float64 `0.5**0.5 - _truncate(...)` is 0.6 ulps off, which erfc multiplies by 2 A^2."""


def _truncate(value: float, bits: int) -> float:
    """`value` with its significand cut to its top `bits` bits."""
    mantissa, exponent = pymath.frexp(value)
    return pymath.ldexp(pymath.floor(mantissa * 2.0**bits), exponent - bits)


def span_loc(span: Span, filename: str) -> FileLineColLoc:
    """`loc("filename":line:col)` of the start of `span`."""
    return FileLineColLoc(_file_attr(filename), IntAttr(span.line), IntAttr(span.col))


@functools.lru_cache(maxsize=64)
def _file_attr(filename: str) -> StringAttr:
    """The file name as an attribute, made once (every op of a program carries it)."""
    return StringAttr(filename)


def statement_loc(stmt: c.Statement, filename: str) -> FileLineColLoc:
    """A statement's location: where its output is written (as its errors are located)."""
    return span_loc(stmt.syntax.output_span, filename)


def has_load(expr: c.Expr) -> bool:
    return isinstance(expr, c.Load) or any(has_load(e) for e in c.children(expr))


def axes_in(expr: c.Expr) -> set[int]:
    """The axes an expression uses (by axis number)."""
    if isinstance(expr, c.Axis):
        return {expr.index}
    found: set[int] = set()
    for child in c.children(expr):
        found |= axes_in(child)
    return found


def affine_expr(expr: c.Expr, dims: dict[int, int]) -> AffineExpr:
    """An affine expression (see `affine_ranges.is_affine`) as an xDSL AffineExpr over `dims`."""
    value = const_value(expr)
    if value is not None:
        return AffineExpr.constant(value)
    match expr:
        case c.Axis(index=index):
            return AffineExpr.dimension(dims[index])
        case c.Unary(op="neg", operand=operand):
            return -affine_expr(operand, dims)
        case c.Binary(op=op, lhs=lhs, rhs=rhs) if op in c.INDEX_BINARY_OPS:
            return c.INDEX_BINARY_OPS[op](affine_expr(lhs, dims), affine_expr(rhs, dims))
    raise AssertionError(f"not an affine expression: {expr}")


def build_scatter(stmt: c.Statement, tensors: dict[str, SSAValue], filename: str) -> ScatterOp:
    """`ein.scatter` of the tensor the statement updates (its current version)."""
    assert stmt.scatter is not None
    op = ScatterOp(stmt.output.name, stmt.combiner, stmt.axes, tensors[stmt.syntax.output])
    body = BodyBuilder(op.body.block, tensors, filename)
    indices = [body.index(i) for i in stmt.scatter]
    body.block.add_op(ScatterYieldOp(indices, body.value(stmt.expr)))
    op.result.name_hint = stmt.output.name
    return op


def build_statement(
    stmt: c.Statement, tensors: dict[str, SSAValue], filename: str = "<string>"
) -> EinsumOp | ScatterOp:
    """The statement's op, located at the statement; its body's ops at their sub-expressions
    (a terminator, a branch's constant: the statement's)."""
    if stmt.scatter is not None:
        op: EinsumOp | ScatterOp = build_scatter(stmt, tensors, filename)
    else:
        result_type = TensorType(element_type(stmt.output.dtype), stmt.output.shape)
        op = EinsumOp(stmt.output.name, stmt.combiner, stmt.axes, result_type)
        body = BodyBuilder(op.body.block, tensors, filename)
        body.terminate(YieldOp, stmt.expr)
        op.result.name_hint = stmt.output.name
    stamp(op, statement_loc(stmt, filename))  # the op, its terminator, a branch's constant
    return op


def build(
    inputs: Sequence[TensorInfo], outputs: Sequence[TensorInfo], statements: Sequence[c.Statement],
    filename: str = "<string>",
) -> ModuleOp:
    """The `func.func @kernel` module of a checked program, its ops located in `filename`."""
    arg_attrs = ArrayAttr([DictionaryAttr({"ein.name": StringAttr(t.name)}) for t in inputs])
    kernel = func.FuncOp(
        "kernel",
        ([tensor_type(t) for t in inputs], [tensor_type(t) for t in outputs]),
        arg_attrs=arg_attrs,
    )
    block = kernel.body.block
    tensors: dict[str, SSAValue] = {}
    for arg, info in zip(block.args, inputs):
        arg.name_hint = info.name
        tensors[info.name] = arg
    for stmt in statements:
        op = build_statement(stmt, tensors, filename)
        block.add_op(op)
        # a scatter's result is also read under the name of the tensor it updates
        tensors[stmt.syntax.output] = tensors[stmt.output.name] = op.result
    block.add_op(ret := func.ReturnOp(*[tensors[t.name] for t in outputs]))
    kernel.location = ret.location = span_loc(Span(0, 0, 1, 1), filename)
    module = ModuleOp([kernel])
    module.verify()
    return module
