// RUN: not einc-opt %s -p 'convert-ein-to-affine,einc-apply-schedule{file="%s"}' 2>&1 | filecheck %s

// Only one reduction loop may be bound to threads: the second bind is refused.
func.func @two_loops(%A: tensor<4x8x8xf32> {ein.name = "A"}) -> tensor<4xf32> {
  %C = ein.einsum "C" add parallel [N = 4] reduce [K = 8, J = 8] : tensor<4xf32> {
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
  transform.einc.bind %n to "block.x"
  transform.einc.bind %k to "thread.x"
  transform.einc.bind %j to "thread.y"
  transform.yield
}

// CHECK: bind_reduction_invalid_two_loops.mlir:18:3: error: cannot bind loop J of C to thread.y: loop K of C is a reduction loop bound to threads already (bind one only)
