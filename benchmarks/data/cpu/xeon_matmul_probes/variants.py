"""Hand variants of the dumped default C (dump.py) of the three matmuls, written beside them.

    python3 benchmarks/data/cpu/xeon_matmul_probes/variants.py OUTDIR

- `_nt`: the output tile's copy-out with non-temporal stores (`vmovntps`) where the
  destination is 64-byte aligned (a test per store; plain stores otherwise);
- `_pfa` / `_pfc`: each 4-row tile first prefetches the next tile's rows of A / (for write)
  of the output;
- `_ksplit`: the reduction loop split into two halves of 64 (A V only: gcc then allocates
  the 16 accumulators without 12 register moves per iteration);
- probes, whose results are wrong on purpose: `_onestore` (every image's output tile stored
  into image 0's: the output stays in the caches), `_oneload` (both inputs read from image
  0: the inputs stay in the caches), `_onestore_noload` (both).
"""

import pathlib
import re
import sys

SHAPES = {"matmul_small": (16384, 32, 512, 512 * 512), "bmm_qk": (8192, 64, 128, 128 * 128),
          "bmm_av": (16384, 128, 64, 128 * 64)}  # A image stride, K, M, output image stride
NT = ("static inline void einc_vstore_nt_f32x16(float* a, einc_f32x16 v) { if (((uintptr_t)a & 63) == 0) "
      "__builtin_ia32_movntps512(a, v); else einc_vstore_f32x16(a, v); }\n")

d = pathlib.Path(sys.argv[1])
for key, (sa, k, m, so) in SHAPES.items():
    for batch in (1, 16):
        src = (d / f"{key}_b{batch}.c").read_text()
        out = {}
        out["nt"] = src[:src.index("\nstatic inline void einc_parallel")] + "\n" + NT + \
            src[src.index("\nstatic inline void einc_parallel"):].replace("einc_vstore_f32x16(&output0[", "einc_vstore_nt_f32x16(&output0[")
        tile = re.search(r"for \(int64_t N_o = 0; N_o < \d+; N_o \+= 4\) \{\n", src).end()
        pfa = f"        for (int64_t p_ = 0; p_ < {4 * k}; p_ += 16) __builtin_prefetch(&input0[B * {sa} + (N_o + 4) * {k} + p_], 0, 3);\n"
        pfc = (f"        for (int64_t r_ = 0; r_ < 4; r_++) for (int64_t p_ = 0; p_ < 64; p_ += 16) "
               f"__builtin_prefetch(&output0[B * {so} + (N_o + 4 + r_) * {m} + M_o + p_], 1, 3);\n")
        out["pfa"] = src[:tile] + pfa + src[tile:]
        out["pfc"] = src[:tile] + pfc + src[tile:]
        if key == "bmm_av":
            out["ksplit"] = src.replace("for (int64_t K_i = 0; K_i < 128; K_i++) {",
                                        "for (int64_t K_h = 0; K_h < 128; K_h += 64) for (int64_t K_i = K_h; K_i < K_h + 64; K_i++) {")
        store = src.replace("output0[(B + output0_c0) *", "output0[(0 + output0_c0) *")
        load = lambda s: s.replace("input1[(B + input1_c0) *", "input1[(0 + input1_c0) *").replace("input0[B *", "input0[0 *")  # noqa: E731
        out["onestore"], out["oneload"], out["onestore_noload"] = store, load(src), load(store)
        for name, text in out.items():
            assert text != src, (key, name)
            (d / f"{key}_b{batch}_{name}.c").write_text(text)
