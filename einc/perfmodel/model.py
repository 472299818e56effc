"""The roofline of a lowered program on a device: per kernel, the counts of
einc/perfmodel/counts.py, the resources (registers and shared memory from the target's
compiler where `einc check` compiles for the device's architecture, else estimated),
occupancy, and a time: the launch overhead plus the largest of

- compute: the FLOPs issued (masked lanes of an issuing warp included) at the device's peak
  for their width (FP16, FP32, FP64), plus the tensor-core tiles' (`egpu.mma`) FLOPs at the
  matrix units' FP16 / BF16 peak;
- issue: the warp instructions (a math function `math_instructions` of them) at
  `issue_per_clock` per SM and clock;
- memory: the compulsory traffic (each global buffer's bytes read once and written once,
  at most the sectors its accesses touch: the caches are assumed to catch all reuse) at the
  memory bandwidth (the last-level cache's, where the device gives it and the kernel's
  buffers fit in it together);
- on-chip: the global and local sectors through L1 at `l1_bytes_per_clock` per SM, plus the
  shared-memory wavefronts (one per clock and SM);
- latency, on a device that gives `chain_cycles` (a CPU): the steps of float accumulation
  chains (counts.chain_steps), `chain_cycles` each, per SM.

On a CPU device (`loop_warp`), a kernel whose work-items run loops runs one work-item at a
time, its own vectors as SIMD instructions (counts.py `simd_share`), or, where the target's
runtime packs work-items into lanes (`items_vectorized`) and they have no vectors of their own
and contiguous accesses, with work-items as lanes; a barrier costs every work-item of the group
`barrier_instructions` plus the save and restore of its register arrays (issue), and a kernel
with barriers whose work-items run no loop runs `barrier_lanes` of them at a time.

Each term is for the whole device; a kernel with fewer work-groups than SMs, or whose
work-groups do not fill the SMs evenly, is slowed by the share it leaves idle (the most
work-groups one SM runs / the average), and one with fewer warps per SM than the SM issues
per clock cannot issue every clock. Latency that occupancy does not hide is not modelled: the
time is a lower bound, a roofline, and the report says what bounds it. Nothing is measured.
"""

from __future__ import annotations

import dataclasses
import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from xdsl.dialects.builtin import ModuleOp, VectorType

from einc.dialects import egpu
from einc.errors import RuntimeMissingError
from einc.perfmodel.counts import KernelCounts, count_kernel, kernels, runs_loops
from einc.perfmodel.devices import DEVICES, Device
from einc.runtime.device import KernelResources

if TYPE_CHECKING:
    from einc.runtime.manifest import LaunchManifest
    from einc.targets.clike import CLikeTarget

BOUNDS = ("compute", "issue", "memory", "on-chip", "latency")


@dataclass
class KernelModel:
    counts: KernelCounts
    registers: int
    registers_from: str
    """Where `registers` comes from: the compiler and architecture, or "estimated"."""
    spills: int | None
    shared_bytes: int
    blocks_per_sm: int
    occupancy: float
    occupancy_limit: str
    dram_bytes: float
    terms: dict[str, float]
    """Seconds of each bound (BOUNDS)."""
    launch_s: float
    problems: list[str] = field(default_factory=list[str])

    @property
    def time_s(self) -> float:
        return self.launch_s + max(self.terms.values())

    @property
    def bound(self) -> str:
        """What bounds the kernel: one of BOUNDS, or "launch" when the overhead exceeds them."""
        name, seconds = max(self.terms.items(), key=lambda kv: kv[1])
        return "launch" if self.launch_s > seconds else name

    def to_json_dict(self) -> dict[str, object]:
        c = self.counts
        return {
            "name": c.name, "grid": list(c.grid), "block": list(c.block),
            "flops": c.total_flops, "flops_by_bits": {str(k): v for k, v in sorted(c.flops.items())},
            "matrix_flops": dict(sorted(c.matrix_flops.items())),
            "instructions": c.instructions, "math_calls": c.math_calls, "chain_steps": c.chain_steps, "warp": c.warp,
            "global": {"requests": c.global_requests, "sectors": c.global_sectors, "bytes_requested": c.global_bytes,
                       "sectors_per_request": _ratio(c.global_sectors, c.global_requests), "dram_bytes": self.dram_bytes,
                       "buffers": {k: {"bytes": b.bytes, "load_sectors": b.load_sectors, "store_sectors": b.store_sectors}
                                   for k, b in c.buffers.items()}},
            "shared": {"requests": c.shared_requests, "wavefronts": c.shared_wavefronts,
                       "bank_conflicts": c.bank_conflicts, "bytes": self.shared_bytes},
            "local": {"requests": c.local_requests, "sectors": c.local_sectors},
            "barriers": c.barriers,
            "registers": self.registers, "registers_from": self.registers_from, "spills": self.spills,
            "blocks_per_sm": self.blocks_per_sm, "occupancy": self.occupancy, "occupancy_limit": self.occupancy_limit,
            "time_s": self.time_s, "launch_s": self.launch_s, "terms_s": dict(self.terms), "bound": self.bound,
            "notes": sorted(set(c.notes)), "problems": self.problems,
        }  # fmt: skip


