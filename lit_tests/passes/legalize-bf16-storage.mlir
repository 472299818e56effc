// RUN: einc-opt %s --split-input-file -p legalize-bf16-storage | filecheck %s

// bfloat16 stays in memory, in a device kernel: loads widen to f32, results narrowed to bf16
// are rounded in f32, stores narrow; the bf16 -> f32 extension disappears; f16 is untouched.

egpu.func @bf16_in_memory_only(%a: memref<8xbf16>, %b: memref<8xbf16>, %h: memref<8xf16>) grid [1, 1, 1] block [8, 1, 1] {
  %i = egpu.global_id x
  %x = affine.load %a[%i] : memref<8xbf16>
  %w = arith.extf %x : bf16 to f32
  %c = arith.constant 2.0 : f32
  %p = arith.mulf %w, %c : f32
  %r = arith.truncf %p : f32 to bf16
  affine.store %r, %b[%i] : memref<8xbf16>
  %y = affine.load %h[%i] : memref<8xf16>
  affine.store %y, %h[%i] : memref<8xf16>
  egpu.return
}

// CHECK-LABEL: egpu.func @bf16_in_memory_only(
// CHECK-NEXT:    %[[I:.*]] = egpu.global_id x
// CHECK-NEXT:    %[[X:.*]] = egpu.load_extf %{{.*}}[%[[I]]] : memref<8xbf16> -> f32
// CHECK-NEXT:    %[[C:.*]] = arith.constant 2.000000e+00 : f32
// CHECK-NEXT:    %[[P:.*]] = arith.mulf %[[X]], %[[C]] : f32
// CHECK-NEXT:    %[[R:.*]] = egpu.round %[[P]] as bf16 : f32
// CHECK-NEXT:    egpu.store_truncf %[[R]], %{{.*}}[%[[I]]] : f32, memref<8xbf16>
// CHECK-NEXT:    %[[Y:.*]] = affine.load %{{.*}}[%[[I]]] : memref<8xf16>
// CHECK-NEXT:    affine.store %[[Y]], %{{.*}}[%[[I]]] : memref<8xf16>
// CHECK-NEXT:    egpu.return

// -----

// Without kernels (the C target), every function is rewritten: a bf16 constant becomes an
// exact f32 constant; an f64 narrowed to bf16 rounds through f32.

func.func @c_function(%a: memref<4xf64>, %b: memref<4xbf16>) {
  affine.for %i = 0 to 4 {
    %d = affine.load %a[%i] : memref<4xf64>
    %n = arith.truncf %d : f64 to bf16
    %one = arith.constant 1.0 : bf16
    %nan = arith.cmpf uno, %d, %d : f64
    %s = arith.select %nan, %one, %n : bf16
    affine.store %s, %b[%i] : memref<4xbf16>
  }
  func.return
}

// CHECK-LABEL: func.func @c_function(
// CHECK:         %[[D:.*]] = affine.load %{{.*}}[%{{.*}}] : memref<4xf64>
// CHECK-NEXT:    %[[F:.*]] = arith.truncf %[[D]] : f64 to f32
// CHECK-NEXT:    %[[N:.*]] = egpu.round %[[F]] as bf16 : f32
// CHECK-NEXT:    %[[ONE:.*]] = arith.constant 1.000000e+00 : f32
// CHECK:         %[[S:.*]] = arith.select %{{.*}}, %[[ONE]], %[[N]] : f32
// CHECK-NEXT:    egpu.store_truncf %[[S]], %{{.*}}[%{{.*}}] : f32, memref<4xbf16>
