"""transform.einc.stream_stores (einc/transforms/stream_stores.py): a cache_write tile's
copy-out stored non-temporally on C. The source calls the streaming helper (`vmovntps` where
the address is aligned to the vector, a plain store where not) and fences each function that
holds such stores; the numbers are NumPy's on einc's own (64-byte aligned) outputs and on a
caller's output 16 bytes past a cache line (where `vmovntps` would fault); other targets print
plain stores. Refusals are located schedule errors (lit: schedules/invalid_stream_stores.mlir)."""

from __future__ import annotations

import re

import numpy as np
import pytest

import einc
from einc.errors import ScheduleError
from einc.runtime.arrays import ALIGNMENT, aligned_empty

PROGRAM = "output0[B, N, M] +=! input0[B, N, K] * input1[B, K, M]"
SHAPES = {"input0": {"dtype": "float32", "shape": [3, 8, 24]}, "input1": {"dtype": "float32", "shape": [3, 24, 64]}}


def script(extra: str = "transform.einc.stream_stores %c") -> str:
    lines = ['%b = transform.einc.match stmt "output0" axis "B" in %root',
             '%n = transform.einc.match stmt "output0" axis "N" in %root',
             '%no, %ni = transform.einc.tile %n by 4',
             '%c = transform.einc.cache_write "output0" at %no',
             'transform.einc.parallelize %b', extra, "transform.yield"]  # fmt: skip
    body = "\n".join(f"    {line}" for line in lines)
    return f"builtin.module {{\n  transform.named_sequence @__transform_main(%root: !transform.any_op) {{\n{body}\n  }}\n}}\n"


def arrays() -> dict[str, np.ndarray]:
    rng = np.random.default_rng(26)
    return {n: rng.uniform(-1, 1, v["shape"]).astype(np.float32) for n, v in SHAPES.items()}


def want(a: dict[str, np.ndarray]) -> np.ndarray:
    return np.einsum("bnk,bkm->bnm", a["input0"].astype(np.float64), a["input1"].astype(np.float64))


def test_stream_stores_print_and_fence() -> None:
    kernel = einc.compile(PROGRAM, SHAPES, schedule=script(), use_records=False)
    plain = einc.compile(PROGRAM, SHAPES, schedule=script(""), use_records=False)
    source = kernel.source
    assert "einc_vstream" in source and "__builtin_ia32_movntps" in source and "(uintptr_t)a &" in source
    assert "einc_vstream" not in plain.source and "einc_sfence" not in plain.source
    # the copy-out into output0 streams; the tile's stores (output0_local) do not
    streamed = [line for line in source.splitlines() if "einc_vstream" in line and "&output0" in line]
    assert streamed and not any("output0_local[" in line.split("(", 1)[1].split(",")[0] for line in streamed)
    # a fence ends the outlined parallel body and the kernel
    assert source.count("einc_sfence();") == 2
    body = source[source.index("static inline void einc_parallel_0"):]
    body = body[: body.index("\n}\n")]
    assert body.rstrip().endswith("einc_sfence();")


@pytest.mark.parametrize("offset", [0, 4, 8])
def test_stream_stores_numbers_on_aligned_and_misaligned_outputs(offset: int) -> None:
    kernel = einc.compile(PROGRAM, SHAPES, schedule=script(), use_records=False)
    a = arrays()
    got = kernel(**a)["output0"]
    assert got.ctypes.data % ALIGNMENT == 0
    np.testing.assert_allclose(got, want(a), rtol=1e-5, atol=1e-5)
    raw = aligned_empty(got.size + offset, "float32")
    out = raw[offset:].reshape(got.shape)  # offset * 4 bytes past a cache line
    out.fill(np.nan)
    kernel(out=out, **a)
    np.testing.assert_allclose(out, want(a), rtol=1e-5, atol=1e-5)


def test_stream_stores_plain_on_other_targets() -> None:
    kernel = einc.compile(PROGRAM, SHAPES, target="opencl", schedule=script().replace(
        "transform.einc.parallelize %b", ""), use_records=False)  # fmt: skip
    assert "stream" not in kernel.source and "movnt" not in kernel.source


