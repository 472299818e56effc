// RUN: einc-opt %s --split-input-file -p "einc-vectorize-loops{target=c},canonicalize,cse" -t c | filecheck %s

// Vectorized loops print with GCC/Clang vector extensions: one value typedef and one
// element-aligned, may_alias memory typedef per vector type, loads and stores through the
// latter (unaligned), operators for arithmetic, `x - (T){}` for a broadcast (exact for
// -0.0), the scalar remainder after the vector loop (one element: a remainder of two or more
// would be vectors of a narrower type).

func.func @axpy(%x: memref<3x33xf32> {ein.name = "x"}, %a: memref<3xf32> {ein.name = "a"}, %y: memref<3x33xf32> {ein.name = "y", ein.output}) {
  affine.for %n = 0 to 3 {
    affine.for %m = 0 to 33 {
      %s = affine.load %a[%n] : memref<3xf32>
      %v = affine.load %x[%n, %m] : memref<3x33xf32>
      %p = arith.mulf %s, %v : f32
      %w = affine.load %y[%n, %m] : memref<3x33xf32>
      %q = arith.addf %p, %w : f32
      affine.store %q, %y[%n, %m] : memref<3x33xf32>
    } {einc.vectorize}
  }
  func.return
}

// CHECK:      typedef float einc_f32x16 __attribute__((vector_size(64)));
// CHECK-NEXT: typedef float einc_f32x16_mem __attribute__((vector_size(64), aligned(4), may_alias));
// CHECK-NEXT: static inline einc_f32x16 einc_vload_f32x16(const float* a) { return *(const einc_f32x16_mem*)a; }
// CHECK-NEXT: static inline void einc_vstore_f32x16(float* a, einc_f32x16 v) { *(einc_f32x16_mem*)a = v; }
// CHECK-EMPTY:
// CHECK-NEXT: void axpy(const float* restrict x, const float* restrict a, float* restrict y) {
// CHECK-NEXT:   for (int64_t n = 0; n < 3; n++) {
// CHECK-NEXT:     for (int64_t m = 0; m < 32; m += 16) {
// CHECK-NEXT:       einc_f32x16 v = einc_vload_f32x16(&x[n * 33 + m]);
// CHECK-NEXT:       einc_f32x16 v_1 = a[n] - (einc_f32x16){};
// CHECK-NEXT:       einc_f32x16 v_2 = einc_vload_f32x16(&y[n * 33 + m]);
// CHECK-NEXT:       einc_vstore_f32x16(&y[n * 33 + m], v_1 * v + v_2);
// CHECK-NEXT:     }
// CHECK-NEXT:     for (int64_t m = 32; m < 33; m++) {
// CHECK-NEXT:       y[n * 33 + m] = a[n] * x[n * 33 + m] + y[n * 33 + m];
// CHECK-NEXT:     }
// CHECK-NEXT:   }
// CHECK-NEXT: }

// -----

// A reduction: the vector accumulator is a variable carried by the loop; the lanes are
// combined by a helper after it (max: NaN-propagating, as einsum's max).

func.func @row_max(%x: memref<4x64xf32> {ein.name = "x"}, %m: memref<4xf32> {ein.name = "m", ein.output}) {
  affine.for %n = 0 to 4 {
    affine.for %c = 0 to 64 {
      %v = affine.load %x[%n, %c] : memref<4x64xf32>
      %old = affine.load %m[%n] : memref<4xf32>
      %new = arith.maximumf %old, %v : f32
      affine.store %new, %m[%n] : memref<4xf32>
    } {einc.vectorize}
  }
  func.return
}

