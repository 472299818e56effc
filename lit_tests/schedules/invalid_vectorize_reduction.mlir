// RUN: not einc-opt %s -p 'convert-ein-to-affine,einc-apply-schedule{file="%s"}' 2>&1 | filecheck %s

// A loop without a reduction is refused by vectorize_reduction (transform.einc.vectorize
// is the op for it), at the op's file:line:col, and the module is not printed.

func.func @elementwise_loop_is_refused(%A: tensor<4x6xf32> {ein.name = "A"}) -> tensor<4x6xf32> {
  %C = ein.einsum "C" assign parallel [N = 4, K = 6] : tensor<4x6xf32> {
  ^bb0(%N : index, %K : index):
    %a = ein.load %A[%N, %K] : tensor<4x6xf32>
    ein.yield %a : f32
  }
  func.return %C : tensor<4x6xf32>
}
transform.named_sequence @__transform_main(%root: !transform.any_op) {
  %k = transform.einc.match stmt "C" axis "K" in %root
  transform.einc.vectorize_reduction %k
  transform.yield
}

// CHECK: invalid_vectorize_reduction.mlir:16:3: error: cannot vectorize the reduction loop K of C: it has no reduction (transform.einc.vectorize)
// CHECK-NEXT: transform.einc.vectorize_reduction %k
// CHECK-NOT: func.func
