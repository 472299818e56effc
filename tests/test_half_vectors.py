"""Elementwise float16/bfloat16 kernels on CUDA and HIP read and write their elements as
aligned vectors (`einc-vectorize-global`'s shape 5, einc.transforms.narrow_access): one
8-byte access per work-item's 4 consecutive halves where the default gives it 4, the
arithmetic per element in float32 with one rounding per op as the scalar path does (the
same bits), or, where every op is an add, sub or mul rounded once, in packed 16-bit
instructions (the same bits again: CUDA's float16 and bfloat16, HIP's float16; gfx90a has no
packed bfloat16 arithmetic). NVRTC's PTX shows the packed accesses and arithmetic, hipcc's
gfx90a assembly HIP's; the egpu interpreter runs both targets' kernels against NumPy."""

from __future__ import annotations

import re

import ml_dtypes
import numpy as np
import pytest

from einc.compiler.driver import Compilation
from einc.semantics.egpu import run_lowered
from tests.test_device_targets import require

PROGRAM = "output0[N] = input0[N] * input1[N] + 1.0"
STORAGE = {"float16": np.float16, "bfloat16": ml_dtypes.bfloat16}
SIZES = {1000: 4, 1006: 2, 1002: 4}
"""Size -> the width its accesses get: the default's work-item chunk (the largest divisor of
the size up to 4): 4, 2; for 1002 (no even divisor up to 4: 3) chunks of 4, the last
work-item's cut short at 2 and left scalar (the tail)."""


def _compile(dtype: str, n: int, target: str) -> Compilation:
    spec = {"dtype": dtype, "shape": [n]}
    comp = Compilation(PROGRAM, "<half2>", {"input0": spec, "input1": spec}, None, target, "default")
    comp.run_until("source")
    return comp


@pytest.fixture(scope="module")
def compiled() -> dict[tuple[str, str, int], Compilation]:
    return {(t, d, n): _compile(d, n, t) for t in ("cuda", "hip") for d in STORAGE for n in SIZES}


def _expected(a: np.ndarray, b: np.ndarray, dtype: str) -> np.ndarray:
    """The language's float16/bfloat16 arithmetic: each op in float32, rounded to the type."""
    s = STORAGE[dtype]
    product = (a.astype(np.float32) * b.astype(np.float32)).astype(s)
    return (product.astype(np.float32) + np.float32(1.0)).astype(s)


@pytest.mark.parametrize("target", ["cuda", "hip"])
@pytest.mark.parametrize("dtype", list(STORAGE))
@pytest.mark.parametrize("n", list(SIZES))
def test_packed_accesses_match_numpy(compiled: dict[tuple[str, str, int], Compilation], target: str, dtype: str, n: int) -> None:
    """The kernel as its target prints it (after the whole pipeline) on the egpu interpreter:
    bit for bit the per-op rounded result, and within the type's rounding of the float64
    reference (fresh random data after NaN, infinities, signed zeros, the largest half and
    overflow in its first lanes; 1002: the last work-item's 2 elements the scalar tail)."""
    comp = compiled[(target, dtype, n)]
    ir = str(comp.results["target"])
    width = SIZES[n]
    vloads = re.findall(r"egpu\.vload .*-> vector<(\d+)x(?:f16|bf16)>", ir)
    assert vloads == ([str(width)] * 2 if width else []), ir
    assert ("egpu.vstore" in ir) == bool(width)
    # CUDA computes on the packed vectors (add/mul.rn.f16x2, fma.rn.bf16x2), HIP on float16's
    # (v_pk_mul_f16, v_pk_add_f16); HIP's bfloat16 in float32 lanes
    packed = target == "cuda" or dtype == "float16"
    assert bool(re.search(r"arith\.mulf .* : vector<\d+x(f16|bf16)>", ir)) == packed, ir
    rng = np.random.default_rng()
    s = STORAGE[dtype]
    inputs = {k: rng.uniform(-4, 4, n).astype(s) for k in ("input0", "input1")}
    specials = np.array([np.nan, np.inf, -np.inf, -0.0, 0.0, 65504.0, -65504.0, 6e-8, 300.0, -1.0], np.float32)
    inputs["input0"][: specials.size] = specials.astype(s)
    inputs["input1"][: specials.size] = specials[::-1].astype(s)
    out = run_lowered(comp.results["target"], inputs, target=target)["output0"]
    a, b = (inputs[k] for k in ("input0", "input1"))
    np.testing.assert_array_equal(out.view(np.uint16), _expected(a, b, dtype).view(np.uint16))
    reference = a[10:].astype(np.float64) * b[10:].astype(np.float64) + 1.0  # the random part
    eps = 2.0**-10 if dtype == "float16" else 2.0**-7
    np.testing.assert_allclose(out[10:].astype(np.float64), reference, rtol=0, atol=2 * eps * (np.abs(reference).max() + 16))


