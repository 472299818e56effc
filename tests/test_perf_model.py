"""The device performance model (einc/perfmodel): counts against hand counts, coalescing and
bank conflicts on small hand-written schedules and kernels, the roofline's verdicts, the
registers NVRTC reports, the device table and descriptions, `einc check --model` and
`Kernel.model`. Nothing here needs a GPU."""

from __future__ import annotations

import dataclasses
import json
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import pytest
from xdsl.dialects.builtin import ModuleOp
from xdsl.parser import Parser

import einc
from einc.compiler.driver import Compilation
from einc.dialects.context import make_context
from einc.errors import TargetError, UsageError
from einc.perfmodel import DEVICES, KernelCounts, KernelModel, get_device, model_module
from einc.perfmodel.counts import count_kernel, kernels
from einc.perfmodel.model import packed_device
from einc.targets import toolchains
from tests.modules import load_module

ROOT = Path(__file__).resolve().parent.parent
BIN = Path(sys.executable).parent


def script(lines: list[str]) -> str:
    body = "\n".join("    " + line for line in [*lines, "transform.yield"])
    return ("builtin.module {\n  transform.named_sequence @__transform_main(%root: !transform.any_op) {\n"
            f"{body}\n  }}\n}}\n")  # fmt: skip


def counts_of(program: str, target: str = "cuda", schedule: str = "none", warp: int = 32) -> list[KernelCounts]:
    comp = Compilation(program, "prog.ein", target=target, schedule=schedule, use_records=False)
    return [count_kernel(k, warp, 32) for k in kernels(comp.module("target"))]


def flops(program: str, target: str = "cuda", schedule: str = "none") -> float:
    return sum(c.total_flops for c in counts_of(program, target, schedule))


MATMUL = "input input0: float32[{n}, {k}]\ninput input1: float32[{k}, {m}]\noutput0[N, M] +=! input0[N, K] * input1[K, M]\n"
SOFTMAX = (ROOT / "examples/softmax.ein").read_text()  # 64 x 1024


# ---- FLOPs against hand counts ------------------------------------------------------------------


@pytest.mark.parametrize("target", ["cuda", "opencl", "poplar"])
def test_matmul_flops_are_2nmk(target: str) -> None:
    assert flops(MATMUL.format(n=48, k=40, m=24), target) == 2 * 48 * 40 * 24


def test_softmax_flops_are_7_per_element() -> None:
    # max: 1 per element; sum of exp(x - max): sub, exp, add; output: sub, exp, div
    assert flops(SOFTMAX) == 7 * 64 * 1024


@pytest.mark.parametrize(
    "statement, per_point",
    [("output0[N] +=! input0[N, C]", 1), ("output0[N] >=! input0[N, C]", 1),
     ("output0[N] +=! input0[N, C] * input0[N, C]", 2)],
)  # fmt: skip
def test_reduction_flops(statement: str, per_point: int) -> None:
    program = f"input input0: float32[50, 70]\n{statement}\n"  # 50 rows: a partial block, guarded
    assert flops(program) == per_point * 50 * 70


def test_cross_thread_reduction_counts_its_tree() -> None:
    rows = script([
        '%n = transform.einc.match stmt "output0" axis "N" in %root',
        '%c = transform.einc.match stmt "output0" axis "C" in %root',
        'transform.einc.bind %n to "block.x"',
        "%co, %ci = transform.einc.tile %c by 64",
        'transform.einc.bind %ci to "thread.x"',
    ])  # fmt: skip
    program = "input input0: float32[8, 1000]\noutput0[N] +=! input0[N, C]\n"
    # the partial sums (1000 adds a row), then per block two warps' 5-step butterflies (64
    # lanes x 5), one 2-lane step (64 lanes x 1) and the leader's final add
    assert flops(program, "cuda", rows) == 8 * (1000 + 64 * 5 + 64 * 1 + 1)


# ---- coalescing -------------------------------------------------------------------------------------

ADD = "input input0: float32[64, 32]\ninput input1: float32[64, 32]\noutput0[N, M] = input0[N, M] + input1[N, M]\n"


def bound(first: str, second: str, stmt: str = "output0") -> str:
    return script([
        f'%n = transform.einc.match stmt "{stmt}" axis "N" in %root',
        f'%m = transform.einc.match stmt "{stmt}" axis "M" in %root',
        f'transform.einc.bind %n to "{first}"',
        f'transform.einc.bind %m to "{second}"',
    ])  # fmt: skip


def test_unit_stride_across_lanes_touches_four_sectors_a_warp() -> None:
    (c,) = counts_of(ADD, schedule=bound("block.x", "thread.x"))  # a warp reads one row of 32 floats
    assert c.global_requests == 64 * 3  # 64 warps, 2 loads + 1 store each
    assert c.global_sectors == 64 * 3 * 4  # 128 bytes = 4 sectors of 32 bytes
    assert c.buffers["input0"].load_sectors == 64 * 4


def test_strided_access_touches_a_sector_per_lane() -> None:
    (c,) = counts_of(ADD, schedule=bound("thread.x", "block.x"))  # a warp reads a column: stride 128 B
    assert c.global_requests == 64 * 3
    assert c.global_sectors == 64 * 3 * 32


