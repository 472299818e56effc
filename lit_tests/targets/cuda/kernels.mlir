// RUN: einc-opt %s --split-input-file -p "convert-ein-to-affine,legalize-f16-for-c,convert-affine-to-egpu{target=cuda},legalize-f16-storage,canonicalize,cse" -t cuda | filecheck %s

// CUDA for NVRTC: extern "C" __global__ kernels, built-in integer types, infinity from
// its bits, halves as unsigned short converted with PTX cvt.

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

// CHECK:      extern "C" __global__ void __launch_bounds__({{[0-9]+}}) matmul_C(const float* __restrict__ A, const float* __restrict__ B, float* __restrict__ C) {
// CHECK-NEXT:   long long gid = ((long long)blockIdx.x * blockDim.x + threadIdx.x);
// CHECK-NEXT:   long long N = gid / 5;
// CHECK-NEXT:   long long M = gid % 5;
// CHECK-NEXT:   C[N * 5 + M] = 0.0f;
// CHECK-NEXT:   for (long long K = 0; K < 3; K++) {
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

// CHECK:      static __device__ inline float einc_maximumf_f32(float a, float b) { float r = a > b ? a : b; r = b != b ? b : r; r = a != a ? a : r; return ((a == 0) & (b == 0)) ? a + b : r; }
// CHECK-EMPTY:
// CHECK-NEXT: extern "C" __global__ void __launch_bounds__({{[0-9]+}}) row_max_then_scale_Mx(const float* __restrict__ X, float* __restrict__ Mx) {
// CHECK-NEXT:   long long N = ((long long)blockIdx.x * blockDim.x + threadIdx.x);
// CHECK-NEXT:   Mx[N] = -__int_as_float(0x7f800000);
// CHECK-NEXT:   for (long long C = 0; C < 100; C++) {
// CHECK-NEXT:     Mx[N] = einc_maximumf_f32(Mx[N], X[N * 100 + C]);
// CHECK-NEXT:   }
// CHECK-NEXT: }
// CHECK-EMPTY:
// CHECK-NEXT: extern "C" __global__ void __launch_bounds__({{[0-9]+}}) row_max_then_scale_Y(const float* __restrict__ X, float* __restrict__ Y, const float* __restrict__ Mx) {
// CHECK-NEXT:   long long gid = ((long long)blockIdx.x * blockDim.x + threadIdx.x);
// CHECK-NEXT:   if (gid < 300) {
// CHECK-NEXT:     long long N = gid / 100;
// CHECK-NEXT:     long long C = gid % 100;
// CHECK-NEXT:     Y[N * 100 + C] = expf(X[N * 100 + C]) / Mx[N];
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

// CHECK:      static __device__ inline float einc_half_to_float(unsigned short h) { float f; asm("cvt.f32.f16 %0, %1;" : "=f"(f) : "h"(h)); return f; }
// CHECK-NEXT: static __device__ inline unsigned short einc_float_to_half(float f) { unsigned short h; asm("cvt.rn.f16.f32 %0, %1;" : "=h"(h) : "f"(f)); return h; }
// CHECK-NEXT: static __device__ inline float einc_round_f16(float a) { return einc_half_to_float(einc_float_to_half(a)); }
// CHECK-EMPTY:
// CHECK-NEXT: extern "C" __global__ void __launch_bounds__({{[0-9]+}}) halves_and_bytes_Y(const unsigned short* __restrict__ H, const signed char* __restrict__ Q, unsigned short* __restrict__ Y) {
// CHECK-NEXT:   long long N = ((long long)blockIdx.x * blockDim.x + threadIdx.x);
// CHECK-NEXT:   float h = einc_half_to_float(H[N]);
// CHECK-NEXT:   signed char i = Q[N];
// CHECK-NEXT:   float f = einc_round_f16((float)(signed char)(i + i));
// CHECK-NEXT:   float p = einc_round_f16(h * f);
// CHECK-NEXT:   Y[N] = einc_float_to_half(p);
// CHECK-NEXT: }