@pytest.mark.parametrize("dtype", list(STORAGE))
def test_cuda_ptx_has_packed_loads_and_stores(compiled: dict[tuple[str, str, int], Compilation], dtype: str) -> None:
    """NVRTC's PTX: each work-item's 4 halves of each input one `ld.global.nc.v4.u16` (8
    bytes), its 4 results one `st.global.v4.u16`; no per-element 16-bit global access."""
    from tests.test_gpu_default import _ptx

    require("cuda")
    ptx = _ptx(compiled[("cuda", dtype, 1000)].results["source"])
    accesses = re.findall(r"\b(ld|st)\.global(\.nc)?\.(v\d\.)?([ubf]\d+)", ptx)
    assert sorted(accesses) == [("ld", ".nc", "v4.", "u16")] * 2 + [("st", "", "v4.", "u16")], accesses


@pytest.mark.parametrize("dtype", list(STORAGE))
def test_cuda_ptx_packs_full_chunks_and_leaves_the_tail_scalar(compiled: dict[tuple[str, str, int], Compilation], dtype: str) -> None:
    """1002 elements in chunks of 4: a full chunk is one `ld.global.nc.v4.u16` per input and
    one `st.global.v4.u16`, guarded by the chunk being whole; the short last chunk the scalar
    loop (16-bit loads and stores of one element)."""
    from tests.test_gpu_default import _ptx

    comp = compiled[("cuda", dtype, 1002)]
    source = comp.results["source"]
    assert ">= 4) {" in source and "} else {" in source, source
    require("cuda")
    accesses = re.findall(r"\b(ld|st)\.global(\.nc)?\.(v\d\.)?([ubf]\d+)", _ptx(source))
    packed = [a for a in accesses if a[2]]
    assert sorted(packed) == [("ld", ".nc", "v4.", "u16")] * 2 + [("st", "", "v4.", "u16")], accesses
    assert {a for a in accesses if not a[2]} >= {("ld", ".nc", "", "u16"), ("st", "", "", "u16")}, accesses


@pytest.mark.parametrize("dtype", list(STORAGE))
def test_cuda_ptx_has_packed_arithmetic(compiled: dict[tuple[str, str, int], Compilation], dtype: str) -> None:
    """`input0 * input1 + 1.0` over a work-item's 4 halves: 2 packed multiplies and 2 packed
    adds (float16: `mul.rn.f16x2`, `add.rn.f16x2`; bfloat16 on sm_80: `fma.rn.bf16x2`, 4),
    no float32 multiply or add (the scalar path's float32 op and rounding per element give
    the same bits: float32 carries at least 2p + 2 bits of the 16-bit type)."""
    from tests.test_gpu_default import _ptx

    require("cuda")
    ptx = _ptx(compiled[("cuda", dtype, 1000)].results["source"])
    if dtype == "float16":
        assert ptx.count("mul.rn.f16x2") == 2 and ptx.count("add.rn.f16x2") == 2, ptx
    else:
        assert ptx.count("fma.rn.bf16x2") == 4, ptx
    assert not re.search(r"\b(mul|add|fma)(\.rn)?\.f32\b", ptx), ptx


