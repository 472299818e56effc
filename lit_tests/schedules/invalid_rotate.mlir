// RUN: not einc-opt %s --split-input-file -p einc-apply-schedule 2>&1 | filecheck %s

// A band whose written buffer is not one accumulation by an associative, commutative combiner
// (`s = s * 2 + x`): its loops keep their order (reorder refuses the same); refused at the op.

// CHECK: invalid_rotate.mlir:[[# @LINE + 18]]:{{[0-9]+}}: error: rotate would reorder the loops of 's' in loop I of s, which is not one accumulation by an associative, commutative combiner
// CHECK-NOT: func.func
func.func @horner(%x: memref<3x4xf32>, %s: memref<1xf32>) {
  %two = arith.constant 2.000000e+00 : f32
  affine.for %i = 0 to 3 {
    affine.for %j = 0 to 4 {
      %v = affine.load %x[%i, %j] : memref<3x4xf32>
      %a = affine.load %s[0] : memref<1xf32>
      %b = arith.mulf %a, %two : f32
      %c = arith.addf %b, %v : f32
      affine.store %c, %s[0] : memref<1xf32>
    } {einc.stmt = "s", einc.axis = "J"}
  } {einc.stmt = "s", einc.axis = "I"}
  func.return
}
transform.named_sequence @__transform_main(%root: !transform.any_op) {
  %i = transform.einc.match stmt "s" axis "I" in %root
  %j = transform.einc.match stmt "s" axis "J" in %root
  %a, %b = transform.einc.rotate %i, %j by 1
  transform.yield
}
