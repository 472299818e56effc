// RUN: einc-opt %s -p "einc-vectorize-loops{target=c},canonicalize,cse" -t c | filecheck %s

// exp on vectors: a lane-wise helper over expf, which the kernel redeclares __simd__ (x86-64
// glibc and gcc only) so that gcc calls libmvec's vector exp for the helper's lanes.

func.func @vexp(%x: memref<41xf32> {ein.name = "x"}, %y: memref<41xf32> {ein.name = "y", ein.output}) {
  affine.for %i = 0 to 41 {
    %v = affine.load %x[%i] : memref<41xf32>
    %e = math.exp %v : f32
    affine.store %e, %y[%i] : memref<41xf32>
  } {einc.vectorize}
  func.return
}

// CHECK:      #include <stdlib.h>
// CHECK-NEXT: #if defined(__x86_64__) && defined(__GLIBC__) && defined(__GNUC__) && !defined(__clang__)
// CHECK-NEXT: __attribute__((__simd__("notinbranch"))) float expf(float);
// CHECK-NEXT: __attribute__((__simd__("notinbranch"))) double exp(double);
// CHECK-NEXT: #endif
// 16 lanes: einc's own exp inline with AVX-512 and gcc where every lane is ordinary, the lane
// loop (cold, never inlined) for a vector with a special lane.
// CHECK:      static __attribute__((noinline, cold)) einc_f32x16 einc_vexp_lanes_f32x16(einc_f32x16 a) { einc_f32x16 r; for (int k = 0; k < 16; k++) r[k] = expf((a[k])); return r; }
// CHECK-NEXT: static inline einc_f32x16 einc_vexp_f32x16(einc_f32x16 a) {
// CHECK-NEXT: #if defined(__AVX512F__) && defined(__GNUC__) && !defined(__clang__)
// CHECK:        if (__builtin_expect((unsigned short)(fast | zero) != (unsigned short)0xffff, 0)) return einc_vexp_lanes_f32x16(a);
// CHECK-NEXT:   return __builtin_ia32_blendmps_512_mask((einc_f32x16)((i_t)p + ((i_t)t << 23)), z, zero);
// CHECK-NEXT: #else
// CHECK-NEXT:   einc_f32x16 r; for (int k = 0; k < 16; k++) r[k] = expf((a[k])); return r;
// CHECK-NEXT: #endif
// CHECK:      for (int64_t i = 0; i < 32; i += 16) {
// CHECK-NEXT:   einc_f32x16 v = einc_vload_f32x16(&x[i]);
// CHECK-NEXT:   einc_vstore_f32x16(&y[i], einc_vexp_f32x16(v));
// CHECK:      for (int64_t i = 32; i < 40; i += 8) {
// CHECK-NEXT:   einc_f32x8 v = einc_vload_f32x8(&x[i]);
// CHECK-NEXT:   einc_vstore_f32x8(&y[i], einc_vexp_f32x8(v));
// CHECK:      for (int64_t i = 40; i < 41; i++) {
// CHECK-NEXT:   y[i] = expf(x[i]);
