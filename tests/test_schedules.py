"""Schedules: each transform op on real programs against NumPy (C target), knobs, the default
schedule on every shared program, illegal schedules refused at the op's location, and random
legal schedules on random programs (tests/oracle/genprog.py) against the oracle."""

from __future__ import annotations

import random
import re
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, assume, given, note, settings
from hypothesis import strategies as st

import einc
from einc.targets import get_target
from einc.compiler.registry import get_all_passes
from einc.schedule.default import default_schedule_text, register_tile
from einc.compiler.driver import Compilation, lower_to_stage
from einc.semantics.compare import max_error, random_inputs, tolerance
from einc.errors import ScheduleError
from einc.transforms import loop_transforms as lt
from einc.semantics.reference import run_reference
from einc.schedule.script import Schedule
from einc.targets.c import CTarget
from tests.oracle.budget import examples
from tests.oracle.compare import check_output
from tests.oracle.corpus import REFUSED_BY_DESIGN, check_case
from tests.oracle.genprog import GenProgram, programs
from tests.oracle.genschedule import OPS as GEN_OPS
from tests.oracle.genschedule import random_script, script_case
from tests.programs import PROGRAMS

C_LANES = CTarget.vector_lanes()
"""float32 lanes of the C target's vectors on this host (16 with AVX-512, 8 with AVX2)."""

MATMUL = "output0[N, M] +=! input0[N, K] * input1[K, M]"
SOFTMAX = (
    "temp0[N] >=! input0[N, C]; temp1[N] +=! (input0[N, C] - temp0[N]).call(`exp`); "
    "output0[N, C] = (input0[N, C] - temp0[N]).call(`exp`) / temp1[N]"
)


def f32(*shape: int) -> dict:
    return {"dtype": "float32", "shape": list(shape)}


def script(*lines: str) -> str:
    body = "\n".join(f"    {line}" for line in [*lines, "transform.yield"])
    return (
        "builtin.module {\n  transform.named_sequence @__transform_main(%root: !transform.any_op) {\n"
        f"{body}\n  }}\n}}\n"
    )


def check(ir: str, inputs: dict, schedule: object, extra: list[str] | None = None) -> str:
    """Compile with `schedule` on C, run on random inputs, compare with NumPy; the source."""
    comp = Compilation(ir, "<test>", inputs, extra, "c", schedule)
    kernel = comp.kernel()
    arrays = {k: np.asarray(v) for k, v in random_inputs(comp.program, np.random.default_rng(0)).items()}
    for k, v in arrays.items():  # small indices: safe for every gather of the shared programs
        if v.dtype.kind in "iu":
            arrays[k] = (v % 4).astype(v.dtype) + 1
    got = kernel(**arrays)
    want = run_reference(comp.results["ein"], arrays)
    for name, value in want.items():
        err = max_error(got[name], value)
        assert err <= tolerance(str(got[name].dtype)), f"{name}: error {err}"
    return kernel.source


MM = {"input0": f32(20, 12), "input1": f32(12, 24)}


# ---- each op on real programs ---------------------------------------------------------------


@pytest.mark.parametrize("size", [4, 5, 24, 100])
def test_tile_divisor_and_tail(size: int) -> None:
    src = check(MATMUL, MM, script(
        '%m = transform.einc.match stmt "output0" axis "M" in %root',
        f"%o, %i = transform.einc.tile %m by {size}",
    ))
    assert "M_o" in src
    if 24 % size:
        assert "einc_minsi_i64" in src


@pytest.mark.parametrize("size", [1, 3, 6, 7, 20])
def test_peel_then_tile_and_unroll_the_whole_tiles(size: int) -> None:
    """N (20 rows) peeled by `size`: the whole tiles are tiled without a min and unrolled, the
    remainder (vectorized) keeps the last rows; the result matches NumPy for every size."""
    src = check(MATMUL, MM, script(
        '%n0 = transform.einc.match stmt "output0" axis "N" in %root',
        '%k0 = transform.einc.match stmt "output0" axis "K" in %root',
        '%m0 = transform.einc.match stmt "output0" axis "M" in %root',
        "%n, %k, %m1 = transform.einc.reorder %n0, %k0, %m0",
        f"%main, %rest = transform.einc.peel %n by {size}",
        f"%no, %ni = transform.einc.tile %main by {size}",
        f"%u = transform.einc.unroll %ni by {size}",
        '%m = transform.einc.match stmt "output0" axis "M" in %rest',
        "transform.einc.vectorize %m",
    ))
    assert "einc_minsi_i64" not in src
    assert (f"for (int64_t N = {20 - 20 % size}; N < 20; N++)" in src) == (20 % size != 0)


