"""Semantic analysis: resolves names, infers axis ranges, shapes and dtypes, checks every rule
of docs/LANGUAGE.md, and produces the checked program (`checked.py`) that IR generation lowers.

Literals are *weak* while only literals take part (`1 + 2`, `-0.5`): they are folded here and
take the dtype of the operand beside them; alone they are float32 or int32.
"""

from __future__ import annotations

import difflib
import math
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from numbers import Integral
from typing import NoReturn

from einc.dialects.ein import Combiner
from einc.frontend import ast
from einc.frontend import checked as c
from einc.frontend.ast import Span
from einc.frontend.checked import DTYPES, TensorInfo, is_float, is_int
from einc.frontend.diagnostics import SourceText
from einc.frontend.lexer import is_identifier

MAX_EXTENT = (1 << 31) - 1  # axes are int32 values

COMBINERS = {
    "=": Combiner.ASSIGN, "+=!": Combiner.ADD, "+=": Combiner.ADD, "*=!": Combiner.MUL,
    ">=!": Combiner.MAX, "<=!": Combiner.MIN, "&=!": Combiner.AND, "|=!": Combiner.OR,
}  # fmt: skip

FLOAT_FUNCTIONS = ("exp", "log", "log2", "log10", "sqrt", "rsqrt", "tanh", "sigmoid", "erf",
                   "normcdf", "round", "sin", "cos", "tan", "exp2")  # fmt: skip
"""Computed in a float dtype: an integer (or bool) argument is converted to float32."""
ROUNDING_FUNCTIONS = ("floor", "ceil", "rfloor", "rceil", "remainder")
"""Antares' rounding functions (its built-in table, lang/einstein_v2.py `OpTensor.call`):
`floor`/`ceil` give an integer (int64 from float64, else int32), `rfloor`/`rceil` keep the
argument's dtype, `remainder(x) = x - rfloor(x)`."""
FUNCTIONS = FLOAT_FUNCTIONS + ROUNDING_FUNCTIONS + ("abs", "max", "min", "pow")
UNARY_FUNCTIONS = FLOAT_FUNCTIONS + ROUNDING_FUNCTIONS + ("abs",)

ARITH_OPS = {"+": "add", "-": "sub", "*": "mul", "/": "div", "//": "floordiv", "%": "mod"}
SHIFT_OPS = {"<<": "shl", ">>": "shr"}
LOGICAL_OPS = {"&": "and", "|": "or"}
COMPARE_OPS = {"==": "eq", "!=": "ne", "<": "lt", "<=": "le", ">": "gt", ">=": "ge"}
INT64_MIN, INT64_MAX = c.int_bounds("int64")


@dataclass(frozen=True)
class Weak:
    """A literal (or an expression of literals, folded) whose dtype is not decided yet."""

    value: int | float
    is_float: bool
    span: Span


Value = c.Expr | Weak


def identity(combiner: Combiner, dtype: str) -> int | float | bool:
    """The value a `.when` without an else value yields: the combiner's neutral element (0 for
    an assignment)."""
    if dtype == "bool":
        return combiner in (Combiner.MUL, Combiner.AND, Combiner.MIN)
    lo, hi = c.int_bounds(dtype) if is_int(dtype) else (-math.inf, math.inf)
    value: int | float = {
        Combiner.ASSIGN: 0, Combiner.ADD: 0, Combiner.OR: 0, Combiner.MUL: 1, Combiner.AND: 1,
        Combiner.MAX: lo, Combiner.MIN: hi,
    }[combiner]  # fmt: skip
    return float(value) if is_float(dtype) else value


def promote(a: str, b: str) -> str:
    """The wider of two dtypes: any float beats any int, bool yields to the other."""
    if a == b or b == "bool":
        return a
    if a == "bool":
        return b
    if is_float(a) != is_float(b):
        return a if is_float(a) else b
    return a if c.BITS[a] >= c.BITS[b] else b


def common_dtype(values: Iterable[Value]) -> str:
    """The dtype a group of operands is computed in; weak literals adapt to the others."""
    values = list(values)
    strong = [v.dtype for v in values if not isinstance(v, Weak)]
    weak_float = any(isinstance(v, Weak) and v.is_float for v in values)
    weak_int = any(isinstance(v, Weak) and not v.is_float for v in values)
    if not strong:
        return "float32" if weak_float else "int32"
    dtype = strong[0]
    for other in strong[1:]:
        dtype = promote(dtype, other)
    if weak_float and not is_float(dtype):
        return "float32"
    if weak_int and dtype == "bool":
        return "int32"
    return dtype


def const_value(expr: c.Expr) -> int | None:
    """The value of an integer expression without axes or loads, if it is one."""
    match expr:
        case c.Constant(value=value, dtype=dtype) if is_int(dtype):
            return int(value)
        case c.Unary(op="neg", operand=operand):
            inner = const_value(operand)
            return None if inner is None else -inner
        case c.Binary(op=op, lhs=lhs, rhs=rhs) if is_int(expr.dtype):
            a, b = const_value(lhs), const_value(rhs)
            if a is None or b is None:
                return None
            if op not in c.INDEX_BINARY_OPS or (op in ("floordiv", "mod") and b == 0):
                return None
            return c.INDEX_BINARY_OPS[op](a, b)
    return None


