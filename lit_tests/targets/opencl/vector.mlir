// RUN: einc-opt %s --split-input-file -p "einc-vectorize-loops{target=opencl},canonicalize,cse" -t opencl | filecheck %s

// OpenCL C: native vectors (`floatN`, 16 float lanes per the target description), vloadN /
// vstoreN at the first element's address (unaligned), operators, a broadcast as a cast;
// the loop inside the kernel: its remainder in narrower vectors (8, 4), the last element scalar.

func.func @host(%x: memref<8x45xf32> {ein.name = "x"}, %y: memref<8x45xf32> {ein.name = "y", ein.output}) {
  egpu.launch @scale(%x, %y) : memref<8x45xf32>, memref<8x45xf32>
  func.return
}
egpu.func @scale(%x: memref<8x45xf32>, %y: memref<8x45xf32>) grid [1, 1, 1] block [8, 1, 1] {
  %n = egpu.thread_id x
  %two = arith.constant 2.000000e+00 : f32
  affine.for %m = 0 to 45 {
    %v = affine.load %x[%n, %m] : memref<8x45xf32>
    %p = arith.mulf %v, %two : f32
    affine.store %p, %y[%n, %m] : memref<8x45xf32>
  } {einc.vectorize}
  egpu.return
}

// CHECK:      __kernel void scale(__global const float* restrict x, __global float* restrict y) {
// CHECK-NEXT:   long n = get_local_id(0);
// CHECK-NEXT:   for (long m = 0; m < 32; m += 16) {
// CHECK-NEXT:     float16 v = vload16(0, &x[n * 45 + m]);
// CHECK-NEXT:     float16 v_1 = (float16)(2.0f);
// CHECK-NEXT:     vstore16(v * v_1, 0, &y[n * 45 + m]);
// CHECK-NEXT:   }
// CHECK-NEXT:   for (long m = 32; m < 40; m += 8) {
// CHECK-NEXT:     float8 v = vload8(0, &x[n * 45 + m]);
// CHECK-NEXT:     float8 v_1 = (float8)(2.0f);
// CHECK-NEXT:     vstore8(v * v_1, 0, &y[n * 45 + m]);
// CHECK-NEXT:   }
// CHECK-NEXT:   for (long m = 40; m < 44; m += 4) {
// CHECK-NEXT:     float4 v = vload4(0, &x[n * 45 + m]);
// CHECK-NEXT:     float4 v_1 = (float4)(2.0f);
// CHECK-NEXT:     vstore4(v * v_1, 0, &y[n * 45 + m]);
// CHECK-NEXT:   }
// CHECK-NEXT:   for (long m = 44; m < 45; m++) {
// CHECK-NEXT:     y[n * 45 + m] = x[n * 45 + m] * 2.0f;
// CHECK-NEXT:   }
// CHECK-NEXT: }

// -----

// An integer sum: `intN` accumulator, lanes reduced by a helper; f64 gets 8 lanes.

func.func @host(%x: memref<4x17xi32> {ein.name = "x"}, %s: memref<4xi32> {ein.name = "s", ein.output}, %d: memref<17xf64> {ein.name = "d"}, %e: memref<17xf64> {ein.name = "e", ein.output}) {
  egpu.launch @sum(%x, %s, %d, %e) : memref<4x17xi32>, memref<4xi32>, memref<17xf64>, memref<17xf64>
  func.return
}
egpu.func @sum(%x: memref<4x17xi32>, %s: memref<4xi32>, %d: memref<17xf64>, %e: memref<17xf64>) grid [1, 1, 1] block [4, 1, 1] {
  %n = egpu.thread_id x
  affine.for %c = 0 to 17 {
    %v = affine.load %x[%n, %c] : memref<4x17xi32>
    %old = affine.load %s[%n] : memref<4xi32>
    %new = arith.addi %old, %v : i32
    affine.store %new, %s[%n] : memref<4xi32>
  } {einc.vectorize}
  affine.for %c = 0 to 17 {
    %v = affine.load %d[%c] : memref<17xf64>
    %w = arith.addf %v, %v : f64
    affine.store %w, %e[%c] : memref<17xf64>
  } {einc.vectorize}
  egpu.return
}

// CHECK:      inline int einc_vreduce_add_i32x16(int16 a) { int r = a[0]; for (int k = 1; k < 16; k++) r = r + (a[k]); return r; }
// CHECK:      __kernel void sum(
// CHECK-NEXT:   long n = get_local_id(0);
// CHECK-NEXT:   int16 v = (int16)(0);
// CHECK-NEXT:   int16 v_1 = v;
// CHECK-NEXT:   for (long c = 0; c < 16; c += 16) {
// CHECK-NEXT:     int16 v_2 = vload16(0, &x[n * 17 + c]);
// CHECK-NEXT:     v_1 = v_1 + v_2;
// CHECK-NEXT:   }
// CHECK-NEXT:   int v_2 = einc_vreduce_add_i32x16(v_1);
// CHECK-NEXT:   s[n] = s[n] + v_2;
// CHECK-NEXT:   for (long c = 16; c < 17; c++) {
// CHECK-NEXT:     s[n] = s[n] + x[n * 17 + c];
// CHECK-NEXT:   }
// CHECK-NEXT:   for (long c = 0; c < 16; c += 8) {
// CHECK-NEXT:     double8 v_3 = vload8(0, &d[c]);
// CHECK-NEXT:     vstore8(v_3 + v_3, 0, &e[c]);
// CHECK-NEXT:   }
// CHECK-NEXT:   for (long c = 16; c < 17; c++) {