def test_matmul_binds_decide_which_input_is_coalesced() -> None:
    program = MATMUL.format(n=64, k=64, m=64)
    (rows,) = counts_of(program, schedule=bound("block.x", "thread.x"))  # lanes along M
    (cols,) = counts_of(program, schedule=bound("thread.x", "block.x"))  # lanes along N
    warps_k = 64 * 2 * 64  # 64 blocks of 2 warps, 64 iterations of K
    # lanes along M: input0[N, K] is one word for the warp, input1[K, M] 32 consecutive floats
    assert rows.buffers["input0"].load_sectors == warps_k * 1
    assert rows.buffers["input1"].load_sectors == warps_k * 4
    # lanes along N: input0[N, K] strides by a row (a sector per lane), input1 is one word
    assert cols.buffers["input0"].load_sectors == warps_k * 32
    assert cols.buffers["input1"].load_sectors == warps_k * 1
    # the accumulator's address does not change with K: loaded and stored once per thread
    assert rows.buffers["output0"].load_sectors == 64 * 2 * 4
    assert cols.buffers["output0"].load_sectors == 64 * 2 * 32


def test_partial_warps_and_guards_mask_lanes() -> None:
    program = "input input0: float32[1000]\noutput0[N] = input0[N] + input0[N]\n"
    (c,) = counts_of(program)
    assert c.total_flops == 1000  # the guard masks the 24 work-items past the end
    assert c.global_bytes == 2 * 4 * 1000  # one load (the second is the same address) + one store


# ---- shared memory bank conflicts -------------------------------------------------------------------


def shared_kernel(columns: int, column_read: bool) -> KernelCounts:
    """A warp reading a 32 x `columns` shared tile down a column (or along a row)."""
    index = "[%tx, %c0]" if column_read else "[%c0, %tx]"
    text = f"""builtin.module {{
  egpu.func @tile(%out: memref<32xf32>) grid [1, 1, 1] block [32, 1, 1] {{
    %tile = egpu.alloc_shared : memref<32x{columns}xf32>
    %tx = egpu.thread_id x
    %c0 = arith.constant 0 : index
    %v = memref.load %tile{index} : memref<32x{columns}xf32>
    memref.store %v, %out[%tx] : memref<32xf32>
    egpu.return
  }}
}}"""
    module = Parser(make_context(), text).parse_module()
    (kernel,) = kernels(module)
    return count_kernel(kernel, 32, 32)


def test_column_of_an_unpadded_tile_is_a_32_way_conflict() -> None:
    c = shared_kernel(32, column_read=True)  # every lane's word in bank 0
    assert (c.shared_requests, c.shared_wavefronts, c.bank_conflicts) == (1, 32, 31)


def test_padding_the_tile_removes_the_conflict() -> None:
    c = shared_kernel(33, column_read=True)  # row stride 33 words: lane t in bank t
    assert (c.shared_requests, c.shared_wavefronts, c.bank_conflicts) == (1, 1, 0)
    row = shared_kernel(32, column_read=False)
    assert (row.shared_wavefronts, row.bank_conflicts) == (1, 0)


# ---- the roofline's verdicts ------------------------------------------------------------------------


def test_elementwise_is_memory_bound() -> None:
    program = "input input0: float32[4096, 4096]\ninput input1: float32[4096, 4096]\noutput0[N, M] = input0[N, M] + input1[N, M]\n"
    comp = Compilation(program, "add.ein", target="opencl", schedule="none", use_records=False)
    report = model_module(comp.module("target"), get_device("h100"))
    (k,) = report.kernels
    assert k.bound == "memory"
    assert k.dram_bytes == 3 * 4096 * 4096 * 4  # two inputs read, one output written
    assert k.terms["memory"] == pytest.approx(3 * 4096 * 4096 * 4 / 3.35e12)


def register_tiled_matmul(n: int = 2048) -> str:
    """A 128 x 128 block tile of 16 x 16 threads, each an 8 x 8 register tile fed by float4
    loads from K-major shared tiles (8 x 128): the shape of a classic SGEMM kernel. The
    operands of its FMAs are not the outer product's (only the counts matter here)."""
    fmas = []
    for r in range(16):
        a, b = f"%a{r % 2}", f"%b{(r // 2) % 2}"
        fmas += [f"      %acc{r} = egpu.vload %acc[%c{r // 2}, %c{4 * (r % 2)}] : memref<8x8xf32> -> vector<4xf32>",
                 f"      %f{r} = egpu.vfma {a}, {b}, %acc{r} : vector<4xf32>",
                 f"      egpu.vstore %f{r}, %acc[%c{r // 2}, %c{4 * (r % 2)}] : vector<4xf32>, memref<8x8xf32>"]  # fmt: skip
    consts = "\n".join(f"    %c{v} = arith.constant {v} : index" for v in range(8))
    body = "\n".join(fmas)
    mem = f"memref<{n}x{n}xf32>"
    return f"""builtin.module {{
  egpu.func @sgemm(%a: {mem}, %b: {mem}, %c: {mem}) grid [{n // 128}, {n // 128}, 1] block [16, 16, 1] {{
    %as = egpu.alloc_shared : memref<8x128xf32>
    %bs = egpu.alloc_shared : memref<8x128xf32>
    %acc = memref.alloca() : memref<8x8xf32>
{consts}
    %tx = egpu.thread_id x
    %ty = egpu.thread_id y
    %bx = egpu.block_id x
    %by = egpu.block_id y
    affine.for %ko = 0 to {n} step 8 {{
      affine.for %e = 0 to 4 {{
        %row = affine.apply affine_map<(d0, d1, d2) -> (((d0 * 256 + d1 + d2 * 16) floordiv 128))> (%e, %tx, %ty)
        %col = affine.apply affine_map<(d0, d1, d2) -> (((d0 * 256 + d1 + d2 * 16) mod 128))> (%e, %tx, %ty)
        %va = affine.load %a[%ko + %row, %by * 128 + %col] : {mem}
        affine.store %va, %as[%row, %col] : memref<8x128xf32>
        %vb = affine.load %b[%ko + %row, %bx * 128 + %col] : {mem}
        affine.store %vb, %bs[%row, %col] : memref<8x128xf32>
      }}
      egpu.barrier
      affine.for %ki = 0 to 8 {{
      %ra = affine.apply affine_map<(d0) -> (d0 * 8)> (%ty)
      %ra4 = affine.apply affine_map<(d0) -> (d0 * 8 + 4)> (%ty)
      %rb = affine.apply affine_map<(d0) -> (d0 * 8)> (%tx)
      %rb4 = affine.apply affine_map<(d0) -> (d0 * 8 + 4)> (%tx)
      %a0 = egpu.vload %as[%ki, %ra] : memref<8x128xf32> -> vector<4xf32>
      %a1 = egpu.vload %as[%ki, %ra4] : memref<8x128xf32> -> vector<4xf32>
      %b0 = egpu.vload %bs[%ki, %rb] : memref<8x128xf32> -> vector<4xf32>
      %b1 = egpu.vload %bs[%ki, %rb4] : memref<8x128xf32> -> vector<4xf32>
{body}
      }}
      egpu.barrier
    }}
    egpu.return
  }}
}}"""


