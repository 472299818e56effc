"""transform.einc.prefetch (einc/transforms/prefetch.py): a tensor's next tile prefetched at
the top of a loop's body, one `egpu.prefetch` per cache line of the box's leading edge,
guarded inside the tensor. C prints `__builtin_prefetch`, the other targets nothing; on every
target the numbers stay NumPy's (a padded convolution prefetching its input's next row at the
output-row loop, two rows ahead at the window-row loop, the output's next image at the batch
loop). Refusals are located schedule errors."""

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
input input0: float32[2, 4, 6, 7]
input input1: float32[5, 4, 3, 3]
output0[N, F, HO, WO] +=! (input0[N, C, HO + KH - 1, WO + KW - 1].when(
    [HO + KH - 1 >= 0, HO + KH - 1 < 6, WO + KW - 1 >= 0, WO + KW - 1 < 7], 0.0)
    * input1[F, C, KH, KW]) where HO in 6, WO in 7
"""

RUN_TARGETS = ("c", "opencl", "sycl", "hlsl", "poplar", "cuda")


def _script(target: str, extra: str = "") -> str:
    """The same script on every target (no loop bound: a device runs the nest in one work-item)."""
    lines = ['%n = transform.einc.match stmt "output0" axis "N" in %root',
             '%h = transform.einc.match stmt "output0" axis "HO" in %root',
             '%k = transform.einc.match stmt "output0" axis "KH" in %root',
             '%p = transform.einc.prefetch "input0" at %h by 1',
             '%q = transform.einc.prefetch "input0" at %k by 2',
             '%r = transform.einc.prefetch "output0" at %n by 1']  # fmt: skip
    if extra:
        lines.append(extra)
    body = "\n".join(f"    {line}" for line in [*lines, "transform.yield"])
    return f"builtin.module {{\n  transform.named_sequence @__transform_main(%root: !transform.any_op) {{\n{body}\n  }}\n}}\n"


WRAP_SCRIPT = """builtin.module {
  transform.named_sequence @__transform_main(%root: !transform.any_op) {
    %n = transform.einc.match stmt "output0" axis "N" in %root
    %f = transform.einc.match stmt "output0" axis "F" in %root
    %f2, %n2 = transform.einc.reorder %f, %n
    %h = transform.einc.match stmt "output0" axis "HO" in %root
    %p = transform.einc.prefetch "input0" at %h by 1
    transform.yield
  }
}
"""
"""The output-row loop directly inside the batch loop (the filters outermost): its rows past
the image are the next image's first rows."""


def _output_script() -> str:
    """The output staged per output row and its next row prefetched there."""
    script = _script("c").replace('%p = transform.einc.prefetch "input0" at %h by 1',
                                  '%w = transform.einc.cache_write "output0" at %h\n    %p = transform.einc.prefetch "output0" at %h by 1')
    return script.replace('%q = transform.einc.prefetch "input0" at %k by 2', "").replace('%r = transform.einc.prefetch "output0" at %n by 1', "")


@functools.cache
def compilation(target: str, variant: str = "clamped") -> Compilation:
    schedule = {"clamped": _script(target), "wrapped": WRAP_SCRIPT, "output": _output_script()}[variant]
    comp = Compilation(PROGRAM, "<prefetch>", target=target, schedule=schedule)
    comp.run_until("source")
    return comp


def _conv(x: np.ndarray, w: np.ndarray) -> np.ndarray:
    x = np.pad(x, ((0, 0), (0, 0), (1, 1), (1, 1)))
    out = np.zeros((x.shape[0], w.shape[0], 6, 7))
    for i in range(3):
        for j in range(3):
            out += np.einsum("nchw,fc->nfhw", x[:, :, i : i + 6, j : j + 7], w[:, :, i, j])
    return out


def test_c_prints_a_prefetch_per_line_of_the_next_row() -> None:
    """The output-row loop prefetches row HO + 2 (the box of one output row is rows HO - 1
    to HO + 1; one iteration ahead, its new row) of each of the 4 input channels: a 7-element
    row is one cache line's worth, its first and last element; a row past the image is
    clamped to its last (`einc_minsi_i64(HO + 2, 5)`). The window-row loop's and the batch
    loop's prefetches are there too; a prefetch writes nothing, and the other targets print
    none."""
    source = compilation("c").source_text()
    assert source.count("__builtin_prefetch(&input0[") >= 4, source
    assert re.search(r"__builtin_prefetch\(&output0\[", source), source
    assert "einc_minsi_i64(HO + 2, 5)" in source, source
    for target in ("opencl", "cuda"):
        comp = Compilation(PROGRAM, "<prefetch>", target=target, schedule=_script(target))
        assert "prefetch" not in comp.run_until("source"), target


def test_c_prefetches_the_next_outer_iterations_first_rows() -> None:
    """Where the loop around the output-row loop moves the input too (here the batch loop:
    the filters reordered outermost), the rows past the image's end are the next image's
    first rows (`(HO + 2) % 6` of image `N + (HO + 2) / 6`), fetched during this image's last
    rows; the image index is clamped to the last image (the last outer iteration's)."""
    source = compilation("c", "wrapped").source_text()
    assert "(HO + 2) % 6" in source, source
    assert "einc_minsi_i64(N + (HO + 2) / 6, 1)" in source, source
    assert "einc_minsi_i64(HO + 2, 5)" not in source, source


