"""einc: a multi-level tensor-kernel compiler for Antares IR, built on xDSL.

    import einc
    kernel = einc.compile("output0[N, M] +=! input0[N, K] * input1[K, M]",
                          {"input0": {"dtype": "float32", "shape": [64, 32]},
                           "input1": {"dtype": "float32", "shape": [32, 16]}})
    outputs = kernel(input0=a, input1=b)   # {"output0": ndarray}
    kernel.source                          # the generated C

`einc.torch` (PyTorch custom ops, the [torch] extra) is imported on first use.
"""

from einc.compiler.kernel import Kernel
from einc.compiler.driver import compile
from einc.errors import EincError, InternalCompilerError, einc_version

__all__ = ["EincError", "InternalCompilerError", "Kernel", "compile"]
__version__ = einc_version()


def __getattr__(name: str) -> object:
    """`einc.torch`, imported when first used (it imports PyTorch)."""
    if name == "torch":
        import einc.torch

        return einc.torch
    raise AttributeError(f"module 'einc' has no attribute {name!r}")