def test_large_register_tiled_matmul_is_compute_bound() -> None:
    module = Parser(make_context(), register_tiled_matmul()).parse_module()
    report = model_module(module, get_device("h100"))
    (k,) = report.kernels
    # per thread and K step: 16 FMAs of 4 lanes (8 x 8 x 2 FLOPs)
    assert k.counts.total_flops == 2 * 2048**3
    assert k.bound == "compute"
    assert k.terms["compute"] == pytest.approx(2 * 2048**3 / 67e12 * 132 * 2 / 256, rel=1e-6)  # 256 blocks: 2 waves of 132
    assert k.counts.shared_requests > 0 and k.registers_from == "estimated"


TENSORIZED = """
input A: DT[32, 64]
input B: DT[48, 64]
C[I, J] +=! A[I, K].cast(`float32`) * B[J, K].cast(`float32`)
"""
TENSORIZE = script([
    '%i = transform.einc.match stmt "C" axis "I" in %root', '%j = transform.einc.match stmt "C" axis "J" in %root',
    "%io, %ii = transform.einc.tile %i by 16", "%jo, %ji = transform.einc.tile %j by 16",
    "%r:4 = transform.einc.reorder %io, %jo, %ii, %ji", 'transform.einc.bind %r#0 to "block.x"',
    'transform.einc.bind %r#1 to "block.y"', '%lanes = transform.einc.tensorize %r#2 "mma.m16n8k16"',
])  # fmt: skip


@pytest.mark.parametrize("dtype, kind", [("float16", "f16"), ("bfloat16", "bf16")])
def test_tensor_core_tiles_count_2mnk_at_the_matrix_peak(dtype: str, kind: str) -> None:
    comp = Compilation(TENSORIZED.replace("DT", dtype), "mma.ein", target="cuda", schedule=TENSORIZE, use_records=False)
    h100 = get_device("h100")
    report = model_module(comp.module("target"), h100)
    k = report.kernels[-1]  # the zero fill, then the tiles: 6 warps of 16 x 16 x 64
    assert k.counts.matrix_flops == {kind: 2 * 32 * 48 * 64} and not k.counts.flops
    assert report.flops == 2 * 32 * 48 * 64
    # A and B tiles: 16 rows of 128 contiguous bytes (4 sectors) each; C: 16 rows of 64 bytes, read and written
    assert k.counts.global_sectors == 6 * (64 + 64 + 2 * 32)
    idle = h100.sms / 6  # 6 blocks on 132 SMs; one warp per SM for 4 schedulers: starved 4x
    assert k.terms["compute"] == pytest.approx(2 * 32 * 48 * 64 / 989.5e12 * idle * 4, rel=1e-6)
    # without matrix units the tiles cost the FP32 peak
    plain = model_module(comp.module("target"), dataclasses.replace(h100, fp16_matrix_tflops=0, bf16_matrix_tflops=0))
    assert plain.kernels[-1].terms["compute"] == pytest.approx(k.terms["compute"] * 989.5 / 67, rel=1e-6)


def test_naive_matmul_is_not_compute_bound_and_launches_cost() -> None:
    comp = Compilation(MATMUL.format(n=256, k=256, m=256), "mm.ein", target="opencl", schedule="none", use_records=False)
    report = model_module(comp.module("target"), get_device("a100"))
    assert report.bound in ("on-chip", "issue", "launch")
    assert report.time_s >= report.kernels[0].launch_s == pytest.approx(3e-6)
    tiny = Compilation("input input0: float32[8]\noutput0[N] = input0[N] + input0[N]\n", "t.ein", target="opencl",
                       schedule="none", use_records=False)  # fmt: skip
    assert model_module(tiny.module("target"), get_device("a100")).bound == "launch"


# ---- registers from the compilers -------------------------------------------------------------------


def require(target: str) -> None:
    ok, why = toolchains.available(target)
    if not ok:
        if toolchains.required(target):
            pytest.fail(f"CI needs the {target} toolchain: {why}")
        pytest.skip(why)


@pytest.mark.cuda
def test_cuda_registers_come_from_nvrtc() -> None:
    require("cuda")
    kernel = einc.compile(MATMUL.format(n=64, k=64, m=64), target="cuda", schedule="none", use_records=False)
    (compiled,) = kernel.check(["sm_90"])
    report = kernel.model("h100")
    (k,) = report.kernels
    assert k.registers == compiled.kernel(k.counts.name).registers
    assert k.registers_from == "cuda compiler, sm_90"
    a100 = kernel.model("a100").kernels[0]
    assert a100.registers_from == "cuda compiler, sm_80"
    assert kernel.model("mi250x").kernels[0].registers_from == "estimated"  # NVRTC builds no gfx code


