"""`transform.einc.pack_rows` (einc.transforms.pack_rows): the staged input of the grouped
convolution's pair form packed row by row in the output row loop (README, "The pair form's
input pack in the row loop"). Checked: NumPy's numbers from the C kernel and the egpu
interpreter, by a hand schedule and by the CPU policy (maps whose rows and columns the tiles
do not divide: 3 x 9, 2 x 13, 1 x 5), the C's shape (the copy-in inside the row loop, one new
row an iteration, a prologue for the first window, the halo's frame fill before the rows),
and the refusals (a located error, the IR unchanged)."""

from __future__ import annotations

import re
from typing import Any

import numpy as np
import pytest
from xdsl.dialects.builtin import ModuleOp

from einc.compiler.driver import Compilation
from einc.errors import EincError
from einc.semantics.compare import max_error, tolerance
from einc.semantics.egpu import run_lowered
from einc.targets.c import CTarget
from tests.test_pair_lanes import PADDED, PADDED_INPUTS, PADDED_STAGED, _padded_answer, _padded_schedule

COPY_IN = r"input0_local\[[^\]]*\] = input0\[|einc_vloadn?_f32x16\(&input0\["
"""A copy from the tensor into the staged input: scalar, or (512-bit vectors) its rows loaded
whole or masked and interleaved (einc.transforms.interleave_copy)."""


@pytest.mark.parametrize("target", ["c", "cuda"])
def test_the_pair_forms_input_packed_in_the_row_loop(target: str) -> None:
    """The pair form of tests/test_pair_lanes.py (5 x 6 map, 3-row window, its input staged
    per pair of groups with its halo), then `pack_rows %x at HO`: row 1 before the rows,
    row HO + 2 (up to the last interior row, 5) at the top of each output row; NumPy's
    numbers on C and on the egpu interpreter (CUDA's lowering)."""
    sched = _padded_schedule(target, [*PADDED_STAGED, "transform.einc.pack_rows %x at %r2"])
    comp = Compilation(PADDED, "<pairs>", PADDED_INPUTS, None, target, sched)
    source = comp.run_until("source")
    if target == "c":
        body = source[source.index("for (int64_t HO = 0; HO < 5; HO++) {") :]
        before = source[: source.index("for (int64_t HO = 0; HO < 5; HO++) {")]
        # the prologue: row 1 only; the frame fill (rows 0 and 6, columns 0 and 7) before it
        assert re.search(r"for \(int64_t input0_c3 = 1; input0_c3 < 2; input0_c3\+\+\)", before), source
        assert re.search(r"for \(int64_t input0_h2\w* = 6; input0_h2\w* < 7;", before), source
        # in the row loop, first: row HO + 2 while below 6 (one row: a constant trip count
        # under a guard, no min), copied from the tensor
        head = body[: body.index("output0_local")]
        assert re.search(r"\{\s*if \(HO <= 3\) \{\s*for \(int64_t input0_c0", head), source
        assert re.search(r"for \(int64_t input0_c3 = HO \+ 2; input0_c3 < HO \+ 3; input0_c3\+\+\)", head), source
        assert re.search(COPY_IN, head), source
        assert len(re.findall(r"for \(int64_t input0_c0 ", source)) == 2, source  # prologue + row loop
    rng = np.random.default_rng(31)
    arrays = {k: rng.uniform(-2, 2, v["shape"]).astype(np.float32) for k, v in PADDED_INPUTS.items()}
    want = _padded_answer(arrays)
    if target == "c":
        assert max_error(comp.kernel()(**arrays)["output0"], want) <= tolerance("float32"), source
    else:
        assert max_error(run_lowered(comp.results["target"], arrays, target=target)["output0"], want) <= tolerance("float32")


def _grouped(h: int, w: int) -> tuple[str, dict[str, Any]]:
    ir = (f"output0[N, F, HO, WO] +=! input0[N, F // 8 * 8 + C, HO + KH - 1, WO + KW - 1]"
          f".when([HO + KH - 1 >= 0, HO + KH - 1 < {h}, WO + KW - 1 >= 0, WO + KW - 1 < {w}], 0.0)"
          f" * input1[F, C, KH, KW] where HO in {h}, WO in {w}")  # fmt: skip
    return ir, {"input0": {"dtype": "float32", "shape": [2, 32, h, w]}, "input1": {"dtype": "float32", "shape": [32, 8, 3, 3]}}


def grouped_policy(h: int, w: int, choices: Any, monkeypatch: pytest.MonkeyPatch) -> tuple[Compilation, str, str]:  # noqa: ANN401 - Choices
    """The grouped convolution `_grouped(h, w)` under the CPU policy with `choices`
    (einc.schedule.policies.cpu.Choices) at 16 float lanes: its compilation, the schedule's
    text and the C source."""
    from einc.schedule.policies.cpu import default_schedule as cpu_default

    monkeypatch.setenv("EINC_C_VECTOR_BITS", "512")
    ir, inputs = _grouped(h, w)
    loops = Compilation(ir, "<grouped>", inputs, None, "c", use_records=False).run_until("loops")
    assert isinstance(loops, ModuleOp)
    schedule = cpu_default(CTarget, loops, choices)
    assert schedule is not None
    comp = Compilation(ir, "<grouped>", inputs, None, "c", schedule)
    return comp, str(schedule), str(comp.run_until("source"))