@dataclass
class ModelReport:
    device: Device
    target: str
    kernels: list[KernelModel]
    notes: list[str] = field(default_factory=list[str])

    @property
    def time_s(self) -> float:
        return sum(k.time_s for k in self.kernels)

    @property
    def flops(self) -> float:
        return sum(k.counts.total_flops for k in self.kernels)

    @property
    def bound(self) -> str:
        """What bounds the slowest kernel ("none" without kernels)."""
        return max(self.kernels, key=lambda k: k.time_s).bound if self.kernels else "none"

    @property
    def problems(self) -> list[str]:
        return [f"{k.counts.name}: {p}" for k in self.kernels for p in k.problems]

    def render(self, name: str = "") -> str:
        d = self.device
        head = f"{name}: " if name else ""
        origin = "published figures" if d.key in DEVICES or not d.key else f"the figures of {d.key}"
        lines = [f"{head}target {self.target}, modelled on {d.name} (a roofline from {origin}, not measured)"]
        for k in self.kernels:
            c = k.counts
            lines.append(f"  {c.name}: grid {_shape(c.grid)}, block {_shape(c.block)}")
            widths = ", ".join([*(f"fp{b} {_si(v)}" for b, v in sorted(c.flops.items()) if v),
                                *(f"{t} tensor core {_si(v)}" for t, v in sorted(c.matrix_flops.items()) if v)])
            lines.append(f"    FLOPs {_si(c.total_flops)}{f' ({widths})' if widths else ''}, {_si(c.instructions)} warp instructions")
            lines.append(
                f"    global: {_si(c.global_requests)} requests, {_si(c.global_sectors)} sectors of {d.sector_bytes} B "
                f"({_ratio(c.global_sectors, c.global_requests):.1f} per request), {_bytes(c.global_bytes)} requested, "
                f"{_bytes(k.dram_bytes)} from memory"
            )
            if c.shared_requests:
                lines.append(
                    f"    shared: {_si(c.shared_requests)} requests, {_si(c.shared_wavefronts)} wavefronts, "
                    f"{_si(c.bank_conflicts)} bank conflicts"
                )
            if c.local_requests:
                lines.append(f"    local memory: {_si(c.local_requests)} requests, {_si(c.local_sectors)} sectors")
            spills = f", {k.spills} B spills" if k.spills else ""
            lines.append(
                f"    registers {k.registers} ({k.registers_from}){spills}, shared {k.shared_bytes} B, "
                f"{k.blocks_per_sm} blocks per SM, occupancy {k.occupancy:.2f} (limited by {k.occupancy_limit})"
            )
            terms = ", ".join(f"{t} {_time(s)}" for t, s in k.terms.items())
            lines.append(f"    time {_time(k.time_s)}: {k.bound}-bound ({terms}, launch {_time(k.launch_s)})")
            lines += [f"    note: {n}" for n in sorted(set(c.notes))]
            lines += [f"    problem: {p}" for p in k.problems]
        rate = f", {self.flops / self.time_s / 1e9:.1f} GFLOP/s" if self.time_s and self.flops else ""
        lines.append(f"  total {_time(self.time_s)} ({len(self.kernels)} kernel{'s' * (len(self.kernels) != 1)}{rate}), "
                     f"bound: {self.bound}")  # fmt: skip
        lines += [f"  note: {n}" for n in self.notes]
        return "\n".join(lines)

    def to_json_dict(self) -> dict[str, object]:
        return {
            "device": self.device.to_json_dict(), "target": self.target, "modelled": True, "time_s": self.time_s,
            "flops": self.flops, "bound": self.bound, "kernels": [k.to_json_dict() for k in self.kernels],
            "notes": self.notes,
        }  # fmt: skip


