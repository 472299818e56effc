"""What the executor's parts share: a compiled step, a memref's shape and dtype, the merge of
per-lane values under a mask, and the poisoned buffers outputs and temporaries start as."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
from xdsl.dialects.builtin import MemRefType
from xdsl.ir import Attribute

from einc.semantics.egpu.memory import Buffer
from einc.semantics.egpu.values import Lanes, dtype_of, lanes, select

Step = Callable[["Lanes | None"], None]


def poison(shape: tuple[int, ...], dtype: np.dtype) -> np.ndarray:
    """A fresh buffer whose contents betray any element never written (as einc/semantics/loops.py)."""
    if dtype.kind == "f":
        return np.full(shape, np.nan, dtype)
    if dtype == np.bool_:
        return np.ones(shape, np.bool_)
    return np.frombuffer(b"\xa5" * (dtype.itemsize * int(np.prod(shape))), dtype).reshape(shape).copy()


def memref_shape(t: Attribute) -> tuple[tuple[int, ...], np.dtype]:
    assert isinstance(t, MemRefType), t
    return tuple(int(d) for d in t.get_shape()), dtype_of(t.get_element_type())


def merge(mask: Lanes, new: object, old: object) -> object:
    """`new` in the lanes of `mask`, `old` elsewhere (buffers are the same in every lane)."""
    if isinstance(new, Buffer) or isinstance(old, Buffer):
        return new
    a, b = lanes(new), lanes(old)
    return select(mask, a, b, np.ndim(a) == 2 or np.ndim(b) == 2)