def check_grouped_numbers(comp: Compilation, h: int, w: int, nan_at: tuple[int, int, int, int], source: str) -> None:
    """The compiled grouped convolution `_grouped(h, w)` gives NumPy's numbers (float64
    reference, random inputs, one input NaN at `nan_at`: its group's outputs around it NaN)
    from the C kernel and from the egpu interpreter."""
    rng = np.random.default_rng(h * 16 + w)
    _, inputs = _grouped(h, w)
    arrays = {k: rng.uniform(-1, 1, v["shape"]).astype(np.float32) for k, v in inputs.items()}
    arrays["input0"][nan_at] = np.nan
    want = _grouped_answer(arrays, h, w)
    got = comp.kernel()(**arrays)["output0"]
    assert np.isnan(want).any() and np.array_equal(np.isnan(got), np.isnan(want)), source
    assert max_error(np.nan_to_num(got), np.nan_to_num(want)) <= tolerance("float32"), source
    lowered_module = comp.results["target"]
    assert isinstance(lowered_module, ModuleOp)
    lowered = run_lowered(lowered_module, arrays, target="c")["output0"]
    assert max_error(np.nan_to_num(lowered), np.nan_to_num(want)) <= tolerance("float32")


def _grouped_answer(arrays: dict[str, np.ndarray], h: int, w: int) -> np.ndarray:
    x = np.pad(arrays["input0"].astype(np.float64), ((0, 0), (0, 0), (1, 1), (1, 1)))
    win = np.lib.stride_tricks.sliding_window_view(x, (3, 3), axis=(2, 3)).reshape(2, 4, 8, h, w, 3, 3)
    want = np.einsum("ngchwij,gfcij->ngfhw", win, arrays["input1"].astype(np.float64).reshape(4, 8, 8, 3, 3))
    return want.reshape(2, 32, h, w)


@pytest.mark.parametrize("h, w", [(3, 9), (2, 13), (1, 5)])
def test_the_policys_pair_form_packs_its_input_in_the_row_loop(h: int, w: int, monkeypatch: pytest.MonkeyPatch) -> None:
    """The CPU policy's pair form (16 float lanes: groups of 8 channels, forced by
    `Choices(pair_lanes=True)`) packs the pair's input in its output row loop with
    `Choices.pack_rows` (`policy.pairs.rows`; by default where the input is under 4 MiB,
    as here), the whole plane before the rows without it (`policy.pairs.plane`); both give NumPy's numbers from the kernel and from the egpu
    interpreter, batch 2 (the pack per image and pair of groups)."""
    from einc.schedule.policies.cpu import Choices, default_schedule as cpu_default

    monkeypatch.setenv("EINC_C_VECTOR_BITS", "512")
    ir, inputs = _grouped(h, w)
    loops = Compilation(ir, "<grouped>", inputs, None, "c", use_records=False).run_until("loops")
    rng = np.random.default_rng(h * 16 + w)
    arrays = {k: rng.uniform(-1, 1, v["shape"]).astype(np.float32) for k, v in inputs.items()}
    want = _grouped_answer(arrays, h, w)
    for choice in (None, True, False):
        schedule = cpu_default(CTarget, loops, Choices(pair_lanes=True, pack_rows=choice))
        assert schedule is not None
        rows = choice is not False
        assert ("transform.einc.pack_rows" in str(schedule)) == rows, str(schedule)
        comp = Compilation(ir, "<grouped>", inputs, None, "c", schedule)
        source = comp.run_until("source")
        assert "einc_vrepeat64_f32x16(&input0_local[" in source, source  # the pair form
        found = re.search(r"for \(int64_t HO\w* = 0; HO\w* < \d+; HO\w*\+\+\)", source)  # (its last row may be peeled)
        assert found, source
        rows_loop = found.start()
        assert re.search(COPY_IN, source), source
        copies = [m.start() for m in re.finditer(r"for \(int64_t input0_c0 ", source)]  # the copy-in nests
        if rows:  # a prologue (row 1, where the window's first row is the halo's) and the row loop's copy
            assert len(copies) == 2 and copies[0] < rows_loop < copies[1], source
        else:
            assert len(copies) == 1 and copies[0] < rows_loop, source
        assert max_error(comp.kernel()(**arrays)["output0"], want) <= tolerance("float32"), source
        lowered = run_lowered(comp.results["target"], arrays, target="c")
        assert max_error(lowered["output0"], want) <= tolerance("float32")


@pytest.mark.parametrize(("line", "message"), [
    ("transform.einc.pack_rows %x at %r3", "is not in the block of the staged buffer"),
    ("transform.einc.pack_rows %fw at %r2", "moves 0 dimensions with it, not one"),
    ("transform.einc.pack_rows %x at %r1", "is not in the block of the staged buffer"),
])  # fmt: skip
def test_refusals_are_located(line: str, message: str) -> None:
    """pack_rows where the loop is not beside the buffer's copy-in (the column tile, inside
    the row loop; the pair loop, around it) or the buffer's reads do not slide with the loop
    (the filter, the same at every row): a located error at the op."""
    with pytest.raises(EincError, match=re.escape(message)) as caught:
        Compilation(PADDED, "<pairs>", PADDED_INPUTS, None, "c", _padded_schedule("c", [*PADDED_STAGED, line])).run_until("source")
    assert ":22:" in str(caught.value), str(caught.value)