@pytest.mark.parametrize("size", [3, 6, 7, 20])
def test_tile_then_peel_the_partial_tile(size: int) -> None:
    """N tiled by `size` (a min on the inner loop when it does not divide 20), then the tile
    loop peeled by 1: the whole tiles' inner loop has a constant bound and unrolls, the
    partial tile keeps its min; the result matches NumPy."""
    src = check(MATMUL, MM, script(
        '%n = transform.einc.match stmt "output0" axis "N" in %root',
        f"%no, %ni = transform.einc.tile %n by {size}",
        "%main, %rest = transform.einc.peel %no by 1",
        f"%u = transform.einc.unroll %ni by {size}",
    ))
    assert ("einc_minsi_i64" in src) == (20 % size != 0)


@pytest.mark.parametrize("size", [3, 6, 7])
def test_unroll_a_partial_tile_completely_under_guards(size: int) -> None:
    """N (20 rows) tiled by `size` (no peel): the inner loop `min(size, 20 - N_o)` unrolls
    completely, the copies the last tile may not reach each under a guard (`if (k < 20 - N_o)`),
    the others bare; the loop and its min are gone, and the result matches NumPy. By less
    than `size` it is refused (a partial tile unrolls completely only)."""
    lines = ['%n = transform.einc.match stmt "output0" axis "N" in %root', f"%no, %ni = transform.einc.tile %n by {size}"]
    src = check(MATMUL, MM, script(*lines, f"%u = transform.einc.unroll %ni by {size}"))
    assert "einc_minsi_i64" not in src and "N_i" not in src
    guarded = [k for k in range(1, size) if f"if ({k} < " in src]
    assert guarded == list(range(20 % size, size))  # the copies the last tile (20 % size rows) lacks
    with pytest.raises(ScheduleError, match=re.escape(
            f"cannot unroll loop N.i of output0 by {size - 1}: its upper bound is a min (a partial tile), "
            f"so it unrolls completely only (by {size} or more)")):  # fmt: skip
        einc.compile(MATMUL, MM, schedule=script(*lines, f"%u = transform.einc.unroll %ni by {size - 1}"))


@pytest.mark.parametrize("size", [3, 7])
def test_partial_register_tile_guards_are_unswitched_out_of_k(size: int) -> None:
    """A register tile on C: N (20 rows) tiled by `size`, K moved outside the tile loop,
    which unrolls completely under guards (`if (k < 20 - N_o)`): inside K, they depend on
    N_o only, so einc-unswitch tests them before K, two versions of K (the whole tile, the
    last one's 20 % size rows), neither with a condition. The result matches NumPy."""
    src = check(MATMUL, MM, script(
        '%n = transform.einc.match stmt "output0" axis "N" in %root',
        f"%no, %ni = transform.einc.tile %n by {size}",
        '%k = transform.einc.match stmt "output0" axis "K" in %root',
        '%m = transform.einc.match stmt "output0" axis "M" in %root',
        "%a, %b, %c, %d = transform.einc.reorder %no, %k, %ni, %m",
        f"%u = transform.einc.unroll %c by {size}",
    ))
    from tests.test_poplar import loop_bodies

    k_loops = loop_bodies(src, "for (int64_t K = 0; ")
    assert len(k_loops) == 2 and not any("if (" in body for body in k_loops)
    assert f"if ({size - 1} < " in src  # the guard, once per tile before K
    assert k_loops[0].count("for (int64_t M") == size and k_loops[1].count("for (int64_t M") == 20 % size


@pytest.mark.parametrize("line, message", [
    ("%a, %b = transform.einc.peel %n by 0", "peel size must be positive, got 0"),
    ("%a, %b = transform.einc.peel %n by 21", "cannot peel loop N of output0 by 21: it runs 20 iterations"),
    ("%a, %b = transform.einc.peel %ni by 3", "cannot peel loop N.i of output0: its bounds are not constant"),
])  # fmt: skip
def test_peel_refusals(line: str, message: str) -> None:
    lines = ['%n = transform.einc.match stmt "output0" axis "N" in %root',
             "%no, %ni = transform.einc.tile %n by 6", line]  # fmt: skip
    if "%ni" not in line:
        lines = [lines[0], line]
    with pytest.raises(ScheduleError, match=re.escape(message)):
        einc.compile(MATMUL, MM, schedule=script(*lines))


