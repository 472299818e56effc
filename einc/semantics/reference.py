"""A NumPy reference executor for ein-level modules.

Each `ein.einsum` is evaluated at once over its whole iteration space (in chunks of the
outermost axis to bound memory): axes are broadcast `arange`s, every body op is applied
elementwise with NumPy, `scf.if` evaluates both branches and selects, and the yielded values
are folded over the reduction axes. Floats are computed in float64 and integers at their own
width, so this is the float64 reference that `einc run` and the tests compare kernels with.
Integer division is NumPy's, which is the language's (docs/LANGUAGE.md): a zero divisor gives
0 (`floor_divide`, `fmod`, the truncating quotient) and `MIN / -1` wraps to MIN. A float
converted to an integer saturates (`saturate`), as on every target.
It shares nothing with the loop lowering or the printers.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from typing import Any

import numpy as np
from xdsl.dialects import affine, arith, func, math as mathd, scf
from xdsl.dialects.builtin import (
    AnyFloat,
    FloatAttr,
    IntegerAttr,
    ModuleOp,
    StringAttr,
    TensorType,
)
from xdsl.ir import Attribute, Block, Operation, SSAValue
from xdsl.ir.affine import AffineBinaryOpExpr, AffineBinaryOpKind, AffineConstantExpr, AffineDimExpr, AffineExpr

from einc.dialects.math_ext import ErfcOp
from einc.dialects.ein import Combiner, EinsumOp, LoadOp, ScatterOp, ScatterYieldOp, YieldOp
from einc.runtime.signature import numpy_dtype
from einc.semantics.loops import maximum, minimum  # IEEE 754-2019 (arith.maximumf): NaN from either operand, -0 below +0

CHUNK_POINTS = 1 << 23


def compute_dtype(t: Attribute) -> np.dtype[Any]:
    """The dtype the reference computes a value of type `t` in: float64 for every float."""
    return np.dtype(np.float64) if isinstance(t, AnyFloat) else numpy_dtype(t)


def _trunc_div(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    q = np.abs(a) // np.abs(b)
    return np.where((a < 0) != (b < 0), -q, q).astype(np.result_type(a, b))


_CMP = {
    "eq": np.equal, "ne": np.not_equal, "slt": np.less, "sle": np.less_equal,
    "sgt": np.greater, "sge": np.greater_equal, "ult": np.less, "ule": np.less_equal,
    "ugt": np.greater, "uge": np.greater_equal,
    "oeq": np.equal, "one": np.not_equal, "olt": np.less, "ole": np.less_equal,
    "ogt": np.greater, "oge": np.greater_equal, "ueq": np.equal, "une": np.not_equal,
    "ord": lambda a, b: ~(np.isnan(a) | np.isnan(b)),
    "uno": lambda a, b: np.isnan(a) | np.isnan(b), "true": lambda a, b: np.ones(np.broadcast(a, b).shape, bool),
    "false": lambda a, b: np.zeros(np.broadcast(a, b).shape, bool),
}


_erf = np.frompyfunc(math.erf, 1, 1)
_erfc = np.frompyfunc(math.erfc, 1, 1)

BINARY: dict[type[Operation], Callable[[np.ndarray, np.ndarray], np.ndarray]] = {
    arith.AddfOp: np.add, arith.AddiOp: np.add,
    arith.SubfOp: np.subtract, arith.SubiOp: np.subtract,
    arith.MulfOp: np.multiply, arith.MuliOp: np.multiply,
    arith.DivfOp: np.true_divide, arith.DivSIOp: _trunc_div,
    arith.FloorDivSIOp: np.floor_divide, arith.RemSIOp: np.fmod,
    arith.MaximumfOp: maximum, arith.MinimumfOp: minimum,
    arith.MaxnumfOp: np.fmax, arith.MinnumfOp: np.fmin,
    arith.MaxSIOp: np.maximum, arith.MinSIOp: np.minimum,
    arith.AndIOp: np.bitwise_and, arith.OrIOp: np.bitwise_or, arith.XOrIOp: np.bitwise_xor,
    arith.ShLIOp: np.left_shift, arith.ShRSIOp: np.right_shift,
    mathd.PowFOp: np.power, mathd.IPowIOp: np.power,
}

UNARY: dict[type[Operation], Callable[[np.ndarray], np.ndarray]] = {
    arith.NegfOp: np.negative,
    mathd.ExpOp: np.exp, mathd.Exp2Op: np.exp2, mathd.LogOp: np.log, mathd.Log2Op: np.log2,
    mathd.Log10Op: np.log10, mathd.SqrtOp: np.sqrt, mathd.RsqrtOp: lambda x: 1.0 / np.sqrt(x),
    mathd.TanhOp: np.tanh, mathd.ErfOp: lambda x: np.asarray(_erf(x), dtype=np.float64),
    ErfcOp: lambda x: np.asarray(_erfc(x), dtype=np.float64),
    mathd.FloorOp: np.floor, mathd.CeilOp: np.ceil, mathd.RoundOp: lambda x: np.trunc(x + np.copysign(0.5, x)),
    mathd.AbsFOp: np.abs, mathd.AbsIOp: np.abs, mathd.SinOp: np.sin, mathd.CosOp: np.cos,
    mathd.TanOp: np.tan,
}

CASTS = (
    arith.SIToFPOp, arith.UIToFPOp, arith.FPToSIOp, arith.ExtFOp, arith.TruncFOp,
    arith.ExtSIOp, arith.ExtUIOp, arith.TruncIOp, arith.IndexCastOp,
)


def saturate(value: np.ndarray, dtype: np.dtype[Any]) -> np.ndarray:
    """Floats converted to the integer `dtype` as docs/LANGUAGE.md's `.cast` says: truncated
    toward zero, clamped to the dtype's range (the infinities too), NaN to 0. (NumPy's own
    `astype` leaves an out-of-range value to the platform's C conversion.)"""
    info = np.iinfo(dtype)
    value = np.trunc(np.nan_to_num(np.asarray(value, np.float64), nan=0.0, posinf=info.max, neginf=info.min))
    # float(info.max) rounds up for 64 bits, so the top is clamped exactly below
    top = value >= float(info.max)
    converted = np.clip(np.where(top, 0.0, value), info.min, info.max).astype(dtype)
    return np.where(top, np.asarray(info.max, dtype), converted)


