// RUN: einc-opt %s -p "einc-vectorize-loops{target=c},canonicalize,cse" -t c | filecheck %s

// The pair form's copy-out (README, the grouped convolution): a tile of 14 pixels x 16 lanes
// (lane 2 f + g) copied back to the output's [group, channel, pixel] order. 14 rows is a
// partial tile (over half of this host's 16 float lanes): 14 row loads, the 16 x 16
// transpose, and 16 stores of their first 14 lanes (AVX-512's masked store), each at its own
// row of the destination (g * 112 + f * 14: the run's loops need not move it contiguously).

func.func @copy_out(%t: memref<14x8x2xf32> {ein.name = "t"}, %o: memref<2x8x14xf32> {ein.name = "o", ein.output}) {
  affine.for %p = 0 to 14 {
    affine.for %f = 0 to 8 {
      affine.for %g = 0 to 2 {
        %v = affine.load %t[%p, %f, %g] : memref<14x8x2xf32>
        affine.store %v, %o[%g, %f, %p] : memref<2x8x14xf32>
      } {einc.copy}
    } {einc.copy}
  } {einc.copy}
  func.return
}

// CHECK:      static inline void einc_vstoren_f32x16(float* a, einc_f32x16 v, int k) {
// CHECK:        __builtin_ia32_storeups512_mask((float*)a, (f_t)v, (unsigned short)((1u << k) - 1u));
// CHECK:        for (int j = 0; j < k; j++) a[j] = v[j];
// CHECK:      void copy_out(const float* restrict t, float* restrict o) {
// CHECK-NEXT:   for (int64_t p = 0; p < 14; p += 16) {
// CHECK-NEXT:     for (int64_t g = 0; g < 16; g += 16) {
// CHECK-NEXT:       einc_f32x16 v = einc_vload_f32x16(&t[p * 16 + g]);
// CHECK:            einc_f32x16 v_13 = einc_vload_f32x16(&t[p * 16 + 208 + g]);
// CHECK-NOT:        einc_vload_f32x16
// CHECK:            einc_vstoren_f32x16(&o[g % 2 * 112 + g / 2 * 14 + p], {{.*}}, 14);
// CHECK-COUNT-15:   einc_vstoren_f32x16(&o[{{.*}}, 14);
// CHECK-NOT:        o[{{.*}}] =
// CHECK:      }