def test_stream_stores_refused_on_a_scalar_copy_out() -> None:
    """A tile of one element (staged at the reduction's tile loop): its copy-out is a scalar store."""
    text = script().replace('%c = transform.einc.cache_write "output0" at %no',
                            '%k = transform.einc.match stmt "output0" axis "K" in %root\n'
                            '    %ko, %ki = transform.einc.tile %k by 8\n'
                            '    %c = transform.einc.cache_write "output0" at %ko')  # fmt: skip
    with pytest.raises(ScheduleError, match="'output0' is not a vector store") as info:
        einc.compile(PROGRAM, SHAPES, schedule=text, use_records=False)
    assert info.value.loc is not None and info.value.loc.line == 10


def test_stream_stores_refused_on_a_tile_read_back() -> None:
    """A row tile inside the reduction loop is copied in from output0 at every K."""
    text = script().replace('%c = transform.einc.cache_write "output0" at %no',
                            '%m = transform.einc.match stmt "output0" axis "M" in %root\n'
                            '    %k = transform.einc.match stmt "output0" axis "K" in %root\n'
                            '    %k2, %n2, %m2 = transform.einc.reorder %k, %n, %m\n'
                            '    %c = transform.einc.cache_write "output0" at %n2')  # fmt: skip
    text = text.replace("    %no, %ni = transform.einc.tile %n by 4\n", "")
    with pytest.raises(ScheduleError, match="reads 'output0' back") as info:
        einc.compile(PROGRAM, SHAPES, schedule=text, use_records=False)
    assert info.value.loc is not None and info.value.loc.line == 10


def test_stream_stores_refused_on_a_cache_read() -> None:
    text = script().replace('%c = transform.einc.cache_write "output0" at %no',
                            '%c = transform.einc.cache_read "input1" at %no')  # fmt: skip
    with pytest.raises(ScheduleError, match="no copy-out writes it back") as info:
        einc.compile(PROGRAM, SHAPES, schedule=text, use_records=False)
    assert info.value.loc is not None and info.value.loc.line == 8


# ---- the tuner's `policy.stream` sketch and the default policy (einc.schedule.policies.cpu) -------
def _matmul(b: int, n: int, k: int, m: int) -> dict[str, dict[str, object]]:
    return {"input0": {"dtype": "float32", "shape": [b, n, k]}, "input1": {"dtype": "float32", "shape": [b, k, m]}}


def test_the_tuners_stream_sketch_streams_and_matches_numpy() -> None:
    """Points the tuner draws from `policy.stream` (the default schedule, its output tiles
    streamed, size knobs drawn) stream the copy-out and match NumPy, or are refused when
    built (before any run: the tuner's REFUSED), located at the stream_stores op (a row tile
    that does not divide N leaves a peeled remainder that reads the output back);
    `policy.nostream` is not offered where the default streams nothing."""
    from einc.compiler.driver import Compilation
    from einc.schedule.script import Schedule
    from einc.tune.space import SearchSpace
    from einc.tune.types import TuneTask

    shapes = _matmul(2, 16, 8, 64)
    task = TuneTask(PROGRAM, "c", "<matmul>", shapes)
    space = SearchSpace.from_task(task, rules=["policy"])
    assert "policy.stream" in space.sketches and "policy.nostream" not in space.sketches
    rng = np.random.default_rng(26)
    points = [space.sketch_default("policy.stream")]
    while len(points) < 6:
        p = space.random_point(rng)
        if p.sketch == "policy.stream" and p not in points:
            points.append(p)
    a = {n: rng.uniform(-1, 1, v["shape"]).astype(np.float32) for n, v in shapes.items()}  # type: ignore[arg-type]
    streamed = 0
    for p in points:
        text = space.candidate(p).schedule
        line = next(i for i, t in enumerate(text.splitlines(), 1) if "transform.einc.stream_stores" in t)
        try:
            kernel = Compilation(task.source, task.filename, shapes, None, "c", Schedule.parse(text)).kernel()
        except ScheduleError as err:
            assert "reads 'output0' back" in err.message and err.loc is not None and err.loc.line == line, p
            continue
        assert "einc_vstream" in kernel.source, p
        np.testing.assert_allclose(kernel(**a)["output0"], want(a), rtol=1e-5, atol=1e-5, err_msg=str(p))
        streamed += 1
    assert streamed >= 3


