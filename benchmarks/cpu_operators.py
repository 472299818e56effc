"""einc's CPU operator benchmark (issue 26): every convolution family (1D, 2D, 3D, padded,
strided, dilated, grouped, depthwise, transposed, 1x1, 7x7, on 7x7 maps), batched and
small-dimension matmuls, softmax, layer norm and reductions, at real-network shapes, against
PyTorch on the CPU (oneDNN), default schedule and tuned.

    env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE OMP_NUM_THREADS=2 PYTHONPATH=. \\
        .venv/bin/python benchmarks/cpu_operators.py [--batch 1,16] [--repeat 5] [--only KEY,...]
        [--tune KEY,...|all] [--trials 32] [--records tuned.db] [--sketch NAME] [--clock wall|cpu]
        [--json out.json] [--markdown]
    ... benchmarks/cpu_operators.py --from-records tuned.db [--batch 1] [--only KEY,...] [--json] [--markdown]
    .venv/bin/python benchmarks/cpu_operators.py --from-json a.json [b.json ...] --markdown

Per operator and batch: einc's kernel under the default schedule (and, for the operators
named by `--tune`, the best of `--trials` tuning trials: `einc.tune.tuner.tune` with a
temporary record database) and torch (its faster of the contiguous and channels-last layouts,
converted outside the timing) are checked against the operator's NumPy float64 reference
on fresh random inputs, then timed interleaved (cpu_batch1.interleaved: medians of
`--repeat` rotating samples). The table gives milliseconds, GFLOP/s (2 x multiply-adds of
the operator as torch computes it; none for the memory-bound operators), einc/torch (torch's
time over einc's: above 1, einc is faster), and the fractions of the FMA peak and of the
STREAM triad bandwidth (the bytes of the inputs and the output once) that benchmarks/machine.py
measures in the same run (the FMA peak beside each operator, by wall clock: the better of
just before and just after its interleaved timing, since the machine's speed drifts within the
hour and one peak taken at the start made fractions read low, or above 1, later in a run; the
triad once, at the start); geometric means of einc/torch per batch. OMP_NUM_THREADS (default 2)
sets einc's OpenMP threads, torch's intra-op threads and the machine's ceilings. torch and
einc's kernels each bring an OpenMP runtime into the process; each timing sample runs one side
for ~0.1 s, so the other runtime's threads spinning after its last parallel region cost a
sample little on an idle machine, but on an oversubscribed one they cost whole time slices
(here, at a load of 17 on 2 cores: torch's softmax 38.7 ms after einc's kernels, 0.40 ms
with OMP_WAIT_POLICY=PASSIVE, which in turn makes every fork of a kernel that starts many
parallel regions wait for a time slice). The machine may be shared: only ratios of one run
mean much, and the load (os.getloadavg, in the JSON and the table) says how much.

The tuner crowns a schedule only when it beat the default beyond the noise in enough final
rounds; on a busy machine it keeps the default (the tuned column then says so) and the
fastest trial of the search is timed beside it (`fastest trial` columns): what the space
reached, not what a user of the tuner would get.

The transposed convolution is written with the product under `.when` (the tap is skipped
where the stride or the border excludes it, as torch skips it: no 0 x weight, so an inf or
NaN weight stays out of the outputs it does not reach); the padded convolutions guard the
input (padding zeros times the weight).

`--records PATH` keeps the tuner's records (SQLite, as `einc tune --db` writes them) instead
of a temporary database; `--from-records PATH` later times the decisions kept there (and each
operator's fastest OK trial) without tuning again: re-timing a tuning run on a quiet
machine. A decision applies only on the machine, compiler and search-space version that made
it (`--any-space`: of any search-space version, its script refused and left out where it no
longer applies); an operator without one gets no tuned column.

`--sketch NAME` times the default point of one sketch of each operator's CPU search space
beside the default in the same interleaved run (e.g. `policy.nogroup`, the grouped convolution
one group at a time: what the default's two-group tile is measured against); its seconds are
in the JSON (`sketch_s`) and the progress line, not the table.

`--from-json` merges saved runs (later files override earlier rows of the same operator,
batch and column) and prints their table: e.g. a default run and a tuned run of a subset.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent))

from common import table  # noqa: E402
from cpu_batch1 import Op, f32, interleaved  # noqa: E402

# ---- the operators ----------------------------------------------------------------------------


@dataclass(frozen=True)
class Conv:
    """An N-d convolution (1, 2 or 3 spatial axes): input [N, C, *size], weight [F, C/groups,
    *kernel] (depthwise: groups == C == F); `transposed`: weight [C, F, *kernel] and the
    output `stride` times larger (PyTorch's conv_transpose)."""

    channels: int
    filters: int
    size: tuple[int, ...]
    kernel: tuple[int, ...]
    stride: int = 1
    pad: int = 0
    dilation: int = 1
    groups: int = 1
    transposed: bool = False

    @property
    def out(self) -> tuple[int, ...]:
        if self.transposed:
            return tuple((s - 1) * self.stride - 2 * self.pad + k for s, k in zip(self.size, self.kernel))
        return tuple((s + 2 * self.pad - self.dilation * (k - 1) - 1) // self.stride + 1
                     for s, k in zip(self.size, self.kernel))  # fmt: skip

    def macs(self, batch: int) -> int:
        per_filter = self.channels // self.groups * math.prod(self.kernel)
        points = math.prod(self.size if self.transposed else self.out)
        return batch * self.filters * per_filter * points

    def ir(self) -> str:
        d = len(self.size)
        outs, ks = ("DO", "HO", "WO")[3 - d:], ("KD", "KH", "KW")[3 - d:]
        index, conds = [], []
        for o, k, n in zip(outs, ks, self.size):
            if self.transposed:  # input element (o + pad - k) / stride, when it divides
                e = f"{o} + {self.pad} - {k}" if self.pad else f"{o} - {k}"
                index.append(f"({e}) // {self.stride}")
                conds += [f"({e}) % {self.stride} == 0", f"{e} >= 0", f"{e} < {n * self.stride}"]
                continue
            e = f"{o} * {self.stride}" if self.stride > 1 else o
            e += f" + {k} * {self.dilation}" if self.dilation > 1 else f" + {k}"
            e += f" - {self.pad}" if self.pad else ""
            index.append(e)
            if self.pad:
                conds += [f"{e} >= 0", f"{e} < {n}"]
        if self.transposed:
            channel, weight = "C", f"input1[C, F, {', '.join(ks)}]"
        elif self.groups == self.channels == self.filters:  # depthwise: weight [C, 1, *kernel]
            channel, weight = "F", f"input1[F, 0, {', '.join(ks)}]"
        elif self.groups > 1:  # the input channel of group F // (F/groups), C of C/groups
            per_in, per_out = self.channels // self.groups, self.filters // self.groups
            channel, weight = f"F // {per_out} * {per_in} + C", f"input1[F, C, {', '.join(ks)}]"
        else:
            channel, weight = "C", f"input1[F, C, {', '.join(ks)}]"
        x = f"input0[N, {channel}, {', '.join(index)}]"
        where = ", ".join(f"{o} in {n}" for o, n in zip(outs, self.out))
        if self.transposed:  # the tap skipped, as torch skips it (no 0 x weight: inf/NaN weights stay out)
            return f"output0[N, F, {', '.join(outs)}] +=! ({x} * {weight}).when([{', '.join(conds)}], 0.0) where {where}"
        if conds:
            x = f"{x}.when([{', '.join(conds)}], 0.0)"
        return f"output0[N, F, {', '.join(outs)}] +=! ({x} * {weight}) where {where}"

    def inputs(self, batch: int) -> dict[str, Any]:
        w = ((self.channels, self.filters) if self.transposed else (self.filters, self.channels // self.groups))
        return {"input0": f32(batch, self.channels, *self.size), "input1": f32(*w, *self.kernel)}

    def numpy(self, a: dict[str, np.ndarray]) -> np.ndarray:
        x, w = a["input0"], a["input1"]
        d, n = len(self.size), x.shape[0]
        if self.transposed:  # scatter each kernel offset into the full output, then crop
            full = np.zeros((n, self.filters, *((s - 1) * self.stride + k for s, k in zip(self.size, self.kernel))))
            for offset in np.ndindex(*self.kernel):
                part = np.einsum("nc...,cf->nf...", x, w[(slice(None), slice(None), *offset)])
                full[(slice(None), slice(None), *(slice(o, o + self.stride * (s - 1) + 1, self.stride)
                                                  for o, s in zip(offset, self.size)))] += part  # fmt: skip
            return full[(slice(None), slice(None), *(slice(self.pad, self.pad + o) for o in self.out))]
        x = np.pad(x, ((0, 0), (0, 0), *[(self.pad, self.pad)] * d))
        g = self.groups
        xg = x.reshape(n, g, self.channels // g, *x.shape[2:])
        wg = w.reshape(g, self.filters // g, self.channels // g, *self.kernel)
        out = np.zeros((n, g, self.filters // g, *self.out))
        for offset in np.ndindex(*self.kernel):
            window = xg[(slice(None), slice(None), slice(None),
                         *(slice(k * self.dilation, k * self.dilation + self.stride * (o - 1) + 1, self.stride)
                           for k, o in zip(offset, self.out)))]  # fmt: skip
            out += np.einsum("ngc...,gfc->ngf...", window, wg[(slice(None), slice(None), slice(None), *offset)])
        return out.reshape(n, self.filters, *self.out)

    def torch(self, t: Any, x: dict[str, Any]) -> Any:
        f = t.nn.functional
        d = len(self.size)
        if self.transposed:
            fn = {1: f.conv_transpose1d, 2: f.conv_transpose2d, 3: f.conv_transpose3d}[d]
            return fn(x["input0"], x["input1"], stride=self.stride, padding=self.pad)
        fn = {1: f.conv1d, 2: f.conv2d, 3: f.conv3d}[d]
        return fn(x["input0"], x["input1"], stride=self.stride, padding=self.pad, dilation=self.dilation,
                  groups=self.groups)  # fmt: skip

    def op(self, name: str, batch: int) -> Op:
        return Op(name, self.ir(), self.inputs(batch), 2.0 * self.macs(batch), self.numpy, self.torch)


def _bmm(name: str, b: int, n: int, k: int, m: int) -> Op:
    return Op(name, "output0[B, N, M] +=! input0[B, N, K] * input1[B, K, M]",
              {"input0": f32(b, n, k), "input1": f32(b, k, m)}, 2.0 * b * n * k * m,
              lambda a: a["input0"] @ a["input1"], lambda t, x: t.bmm(x["input0"], x["input1"]))  # fmt: skip


SOFTMAX = ("temp0[N] >=! input0[N, C]; temp1[N] +=! (input0[N, C] - temp0[N]).call(`exp`); "
           "output0[N, C] = (input0[N, C] - temp0[N]).call(`exp`) / temp1[N]")  # fmt: skip
LAYERNORM = ("mean[N] +=! input0[N, C] / {c}.0; var[N] +=! (input0[N, C] - mean[N]) * (input0[N, C] - mean[N]) "
             "/ {c}.0; output0[N, C] = (input0[N, C] - mean[N]) * (var[N] + 1e-5).call(`rsqrt`) * input1[C] "
             "+ input2[C]")  # fmt: skip


def _softmax(a: dict[str, np.ndarray]) -> np.ndarray:
    e = np.exp(a["input0"] - a["input0"].max(axis=1, keepdims=True))
    return e / e.sum(axis=1, keepdims=True)


def _layernorm(a: dict[str, np.ndarray]) -> np.ndarray:
    x = a["input0"]
    c = x - x.mean(axis=1, keepdims=True)
    return c / np.sqrt((c * c).mean(axis=1, keepdims=True) + 1e-5) * a["input1"] + a["input2"]


CONVS: dict[str, tuple[str, Conv, Conv]] = {
    # key: (what, the real shape, a tiny one of the same structure for the tests)
    "conv1d": ("conv1d k3 pad 1, {n}x64x256 -> 128", Conv(64, 128, (256,), (3,), pad=1),
               Conv(3, 4, (9,), (3,), pad=1)),
    "conv2d": ("conv2d 3x3 valid, {n}x64x58x58 -> 64", Conv(64, 64, (58, 58), (3, 3)), Conv(3, 4, (7, 6), (3, 3))),
    "conv2d_pad": ("conv2d 3x3 pad 1, {n}x128x28x28 -> 128", Conv(128, 128, (28, 28), (3, 3), pad=1),
                   Conv(3, 4, (6, 5), (3, 3), pad=1)),
    "conv2d_stride": ("conv2d 3x3 stride 2 pad 1, {n}x64x56x56 -> 128", Conv(64, 128, (56, 56), (3, 3), 2, 1),
                      Conv(3, 4, (7, 8), (3, 3), 2, 1)),
    "conv2d_dilated": ("conv2d 3x3 dilation 2 pad 2, {n}x128x28x28 -> 128",
                       Conv(128, 128, (28, 28), (3, 3), pad=2, dilation=2), Conv(3, 4, (7, 6), (3, 3), pad=2, dilation=2)),
    "conv2d_grouped": ("grouped conv 3x3 pad 1, 32 groups, {n}x256x28x28 -> 256",
                       Conv(256, 256, (28, 28), (3, 3), pad=1, groups=32), Conv(4, 6, (5, 5), (3, 3), pad=1, groups=2)),
    "depthwise": ("depthwise 3x3 pad 1, {n}x144x56x56", Conv(144, 144, (56, 56), (3, 3), pad=1, groups=144),
                  Conv(3, 3, (6, 7), (3, 3), pad=1, groups=3)),
    "conv2d_transposed": ("transposed conv 4x4 stride 2 pad 1, {n}x128x16x16 -> 64",
                          Conv(128, 64, (16, 16), (4, 4), 2, 1, transposed=True),
                          Conv(3, 4, (4, 5), (4, 4), 2, 1, transposed=True)),
    "conv2d_1x1": ("conv2d 1x1, {n}x256x28x28 -> 128", Conv(256, 128, (28, 28), (1, 1)), Conv(5, 4, (3, 4), (1, 1))),
    "conv2d_7x7": ("conv2d 7x7 stride 2 pad 3, {n}x3x224x224 -> 64", Conv(3, 64, (224, 224), (7, 7), 2, 3),
                   Conv(3, 4, (11, 10), (7, 7), 2, 3)),
    "conv2d_7x7map": ("conv2d 3x3 pad 1 on 7x7, {n}x512x7x7 -> 512", Conv(512, 512, (7, 7), (3, 3), pad=1),
                      Conv(6, 5, (3, 3), (3, 3), pad=1)),
    "conv3d": ("conv3d 3x3x3 pad 1, {n}x64x4x14x14 -> 64", Conv(64, 64, (4, 14, 14), (3, 3, 3), pad=1),
               Conv(3, 4, (3, 4, 5), (3, 3, 3), pad=1)),
}  # fmt: skip


def ops(batch: int, tiny: bool = False) -> dict[str, Op]:
    """The operators at `batch` (`tiny`: the same programs at shapes small enough for tests)."""
    n = batch
    found = {key: conv.op(what.format(n=n), n) for key, (what, full, small) in CONVS.items()
             for conv in [small if tiny else full]}  # fmt: skip
    heads, seq, hidden = (2, 5, 3) if tiny else (12, 128, 64)
    found["bmm_qk"] = _bmm(f"batched matmul Q K^T, {heads * n}x{seq}x{hidden} @ {hidden}x{seq}", heads * n, seq,
                           hidden, seq)  # fmt: skip
    found["bmm_av"] = _bmm(f"batched matmul A V, {heads * n}x{seq}x{seq} @ {seq}x{hidden}", heads * n, seq, seq,
                           hidden)  # fmt: skip
    m, k = (6, 3) if tiny else (512, 32)
    found["matmul_small"] = _bmm(f"matmul {m}x{k}x{m} (small K), batch {n}", n, m, k, m)
    rows, cols = (heads * n * seq, seq)
    found["softmax"] = Op(f"softmax, {rows}x{cols} (attention rows)", SOFTMAX, {"input0": f32(rows, cols)}, 0.0,
                          _softmax, lambda t, x: t.softmax(x["input0"], dim=-1))  # fmt: skip
    rows, cols = (n * 5, 7) if tiny else (n * 128, 768)
    found["layernorm"] = Op(f"layer norm, {rows}x{cols}", LAYERNORM.format(c=cols),
                            {"input0": f32(rows, cols), "input1": f32(cols), "input2": f32(cols)}, 0.0, _layernorm,
                            lambda t, x: t.nn.functional.layer_norm(x["input0"], (cols,), x["input1"], x["input2"]))  # fmt: skip
    c, hw = (5, 3) if tiny else (2048, 7)
    found["reduce_pool"] = Op(f"global average pool, {n}x{c}x{hw}x{hw}", f"output0[N, C] +=! input0[N, C, H, W] / {hw * hw}.0",
                              {"input0": f32(n, c, hw, hw)}, 0.0, lambda a: a["input0"].mean(axis=(2, 3)),
                              lambda t, x: t.mean(x["input0"], dim=(2, 3)))  # fmt: skip
    t_, c = (4, 6) if tiny else (128, 768)
    found["reduce_tokens"] = Op(f"mean over tokens, {n}x{t_}x{c}", f"output0[N, C] +=! input0[N, T, C] / {t_}.0",
                                {"input0": f32(n, t_, c)}, 0.0, lambda a: a["input0"].mean(axis=1),
                                lambda t, x: t.mean(x["input0"], dim=1))  # fmt: skip
    return found


# ---- running one operator ---------------------------------------------------------------------


def _layouts(t: Any, op: Op, tensors: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """torch's inputs in each layout worth trying: contiguous, and channels-last for 4-d and
    5-d tensors (oneDNN's preferred convolution layout)."""
    found = {"contiguous": tensors}
    formats = {4: t.channels_last, 5: t.channels_last_3d}
    if any(x.dim() in formats for x in tensors.values()):
        found["channels-last"] = {k: x.contiguous(memory_format=formats[x.dim()]) if x.dim() in formats else x
                                  for k, x in tensors.items()}  # fmt: skip
    return found


SLOW_CALL_S = 1.0
"""An operator whose einc kernel takes longer than this a call is timed in 3 samples at most."""


def task_of(op: Op) -> Any:
    from einc.tune.types import TuneTask

    return TuneTask(op.ir, "c", f"<{op.name}>", op.inputs)


def tune_op(op: Op, trials: int, threads: int, workers: int, seed: int = 0,
            records: str | None = None) -> tuple[str | None, str | None, dict[str, Any]]:  # fmt: skip
    """The best schedule of `trials` tuning trials (None: the default kept), the fastest
    trial's schedule (None: the default's, or the best's) and what the tuner said, through
    the public tuner API with a record database: `records` (SQLite, kept: `--from-records`
    times its decisions later), else a temporary one. On a busy machine the tuner keeps
    the default unless a finalist beat it beyond the noise: the fastest trial then says what
    the space reached."""
    from einc.tune.tuner import tune

    with tempfile.TemporaryDirectory() as tmp:
        start = time.perf_counter()
        db = Path(records) if records is not None else Path(tmp) / "records.db"
        result = tune(task_of(op), trials=trials, threads=threads, workers=workers, db=db, seed=seed)
        seconds = time.perf_counter() - start
    best = result.best
    # The default sketch has knobs too: a crowned point may be one of its other points.
    crowned = best is not None and result.decision is not None and not result.kept_default
    info = {"crowned": crowned, "seconds": seconds, "trials": len(result.history), "failures": dict(result.failures),
            "reason": result.decision.reason if result.decision is not None else None,
            "point": best.candidate.point.describe() if best is not None else None}  # fmt: skip
    decided = best.candidate.schedule if crowned and best is not None else None
    fastest = result.fastest
    other = None
    default_point = result.default.candidate.point if result.default is not None else None
    if fastest is not None and fastest.candidate.point != default_point and fastest.candidate.schedule != decided:
        other = fastest.candidate.schedule
        info["fastest_point"] = fastest.candidate.point.describe()
    return decided, other, info


def recorded_op(op: Op, records: str, any_space: bool = False) -> tuple[str | None, str | None, dict[str, Any]] | None:
    """What `tune_op` gives, read from a record database instead of tuning: the schedule of the
    tuner's decision for the operator on this machine (None: the default kept), the fastest OK
    trial's (None: the default's or the decision's) and a summary; None when the database has
    no decision that applies here (another device, compiler or search-space version; with
    `any_space`, a decision made by another version of the search space is taken too: its
    schedule is a whole script, refused when compiled if it no longer applies)."""
    import dataclasses

    from einc.compiler.records import RecordStore, find_record, record_context
    from einc.targets import get_target
    from einc.tune.space import SearchSpace

    task = task_of(op)
    target = get_target(task.target)
    here = context = record_context(target)
    found = find_record(task.normalized, target, db=records)
    if found is None and any_space:
        with RecordStore(records, create=False) as store:
            for other, _ in store.others(task.key, task.target, here):
                if other is not None and other.differing(here) == ["space"]:
                    context = dataclasses.replace(here, space=other.space)
                    if (best := store.best(task.key, task.target, context)) is not None:
                        found = (best, Path(records))
                        break
    if found is None:
        return None
    record, _ = found
    crowned = not record.kept_default
    info: dict[str, Any] = {"crowned": crowned, "reason": record.decision, "point": record.point().describe(),
                            "record": record.id, "from_records": records}  # fmt: skip
    decided = record.schedule if crowned else None
    with RecordStore(records, create=False) as store:
        trials = [r for r in store.trials(task.key, task.target, context) if r.ok]
    info["trials"] = len(trials)
    info["space"] = context.space
    other = None
    if trials:
        fastest = min(trials, key=lambda r: r.median_s)
        # the default point of the space that made the records (another's: compared by schedule)
        default = SearchSpace.from_task(task).default_point() if context == here else None
        if fastest.point() not in (record.point(), default) and fastest.schedule != decided:
            other = fastest.schedule
            info["fastest_point"] = fastest.point().describe()
    return decided, other, info


def run_op(key: str, op: Op, batch: int, repeat: int, threads: int, tuned: str | None = None,
           fastest: str | None = None, sketch: str | None = None) -> dict[str, Any]:  # fmt: skip
    """Check einc (default, and the `tuned` and `fastest` trial's schedules when given, and
    the default point of the search space's `sketch`, where the space has it) and torch
    against the reference, then time them interleaved; a row of the table (`sketch_s`: the
    sketch's seconds, in the JSON and the progress line only)."""
    import torch
    from machine import fma_peak_gflops

    from einc.errors import ScheduleError
    from einc.runtime.arrays import aligned_empty
    from einc.semantics.compare import max_error, tolerance

    rng = np.random.default_rng()
    start = time.perf_counter()
    task = task_of(op)
    kernels = {"default": task.compilation(None).kernel()}
    if sketch is not None:
        from einc.tune.space import SearchSpace

        space = SearchSpace.from_task(task)
        if sketch in space.sketches:
            kernels["sketch"] = task.compilation(space.candidate(space.sketch_default(sketch)).schedule).kernel()
        else:
            print(f"{op.name}: no sketch {sketch!r} in its space ({', '.join(space.sketches)})", file=sys.stderr)
    for side, schedule in (("tuned", tuned), ("fastest", fastest)):
        if schedule is None:
            continue
        try:
            kernels[side] = task.compilation(schedule).kernel()
        except ScheduleError as err:  # a recorded script of another search space (--any-space)
            print(f"{op.name}: the {side} schedule no longer applies ({err}); not timed", file=sys.stderr)
    compile_s = time.perf_counter() - start
    arrays = {name: rng.uniform(-1, 1, v["shape"]).astype(np.float32) for name, v in op.inputs.items()}
    want = op.numpy({name: a.astype(np.float64) for name, a in arrays.items()})
    outs = {"output0": aligned_empty(want.shape, np.float32)}  # as einc allocates its own outputs
    errors: dict[str, float] = {}
    calls: dict[str, Callable[[], object]] = {}
    slowest = 0.0
    for side, kernel in kernels.items():
        outs["output0"].fill(np.nan)
        once = time.perf_counter()
        kernel.run(arrays, outs)
        slowest = max(slowest, time.perf_counter() - once)
        errors[side] = max_error(outs["output0"], want)
        calls[side] = lambda kernel=kernel: kernel.run(arrays, outs)
    with torch.inference_mode():
        layouts = _layouts(torch, op, {name: torch.from_numpy(a) for name, a in arrays.items()})
        for layout, tensors in layouts.items():
            errors[f"torch {layout}"] = max_error(np.asarray(op.torch(torch, tensors)), want)
        # the faster layout, by a short timing of each outside the comparison
        quick = interleaved({name: (lambda x=x: op.torch(torch, x)) for name, x in layouts.items()}, 3, 0.03)
        layout = min(quick, key=lambda name: quick[name])
        calls["torch"] = lambda x=layouts[layout]: op.torch(torch, x)
        for side, error in errors.items():
            if error > tolerance("float32"):
                raise SystemExit(f"{op.name} (batch {batch}): {side} is wrong (error {error:.2e})")
        if slowest > SLOW_CALL_S:  # seconds a call: fewer samples keep the run to minutes
            repeat = min(repeat, 3)
        before = fma_peak_gflops(threads, runs=3, seconds=0.05, clock="wall")
        median = interleaved(calls, repeat)
        # the FMA peak beside the operator: the better of just before and just after its timing
        peak_gflops = max(before, fma_peak_gflops(threads, runs=3, seconds=0.05, clock="wall"))
    nbytes = sum(a.nbytes for a in arrays.values()) + want.size * 4
    return {"key": key, "name": op.name, "batch": batch, "threads": threads, "flops": op.flops, "bytes": nbytes,
            "torch_layout": layout, "compile_s": compile_s, "errors": errors, "repeat": repeat,
            "fma_peak_gflops": peak_gflops,
            **{f"{side}_s": seconds for side, seconds in median.items()}}  # fmt: skip


# ---- the table ------------------------------------------------------------------------------------


def geomean(xs: list[float]) -> float | None:
    return float(np.exp(np.mean(np.log(xs)))) if xs else None


def markdown(result: dict[str, Any]) -> str:
    """The table of a run (or merged runs): one row per operator and batch (its `peak`: the FMA
    peak timed beside it, or in older runs the run's one at the start), geometric means of
    einc/torch per batch and schedule."""
    header = ["operator", "batch", "peak GFLOP/s", "torch ms", "default ms", "default GFLOP/s", "default einc/torch",
              "default of peak", "default of triad", "tuned ms", "tuned einc/torch", "tuned of peak",
              "tuned of triad"]  # fmt: skip
    fastest = any("fastest_s" in r for r in result["rows"])
    if fastest:
        header += ["fastest trial ms", "fastest einc/torch", "fastest of peak"]
    rows, ratios = [], {}
    for r in result["rows"]:
        # the ceilings of the run that measured the row
        peak = r.get("fma_peak_gflops", result["machine"]["fma_peak_gflops"])
        triad = r.get("triad_gbs", result["machine"]["triad_gbs"])
        cells = [r["name"], str(r["batch"]), f"{peak:.0f}", f"{r['torch_s'] * 1e3:.3f}"]
        for side in ("default", "tuned"):
            s = r.get(f"{side}_s")
            if s is None:
                cells += ["-"] * (5 if side == "default" else 4)
                continue
            ratio = r["torch_s"] / s
            ratios.setdefault((r["batch"], side), []).append(ratio)
            gflops = r["flops"] / s / 1e9
            kept = side == "tuned" and s == r["default_s"]  # the tuner kept the default schedule
            cells += [f"{s * 1e3:.3f}" + (" (default kept)" if kept else "")]
            cells += [f"{gflops:.1f}" if r["flops"] else "-"] if side == "default" else []
            cells += [f"{ratio:.2f}", f"{gflops / peak:.2f}" if r["flops"] else "-", f"{r['bytes'] / s / 1e9 / triad:.2f}"]
        if fastest:
            f = r.get("fastest_s") or (r.get("tuned_s") if "tuning" in r else None)
            cells += ["-"] * 3 if f is None else [
                f"{f * 1e3:.3f}", f"{r['torch_s'] / f:.2f}", f"{r['flops'] / f / 1e9 / peak:.2f}" if r["flops"] else "-"]
            if f is not None:
                ratios.setdefault((r["batch"], "fastest"), []).append(r["torch_s"] / f)
        rows.append(cells)
    for batch in sorted({b for b, _ in ratios}):
        d, t = geomean(ratios.get((batch, "default"), [])), geomean(ratios.get((batch, "tuned"), []))
        rows.append([f"**geometric mean** ({len(ratios.get((batch, 'default'), []))} operators; tuned: "
                     f"{len(ratios.get((batch, 'tuned'), []))})", str(batch), "", "", "", "",
                     f"{d:.2f}" if d else "-", "", "", "", f"{t:.2f}" if t else "-", "", ""]
                    + (["", f"{g:.2f}" if (g := geomean(ratios.get((batch, "fastest"), []))) else "-", ""]
                       if fastest else []))  # fmt: skip
    runs = result.get("runs", [result["machine"]])
    return "\n".join(f"- {_intro(m)}" for m in runs) + "\n\n" + table(rows, header)


def _intro(m: dict[str, Any]) -> str:
    """One run's machine, ceilings and conditions."""
    return (f"{m['cpu']}, {m['threads']} threads (OMP_NUM_THREADS), torch {m['torch']}; FMA peak "
             f"{m['fma_peak_gflops']:.1f} GFLOP/s" + (" at the start (each row's: timed beside it)" if m.get("peak_beside") else "")
             + f", STREAM triad {m['triad_gbs']:.1f} GB/s (benchmarks/machine.py, same run); "
             f"medians of {m['repeat']}" + (f"; tuned: {m['trials']} trials" if m.get("trials") else "")
             + (f"; load average {m['load_before']:.1f} before, {m['load_after']:.1f} after"
                if "load_after" in m else "")
             + (f"; OMP_WAIT_POLICY={m['wait_policy']}" if m.get("wait_policy") else ""))  # fmt: skip


def merge(paths: list[str]) -> dict[str, Any]:
    """Saved runs merged: each run's machine line, rows keyed by (operator, batch) with the
    ceilings of the run that measured them, a later run's timings of a column replacing an
    earlier's."""
    merged: dict[str, Any] = {}
    rows: dict[tuple[str, int], dict[str, Any]] = {}
    for path in paths:
        run = json.loads(Path(path).read_text())
        merged.setdefault("machine", run["machine"])
        merged.setdefault("runs", []).append(run["machine"])
        ceilings = {k: run["machine"][k] for k in ("fma_peak_gflops", "triad_gbs")}
        for r in run["rows"]:
            rows.setdefault((r["key"], r["batch"]), {}).update({**ceilings, **r})
    merged["rows"] = list(rows.values())
    return merged


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--batch", default="1,16", help="comma-separated batch sizes")
    parser.add_argument("--repeat", type=int, default=5, help="timing samples per kernel")
    parser.add_argument("--only", help="comma-separated operator keys (default: all)")
    parser.add_argument("--tune", help="comma-separated operator keys to tune too, or 'all'")
    parser.add_argument("--trials", type=int, default=32, help="tuning trials per operator and batch")
    parser.add_argument("--workers", type=int, default=2, help="parallel C builds while tuning")
    parser.add_argument("--records", help="keep the tuner's records in this SQLite database (with --tune)")
    parser.add_argument("--from-records", help="time the decisions kept in this record database (no tuning): "
                        "the tuned and fastest-trial columns of every operator it has a decision for")
    parser.add_argument("--any-space", action="store_true", help="with --from-records: also the decisions "
                        "of another version of the CPU search space (their scripts, refused if they no longer apply)")
    parser.add_argument("--sketch", help="also time this sketch's default point of the operator's search space "
                        "(e.g. policy.nogroup) beside the default, interleaved (the JSON's sketch_s)")
    parser.add_argument("--clock", choices=["wall", "cpu"], default="wall", help="time by wall clock (default) or "
                        "by the process's CPU time (one thread on a shared machine: the time slices others take "
                        "are not counted)")
    parser.add_argument("--json", help="write every number here")
    parser.add_argument("--markdown", action="store_true", help="print the table as Markdown (README)")
    parser.add_argument("--from-json", nargs="+", help="print the table of saved runs instead of running")
    args = parser.parse_args(argv)
    if args.from_json:
        print(markdown(merge(args.from_json)))
        return
    keys = list(ops(1))
    only = keys if not args.only else [k.strip() for k in args.only.split(",")]
    tune = set() if not args.tune else set(keys if args.tune == "all" else [k.strip() for k in args.tune.split(",")])
    if args.from_records and (args.tune or args.records):
        parser.error("--from-records times recorded decisions: it takes no --tune or --records")
    if args.from_records and not Path(args.from_records).exists():
        parser.error(f"no record database at {args.from_records}")
    for k in [*only, *tune]:
        if k not in keys:
            parser.error(f"unknown operator {k!r}; known: {', '.join(keys)}")
    threads = int(os.environ.setdefault("OMP_NUM_THREADS", "2"))
    import cpu_batch1

    cpu_batch1.clock = cpu_batch1.CLOCK[args.clock]
    import torch

    from machine import cpu_model, fma_peak_gflops, stream_bandwidth_gbs

    torch.set_num_threads(threads)
    machine = {"cpu": cpu_model(), "threads": threads, "torch": torch.__version__, "repeat": args.repeat,
               "fma_peak_gflops": fma_peak_gflops(threads), "triad_gbs": stream_bandwidth_gbs(threads),
               "trials": args.trials if tune else None, "records": args.records or args.from_records,
               "wait_policy": os.environ.get("OMP_WAIT_POLICY"), "clock": args.clock,
               "load_before": os.getloadavg()[0], "peak_beside": True}  # fmt: skip
    print(f"FMA peak {machine['fma_peak_gflops']:.1f} GFLOP/s, triad {machine['triad_gbs']:.1f} GB/s, "
          f"{threads} threads", file=sys.stderr, flush=True)  # fmt: skip
    rows = []
    for batch in (int(b) for b in args.batch.split(",")):
        table_ops = ops(batch)
        for key in only:
            op = table_ops[key]
            schedule, fastest, info = (None, None, None)
            if key in tune:
                print(f"tuning {op.name} ({args.trials} trials) ...", file=sys.stderr, flush=True)
                schedule, fastest, info = tune_op(op, args.trials, threads, args.workers, records=args.records)
            elif args.from_records and (found := recorded_op(op, args.from_records, args.any_space)) is not None:
                schedule, fastest, info = found
            row = run_op(key, op, batch, args.repeat, threads, schedule, fastest, args.sketch)
            row["triad_gbs"] = machine["triad_gbs"]
            if info is not None:
                row["tuning"] = info
                row.setdefault("tuned_s", row["default_s"])  # the default kept: tuned is the default
            rows.append(row)
            line = "  ".join(f"{side} {row[f'{side}_s'] * 1e3:8.3f} ms" for side in ("torch", "default", "tuned", "fastest", "sketch")
                             if f"{side}_s" in row)  # fmt: skip
            print(f"[batch {batch}] {op.name:56s} {line}  einc/torch {row['torch_s'] / row['default_s']:.2f}"
                  + (f"  (tuning: {info['reason']})" if info is not None else ""), file=sys.stderr, flush=True)  # fmt: skip
            if args.json:  # as it goes: an interrupted run keeps its rows
                Path(args.json).write_text(json.dumps({"machine": machine, "rows": rows}, indent=1))
    machine["load_after"] = os.getloadavg()[0]
    result = {"machine": machine, "rows": rows}
    if args.json:
        Path(args.json).write_text(json.dumps(result, indent=1))
    if args.markdown:
        print(markdown(result))
    else:
        print(json.dumps(result, indent=1))


if __name__ == "__main__":
    main()
