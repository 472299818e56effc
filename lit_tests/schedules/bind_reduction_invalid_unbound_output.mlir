// RUN: not einc-opt %s -p 'convert-ein-to-affine,einc-apply-schedule{file="%s"},convert-affine-to-egpu{target=opencl}' 2>&1 | filecheck %s

// The output loop N stays sequential around K bound to threads: convert-affine-to-egpu
// refuses it, at the bind op (the loop records where it was bound), not at <schedule>:1:1.
func.func @unbound_output(%A: tensor<4x8x8xf32> {ein.name = "A"}) -> tensor<4xf32> {
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
  transform.einc.bind %k to "thread.x"
  transform.yield
}

// CHECK: bind_reduction_invalid_unbound_output.mlir:17:3: error: convert-affine-to-egpu: loop K of C is a reduction loop bound to thread.x but cannot be mapped onto work-items
