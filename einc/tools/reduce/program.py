"""The reducer's edits of a `.ein` program, on its text (the frontend's syntax tree gives the
places; the result is a program of its own, checked by replaying it).

    cut_statements(text, name, keep)      statements dropped; a dropped one still read by a
                                          kept one becomes an input of its shape and dtype
    drop_outputs(text, name, keep)        `output` declarations dropped
    drop_unused_inputs(text, name)        inputs no statement reads
    expression_edits(text, name)          each subexpression replaced by one of its operands,
                                          or by a constant
    shape_edits(text, name)               each dimension size lowered (its equal literals too)
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Sequence

from einc.frontend import ast


def parse(text: str, filename: str) -> ast.Module:
    from einc.frontend.diagnostics import SourceText
    from einc.frontend.parser import parse as parse_text

    return parse_text(SourceText(text, filename))


def _span(text: str, node: ast.Statement | ast.InputDecl) -> str:
    return text[node.span.start : node.span.end]


def assemble(inputs: Sequence[str], outputs: Sequence[str], statements: Sequence[str]) -> str:
    lines = list(inputs)
    if outputs:
        lines.append(f"output {', '.join(outputs)}")
    if lines:
        lines.append("")
    return "\n".join([*lines, *statements]) + "\n"


def _reads(statement: str, tensor: str) -> bool:
    return re.search(rf"(?<![\w.]){re.escape(tensor)}\s*\[", statement) is not None


def statement_count(text: str, filename: str) -> int:
    return len(parse(text, filename).statements)


def statement_names(text: str, filename: str) -> list[str]:
    """Each statement's tensor, in order."""
    return [s.output for s in parse(text, filename).statements]


def cut_statements(text: str, filename: str, keep: Sequence[int]) -> str | None:
    """The program with only the statements `keep` (indices); a dropped statement's tensor
    that a kept one reads is declared as an input (its shape and dtype); None when nothing
    is left or the program does not check."""
    from einc.frontend import parse_program

    if not keep:
        return None
    module = parse(text, filename)
    try:
        program = parse_program(text, filename)
    except Exception:  # noqa: BLE001 - only a program that checks is cut
        return None
    results = {s.output.name: s.output for s in program.statements}
    kept = [_span(text, module.statements[i]) for i in sorted(set(keep))]
    dropped = {module.statements[i].output for i in range(len(module.statements)) if i not in set(keep)}
    defined = {module.statements[i].output for i in keep}
    inputs = [_span(text, d) for d in module.inputs]
    for name in sorted(dropped - defined):
        info = results.get(name)
        if info is not None and any(_reads(s, name) for s in kept):
            dtype = "int8" if info.dtype == "bool" else info.dtype
            inputs.append(f"input {name}: {dtype}[{', '.join(map(str, info.shape))}]")
    outputs = [n for d in module.outputs for n, _ in d.names if n in defined]
    return assemble(inputs, outputs, kept)


def output_names(text: str, filename: str) -> list[str]:
    return [n for d in parse(text, filename).outputs for n, _ in d.names]


def drop_outputs(text: str, filename: str, keep: Sequence[str]) -> str:
    module = parse(text, filename)
    inputs = [_span(text, d) for d in module.inputs]
    return assemble(inputs, [n for n in output_names(text, filename) if n in keep],
                    [_span(text, s) for s in module.statements])  # fmt: skip


def drop_unused_inputs(text: str, filename: str) -> str:
    module = parse(text, filename)
    statements = [_span(text, s) for s in module.statements]
    inputs = [_span(text, d) for d in module.inputs if any(_reads(s, d.name) for s in statements)]
    return assemble(inputs, output_names(text, filename), statements)


def _nodes(expr: ast.Expr) -> Iterator[ast.Expr]:
    """`expr` and its subexpressions, outermost first."""
    yield expr
    for child in ast.children(expr):
        yield from _nodes(child)


_LEAVES = (ast.Number, ast.String, ast.Name)


def expression_edits(text: str, filename: str) -> Iterator[str]:
    """Programs with one subexpression of a statement replaced by one of its operands (a
    call, a cast or a condition dropped, one side of an operator kept) or by a constant;
    outermost subexpressions first, statements from the last. An axis that loses the
    access that gave it its range gets a `where` range of the size it had."""
    module = parse(text, filename)
    sizes = _axis_sizes(text, filename)
    for index, edited in _expression_edits(text, module):
        yield ranged(edited, filename, index, sizes)