def test_the_default_streams_large_outputs_only() -> None:
    """The default policy streams an output tile's copy-out where the output holds
    STREAM_MIN_BYTES or more (a 2048 x 2048 float matmul output, K = 4: 16 MiB) and not
    below (2 x 512 x 512: 2 MiB); the large one matches NumPy."""
    from einc.schedule.policies.cpu import STREAM_MIN_BYTES

    assert 2048 * 2048 * 4 >= STREAM_MIN_BYTES > 2 * 512 * 512 * 4
    small = einc.compile(PROGRAM, _matmul(2, 512, 4, 512), use_records=False)
    assert "einc_vstream" not in small.source
    shapes = _matmul(1, 2048, 4, 2048)
    large = einc.compile(PROGRAM, shapes, use_records=False)
    assert "einc_vstream" in large.source and "einc_sfence();" in large.source
    # the tuner can leave it out there (policy.nostream); policy.stream is the default's script
    from einc.tune.space import SearchSpace
    from einc.tune.types import TuneTask

    space = SearchSpace.from_task(TuneTask(PROGRAM, "c", "<matmul>", shapes), rules=["policy"])
    assert "policy.nostream" in space.sketches and "policy.stream" not in space.sketches
    nostream = space.candidate(space.sketch_default("policy.nostream")).schedule
    assert "stream_stores" not in nostream
    rng = np.random.default_rng(26)
    a = {n: rng.uniform(-1, 1, v["shape"]).astype(np.float32) for n, v in shapes.items()}  # type: ignore[arg-type]
    np.testing.assert_allclose(large(**a)["output0"], want(a), rtol=1e-5, atol=1e-5)


def test_contiguous_run_counts_the_whole_rows_a_tile_holds() -> None:
    from einc.transforms.stream_stores import contiguous_run

    assert contiguous_run([1, 1, 2, 56], [16, 144, 56, 56]) == 112  # two whole rows
    assert contiguous_run([1, 1, 56, 56], [16, 144, 56, 56]) == 3136  # a whole plane
    assert contiguous_run([1, 4, 64], [3, 8, 64]) == 256
    assert contiguous_run([2, 16], [8, 48]) == 16  # part of a row: the row's part only
    assert contiguous_run([4], [4]) == 4


def test_a_tile_of_whole_rows_streams_as_one_run_and_a_part_of_rows_row_by_row() -> None:
    """The 4 x 64 tile above holds whole rows of output0 (3 x 8 x 64): its copy-out is one loop
    of 256 (einc-coalesce-stream-copies); a tile of part of a row (1 x 32: M tiled by 32 and
    staged inside N's tile) keeps its loops. NumPy's numbers both ways."""
    whole = einc.compile(PROGRAM, SHAPES, schedule=script(), use_records=False)
    assert re.search(r"for \(int64_t (output0_c1xoutput0_c2) = 0; \1 < 256; \1 \+= \d+\) \{\s*"
                     r"einc_f32x\d+ v = einc_vload_f32x\d+\(&output0_local\[[^\]]*\]\);\s*"
                     r"einc_vstream\d+_f32x\d+\(&output0\[", whole.source), whole.source  # fmt: skip
    part_script = script().replace('%c = transform.einc.cache_write "output0" at %no',
                                   '%m = transform.einc.match stmt "output0" axis "M" in %root\n'
                                   '    %mo, %mi = transform.einc.tile %m by 32\n'
                                   '    %c = transform.einc.cache_write "output0" at %mo')  # fmt: skip
    part = einc.compile(PROGRAM, SHAPES, schedule=part_script, use_records=False)
    assert "float output0_local[32]" in part.source and "xoutput0" not in part.source, part.source
    assert "einc_vstream" in part.source, part.source
    for kernel in (whole, part):
        a = arrays()
        np.testing.assert_allclose(kernel(**a)["output0"], want(a), rtol=1e-5, atol=1e-5)
