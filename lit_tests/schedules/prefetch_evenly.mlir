// RUN: einc-opt %s -p einc-apply-schedule | filecheck %s

// A batched row sum, 3 batch elements of 4 rows of 8: inside the batch loop the input's box
// is one element's 32 floats, one run. Prefetched one element ahead and spread evenly over
// the 4 x 8 = 32 steps of the row and column loops, each step prefetches the element
// 32 * b + 32 + 8 * i + k (one float a step: a line every 16 steps, the repeats hit it),
// clamped to the input's last element past the last batch element, and split per dimension
// (the C printer merges the split back into the flat index).

// CHECK:       affine.for %[[B:.*]] = 0 to 3 {
// CHECK-NEXT:    affine.for %[[I:.*]] = 0 to 4 {
// CHECK-NEXT:      affine.for %[[K:.*]] = 0 to 8 {
// CHECK-NEXT:        %[[E:.*]] = affine.min affine_map<(d0, d1, d2) -> ((((d0 + 32) + (d1 * 8)) + (d2 * 32)), 95)> (%[[K]], %[[I]], %[[B]])
// CHECK-NEXT:        %[[X0:.*]] = affine.apply affine_map<(d0) -> ((d0 floordiv 32))> (%[[E]])
// CHECK-NEXT:        %[[X1:.*]] = affine.apply affine_map<(d0) -> (((d0 floordiv 8) mod 4))> (%[[E]])
// CHECK-NEXT:        %[[X2:.*]] = affine.apply affine_map<(d0) -> ((d0 mod 8))> (%[[E]])
// CHECK-NEXT:        egpu.prefetch %x[%[[X0]], %[[X1]], %[[X2]]] : memref<3x4x8xf32>
// CHECK-NEXT:        affine.load %x

func.func @rows(%x: memref<3x4x8xf32>, %y: memref<3x4xf32>) {
  affine.for %b = 0 to 3 {
    affine.for %i = 0 to 4 {
      affine.for %k = 0 to 8 {
        %a = affine.load %x[%b, %i, %k] : memref<3x4x8xf32>
        %s = affine.load %y[%b, %i] : memref<3x4xf32>
        %t = arith.addf %s, %a : f32
        affine.store %t, %y[%b, %i] : memref<3x4xf32>
      } {einc.stmt = "y", einc.axis = "K"}
    } {einc.stmt = "y", einc.axis = "I"}
  } {einc.stmt = "y", einc.axis = "B"}
  func.return
}
transform.named_sequence @__transform_main(%root: !transform.any_op) {
  %b = transform.einc.match stmt "y" axis "B" in %root
  %k = transform.einc.match stmt "y" axis "K" in %root
  %p = transform.einc.prefetch "x" at %b by 1 spread %k evenly
  transform.yield
}
