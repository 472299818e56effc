"""This machine's CPU as an OpenCL (PoCL) or SYCL (Intel CPU runtime) device, described for the
performance model (einc/perfmodel) from measured facts, and the model's prediction of what a
benchmark measures on it.

    .venv/bin/python benchmarks/host_device.py --target opencl [--out cpu-opencl.json]

The description (a JSON file `einc check --model FILE` and `Kernel.model(FILE)` read) holds:

- measured here (benchmarks/machine.py): the float32 FMA peak of all cores (per CPU second,
  so another process on a shared core does not lower it), the STREAM triad bandwidth, the
  core clock under load; the cores (`os.cpu_count()`: what PoCL reports as compute units);
- measured on the target's runtime: the cost of one kernel launch (`launch_us`: a call of a
  tiny three-kernel program minus a call of a tiny one-kernel program, halved) and of one call
  (`call_us`: the one-kernel call less one launch; not a field of the model's device, used by
  `predict` below);
- facts of the vector ISA: a "warp" is one vector register of float32 lanes (16 with AVX-512:
  PoCL and the SYCL CPU runtime vectorize the work-items of a work-group across them),
  `sector_bytes` the 64-byte cache line, `l1_bytes_per_clock` 64 (one 512-bit or two 256-bit
  loads a clock: the load ports of current x86 cores, AMD's Zen 4 and Intel's Sapphire Rapids
  optimization guides), `issue_per_clock` the vector FMAs a core issues per clock (measured:
  the FMA peak / (cores x clock x 2 x lanes)); FP16 and FP64 at the FP32 rate and half of it
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
and the device buffers fit in the L3 together). Nothing is fitted to the benchmark kernels.
"""

from __future__ import annotations

import argparse
import functools
import json
import os
import sys
import tempfile
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
import machine  # noqa: E402
from common import measure  # noqa: E402

TINY_ONE = "input input0: float32[16]\noutput0[N] = input0[N] + 1.0\n"
TINY_THREE = """input input0: float32[1, 16]
temp0[N] >=! input0[N, C]
temp1[N] +=! (input0[N, C] - temp0[N]).call(`exp`)
output0[N, C] = (input0[N, C] - temp0[N]).call(`exp`) / temp1[N]
"""


MATH_ROWS, MATH_COLS = 256, 4096
ROW_SUM = f"input input0: float32[{MATH_ROWS}, {MATH_COLS}]\noutput0[N] +=! input0[N, C]\n"
ROW_SUM_EXP = f"input input0: float32[{MATH_ROWS}, {MATH_COLS}]\noutput0[N] +=! input0[N, C].call(`exp`)\n"


def _call_seconds(source: str, target: str, schedule: str = "none") -> float:
    """The fastest of 7 timed samples of a call (on a shared machine, the least disturbed)."""
    import einc

    kernel = einc.compile(source, target=target, schedule=schedule, use_records=False)
    arrays = {i.name: np.random.default_rng(0).uniform(-1, 1, i.shape).astype(i.dtype) for i in kernel.inputs}
    outs = {o.name: np.empty(o.shape, o.dtype) for o in kernel.outputs}
    return measure(lambda: kernel.run(arrays, outs), repeat=7, min_time=0.1).best_s


def l2_bytes() -> int:
    """The per-core L2 cache's size (sysfs; 1 MiB when it cannot be read)."""
    try:
        text = Path("/sys/devices/system/cpu/cpu0/cache/index2/size").read_text().strip()
        scale = {"K": 1 << 10, "M": 1 << 20}.get(text[-1], 1)
        return int(text.rstrip("KM")) * scale
    except (OSError, ValueError):
        return 1 << 20


