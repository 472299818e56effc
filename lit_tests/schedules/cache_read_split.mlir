// RUN: einc-opt %s -p einc-apply-schedule | filecheck %s

// cache_read with `split 0 by 4`: the input channel `8 * q_o + 4 * (l mod 2) + c` of two
// groups of 4 channels, lanes interleaved over the groups (group_lanes ... interleaved: g =
// l mod 2), staged as group x channel-in-group and laid out with the group innermost
// (`layout [1, 0]`): the pair's two values of a channel side by side, the load's last index
// `l mod 2` (which the vectorizer reads as one run of 2 repeated over the lanes). The copy
// reads the tensor at `8 * q_o + 4 * g + c`, the local's outer dimension outermost.

// CHECK:       affine.for %[[G:.*]] = 0 to 2 {
// CHECK-NEXT:    %[[X:.*]] = memref.alloca() {{.*}} : memref<4x2xf32>
// CHECK-NEXT:    affine.for %[[R:.*]] = 0 to 4 {
// CHECK-NEXT:      affine.for %[[Q:.*]] = 0 to 2 {
// CHECK-NEXT:        %[[V:.*]] = affine.load %x[%[[G]] * 8 + %[[Q]] * 4 + %[[R]]] : memref<16xf32>
// CHECK-NEXT:        affine.store %[[V]], %[[X]][%[[R]], %[[Q]]] : memref<4x2xf32>
// CHECK:         affine.for %[[L:.*]] = 0 to 8 {
// CHECK-NEXT:      affine.for %[[C:.*]] = 0 to 4 {
// CHECK-NEXT:        affine.load %[[X]][%[[C]], %[[L]] mod 2] : memref<4x2xf32>

func.func @pairs(%x: memref<16xf32>, %w: memref<16x4xf32>, %y: memref<16xf32>) {
  affine.for %q_o = 0 to 2 {
    affine.for %l = 0 to 8 {
      affine.for %c = 0 to 4 {
        %a = affine.load %x[%q_o * 8 + %l mod 2 * 4 + %c] : memref<16xf32>
        %b = affine.load %w[%q_o * 8 + %l, %c] : memref<16x4xf32>
        %p = arith.mulf %a, %b : f32
        %s = affine.load %y[%q_o * 8 + %l] : memref<16xf32>
        %t = arith.addf %s, %p : f32
        affine.store %t, %y[%q_o * 8 + %l] : memref<16xf32>
      } {einc.stmt = "y", einc.axis = "C"}
    } {einc.stmt = "y", einc.axis = "F.r*F.q.i"}
  } {einc.stmt = "y", einc.axis = "F.q.o"}
  func.return
}

transform.named_sequence @__transform_main(%root: !transform.any_op) {
  %q = transform.einc.match stmt "y" axis "F.q.o" in %root
  %c = transform.einc.cache_read "x" at %q split 0 by 4 layout [1, 0]
  transform.yield
}
