"""The printer walk of C-like targets: `Writer`, one emission of a lowered module with a
target's tables (`einc.targets.clike.CLikeTarget`). It names values (C-safe, unique among the
visible names), decides which values are inlined into their users, prints functions,
statements and expressions (ops through `einc.targets.op_printers` or the target's own
printers, else the target's spellings), literals, affine index expressions, vector types and
the helper functions used. The printing rules are in `einc.targets.clike`'s docstring."""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from typing import TYPE_CHECKING, cast

import numpy as np
from xdsl.dialects import affine, arith, func, memref
from xdsl.dialects.builtin import (
    AnyFloat,
    BFloat16Type,
    FloatAttr,
    IndexType,
    IntegerAttr,
    IntegerType,
    MemRefType,
    ModuleOp,
    StringAttr,
    VectorType,
    f32,
    f64,
    i1,
    i32,
)
from xdsl.ir import Attribute, Block, BlockArgument, Operation, SSAValue
from xdsl.ir.affine import (
    AffineBinaryOpExpr,
    AffineBinaryOpKind,
    AffineConstantExpr,
    AffineDimExpr,
    AffineExpr,
    AffineMap,
    AffineSymExpr,
)

from einc.dialects import egpu
from einc.errors import InternalCompilerError, TargetError
from einc.ir.attrs import ALIGN_ATTR, INDEX_BITS_ATTR, STREAM_ATTR
from einc.ir.locations import tag
from einc.transforms.affine_index import dims_to_operands, shared_dims, simplify_flat
from einc.transforms.ranges import Range, expr_range, value_range
from einc.targets.c_lexicon import C_RESERVED, c_identifier, called_names, int_literal
from einc.targets.op_printers import (
    EXPRESSIONS,
    INLINE_INTO_STATEMENTS,
    STATEMENTS,
    VECTOR_EXPRESSIONS,
    VECTOR_STATEMENTS,
)
from einc.targets.spelling import (
    ADD,
    ATOM,
    CAST,
    MUL,
    RELATIONAL,
    UNARY,
    Expr,
    Spelling,
    compare,
)

if TYPE_CHECKING:
    from einc.targets.clike import CLikeTarget


