"""The CPU tuning space's `policy` sketches (einc.tune.sketches.cpu.rule_policy): the default
schedule with one structural choice changed (einc.schedule.policies.cpu.Choices). On a small
convolution and a small grouped convolution (512-bit vectors, batch 2): the default plan is a
point of the space and the search proposes it first, then each variant's default; the knobs
are bounded by the vector width and the packed filter; each variant changes the generated C
as it says; and every sketch's default point and random points compute NumPy's numbers
(float64 reference, random data)."""

from __future__ import annotations

from collections.abc import Iterator
import re
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from einc.semantics.compare import max_error, tolerance
from tests.modules import load_module

BENCHMARKS = Path(__file__).resolve().parent.parent / "benchmarks"
LANES = 16


bench = load_module(BENCHMARKS / "cpu_operators.py")
PROGRAMS = {
    # 16 output channels (a vector), 6 output columns (no whole vector): channel-blocked
    "conv": bench.Conv(8, 16, (5, 6), (3, 3), pad=1),
    # 8 output channels per group: blocked by vectors of 16 over two groups (policy.nogroup:
    # by half a vector), two such pairs
    "grouped": bench.Conv(16, 32, (5, 6), (3, 3), pad=1, groups=4),
}


class Case:
    def __init__(self, key: str) -> None:
        from einc.tune.space import SearchSpace

        self.op = PROGRAMS[key].op(key, 2)
        self.task = bench.task_of(self.op)
        self.space = SearchSpace.from_task(self.task, ["policy"])
        rng = np.random.default_rng(22)
        self.arrays = {name: rng.uniform(-1, 1, v["shape"]).astype(np.float32) for name, v in self.op.inputs.items()}
        self.want = self.op.numpy({name: a.astype(np.float64) for name, a in self.arrays.items()})
        self._compiled: dict[Any, Any] = {}

    def compilation(self, point: Any) -> Any:  # noqa: ANN401 - a Point
        if point not in self._compiled:
            self._compiled[point] = self.task.compilation(self.space.candidate(point).schedule)
        return self._compiled[point]

    def source(self, sketch: str) -> str:
        return self.compilation(self.space.sketch_default(sketch)).source_text()

    def schedule(self, sketch: str) -> str:
        return self.space.candidate(self.space.sketch_default(sketch)).schedule


@pytest.fixture(scope="module")
def cases() -> Iterator[dict[str, Case]]:
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("EINC_C_VECTOR_BITS", str(32 * LANES))
        yield {key: Case(key) for key in PROGRAMS}


def test_the_default_plan_is_a_point_proposed_first_then_each_variant(cases: dict[str, Case]) -> None:
    from einc.schedule.default import default_schedule
    from einc.schedule.policies import cpu as policy
    from einc.targets import get_target
    from einc.tune.search import RandomSearch
    from einc.tune.space import loops_of

    for key, case in cases.items():
        space = case.space
        loops = loops_of(case.task)
        target = get_target("c")
        default = default_schedule(target, loops)
        assert default is not None
        assert space.candidate(space.default_point()).schedule == str(default), key
        # the policy's own choices are the default's: no variant repeats it
        same = policy.default_schedule(target, loops, policy.POLICY, split_conditions=True)
        assert same is not None and same.same_as(default)
        variants = [s for s in space.sketches if s.startswith("policy.")]
        # the plain convolution's variants; the grouped one's default is the pair form (16
        # lanes), whose variants are the blocked form and its own
        want = {"policy.j", "policy.nopack", "policy.bi", "policy.cond"} if key == "conv" else \
            {"policy.nopairs", "policy.nogroup", "policy.pairs.plane", "policy.p1", "policy.cond"}  # fmt: skip
        assert want <= set(variants), (key, list(space.sketches))
        assert not any(space.sketches[s].schedule.same_as(default) for s in variants)
        # the search proposes the default, then each variant's default point
        proposed = RandomSearch(space, seed=3).propose(1 + len(variants))
        assert proposed[0] == space.default_point()
        assert proposed[1:] == [space.sketch_default(s) for s in variants]
    assert "policy.p1" in cases["grouped"].space.sketches
    # the grouped convolution's channels one group at a time (the default spans two groups per
    # vector): a variant of the grouped program only; over more groups: none (8 channels per
    # group fill half a vector, two groups per vector already)
    assert "policy.nogroup" in cases["grouped"].space.sketches and "policy.nogroup" not in cases["conv"].space.sketches
    assert "policy.group.all" not in cases["grouped"].space.sketches


