// RUN: einc-opt %s --split-input-file -p convert-ein-to-affine -t c | filecheck %s

// Loops are named after the axes; accesses are flat row-major indices; read-only buffers
// are const, every buffer restrict.

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

// CHECK:      #include <math.h>
// CHECK-NEXT: #include <stdbool.h>
// CHECK-NEXT: #include <stdint.h>
// CHECK-NEXT: #include <stdlib.h>
// CHECK-EMPTY:
// CHECK-NEXT: void matmul(const float* restrict A, const float* restrict B, float* restrict C) {
// CHECK-NEXT:   for (int64_t N = 0; N < 4; N++) {
// CHECK-NEXT:     for (int64_t M = 0; M < 5; M++) {
// CHECK-NEXT:       C[N * 5 + M] = 0.0f;
// CHECK-NEXT:     }
// CHECK-NEXT:   }
// CHECK-NEXT:   for (int64_t N = 0; N < 4; N++) {
// CHECK-NEXT:     for (int64_t M = 0; M < 5; M++) {
// CHECK-NEXT:       for (int64_t K = 0; K < 3; K++) {
// CHECK-NEXT:         C[N * 5 + M] = C[N * 5 + M] + A[N * 3 + K] * B[K * 5 + M];
// CHECK-NEXT:       }
// CHECK-NEXT:     }
// CHECK-NEXT:   }
// CHECK-NEXT: }

// -----

// Floor division and modulo of a non-negative index print as C's / and %; of a possibly
// negative one through helpers with floor semantics. (`X[N floordiv 2, N mod 2]` of rows of
// 2 would print as the flat `X[N]`: the linearisation merges such a pair.)

func.func @affine_floordiv_mod(%X: tensor<3x2xf32> {ein.name = "X"}) -> (tensor<6xf32>, tensor<3xf32>) {
  %y = ein.einsum "Y" assign parallel [N = 6] : tensor<6xf32> {
  ^bb0(%N : index):
    %i = affine.apply affine_map<(d0) -> (d0 floordiv 2)>(%N)
    %j = affine.apply affine_map<(d0) -> ((d0 + 1) mod 2)>(%N)
    %x = ein.load %X[%i, %j] : tensor<3x2xf32>
    ein.yield %x : f32
  }
  %z = ein.einsum "Z" assign parallel [N = 3] : tensor<3xf32> {
  ^bb0(%N : index):
    %c1 = arith.constant 1 : index
    %i = affine.apply affine_map<(d0) -> ((d0 * 2 - 1) floordiv 2 + 1)>(%N)
    %x = ein.load %X[%i, %c1] : tensor<3x2xf32>
    ein.yield %x : f32
  }
  func.return %y, %z : tensor<6xf32>, tensor<3xf32>
}

// CHECK:      static inline int64_t einc_floordiv_i64(int64_t a, int64_t b) { int64_t q = a / b; return (q * b != a && (a < 0) != (b < 0)) ? q - 1 : q; }
// CHECK:      void affine_floordiv_mod(const float* restrict X, float* restrict Y, float* restrict Z) {
// CHECK:          Y[N] = X[N / 2 * 2 + (N + 1) % 2];
// CHECK:          Z[N] = X[einc_floordiv_i64(N * 2 - 1, 2) * 2 + 3];

// -----

// A guarded access is a branch: the load is only performed when the condition holds.

func.func @pad(%A: tensor<4xf32> {ein.name = "A"}) -> tensor<6xf32> {
  %r = ein.einsum "P" assign parallel [N = 6] : tensor<6xf32> {
  ^bb0(%N : index):
    %c1 = arith.constant 1 : index
    %c5 = arith.constant 5 : index
    %lo = arith.cmpi sge, %N, %c1 : index
    %hi = arith.cmpi slt, %N, %c5 : index
    %ok = arith.andi %lo, %hi : i1
    %v = scf.if %ok -> (f32) {
      %i = affine.apply affine_map<(d0) -> (d0 - 1)>(%N)
      %x = ein.load %A[%i] : tensor<4xf32>
      scf.yield %x : f32
    } else {
      %z = arith.constant 0.0 : f32
      scf.yield %z : f32
    }
    ein.yield %v : f32
  }
  func.return %r : tensor<6xf32>
}

// CHECK:      void pad(const float* restrict A, float* restrict P) {
// CHECK-NEXT:   for (int64_t N = 0; N < 6; N++) {
// CHECK-NEXT:     float v;
// CHECK-NEXT:     if ((N >= 1) & (N < 5)) {
// CHECK-NEXT:       v = A[N - 1];
// CHECK-NEXT:     } else {
// CHECK-NEXT:       v = 0.0f;
// CHECK-NEXT:     }
// CHECK-NEXT:     P[N] = v;
// CHECK-NEXT:   }
// CHECK-NEXT: }

// -----

// A gathered index is an ordinary C expression; its floor division uses the helper of its
// type.

func.func @gather(%T: tensor<5x3xf64> {ein.name = "T"}, %I: tensor<4xi64> {ein.name = "I"}) -> tensor<4x3xf64> {
  %r = ein.einsum "G" assign parallel [F = 4, C = 3] : tensor<4x3xf64> {
  ^bb0(%F : index, %C : index):
    %i = ein.load %I[%F] : tensor<4xi64>
    %j = arith.index_cast %i : i64 to index
    %c2 = arith.constant 2 : index
    %q = arith.floordivsi %j, %c2 : index
    %x = ein.load %T[%q, %C] : tensor<5x3xf64>
    ein.yield %x : f64
  }
  func.return %r : tensor<4x3xf64>
}

// CHECK:      void gather(const double* restrict T, const int64_t* restrict I, double* restrict G) {
// CHECK:            G[F * 3 + C] = T[einc_floordiv_i64((int64_t)I[F], 2) * 3 + C];