class Writer:
    """One emission: names, inlining decisions, helpers used, output lines."""

    def __init__(self, target: type[CLikeTarget]):
        self.t = target
        self.lines: list[str] = []
        self.depth = 0
        self.scopes: list[set[str]] = [set()]
        self.buffer_names: set[str] = set()
        """Names of the function's buffers: other values never take them."""
        self.names: dict[SSAValue, str] = {}
        self.helpers_used: dict[tuple[str, str], str] = {}
        self.outlined: list[str] = []
        self.outlined_count = 0
        self.header = ""
        self.barrier_loops: dict[Operation, frozenset[Operation]] = {}
        """Per function (the key): the loops that hold an `egpu.barrier`, found in one walk
        (`op_printers._barrier_loop_pragma`)."""
        self.index_bits = 64
        """The width of `index` in the function being printed: 32 in a kernel the
        `einc-index-width` pass marked (`egpu.index_bits`), else 64."""
        """The header line of the function being printed (`CLikeTarget.signature`)."""
        """Lines of the functions parallel loop bodies are printed into (`parallel_loop`),
        printed before the functions that call them."""
        functions = {m.group(1) for s in target.ops.values() if (m := CALLEE.match(s.fmt))}
        functions |= called_names(target)
        self.reserved = (
            C_RESERVED | functions | {f + "f" for f in functions} | target.reserved_words
        )

    # -- output -------------------------------------------------------------------------------
    def line(self, text: str) -> None:
        self.lines.append("  " * self.depth + text)

    def open(self, header: str) -> None:
        self.line(header + " {")
        self.depth += 1
        self.scopes.append(set())

    def close(self, trailer: str = "}") -> None:
        self.depth -= 1
        self.scopes.pop()
        self.line(trailer)

    # -- names ----------------------------------------------------------------------------------
    def declare(self, value: SSAValue, hint: str | None = None, buffer: bool = False) -> str:
        """A fresh C name for `value`, after its hint, unique among the visible names."""
        base = c_identifier(hint or value.name_hint or "v")
        name, k = base, 1
        while (
            name in self.reserved
            or name.startswith("einc_")
            or any(name in s for s in self.scopes)
            or (not buffer and name in self.buffer_names)
        ):
            name, k = f"{base}_{k}", k + 1
        self.scopes[-1].add(name)
        self.names[value] = name
        return name

    # -- types ----------------------------------------------------------------------------------
    def narrowed(self, t: Attribute) -> Attribute:
        """`t`, with `index` as i32 in a function whose indices are 32-bit."""
        return i32 if self.index_bits == 32 and isinstance(t, IndexType) else t

    def index_ctype(self) -> str:
        """The type of loop variables and index values in the function being printed."""
        return self.t.index_type if self.index_bits == 64 else self.ctype(i32)

    def ctype(self, t: Attribute) -> str:
        if isinstance(t, VectorType):
            return self.vector_ctype(t)
        t = self.narrowed(t)
        if t not in self.t.types:
            raise TargetError(f"{self.t.name} target: no type for {t}")
        return self.t.types[t]

    def suffix(self, t: Attribute) -> str:
        if isinstance(t, VectorType):
            return f"{self.suffix(t.get_element_type())}x{t.get_shape()[0]}"
        if isinstance(t, IndexType):
            return f"i{self.index_bits}"
        if isinstance(t, IntegerType):
            return f"i{t.width.data}"
        if isinstance(t, BFloat16Type):  # not float16's: their helpers differ
            return "bf16"
        return f"f{t.bitwidth}" if isinstance(t, AnyFloat) else "x"

    def use_helper(self, name: str, t: Attribute) -> None:
        key = (name, self.suffix(t))
        if key not in self.helpers_used:
            ct = self.ctype(t)
            args = f"{ct} a" if name in self.t.unary_helpers else f"{ct} a, {ct} b"
            body = self.t.helpers[name].format(t=ct)
            self.helpers_used[key] = (
                f"{self.t.helper_prefix} {ct} einc_{name}_{key[1]}({args}) {{ {body} }}"
            )

    # -- module and functions -------------------------------------------------------------------
    def module(self, module: ModuleOp) -> str:
        for op in module.ops:
            self.t.top_level(self, op)
        head = [f"#include <{h}>" for h in self.t.includes] + list(self.t.preamble) + self.t.declarations(module)
        helpers = list(self.helpers_used.values())
        parts = ["\n".join(head), "\n".join(helpers), "\n".join(self.outlined), "\n".join(self.lines)]
        return "\n\n".join(p for p in parts if p) + "\n"

    def function(self, f: func.FuncOp) -> None:
        if f.function_type.outputs:
            raise InternalCompilerError(f"{self.t.name} target: @{f.sym_name.data} returns values")
        attrs = f.arg_attrs.data if f.arg_attrs is not None else ()
        self.buffer_names = {
            c_identifier(name.data)
            for arg_attrs in attrs
            if isinstance(name := arg_attrs.data.get("ein.name"), StringAttr)
        } | {
            c_identifier(name.data)
            for op in f.walk()
            if isinstance(op, memref.AllocOp | memref.AllocaOp)
            and isinstance(name := op.attributes.get("ein.name"), StringAttr)
        }
        bits = f.attributes.get(INDEX_BITS_ATTR)
        self.index_bits = bits.value.data if isinstance(bits, IntegerAttr) else 64
        if self.lines:
            self.line("")  # a blank line between functions
        self.scopes.append(set())  # parameter names are the function's own
        params: list[str] = []
        aligned: dict[int, list[str]] = {}
        for k, arg in enumerate(f.body.block.args):
            if not isinstance(arg.type, MemRefType):
                raise InternalCompilerError(f"{self.t.name} target: argument {k} is not a memref")
            hint = attrs[k].data.get("ein.name") if k < len(attrs) else None
            name = self.names.get(arg)  # named already where buffers are globals (HLSL)
            if name is None:
                name = self.declare(arg, getattr(hint, "data", None), buffer=True)
            element = self.ctype(arg.type.get_element_type())
            const = "" if _is_written(arg) else self.t.readonly_prefix
            params.append(f"{self.t.buffer_prefix}{const}{element}*{self.t.buffer_suffix} {name}")
            align = attrs[k].data.get(ALIGN_ATTR) if k < len(attrs) else None
            if isinstance(align, IntegerAttr):
                aligned.setdefault(align.value.data, []).append(name)
        for size, names in sorted(aligned.items()):  # the launch contract (einc-vectorize-global)
            self.line(f"// {', '.join(names)}: assumed {size}-byte aligned (vector accesses); einc's launchers check it")
        self.header = self.t.signature(self, f, params)
        self.open(self.header)
        for pragma in self.t.body_pragmas(f):
            self.line(pragma)
        self.block(f.body.block)
        self.stream_fence(f)
        self.close()
        self.scopes.pop()
        self.index_bits = 64

    def stream_fence(self, root: Operation) -> None:
        """The target's fence after non-temporal stores (`einc.stream`), where `root` holds any."""
        statement, helper = self.t.stream_fence
        if statement and any(STREAM_ATTR in op.attributes for op in root.walk()):
            if helper:
                self.helpers_used.setdefault(("stream_fence", ""), helper)
            self.line(statement)

    def block(self, block: Block) -> None:
        for op in block.ops:
            self.statement(op)

    # -- statements -----------------------------------------------------------------------------
    def statement(self, op: Operation) -> None:
        try:
            self._statement(op)
        except Exception as exc:
            tag(exc, op)  # an error or a bug here names the statement the op comes from
            raise

    def _statement(self, op: Operation) -> None:
        if op.results and all(self.inlined(r) for r in op.results):
            return
        handler = (
            STATEMENTS.get(type(op))
            or VECTOR_STATEMENTS.get(type(op))
            or self.t.statement_printers.get(type(op))
        )
        if handler is not None:
            handler(self, op)
            return
        if len(op.results) == 1:
            value = op.results[0]
            expr = self.expression(op)
            name = self.declare(value)
            self.line(f"{self.ctype(value.type)} {name} = {expr.text};")
            return
        self.unsupported(op)

    def unsupported(self, op: Operation) -> None:
        raise InternalCompilerError(
            f"the {self.t.name} target cannot print '{op.name}' "
            "(it must be lowered or legalized before printing)"
        )

    def for_loop(self, iv: SSAValue, lower: Expr, upper: Expr, step: int, body: Block) -> None:
        self.scopes.append(set())  # the loop variable is local to the loop
        name = self.declare(iv)
        increment = f"{name}++" if step == 1 else f"{name} += {step}"
        self.line(
            f"for ({self.index_ctype()} {name} = {lower.text}; "
            f"{name} < {upper.operand(RELATIONAL + 1)}; "
            f"{increment}) {{"
        )
        self.depth += 1
        self.block(body)
        self.close()

    def parallel_loop(self, loop: affine.ForOp, lower: Expr, upper: Expr, step: int) -> bool:
        """Print a loop marked parallel (its pragma printed already) as a loop calling a
        static inline function that holds its body, the buffers it uses passed as restrict
        pointers (`CLikeTarget.outline_parallel_loops`). OpenMP compilers move a parallel
        loop's body into a function of their own that reads the buffers through a shared
        struct, losing the restrict of the kernel's parameters: gcc then keeps no
        accumulator in a register across a reduction loop (a load and a store of the output
        per step: 3x slower per thread on a 1x1 convolution). Inlined into that function,
        this one keeps its parameters' restrict. False (nothing printed) for a loop with
        results or using a buffer that is neither a parameter nor an allocation."""
        free: dict[SSAValue, None] = {}
        for op in loop.body.walk():
            for v in op.operands:
                owner = v.owner.parent_op() if isinstance(v.owner, Block) else v.owner
                if owner is None or not loop.is_ancestor(owner):
                    free[v] = None
        if loop.results:
            return False
        f = loop.parent_op()
        while f is not None and not isinstance(f, func.FuncOp):
            f = f.parent_op()
        assert f is not None, loop
        for v in free:
            if isinstance(v.type, MemRefType) and (
                v not in self.names
                or not (isinstance(v, BlockArgument) or isinstance(v.owner, memref.AllocOp | memref.AllocaOp))
            ):
                return False
        iv = loop.body.block.args[0]
        self.scopes.append(set())  # the loop variable is local to the loop
        iv_name = self.declare(iv)
        params = [f"{self.index_ctype()} {iv_name}"]
        args = [iv_name]
        renamed: dict[SSAValue, str | None] = {}
        self.scopes.append({iv_name})  # the function's parameters
        for v in free:
            if isinstance(v.type, MemRefType):
                name = self.names[v]
                element = self.ctype(v.type.get_element_type())
                const = "" if _is_written(v) else self.t.readonly_prefix
                params.append(f"{self.t.buffer_prefix}{const}{element}*{self.t.buffer_suffix} {name}")
                self.scopes[-1].add(name)
            elif v in self.names:
                params.append(f"{self.ctype(v.type)} {self.names[v]}")
                self.scopes[-1].add(self.names[v])
            elif isinstance(v.owner, Operation) and not v.owner.operands:
                continue  # a constant, printed where used
            else:  # an inlined expression of values outside: computed once, passed
                text = self.value(v).text
                renamed[v] = self.names.get(v)
                params.append(f"{self.ctype(v.type)} {self.declare(v)}")
            args.append(self.names[v] if v in self.names else text)
        name = f"einc_parallel_{self.outlined_count}"
        self.outlined_count += 1
        lines, depth = self.lines, self.depth
        self.lines, self.depth = [], 0
        self.open(self.t.outlined_signature(self, f, name, params))
        self.block(loop.body.block)
        self.stream_fence(loop)
        self.close()
        self.outlined.extend([""] * bool(self.outlined) + self.lines)
        self.lines, self.depth = lines, depth
        self.scopes.pop()
        for v, old in renamed.items():
            if old is None:
                self.names.pop(v, None)
            else:
                self.names[v] = old
        increment = f"{iv_name}++" if step == 1 else f"{iv_name} += {step}"
        self.line(
            f"for ({self.index_ctype()} {iv_name} = {lower.text}; "
            f"{iv_name} < {upper.operand(RELATIONAL + 1)}; "
            f"{increment}) {{"
        )
        self.depth += 1
        self.line(f"{name}({', '.join(args)});")
        self.close()
        return True

    def carried(self, results: Sequence[SSAValue], inits: Sequence[SSAValue]) -> list[str]:
        """Declare the variables holding loop-carried values or scf.if results."""
        names = []
        for result, init in zip(results, inits) if inits else ((r, None) for r in results):
            name = self.declare(result)
            value = f" = {self.value(init).text}" if init is not None else ""
            self.line(f"{self.ctype(result.type)} {name}{value};")
            names.append(name)
        return names

    def assign_yield(self, targets: Sequence[SSAValue], values: Sequence[SSAValue]) -> None:
        for target, value in zip(targets, values):
            self.line(f"{self.names[target]} = {self.value(value).text};")

    # -- expressions ----------------------------------------------------------------------------
    def value(self, v: SSAValue) -> Expr:
        if v in self.names:
            return Expr(self.names[v])
        if isinstance(v, BlockArgument):
            raise InternalCompilerError(f"{self.t.name} target: unnamed block argument {v}")
        if self.inlined(v) and isinstance(v.owner, Operation):
            return self.expression(v.owner)
        raise InternalCompilerError(f"{self.t.name} target: value used before its definition: {v}")

    def expression(self, op: Operation) -> Expr:
        try:
            return self._expression(op)
        except Exception as exc:
            tag(exc, op)  # the innermost op: an inlined operand's own sub-expression
            raise

    def _expression(self, op: Operation) -> Expr:
        if isinstance(op, arith.ConstantOp):
            return self.constant(op)
        handler = (
            EXPRESSIONS.get(type(op))
            or VECTOR_EXPRESSIONS.get(type(op))
            or self.t.expression_printers.get(type(op))
        )
        if handler is not None:
            return handler(self, op)
        spelling = self.t.ops.get(type(op))
        if isinstance(op, arith.CmpiOp):
            spelling = compare(self.t.cmpi[op.predicate.value.data])
        elif isinstance(op, arith.CmpfOp):
            spelling = compare(self.t.cmpf[op.predicate.value.data])
        elif isinstance(op, arith.ExtUIOp | arith.UIToFPOp) and op.operands[0].type == i1:
            spelling = CAST  # a bool is already 0 or 1
        if spelling is None or len(op.results) != 1:
            self.unsupported(op)
            raise AssertionError
        return self.spell(op, spelling)

    def spell(self, op: Operation, spelling: Spelling) -> Expr:
        result_type = op.results[0].type
        if isinstance(result_type, VectorType):
            if type(op) not in self.t.vector_operators and type(op) not in self.t.vector_math:
                return self.lanewise(op, spelling)
            result_type = result_type.get_element_type()  # fields of the element type
            if spelling.helper is not None:
                raise InternalCompilerError(f"{op.name} on vectors calls a scalar helper")
        operand_type = op.operands[0].type if op.operands else result_type
        fields = {
            "t": self.ctype(result_type),
            "s": self.suffix(result_type),
            "ut": self.t.unsigned_types.get(self.narrowed(operand_type), "?"),
        }
        if "{f}" in spelling.fmt:
            float_type = result_type if isinstance(result_type, AnyFloat) else operand_type
            if float_type not in self.t.math_suffix:
                raise InternalCompilerError(
                    f"the {self.t.name} target has no {float_type} math "
                    f"for '{op.name}' (legalize it first, e.g. legalize-f16-for-c)"
                )
            fields["f"] = self.t.math_suffix[float_type]
        if spelling.helper is not None:
            self.use_helper(spelling.helper, result_type)
        operands = [
            self.value(o).operand(spelling.required(k)) for k, o in enumerate(op.operands)
        ]
        text = spelling.fmt.format(*operands, **fields)
        if spelling.may_overflow and result_type in self.t.promoted_types:
            # C computes narrow integers in int: wrap back to the type as arith does
            return Expr(f"({fields['t']})({text})", UNARY)
        return Expr(text, spelling.prec)

    def constant(self, op: arith.ConstantOp) -> Expr:
        value, t = op.value, op.result.type
        if isinstance(value, FloatAttr):
            text = self.float_literal(value.value.data, t)
        elif isinstance(value, IntegerAttr):
            text = int_literal(value.value.data, t)
            text = self.t.literal_names.get(text, text)
        else:
            self.unsupported(op)
            raise AssertionError
        # a negative literal is a negation: `-x` of it prints `-(-1.5)`, never `--1.5`
        return Expr(text, UNARY if text.startswith("-") else ATOM)

    def float_literal(self, value: float, t: Attribute) -> str:
        if t in self.t.literal_cast:
            return self.t.literal_cast[t] + self.float_literal(value, f32)
        if t not in self.t.math_suffix and t not in self.t.literal_suffix:
            raise TargetError(f"{self.t.name} target: no literal of type {t}")
        if math.isnan(value):
            return self.t.literal_names.get("NAN", "NAN")
        if math.isinf(value):
            name = self.t.literal_names.get("INFINITY", "INFINITY")
            return name if value > 0 else f"-{name}"
        text = repr(float(value)) if t == f64 else str(np.float32(value))
        suffixes = self.t.literal_suffix if t in self.t.literal_suffix else self.t.math_suffix
        return text + suffixes[t]

    # -- vectors --------------------------------------------------------------------------------
    def vector_fields(self, t: VectorType) -> dict[str, str]:
        element = t.get_element_type()
        n = t.get_shape()[0]
        scalar = self.ctype(element)
        fields = {"t": scalar, "s": self.suffix(element), "n": str(n), "P": self.t.helper_prefix}
        fields["T"] = self.t.vector_type.format(**fields)
        fields["lane_r"] = self.t.vector_lane.format(v="r", k="k")
        return fields

    def vector_ctype(self, t: VectorType) -> str:
        """The vector type's name; its typedef is printed once, before the helpers."""
        fields = self.vector_fields(t)
        if self.t.vector_typedef:
            size = self.t.sizeof(fields["t"]) if "{bytes}" in self.t.vector_typedef else 0
            text = self.t.vector_typedef.format(**fields, bytes=size * int(fields["n"]), align=size)
            if ("vtype", fields["T"]) not in self.helpers_used:
                self.helpers_used[("vtype", fields["T"])] = text
        return fields["T"]

    def vector_spelling(self, fmt: str, t: VectorType, *operands: str, **values: str) -> str:
        """`fmt` with the vector type's fields; the `vector_helpers` it calls are printed."""
        fields = self.vector_fields(t)
        self.vector_ctype(t)
        for name, body in self.t.vector_helpers.items():
            key = (name, f"{fields['s']}x{fields['n']}")
            if f"einc_{name}_" in fmt and key not in self.helpers_used:
                self.helpers_used[key] = body.format(**fields)
        return fmt.format(*operands, **fields, **values)

    def lanewise_helper(self, name: str, t: VectorType, params: Sequence[tuple[str, str]], result: str, body: str) -> str:
        """Print once `{result} einc_<name>_<s>x<n>(params) {{ body }}`; its name."""
        fields = self.vector_fields(t)
        self.vector_ctype(t)
        function = f"einc_{name}_{fields['s']}x{fields['n']}"
        key = (name, f"{fields['s']}x{fields['n']}")
        if key not in self.helpers_used:
            args = ", ".join(f"{pt} {pn}" for pt, pn in params)
            self.helpers_used[key] = f"{self.t.helper_prefix} {result} {function}({args}) {{ {body} }}"
        return function

    def lane(self, v: str, k: str) -> str:
        return self.t.vector_lane.format(v=v, k=k)

    def scalar_spelling(self, op_type: type[Operation], operands: Sequence[str], element: Attribute) -> str:
        """The scalar spelling of `op_type` on `element` operands (texts), its helpers printed."""
        spelling = self.t.ops.get(op_type)
        if spelling is None:
            raise InternalCompilerError(f"the {self.t.name} target has no spelling of {op_type.name}")
        fields = {"t": self.ctype(element), "s": self.suffix(element),
                  "ut": self.t.unsigned_types.get(self.narrowed(element), "?")}  # fmt: skip
        if "{f}" in spelling.fmt:
            if element not in self.t.math_suffix:
                raise InternalCompilerError(f"the {self.t.name} target has no {element} math")
            fields["f"] = self.t.math_suffix[element]
        if spelling.helper is not None:
            self.use_helper(spelling.helper, element)
        return spelling.fmt.format(*operands, **fields)

    def lanewise(self, op: Operation, spelling: Spelling) -> Expr:
        """An elementwise op on vectors through a helper applying its scalar spelling to each
        lane (`einc_vaddf_f32x4(a, b)`)."""
        t = op.results[0].type
        assert isinstance(t, VectorType)
        function = self.lanewise_function(type(op), t, len(op.operands))
        args = ", ".join(self.value(o).text for o in op.operands)
        return Expr(f"{function}({args})")

    def lanewise_function(self, op_type: type[Operation], t: VectorType, arity: int) -> str:
        """The name of the lane-wise helper of `op_type` on vectors `t` (`arity` operands),
        printed once: the target's own body (`lanewise_bodies`) or the scalar spelling's
        lane loop."""
        element = t.get_element_type()
        names = "abc"[:arity]
        lanes = [f"({self.lane(n, 'k')})" for n in names]
        scalar = self.scalar_spelling(op_type, lanes, element)
        T = self.ctype(t)
        body = (
            f"{T} r; for (int k = 0; k < {t.get_shape()[0]}; k++) "
            f"{self.lane('r', 'k')} = {scalar}; return r;"
        )
        name = "v" + op_type.name.split(".")[-1]
        params = [(T, n) for n in names]
        special = self.t.lanewise_bodies.get((name, self.suffix(element), t.get_shape()[0]))
        if special is not None:  # the target's faster spelling, the lane loop its fallback
            if "{lanes}" in special:  # the lane loop as a cold function of its own, printed first
                lanes_name = self.lanewise_helper(f"{name}_lanes", t, params, T, body)
                key = (f"{name}_lanes", f"{self.suffix(element)}x{t.get_shape()[0]}")
                self.helpers_used[key] = self.helpers_used[key].replace(
                    self.t.helper_prefix, "static __attribute__((noinline, cold))", 1
                )
                body = special.format(generic=body, T=T, lanes=lanes_name)
            else:
                body = special.format(generic=body, T=T)
        return self.lanewise_helper(name, t, params, T, body)

    # -- memory ---------------------------------------------------------------------------------
    def access(self, buffer: SSAValue, index: Expr) -> str:
        return f"{self.value(buffer).text}[{index.text}]"

    def flat_affine(self, buffer: SSAValue, m: AffineMap, operands: Sequence[SSAValue]) -> Expr:
        """The row-major flat index of `buffer[m(operands)]`."""
        assert isinstance(buffer.type, MemRefType)
        m = shared_dims(m, operands)
        strides = _strides(buffer.type.get_shape())
        flat: AffineExpr = AffineExpr.constant(0)
        for result, stride in zip(m.results, strides):
            flat = flat + result * stride  # folds the 0 + and * 1, keeps the index order
        # a coalesced loop's `x[p floordiv W, p mod W]` of a row of W is the flat `p`
        return self.affine_expr(simplify_flat(flat), operands)

    def flat_values(self, buffer: SSAValue, indices: Sequence[SSAValue]) -> Expr:
        assert isinstance(buffer.type, MemRefType)
        merged = self._merged_flat(buffer, indices)
        if merged is not None:
            return merged
        terms: list[Expr] = []
        for index, stride in zip(indices, _strides(buffer.type.get_shape())):
            expr = self.value(index)
            if stride != 1:
                expr = Expr(f"{expr.operand(MUL)} * {stride}", MUL)
            terms.append(expr)
        if not terms:
            return Expr("0")
        if len(terms) == 1:
            return terms[0]
        return Expr(" + ".join(t.operand(ADD + 1) for t in terms), ADD)

    def _merged_flat(self, buffer: SSAValue, indices: Sequence[SSAValue]) -> Expr | None:
        """The flat index of `buffer[indices]` where the indices are inlined `affine.apply`s
        whose floordiv/mod pairs the linearisation merges (a vector access of a coalesced
        loop, `x[p floordiv W, p mod W]`: `p`, printed as `flat_affine` would); None
        otherwise (the indices printed one by one)."""
        if not any(isinstance(v.owner, affine.ApplyOp) for v in indices):
            return None
        operands: list[SSAValue] = []
        results: list[AffineExpr] = []
        for v in indices:
            apply = v.owner
            if isinstance(apply, affine.ApplyOp) and self.inlined(v) and len(apply.map.data.results) == 1:
                m = dims_to_operands(apply.map.data)
                shift = [AffineExpr.dimension(len(operands) + k) for k in range(m.num_dims)]
                results.append(m.results[0].replace_dims_and_symbols(shift, []))
                operands += list(apply.mapOperands)
            else:
                results.append(AffineExpr.dimension(len(operands)))
                operands.append(v)
        m = shared_dims(AffineMap(len(operands), 0, tuple(results)), operands)
        flat: AffineExpr = AffineExpr.constant(0)
        assert isinstance(buffer.type, MemRefType)
        for result, stride in zip(m.results, _strides(buffer.type.get_shape())):
            flat = flat + result * stride
        simple = simplify_flat(flat)
        if simple == flat:
            return None
        return self.affine_expr(simple, operands)

    def affine_expr(self, expr: AffineExpr, operands: Sequence[SSAValue]) -> Expr:
        ranges = [value_range(o) for o in operands]
        text, prec = self._affine(expr, operands, ranges)
        return Expr(text, prec)

    def _affine(
        self, e: AffineExpr, operands: Sequence[SSAValue], ranges: Sequence[Range]
    ) -> tuple[str, int]:
        match e:
            case AffineConstantExpr(value=v):
                return str(v), (ATOM if v >= 0 else UNARY)
            case AffineDimExpr(position=p) | AffineSymExpr(position=p):
                expr = self.value(operands[p])
                return expr.text, expr.prec
            case AffineBinaryOpExpr(kind=AffineBinaryOpKind.Add, lhs=lhs, rhs=rhs):
                left = self._paren(self._affine(lhs, operands, ranges), ADD)
                negated = _negated(rhs)
                if negated is not None:
                    right = self._paren(self._affine(negated, operands, ranges), MUL)
                    return f"{left} - {right}", ADD
                return f"{left} + {self._paren(self._affine(rhs, operands, ranges), ADD)}", ADD
            case AffineBinaryOpExpr(kind=AffineBinaryOpKind.Mul, lhs=lhs, rhs=rhs):
                left = self._paren(self._affine(lhs, operands, ranges), MUL)
                right = self._paren(self._affine(rhs, operands, ranges), MUL + 1)
                return f"{left} * {right}", MUL
            case AffineBinaryOpExpr(kind=kind, lhs=lhs, rhs=rhs):
                lo, _ = expr_range(lhs, ranges)
                c = self._affine(rhs, operands, ranges)[0]
                if lo is not None and lo >= 0:
                    left = self._paren(self._affine(lhs, operands, ranges), MUL)
                    if kind == AffineBinaryOpKind.FloorDiv:
                        return f"{left} / {c}", MUL
                    if kind == AffineBinaryOpKind.Mod:
                        return f"{left} % {c}", MUL
                    inner = self._paren(self._affine(lhs, operands, ranges), ADD)
                    return f"({inner} + {int(c) - 1}) / {c}", MUL
                name = {
                    AffineBinaryOpKind.FloorDiv: "floordiv",
                    AffineBinaryOpKind.Mod: "mod",
                    AffineBinaryOpKind.CeilDiv: "ceildiv",
                }[kind]
                self.use_helper(name, IndexType())
                inner = self._affine(lhs, operands, ranges)[0]
                return f"einc_{name}_{self.suffix(IndexType())}({inner}, {c})", ATOM
            case _:
                raise InternalCompilerError(f"{self.t.name} target: cannot print affine expr {e}")

    @staticmethod
    def _paren(part: tuple[str, int], at_least: int) -> str:
        text, prec = part
        return f"({text})" if prec < at_least else text

    def bound(self, m: AffineMap, operands: Sequence[SSAValue], helper_name: str) -> Expr:
        """A loop bound: the max (lower) or min (upper) of the map's results."""
        m = dims_to_operands(m)
        exprs = [self.affine_expr(r, operands) for r in m.results]
        result = exprs[0]
        for e in exprs[1:]:
            self.use_helper(helper_name, IndexType())
            result = Expr(f"einc_{helper_name}_{self.suffix(IndexType())}({result.text}, {e.text})")
        return result

    # -- inlining -----------------------------------------------------------------------------
    def inlined(self, v: SSAValue) -> bool:
        """Whether `v` is printed inside its user's expression instead of being declared."""
        op = v.owner
        if not isinstance(op, Operation) or len(op.results) != 1:
            return False
        if isinstance(op, arith.ConstantOp):
            return True
        if isinstance(op, affine.ApplyOp) and _divides(op) and all(
            isinstance(u.operation, (egpu.VLoadOp, egpu.VStoreOp)) and u.operation.parent_block() is op.parent_block()
            for u in v.uses
        ):
            # a coalesced loop's `p floordiv W` / `p mod W` indexing vector accesses: printed
            # in each, where the linearisation merges the pair (`_merged_flat`)
            return True
        user_op = v.get_user_of_unique_use()
        if user_op is None or op.regions:
            return False
        if isinstance(op, affine.ApplyOp) and isinstance(user_op, egpu.PrefetchOp) and _split_flat(user_op):
            # a prefetch's index of a flat index split per dimension (`prefetch ... evenly`):
            # printed in its address, where the linearisation merges the split back (`x[e]`)
            return user_op.parent_block() is op.parent_block()
        if user_op.parent_block() is not op.parent_block():
            return False
        if type(user_op) in STATEMENTS and not isinstance(
            user_op, INLINE_INTO_STATEMENTS
        ):
            return False
        if type(op) in _LOADS:
            return not _writes_between(op, user_op, self.t.memory_ops)
        if type(op) in self.t.ops or isinstance(op, (arith.CmpiOp, arith.CmpfOp)):
            return _uses_once(self.t, user_op, v)
        return type(op) in EXPRESSIONS and _uses_once(self.t, user_op, v)