@pytest.mark.hip
def test_hip_registers_come_from_hipcc() -> None:
    require("hip")
    kernel = einc.compile(MATMUL.format(n=64, k=64, m=64), target="hip", schedule="none", use_records=False)
    (k,) = kernel.model("mi250x").kernels
    assert k.registers_from == "hip compiler, gfx90a" and k.registers > 0


def test_kernel_model_refuses_the_c_target() -> None:
    kernel = einc.compile(MATMUL.format(n=4, k=4, m=4), target="c", schedule="none", use_records=False)
    with pytest.raises(TargetError, match="device kernels"):
        kernel.model("h100")


# ---- the device table and descriptions --------------------------------------------------------------


def test_the_table_holds_the_devices_the_issue_names() -> None:
    assert {"h100", "a100", "mi250x", "rtx4090", "a770", "ipu-m2000"} <= set(DEVICES)
    for key, d in DEVICES.items():
        assert d.fp32_tflops > 0 and d.dram_gbps > 0 and d.sms > 0 and d.warp > 0, key
        # the FP32 peak is lanes x 2 x clock (within rounding of the published figures)
        assert d.fp32_tflops == pytest.approx(d.sms * d.clock_ghz * 2 * _lanes(key) / 1e3, rel=0.03), key
    assert DEVICES["ipu-m2000"].sms == 1472 and DEVICES["ipu-m2000"].tile_memory == 624 * 1024
    assert get_device("H100").key == "h100" and get_device("ipu").key == "ipu-m2000"


def _lanes(key: str) -> int:
    """FP32 FMA lanes per SM: 128 on Hopper/Ada, 64 on Ampere A100 and CDNA 2, 128 per Xe-core,
    2 per IPU tile."""
    return {"a100": 64, "mi250x": 64, "ipu-m2000": 2}.get(key, 128)


def test_unknown_device_lists_the_known_ones() -> None:
    with pytest.raises(UsageError, match="unknown device 'h200': the model knows a100, a770, h100, ipu-m2000, mi250x, rtx4090"):
        get_device("h200")


def test_custom_device_from_json(tmp_path: Path) -> None:
    path = tmp_path / "half.json"
    path.write_text(json.dumps({"base": "h100", "name": "half an H100", "sms": 66, "dram_gbps": 1675}))
    d = get_device(str(path))
    assert (d.name, d.sms, d.dram_gbps, d.warp, d.key) == ("half an H100", 66, 1675, 32, str(path))


@pytest.mark.parametrize(
    "text, where, message",
    [('{"base": "h100",\n  "sms": -4}', ":2:3:", "'sms' must be above 0, got -4"),
     ('{"base": "h100",\n  "warp": 32.5}', ":2:3:", "'warp' must be a whole number"),
     ('{"base": "h100",\n  "fp32_tflops": "fast"}', ":2:3:", "'fp32_tflops' must be a number"),
     ('{"base": "h100",\n  "colour": 1}', ":2:3:", "unknown field 'colour'"),
     ('{"base": "h999"}', ":1:2:", "'base' names a built-in device"),
     ('{"name": "x"}', ":1:1:", "the device description lacks fp32_tflops"),
     ('{"name": "x",\n', ":2:1:", "invalid JSON"),
     ('[1, 2]', ":1:1:", "a device description is a JSON object")],
)  # fmt: skip
def test_bad_device_descriptions_are_located(tmp_path: Path, text: str, where: str, message: str) -> None:
    path = tmp_path / "dev.json"
    path.write_text(text)
    with pytest.raises(UsageError) as err:
        get_device(str(path))
    assert str(err.value).startswith(f"{path}{where} error: {message}"), str(err.value)


# ---- this machine's CPU as a device (benchmarks/host_device.py) ---------------------------------------

FACTS = {"cpu": "a CPU", "target": "opencl", "cores": 2, "lanes": 16, "fma_peak_gflops": 512.0, "clock_ghz": 4.0,
         "triad_gbs": 20.0, "copy_gbs": 18.0, "l2_bytes": 1 << 20, "l3_bytes": 32 << 20, "l3_triad_gbs": 100.0, "l3_copy_gbs": 90.0,
         "one_kernel_call_s": 60e-6,
         "three_kernel_call_s": 66e-6, "row_sum_s": 1e-3, "row_sum_exp_s": 3e-3,
         "elementwise_s": 1e-3, "elementwise_exp_s": 1.5e-3, "tree_wide_s": 2e-3, "tree_narrow_s": 1e-3,
         "fadd_cycles": 3.0}  # fmt: skip
"""Measured facts as benchmarks/host_device.py's measure_facts returns them (made up here)."""


def _host_device() -> ModuleType:
    return load_module(ROOT / "benchmarks" / "host_device.py")


@pytest.fixture(scope="module")
def cpu_device(tmp_path_factory: pytest.TempPathFactory) -> Path:
    host = _host_device()
    data = {k: v for k, v in host.description(FACTS).items() if k not in host.HOST_ONLY}
    path = tmp_path_factory.mktemp("cpu") / "cpu-opencl.json"
    path.write_text(json.dumps(data, indent=1))
    return path