def test_default_matmul_knobs_with_and_without_a_peel_rest() -> None:
    """The default schedule peels i by its tile_i knob: any value of the knob is legal (a
    dividing one leaves the remainder handle empty, and the steps on it do nothing)."""
    big = {"input0": f32(130, 64), "input1": f32(64, 128)}
    comp = Compilation(MATMUL, "<test>", big, None, "c", None)
    text = default_schedule_text(get_target("c"), comp.run_until("loops"))
    assert text is not None
    schedule = Schedule.parse(text)
    for rows in schedule.knobs()["output0.tile_i"].options:
        check(MATMUL, big, schedule.with_values({"output0.tile_i": rows}))


def test_reorder_ikj_and_tile_band() -> None:
    src = check(MATMUL, MM, script(
        '%n = transform.einc.match stmt "output0" axis "N" in %root',
        '%m = transform.einc.match stmt "output0" axis "M" in %root',
        '%k = transform.einc.match stmt "output0" axis "K" in %root',
        "%mo, %mi = transform.einc.tile %m by 8",
        "%ko, %ki = transform.einc.tile %k by 5",
        "%a, %b, %c, %d, %e = transform.einc.reorder %n, %mo, %ko, %ki, %mi",
    ))
    assert src.index("K_i") < src.index("M_i")


@pytest.mark.parametrize("factor", [2, 5, 24])
def test_unroll_with_tail_or_fully(factor: int) -> None:
    src = check(MATMUL, MM, script(
        '%m = transform.einc.match stmt "output0" axis "M" in %root',
        f"%r = transform.einc.unroll %m by {factor}",
    ))
    if factor == 24:
        assert "for (int64_t M" not in src.split("output0[N * 24 + M] = 0.0f")[-1]


def test_parallelize_and_vectorize_print_pragmas() -> None:
    src = check(MATMUL, MM, script(
        '%n = transform.einc.match stmt "output0" axis "N" in %root',
        '%m = transform.einc.match stmt "output0" axis "M" in %root',
        '%k = transform.einc.match stmt "output0" axis "K" in %root',
        "%n2, %k2, %m2 = transform.einc.reorder %n, %k, %m",
        "transform.einc.parallelize %n2",
        "transform.einc.vectorize %m2",
    ))
    # the vectorized loop becomes vector code (einc-vectorize-loops): 24 = 16 + a tail of 8
    assert "#pragma omp parallel for" in src and f"einc_f32x{C_LANES}" in src


def test_fuse_init_into_reduction_and_epilogue() -> None:
    inputs = {"input0": f32(6, 33)}
    src = check(SOFTMAX, inputs, script(
        '%a = transform.einc.match stmt "temp0" axis "N" in %root',
        '%b = transform.einc.match stmt "temp1" axis "N" in %root',
        '%c = transform.einc.match stmt "output0" axis "N" in %root',
        '%ai = transform.einc.match stmt "temp0" axis "N" init in %root',
        '%bi = transform.einc.match stmt "temp1" axis "N" init in %root',
        "%f1 = transform.einc.fuse %ai into %a",
        "%f2 = transform.einc.fuse %bi into %b",
        "%f3 = transform.einc.fuse %f1 into %f2",
        "%f4 = transform.einc.fuse %f3 into %c",
        "transform.einc.parallelize %f4",
    ))
    assert src.count("for (int64_t N") == 1


def test_rfactor_makes_a_reduction_parallel() -> None:
    src = check("output0[N] +=! input0[N, C]", {"input0": f32(3, 64)}, script(
        '%n = transform.einc.match stmt "output0" axis "N" in %root',
        '%c = transform.einc.match stmt "output0" axis "C" in %root',
        "%p, %comb = transform.einc.rfactor %c by 4",
        '%ci = transform.einc.match stmt "output0" axis "C.i" in %root',
        "%p2, %n2, %ci2 = transform.einc.reorder %p, %n, %ci",
        "transform.einc.parallelize %p2",
    ))
    assert "output0_rf" in src and "#pragma omp parallel for" in src


def test_bind_marks_loops_within_the_thread_limit() -> None:
    loops = lower_to_stage(MATMUL, MM, stage="loops")
    sched = Schedule.parse(script(
        '%n = transform.einc.match stmt "output0" axis "N" in %root',
        '%m = transform.einc.match stmt "output0" axis "M" in %root',
        'transform.einc.bind %n to "block.x"',
        'transform.einc.bind %m to "thread.x" max_threads 32',
    ))
    out = sched.apply(loops, get_all_passes())
    assert 'einc.bind = "thread.x"' in str(out) and 'einc.bind = "block.x"' in str(out)


# ---- knobs -----------------------------------------------------------------------------------

