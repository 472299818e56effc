"""`mulf-to-f64`: a "widen products" rewrite that retypes a multiplication's result to f64
without widening its operands or its users: IR that does not verify, on every program with
a float32 product whose result feeds another op (everything but copies)."""

from dataclasses import dataclass

from xdsl.dialects import arith
from xdsl.dialects.builtin import f32, f64
from xdsl.passes import ModulePass


@dataclass(frozen=True)
class MulfToF64(ModulePass):
    """Retype f32 products to f64 (invalid IR on purpose)."""

    name = "mulf-to-f64"

    def apply(self, ctx, op):
        for m in op.walk():
            if isinstance(m, arith.MulfOp) and m.result.type == f32:
                m.result._type = f64  # noqa: SLF001 - the bug: only the result is retyped
                return
