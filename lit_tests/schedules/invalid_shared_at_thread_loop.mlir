// RUN: not einc-opt %s -p 'convert-ein-to-affine,einc-apply-schedule{file="%s"}' 2>&1 | filecheck %s

// Staging in shared memory at a thread-bound loop: the tile's offset would be the thread's
// row, so the threads of a block would not share one tile. Refused at the op.

func.func @shared_at_thread_loop_is_refused(%A: tensor<8x8xf32> {ein.name = "A"}) -> tensor<8xf32> {
  %C = ein.einsum "C" add parallel [N = 8] reduce [K = 8] : tensor<8xf32> {
  ^bb0(%N : index, %K : index):
    %a = ein.load %A[%N, %K] : tensor<8x8xf32>
    ein.yield %a : f32
  }
  func.return %C : tensor<8xf32>
}
transform.named_sequence @__transform_main(%root: !transform.any_op) {
  %n = transform.einc.match stmt "C" axis "N" in %root
  transform.einc.bind %n to "thread.x"
  %s = transform.einc.cache_read "A" at %n in "shared"
  transform.yield
}

// CHECK: invalid_shared_at_thread_loop.mlir:17:3: error: cannot cache_read 'A' at loop N of C in shared memory: the loop is bound to thread.x (stage at a loop inside the bound loops)
// CHECK-NOT: func.func
