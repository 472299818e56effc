// RUN: not einc-opt %s -p 'einc-apply-schedule{file="%s"}' 2>&1 | filecheck %s

// transform.einc.group_lanes on an innermost loop: refused, located at the op.

// CHECK: invalid_group_lanes_body.mlir:[[# @LINE + 13]]:{{[0-9]+}}: error: cannot group the lanes of loop F.r of y: its body is not one loop
// CHECK-NOT: func.func
func.func @innermost(%y: memref<16xf32>) {
  %z = arith.constant 0.0 : f32
  affine.for %q = 0 to 4 {
    affine.for %r = 0 to 4 {
      affine.store %z, %y[%q * 4 + %r] : memref<16xf32>
    } {einc.stmt = "y", einc.axis = "F.r"}
  } {einc.stmt = "y", einc.axis = "F.q"}
  func.return
}
transform.named_sequence @__transform_main(%root: !transform.any_op) {
  %r = transform.einc.match stmt "y" axis "F.r" in %root
  %o, %l = transform.einc.group_lanes %r by 2
  transform.yield
}
