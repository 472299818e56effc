"""transform.einc.cache_read ... halo (einc/transforms/halo.py): a padded window's input
staged with the part of its box outside the tensor, filled with the bounds guard's value,
and the guarded reads made plain reads of the buffer. On every target the numbers stay
NumPy's: a depthwise 3x3 window padded by 1, staged per channel plane (the copy-in clamped
to the tensor, no test), per output row (the rows above and below the image tested, the
columns clamped) and per window row; refusals are located schedule errors."""

from __future__ import annotations

import functools
import re

import numpy as np
import pytest

from einc.compiler.driver import Compilation
from einc.errors import EincError
from einc.runtime.arrays import poisoned
from tests.oracle.compare import check_reference
from tests.oracle.seeds import fresh_seed
from tests.test_device_targets import require_run

PROGRAM = """
input input0: float32[2, 3, 5, 7]
input input1: float32[3, 1, 3, 3]
output0[N, F, HO, WO] +=! (input0[N, F, HO + KH - 1, WO + KW - 1].when(
    [HO + KH - 1 >= 0, HO + KH - 1 < 5, WO + KW - 1 >= 0, WO + KW - 1 < 7], 0.0)
    * input1[F, 0, KH, KW]) where HO in 5, WO in 7
"""

RUN_TARGETS = ("c", "opencl", "sycl", "hlsl", "poplar", "cuda")


def _script(axis: str, op: str = 'transform.einc.cache_read "input0" at %l halo') -> str:
    lines = [f'%l = transform.einc.match stmt "output0" axis "{axis}" in %root', f"%b = {op}", "transform.yield"]
    body = "\n".join(f"    {line}" for line in lines)
    return f"builtin.module {{\n  transform.named_sequence @__transform_main(%root: !transform.any_op) {{\n{body}\n  }}\n}}\n"


@functools.cache
def compilation(target: str, axis: str) -> Compilation:
    comp = Compilation(PROGRAM, "<halo>", target=target, schedule=_script(axis))
    comp.run_until("source")
    return comp


def _depthwise(x: np.ndarray, w: np.ndarray) -> np.ndarray:
    x = np.pad(x, ((0, 0), (0, 0), (1, 1), (1, 1)))
    win = np.lib.stride_tricks.sliding_window_view(x, (3, 3), axis=(2, 3))
    return np.einsum("nfhwij,fij->nfhw", win, w[:, 0])


def test_the_plane_is_filled_then_copied_inside_the_tensor_only() -> None:
    """Per channel: a 7 x 9 buffer (the 5 x 7 plane and its halo) zeroed, the plane copied
    into rows 1..5 and columns 1..7 with no test, the window's reads unguarded."""
    source = compilation("c", "F").source_text()
    assert "float input0_local[63]" in source, source
    assert re.search(r"for \(int64_t input0_c2 = 1; input0_c2 < 6; ", source), source
    assert re.search(r"for \(int64_t input0_c3 = 1; input0_c3 < \d+; ", source), source
    assert "if (" not in source and "?" not in source, source


def test_a_moving_box_tests_its_rows_and_clamps_its_columns() -> None:
    """Per output row: the 3 x 9 box's rows above and below the image are tested (their
    offset moves with HO), its columns clamped to the tensor; the window's reads unguarded."""
    source = compilation("c", "HO").source_text()
    assert "float input0_local[27]" in source, source
    assert re.search(r"for \(int64_t input0_c3 = 1; input0_c3 < 8; ", source), source
    assert source.count("if (") == 1, source  # the copy-in's row test, nothing in the window


@pytest.mark.parametrize("axis", ["F", "HO", "KH"])
@pytest.mark.parametrize("target", [pytest.param(t, marks=[getattr(pytest.mark, t)] if t != "c" else [], id=t)
                                    for t in RUN_TARGETS])  # fmt: skip
def test_target_matches_numpy(target: str, axis: str) -> None:
    require_run(target)
    comp = compilation(target, axis)
    seed = fresh_seed() % 2**32
    rng = np.random.default_rng(seed)
    shapes = {"input0": (2, 3, 5, 7), "input1": (3, 1, 3, 3)}
    inputs = {k: (rng.uniform(0.5, 2.0, s) * rng.choice([-1.0, 1.0], s)).astype(np.float32) for k, s in shapes.items()}
    outputs = {o.name: poisoned(o.shape, o.dtype) for o in comp.program.outputs}
    comp.kernel().run({k: v.copy() for k, v in inputs.items()}, outputs)
    want = _depthwise(inputs["input0"].astype(np.float64), inputs["input1"].astype(np.float64))
    check_reference("output0", outputs["output0"], want, "float32", 9, f"{target}, seed {seed}")


@pytest.mark.parametrize(("op", "message"), [
    ('transform.einc.cache_read "input1" at %l halo', "no read of it inside is guarded by its bounds alone"),
    ('transform.einc.cache_read "nothing" at %l halo', "nothing"),
])  # fmt: skip
def test_refusals_are_located(op: str, message: str) -> None:
    with pytest.raises(EincError, match=message) as caught:
        Compilation(PROGRAM, "<halo>", target="c", schedule=_script("F", op)).run_until("scheduled")
    assert caught.value.loc is not None


@pytest.mark.parametrize("op", ['transform.einc.cache_write "output0" at %l halo',
                                'transform.einc.cache_read "input0" at %l in "shared" halo'])  # fmt: skip
def test_a_halo_is_for_a_local_read_only(op: str) -> None:
    with pytest.raises(EincError, match="halo is for cache_read into local memory only"):
        Compilation(PROGRAM, "<halo>", target="c", schedule=_script("F", op)).run_until("scheduled")


def test_a_guard_testing_more_than_the_bounds_is_kept() -> None:
    """A read guarded by something besides its bounds (here also `KW != 1`) keeps its guard:
    the halo op refuses (no read it could unguard) and says so."""
    program = PROGRAM.replace("WO + KW - 1 < 7]", "WO + KW - 1 < 7, KW != 1]")
    with pytest.raises(EincError, match="guarded by its bounds alone"):
        Compilation(program, "<halo>", target="c", schedule=_script("F")).run_until("scheduled")


@pytest.mark.parametrize("target", ["cuda", "hip"])
def test_device_target_ir_matches_numpy_in_the_egpu_interpreter(target: str) -> None:
    """CUDA and HIP without a GPU: their target-level IR (the halo's fill, the clamped
    copy-in and the unguarded reads in one work-item's private buffer) executed by the egpu
    interpreter."""
    from einc.semantics.egpu import run_lowered

    comp = Compilation(PROGRAM, "<halo>", target=target, schedule=_script("F"))
    rng = np.random.default_rng(7)
    inputs = {"input0": rng.uniform(-1, 1, (2, 3, 5, 7)).astype(np.float32),
              "input1": rng.uniform(-1, 1, (3, 1, 3, 3)).astype(np.float32)}  # fmt: skip
    got = run_lowered(comp.module("target"), inputs, target=target)
    want = _depthwise(inputs["input0"].astype(np.float64), inputs["input1"].astype(np.float64))
    check_reference("output0", got["output0"], want, "float32", 9, target)
