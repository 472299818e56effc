// RUN: einc-opt %s --split-input-file -p "convert-ein-to-affine,legalize-f16-for-c,convert-affine-to-egpu{target=opencl},legalize-f16-storage,canonicalize,cse" -t opencl | filecheck %s

// OpenCL C: one __kernel per statement; the output loops flattened on get_global_id(0),
// the reduction loop sequential, a bounds check where the last work-group overshoots;
// overloaded math (exp), f32 literals; halves only through vload_half / vstore_half.

func.func @matmul(%A: tensor<4x3xf32> {ein.name = "A"}, %B: tensor<3x5xf32> {ein.name = "B"}) -> tensor<4x5xf32> {
  %C = ein.einsum "C" add parallel [N = 4, M = 5] reduce [K = 3] : tensor<4x5xf32> {
  ^bb0(%N : index, %M : index, %K : index):
    %a = ein.load %A[%N, %K] : tensor<4x3xf32>
    %b = ein.load %B[%K, %M] : tensor<3x5xf32>
    %p = arith.mulf %a, %b : f32
    ein.yield %p : f32
  }
  func.return %C : tensor<4x5xf32>
}

// CHECK:      #pragma OPENCL EXTENSION cl_khr_fp64 : enable
// CHECK-EMPTY:
// CHECK-NEXT: __kernel void matmul_C(__global const float* restrict A, __global const float* restrict B, __global float* restrict C) {
// CHECK-NEXT:   long gid = get_global_id(0);
// CHECK-NEXT:   long N = gid / 5;
// CHECK-NEXT:   long M = gid % 5;
// CHECK-NEXT:   C[N * 5 + M] = 0.0f;
// CHECK-NEXT:   for (long K = 0; K < 3; K++) {
// CHECK-NEXT:     C[N * 5 + M] = C[N * 5 + M] + A[N * 3 + K] * B[K * 5 + M];
// CHECK-NEXT:   }
// CHECK-NEXT: }

// -----

func.func @row_max_then_scale(%X: tensor<3x100xf32> {ein.name = "X"}) -> tensor<3x100xf32> {
  %m = ein.einsum "Mx" max parallel [N = 3] reduce [C = 100] : tensor<3xf32> {
  ^bb0(%N : index, %C : index):
    %x = ein.load %X[%N, %C] : tensor<3x100xf32>
    ein.yield %x : f32
  }
  %y = ein.einsum "Y" assign parallel [N = 3, C = 100] : tensor<3x100xf32> {
  ^bb0(%N : index, %C : index):
    %x = ein.load %X[%N, %C] : tensor<3x100xf32>
    %s = ein.load %m[%N] : tensor<3xf32>
    %e = math.exp %x : f32
    %d = arith.divf %e, %s : f32
    ein.yield %d : f32
  }
  func.return %y : tensor<3x100xf32>
}

// CHECK:      #pragma OPENCL EXTENSION cl_khr_fp64 : enable
// CHECK-EMPTY:
// CHECK-NEXT: inline float einc_maximumf_f32(float a, float b) { float r = a > b ? a : b; r = b != b ? b : r; r = a != a ? a : r; return ((a == 0) & (b == 0)) ? a + b : r; }
// CHECK-EMPTY:
// CHECK-NEXT: __kernel void row_max_then_scale_Mx(__global const float* restrict X, __global float* restrict Mx) {
// CHECK-NEXT:   long N = get_global_id(0);
// CHECK-NEXT:   Mx[N] = -INFINITY;
// CHECK-NEXT:   for (long C = 0; C < 100; C++) {
// CHECK-NEXT:     Mx[N] = einc_maximumf_f32(Mx[N], X[N * 100 + C]);
// CHECK-NEXT:   }
// CHECK-NEXT: }
// CHECK-EMPTY:
// CHECK-NEXT: __kernel void row_max_then_scale_Y(__global const float* restrict X, __global float* restrict Y, __global const float* restrict Mx) {
// CHECK-NEXT:   long gid = get_global_id(0);
// CHECK-NEXT:   if (gid < 300) {
// CHECK-NEXT:     long N = gid / 100;
// CHECK-NEXT:     long C = gid % 100;
// CHECK-NEXT:     Y[N * 100 + C] = exp(X[N * 100 + C]) / Mx[N];
// CHECK-NEXT:   }
// CHECK-NEXT: }

// -----

func.func @halves_and_bytes(%H: tensor<8xf16> {ein.name = "H"}, %Q: tensor<8xi8> {ein.name = "Q"}) -> tensor<8xf16> {
  %y = ein.einsum "Y" assign parallel [N = 8] : tensor<8xf16> {
  ^bb0(%N : index):
    %h = ein.load %H[%N] : tensor<8xf16>
    %i = ein.load %Q[%N] : tensor<8xi8>
    %s = arith.addi %i, %i : i8
    %f = arith.sitofp %s : i8 to f16
    %p = arith.mulf %h, %f : f16
    ein.yield %p : f16
  }
  func.return %y : tensor<8xf16>
}

// CHECK:      #pragma OPENCL EXTENSION cl_khr_fp64 : enable
// CHECK-EMPTY:
// CHECK-NEXT: inline float einc_round_f16(float a) { uint u = as_uint(a); uint s = u & 0x80000000u; uint m = u ^ s; if (m > 0x7f800000u) return a; if (m >= 0x477ff000u) return as_float(s | 0x7f800000u); if (m < 0x38800000u) return as_float(as_uint(rint(as_float(m) * 16777216.0f) * 5.9604644775390625e-8f) | s); return as_float(((m + 0xfffu + ((m >> 13) & 1u)) & 0xffffe000u) | s); }
// CHECK-EMPTY:
// CHECK-NEXT: __kernel void halves_and_bytes_Y(__global const half* restrict H, __global const char* restrict Q, __global half* restrict Y) {
// CHECK-NEXT:   long N = get_global_id(0);
// CHECK-NEXT:   float h = vload_half(N, H);
// CHECK-NEXT:   char i = Q[N];
// CHECK-NEXT:   float f = einc_round_f16((float)(char)(i + i));
// CHECK-NEXT:   float p = einc_round_f16(h * f);
// CHECK-NEXT:   vstore_half(p, N, Y);
// CHECK-NEXT: }
