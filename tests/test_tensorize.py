"""`transform.einc.tensorize`: float16/bfloat16 matmul tiles on tensor cores. The PTX NVRTC
makes holds `mma.sync` (sm_80) and hipcc's gfx90a code `v_mfma`; the loop and egpu
interpreters (which model each lane's accumulator elements) agree with NumPy; on a machine
with an NVIDIA GPU the kernel runs and is compared too. Refusals: lit_tests/schedules/
invalid_tensorize.mlir.
"""

from __future__ import annotations

import functools
from collections import Counter

import ml_dtypes
import numpy as np
import pytest

from einc.compiler.driver import Compilation
from einc.compiler.kernel import Kernel
from einc.semantics.egpu import run_lowered
from einc.semantics.loops import run_interpreted
from tests.test_device_differential import run_on_device
from tests.test_device_targets import require, require_run

DEVICES = [pytest.param(t, marks=getattr(pytest.mark, t)) for t in ("opencl", "sycl", "hlsl")]

PROGRAM = """
input A: DT[32, 64]
input B: DT[48, 64]
C[I, J] +=! A[I, K].cast(`float32`) * B[J, K].cast(`float32`)
"""
"""B transposed: its k dimension is its second."""

SCHEDULE = """
builtin.module {
  transform.named_sequence @__transform_main(%root: !transform.any_op) {
    %i = transform.einc.match stmt "C" axis "I" in %root
    %j = transform.einc.match stmt "C" axis "J" in %root
    %io, %ii = transform.einc.tile %i by 16
    %jo, %ji = transform.einc.tile %j by 16
    %r:4 = transform.einc.reorder %io, %jo, %ii, %ji
    transform.einc.bind %r#0 to "block.x"
    transform.einc.bind %r#1 to "block.y"
    %lanes = transform.einc.tensorize %r#2 "INTRINSIC"
    transform.yield
  }
}
"""
INTRINSIC = {"cuda": "mma.m16n8k16", "hip": "mfma.16x16x16"}
DTYPES = {"float16": np.dtype(np.float16), "bfloat16": np.dtype(ml_dtypes.bfloat16)}


def compilation(target: str, dtype: str) -> Compilation:
    return Compilation(PROGRAM.replace("DT", dtype), "<tensorize>", target=target,
                       schedule=SCHEDULE.replace("INTRINSIC", INTRINSIC[target]))  # fmt: skip


@functools.cache
def cuda_kernel(dtype: str) -> Kernel:
    return compilation("cuda", dtype).kernel()


def inputs(dtype: str) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(5)
    return {name: rng.uniform(-2, 2, shape).astype(DTYPES[dtype]) for name, shape in (("A", (32, 64)), ("B", (48, 64)))}


def expected(values: dict[str, np.ndarray]) -> np.ndarray:
    return values["A"].astype(np.float64) @ values["B"].astype(np.float64).T


def close(got: np.ndarray, want: np.ndarray) -> None:
    """float32 sums of 64 exact products, in the hardware's order: a few float32 ulps."""
    assert got.dtype == np.float32
    np.testing.assert_allclose(got, want, rtol=0, atol=1e-5 * np.max(np.abs(want)))


@pytest.mark.parametrize("dtype", list(DTYPES))
def test_interpreters(dtype: str) -> None:
    """Both interpreters run `egpu.mma` lane by lane (each lane its own elements of C)."""
    comp = compilation("cuda", dtype)
    values = inputs(dtype)
    close(run_interpreted(comp.run_until("scheduled"), values)["C"], expected(values))
    close(run_lowered(comp.run_until("target"), values, target="cuda")["C"], expected(values))


@pytest.mark.cuda
@pytest.mark.parametrize("dtype", list(DTYPES))
def test_cuda_compiles(dtype: str) -> None:
    require("cuda")
    from einc.runtime.cuda import ptx

    kind = "bf16" if dtype == "bfloat16" else "f16"
    source = cuda_kernel(dtype).source
    assert f"mma.sync.aligned.m16n8k16.row.col.f32.{kind}.{kind}.f32" in ptx(source, "sm_80")


