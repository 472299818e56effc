// RUN: einc-opt %s -p einc-apply-schedule | filecheck %s

// A 3-tap row filter over 2 rows of 10 columns padded by one row: inside the row loop the
// input's box is rows r .. r + 2 (the row moves with the loop, the columns do not). Prefetched
// one iteration ahead, only the new row, r + 3, is fetched: a line every 16 floats and the
// last element (columns 0 and 9 of one 10-float row), the row clamped to the last (row 3)
// where it would pass the input's end.

// CHECK:       affine.for %[[R:.*]] = 0 to 2 {
// CHECK-NEXT:    %[[A:.*]] = affine.min affine_map<(d0) -> ((d0 + 3), 3)> (%[[R]])
// CHECK-NEXT:    %[[B:.*]] = affine.apply affine_map<(d0) -> (0)> (%[[R]])
// CHECK-NEXT:    egpu.prefetch %x[%[[A]], %[[B]]] : memref<4x10xf32>
// CHECK-NEXT:    %[[C:.*]] = affine.min affine_map<(d0) -> ((d0 + 3), 3)> (%[[R]])
// CHECK-NEXT:    %[[D:.*]] = affine.apply affine_map<(d0) -> (9)> (%[[R]])
// CHECK-NEXT:    egpu.prefetch %x[%[[C]], %[[D]]] : memref<4x10xf32>
// CHECK-NEXT:    affine.for %{{.*}} = 0 to 10 {

func.func @rows(%x: memref<4x10xf32>, %y: memref<2x10xf32>) {
  affine.for %r = 0 to 2 {
    affine.for %c = 0 to 10 {
      affine.for %k = 0 to 3 {
        %a = affine.load %x[%r + %k, %c] : memref<4x10xf32>
        %s = affine.load %y[%r, %c] : memref<2x10xf32>
        %t = arith.addf %s, %a : f32
        affine.store %t, %y[%r, %c] : memref<2x10xf32>
      } {einc.stmt = "y", einc.axis = "K"}
    } {einc.stmt = "y", einc.axis = "C"}
  } {einc.stmt = "y", einc.axis = "R"}
  func.return
}
transform.named_sequence @__transform_main(%root: !transform.any_op) {
  %r = transform.einc.match stmt "y" axis "R" in %root
  %p = transform.einc.prefetch "x" at %r by 1
  transform.yield
}
