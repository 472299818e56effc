// RUN: einc-opt %s -p "einc-vectorize-loops{target=c},canonicalize,cse" -t c | filecheck %s

// The pair form's input pack (README, the grouped convolution): two channel rows of 21
// floats interleaved into the pixels of a padded row (d[x, k] = s[k, x - 1], columns 1..21).
// On 16 float lanes: per chunk of 16 columns, the two rows loaded (the last chunk's 5 columns
// by AVX-512's masked load, the other lanes zero), zipped by two shuffles and stored as two
// vectors; the last chunk's 10 values by one masked store. No scalar copy is left.

func.func @pack(%s: memref<2x21xf32> {ein.name = "s"}, %d: memref<23x2xf32> {ein.name = "d", ein.output}) {
  affine.for %x = 1 to 22 {
    affine.for %k = 0 to 2 {
      %v = affine.load %s[%k, %x - 1] : memref<2x21xf32>
      affine.store %v, %d[%x, %k] : memref<23x2xf32>
    } {einc.copy}
  } {einc.copy}
  func.return
}

// CHECK:      static inline einc_f32x16 einc_vloadn_f32x16(const float* a, int k) {
// CHECK:        __builtin_ia32_loadups512_mask((const float*)a, (f_t){}, (unsigned short)((1u << k) - 1u));
// CHECK:        for (int j = 0; j < k; j++) v[j] = a[j];
// CHECK:      void pack(const float* restrict s, float* restrict d) {
// CHECK-NEXT:   einc_f32x16 v = einc_vload_f32x16(&s[0 * 21 + 0]);
// CHECK-NEXT:   einc_f32x16 v_1 = einc_vload_f32x16(&s[1 * 21 + 0]);
// CHECK-NEXT:   einc_vstore_f32x16(&d[1 * 2 + 0], __builtin_shufflevector(v, v_1, 0, 16, 1, 17, 2, 18, 3, 19, 4, 20, 5, 21, 6, 22, 7, 23));
// CHECK-NEXT:   einc_vstore_f32x16(&d[9 * 2 + 0], __builtin_shufflevector(v, v_1, 8, 24, 9, 25, 10, 26, 11, 27, 12, 28, 13, 29, 14, 30, 15, 31));
// CHECK-NEXT:   einc_f32x16 v_2 = einc_vloadn_f32x16(&s[0 * 21 + 16], 5);
// CHECK-NEXT:   einc_f32x16 v_3 = einc_vloadn_f32x16(&s[1 * 21 + 16], 5);
// CHECK-NEXT:   einc_vstoren_f32x16(&d[17 * 2 + 0], __builtin_shufflevector(v_2, v_3, 0, 16, 1, 17, 2, 18, 3, 19, 4, 20, 5, 21, 6, 22, 7, 23), 10);
// CHECK-NEXT: }