# ---- the model -------------------------------------------------------------------------------------


def _family(arch: str) -> str:
    found = re.match(r"[a-z]+", arch)
    return found.group() if found else arch


def compatible(arch: str, archs: Sequence[str]) -> bool:
    """Whether a compiler building for `archs` builds for `arch` too (the same kind: `sm_*`,
    `gfx*`)."""
    return bool(arch) and _family(arch) in {_family(a) for a in archs}


def compiled_resources(
    target: type[CLikeTarget] | None, source: str | None, manifest: LaunchManifest | None, device: Device
) -> tuple[dict[str, KernelResources], str, list[str]]:
    """Per kernel, the resources the target's compiler reports for the device's architecture
    (`einc check`'s compiler: NVRTC for CUDA, hipcc for HIP), where it builds for that kind of
    architecture; the compiler's label; notes (why there are none)."""
    spec = target.compile_check if target is not None else None
    if spec is None or source is None or manifest is None or not device.arch:
        return {}, "", []
    if not compatible(device.arch, spec.archs):
        return {}, "", [f"the {target.name if target else ''} compiler does not build for {device.arch}: registers estimated"]
    try:
        report = spec.checker()(source, manifest, device.arch).check()
    except RuntimeMissingError as err:
        return {}, "", [f"registers estimated: {err.message}"]
    return {k.name: k for k in report.kernels}, f"{report.target} compiler, {device.arch}", []


def model_module(
    module: ModuleOp,
    device: Device,
    target: type[CLikeTarget] | None = None,
    *,
    source: str | None = None,
    manifest: LaunchManifest | None = None,
    resources: Mapping[str, KernelResources] | None = None,
) -> ModelReport:
    """The model of every kernel of `module` (a device target's lowered module, the driver's
    `target` stage) on `device`. With `source` and `manifest`, the target's compiler reports
    registers and shared memory (`compiled_resources`); `resources` gives them directly."""
    notes: list[str] = []
    label = "given"
    if resources is None:
        found, label, notes = compiled_resources(target, source, manifest, device)
        resources = found
    launches = {k.name: k for k in manifest.kernels} if manifest is not None else {}
    across_items = target is not None and target.limits is not None and target.limits.items_vectorized
    models = []
    for kernel in kernels(module):
        split = kernel.attributes.get(egpu.TileSplitAttr.name)
        spread = split.data.vertices if isinstance(split, egpu.TileSplitAttr) else None
        on, counts = device, None
        if device.loop_warp and runs_loops(kernel):
            if across_items:  # the runtime packs work-items into lanes where their accesses are contiguous
                counts = count_kernel(kernel, device.warp, device.sector_bytes, spread)
                if own_vectors(kernel) or not contiguous(counts, device.sector_bytes):
                    counts = None
                else:
                    on = packed_device(device)
                    counts.notes.append(f"work-items that loop packed into {device.warp} lanes (the runtime vectorizes across them)")
            if counts is None:  # one work-item at a time; its own vectors SIMD where the runtime leaves them so
                on = scalar_device(device)
                counts = count_kernel(kernel, on.warp, on.sector_bytes, spread, 0 if across_items else device.warp)
                counts.notes.append("work-items that loop run one at a time" +
                                    ("" if across_items else f", their own vectors as {device.warp}-lane SIMD instructions"))
        elif 0 < device.barrier_lanes < device.warp and has_barriers(kernel):
            on = scalar_device(device, device.barrier_lanes)  # the runtime's per-region work-item loops
            counts = count_kernel(kernel, on.warp, on.sector_bytes, spread, 0 if across_items else device.warp)
            counts.notes.append(f"work-items between barriers run {device.barrier_lanes} at a time (barrier_lanes)")
        if counts is None:
            counts = count_kernel(kernel, on.warp, on.sector_bytes, spread)
            on = vector_device(on)
        launch = launches.get(counts.name)
        dynamic = launch.shared_bytes if launch is not None else 0
        models.append(model_kernel(counts, on, resources.get(counts.name), label, dynamic))
    if not models:
        notes.append("the program has no kernels (nothing runs on the device)")
    return ModelReport(device, target.name if target is not None else "", models, notes)


