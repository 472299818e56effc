"""C identifiers and literals: the reserved words, the names a header or the compiler may
define as macros, the functions a target's tables call (`called_names`), `c_identifier` (a
user's name made a safe C identifier) and `int_literal` (an integer constant's C spelling)."""

from __future__ import annotations

import re

from xdsl.dialects.builtin import IndexType, i1
from xdsl.ir import Attribute

C_RESERVED = frozenset(
    """auto break case char const continue default do double else enum extern float for goto
    if inline int long register restrict return short signed sizeof static struct switch
    typedef union unsigned void volatile while bool true false main kernel malloc free
    aligned_alloc abs NAN INFINITY""".split()
)


def called_names(target: type) -> set[str]:
    """Every function a target's spelling tables call (`get_global_id(0)`, `vload_half(...)`,
    `barrier(...)`): a user's tensor or axis must not shadow them."""
    texts: list[str] = []
    for klass in target.__mro__:
        for value in vars(klass).values():
            if isinstance(value, str):
                texts.append(value)
            elif isinstance(value, dict):
                texts += [v for v in value.values() if isinstance(v, str)]  # type: ignore[union-attr]
    # `{name}f(` in a format is a suffix, not a function: skip names glued to a placeholder
    return set(re.findall(r"(?<![}\w])([A-Za-z_]\w*)[ \t]*\(", "\n".join(texts)))


# Lower-case names the C headers or the compiler predefine as macros (the upper-case ones are
# caught by shape in `_may_be_macro`).
PLATFORM_MACROS = frozenset(
    """linux unix i386 errno assert isnan isinf isfinite isnormal signbit fpclassify isgreater
    isgreaterequal isless islessequal islessgreater isunordered math_errhandling complex
    imaginary alignas alignof noreturn static_assert thread_local offsetof stdin stdout stderr
    NAN EOF""".split()
)


def _may_be_macro(name: str) -> bool:
    """Names a header, the compiler or the implementation may define: reserved spellings
    (`_X`, `__`), `*_t` types, upper-case constants like `M_PI` or `NULL`, known macros."""
    return (
        name.startswith("_")
        or "__" in name
        or name.endswith("_t")
        or (name.isupper() and (len(name) >= 4 or "_" in name))
        or name in PLATFORM_MACROS
    )


def c_identifier(text: str) -> str:
    """A C identifier for a user's tensor or axis name that no header macro can capture:
    the name itself where that is safe, else the name behind an `x_` prefix."""
    name = re.sub(r"\W", "_", text)
    if not name or name[0].isdigit():
        return "v" + name
    if _may_be_macro(name):
        return "x_" + (re.sub(r"_+", "_", name).strip("_") or "v")
    return name


def int_literal(value: int, t: Attribute) -> str:
    if t == i1:
        return "1" if value & 1 else "0"
    bits = 64 if isinstance(t, IndexType) else t.width.data  # type: ignore[union-attr]
    value = value - (1 << bits) if value >= 1 << (bits - 1) else value
    if value == -(1 << (bits - 1)):
        return f"INT{bits}_MIN"
    if value == (1 << (bits - 1)) - 1 and bits > 8:
        return f"INT{bits}_MAX"
    return str(value)
