"""Random valid Antares IR programs, each with its NumPy meaning (docs/LANGUAGE.md).

`programs()` is a Hypothesis strategy of `GenProgram`s: the statements' text, `input_dict`,
`extra_outputs`, how to make valid random inputs (index tensors in range, no zeros), and an
evaluator that computes every result in float64 / int64.

Alongside each value the evaluator carries a running error analysis, so the tests can use
tolerances that are tight yet never wrong:
- `err`: a bound on |(any implementation computing in the program's dtypes) - float64 value|,
  element by element (each rounding step contributes eps(dtype) * |value|, propagated through
  the following operations);
- `unc`: elements whose result is not decided by the dtypes alone (a float comparison, floor
  or float->int cast whose operand is within TOL_FACTOR * err of the discontinuity). They are
  not compared. Integer arithmetic never overflows (intervals are tracked statically) so it is
  exact, and conditions that guard out-of-range accesses use integer axis arithmetic only.

Generation keeps every value inside a static interval: integers stay within their dtype,
floats within a magnitude budget, denominators away from zero, `log`/`sqrt` arguments >= 0.25,
so the programs have one well-defined meaning. `evaluate(inputs, native=True)` computes the
same program with NumPy in the programs' own dtypes; the oracle's self-test checks that this
second, rounding implementation lies within the analysed error bound.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import numpy as np
from hypothesis import strategies as st

from .compare import TOL_FACTOR, Expected

EPS64 = 2.0**-52  # the oracle's own rounding, added to every operation's bound


# ---- dtypes ------------------------------------------------------------------------------------


@dataclass(frozen=True)
class DType:
    name: str
    kind: str  # "f", "i" or "b" (the internal bool)
    bits: int

    @property
    def np(self) -> np.dtype:
        """The storage dtype (a bool statement result is stored as int8)."""
        return np.dtype("int8" if self.kind == "b" else self.name)

    @property
    def eps(self) -> float:
        """Twice the unit roundoff: a generous bound on one rounding step."""
        return {64: 2.0**-52, 32: 2.0**-23, 16: 2.0**-10}[self.bits] if self.kind == "f" else 0.0

    @property
    def imin(self) -> int:
        return -(1 << (self.bits - 1))

    @property
    def imax(self) -> int:
        return (1 << (self.bits - 1)) - 1

    @property
    def exact_int(self) -> float:
        """Integers up to this magnitude convert to this float dtype exactly."""
        return {64: 2.0**53, 32: 2.0**24, 16: 2.0**11}[self.bits]

    @property
    def flim(self) -> float:
        """The magnitude budget of generated float values (f16 overflows at 65504)."""
        return 4000.0 if self.bits == 16 else 1e6

    def __repr__(self) -> str:
        return self.name


F64, F32, F16 = DType("float64", "f", 64), DType("float32", "f", 32), DType("float16", "f", 16)
I64, I32, I16, I8 = (DType(f"int{b}", "i", b) for b in (64, 32, 16, 8))
BOOL = DType("bool", "b", 8)
FLOATS = (F32, F64, F16)
INTS = (I32, I64, I16, I8)
DTYPES = {d.name: d for d in (*FLOATS, *INTS)}


def promote(a: DType, b: DType) -> DType:
    """LANGUAGE.md: bool promotes to the other operand; any float beats any int; among floats
    and among ints the wider wins."""
    if a.kind == "b":
        return b
    if b.kind == "b":
        return a
    if a.kind != b.kind:
        return a if a.kind == "f" else b
    return a if a.bits >= b.bits else b


def fits(dt: DType, lo: float, hi: float) -> bool:
    """Whether every value in [lo, hi] is representable without overflow in `dt`."""
    if not (math.isfinite(lo) and math.isfinite(hi)):
        return False
    if dt.kind == "i":
        return dt.imin <= lo and hi <= dt.imax
    if dt.kind == "f":
        return max(abs(lo), abs(hi)) <= dt.flim
    return True


def _widen(lo: float, hi: float) -> tuple[float, float]:
    """A float interval grown by a little more than any rounding can move its ends."""
    return lo - 1e-5 * (1 + abs(lo)), hi + 1e-5 * (1 + abs(hi))


# ---- values during evaluation ------------------------------------------------------------------


@dataclass
class Val:
    """A value over (a broadcast of) the iteration space: oracle floats are float64 and ints
    int64 (native evaluation: the program's dtypes); `err` and `unc` as in the module doc."""

    v: np.ndarray
    err: np.ndarray | float = 0.0
    unc: np.ndarray | bool = False


@dataclass
class Env:
    native: bool
    axes: dict[str, np.ndarray] = field(default_factory=dict)
    tensors: dict[str, Val] = field(default_factory=dict)

    def rep(self, dt: DType) -> np.dtype:
        if dt.kind == "b":
            return np.dtype(bool)
        if self.native:
            return dt.np
        return np.dtype(np.float64 if dt.kind == "f" else np.int64)


def _near(dist: np.ndarray, err: np.ndarray | float) -> np.ndarray:
    """Elements whose distance to a discontinuity is within the error margin."""
    err = np.asarray(err)
    return (err > 0) & (np.abs(dist) <= TOL_FACTOR * err)


def convert(x: Val, src: DType, dst: DType, env: Env) -> Val:
    """Promotion or `.cast`: float->int truncates toward zero, int->int wraps, conversions to
    a float round."""
    if src == dst:
        return x
    v = np.asarray(x.v)
    if dst.kind == "f":
        out = v.astype(env.rep(dst))
        err = x.err
        if src.kind == "i":
            err = err + np.where(np.abs(v) > dst.exact_int, dst.eps * np.abs(v), 0.0)
        elif src.kind == "f" and src.bits > dst.bits:
            err = err + (dst.eps + EPS64) * np.abs(v.astype(np.float64))
        return Val(out, err, x.unc)
    if dst.kind == "b":
        raise AssertionError("nothing converts to bool")
    if src.kind == "b":
        return Val(v.astype(env.rep(dst)), 0.0, x.unc)
    if src.kind == "f":
        t = np.trunc(v)
        frac = v.astype(np.float64) - np.round(v.astype(np.float64))
        unc = x.unc | _near(frac, x.err)
        return Val(t.astype(env.rep(dst)), 0.0, unc)
    if env.native:
        return Val(v.astype(dst.np), 0.0, x.unc)
    if dst.bits == 64:
        return Val(v.astype(np.int64), 0.0, x.unc)
    span = 1 << dst.bits
    return Val((v - dst.imin) % span + dst.imin, 0.0, x.unc)


def truth(x: Val, dt: DType) -> tuple[np.ndarray, np.ndarray | bool]:
    """A value tested against zero (logical operators, `&=!`), and where that is undecided."""
    v = np.asarray(x.v)
    if dt.kind == "b":
        return v, x.unc
    unc = x.unc | _near(v.astype(np.float64), x.err) if dt.kind == "f" else x.unc
    return v != 0, unc


# ---- expression nodes --------------------------------------------------------------------------

ATOM, POSTFIX, MUL, ADD, UNARY = 100, 90, 60, 50, 45
BIN_PREC = {"*": MUL, "/": MUL, "//": MUL, "%": MUL, "+": ADD, "-": ADD}


class Node:
    """A typed expression with a static value interval [lo, hi]."""

    dtype: DType
    lo: float
    hi: float
    prec: int = ATOM
    literal: bool = False

    def children(self) -> Sequence[Node]:
        return ()

    def axes(self) -> set[str]:
        return set().union(*(c.axes() for c in self.children()))

    def render(self) -> str:
        raise NotImplementedError

    def ev(self, env: Env) -> Val:
        raise NotImplementedError

    def valid(self) -> bool:
        return fits(self.dtype, self.lo, self.hi)

    def __repr__(self) -> str:
        return self.render()


def wrap(node: Node, need: int) -> str:
    text = node.render()
    return f"({text})" if node.prec < need else text


def _fmt_number(value: float | int, float_text: bool) -> str:
    return repr(float(value)) if float_text else str(int(value))


class Lit(Node):
    """A literal operand: it takes the dtype of the other operand (float32 for a float
    literal beside an int), so its dtype is fixed by the node it is created for."""

    literal = True

    def __init__(self, value: float | int, dtype: DType, float_text: bool):
        self.value, self.dtype, self.float_text = value, dtype, float_text
        self.lo = self.hi = float(value)

    def render(self) -> str:
        return _fmt_number(self.value, self.float_text)

    def ev(self, env: Env) -> Val:
        return Val(np.asarray(self.value, dtype=env.rep(self.dtype)))


class Const(Node):
    """`const(v)` (float32 / int32), `const(v, \\`dt\\`)` or `const(v).cast(\\`dt\\`)`."""

    def __init__(self, value: float | int, dtype: DType, form: int):
        self.value, self.dtype, self.form = value, dtype, form
        self.lo = self.hi = float(value)
        default = F32 if dtype.kind == "f" else I32
        if dtype == default:
            self.form = 0
        elif form == 0:
            self.form = 1
        self.prec = POSTFIX if self.form == 2 else ATOM

    def render(self) -> str:
        num = _fmt_number(self.value, self.dtype.kind == "f")
        return [f"const({num})", f"const({num}, `{self.dtype}`)",
                f"const({num}).cast(`{self.dtype}`)"][self.form]  # fmt: skip

    def ev(self, env: Env) -> Val:
        return Val(np.asarray(self.value, dtype=env.rep(self.dtype)))


class AxisV(Node):
    """An axis used as a value (int32)."""

    def __init__(self, name: str, extent: int):
        self.name, self.extent, self.dtype = name, extent, I32
        self.lo, self.hi = 0.0, float(extent - 1)

    def axes(self) -> set[str]:
        return {self.name}

    def render(self) -> str:
        return self.name

    def ev(self, env: Env) -> Val:
        return Val(env.axes[self.name].astype(env.rep(I32)))


class AxisVal(Node):
    """`A.val()`: the axis' extent, int32."""

    prec = POSTFIX

    def __init__(self, name: str, extent: int):
        self.name, self.extent, self.dtype = name, extent, I32
        self.lo = self.hi = float(extent)

    def axes(self) -> set[str]:
        return {self.name}

    def render(self) -> str:
        return f"{self.name}.val()"

    def ev(self, env: Env) -> Val:
        return Val(np.asarray(self.extent, dtype=env.rep(I32)))


@dataclass
class TensorRef:
    """An input or an earlier statement's result, as the generator knows it."""

    name: str
    dtype: DType
    shape: tuple[int, ...]
    lo: float
    hi: float
    is_input: bool


class Load(Node):
    """`T[i, j, ...]`; indices are int nodes (affine in the axes, or gathers). Indices outside
    the tensor only happen under a guard; the oracle clamps them and the guard discards them."""

    def __init__(self, tensor: TensorRef, indices: Sequence[Node]):
        self.tensor, self.indices = tensor, list(indices)
        self.dtype, self.lo, self.hi = tensor.dtype, tensor.lo, tensor.hi

    def children(self) -> Sequence[Node]:
        return self.indices

    def render(self) -> str:
        return f"{self.tensor.name}[{', '.join(i.render() for i in self.indices)}]"

    def ev(self, env: Env) -> Val:
        t = env.tensors[self.tensor.name]
        idx = tuple(
            np.clip(np.asarray(i.ev(env).v).astype(np.int64), 0, d - 1)
            for i, d in zip(self.indices, self.tensor.shape)
        )
        pick = lambda a: np.asarray(a)[idx] if np.ndim(a) else a  # noqa: E731
        return Val(np.asarray(t.v)[idx], pick(t.err), pick(t.unc))


def _corners(f: Callable[[float, float], float], a: Node, b: Node) -> tuple[float, float]:
    vals = [f(x, y) for x in (a.lo, a.hi) for y in (b.lo, b.hi)]
    return min(vals), max(vals)


class Bin(Node):
    """`a OP b` for + - * / // %: promoted dtype; `/` on ints is floor division."""

    def __init__(self, op: str, a: Node, b: Node):
        self.op, self.a, self.b = op, a, b
        self.dtype = promote(a.dtype, b.dtype)
        self.prec = BIN_PREC[op]
        fl = self.dtype.kind == "f"
        if op == "+":
            lo, hi = a.lo + b.lo, a.hi + b.hi
        elif op == "-":
            lo, hi = a.lo - b.hi, a.hi - b.lo
        elif op == "*":
            lo, hi = _corners(lambda x, y: x * y, a, b)
        else:
            assert b.lo > 0 or b.hi < 0, "denominator interval contains zero"
            if op == "/" and fl:
                lo, hi = _corners(lambda x, y: x / y, a, b)
            elif op in ("/", "//"):
                lo, hi = _corners(lambda x, y: float(math.floor(x / y)), a, b)
            elif b.lo > 0:
                lo, hi = 0.0, (b.hi if fl else b.hi - 1)
            else:
                lo, hi = (b.lo if fl else b.lo + 1), 0.0
        self.lo, self.hi = _widen(lo, hi) if fl else (lo, hi)

    def children(self) -> Sequence[Node]:
        return (self.a, self.b)

    def render(self) -> str:
        return f"{wrap(self.a, self.prec)} {self.op} {wrap(self.b, self.prec + 1)}"

    def ev(self, env: Env) -> Val:
        dt = self.dtype
        a = convert(self.a.ev(env), self.a.dtype, dt, env)
        b = convert(self.b.ev(env), self.b.dtype, dt, env)
        av, bv = np.asarray(a.v, env.rep(dt)), np.asarray(b.v, env.rep(dt))
        unc = a.unc | b.unc
        if dt.kind == "i":
            fn = {"+": np.add, "-": np.subtract, "*": np.multiply, "/": np.floor_divide,
                  "//": np.floor_divide, "%": np.mod}[self.op]  # fmt: skip
            return Val(fn(av, bv), 0.0, unc)
        e = dt.eps + EPS64
        ea, eb = np.asarray(a.err), np.asarray(b.err)
        fa, fb = av.astype(np.float64), bv.astype(np.float64)
        if self.op in ("+", "-"):
            r = av + bv if self.op == "+" else av - bv
            return Val(r, ea + eb + e * np.abs(np.asarray(r, np.float64)), unc)
        if self.op == "*":
            r = av * bv
            err = np.abs(fa) * eb + np.abs(fb) * ea + ea * eb + e * np.abs(fa * fb)
            return Val(r, err, unc)
        q = fa / fb
        den = np.abs(fb) - eb
        qerr = np.where(den > 0, (ea + np.abs(q) * eb) / np.where(den > 0, den, 1), np.inf)
        if self.op == "/":
            return Val(av / bv, qerr + e * np.abs(q), unc)
        qerr = qerr + e * np.abs(q)
        unc = unc | _near(q - np.round(q), qerr)
        fq = np.floor(q)
        if self.op == "//":
            return Val(np.floor_divide(av, bv), 0.0, unc)
        err = ea + np.abs(fq) * eb + e * (np.abs(fa) + np.abs(fb * fq))
        return Val(np.mod(av, bv), err, unc)


CMP_FNS = {"==": np.equal, "!=": np.not_equal, "<": np.less, "<=": np.less_equal,
           ">": np.greater, ">=": np.greater_equal}  # fmt: skip


class Cmp(Node):
    """A comparison: bool; operands promoted to a common dtype."""

    prec = 30

    def __init__(self, op: str, a: Node, b: Node):
        self.op, self.a, self.b = op, a, b
        self.dtype, self.lo, self.hi = BOOL, 0.0, 1.0
        self.common = promote(a.dtype, b.dtype)

    def children(self) -> Sequence[Node]:
        return (self.a, self.b)

    def valid(self) -> bool:
        return all(fits(self.common, c.lo, c.hi) for c in (self.a, self.b))

    def render(self) -> str:
        return f"{wrap(self.a, POSTFIX)} {self.op} {wrap(self.b, POSTFIX)}"

    def ev(self, env: Env) -> Val:
        a = convert(self.a.ev(env), self.a.dtype, self.common, env)
        b = convert(self.b.ev(env), self.b.dtype, self.common, env)
        rep = env.rep(self.common)
        av, bv = np.asarray(a.v, rep), np.asarray(b.v, rep)
        unc = a.unc | b.unc
        if self.common.kind == "f":
            d = av.astype(np.float64) - bv.astype(np.float64)
            unc = unc | _near(d, np.asarray(a.err) + np.asarray(b.err))
        return Val(CMP_FNS[self.op](av, bv), 0.0, unc)


class Logic(Node):
    """`a & b`, `a | b` (logical: operands tested against zero)."""

    def __init__(self, op: str, a: Node, b: Node):
        self.op, self.a, self.b = op, a, b
        self.dtype, self.lo, self.hi = BOOL, 0.0, 1.0
        self.prec = 20 if op == "&" else 10

    def children(self) -> Sequence[Node]:
        return (self.a, self.b)

    def render(self) -> str:
        return f"{wrap(self.a, POSTFIX)} {self.op} {wrap(self.b, POSTFIX)}"

    def ev(self, env: Env) -> Val:
        ta, ua = truth(self.a.ev(env), self.a.dtype)
        tb, ub = truth(self.b.ev(env), self.b.dtype)
        return Val((ta & tb) if self.op == "&" else (ta | tb), 0.0, ua | ub)


class Un(Node):
    """Unary `-` (same dtype) or `~` (logical not, bool)."""

    prec = UNARY

    def __init__(self, op: str, a: Node):
        self.op, self.a = op, a
        if op == "-":
            self.dtype, self.lo, self.hi = a.dtype, -a.hi, -a.lo
        else:
            self.dtype, self.lo, self.hi = BOOL, 0.0, 1.0

    def children(self) -> Sequence[Node]:
        return (self.a,)

    def render(self) -> str:
        return f"{self.op}{wrap(self.a, POSTFIX)}"

    def ev(self, env: Env) -> Val:
        a = self.a.ev(env)
        if self.op == "~":
            t, unc = truth(a, self.a.dtype)
            return Val(~t, 0.0, unc)
        return Val(-np.asarray(a.v), a.err, a.unc)


class Shift(Node):
    """`a << k`, `a >> k` on ints with a literal k (arithmetic right shift)."""

    prec = 40

    def __init__(self, op: str, a: Node, k: int):
        self.op, self.a, self.k = op, a, k
        self.dtype = a.dtype
        if op == "<<":
            self.lo, self.hi = a.lo * 2**k, a.hi * 2**k
        else:
            self.lo, self.hi = float(math.floor(a.lo / 2**k)), float(math.floor(a.hi / 2**k))

    def children(self) -> Sequence[Node]:
        return (self.a,)

    def render(self) -> str:
        return f"{wrap(self.a, POSTFIX)} {self.op} {self.k}"

    def ev(self, env: Env) -> Val:
        a = self.a.ev(env)
        v = np.asarray(a.v)
        k = np.asarray(self.k, dtype=v.dtype)
        return Val(np.left_shift(v, k) if self.op == "<<" else np.right_shift(v, k), 0.0, a.unc)


class Cast(Node):
    """`a.cast(\\`dt\\`)`, or `a.cast(b.dtype())` when `via` is given."""

    prec = POSTFIX

    def __init__(self, a: Node, dtype: DType, via: Node | None = None):
        self.a, self.dtype, self.via = a, dtype, via
        lo, hi = a.lo, a.hi
        if dtype.kind == "i" and a.dtype.kind == "f":
            lo, hi = float(math.trunc(lo)), float(math.trunc(hi))
        elif dtype.kind == "i" and a.dtype.kind == "i" and not fits(dtype, lo, hi):
            lo, hi = float(dtype.imin), float(dtype.imax)  # wraps
        elif dtype.kind == "f":
            lo, hi = _widen(lo, hi)
        self.lo, self.hi = lo, hi

    def children(self) -> Sequence[Node]:
        return (self.a,) if self.via is None else (self.a, self.via)

    def render(self) -> str:
        target = f"`{self.dtype}`" if self.via is None else f"{wrap(self.via, POSTFIX)}.dtype()"
        return f"{wrap(self.a, POSTFIX)}.cast({target})"

    def ev(self, env: Env) -> Val:
        return convert(self.a.ev(env), self.a.dtype, self.dtype, env)


def _round_half_away(x: np.ndarray) -> np.ndarray:
    return np.sign(x) * np.floor(np.abs(x) + 0.5)


_erf = np.vectorize(math.erf, otypes=[np.float64])

# name -> (numpy function on float64, interval map (monotone ones: applied to the ends))
FLOAT_FNS: dict[str, Callable[[np.ndarray], np.ndarray]] = {
    "exp": np.exp, "exp2": np.exp2, "log": np.log, "log2": np.log2, "log10": np.log10,
    "sqrt": np.sqrt, "rsqrt": lambda x: 1.0 / np.sqrt(x), "tanh": np.tanh,
    "sigmoid": lambda x: 1.0 / (1.0 + np.exp(-x)), "erf": lambda x: _erf(x),
    "floor": np.floor, "ceil": np.ceil, "round": _round_half_away,
    "sin": np.sin, "cos": np.cos, "tan": np.tan,
}  # fmt: skip
INCREASING = {"exp", "exp2", "log", "log2", "log10", "sqrt", "tanh", "sigmoid", "erf",
              "floor", "ceil", "round", "tan"}  # fmt: skip
POSITIVE_DOMAIN = {"log", "log2", "log10", "sqrt", "rsqrt", "pow"}
STEP_FNS = {"floor": 0.0, "ceil": 0.0, "round": 0.5}  # discontinuities at integers (+ offset)


class Call(Node):
    """`a.call(\\`fn\\`)` / `a.call(\\`fn\\`, [b, ...])`. Float functions of an int compute in
    float32; `abs`, `max`, `min` keep the dtype (extra arguments share it)."""

    prec = POSTFIX

    def __init__(self, fn: str, a: Node, args: Sequence[Node] = ()):
        self.fn, self.a, self.args = fn, a, list(args)
        if fn in ("abs", "max", "min"):
            self.dtype = a.dtype
        else:
            self.dtype = a.dtype if a.dtype.kind == "f" else F32
        lo, hi = a.lo, a.hi
        if fn in INCREASING:
            f = FLOAT_FNS[fn]
            with np.errstate(over="ignore"):
                lo, hi = (float(f(np.float64(v))) for v in (lo, hi))
        elif fn == "rsqrt":
            lo, hi = 1 / math.sqrt(hi), 1 / math.sqrt(lo)
        elif fn in ("sin", "cos"):
            lo, hi = -1.0, 1.0
        elif fn == "abs":
            lo, hi = (0.0 if lo <= 0 <= hi else min(abs(lo), abs(hi))), max(abs(lo), abs(hi))
        elif fn == "max":
            lo, hi = max([lo, *(b.lo for b in args)]), max([hi, *(b.hi for b in args)])
        elif fn == "min":
            lo, hi = min([lo, *(b.lo for b in args)]), min([hi, *(b.hi for b in args)])
        elif fn == "pow":
            lo, hi = _corners(lambda x, y: x**y, a, args[0])
        self.lo, self.hi = _widen(lo, hi) if self.dtype.kind == "f" else (lo, hi)

    def children(self) -> Sequence[Node]:
        return (self.a, *self.args)

    def render(self) -> str:
        extra = f", [{', '.join(b.render() for b in self.args)}]" if self.args else ""
        return f"{wrap(self.a, POSTFIX)}.call(`{self.fn}`{extra})"

    def ev(self, env: Env) -> Val:
        dt = self.dtype
        x = convert(self.a.ev(env), self.a.dtype, dt, env)
        args = [convert(b.ev(env), b.dtype, dt, env) for b in self.args]
        v, ex = np.asarray(x.v), np.asarray(x.err)
        unc = x.unc
        for b in args:
            unc = unc | b.unc
        if self.fn in ("max", "min"):
            pick = np.maximum if self.fn == "max" else np.minimum
            r, err = v, ex
            for b in args:
                r, err = pick(r, b.v), np.maximum(err, b.err)
            return Val(r, err, unc)
        if self.fn == "abs":
            return Val(np.abs(v), ex, unc)
        f64 = v.astype(np.float64)
        e = 4 * dt.eps + EPS64
        if self.fn == "pow":
            y, ey = np.asarray(args[0].v), np.asarray(args[0].err)
            y64 = y.astype(np.float64)
            r64 = np.power(f64, y64)
            dlog = np.abs(y64) * ex / (f64 - ex) + np.abs(np.log(f64)) * ey + ex * ey / (f64 - ex)
            r = np.power(v, y) if env.native else r64
            return Val(r, np.abs(r64) * np.expm1(dlog) + e * np.abs(r64), unc)
        fn = FLOAT_FNS[self.fn]
        r64 = fn(f64)
        if env.native:
            exact = self.fn in STEP_FNS or self.fn == "erf"
            r = np.asarray(r64 if exact else fn(v)).astype(dt.np)
        else:
            r = r64
        a = np.abs(f64)
        scale = np.maximum(np.abs(r64), 1.0)
        prop = {
            "exp": lambda: np.abs(r64) * np.expm1(ex),
            "exp2": lambda: np.abs(r64) * np.expm1(ex * math.log(2)),
            "log": lambda: ex / (f64 - ex),
            "log2": lambda: ex / (f64 - ex) / math.log(2),
            "log10": lambda: ex / (f64 - ex) / math.log(10),
            "sqrt": lambda: np.minimum(ex / (2 * np.sqrt(np.maximum(f64 - ex, 1e-300))),
                                       np.sqrt(ex)),
            "rsqrt": lambda: ex / (2 * np.maximum(f64 - ex, 1e-300) ** 1.5),
            "tanh": lambda: ex, "sigmoid": lambda: ex / 4, "erf": lambda: ex * 1.13,
            "sin": lambda: ex, "cos": lambda: ex,
            "tan": lambda: ex * (1 + np.tan(np.minimum(a + ex, 1.5)) ** 2),
            "floor": lambda: 0.0, "ceil": lambda: 0.0, "round": lambda: 0.0,
        }[self.fn]()  # fmt: skip
        if self.fn in STEP_FNS:
            frac = f64 - np.floor(f64) - STEP_FNS[self.fn]
            dist = np.minimum(np.abs(frac), np.abs(frac - np.sign(frac)))
            if self.fn == "round":
                # ties: LANGUAGE.md does not say how `round` breaks them; leave them unchecked
                unc = unc | (dist == 0)
            unc = unc | _near(dist, ex)
            return Val(r, 0.0, unc)
        return Val(r, prop + e * scale, unc)


class When(Node):
    """`x.when([c, ...], y)` (`merge_op=\\`any\\`` for `any`); `y` None only at the top of a
    statement body, where the point is skipped (reductions) or 0 (assignments)."""

    prec = POSTFIX

    def __init__(self, x: Node, conds: Sequence[Node], y: Node | None, any_: bool, brackets: bool):
        self.x, self.conds, self.y, self.any, self.brackets = x, list(conds), y, any_, brackets
        self.dtype = x.dtype
        if y is None:
            self.lo, self.hi = min(x.lo, 0.0), max(x.hi, 0.0)
        else:
            self.lo, self.hi = min(x.lo, y.lo), max(x.hi, y.hi)

    def children(self) -> Sequence[Node]:
        return (self.x, *self.conds, *([self.y] if self.y is not None else []))

    def render(self) -> str:
        if len(self.conds) == 1 and not self.brackets:
            conds = self.conds[0].render()
        else:
            conds = f"[{', '.join(c.render() for c in self.conds)}]"
        parts = [conds]
        if self.y is not None:
            parts.append(self.y.render())
        if self.any:
            parts.append("merge_op=`any`")
        return f"{wrap(self.x, POSTFIX)}.when({', '.join(parts)})"

    def mask(self, env: Env) -> tuple[np.ndarray, np.ndarray | bool]:
        truths = [truth(c.ev(env), c.dtype) for c in self.conds]
        m = truths[0][0]
        unc = truths[0][1]
        for t, u in truths[1:]:
            m = (m | t) if self.any else (m & t)
            unc = unc | u
        return np.asarray(m), unc

    def ev(self, env: Env) -> Val:
        assert self.y is not None
        m, unc = self.mask(env)
        x = self.x.ev(env)
        y = convert(self.y.ev(env), self.y.dtype, self.dtype, env)
        rep = env.rep(self.dtype)
        v = np.where(m, np.asarray(x.v, rep), np.asarray(y.v, rep))
        err = np.where(m, x.err, y.err)
        return Val(v, err, unc | np.where(m, x.unc, y.unc))


# ---- statements and programs -------------------------------------------------------------------

COMBINER_TEXT = {"assign": "=", "add": "+=!", "mul": "*=!", "max": ">=!", "min": "<=!",
                 "and": "&=!", "or": "|=!"}  # fmt: skip


@dataclass
class Statement:
    name: str
    out_axes: list[tuple[str, int]]
    red_axes: list[tuple[str, int]]
    combiner: str
    body: Node
    where: list[str]  # axes given a `where` range, in text order
    op_text: str = ""

    @property
    def body_dtype(self) -> DType:
        return self.body.dtype

    @property
    def dtype(self) -> DType:
        """The stored dtype (bool results are int8)."""
        return I8 if self.body.dtype.kind == "b" else self.body.dtype

    @property
    def shape(self) -> tuple[int, ...]:
        return tuple(e for _, e in self.out_axes)

    @property
    def reduce_len(self) -> int:
        return math.prod(e for _, e in self.red_axes)

    def render(self) -> str:
        ext = dict(self.out_axes + self.red_axes)
        where = ", ".join(f"{a} in {ext[a]}" for a in self.where)
        out = ", ".join(a for a, _ in self.out_axes)
        text = f"{self.name}[{out}] {self.op_text or COMBINER_TEXT[self.combiner]} "
        return text + self.body.render() + (f" where {where}" if where else "")

    def interval(self) -> tuple[float, float]:
        """The result's static interval (the identity included where points may be skipped)."""
        b, n, c = self.body, self.reduce_len, self.combiner
        if b.dtype.kind == "b" or c in ("and", "or"):
            return 0.0, 1.0
        if c == "assign":
            return b.lo, b.hi
        skips = isinstance(b, When) and b.y is None
        lo, hi = (b.x.lo, b.x.hi) if isinstance(b, When) and skips else (b.lo, b.hi)
        if c == "add":
            if skips:
                lo, hi = min(lo, 0.0), max(hi, 0.0)
            return n * lo, n * hi
        if c == "mul":
            if skips:
                lo, hi = min(lo, 1.0), max(hi, 1.0)
            plo, phi = 1.0, 1.0
            for _ in range(n):
                prods = [x * y for x in (plo, phi) for y in (lo, hi)]
                plo, phi = min(prods), max(prods)
                if max(abs(plo), abs(phi)) > 1e300:
                    return -math.inf, math.inf
            return plo, phi
        if skips:
            ident = _identity(c, b.dtype)
            return min(lo, ident), max(hi, ident)
        return lo, hi

    def ev(self, env: Env) -> Val:
        axes = self.out_axes + self.red_axes
        shape = tuple(e for _, e in axes)
        for i, (a, e) in enumerate(axes):
            env.axes[a] = np.arange(e).reshape([e if j == i else 1 for j in range(len(axes))])
        body, dt = self.body, self.body.dtype
        rep = env.rep(dt)
        if isinstance(body, When) and body.y is None:
            mask, munc = body.mask(env)
            x = body.x.ev(env)
        else:
            mask, munc = np.asarray(True), False
            x = body.ev(env)
        mask = np.broadcast_to(mask, shape)
        v = np.broadcast_to(np.asarray(x.v, rep), shape)
        err = np.broadcast_to(np.asarray(x.err, np.float64), shape)
        unc = np.broadcast_to((np.asarray(x.unc) & mask) | np.asarray(munc), shape)
        red = tuple(range(len(self.out_axes), len(axes)))
        store = env.rep(self.dtype) if env.native else env.rep(I64 if dt.kind == "b" else dt)
        unc_out = np.any(unc, axis=red) if red else unc
        c = self.combiner
        if c == "assign":
            zero = np.zeros((), rep)
            return Val(np.where(mask, v, zero).astype(store), np.where(mask, err, 0.0), unc_out)
        if c in ("and", "or"):
            t, tunc = truth(Val(v, err, False), dt)
            t = np.broadcast_to(t, shape)
            t = np.where(mask, t, c == "and")
            r = np.all(t, axis=red) if c == "and" else np.any(t, axis=red)
            tunc = np.broadcast_to(np.asarray(tunc) & mask, shape)
            unc_out = unc_out | (np.any(tunc, axis=red) if red else tunc)
            return Val(r.astype(store), 0.0, unc_out)
        e = dt.eps + EPS64
        if c == "add":
            terms = np.where(mask, v, np.zeros((), rep))
            r = np.sum(terms, axis=red, dtype=rep)
            n = np.sum(mask, axis=red)
            absum = np.sum(np.abs(terms.astype(np.float64)), axis=red)
            err_out = np.sum(np.where(mask, err, 0.0), axis=red) + e * np.maximum(n - 1, 0) * absum
            return Val(r, err_out if dt.kind == "f" else 0.0, unc_out)
        if c == "mul":
            terms = np.where(mask, v, np.ones((), rep))
            r = np.prod(terms, axis=red, dtype=rep)
            e_i = np.where(mask, err, 0.0)
            mag = np.abs(terms.astype(np.float64)) + e_i
            big = np.prod(mag, axis=red)
            ratio = np.sum(np.divide(e_i, mag, out=np.zeros_like(mag), where=mag > 0), axis=red)
            n = np.sum(mask, axis=red)
            err_out = big * ratio + e * n * big
            return Val(r, err_out if dt.kind == "f" else 0.0, unc_out)
        ident = np.asarray(_identity(c, dt)).astype(rep)
        terms = np.where(mask, v, ident)
        r = np.max(terms, axis=red) if c == "max" else np.min(terms, axis=red)
        err_out = np.max(np.where(mask, err, 0.0), axis=red) if red else np.where(mask, err, 0.0)
        return Val(r, err_out, unc_out)


def _identity(combiner: str, dt: DType) -> float:
    if combiner == "max":
        return -math.inf if dt.kind == "f" else dt.imin
    return math.inf if dt.kind == "f" else dt.imax


@dataclass
class InputSpec:
    """How to make a valid random input: floats `signed` (sign * U(0.1, 2)), `positive`
    (U(0.5, 2)) or `wide` (sign * 10^U(-3, 3)); ints uniform in [lo, hi] without 0 (`int`) or
    with it (`index`)."""

    dtype: DType
    shape: tuple[int, ...]
    kind: str
    lo: float
    hi: float

    def make(self, rng: np.random.Generator) -> np.ndarray:
        if self.kind in ("signed", "wide"):
            mag = rng.uniform(0.1, 2.0, self.shape)
            if self.kind == "wide":
                mag = 10.0 ** rng.uniform(-3.0, 3.0, self.shape)
            arr = np.where(rng.integers(0, 2, self.shape) == 1, mag, -mag)
        elif self.kind == "positive":
            arr = rng.uniform(0.5, 2.0, self.shape)
        else:
            arr = rng.integers(int(self.lo), int(self.hi) + 1, self.shape)
            if self.kind == "int":
                while (arr == 0).any():
                    arr = np.where(arr == 0, rng.integers(int(self.lo), int(self.hi) + 1, self.shape), arr)
        return np.asarray(arr).astype(self.dtype.np)


@dataclass
class GenProgram:
    """A generated program: what `einc.compile` takes, and its meaning."""

    statements: list[Statement]
    inputs: dict[str, InputSpec]
    extra_outputs: list[str] | None
    separator: str = "; "  # between statements: "; ", "\n" or ";\n"
    ein_file: bool = False  # compile the `.ein` file form (declarations, no input_dict)

    @property
    def ir(self) -> str:
        return self.separator.join(s.render() for s in self.statements)

    @property
    def ein_text(self) -> str:
        """The program as a `.ein` file: input declarations, the results, the statements."""
        lines = [f"input {n}: {s.dtype}[{', '.join(map(str, s.shape))}]"
                 for n, s in self.inputs.items()]  # fmt: skip
        if self.extra_outputs:
            lines.append(f"output {', '.join(self.extra_outputs)}")
        return "\n".join([*lines, *(s.render() for s in self.statements)]) + "\n"

    def compile_args(self) -> tuple[str, dict[str, dict] | None, list[str] | None]:
        """(program text, input_dict, extra_outputs) as `einc.compile` takes them."""
        if self.ein_file:
            return self.ein_text, None, None
        return self.ir, self.input_dict, self.extra_outputs

    @property
    def input_dict(self) -> dict[str, dict]:
        return {n: {"dtype": s.dtype.name, "shape": list(s.shape)} for n, s in self.inputs.items()}

    @property
    def results(self) -> list[str]:
        names = list(self.extra_outputs or [])
        last = self.statements[-1].name
        return names if last in names else [*names, last]

    def make_inputs(self, rng: np.random.Generator) -> dict[str, np.ndarray]:
        return {n: s.make(rng) for n, s in self.inputs.items()}

    def evaluate(self, inputs: dict[str, np.ndarray], native: bool = False) -> dict[str, Expected]:
        env = Env(native)
        for name, arr in inputs.items():
            spec = self.inputs[name]
            env.tensors[name] = Val(np.asarray(arr).astype(env.rep(spec.dtype)))
        with np.errstate(all="ignore"):
            for s in self.statements:
                env.axes.clear()
                env.tensors[s.name] = s.ev(env)
        out = {}
        for s in self.statements:
            if s.name not in self.results:
                continue
            val = env.tensors[s.name]
            shape = s.shape
            out[s.name] = Expected(
                s.dtype.name,
                np.broadcast_to(np.asarray(val.v), shape).copy(),
                np.broadcast_to(np.asarray(val.err, np.float64), shape).copy(),
                np.broadcast_to(np.asarray(val.unc), shape).copy(),
            )
        return out

    def __repr__(self) -> str:
        if self.ein_file:
            return f"GenProgram(ein_file={self.ein_text!r})"
        return (f"GenProgram(ir={self.ir!r}, input_dict={self.input_dict!r}, "
                f"extra_outputs={self.extra_outputs!r})")  # fmt: skip


# ---- the generator -----------------------------------------------------------------------------

AXIS_NAMES = ("N", "M", "K", "C", "H", "W", "F", "B", "R", "S", "P", "Q")
FLOAT_LITS = (1.0, 0.5, 2.0, 1.5, 0.25, 3.0, 0.125)
INT_LITS = (1, 2, 3, 0, 5, 4, 7)
# Identifiers a user may well choose that collide with C/CUDA/OpenCL keywords, libm
# functions, macros of the standard headers, typedefs, or names a code generator likes to use
# itself. Programs drawn with `odd_names` use them (tensors and axes get disjoint sets).
ODD_TENSOR_NAMES = ("x", "out", "data", "v", "acc", "tmp", "kernel", "int", "float", "double",
                    "char", "if", "for", "return", "restrict", "exp", "expf", "sqrt", "fabsf",
                    "max", "min", "main", "bool", "true", "NAN", "INFINITY", "M_PI", "HUGE_VAL",
                    "INT32_MAX", "NULL", "int64_t", "size_t", "linux", "errno", "_Bool",
                    "__LINE__", "input", "output", "half", "float4", "threadIdx", "Output0")
ODD_AXIS_NAMES = ("i", "j", "n", "k0", "idx", "while", "long", "signed", "pow", "floorf", "M_E",
                  "EOF", "INT8_MIN", "unix", "uint8_t", "_Float16", "__STDC__", "blockIdx",
                  "get_global_id", "a_b", "Z9")
MAX_INPUTS = 6
MAX_POINTS = 240  # iteration-space points per statement (the interpreter is slow)
INT_RANGES = {8: 100, 16: 1000, 32: 100_000, 64: 10**9}


class _Builder:
    """Draws one program. Every choice goes through `draw`, so Hypothesis can shrink it;
    the first option of each choice is the simplest."""

    def __init__(self, draw: Callable):
        self.draw = draw
        self.tensors: list[TensorRef] = []
        self.inputs: dict[str, InputSpec] = {}
        self.stmt_axes: dict[str, int] = {}
        self.fdt, self.idt = F32, I32
        self.odd_names = False
        self.names: set[str] = set()

    def fresh_name(self, plain: str) -> str:
        """A tensor name: `plain`, or with `odd_names` maybe an awkward identifier."""
        name = plain
        if self.odd_names and self.coin(0.6):
            odd = self.pick(ODD_TENSOR_NAMES)
            name = odd if odd not in self.names else plain
        self.names.add(name)
        return name

    # -- choices --
    def int_(self, lo: int, hi: int) -> int:
        return self.draw(st.integers(lo, hi))

    def coin(self, p: float) -> bool:
        return self.int_(0, 99) >= 100 - round(100 * p)

    def pick(self, options: Sequence, weights: Sequence[int] | None = None):
        weights = weights or [1] * len(options)
        r = self.int_(0, sum(weights) - 1)
        for opt, w in zip(options, weights):
            if r < w:
                return opt
            r -= w
        raise AssertionError

    # -- tensors --
    def new_input(self, dt: DType, shape: tuple[int, ...], kind: str | None = None,
                  rng: tuple[int, int] | None = None) -> TensorRef:  # fmt: skip
        name = self.fresh_name(f"input{len(self.inputs)}")
        if dt.kind == "f":
            kind = kind or self.pick(["signed", "positive", "wide"], [8, 2, 1])
            lo, hi = {"signed": (-2.0, 2.0), "positive": (0.5, 2.0), "wide": (-1000.0, 1000.0)}[kind]
        elif rng is not None:
            kind, (lo, hi) = kind or "int", rng
        else:
            kind = "int"
            wide = INT_RANGES[dt.bits]
            lo, hi = self.pick([(-9, 9), (1, 9), (-wide, wide), (-9, -1)], [5, 3, 2, 1])
        spec = InputSpec(dt, shape, kind, float(lo), float(hi))
        self.inputs[name] = spec
        ref = TensorRef(name, dt, shape, float(lo), float(hi), True)
        self.tensors.append(ref)
        return ref

    def dtype_for(self, kind: str) -> DType:
        if kind == "f":
            return self.fdt if self.coin(0.75) else self.pick(FLOATS, [4, 2, 1])
        return self.idt if self.coin(0.7) else self.pick(INTS, [3, 2, 1, 1])

    # -- indices --
    def use_plain(self, axis: str, dim: int) -> Node:
        """Axis `axis` alone as the index of a dimension of size `dim`."""
        return AxisV(axis, self.stmt_axes[axis])

    def axis(self) -> str | None:
        names = list(self.stmt_axes)
        return self.pick(names) if names else None

    def gather_index(self, dim: int) -> Node:
        """An int load whose values are valid indices of a dimension of size `dim`."""
        axes = list(self.stmt_axes)
        rank = self.int_(0, min(2, len(axes)))
        chosen = [self.pick(axes) for _ in range(rank)]
        dt = self.pick([I32, I64, I16, I8], [4, 2, 1, 1])
        t = self.new_input(dt, tuple(self.stmt_axes[a] for a in chosen), "index", (0, dim - 1))
        return Load(t, [self.use_plain(a, self.stmt_axes[a]) for a in chosen])

    def index_for_dim(self, dim: int, guard_ok: bool) -> tuple[Node, list[Node]]:
        """An index into a dimension of size `dim` (and guard conditions when it can leave
        the dimension)."""
        axes = self.stmt_axes
        match_ = [a for a, e in axes.items() if e == dim]
        smaller = [a for a, e in axes.items() if e < dim]
        gather_ok = len(self.inputs) < MAX_INPUTS
        opts = ["const", "plain", "smaller", "mod", "reverse", "shift", "stride", "div", "gather"]
        w = [4, 40 if match_ else 0, 6 if smaller else 0, 4 if axes else 0, 4 if smaller or match_ else 0,
             8 if axes else 0, 4 if len(axes) >= 2 else 0, 3 if axes else 0, 4 if gather_ok else 0]  # fmt: skip
        kind = self.pick(opts, w)
        lit = lambda v: Lit(v, I32, False)  # noqa: E731
        if kind == "plain":
            return self.use_plain(self.pick(match_), dim), []
        if kind == "smaller":
            return self.use_plain(self.pick(smaller), dim), []
        if kind == "mod":
            a = self.pick(list(axes))
            return Bin("%", AxisV(a, axes[a]), lit(dim)), []
        if kind == "reverse":
            a = self.pick(match_ + smaller)
            av = AxisV(a, axes[a]) if not self.coin(0.3) else AxisVal(a, axes[a])
            if isinstance(av, AxisVal):  # A.val() - 1 - A, for A of extent == dim
                if axes[a] != dim:
                    return Bin("-", lit(dim - 1), AxisV(a, axes[a])), []
                return Bin("-", Bin("-", av, lit(1)), AxisV(a, axes[a])), []
            return Bin("-", lit(dim - 1), av), []
        if kind == "shift":
            a = self.pick(list(axes))
            p = self.pick([1, -1, 2, -2])
            e = axes[a]
            idx = Bin("+" if p > 0 else "-", AxisV(a, e), lit(abs(p)))
            conds: list[Node] = []
            if p < 0 or self.coin(0.2):
                conds.append(Cmp(">=", idx, lit(0)))
            if e - 1 + p > dim - 1 or self.coin(0.2):
                conds.append(Cmp("<", idx, lit(dim)))
            in_range = p >= 0 and e - 1 + p <= dim - 1
            if in_range:
                return idx, []
            if not guard_ok:
                return lit(self.int_(0, dim - 1)), []
            return idx, conds
        if kind == "stride":
            a, b = self.pick(list(axes)), self.pick(list(axes))
            s = self.pick([1, 2, 3])
            if a != b and (axes[a] - 1) * s + axes[b] - 1 <= dim - 1:
                return Bin("+", Bin("*", AxisV(a, axes[a]), lit(s)), AxisV(b, axes[b])), []
        if kind == "div":
            a = self.pick(list(axes))
            s = self.pick([2, 3])
            if (axes[a] - 1) // s <= dim - 1:
                return Bin(self.pick(["//", "/"]), AxisV(a, axes[a]), lit(s)), []
        if kind == "gather":
            return self.gather_index(dim), []
        return lit(self.int_(0, dim - 1)), []

    def new_index(self, guard_ok: bool) -> tuple[int, Node, list[Node]]:
        """A dimension size and index for a new input's dimension."""
        axes = self.stmt_axes
        lit = lambda v: Lit(v, I32, False)  # noqa: E731
        if not axes:
            dim = self.int_(1, 4)
            return dim, lit(self.int_(0, dim - 1)), []
        kind = self.pick(["plain", "const", "bigger", "offset", "stride", "div", "mod", "reverse",
                          "guarded", "gather"], [50, 6, 4, 5, 5, 3, 3, 3, 8, 4])  # fmt: skip
        a = self.pick(list(axes))
        e = axes[a]
        if kind == "plain":
            return e, self.use_plain(a, e), []
        if kind == "bigger":
            return e + 1, self.use_plain(a, e + 1), []
        if kind == "offset":
            c = self.int_(1, 2)
            return e + c, Bin("+", AxisV(a, e), lit(c)), []
        if kind == "stride":
            b = self.pick(list(axes))
            s = self.pick([1, 2])
            if b != a:
                dim = (e - 1) * s + axes[b]
                return dim, Bin("+", Bin("*", AxisV(a, e), lit(s)), AxisV(b, axes[b])), []
        if kind == "div":
            s = self.pick([2, 3])
            return (e - 1) // s + 1, Bin(self.pick(["//", "/"]), AxisV(a, e), lit(s)), []
        if kind == "mod":
            m = self.int_(1, 4)
            return m, Bin("%", AxisV(a, e), lit(m)), []
        if kind == "reverse":
            return e, Bin("-", lit(e - 1), AxisV(a, e)), []
        if kind == "gather":
            dim = self.int_(1, 5)
            return dim, self.gather_index(dim), []
        if kind == "guarded":
            dim = self.int_(1, 5)
            p = self.pick([-1, 1, -2, 2])
            idx = Bin("+" if p > 0 else "-", AxisV(a, e), lit(abs(p)))
            conds: list[Node] = []
            if p < 0:
                conds.append(Cmp(">=", idx, lit(0)))
            if e - 1 + p > dim - 1:
                conds.append(Cmp("<", idx, lit(dim)))
            if conds and not guard_ok:
                return dim, lit(self.int_(0, dim - 1)), []
            return dim, idx, conds
        dim = self.int_(1, 4)
        return dim, lit(self.int_(0, dim - 1)), []

    def load(self, kind: str, guard_ok: bool) -> tuple[Node, list[Node]]:
        """A load of a float (`kind` "f") or int tensor: an earlier one or a new input."""
        usable = [t for t in self.tensors
                  if t.dtype.kind == kind and math.isfinite(t.lo) and math.isfinite(t.hi)]
        if usable and (len(self.inputs) >= MAX_INPUTS or self.coin(0.5)):
            weights = [1 if t.is_input else 3 for t in usable]
            t = self.pick(usable, weights)
            pairs = [self.index_for_dim(d, guard_ok) for d in t.shape]
            return Load(t, [p[0] for p in pairs]), [c for p in pairs for c in p[1]]
        if len(self.inputs) >= MAX_INPUTS:
            return (Cast(self.axis_value(), F32) if kind == "f" else self.axis_value()), []
        rank = self.pick([0, 1, 2, 3, 4], [2, 5, 5, 3, 1])
        dims, idx, conds = [], [], []
        for _ in range(rank):
            d, i, c = self.new_index(guard_ok)
            dims.append(d), idx.append(i), conds.extend(c)
        t = self.new_input(self.dtype_for(kind), tuple(dims))
        return Load(t, idx), conds

    def axis_value(self) -> Node:
        a = self.axis()
        if a is None:
            return Const(self.int_(1, 5), I32, 0)
        return AxisV(a, self.stmt_axes[a])

    # -- expressions --
    def lit_for(self, other: Node, float_text: bool | None = None, nonzero: bool = False) -> Lit:
        if float_text is None:
            float_text = other.dtype.kind == "f" and not self.coin(0.15)
        if float_text:
            value: float | int = self.pick(FLOAT_LITS[:4] if nonzero else FLOAT_LITS)
        else:
            value = self.pick([v for v in INT_LITS if v or not nonzero])
        dt = other.dtype if not (float_text and other.dtype.kind == "i") else F32
        return Lit(value, dt, float_text)

    def leaf(self, kind: str, guard_ok: bool = True) -> Node:
        if kind == "b":
            a = self.leaf(self.pick(["i", "f"]))
            return Cmp(self.pick(list(CMP_FNS)), a, self.lit_for(a))
        if kind == "i":
            choice = self.pick(["load", "axis", "val", "const"], [5, 4, 1, 1])
            if choice == "axis" or (choice == "val" and not self.stmt_axes):
                return self.axis_value()
            if choice == "val":
                a = self.pick(list(self.stmt_axes))
                return AxisVal(a, self.stmt_axes[a])
            if choice == "const":
                return Const(self.pick(INT_LITS[:5]), self.pick(INTS), self.int_(0, 2))
            node, conds = self.load("i", guard_ok)
            return self.guard(node, conds)
        choice = self.pick(["load", "axis", "const", "concat"], [12, 2, 1, 2])
        if choice == "axis":
            return Cast(self.axis_value(), self.pick(FLOATS))
        if choice == "const":
            return Const(self.pick(FLOAT_LITS), self.pick(FLOATS), self.int_(0, 2))
        if choice == "concat":
            node = self.concat()
            if node is not None:
                return node
        node, conds = self.load("f", guard_ok)
        return self.guard(node, conds)

    def guard(self, node: Node, conds: list[Node]) -> Node:
        if not conds:
            return node
        if self.coin(0.3):
            other = self.leaf("f" if node.dtype.kind == "f" else "i", guard_ok=False)
            if other.dtype != node.dtype:
                other = Cast(other, node.dtype)
        else:
            other = self.lit_for(node)
        return When(node, conds, other, False, len(conds) > 1 or self.coin(0.5))

    def concat(self) -> Node | None:
        """`X[.., A, ..].when([A < c], Y[.., A - c, ..])`: X and Y joined along A."""
        cands = [a for a, e in self.stmt_axes.items() if e >= 2]
        if not cands or len(self.inputs) + 2 > MAX_INPUTS:
            return None
        a = self.pick(cands)
        e = self.stmt_axes[a]
        c = self.int_(1, e - 1)
        others = [x for x in self.stmt_axes if x != a]
        rest = [self.pick(others) for _ in range(self.int_(0, min(1, len(others))))]
        pos = self.int_(0, len(rest))
        dt = self.dtype_for("f")
        lit = lambda v: Lit(v, I32, False)  # noqa: E731

        def make(dim: int, idx: Node) -> Node:
            dims = [self.stmt_axes[r] for r in rest]
            dims.insert(pos, dim)
            idxs = [self.use_plain(r, self.stmt_axes[r]) for r in rest]
            idxs.insert(pos, idx)
            return Load(self.new_input(dt, tuple(dims), "signed"), idxs)

        first = make(c, self.use_plain(a, c))
        second = make(e - c, Bin("-", AxisV(a, e), lit(c)))
        return When(first, [Cmp("<", AxisV(a, e), lit(c))], second, False, self.coin(0.5))

    def expr(self, kind: str, depth: int) -> Node:
        """A valid expression of `kind` ("f" float, "i" int, "b" bool)."""
        if depth > 0:
            for _ in range(3):
                node = self.compound(kind, depth)
                if node is not None and node.valid():
                    return node
        return self.leaf(kind)

    def numeric(self, depth: int, float_p: float = 0.6) -> Node:
        return self.expr("f" if self.coin(float_p) else "i", depth)

    def operand(self, a: Node, depth: int, op: str) -> Node:
        """The second operand of `a op ...`: a literal or an expression (maybe of another
        dtype, to exercise promotion)."""
        if self.coin(0.35):
            return self.lit_for(a)
        kind = "f" if a.dtype.kind == "f" else "i"
        if kind == "f" and self.coin(0.15):
            kind = "i"
        if op == "*" and self.coin(0.08):
            return self.expr("b", depth)
        return self.expr(kind, depth)

    def denominator(self, num: Node, depth: int) -> Node:
        """A divisor for `num` whose interval keeps away from zero."""
        kind = num.dtype.kind
        choice = self.pick(["lit", "absplus", "negabs", "expr"], [3, 4, 1, 2])
        if choice == "lit":
            return self.lit_for(num, nonzero=True)
        x = self.expr(kind, depth)
        if choice == "expr" and (x.lo >= 0.25 or x.hi <= -0.25):
            return x
        node = Bin("+", Call("abs", x), Lit(self.pick([1, 2]) if kind == "i" else self.pick([0.5, 1.0]),
                                          x.dtype, kind == "f"))  # fmt: skip
        return Un("-", node) if choice == "negabs" else node

    def positive(self, x: Node) -> Node:
        """`x` itself when >= 0.25, else `x.call(abs) + c`."""
        if x.lo >= 0.25:
            return x
        return Bin("+", Call("abs", x), self.lit_for(x, nonzero=True))

    def compound(self, kind: str, depth: int) -> Node | None:
        d = depth - 1
        if kind == "b":
            choice = self.pick(["cmp", "logic", "not", "numlogic"], [10, 4, 2, 1])
            if choice == "cmp":
                a = self.numeric(d)
                b = self.lit_for(a) if self.coin(0.5) else self.numeric(d, 0.7 if a.dtype.kind == "f" else 0.2)
                if self.coin(0.5):
                    a, b = b, a
                if a.literal and b.literal:
                    return None
                return Cmp(self.pick(list(CMP_FNS)), a, b)
            if choice == "logic":
                return Logic(self.pick(["&", "|"]), self.expr("b", d), self.expr("b", d))
            if choice == "not":
                return Un("~", self.expr("b", d))
            return Logic(self.pick(["&", "|"]), self.numeric(d, 0.3), self.expr("b", d))
        if kind == "i":
            choice = self.pick(["arith", "divmod", "neg", "abs", "minmax", "when", "ftoi", "itoi",
                                "shift", "btoi"], [12, 5, 2, 2, 2, 3, 3, 2, 2, 1])  # fmt: skip
        else:
            choice = self.pick(["arith", "div", "neg", "call", "minmax", "when", "cast", "fdivmod",
                                "pow"], [12, 4, 2, 6, 2, 4, 3, 1, 1])  # fmt: skip
        if choice == "arith":
            op = self.pick(["+", "*", "-"])
            a = self.expr(kind, d)
            b = self.operand(a, d, op)
            if b.dtype.kind == "b" and a.dtype.kind == "b":
                return None
            res = Bin(op, *((b, a) if self.coin(0.3) else (a, b)))
            return res if res.dtype.kind == kind else None
        if choice in ("div", "divmod", "fdivmod"):
            op = "/" if choice == "div" else self.pick(["/", "//", "%"] if kind == "i" else ["//", "%"])
            a = self.expr(kind, d)
            b = self.denominator(a, d)
            res = Bin(op, a, b)
            return res if res.dtype.kind == kind else None
        if choice == "neg":
            return Un("-", self.expr(kind, d))
        if choice == "abs":
            return Call("abs", self.expr(kind, d))
        if choice == "minmax":
            a = self.expr(kind, d)
            args = []
            for _ in range(self.int_(1, 2)):
                b = self.lit_for(a) if self.coin(0.4) else self.expr(kind, d)
                args.append(b if b.dtype == a.dtype else Cast(b, a.dtype))
            return Call(self.pick(["max", "min"]), a, args)
        if choice == "when":
            x = self.expr(kind, d)
            conds = [self.expr("b", d) for _ in range(self.pick([1, 2, 3], [4, 2, 1]))]
            y: Node = self.lit_for(x) if self.coin(0.4) else self.expr(kind, d)
            if y.dtype != x.dtype:
                y = Cast(y, x.dtype, x if self.coin(0.3) else None)
            return When(x, conds, y, self.coin(0.3), len(conds) > 1 or self.coin(0.5))
        if choice == "ftoi":
            x = self.expr("f", d)
            ok = [t for t in INTS if fits(t, math.trunc(x.lo), math.trunc(x.hi))]
            return Cast(x, self.pick(ok)) if ok else None
        if choice == "itoi":
            return Cast(self.expr("i", d), self.pick(INTS))
        if choice == "shift":
            x = self.expr("i", d)
            if self.coin(0.5):
                return Shift(">>", x, self.int_(0, 3))
            if x.lo < 0:
                x = Call("abs", x)
            return Shift("<<", x, self.int_(0, 3))
        if choice == "btoi":
            return Cast(self.expr("b", d), self.pick(INTS))
        if choice == "cast":
            x = self.numeric(d, 0.5)
            return Cast(x, self.pick(FLOATS))
        if choice == "pow":
            base = self.positive(self.expr("f", d))
            y = self.lit_for(base) if self.coin(0.7) else Call("tanh", self.expr("f", d))
            if y.dtype != base.dtype:
                y = Cast(y, base.dtype)
            return Call("pow", base, [y])
        fn = self.pick(["exp", "tanh", "sqrt", "abs", "floor", "log", "sigmoid", "ceil", "round",
                        "erf", "sin", "cos", "tan", "exp2", "rsqrt", "log2", "log10"])  # fmt: skip
        x = self.numeric(d, 0.85)
        if fn in ("floor", "ceil", "round") and x.dtype.kind != "f":
            return None
        if fn in POSITIVE_DOMAIN:
            x = self.positive(x)
        if fn == "tan" and max(abs(x.lo), abs(x.hi)) > 1.2:
            x = Call("tanh", x)
        if fn in ("exp", "exp2") and x.hi > 6:
            x = Call("tanh", x)
        if x.dtype.kind == "i" and not fits(F32, x.lo, x.hi):
            return None
        return Call(fn, x)

    # -- statements --
    def statement(self, name: str) -> Statement:
        combiner = self.pick(["assign", "add", "max", "min", "mul", "and", "or"], [8, 6, 2, 2, 1, 1, 1])
        earlier = [t for t in self.tensors if not t.is_input]
        rank = self.pick([1, 2, 0, 3, 4], [5, 4, 2, 2, 1])
        if earlier and self.coin(0.5):
            shape = list(self.pick(earlier).shape)[:4]
        else:
            shape = [self.int_(1, 5) for _ in range(rank)]
        nred = 0 if combiner == "assign" else self.pick([1, 2, 0], [6, 3, 1])
        red = [self.int_(1, 5) for _ in range(nred)]
        while math.prod(shape) * math.prod(red) > MAX_POINTS:
            big = max(range(len(shape + red)), key=lambda i: (shape + red)[i])
            if big < len(shape):
                shape[big] -= 1
            else:
                red[big - len(shape)] -= 1
        pool = ODD_AXIS_NAMES if self.odd_names and self.coin(0.5) else AXIS_NAMES
        names = list(self.draw(st.permutations(pool)))[: len(shape) + len(red)]
        out_axes = list(zip(names[: len(shape)], shape))
        red_axes = list(zip(names[len(shape):], red))
        self.stmt_axes = dict(out_axes + red_axes)
        self.fdt = self.pick(FLOATS, [4, 2, 1])
        self.idt = self.pick(INTS, [3, 2, 1, 1])
        if combiner in ("and", "or"):
            kind = self.pick(["b", "f", "i"], [6, 1, 1])
        elif combiner == "assign":
            kind = self.pick(["f", "i", "b"], [6, 3, 1])
        else:
            kind = self.pick(["f", "i"], [7, 3])
        depth = self.pick([0, 1, 2, 3, 4, 5], [1, 2, 3, 3, 2, 1])
        body = self.expr(kind, depth)
        if self.coin(0.15):
            conds = [self.expr("b", self.int_(0, 1)) for _ in range(self.pick([1, 2], [3, 1]))]
            body = When(body, conds, None, self.coin(0.3), len(conds) > 1 or self.coin(0.5))
        used = body.axes()
        red_axes = [(a, e) for a, e in red_axes if a in used]
        stmt = Statement(name, out_axes, red_axes, combiner, body, [])
        stmt = self.fix_range(stmt)
        if combiner == "add" and self.coin(0.2):
            stmt.op_text = "+="
        where = []
        plain = plain_uses(stmt.body)
        for a, e in out_axes + red_axes:
            uses = plain.get(a, [])
            if not uses or any(u != e for u in uses) or self.coin(0.25):
                where.append(a)
        stmt.where = list(self.draw(st.permutations(where))) if where else []
        lo, hi = stmt.interval()
        self.tensors.append(TensorRef(name, stmt.dtype, stmt.shape, lo, hi, False))
        return stmt

    def fix_range(self, stmt: Statement) -> Statement:
        """Keeps a sum's or product's result inside its dtype: widen or squash the body, else
        fall back to a max-reduction."""
        if stmt.combiner not in ("add", "mul") or stmt.body.dtype.kind == "b":
            return stmt
        for attempt in range(2):
            if fits(stmt.dtype, *stmt.interval()):
                return stmt
            body = stmt.body
            skip = body if isinstance(body, When) and body.y is None else None
            inner = skip.x if skip is not None else body
            dt = inner.dtype
            if dt.kind == "i" and attempt == 0 and dt != I64:
                inner = Cast(inner, I64)
            elif dt.kind == "i":
                inner = Call("min", Call("max", inner, [Lit(-3, dt, False)]), [Lit(3, dt, False)])
            elif stmt.combiner == "mul":
                inner = Bin("+", Bin("*", Call("tanh", inner), Lit(0.125, dt, True)), Lit(1.0, dt, True))
            else:
                inner = Call("tanh", inner)
            if skip is not None:
                inner = When(inner, skip.conds, None, skip.any, skip.brackets)
            stmt.body = inner
        if not fits(stmt.dtype, *stmt.interval()):
            stmt.combiner = "max"
        return stmt

    def program(self) -> GenProgram:
        n = self.pick([1, 2, 3, 4], [5, 3, 2, 1])
        self.odd_names = self.coin(0.1)
        stmts = [self.statement(self.fresh_name("output0" if i == n - 1 else f"temp{i}"))
                 for i in range(n)]  # fmt: skip
        extra: list[str] | None = None
        if n > 1 and self.coin(0.5):
            extra = [s.name for s in stmts[:-1] if self.coin(0.5)]
            if self.coin(0.3):
                extra.append(stmts[-1].name)
            extra = list(self.draw(st.permutations(extra))) if extra else (None if self.coin(0.5) else [])
        used = {n.tensor.name for s in stmts for n in _walk(s.body) if isinstance(n, Load)}
        inputs = {name: spec for name, spec in self.inputs.items() if name in used}
        sep = self.pick(["; ", "\n", ";\n"], [4, 1, 1])
        return GenProgram(stmts, inputs, extra, sep, self.coin(0.15))


def _walk(node: Node):
    yield node
    for c in node.children():
        yield from _walk(c)


def plain_uses(body: Node) -> dict[str, list[int]]:
    """The sizes of the dimensions each axis indexes alone (what infers its range)."""
    uses: dict[str, list[int]] = {}
    for node in _walk(body):
        if isinstance(node, Load):
            for idx, dim in zip(node.indices, node.tensor.shape):
                if isinstance(idx, AxisV):
                    uses.setdefault(idx.name, []).append(dim)
    return uses


@st.composite
def programs(draw: Callable) -> GenProgram:
    """A random valid Antares program with its NumPy meaning."""
    return _Builder(draw).program()