def test_cpu_description_from_measured_facts(cpu_device: Path) -> None:
    host = _host_device()
    d = get_device(str(cpu_device))
    assert (d.sms, d.warp, d.loop_warp, d.fp32_tflops, d.dram_gbps) == (2, 16, 1, 0.512, 20.0)
    assert d.issue_per_clock == 2  # 512 GFLOP/s over 2 cores x 4 GHz x 2 x 16 lanes: 2 vector FMAs a clock
    assert d.launch_us == pytest.approx(3.0)  # (66 - 60) us over the two extra kernels
    assert d.math_instructions == pytest.approx(2e-3 * 4e9 / (256 * 4096) * 2)  # measured cycles x issue
    # an exp in code vectorized across work-items: its cycles an element x 16 lanes x issue
    assert d.vector_math_instructions == pytest.approx(0.5e-3 * 4e9 / (256 * 4096) * 16 * 2)
    # a barrier step: the wide tree row sum's extra CPU time over the steps it adds (4096 rows,
    # 256 x 8 steps a row against 16 x 4), in cycles, x issue
    assert d.barrier_instructions == pytest.approx(1e-3 * 4e9 / (4096 * (256 * 8 - 16 * 4)) * 2)
    # a facts file saved before those were measured: the estimate, and the scalar exp everywhere
    old = {k: v for k, v in FACTS.items() if not k.startswith(("tree_", "elementwise"))}
    assert host.description(old)["barrier_instructions"] == host.BARRIER_INSTRUCTIONS
    assert host.description(old)["vector_math_instructions"] == 0
    assert host.description(FACTS)["barrier_lanes"] == 0  # no long tree measured: vectorized, as before


def test_barrier_lanes_from_the_long_tree() -> None:
    # the cycles an element costs the row sum's loop (a row per work-item: scalar) over the cycles
    # an element adds to the 256-wide tree (rows of 1024 against 256: 3 more a work-item)
    host = _host_device()
    scalar = FACTS["row_sum_s"] / (256 * 4096)
    for lanes in (1, 4, 16):
        long = FACTS["tree_wide_s"] + scalar / lanes * 4096 * 3 * 256
        assert host.description({**FACTS, "tree_long_s": long})["barrier_lanes"] == lanes
    # slower than the scalar loop: still one at a time; faster than the vector registers allow: the lanes
    assert host.barrier_lanes({**FACTS, "tree_long_s": 1.0}, 16) == 1
    assert host.barrier_lanes({**FACTS, "tree_long_s": FACTS["tree_wide_s"]}, 16) == 16


def test_cpu_description_errors_are_located(cpu_device: Path, tmp_path: Path) -> None:
    text = cpu_device.read_text().replace('"loop_warp": 1', '"loop_warp": -1')
    bad = tmp_path / "bad.json"
    bad.write_text(text)
    line = text[: text.index('"loop_warp"')].count("\n") + 1
    with pytest.raises(UsageError) as err:
        get_device(str(bad))
    assert str(err.value).startswith(f"{bad}:{line}:2: error: 'loop_warp' must be 0 or more, got -1"), str(err.value)


def test_cpu_device_prediction_is_finite_and_scalar_where_work_items_loop(cpu_device: Path) -> None:
    comp = Compilation(MATMUL.format(n=32, k=16, m=32), "mm.ein", target="opencl", schedule="none", use_records=False)
    d = get_device(str(cpu_device))
    report = model_module(comp.module("target"), d)
    (k,) = report.kernels
    assert 0 < report.time_s < 1 and report.time_s == report.time_s
    # each work-item runs the K loop: the runtime runs work-items one by one, at the scalar peak
    assert k.counts.warp == 1
    assert k.terms["compute"] >= 2 * 32 * 16 * 32 / (d.fp32_tflops * 1e12 / 16)
    add = Compilation("input input0: float32[64]\noutput0[N] = input0[N] + input0[N]\n", "t.ein", target="opencl",
                      schedule="none", use_records=False)  # fmt: skip
    assert model_module(add.module("target"), d).kernels[0].counts.warp == 16  # no loop: vectorized


def test_cpu_device_charges_accumulation_chains(cpu_device: Path) -> None:
    # a row per work-item with a private accumulator (the OpenCL default shares rows across
    # work-items now: the `tile.private` variant, as before)
    private = ('builtin.module {\n  transform.named_sequence @__transform_main(%root: !transform.any_op) {\n'
               '    %n = transform.einc.match stmt "output0" axis "N" in %root\n'
               '    %c = transform.einc.match stmt "output0" axis "C" in %root\n'
               '    %no, %ni = transform.einc.tile %n by 64\n    %a, %b, %d = transform.einc.reorder %no, %ni, %c\n'
               '    transform.einc.bind %a to "block.x"\n    transform.einc.bind %b to "thread.x"\n'
               '    %w = transform.einc.cache_write "output0" at %b in "local"\n    transform.yield\n  }\n}\n')  # fmt: skip
    rowsum = Compilation("input input0: float32[64, 128]\noutput0[N] +=! input0[N, C]\n", "s.ein", target="opencl",
                         schedule=private, use_records=False)  # fmt: skip
    d = get_device(str(cpu_device))
    (k,) = model_module(rowsum.module("target"), d).kernels
    # one row per work-item, its 128 adds a chain of dependent steps, 3 cycles each at 4 GHz; the
    # 64 rows are one work-group: one core of the two runs them
    assert k.counts.grid == (1, 1, 1) and k.counts.chain_steps == 64 * 128
    assert k.terms["latency"] == pytest.approx(64 * 128 * 3 / 4e9)
    assert "latency" not in model_module(rowsum.module("target"), get_device("h100")).kernels[0].terms


# ---- the command line -------------------------------------------------------------------------------


def run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(BIN / "einc"), *args], capture_output=True, text=True, timeout=300, cwd=ROOT)


def test_check_model_prints_the_roofline() -> None:
    res = run("check", "examples/softmax.ein", "-t", "opencl", "--model", "a770", "--no-records")
    assert res.returncode == 0, res.stderr
    out = res.stdout
    assert "softmax: target opencl, modelled on Intel Arc A770 16GB (a roofline from published figures, not measured)" in out
    for kernel in ("kernel_temp0", "kernel_temp1", "kernel_output0"):
        assert f"  {kernel}: grid" in out
    assert "FLOPs" in out and "sectors of 64 B" in out and "occupancy" in out and "-bound (compute" in out
    assert "registers 32 (estimated)" in out


