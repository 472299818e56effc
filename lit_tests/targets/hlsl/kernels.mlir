// RUN: einc-opt %s --split-input-file -p "convert-ein-to-affine,legalize-f16-for-c,convert-affine-to-egpu{target=hlsl},legalize-storage-dtypes{target=hlsl},legalize-narrow-ints{target=hlsl},legalize-f16-storage,canonicalize,cse" -t hlsl | filecheck %s

// HLSL: every buffer a global RWStructuredBuffer at its manifest binding, one
// [numthreads] entry per kernel; int8/float16 stored widened, int8 arithmetic wrapped in int,
// halves rounded with f32tof16.

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

// CHECK:      // infinities built at run time: naga refuses infinite or NaN constants
// CHECK-NEXT: static uint einc_inf_bits = 0x7f800000u;
// CHECK-NEXT: static uint einc_nan_bits = 0x7fc00000u;
// CHECK-EMPTY:
// CHECK-NEXT: RWStructuredBuffer<float> A : register(u0);
// CHECK-NEXT: RWStructuredBuffer<float> B : register(u1);
// CHECK-NEXT: RWStructuredBuffer<float> C : register(u2);
// CHECK-EMPTY:
// CHECK-NEXT: [numthreads(20, 1, 1)]
// CHECK-NEXT: void matmul_C(uint3 einc_group : SV_GroupID, uint3 einc_thread : SV_GroupThreadID, uint3 einc_global : SV_DispatchThreadID) {
// CHECK-NEXT:   int gid = ((int)einc_global.x);
// CHECK-NEXT:   int N = gid / 5;
// CHECK-NEXT:   int M = gid % 5;
// CHECK-NEXT:   C[N * 5 + M] = 0.0f;
// CHECK-NEXT:   for (int K = 0; K < 3; K++) {
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

// CHECK:      // infinities built at run time: naga refuses infinite or NaN constants
// CHECK-NEXT: static uint einc_inf_bits = 0x7f800000u;
// CHECK-NEXT: static uint einc_nan_bits = 0x7fc00000u;
// CHECK-EMPTY:
// CHECK-NEXT: inline float einc_maximumf_f32(float a, float b) { float r = a > b ? a : b; r = (asuint((float)b) & 0x7fffffffu) > 0x7f800000u ? b : r; r = (asuint((float)a) & 0x7fffffffu) > 0x7f800000u ? a : r; return (a == 0 && b == 0) ? ((asuint((float)a) >> 31) != 0u ? b : a) : r; }
// CHECK-NEXT: inline float einc_ldexp_f32(float x, int k) {
// CHECK:      inline float einc_expk_f32(float a, float b) {
// CHECK:      inline float einc_exp_f32(float x) {
// CHECK:      RWStructuredBuffer<float> X : register(u0);
// CHECK-NEXT: RWStructuredBuffer<float> Y : register(u1);
// CHECK-NEXT: RWStructuredBuffer<float> Mx : register(u2);
// CHECK-EMPTY:
// CHECK-NEXT: [numthreads(3, 1, 1)]
// CHECK-NEXT: void row_max_then_scale_Mx(uint3 einc_group : SV_GroupID, uint3 einc_thread : SV_GroupThreadID, uint3 einc_global : SV_DispatchThreadID) {
// CHECK-NEXT:   int N = ((int)einc_global.x);
// CHECK-NEXT:   Mx[N] = -asfloat(einc_inf_bits);
// CHECK-NEXT:   for (int C = 0; C < 100; C++) {
// CHECK-NEXT:     Mx[N] = einc_maximumf_f32(Mx[N], X[N * 100 + C]);
// CHECK-NEXT:   }
// CHECK-NEXT: }
// CHECK-EMPTY:
// CHECK-NEXT: [numthreads(64, 1, 1)]
// CHECK-NEXT: void row_max_then_scale_Y(uint3 einc_group : SV_GroupID, uint3 einc_thread : SV_GroupThreadID, uint3 einc_global : SV_DispatchThreadID) {
// CHECK-NEXT:   int gid = ((int)einc_global.x);
// CHECK-NEXT:   if (gid < 300) {
// CHECK-NEXT:     int N = gid / 100;
// CHECK-NEXT:     int C = gid % 100;
// CHECK-NEXT:     Y[N * 100 + C] = einc_exp_f32(X[N * 100 + C]) / Mx[N];
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

// CHECK:      // infinities built at run time: naga refuses infinite or NaN constants
// CHECK-NEXT: static uint einc_inf_bits = 0x7f800000u;
// CHECK-NEXT: static uint einc_nan_bits = 0x7fc00000u;
// CHECK-EMPTY:
// CHECK-NEXT: inline float einc_round_f16(float a) { return f16tof32(f32tof16(a)); }
// CHECK-EMPTY:
// CHECK-NEXT: RWStructuredBuffer<float> H : register(u0);
// CHECK-NEXT: RWStructuredBuffer<int> Q : register(u1);
// CHECK-NEXT: RWStructuredBuffer<float> Y : register(u2);
// CHECK-EMPTY:
// CHECK-NEXT: [numthreads(8, 1, 1)]
// CHECK-NEXT: void halves_and_bytes_Y(uint3 einc_group : SV_GroupID, uint3 einc_thread : SV_GroupThreadID, uint3 einc_global : SV_DispatchThreadID) {
// CHECK-NEXT:   int N = ((int)einc_global.x);
// CHECK-NEXT:   float h = einc_round_f16(H[N]);
// CHECK-NEXT:   int i = (Q[N] << 24) >> 24;
// CHECK-NEXT:   float f = einc_round_f16((float)(((i + i) << 24) >> 24));
// CHECK-NEXT:   float p = einc_round_f16(h * f);
// CHECK-NEXT:   Y[N] = p;
// CHECK-NEXT: }