def _split_flat(op: egpu.PrefetchOp) -> bool:
    """Whether every index of a prefetch is an `affine.apply` of one same value (a flat index
    split into `e floordiv 16384, (e floordiv 128) mod 128, e mod 128`)."""
    owners = [v.owner for v in op.indices]
    if not all(isinstance(o, affine.ApplyOp) and len(o.mapOperands) == 1 for o in owners):
        return False
    return len({cast(affine.ApplyOp, o).mapOperands[0] for o in owners}) == 1


def _divides(op: affine.ApplyOp) -> bool:
    """Whether an `affine.apply`'s result divides (floordiv, mod)."""
    return any(
        isinstance(e, AffineBinaryOpExpr) and e.kind in (AffineBinaryOpKind.FloorDiv, AffineBinaryOpKind.Mod)
        for r in op.map.data.results for e in r.dfs()
    )


def _negated(e: AffineExpr) -> AffineExpr | None:
    """`x` when `e` is `x * -c` or `-c` (printed as a subtraction), else None."""
    if isinstance(e, AffineConstantExpr) and e.value < 0:
        return AffineExpr.constant(-e.value)
    if (
        isinstance(e, AffineBinaryOpExpr)
        and e.kind == AffineBinaryOpKind.Mul
        and isinstance(e.rhs, AffineConstantExpr)
        and e.rhs.value < 0
    ):
        return e.lhs if e.rhs.value == -1 else e.lhs * (-e.rhs.value)
    return None