def test_check_model_json(tmp_path: Path) -> None:
    res = run("check", "examples/softmax.ein", "-t", "hlsl", "--model", "rtx4090", "--json", "--schedule", "none")
    assert res.returncode == 0, res.stderr
    report = json.loads(res.stdout)
    model = report["model"]
    assert model["modelled"] is True and model["device"]["name"] == "NVIDIA GeForce RTX 4090"
    assert model["flops"] == 7 * 64 * 1024
    k = model["kernels"][0]
    assert set(k) >= {"flops", "global", "shared", "registers", "occupancy", "time_s", "terms_s", "bound"}
    assert k["bound"] in ("compute", "issue", "memory", "on-chip", "launch")
    assert model["time_s"] == pytest.approx(sum(k["time_s"] for k in model["kernels"]))


@pytest.mark.cuda
def test_check_model_on_cuda_compiles_for_the_device() -> None:
    require("cuda")
    res = run("check", "examples/matmul.ein", "-t", "cuda", "--model", "a100", "--no-records")
    assert res.returncode == 0, res.stderr
    assert "sm_80: compiled" in res.stdout and "sm_90" not in res.stdout
    assert "(cuda compiler, sm_80)" in res.stdout


def test_check_model_errors() -> None:
    res = run("check", "examples/softmax.ein", "-t", "opencl", "--model", "h200")
    assert res.returncode == 1
    assert res.stderr.startswith("<command line>:1:")
    assert "unknown device 'h200': the model knows a100, a770, h100, ipu-m2000, mi250x, rtx4090" in res.stderr
    res = run("check", "examples/softmax.ein", "-t", "c", "--model", "h100")
    assert res.returncode == 1
    assert "error: 'einc check --model' models the kernels of device targets" in res.stderr


def test_check_model_bad_file(tmp_path: Path) -> None:
    path = tmp_path / "dev.json"
    path.write_text('{"base": "h100",\n  "sms": 0}\n')
    res = run("check", "examples/softmax.ein", "-t", "opencl", "--model", str(path))
    assert res.returncode == 1
    assert res.stderr.startswith(f"{path}:2:3: error: 'sms' must be above 0, got 0"), res.stderr


# ---- CPU runtimes: a work-item's own vectors, work-items in lanes, barriers ---------------------------


def _tile_kernel(vector: bool, block: int = 16) -> str:
    """A work-item looping over K, accumulating a row of 4 outputs in a register array from
    4 elements of input1 (a `vload4` and its lanes, or 4 scalar loads)."""
    if vector:
        reads = ["%v = egpu.vload %b[%k, %c0] {egpu.align = 16 : i64} : memref<64x4xf32> -> vector<4xf32>"]
        reads += [f"%b{j} = egpu.vextract %v[{j} : index] : vector<4xf32> -> f32" for j in range(4)]
    else:
        reads = [f"%b{j} = memref.load %b[%k, %c{j}] : memref<64x4xf32>" for j in range(4)]
    body = [f"""%a{j} = memref.load %acc[%c{j}] : memref<4xf32>
      %p{j} = arith.mulf %x, %b{j} : f32
      %s{j} = arith.addf %a{j}, %p{j} : f32
      memref.store %s{j}, %acc[%c{j}] : memref<4xf32>""" for j in range(4)]
    lines = "\n      ".join([*reads, *body])
    return f"""builtin.module {{
  egpu.func @tile(%a: memref<{block}x64xf32>, %b: memref<64x4xf32>) grid [1, 1, 1] block [{block}, 1, 1] {{
    %tx = egpu.thread_id x
    %c0 = arith.constant 0 : index
    %c1 = arith.constant 1 : index
    %c2 = arith.constant 2 : index
    %c3 = arith.constant 3 : index
    %acc = memref.alloca() : memref<4xf32>
    affine.for %k = 0 to 64 {{
      %x = memref.load %a[%tx, %k] : memref<{block}x64xf32>
      {lines}
    }}
    egpu.return
  }}
}}"""


def _parsed(text: str) -> ModuleOp:
    return Parser(make_context(), text).parse_module()


def test_cpu_register_array_store_runs_pack_up_to_256_bits(cpu_device: Path) -> None:
    """16 accumulators of a work-item updated from one broadcast value and stored into 16
    consecutive register-array elements: the SLP vectorizer packs the updates 8 float32 lanes
    at a time (counts.SLP_BITS), 2 instructions a K step beside the load; 16 in a scattered
    order (every other element: no run) stay 16."""
    d = get_device(str(cpu_device))

    def kernel(stride: int) -> str:
        body = "\n      ".join(
            f"%a{j} = memref.load %acc[%c{j * stride}] : memref<32xf32>\n      "
            f"%s{j} = arith.addf %a{j}, %x : f32\n      memref.store %s{j}, %acc[%c{j * stride}] : memref<32xf32>"
            for j in range(16)
        )
        consts = "\n    ".join(f"%c{i} = arith.constant {i} : index" for i in range(32))
        return f"""builtin.module {{
  egpu.func @runs(%a: memref<16x64xf32>) grid [1, 1, 1] block [16, 1, 1] {{
    %tx = egpu.thread_id x
    {consts}
    %acc = memref.alloca() : memref<32xf32>
    affine.for %k = 0 to 64 {{
      %x = memref.load %a[%tx, %k] : memref<16x64xf32>
      {body}
    }}
    egpu.return
  }}
}}"""

    packed, scattered = (model_module(_parsed(kernel(s)), d).kernels[0] for s in (1, 2))
    assert packed.counts.instructions == 16 * 64 * (1 + 2)
    assert scattered.counts.instructions == 16 * 64 * (1 + 16)


