// RUN: einc-opt %s --split-input-file -p "convert-ein-to-affine,legalize-f16-for-c,convert-affine-to-egpu{target=hip},canonicalize,cse" -t hip | filecheck %s

// HIP: CUDA's kernel shape with hip_runtime.h, so <stdint.h> types and _Float16 storage.

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

// CHECK:      #include <hip/hip_runtime.h>
// CHECK-EMPTY:
// CHECK-NEXT: extern "C" __global__ void __launch_bounds__({{[0-9]+}}) matmul_C(const float* __restrict__ A, const float* __restrict__ B, float* __restrict__ C) {
// CHECK-NEXT:   int64_t gid = ((int64_t)blockIdx.x * blockDim.x + threadIdx.x);
// CHECK-NEXT:   int64_t N = gid / 5;
// CHECK-NEXT:   int64_t M = gid % 5;
// CHECK-NEXT:   C[N * 5 + M] = 0.0f;
// CHECK-NEXT:   for (int64_t K = 0; K < 3; K++) {
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

// CHECK:      #include <hip/hip_runtime.h>
// CHECK-EMPTY:
// CHECK-NEXT: static __device__ inline float einc_maximumf_f32(float a, float b) { float r = a > b ? a : b; r = b != b ? b : r; r = a != a ? a : r; return ((a == 0) & (b == 0)) ? a + b : r; }
// CHECK-EMPTY:
// CHECK-NEXT: extern "C" __global__ void __launch_bounds__({{[0-9]+}}) row_max_then_scale_Mx(const float* __restrict__ X, float* __restrict__ Mx) {
// CHECK-NEXT:   int64_t N = ((int64_t)blockIdx.x * blockDim.x + threadIdx.x);
// CHECK-NEXT:   Mx[N] = -INFINITY;
// CHECK-NEXT:   for (int64_t C = 0; C < 100; C++) {
// CHECK-NEXT:     Mx[N] = einc_maximumf_f32(Mx[N], X[N * 100 + C]);
// CHECK-NEXT:   }
// CHECK-NEXT: }
// CHECK-EMPTY:
// CHECK-NEXT: extern "C" __global__ void __launch_bounds__({{[0-9]+}}) row_max_then_scale_Y(const float* __restrict__ X, float* __restrict__ Y, const float* __restrict__ Mx) {
// CHECK-NEXT:   int64_t gid = ((int64_t)blockIdx.x * blockDim.x + threadIdx.x);
// CHECK-NEXT:   if (gid < 300) {
// CHECK-NEXT:     int64_t N = gid / 100;
// CHECK-NEXT:     int64_t C = gid % 100;
// CHECK-NEXT:     Y[N * 100 + C] = expf(X[N * 100 + C]) / Mx[N];
// CHECK-NEXT:   }
// CHECK-NEXT: }

// -----

// A product rounded to float16: the kernel opens with contraction off (HIP compiles with
// -ffp-contract=fast; the language rounds the product before any sum it feeds).
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

// CHECK:      #include <hip/hip_runtime.h>
// CHECK-EMPTY:
// CHECK-NEXT: extern "C" __global__ void __launch_bounds__({{[0-9]+}}) halves_and_bytes_Y(const _Float16* __restrict__ H, const int8_t* __restrict__ Q, _Float16* __restrict__ Y) {
// CHECK-NEXT:   #pragma clang fp contract(off)
// CHECK-NEXT:   int64_t N = ((int64_t)blockIdx.x * blockDim.x + threadIdx.x);
// CHECK-NEXT:   int8_t i = Q[N];
// CHECK-NEXT:   Y[N] = (_Float16)((float)H[N] * (float)(_Float16)(int8_t)(i + i));
// CHECK-NEXT: }
