// RUN: einc-opt %s -p einc-apply-schedule | filecheck %s

// group_lanes ... interleaved: the group index fastest (lane 2 f + g). The same loops as
// group_lanes.mlir (4 groups of 4 channels); the merged loop's 8 lanes hold g = 2 g.o +
// l mod 2 and f = l floordiv 2: the output's and the filter's channel `4 * g + f` become
// `8 * g.o + 4 * (l mod 2) + l floordiv 2` (no longer unit-stride in l), the group's input
// channel `4 * g + C` reads `l mod 2`.

// CHECK:       affine.for %[[G:.*]] = 0 to 2 {
// CHECK-NEXT:    affine.for %[[L:.*]] = 0 to 8 {
// CHECK-NEXT:      affine.for %[[C:.*]] = 0 to 4 {
// CHECK-NEXT:        affine.load %x[%[[G]] * 8 + %[[L]] mod 2 * 4 + %[[C]]]
// CHECK-NEXT:        affine.load %w[%[[G]] * 8 + %[[L]] mod 2 * 4 + %[[L]] floordiv 2, %[[C]]]
// CHECK:             affine.store %{{.*}}, %y[%[[G]] * 8 + %[[L]] mod 2 * 4 + %[[L]] floordiv 2]
// CHECK-NEXT:      } {einc.stmt = "y", einc.axis = "C"}
// CHECK-NEXT:    } {einc.stmt = "y", einc.axis = "F.r*F.q.i"}
// CHECK-NEXT:  } {einc.stmt = "y", einc.axis = "F.q.o"}

func.func @grouped(%x: memref<16xf32>, %w: memref<16x4xf32>, %y: memref<16xf32>) {
  affine.for %q = 0 to 4 {
    affine.for %r = 0 to 4 {
      affine.for %c = 0 to 4 {
        %a = affine.load %x[%q * 4 + %c] : memref<16xf32>
        %b = affine.load %w[%q * 4 + %r, %c] : memref<16x4xf32>
        %p = arith.mulf %a, %b : f32
        %s = affine.load %y[%q * 4 + %r] : memref<16xf32>
        %t = arith.addf %s, %p : f32
        affine.store %t, %y[%q * 4 + %r] : memref<16xf32>
      } {einc.stmt = "y", einc.axis = "C"}
    } {einc.stmt = "y", einc.axis = "F.r"}
  } {einc.stmt = "y", einc.axis = "F.q"}
  func.return
}
transform.named_sequence @__transform_main(%root: !transform.any_op) {
  %q = transform.einc.match stmt "y" axis "F.q" in %root
  %o, %l = transform.einc.group_lanes %q by 2 interleaved
  transform.yield
}