// CHECK:      static inline float einc_maximumf_f32(float a, float b) { float r = a > b ? a : b; r = b != b ? b : r; r = a != a ? a : r; return ((a == 0) & (b == 0)) ? a + b : r; }
// The vector maximum: AVX512DQ's vrangeps, a vector with a NaN lane (one unordered compare)
// sent to the lane loop (cold, never inlined), which is also the fallback elsewhere; the lane
// reduction: halves folded by shuffles (the same tree as its fallback's lane loop).
// CHECK:      static __attribute__((noinline, cold)) einc_f32x16 einc_vmaximumf_lanes_f32x16(einc_f32x16 a, einc_f32x16 b) { einc_f32x16 r; for (int k = 0; k < 16; k++) r[k] = einc_maximumf_f32((a[k]), (b[k])); return r; }
// CHECK-NEXT: static inline einc_f32x16 einc_vmaximumf_f32x16(einc_f32x16 a, einc_f32x16 b) {
// CHECK-NEXT: #if defined(__AVX512DQ__) && defined(__GNUC__) && !defined(__clang__)
// CHECK-NEXT:   einc_f32x16 r = __builtin_ia32_rangeps512_mask(a, b, 5, a, -1, 4);
// CHECK-NEXT:   if (__builtin_expect(__builtin_ia32_cmpps512_mask(a, b, 3, -1, 4) != 0, 0)) return einc_vmaximumf_lanes_f32x16(a, b);
// CHECK-NEXT:   return r;
// CHECK-NEXT: #else
// CHECK-NEXT:   einc_f32x16 r; for (int k = 0; k < 16; k++) r[k] = einc_maximumf_f32((a[k]), (b[k])); return r;
// CHECK-NEXT: #endif
// CHECK-NEXT:  }
// CHECK-NEXT: static inline float einc_vreduce_max_f32x16(einc_f32x16 a) {
// CHECK-NEXT: #if defined(__clang__) || __GNUC__ >= 12
// CHECK-NEXT:   a = einc_vmaximumf_f32x16(a, __builtin_shufflevector(a, a, 8, 9, 10, 11, 12, 13, 14, 15, 8, 9, 10, 11, 12, 13, 14, 15)); a = einc_vmaximumf_f32x16(a, __builtin_shufflevector(a, a, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 12, 13, 14, 15)); a = einc_vmaximumf_f32x16(a, __builtin_shufflevector(a, a, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 14, 15)); a = einc_vmaximumf_f32x16(a, __builtin_shufflevector(a, a, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 15)); return a[0];
// CHECK-NEXT: #else
// CHECK-NEXT:   float x[16]; for (int k = 0; k < 16; k++) x[k] = a[k]; for (int h = 8; h > 0; h /= 2) for (int k = 0; k < h; k++) x[k] = einc_maximumf_f32(x[k], x[k + h]); return x[0];
// CHECK-NEXT: #endif
// CHECK-NEXT:  }
// CHECK:      void row_max(const float* restrict x, float* restrict m) {
// CHECK-NEXT:   for (int64_t n = 0; n < 4; n++) {
// CHECK-NEXT:     einc_f32x16 v = -INFINITY - (einc_f32x16){};
// CHECK-NEXT:     einc_f32x16 v_1 = v;
// CHECK-NEXT:     for (int64_t c = 0; c < 64; c += 16) {
// CHECK-NEXT:       einc_f32x16 v_2 = einc_vload_f32x16(&x[n * 64 + c]);
// CHECK-NEXT:       v_1 = einc_vmaximumf_f32x16(v_1, v_2);
// CHECK-NEXT:     }
// CHECK-NEXT:     float v_2 = einc_vreduce_max_f32x16(v_1);
// CHECK-NEXT:     m[n] = einc_maximumf_f32(m[n], v_2);
// CHECK-NEXT:   }
// CHECK-NEXT: }

// -----

// A loop the pass cannot vectorize (a gather) keeps its mark and prints `omp simd`.

func.func @gather(%x: memref<64xf32> {ein.name = "x"}, %y: memref<32xf32> {ein.name = "y", ein.output}) {
  affine.for %i = 0 to 32 {
    %v = affine.load %x[%i * 2] : memref<64xf32>
    affine.store %v, %y[%i] : memref<32xf32>
  } {einc.vectorize}
  func.return
}

// CHECK:      void gather(const float* restrict x, float* restrict y) {
// CHECK-NEXT:   #pragma omp simd
// CHECK-NEXT:   for (int64_t i = 0; i < 32; i++) {
// CHECK-NEXT:     y[i] = x[i * 2];
