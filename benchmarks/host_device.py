"""This machine's CPU as an OpenCL (PoCL) or SYCL (Intel CPU runtime) device, described for the
performance model (einc/perfmodel) from measured facts, and the model's prediction of what a
benchmark measures on it.

    .venv/bin/python benchmarks/host_device.py --target opencl [--out cpu-opencl.json]
    .venv/bin/python benchmarks/host_device.py --against README.md   # the model beside a table's times
    .venv/bin/python benchmarks/host_device.py --against run.json --facts facts.json  # a device_kernels.py --json run

The description (a JSON file `einc check --model FILE` and `Kernel.model(FILE)` read) holds:

- measured here (benchmarks/machine.py): the float32 FMA peak of all cores (per CPU second,
  so another process on a shared core does not lower it), the STREAM triad bandwidth, the
  core clock under load; the cores (`os.cpu_count()`: what PoCL reports as compute units);
- measured on the target's runtime, in CPU seconds of the process (the runtime's worker
  threads included: what the work costs, however long other processes hold the cores; the
  host side of a call is serial, so on a quiet machine its wall time): the cost of one kernel
  launch (`launch_us`: a call of a tiny three-kernel program minus a call of a tiny one-kernel
  program, halved), of one call (`call_us`: the one-kernel call less one launch; not a field
  of the model's device, used by `predict` below) and of one `exp` (`math_instructions`: a
  row sum with and without an exp per element, one row per work-item, in cycles, times
  `issue_per_clock`; `barrier_lanes`: the work-items run at a time between barriers, from a
  256-wide tree row sum on rows of 256 and of 1024 against the row sum's scalar element);
- facts of the vector ISA: a "warp" is one vector register of float32 lanes (16 with AVX-512:
  PoCL and the SYCL CPU runtime vectorize the work-items of a work-group across them),
  `sector_bytes` the 64-byte cache line, `l1_bytes_per_clock` 64 (one 512-bit or two 256-bit
  loads a clock: the load ports of current x86 cores, AMD's Zen 4 and Intel's Sapphire Rapids
  optimization guides), `issue_per_clock` the vector FMAs a core issues per clock (measured:
  the FMA peak / (cores x clock x 2 x lanes), at least `VECTOR_ISSUE`); FP16 and FP64 at the FP32 rate and half of it
  (a CPU converts float16 to float32 to compute; a vector holds half as many doubles);
- how the runtimes run work-groups: one at a time per core, each over all its work-items, so
  registers and "shared" (local) memory do not limit residency (registers_per_sm 0; local
  memory is ordinary memory: the L2's size), and nothing is starved of warps to switch to (a
  core's out-of-order window hides latency, not other work-groups: blocks_per_sm is set high).

- the last-level cache (`cache_bytes`, `cache_gbps`: the STREAM triad on arrays that fit in
  the L3 together): a kernel whose buffers fit in it reads them there, as a benchmark calling
  a kernel repeatedly on the same arrays leaves them.

`predict` adds to the model's kernel time the host side of a call as the benchmark measures
it: `call_us` and each input copied in and each output copied out at the STREAM copy
bandwidth (one read and one write per byte; the in-L3 copy bandwidth where the host arrays
and the device buffers fit in the L3 together); none on SYCL and OpenCL where their runtimes
pass the caller's arrays to the kernels as they are (einc/runtime/sycl.py and opencl.py
`arrays_in_place`; OpenCL's needs 128-byte aligned arrays, which device_kernels.py passes). Nothing
is fitted to the benchmark kernels.
"""

from __future__ import annotations

import argparse
import functools
import json
import math
import os
import re
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
import machine  # noqa: E402

TINY_ONE = "input input0: float32[16]\noutput0[N] = input0[N] + 1.0\n"
TINY_THREE = """input input0: float32[1, 16]
temp0[N] >=! input0[N, C]
temp1[N] +=! (input0[N, C] - temp0[N]).call(`exp`)
output0[N, C] = (input0[N, C] - temp0[N]).call(`exp`) / temp1[N]
"""


