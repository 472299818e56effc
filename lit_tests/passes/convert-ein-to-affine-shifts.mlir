// RUN: einc-opt %s --split-input-file --pass-pipeline=convert-ein-to-affine | filecheck %s

// Shifts are total (docs/LANGUAGE.md): an amount outside [0, W), read as unsigned, shifts every
// bit out. A left shift by a value shifts by `n & (W - 1)` and selects 0 where `n >=u W`; a
// right shift shifts by `select(n <u W, n, W - 1)` (0 or -1).

func.func @shifts_by_a_tensor_are_guarded(%A: tensor<4xi16> {ein.name = "A"}, %B: tensor<4xi16> {ein.name = "B"}) -> tensor<4xi16> {
  %C = ein.einsum "C" assign parallel [N = 4] : tensor<4xi16> {
  ^bb0(%N : index):
    %a = ein.load %A[%N] : tensor<4xi16>
    %b = ein.load %B[%N] : tensor<4xi16>
    %l = arith.shli %a, %b : i16
    %r = arith.shrsi %l, %b : i16
    ein.yield %r : i16
  }
  func.return %C : tensor<4xi16>
}

// CHECK-LABEL: func.func @shifts_by_a_tensor_are_guarded(
// CHECK:         %[[A:.*]] = affine.load
// CHECK-NEXT:    %[[B:.*]] = affine.load
// CHECK-NEXT:    %[[W:.*]] = arith.constant 16 : i16
// CHECK-NEXT:    %[[IN:.*]] = arith.cmpi ult, %[[B]], %[[W]] : i16
// CHECK-NEXT:    %[[MASK:.*]] = arith.constant 15 : i16
// CHECK-NEXT:    %[[AMOUNT:.*]] = arith.andi %[[B]], %[[MASK]] : i16
// CHECK-NEXT:    %[[ZERO:.*]] = arith.constant 0 : i16
// CHECK-NEXT:    %[[L:.*]] = arith.shli %[[A]], %[[AMOUNT]] : i16
// CHECK-NEXT:    %[[LEFT:.*]] = arith.select %[[IN]], %[[L]], %[[ZERO]] : i16
// CHECK-NEXT:    %[[W2:.*]] = arith.constant 16 : i16
// CHECK-NEXT:    %[[IN2:.*]] = arith.cmpi ult, %[[B]], %[[W2]] : i16
// CHECK-NEXT:    %[[TOP:.*]] = arith.constant 15 : i16
// CHECK-NEXT:    %[[RAMOUNT:.*]] = arith.select %[[IN2]], %[[B]], %[[TOP]] : i16
// CHECK-NEXT:    %[[R:.*]] = arith.shrsi %[[LEFT]], %[[RAMOUNT]] : i16
// CHECK-NEXT:    affine.store %[[R]], %{{.*}}[%{{.*}}] : memref<4xi16>

// -----

// A constant amount in [0, W) is not guarded.

func.func @shift_by_a_constant_is_not_guarded(%A: tensor<4xi32> {ein.name = "A"}) -> tensor<4xi32> {
  %C = ein.einsum "C" assign parallel [N = 4] : tensor<4xi32> {
  ^bb0(%N : index):
    %a = ein.load %A[%N] : tensor<4xi32>
    %three = arith.constant 3 : i32
    %l = arith.shli %a, %three : i32
    ein.yield %l : i32
  }
  func.return %C : tensor<4xi32>
}

// CHECK-LABEL: func.func @shift_by_a_constant_is_not_guarded(
// CHECK:         %[[A:.*]] = affine.load
// CHECK-NEXT:    %[[THREE:.*]] = arith.constant 3 : i32
// CHECK-NEXT:    %[[L:.*]] = arith.shli %[[A]], %[[THREE]] : i32
// CHECK-NEXT:    affine.store %[[L]]
