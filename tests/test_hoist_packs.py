"""`einc-hoist-packs` (einc/passes/hoist_packs.py) in the C pipeline: a convolution at batch > 1
packs its filter once per call, above the parallel batch loop, into a heap buffer, instead of
once per image into a stack array; the numbers are NumPy's (float64 reference, random
non-zero inputs, fixed seeds). The pass's IR and its refusals: lit_tests/passes/einc-hoist-packs.mlir.
"""

from __future__ import annotations

import re

import numpy as np

from einc.compiler.driver import Compilation
from tests.test_condition_split import PAD_CONV, _check, _inputs, f32, transposed, transposed_ref


def _kernel_source(comp: Compilation) -> tuple[str, str]:
    source = comp.run_until("source")
    return source, source[source.index("void kernel("):]


def test_transposed_convolution_in_a_batch_packs_its_filter_once_per_call() -> None:
    """Batch 4, 16 input channels, 32 filters: each output phase's filter tile (16 x 2 x 2 x 32)
    is packed once, before the parallel batch loop, into a heap buffer (4 phases, 4 buffers,
    freed after the loop); the per-image code only reads them, and no stack array holds the
    filter any more."""
    ir, input_dict = transposed(16, 32, 4, 8)
    input_dict["input0"]["shape"][0] = 4
    comp = Compilation(ir, "<transposed batch>", input_dict, None, "c", "default")
    source, kernel = _kernel_source(comp)
    parallel = kernel.index("#pragma omp parallel for")
    packs = re.findall(r"float\* (input1_local_pack\w*) = \(float\*\)aligned_alloc\(64, \d+\);", kernel)
    assert len(packs) == 4, kernel
    assert all(kernel.index(f"{p} = ") < parallel and f"free({p});" in kernel[parallel:] for p in packs), kernel
    assert not re.search(r"float input1_local\[", source), source
    assert len(re.findall(r"\binput1\[", kernel[:parallel])) >= 4  # the packing nests
    assert not re.search(r"\binput1\[", kernel[parallel:]), kernel  # the batch loop reads the packs only
    inputs = _inputs(input_dict, 26)
    _check(comp.kernel()(**{k: v.copy() for k, v in inputs.items()}), inputs, transposed_ref, 16 * 4, "batch 4, hoisted packs")


def test_padded_convolution_in_a_batch_packs_its_filter_once_per_call() -> None:
    """The same for a 3x3 pad-1 convolution at batch 3 (32 channels, 32 filters): one pack
    above the batch loop, the numbers NumPy's."""
    h = w = 6
    ir = PAD_CONV.format(h=h, w=w)
    input_dict = {"input0": f32(3, 32, h, w), "input1": f32(32, 32, 3, 3)}
    comp = Compilation(ir, "<pad batch>", input_dict, None, "c", "default")
    source, kernel = _kernel_source(comp)
    parallel = kernel.index("#pragma omp parallel for")
    assert re.search(r"float\* input1_local_pack = \(float\*\)aligned_alloc", kernel[:parallel]), kernel
    assert not re.search(r"float input1_local\[", source), source

    def ref(a: dict[str, np.ndarray]) -> np.ndarray:
        x = np.pad(a["input0"], ((0, 0), (0, 0), (1, 1), (1, 1)))
        out = np.zeros((3, 32, h, w))
        for kh in range(3):
            for kw in range(3):
                out += np.einsum("nchw,fc->nfhw", x[:, :, kh:kh + h, kw:kw + w], a["input1"][:, :, kh, kw])
        return out

    inputs = _inputs(input_dict, 27)
    _check(comp.kernel()(**{k: v.copy() for k, v in inputs.items()}), inputs, ref, 32 * 9, "batch 3, pad 1, hoisted pack")
