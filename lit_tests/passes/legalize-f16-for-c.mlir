// RUN: einc-opt %s --split-input-file --pass-pipeline=legalize-f16-for-c | filecheck %s

// An f16 math function is computed in f32 and rounded back.

func.func @math_in_f32(%x: f16) -> f16 {
  %e = math.exp %x : f16
  func.return %e : f16
}

// CHECK-LABEL: func.func @math_in_f32(
// CHECK-SAME:      %[[X:.*]]: f16) -> f16 {
// CHECK-NEXT:    %[[W:.*]] = arith.extf %[[X]] : f16 to f32
// CHECK-NEXT:    %[[E:.*]] = math.exp %[[W]] : f32
// CHECK-NEXT:    %[[R:.*]] = arith.truncf %[[E]] : f32 to f16
// CHECK-NEXT:    func.return %[[R]] : f16

// -----

// Each arithmetic operation rounds to f16 (f16 semantics); an f16 constant operand becomes
// the same f32 constant.

func.func @each_op_rounds(%x: f16, %y: f16) -> f16 {
  %p = arith.mulf %x, %y : f16
  %c = arith.constant 1.5 : f16
  %s = arith.addf %p, %c : f16
  func.return %s : f16
}

// CHECK-LABEL: func.func @each_op_rounds(
// CHECK-SAME:      %[[X:.*]]: f16, %[[Y:.*]]: f16) -> f16 {
// CHECK-NEXT:    %[[XW:.*]] = arith.extf %[[X]] : f16 to f32
// CHECK-NEXT:    %[[YW:.*]] = arith.extf %[[Y]] : f16 to f32
// CHECK-NEXT:    %[[P:.*]] = arith.mulf %[[XW]], %[[YW]] : f32
// CHECK-NEXT:    %[[PH:.*]] = arith.truncf %[[P]] : f32 to f16
// CHECK:         %[[PW:.*]] = arith.extf %[[PH]] : f16 to f32
// CHECK-NEXT:    %[[C:.*]] = arith.constant 1.500000e+00 : f32
// CHECK-NEXT:    %[[S:.*]] = arith.addf %[[PW]], %[[C]] : f32
// CHECK-NEXT:    %[[SH:.*]] = arith.truncf %[[S]] : f32 to f16
// CHECK-NEXT:    func.return %[[SH]] : f16

// -----

// Comparisons widen their operands and keep their i1 result; selects, loads and stores
// move f16 values as they are; other float types are untouched.

func.func @compare_select_store(%m: memref<4xf16>, %x: f16, %y: f16, %z: f32) -> f32 {
  %c = arith.cmpf olt, %x, %y : f16
  %s = arith.select %c, %x, %y : f16
  %i = arith.constant 0 : index
  memref.store %s, %m[%i] : memref<4xf16>
  %w = arith.addf %z, %z : f32
  func.return %w : f32
}

// CHECK-LABEL: func.func @compare_select_store(
// CHECK-SAME:      %[[M:.*]]: memref<4xf16>, %[[X:.*]]: f16, %[[Y:.*]]: f16, %[[Z:.*]]: f32) -> f32 {
// CHECK-NEXT:    %[[XW:.*]] = arith.extf %[[X]] : f16 to f32
// CHECK-NEXT:    %[[YW:.*]] = arith.extf %[[Y]] : f16 to f32
// CHECK-NEXT:    %[[C:.*]] = arith.cmpf olt, %[[XW]], %[[YW]] : f32
// CHECK-NEXT:    %[[S:.*]] = arith.select %[[C]], %[[X]], %[[Y]] : f16
// CHECK-NEXT:    %[[I:.*]] = arith.constant 0 : index
// CHECK-NEXT:    memref.store %[[S]], %[[M]][%[[I]]] : memref<4xf16>
// CHECK-NEXT:    %[[W:.*]] = arith.addf %[[Z]], %[[Z]] : f32
// CHECK-NEXT:    func.return %[[W]] : f32
