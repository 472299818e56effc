"""einc-unswitch on padded reads (`.when`: an `scf.if` that yields the element or 0.0): a
padded 3x3 convolution's row test is invariant in the loops over columns, filters and KW,
so those loops are versioned on it (einc/passes/unswitch.py). C and Poplar do it by default;
the OpenCL, SYCL, CUDA, HIP and HLSL pipelines run `einc-unswitch{when=false}` (no measured
win on PoCL), so there the pass is switched to `when=true` here to test the mechanism on
their IR. Results are NumPy's on C, on OpenCL and, for CUDA, HIP and Poplar, on the egpu
interpreter; in the code, no `.when` keeps a conjunct that its nearest loop does not change
(the row test is gone from the inner loops of each version), and the versions are there."""

from __future__ import annotations

import numpy as np
import pytest
from xdsl.dialects import affine, scf

from einc.compiler.driver import Compilation
from einc.passes.unswitch import _nearest_loop
from einc.semantics.egpu import run_lowered
from einc.transforms.unswitch import invariant_part
from tests.test_device_differential import run_on_device
from tests.test_device_targets import require_run
from tests.test_schedules import script

H, W = 5, 6
PADDED = (
    "output0[N, F, HO, WO] +=! (input0[N, C, HO + KH - 1, WO + KW - 1].when("
    f"[HO + KH - 1 >= 0, HO + KH - 1 < {H}, WO + KW - 1 >= 0, WO + KW - 1 < {W}], 0.0) * input1[F, C, KH, KW]) "
    f"where HO in {H}, WO in {W}"
)
INPUTS = {"input0": {"dtype": "float32", "shape": [1, 3, H, W]}, "input1": {"dtype": "float32", "shape": [4, 3, 3, 3]}}
# C reads the input directly under this schedule (no framed pack): the `.when` stays in the loops
C_SCHEDULE = script('%wo = transform.einc.match stmt "output0" axis "WO" in %root', "%o, %i = transform.einc.tile %wo by 3")


def _reference(arrays: dict[str, np.ndarray]) -> np.ndarray:
    x = np.pad(arrays["input0"].astype(np.float64), ((0, 0), (0, 0), (1, 1), (1, 1)))
    w = arrays["input1"].astype(np.float64)
    out = np.zeros((1, 4, H, W))
    for kh in range(3):
        for kw in range(3):
            out += np.einsum("nchw,fc->nfhw", x[:, :, kh:kh + H, kw:kw + W], w[:, :, kh, kw])
    return out


def _compile(target: str, when: bool = True) -> Compilation:
    comp = Compilation(PADDED, "<padded>", INPUTS, None, target, C_SCHEDULE if target == "c" else None)
    base = comp.target_obj
    pipeline = base.pipeline.replace("einc-unswitch{when=false}", "einc-unswitch") if when else base.pipeline
    comp.target_obj = type(f"When{base.__name__}", (base,), {"pipeline": pipeline})
    comp.run_until("source")
    return comp


def _arrays() -> dict[str, np.ndarray]:
    rng = np.random.default_rng(22)
    return {n: (rng.uniform(0.5, 1.5, v["shape"]) * rng.choice([-1, 1], v["shape"])).astype(np.float32) for n, v in INPUTS.items()}


@pytest.mark.parametrize("target", ["c", "opencl", "cuda", "hip", "poplar"])
def test_padded_convolution_unswitched_matches_numpy(target: str) -> None:
    comp = _compile(target)
    module = comp.module("target")
    reads = [op for op in module.walk() if isinstance(op, scf.IfOp) and op.results]
    assert reads, "the padded read's .when is gone: nothing left to unswitch"
    clean = [(loop := _nearest_loop(r)) is not None and invariant_part(r.cond, loop) is None for r in reads]
    # each version's inner loop tests only what it changes (the columns); Poplar's register
    # tile reads 4 rows, each with its own row test: the 8 versions (max-versions) run out
    # first, and only some reads lose theirs
    assert all(clean) if target != "poplar" else any(clean)
    versions = [op for op in module.walk() if isinstance(op, scf.IfOp) and not op.results
                and any(isinstance(inner, affine.ForOp) for inner in op.true_region.walk())
                and any(isinstance(inner, affine.ForOp) for inner in op.false_region.walk())]  # fmt: skip
    assert versions, "no loop was versioned on the row test"
    arrays = _arrays()
    if target in ("cuda", "hip", "poplar"):
        got = run_lowered(module, arrays)["output0"]
    elif target == "c":
        got = comp.kernel()(**arrays)["output0"]
    else:
        require_run(target)
        got = run_on_device(comp, arrays)["output0"]
    assert np.abs(got - _reference(arrays)).max() <= 1e-4


def test_opencl_default_keeps_the_when() -> None:
    """OpenCL's pipeline leaves the `.when` where it is (its row test inside the column loop)."""
    module = _compile("opencl", when=False).module("target")
    reads = [op for op in module.walk() if isinstance(op, scf.IfOp) and op.results]
    assert reads and any((loop := _nearest_loop(r)) is not None and invariant_part(r.cond, loop) is not None for r in reads)
