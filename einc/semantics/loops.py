"""Run a lowered (affine/scf/memref/arith/math) kernel with xDSL's interpreter on NumPy arrays.

The reference semantics for every target: `run_interpreted(module, inputs)` returns the
outputs as NumPy arrays.

Values during interpretation:
- a memref is a NumPy array (inputs are passed as read-only views, never copied; outputs
  and `memref.alloc` buffers start poisoned: NaN for floats, 0xA5 bytes for integers);
- `f16/f32/f64` are NumPy scalars of that dtype, so every operation rounds as the type does;
- `iN` and `index` are Python ints wrapped to their width (signed view), `i1` is a bool.

Every access is bounds-checked: an out-of-range load or store raises InterpretationError
(NumPy would silently wrap negative indices). xDSL's own arith, math, memref and affine
implementations are replaced (they compute floats in double precision, miss many ops and
assume symbol-free affine maps); func and scf are xDSL's.
"""

from __future__ import annotations

import math
import operator
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np
from xdsl.dialects import affine, arith, memref
from xdsl.dialects import math as mathd
from xdsl.dialects.builtin import (
    AnyFloat,
    FloatAttr,
    IndexType,
    IntegerAttr,
    IntegerType,
    MemRefType,
    ModuleOp,
)
from xdsl.interpreter import (
    Interpreter,
    InterpreterFunctions,
    PythonValues,
    ReturnedValues,
    impl,
    impl_terminator,
    register_impls,
)
from xdsl.interpreters.func import FuncFunctions
from xdsl.interpreters.scf import ScfFunctions
from xdsl.ir import Attribute, Operation
from xdsl.ir.affine import AffineMap
from xdsl.utils.exceptions import InterpretationError

from einc.dialects.egpu_mma import MmaOp, owned
from einc.dialects.math_ext import ErfcOp
from einc.ir.attrs import is_float_dtype
from einc.runtime.signature import BufferSpec, KernelSignature, kernel_function, numpy_dtype

# ---- values -------------------------------------------------------------------------------


def bitwidth(t: Attribute) -> int:
    if isinstance(t, IndexType):
        return 64
    assert isinstance(t, IntegerType), f"not an integer type: {t}"
    return t.width.data


def wrap(value: int, t: Attribute) -> int | bool:
    """`value` modulo 2^width, as the signed number of that width (`i1`: a bool)."""
    width = bitwidth(t)
    if width == 1:
        return bool(value & 1)
    value &= (1 << width) - 1
    return value - (1 << width) if value >> (width - 1) else value


def unsigned(value: int, t: Attribute) -> int:
    return int(value) & ((1 << bitwidth(t)) - 1)


def signed(value: int, t: Attribute) -> int:
    """The signed reading of a value (an `i1` true is -1)."""
    width = bitwidth(t)
    value = unsigned(value, t)
    return value - (1 << width) if value >> (width - 1) else value


def float_value(value: Any, t: Attribute) -> np.floating:
    return numpy_dtype(t).type(value)


def to_python(value: Any, t: Attribute) -> Any:
    """A value read from a NumPy array, in the interpreter's representation."""
    if isinstance(t, AnyFloat):
        return value
    return wrap(int(value), t)


def poison(spec_or_type: BufferSpec | MemRefType) -> np.ndarray:
    """A fresh buffer whose contents betray any element never written."""
    if isinstance(spec_or_type, BufferSpec):
        shape, dtype = spec_or_type.shape, spec_or_type.dtype
    else:
        shape = tuple(int(d) for d in spec_or_type.get_shape())
        dtype = numpy_dtype(spec_or_type.get_element_type())
    if is_float_dtype(dtype):
        return np.full(shape, np.nan, dtype)
    return np.frombuffer(b"\xa5" * (dtype.itemsize * math.prod(shape)), dtype).reshape(shape).copy()


def _check_bounds(op: Operation, array: np.ndarray, index: Sequence[int]) -> tuple[int, ...]:
    index = tuple(int(i) for i in index)
    if len(index) != array.ndim or any(not 0 <= i < d for i, d in zip(index, array.shape)):
        raise InterpretationError(
            f"out-of-bounds access in {op.name}: index {list(index)} into a buffer of shape "
            f"{list(array.shape)}"
        )
    return index


def _eval_map(m: AffineMap, operands: Sequence[int]) -> tuple[int, ...]:
    """Affine maps parsed from text put their operands in symbols: evaluate both."""
    return m.eval(operands[: m.num_dims], operands[m.num_dims :])