def is_affine(expr: c.Expr) -> bool:
    """Whether an integer expression is affine in the axes: constants, `+ -`, `*` by a
    constant, floor division and modulo by a positive constant."""
    if not is_int(expr.dtype):
        return False
    match expr:
        case c.Axis() | c.Constant():
            return True
        case c.Unary(op="neg", operand=operand):
            return is_affine(operand)
        case c.Binary(op="add" | "sub", lhs=lhs, rhs=rhs):
            return is_affine(lhs) and is_affine(rhs)
        case c.Binary(op="mul", lhs=lhs, rhs=rhs):
            constant = const_value(lhs) is not None or const_value(rhs) is not None
            return constant and is_affine(lhs) and is_affine(rhs)
        case c.Binary(op="floordiv" | "mod", lhs=lhs, rhs=rhs):
            divisor = const_value(rhs)
            return divisor is not None and divisor > 0 and is_affine(lhs)
    return False


def _linear(expr: c.Expr) -> tuple[dict[int, int], int] | None:
    """`expr` as `sum(coef * axis) + constant` when it has no division or modulo."""
    value = const_value(expr)
    if value is not None:
        return {}, value
    match expr:
        case c.Axis(index=index):
            return {index: 1}, 0
        case c.Unary(op="neg", operand=operand):
            inner = _linear(operand)
            return None if inner is None else ({k: -v for k, v in inner[0].items()}, -inner[1])
        case c.Binary(op="add" | "sub", lhs=lhs, rhs=rhs):
            a, b = _linear(lhs), _linear(rhs)
            if a is None or b is None:
                return None
            sign = 1 if expr.op == "add" else -1
            coefs = dict(a[0])
            for k, v in b[0].items():
                coefs[k] = coefs.get(k, 0) + sign * v
            return coefs, a[1] + sign * b[1]
        case c.Binary(op="mul", lhs=lhs, rhs=rhs):
            factor, other = const_value(lhs), rhs
            if factor is None:
                factor, other = const_value(rhs), lhs
            inner = _linear(other) if factor is not None else None
            if inner is None or factor is None:
                return None
            return {k: v * factor for k, v in inner[0].items()}, inner[1] * factor
    return None


def interval(expr: c.Expr, extents: list[int]) -> tuple[int, int]:
    """Bounds of an affine expression over the iteration space (exact for linear ones)."""
    linear = _linear(expr)
    if linear is not None:
        coefs, const = linear
        lo = const + sum(min(0, k * (extents[i] - 1)) for i, k in coefs.items())
        hi = const + sum(max(0, k * (extents[i] - 1)) for i, k in coefs.items())
        return lo, hi
    match expr:
        case c.Unary(op="neg", operand=operand):
            lo, hi = interval(operand, extents)
            return -hi, -lo
        case c.Binary(op="add", lhs=lhs, rhs=rhs):
            (a, b), (p, q) = interval(lhs, extents), interval(rhs, extents)
            return a + p, b + q
        case c.Binary(op="sub", lhs=lhs, rhs=rhs):
            (a, b), (p, q) = interval(lhs, extents), interval(rhs, extents)
            return a - q, b - p
        case c.Binary(op="mul", lhs=lhs, rhs=rhs):
            factor, other = const_value(lhs), rhs
            if factor is None:
                factor, other = const_value(rhs), lhs
            assert factor is not None
            lo, hi = interval(other, extents)
            return min(lo * factor, hi * factor), max(lo * factor, hi * factor)
        case c.Binary(op="floordiv", lhs=lhs, rhs=rhs):
            divisor = const_value(rhs)
            assert divisor is not None and divisor > 0
            lo, hi = interval(lhs, extents)
            return lo // divisor, hi // divisor
        case c.Binary(op="mod", lhs=lhs, rhs=rhs):
            divisor = const_value(rhs)
            assert divisor is not None and divisor > 0
            lo, hi = interval(lhs, extents)
            if lo // divisor != hi // divisor:
                return 0, divisor - 1
            return lo % divisor, hi % divisor
    raise AssertionError(f"interval of a non-affine expression {expr}")


def walk(expr: ast.Expr) -> Iterator[ast.Expr]:
    """Pre-order, source-order walk of an expression. The bare name of `name.dtype()` is not
    visited on its own: it may name a tensor (`input0.dtype()`), which the `DtypeOf` node's
    visitor resolves."""
    stack = [expr]
    while stack:
        node = stack.pop()
        yield node
        if isinstance(node, ast.DtypeOf) and isinstance(node.operand, ast.Name):
            continue
        stack.extend(reversed(ast.children(node)))


# ---- the checker -----------------------------------------------------------------------------


@dataclass
class AxisInfo:
    index: int
    extent: int


