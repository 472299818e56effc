// RUN: einc-opt %s -p "convert-ein-to-affine,legalize-f16-for-c,convert-affine-to-egpu{target=hlsl},legalize-storage-dtypes{target=hlsl},legalize-narrow-ints{target=hlsl},legalize-f16-storage,canonicalize,cse" -t hlsl | filecheck %s

// int64 on HLSL: glslang's HLSL has uint64_t but no int64_t, so an i64 is a uint64_t; `+`
// and the other sign-agnostic operators print as usual, signed ones (`<`, `>>`) are helpers,
// and a constant outside int's range is built from two uint halves (glslang truncates
// 64-bit literals).

func.func @int64_is_uint64_with_signed_helpers(%A: tensor<8xi64> {ein.name = "A"}, %B: tensor<8xi64> {ein.name = "B"}) -> tensor<8xi64> {
  %C = ein.einsum "C" assign parallel [N = 8] : tensor<8xi64> {
  ^bb0(%N : index):
    %a = ein.load %A[%N] : tensor<8xi64>
    %b = ein.load %B[%N] : tensor<8xi64>
    %lt = arith.cmpi slt, %a, %b : i64
    %three = arith.constant 3 : i64
    %s = arith.shrsi %a, %three : i64
    %big = arith.constant 5000000000 : i64
    %sum = arith.addi %s, %big : i64
    %r = arith.select %lt, %sum, %b : i64
    ein.yield %r : i64
  }
  func.return %C : tensor<8xi64>
}

// CHECK:      // infinities built at run time: naga refuses infinite or NaN constants
// CHECK-NEXT: static uint einc_inf_bits = 0x7f800000u;
// CHECK-NEXT: static uint einc_nan_bits = 0x7fc00000u;
// CHECK-EMPTY:
// CHECK-NEXT: inline uint64_t einc_bits_s64(uint hi, uint lo) { uint64_t h = hi; uint64_t l = lo; return (h << 32) | l; }
// CHECK-NEXT: inline bool einc_slt_s64(uint64_t a, uint64_t b) { return (a ^ einc_bits_s64(2147483648u, 0u)) < (b ^ einc_bits_s64(2147483648u, 0u)); }
// CHECK-NEXT: inline uint64_t einc_shrsi_s64(uint64_t a, uint64_t b) { return (a >> 63) != 0 ? ~(~a >> b) : a >> b; }
// CHECK-EMPTY:
// CHECK-NEXT: RWStructuredBuffer<uint64_t> A : register(u0);
// CHECK-NEXT: RWStructuredBuffer<uint64_t> B : register(u1);
// CHECK-NEXT: RWStructuredBuffer<uint64_t> C : register(u2);
// CHECK-EMPTY:
// CHECK-NEXT: [numthreads(8, 1, 1)]
// CHECK-NEXT: void int64_is_uint64_with_signed_helpers_C(uint3 einc_group : SV_GroupID, uint3 einc_thread : SV_GroupThreadID, uint3 einc_global : SV_DispatchThreadID) {
// CHECK-NEXT:   int N = ((int)einc_global.x);
// CHECK-NEXT:   uint64_t a = A[N];
// CHECK-NEXT:   uint64_t b = B[N];
// CHECK-NEXT:   C[N] = einc_slt_s64(a, b) ? einc_shrsi_s64(a, 3) + einc_bits_s64(1u, 705032704u) : b;
// CHECK-NEXT: }