def _axis_sizes(text: str, filename: str) -> list[dict[str, int]]:
    from einc.frontend import parse_program

    try:
        return [dict(s.axes) for s in parse_program(text, filename).statements]
    except Exception:  # noqa: BLE001 - a program that does not check: no ranges to give
        return []


def ranged(text: str, filename: str, index: int, sizes: Sequence[dict[str, int]]) -> str:
    """`text` with statement `index`'s `where` ranges: each axis it still uses that no plain
    subscript (`t[..., A, ...]`) gives a range to, with its size in `sizes`; the ranges it
    had for axes it still uses kept."""
    if index >= len(sizes):
        return text
    try:
        module = parse(text, filename)
    except Exception:  # noqa: BLE001 - the checker will say what is wrong
        return text
    if index >= len(module.statements):
        return text
    statement = module.statements[index]
    if statement.is_scatter:
        return text
    expr = text[slice(*balanced(text, statement.expr.span.start, statement.expr.span.end))]
    indices = [text[i.span.start : i.span.end] for i in statement.indices]
    plain = {i.name for a in _nodes(statement.expr) if isinstance(a, ast.Access) for i in a.indices if isinstance(i, ast.Name)}
    named = {n.name for n in _nodes(statement.expr) if isinstance(n, ast.Name)} | set(indices)
    old = {w.axis: text[w.extent.span.start : w.extent.span.end] for w in statement.where}
    where = [(axis, extent) for axis, extent in old.items() if axis in named]
    for axis, size in sizes[index].items():
        if axis in named and axis not in plain and axis not in old:
            where.append((axis, str(size)))
    rebuilt = _statement_text(statement.output, indices, statement.op, expr, where)
    return text[: statement.span.start] + rebuilt + text[statement.span.end :]


def _expression_edits(text: str, module: ast.Module) -> Iterator[tuple[int, str]]:
    for number, statement in reversed(list(enumerate(module.statements))):
        constant = "1" if statement.op.startswith(("&", "|")) else "1.0"
        for node in _nodes(statement.expr):
            if isinstance(node, _LEAVES) or isinstance(node, ast.Const | ast.DtypeOf | ast.AxisVal):
                continue
            start, end = balanced(text, node.span.start, node.span.end)
            options: list[str] = []
            if not isinstance(node, ast.Access):
                for child in ast.children(node):
                    if isinstance(child, ast.String):
                        continue
                    piece = text[slice(*balanced(text, child.span.start, child.span.end))].strip()
                    simple = isinstance(child, ast.Access | ast.Number | ast.Name) or _wrapped(piece)
                    enclosed = text[:start].rstrip().endswith("(") and text[end:].lstrip().startswith(")")
                    if simple and enclosed:  # `(a + b).call(f)` -> `a.call(f)`: the grouping goes too
                        opened = len(text[:start].rstrip()) - 1
                        closed = end + (len(text[end:]) - len(text[end:].lstrip())) + 1
                        options.append("\0" + text[:opened] + piece + text[closed:])
                        continue
                    options.append(piece if simple or enclosed else f"({piece})")
            if isinstance(node, ast.When) and node.otherwise is not None:  # `.when([c])`: no else value
                other = balanced(text, node.otherwise.span.start, node.otherwise.span.end)
                cut = text[: other[0]].rstrip()
                if cut.endswith(","):
                    options.append("\0" + cut[:-1] + text[other[1] :])
            if isinstance(node, ast.When) and len(node.conditions) > 1:
                for drop in node.conditions:
                    rest = [text[c.span.start : c.span.end] for c in node.conditions if c is not drop]
                    options.append(_replace_conditions(text, node, rest))
            options.append("0" if _in_index(statement, node) else constant)
            for option in options:
                if option.startswith("\0"):
                    yield number, option[1:]
                else:
                    yield number, text[:start] + option + text[end:]


def _in_index(statement: ast.Statement, node: ast.Expr) -> bool:
    """Whether `node` is (inside) a subscript of an access of the statement's expression."""
    for access in _nodes(statement.expr):
        if isinstance(access, ast.Access) and any(node is n for index in access.indices for n in _nodes(index)):
            return True
    return False


def _wrapped(piece: str) -> bool:
    """`(...)`: one pair of parentheses around all of it."""
    if not (piece.startswith("(") and piece.endswith(")")):
        return False
    depth = 0
    for i, ch in enumerate(piece):
        depth += (ch == "(") - (ch == ")")
        if depth == 0 and i < len(piece) - 1:
            return False
    return True


