"""transform.einc.group_lanes (einc/transforms/group_lanes.py) on C and OpenCL: a group loop's
tile merged with the channel loop below it, the merged loop vectorized over several groups
(the group's input in runs of lanes: egpu.vbroadcast_runs), against NumPy; the schedules
with and without the op compute the same numbers; the group pair's input staged in a local
buffer (cache_read of an index with a division of the merged loop) too."""

from __future__ import annotations

import re
from typing import Any

import numpy as np
import pytest

from einc.compiler.driver import Compilation
from einc.semantics.compare import max_error, tolerance
from tests.test_device_differential import run_on_device
from tests.test_device_targets import require


def f32(*shape: int) -> dict[str, Any]:
    return {"dtype": "float32", "shape": list(shape)}


# 4 groups of 4 channels (the loops stage splits F into F.q x F.r): a scale per group, and a
# 1x1 grouped convolution with 3 input channels per group
SCALE = ("output0[N, F] = input0[N, F // 4] * input1[N, F] where F in 16",
         {"input0": f32(3, 4), "input1": f32(3, 16)}, ["N", "F.q.o", "F.q.i*F.r"],
         lambda a: a["input0"][:, np.arange(16) // 4] * a["input1"])  # fmt: skip
# (the output's and the filter's channels innermost, as the default's staged output tile and
# packed filter keep them)
GROUPED = ("output0[N, W, F] +=! input0[N, F // 4 * 3 + C, W] * input1[C, F] where F in 16",
           {"input0": f32(2, 12, 5), "input1": f32(3, 16)}, ["N", "F.q.o", "W", "C", "F.q.i*F.r"],
           lambda a: np.einsum("ngcw,cgf->nwgf", a["input0"].reshape(2, 4, 3, 5), a["input1"].reshape(3, 4, 4))
           .reshape(2, 5, 16))  # fmt: skip


def _schedule(order: list[str], target: str, pack: bool = False) -> str:
    lines = ['%q = transform.einc.match stmt "output0" axis "F.q" in %root',
             "%o, %l = transform.einc.group_lanes %q by 2"]  # fmt: skip
    handles = []
    for k, axis in enumerate(order):
        lines.append(f'%a{k} = transform.einc.match stmt "output0" axis "{axis}" in %root')
        handles.append(f"%a{k}")
    names = ", ".join(f"%r{k}" for k in range(len(order)))
    lines.append(f"{names} = transform.einc.reorder {', '.join(handles)}")
    if pack:  # the input staged per pair of groups: its channel `4 * (l floordiv 4) + C`
        lines.append('%p = transform.einc.cache_read "input0" at %r1')
    if target != "c":
        lines.append('transform.einc.bind %r0 to "thread.x"')
    lines.append(f"transform.einc.vectorize %r{len(order) - 1}")
    body = "\n".join(f"    {line}" for line in [*lines, "transform.yield"])
    return f"builtin.module {{\n  transform.named_sequence @__transform_main(%root: !transform.any_op) {{\n{body}\n  }}\n}}\n"


@pytest.mark.parametrize("target", ["c", pytest.param("opencl", marks=pytest.mark.opencl)])
@pytest.mark.parametrize("case", [SCALE, GROUPED], ids=["scale", "grouped"])
def test_group_lanes_vectorized_over_two_groups(target: str, case: tuple[Any, ...]) -> None:
    if target != "c":
        require(target)
    ir, inputs, order, answer = case
    comp = Compilation(ir, "<g>", inputs, None, target, _schedule(order, target))
    source = comp.run_until("source")
    # 8 lanes over two groups of 4 channels: two runs of 4, one input value each
    assert "vbroadcast_runs2" in source and ("einc_f32x8" in source if target == "c" else "float8" in source), source
    rng = np.random.default_rng(7)
    arrays = {k: rng.uniform(-2, 2, v["shape"]).astype(np.float32) for k, v in inputs.items()}
    got = comp.kernel()(**arrays)["output0"] if target == "c" else run_on_device(comp, arrays)["output0"]
    want = answer({k: v.astype(np.float64) for k, v in arrays.items()})
    assert max_error(got, want) <= tolerance("float32"), source


@pytest.mark.parametrize("target", ["c", pytest.param("opencl", marks=pytest.mark.opencl)])
def test_the_input_of_a_pair_of_groups_is_staged(target: str) -> None:
    """cache_read of the grouped input at the loop over pairs of groups: its channel index
    `8 * F.q.o + 4 * (l floordiv 4) + C` has a division of an inner loop, bounded through it
    (the box: the pair's 6 input channels x 5 columns), the loads of the vector loop read the
    local buffer, still a broadcast per run; NumPy's numbers."""
    if target != "c":
        require(target)
    ir, inputs, order, answer = GROUPED
    comp = Compilation(ir, "<g>", inputs, None, target, _schedule(order, target, pack=True))
    source = comp.run_until("source")
    assert "input0_local[30]" in source and "vbroadcast_runs2" in source, source
    assert re.search(r"vbroadcast_runs2\w*\(input0_local\[", source), source
    rng = np.random.default_rng(8)
    arrays = {k: rng.uniform(-2, 2, v["shape"]).astype(np.float32) for k, v in inputs.items()}
    got = comp.kernel()(**arrays)["output0"] if target == "c" else run_on_device(comp, arrays)["output0"]
    want = answer({k: v.astype(np.float64) for k, v in arrays.items()})
    assert max_error(got, want) <= tolerance("float32"), source
