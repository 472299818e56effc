"""Discardable attribute names einc's passes put on ops and arguments, and the one map between
einc's dtype names (NumPy's: `float32`, `int8`, `bool`) and xDSL element types.

The ground floor: the frontend, passes, targets and runtimes import these instead of each
other, so no layer reaches upward for a string."""

from __future__ import annotations

import ml_dtypes
import numpy as np
from xdsl.dialects.builtin import (
    AnyFloat,
    BFloat16Type,
    Float16Type,
    Float32Type,
    Float64Type,
    IndexType,
    IntegerType,
    VectorType,
)
from xdsl.ir import Attribute

BFLOAT16 = np.dtype(ml_dtypes.bfloat16)
"""NumPy's bfloat16 (ml_dtypes'; importing it makes `np.dtype("bfloat16")` known). Its scalars
compute in float32 and round once to bfloat16, as einc does. Its `kind` is "V", not "f":
ask `is_float_dtype`."""

NARROW_FLOATS = (Float16Type, BFloat16Type)
"""The 16-bit float element types: storage types, computed in f32 (`legalize-f16-for-c`)."""


def is_float_dtype(dtype: np.dtype) -> bool:
    """Whether a NumPy dtype is a float (bfloat16 included)."""
    return dtype.kind == "f" or dtype == BFLOAT16


NAME_ATTR = "ein.name"
"""On a function argument: the tensor's name in the program."""
OUTPUT_ATTR = "ein.output"
"""On a function argument (unit): the tensor is a program output."""
STMT_ATTR = "einc.stmt"
"""On a loop: the statement (output tensor name) it computes."""
AXIS_ATTR = "einc.axis"
"""On a loop: the program axis it runs over."""
INIT_ATTR = "einc.init"
"""On a loop: it initializes a reduction's output."""
COPY_ATTR = "einc.copy"
LDMATRIX_ATTR = "egpu.ldmatrix"
"""On an `egpu.mma`: which of its A and B tiles `ldmatrix` reads ({a = "x4" | "x4.trans"}),
set by `einc-ldmatrix` where a tile's 8-element rows are contiguous and 16-byte aligned."""
FRAGMENT_ATTR = "einc.fragment"
"""On a `memref.alloca`: a warp's tensor-core accumulator fragment (einc.transforms.tensorize),
each lane's elements of a 16 x 16 tile; its copy nests cover the tile over the warp's lanes."""
"""On a loop: it copies a tensor (an output that is also read as an input)."""
POINT_SHAPE_ATTR = "egpu.point_shape"
"""On an `egpu.func` whose flattened points are register tiles (outlined from loops counting by
steps above 1): the points' shape, row-major (Poplar's box split reads it: vertex_boxes)."""
PARALLEL_ATTR = "einc.parallel"
VECTORIZE_ATTR = "einc.vectorize"
UNROLL_ATTR = "einc.unroll"
TAIL_ATTR = "einc.tail"
BIND_ATTR = "einc.bind"
"""On a loop: the schedule's marks (parallelize, vectorize, unroll's tail, bind's axis)."""
BIND_AXES = ("block.x", "block.y", "block.z", "thread.x", "thread.y", "thread.z")
"""The axes `bind` takes (the value of BIND_ATTR)."""
STAGED_LOC_ATTR = "einc.staged_loc"
"""On a local buffer (`memref.alloca`) a schedule op made: that op's `file:line:col`, for a
refusal of the kernel's memory after the schedule (local arrays, Poplar tile memory)."""
BIND_LOC_ATTR = "einc.bind_loc"
"""On a bound loop: the `file:line:col` of the bind op (absent where the schedule's text is
not known)."""
REDUCTION_ATTR = "einc.vectorize_reduction"
"""The mark of a loop whose only carried dependences are reductions (`mark_reduction_loop`)."""
MEMORY_ATTR = "einc.memory"
"""On a staging `memref.alloca`: `"shared"` for GPU work-group memory (absent: local)."""
PAD_ATTR = "einc.pad"
"""On a shared staging buffer (`memref.alloca`, then `egpu.alloc_shared`): the elements its
rows are padded by (`cache_read ... pad N`; absent: `einc-pad-shared` chooses)."""
SHARED_COPY_ATTR = "einc.shared"
"""On the outermost loop of a shared copy nest: `"in"` (tensor to buffer) or `"out"`."""
INDEX_BITS_ATTR = "egpu.index_bits"
"""On an `egpu.func`: `32` when every index value of the kernel fits a signed 32-bit integer
(`einc-index-width`); the printers then spell `index` as the target's 32-bit int. Absent: 64."""
ALIGN_ATTR = "egpu.align"
"""On an `egpu.vload` / `egpu.vstore`: the bytes its address is proven aligned to
(`einc-vectorize-shared-loads`); a printer may then use the language's aligned vector load."""
STORE_LANES_ATTR = "egpu.lanes"
"""On an `egpu.vstore`: store only its first N lanes (N below the vector's width; the rest of
the vector is not written): the partial tile of a transposing copy (einc.transforms.
transpose_copy). Printed as the target's partial store where it has one (C: AVX-512's masked
store), else lane by lane. On an `egpu.vload`: read only its first N elements, the other
lanes zero (an interleaving copy's last columns, einc.transforms.interleave_copy; C:
AVX-512's masked load, else lane by lane)."""
STREAM_ATTR = "einc.stream"
"""On a tile's copy-out store (`affine.store`, then `egpu.vstore`): store it non-temporally
(`transform.einc.stream_stores`; C: `vmovntps` where the address is aligned to the vector).
Its value: the schedule op's `file:line:col` (empty where the text is not known), where
`einc-stream-stores` reports a store it refuses."""
DTYPE_ATTR = "egpu.dtype"
"""On a host buffer whose device storage was widened (`legalize-storage-dtypes`): the
program's dtype; the memref's element type is then the device's storage dtype."""


def dtype_name(t: Attribute) -> str:
    """einc's dtype name of a scalar element type (`i1` is `bool`, `index` is `int64`);
    ValueError for a type einc has no name for."""
    if isinstance(t, IndexType):
        return "int64"
    if isinstance(t, IntegerType):
        if t.width.data == 1:
            return "bool"
        if t.width.data in (8, 16, 32, 64):
            return f"int{t.width.data}"
    if isinstance(t, BFloat16Type):
        return "bfloat16"
    if isinstance(t, (Float16Type, Float32Type, Float64Type)):
        return f"float{t.bitwidth}"
    if isinstance(t, AnyFloat):
        return f"float{t.bitwidth}"
    raise ValueError(f"no dtype for element type {t}")


def element_bits(t: Attribute) -> int:
    """The width in bits of a float or integer element type; 0 for any other."""
    if isinstance(t, AnyFloat):
        return t.bitwidth
    return t.width.data if isinstance(t, IntegerType) else 0


def vector_bytes(t: VectorType) -> int:
    """The bytes of a one-dimensional vector of float or integer lanes (0 for other lanes)."""
    return t.get_shape()[0] * element_bits(t.get_element_type()) // 8


def numpy_dtype(t: Attribute) -> np.dtype:
    """The NumPy dtype of a scalar element type."""
    return np.dtype(dtype_name(t))