def balanced(text: str, start: int, end: int) -> tuple[int, int]:
    """`start:end` widened to the parentheses it opens or closes without the other (a call
    on a parenthesized operand starts inside its `(`)."""
    depth = 0
    for ch in text[start:end]:
        depth += (ch == "(") - (ch == ")")
    while depth < 0 and start > 0:
        start -= 1
        depth += (text[start] == "(") - (text[start] == ")")
    while depth > 0 and end < len(text):
        depth += (text[end] == "(") - (text[end] == ")")
        end += 1
    return start, end


def _replace_conditions(text: str, node: ast.When, conditions: list[str]) -> str:
    """The program with `node`'s condition list replaced (marked with a leading NUL: a whole text)."""
    first, last = node.conditions[0].span, node.conditions[-1].span
    return "\0" + text[: first.start] + ", ".join(conditions) + text[last.end :]


def dimension_values(text: str, filename: str) -> list[int]:
    """The distinct sizes of the program's declared dimensions and `where` extents, largest first."""
    module = parse(text, filename)
    values = {value for decl in module.inputs for d in decl.dims if (value := _int(d)) is not None}
    values |= {value for s in module.statements for w in s.where if (value := _int(w.extent)) is not None}
    return sorted(values, reverse=True)


def _int(node: ast.Expr) -> int | None:
    """An integer literal's value, else None."""
    if isinstance(node, ast.Number) and not node.is_float and isinstance(node.value, int):
        return node.value
    return None


def _literals(expr: ast.Expr) -> Iterator[ast.Number]:
    for node in _nodes(expr):
        if isinstance(node, ast.Number) and _int(node) is not None:
            yield node


def resize(text: str, filename: str, old: int, new: int) -> str:
    """Every declared dimension, `where` extent and integer literal of a statement equal to
    `old` made `new` (a literal equal to a dimension is most likely tied to it)."""
    module = parse(text, filename)
    targets = [d for decl in module.inputs for d in decl.dims if isinstance(d, ast.Number) and _int(d) is not None]
    for statement in module.statements:
        for expr in (*statement.indices, statement.expr, *(w.extent for w in statement.where)):
            targets.extend(_literals(expr))
    edits = sorted({(n.span.start, n.span.end) for n in targets if n.value == old}, reverse=True)
    for start, end in edits:
        text = text[:start] + str(new) + text[end:]
    return text


def smaller_sizes(value: int) -> list[int]:
    """The sizes to try for a dimension of `value`, smallest first."""
    return sorted({v for v in (1, 2, 4, value // 2) if 0 < v < value})


def _statement_text(name: str, indices: Sequence[str], op: str, expr: str, where: Sequence[tuple[str, str]]) -> str:
    ranges = f" where {', '.join(f'{a} in {n}' for a, n in where)}" if where else ""
    return f"{name}[{', '.join(indices)}] {op} {expr}{ranges}"


def axis_edits(text: str, filename: str) -> Iterator[str]:
    """Programs with one output axis of a statement dropped (the tensor one rank lower; the
    axis, still read, becomes a reduction axis) and with `where` ranges of axes no longer
    written dropped; statements from the last."""
    module = parse(text, filename)
    sizes = _axis_sizes(text, filename)
    for edited in _axis_edits(text, module):
        yield next((ranged(edited, filename, i, sizes) for i in range(len(module.statements))
                    if edited[module.statements[i].span.start:] != text[module.statements[i].span.start:]), edited)  # fmt: skip


def _axis_edits(text: str, module: ast.Module) -> Iterator[str]:
    for statement in reversed(module.statements):
        if statement.is_scatter:
            continue
        indices = [text[i.span.start : i.span.end] for i in statement.indices]
        expr = text[slice(*balanced(text, statement.expr.span.start, statement.expr.span.end))]
        where = [(w.axis, text[w.extent.span.start : w.extent.span.end]) for w in statement.where]
        start, end = statement.span.start, statement.span.end
        for k, index in enumerate(indices):
            if not isinstance(statement.indices[k], ast.Name):
                continue
            kept = indices[:k] + indices[k + 1 :]
            used = re.search(rf"(?<![\w.]){re.escape(index)}(?![\w])", expr) is not None
            ranges = where if used else [(a, n) for a, n in where if a != index]
            yield text[:start] + _statement_text(statement.output, kept, statement.op, expr, ranges) + text[end:]
        for axis, _ in where:
            if not re.search(rf"(?<![\w.]){re.escape(axis)}(?![\w])", expr) and axis not in indices:
                ranges = [(a, n) for a, n in where if a != axis]
                yield text[:start] + _statement_text(statement.output, indices, statement.op, expr, ranges) + text[end:]
