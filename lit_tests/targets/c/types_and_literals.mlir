// RUN: einc-opt %s --split-input-file -p convert-ein-to-affine,legalize-f16-for-c -t c | filecheck %s

// Reduction identities are exact literals: INFINITY for floats, the <stdint.h> limits for
// integers; math functions take the type's suffix; NaN-propagating max is a helper.

func.func @identities(%X: tensor<3x4xf32> {ein.name = "X"}, %I: tensor<3x4xi32> {ein.name = "I"}) -> (tensor<3xf32>, tensor<3xi32>) {
  %m = ein.einsum "Mx" max parallel [N = 3] reduce [C = 4] : tensor<3xf32> {
  ^bb0(%N : index, %C : index):
    %x = ein.load %X[%N, %C] : tensor<3x4xf32>
    %e = math.exp %x : f32
    ein.yield %e : f32
  }
  %n = ein.einsum "Mn" min parallel [N = 3] reduce [C = 4] : tensor<3xi32> {
  ^bb0(%N : index, %C : index):
    %x = ein.load %I[%N, %C] : tensor<3x4xi32>
    ein.yield %x : i32
  }
  func.return %m, %n : tensor<3xf32>, tensor<3xi32>
}

// CHECK:      static inline float einc_maximumf_f32(float a, float b) { float r = a > b ? a : b; r = b != b ? b : r; r = a != a ? a : r; return ((a == 0) & (b == 0)) ? a + b : r; }
// CHECK-NEXT: static inline int32_t einc_minsi_i32(int32_t a, int32_t b) { return a < b ? a : b; }
// CHECK:        Mx[N] = -INFINITY;
// CHECK:        Mx[N] = einc_maximumf_f32(Mx[N], expf(X[N * 4 + C]));
// CHECK:        Mn[N] = INT32_MAX;
// CHECK:        Mn[N] = einc_minsi_i32(Mn[N], I[N * 4 + C]);

// -----

// f16 is storage only: every operation is computed in float and rounded back.

func.func @half(%X: tensor<8xf16> {ein.name = "X"}) -> tensor<8xf16> {
  %y = ein.einsum "Y" assign parallel [N = 8] : tensor<8xf16> {
  ^bb0(%N : index):
    %x = ein.load %X[%N] : tensor<8xf16>
    %e = math.exp %x : f16
    %one = arith.constant 1.5 : f16
    %r = arith.addf %e, %one : f16
    ein.yield %r : f16
  }
  func.return %y : tensor<8xf16>
}

// CHECK:      void half(const _Float16* restrict X, _Float16* restrict Y) {
// CHECK-NEXT:   for (int64_t N = 0; N < 8; N++) {
// CHECK-NEXT:     Y[N] = (_Float16)((float)(_Float16)expf((float)X[N]) + 1.5f);
// CHECK-NEXT:   }

// -----

// Narrow integers are computed in int by C: arithmetic is cast back so it wraps as arith
// does. Logical reductions select 1 or 0.

func.func @narrow_ints(%X: tensor<6xi8> {ein.name = "X"}, %W: tensor<6xi8> {ein.name = "W"}) -> (tensor<6xi8>, tensor<i8>) {
  %y = ein.einsum "Y" assign parallel [N = 6] : tensor<6xi8> {
  ^bb0(%N : index):
    %x = ein.load %X[%N] : tensor<6xi8>
    %w = ein.load %W[%N] : tensor<6xi8>
    %p = arith.muli %x, %w : i8
    %c = arith.constant 100 : i8
    %r = arith.addi %p, %c : i8
    ein.yield %r : i8
  }
  %a = ein.einsum "All" and parallel [] reduce [N = 6] : tensor<i8> {
  ^bb0(%N : index):
    %x = ein.load %X[%N] : tensor<6xi8>
    ein.yield %x : i8
  }
  func.return %y, %a : tensor<6xi8>, tensor<i8>
}

// CHECK:      void narrow_ints(const int8_t* restrict X, const int8_t* restrict W, int8_t* restrict Y, int8_t* restrict All) {
// CHECK:          Y[N] = (int8_t)((int8_t)(X[N] * W[N]) + 100);
// CHECK:        All[0] = 1;
// CHECK:          All[0] = ((All[0] != 0) & (X[N] != 0)) ? 1 : 0;

// -----

// Unordered float comparisons negate the ordered C operators; conversions are casts; f64
// literals print the shortest round-tripping digits.

func.func @compare_and_convert(%X: tensor<5xf64> {ein.name = "X"}, %W: tensor<5xf64> {ein.name = "W"}) -> (tensor<5xi8>, tensor<5xi32>) {
  %u = ein.einsum "U" assign parallel [N = 5] : tensor<5xi8> {
  ^bb0(%N : index):
    %x = ein.load %X[%N] : tensor<5xf64>
    %w = ein.load %W[%N] : tensor<5xf64>
    %c = arith.cmpf ule, %x, %w : f64
    %r = arith.extui %c : i1 to i8
    ein.yield %r : i8
  }
  %k = ein.einsum "K" assign parallel [N = 5] : tensor<5xi32> {
  ^bb0(%N : index):
    %x = ein.load %X[%N] : tensor<5xf64>
    %c = arith.constant 0.1 : f64
    %m = arith.mulf %x, %c : f64
    %i = arith.fptosi %m : f64 to i32
    ein.yield %i : i32
  }
  func.return %u, %k : tensor<5xi8>, tensor<5xi32>
}

// CHECK:      void compare_and_convert(const double* restrict X, const double* restrict W, int8_t* restrict U, int32_t* restrict K) {
// CHECK:          U[N] = (int8_t)!(X[N] > W[N]);
// CHECK:          K[N] = (int32_t)(X[N] * 0.1);

// -----

// An intermediate is a heap buffer freed at the end; a rank-0 buffer is accessed at [0].

func.func @intermediate(%X: tensor<3x4xf64> {ein.name = "X"}) -> tensor<f64> {
  %s = ein.einsum "S" add parallel [N = 3] reduce [C = 4] : tensor<3xf64> {
  ^bb0(%N : index, %C : index):
    %x = ein.load %X[%N, %C] : tensor<3x4xf64>
    ein.yield %x : f64
  }
  %t = ein.einsum "T" mul parallel [] reduce [N = 3] : tensor<f64> {
  ^bb0(%N : index):
    %v = ein.load %s[%N] : tensor<3xf64>
    ein.yield %v : f64
  }
  func.return %t : tensor<f64>
}

// CHECK:      void intermediate(const double* restrict X, double* restrict T) {
// CHECK-NEXT:   double* S = (double*)aligned_alloc(64, 64);
// CHECK:            S[N] = S[N] + X[N * 4 + C];
// CHECK:        T[0] = 1.0;
// CHECK:          T[0] = T[0] * S[N];
// CHECK:        free(S);
// CHECK-NEXT: }