KNOBBED = script(
    '%t = transform.einc.knob "tile_m" = 8 from [3, 8, 24]',
    '%m = transform.einc.match stmt "output0" axis "M" in %root',
    "%o, %i = transform.einc.tile %m by %t",
)


def test_knobs_listed_set_in_memory_and_reapplied_to_clones() -> None:
    sched = Schedule.parse(KNOBBED, "k.mlir")
    assert sched.knobs()["tile_m"].options == (3, 8, 24)
    assert sched.knobs()["tile_m"].selected == 8
    loops = lower_to_stage(MATMUL, MM, stage="loops")
    before = str(loops)
    for value in (3, 8, 24):
        variant = sched.with_values({"tile_m": value})
        assert variant.knobs()["tile_m"].selected == value
        out = variant.apply(loops, get_all_passes())
        assert f"step {value}" in str(out)
        check(MATMUL, MM, variant)
    assert str(loops) == before  # the payload is never modified
    assert sched.knobs()["tile_m"].selected == 8
    with pytest.raises(ScheduleError, match="not one of"):
        sched.with_values({"tile_m": 5})
    with pytest.raises(ScheduleError, match="no knob"):
        sched.with_values({"tile_x": 5})


# ---- API, CLI, default schedules --------------------------------------------------------------


def test_compile_accepts_text_schedule_object_and_none() -> None:
    for schedule in (KNOBBED, Schedule.parse(KNOBBED), "none", None):
        kernel = einc.compile(MATMUL, MM, schedule=schedule)
        assert kernel.source
    untouched = lower_to_stage(MATMUL, MM, stage="scheduled", schedule="none")
    assert "einc.parallel" not in str(untouched)


@pytest.mark.parametrize("case", PROGRAMS, ids=lambda c: c.name)
def test_default_schedule_is_legal_for_every_shared_program(case) -> None:  # type: ignore[no-untyped-def]
    check(case.ir, case.input_dict, None, case.extra_outputs)


def test_default_matmul_schedule_blocks_registers() -> None:
    big = {"input0": f32(128, 64), "input1": f32(64, 128)}
    src = check(MATMUL, big, None)
    assert "#pragma omp parallel for" in src and f"einc_vload_f32x{C_LANES}" in src and "K_i" in src
    assert "float output0_local[" in src  # the output tile staged across the reduction
    # the k-by-j panel of input1 packed once per k tile, the tiles sized to the host's vectors
    text = default_schedule_text(get_target("c"), lower_to_stage(MATMUL, big, stage="loops"))
    assert text is not None and 'cache_read "input1"' in text
    vectors, rows = register_tile()
    tile_j = next(t for t in (vectors * C_LANES, 2 * C_LANES, C_LANES) if 128 % t == 0)  # whole tiles of the row
    assert f'"output0.tile_j" = {tile_j}' in text and "float input1_local[" in src
    # the i tile loop is peeled: 128 rows in tiles of 6 leave a partial tile of 2, which
    # stays a loop (a tile of 8 divides: no rest)
    assert "transform.einc.peel" in text
    assert (f"for (int64_t N_o = {128 - 128 % rows}; N_o < 128; N_o += {rows})" in src) == (128 % rows != 0)


ZEN4_CPUINFO = "processor\t: 0\nvendor_id\t: AuthenticAMD\ncpu family\t: 25\nmodel\t\t: 97\nflags\t\t: avx2 avx512f\n"
XEON_CPUINFO = "processor\t: 0\nvendor_id\t: GenuineIntel\ncpu family\t: 6\nmodel\t\t: 143\nflags\t\t: avx2 avx512f amx_tile\n"


def test_fma_datapath_width_from_the_host_description(monkeypatch: pytest.MonkeyPatch) -> None:
    """512-bit FMA datapaths on an Intel AVX-512 core; Zen 4 (AVX-512 on 256-bit datapaths),
    AVX2 hosts and unknown CPUs keep 256 (or their narrower vectors); a fixed vector width
    ($EINC_C_VECTOR_BITS) prints the 256-bit datapath's tiles on every host; a bad override
    is refused."""
    from einc.errors import ToolchainError
    from einc.runtime.c import fma_bits_from_cpuinfo, native_fma_bits

    monkeypatch.delenv("EINC_C_FMA_BITS", raising=False)
    monkeypatch.setenv("EINC_C_VECTOR_BITS", "512")
    assert native_fma_bits() == 256
    monkeypatch.setenv("EINC_C_FMA_BITS", "384")
    with pytest.raises(ToolchainError, match="EINC_C_FMA_BITS"):
        native_fma_bits()

    assert fma_bits_from_cpuinfo(XEON_CPUINFO, 512) == 512
    assert fma_bits_from_cpuinfo(ZEN4_CPUINFO, 512) == 256
    assert fma_bits_from_cpuinfo(XEON_CPUINFO, 256) == 256  # AVX2 (or -mprefer 256)
    assert fma_bits_from_cpuinfo(ZEN4_CPUINFO, 256) == 256
    assert fma_bits_from_cpuinfo("", 128) == 128


