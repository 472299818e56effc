// RUN: einc-opt %s --split-input-file -p "legalize-narrow-ints{target=hlsl}" | filecheck %s

// int8 computed in int32: a truncation into i8 and an add wrap (shift left then arithmetic
// right by 24); `and` of in-range values needs nothing; a logical right shift sees the
// 8-bit pattern (masked with 255); extending out of i8 is the value itself.

egpu.func @int8_in_int32(%a: memref<8xi32>, %b: memref<8xi32>) grid [1, 1, 1] block [8, 1, 1] {
  %i = egpu.global_id x
  %w = affine.load %a[%i] : memref<8xi32>
  %x = arith.trunci %w : i32 to i8
  %s = arith.addi %x, %x : i8
  %m = arith.andi %s, %x : i8
  %u = arith.shrui %m, %x : i8
  %e = arith.extsi %u : i8 to i32
  affine.store %e, %b[%i] : memref<8xi32>
  egpu.return
}

// CHECK-LABEL: egpu.func @int8_in_int32(
// CHECK:         %[[W:.*]] = affine.load %{{.*}}[%{{.*}}] : memref<8xi32>
// CHECK-NEXT:    %[[C24:.*]] = arith.constant 24 : i32
// CHECK-NEXT:    %[[L:.*]] = arith.shli %[[W]], %[[C24]] : i32
// CHECK-NEXT:    %[[X:.*]] = arith.shrsi %[[L]], %[[C24]] : i32
// CHECK-NEXT:    %[[S:.*]] = arith.addi %[[X]], %[[X]] : i32
// CHECK-NEXT:    %[[C:.*]] = arith.constant 24 : i32
// CHECK-NEXT:    %[[SL:.*]] = arith.shli %[[S]], %[[C]] : i32
// CHECK-NEXT:    %[[SW:.*]] = arith.shrsi %[[SL]], %[[C]] : i32
// CHECK-NEXT:    %[[M:.*]] = arith.andi %[[SW]], %[[X]] : i32
// CHECK-NEXT:    %[[FF:.*]] = arith.constant 255 : i32
// CHECK-NEXT:    %[[MM:.*]] = arith.andi %[[M]], %[[FF]] : i32
// CHECK:         %[[U:.*]] = arith.shrui %[[MM]], %{{.*}} : i32
// CHECK:         %[[E:.*]] = arith.shrsi %{{.*}}, %{{.*}} : i32
// CHECK-NEXT:    affine.store %[[E]], %{{.*}}[%{{.*}}] : memref<8xi32>

// -----

// Narrow constants become int32 constants of the same (signed) value.

egpu.func @constants(%b: memref<8xi32>) grid [1, 1, 1] block [8, 1, 1] {
  %i = egpu.global_id x
  %c = arith.constant -128 : i8
  %e = arith.extsi %c : i8 to i32
  affine.store %e, %b[%i] : memref<8xi32>
  egpu.return
}

// CHECK-LABEL: egpu.func @constants(
// CHECK:         %[[C:.*]] = arith.constant -128 : i32
// CHECK-NEXT:    affine.store %[[C]], %{{.*}}[%{{.*}}] : memref<8xi32>
