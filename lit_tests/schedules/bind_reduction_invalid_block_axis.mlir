// RUN: not einc-opt %s -p 'convert-ein-to-affine,einc-apply-schedule{file="%s"}' 2>&1 | filecheck %s

// Blocks cannot combine partial results: a reduction loop bound to a block axis is refused.
func.func @block_axis(%A: tensor<4x8x8xf32> {ein.name = "A"}) -> tensor<4xf32> {
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
  transform.einc.bind %k to "block.y"
  transform.yield
}

// CHECK: bind_reduction_invalid_block_axis.mlir:16:3: error: cannot bind loop K of C to block.y: it is a reduction loop, and blocks cannot combine their partial results (bind it to a thread axis)
