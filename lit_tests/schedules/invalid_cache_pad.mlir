// RUN: not einc-opt %s -p 'convert-ein-to-affine,einc-apply-schedule{file="%s"}' 2>&1 | filecheck %s

// `pad` lengthens the rows of a shared tile against bank conflicts: a local buffer (a
// work-item's registers) has no banks, and it is refused where it stands.

func.func @pad_on_a_local_buffer(%A: tensor<8x8xf32> {ein.name = "A"}) -> tensor<8xf32> {
  %C = ein.einsum "C" add parallel [N = 8] reduce [K = 8] : tensor<8xf32> {
  ^bb0(%N : index, %K : index):
    %a = ein.load %A[%N, %K] : tensor<8x8xf32>
    ein.yield %a : f32
  }
  func.return %C : tensor<8xf32>
}
transform.named_sequence @__transform_main(%root: !transform.any_op) {
  %n = transform.einc.match stmt "C" axis "N" in %root
  %s = transform.einc.cache_read "A" at %n in "local" pad 1
  transform.yield
}

// CHECK: invalid_cache_pad.mlir:16:59: error: pad (0 to 64 elements) is for shared buffers only
