"""`einc-vectorize-loops{target=T}`: loops a schedule marked `einc.vectorize` become vector
code (`egpu.vload`/`vstore`/`vbroadcast`/`vreduce` and arith on vectors) plus a scalar
remainder loop.

Policy only: the width comes from the target (`vector_lanes()`: float32 lanes, the device
description's `vector_width`; for C the host's vector registers), the element
types from the target's `vector_elements` (types its printer has vectors of), the math
functions it has vector forms of from `vector_math` (OpenCL's overloaded builtins) and
`lanewise_vector_math` (C: printed lane by lane, which gcc vectorizes through libmvec; see
einc.targets.c). On a target with `vector_shuffle` (C), staging copies that transpose (a
packed filter, the pair form's with its lanes two loops) become W x W vector tiles first
(`einc.transforms.transpose_copy`; a partial tile where the target's
`partial_vector_store_bytes` says it loads and stores part of a vector in one instruction); copies that interleave K rows into lanes (the pair form's input pack) become
vector rows zipped by shuffles (`einc.transforms.interleave_copy`, masked partial rows where
the target has them). The mechanism
and its contract are in `einc.transforms.vectorize`. A loop the mechanism refuses (a
gather, an op without a vector form, f16, ...) stays scalar with its mark: C still prints
`#pragma omp simd` for it. That is the documented fallback, not an error. Loops marked
`einc.vectorize_reduction` (reductions, checked by `mark_reduction_loop`) are vectorized the
same way; refused, they stay scalar without a pragma.
"""

from __future__ import annotations

from dataclasses import dataclass

from xdsl.context import Context
from xdsl.dialects import affine
from xdsl.dialects.builtin import ModuleOp

from einc.passes.targeted import TargetedPass
from einc.transforms.loop_analysis import trip_count
from einc.transforms.interleave_copy import interleave_copy
from einc.transforms.loop_build import Failure
from einc.transforms.loop_transforms import VECTORIZE_ATTR
from einc.transforms.transpose_copy import COPY_ATTR, transpose_copy
from einc.transforms.vectorize import REDUCTION_ATTR, vectorize_loop


@dataclass(frozen=True)
class VectorizeLoopsPass(TargetedPass):
    name = "einc-vectorize-loops"

    target: str = "c"

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        target = self.target_facts()
        lanes, elements = target.vector_lanes(), target.vector_elements
        math_ops = target.vector_math | target.lanewise_vector_math
        if not elements:
            return
        if target.vector_shuffle:
            # staging copies that transpose (a filter packed with its output channels
            # innermost): W x W tiles through vector shuffles; a Failure leaves the copy scalar
            copies = [
                loop for loop in op.walk()
                if isinstance(loop, affine.ForOp) and COPY_ATTR in loop.attributes
                and not (isinstance(parent := loop.parent_op(), affine.ForOp) and COPY_ATTR in parent.attributes)
            ]  # fmt: skip
            for loop in copies:
                transpose_copy(loop, lanes, target.partial_vector_store_bytes)
            # staging copies that interleave K rows into lanes (the pair form's input pack):
            # vector rows zipped by shuffles; a Failure leaves the copy scalar
            rows = [loop for loop in op.walk() if isinstance(loop, affine.ForOp) and COPY_ATTR in loop.attributes]
            for loop in rows:
                interleave_copy(loop, lanes, target.partial_vector_store_bytes)
        marked = [
            loop for loop in op.walk()
            if isinstance(loop, affine.ForOp)
            and (VECTORIZE_ATTR in loop.attributes or REDUCTION_ATTR in loop.attributes)
        ]  # fmt: skip
        for loop in marked:
            # a Failure leaves the loop scalar
            done = vectorize_loop(loop, lanes, elements, math_ops)
            # a remainder of a constant 2 or more iterations: narrower vectors (the width is
            # capped by the trip count: 30 floats at 8 lanes are 3 x 8, then 4, then 2)
            while not isinstance(done, Failure) and done[1] is not None and (trip_count(done[1]) or 0) >= 2:
                done = vectorize_loop(done[1], lanes, elements, math_ops)
