"""A recursive-descent parser for Antares IR statements and `.ein` declarations.

Operator precedence follows Python, on which Antares evaluates its expressions, from loosest:

    comparisons (== != < <= > >=; not chained)
    |      &      << >>      + -      * / // %      unary - ~      postfix .method(...)

so `a < b & c < d` is a chained comparison in Python; einc reports it instead of guessing, and
`.when([a < b, c < d], ...)` or `(a < b) & (c < d)` say what is meant.
"""

from __future__ import annotations

from typing import NoReturn

from einc.frontend import ast
from einc.frontend.ast import Span
from einc.frontend.diagnostics import SourceText
from einc.frontend.lexer import Kind, Lexer, Token

# Bounds that keep every recursive walk of the tree (parser, sema, IR generation, xDSL's
# printer and verifier) well inside Python's recursion limit.
MAX_NESTING = 48
MAX_HEIGHT = 192

STATEMENT_OPS = ("=", "+=!", "+=", ">=!", "<=!", "*=!", "&=!", "|=!")
SCATTER_BASES = ("=", "+=")
"""`=.` and `+=.` (a scatter) are these operators directly followed by `.`."""
COMPARISONS = ("==", "!=", "<", "<=", ">", ">=")
# Binary operators below comparisons, loosest first.
BINARY_LEVELS: tuple[tuple[str, ...], ...] = (
    ("|",),
    ("&",),
    ("<<", ">>"),
    ("+", "-"),
    ("*", "/", "//", "%"),
)
METHODS = ("cast", "call", "when", "dtype", "val")


