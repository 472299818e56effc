// RUN: einc-opt %s --split-input-file --pass-pipeline=convert-ein-to-affine | filecheck %s

// Integer division is total (docs/LANGUAGE.md): a divisor that is not a non-zero constant is
// replaced by 1 where it is 0 or -1; a quotient then selects 0 (b == 0) or `0 - a` (b == -1).

// A quotient by a tensor value: divide by select(b == 0 || b == -1, 1, b), then select
// `0 - a` where b == -1 (wrapping: MIN // -1 is MIN) and 0 where b == 0.

func.func @floordiv_by_a_tensor_is_guarded(%A: tensor<4xi32> {ein.name = "A"}, %B: tensor<4xi32> {ein.name = "B"}) -> tensor<4xi32> {
  %C = ein.einsum "C" assign parallel [N = 4] : tensor<4xi32> {
  ^bb0(%N : index):
    %a = ein.load %A[%N] : tensor<4xi32>
    %b = ein.load %B[%N] : tensor<4xi32>
    %q = arith.floordivsi %a, %b : i32
    ein.yield %q : i32
  }
  func.return %C : tensor<4xi32>
}

// CHECK-LABEL: func.func @floordiv_by_a_tensor_is_guarded(
// CHECK:         %[[A:.*]] = affine.load
// CHECK-NEXT:    %[[B:.*]] = affine.load
// CHECK-NEXT:    %[[ZERO:.*]] = arith.constant 0 : i32
// CHECK-NEXT:    %[[BY_ZERO:.*]] = arith.cmpi eq, %[[B]], %[[ZERO]] : i32
// CHECK-NEXT:    %[[MINUS_ONE:.*]] = arith.constant -1 : i32
// CHECK-NEXT:    %[[BY_MINUS_ONE:.*]] = arith.cmpi eq, %[[B]], %[[MINUS_ONE]] : i32
// CHECK-NEXT:    %[[UNSAFE:.*]] = arith.ori %[[BY_ZERO]], %[[BY_MINUS_ONE]] : i1
// CHECK-NEXT:    %[[ONE:.*]] = arith.constant 1 : i32
// CHECK-NEXT:    %[[SAFE:.*]] = arith.select %[[UNSAFE]], %[[ONE]], %[[B]] : i32
// CHECK-NEXT:    %[[Q:.*]] = arith.floordivsi %[[A]], %[[SAFE]] : i32
// CHECK-NEXT:    %[[NEG:.*]] = arith.subi %[[ZERO]], %[[A]] : i32
// CHECK-NEXT:    %[[BY_SIGN:.*]] = arith.select %[[BY_MINUS_ONE]], %[[NEG]], %[[Q]] : i32
// CHECK-NEXT:    %[[TOTAL:.*]] = arith.select %[[BY_ZERO]], %[[ZERO]], %[[BY_SIGN]] : i32
// CHECK-NEXT:    affine.store %[[TOTAL]], %{{.*}}[%{{.*}}] : memref<4xi32>

// -----

// A remainder needs no select after it: a rem 1 == 0 is the result for b == 0 and b == -1.

func.func @remsi_by_a_tensor_is_guarded(%A: tensor<4xi8> {ein.name = "A"}, %B: tensor<4xi8> {ein.name = "B"}) -> tensor<4xi8> {
  %C = ein.einsum "C" assign parallel [N = 4] : tensor<4xi8> {
  ^bb0(%N : index):
    %a = ein.load %A[%N] : tensor<4xi8>
    %b = ein.load %B[%N] : tensor<4xi8>
    %r = arith.remsi %a, %b : i8
    ein.yield %r : i8
  }
  func.return %C : tensor<4xi8>
}