@pytest.mark.parametrize("vector_bits, fma_bits, tile", [
    ("512", "256", (32, 8)),  # Zen 4: 3 vectors (2 where 3 do not divide 512) by 8 rows
    ("256", "256", (16, 6)),  # AVX2: 2 vectors by 6 rows
    ("512", "512", (64, 4)),  # Intel AVX-512: 4 vectors by 4 rows
])  # fmt: skip
def test_matmul_register_tile_follows_the_fma_datapath(monkeypatch: pytest.MonkeyPatch, vector_bits: str,
                                                       fma_bits: str, tile: tuple[int, int]) -> None:  # fmt: skip
    """The default matmul tile of a host description (vector and FMA datapath widths); the
    1x1 convolution's coalesced tile stays the 256-bit datapath's on every host."""
    monkeypatch.setenv("EINC_C_VECTOR_BITS", vector_bits)
    monkeypatch.setenv("EINC_C_FMA_BITS", fma_bits)
    lanes = int(vector_bits) // 32
    assert register_tile() == {"256": (3, 8) if lanes == 16 else (2, 6), "512": (4, 4)}[fma_bits]
    text = default_schedule_text(get_target("c"), lower_to_stage(MATMUL, {"input0": f32(64, 32), "input1": f32(32, 512)},
                                                                  stage="loops"))  # fmt: skip
    assert text is not None
    assert f'"output0.tile_j" = {tile[0]}' in text and f'"output0.tile_i" = {tile[1]}' in text
    # a k tile of 256: the 4 x 4 tile's panel (256 x 64) would not fit L1, the 256-bit tile
    deep = default_schedule_text(get_target("c"), lower_to_stage(MATMUL, {"input0": f32(64, 256), "input1": f32(256, 512)},
                                                                  stage="loops"))  # fmt: skip
    assert deep is not None and ('"output0.tile_j" = 32' in deep and '"output0.tile_i" = 8' in deep) == (lanes == 16)
    # a row of 2 vectors only (32 columns): 8 rows on either datapath, not 2 x 4
    narrow = default_schedule_text(get_target("c"), lower_to_stage(MATMUL, {"input0": f32(64, 32), "input1": f32(32, 32)},
                                                                    stage="loops"))  # fmt: skip
    assert narrow is not None and ('"output0.tile_i" = 8' in narrow) == (lanes == 16)
    conv = ("output0[N, F, HO, WO] +=! input0[N, C, HO + KH, WO + KW] * input1[F, C, KH, KW] where HO in 28, WO in 28")
    points = default_schedule_text(get_target("c"), lower_to_stage(conv, {"input0": f32(1, 64, 28, 28), "input1": f32(16, 64, 1, 1)},
                                                                    stage="loops"))  # fmt: skip
    assert points is not None and (f'"output0.tile_points" = {3 * lanes}' in points) == (lanes == 16)


# ---- illegal schedules ------------------------------------------------------------------------


