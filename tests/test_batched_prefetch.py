"""A batched matmul prefetches its inputs' next batch element, spread evenly over this one's
k steps (`transform.einc.prefetch ... spread %k evenly`, einc/transforms/prefetch.py; the
CPU default's `_prefetch_next` for inputs of PREFETCH_MIN_BYTES or more, Choices.prefetch):
the schedule, the generated C (one `__builtin_prefetch` of each input a k step, its flat
index `k * E / T` on, clamped to the input's last element) and NumPy's numbers (float64
reference, random data), and its output streamed (`_stream_outputs`); none of it at batch
1's sizes nor under `policy.noprefetch`; the refusals."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any, cast

import numpy as np
import pytest

from xdsl.dialects.builtin import ModuleOp

from einc.compiler.driver import Compilation
from einc.errors import EincError
from einc.schedule.policies import cpu as policy
from einc.schedule.script import Schedule
from einc.semantics.compare import max_error, tolerance
from einc.targets import get_target
from tests.modules import load_module

bench = load_module(Path(__file__).resolve().parent.parent / "benchmarks" / "cpu_operators.py")


@pytest.fixture(autouse=True)
def _avx512(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    monkeypatch.setenv("EINC_C_VECTOR_BITS", "512")  # the tiles (and so E / T) of 16-lane vectors
    yield


def _schedule(op: Any, choices: policy.Choices = policy.POLICY) -> Schedule:  # noqa: ANN401 - an Op
    comp = Compilation(op.ir, "<bmm>", op.inputs, None, "c")
    schedule = policy.default_schedule(get_target("c"), cast("ModuleOp", comp.run_until("loops")), choices)
    assert schedule is not None
    return schedule


def _numbers(op: Any, schedule: Schedule | str) -> str:  # noqa: ANN401 - an Op
    kernel = Compilation(op.ir, "<bmm>", op.inputs, None, "c", schedule).kernel()
    for seed in (0, 1):
        rng = np.random.default_rng(seed)
        arrays = {k: rng.uniform(-1, 1, v["shape"]).astype(np.float32) for k, v in op.inputs.items()}
        got = kernel(**arrays)["output0"]
        want = op.numpy({k: v.astype(np.float64) for k, v in arrays.items()})
        assert max_error(got, want) <= tolerance("float32"), kernel.source
    return kernel.source


def test_small_batched_matmul_prefetches_its_next_element_evenly_when_asked() -> None:
    # 4 x (16x32 @ 32x32): the tile 8 rows x 2 vectors, k whole; inside the batch loop 2 row
    # tiles x 32 k steps = 64 steps, A's 512 and B's 1024 elements a batch element: 8 and 16
    # elements a step, clamped to the last (4 * 512 - 1, 4 * 1024 - 1)
    op = bench._bmm("bmm", 4, 16, 32, 32)
    asked = str(_schedule(op, policy.Choices(prefetch=True)))
    for tensor in ("input0", "input1"):
        assert re.search(rf'transform.einc.prefetch "{tensor}" at %\d+ by 1 spread %\d+ evenly', asked), asked
    source = _numbers(op, asked)
    assert re.search(r"for \(int64_t K_i = 0; K_i < 32; K_i\+\+\) \{\s*"
                     r"int64_t (v\w*) = einc_minsi_i64\(K_i \* 16 \+ 1024 \+ N_o \* 64 [^;]*B \* 1024, 4095\);\s*"
                     r"__builtin_prefetch\(&input1\[\1\]\);\s*"
                     r"int64_t (v\w*) = einc_minsi_i64\(K_i \* 8 \+ 512 \+ N_o \* 32 [^;]*B \* 512, 2047\);\s*"
                     r"__builtin_prefetch\(&input0\[\2\]\);", source), source
    assert "const float* restrict input0" in source  # a prefetch reads nothing: the inputs stay const
    # its output, written once, streams (the inputs come from memory): the tile's copy-out
    # non-temporal, an sfence ending the outlined body
    assert re.search(r"einc_vstream512_f32x16\(&output0\[B \* 512 [^\]]*\], v\);", source), source
    assert "einc_sfence();" in source
    # the default: inputs of 8 and 16 KiB stay in the caches between calls, no prefetch
    default = _schedule(op)
    assert "prefetch" not in str(default) and "stream_stores" not in str(default)
    assert "__builtin_prefetch" not in _numbers(op, default)


def test_attention_batched_matmuls_prefetch_at_batch_16_not_at_batch_1() -> None:
    for key in ("bmm_av", "bmm_qk"):
        big = bench.ops(16)[key]  # 192 heads: A and B of 6 or 12 MiB
        schedule = str(_schedule(big))
        for tensor in ("input0", "input1"):
            assert re.search(rf'transform.einc.prefetch "{tensor}" at %\d+ by 1 spread %\d+ evenly', schedule), schedule
        assert "transform.einc.stream_stores" in schedule  # 12 and 6 MiB out, under STREAM_MIN_BYTES
        unfetched = str(_schedule(big, policy.Choices(prefetch=False)))  # policy.noprefetch
        assert "prefetch" not in unfetched and "stream_stores" not in unfetched
        small = str(_schedule(bench.ops(1)[key]))  # 12 heads: under 4 MiB
        assert "prefetch" not in small and "stream_stores" not in small
    # A V's next head: A's 16384 and B's 8192 elements over 2 x 16 tiles x 128 k steps
    op = bench.ops(16)["bmm_av"]
    source = _numbers(op, _schedule(op))
    assert re.search(r"for \(int64_t K_i = 0; K_i < 128; K_i\+\+\) \{\s*"
                     r"int64_t (v\w*) = einc_minsi_i64\(K_i \* 2 \+ 8192 [^;]*, 1572863\);\s*__builtin_prefetch\(&input1\[\1\]\);\s*"
                     r"int64_t (v\w*) = einc_minsi_i64\(K_i \* 4 \+ 16384 [^;]*, 3145727\);\s*__builtin_prefetch\(&input0\[\2\]\);",
                     source), source  # fmt: skip


SCRIPT = """builtin.module {{
  transform.named_sequence @__transform_main(%root: !transform.any_op) {{
    %b = transform.einc.match stmt "output0" axis "B" in %root
    %k = transform.einc.match stmt "output0" axis "K" in %root
    %p = transform.einc.prefetch "{tensor}" at %b by 1 spread %k evenly
    transform.yield
  }}
}}
"""


def test_evenly_refusals_are_located_schedule_errors() -> None:
    # the untiled nest 3 x (5x6 @ 6x4): A's 30 elements a batch element over 5 x 4 x 6 = 120
    # steps is not a whole number a step
    op = bench._bmm("bmm", 3, 5, 6, 4)
    with pytest.raises(EincError, match=r"its 30 elements do not spread evenly over 120 iterations"):
        Compilation(op.ir, "<bmm>", op.inputs, None, "c", SCRIPT.format(tensor="input0")).run_until("scheduled")
    # evenly names the loop it spreads over
    bare = SCRIPT.format(tensor="input0").replace("spread %k evenly", "evenly")
    with pytest.raises(EincError):
        Compilation(op.ir, "<bmm>", op.inputs, None, "c", bare).run_until("scheduled")
