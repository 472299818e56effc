// RUN: einc-opt %s --split-input-file -p einc-apply-schedule | filecheck %s

// transform.einc.reuse: the exp both loops compute per element is stored by the first loop
// in a local array (allocated just before it) and loaded by the second, whose own exp goes.

// CHECK-LABEL: func.func @shared_exp(
// CHECK:         %[[BUF:.*]] = memref.alloca() {ein.name = "t_reuse", alignment = 64 : i64} : memref<64xf32>
// CHECK-NEXT:    affine.for %[[I:.*]] = 0 to 64 {
// CHECK:           %[[E:.*]] = math.exp
// CHECK-NEXT:      affine.store %[[E]], %[[BUF]][%[[I]]] : memref<64xf32>
// CHECK:         } {einc.stmt = "t", einc.axis = "C"}
// CHECK-NEXT:    affine.for %[[J:.*]] = 0 to 64 {
// CHECK-NEXT:      %[[L:.*]] = affine.load %[[BUF]][%[[J]]] : memref<64xf32>
// CHECK-NEXT:      %[[T:.*]] = affine.load %{{.*}}[0] : memref<1xf32>
// CHECK-NEXT:      %[[Q:.*]] = arith.divf %[[L]], %[[T]] : f32
// CHECK-NEXT:      affine.store %[[Q]], %{{.*}}[%[[J]]] : memref<64xf32>
// CHECK-NEXT:    } {einc.stmt = "y", einc.axis = "C"}
func.func @shared_exp(%x: memref<64xf32>, %m: memref<1xf32>, %s: memref<1xf32>, %y: memref<64xf32>) {
  affine.for %i = 0 to 64 {
    %v = affine.load %x[%i] : memref<64xf32>
    %c = affine.load %m[0] : memref<1xf32>
    %d = arith.subf %v, %c : f32
    %e = math.exp %d : f32
    %a = affine.load %s[0] : memref<1xf32>
    %b = arith.addf %a, %e : f32
    affine.store %b, %s[0] : memref<1xf32>
  } {einc.stmt = "t", einc.axis = "C"}
  affine.for %j = 0 to 64 {
    %v = affine.load %x[%j] : memref<64xf32>
    %c = affine.load %m[0] : memref<1xf32>
    %d = arith.subf %v, %c : f32
    %e = math.exp %d : f32
    %t = affine.load %s[0] : memref<1xf32>
    %q = arith.divf %e, %t : f32
    affine.store %q, %y[%j] : memref<64xf32>
  } {einc.stmt = "y", einc.axis = "C"}
  func.return
}
transform.named_sequence @__transform_main(%root: !transform.any_op) {
  %t = transform.einc.match stmt "t" axis "C" in %root
  %y = transform.einc.match stmt "y" axis "C" in %root
  transform.einc.reuse %t in %y
  transform.yield
}

// -----

// The product reads %m, written between the loops: only its legal part, exp(x), is shared.

// CHECK-LABEL: func.func @legal_part_of_an_expression(
// CHECK:         %[[BUF:.*]] = memref.alloca() {ein.name = "y_reuse", alignment = 64 : i64} : memref<64xf32>
// CHECK:         affine.store %{{.*}}, %{{.*}}[0] : memref<1xf32>
// CHECK-NEXT:    affine.for %[[J:.*]] = 0 to 64 {
// CHECK-NEXT:      %[[C:.*]] = affine.load %{{.*}}[0] : memref<1xf32>
// CHECK-NEXT:      %[[E:.*]] = affine.load %[[BUF]][%[[J]]] : memref<64xf32>
// CHECK-NEXT:      %[[D:.*]] = arith.mulf %[[E]], %[[C]] : f32
func.func @legal_part_of_an_expression(%x: memref<64xf32>, %m: memref<1xf32>, %y: memref<64xf32>, %w: memref<64xf32>) {
  affine.for %i = 0 to 64 {
    %v = affine.load %x[%i] : memref<64xf32>
    %c = affine.load %m[0] : memref<1xf32>
    %e = math.exp %v : f32
    %d = arith.mulf %e, %c : f32
    affine.store %d, %y[%i] : memref<64xf32>
  } {einc.stmt = "y", einc.axis = "C"}
  %z = arith.constant 2.0 : f32
  affine.store %z, %m[0] : memref<1xf32>
  affine.for %j = 0 to 64 {
    %v = affine.load %x[%j] : memref<64xf32>
    %c = affine.load %m[0] : memref<1xf32>
    %e = math.exp %v : f32
    %d = arith.mulf %e, %c : f32
    affine.store %d, %w[%j] : memref<64xf32>
  } {einc.stmt = "w", einc.axis = "C"}
  func.return
}
transform.named_sequence @__transform_main(%root: !transform.any_op) {
  %y = transform.einc.match stmt "y" axis "C" in %root
  %w = transform.einc.match stmt "w" axis "C" in %root
  transform.einc.reuse %y in %w
  transform.yield
}
