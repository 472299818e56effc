// RUN: einc-opt %s -p einc-apply-schedule | filecheck %s

// A grouped channel loop (4 groups of 4 channels, the loops stage's `F.q`, `F.r`): the
// group loop tiled by 2 and its tile merged with the channel loop into one loop of 8 lanes
// over two groups. The output's and the filter's channel `4 * F.q + F.r` become `8 * F.q.o +
// l` (unit-stride in l), the group's input channel `4 * F.q + C` reads `l floordiv 4`: the
// same value over each run of 4 lanes.

// CHECK:       affine.for %[[G:.*]] = 0 to 2 {
// CHECK-NEXT:    affine.for %[[L:.*]] = 0 to 8 {
// CHECK-NEXT:      affine.for %[[C:.*]] = 0 to 4 {
// CHECK-NEXT:        affine.load %x[%[[G]] * 8 + %[[L]] floordiv 4 * 4 + %[[C]]]
// CHECK-NEXT:        affine.load %w[%[[G]] * 8 + %[[L]], %[[C]]]
// CHECK:             affine.store %{{.*}}, %y[%[[G]] * 8 + %[[L]]]
// CHECK-NEXT:      } {einc.stmt = "y", einc.axis = "C"}
// CHECK-NEXT:    } {einc.stmt = "y", einc.axis = "F.q.i*F.r"}
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
  %o, %l = transform.einc.group_lanes %q by 2
  transform.yield
}