@pytest.mark.cuda
@pytest.mark.parametrize("dtype", list(DTYPES))
def test_cuda_runs(dtype: str) -> None:
    """Tensor-core numbers: only where an NVIDIA GPU (sm_80+) and its driver are."""
    require_run("cuda")
    values = inputs(dtype)
    close(cuda_kernel(dtype)(**values)["C"], expected(values))


@pytest.mark.hip
@pytest.mark.parametrize("dtype", list(DTYPES))
def test_hip(dtype: str) -> None:
    require("hip")
    from einc.runtime.hip import device_assembly

    kernel = compilation("hip", dtype).kernel()
    instruction = "v_mfma_f32_16x16x16bf16_1k" if dtype == "bfloat16" else "v_mfma_f32_16x16x16f16"
    assert instruction in device_assembly(kernel.source, "gfx90a")


STAGED = """
builtin.module {
  transform.named_sequence @__transform_main(%root: !transform.any_op) {
    %i = transform.einc.match stmt "C" axis "I" in %root
    %j = transform.einc.match stmt "C" axis "J" in %root
    %k = transform.einc.match stmt "C" axis "K" in %root
    %io, %ii = transform.einc.tile %i by 32
    %iw, %i16 = transform.einc.tile %ii by 16
    %jw, %j16 = transform.einc.tile %j by 16
    %whole, %kr = transform.einc.tile %k by 64
    %ko, %ki = transform.einc.tile %kr by 16
    %r:8 = transform.einc.reorder %io, %iw, %jw, %whole, %ko, %i16, %j16, %ki
    transform.einc.bind %r#0 to "block.x"
    transform.einc.bind %r#1 to "thread.z"
    transform.einc.bind %r#2 to "thread.y"
    %c = transform.einc.cache_write "C" at %r#3 in "shared"
    %a = transform.einc.cache_read "A" at %r#4 in "shared" pad 8
    %b = transform.einc.cache_read "B" at %r#4 in "shared" pad 8
    transform.einc.double_buffer %a
    transform.einc.double_buffer %b
    %lanes = transform.einc.tensorize %r#5 "INTRINSIC"
    transform.yield
  }
}
"""
"""A block of 2 x 3 warps (thread.z, thread.y), each a 16 x 16 tile of C; A's and B's tiles of
each 16-long reduction tile staged in shared memory (float16/bfloat16, rows padded, double
buffered), C's block tile accumulated in shared memory over the whole reduction: the lane
loop goes around the reduction tile's loop and its copies. Checked on the egpu interpreter
(the kernels as printed); the loop interpreter runs the lane loop's copies once per lane
(correct, minutes for this size)."""


@pytest.mark.parametrize(("target", "dtype"), [("cuda", "float16"), ("hip", "bfloat16")])
def test_staged_tiles_in_the_egpu_interpreter(target: str, dtype: str) -> None:
    comp = Compilation(PROGRAM.replace("DT", dtype), "<tensorize>", target=target,
                       schedule=STAGED.replace("INTRINSIC", INTRINSIC[target]))  # fmt: skip
    values = inputs(dtype)
    lowered = comp.run_until("target")
    assert sum(1 for op in lowered.walk() if op.name == "egpu.alloc_shared") == 3
    close(run_lowered(lowered, values, target=target)["C"], expected(values))


@pytest.mark.parametrize("target", DEVICES)
def test_narrow_shared_tiles_run_where_the_target_has_no_16bit_arrays(target: str) -> None:
    """The staged schedule without tensor cores, float16 tiles in shared memory: OpenCL,
    SYCL and HLSL cannot declare 16-bit arrays, so the tiles are held as float32
    (`einc-widen-narrow-buffers`) and the kernel runs there, against NumPy."""
    require_run(target)
    schedule = "\n".join(line for line in STAGED.splitlines() if "double_buffer" not in line and "tensorize" not in line)
    comp = Compilation(PROGRAM.replace("DT", "float16"), "<tensorize>", target=target, schedule=schedule)
    lowered = comp.run_until("target")
    shared = [op for op in lowered.walk() if op.name == "egpu.alloc_shared"]
    assert shared and all("xf32>" in str(op.results[0].type) for op in shared)
    comp.run_until("source")
    values = inputs("float16")
    close(run_on_device(comp, values)["C"], expected(values))


