// RUN: not einc-opt %s -p 'einc-apply-schedule{file="%s"}' 2>&1 | filecheck %s

// Every iteration of K updates y[I] (a reduction over K): running all of K's iterations of
// the first piece before the second would reorder those updates against the second piece's
// reads of y; refused at the op, and the module is not printed.

// CHECK: invalid_distribute.mlir:[[# @LINE + 20]]:{{[0-9]+}}: error: cannot distribute loop K of y: its iterations both access 'y'
// CHECK-NOT: func.func

func.func @reduction(%x: memref<4x8xf32>, %y: memref<4xf32>, %z: memref<4x8xf32>) {
  affine.for %k = 0 to 8 {
    affine.for %i = 0 to 4 {
      %v = affine.load %x[%i, %k] : memref<4x8xf32>
      %a = affine.load %y[%i] : memref<4xf32>
      %s = arith.addf %a, %v : f32
      affine.store %s, %y[%i] : memref<4xf32>
    } {einc.stmt = "y", einc.axis = "I"}
    affine.for %j = 0 to 4 {
      %a = affine.load %y[%j] : memref<4xf32>
      affine.store %a, %z[%j, %k] : memref<4x8xf32>
    } {einc.stmt = "y", einc.axis = "J"}
  } {einc.stmt = "y", einc.axis = "K"}
  func.return
}
transform.named_sequence @__transform_main(%root: !transform.any_op) {
  %k = transform.einc.match stmt "y" axis "K" in %root
  %a, %b = transform.einc.distribute %k into 2
  transform.yield
}
