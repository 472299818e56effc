"""`transform.einc.unswitch` (einc/dialects/einc_transform.py UnswitchOp; the policy of
einc/passes/unswitch.py) used by hand: a register tile of a matmul whose rows do not divide
(N = 20 rows in tiles of `size`, K moved between the tile loops, the tile's rows unrolled
completely under guards `if (k < 20 - N_o)`), K unswitched before the pass would: two
versions of K, the whole tile's and the last tile's, neither with a condition; the versions'
M loops matched in the result handle and vectorized. The numbers are NumPy's on C and on
OpenCL; a loop with no guard to hoist is refused at the op (lit: schedules/unswitch.mlir,
schedules/invalid_unswitch.mlir)."""

from __future__ import annotations

import re

import numpy as np
import pytest

import einc
from einc.compiler.driver import Compilation
from einc.errors import ScheduleError
from tests.test_device_differential import run_on_device
from tests.test_device_targets import require_run
from tests.test_poplar import loop_bodies
from tests.test_schedules import MATMUL, MM, check, script

TILE = [
    '%n = transform.einc.match stmt "output0" axis "N" in %root',
    '%k = transform.einc.match stmt "output0" axis "K" in %root',
    '%m = transform.einc.match stmt "output0" axis "M" in %root',
]


def tile_lines(size: int, bind: bool = False) -> list[str]:
    """N tiled by `size`, K between N.o and N.i, N.i unrolled completely under guards, K
    unswitched and the versions' M loops vectorized (N.o bound to block.x with `bind`)."""
    return [*TILE, f"%no, %ni = transform.einc.tile %n by {size}",
            "%a, %b, %c, %d = transform.einc.reorder %no, %k, %ni, %m",
            f"%u = transform.einc.unroll %c by {size}",
            *(['transform.einc.bind %a to "block.x"'] if bind else []),
            "%v = transform.einc.unswitch %b",
            '%mv = transform.einc.match stmt "output0" axis "M" in %v',
            "transform.einc.vectorize %mv"]  # fmt: skip


@pytest.mark.parametrize("size", [3, 7])
def test_unswitch_by_hand_on_c(size: int) -> None:
    src = check(MATMUL, MM, script(*tile_lines(size)))
    k_loops = loop_bodies(src, "for (int64_t K = 0; ")
    assert len(k_loops) == 2 and not any("if (" in body for body in k_loops)
    assert f"if ({size - 1} < " in src  # the strongest guard, once per tile before K


def test_unswitch_handle_holds_the_versions_in_order() -> None:
    """The result holds both versions of K, the whole tile's (every guard true) first."""
    comp = Compilation(MATMUL, "<test>", MM, None, "c", script(*tile_lines(3)[:-2]))
    module = comp.run_until("scheduled")
    from xdsl.dialects import affine, scf

    ks = [op for op in module.walk() if isinstance(op, affine.ForOp) and op.attributes["einc.axis"].data == "K"
          and "einc.init" not in op.attributes]  # fmt: skip
    assert len(ks) == 2 and all(isinstance(k.parent_op(), scf.IfOp) for k in ks)
    rows = [sum(isinstance(op, affine.ForOp) for op in k.body.walk()) for k in ks]
    assert rows == [3, 20 % 3]  # the whole tile's rows, then the last tile's


def test_unswitch_by_hand_on_opencl() -> None:
    require_run("opencl")
    comp = Compilation(MATMUL, "<test>", MM, None, "opencl", script(*tile_lines(7, bind=True)))
    comp.run_until("source")
    rng = np.random.default_rng(26)
    arrays = {n: rng.uniform(-1, 1, v["shape"]).astype(np.float32) for n, v in MM.items()}
    got = run_on_device(comp, arrays)["output0"]
    want = arrays["input0"].astype(np.float64) @ arrays["input1"].astype(np.float64)
    assert np.abs(got - want).max() <= 1e-4
    assert "if (6 < " in comp.results["source"]


def test_unswitch_without_a_guard_is_refused_at_the_op() -> None:
    lines = [*TILE, "%v = transform.einc.unswitch %k"]
    with pytest.raises(ScheduleError, match=re.escape(
            "cannot unswitch loop K of output0: no guard in its body (an if outside any inner loop) has a condition "
            "the loop does not change, in whole or in a conjunct: nothing to hoist")) as info:  # fmt: skip
        einc.compile(MATMUL, MM, schedule=script(*lines), use_records=False)
    assert info.value.loc is not None and (info.value.loc.line, info.value.loc.col) == (6, 5)  # the op's line