@pytest.mark.parametrize("intrinsic", list(INTRINSIC.values()))
def test_fragment_layout_is_the_hardware_one(intrinsic: str) -> None:
    """`tensorize`'s fragment copies place lane l's element n where `owned(l, lanes)[n]` says
    (the printers' and interpreters' layout), and the warp's lanes cover the 16 x 16 tile
    exactly once (what lets `einc-init-accumulators` take a fragment as a box)."""
    from xdsl.ir.affine import AffineExpr

    from einc.dialects.egpu_mma import LANES, fragment_size, owned
    from einc.transforms.tensorize import fragment_place

    lanes = LANES[intrinsic]
    row, col = fragment_place(AffineExpr.dimension(0), AffineExpr.dimension(1), lanes)
    seen = []
    for lane in range(lanes):
        for n in range(fragment_size(lanes)):
            place = (row.eval([lane, n], []), col.eval([lane, n], []))
            assert place == owned(lane, lanes)[n]
            seen.append(place)
    assert sorted(seen) == [(r, c) for r in range(16) for c in range(16)]


@pytest.mark.parametrize("target", list(INTRINSIC))
def test_accumulator_in_registers_one_kernel(target: str) -> None:
    """The accumulator is each lane's fragment (a private array), zeroed in registers: the
    fill kernel goes, C is read never and written once per element (the kernels as printed
    agree with NumPy on the egpu interpreter; test_interpreters)."""
    comp = compilation(target, "float16")
    kernel = comp.kernel()
    assert kernel.manifest is not None and len(kernel.manifest.kernels) == 1, kernel.manifest
    source = kernel.source
    assert "float C_frag[" in source and "C_frag[frag] = 0.0f;" in source, source
    assert "= C[" not in source, "C is never read back"


def _emulate_ldmatrix(memory: np.ndarray, address, trans: bool) -> np.ndarray:
    """PTX `ldmatrix.x4.b16` (ISA "Warp-level matrix load instruction: ldmatrix"): lane 8j + i
    gives the address of row i of matrix j (8 contiguous elements); lane L receives in
    register j the elements (L / 4, 2 (L % 4)) and (L / 4, 2 (L % 4) + 1) of matrix j, with
    `.trans` the elements (2 (L % 4), L / 4) and (2 (L % 4) + 1, L / 4). Returns
    [lane, register, half] of element values."""
    rows = [[memory[address(8 * j + i) : address(8 * j + i) + 8] for i in range(8)] for j in range(4)]
    out = np.zeros((32, 4, 2), memory.dtype)
    for lane in range(32):
        g, t = lane // 4, lane % 4
        for j in range(4):
            for half in range(2):
                out[lane, j, half] = rows[j][2 * t + half][g] if trans else rows[j][g][2 * t + half]
    return out