def test_hip_gfx90a_has_packed_float16_arithmetic(compiled: dict[tuple[str, str, int], Compilation]) -> None:
    """hipcc's gfx90a code of `input0 * input1 + 1.0` over a work-item's 4 halves: one 8-byte
    load per input and one 8-byte store, 2 `v_pk_mul_f16` and 2 `v_pk_add_f16`, no fused
    `v_pk_fma_f16` (the helpers turn HIP's default contraction off: the language rounds the
    product) and no float32 arithmetic; bfloat16 (no packed instruction on gfx90a) keeps its
    float32 lanes: float32 multiplies, no packed 16-bit op. The 1002-element kernel's full
    chunk packed the same way (its scalar tail is hipcc's to vectorize, unfused too: the
    kernel turns contraction off, test_hip_float16_products_are_not_contracted)."""
    require("hip")
    from einc.runtime.hip import device_assembly

    isa = device_assembly(compiled[("hip", "float16", 1000)].results["source"], "gfx90a")
    ops = re.findall(r"^\s*(v_pk_\w+|v_(?:mul|add|fma|mac|fmac)_f32\w*|global_(?:load|store)_\w+)", isa, re.M)
    assert sorted(ops) == sorted(["global_load_dwordx2"] * 2 + ["global_store_dwordx2"] + ["v_pk_mul_f16"] * 2 + ["v_pk_add_f16"] * 2), ops
    tail = device_assembly(compiled[("hip", "float16", 1002)].results["source"], "gfx90a")
    assert tail.count("v_pk_mul_f16") >= 2 and tail.count("v_pk_add_f16") >= 2, tail
    assert not re.search(r"\bv_(pk_)?(fma|mac|fmac|mad)_f16", tail), tail
    bf16 = device_assembly(compiled[("hip", "bfloat16", 1000)].results["source"], "gfx90a")
    assert "v_pk_" not in bf16 and re.search(r"\bv_mul_f32", bf16), bf16


@pytest.mark.parametrize("target", ["cuda", "hip"])
@pytest.mark.parametrize("dtype", list(STORAGE))
def test_packed_subtraction_and_refusals(target: str, dtype: str) -> None:
    """A subtraction packed too (CUDA bfloat16's `fma(b, -1, a)`), bit for bit on the egpu
    interpreter with the specials; a division (no packed instruction) or a product
    rounded only once, by the store (computed in float32), keeps the float32 lanes, the
    same bits either way."""
    s = STORAGE[dtype]
    spec = {"dtype": dtype, "shape": [64]}
    rng = np.random.default_rng()
    values = {k: rng.uniform(-4, 4, 64).astype(s) for k in ("input0", "input1")}
    values["input0"][:6] = np.array([np.nan, np.inf, -0.0, 0.0, -0.0, 3.0], np.float32).astype(s)
    values["input1"][:6] = np.array([1.0, np.inf, -0.0, -0.0, 0.0, 3.0], np.float32).astype(s)
    a, b = (values[k].astype(np.float32) for k in ("input0", "input1"))
    with np.errstate(all="ignore"):  # inf - inf, 0 / 0: NaN, as the kernel gives
        cases = (
            ("output0[N] = input0[N] - input1[N]", True, a - b),
            ("output0[N] = input0[N] / input1[N]", False, a / b),
            ("output0[N] = (input0[N].cast(`float32`) * input1[N].cast(`float32`) + 0.1).cast(`DT`)", False, a * b + np.float32(0.1)),
        )
    for program, packed, expected in cases:
        program = program.replace("DT", dtype)
        comp = Compilation(program, "<half2>", {"input0": spec, "input1": spec}, None, target, "default")
        comp.run_until("source")
        ir = str(comp.results["target"])
        assert "egpu.vstore" in ir, ir
        packed = packed and (target == "cuda" or dtype == "float16")  # gfx90a: no packed bfloat16
        assert bool(re.search(r"arith\.\w+ .* : vector<4x(f16|bf16)>", ir)) == packed, (program, ir)
        with np.errstate(all="ignore"):
            out = run_lowered(comp.results["target"], values, target=target)["output0"]
        np.testing.assert_array_equal(out.view(np.uint16), expected.astype(s).view(np.uint16), program)
        if target == "hip" and packed:  # gfx90a: a - b is one `v_pk_add_f16` of b negated per pair
            require("hip")
            from einc.runtime.hip import device_assembly

            isa = device_assembly(comp.results["source"], "gfx90a")
            assert len(re.findall(r"v_pk_add_f16 .*neg_lo:\[0,1\] neg_hi:\[0,1\]", isa)) == 2, isa


@pytest.mark.parametrize("dtype", list(STORAGE))
def test_hip_compiles_packed_accesses(compiled: dict[tuple[str, str, int], Compilation], dtype: str) -> None:
    """hipcc accepts HIP's packed kernel (float16 natively `_Float16`, bfloat16 as bits)."""
    require("hip")
    comp = compiled[("hip", dtype, 1000)]
    assert "einc_vloada_" in comp.results["source"] and "einc_vstorea_" in comp.results["source"]
    reports = comp.kernel().check()
    assert reports and all(r.ok for r in reports), reports
    tail = compiled[("hip", dtype, 1002)]
    assert "einc_vloada_" in tail.results["source"]
    reports = tail.kernel().check()
    assert reports and all(r.ok for r in reports), reports


