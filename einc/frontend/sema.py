"""Semantic analysis: resolves names, infers axis ranges, shapes and dtypes, checks every rule
of docs/LANGUAGE.md, and produces the checked program (`checked.py`) that IR generation lowers.

Here: the program, its inputs, outputs, statements and axes (`Checker`). Beside it:
`expr_check` (a statement's expression), `dtype_rules` (tables, weak literals, promotion),
`affine_ranges` (affine indices and their bounds).
"""

from __future__ import annotations

import difflib
from collections.abc import Iterator
from dataclasses import dataclass, field
from numbers import Integral
from typing import NoReturn

from einc.dialects.ein import Combiner
from einc.frontend import ast
from einc.frontend import checked as c
from einc.frontend.ast import Span
from einc.frontend.checked import DTYPES, AxisInfo, TensorInfo, is_int
from einc.frontend.diagnostics import SourceText
from einc.frontend.dtype_rules import COMBINERS, INT64_MAX, INT64_MIN, Weak, convert
from einc.frontend.expr_check import ExprChecker
from einc.frontend.lexer import is_identifier
from einc.ir.depth import MAX_AXES

MAX_EXTENT = (1 << 31) - 1  # axes are int32 values


def dtype_name(dtype: object) -> object:
    """An input_dict dtype as its name: `"float32"`, `np.float32`, `np.dtype("float32")` and
    `torch.float32` all give `"float32"`; anything else is returned as it is (and refused)."""
    if isinstance(dtype, str):
        return dtype
    if type(dtype).__module__ == "torch" and str(dtype).startswith("torch."):
        return str(dtype)[len("torch."):]
    import numpy as np

    if isinstance(dtype, np.dtype):
        return dtype.name
    if isinstance(dtype, type) and issubclass(dtype, np.generic):
        return np.dtype(dtype).name
    return dtype


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
            dtype = dtype_name(spec.get("dtype"))
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
        if len(order) > MAX_AXES:
            name = order[MAX_AXES]
            self.error(
                f"statement has {len(order)} axes; einc compiles at most {MAX_AXES} axes in one "
                f"statement (its loops nest one per axis), and '{name}' is axis {MAX_AXES + 1}",
                first_use[name],
            )
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
