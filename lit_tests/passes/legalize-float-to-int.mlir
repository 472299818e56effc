// RUN: einc-opt %s --split-input-file --pass-pipeline=legalize-float-to-int | filecheck %s

// A conversion to i8 clamps below to -128, converts 0 instead of a value too large or NaN,
// and sets the maximum where the value is at least 2^7.

func.func @saturate_to_i8(%x: f32) -> i8 {
  %r = arith.fptosi %x : f32 to i8
  func.return %r : i8
}

// CHECK-LABEL: func.func @saturate_to_i8(
// CHECK-SAME:      %[[X:.*]]: f32) -> i8 {
// CHECK-NEXT:    %[[LO:.*]] = arith.constant -1.280000e+02 : f32
// CHECK-NEXT:    %[[LIMIT:.*]] = arith.constant 1.280000e+02 : f32
// CHECK-NEXT:    %[[ZERO:.*]] = arith.constant 0.000000e+00 : f32
// CHECK-NEXT:    %[[BELOW:.*]] = arith.cmpf olt, %[[X]], %[[LO]] : f32
// CHECK-NEXT:    %[[C:.*]] = arith.select %[[BELOW]], %[[LO]], %[[X]] : f32
// CHECK-NEXT:    %[[INSIDE:.*]] = arith.cmpf olt, %[[C]], %[[LIMIT]] : f32
// CHECK-NEXT:    %[[SAFE:.*]] = arith.select %[[INSIDE]], %[[C]], %[[ZERO]] : f32
// CHECK-NEXT:    %[[CONV:.*]] = arith.fptosi %[[SAFE]] : f32 to i8
// CHECK-NEXT:    %[[ABOVE:.*]] = arith.cmpf oge, %[[X]], %[[LIMIT]] : f32
// CHECK-NEXT:    %[[MAX:.*]] = arith.constant 127 : i8
// CHECK-NEXT:    %[[NONE:.*]] = arith.constant 0 : i8
// CHECK-NEXT:    %[[TOP:.*]] = arith.select %[[ABOVE]], %[[MAX]], %[[NONE]] : i8
// CHECK-NEXT:    %[[R:.*]] = arith.ori %[[CONV]], %[[TOP]] : i8
// CHECK-NEXT:    func.return %[[R]] : i8

// -----

// The bounds are powers of two, exact although the maximum is not an f32: f32 -> i32
// compares with 2^31 and sets INT32_MAX.

func.func @saturate_f32_to_i32(%x: f32) -> i32 {
  %r = arith.fptosi %x : f32 to i32
  func.return %r : i32
}

// CHECK-LABEL: func.func @saturate_f32_to_i32(
// CHECK:         arith.constant -2.14748365e+09 : f32
// CHECK-NEXT:    arith.constant 2.14748365e+09 : f32
// CHECK:         arith.fptosi %{{.*}} : f32 to i32
// CHECK:         arith.constant 2147483647 : i32

// -----

// f64 -> i64: the bounds are -2^63 and 2^63.

func.func @saturate_f64_to_i64(%x: f64) -> i64 {
  %r = arith.fptosi %x : f64 to i64
  func.return %r : i64
}

// CHECK-LABEL: func.func @saturate_f64_to_i64(
// CHECK:         arith.constant -9.2233720368547758e+18 : f64
// CHECK-NEXT:    arith.constant 9.2233720368547758e+18 : f64
// CHECK:         arith.fptosi %{{.*}} : f64 to i64
// CHECK:         arith.constant 9223372036854775807 : i64

// -----

// An f16 operand is compared and converted in f32 (f16 cannot hold 2^31).

func.func @f16_is_extended(%x: f16) -> i32 {
  %r = arith.fptosi %x : f16 to i32
  func.return %r : i32
}

// CHECK-LABEL: func.func @f16_is_extended(
// CHECK-SAME:      %[[X:.*]]: f16) -> i32 {
// CHECK-NEXT:    %[[W:.*]] = arith.extf %[[X]] : f16 to f32
// CHECK:         arith.cmpf olt, %[[W]], %{{.*}} : f32
// CHECK:         arith.fptosi %{{.*}} : f32 to i32
// CHECK:         arith.cmpf oge, %[[W]], %{{.*}} : f32

// -----

// fptoui: the bounds are 0 and 2^8, the maximum 255 (-1 as a signless i8).

func.func @saturate_unsigned(%x: f32) -> i8 {
  %r = arith.fptoui %x : f32 to i8
  func.return %r : i8
}

// CHECK-LABEL: func.func @saturate_unsigned(
// CHECK-NEXT:    %[[LO:.*]] = arith.constant 0.000000e+00 : f32
// CHECK-NEXT:    %[[LIMIT:.*]] = arith.constant 2.560000e+02 : f32
// CHECK:         arith.fptoui %{{.*}} : f32 to i8
// CHECK:         arith.constant -1 : i8

// -----

// Other conversions are left alone.

func.func @others_untouched(%x: f32, %i: i32) -> (f64, f32, i64) {
  %d = arith.extf %x : f32 to f64
  %f = arith.sitofp %i : i32 to f32
  %w = arith.extsi %i : i32 to i64
  func.return %d, %f, %w : f64, f32, i64
}

// CHECK-LABEL: func.func @others_untouched(
// CHECK-NEXT:    arith.extf
// CHECK-NEXT:    arith.sitofp
// CHECK-NEXT:    arith.extsi
// CHECK-NEXT:    func.return
