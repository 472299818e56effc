// RUN: einc-opt %s -p einc-apply-schedule | filecheck %s

// cache_read of an input whose index divides an inner loop's variable (two groups' lanes
// after group_lanes: the group's input channel `8 * q_o + 4 * (l floordiv 4) + c`): the
// division bounds like a variable of its own (0 to 1), so the box of one iteration of q_o is
// its 8 channels, and the load reads the local buffer with the division kept in its index.

// CHECK:       affine.for %[[G:.*]] = 0 to 2 {
// CHECK-NEXT:    %[[X:.*]] = memref.alloca() {{.*}} : memref<8xf32>
// CHECK-NEXT:    affine.for %[[I:.*]] = 0 to 8 {
// CHECK-NEXT:      %[[V:.*]] = affine.load %x[%[[G]] * 8 + %[[I]]] : memref<16xf32>
// CHECK-NEXT:      affine.store %[[V]], %[[X]][%[[I]]] : memref<8xf32>
// CHECK:         affine.for %[[L:.*]] = 0 to 8 {
// CHECK-NEXT:      affine.for %[[C:.*]] = 0 to 4 {
// CHECK-NEXT:        affine.load %[[X]][%[[L]] floordiv 4 * 4 + %[[C]]] : memref<8xf32>
// CHECK-NEXT:        affine.load %w[%[[G]] * 8 + %[[L]], %[[C]]]

func.func @grouped(%x: memref<16xf32>, %w: memref<16x4xf32>, %y: memref<16xf32>) {
  affine.for %q_o = 0 to 2 {
    affine.for %l = 0 to 8 {
      affine.for %c = 0 to 4 {
        %a = affine.load %x[%q_o * 8 + %l floordiv 4 * 4 + %c] : memref<16xf32>
        %b = affine.load %w[%q_o * 8 + %l, %c] : memref<16x4xf32>
        %p = arith.mulf %a, %b : f32
        %s = affine.load %y[%q_o * 8 + %l] : memref<16xf32>
        %t = arith.addf %s, %p : f32
        affine.store %t, %y[%q_o * 8 + %l] : memref<16xf32>
      } {einc.stmt = "y", einc.axis = "C"}
    } {einc.stmt = "y", einc.axis = "F.q.i*F.r"}
  } {einc.stmt = "y", einc.axis = "F.q.o"}
  func.return
}

transform.named_sequence @__transform_main(%root: !transform.any_op) {
  %q = transform.einc.match stmt "y" axis "F.q.o" in %root
  %c = transform.einc.cache_read "x" at %q
  transform.yield
}