LOOP_WARP = {"opencl": 1, "sycl": 1}
"""How the runtime runs a kernel whose work-items run loops (Device.loop_warp: 1, one
work-item at a time on scalar instructions). PoCL builds a work-group as a loop over its
work-items and leaves vectorizing to LLVM's loop vectorizer, which vectorizes innermost loops
only (PoCL's documentation, "implicit loop vectorization"): where a work-item runs a loop of
its own, that loop is the innermost one, and the exp measurement below shows a scalar libm
call's cycles per element. Intel's CPU runtime documents whole-function vectorization across
work-items, but on the kernels measured here it does not happen: the default MatMul 512^3's
CPU time is the same with its vectorizer on and off (CL_CONFIG_CPU_VECTORIZER_MODE=0 and 1,
29.0 ms both, 2026-11-27) and its rate stays below the scalar FMA peak; so 1 there too, an
observation, not a documented behaviour."""
VECTOR_ISSUE = 2
"""The fewest vector instructions a core issues per clock (Device.issue_per_clock is the
larger of this and the FMA peak's count): the FMA peak counts 512-bit FMAs, and where those
are double-pumped on 256-bit pipes (AMD Zen 4: one a clock) the core still issues two other
vector instructions a clock beside them (Zen 4's four FP pipes: two FMA, two FADD; Intel's
Sapphire Rapids: two 512-bit FMA ports, its peak's count already). On Zen 4 the FMA count
alone (1) put PoCL's register-tiled matmuls at 0.26-0.51 of the model's time (2026-11-29)."""
BARRIER_INSTRUCTIONS = 8.0
"""Instructions a barrier costs each work-item beyond saving and restoring its register
arrays (Device.barrier_instructions) where the facts do not hold the tree row sums that
measure it (`barrier_cycles`; facts files saved before 2026-11-28 12:00): PoCL and Intel's CPU
runtime run a work-group as a loop over its work-items per region between barriers, and each
work-item's step through a region is the loop's increment, compare and branch, the address of
its saved context and its guard (a compare and a branch) - an estimate from that code's shape."""
MATH_ROWS, MATH_COLS = 256, 4096
ROW_SUM = f"input input0: float32[{MATH_ROWS}, {MATH_COLS}]\noutput0[N] +=! input0[N, C]\n"
ROW_SUM_EXP = f"input input0: float32[{MATH_ROWS}, {MATH_COLS}]\noutput0[N] +=! input0[N, C].call(`exp`)\n"
ELEMENTWISE = f"input input0: float32[{MATH_ROWS}, {MATH_COLS}]\noutput0[N, C] = input0[N, C] + 1.0\n"
ELEMENTWISE_EXP = f"input input0: float32[{MATH_ROWS}, {MATH_COLS}]\noutput0[N, C] = input0[N, C].call(`exp`) + 1.0\n"
"""An elementwise kernel with and without an exp per element (a work-item an element, no loop:
the runtimes vectorize it across work-items): the cost of an exp in vectorized code."""


TREE_WIDE, TREE_NARROW = 256, 16
TREE_ROW_COUNT = 4096
TREE_ROWS = f"input input0: float32[{TREE_ROW_COUNT}, {TREE_WIDE}]\noutput0[N] +=! input0[N, C]\n"
"""Short rows (one element a work-item at the wide width), many of them: the tree steps
(256 · 8 a row against 16 · 4) outweigh the loads and adds, so their difference stands out of
a shared machine's noise (on rows of 4096 it was 15% of the time, and read 0 to 1.4 cycles)."""
"""The work-group widths of the two tree row sums whose difference measures a barrier's cost
per work-item (`_tree_row_sum_s`)."""
TREE_LONG = TREE_ROWS.replace(f", {TREE_WIDE}]", f", {4 * TREE_WIDE}]")
"""The wide tree's rows four times as long (4 elements a work-item before the tree, the same
barriers): the cycles an element adds in a kernel with barriers (`barrier_lanes`)."""


def _tree_long_s(target: str) -> float:
    """CPU seconds of a call of TREE_LONG as the TREE_WIDE-wide tree reduction."""
    from device_schedules import cross_thread_lines, script

    return _call_cpu_seconds(TREE_LONG, target, 20, schedule=script(cross_thread_lines("output0", TREE_WIDE)))


def barrier_lanes(facts: dict[str, Any], lanes: int) -> int:
    """The work-items a runtime runs at a time between barriers (Device.barrier_lanes): the
    cycles an element costs a work-item's loop over its own row (the row sum, a row per
    work-item: scalar) over the cycles an element adds to the wide tree row sum (its rows 4
    times as long: 3 more elements a work-item, loaded and added before the same barriers),
    rounded, 1 to `lanes`; 0 (vectorized) in a facts file without the long tree."""
    if "tree_long_s" not in facts:
        return 0
    scalar = facts["row_sum_s"] / (MATH_ROWS * MATH_COLS)
    added = max(1e-12, facts["tree_long_s"] - facts["tree_wide_s"]) / (TREE_ROW_COUNT * 3 * TREE_WIDE)
    return max(1, min(lanes, round(scalar / added)))


