"""The pair form's pieces (README, "The convolutions on an Intel Xeon"): `transform.einc.
group_lanes ... interleaved` (the group index fastest, lane `2 f + g`) and `egpu.vload_repeat`
(a run of k consecutive elements repeated over the lanes, which the vectorizer makes from a
load whose last index is `l mod k`), against NumPy on every target: C, OpenCL, SYCL, HLSL
and Poplar compiled and run, CUDA and HIP on the egpu interpreter. The program has the
layouts the pair form stages (the output's and the filter's channels `2 f + g`, the input's
two groups innermost), so the vector loop over the merged loop reads the input as one run of
two values per vector."""

from __future__ import annotations

import re
from typing import Any

import numpy as np
import pytest

from einc.compiler.driver import Compilation
from einc.semantics.compare import max_error, tolerance
from einc.semantics.egpu import run_lowered
from tests.test_device_differential import run_on_device
from tests.test_device_targets import require

IR = "output0[N, W, F, G] +=! input0[N, W, C, G] * input1[C, F, G] where G in 2"
INPUTS: dict[str, Any] = {"input0": {"dtype": "float32", "shape": [2, 3, 5, 2]},
                          "input1": {"dtype": "float32", "shape": [5, 8, 2]}}  # fmt: skip
TARGETS = ["c", "opencl", "sycl", "hlsl", "poplar", "cuda", "hip"]


def _schedule(target: str, interleaved: str = " interleaved", vectorize: bool = True) -> str:
    lines = [f'%{a.lower()} = transform.einc.match stmt "output0" axis "{a}" in %root' for a in "NWCGF"]
    lines += ["%r0, %r1, %r2, %r3, %r4 = transform.einc.reorder %n, %w, %c, %g, %f",
              f"%o, %l = transform.einc.group_lanes %r3 by 2{interleaved}"]  # fmt: skip
    if target != "c":
        lines.append('transform.einc.bind %r0 to "thread.x"')
    if vectorize:
        lines.append("transform.einc.vectorize %l")
    body = "\n".join(f"    {line}" for line in [*lines, "transform.yield"])
    return f"builtin.module {{\n  transform.named_sequence @__transform_main(%root: !transform.any_op) {{\n{body}\n  }}\n}}\n"


def _run(comp: Compilation, target: str, arrays: dict[str, np.ndarray]) -> np.ndarray:
    if target == "c":
        return comp.kernel()(**arrays)["output0"]
    if target in ("cuda", "hip"):
        return run_lowered(comp.results["target"], arrays, target=target)["output0"]
    return run_on_device(comp, arrays)["output0"]


@pytest.mark.parametrize("target", TARGETS)
def test_interleaved_lanes_read_the_input_as_a_repeated_pair(target: str) -> None:
    require(target)
    comp = Compilation(IR, "<pairs>", INPUTS, None, target, _schedule(target))
    source = comp.run_until("source")
    ir = str(comp.results["target"])
    if target in ("c", "opencl") or "egpu.vstore" in ir:  # vectorized: the input one run of 2 per vector
        assert re.search(r"egpu\.vload_repeat .* run 2 .*-> vector<\d+xf32>", ir), ir
    if target == "c":
        # one 64-bit broadcast of the pair from the input (no per-lane loads)
        assert re.search(r"einc_vrepeat64_f32x16\(&input0\[[^\]]*% 2\]\)", source), source
        assert "__builtin_memcpy(&q, a, 8)" in source
    rng = np.random.default_rng(26)
    arrays = {k: rng.uniform(-2, 2, v["shape"]).astype(np.float32) for k, v in INPUTS.items()}
    got = _run(comp, target, arrays)
    want = np.einsum("nwcg,cfg->nwfg", arrays["input0"].astype(np.float64), arrays["input1"].astype(np.float64))
    assert max_error(got, want) <= tolerance("float32"), source


def test_interleaved_and_blocked_lanes_compute_the_same() -> None:
    """The same loops grouped without `interleaved` (g = l floordiv |f|): the input's last
    index is then a division (runs of 8 lanes, `vbroadcast_runs`), no repeat; both match
    NumPy, and scalar (unvectorized) interleaved lanes too."""
    rng = np.random.default_rng(27)
    arrays = {k: rng.uniform(-2, 2, v["shape"]).astype(np.float32) for k, v in INPUTS.items()}
    want = np.einsum("nwcg,cfg->nwfg", arrays["input0"].astype(np.float64), arrays["input1"].astype(np.float64))
    for interleaved, vectorize in (("", False), (" interleaved", False)):
        comp = Compilation(IR, "<pairs>", INPUTS, None, "c", _schedule("c", interleaved, vectorize))
        source = comp.run_until("source")
        assert "vrepeat" not in source, source
        assert max_error(comp.kernel()(**arrays)["output0"], want) <= tolerance("float32"), source


def test_a_repeat_the_vectors_do_not_hold_whole_stays_scalar() -> None:
    """`F mod 3` over vectors of 16: not a run repeated from each vector's first lane, so the
    vectorizer leaves the loop scalar (no repeat, no vector load of the input); NumPy's
    numbers."""
    ir = "output0[N, F] +=! input0[N, F % 3] * input1[F] where F in 16"
    inputs = {"input0": {"dtype": "float32", "shape": [2, 3]}, "input1": {"dtype": "float32", "shape": [16]}}
    sched = ("builtin.module {\n  transform.named_sequence @__transform_main(%root: !transform.any_op) {\n"
             '    %f = transform.einc.match stmt "output0" axis "F" in %root\n'
             "    transform.einc.vectorize %f\n    transform.yield\n  }\n}\n")  # fmt: skip
    comp = Compilation(ir, "<r>", inputs, None, "c", sched)
    source = comp.run_until("source")
    assert "vrepeat" not in source and "vload_repeat" not in str(comp.results["target"]), source
    rng = np.random.default_rng(28)
    arrays = {k: rng.uniform(-2, 2, v["shape"]).astype(np.float32) for k, v in inputs.items()}
    a, b = (arrays[k].astype(np.float64) for k in ("input0", "input1"))
    want = a[:, np.arange(16) % 3] * b
    assert max_error(comp.kernel()(**arrays)["output0"], want) <= tolerance("float32"), source
