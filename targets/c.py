"""The C target: C11 for gcc/clang, one exported `void kernel(...)` per module.

Buffers are `restrict` pointers (the runtime refuses overlapping outputs), read-only ones
`const`; f16 is `_Float16` (storage only: `legalize-f16-for-c` computes it in f32).
Integer wrap-around relies on `-fwrapv` (see einc.runtime.c).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import ClassVar

import numpy as np
from xdsl.dialects.builtin import ModuleOp

from einc.targets.clike import CLikeTarget


class CTarget(CLikeTarget):
    name: ClassVar[str] = "c"
    pipeline: ClassVar[str] = (
        "convert-ein-to-affine,legalize-f16-for-c,einc-vectorize-loops{target=c},canonicalize,cse"
    )
    includes: ClassVar[tuple[str, ...]] = ("math.h", "stdbool.h", "stdint.h", "stdlib.h")
    buffer_suffix: ClassVar[str] = " restrict"

    @classmethod
    def local_array(cls, element: str, count: int, name: str) -> str:
        return f"{element} {name}[{count}] __attribute__((aligned(64)));"

    @classmethod
    def build(
        cls, source: str, module: ModuleOp
    ) -> Callable[[Mapping[str, np.ndarray], Mapping[str, np.ndarray]], object]:
        from einc.runtime.c import load_c_kernel
        from einc.runtime.signature import KernelSignature

        return load_c_kernel(source, KernelSignature.from_module(module)).run