@pytest.mark.parametrize("case", ["blocks", "bmm_tb"])
def test_ldmatrix_addresses_give_the_mma_fragments(case: str) -> None:
    """The default CUDA kernel's `ldmatrix` row addresses (the printed expressions, evaluated
    per lane) load, by the instruction's documented layout, exactly the fragments mma.sync
    takes: A register e = (row g + 8 (e % 2), k 2t + 8 (e / 2) and + 1), B register 2h + e =
    (k 2t + 8e and + 1, column 8h + g). No GPU here: this checks the printer's addressing;
    the numbers of the op are checked on the interpreters."""
    import re

    from einc.dialects.egpu_mma import MmaOp
    from tests.test_gpu_default import HALF_CASES

    ir, shapes, _ = HALF_CASES[case]
    comp = Compilation(ir, f"<{case}>", {k: {"dtype": "float16", "shape": v} for k, v in shapes.items()}, None, "cuda",
                       "default")  # fmt: skip
    source = comp.kernel().source
    found = re.findall(r"ldmatrix\.sync\.aligned\.m8n8\.(x4(?:\.trans)?)\.shared\.b16.*?: \"r\"\(\(unsigned int\)"
                       r"__cvta_generic_to_shared\(einc_([ab]) \+ (.*?)\)\)\);", source, re.S)  # fmt: skip
    assert sorted(w for _, w, _ in found) == ["a", "b"], source
    (mma,) = [op for op in comp.results["target"].walk() if isinstance(op, MmaOp)]
    strides = {}
    for which, buffer in (("a", mma.a), ("b", mma.b)):
        shape = buffer.type.get_shape()
        strides[which] = tuple(int(np.prod(shape[d + 1 :])) for d in mma.dims(which))
    rng = np.random.default_rng(0)
    memory = rng.permutation(1 << 14).astype(np.int64)  # element values name their offsets
    for kk in (0, 16):
        for mode, which, expression in found:
            text = expression.replace("LL", "")

            def address(lane: int, text: str = text) -> int:
                return int(eval(text, {}, {"j": lane >> 3, "r": lane & 7, "kk": kk}))  # the printed C, integer ops

            got = _emulate_ldmatrix(memory, address, mode.endswith("trans"))
            # the element offsets from the tile's base that the op names (its dims' strides)
            s1, s2 = strides[which]
            for lane in range(32):
                g, t = lane // 4, lane % 4
                for j in range(4):
                    for half in range(2):
                        if which == "a":
                            r_, q = g + 8 * (j & 1), kk + 2 * t + 8 * (j >> 1) + half
                            want = memory[r_ * s1 + q * s2]
                        else:
                            q, n = kk + 2 * t + 8 * (j & 1) + half, 8 * (j >> 1) + g
                            want = memory[q * s1 + n * s2]
                        assert got[lane, j, half] == want, (which, lane, j, half)


@pytest.mark.hip
def test_hip_default_staging_copies_are_16_bytes() -> None:
    """HIP's default float16 matmul stages its tiles with 16-byte global loads (eight halves
    in one load): A's `[N, K]` tile with one store too (`einc-async-copies`' plain copies,
    `plain_vector_copies`), B's `[K, M]` tile, staged transposed for the MFMA operand reads,
    two consecutive k rows per thread (two loads), each column's pair written down the
    `[M, K]` tile as one 32-bit word (test_hip_mfma_operands_are_vector_loads); hipcc's
    gfx90a code does them as dwordx4 loads; one kernel, MFMA. The numbers of the same kernel on the egpu interpreter:
    test_gpu_default's half contractions."""
    import re

    from tests.test_gpu_default import HALF_CASES

    require("hip")
    from einc.runtime.hip import device_assembly

    ir, shapes, _ = HALF_CASES["blocks"]
    comp = Compilation(ir, "<blocks>", {k: {"dtype": "float16", "shape": v} for k, v in shapes.items()}, None, "hip",
                       "default")  # fmt: skip
    kernel = comp.kernel()
    source = kernel.source
    assert len(re.findall(r"\*\(uint4\*\)&input0_shared\[", source)) == 2, source  # A: first and next tiles
    assert len(re.findall(r"einc_vloada_f16x8\(&input1\[", source)) == 4, source  # B: 2 rows, first and next tiles
    assert not re.search(r"input[01]_shared\[[^\]]*\] = input[01]\[", source), "no scalar staging copies"
    assembly = device_assembly(source, "gfx90a")
    assert "global_load_dwordx4" in assembly and "v_mfma_f32_16x16x16f16" in assembly


