"""The `egpu` dialect's tensor-core op: `egpu.mma`, one 16 x 16 tile of a float16 or bfloat16
contraction accumulated in float32 by a warp (CUDA `mma.sync`) or a wavefront (HIP MFMA),
made by `transform.einc.tensorize` (einc.transforms.tensorize).

    egpu.mma %a[%i, %k], %b[%k, %j], %c[%i, %j] lane %l {
        lanes = 32, k = 64, a_dims = [0, 1], b_dims = [0, 1], c_dims = [0, 1]
    } : memref<64x64xf16>, memref<64x64xf16>, memref<64x64xf32>

With `A(r, q)` the element of `a` at its base indices plus `r` along `a_dims[0]` and `q` along
`a_dims[1]` (`B(q, s)`, `C(r, s)` likewise), the op adds `sum(A(r, q) * B(q, s) for q < k)`,
computed in float32, to every `C(r, s)`, r, s < 16. It is collective: all `lanes` lanes of
the warp (`lane` 0 .. lanes - 1) execute it together, and lane `l` owns the elements of C
that `owned(l, lanes)` names (the hardware's accumulator layout), which it alone reads and
writes. The sum's order and intermediate rounding are the hardware's (float32 or better).

Fragment form (`c_dims = []`): `c` is the lane's own registers, a rank-1 float32 array of
`fragment_size(lanes)` elements (a work-item's private array), and element `n` of `owned(l,
lanes)` is `c[c_base + n]`: the accumulator tile held in registers across a whole reduction
(`tensorize` makes it, with copies in and out around the reduction's loops).
"""

from __future__ import annotations

from collections.abc import Sequence

from xdsl.dialects.builtin import (
    ArrayAttr,
    BFloat16Type,
    Float16Type,
    Float32Type,
    IndexType,
    IntegerAttr,
    MemRefType,
    i64,
)
from xdsl.ir import SSAValue
from xdsl.irdl import (
    AttrSizedOperandSegments,
    IRDLOperation,
    ParsePropInAttrDict,
    irdl_op_definition,
    operand_def,
    prop_def,
    traits_def,
    var_operand_def,
)
from xdsl.utils.exceptions import VerifyException

FRAGMENT = 16
"""The tile's rows and columns, and the k step of one instruction."""
LANES = {"mma.m16n8k16": 32, "mfma.16x16x16": 64}
"""The lanes that execute one tile, by intrinsic (a CUDA warp; a CDNA wavefront)."""


def owned(lane: int, lanes: int) -> list[tuple[int, int]]:
    """The (row, column) elements of the 16 x 16 accumulator lane `lane` holds: `mma.m16n8k16`
    (two n8 halves: rows g, g + 8, columns 2t, 2t + 1 of each half, g = lane / 4,
    t = lane % 4), MFMA 16x16x16 (column lane % 16, rows 4 (lane / 16) .. + 3)."""
    if lanes == 32:
        g, t = lane >> 2, lane & 3
        return [(r, h + 2 * t + c) for h in (0, 8) for r in (g, g + 8) for c in (0, 1)]
    if lanes == 64:
        return [(4 * (lane >> 4) + i, lane & 15) for i in range(4)]
    raise ValueError(f"no tensor-core layout for {lanes} lanes")


def fragment_size(lanes: int) -> int:
    """The accumulator elements each lane holds: 256 / lanes."""
    return FRAGMENT * FRAGMENT // lanes


def _ints(values: Sequence[int]) -> ArrayAttr[IntegerAttr]:
    return ArrayAttr([IntegerAttr(v, i64) for v in values])


@irdl_op_definition
class MmaOp(IRDLOperation):
    """C(16 x 16) += A(16 x k) * B(k x 16) in float32, by `lanes` lanes together."""

    name = "egpu.mma"
    a = operand_def(MemRefType)
    b = operand_def(MemRefType)
    c = operand_def(MemRefType)
    a_indices = var_operand_def(IndexType)
    b_indices = var_operand_def(IndexType)
    c_indices = var_operand_def(IndexType)
    lane = operand_def(IndexType)
    lanes = prop_def(IntegerAttr)
    k = prop_def(IntegerAttr)
    a_dims = prop_def(ArrayAttr[IntegerAttr])
    b_dims = prop_def(ArrayAttr[IntegerAttr])
    c_dims = prop_def(ArrayAttr[IntegerAttr])
    irdl_options = (AttrSizedOperandSegments(as_property=True), ParsePropInAttrDict())
    traits = traits_def()
    assembly_format = (
        "$a `[` $a_indices `]` `,` $b `[` $b_indices `]` `,` $c `[` $c_indices `]` `lane` $lane "
        "attr-dict `:` type($a) `,` type($b) `,` type($c)"
    )

    def __init__(
        self, a: SSAValue, a_indices: Sequence[SSAValue], b: SSAValue, b_indices: Sequence[SSAValue],
        c: SSAValue, c_indices: Sequence[SSAValue], lane: SSAValue, lanes: int, k: int,
        dims: tuple[Sequence[int], Sequence[int], Sequence[int]],
    ):  # fmt: skip
        super().__init__(
            operands=[a, b, c, a_indices, b_indices, c_indices, lane],
            properties={
                "lanes": IntegerAttr(lanes, i64), "k": IntegerAttr(k, i64),
                "a_dims": _ints(dims[0]), "b_dims": _ints(dims[1]), "c_dims": _ints(dims[2]),
            },
        )  # fmt: skip

    def dims(self, which: str) -> tuple[int, ...]:
        """The two dimensions `which` ("a", "b", "c") moves along (none: a fragment c)."""
        attr = {"a": self.a_dims, "b": self.b_dims, "c": self.c_dims}[which]
        return tuple(v.value.data for v in attr.data)

    @property
    def fragment(self) -> bool:
        """C is the lanes' register fragment (the module docstring), not a tile of a buffer."""
        return not self.c_dims.data

    def verify_(self) -> None:
        if self.lanes.value.data not in LANES.values():
            raise VerifyException(f"egpu.mma: {self.lanes.value.data} lanes (one of {sorted(LANES.values())})")
        if self.k.value.data <= 0 or self.k.value.data % FRAGMENT:
            raise VerifyException(f"egpu.mma: k = {self.k.value.data} is not a positive multiple of {FRAGMENT}")
        types = []
        for which, buffer, indices, fragment in (("a", self.a, self.a_indices, False), ("b", self.b, self.b_indices, False),
                                                 ("c", self.c, self.c_indices, self.fragment)):  # fmt: skip
            t = buffer.type
            assert isinstance(t, MemRefType)
            if len(indices) != len(t.get_shape()):
                raise VerifyException(f"egpu.mma: {which} has rank {len(t.get_shape())} but {len(indices)} indices")
            types.append(t.get_element_type())
            if fragment:
                size = fragment_size(self.lanes.value.data)
                if len(t.get_shape()) != 1 or t.get_shape()[0] < size:
                    raise VerifyException(f"egpu.mma: a fragment c must be a rank-1 array of at least {size} elements, got {t}")
                continue
            dims = self.dims(which)
            if len(set(dims)) != 2 or not all(0 <= d < len(t.get_shape()) for d in dims):
                raise VerifyException(f"egpu.mma: {which}_dims {list(dims)} are not two dimensions of {t}")
        if not (isinstance(types[0], Float16Type | BFloat16Type) and types[0] == types[1]):
            raise VerifyException(f"egpu.mma: a and b must both be f16 or both bf16, got {types[0]} and {types[1]}")
        if not isinstance(types[2], Float32Type):
            raise VerifyException(f"egpu.mma: c must be f32, got {types[2]}")