def test_float16_and_bfloat16_vectors_have_their_own_helpers() -> None:
    """One kernel file with packed float16 and bfloat16 accesses: each type's vector and
    conversions under its own name (a shared `f16` name printed one type's conversion for
    both: bfloat16 bits read as halves on CUDA, a type clash hipcc refused on HIP). The
    products computed in float32 (rounded once, by the store) keep float32 lanes."""
    program = ("input x: float16[64]\ninput y: bfloat16[64]\noutput a, b\n"
               "a[N] = (x[N].cast(`float32`) * 0.1).cast(`float16`)\nb[N] = (y[N].cast(`float32`) * 0.1).cast(`bfloat16`)\n")
    source = Compilation(program, "<mixed>", target="cuda").kernel().source
    assert "einc_half_to_float(a.v[k])" in source and "einc_bf16_to_f32(a.v[k])" in source
    assert "einc_vconvert_f16x4_f32x4" in source and "einc_vconvert_bf16x4_f32x4" in source


def test_eight_halves_are_one_16_byte_access() -> None:
    """The tuner's `items = 8` point (its knob offers it): 8 halves per work-item, one 16-byte
    load per input (`ld.global.nc.v4.u32`) and one 16-byte store, the numbers bit for bit."""
    spec = {"dtype": "float16", "shape": [1024]}
    inputs = {"input0": spec, "input1": spec}
    default = Compilation(PROGRAM, "<half2>", inputs, None, "cuda", "default")
    default.run_until("target")
    script = str(default.applied_schedule).replace('"output0.N.items" = 4', '"output0.N.items" = 8')
    assert '"output0.N.items" = 8' in script
    comp = Compilation(PROGRAM, "<half2>", inputs, None, "cuda", script)
    comp.run_until("source")
    assert re.findall(r"egpu\.vload .*-> vector<(\d+)xf16>", str(comp.results["target"])) == ["8", "8"]
    rng = np.random.default_rng()
    values = {k: rng.uniform(-4, 4, 1024).astype(np.float16) for k in inputs}
    out = run_lowered(comp.results["target"], values, target="cuda")["output0"]
    expected = _expected(values["input0"], values["input1"], "float16")
    np.testing.assert_array_equal(out.view(np.uint16), expected.view(np.uint16))
    require("cuda")
    from tests.test_gpu_default import _ptx

    ptx = _ptx(comp.results["source"])
    accesses = re.findall(r"\b(ld|st)\.global(\.nc)?\.(v\d\.)?([ubf]\d+)", ptx)
    assert sorted(accesses) == [("ld", ".nc", "v4.", "u32")] * 2 + [("st", "", "v4.", "u32")], accesses


def test_other_loads_stay_scalar_in_each_lane() -> None:
    """A float16 input packed beside a float32 input (read per lane, cast to float16 as the
    language says; the unrolled lanes' float32 loads then one float4 load, shape 4): the store
    and both loads vectors, the numbers bit for bit."""
    program = "output0[N] = input0[N] * input1[N].cast(`float16`)"
    inputs = {"input0": {"dtype": "float16", "shape": [64]}, "input1": {"dtype": "float32", "shape": [64]}}
    comp = Compilation(program, "<mixed>", inputs, None, "cuda", "default")
    comp.run_until("target")
    ir = str(comp.results["target"])
    assert re.findall(r"egpu\.vload .*-> vector<(4x\w+)>", ir) == ["4xf16", "4xf32"], ir
    assert ir.count("egpu.vstore") == 1 and "affine.load" not in ir and "load_extf" not in ir, ir
    rng = np.random.default_rng()
    a, b = rng.uniform(-4, 4, 64).astype(np.float16), rng.uniform(-4, 4, 64).astype(np.float32)
    out = run_lowered(comp.results["target"], {"input0": a, "input1": b}, target="cuda")["output0"]
    expected = (a.astype(np.float32) * b.astype(np.float16).astype(np.float32)).astype(np.float16)
    np.testing.assert_array_equal(out.view(np.uint16), expected.view(np.uint16))