def contiguous(counts: KernelCounts, sector: int) -> bool:
    """Whether the global accesses of a kernel counted with work-items as the lanes of a warp
    are contiguous or uniform across its lanes (the sectors of the bytes the lanes ask for,
    plus one per request where a vector straddles a sector), as a runtime that vectorizes
    across work-items (`TargetDescription.items_vectorized`) needs to load them as vectors
    rather than gather them lane by lane."""
    return counts.global_sectors * sector <= counts.global_bytes + counts.global_requests * sector


def own_vectors(kernel: egpu.FuncOp) -> bool:
    """Whether a work-item of `kernel` computes with vectors of its own (vector loads, stores
    or arithmetic of einc's vectorizing passes): a runtime that packs work-items into the
    lanes of vectors turns each into a gather or a transpose (the register-tiled matmuls run
    no faster on Intel's SYCL CPU device than scalar)."""
    return any(isinstance(r.type, VectorType) for op in kernel.walk() for r in op.results)


def packed_device(d: Device) -> Device:
    """`d` as it runs a kernel whose looping work-items a runtime packs into lanes
    (`items_vectorized`): a math function costs `vector_math_instructions` (the runtime's
    vector math library, measured on an elementwise exp: benchmarks/host_device.py), or,
    in a description without it, `math_instructions` per lane (one element's cost in a row
    sum, a row per work-item, which on Intel's SYCL device is already the packed code's:
    1-2 cycles an exp, no scalar exp is that fast)."""
    if d.vector_math_instructions:
        return dataclasses.replace(d, math_instructions=d.vector_math_instructions)
    return dataclasses.replace(d, math_instructions=d.math_instructions * d.warp)


def vector_device(d: Device) -> Device:
    """`d` as it runs a kernel vectorized across work-items: a math function costs
    `vector_math_instructions` where the description gives it (a CPU runtime's vector math
    library, measured), else `math_instructions`."""
    return dataclasses.replace(d, math_instructions=d.vector_math_instructions or d.math_instructions)


def has_barriers(kernel: egpu.FuncOp) -> bool:
    """Whether `kernel` synchronizes its work-group (`egpu.barrier`)."""
    return any(isinstance(op, egpu.BarrierOp) for op in kernel.walk())


def scalar_device(d: Device, lanes: int = 0) -> Device:
    """`d` as it runs a kernel whose work-items run loops, where it does not run them across a
    warp's lanes (`loop_warp`), or a kernel with barriers `lanes` work-items at a time
    (`barrier_lanes`): warps of that many lanes at that share of the FP peaks."""
    lanes = lanes or d.loop_warp
    share = lanes / d.warp
    return dataclasses.replace(d, warp=lanes, fp32_tflops=d.fp32_tflops * share, fp16_tflops=d.fp16_tflops * share,
                               fp64_tflops=d.fp64_tflops * share)  # fmt: skip