@dataclass
class Checker:
    """Checks a whole program; `tensors` grows as statements define results."""

    source: SourceText
    tensors: dict[str, TensorInfo] = field(default_factory=dict)
    defined_at: dict[str, Span] = field(default_factory=dict)
    later_outputs: dict[str, Span] = field(default_factory=dict)

    def error(self, message: str, span: Span | None) -> NoReturn:
        self.source.semantic_error(message, span)

    # ---- program level ---------------------------------------------------------------------
    def check(
        self, module: ast.Module, input_dict: object, extra_outputs: object
    ) -> tuple[list[TensorInfo], list[TensorInfo], list[c.Statement]]:
        inputs = self.inputs_from_dict(input_dict) if input_dict is not None else []
        inputs += self.inputs_from_decls(module.inputs, {t.name: t for t in inputs})
        self.tensors = {t.name: t for t in inputs}
        if not module.statements:
            self.error("the program has no statements", None)
        for stmt in module.statements:
            self.later_outputs.setdefault(stmt.output, stmt.output_span)
        statements = []
        for stmt in module.statements:
            statements.append(self.check_statement(stmt))
            result = statements[-1].output
            # (a scatter into an input names its result apart: both names read it)
            for name in dict.fromkeys((stmt.output, result.name)):
                self.tensors[name] = result
                self.defined_at[name] = stmt.output_span
        outputs = self.outputs(module, statements, extra_outputs)
        return inputs, outputs, statements

    def inputs_from_dict(self, input_dict: object) -> list[TensorInfo]:
        """`input_dict` as the caller gave it (checked here: a located error if malformed)."""
        form = "{'name': {'dtype': 'float32', 'shape': [...]}, ...}"
        if not isinstance(input_dict, dict):
            self.error(f"input_dict must be a dict like {form}, found {type(input_dict).__name__}", None)
        inputs = []
        for name, spec in input_dict.items():
            if not isinstance(name, str) or not is_identifier(name):
                self.error(f"input_dict: tensor name {name!r} is not an identifier", None)
            if not isinstance(spec, dict):
                self.error(
                    f"input_dict['{name}'] must be a dict with 'dtype' and 'shape', "
                    f"found {type(spec).__name__}", None,
                )  # fmt: skip
            extra = sorted(str(k) for k in spec if k not in ("dtype", "shape"))
            if extra:
                self.error(f"input_dict['{name}']: unexpected key '{extra[0]}'", None)
            dtype = spec.get("dtype")
            if not isinstance(dtype, str) or dtype not in DTYPES:
                self.error(
                    f"input_dict['{name}']: unknown dtype {dtype!r}; expected one of "
                    + ", ".join(DTYPES), None,
                )  # fmt: skip
            shape = spec.get("shape")
            if not isinstance(shape, (list, tuple)):
                self.error(
                    f"input_dict['{name}']: 'shape' must be a list of dimensions, "
                    f"found {type(shape).__name__}", None,
                )  # fmt: skip
            for i, dim in enumerate(shape):
                if not isinstance(dim, Integral) or isinstance(dim, bool):
                    self.error(
                        f"input_dict['{name}']: dimension {i} must be an integer, found {dim!r}",
                        None,
                    )
                if not 0 < int(dim) <= MAX_EXTENT:
                    self.error(
                        f"input_dict['{name}']: dimension {i} must be in [1, {MAX_EXTENT}], "
                        f"found {int(dim)}", None,
                    )  # fmt: skip
            inputs.append(TensorInfo(name, dtype, tuple(int(d) for d in shape)))
        return inputs

    def inputs_from_decls(
        self, decls: tuple[ast.InputDecl, ...], given: dict[str, TensorInfo]
    ) -> list[TensorInfo]:
        inputs: list[TensorInfo] = []
        declared: dict[str, Span] = {}
        for decl in decls:
            if decl.name in declared:
                first = declared[decl.name]
                self.error(
                    f"input '{decl.name}' is declared twice (first at {first.line}:{first.col})",
                    decl.name_span,
                )
            declared[decl.name] = decl.name_span
            if decl.dtype not in DTYPES:
                self.error(self.unknown_dtype(decl.dtype), decl.dtype_span)
            shape = tuple(self.constant_extent(d, f"dimension {i} of '{decl.name}'")
                          for i, d in enumerate(decl.dims))  # fmt: skip
            info = TensorInfo(decl.name, decl.dtype, shape)
            if decl.name in given and given[decl.name] != info:
                other = given[decl.name]
                self.error(
                    f"input '{decl.name}' is declared as {describe(info)} but input_dict gives "
                    f"{describe(other)}",
                    decl.span,
                )
            if decl.name not in given:
                inputs.append(info)
        return inputs

    def outputs(
        self, module: ast.Module, statements: list[c.Statement], extra_outputs: object
    ) -> list[TensorInfo]:
        results = {s.output.name: s.output for s in statements}
        names: list[tuple[str, Span | None]] = []
        if extra_outputs is not None:
            if not isinstance(extra_outputs, (list, tuple)) or not all(
                isinstance(n, str) for n in extra_outputs
            ):
                self.error(
                    f"extra_outputs must be a list of tensor names, found {extra_outputs!r}",
                    None,
                )
            names += [(n, None) for n in extra_outputs]
        names += [name for decl in module.outputs for name in decl.names]
        names.append((statements[-1].output.name, None))
        outputs: list[TensorInfo] = []
        for name, span in names:
            if name not in results:
                where = "extra_outputs" if span is None else "the output declaration"
                what = "an input" if name in self.tensors else "not defined by any statement"
                self.error(f"{where} names '{name}', which is {what}", span)
            if results[name] not in outputs:
                outputs.append(results[name])
        return outputs

    # ---- constants -------------------------------------------------------------------------
    def unknown_dtype(self, name: str) -> str:
        return f"unknown dtype `{name}`; expected one of " + ", ".join(DTYPES)

    def constant_int(self, expr: ast.Expr, what: str) -> int:
        """Evaluates a constant integer expression (dimensions, `where` extents)."""
        match expr:
            case ast.Number(value=int(value), is_float=False):
                return value
            case ast.Unary(op="-", operand=operand):
                return -self.constant_int(operand, what)
            case ast.Binary(op="+" | "-" | "*" | "/" | "//" | "%" as op, lhs=lhs, rhs=rhs):
                a, b = self.constant_int(lhs, what), self.constant_int(rhs, what)
                if op in ("/", "//", "%") and b == 0:
                    self.error(f"division by zero in {what}", expr.span)
                value = {"+": a + b, "-": a - b, "*": a * b}.get(op, 0)
                if op in ("/", "//", "%"):
                    value = a % b if op == "%" else a // b
                if not INT64_MIN <= value <= INT64_MAX:
                    self.error(f"{what} overflows int64", expr.span)
                return value
        self.error(f"{what} must be a constant integer expression", expr.span)

    def constant_extent(self, expr: ast.Expr, what: str) -> int:
        value = self.constant_int(expr, what)
        if not 0 < value <= MAX_EXTENT:
            self.error(f"{what} must be in [1, {MAX_EXTENT}], found {value}", expr.span)
        return value

    # ---- statements ------------------------------------------------------------------------
    def check_statement(self, stmt: ast.Statement) -> c.Statement:
        if stmt.is_scatter:
            return self.check_scatter(stmt)
        if stmt.output in self.tensors:
            if stmt.output in self.defined_at:
                first = self.defined_at[stmt.output]
                self.error(
                    f"tensor '{stmt.output}' is already defined at {first.line}:{first.col}",
                    stmt.output_span,
                )
            self.error(
                f"'{stmt.output}' is an input tensor; a statement cannot redefine it",
                stmt.output_span,
            )
        combiner = COMBINERS[stmt.op]
        output_axes: list[str] = []
        for idx in stmt.indices:
            if not isinstance(idx, ast.Name):
                self.error(
                    f"output indices must be axis names; found '{self.text(idx.span)}' in "
                    f"'{stmt.output}'",
                    idx.span,
                )
            self.check_axis_name(idx, stmt)
            if idx.name in output_axes:
                self.error(f"axis '{idx.name}' appears twice in the output indices", idx.span)
            output_axes.append(idx.name)

        first_use: dict[str, Span] = {name: idx.span for name, idx in zip(output_axes, stmt.indices)}
        axes, order = self.infer_axes(stmt, first_use, (stmt.expr,), {})
        reductions = order[len(output_axes):]
        if combiner == Combiner.ASSIGN and reductions:
            name = reductions[0]
            self.error(
                f"axis '{name}' is not an output axis of '{stmt.output}', so '=' cannot reduce "
                f"over it; use a reduction such as '+=!' or add '{name}' to the output indices",
                first_use[name],
            )
        exprs = ExprChecker(self, stmt, axes, combiner)
        value = exprs.check(stmt.expr, guarded=False)
        if isinstance(value, Weak):
            value = exprs.materialize(value, "float32" if value.is_float else "int32")
        dtype = c.stored_dtype(value.dtype)
        value = convert(value, dtype)
        shape = tuple(axes[a].extent for a in output_axes)
        return c.Statement(
            TensorInfo(stmt.output, dtype, shape),
            combiner,
            tuple((name, info.extent) for name, info in axes.items()),
            value,
            stmt,
        )

    def check_scatter(self, stmt: ast.Statement) -> c.Statement:
        """`data[i0, i1, ...] =. value` (`+=.`): a new version of the existing tensor `data`,
        with the element at `[i0, i1, ...]` set to (increased by) `value` at every point of
        the statement's axes, all of which are loop axes in order of first appearance."""
        name = stmt.output
        if name not in self.tensors:
            self.error(
                f"scatter target '{name}' must be an input or the result of an earlier "
                "statement ('=.' updates an existing tensor)",
                stmt.output_span,
            )
        target = self.tensors[name]
        if len(stmt.indices) != len(target.shape):
            self.error(
                f"'{name}' has rank {len(target.shape)} (shape {list(target.shape)}) but is "
                f"indexed with {len(stmt.indices)} "
                f"{'index' if len(stmt.indices) == 1 else 'indices'}",
                stmt.output_span.to(stmt.op_span),
            )
        # As in Antares, an axis used alone as an index of the target takes its extent there.
        plain: dict[str, tuple[int, str, Span]] = {}
        for dim, idx in enumerate(stmt.indices):
            if isinstance(idx, ast.Name) and idx.name not in plain:
                plain[idx.name] = (target.shape[dim], f"dimension {dim} of '{name}'", idx.span)
        first_use: dict[str, Span] = {}
        axes, _ = self.infer_axes(stmt, first_use, (*stmt.indices, stmt.expr), plain)
        combiner = Combiner.ADD if stmt.op == "+=." else Combiner.ASSIGN
        exprs = ExprChecker(self, stmt, axes, Combiner.ASSIGN)
        indices = exprs.indices(name, target, stmt.indices, guarded=False)
        value = exprs.check(stmt.expr, guarded=False)
        if isinstance(value, Weak) and value.is_float and is_int(target.dtype):
            # stored into an integer tensor as C does: truncated
            value = exprs.constant_as(value, target.dtype, value.span)
        value = exprs.strong(value, target.dtype)
        # The updated copy is a tensor of its own, `<current name>_out` (Antares updates the
        # buffer in place); later statements read it under either name.
        result = TensorInfo(f"{target.name}_out", target.dtype, target.shape)
        if result.name in self.tensors or result.name in self.later_outputs:
            self.error(
                f"the scatter into '{name}' names its result '{result.name}', which is "
                "already a tensor",
                stmt.output_span,
            )
        return c.Statement(
            result,
            combiner,
            tuple((axis, info.extent) for axis, info in axes.items()),
            value,
            stmt,
            scatter=tuple(indices),
        )

    def infer_axes(
        self,
        stmt: ast.Statement,
        first_use: dict[str, Span],
        exprs: tuple[ast.Expr, ...],
        plain: dict[str, tuple[int, str, Span]],
    ) -> tuple[dict[str, AxisInfo], list[str]]:
        """The statement's axes with their extents (docs/LANGUAGE.md, "Axes and their
        ranges"), numbered in order of first use; `first_use` starts with the output axes and
        `plain` with extents already known, and both are completed from `exprs`."""
        explicit: dict[str, int] = {}
        for rng in stmt.where:
            if rng.axis in explicit:
                self.error(f"axis '{rng.axis}' is given a range twice", rng.axis_span)
            explicit[rng.axis] = self.constant_extent(rng.extent, f"the range of axis '{rng.axis}'")
        for node in (n for e in exprs for n in walk(e)):
            match node:
                case ast.DtypeOf(operand=ast.Name() as name) if name.name in self.tensors:
                    pass  # `input0.dtype()`: the dtype of a whole tensor
                case ast.DtypeOf(operand=ast.Name() as name) | (ast.Name() as name):
                    self.check_axis_name(name, stmt)
                    first_use.setdefault(name.name, name.span)
                case ast.Access():
                    info = self.lookup(node, stmt)
                    for dim, idx in enumerate(node.indices):
                        if not isinstance(idx, ast.Name) or idx.name in explicit:
                            continue
                        extent = info.shape[dim]
                        origin = f"dimension {dim} of '{node.tensor}'"
                        if idx.name in plain and plain[idx.name][0] != extent:
                            first_extent, first_origin, first_span = plain[idx.name]
                            self.error(
                                f"axis '{idx.name}' has extent {first_extent} from "
                                f"{first_origin} ({first_span.line}:{first_span.col}) but "
                                f"{extent} from {origin}; fix its range with "
                                f"'where {idx.name} in ...'",
                                idx.span,
                            )
                        plain.setdefault(idx.name, (extent, origin, idx.span))
        for rng in stmt.where:
            if rng.axis not in first_use:
                self.error(
                    f"axis '{rng.axis}' in the where clause is not used in the statement",
                    rng.axis_span,
                )
        axes: dict[str, AxisInfo] = {}
        order = list(first_use)
        for name in order:
            if name in explicit:
                extent = explicit[name]
            elif name in plain:
                extent = plain[name][0]
            else:
                self.error(
                    f"axis '{name}' has no range: it is not used directly as an index of an "
                    f"input or earlier tensor; give it one with 'where {name} in <extent>'",
                    first_use[name],
                )
            axes[name] = AxisInfo(len(axes), extent)
        return axes, order

    def text(self, span: Span) -> str:
        return self.source.text[span.start : span.end]

    def check_axis_name(self, node: ast.Name, stmt: ast.Statement) -> None:
        if node.name in self.tensors or node.name == stmt.output:
            self.error(
                f"'{node.name}' is a tensor, not an axis; index it as {node.name}[...]",
                node.span,
            )

    def lookup(self, access: ast.Access, stmt: ast.Statement) -> TensorInfo:
        """The tensor an access reads, after checking it exists and the number of indices."""
        name = access.tensor
        if name == stmt.output:
            self.error(
                f"statement reads its own output '{name}'; a statement may only read inputs "
                "and results of earlier statements",
                access.tensor_span,
            )
        if name not in self.tensors:
            if name in self.later_outputs:
                later = self.later_outputs[name]
                self.error(
                    f"tensor '{name}' is used before the statement that defines it "
                    f"(at {later.line}:{later.col})",
                    access.tensor_span,
                )
            close = difflib.get_close_matches(name, list(self.tensors), n=1)
            hint = f"; did you mean '{close[0]}'?" if close else ""
            self.error(f"unknown tensor '{name}'{hint}", access.tensor_span)
        info = self.tensors[name]
        if len(access.indices) != len(info.shape):
            self.error(
                f"'{name}' has rank {len(info.shape)} (shape {list(info.shape)}) but is "
                f"indexed with {len(access.indices)} "
                f"{'index' if len(access.indices) == 1 else 'indices'}",
                access.span,
            )
        return info


