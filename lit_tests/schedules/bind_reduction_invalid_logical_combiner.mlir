// RUN: not einc-opt %s -p 'convert-ein-to-affine,einc-apply-schedule{file="%s"}' 2>&1 | filecheck %s

// A logical or (|=!) is not combined across threads: refused at the bind op.
func.func @logical_combiner(%A: tensor<4x8x8xf32> {ein.name = "A"}) -> tensor<4xf32> {
  %C = ein.einsum "C" or parallel [N = 4] reduce [K = 8, J = 8] : tensor<4xf32> {
  ^bb0(%N : index, %K : index, %J : index):
    %a = ein.load %A[%N, %K, %J] : tensor<4x8x8xf32>
    ein.yield %a : f32
  }
  func.return %C : tensor<4xf32>
}
transform.named_sequence @__transform_main(%root: !transform.any_op) {
  %n = transform.einc.match stmt "C" axis "N" in %root
  %k = transform.einc.match stmt "C" axis "K" in %root
  %j = transform.einc.match stmt "C" axis "J" in %root
  transform.einc.bind %k to "thread.x"
  transform.yield
}

// CHECK: bind_reduction_invalid_logical_combiner.mlir:16:3: error: cannot bind loop K of C to thread.x: its iterations share an accumulator, and threads can only reduce one element with an associative and commutative combiner (+, *, max, min)