def model_kernel(
    counts: KernelCounts, device: Device, resources: KernelResources | None = None, label: str = "",
    dynamic_shared: int = 0,
) -> KernelModel:  # fmt: skip
    d = device
    problems: list[str] = []
    if resources is not None:
        registers, source, spills = resources.registers, label, resources.spills
        shared = resources.shared_bytes + dynamic_shared
    else:
        registers = min(255, 32 + counts.register_array_words)
        source, spills, shared = "estimated", None, max(counts.shared_bytes, dynamic_shared)
    threads = math.prod(counts.block)
    warps = max(1, -(-threads // d.warp))
    limits = {"blocks per SM": d.blocks_per_sm, "threads": d.threads_per_sm // (warps * d.warp)}
    if d.registers_per_sm and registers:
        limits["registers"] = d.registers_per_sm // (registers * warps * d.warp)
    if shared:
        limits["shared memory"] = d.shared_per_sm // shared if d.shared_per_sm else 0
    limit, resident = min(limits.items(), key=lambda kv: kv[1])
    if threads > d.threads_per_block:
        problems.append(f"{threads} threads per block: the device runs at most {d.threads_per_block}")
    if shared > d.shared_per_block:
        problems.append(f"{shared} B shared memory per block: the device has {d.shared_per_block}")
    if resident < 1:
        problems.append(f"a block does not fit on an SM ({limit})")
        resident = 1
    occupancy = min(1.0, resident * warps / d.warps_per_sm)

    blocks = max(1, counts.spread)
    per_sm = -(-blocks // d.sms)
    imbalance = per_sm * d.sms / blocks  # >= 1: the SMs left idle by too few or uneven blocks
    active = min(resident, per_sm) * warps
    starved = max(1.0, d.issue_per_clock / active) if active else 1.0
    clock = d.clock_ghz * 1e9
    vector = sum(v / _peak(d, bits) for bits, v in counts.issued_flops.items())
    matrix = sum(v / _matrix_peak(d, kind) for kind, v in counts.matrix_flops.items())
    compute = (vector + matrix) * imbalance * starved
    instructions = counts.instructions + counts.math_calls * (d.math_instructions - 4)
    if d.barrier_instructions:  # each work-item steps through each region, saving and restoring its registers
        instructions += counts.barriers * counts.warp * (d.barrier_instructions + 2 * counts.register_array_words)
    issue = instructions / (d.sms * d.issue_per_clock * clock) * imbalance * starved
    dram = dram_bytes(counts, d.sector_bytes)
    footprint = sum(b.bytes for b in counts.buffers.values())
    cached = bool(d.cache_bytes and d.cache_gbps and footprint <= d.cache_bytes)
    memory = dram / ((d.cache_gbps if cached else d.dram_gbps) * 1e9) * d.sms / min(d.sms, blocks)
    onchip = 0.0
    if d.l1_bytes_per_clock:
        cycles = (counts.global_sectors + counts.local_sectors) * d.sector_bytes / d.l1_bytes_per_clock
        onchip = (cycles + counts.shared_wavefronts) / (d.sms * clock) * imbalance
    terms = {"compute": compute, "issue": issue, "memory": memory, "on-chip": onchip}
    if d.chain_cycles:
        terms["latency"] = counts.chain_steps * d.chain_cycles / (d.sms * clock) * imbalance
    return KernelModel(counts, registers, source, spills, shared, resident, occupancy, limit, dram, terms,
                       d.launch_us * 1e-6, problems)  # fmt: skip


def dram_bytes(counts: KernelCounts, sector: int) -> float:
    """Compulsory traffic: per buffer, its bytes (in whole sectors) loaded once if loaded and
    stored once if stored, at most what its accesses touch."""
    total = 0.0
    for b in counts.buffers.values():
        size = -(-b.bytes // sector) * sector
        total += min(size, b.load_sectors * sector) + min(size, b.store_sectors * sector)
    return total


def _matrix_peak(d: Device, kind: str) -> float:
    """FLOP/s of `egpu.mma` tiles of `kind` (`f16`, `bf16`) inputs: the matrix units' dense
    peak, or the FP32 vector peak on a device without them."""
    peak = d.bf16_matrix_tflops if kind == "bf16" else d.fp16_matrix_tflops
    return (peak or d.fp32_tflops) * 1e12


def _peak(d: Device, bits: int) -> float:
    if bits == 16:
        return d.fp16_tflops * 1e12
    if bits == 64:
        return (d.fp64_tflops or d.fp32_tflops / 64) * 1e12
    return d.fp32_tflops * 1e12


# ---- formatting ------------------------------------------------------------------------------------


def _ratio(a: float, b: float) -> float:
    return a / b if b else 0.0


def _shape(s: Sequence[int]) -> str:
    return "x".join(str(v) for v in s)


def _si(v: float) -> str:
    for unit, scale in (("G", 1e9), ("M", 1e6), ("K", 1e3)):
        if abs(v) >= scale:
            return f"{v / scale:.3g} {unit}"
    return f"{v:.4g}"


def _bytes(v: float) -> str:
    for unit, scale in (("GB", 1e9), ("MB", 1e6), ("KB", 1e3)):
        if v >= scale:
            return f"{v / scale:.3g} {unit}"
    return f"{v:.0f} B"


def _time(s: float) -> str:
    if s >= 1e-3:
        return f"{s * 1e3:.3g} ms"
    return f"{s * 1e6:.3g} us"
