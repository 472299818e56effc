"""The printing of bfloat16, the same on every target: a 16-bit unsigned integer in memory
(the float32's upper half), read and written through two helpers and rounded by a third.

`legalize-bf16-storage` leaves bf16 only in buffers: `egpu.load_extf` (the bits shifted into
a float32's upper half: exact), `egpu.store_truncf` and `egpu.round` (float32 rounded to
nearest even on its bits; NaN stays a quiet NaN of the same sign, overflow becomes
infinity, subnormals round like normals). The target supplies the spellings of its
unsigned types and of the float32 <-> uint32 bit casts (`Bf16Spelling`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from xdsl.dialects.builtin import BFloat16Type, MemRefType

from einc.dialects import egpu
from einc.errors import InternalCompilerError
from einc.targets.spelling import Expr

if TYPE_CHECKING:
    from einc.targets.writer import Writer


@dataclass(frozen=True)
class Bf16Spelling:
    """How a language spells bfloat16's helpers: `u16`/`u32` its unsigned types (`u16`, the
    element type of a bf16 buffer), `as_uint` the bits of float `f`, `as_float` the float of
    the bits `u`."""

    u16: str
    u32: str
    as_uint: str
    as_float: str


C_BF16 = Bf16Spelling(
    "uint16_t", "uint32_t",
    "((union { float f; uint32_t u; }){ .f = f }).u",
    "((union { uint32_t u; float f; }){ .u = u }).f",
)  # fmt: skip
"""C99 (a union read through a compound literal)."""
CXX_BF16 = Bf16Spelling(
    "unsigned short", "unsigned int",
    "__builtin_bit_cast(unsigned int, f)", "__builtin_bit_cast(float, u)",
)  # fmt: skip
"""C++ compiled by clang or gcc >= 11 (SYCL, Poplar)."""

_RNE = "(u + 0x7fffu + ((u >> 16) & 1u))"
"""The float32 bits `u` rounded to nearest even at bit 16 (a carry into the exponent is the
right result: the next binade, or infinity above bfloat16's largest finite value)."""


def bf16_helpers(s: Bf16Spelling, prefix: str) -> str:
    return "\n".join((
        f"{prefix} float einc_bf16_to_f32({s.u16} h) {{ {s.u32} u = ({s.u32})h << 16; return {s.as_float}; }}",
        f"{prefix} {s.u16} einc_f32_to_bf16(float f) {{ {s.u32} u = {s.as_uint}; "
        f"if ((u & 0x7fffffffu) > 0x7f800000u) return ({s.u16})((u >> 16) | 0x40u); "
        f"return ({s.u16})({_RNE} >> 16); }}",
        f"{prefix} float einc_round_bf16(float f) {{ {s.u32} u = {s.as_uint}; "
        f"if ((u & 0x7fffffffu) > 0x7f800000u) return f; u = {_RNE} & 0xffff0000u; return {s.as_float}; }}",
    ))  # fmt: skip


def is_bf16_buffer(t: object) -> bool:
    return isinstance(t, MemRefType) and isinstance(t.get_element_type(), BFloat16Type)


def use_helpers(w: Writer) -> None:
    spelling = w.t.bf16_spelling
    if spelling is None:
        raise InternalCompilerError(f"{w.t.name} target: no bfloat16 spelling")
    key = ("bf16", "")
    if key not in w.helpers_used:
        w.helpers_used[key] = bf16_helpers(spelling, w.t.helper_prefix)


def load_extf(w: Writer, op: egpu.LoadExtfOp) -> Expr:
    use_helpers(w)
    index = w.flat_values(op.memref, op.indices)
    return Expr(f"einc_bf16_to_f32({w.value(op.memref).text}[{index.text}])")


def store_truncf(w: Writer, op: egpu.StoreTruncfOp) -> None:
    use_helpers(w)
    index = w.flat_values(op.memref, op.indices)
    w.line(f"{w.value(op.memref).text}[{index.text}] = einc_f32_to_bf16({w.value(op.value).text});")


def round_bf16(w: Writer, op: egpu.RoundOp) -> Expr:
    use_helpers(w)
    return Expr(f"einc_round_bf16({w.value(op.value).text})")


def _bf16_only(what: str, op_buffer: object, w: Writer) -> None:
    if not is_bf16_buffer(op_buffer):
        raise InternalCompilerError(f"{w.t.name} target: cannot print {what} of {op_buffer}")


def c_load_extf(w: Writer, op: egpu.LoadExtfOp) -> Expr:
    """The C target's `egpu.load_extf` (bf16 only: its f16 is a native `_Float16`)."""
    _bf16_only("egpu.load_extf", op.memref.type, w)
    return load_extf(w, op)


def c_store_truncf(w: Writer, op: egpu.StoreTruncfOp) -> None:
    _bf16_only("egpu.store_truncf", op.memref.type, w)
    store_truncf(w, op)


def c_round(w: Writer, op: egpu.RoundOp) -> Expr:
    if not isinstance(op.as_type, BFloat16Type):
        raise InternalCompilerError(f"{w.t.name} target: cannot round to {op.as_type}")
    return round_bf16(w, op)