@pytest.mark.parametrize("variant", ["clamped", "wrapped", "output"])
@pytest.mark.parametrize("target", [pytest.param(t, marks=[getattr(pytest.mark, t)] if t != "c" else [], id=t)
                                    for t in RUN_TARGETS])  # fmt: skip
def test_target_matches_numpy(target: str, variant: str) -> None:
    require_run(target)
    comp = compilation(target, variant)
    seed = fresh_seed() % 2**32
    rng = np.random.default_rng(seed)
    shapes = {"input0": (2, 4, 6, 7), "input1": (5, 4, 3, 3)}
    inputs = {k: (rng.uniform(0.5, 2.0, s) * rng.choice([-1.0, 1.0], s)).astype(np.float32) for k, s in shapes.items()}
    outputs = {o.name: poisoned(o.shape, o.dtype) for o in comp.program.outputs}
    comp.kernel().run({k: v.copy() for k, v in inputs.items()}, outputs)
    want = _conv(inputs["input0"].astype(np.float64), inputs["input1"].astype(np.float64))
    check_reference("output0", outputs["output0"], want, "float32", 36, f"{target}, seed {seed}")


@pytest.mark.parametrize(("extra", "message"), [
    ('%x = transform.einc.prefetch "input1" at %h by 1', "does not move with the loop"),
    ('%x = transform.einc.prefetch "nothing" at %h by 1', "is not accessed inside"),
])  # fmt: skip
def test_refusals_are_located(extra: str, message: str) -> None:
    with pytest.raises(EincError, match=message) as caught:
        Compilation(PROGRAM, "<prefetch>", target="c", schedule=_script("c", extra)).run_until("scheduled")
    assert caught.value.loc is not None


def test_a_distance_outside_1_to_64_is_a_parse_error() -> None:
    with pytest.raises(EincError, match="distance 0 is not in 1..64"):
        Compilation(PROGRAM, "<prefetch>", target="c", schedule=_script("c").replace("at %h by 1", "at %h by 0")).run_until("scheduled")


GROUPED = "output0[N, F, HO, WO] +=! input0[N, F // 8 * 8 + C, HO + KH, WO + KW] * input1[F, C, KH, KW] where HO in 28, WO in 28"


@pytest.mark.parametrize(("batch", "prefetched"), [(16, True), (1, False)])
def test_the_cpu_default_prefetches_a_large_grouped_input(batch: int, prefetched: bool, monkeypatch: pytest.MonkeyPatch) -> None:
    """A grouped convolution of 8 channels per group blocked over two groups per 16-lane
    vector (AVX-512; the blocked form, `policy.nopairs`: the default with 16 lanes is the pair
    form, tests/test_hoist_fill.py): its input (128 channels of 30 x 30) prefetched one output
    row ahead where it holds PREFETCH_MIN_BYTES or more (batch 16: 7.4 MB), not at batch 1
    (461 KB, in cache between calls). Its rows past the image are the next pair of groups'
    first rows (the loop over pairs of groups moves the input's channels; a channel tile of
    one iteration, so no tile ahead to prefetch)."""
    from einc.schedule.policies.cpu import PREFETCH_MIN_BYTES, Choices, default_schedule as cpu_default
    from einc.targets.c import CTarget

    monkeypatch.setenv("EINC_C_VECTOR_BITS", "512")
    inputs = {"input0": {"dtype": "float32", "shape": [batch, 128, 30, 30]},
              "input1": {"dtype": "float32", "shape": [128, 8, 3, 3]}}  # fmt: skip
    assert (batch * 128 * 30 * 30 * 4 >= PREFETCH_MIN_BYTES) == prefetched
    loops = Compilation(GROUPED, "<grouped>", inputs, None, "c", use_records=False).run_until("loops")
    schedule = cpu_default(CTarget, loops, Choices(pair_lanes=False), split_conditions=True)
    assert schedule is not None
    source = Compilation(GROUPED, "<grouped>", inputs, None, "c", schedule).run_until("source")
    assert "einc_vbroadcast_runs2_f32x16(" in source, source
    assert ("__builtin_prefetch(&input0[" in source) == prefetched, source
    # the last output rows of a pair of groups fetch the next pair's first input rows
    assert ("(HO + 3) % 30" in source and "(HO + 3) / 30 * 16, 127)" in source) == prefetched, source
    assert "__builtin_prefetch(&input1" not in source and "__builtin_prefetch(&output0" not in source


def test_a_prefetch_of_the_output_keeps_its_tiles_zeroed_in_registers() -> None:
    """A prefetch of a staged output (its next row's lines, at the output-row loop) reads and
    writes nothing: einc-init-accumulators still starts each staged tile at 0 and drops the
    fill nest (the output is neither zeroed in memory nor read back)."""
    source = compilation("c", "output").source_text()
    assert "__builtin_prefetch(&output0[" in source, source
    assert not re.search(r"= output0\[", source), source  # no read-back of the output
    assert not re.search(r"output0\[[^\]]*\] = 0\.0f", source), source  # no fill nest
