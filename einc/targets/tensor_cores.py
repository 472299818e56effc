"""The printing of `egpu.mma` (einc.dialects.egpu_mma): a 16 x 16 tile of a float16/bfloat16
contraction accumulated in float32 by a warp's tensor cores.

- CUDA, "mma.m16n8k16": inline PTX `mma.sync.aligned.m16n8k16.row.col.f32.{f16,bf16}` (sm_80+;
  no header needed), two instructions per 16-wide k step (the n8 halves). Each lane gathers
  its fragments from memory with the layout of the PTX ISA ("Matrix Fragments for
  mma.m16n8k16"): A rows g, g + 8 and columns 2t, 2t + 1 (+ 8), B rows 2t, 2t + 1 (+ 8) and
  column g, C rows g, g + 8 and columns 2t, 2t + 1, with g = lane / 4, t = lane % 4, two
  16-bit elements to a 32-bit register, the lower index in the lower half. Operands are read
  element by element at their own strides (transposed ones and unaligned tiles too), or,
  where `einc-ldmatrix` marked them (`egpu.ldmatrix`: shared tiles with aligned 8-element
  rows), four 8 x 8 matrices per `ldmatrix.x4` (`.trans` for a tile whose k dimension is
  not the contiguous one): A's four registers in one instruction, B's two n8 halves in one.
- HIP, "mfma.16x16x16": `__builtin_amdgcn_mfma_f32_16x16x16f16` / `..._16x16x16bf16_1k`
  (CDNA: gfx908 for f16, gfx90a and later for bf16; RDNA has no MFMA), a wavefront of 64:
  A row lane % 16 and columns 4 (lane / 16) .. + 3, B those rows and column lane % 16,
  C column lane % 16 and rows 4 (lane / 16) .. + 3. A lane's 4 k elements are gathered one
  by one, or, where `einc-ldmatrix` marked the operand "v4" (shared tiles, k contiguous,
  8-byte aligned), loaded as one 8-byte vector.

The accumulator tile is read from C once, kept in registers over the k loop, written once;
in the op's fragment form (`tensorize`'s register-resident accumulator) C is the lane's
private array itself, held in registers across the whole reduction.
Both are compile-checked here (NVRTC: `mma.sync` in the PTX; hipcc: `v_mfma` in the gfx90a
code); their numbers are checked where a GPU runs them (tests/test_tensorize.py).
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

from xdsl.dialects.builtin import BFloat16Type, DictionaryAttr, MemRefType, StringAttr

from einc.dialects.egpu_mma import MmaOp
from einc.ir.attrs import LDMATRIX_ATTR

if TYPE_CHECKING:
    from einc.targets.writer import Writer


def _strides(t: object) -> list[int]:
    assert isinstance(t, MemRefType)
    shape = t.get_shape()
    return [math.prod(shape[d + 1 :]) for d in range(len(shape))]


def _fields(w: Writer, op: MmaOp) -> dict[str, str]:
    """Names and strides the two printers share: `{A}` the A pointer at the tile's base,
    `{AR}`/`{AK}` its row / k strides (elements), likewise B (`{BK}`, `{BC}`) and C."""
    fields = {"lane": f"(int)({w.value(op.lane).text})", "K": str(op.k.value.data)}
    for name, buffer, indices in (("a", op.a, op.a_indices), ("b", op.b, op.b_indices), ("c", op.c, op.c_indices)):
        fields[f"{name}_base"] = f"{w.value(buffer).text} + ({w.flat_values(buffer, indices).text})"
        if name == "c" and op.fragment:
            continue
        first, second = op.dims(name)
        strides = _strides(buffer.type)
        fields[f"{name}_1"], fields[f"{name}_2"] = f"{strides[first]}LL", f"{strides[second]}LL"
    return fields


def _element(w: Writer, op: MmaOp) -> str:
    """The C type of A's and B's elements (their 16 bits)."""
    t = op.a.type
    assert isinstance(t, MemRefType)
    return w.ctype(t.get_element_type())


def _bf16(op: MmaOp) -> bool:
    t = op.a.type
    assert isinstance(t, MemRefType)
    return isinstance(t.get_element_type(), BFloat16Type)


def _ldmatrix(mode: str, registers: str, address: str, lane: str) -> str:
    """`ldmatrix.sync.aligned.m8n8.{mode}.shared.b16` into `registers[0..3]`, lane `lane`'s
    row address `address` (in terms of `j` = lane / 8 and `r` = lane % 8)."""
    outs = ", ".join(f'"=r"({registers}[{i}])' for i in range(4))
    return f"""    {{
      const int j = {lane} >> 3, r = {lane} & 7;
      asm volatile("ldmatrix.sync.aligned.m8n8.{mode}.shared.b16 {{%0,%1,%2,%3}}, [%4];"
                   : {outs} : "r"((unsigned int)__cvta_generic_to_shared({address})));
    }}"""


def mma_sync(w: Writer, op: MmaOp) -> None:
    """CUDA: PTX `mma.sync.aligned.m16n8k16` (the module docstring)."""
    f = _fields(w, op)
    kind = "bf16" if _bf16(op) else "f16"
    element = _element(w, op)
    if op.fragment:
        # the accumulator is the lanes' registers (a private array indexed by constants)
        c_in, c_out = f"  float* einc_d = {f['c_base']};", ""

        def d(e: int) -> str:
            return f"einc_d[4 * h + {e}]"
    else:
        c_in = f"""  float* einc_c = {f['c_base']};
  float einc_d[2][4];
  for (int h = 0; h < 2; h++)
    for (int e = 0; e < 4; e++)
      einc_d[h][e] = einc_c[(einc_g + 8 * (e >> 1)) * {f['c_1']} + (8 * h + 2 * einc_t + (e & 1)) * {f['c_2']}];"""
        c_out = f"""
  for (int h = 0; h < 2; h++)
    for (int e = 0; e < 4; e++)
      einc_c[(einc_g + 8 * (e >> 1)) * {f['c_1']} + (8 * h + 2 * einc_t + (e & 1)) * {f['c_2']}] = einc_d[h][e];"""

        def d(e: int) -> str:
            return f"einc_d[h][{e}]"
    modes = op.attributes.get(LDMATRIX_ATTR)
    mode = {k: v.data for k, v in modes.data.items() if isinstance(v, StringAttr)} if isinstance(modes, DictionaryAttr) else {}
    if "a" in mode:
        # ldmatrix x4: lane l gives the row address of matrix l / 8 (rows m, then k + 8)
        m, q = ("r", "kk + 8 * (j >> 1)") if mode["a"] == "x4" else ("0", "kk + 8 * (j >> 1) + r")
        a_load = _ldmatrix(mode["a"], "einc_ra", f"einc_a + ((8 * (j & 1) + {m}) * {f['a_1']} + ({q}) * {f['a_2']})", f["lane"])
    else:
        a_load = f"""    for (int e = 0; e < 4; e++) {{
      const long long r = einc_g + 8 * (e & 1), q = kk + 2 * einc_t + 8 * (e >> 1);
      einc_ra[e] = (unsigned int)einc_a[r * {f['a_1']} + q * {f['a_2']}] | ((unsigned int)einc_a[r * {f['a_1']} + (q + 1) * {f['a_2']}] << 16);
    }}"""
    if "b" in mode:
        # register j: the n8 half j / 2, the k half j % 2
        n, q = ("r", "kk + 8 * (j & 1)") if mode["b"] == "x4" else ("0", "kk + 8 * (j & 1) + r")
        b_all = "\n    unsigned int einc_rball[4];\n" + _ldmatrix(
            mode["b"], "einc_rball", f"einc_b + (({q}) * {f['b_1']} + (8 * (j >> 1) + {n}) * {f['b_2']})", f["lane"])
        b_load = "      einc_rb[0] = einc_rball[2 * h];\n      einc_rb[1] = einc_rball[2 * h + 1];"
    else:
        b_all = ""
        b_load = f"""      for (int e = 0; e < 2; e++) {{
        const long long q = kk + 2 * einc_t + 8 * e, s = 8 * h + einc_g;
        einc_rb[e] = (unsigned int)einc_b[q * {f['b_1']} + s * {f['b_2']}] | ((unsigned int)einc_b[(q + 1) * {f['b_1']} + s * {f['b_2']}] << 16);
      }}"""
    lines = f"""{{
  const int einc_g = {f['lane']} >> 2, einc_t = {f['lane']} & 3;
  const {element}* einc_a = {f['a_base']};
  const {element}* einc_b = {f['b_base']};
{c_in}
  #pragma unroll
  for (int kk = 0; kk < {f['K']}; kk += 16) {{
    unsigned int einc_ra[4];
{a_load}{b_all}
    #pragma unroll
    for (int h = 0; h < 2; h++) {{
      unsigned int einc_rb[2];
{b_load}
      asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.{kind}.{kind}.f32 {{%0,%1,%2,%3}}, {{%4,%5,%6,%7}}, {{%8,%9}}, {{%0,%1,%2,%3}};"
                   : "+f"({d(0)}), "+f"({d(1)}), "+f"({d(2)}), "+f"({d(3)})
                   : "r"(einc_ra[0]), "r"(einc_ra[1]), "r"(einc_ra[2]), "r"(einc_ra[3]), "r"(einc_rb[0]), "r"(einc_rb[1]));
    }}
  }}{c_out}
}}"""
    for line in lines.splitlines():
        w.line(line)


def mfma(w: Writer, op: MmaOp) -> None:
    """HIP: `__builtin_amdgcn_mfma_f32_16x16x16{f16,bf16_1k}` (the module docstring)."""
    f = _fields(w, op)
    bf16 = _bf16(op)
    element = _element(w, op)
    lane_type, builtin = ("short", "__builtin_amdgcn_mfma_f32_16x16x16bf16_1k") if bf16 else (
        "_Float16", "__builtin_amdgcn_mfma_f32_16x16x16f16")  # fmt: skip
    cast = "(short)" if bf16 else ""
    modes = op.attributes.get(LDMATRIX_ATTR)
    vector = {k for k, v in modes.data.items() if isinstance(v, StringAttr) and v.data == "v4"} if isinstance(modes, DictionaryAttr) else set()
    # "v4" (einc-ldmatrix): the lane's 4 consecutive k elements, 8-byte aligned: one load
    a_load = (f"einc_va = *(const einc_x4*)&einc_a[einc_r * {f['a_1']} + (kk + 4 * einc_q)];" if "a" in vector else
              f"for (int i = 0; i < 4; i++) einc_va[i] = {cast}einc_a[einc_r * {f['a_1']} + (kk + 4 * einc_q + i) * {f['a_2']}];")  # fmt: skip
    b_load = (f"einc_vb = *(const einc_x4*)&einc_b[(kk + 4 * einc_q) + einc_r * {f['b_2']}];" if "b" in vector else
              f"for (int i = 0; i < 4; i++) einc_vb[i] = {cast}einc_b[(kk + 4 * einc_q + i) * {f['b_1']} + einc_r * {f['b_2']}];")  # fmt: skip
    # a fragment: the lane's registers, element i at i (its copies in and out fold away)
    c_at = "i" if op.fragment else f"(4 * einc_q + i) * {f['c_1']} + einc_r * {f['c_2']}"
    lines = f"""{{
  typedef {lane_type} einc_x4 __attribute__((ext_vector_type(4)));
  typedef float einc_f4 __attribute__((ext_vector_type(4)));
  const int einc_r = {f['lane']} & 15, einc_q = {f['lane']} >> 4;
  const {element}* einc_a = {f['a_base']};
  const {element}* einc_b = {f['b_base']};
  float* einc_c = {f['c_base']};
  einc_f4 einc_d;
  for (int i = 0; i < 4; i++) einc_d[i] = einc_c[{c_at}];
  for (int kk = 0; kk < {f['K']}; kk += 16) {{
    einc_x4 einc_va, einc_vb;
    {a_load}
    {b_load}
    einc_d = {builtin}(einc_va, einc_vb, einc_d, 0, 0, 0);
  }}
  for (int i = 0; i < 4; i++) einc_c[{c_at}] = einc_d[i];
}}"""
    for line in lines.splitlines():
        w.line(line)