@pytest.mark.parametrize(
    "ir, inputs, lines, message",
    [
        (MATMUL, MM, ['%k = transform.einc.match stmt "output0" axis "K" in %root',
                      "transform.einc.parallelize %k"], "carried dependence"),
        (MATMUL, MM, ['%k = transform.einc.match stmt "output0" axis "K" in %root',
                      "transform.einc.vectorize %k"], "carried dependence"),
        (MATMUL, MM, ['%n = transform.einc.match stmt "output0" axis "N" in %root',
                      "transform.einc.vectorize %n"], "not an innermost loop"),
        (MATMUL, MM, ['%m = transform.einc.match stmt "output0" axis "M" in %root',
                      "%o, %i = transform.einc.tile %m by 0"], "must be positive"),
        (MATMUL, MM, ['%m = transform.einc.match stmt "output0" axis "M" in %root',
                      "%o = transform.einc.unroll %m by -2"], "must be positive"),
        (MATMUL, MM, ['%m = transform.einc.match stmt "output0" axis "M" in %root',
                      'transform.einc.bind %m to "thread.x" max_threads 16'], "c target has no GPU blocks or threads"),
        ("output0[N] +=! input0[N, K, L]", {"input0": f32(4, 3, 5)},
         ['%k = transform.einc.match stmt "output0" axis "K" in %root',
          '%l = transform.einc.match stmt "output0" axis "L" in %root',
          "%a, %b = transform.einc.reorder %l, %k"], "reverse a dependence through 'output0'"),
        ("output0[N] +=! input0[N, K, L]", {"input0": f32(4, 3, 5)},
         ['%k = transform.einc.match stmt "output0" axis "K" in %root',
          '%l = transform.einc.match stmt "output0" axis "L" in %root',
          "%a, %b = transform.einc.rotate %k, %l by 2"], "rotates by 0 to 1"),
        ("output0[N] +=! input0[N, K, L]", {"input0": f32(4, 3, 5)},
         ['%k = transform.einc.match stmt "output0" axis "K" in %root',
          '%l = transform.einc.match stmt "output0" axis "L" in %root',
          "%a, %b = transform.einc.rotate %l, %k by 1"], "perfect nest, outermost first"),
        ("output0[N] +=! input0[N, K, L]", {"input0": f32(4, 3, 5)},
         ['%k = transform.einc.match stmt "output0" axis "K" in %root',
          "%a = transform.einc.rotate %k by 0"], "two loops or more"),
        ("t[N] = input0[N] * 2.0; output0[N] = t[N + 1] where N in 7",
         {"input0": f32(8)},
         ['%a = transform.einc.match stmt "t" axis "N" in %root',
          '%b = transform.einc.match stmt "output0" axis "N" in %root',
          "%f = transform.einc.fuse %a into %b"], "different bounds|before it is written"),
        (MATMUL, MM, ['%m = transform.einc.match stmt "nothing" axis "M" in %root'], "matched no"),
    ],
)
def test_illegal_schedules_are_refused_at_the_op(ir: str, inputs: dict, lines: list[str], message: str) -> None:
    text = script(*lines)
    with pytest.raises(ScheduleError, match=message) as info:
        einc.compile(ir, inputs, schedule=Schedule.parse(text, "bad.mlir"))
    loc = info.value.loc
    assert loc is not None and loc.file == "bad.mlir"
    assert loc.line == 2 + len(lines)
    assert loc.col == 5


def test_malformed_schedule_and_missing_entry() -> None:
    with pytest.raises(ScheduleError, match="malformed"):
        Schedule.parse("transform.einc.tile", "x.mlir")
    with pytest.raises(ScheduleError, match="__transform_main"):
        Schedule.parse("builtin.module {}", "x.mlir")


# ---- random legal schedules on random programs -----------------------------------------------


def random_schedule(module, rng: random.Random) -> list[str]:  # type: ignore[no-untyped-def]
    """Apply random transforms through the utilities (refusals leave the IR as it was)."""
    from xdsl.dialects import affine

    done = []
    for _ in range(rng.randint(1, 6)):
        loops = [op for op in module.walk() if isinstance(op, affine.ForOp)]
        if not loops:
            break
        loop = rng.choice(loops)
        kind = rng.choice(["tile", "tile", "unroll", "reorder", "fuse", "parallel", "vectorize", "cache"])
        before = str(module)
        if kind == "tile":
            result = lt.tile_loop(loop, rng.choice([1, 2, 3, 4, 5, 7, 16]))
        elif kind == "unroll":
            result = lt.unroll_loop(loop, rng.choice([2, 3, 4]))
        elif kind == "reorder":
            inner = [op for op in loop.body.block.ops if isinstance(op, affine.ForOp)]
            result = lt.reorder_loops([inner[0], loop]) if inner else lt.Failure("no inner")
        elif kind == "fuse":
            nxt = loop.next_op
            while nxt is not None and not isinstance(nxt, affine.ForOp):
                nxt = nxt.next_op
            result = lt.fuse_loops(loop, nxt) if nxt is not None else lt.Failure("no sibling")
        elif kind == "cache":
            from einc.transforms.staging import cache_tensor
            from einc.transforms.loop_analysis import accesses, buffer_name

            access = rng.choice(accesses(loop) or [None])
            if access is None:
                result = lt.Failure("no access")
            else:
                name = buffer_name(access.buffer)
                result = cache_tensor(loop, name, name in {buffer_name(b) for b in lt.written_groups(loop)}, "local")
        elif kind == "parallel":
            result = lt.parallelize_loop(loop)
        else:
            result = lt.vectorize_loop(loop)
        if isinstance(result, lt.Failure):
            assert str(module) == before, f"{kind} failed but changed the IR"
        else:
            done.append(kind)
        module.verify()
    return done