def _cast(value: np.ndarray, to: Attribute) -> np.ndarray:
    target = compute_dtype(to)
    value = np.asarray(value)
    if target.kind == "b":
        return value != 0
    if target.kind in "iu" and value.dtype.kind == "f":
        return saturate(value, target)
    return value.astype(target)


def _eval_affine(expr: AffineExpr, dims: list[np.ndarray]) -> np.ndarray:
    if isinstance(expr, AffineDimExpr):
        return dims[expr.position]
    if isinstance(expr, AffineConstantExpr):
        return np.asarray(expr.value, dtype=np.int64)
    assert isinstance(expr, AffineBinaryOpExpr), f"unsupported affine expression {expr}"
    lhs, rhs = _eval_affine(expr.lhs, dims), _eval_affine(expr.rhs, dims)
    match expr.kind:
        case AffineBinaryOpKind.Add:
            return lhs + rhs
        case AffineBinaryOpKind.Mul:
            return lhs * rhs
        case AffineBinaryOpKind.FloorDiv:
            return np.floor_divide(lhs, rhs)
        case AffineBinaryOpKind.CeilDiv:
            return -np.floor_divide(-lhs, rhs)
        case AffineBinaryOpKind.Mod:
            return np.mod(lhs, rhs)
    raise AssertionError(expr.kind)