def test_cpu_vector_register_tile_issues_fewer_instructions_than_scalar(cpu_device: Path) -> None:
    d = get_device(str(cpu_device))
    vector, scalar = (model_module(_parsed(_tile_kernel(v)), d).kernels[0] for v in (True, False))
    assert vector.counts.warp == scalar.counts.warp == 1  # work-items loop: one at a time
    # per K step: a's load, then one vload4 and 4 fmas packed into one SIMD fma (SLP), against
    # 4 scalar loads and the 4 fmas, packed too: their results are stored into 4 consecutive
    # register-array elements (counts.py `store_runs`: the SLP vectorizer starts there)
    assert vector.counts.instructions == 16 * 64 * (1 + 1 + 1)
    assert scalar.counts.instructions == 16 * 64 * (1 + 4 + 1)
    assert vector.terms["issue"] < scalar.terms["issue"] and vector.terms["compute"] == pytest.approx(scalar.terms["compute"])
    assert vector.counts.total_flops == scalar.counts.total_flops == 16 * 64 * 8
    # on a GPU (unchanged) every lane's op is its own: a load, the vload4, its 4 lanes picked, 4 fmas
    on_gpu = model_module(_parsed(_tile_kernel(True)), get_device("h100")).kernels[0]
    assert on_gpu.counts.instructions == 64 * (1 + 1 + 4 + 4)


def _column_kernel(block: int = 32, strided: bool = False) -> str:
    """A work-item per output column looping over K: consecutive work-items read consecutive
    elements of input1 and one element of input0 (uniform), no vectors of their own
    (`strided`: a work-item per row of input1's transpose, consecutive work-items 64 elements
    apart)."""
    b = "%b[%tx, %k]" if strided else "%b[%k, %tx]"
    shape = f"{block}x64" if strided else f"64x{block}"
    return f"""builtin.module {{
  egpu.func @column(%a: memref<64xf32>, %b: memref<{shape}xf32>, %out: memref<{block}xf32>) grid [1, 1, 1] block [{block}, 1, 1] {{
    %tx = egpu.thread_id x
    %acc = memref.alloca() : memref<1xf32>
    %c0 = arith.constant 0 : index
    affine.for %k = 0 to 64 {{
      %x = memref.load %a[%k] : memref<64xf32>
      %y = memref.load {b} : memref<{shape}xf32>
      %s = memref.load %acc[%c0] : memref<1xf32>
      %p = arith.mulf %x, %y : f32
      %t = arith.addf %s, %p : f32
      memref.store %t, %acc[%c0] : memref<1xf32>
    }}
    %r = memref.load %acc[%c0] : memref<1xf32>
    memref.store %r, %out[%tx] : memref<{block}xf32>
    egpu.return
  }}
}}"""


def test_items_vectorized_runtime_packs_work_items_into_lanes(cpu_device: Path) -> None:
    from einc.targets.opencl import OpenCLTarget
    from einc.targets.sycl import SYCLTarget

    d = get_device(str(cpu_device))
    assert SYCLTarget.limits is not None and SYCLTarget.limits.items_vectorized
    packed = model_module(_parsed(_column_kernel()), d, SYCLTarget).kernels[0]
    one_by_one = model_module(_parsed(_column_kernel()), d, OpenCLTarget).kernels[0]
    assert (packed.counts.warp, one_by_one.counts.warp) == (16, 1)
    # 32 work-items: 2 warps of 16 lanes issue what 32 one-lane warps do, a sixteenth of the issue time
    assert packed.counts.instructions * 16 == one_by_one.counts.instructions
    assert packed.terms["issue"] == pytest.approx(one_by_one.terms["issue"] / 16)
    # a math function there costs the description's vector figure (measured on an elementwise exp),
    # or, without it, the per-element figure for each lane
    assert packed_device(d).math_instructions == d.vector_math_instructions
    assert packed_device(dataclasses.replace(d, vector_math_instructions=0.0)).math_instructions == d.math_instructions * 16
    # work-items with vectors of their own (a vload4 per work-item) are not packed: run one at a time
    assert model_module(_parsed(_tile_kernel(True)), d, SYCLTarget).kernels[0].counts.warp == 1
    # nor where consecutive work-items read 64 elements apart (each lane its own cache line)
    assert model_module(_parsed(_column_kernel(strided=True)), d, SYCLTarget).kernels[0].counts.warp == 1


def _tree_kernel(threads: int) -> str:
    """A cross-work-item tree reduction of `threads` partial sums in shared memory: log2(threads)
    steps, a barrier before each."""
    steps = []
    s = threads // 2
    while s >= 1:
        steps.append(f"""egpu.barrier
    %in{s} = arith.cmpi ult, %tx, %c{s} : index
    scf.if %in{s} {{
      %o{s} = arith.addi %tx, %c{s} : index
      %x{s} = memref.load %part[%tx] : memref<{threads}xf32>
      %y{s} = memref.load %part[%o{s}] : memref<{threads}xf32>
      %z{s} = arith.addf %x{s}, %y{s} : f32
      memref.store %z{s}, %part[%tx] : memref<{threads}xf32>
    }}""")
        s //= 2
    consts = "\n    ".join(f"%c{1 << i} = arith.constant {1 << i} : index" for i in range(threads.bit_length() - 1))
    tree = "\n    ".join(steps)
    return f"""builtin.module {{
  egpu.func @tree(%in: memref<64x{threads}xf32>, %out: memref<64xf32>) grid [64, 1, 1] block [{threads}, 1, 1] {{
    %part = egpu.alloc_shared : memref<{threads}xf32>
    %tx = egpu.thread_id x
    %row = egpu.block_id x
    {consts}
    %v = memref.load %in[%row, %tx] : memref<64x{threads}xf32>
    memref.store %v, %part[%tx] : memref<{threads}xf32>
    {tree}
    egpu.return
  }}
}}"""