def test_the_knobs_are_bounded(cases: dict[str, Case]) -> None:
    from einc.schedule.policies.cpu import CHANNEL_PACK_ELEMENTS

    for key, case in cases.items():
        conv = PROGRAMS[key]
        window = int(np.prod(conv.kernel))
        for sketch in [s for s in case.space.sketches if s == "default" or s.startswith("policy.")]:
            knobs = {k.rpartition(".")[2]: v for k, v in case.space.knob_options(sketch).items()}
            for tf in knobs.get("tile_channels", ()):
                # half a vector (AVX-512's 8 channels) to 4 vectors, dividing the channels
                assert tf % (LANES // 2) == 0 and tf <= 4 * LANES and conv.filters % tf == 0, (key, sketch, tf)
                tc = max(knobs.get("tile_reduce", (conv.channels // conv.groups,)))
                assert tf * tc * window <= CHANNEL_PACK_ELEMENTS, (key, sketch)
            for tw in knobs.get("tile_cols", ()):  # unrolled columns of accumulators
                assert 2 <= tw <= 16 and conv.out[-1] % tw == 0, (key, sketch, tw)
            assert set(knobs.get("tile_rows", ())) <= {2, 4, 8}, (key, sketch)


def _parallel_axis(source: str) -> str:
    """The first parameter of the kernel's first parallel region (its parallel loop)."""
    line = next(x for x in source.splitlines() if "void einc_parallel_0(" in x)
    return line.split("einc_parallel_0(int64_t ")[1].split(",")[0]


def test_each_variant_changes_the_code_as_it_says(cases: dict[str, Case]) -> None:
    conv, grouped = cases["conv"], cases["grouped"]
    for case in (conv,):
        base = case.source("default")
        # the default: the filter packed (input1_local; the plain convolution's whole pack,
        # invariant in the batch loop, hoisted above it by einc-hoist-packs: input1_local_pack),
        # the output tile staged, one parallel loop over the batch (2 images), conditions split
        # out of the blocked loops
        assert "input1_local_pack[" in base and "output0_local[" in base and _parallel_axis(base) == "N"
        body = base[base.index(" void kernel(") :]  # packed in the kernel's body, before its parallel loop
        assert body.index("input1_local_pack[") < body.index("#pragma omp parallel for")
        assert "split_conditions" in case.schedule("default")
        # nopack: the filter read in place, the output tile still staged
        nopack = case.source("policy.nopack")
        assert "input1_local" not in nopack and "output0_local[" in nopack
        # j: no channel blocking (neither the packed filter nor the channel-innermost tile)
        j = case.source("policy.j")
        assert "input1_local" not in j and "tile_channels" not in case.schedule("policy.j")
        # bi: the batch loop below the channel tile, where the filter is packed once for both
        # images (the channel tiles' loop outermost, no batch parallel region)
        bi = case.source("policy.bi")
        pack, batch = bi.index("input1_local["), bi.rindex("for (int64_t N = 0; N < 2; N++)")
        assert pack < batch and "einc_parallel_0(int64_t N," not in bi
        # cond: no index-set splitting, the padding tests left in the loops
        cond, sched = case.source("policy.cond"), case.schedule("policy.cond")
        assert "split_conditions" not in sched and "split_phases" not in sched
        assert cond.count(">= 0") > base.count(">= 0")
    # p1: the next independent loop (the loop over pairs of groups) parallel instead of the
    # batch loop
    assert _parallel_axis(grouped.source("policy.p1")) == "F_q_o"
    # the grouped default (16 lanes): the pair form (test_the_pair_form_is_the_default_with_16_lanes);
    # policy.nopairs: vectors of 16 channels over two groups (transform.einc.group_lanes), the
    # filter packed per pair of groups, each column's input the two groups' values each
    # broadcast over its 8 lanes (egpu.vbroadcast_runs: a vector literal in C), no 8-lane
    # vector of the output tile left, the output tile staged, the batch loop parallel;
    # nogroup: a group's 8 channels, half a vector
    assert re.search(r"group_lanes %\d+ by 2 interleaved", grouped.schedule("default"))
    group = grouped.source("policy.nopairs")
    assert "transform.einc.group_lanes" in grouped.schedule("policy.nopairs")
    assert "output0_local[" in group and _parallel_axis(group) == "N"
    literal = "{" + ", ".join(["a0"] * 8 + ["a1"] * 8) + "}"
    assert f"einc_vbroadcast_runs2_f32x16(float a0, float a1) {{ return (einc_f32x16){literal}; }}" in group
    assert re.search(r"einc_vbroadcast_runs2_f32x16\(input0\[[^;]*\], input0\[[^;]*\+ 8\)", group), group
    assert "einc_vload_f32x16(&input1_local[" in group and "einc_vload_f32x8(&output0_local[" not in group
    base = grouped.source("policy.nogroup")
    assert "transform.einc.group_lanes" not in grouped.schedule("policy.nogroup")
    assert "einc_vbroadcast_runs2" not in base and "einc_vload_f32x8(&input1_local[" in base
    # the default, the pair form (lanes interleaved over two groups, lane 2 f + g), the pair's
    # padded input staged with its halo and the two groups' values of a pixel side by side
    # (its 4 channels a group split off), each FMA's input one 64-bit broadcast of a pair; no
    # bounds test left, so nothing for split_conditions; a form of the grouped program only
    pairs, sched = grouped.source("default"), grouped.schedule("default")
    assert re.search(r"group_lanes %\d+ by 2 interleaved", sched), sched
    assert 'cache_read "input0" at %' in sched and "split 1 by 4 layout [0, 2, 3, 4, 1] halo" in sched, sched
    assert "einc_vrepeat64_f32x16(&input0_local[" in pairs and "einc_vbroadcast_runs2" not in pairs, pairs
    assert ">= 0" not in pairs and "policy.pairs" not in conv.space.sketches
    # its input (under 4 MiB) packed row by row in the output row loop (transform.einc.
    # pack_rows); policy.pairs.plane the whole padded plane before the rows
    plane = grouped.schedule("policy.pairs.plane")
    assert "transform.einc.pack_rows" in sched and "transform.einc.pack_rows" not in plane, plane
    assert "policy.pairs.rows" not in grouped.space.sketches and "policy.pairs.plane" not in conv.space.sketches
    assert "policy.pairs" not in grouped.space.sketches  # the default
    # policy.prefetch: the next channel tile's input prefetched a tile ahead, spread over this
    # tile's output rows (transform.einc.prefetch at the tile loop, spread over HO: row HO of
    # each of the next tile's 8 channels; the last tile's the next image's first channels, the
    # channel index unwrapped, clamped to the last image's last channel); policy.prefetch.rows
    # this tile's next row at the top of each output row (row HO + 2 of each of its channels;
    # past the image's last row, the next tile's first rows: (HO + 2) % 5 of the channels 8
    # further on, clamped to the last channel); the default prefetches only inputs of
    # PREFETCH_MIN_BYTES or more (this one is 7.5 KiB), nor do the one-group tile (its input
    # does not move with the lanes) or the plain convolution
    ahead, rows = grouped.source("policy.prefetch"), grouped.source("policy.prefetch.rows")
    assert re.search(r'transform.einc.prefetch "input0" at %\w+ by 1 spread %', grouped.schedule("policy.prefetch"))
    assert re.search(r"int64_t v\w* = N;\s*int64_t v\w* = einc_minsi_i64\(F_q_o \* 8 \+ 8 \+ input0_p1, N \* -16 \+ 31\);\s*"
                     r"int64_t v\w* = HO;\s*int64_t v\w* = \d+;\s*__builtin_prefetch\(&input0\[", ahead), ahead
    assert " spread " not in grouped.schedule("policy.prefetch.rows")
    assert re.search(r"int64_t v\w* = einc_minsi_i64\(F_q_o \* 8 \+ input0_p1 \+ \(HO \+ 2\) / 5 \* 8, 15\);\s*"
                     r"int64_t v\w* = \(HO \+ 2\) % 5;\s*int64_t v\w* = \d+;\s*__builtin_prefetch\(&input0\[", rows), rows
    assert "prefetch" not in grouped.schedule("default") and "prefetch" not in grouped.schedule("policy.nopairs")
    assert "__builtin_prefetch" not in group and "__builtin_prefetch" not in pairs
    assert "policy.noprefetch" not in grouped.space.sketches and "policy.prefetch" not in conv.space.sketches
    assert "policy.prefetch.rows" in grouped.space.sketches and "policy.prefetch.rows" not in conv.space.sketches
    assert "__builtin_prefetch" not in base and "__builtin_prefetch" not in conv.source("default")


def test_sampled_points_compute_numpys_numbers(cases: dict[str, Case]) -> None:
    from einc.errors import ScheduleError

    rng = np.random.default_rng(26)
    for key, case in cases.items():
        sketches = [s for s in case.space.sketches if s.startswith("policy.") or s == "default"]
        points = [case.space.sketch_default(s) for s in sketches]
        points += [case.space._random_of(sketches[int(rng.integers(len(sketches)))], rng)  # pyright: ignore[reportPrivateUsage]
                   for _ in range(2)]  # fmt: skip
        for point in points:
            try:
                kernel = case.compilation(point).kernel()
            except ScheduleError as e:  # refused by the payload before a build, located
                assert point.sketch != "default" and str(e).startswith("<schedule>:"), (key, point, e)
                continue
            got = kernel(**case.arrays)["output0"]
            assert max_error(got, case.want) <= tolerance("float32"), (key, point.describe())


@pytest.mark.parametrize("fma_bits", ["256", "512"])
def test_the_pair_form_is_the_default_with_16_lanes(fma_bits: str) -> None:
    """With 16 float32 lanes (AVX-512), whether the FMA datapath is 512 bits wide (Intel,
    where the blocked vectors' insert takes an FMA port) or 256 (Zen 4: the pair form 1.10x /
    1.14x the blocked vectors at batch 1 / 16, README), the grouped convolution's default is
    the pair form (Choices.pair_lanes None: `_pairs_here`), the blocked vectors kept as
    `policy.nopairs` (and `policy.nogroup` still one group at a time); the plain convolution
    is unchanged. Both compute NumPy's numbers."""
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("EINC_C_VECTOR_BITS", str(32 * LANES))
        mp.setenv("EINC_C_FMA_BITS", fma_bits)
        grouped, conv = Case("grouped"), Case("conv")
        sched = grouped.schedule("default")
        assert re.search(r"group_lanes %\d+ by 2 interleaved", sched), sched
        assert "policy.pairs" not in grouped.space.sketches and "policy.nopairs" in grouped.space.sketches
        blocked = grouped.schedule("policy.nopairs")
        assert "transform.einc.group_lanes" in blocked and "interleaved" not in blocked, blocked
        assert "transform.einc.group_lanes" not in grouped.schedule("policy.nogroup")
        assert "policy.nopairs" not in conv.space.sketches and "policy.pairs" not in conv.space.sketches
        for sketch in ("default", "policy.nopairs"):
            outs = {"output0": np.empty(grouped.want.shape, np.float32)}
            grouped.compilation(grouped.space.sketch_default(sketch)).kernel().run(grouped.arrays, outs)
            assert max_error(outs["output0"], grouped.want) <= tolerance("float32"), sketch
        # 256-bit vectors (8 lanes: the groups' 8 channels a whole vector) keep the blocked form
        mp.setenv("EINC_C_VECTOR_BITS", "256")
        narrow = Case("grouped")
        assert "interleaved" not in narrow.schedule("default") and "policy.nopairs" not in narrow.space.sketches