def check_random_transforms_on_c(prog: GenProgram, seed: int, transform, label: str) -> None:  # type: ignore[no-untyped-def]
    """`transform(module, rng)` (returning what it did) applied to `prog`'s loops; the C
    kernel of the result must match the oracle on fresh inputs."""
    text, input_dict, extra = prog.compile_args()
    comp = Compilation(text, "<random>", input_dict, extra, "c", "none")
    module = comp.run_until("loops").clone()
    done = transform(module, random.Random(seed))
    note(f"program: {text!r}\ninput_dict: {input_dict}\n{label}: {done}")
    comp.results["scheduled"] = module
    kernel = comp.kernel()
    inputs = prog.make_inputs(np.random.default_rng(seed))
    expected = prog.evaluate(inputs)
    outputs = kernel(**{k: v.copy() for k, v in inputs.items()})
    for name, exp in expected.items():
        check_output(name, outputs[name], exp, f"seed {seed}")


@settings(max_examples=examples(25), deadline=None, suppress_health_check=list(HealthCheck))
@given(prog=programs(), seed=st.integers(0, 2**32 - 1))
def test_random_legal_schedules_match_oracle(prog: GenProgram, seed: int) -> None:
    check_random_transforms_on_c(prog, seed, random_schedule, "transforms")


# ---- cache_read / cache_write ------------------------------------------------------------------


@pytest.mark.parametrize(
    "lines",
    [
        ['%n = transform.einc.match stmt "output0" axis "N" in %root',
         '%c = transform.einc.cache_write "output0" at %n'],
        ['%n = transform.einc.match stmt "output0" axis "N" in %root',
         '%c = transform.einc.cache_read "input1" at %n'],
        ['%n = transform.einc.match stmt "output0" axis "N" in %root',
         "%o, %i = transform.einc.tile %n by 4",
         '%c = transform.einc.cache_write "output0" at %o',
         '%d = transform.einc.cache_read "input0" at %o'],
        ['%m = transform.einc.match stmt "output0" axis "M" in %root',
         "%o, %i = transform.einc.tile %m by 8",
         '%k = transform.einc.match stmt "output0" axis "K" in %root',
         "%a, %b, %c = transform.einc.reorder %o, %k, %i",
         '%w = transform.einc.cache_write "output0" at %a',
         '%r = transform.einc.cache_read "input1" at %b'],
    ],
    ids=["write-row", "read-all", "write-and-read-tile", "tile-inside-reduction"],
)
def test_cache_read_and_write_keep_results(lines: list[str]) -> None:
    src = check(MATMUL, MM, script(*lines))
    assert "_local[" in src and "__attribute__((aligned(64)))" in src


def test_cache_write_of_a_stencil_and_fused_init() -> None:
    conv = "output0[N, HO] +=! input0[N, HO + KH] * input1[KH] where HO in 6"
    inputs = {"input0": f32(5, 8), "input1": f32(3)}
    src = check(conv, inputs, script(
        '%i = transform.einc.match stmt "output0" axis "N" init in %root',
        '%h = transform.einc.match stmt "output0" axis "N" in %root',
        "%n = transform.einc.fuse %i into %h",
        '%w = transform.einc.cache_write "output0" at %n',
        '%r = transform.einc.cache_read "input0" at %n',
    ))
    assert "input0_local[" in src and "output0_local[" in src


@pytest.mark.parametrize(
    "ir, inputs, lines, message",
    [
        (MATMUL, MM, ['%n = transform.einc.match stmt "output0" axis "N" in %root',
                      '%c = transform.einc.cache_read "output0" at %n'], "written inside"),
        (MATMUL, MM, ['%n = transform.einc.match stmt "output0" axis "N" in %root',
                      '%c = transform.einc.cache_write "input0" at %n'], "not written inside"),
        (MATMUL, MM, ['%n = transform.einc.match stmt "output0" axis "N" in %root',
                      '%c = transform.einc.cache_read "nothing" at %n'], "not accessed inside"),
        (MATMUL, MM, ['%n = transform.einc.match stmt "output0" axis "N" in %root',
                      '%c = transform.einc.cache_read "input1" at %n in "shared"'], "no GPU shared memory"),
        ("output0[N] = input0[input1[N]]", {"input0": f32(8), "input1": {"dtype": "int32", "shape": [4]}},
         ['%n = transform.einc.match stmt "output0" axis "N" in %root',
          '%c = transform.einc.cache_read "input0" at %n'], "not affine"),
        ("output0[N, M] = input0[N, M] + input0[M, N]", {"input0": f32(4, 4)},
         ['%n = transform.einc.match stmt "output0" axis "N" in %root',
          '%c = transform.einc.cache_read "input0" at %n'], "not one tile"),
    ],
    ids=["read-of-written", "write-of-read-only", "unknown-tensor", "shared", "gather", "two-tiles"],
)
def test_cache_refusals_are_at_the_op(ir: str, inputs: dict, lines: list[str], message: str) -> None:
    text = script(*lines)
    with pytest.raises(ScheduleError, match=message) as info:
        einc.compile(ir, inputs, schedule=Schedule.parse(text, "bad.mlir"))
    loc = info.value.loc
    assert loc is not None and loc.file == "bad.mlir" and loc.line == 2 + len(lines) and loc.col == 5