class Parser:
    def __init__(self, source: SourceText):
        self.source = source
        self.lexer = Lexer(source)
        self.pos = 0
        self.nesting = 0
        self.heights: dict[int, int] = {}

    # ---- token helpers -----------------------------------------------------------------------
    @property
    def tok(self) -> Token:
        return self.lexer.token(self.pos)

    def peek(self, ahead: int = 1) -> Token:
        return self.lexer.token(self.pos + ahead)

    def advance(self) -> Token:
        tok = self.lexer.token(self.pos)
        if tok.kind != Kind.EOF:
            self.pos += 1
        return tok

    def is_op(self, *texts: str) -> bool:
        tok = self.lexer.token(self.pos)
        return tok.kind == Kind.OP and tok.text in texts

    def is_ident(self, text: str | None = None) -> bool:
        tok = self.lexer.token(self.pos)
        return tok.kind == Kind.IDENT and (text is None or tok.text == text)

    def error(self, message: str, tok: Token | None = None) -> NoReturn:
        tok = tok or self.tok
        self.source.parse_error(message, tok.span)

    def expect_op(self, text: str, context: str) -> Token:
        if not self.is_op(text):
            self.error(f"expected '{text}' {context}, found {self.tok.describe()}")
        return self.advance()

    def expect_close(self, closer: str, opener: Token) -> Token:
        if not self.is_op(closer):
            self.error(
                f"expected '{closer}' to close the '{opener.text}' at "
                f"{opener.span.line}:{opener.span.col}, found {self.tok.describe()}"
            )
        return self.advance()

    def expect_ident(self, what: str) -> Token:
        if not self.is_ident():
            self.error(f"expected {what}, found {self.tok.describe()}")
        return self.advance()

    # ---- depth guards ------------------------------------------------------------------------
    def enter(self, opener: Token) -> None:
        """Enters a nested construct opened by `opener`, within the nesting bound."""
        self.nesting += 1
        if self.nesting > MAX_NESTING:
            self.error(f"expression nested too deeply (more than {MAX_NESTING} levels)", opener)

    def leave(self) -> None:
        self.nesting -= 1

    def node(self, node: ast.Expr) -> ast.Expr:
        """Records the height of a new node and rejects trees too tall to walk recursively."""
        height = 1 + max((self.heights[id(c)] for c in ast.children(node)), default=0)
        if height > MAX_HEIGHT:
            self.source.parse_error(
                f"expression too large: more than {MAX_HEIGHT} levels of operators", node.span
            )
        self.heights[id(node)] = height
        return node

    # ---- program -----------------------------------------------------------------------------
    def parse_module(self) -> ast.Module:
        inputs: list[ast.InputDecl] = []
        outputs: list[ast.OutputDecl] = []
        statements: list[ast.Statement] = []
        while True:
            while self.tok.kind == Kind.NEWLINE or self.is_op(";"):
                self.advance()
            if self.tok.kind == Kind.EOF:
                break
            if self.at_declaration("input"):
                inputs.append(self.parse_input_decl())
            elif self.at_declaration("output"):
                outputs.append(self.parse_output_decl())
            else:
                statements.append(self.parse_statement())
            if not (self.tok.kind in (Kind.NEWLINE, Kind.EOF) or self.is_op(";")):
                self.error(
                    f"expected an operator, ';' or the end of the line, "
                    f"found {self.tok.describe()}"
                )
        return ast.Module(tuple(inputs), tuple(outputs), tuple(statements))

    def at_declaration(self, keyword: str) -> bool:
        """`input`/`output` are keywords only first on a line and followed by a name."""
        return (
            self.is_ident(keyword) and self.tok.first_on_line and self.peek().kind == Kind.IDENT
        )

    def parse_input_decl(self) -> ast.InputDecl:
        start = self.advance()
        name = self.expect_ident("an input tensor name")
        self.expect_op(":", f"after the input name '{name.text}'")
        if self.tok.kind not in (Kind.IDENT, Kind.STRING):
            self.error(f"expected a dtype such as float32, found {self.tok.describe()}")
        dtype = self.advance()
        opener = self.expect_op("[", f"after the dtype of '{name.text}' (use [] for a scalar)")
        dims = self.parse_list("]", opener)
        end = self.advance()
        return ast.InputDecl(
            name.text, name.span, str(dtype.value), dtype.span, dims, start.span.to(end.span)
        )

    def parse_output_decl(self) -> ast.OutputDecl:
        start = self.advance()
        names = [self.expect_ident("an output tensor name")]
        while self.is_op(","):
            self.advance()
            names.append(self.expect_ident("an output tensor name"))
        return ast.OutputDecl(
            tuple((n.text, n.span) for n in names), start.span.to(names[-1].span)
        )

    def parse_statement(self) -> ast.Statement:
        name = self.expect_ident("a statement such as 'output0[N] = input0[N]'")
        opener = self.expect_op("[", f"after the output tensor name '{name.text}'")
        indices = self.parse_list("]", opener)
        self.advance()
        op = self.tok
        dot = self.peek()
        if op.text in ("<=", ">=") and dot.text == "." and dot.span.start == op.span.end:
            self.error(
                f"'{op.text}.' (Antares' scatter-{'min' if op.text == '<=' else 'max'}) is not "
                "supported: Antares generates no code for it; einc scatters with '=.' and '+=.'"
            )
        if not (op.kind == Kind.OP and op.text in STATEMENT_OPS):
            hint = {
                "*=": " (a product reduction is written '*=!')",
                "&=": " (an and-reduction is written '&=!')",
                "|=": " (an or-reduction is written '|=!')",
                ">=": " ('>=' compares; a max-reduction is written '>=!')",
                "<=": " ('<=' compares; a min-reduction is written '<=!')",
                "==": " ('==' compares; an assignment is written '=')",
            }.get(op.text, "")
            self.error(
                f"expected '=' or a reduction operator such as '+=!' after "
                f"'{name.text}[...]', found {op.describe()}{hint}"
            )
        self.advance()
        op_text, op_span = op.text, op.span
        dot = self.tok
        if op_text in SCATTER_BASES and self.is_op(".") and dot.span.start == op.span.end:
            # Antares' scatter `data[indices[B, 0], M] =. updates[B, M]` (`+=.` adds)
            self.advance()
            op_text, op_span = op_text + ".", op.span.to(dot.span)
        expr = self.parse_expr()
        where: list[ast.WhereRange] = []
        if self.is_ident("where"):
            self.advance()
            where.append(self.parse_where_range())
            while self.is_op(","):
                self.advance()
                where.append(self.parse_where_range())
        last = self.lexer.token(self.pos - 1)
        return ast.Statement(
            name.text, name.span, indices, op_text, op_span, expr, tuple(where),
            name.span.to(last.span),
        )  # fmt: skip

    def parse_where_range(self) -> ast.WhereRange:
        axis = self.expect_ident("an axis name in the where clause")
        if not self.is_ident("in"):
            self.error(f"expected 'in' after the axis '{axis.text}', found {self.tok.describe()}")
        self.advance()
        return ast.WhereRange(axis.text, axis.span, self.parse_expr())

    def parse_list(self, closer: str, opener: Token) -> tuple[ast.Expr, ...]:
        """Comma-separated expressions up to `closer` (left unconsumed); a trailing comma is
        allowed."""
        items: list[ast.Expr] = []
        self.enter(opener)
        while not self.is_op(closer):
            items.append(self.parse_expr())
            if self.is_op(","):
                self.advance()
            elif not self.is_op(closer):
                self.expect_close(closer, opener)
        self.leave()
        return tuple(items)

    # ---- expressions -------------------------------------------------------------------------
    def parse_expr(self) -> ast.Expr:
        lhs = self.parse_binary(0)
        if not self.is_op(*COMPARISONS):
            return lhs
        op = self.advance()
        rhs = self.parse_binary(0)
        if self.is_op(*COMPARISONS):
            self.error(
                "chained comparison: write '(a < b) & (b < c)' or .when([a < b, b < c], ...)"
            )
        return self.node(ast.Binary(op.text, lhs, rhs, op.span, lhs.span.to(rhs.span)))

    def parse_binary(self, level: int) -> ast.Expr:
        if level == len(BINARY_LEVELS):
            return self.parse_unary()
        lhs = self.parse_binary(level + 1)
        while self.is_op(*BINARY_LEVELS[level]):
            op = self.advance()
            rhs = self.parse_binary(level + 1)
            lhs = self.node(ast.Binary(op.text, lhs, rhs, op.span, lhs.span.to(rhs.span)))
        return lhs

    def parse_unary(self) -> ast.Expr:
        if not self.is_op("-", "~"):
            return self.parse_postfix()
        op = self.advance()
        self.enter(op)
        operand = self.parse_unary()
        self.leave()
        return self.node(ast.Unary(op.text, operand, op.span.to(operand.span)))

    def parse_postfix(self) -> ast.Expr:
        expr = self.parse_primary()
        while self.is_op("."):
            self.advance()
            method = self.expect_ident("a method name after '.'")
            if method.text not in METHODS:
                self.error(
                    f"unknown method '.{method.text}': expected one of "
                    + ", ".join(f".{m}" for m in METHODS),
                    method,
                )
            opener = self.expect_op("(", f"after '.{method.text}'")
            self.enter(opener)
            expr = self.node(getattr(self, f"parse_{method.text}")(expr, opener))
            self.leave()
        return expr

    def close_method(self, operand: ast.Expr, opener: Token) -> Span:
        """Consumes the `)` of a method call; the span of the whole call."""
        return operand.span.to(self.expect_close(")", opener).span)

    def parse_cast(self, operand: ast.Expr, opener: Token) -> ast.Expr:
        if self.is_op(")"):
            self.error("'.cast' needs a dtype, such as .cast(`float32`)")
        dtype = self.parse_expr()
        return ast.Cast(operand, dtype, self.close_method(operand, opener))

    def parse_call(self, operand: ast.Expr, opener: Token) -> ast.Expr:
        if self.tok.kind != Kind.STRING:
            self.error(f"expected a function name such as `exp`, found {self.tok.describe()}")
        fn = self.advance()
        args: tuple[ast.Expr, ...] | None = None
        dtype: ast.Expr | None = None
        while self.is_op(","):
            self.advance()
            if self.at_keyword("dtype", "output_dtype"):
                # Antares' call(name, others=None, output_dtype=None), as its IR printer
                # writes it: .call(`exp`, dtype=`float32`)
                self.advance()
                self.advance()
                dtype = self.parse_expr()
            elif args is not None or dtype is not None:
                self.error(f"several extra arguments of `{fn.value}` go in a list: "
                           f".call(`{fn.value}`, [y, z, ...])")  # fmt: skip
            elif self.is_op("["):
                list_open = self.advance()
                args = self.parse_list("]", list_open)
                self.advance()
            elif not self.is_op(")"):
                # Antares wraps a single extra argument in a list: .call(`max`, 0.0)
                args = (self.parse_expr(),)
        span = self.close_method(operand, opener)
        return ast.Call(operand, str(fn.value), fn.span, args or (), span, dtype)

    def at_keyword(self, *names: str) -> bool:
        """At `name=` (a keyword argument), for one of `names`."""
        ahead = self.peek()
        return (
            self.tok.kind == Kind.IDENT and self.tok.text in names
            and ahead.kind == Kind.OP and ahead.text == "="
        )  # fmt: skip

    def parse_when(self, operand: ast.Expr, opener: Token) -> ast.Expr:
        if self.is_op("["):
            list_open = self.advance()
            conditions = self.parse_list("]", list_open)
            self.advance()
        else:
            if self.is_op(")"):
                self.error("'.when' needs a condition")
            conditions = (self.parse_expr(),)
        otherwise: ast.Expr | None = None
        merge_any = False
        while self.is_op(","):
            self.advance()
            if self.is_ident("merge_op") and self.peek().kind == Kind.OP and self.peek().text == "=":
                self.advance()
                self.advance()
                if self.tok.kind != Kind.STRING or self.tok.value not in ("all", "any"):
                    self.error(f"merge_op must be `all` or `any`, found {self.tok.describe()}")
                merge_any = self.advance().value == "any"
            elif otherwise is None:
                otherwise = self.parse_expr()
            else:
                self.error("'.when' takes conditions, one else value and merge_op=")
        span = self.close_method(operand, opener)
        return ast.When(operand, conditions, otherwise, merge_any, span)

    def parse_dtype(self, operand: ast.Expr, opener: Token) -> ast.Expr:
        return ast.DtypeOf(operand, self.close_method(operand, opener))

    def parse_val(self, operand: ast.Expr, opener: Token) -> ast.Expr:
        return ast.AxisVal(operand, self.close_method(operand, opener))

    def parse_primary(self) -> ast.Expr:
        tok = self.tok
        if tok.kind in (Kind.INT, Kind.FLOAT):
            self.advance()
            assert isinstance(tok.value, (int, float))
            return self.node(ast.Number(tok.value, tok.kind == Kind.FLOAT, tok.span))
        if tok.kind == Kind.STRING:
            self.advance()
            return self.node(ast.String(str(tok.value), tok.span))
        if self.is_op("("):
            self.advance()
            self.enter(tok)
            inner = self.parse_expr()
            self.leave()
            self.expect_close(")", tok)
            return inner
        if tok.kind != Kind.IDENT:
            self.error(f"expected an expression, found {tok.describe()}")
        self.advance()
        if self.is_op("["):
            opener = self.advance()
            indices = self.parse_list("]", opener)
            close = self.advance()
            return self.node(ast.Access(tok.text, tok.span, indices, tok.span.to(close.span)))
        if tok.text == "const" and self.is_op("("):
            return self.parse_const(tok)
        return self.node(ast.Name(tok.text, tok.span))

    def parse_const(self, keyword: Token) -> ast.Expr:
        opener = self.advance()
        minus = self.advance() if self.is_op("-") else None
        if self.tok.kind not in (Kind.INT, Kind.FLOAT):
            self.error(f"const() takes a number, found {self.tok.describe()}")
        num = self.advance()
        assert isinstance(num.value, (int, float))
        span = num.span if minus is None else minus.span.to(num.span)
        value = ast.Number(-num.value if minus else num.value, num.kind == Kind.FLOAT, span)
        dtype: ast.Expr | None = None
        if self.is_op(","):
            self.enter(self.advance())
            # Antares' const(value, dtype=None): the dtype also by keyword
            if self.at_keyword("dtype"):
                self.advance()
                self.advance()
            dtype = self.parse_expr()
            self.leave()
        close = self.expect_close(")", opener)
        return self.node(ast.Const(value, dtype, keyword.span.to(close.span)))


def parse(source: SourceText) -> ast.Module:
    """Parses a whole program text (declarations and statements)."""
    return Parser(source).parse_module()