class _BodyEvaluator:
    """Evaluates the ops of one einsum body on broadcast arrays."""

    def __init__(self, tensors: Mapping[SSAValue, np.ndarray]):
        self.tensors = tensors
        self.env: dict[SSAValue, np.ndarray] = {}

    def value(self, v: SSAValue) -> np.ndarray:
        return self.env[v]

    def run_block(self, block: Block) -> list[np.ndarray]:
        for op in block.ops:
            if isinstance(op, YieldOp | ScatterYieldOp | scf.YieldOp):
                return [self.value(v) for v in op.operands]
            self.run_op(op)
        return []

    def run_op(self, op: Operation) -> None:
        results = self.evaluate(op)
        for res, val in zip(op.results, results):
            self.env[res] = val

    def evaluate(self, op: Operation) -> list[np.ndarray]:
        args = [self.value(v) for v in op.operands if v in self.env]
        kind = type(op)
        if isinstance(op, arith.ConstantOp):
            return [self.constant(op)]
        if isinstance(op, LoadOp):
            return [self.load(op)]
        if isinstance(op, affine.ApplyOp):
            return [_eval_affine(op.map.data.results[0], [self.value(v) for v in op.mapOperands])]
        if isinstance(op, scf.IfOp):
            cond = self.value(op.cond)
            then_vals = self.run_block(op.true_region.block)
            else_vals = self.run_block(op.false_region.block)
            return [np.where(cond, t, e) for t, e in zip(then_vals, else_vals)]
        if isinstance(op, arith.CmpiOp | arith.CmpfOp):
            pred = op.predicate.value.data
            names = arith.CMPI_COMPARISON_OPERATIONS if isinstance(op, arith.CmpiOp) else arith.CMPF_COMPARISON_OPERATIONS
            return [_CMP[names[pred]](args[0], args[1])]
        if isinstance(op, arith.SelectOp):
            return [np.where(args[0], args[1], args[2])]
        if isinstance(op, CASTS):
            return [_cast(args[0], op.results[0].type)]
        if kind in BINARY:
            out = BINARY[kind](args[0], args[1])
            return [np.asarray(out).astype(compute_dtype(op.results[0].type), copy=False)]
        if kind in UNARY:
            return [np.asarray(UNARY[kind](args[0])).astype(compute_dtype(op.results[0].type), copy=False)]
        raise NotImplementedError(f"reference executor: no rule for {op.name}")

    def constant(self, op: arith.ConstantOp) -> np.ndarray:
        attr = op.value
        t = op.result.type
        if isinstance(attr, FloatAttr):
            return np.asarray(attr.value.data, dtype=np.float64)
        assert isinstance(attr, IntegerAttr)
        return np.asarray(attr.value.data).astype(compute_dtype(t))

    def load(self, op: LoadOp) -> np.ndarray:
        tensor = self.tensors[op.tensor]
        idx = [np.asarray(self.value(i)).astype(np.int64) for i in op.indices]
        # Out-of-range points only ever occur under a false `.when`, whose value is discarded
        # by the enclosing select: clip so that the gather itself stays inside the tensor.
        clipped = tuple(np.clip(i, 0, n - 1) for i, n in zip(idx, tensor.shape))
        if not clipped:
            return np.asarray(tensor[()])
        return tensor[clipped]


def _fold(combiner: Combiner, values: np.ndarray, axes: tuple[int, ...]) -> np.ndarray:
    match combiner:
        case Combiner.ADD:
            return values.sum(axis=axes)
        case Combiner.MUL:
            return values.prod(axis=axes)
        case Combiner.MAX:
            return values.max(axis=axes)
        case Combiner.MIN:
            return values.min(axis=axes)
        case Combiner.AND:
            return (values != 0).all(axis=axes)
        case Combiner.OR:
            return (values != 0).any(axis=axes)
        case Combiner.ASSIGN:
            return values


def _merge(combiner: Combiner, a: np.ndarray, b: np.ndarray) -> np.ndarray:
    return _fold(combiner, np.stack([a, b]), (0,))