def test_cache_write_is_refused_by_targets_without_local_arrays() -> None:
    """A printer without a `private_array` spelling refuses a local buffer (every registered
    target has one now: a subclass without it stands for a new target)."""
    from einc.errors import TargetError
    from einc.targets.opencl import OpenCLTarget

    class NoLocalArrays(OpenCLTarget):
        private_array = ""

    text = script('%n = transform.einc.match stmt "output0" axis "N" in %root',
                  '%c = transform.einc.cache_write "output0" at %n')
    module = Compilation(MATMUL, "<t>", MM, None, "opencl", text).run_until("target")
    with pytest.raises(TargetError, match="opencl target: local arrays"):
        NoLocalArrays.emit(module)


def test_every_transform_op_is_in_the_reference() -> None:
    """docs/SCHEDULES.md has a row per op of the dialect, with its syntax."""
    from einc.dialects.einc_transform import EINC_TRANSFORM_OPS

    doc = (Path(__file__).parent.parent / "docs" / "SCHEDULES.md").read_text()
    for op in EINC_TRANSFORM_OPS:
        short = op.name.removeprefix("transform.einc.")
        assert f"\n| {short} | " in doc and (short == "knob" or op.name in doc), op.name


# ---- random legal transform scripts (tests/oracle/genschedule.py) ------------------------------


def check_random_script(prog: GenProgram, seed: int, target: str, widen: frozenset[str] | None = None) -> None:
    """A random legal script for `prog` on `target` (every op of the dialect, rank-0 results
    and inputs, local caches with unroll / peel / rfactor): the kernel matches the oracle, or
    the target refuses the program by design; a refusal must be located (never a bare `einc: error:`)."""
    case, draft = script_case(prog, seed, target, widen)
    note(case.reproducer())
    note(f"kept: {draft.kept if draft else None}; refused: {draft.refusals if draft else None}")
    refused = check_case(case)
    if refused is not None:
        note(f"refused: {refused.render()}")
        if not isinstance(refused, ScheduleError) and not REFUSED_BY_DESIGN.search(refused.message):
            raise refused
        assume(False)


@settings(max_examples=examples(50), deadline=None, suppress_health_check=list(HealthCheck))
@given(prog=programs(), seed=st.integers(0, 2**32 - 1))
def test_random_schedule_scripts_match_oracle(prog: GenProgram, seed: int) -> None:
    check_random_script(prog, seed, "c")


@pytest.mark.parametrize("target", ["c", "opencl"])
def test_schedule_generator_reaches_every_op(target: str) -> None:
    """Over a fixed set of seeds on the shared programs, the script generator emits every op
    of einc's transform dialect, and the scripts it keeps use most of them."""
    from einc.dialects.einc_transform import EINC_TRANSFORM_OPS

    tried: set[str] = set()
    kept: set[str] = set()
    for seed in range(60):
        case = PROGRAMS[seed % len(PROGRAMS)]
        comp = Compilation(case.ir, "<p>", case.input_dict, case.extra_outputs, target, "none")
        comp.run_until("loops")
        draft = random_script(comp, random.Random(seed), steps=8)
        assert not any(r.startswith("einc: error:") for r in draft.refusals), draft.refusals
        tried |= draft.tried
        kept |= set(draft.kept)
    names = {op.name.removeprefix("transform.einc.") for op in EINC_TRANSFORM_OPS}
    assert set(GEN_OPS) == names
    missing = names - tried - ({"bind"} if target == "c" else set())
    assert not missing, f"never emitted on {target}: {sorted(missing)}"
    must_keep = {"tile", "peel", "reorder", "unroll", "parallelize", "vectorize", "fuse", "cache_read",
                 "cache_write", "rfactor", "compute_at", "vectorize_reduction", "split_phases", "split_conditions"}  # fmt: skip
    assert must_keep <= kept, f"never kept on {target}: {sorted(must_keep - kept)}"