def _strides(shape: Sequence[int]) -> list[int]:
    strides, running = [], 1
    for dim in reversed(shape):
        strides.append(running)
        running *= dim
    return strides[::-1]


CALLEE = re.compile(r"([A-Za-z_]\w*)\{f\}\(")
_LOADS = frozenset({affine.LoadOp, memref.LoadOp})
_WRITES = (affine.StoreOp, memref.StoreOp, memref.DeallocOp, func.CallOp, egpu.VStoreOp)
_READS = (affine.LoadOp, memref.LoadOp, egpu.LoadExtfOp, egpu.VLoadOp, egpu.VLoadRepeatOp)


def _writes_between(
    first: Operation, last: Operation, memory_ops: tuple[type[Operation], ...] = ()
) -> bool:
    op = first.next_op
    while op is not None and op is not last:
        if isinstance(op, _WRITES) or isinstance(op, memory_ops) or op.regions:
            return True
        op = op.next_op
    return False


def _uses_once(target: type[CLikeTarget], user: Operation, v: SSAValue) -> bool:
    """An operand spelled twice (`a > b ? a : b`) must be a name, not a repeated expression."""
    index = [k for k, o in enumerate(user.operands) if o is v]
    if len(index) != 1:
        return False
    if isinstance(user, arith.CmpiOp):
        fmt = target.cmpi[user.predicate.value.data]
    elif isinstance(user, arith.CmpfOp):
        fmt = target.cmpf[user.predicate.value.data]
    elif type(user) in target.ops:
        fmt = target.ops[type(user)].fmt
    else:
        return True
    return fmt.count(f"{{{index[0]}}}") <= 1


def _is_written(buffer: SSAValue) -> bool:
    return any(
        isinstance(u.operation, (affine.StoreOp, memref.StoreOp)) and u.index == 1
        or not isinstance(u.operation, (*_READS, egpu.PrefetchOp))  # a prefetch (a hint) writes nothing
        and not (isinstance(u.operation, egpu.CopyAsyncOp) and u.operation.source is buffer)
        for u in buffer.uses
    )


"""The printer state a target's hooks receive (`signature`, `function`, ...)."""