def _tree_row_sum_s(target: str, threads: int) -> float:
    """CPU seconds of a call of TREE_ROWS as a cross-thread tree reduction, `threads` work-items
    per row (one work-group a row; each work-item sums threads-strided elements, then
    log2(threads) halving steps, each behind a barrier). The elements loaded and added are
    the same at every width, so the difference between two widths is the tree's steps:
    per row and work-item, a barrier's region step and a guarded add."""
    from device_schedules import cross_thread_lines, script

    return _call_cpu_seconds(TREE_ROWS, target, 20, schedule=script(cross_thread_lines("output0", threads)))


def tree_barriers(threads: int) -> int:
    """The barrier steps per work-item of a `threads`-wide tree reduction over one row (as
    the model counts them: one a halving step)."""
    return int(math.log2(threads))


def _call(source: str, target: str, schedule: str = "none") -> Callable[[], None]:
    import einc

    kernel = einc.compile(source, target=target, schedule=schedule, use_records=False)
    arrays = {i.name: np.random.default_rng(0).uniform(-1, 1, i.shape).astype(i.dtype) for i in kernel.inputs}
    outs = {o.name: np.empty(o.shape, o.dtype) for o in kernel.outputs}
    return lambda: kernel.run(arrays, outs)


def _call_cpu_seconds(source: str, target: str, calls: int = 10, schedule: str = "none") -> float:
    """The least CPU time (of all the process's threads: the runtime's workers included) a
    call took, over 7 samples of `calls` calls: what the work costs, however long another
    process holds the cores."""
    call = _call(source, target, schedule)
    call()
    best = float("inf")
    for _ in range(7):
        start = time.process_time()
        for _ in range(calls):
            call()
        best = min(best, (time.process_time() - start) / calls)
    return best


def _bandwidth(cores: int, kind: str, array_bytes: int = 0) -> float:
    """STREAM `kind` GB/s of all cores: the best of all cores streaming together and, in the
    cache (`array_bytes`: arrays an eighth of the L3 each, the three fit in it together), one
    core's times the cores (each core has its own path into the L3), or one core's alone in
    memory. On a shared machine a parallel region waits for the thread another process holds
    off its core, so the one-core figure is the steadier one there. Each in CPU seconds of
    the streaming threads (`clock="cpu"`): on a machine shared with other processes, the wall
    time of a stream counts the time they hold its core (the triad read 3.6 GB/s by the wall
    clock at load average 9, 2026-11-28 12:02)."""
    runs = 60 if array_bytes else 10  # the arrays in memory are 4x the L3 each (1.2 GB on a 300 MiB L3)
    together = machine.stream_bandwidth_gbs(cores, kind, runs=runs, array_bytes=array_bytes, clock="cpu")
    one = machine.stream_bandwidth_gbs(1, kind, runs=runs, array_bytes=array_bytes, clock="cpu")
    return max(together, one * cores if array_bytes else one)


def l2_bytes() -> int:
    """The per-core L2 cache's size (sysfs; 1 MiB when it cannot be read)."""
    try:
        text = Path("/sys/devices/system/cpu/cpu0/cache/index2/size").read_text().strip()
        scale = {"K": 1 << 10, "M": 1 << 20}.get(text[-1], 1)
        return int(text.rstrip("KM")) * scale
    except (OSError, ValueError):
        return 1 << 20


FACTS_FILE: list[str] = []
"""A JSON file of facts by target (`--facts`): read where it holds the target's, else the
measured ones are added to it, so that two runs of the model (before and after a change of
it) predict from the same facts."""


@functools.cache
def measure_facts(target: str) -> dict[str, Any]:
    """This machine's measured facts (see the module) with `target`'s runtime (from the
    `FACTS_FILE` where it holds them)."""
    saved = json.loads(Path(FACTS_FILE[0]).read_text()) if FACTS_FILE and Path(FACTS_FILE[0]).exists() else {}
    if target in saved:
        return saved[target]
    facts = _measure_facts(target)
    if FACTS_FILE:
        Path(FACTS_FILE[0]).write_text(json.dumps({**saved, target: facts}, indent=1))
    return facts


