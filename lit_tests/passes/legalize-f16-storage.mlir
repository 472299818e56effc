// RUN: einc-opt %s --split-input-file -p legalize-f16-storage | filecheck %s

// Halves stay in memory: loads widen (vload_half), results narrowed to f16 are rounded in
// f32, stores narrow (vstore_half); the f16 -> f32 extension disappears.

egpu.func @half_in_memory_only(%a: memref<8xf16>, %b: memref<8xf16>) grid [1, 1, 1] block [8, 1, 1] {
  %i = egpu.global_id x
  %x = affine.load %a[%i] : memref<8xf16>
  %w = arith.extf %x : f16 to f32
  %c = arith.constant 2.0 : f32
  %p = arith.mulf %w, %c : f32
  %r = arith.truncf %p : f32 to f16
  affine.store %r, %b[%i] : memref<8xf16>
  egpu.return
}

// CHECK-LABEL: egpu.func @half_in_memory_only(
// CHECK-NEXT:    %[[I:.*]] = egpu.global_id x
// CHECK-NEXT:    %[[X:.*]] = egpu.load_extf %{{.*}}[%[[I]]] : memref<8xf16> -> f32
// CHECK-NEXT:    %[[C:.*]] = arith.constant 2.000000e+00 : f32
// CHECK-NEXT:    %[[P:.*]] = arith.mulf %[[X]], %[[C]] : f32
// CHECK-NEXT:    %[[R:.*]] = egpu.round %[[P]] as f16 : f32
// CHECK-NEXT:    egpu.store_truncf %[[R]], %{{.*}}[%[[I]]] : f32, memref<8xf16>
// CHECK-NEXT:    egpu.return

// -----

// f16 constants become exact f32 constants; an int converted to f16 converts to f32 and
// rounds; f16 values carried through a select become f32.

egpu.func @constants_conversions_select(%a: memref<8xi32>, %b: memref<8xf16>) grid [1, 1, 1] block [8, 1, 1] {
  %i = egpu.global_id x
  %n = affine.load %a[%i] : memref<8xi32>
  %h = arith.sitofp %n : i32 to f16
  %one = arith.constant 1.0 : f16
  %zero = arith.constant 0 : i32
  %pos = arith.cmpi sgt, %n, %zero : i32
  %s = arith.select %pos, %h, %one : f16
  affine.store %s, %b[%i] : memref<8xf16>
  egpu.return
}

// CHECK-LABEL: egpu.func @constants_conversions_select(
// CHECK:         %[[F:.*]] = arith.sitofp %{{.*}} : i32 to f32
// CHECK-NEXT:    %[[H:.*]] = egpu.round %[[F]] as f16 : f32
// CHECK-NEXT:    %[[ONE:.*]] = arith.constant 1.000000e+00 : f32
// CHECK:         %[[S:.*]] = arith.select %{{.*}}, %[[H]], %[[ONE]] : f32
// CHECK-NEXT:    egpu.store_truncf %[[S]], %{{.*}}[%{{.*}}] : f32, memref<8xf16>
