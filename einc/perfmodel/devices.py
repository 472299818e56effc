"""The devices the performance model knows: published peaks, bandwidths and per-SM limits, and
user descriptions read from a JSON file (`einc check --model custom.json`).

Sources of the built-in figures (the vendors' data sheets and architecture documents; a figure
marked "derived" is computed from published ones as the comment says, one marked "assumed" is
no published figure: the launch overhead, a typical value, and the AMD/Intel block limits):

- H100 SXM5 80 GB: NVIDIA H100 Tensor Core GPU datasheet (2023): FP32 67 TFLOPS, FP64 34,
  FP16 Tensor Core 1,979 with sparsity (989.5 dense), BF16 Tensor Core 1,979 with sparsity
  (989.5 dense), HBM3 3.35 TB/s; NVIDIA H100 Tensor Core
  GPU Architecture whitepaper (v1.04): 132 SMs, 1,980 MHz boost, 50 MB L2, FP16 (non-Tensor)
  twice FP32 (derived: 133.8); CUDA C++ Programming Guide, "Technical Specifications per
  Compute Capability" 9.0: 64 K 32-bit registers, 228 KB shared memory and 2,048 threads per
  SM, 227 KB shared per block, 1,024 threads and 32 blocks.
- A100 SXM4 80 GB: NVIDIA A100 Tensor Core GPU datasheet: FP32 19.5 TFLOPS, FP64 9.7, FP16
  Tensor Core 312 (dense), BF16 Tensor Core 312 (dense), HBM2e 2,039 GB/s; NVIDIA A100 Tensor Core GPU Architecture
  whitepaper: 108 SMs, 1,410 MHz boost, 40 MB L2, FP16 (non-Tensor) 78 TFLOPS; Programming
  Guide, compute capability 8.0: 64 K registers, 164 KB shared and 2,048 threads per SM, 163 KB
  per block, 32 blocks.
- MI250X: AMD Instinct MI250X data sheet: 220 CUs, 1,700 MHz peak engine clock, FP32 vector
  47.9 TFLOPS, FP64 vector 47.9, FP16 matrix 383, BF16 matrix 383, HBM2e 3.2768 TB/s, over two
  graphics compute dies (GCDs). A HIP kernel runs on one GCD (each is its own device), so the
  entry is one GCD: half of each package figure (110 CUs, 23.95 TFLOPS FP32, 191.5 FP16 and
  BF16 matrix, 1.6384 TB/s);
  FP16 vector twice FP32 (packed, derived). AMD CDNA 2 instruction set architecture guide:
  wave64, 64 KB LDS per CU, 512 VGPRs of 64 lanes per SIMD and 4 SIMDs per CU (derived:
  131,072 32-bit registers per CU), 8 waves per SIMD (2,048 work-items per CU).
- RTX 4090: NVIDIA Ada GPU Architecture whitepaper (v2.1), appendix table: 128 SMs, 2,520 MHz
  boost, FP32 82.6 TFLOPS, FP16 (non-Tensor) 82.6, FP16 Tensor with FP32 accumulate 165.2
  (dense), BF16 Tensor with FP32 accumulate 165.2 (dense), FP64 1.29, GDDR6X 1,008 GB/s, 72 MB L2; Programming Guide, compute capability 8.9:
  64 K registers, 100 KB shared and 1,536 threads per SM, 99 KB per block, 24 blocks per SM.
- Arc A770 16 GB: Intel Arc A770 Graphics product specifications (ark.intel.com): 32 Xe-cores,
  512 vector engines, 512 XMX engines, 2,100 MHz graphics clock, 560 GB/s, 16 MB L2. Derived:
  FP32 4,096 lanes x 2 x 2.1 GHz = 17.2 TFLOPS, FP16 vector twice that, FP16 and BF16 XMX 137.6
  (half of the published 275 INT8 TOPS; XMX runs both at one rate); no FP64 hardware. Intel's Xe-HPG documents: 16 vector engines of
  8 threads x 128 32-byte registers per Xe-core (derived: 131,072 32-bit registers), 64 KB
  shared local memory per work-group, subgroups of 16 (the OpenCL/SYCL default width).
- IPU-M2000: Graphcore IPU-M2000 product brief and Colossus MK2 GC200 IPU page: four GC200
  IPUs of 1,472 tiles each, six worker threads per tile, 900 MB In-Processor-Memory per IPU
  (624 KiB per tile), 47.5 TB/s memory bandwidth, 62.5 TFLOPS FP32 and 250 TFLOPS FP16 per
  IPU through the AMP (matrix) units (no BF16: 0), 1.325 GHz. einc's Poplar target runs on one IPU, so the
  entry is one GC200; its vector rates are derived (a tile issues one 2 x FP32 or 4 x FP16 FMA
  per cycle: 1,472 x 1.325 GHz x 4 = 7.8 TFLOPS FP32, 15.6 FP16).
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import re
from dataclasses import dataclass
from pathlib import Path

from einc.errors import SourceLocation, UsageError


@dataclass(frozen=True)
class Device:
    """One device as the model sees it. "SM" stands for an NVIDIA streaming multiprocessor, an
    AMD compute unit, an Intel Xe-core or an IPU tile; "warp" for a warp, wavefront, subgroup
    (one lane on the IPU, whose workers are independent threads)."""

    name: str
    """Display name."""
    fp32_tflops: float
    """Peak FP32 through the SIMT / vector units (what einc's kernels use)."""
    fp16_tflops: float
    """Peak FP16 through the vector units (packed half2 where the device has it)."""
    dram_gbps: float
    """Peak bandwidth of the memory kernels' buffers live in (HBM / GDDR; the IPU's tile SRAM)."""
    sms: int
    """SMs / CUs / Xe-cores / tiles."""
    warp: int
    """Lanes of a warp / wave / subgroup."""
    clock_ghz: float
    registers_per_sm: int
    """32-bit registers per SM (0: registers do not limit occupancy)."""
    shared_per_sm: int
    """Bytes of shared memory (LDS, SLM) per SM."""
    shared_per_block: int
    threads_per_sm: int
    threads_per_block: int
    blocks_per_sm: int
    fp64_tflops: float = 0.0
    """Peak FP64 (0: no FP64 hardware; FP64 operations are then costed at 1/64 of FP32)."""
    fp32_matrix_tflops: float = 0.0
    """Peak FP32 through matrix units (tensor cores, MFMA, AMP; 0: none), for reference."""
    fp16_matrix_tflops: float = 0.0
    """Peak dense FP16 (FP32 accumulate) through matrix units: what `egpu.mma` tiles of
    float16 run at (tensor cores, MFMA; 0: none, the tiles are costed at the FP32 peak)."""
    bf16_matrix_tflops: float = 0.0
    """Peak dense BF16 (FP32 accumulate) through matrix units, for `egpu.mma` tiles of
    bfloat16 (0: none, costed at the FP32 peak)."""
    sector_bytes: int = 32
    """Granule of a global memory transaction (NVIDIA's 32-byte sector)."""
    l1_bytes_per_clock: int = 128
    """Bytes per clock one SM's L1 / shared-memory pipe delivers (32 banks x 4 bytes; 0: no
    on-chip term, as on the IPU whose tile memory is the memory)."""
    issue_per_clock: int = 4
    """Warp instructions one SM issues per clock (its schedulers)."""
    launch_us: float = 3.0
    """Overhead of one kernel launch (assumed: a typical figure, not a published one)."""
    tile_memory: int = 0
    """Bytes of memory per tile (the IPU), 0 elsewhere."""
    cache_bytes: int = 0
    """Bytes of the last-level cache whose contents outlive a kernel (0: not modelled). A
    kernel whose buffers fit in it together reads and writes them at `cache_gbps`, not
    `dram_gbps`: they are there from the kernel or copy before it (on a CPU device, the copy
    of the inputs in). Not used for the GPUs of the table (no published cache bandwidth)."""
    cache_gbps: float = 0.0
    """Bandwidth of that cache (measured: benchmarks/host_device.py)."""
    loop_warp: int = 0
    """Lanes of a warp in a kernel whose work-items run loops (0: `warp`). A GPU runs a warp's
    work-items on its lanes whatever their code; a CPU runtime (PoCL, the SYCL CPU device)
    makes a work-group one loop over its work-items and relies on the compiler's loop
    vectorizer, which vectorizes innermost loops only: where a work-item runs a loop of its
    own, work-items run one after another on scalar instructions. 1 there: such a kernel is
    modelled with one-lane warps at the FP peaks / `warp` (the scalar peaks)."""
    barrier_instructions: float = 0.0
    """Instructions a barrier costs each work-item of its work-group beyond the live words it
    saves and restores, where a barrier splits the work-group's loop over its work-items (a CPU
    runtime: PoCL, Intel's SYCL CPU device run a work-group as one loop over its work-items per
    region between barriers). There every work-item, whatever its guards, steps through every
    region (the loop's increment and branch, the address of its saved context, its guard), and
    the values live across the barrier — the words of its register arrays — are stored before
    it and loaded after it (2 instructions a word). 0: a barrier stalls a warp and costs one
    instruction (a GPU)."""
    chain_cycles: float = 0.0
    """Cycles one step of a float accumulation chain waits for the previous one (the float
    add's latency) where nothing else runs meanwhile: a CPU core running one work-item at a
    time (measured: benchmarks/host_device.py). 0: hidden, as on GPUs, which run other warps
    while one waits."""
    math_instructions: float = 4.0
    """Warp instructions one math function (exp, log, sqrt, ...) costs: 4 on GPUs (the
    special-function units run at a quarter rate; assumed); on a CPU, a math library's
    polynomial (measured: benchmarks/host_device.py)."""
    barrier_lanes: int = 0
    """Lanes a CPU runtime runs the work-items of a kernel with barriers and no loop of their
    own at (0: `warp`, vectorized across work-items as the kernels without barriers; 1: one
    work-item at a time, scalar). Measured (benchmarks/host_device.py): the cycles an element
    costs a work-item's loop over its own row (scalar) over the cycles an element adds to a
    256-wide tree row sum; PoCL: 1 (its per-region work-item loops are not vectorized)."""
    vector_math_instructions: float = 0.0
    """Warp instructions one math function costs in code a CPU runtime vectorizes across
    work-items (a kernel whose work-items run no loop, or that `items_vectorized` packs into
    lanes): its vector math library's cost (measured: benchmarks/host_device.py, an
    elementwise exp; PoCL calls a scalar exp per lane there, Intel's runtime a vector one).
    0: `math_instructions` (a GPU; a description without the measurement)."""
    arch: str = ""
    """The architecture the target's compiler builds for (`sm_90`, `gfx90a`): where the
    target's `einc check` compiler covers it, registers and shared memory come from it."""
    key: str = ""
    """The name the device is asked for by (`h100`), or the file it was read from."""
    sources: str = ""
    """Where the figures come from."""

    @property
    def warps_per_sm(self) -> int:
        return max(1, self.threads_per_sm // max(1, self.warp))

    def to_json_dict(self) -> dict[str, object]:
        return dataclasses.asdict(self)


_NVIDIA = "NVIDIA datasheet / architecture whitepaper / CUDA Programming Guide (see einc/perfmodel/devices.py)"

DEVICES: dict[str, Device] = {
    "h100": Device(
        "NVIDIA H100 SXM5 80GB", fp32_tflops=67.0, fp16_tflops=133.8, dram_gbps=3350.0, sms=132, warp=32,
        clock_ghz=1.98, registers_per_sm=65536, shared_per_sm=228 * 1024, shared_per_block=227 * 1024,
        threads_per_sm=2048, threads_per_block=1024, blocks_per_sm=32, fp64_tflops=34.0,
        fp32_matrix_tflops=494.7, fp16_matrix_tflops=989.5, bf16_matrix_tflops=989.5, arch="sm_90", sources=_NVIDIA,
    ),
    "a100": Device(
        "NVIDIA A100 SXM4 80GB", fp32_tflops=19.5, fp16_tflops=78.0, dram_gbps=2039.0, sms=108, warp=32,
        clock_ghz=1.41, registers_per_sm=65536, shared_per_sm=164 * 1024, shared_per_block=163 * 1024,
        threads_per_sm=2048, threads_per_block=1024, blocks_per_sm=32, fp64_tflops=9.7,
        fp32_matrix_tflops=156.0, fp16_matrix_tflops=312.0, bf16_matrix_tflops=312.0, arch="sm_80", sources=_NVIDIA,
    ),
    "mi250x": Device(
        "AMD Instinct MI250X (one GCD)", fp32_tflops=23.95, fp16_tflops=47.9, dram_gbps=1638.4, sms=110,
        warp=64, clock_ghz=1.7, registers_per_sm=131072, shared_per_sm=64 * 1024, shared_per_block=64 * 1024,
        threads_per_sm=2048, threads_per_block=1024, blocks_per_sm=32, fp64_tflops=23.95,
        fp32_matrix_tflops=47.9, fp16_matrix_tflops=191.5, bf16_matrix_tflops=191.5, sector_bytes=64, l1_bytes_per_clock=64,
        arch="gfx90a", sources="AMD Instinct MI250X data sheet, CDNA 2 ISA guide (see einc/perfmodel/devices.py)",
    ),
    "rtx4090": Device(
        "NVIDIA GeForce RTX 4090", fp32_tflops=82.6, fp16_tflops=82.6, dram_gbps=1008.0, sms=128, warp=32,
        clock_ghz=2.52, registers_per_sm=65536, shared_per_sm=100 * 1024, shared_per_block=99 * 1024,
        threads_per_sm=1536, threads_per_block=1024, blocks_per_sm=24, fp64_tflops=1.29,
        fp16_matrix_tflops=165.2, bf16_matrix_tflops=165.2, arch="sm_89", sources=_NVIDIA,
    ),
    "a770": Device(
        "Intel Arc A770 16GB", fp32_tflops=17.2, fp16_tflops=34.4, dram_gbps=560.0, sms=32, warp=16,
        clock_ghz=2.1, registers_per_sm=131072, shared_per_sm=64 * 1024, shared_per_block=64 * 1024,
        threads_per_sm=2048, threads_per_block=1024, blocks_per_sm=64, fp16_matrix_tflops=137.6,
        bf16_matrix_tflops=137.6,
        sector_bytes=64, l1_bytes_per_clock=64,
        sources="Intel Arc A770 product specifications, Xe-HPG documents (see einc/perfmodel/devices.py)",
    ),
    "ipu-m2000": Device(
        "Graphcore IPU-M2000 (one GC200 IPU)", fp32_tflops=7.8, fp16_tflops=15.6, dram_gbps=47500.0, sms=1472,
        warp=1, clock_ghz=1.325, registers_per_sm=0, shared_per_sm=0, shared_per_block=0,
        threads_per_sm=6, threads_per_block=6, blocks_per_sm=1, fp32_matrix_tflops=62.5,
        fp16_matrix_tflops=250.0, sector_bytes=8, l1_bytes_per_clock=0, issue_per_clock=1, launch_us=5.0,
        tile_memory=624 * 1024,
        sources="Graphcore IPU-M2000 product brief, Colossus MK2 GC200 (see einc/perfmodel/devices.py)",
    ),
}
"""The built-in devices by the name `--model` takes."""

ALIASES = {"h100-sxm": "h100", "a100-sxm": "a100", "4090": "rtx4090", "arc-a770": "a770", "ipu": "ipu-m2000",
           "m2000": "ipu-m2000"}  # fmt: skip

_FIELDS = {f.name: f for f in dataclasses.fields(Device)}
_REQUIRED = [f.name for f in dataclasses.fields(Device) if f.default is dataclasses.MISSING]
_TEXT = {"name", "arch", "key", "sources"}
_INTS = {name for name, f in _FIELDS.items() if f.type in ("int", int)}
_MAY_BE_ZERO = {"registers_per_sm", "shared_per_sm", "shared_per_block", "fp64_tflops", "fp32_matrix_tflops",
                "fp16_matrix_tflops", "bf16_matrix_tflops", "l1_bytes_per_clock", "launch_us", "tile_memory", "loop_warp",
                "cache_bytes", "cache_gbps", "chain_cycles", "barrier_instructions", "vector_math_instructions",
                "barrier_lanes"}  # fmt: skip


MATCH = {"h100": r"\bH100\b", "a100": r"\bA100\b", "mi250x": r"\bMI250X?\b", "rtx4090": r"\b4090\b",
         "a770": r"\bA770\b", "ipu-m2000": r"\b(GC200|M2000)\b"}  # fmt: skip
"""How a runtime's device name (`NVIDIA H100 80GB HBM3`) names a built-in device."""


def device_for(description: str) -> str | None:
    """The built-in device a runtime's device name is (`h100` for `NVIDIA H100 80GB HBM3`), or
    None: where records modelled for it may stand in for measured ones."""
    for key, pattern in MATCH.items():
        if re.search(pattern, description, re.IGNORECASE):
            return key
    return None


def known() -> str:
    """The built-in devices' names, for messages."""
    return ", ".join(sorted(DEVICES))


def get_device(spec: str | Device, loc: SourceLocation | None = None) -> Device:
    """The device `spec` names: a built-in one (`h100`, ...; case and `-`/`_` ignored) or a
    JSON description file (`*.json`); a UsageError at `loc` (the `--model` option) otherwise."""
    if isinstance(spec, Device):
        return spec
    where = loc or SourceLocation("<model>", 1, 1)
    if spec.endswith(".json") or "/" in spec:
        return read_device(spec, where)
    key = spec.strip().lower().replace("_", "-")
    key = ALIASES.get(key, key)
    if key in DEVICES:
        return dataclasses.replace(DEVICES[key], key=key)
    raise UsageError(
        f"unknown device '{spec}': the model knows {known()}, or give a JSON file describing one "
        "(docs/PERFMODEL.md lists its fields)",
        where,
    )


def read_device(path: str, loc: SourceLocation) -> Device:
    """`_read_device`, its errors shown with the file's line."""
    try:
        return _read_device(path, loc)
    except UsageError as err:
        if err.loc is not None and err.loc.file == path:
            with contextlib.suppress(OSError, UnicodeDecodeError):
                err.with_sources({path: Path(path).read_text()})
        raise


def _read_device(path: str, loc: SourceLocation) -> Device:
    """A device described by the JSON object in `path`: every field of `Device` by name (units
    in the names), or `"base": "<built-in device>"` and the fields that differ from it. Errors
    are UsageErrors located in the file (at the offending key where it can be found)."""
    try:
        text = Path(path).read_text()
    except (OSError, UnicodeDecodeError) as err:
        raise UsageError(f"cannot read the device description '{path}': {getattr(err, 'strerror', None) or err}", loc) from None
    try:
        data = json.loads(text)
    except json.JSONDecodeError as err:
        raise UsageError(f"invalid JSON in the device description: {err.msg}", SourceLocation(path, err.lineno, err.colno)) from None
    if not isinstance(data, dict):
        raise UsageError("a device description is a JSON object of the device's figures", SourceLocation(path, 1, 1))

    def at(key: str) -> SourceLocation:
        found = re.search(r'"%s"\s*:' % re.escape(key), text)
        if found is None:
            return SourceLocation(path, 1, 1)
        line = text.count("\n", 0, found.start()) + 1
        col = found.start() - (text.rfind("\n", 0, found.start()) + 1) + 1
        return SourceLocation(path, line, col, len(key) + 2)

    values: dict[str, object] = {}
    base = data.pop("base", None)
    if base is not None:
        if not isinstance(base, str) or ALIASES.get(base.lower(), base.lower()) not in DEVICES:
            raise UsageError(f"'base' names a built-in device: one of {known()}", at("base"))
        values = dataclasses.asdict(DEVICES[ALIASES.get(base.lower(), base.lower())])
    for key, value in data.items():
        if key not in _FIELDS or key == "key":
            raise UsageError(
                f"unknown field '{key}' in the device description; fields: "
                + ", ".join(n for n in _FIELDS if n != "key"),
                at(key),
            )
        if key in _TEXT:
            if not isinstance(value, str):
                raise UsageError(f"'{key}' must be a string", at(key))
        elif isinstance(value, bool) or not isinstance(value, int | float):
            raise UsageError(f"'{key}' must be a number", at(key))
        elif key in _INTS and value != int(value):
            raise UsageError(f"'{key}' must be a whole number, got {value}", at(key))
        elif value < 0 or (value == 0 and key not in _MAY_BE_ZERO) or value != value or value == float("inf"):
            raise UsageError(f"'{key}' must be {'0 or more' if key in _MAY_BE_ZERO else 'above 0'}, got {value}", at(key))
        values[key] = int(value) if key in _INTS else value
    missing = [k for k in _REQUIRED if k not in values]
    if missing:
        raise UsageError(
            "the device description lacks " + ", ".join(missing) + ' (or name a built-in device to start from: "base": "h100")',
            SourceLocation(path, 1, 1),
        )
    values["key"] = path
    for f in dataclasses.fields(Device):
        if f.default is not dataclasses.MISSING:
            values.setdefault(f.name, f.default)
    device = _device(values)
    if device.threads_per_block > device.threads_per_sm:
        raise UsageError("'threads_per_block' exceeds 'threads_per_sm'", at("threads_per_block"))
    return device


def _device(v: dict[str, object]) -> Device:
    """A Device of checked values (every field present, of its type)."""

    def num(key: str) -> float:
        value = v[key]
        assert isinstance(value, int | float)
        return float(value)

    def whole(key: str) -> int:
        return int(num(key))

    def text(key: str) -> str:
        return str(v[key])

    return Device(
        text("name"), fp32_tflops=num("fp32_tflops"), fp16_tflops=num("fp16_tflops"), dram_gbps=num("dram_gbps"),
        sms=whole("sms"), warp=whole("warp"), clock_ghz=num("clock_ghz"), registers_per_sm=whole("registers_per_sm"),
        shared_per_sm=whole("shared_per_sm"), shared_per_block=whole("shared_per_block"),
        threads_per_sm=whole("threads_per_sm"), threads_per_block=whole("threads_per_block"),
        blocks_per_sm=whole("blocks_per_sm"), fp64_tflops=num("fp64_tflops"),
        fp32_matrix_tflops=num("fp32_matrix_tflops"), fp16_matrix_tflops=num("fp16_matrix_tflops"),
        bf16_matrix_tflops=num("bf16_matrix_tflops"),
        sector_bytes=whole("sector_bytes"), l1_bytes_per_clock=whole("l1_bytes_per_clock"),
        issue_per_clock=whole("issue_per_clock"), launch_us=num("launch_us"), tile_memory=whole("tile_memory"),
        cache_bytes=whole("cache_bytes"), cache_gbps=num("cache_gbps"), loop_warp=whole("loop_warp"), math_instructions=num("math_instructions"),
        chain_cycles=num("chain_cycles"), barrier_instructions=num("barrier_instructions"),
        vector_math_instructions=num("vector_math_instructions"), barrier_lanes=whole("barrier_lanes"),
        arch=text("arch"), key=text("key"), sources=text("sources"),
    )  # fmt: skip


__all__ = ["DEVICES", "Device", "get_device", "known", "read_device"]