@pytest.mark.hip
def test_hip_mfma_operands_are_vector_loads() -> None:
    """Each lane's MFMA operand is 4 consecutive k elements: where the shared tile has k
    contiguous and 8-byte aligned (`einc-ldmatrix`'s "v4"), one vector load, which hipcc's
    gfx90a code does as 8-byte LDS reads (`ds_read2_b64`), no 16-bit ones. The default
    matmul's `B[K, M]` is staged transposed, `[M, K]` (`mma_k_contiguous`; rows padded by 4
    halves: 8-byte aligned, 34 words apart), so its operand reads are vectors too: for the
    8 MFMAs of "blocks" (two reduction tiles, unrolled) 8 `ds_read2_b64` and no `ds_read_u16`
    where the `[k, n]` tile took 4 and 32 (A's 4 and B's gathers). The copy into it
    (`einc-vectorize-global`'s `row_pairs_plan`): each of 128 threads loads 2 consecutive k
    rows of 8 columns (two 16-byte loads) and writes each column's pair as one 32-bit word
    (hipcc: `ds_write2_b32`, two words an instruction), no 16-bit LDS write, where each of
    256 threads scattered one row's 8 halves as 8 `ds_write_b16` (16 in the kernel: first and
    next tiles), 2-way bank-conflicted; the chunks' order over the threads puts a
    wavefront's first 32 threads' words in 32 different banks (checked here on the printed
    index arithmetic). The numbers of the float16 kernel on the egpu interpreter against
    NumPy here; bfloat16's and "bmm_tb"'s in test_gpu_default's half contractions."""
    import re

    from tests.test_gpu_default import HALF_CASES

    require("hip")
    from einc.runtime.hip import device_assembly

    both = "einc_va = *(const einc_x4*)&einc_a[", "einc_vb = *(const einc_x4*)&einc_b["
    for case in ("bmm_tb", "blocks"):
        ir, shapes, _ = HALF_CASES[case]
        comp = Compilation(ir, f"<{case}>", {k: {"dtype": "float16", "shape": v} for k, v in shapes.items()}, None,
                           "hip", "default")  # fmt: skip
        comp.run_until("target")
        assert ('layout [1, 0] pad 4' in str(comp.applied_schedule)) == (case == "blocks"), comp.applied_schedule
        source = comp.kernel().source
        assert all(v in source for v in both) and "einc_vb[i] =" not in source, source
        assembly = device_assembly(source, "gfx90a")
        reads = re.findall(r"\bds_read\w*", assembly)
        assert reads and all("b64" in r for r in reads), reads
        if case == "blocks":
            assert reads.count("ds_read2_b64") == 8, reads
            # A: 2 copies (first tile, next) of one 16-byte load; B: 2 of two rows' loads
            assert "global_load_ushort" not in assembly and assembly.count("global_load_dwordx4") == 6, assembly
            writes = Counter(re.findall(r"^\s*(ds_write\w*)", assembly, re.M))
            assert writes == {"ds_write_b128": 2, "ds_write2_b32": 8}, writes  # A's; B's 16 words
            _check_pairs_banks(source)
            rng = np.random.default_rng(5)
            values = {k: rng.uniform(-2, 2, v).astype(np.float16) for k, v in shapes.items()}
            out = run_lowered(comp.results["target"], values, target="hip")["output0"]
            want = values["input0"].astype(np.float64) @ values["input1"].astype(np.float64)
            np.testing.assert_allclose(out, want, rtol=0, atol=1e-5 * np.abs(want).max())


def _check_pairs_banks(source: str) -> None:
    """The B copy's printed index arithmetic (thread `v`'s first element `e`, the tile's
    `[M, K + 4]` row of 68 halves): for each of a thread's 8 columns the 32-bit words of a
    wavefront's first 32 threads fall in 32 different banks, and the 128 threads' pairs
    cover the 64 x 32 tile once."""
    import re

    line = re.search(r"for \(int32_t v = tid; v < 128; v \+= 256\) \{\n\s*int32_t e = ([^;]+);", source)
    assert line, source
    formula = line.group(1).replace("/", "//")
    starts = [eval(formula, {"v": v}) for v in range(128)]  # noqa: S307 (the printed index)
    covered = sorted(e + r + j for e in starts for r in (0, 32) for j in range(8))  # rows e, e + 32
    assert covered == list(range(2048)), covered[:40]
    for j in range(8):
        words = {((e % 32 + j) * 68 + e // 32) // 2 for e in starts[:32]}
        assert len({w % 32 for w in words}) == 32, (j, sorted(w % 32 for w in words))
