"""The meaning of generated Antares programs: typed expression nodes, statements and
programs, each able to print itself as Antares IR and to evaluate itself with NumPy
(docs/LANGUAGE.md).

Alongside each value the evaluator carries a running error analysis, so the tests can use
tolerances that are tight yet never wrong:
- `err`: a bound on |(any implementation computing in the program's dtypes) - float64 value|,
  element by element (each rounding step contributes eps(dtype) * |value|, propagated through
  the following operations);
- `unc`: elements whose result is not decided by the dtypes alone (a float comparison, floor
  or float->int cast whose operand is within TOL_FACTOR * err of the discontinuity). They are
  not compared. Integer arithmetic never overflows (the generator tracks static intervals) so
  it is exact, and conditions that guard out-of-range accesses use integer axis arithmetic.

`GenProgram.evaluate(inputs, native=True)` computes the same program with NumPy in the
programs' own dtypes; the oracle's self-test checks that this second, rounding implementation
lies within the analysed error bound.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import numpy as np

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


def saturate(v: np.ndarray, dst: DType) -> np.ndarray:
    """Floats to the integer `dst` (as int64): truncated toward zero, clamped to its range,
    NaN to 0 (docs/LANGUAGE.md, `.cast`)."""
    t = np.trunc(np.nan_to_num(np.asarray(v, np.float64), nan=0.0))
    top = t >= 2.0 ** (dst.bits - 1)  # dst.imax as a float rounds up for 64 bits
    clamped = np.maximum(np.where(top, 0.0, t), float(dst.imin)).astype(np.int64)
    return np.where(top, np.int64(dst.imax), clamped)


def convert(x: Val, src: DType, dst: DType, env: Env) -> Val:
    """Promotion or `.cast`: float->int truncates toward zero and saturates (NaN: 0), int->int
    wraps, conversions to a float round."""
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
        frac = v.astype(np.float64) - np.round(v.astype(np.float64))
        unc = x.unc | _near(frac, x.err)
        return Val(saturate(v, dst).astype(env.rep(dst)), 0.0, unc)
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
        elif not fl and b.lo <= 0 <= b.hi:
            # integer division is total: a zero divisor gives 0 (docs/LANGUAGE.md); any other
            # divisor has |b| >= 1, so |a // b| <= |a| and |a % b| < |b|
            big_a, big_b = max(abs(a.lo), abs(a.hi)), max(abs(b.lo), abs(b.hi))
            if op in ("/", "//"):
                lo, hi = -big_a, big_a
            else:
                lo, hi = -max(big_b - 1, 0), max(big_b - 1, 0)
        else:
            assert b.lo > 0 or b.hi < 0, "float denominator interval contains zero"
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
            with np.errstate(divide="ignore"):  # a zero divisor gives 0, as einc defines it
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
    """`a << k`, `a >> k` on ints (arithmetic right shift); `k` a literal or an int node of
    `a`'s dtype with values in [0, 3]."""

    prec = 40

    def __init__(self, op: str, a: Node, k: int | Node):
        self.op, self.a, self.k = op, a, k
        self.dtype = a.dtype
        lo_k, hi_k = (k, k) if isinstance(k, int) else (int(k.lo), int(k.hi))
        if op == "<<":
            self.lo, self.hi = a.lo * 2**lo_k, a.hi * 2**hi_k
        else:
            ends = [math.floor(v / 2**s) for v in (a.lo, a.hi) for s in (lo_k, hi_k)]
            self.lo, self.hi = float(min(ends)), float(max(ends))

    def children(self) -> Sequence[Node]:
        return (self.a,) if isinstance(self.k, int) else (self.a, self.k)

    def render(self) -> str:
        k = str(self.k) if isinstance(self.k, int) else wrap(self.k, POSTFIX)
        return f"{wrap(self.a, POSTFIX)} {self.op} {k}"

    def ev(self, env: Env) -> Val:
        a = self.a.ev(env)
        v = np.asarray(a.v)
        if isinstance(self.k, int):
            k, unc = np.asarray(self.k, dtype=v.dtype), a.unc
        else:
            kv = self.k.ev(env)
            k, unc = np.asarray(kv.v).astype(v.dtype), a.unc | kv.unc
        return Val(np.left_shift(v, k) if self.op == "<<" else np.right_shift(v, k), 0.0, unc)


class Cast(Node):
    """`a.cast(\\`dt\\`)`, or `a.cast(b.dtype())` when `via` is given."""

    prec = POSTFIX

    def __init__(self, a: Node, dtype: DType, via: Node | None = None):
        self.a, self.dtype, self.via = a, dtype, via
        lo, hi = a.lo, a.hi
        if dtype.kind == "i" and a.dtype.kind == "f":  # saturates
            lo, hi = (float(math.trunc(min(max(v, dtype.imin), dtype.imax))) for v in (lo, hi))
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
    "rfloor": np.floor, "rceil": np.ceil, "round": _round_half_away,
    "sin": np.sin, "cos": np.cos, "tan": np.tan,
}  # fmt: skip
INCREASING = {"exp", "exp2", "log", "log2", "log10", "sqrt", "tanh", "sigmoid", "erf",
              "rfloor", "rceil", "round", "tan"}  # fmt: skip
POSITIVE_DOMAIN = {"log", "log2", "log10", "sqrt", "rsqrt", "pow"}
STEP_FNS = {"rfloor": 0.0, "rceil": 0.0, "round": 0.5}  # discontinuities at integers (+ offset)


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
            unc = unc | (f64 - ex <= 0)
            den = np.maximum(f64 - ex, 1e-300)
            dlog = np.abs(y64) * ex / den + np.abs(np.log(f64)) * ey + ex * ey / den
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
        if self.fn in ("log", "log2", "log10", "rsqrt"):
            # the argument's error may reach down to 0, where the bound is infinite: unchecked
            unc = unc | (f64 - ex <= 0)
        prop = {
            "exp": lambda: np.abs(r64) * np.expm1(ex),
            "exp2": lambda: np.abs(r64) * np.expm1(ex * math.log(2)),
            "log": lambda: ex / np.maximum(f64 - ex, 1e-300),
            "log2": lambda: ex / np.maximum(f64 - ex, 1e-300) / math.log(2),
            "log10": lambda: ex / np.maximum(f64 - ex, 1e-300) / math.log(10),
            "sqrt": lambda: np.minimum(ex / (2 * np.sqrt(np.maximum(f64 - ex, 1e-300))),
                                       np.sqrt(ex)),
            "rsqrt": lambda: ex / (2 * np.maximum(f64 - ex, 1e-300) ** 1.5),
            "tanh": lambda: ex, "sigmoid": lambda: ex / 4, "erf": lambda: ex * 1.13,
            "sin": lambda: ex, "cos": lambda: ex,
            "tan": lambda: ex * (1 + np.tan(np.minimum(a + ex, 1.5)) ** 2),
            "rfloor": lambda: 0.0, "rceil": lambda: 0.0, "round": lambda: 0.0,
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
                    redraw = rng.integers(int(self.lo), int(self.hi) + 1, self.shape)
                    arr = np.where(arr == 0, redraw, arr)
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