def describe(info: TensorInfo) -> str:
    return f"{info.dtype}{list(info.shape)}"


def convert(value: c.Expr, dtype: str) -> c.Expr:
    if value.dtype == dtype:
        return value
    return c.Convert(value, dtype, value.span)


class ExprChecker:
    """Types the expression of one statement (whose names `Checker.check_statement` has
    resolved: every bare name is an axis with a range)."""

    def __init__(
        self, checker: Checker, stmt: ast.Statement, axes: dict[str, AxisInfo], combiner: Combiner
    ):
        self.checker = checker
        self.stmt = stmt
        self.axes = axes
        self.extents = [a.extent for a in axes.values()]
        self.combiner = combiner

    def error(self, message: str, span: Span | None) -> NoReturn:
        self.checker.error(message, span)

    # ---- weak literals ---------------------------------------------------------------------
    def materialize(self, weak: Weak, dtype: str) -> c.Constant:
        if dtype == "bool":
            return c.Constant(weak.value != 0, dtype, weak.span)
        if is_float(dtype):
            return c.Constant(float(weak.value), dtype, weak.span)
        assert not weak.is_float, "a float literal never takes an int dtype by promotion"
        lo, hi = c.int_bounds(dtype)
        if not lo <= weak.value <= hi:
            self.error(f"integer literal {weak.value} does not fit in {dtype}", weak.span)
        return c.Constant(int(weak.value), dtype, weak.span)

    def strong(self, value: Value, dtype: str) -> c.Expr:
        """`value` converted to `dtype`."""
        if isinstance(value, Weak):
            return self.materialize(value, dtype)
        return convert(value, dtype)

    def boolean(self, value: Value) -> c.Expr:
        return self.strong(value, "bool")

    def fold(self, op: str, a: Weak, b: Weak, span: Span) -> Value:
        """Evaluates an operator on two literals."""
        floats = a.is_float or b.is_float
        x, y = (float(a.value), float(b.value)) if floats else (a.value, b.value)
        if op in COMPARE_OPS:
            result = {"==": x == y, "!=": x != y, "<": x < y, "<=": x <= y, ">": x > y,
                      ">=": x >= y}[op]  # fmt: skip
            return c.Constant(result, "bool", span)
        if op in LOGICAL_OPS:
            result = (x != 0) and (y != 0) if op == "&" else (x != 0) or (y != 0)
            return c.Constant(result, "bool", span)
        value: int | float | None
        if op in SHIFT_OPS:
            if floats:
                self.error(f"type error: '{op}' needs integer operands, found float literals", span)
            num, count = int(x), int(y)
            if count < 0:
                self.error(f"negative shift count {count}", span)
            if op == ">>":
                value = num >> min(count, 64)
            else:
                value = num << count if count < 64 or num == 0 else None
        else:
            try:
                value = {
                    "+": lambda: x + y, "-": lambda: x - y, "*": lambda: x * y,
                    "/": lambda: x / y if floats else x // y, "//": lambda: x // y,
                    "%": lambda: x % y,
                }[op]()  # fmt: skip
            except ZeroDivisionError:
                self.error("division by zero in a constant expression", span)
        if not floats and (value is None or not INT64_MIN <= value <= INT64_MAX):
            self.error("constant expression overflows int64", span)
        assert value is not None
        return Weak(value, floats, span)

    # ---- expressions -----------------------------------------------------------------------
    def check(self, expr: ast.Expr, guarded: bool) -> Value:
        """Types `expr`; `guarded` is true under a `.when` branch, where accesses are not
        range-checked."""
        match expr:
            case ast.Number(value=value, is_float=floats):
                return Weak(value, floats, expr.span)
            case ast.String():
                self.error(
                    f"unexpected string {self.checker.text(expr.span)}: strings only name a "
                    "dtype or a function",
                    expr.span,
                )
            case ast.Name(name=name):
                return c.Axis(name, self.axes[name].index, "int32", expr.span)
            case ast.Access():
                return self.check_access(expr, guarded)
            case ast.Unary():
                return self.check_unary(expr, guarded)
            case ast.Binary():
                return self.check_binary(expr, guarded)
            case ast.Const():
                return self.check_const(expr)
            case ast.Cast():
                return self.check_cast(expr, guarded)
            case ast.Call():
                return self.check_call(expr, guarded)
            case ast.When():
                return self.check_when(expr, guarded)
            case ast.DtypeOf():
                self.error(
                    "'.dtype()' gives a dtype, not a value; use it as .cast(x.dtype()) or "
                    "const(v, x.dtype())",
                    expr.span,
                )
            case ast.AxisVal(operand=operand):
                if not isinstance(operand, ast.Name):
                    self.error("'.val()' applies to an axis, as in N.val()", expr.span)
                return c.Constant(self.axes[operand.name].extent, "int32", expr.span)
        raise AssertionError(f"unhandled syntax node {expr}")

    def check_access(self, expr: ast.Access, guarded: bool) -> c.Expr:
        info = self.checker.lookup(expr, self.stmt)
        indices = self.indices(expr.tensor, info, expr.indices, guarded)
        return c.Load(expr.tensor, tuple(indices), info.dtype, expr.span)

    def indices(
        self, tensor: str, info: TensorInfo, exprs: tuple[ast.Expr, ...], guarded: bool
    ) -> list[c.Expr]:
        """The indices of an element of `tensor`: integers, range-checked where affine and
        not `guarded`."""
        indices = []
        for dim, idx in enumerate(exprs):
            value = self.check(idx, guarded)
            if isinstance(value, Weak):
                if value.is_float:
                    self.error(
                        f"index {dim} of '{tensor}' is the float {value.value}; indices "
                        "must be integers",
                        idx.span,
                    )
                value = self.materialize(value, "int32")
            if is_float(value.dtype):
                self.error(
                    f"index {dim} of '{tensor}' has dtype {value.dtype}; indices must be "
                    "integers (a gather's index tensor needs an integer dtype)",
                    idx.span,
                )
            value = convert(value, "int32") if value.dtype == "bool" else value
            if not guarded and is_affine(value):
                lo, hi = interval(value, self.extents)
                extent = info.shape[dim]
                if lo < 0 or hi >= extent:
                    self.error(
                        f"index {dim} of '{tensor}' ({self.checker.text(idx.span)}) ranges "
                        f"over [{lo}, {hi}] but the dimension has extent {extent}; guard the "
                        "access with .when(...) if that is intended",
                        idx.span,
                    )
            indices.append(value)
        return indices

    def check_unary(self, expr: ast.Unary, guarded: bool) -> Value:
        value = self.check(expr.operand, guarded)
        if expr.op == "~":
            if isinstance(value, Weak):
                return c.Constant(value.value == 0, "bool", expr.span)
            return c.Unary("not", self.boolean(value), "bool", expr.span)
        if isinstance(value, Weak):
            return Weak(-value.value, value.is_float, expr.span)
        if value.dtype == "bool":
            value = convert(value, "int32")
        return c.Unary("neg", value, value.dtype, expr.span)

    def check_binary(self, expr: ast.Binary, guarded: bool) -> Value:
        op = expr.op
        lhs = self.check(expr.lhs, guarded)
        rhs = self.check(expr.rhs, guarded)
        if isinstance(lhs, Weak) and isinstance(rhs, Weak):
            return self.fold(op, lhs, rhs, expr.span)
        if op in LOGICAL_OPS:
            return c.Binary(LOGICAL_OPS[op], self.boolean(lhs), self.boolean(rhs), "bool", expr.span)
        dtype = common_dtype([lhs, rhs])
        if dtype == "bool":
            dtype = "int32"
        a, b = self.strong(lhs, dtype), self.strong(rhs, dtype)
        if op in COMPARE_OPS:
            return c.Compare(COMPARE_OPS[op], a, b, "bool", expr.span)
        if op in SHIFT_OPS:
            if not is_int(dtype):
                self.error(
                    f"type error: '{op}' needs integer operands, found {dtype}", expr.op_span
                )
            return c.Binary(SHIFT_OPS[op], a, b, dtype, expr.span)
        name = ARITH_OPS[op]
        if is_int(dtype):
            if name == "div":
                name = "floordiv"
            if name in ("floordiv", "mod") and const_value(b) == 0:
                self.error("integer division by zero", expr.rhs.span)
        return c.Binary(name, a, b, dtype, expr.span)

    def resolve_dtype(self, expr: ast.Expr) -> str:
        """The dtype named by a string or a `.dtype()` expression."""
        match expr:
            case ast.String(value=name):
                if name not in DTYPES:
                    self.error(self.checker.unknown_dtype(name), expr.span)
                return name
            case ast.DtypeOf(operand=ast.Name(name=name)) if name in self.checker.tensors:
                return self.checker.tensors[name].dtype
            case ast.DtypeOf(operand=operand):
                # Only the dtype is used: the operand is never evaluated, so not range-checked.
                value = self.check(operand, guarded=True)
                if isinstance(value, Weak):
                    return "float32" if value.is_float else "int32"
                return c.stored_dtype(value.dtype)
        self.error(
            f"expected a dtype such as `float32` or x.dtype(), found "
            f"'{self.checker.text(expr.span)}'",
            expr.span,
        )

    def constant_as(self, weak: Weak, dtype: str, span: Span) -> c.Constant:
        """A literal converted to `dtype` as by `.cast`: floats truncate toward zero, ints wrap."""
        value = weak.value
        if is_float(dtype):
            return c.Constant(float(value), dtype, span)
        if weak.is_float:
            if not math.isfinite(value) or not INT64_MIN <= int(value) <= INT64_MAX:
                self.error(f"constant {value} is out of range for {dtype}", span)
            value = int(value)
            lo, hi = c.int_bounds(dtype)
            if not lo <= value <= hi:
                self.error(f"constant {weak.value} is out of range for {dtype}", span)
        bits = c.BITS[dtype]
        value = (int(value) + (1 << (bits - 1))) % (1 << bits) - (1 << (bits - 1))
        return c.Constant(value, dtype, span)

    def check_const(self, expr: ast.Const) -> c.Expr:
        number = expr.value
        if expr.dtype is None:
            dtype = "float32" if number.is_float else "int32"
        else:
            dtype = self.resolve_dtype(expr.dtype)
        if is_int(dtype) and not number.is_float:
            lo, hi = c.int_bounds(dtype)
            if not lo <= number.value <= hi:
                hint = "" if expr.dtype is not None else "; write const(v, `int64`)"
                self.error(
                    f"integer constant {number.value} does not fit in {dtype}{hint}", number.span
                )
        return self.constant_as(Weak(number.value, number.is_float, number.span), dtype, expr.span)

    def check_cast(self, expr: ast.Cast, guarded: bool) -> c.Expr:
        value = self.check(expr.operand, guarded)
        dtype = self.resolve_dtype(expr.dtype)
        if isinstance(value, Weak):
            return self.constant_as(value, dtype, expr.span)
        return convert(value, dtype)

    def check_call(self, expr: ast.Call, guarded: bool) -> c.Expr:
        value = self.call_value(expr, guarded)
        if expr.dtype is None:
            return value
        return convert(value, self.resolve_dtype(expr.dtype))

    def call_value(self, expr: ast.Call, guarded: bool) -> c.Expr:
        fn = expr.function
        if fn not in FUNCTIONS:
            close = difflib.get_close_matches(fn, FUNCTIONS, n=1)
            hint = f"; did you mean `{close[0]}`?" if close else ""
            self.error(
                f"unknown function `{fn}`{hint} (known: {', '.join(FUNCTIONS)})",
                expr.function_span,
            )
        if fn in UNARY_FUNCTIONS:
            expected = "no extra arguments"
            ok = not expr.args
        elif fn == "pow":
            expected = "one extra argument (the exponent)"
            ok = len(expr.args) == 1
        else:
            expected, ok = "", True
        if not ok:
            self.error(
                f"function `{fn}` takes {expected}, found {len(expr.args)}", expr.function_span
            )
        values = [self.check(expr.operand, guarded)]
        values += [self.check(arg, guarded) for arg in expr.args]
        dtype = common_dtype(values)
        if fn in ROUNDING_FUNCTIONS:
            return self.rounding(fn, self.strong(values[0], dtype), expr.span)
        if fn in FLOAT_FUNCTIONS and not is_float(dtype):
            dtype = "float32"
        elif dtype == "bool":
            dtype = "int32"
        args = tuple(self.strong(v, dtype) for v in values)
        return c.Call(fn, args, dtype, expr.span)

    def rounding(self, fn: str, value: c.Expr, span: Span) -> c.Expr:
        """Antares' rounding functions (`ROUNDING_FUNCTIONS`). An integer is already whole:
        `rfloor`/`rceil` return it, `floor`/`ceil` convert it to int32 (as Antares does, also
        from int64), `remainder` is 0."""
        if value.dtype == "bool":
            value = convert(value, "int32")
        rounded = value
        if is_float(value.dtype):
            function = "ceil" if fn in ("ceil", "rceil") else "floor"
            rounded = c.Call(function, (value,), value.dtype, span)
        if fn == "remainder":
            return c.Binary("sub", value, rounded, value.dtype, span)
        if fn in ("floor", "ceil"):
            return convert(rounded, "int64" if value.dtype == "float64" else "int32")
        return rounded

    def check_when(self, expr: ast.When, guarded: bool) -> c.Expr:
        # Conditions short-circuit like C's && and ||: only the first is always evaluated.
        conditions = tuple(
            self.boolean(self.check(cond, guarded or i > 0))
            for i, cond in enumerate(expr.conditions)
        )
        then = self.check(expr.operand, guarded=True)
        otherwise = None if expr.otherwise is None else self.check(expr.otherwise, guarded=True)
        dtype = common_dtype([then] if otherwise is None else [then, otherwise])
        if otherwise is None:
            otherwise = c.Constant(identity(self.combiner, dtype), dtype, expr.span)
        return c.When(
            conditions,
            expr.merge_any,
            self.strong(then, dtype),
            self.strong(otherwise, dtype),
            dtype,
            expr.span,
        )
