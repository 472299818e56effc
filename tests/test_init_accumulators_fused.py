"""einc-init-accumulators on a fill fused into the loop around its reduction (a batch loop,
`transform.einc.fuse`, as the CPU default does at batch > 1): each iteration's output tiles
start at the identity, and the fill goes when the tiles cover what it wrote, checked per
iteration; a tile staged inside a reduction loop (two iterations of one tile write the same
elements) leaves the copy-in reading the fill. Numbers against NumPy on C and OpenCL (the
device pipelines run the pass too), the default C of a batched convolution checked for
neither a fill nor a read of the output."""

from __future__ import annotations

import re
from typing import Any

import numpy as np
import pytest

from einc.compiler.driver import Compilation
from einc.semantics.compare import max_error, tolerance
from einc.targets.c import CTarget

BMM = "output0[B, N, M] +=! input0[B, N, K] * input1[B, K, M]"
INPUTS = {"input0": {"dtype": "float32", "shape": [3, 4, 6]}, "input1": {"dtype": "float32", "shape": [3, 6, 5]}}


def _schedule(stage_at: str, bind: bool) -> str:
    """The fill fused into the batch loop, the output staged at `stage_at` (a row: "N"; inside
    the reduction: "K")."""
    lines = [
        '%f = transform.einc.match stmt "output0" axis "B" init in %root',
        '%b = transform.einc.match stmt "output0" axis "B" in %root',
        '%n = transform.einc.match stmt "output0" axis "N" in %root',
        '%k = transform.einc.match stmt "output0" axis "K" in %root',
        '%m = transform.einc.match stmt "output0" axis "M" in %root',
        "%r0, %r1, %r2, %r3 = transform.einc.reorder %b, %n, %k, %m",
        "%fused = transform.einc.fuse %f into %r0",
        f'%w = transform.einc.cache_write "output0" at %r{1 if stage_at == "N" else 2} in "local"',
        *(['transform.einc.bind %r0 to "thread.x"'] if bind else []),
    ]
    body = "\n".join(f"    {line}" for line in [*lines, "transform.yield"])
    return f"builtin.module {{\n  transform.named_sequence @__transform_main(%root: !transform.any_op) {{\n{body}\n  }}\n}}\n"


@pytest.mark.parametrize("target", ["c", pytest.param("opencl", marks=pytest.mark.opencl)])
@pytest.mark.parametrize("stage_at", ["N", "K"])
def test_a_fill_fused_into_the_batch_loop_starts_the_tiles(target: str, stage_at: str) -> None:
    from tests.test_device_differential import run_on_device
    from tests.test_device_targets import require

    if target != "c":
        require(target)
    comp = Compilation(BMM, "<t>", INPUTS, None, target, _schedule(stage_at, bind=target != "c"))
    source = comp.run_until("source")
    assert isinstance(source, str)
    reads = re.findall(r"=[^;=]*\boutput0\[", source)
    if stage_at == "N":  # the row tiles cover each image's outputs: no fill, no read of the output
        assert not reads and not re.search(r"\boutput0\[[^\]]*\] = 0\.0f", source), source
        assert re.search(r"output0_local\[[^\]]*\] = 0\.0f;", source), source
    else:  # a tile per step of the reduction: it reads back what the steps before summed
        assert reads, source
    for seed in (0, 1):
        rng = np.random.default_rng(seed)
        arrays = {k: rng.uniform(-1, 1, v["shape"]).astype(np.float32) for k, v in INPUTS.items()}
        got = comp.kernel()(**arrays)["output0"] if target == "c" else run_on_device(comp, arrays)["output0"]
        want = arrays["input0"].astype(np.float64) @ arrays["input1"].astype(np.float64)
        assert max_error(got, want) <= tolerance("float32"), source


def test_batched_convolutions_neither_fill_nor_read_back_the_output() -> None:
    """The CPU default at batch 2 (the batch loop parallel, the fill fused into it): the
    blocked tiles start at zero, so the C has no fill and no read of the output (before,
    each image's outputs were zeroed, then read back per tile: batch 16 grouped 3x3
    convolution 0.225 -> 0.186 ms an image); NumPy's numbers."""
    lanes = CTarget.vector_lanes()
    inputs = {"input0": {"dtype": "float32", "shape": [2, 4, 6, 20]},
              "input1": {"dtype": "float32", "shape": [2 * lanes, 4, 3, 3]}}  # fmt: skip
    e = ["HO + KH - 1", "WO + KW - 1"]
    conds = ", ".join(f"{i} >= 0, {i} < {n}" for i, n in zip(e, (6, 20)))
    ir = f"output0[N, F, HO, WO] +=! (input0[N, C, {e[0]}, {e[1]}].when([{conds}], 0.0) * input1[F, C, KH, KW]) where HO in 6, WO in 20"
    comp = Compilation(ir, "<conv>", inputs, None, "c")
    kernel = comp.kernel()
    assert re.search(r"#pragma omp parallel for\n\s*for \(int64_t N = 0; N < 2;", kernel.source), kernel.source
    assert not re.search(r"=[^;=]*\boutput0\[", kernel.source), kernel.source
    assert not re.search(r"\boutput0\[[^\]]*\], v\)|\boutput0\[[^\]]*\] = 0\.0f", kernel.source), kernel.source
    rng = np.random.default_rng(3)
    arrays: dict[str, Any] = {k: rng.uniform(-1, 1, v["shape"]).astype(np.float32) for k, v in inputs.items()}
    x = np.pad(arrays["input0"].astype(np.float64), [(0, 0), (0, 0), (1, 1), (1, 1)])
    win = np.lib.stride_tricks.sliding_window_view(x, (3, 3), axis=(2, 3))
    want = np.einsum("nchwij,fcij->nfhw", win, arrays["input1"].astype(np.float64))
    assert max_error(kernel(**arrays)["output0"], want) <= tolerance("float32"), kernel.source
