// RUN: einc-opt %s -p "einc-vectorize-loops{target=c},canonicalize,cse" -t c | filecheck %s

// The pair form's filter pack (README, the grouped convolution): a pair of groups' filter
// [g, f, c, kh, kw] (8 output channels f of 3 input channels c, 3x3) packed with its lanes
// 2 f + g innermost. The lanes are two loops (g moves the destination by 1, f by 2): one
// 16-row tile whose row 2 f + g is source row g * 8 + f. The 27 source columns of a row
// are one tile of 16 and a partial tile of 11: its rows loaded by AVX-512's masked load,
// transposed, and only its first 11 transposed rows stored. No scalar copy is left.

func.func @pack(%w: memref<2x8x3x3x3xf32> {ein.name = "w"}, %l: memref<3x3x3x8x2xf32> {ein.name = "l", ein.output}) {
  affine.for %c = 0 to 3 {
    affine.for %kh = 0 to 3 {
      affine.for %kw = 0 to 3 {
        affine.for %f = 0 to 8 {
          affine.for %g = 0 to 2 {
            %v = affine.load %w[%g, %f, %c, %kh, %kw] : memref<2x8x3x3x3xf32>
            affine.store %v, %l[%c, %kh, %kw, %f, %g] : memref<3x3x3x8x2xf32>
          } {einc.copy}
        } {einc.copy}
      } {einc.copy}
    } {einc.copy}
  } {einc.copy}
  func.return
}

// CHECK:      void pack(const float* restrict w, float* restrict l) {
// CHECK-NEXT:   for (int64_t f = 0; f < 16; f += 16) {
// CHECK-NEXT:     for (int64_t kw = 0; kw < 16; kw += 16) {
// CHECK-NEXT:       einc_f32x16 v = einc_vload_f32x16(&w[f % 2 * 216 + f / 2 * 27 + kw]);
// CHECK-NEXT:       einc_f32x16 v_1 = einc_vload_f32x16(&w[(f + 1) % 2 * 216 + (f + 1) / 2 * 27 + kw]);
// CHECK-COUNT-14:   einc_vload_f32x16(&w[
// CHECK-NOT:        einc_vloadn
// CHECK:            einc_vstore_f32x16(&l[kw * 16 + f], __builtin_shufflevector(
// CHECK-COUNT-15:   einc_vstore_f32x16(&l[kw * 16 + {{[0-9]+}} + f], __builtin_shufflevector(
// CHECK-NEXT:     }
// CHECK-NEXT:     einc_f32x16 v = einc_vloadn_f32x16(&w[f % 2 * 216 + f / 2 * 27 + 1 * 9 + 2 * 3 + 1], 11);
// CHECK-COUNT-15: einc_vloadn_f32x16(&w[{{.*}}], 11);
// CHECK-NOT:      einc_vloadn
// CHECK:          einc_vstore_f32x16(&l[1 * 144 + 2 * 48 + 1 * 16 + f], {{.*}});
// CHECK-COUNT-10: einc_vstore_f32x16(&l[{{.*}} + f], {{.*}});
// CHECK-NOT:      einc_vstore
// CHECK-NOT:      l[{{.*}}] =
// CHECK:      }
