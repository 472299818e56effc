// RUN: not einc-opt %s -p 'convert-ein-to-affine,einc-apply-schedule{file="%s"}' 2>&1 | filecheck %s

// Shared memory belongs to a block of threads: staging needs an enclosing bound loop.

func.func @shared_without_bound_loops_is_refused(%A: tensor<8x8xf32> {ein.name = "A"}) -> tensor<8xf32> {
  %C = ein.einsum "C" add parallel [N = 8] reduce [K = 8] : tensor<8xf32> {
  ^bb0(%N : index, %K : index):
    %a = ein.load %A[%N, %K] : tensor<8x8xf32>
    ein.yield %a : f32
  }
  func.return %C : tensor<8xf32>
}
transform.named_sequence @__transform_main(%root: !transform.any_op) {
  %k = transform.einc.match stmt "C" axis "K" in %root
  %s = transform.einc.cache_read "A" at %k in "shared"
  transform.yield
}

// CHECK: invalid_shared_no_bound_loop.mlir:15:3: error: cannot cache_read 'A' at loop K of C in shared memory: no enclosing loop is bound to a GPU block or thread