// CHECK-LABEL: func.func @remsi_by_a_tensor_is_guarded(
// CHECK:         %[[A:.*]] = affine.load
// CHECK-NEXT:    %[[B:.*]] = affine.load
// CHECK-NEXT:    %[[ZERO:.*]] = arith.constant 0 : i8
// CHECK-NEXT:    %[[BY_ZERO:.*]] = arith.cmpi eq, %[[B]], %[[ZERO]] : i8
// CHECK-NEXT:    %[[MINUS_ONE:.*]] = arith.constant -1 : i8
// CHECK-NEXT:    %[[BY_MINUS_ONE:.*]] = arith.cmpi eq, %[[B]], %[[MINUS_ONE]] : i8
// CHECK-NEXT:    %[[UNSAFE:.*]] = arith.ori %[[BY_ZERO]], %[[BY_MINUS_ONE]] : i1
// CHECK-NEXT:    %[[ONE:.*]] = arith.constant 1 : i8
// CHECK-NEXT:    %[[SAFE:.*]] = arith.select %[[UNSAFE]], %[[ONE]], %[[B]] : i8
// CHECK-NEXT:    %[[R:.*]] = arith.remsi %[[A]], %[[SAFE]] : i8
// CHECK-NEXT:    affine.store %[[R]], %{{.*}}[%{{.*}}] : memref<4xi8>

// -----

// A constant divisor other than 0 and -1 is left alone (`x // 2` prints unguarded).

func.func @constant_divisor_is_not_guarded(%A: tensor<4xi64> {ein.name = "A"}) -> tensor<4xi64> {
  %C = ein.einsum "C" assign parallel [N = 4] : tensor<4xi64> {
  ^bb0(%N : index):
    %a = ein.load %A[%N] : tensor<4xi64>
    %two = arith.constant 2 : i64
    %q = arith.floordivsi %a, %two : i64
    %r = arith.remsi %a, %two : i64
    %s = arith.addi %q, %r : i64
    ein.yield %s : i64
  }
  func.return %C : tensor<4xi64>
}

// CHECK-LABEL: func.func @constant_divisor_is_not_guarded(
// CHECK:         %[[A:.*]] = affine.load
// CHECK-NEXT:    %[[TWO:.*]] = arith.constant 2 : i64
// CHECK-NEXT:    %[[Q:.*]] = arith.floordivsi %[[A]], %[[TWO]] : i64
// CHECK-NEXT:    %[[R:.*]] = arith.remsi %[[A]], %[[TWO]] : i64
// CHECK-NEXT:    %[[S:.*]] = arith.addi %[[Q]], %[[R]] : i64
// CHECK-NEXT:    affine.store %[[S]]

// -----

// A constant divisor -1: the quotient is `0 - a` (wrapping: MIN gives MIN), no division.

func.func @divisor_minus_one_negates(%A: tensor<4xi16> {ein.name = "A"}) -> tensor<4xi16> {
  %C = ein.einsum "C" assign parallel [N = 4] : tensor<4xi16> {
  ^bb0(%N : index):
    %a = ein.load %A[%N] : tensor<4xi16>
    %m = arith.constant -1 : i16
    %q = arith.floordivsi %a, %m : i16
    ein.yield %q : i16
  }
  func.return %C : tensor<4xi16>
}

// CHECK-LABEL: func.func @divisor_minus_one_negates(
// CHECK:         %[[A:.*]] = affine.load
// CHECK-NEXT:    %[[ZERO:.*]] = arith.constant 0 : i16
// CHECK-NEXT:    %[[Q:.*]] = arith.subi %[[ZERO]], %[[A]] : i16
// CHECK-NEXT:    affine.store %[[Q]]

// -----

// Float division is never guarded.

func.func @float_division_is_not_guarded(%A: tensor<4xf32> {ein.name = "A"}, %B: tensor<4xf32> {ein.name = "B"}) -> tensor<4xf32> {
  %C = ein.einsum "C" assign parallel [N = 4] : tensor<4xf32> {
  ^bb0(%N : index):
    %a = ein.load %A[%N] : tensor<4xf32>
    %b = ein.load %B[%N] : tensor<4xf32>
    %q = arith.divf %a, %b : f32
    %f = math.floor %q : f32
    ein.yield %f : f32
  }
  func.return %C : tensor<4xf32>
}

// CHECK-LABEL: func.func @float_division_is_not_guarded(
// CHECK:         %[[A:.*]] = affine.load
// CHECK-NEXT:    %[[B:.*]] = affine.load
// CHECK-NEXT:    %[[Q:.*]] = arith.divf %[[A]], %[[B]] : f32
// CHECK-NEXT:    %[[F:.*]] = math.floor %[[Q]] : f32
// CHECK-NEXT:    affine.store %[[F]]