@functools.cache
def measure_facts(target: str) -> dict[str, Any]:
    """This machine's measured facts (see the module) with `target`'s runtime."""
    cores = os.cpu_count() or 1
    one, three = _call_seconds(TINY_ONE, target), _call_seconds(TINY_THREE, target)
    plain, exp = _call_seconds(ROW_SUM, target), _call_seconds(ROW_SUM_EXP, target)
    return {
        "cpu": machine.cpu_model(), "target": target, "cores": cores, "lanes": machine.vector_lanes(),
        "fma_peak_gflops": machine.fma_peak_gflops(cores), "clock_ghz": machine.clock_ghz() or 3.0,
        "triad_gbs": machine.stream_bandwidth_gbs(cores, "triad"), "copy_gbs": machine.stream_bandwidth_gbs(cores, "copy"),
        "l2_bytes": l2_bytes(), "l3_bytes": machine.l3_bytes(),
        # arrays an eighth of the L3 each: the three fit in it together
        "l3_triad_gbs": machine.stream_bandwidth_gbs(cores, "triad", array_bytes=machine.l3_bytes() // 8),
        "l3_copy_gbs": machine.stream_bandwidth_gbs(cores, "copy", array_bytes=machine.l3_bytes() // 8),
        "one_kernel_call_s": one, "three_kernel_call_s": three,
        "row_sum_s": plain, "row_sum_exp_s": exp,
    }  # fmt: skip


def description(facts: dict[str, Any]) -> dict[str, Any]:
    """The device description (the model's JSON fields, plus `call_us` and `copy_gbps`: the
    host side of a call) of a CPU with the measured `facts` (`measure_facts`)."""
    peak, ghz, cores, lanes = facts["fma_peak_gflops"], facts["clock_ghz"], facts["cores"], facts["lanes"]
    one, three = facts["one_kernel_call_s"], facts["three_kernel_call_s"]
    launch = max(0.0, (three - one) / 2)
    issue = max(1, round(peak / (cores * ghz * 2 * lanes)))
    # a row sum with and without an exp per element, one row per work-item (scalar, see loop_warp)
    exp_cycles = max(0.0, facts["row_sum_exp_s"] - facts["row_sum_s"]) * cores * ghz * 1e9 / (MATH_ROWS * MATH_COLS)
    return {
        "name": f"{facts['cpu']}, {cores} cores, as the {facts['target']} device",
        "fp32_tflops": peak / 1e3, "fp16_tflops": peak / 1e3, "fp64_tflops": peak / 2e3,
        "dram_gbps": facts["triad_gbs"], "sms": cores, "warp": lanes, "clock_ghz": ghz,
        "registers_per_sm": 0, "shared_per_sm": facts["l2_bytes"], "shared_per_block": facts["l2_bytes"],
        "threads_per_sm": 1 << 22, "threads_per_block": 8192, "blocks_per_sm": 4096,
        "sector_bytes": 64, "l1_bytes_per_clock": 64,
        "cache_bytes": facts["l3_bytes"], "cache_gbps": facts["l3_triad_gbs"],
        "issue_per_clock": issue, "loop_warp": 1, "math_instructions": max(4.0, exp_cycles * issue),
        "launch_us": launch * 1e6,
        "sources": f"measured by benchmarks/host_device.py: FMA peak {peak:.1f} GFLOP/s, triad "
                   f"{facts['triad_gbs']:.1f} GB/s, copy {facts['copy_gbs']:.1f} GB/s, in the L3 triad "
                   f"{facts['l3_triad_gbs']:.1f} GB/s, copy {facts['l3_copy_gbs']:.1f} GB/s, clock {ghz:.2f} GHz, "
                   f"one-kernel call {one * 1e6:.0f} us, three-kernel call {three * 1e6:.0f} us, "
                   f"exp {exp_cycles:.1f} cycles",
        # not fields of the model's device: the host side of a call (see predict)
        "call_us": max(0.0, one - launch) * 1e6, "copy_gbps": facts["copy_gbs"],
        "cache_copy_gbps": facts["l3_copy_gbs"],
    }  # fmt: skip


def describe(target: str) -> dict[str, Any]:
    """The measured description of this machine's CPU as `target`'s device."""
    return description(measure_facts(target))


HOST_ONLY = ("call_us", "copy_gbps", "cache_copy_gbps")


@functools.cache
def device_file(target: str) -> str:
    """`describe(target)` written as a device description the model reads (a temporary file)."""
    data = {k: v for k, v in describe(target).items() if k not in HOST_ONLY}
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
    # the host arrays and the device buffers: in the L3 between calls where they fit together
    cached = 2 * copied <= facts["cache_bytes"]
    host = facts["call_us"] * 1e-6 + 2 * copied / (facts["cache_copy_gbps" if cached else "copy_gbps"] * 1e9)
    return report.time_s + host, str(report.bound), report.time_s


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--target", default="opencl", choices=["opencl", "sycl"])
    parser.add_argument("--out", help="write the description here (default: print it)")
    args = parser.parse_args()
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