FMA_PROGRAM = "output0[N] = input0[N] * input1[N] + input2[N]"


@pytest.mark.parametrize(("n", "program"), [(1001, FMA_PROGRAM), (1000, FMA_PROGRAM + " / 3.0")])
def test_hip_float16_products_are_not_contracted(n: int, program: str) -> None:
    """HIP's float16 arithmetic outside the packed helpers, the language's bits: a scalar
    loop (1001: no even divisor up to 4) and float32 lanes (a division keeps them) compute
    `a * b + c` in float32 rounded to float16 per op, which hipcc narrows to float16 ops;
    with HIP's default contraction it fused them into `v_fma_f16` / `v_pk_fma_f16` (one
    rounding). The kernel turns contraction off: gfx90a's code multiplies and adds
    (`v_mul_f16`, `v_add_f16` or their packed forms), fuses nothing, and the egpu interpreter
    gives NumPy's per-op rounding bit for bit. A float32 kernel keeps its contraction
    (`v_fmac_f32`: allowed, einc.runtime.c), and so does bfloat16's (its rounding is einc's
    own bit arithmetic, which hipcc cannot fuse across: `v_mul_f32` then `v_add_f32`)."""
    spec = {"dtype": "float16", "shape": [n]}
    names = ("input0", "input1", "input2")
    comp = Compilation(program, "<fma16>", dict.fromkeys(names, spec), None, "hip", "default")
    comp.run_until("source")
    source = comp.results["source"]
    assert source.count("#pragma clang fp contract(off)") == 1 + source.count("einc_h2 z"), source
    rng = np.random.default_rng(7)
    values = {k: rng.uniform(-4, 4, n).astype(np.float16) for k in names}
    a, b, c = (values[k].astype(np.float32) for k in names)
    if n == 1000:
        c = (c / np.float32(3.0)).astype(np.float16).astype(np.float32)
    want = ((a * b).astype(np.float16).astype(np.float32) + c).astype(np.float16)
    out = run_lowered(comp.results["target"], values, target="hip")["output0"]
    np.testing.assert_array_equal(out.view(np.uint16), want.view(np.uint16))
    require("hip")
    from einc.runtime.hip import device_assembly

    isa = device_assembly(source, "gfx90a")
    ops = re.findall(r"^\s*(v_(?:pk_)?(?:fma|mac|fmac|mad|mul|add)_f16)", isa, re.M)
    assert ops and not {"v_fma_f16", "v_pk_fma_f16", "v_mac_f16", "v_fmac_f16", "v_mad_f16"} & set(ops), ops
    assert {"v_mul_f16", "v_pk_mul_f16"} & set(ops) and {"v_add_f16", "v_pk_add_f16"} & set(ops), ops
    for dtype, fused in (("float32", True), ("bfloat16", False)):
        other = Compilation(FMA_PROGRAM, "<fma>", dict.fromkeys(names, {"dtype": dtype, "shape": [n]}), None, "hip", "default")
        other.run_until("source")
        assert "  #pragma clang fp contract(off)" not in other.results["source"]
        isa = device_assembly(other.results["source"], "gfx90a")
        assert bool(re.search(r"\bv_(fmac|fma|pk_fma)_f32", isa)) == fused, isa
        assert bool(re.search(r"\bv_(pk_)?mul_f32", isa)) != fused, isa


def test_cuda_float16_products_are_not_contracted() -> None:
    """CUDA's scalar float16 path needs no pragma: its conversions are inline PTX
    (`cvt.rn.f16.f32`), which NVRTC cannot fuse across, so `a * b + c` (1001: a scalar loop)
    is a float32 multiply and add each rounded to float16, no `fma`; float32 keeps NVRTC's
    contraction."""
    from tests.test_gpu_default import _ptx

    require("cuda")
    names = ("input0", "input1", "input2")
    for dtype, fused in (("float16", False), ("float32", True)):
        comp = Compilation(FMA_PROGRAM, "<fma>", dict.fromkeys(names, {"dtype": dtype, "shape": [1001]}), None, "cuda", "default")
        comp.run_until("source")
        ptx = _ptx(comp.results["source"])
        assert bool(re.search(r"\bfma\.rn\.f(16|32)\b", ptx)) == fused, ptx
        assert bool(re.search(r"\bmul(\.rn)?\.f32\b", ptx)) != fused, ptx