# ---- arith ----------------------------------------------------------------------------------


def _maximumf(a: Any, b: Any) -> Any:
    """IEEE 754-2019 maximum (arith.maximumf): NaN from either operand, -0 below +0."""
    if a != a or a > b:
        return a
    if b != b or b > a:
        return b
    return b if a == 0 and np.signbit(a) else a


def _minimumf(a: Any, b: Any) -> Any:
    """IEEE 754-2019 minimum (arith.minimumf): NaN from either operand, -0 below +0."""
    if a != a or a < b:
        return a
    if b != b or b < a:
        return b
    return b if a == 0 and not np.signbit(a) else a


def maximum(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """`_maximumf` on arrays: NumPy's maximum (NaN-propagating), -0 below +0."""
    zeros = (a == 0) & (b == 0)
    return np.where(zeros, np.where(np.signbit(a), b, a), np.maximum(a, b))


def minimum(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """`_minimumf` on arrays: NumPy's minimum (NaN-propagating), -0 below +0."""
    zeros = (a == 0) & (b == 0)
    return np.where(zeros, np.where(np.signbit(a), a, b), np.minimum(a, b))


FLOAT_BINARY: dict[type[Operation], Callable[[Any, Any], Any]] = {
    arith.AddfOp: operator.add,
    arith.SubfOp: operator.sub,
    arith.MulfOp: operator.mul,
    arith.DivfOp: operator.truediv,
    arith.MaximumfOp: _maximumf,
    arith.MinimumfOp: _minimumf,
    arith.MaxnumfOp: np.fmax,
    arith.MinnumfOp: np.fmin,
}


def _div_trunc(a: int, b: int) -> int:
    q = abs(a) // abs(b)
    return q if (a >= 0) == (b >= 0) else -q


def _total(fn: Callable[[int, int], int]) -> Callable[[int, int], int]:
    """Integer division is total (docs/LANGUAGE.md): a zero divisor gives 0, as NumPy; the
    result is wrapped to the type afterwards, so `MIN / -1` gives MIN."""

    def total(a: int, b: int) -> int:
        return 0 if b == 0 else fn(a, b)

    return total


SIGNED_BINARY: dict[type[Operation], Callable[[int, int], int]] = {
    arith.AddiOp: operator.add,
    arith.SubiOp: operator.sub,
    arith.MuliOp: operator.mul,
    arith.AndIOp: operator.and_,
    arith.OrIOp: operator.or_,
    arith.XOrIOp: operator.xor,
    arith.MaxSIOp: max,
    arith.MinSIOp: min,
    arith.DivSIOp: _total(_div_trunc),
    arith.RemSIOp: _total(lambda a, b: a - _div_trunc(a, b) * b),
    arith.FloorDivSIOp: _total(operator.floordiv),
    arith.CeilDivSIOp: _total(lambda a, b: -(-a // b)),
}
UNSIGNED_BINARY: dict[type[Operation], Callable[[int, int], int]] = {
    arith.DivUIOp: _total(operator.floordiv),
    arith.RemUIOp: _total(operator.mod),
    arith.CeilDivUIOp: _total(lambda a, b: -(-a // b)),
    arith.MaxUIOp: max,
    arith.MinUIOp: min,
}

CMPI: tuple[Callable[[int, int], bool], ...] = (
    operator.eq, operator.ne, operator.lt, operator.le, operator.gt, operator.ge,
    operator.lt, operator.le, operator.gt, operator.ge,
)  # fmt: skip
"""By predicate number: eq ne slt sle sgt sge, then ult ule ugt uge (compared unsigned)."""


def shift(value: int, amount: int, kind: str, width: int) -> int:
    """`value << amount` or `value >> amount` (arithmetic for a signed `value`, logical for an
    unsigned one) with the language's total rule (docs/LANGUAGE.md, "Shifts"): an `amount`
    (unsigned) of `width` or more shifts every bit out (0, or -1 for a negative value shifted
    right), as NumPy; the lowering guards every target's shifts to the same results."""
    amount = min(amount, width)
    return value << amount if kind == "shl" else value >> amount


def _ordered(fn: Callable[[Any, Any], bool]) -> Callable[[Any, Any], bool]:
    return lambda a, b: a == a and b == b and bool(fn(a, b))


def _unordered(fn: Callable[[Any, Any], bool]) -> Callable[[Any, Any], bool]:
    return lambda a, b: a != a or b != b or bool(fn(a, b))


CMPF: tuple[Callable[[Any, Any], bool], ...] = (
    lambda a, b: False,
    _ordered(operator.eq), _ordered(operator.gt), _ordered(operator.ge),
    _ordered(operator.lt), _ordered(operator.le), _ordered(operator.ne),
    _ordered(lambda a, b: True),
    _unordered(operator.eq), _unordered(operator.gt), _unordered(operator.ge),
    _unordered(operator.lt), _unordered(operator.le), _unordered(operator.ne),
    _unordered(lambda a, b: False),
    lambda a, b: True,
)  # fmt: skip
"""By predicate number: false oeq ogt oge olt ole one ord ueq ugt uge ult ule une uno true."""


def _fptoi(x: Any, t: Attribute, signed: bool) -> int:
    """Truncation toward zero, saturated to the type's range; NaN gives 0 (docs/LANGUAGE.md,
    `.cast`; every target's `legalize-float-to-int`)."""
    bits = bitwidth(t)
    lo, hi = (-(2 ** (bits - 1)), 2 ** (bits - 1) - 1) if signed else (0, 2**bits - 1)
    x = float(x)
    if math.isnan(x):
        return 0
    if math.isinf(x):
        return int(wrap(hi if x > 0 else lo, t))
    return int(wrap(min(max(math.trunc(x), lo), hi), t))


def _int_to_float(value: int, int_dtype: str, t: Attribute) -> Any:
    """One rounding, as a C conversion (a Python int would round through double)."""
    return np.array(value, dtype=int_dtype).astype(numpy_dtype(t))[()]


CASTS: dict[type[Operation], Callable[[Any, Attribute, Attribute], Any]] = {
    arith.ExtFOp: lambda x, src, dst: float_value(x, dst),
    arith.TruncFOp: lambda x, src, dst: float_value(x, dst),
    arith.SIToFPOp: lambda x, src, dst: _int_to_float(signed(x, src), "int64", dst),
    arith.UIToFPOp: lambda x, src, dst: _int_to_float(unsigned(x, src), "uint64", dst),
    arith.FPToSIOp: lambda x, src, dst: _fptoi(x, dst, signed=True),
    arith.FPToUIOp: lambda x, src, dst: _fptoi(x, dst, signed=False),
    arith.ExtSIOp: lambda x, src, dst: wrap(signed(x, src), dst),
    arith.ExtUIOp: lambda x, src, dst: wrap(unsigned(x, src), dst),
    arith.TruncIOp: lambda x, src, dst: wrap(int(x), dst),
    arith.IndexCastOp: lambda x, src, dst: wrap(signed(x, src), dst),
}


def mma_lane(op: MmaOp, args: PythonValues) -> None:
    """`egpu.mma` as one lane runs it (einc.dialects.egpu_mma): the accumulator elements the
    lane owns, each `C + sum(A * B)` in float32 in k order (products of float16 or bfloat16
    are exact in float32). `args`: the op's operand values, buffers as NumPy arrays."""
    a, b, c = args[0], args[1], args[2]
    na, nb, nc = len(op.a_indices), len(op.b_indices), len(op.c_indices)
    bases = [int(v) for v in args[3:]]
    a0, b0, c0, lane = bases[:na], bases[na : na + nb], bases[na + nb : na + nb + nc], bases[-1]
    lanes = op.lanes.value.data
    if not 0 <= lane < lanes:
        raise InterpretationError(f"egpu.mma: lane {lane} of {lanes}")

    def at(base: list[int], dims: tuple[int, ...], first: int, second: int) -> tuple[int, ...]:
        index = list(base)
        index[dims[0]] += first
        index[dims[1]] += second
        return tuple(index)

    k = op.k.value.data
    for n, (row, col) in enumerate(owned(lane, lanes)):
        # a fragment c: the lane's element n at c_base + n
        ci = _check_bounds(op, c, (c0[0] + n,) if op.fragment else at(c0, op.dims("c"), row, col))
        total = np.float32(c[ci])
        for q in range(k):
            x = np.float32(a[_check_bounds(op, a, at(a0, op.dims("a"), row, q))])
            y = np.float32(b[_check_bounds(op, b, at(b0, op.dims("b"), q, col))])
            total = np.float32(total + x * y)
        c[ci] = total


def _bitcast(x: Any, src: Attribute, dst: Attribute) -> Any:
    bits = np.array(x if isinstance(src, AnyFloat) else signed(x, src), numpy_dtype(src))
    return to_python(bits.view(numpy_dtype(dst))[()], dst)


class _ArithSpecialFunctions(InterpreterFunctions):
    """The arith ops that do not fit a table."""

    @impl(arith.ConstantOp)
    def run_constant(self, interp: Interpreter, op: arith.ConstantOp, args: PythonValues):
        value = op.value
        if isinstance(value, FloatAttr):
            return (float_value(value.value.data, op.result.type),)
        if isinstance(value, IntegerAttr):
            return (wrap(value.value.data, op.result.type),)
        raise InterpretationError(f"arith.constant of {value} is not supported")

    @impl(arith.SelectOp)
    def run_select(self, interp: Interpreter, op: arith.SelectOp, args: PythonValues):
        cond, lhs, rhs = args
        return (lhs if cond else rhs,)

    @impl(arith.NegfOp)
    def run_negf(self, interp: Interpreter, op: arith.NegfOp, args: PythonValues):
        return (-args[0],)

    @impl(arith.CmpiOp)
    def run_cmpi(self, interp: Interpreter, op: arith.CmpiOp, args: PythonValues):
        predicate = op.predicate.value.data
        read = unsigned if predicate >= 6 else signed
        lhs, rhs = (read(a, op.lhs.type) for a in args)
        return (CMPI[predicate](lhs, rhs),)

    @impl(arith.CmpfOp)
    def run_cmpf(self, interp: Interpreter, op: arith.CmpfOp, args: PythonValues):
        return (CMPF[op.predicate.value.data](*args),)

    @impl(arith.ShLIOp)
    def run_shli(self, interp: Interpreter, op: arith.ShLIOp, args: PythonValues):
        t = op.result.type
        return (wrap(shift(unsigned(args[0], t), unsigned(args[1], t), "shl", bitwidth(t)), t),)

    @impl(arith.ShRSIOp)
    def run_shrsi(self, interp: Interpreter, op: arith.ShRSIOp, args: PythonValues):
        t = op.result.type
        return (wrap(shift(signed(args[0], t), unsigned(args[1], t), "shr", bitwidth(t)), t),)

    @impl(arith.ShRUIOp)
    def run_shrui(self, interp: Interpreter, op: arith.ShRUIOp, args: PythonValues):
        t = op.result.type
        return (wrap(shift(unsigned(args[0], t), unsigned(args[1], t), "shr", bitwidth(t)), t),)

    @impl(arith.BitcastOp)
    def run_bitcast(self, interp: Interpreter, op: arith.BitcastOp, args: PythonValues):
        return (_bitcast(args[0], op.input.type, op.result.type),)


def _float_binary(fn: Callable[[Any, Any], Any]):
    def run(self: InterpreterFunctions, interp: Interpreter, op: Operation, args: PythonValues):
        t = op.results[0].type
        return (float_value(fn(float_value(args[0], t), float_value(args[1], t)), t),)

    return run


def _int_binary(fn: Callable[[int, int], int], read: Callable[[int, Attribute], int]):
    def run(self: InterpreterFunctions, interp: Interpreter, op: Operation, args: PythonValues):
        t = op.results[0].type
        return (wrap(fn(read(args[0], t), read(args[1], t)), t),)

    return run


def _cast(fn: Callable[[Any, Attribute, Attribute], Any]):
    def run(self: InterpreterFunctions, interp: Interpreter, op: Operation, args: PythonValues):
        return (fn(args[0], op.operands[0].type, op.results[0].type),)

    return run


def _with_tables(
    name: str,
    base: type[InterpreterFunctions],
    *tables: tuple[dict[type[Operation], Any], Callable[[Any], Any]],
) -> type[InterpreterFunctions]:
    """`base` plus one implementation per table row (`make(row)` builds it), registered."""
    namespace = {
        f"run_{op_type.name.replace('.', '_')}": impl(op_type)(make(fn))
        for table, make in tables
        for op_type, fn in table.items()
    }
    return register_impls(type(name, (base,), namespace))


EincArithFunctions = _with_tables(
    "EincArithFunctions",
    _ArithSpecialFunctions,
    (FLOAT_BINARY, _float_binary),
    (SIGNED_BINARY, lambda fn: _int_binary(fn, signed)),
    (UNSIGNED_BINARY, lambda fn: _int_binary(fn, unsigned)),
    (CASTS, _cast),
)
"""All of `arith` on the value representation above."""

# ---- math -----------------------------------------------------------------------------------


def _round_half_away(x: Any) -> Any:
    t = np.trunc(x)
    return np.where(np.abs(x - t) >= 0.5, t + np.copysign(1, x).astype(np.asarray(x).dtype), t)


_erf = np.frompyfunc(lambda v: math.erf(float(v)), 1, 1)
_erfc = np.frompyfunc(lambda v: math.erfc(float(v)), 1, 1)


FLOAT_UNARY: dict[type[Operation], Callable[[Any], Any]] = {  # on NumPy scalars and arrays alike
    mathd.AbsFOp: np.abs,
    mathd.AcosOp: np.arccos,
    mathd.AcoshOp: np.arccosh,
    mathd.AsinOp: np.arcsin,
    mathd.AsinhOp: np.arcsinh,
    mathd.AtanOp: np.arctan,
    mathd.AtanhOp: np.arctanh,
    mathd.CbrtOp: np.cbrt,
    mathd.CeilOp: np.ceil,
    mathd.CosOp: np.cos,
    mathd.CoshOp: np.cosh,
    mathd.ErfOp: lambda x: np.asarray(_erf(x), np.float64),
    ErfcOp: lambda x: np.asarray(_erfc(x), np.float64),
    mathd.ExpOp: np.exp,
    mathd.Exp2Op: np.exp2,
    mathd.ExpM1Op: np.expm1,
    mathd.FloorOp: np.floor,
    mathd.LogOp: np.log,
    mathd.Log10Op: np.log10,
    mathd.Log1pOp: np.log1p,
    mathd.Log2Op: np.log2,
    mathd.RoundEvenOp: np.rint,
    mathd.RoundOp: _round_half_away,
    mathd.RsqrtOp: lambda x: np.asarray(1, np.asarray(x).dtype) / np.sqrt(x),
    mathd.SinOp: np.sin,
    mathd.SinhOp: np.sinh,
    mathd.SqrtOp: np.sqrt,
    mathd.TanOp: np.tan,
    mathd.TanhOp: np.tanh,
    mathd.TruncOp: np.trunc,
}
FLOAT_BINARY_MATH: dict[type[Operation], Callable[[Any, Any], Any]] = {
    mathd.Atan2Op: np.arctan2,
    mathd.CopySignOp: np.copysign,
    mathd.PowFOp: np.power,
}


def ipow(base: int, exponent: int) -> int:
    """Integer power; a negative exponent gives 0 unless |base| is 1 (as the C helper)."""
    if exponent >= 0:
        return base**exponent
    if base == 0:
        raise InterpretationError("math.ipowi: zero to a negative power")
    return 1 if base == 1 else (-1) ** (-exponent) if base == -1 else 0


class _MathSpecialFunctions(InterpreterFunctions):
    @impl(mathd.FmaOp)
    def run_fma(self, interp: Interpreter, op: mathd.FmaOp, args: PythonValues):
        a, b, c = (float(x) for x in args)  # exact product in double, then one rounding
        return (float_value(a * b + c, op.result.type),)

    @impl(mathd.AbsIOp)
    def run_absi(self, interp: Interpreter, op: mathd.AbsIOp, args: PythonValues):
        return (wrap(abs(signed(args[0], op.result.type)), op.result.type),)

    @impl(mathd.IPowIOp)
    def run_ipowi(self, interp: Interpreter, op: mathd.IPowIOp, args: PythonValues):
        t = op.result.type
        base, exponent = signed(args[0], t), signed(args[1], t)
        return (wrap(ipow(base, exponent), t),)

    @impl(mathd.FPowIOp)
    def run_fpowi(self, interp: Interpreter, op: mathd.FPowIOp, args: PythonValues):
        t = op.result.type
        return (float_value(np.power(float_value(args[0], t), float(args[1])), t),)


def _float_unary(fn: Callable[[Any], Any]):
    def run(self: InterpreterFunctions, interp: Interpreter, op: Operation, args: PythonValues):
        t = op.results[0].type
        return (float_value(fn(float_value(args[0], t)), t),)

    return run


EincMathFunctions = _with_tables(
    "EincMathFunctions",
    _MathSpecialFunctions,
    (FLOAT_UNARY, _float_unary),
    (FLOAT_BINARY_MATH, _float_binary),
)

# ---- memory and loops -----------------------------------------------------------------------


@register_impls
class EincMemoryFunctions(InterpreterFunctions):
    """memref and affine on NumPy arrays, bounds-checked, with symbol-carrying maps."""

    @impl(memref.AllocOp)
    def run_alloc(self, interp: Interpreter, op: memref.AllocOp, args: PythonValues):
        return (poison(op.memref.type),)

    @impl(memref.AllocaOp)
    def run_alloca(self, interp: Interpreter, op: memref.AllocaOp, args: PythonValues):
        return (poison(op.memref.type),)

    @impl(memref.DeallocOp)
    def run_dealloc(self, interp: Interpreter, op: memref.DeallocOp, args: PythonValues):
        return ()

    @impl(memref.LoadOp)
    def run_memref_load(self, interp: Interpreter, op: memref.LoadOp, args: PythonValues):
        array, *index = args
        value = array[_check_bounds(op, array, index)]
        return (to_python(value, op.res.type),)

    @impl(memref.StoreOp)
    def run_memref_store(self, interp: Interpreter, op: memref.StoreOp, args: PythonValues):
        value, array, *index = args
        array[_check_bounds(op, array, index)] = value
        return ()

    @impl(affine.LoadOp)
    def run_affine_load(self, interp: Interpreter, op: affine.LoadOp, args: PythonValues):
        array, *operands = args
        value = array[_check_bounds(op, array, _eval_map(op.map.data, operands))]
        return (to_python(value, op.result.type),)

    @impl(affine.StoreOp)
    def run_affine_store(self, interp: Interpreter, op: affine.StoreOp, args: PythonValues):
        value, array, *operands = args
        array[_check_bounds(op, array, _eval_map(op.map.data, operands))] = value
        return ()

    @impl(MmaOp)
    def run_mma(self, interp: Interpreter, op: MmaOp, args: PythonValues):
        mma_lane(op, args)
        return ()

    @impl(affine.ApplyOp)
    def run_apply(self, interp: Interpreter, op: affine.ApplyOp, args: PythonValues):
        return _eval_map(op.map.data, args)

    @impl(affine.MinOp)
    def run_min(self, interp: Interpreter, op: affine.MinOp, args: PythonValues):
        return (min(_eval_map(op.map.data, args)),)

    @impl(affine.ForOp)
    def run_for(self, interp: Interpreter, op: affine.ForOp, args: PythonValues):
        n_lb = len(op.lowerBoundOperands)
        n_ub = len(op.upperBoundOperands)
        lower = max(_eval_map(op.lowerBoundMap.data, args[:n_lb]))
        upper = min(_eval_map(op.upperBoundMap.data, args[n_lb : n_lb + n_ub]))
        carried = tuple(args[n_lb + n_ub :])
        for i in range(lower, upper, op.step.value.data):
            carried = interp.run_ssacfg_region(op.body, (i, *carried), "affine.for")
        return carried

    @impl_terminator(affine.YieldOp)
    def run_yield(self, interp: Interpreter, op: affine.YieldOp, args: PythonValues):
        return ReturnedValues(args), ()


# ---- entry point ----------------------------------------------------------------------------


def make_interpreter(module: ModuleOp) -> Interpreter:
    """An interpreter for lowered einc kernels (64-bit index)."""
    interp = Interpreter(module, index_bitwidth=64)
    interp.register_implementations(FuncFunctions())
    interp.register_implementations(ScfFunctions())
    interp.register_implementations(EincArithFunctions())
    interp.register_implementations(EincMathFunctions())
    interp.register_implementations(EincMemoryFunctions())
    return interp


def run_interpreted(
    module: ModuleOp, inputs: Mapping[str, np.ndarray]
) -> dict[str, np.ndarray]:
    """Interpret the module's kernel on `inputs` (by `ein.name`) and return its outputs by
    name, freshly allocated and poisoned before the run. Inputs are not copied and cannot be
    written. Raises RuntimeInputError for arrays that do not match the kernel's signature,
    InterpretationError for an out-of-bounds access or an unsupported op."""
    signature = KernelSignature.from_module(module)
    arrays = signature.bind(inputs, allocate=poison)
    args = []
    for spec, array in zip(signature.buffers, arrays):
        if not spec.is_output:
            array = array.view()
            array.flags.writeable = False
        args.append(array)
    interp = make_interpreter(module)
    with np.errstate(all="ignore"):
        interp.call_op(kernel_function(module), tuple(args))
    return signature.outputs_by_name(arrays)


__all__ = ["make_interpreter", "run_interpreted"]
