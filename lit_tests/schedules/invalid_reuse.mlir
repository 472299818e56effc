// RUN: not einc-opt %s -p 'einc-apply-schedule{file="%s"}' 2>&1 | filecheck %s

// The only value the loops share reads %m, which is written between them: refused at the
// op's file:line:col, and the module is not printed.

func.func @written_between(%x: memref<64xf32>, %m: memref<1xf32>, %y: memref<64xf32>, %w: memref<64xf32>) {
  affine.for %i = 0 to 64 {
    %v = affine.load %x[%i] : memref<64xf32>
    %c = affine.load %m[0] : memref<1xf32>
    %d = arith.subf %v, %c : f32
    %e = math.exp %d : f32
    affine.store %e, %y[%i] : memref<64xf32>
  } {einc.stmt = "y", einc.axis = "C"}
  %z = arith.constant 2.0 : f32
  affine.store %z, %m[0] : memref<1xf32>
  affine.for %j = 0 to 64 {
    %v = affine.load %x[%j] : memref<64xf32>
    %c = affine.load %m[0] : memref<1xf32>
    %d = arith.subf %v, %c : f32
    %e = math.exp %d : f32
    affine.store %e, %w[%j] : memref<64xf32>
  } {einc.stmt = "w", einc.axis = "C"}
  func.return
}
transform.named_sequence @__transform_main(%root: !transform.any_op) {
  %y = transform.einc.match stmt "y" axis "C" in %root
  %w = transform.einc.match stmt "w" axis "C" in %root
  transform.einc.reuse %y in %w
  transform.yield
}

// CHECK: invalid_reuse.mlir:28:3: error: cannot reuse values of loop C of y in loop C of w: no value computed the same way in both with its inputs unchanged
// CHECK-NEXT: transform.einc.reuse %y in %w
// CHECK-NOT: func.func