def evaluate_einsum(op: EinsumOp, tensors: Mapping[SSAValue, np.ndarray]) -> np.ndarray:
    """The value of one einsum, in its compute dtype (float64 for floats)."""
    extents = op.axis_extents
    n = len(extents)
    rank = op.num_parallel
    combiner = Combiner(op.combiner.data)
    inner = int(np.prod(extents[1:], dtype=np.int64)) if n > 1 else 1
    step = max(1, CHUNK_POINTS // max(inner, 1))
    pieces: list[np.ndarray] = []
    total = extents[0] if n else 1
    for start in range(0, total, step):
        stop = min(total, start + step)
        evaluator = _BodyEvaluator(tensors)
        for i, arg in enumerate(op.block.args):
            axis = np.arange(start, stop) if i == 0 else np.arange(extents[i])
            evaluator.env[arg] = axis.reshape([1] * i + [-1] + [1] * (n - i - 1))
        with np.errstate(all="ignore"):
            (value,) = evaluator.run_block(op.block)
        shape = ((stop - start),) + tuple(extents[1:]) if n else ()
        value = np.broadcast_to(np.asarray(value), shape)
        pieces.append(_fold(combiner, value, tuple(range(rank, n))))
    if n == 0:
        result = pieces[0]
    elif rank > 0:
        result = np.concatenate(pieces, axis=0)
    else:
        result = pieces[0]
        for piece in pieces[1:]:
            result = _merge(combiner, result, piece)
    return _cast(result, op.result_type.get_element_type())


def evaluate_scatter(op: ScatterOp, tensors: Mapping[SSAValue, np.ndarray]) -> np.ndarray:
    """The value of one scatter: its source with the points' values written (added) at their
    indices, points in loop order (the first axis outermost), so that of repeated indices
    the last point's value stays (`assign`); out-of-range indices write nothing."""
    extents = op.axis_extents
    n = len(extents)
    evaluator = _BodyEvaluator(tensors)
    for i, arg in enumerate(op.block.args):
        evaluator.env[arg] = np.arange(extents[i]).reshape([1] * i + [-1] + [1] * (n - i - 1))
    with np.errstate(all="ignore"):
        *indices, value = evaluator.run_block(op.block)
    shape = tuple(extents)
    result = np.array(tensors[op.source], copy=True)
    flat_idx = [np.broadcast_to(np.asarray(i).astype(np.int64), shape).reshape(-1) for i in indices]
    values = np.broadcast_to(np.asarray(value), shape).reshape(-1)
    inside = np.ones(values.shape, bool)
    for idx, extent in zip(flat_idx, result.shape):
        inside &= (idx >= 0) & (idx < extent)
    if not result.shape:
        linear = np.zeros(values.shape, np.int64)
    else:
        linear = np.ravel_multi_index(tuple(np.where(inside, i, 0) for i in flat_idx), result.shape)
    linear, values = linear[inside], values[inside]
    out = result.reshape(-1)
    if Combiner(op.combiner.data) == Combiner.ADD:
        np.add.at(out, linear, values.astype(out.dtype))
    else:
        # the last point writing an element wins: the first of each index in reverse order
        _, first_of_reversed = np.unique(linear[::-1], return_index=True)
        last = len(linear) - 1 - first_of_reversed
        out[linear[last]] = values[last]
    return _cast(out.reshape(result.shape), op.result_type.get_element_type())


def run_reference(module: ModuleOp, inputs: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
    """Evaluate an ein-level module on NumPy inputs; returns its results by name.

    Float results are float64 (the reference precision), integer results have their dtype."""
    kernel = next(op for op in module.walk() if isinstance(op, func.FuncOp))
    tensors: dict[SSAValue, np.ndarray] = {}
    for arg, attrs in zip(kernel.body.block.args, kernel.arg_attrs.data if kernel.arg_attrs else []):
        name = attrs.data["ein.name"]
        assert isinstance(name, StringAttr)
        array = np.asarray(inputs[name.data])
        assert isinstance(arg.type, TensorType)
        tensors[arg] = _cast(array, arg.type.get_element_type())
    names: dict[SSAValue, str] = {}
    for op in kernel.body.block.ops:
        if isinstance(op, EinsumOp):
            tensors[op.result] = evaluate_einsum(op, tensors)
            names[op.result] = op.output_name.data
        elif isinstance(op, ScatterOp):
            tensors[op.result] = evaluate_scatter(op, tensors)
            names[op.result] = op.output_name.data
        elif isinstance(op, func.ReturnOp):
            return {names[v]: tensors[v] for v in op.arguments}
    raise AssertionError("ein module without func.return")
