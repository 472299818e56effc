"""Random valid Antares IR programs with their NumPy meaning (tests/oracle/semantics.py).

`programs()` is a Hypothesis strategy of `GenProgram`s: the statements' text, `input_dict`,
`extra_outputs`, how to make valid random inputs (index tensors in range, no zeros) and an
evaluator computing every result in float64 / int64 with an error bound.

Generation keeps every value inside a static interval: integers stay within their dtype,
floats within a magnitude budget, denominators away from zero, `log`/`sqrt` arguments >= 0.25,
so every program has one well-defined meaning. Programs cover ranks 0-4, broadcasts, permuted
and affine index maps (strides, offsets, `%`, `//`, reversal), guarded shifted accesses (pads,
concatenations), gathers, every combiner, casts, calls, comparisons and logical operators,
`.when` with and without an else, all dtypes, several statements reading intermediates,
`extra_outputs`, the `.ein` file form, and identifiers that collide with C names.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence

from hypothesis import strategies as st

from .semantics import (
    CMP_FNS, F32, FLOATS, I8, I16, I32, I64, INTS, POSITIVE_DOMAIN, AxisV, AxisVal,
    Bin, Call, Cast, Cmp, Const, DType, GenProgram, InputSpec, Lit, Load, Logic, Node, Shift,
    Statement, TensorRef, Un, When, fits,
)  # fmt: skip

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
FLOAT_RANGES = {"signed": (-2.0, 2.0), "positive": (0.5, 2.0), "wide": (-1000.0, 1000.0)}
MAX_INPUTS = 6
MAX_POINTS = 240  # iteration-space points per statement (the interpreter is slow)
# `large` programs (C only): extents that exceed vector widths, tiles and unroll factors, and
# nests big enough for the default schedule's parallel loops (2^15 iterations).
LARGE_EXTENTS = (1, 2, 3, 4, 5, 7, 8, 9, 15, 16, 17, 31, 32, 33, 63, 64, 65, 100, 128, 257)
LARGE_WEIGHTS = (2, 2, 2, 2, 1, 1, 2, 1, 1, 2, 2, 1, 2, 2, 1, 2, 2, 1, 1, 1)
LARGE_MAX_POINTS = 1 << 20
MATMUL_EXTENTS = (64, 128, 96, 65, 63)  # register blocking needs >= 64 and divisibility
INT_RANGES = {8: 100, 16: 1000, 32: 100_000, 64: 10**9}


class _Builder:
    """Draws one program. Every choice goes through `draw`, so Hypothesis can shrink it;
    the first option of each choice is the simplest."""

    def __init__(self, draw: Callable, large: bool = False):
        self.large = large
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

    def extent(self) -> int:
        return self.pick(LARGE_EXTENTS, LARGE_WEIGHTS) if self.large else self.int_(1, 5)

    # -- tensors --
    def new_input(self, dt: DType, shape: tuple[int, ...], kind: str | None = None,
                  rng: tuple[int, int] | None = None) -> TensorRef:  # fmt: skip
        name = self.fresh_name(f"input{len(self.inputs)}")
        if dt.kind == "f":
            kind = kind or self.pick(["signed", "positive", "wide"], [8, 2, 1])
            lo, hi = FLOAT_RANGES[kind]
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
        w = [4, 40 if match_ else 0, 6 if smaller else 0, 4 if axes else 0,
             4 if smaller or match_ else 0, 8 if axes else 0, 4 if len(axes) >= 2 else 0,
             3 if axes else 0, 4 if gather_ok else 0]  # fmt: skip
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
        """A divisor for `num`: a float one's interval keeps away from zero; an integer one
        may be zero (`any`: integer division by zero gives 0, docs/LANGUAGE.md)."""
        kind = num.dtype.kind
        choice = self.pick(["lit", "absplus", "negabs", "expr", "any"],
                           [3, 4, 1, 2, 2 if kind == "i" else 0])  # fmt: skip
        if choice == "lit":
            return self.lit_for(num, nonzero=True)
        x = self.expr(kind, depth)
        if choice == "any":  # (a constant 0 divisor is a compile-time error instead)
            return x if (x.lo, x.hi) != (0, 0) else self.lit_for(num, nonzero=True)
        if choice == "expr" and (x.lo >= 0.25 or x.hi <= -0.25):
            return x
        offset = self.pick([1, 2]) if kind == "i" else self.pick([0.5, 1.0])
        node = Bin("+", Call("abs", x), Lit(offset, x.dtype, kind == "f"))
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
                float_text = True if a.dtype.kind == "i" and self.coin(0.15) else None
                if self.coin(0.5):
                    b = self.lit_for(a, float_text)
                else:
                    b = self.numeric(d, 0.7 if a.dtype.kind == "f" else 0.2)
                if self.coin(0.5):
                    a, b = b, a
                if a.literal and b.literal:
                    return None
                return Cmp(self.pick(list(CMP_FNS)), a, b)
            if choice == "logic":
                return Logic(self.pick(["&", "|"]), self.expr("b", d), self.expr("b", d))
            if choice == "not":
                return Un("~", self.expr("b", d) if self.coin(0.8) else self.numeric(d, 0.3))
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
            ops = ["/"] if choice == "div" else ["/", "//", "%"] if kind == "i" else ["//", "%"]
            op = self.pick(ops)
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
            conds = [self.expr("b", d) if self.coin(0.9) else self.numeric(d, 0.3)
                     for _ in range(self.pick([1, 2, 3], [4, 2, 1]))]  # fmt: skip
            y: Node = self.lit_for(x) if self.coin(0.4) else self.expr(kind, d)
            if y.dtype != x.dtype:
                y = Cast(y, x.dtype, x if self.coin(0.3) else None)
            return When(x, conds, y, self.coin(0.3), len(conds) > 1 or self.coin(0.5))
        if choice == "ftoi":
            x = self.expr("f", d)
            ok = [t for t in INTS if fits(t, math.trunc(x.lo), math.trunc(x.hi))]
            narrow = [t for t in INTS if t not in ok]  # may saturate (docs/LANGUAGE.md, `.cast`)
            return Cast(x, self.pick(narrow if narrow and (not ok or self.coin(0.3)) else ok))
        if choice == "itoi":
            return Cast(self.expr("i", d), self.pick(INTS))
        if choice == "shift":
            x = self.expr("i", d)
            k: int | Node = self.int_(0, 3)
            if self.coin(0.3):
                size = Call("abs", self.expr("i", d))
                amount = Bin("%", size, Lit(4, size.dtype, False))
                if size.valid():
                    k = amount if amount.dtype == x.dtype else Cast(amount, x.dtype)
            if self.coin(0.5):
                return Shift(">>", x, k)
            if x.lo < 0:
                x = Call("abs", x)
            return Shift("<<", x, k)
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
        # `rfloor`/`rceil` keep the float dtype (`floor`/`ceil` give ints, as in Antares)
        fn = self.pick(["exp", "tanh", "sqrt", "abs", "rfloor", "log", "sigmoid", "rceil", "round",
                        "erf", "sin", "cos", "tan", "exp2", "rsqrt", "log2", "log10"])  # fmt: skip
        x = self.numeric(d, 0.85)
        if fn in ("rfloor", "rceil", "round") and x.dtype.kind != "f":
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
        combiner = self.pick(["assign", "add", "max", "min", "mul", "and", "or"],
                             [8, 6, 2, 2, 1, 1, 1])  # fmt: skip
        earlier = [t for t in self.tensors if not t.is_input]
        rank = self.pick([1, 2, 0, 3, 4], [5, 4, 2, 2, 1])
        matmul = self.large and self.coin(0.3)
        if matmul:
            combiner = "add"
            shape = [self.pick(MATMUL_EXTENTS) for _ in range(2)]
        elif earlier and self.coin(0.5):
            shape = list(self.pick(earlier).shape)[:4]
        else:
            shape = [self.extent() for _ in range(rank)]
        nred = 0 if combiner == "assign" else self.pick([1, 2, 0], [6, 3, 1])
        red = [self.extent() for _ in range(nred)]
        if matmul:
            red = [self.pick(MATMUL_EXTENTS)]
        while math.prod(shape) * math.prod(red) > (LARGE_MAX_POINTS if self.large else MAX_POINTS):
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
        body = self.contraction(out_axes, red_axes[0]) if matmul else self.expr(kind, depth)
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

    def contraction(self, out_axes: list[tuple[str, int]], red: tuple[str, int]) -> Node:
        """`A[N, K] * B[K, M]` (maybe with an elementwise term): a matmul-like body the
        default C schedule reorders and register-blocks."""
        (n, en), (m, em) = out_axes
        k, ek = red
        dt = self.dtype_for("f")
        a = Load(self.new_input(dt, (en, ek), "signed"), [AxisV(n, en), AxisV(k, ek)])
        b = Load(self.new_input(dt, (ek, em), "signed"), [AxisV(k, ek), AxisV(m, em)])
        body: Node = Bin("*", a, b)
        if self.coin(0.3):
            extra = self.expr("f", 1)
            candidate = Bin(self.pick(["+", "*"]), body, extra)
            body = candidate if candidate.valid() else body
        return body

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
                scaled = Bin("*", Call("tanh", inner), Lit(0.125, dt, True))
                inner = Bin("+", scaled, Lit(1.0, dt, True))
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
            if extra:
                extra = list(self.draw(st.permutations(extra)))
            else:
                extra = None if self.coin(0.5) else []
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
def programs(draw: Callable, large: bool = False) -> GenProgram:
    """A random valid Antares program with its NumPy meaning; `large`: extents up to a few
    hundred (for compiled targets; too slow for the interpreter)."""
    return _Builder(draw, large).program()
