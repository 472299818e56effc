"""Hand variants of the pair form's C (batch 1, from dump.py of the default before the copy-out
was a transpose): variants.py IN.c STEM writes STEM_out.c (the copy-out as a 16 x 16 register
transpose and 16 masked stores), STEM_pack.c (the interior pack as vpermt2ps rows, masked
loads/stores, no scalar tail), STEM_fused.c (that pack moved into the row loop: rows 1-2
before HO = 0, row HO + 2 before each later HO), STEM_pout.c and STEM_both.c (the
combinations; on today's default, whose copy-out is a transpose already, STEM_out.c is the
default). Uses immintrin.h: AVX-512 hosts only."""
import re, sys
sys.path.insert(0, '.')
from einc.transforms.transpose_copy import transpose_masks
src = open(sys.argv[1]).read(); stem = sys.argv[2]
hdr = '#include <immintrin.h>\n'
# --- copy-out: 14 pixel vectors (lane 2f+g) transposed in registers, 16 masked row stores
stages = transpose_masks(16)
def tr():
    out = []
    for b, lo, hi in stages:
        for i in range(16):
            if i & b: continue
            out.append(f"{{ einc_f32x16 x = r[{i}], y = r[{i+b}]; r[{i}] = __builtin_shufflevector(x, y, {', '.join(map(str, lo))}); r[{i+b}] = __builtin_shufflevector(x, y, {', '.join(map(str, hi))}); }}")
    return '\n'.join(out)
copyout = re.search(r"      for \(int64_t output0_c0 = 0; output0_c0 < 1; output0_c0\+\+\) \{\n        for \(int64_t output0_c3 = 0; output0_c3 < 1; output0_c3\+\+\) \{\n          for \(int64_t output0_c4 = 0; output0_c4 < 14; output0_c4\+\+\) \{\n            for \(int64_t output0_c2 = 0; output0_c2 < 8; output0_c2\+\+\) \{\n              for \(int64_t output0_c1 = 0; output0_c1 < 2; output0_c1\+\+\) \{\n                output0\[.*?\n(?:.*\n){5}", src)
new_out = ("      { einc_f32x16 r[16];\n        for (int p = 0; p < 14; p++) r[p] = einc_vload_f32x16(&output0_local[p * 16]);\n        r[14] = r[15] = (einc_f32x16){};\n"
           + tr() + "\n        for (int l = 0; l < 16; l++) _mm512_mask_storeu_ps(&output0[N * 200704 + F_q_o * 6272 + (l & 1) * 6272 + (l >> 1) * 784 + HO * 28 + WO_o], 0x3fff, (__m512)r[l]);\n      }\n")
out = (lambda t: t.replace(copyout.group(0), new_out)) if copyout else (lambda t: t)  # the copy-out einc makes now kept
v_out = hdr + out(src)
# --- pack: the interior copy nest as vpermt2ps rows with masked loads/stores (no scalar tail)
pack = re.search(r"  for \(int64_t input0_c0 = 0;.*?\n(?:.*\n)*?  float input1_local", src)
assert pack
body = pack.group(0)[:-len("  float input1_local")]
def packrows(rows):
    return f"""  for (int64_t c2 = 0; c2 < 8; c2++) {{
    for (int64_t c3 = {rows}; c3++) {{
      const float* a = &input0[N * 200704 + F_q_o * 6272 + c2 * 784 + c3 * 28 - 28];
      const float* b = a + 6272;
      float* d = &input0_local[c2 * 1800 + c3 * 60 + 2];
      __m512i lo = _mm512_set_epi32(23,7,22,6,21,5,20,4,19,3,18,2,17,1,16,0), hi = _mm512_set_epi32(31,15,30,14,29,13,28,12,27,11,26,10,25,9,24,8);
      __m512 a0 = _mm512_loadu_ps(a), b0 = _mm512_loadu_ps(b), a1 = _mm512_maskz_loadu_ps(0x0fff, a + 16), b1 = _mm512_maskz_loadu_ps(0x0fff, b + 16);
      _mm512_storeu_ps(d, _mm512_permutex2var_ps(a0, lo, b0));
      _mm512_storeu_ps(d + 16, _mm512_permutex2var_ps(a0, hi, b0));
      _mm512_storeu_ps(d + 32, _mm512_permutex2var_ps(a1, lo, b1));
      _mm512_mask_storeu_ps(d + 48, 0x00ff, _mm512_permutex2var_ps(a1, hi, b1));
    }}
  }}
"""
v_pack = hdr + src.replace(body, packrows("1; c3 < 29"))
# --- pack fused into the row loop: local rows 1,2 before HO = 0, row HO + 2 before each later HO
fused = src.replace(body, "").replace("  for (int64_t HO = 0; HO < 28; HO++) {\n",
    "  for (int64_t HO = 0; HO < 28; HO++) {\n  if (HO == 0) {\n" + packrows("1; c3 < 3") + "  } else if (HO + 2 < 29) {\n" + packrows("HO + 2; c3 < HO + 3") + "  }\n")
v_fused = hdr + fused
open(f'{stem}_out.c','w').write(v_out)
open(f'{stem}_pack.c','w').write(v_pack)
open(f'{stem}_fused.c','w').write(v_fused)
open(f'{stem}_both.c','w').write(hdr + out(fused))
open(f'{stem}_pout.c','w').write(hdr + out(src.replace(body, packrows("1; c3 < 29"))))
