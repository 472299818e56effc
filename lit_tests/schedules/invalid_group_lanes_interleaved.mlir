// RUN: not einc-opt %s -p 'einc-apply-schedule{file="%s"}' 2>&1 | filecheck %s

// Refusals of transform.einc.group_lanes ... interleaved, located at the op; the module is not printed.

// CHECK: invalid_group_lanes_interleaved.mlir:[[# @LINE + 13]]:{{[0-9]+}}: error: cannot group the lanes of loop F.q of y: 3 groups do not divide its 4 iterations
// CHECK-NOT: func.func
func.func @not_dividing(%y: memref<16xf32>) {
  %z = arith.constant 0.0 : f32
  affine.for %q = 0 to 4 {
    affine.for %r = 0 to 4 {
      affine.store %z, %y[%q * 4 + %r] : memref<16xf32>
    } {einc.stmt = "y", einc.axis = "F.r"}
  } {einc.stmt = "y", einc.axis = "F.q"}
  func.return
}
transform.named_sequence @__transform_main(%root: !transform.any_op) {
  %q = transform.einc.match stmt "y" axis "F.q" in %root
  %o, %l = transform.einc.group_lanes %q by 3 interleaved
  transform.yield
}