def _measure_facts(target: str) -> dict[str, Any]:
    cores = os.cpu_count() or 1
    # CPU seconds: a tiny call is the host's and the runtime's work, on a quiet machine its wall time
    one, three = _call_cpu_seconds(TINY_ONE, target, 200), _call_cpu_seconds(TINY_THREE, target, 200)
    plain, exp = _call_cpu_seconds(ROW_SUM, target), _call_cpu_seconds(ROW_SUM_EXP, target)
    return {
        "cpu": machine.cpu_model(), "target": target, "cores": cores, "lanes": machine.vector_lanes(),
        "fma_peak_gflops": machine.fma_peak_gflops(cores), "clock_ghz": machine.clock_ghz() or 3.0,
        "triad_gbs": _bandwidth(cores, "triad"), "copy_gbs": _bandwidth(cores, "copy"),
        "l2_bytes": l2_bytes(), "l3_bytes": machine.l3_bytes(),
        "l3_triad_gbs": _bandwidth(cores, "triad", machine.l3_bytes() // 8),
        "l3_copy_gbs": _bandwidth(cores, "copy", machine.l3_bytes() // 8),
        "one_kernel_call_s": one, "three_kernel_call_s": three,
        "row_sum_s": plain, "row_sum_exp_s": exp,  # CPU seconds
        "elementwise_s": _call_cpu_seconds(ELEMENTWISE, target), "elementwise_exp_s": _call_cpu_seconds(ELEMENTWISE_EXP, target),
        "tree_wide_s": _tree_row_sum_s(target, TREE_WIDE), "tree_narrow_s": _tree_row_sum_s(target, TREE_NARROW),
        "tree_long_s": _tree_long_s(target),
        "fadd_cycles": machine.fadd_latency_cycles() or 0.0,
    }  # fmt: skip


def description(facts: dict[str, Any]) -> dict[str, Any]:
    """The device description (the model's JSON fields, plus `call_us` and `copy_gbps`: the
    host side of a call) of a CPU with the measured `facts` (`measure_facts`)."""
    peak, ghz, cores, lanes = facts["fma_peak_gflops"], facts["clock_ghz"], facts["cores"], facts["lanes"]
    one, three = facts["one_kernel_call_s"], facts["three_kernel_call_s"]
    launch = max(0.0, (three - one) / 2)
    issue = max(VECTOR_ISSUE, round(peak / (cores * ghz * 2 * lanes)))
    # a row sum with and without an exp per element, one row per work-item (scalar, see
    # loop_warp), in CPU seconds (all cores'): the cycles one exp takes a core
    exp_cycles = max(0.0, facts["row_sum_exp_s"] - facts["row_sum_s"]) * ghz * 1e9 / (MATH_ROWS * MATH_COLS)
    # the same in code vectorized across work-items: per warp instruction (`lanes` elements)
    vector_exp = (max(0.0, facts["elementwise_exp_s"] - facts["elementwise_s"]) * ghz * 1e9 / (MATH_ROWS * MATH_COLS)
                  if "elementwise_s" in facts else 0.0)  # fmt: skip
    # the facts files saved before the tree row sums were measured: the estimate
    barrier = barrier_cycles(facts, ghz) * issue if "tree_wide_s" in facts else BARRIER_INSTRUCTIONS
    return {
        "name": f"{facts['cpu']}, {cores} cores, as the {facts['target']} device",
        "fp32_tflops": peak / 1e3, "fp16_tflops": peak / 1e3, "fp64_tflops": peak / 2e3,
        "dram_gbps": facts["triad_gbs"], "sms": cores, "warp": lanes, "clock_ghz": ghz,
        "registers_per_sm": 0, "shared_per_sm": facts["l2_bytes"], "shared_per_block": facts["l2_bytes"],
        "threads_per_sm": 1 << 22, "threads_per_block": 8192, "blocks_per_sm": 4096,
        "sector_bytes": 64, "l1_bytes_per_clock": 64,
        "cache_bytes": facts["l3_bytes"], "cache_gbps": facts["l3_triad_gbs"],
        "issue_per_clock": issue, "loop_warp": LOOP_WARP[facts["target"]], "math_instructions": max(4.0, exp_cycles * issue),
        "vector_math_instructions": vector_exp * lanes * issue,
        "chain_cycles": facts["fadd_cycles"], "barrier_instructions": barrier, "barrier_lanes": barrier_lanes(facts, lanes),
        "launch_us": launch * 1e6,
        "sources": f"measured by benchmarks/host_device.py: FMA peak {peak:.1f} GFLOP/s, triad "
                   f"{facts['triad_gbs']:.1f} GB/s, copy {facts['copy_gbs']:.1f} GB/s, in the L3 triad "
                   f"{facts['l3_triad_gbs']:.1f} GB/s, copy {facts['l3_copy_gbs']:.1f} GB/s, clock {ghz:.2f} GHz, "
                   f"one-kernel call {one * 1e6:.0f} us, three-kernel call {three * 1e6:.0f} us, "
                   f"exp {exp_cycles:.1f} cycles, dependent float add {facts['fadd_cycles']:.1f} cycles, "
                   f"exp vectorized {vector_exp:.1f} cycles an element, barrier step {barrier / issue:.2f} cycles a work-item, "
                   f"between barriers {barrier_lanes(facts, lanes) or lanes} work-items at a time",
        # not fields of the model's device: the host side of a call (see predict)
        "call_us": max(0.0, one - launch) * 1e6, "copy_gbps": facts["copy_gbs"],
        "cache_copy_gbps": facts["l3_copy_gbs"],
    }  # fmt: skip


def barrier_cycles(facts: dict[str, Any], ghz: float) -> float:
    """The cycles one tree step (a barrier's region step and its guarded add) costs a
    work-item: the wide tree row sum's CPU time less the narrow one's, over the steps they
    differ by (`tree_barriers` per work-item, a work-group a row)."""
    steps = TREE_ROW_COUNT * (TREE_WIDE * tree_barriers(TREE_WIDE) - TREE_NARROW * tree_barriers(TREE_NARROW))
    return max(0.0, facts["tree_wide_s"] - facts["tree_narrow_s"]) * ghz * 1e9 / steps


def describe(target: str) -> dict[str, Any]:
    """The measured description of this machine's CPU as `target`'s device."""
    return description(measure_facts(target))


HOST_ONLY = ("call_us", "copy_gbps", "cache_copy_gbps")


USED: dict[str, dict[str, Any]] = {}
"""The descriptions `device_file` wrote, by target (for a benchmark's report)."""


@functools.cache
def device_file(target: str) -> str:
    """`describe(target)` written as a device description the model reads (a temporary file)."""
    USED[target] = describe(target)
    data = {k: v for k, v in USED[target].items() if k not in HOST_ONLY}
    path = Path(tempfile.mkdtemp(prefix="einc-host-device-")) / f"cpu-{target}.json"
    path.write_text(json.dumps(data, indent=1))
    return str(path)


def predict(kernel: Any, target: str) -> tuple[float, str, float]:
    """The model's time (s) of one call of `kernel` (compiled for `target`) on this machine's
    CPU as `target`'s device, as the benchmark times it: the kernels (the model) plus the host
    side (the measured call overhead and the copies in and out); its bound; the kernels' share."""
    report = kernel.model(device_file(target))
    facts = describe(target)
    copied = sum(int(np.prod(b.shape)) * np.dtype(b.dtype).itemsize for b in [*kernel.inputs, *kernel.outputs])
    if target == "sycl":
        from einc.runtime.sycl import arrays_in_place

        copied = 0 if arrays_in_place() else copied  # the kernels use the caller's arrays
    elif target == "opencl":
        from einc.runtime.opencl import arrays_in_place as opencl_in_place

        copied = 0 if opencl_in_place() else copied  # (the benchmark's arrays are 128-byte aligned)
    # the host arrays and the device buffers: in the L3 between calls where they fit together
    cached = 2 * copied <= facts["cache_bytes"]
    host = facts["call_us"] * 1e-6 + 2 * copied / (facts["cache_copy_gbps" if cached else "copy_gbps"] * 1e9)
    return report.time_s + host, str(report.bound), report.time_s


FASTEST: dict[tuple[str, str, str], float] = {}  # the fastest timing round of each --json row


def _timed(path: str) -> list[tuple[str, str, str, float, list[str] | str | None]]:
    """(target, kernel, variant, ms, hand schedule lines or None) of the OpenCL and SYCL rows
    of a benchmarks/device_kernels.py run: its `--json` rows (a variant `hand: NAME` is the
    case's hand schedule NAME; a tuned variant, whose script the rows hold, too) or the
    Markdown table it printed (its `default` rows: a `hand` row does not name its schedule)."""
    from device_kernels import cases

    by_name = {c.name: c for c in cases("host")}
    found: list[tuple[str, str, str, float, list[str] | str | None]] = []
    if path.endswith(".json"):
        for row in json.loads(Path(path).read_text()):
            case = by_name.get(row["kernel"])
            if row["target"] not in ("opencl", "sycl") or case is None or row.get("ms") is None:
                continue
            variant, tuned = row["variant"], row.get("extra", {}).get("schedule")
            schedule: list[str] | str | None = tuned if variant != "default" else None  # a tuned script
            if variant.startswith("hand: "):
                schedule = case.hands.get(variant.removeprefix("hand: "))
                if schedule is None:
                    continue
            found.append((row["target"], case.name, variant, float(row["ms"]), schedule))
            FASTEST[(row["target"], case.name, variant)] = min(row.get("extra", {}).get("rounds_ms") or [row["ms"]])
        return found
    for line in Path(path).read_text().splitlines():
        m = re.match(r"\|\s*(opencl|sycl)\s*\|\s*(.+?)\s*\|\s*default\s*\|\s*([\d.]+)\s*\|", line)
        if m is not None and m[2] in by_name:
            found.append((m[1], m[2], "default", float(m[3]), None))
    return found


def against(path: str) -> None:
    """The model's prediction beside the times of a benchmarks/device_kernels.py run (its
    OpenCL and SYCL rows at `--size host`: its `--json` file, or the Markdown table it printed,
    the README's or a saved one), with measured/model and how many are within 2x."""
    import einc
    from common import table
    from device_kernels import cases, script

    by_name = {c.name: c for c in cases("host")}
    rows, ratios, fastest = [], [], []
    for target, name, variant, ms, lines in _timed(path):
        case = by_name[name]
        schedule = script(lines) if isinstance(lines, list) else lines
        kernel = einc.compile(case.ir, case.inputs, target=target, schedule=schedule or "default", use_records=False)
        seconds, bound, kernels = predict(kernel, target)
        ratios.append(ms / (seconds * 1e3))
        fastest.append(FASTEST.get((target, name, variant), ms) / (seconds * 1e3))
        rows.append([target, case.name, variant[:40], f"{ms:.3f}", f"{seconds * 1e3:.3f}", f"{kernels * 1e3:.3f}", bound,
                     f"{ratios[-1]:.2f}"])  # fmt: skip
    print(table(rows, ["target", "kernel", "schedule", "measured ms", "model ms", "of it kernels", "bound",
                       "measured/model"]))  # fmt: skip
    inside = sum(0.5 <= r <= 2 for r in ratios)
    print(f"measured/model within 2x: {inside} of {len(ratios)}")
    if FASTEST:  # on a shared machine another process only adds time: the fastest round is the least disturbed
        best = sum(0.5 <= r <= 2 for r in fastest)
        print(f"fastest round/model within 2x: {best} of {len(fastest)}; misses (fastest round/model): " +
              ", ".join(f"{r[0]} {r[1]} {r[2]} {f:.2f}" for r, f in zip(rows, fastest) if not 0.5 <= f <= 2))
    for target, facts in USED.items():
        print(f"{target}: {facts['name']}: {facts['sources']}; host side of a call {facts['call_us']:.0f} us")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--target", default="opencl", choices=["opencl", "sycl"])
    parser.add_argument("--out", help="write the description here (default: print it)")
    parser.add_argument("--against", metavar="TABLE.md",
                        help="predict the OpenCL/SYCL rows of a device_kernels.py Markdown table (README.md) instead")
    parser.add_argument("--facts", metavar="FACTS.json",
                        help="read the measured facts from this file where it holds them, else add them to it")
    args = parser.parse_args()
    if args.facts:
        FACTS_FILE.append(args.facts)
    if args.against:
        against(args.against)
        return
    print(json.dumps(measure_facts(args.target)), file=sys.stderr)
    text = json.dumps({k: v for k, v in describe(args.target).items() if k not in HOST_ONLY}, indent=1)
    if args.out:
        Path(args.out).write_text(text + "\n")
    else:
        print(text)
    print(f"host side of a call: {describe(args.target)['call_us']:.0f} us plus copies at "
          f"{describe(args.target)['copy_gbps']:.1f} GB/s", file=sys.stderr)  # fmt: skip


if __name__ == "__main__":
    main()
