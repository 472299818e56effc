// RUN: einc-opt %s -p "einc-vectorize-loops{target=c},canonicalize,cse" -t c | filecheck %s

// A staging copy (`einc.copy` loops) that transposes: the destination moves by 1 along %f,
// the source along the run %c x %k (8 x 2 = 16 elements, contiguous in both). With C's
// `__builtin_shufflevector` it becomes 16 x 16 tiles (this host's 16 float lanes): 16 row
// loads, 4 stages of 16 shuffles, 16 column stores; the run's position `r` indexes both
// sides flat (no division or remainder).

func.func @pack(%w: memref<16x8x2xf32> {ein.name = "w"}, %p: memref<8x2x16xf32> {ein.name = "p", ein.output}) {
  affine.for %c = 0 to 8 {
    affine.for %f = 0 to 16 {
      affine.for %k = 0 to 2 {
        %v = affine.load %w[%f, %c, %k] : memref<16x8x2xf32>
        affine.store %v, %p[%c, %k, %f] : memref<8x2x16xf32>
      } {einc.copy}
    } {einc.copy}
  } {einc.copy}
  func.return
}

// CHECK:      void pack(const float* restrict w, float* restrict p) {
// CHECK-NEXT:   for (int64_t f = 0; f < 16; f += 16) {
// CHECK-NEXT:     for (int64_t k = 0; k < 16; k += 16) {
// CHECK-NEXT:       einc_f32x16 v = einc_vload_f32x16(&w[f * 16 + k]);
// CHECK-NEXT:       einc_f32x16 v_1 = einc_vload_f32x16(&w[f * 16 + 16 + k]);
// CHECK:            einc_f32x16 v_15 = einc_vload_f32x16(&w[f * 16 + 240 + k]);
// CHECK-NEXT:       einc_f32x16 v_16 = __builtin_shufflevector(v, v_8, 0, 1, 2, 3, 4, 5, 6, 7, 16, 17, 18, 19, 20, 21, 22, 23);
// CHECK-NEXT:       einc_f32x16 v_17 = __builtin_shufflevector(v, v_8, 8, 9, 10, 11, 12, 13, 14, 15, 24, 25, 26, 27, 28, 29, 30, 31);
// CHECK-NOT:        {{/|%}}
// CHECK:            einc_vstore_f32x16(&p[f + k * 16], __builtin_shufflevector(v_48, v_50, 0, 16, 2, 18, 4, 20, 6, 22, 8, 24, 10, 26, 12, 28, 14, 30));
// CHECK-NOT:        {{/|%}}
// CHECK:            einc_vstore_f32x16(&p[f + k * 16 + 240], __builtin_shufflevector(v_61, v_63, 1, 17, 3, 19, 5, 21, 7, 23, 9, 25, 11, 27, 13, 29, 15, 31));
// CHECK-NEXT:     }
// CHECK-NEXT:   }
// CHECK-NEXT: }