def test_tree_row_sum_barriers_as_the_model_counts_them(cpu_device: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # the barrier fact's two tree row sums (benchmarks/host_device.py) step each work-item through
    # tree_barriers(threads) barriers a row: what the model counts on the kernels einc builds
    monkeypatch.syspath_prepend(str(ROOT / "benchmarks"))
    host = _host_device()
    from device_schedules import cross_thread_lines, script
    d = get_device(str(cpu_device))
    rows = "input input0: float32[4, 512]\noutput0[N] +=! input0[N, C]\n"
    for threads in (host.TREE_NARROW, host.TREE_WIDE):
        comp = Compilation(rows, "t.ein", target="opencl", schedule=script(cross_thread_lines("output0", threads)),
                           use_records=False)  # fmt: skip
        (k,) = model_module(comp.module("target"), d).kernels
        assert k.counts.barriers * k.counts.warp == 4 * threads * host.tree_barriers(threads)


def test_vectorized_math_costs_the_vector_library_figure(cpu_device: Path) -> None:
    from einc.targets.opencl import OpenCLTarget

    d = get_device(str(cpu_device))
    comp = Compilation("input input0: float32[64, 64]\noutput0[N, C] = input0[N, C].call(`exp`)\n", "e.ein",
                       target="opencl", schedule="none", use_records=False)  # fmt: skip
    (k,) = model_module(comp.module("target"), d, OpenCLTarget).kernels
    scalar = dataclasses.replace(d, vector_math_instructions=0.0)
    (before,) = model_module(comp.module("target"), scalar, OpenCLTarget).kernels
    # no loop: work-items in 16 lanes, 4096 / 16 exp warp instructions, each the vector figure
    assert k.counts.warp == 16 and k.counts.math_calls == 64 * 64 / 16
    extra = k.counts.math_calls * (d.vector_math_instructions - d.math_instructions)
    assert k.terms["issue"] - before.terms["issue"] == pytest.approx(
        extra / (d.sms * d.issue_per_clock * d.clock_ghz * 1e9))
    # a GPU's math function stays math_instructions (no vector figure)
    assert all(v.vector_math_instructions == 0 for v in DEVICES.values())


def test_cpu_barriers_cost_every_work_item(cpu_device: Path) -> None:
    d = get_device(str(cpu_device))
    assert d.barrier_instructions > 0
    big, small = (model_module(_parsed(_tree_kernel(t)), d).kernels[0] for t in (256, 32))
    # 8 barriers of 256 work-items against 5 of 32, per work-group: every work-item steps through every region
    assert big.counts.barriers * big.counts.warp == 64 * 8 * 256 and small.counts.barriers * small.counts.warp == 64 * 5 * 32

    def barrier_s(k: KernelModel) -> float:
        return k.counts.barriers * k.counts.warp * d.barrier_instructions / (d.sms * d.issue_per_clock * d.clock_ghz * 1e9)

    assert barrier_s(big) == pytest.approx(barrier_s(small) * 256 * 8 / (32 * 5))
    assert big.terms["issue"] > barrier_s(big) > barrier_s(small)
    # a GPU's barrier is one instruction per warp (counted), nothing per work-item
    assert all(v.barrier_instructions == 0 for v in DEVICES.values())


def test_barrier_lanes_run_tree_work_items_one_at_a_time(cpu_device: Path) -> None:
    from einc.targets.opencl import OpenCLTarget

    d = get_device(str(cpu_device))
    one = dataclasses.replace(d, barrier_lanes=1)
    vector, scalar = (model_module(_parsed(_tree_kernel(256)), v, OpenCLTarget).kernels[0] for v in (d, one))
    # 0: the tree's work-items in 16 lanes; 1: one at a time (PoCL's per-region work-item loops)
    assert (vector.counts.warp, scalar.counts.warp) == (16, 1)
    # the same barriers per work-item either way, the loads and adds one work-item a warp instruction
    assert vector.counts.barriers * 16 == scalar.counts.barriers == 64 * 8 * 256
    assert scalar.counts.global_requests == 64 * 256 and vector.counts.global_requests == 64 * 256 / 16
    assert scalar.terms["issue"] > vector.terms["issue"]
    # a kernel without barriers is counted as before (this one's work-items loop: one at a time)
    column = model_module(_parsed(_column_kernel()), one, OpenCLTarget).kernels[0]
    assert column.terms == model_module(_parsed(_column_kernel()), d, OpenCLTarget).kernels[0].terms
    # GPUs: vectorized (0)
    assert all(v.barrier_lanes == 0 for v in DEVICES.values())


def test_against_reads_the_fastest_round_of_a_json_run(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # on a shared machine another process only adds time: `--against` also counts each row's fastest round
    monkeypatch.syspath_prepend(str(ROOT / "benchmarks"))
    host = _host_device()
    run = tmp_path / "run.json"
    run.write_text(json.dumps([
        {"target": "opencl", "kernel": "ReduceSum 1024x1024", "variant": "default", "ms": 2.0,
         "extra": {"rounds_ms": [3.0, 1.5, 2.0]}},
        {"target": "sycl", "kernel": "ReduceSum 1024x1024", "variant": "default", "ms": 4.0},
        {"target": "c", "kernel": "ReduceSum 1024x1024", "variant": "default", "ms": 1.0},
    ]))  # fmt: skip
    found = host._timed(str(run))
    assert [(t, ms) for t, _, _, ms, _ in found] == [("opencl", 2.0), ("sycl", 4.0)]  # the median, device rows only
    assert host.FASTEST == {("opencl", "ReduceSum 1024x1024", "default"): 1.5,  # the least of its rounds
                            ("sycl", "ReduceSum 1024x1024", "default"): 4.0}  # no rounds: the row's time
