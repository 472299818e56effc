// RUN: einc-opt %s --split-input-file -p convert-ein-to-affine,einc-apply-schedule | filecheck %s

// CHECK-LABEL: func.func @parallelize_outer_loop(
// CHECK:         } {einc.stmt = "C", einc.axis = "N", einc.parallel}
func.func @parallelize_outer_loop(%A: tensor<4x6xf32> {ein.name = "A"}, %B: tensor<6x8xf32> {ein.name = "B"}) -> tensor<4x8xf32> {
  %C = ein.einsum "C" add parallel [N = 4, M = 8] reduce [K = 6] : tensor<4x8xf32> {
  ^bb0(%N : index, %M : index, %K : index):
    %a = ein.load %A[%N, %K] : tensor<4x6xf32>
    %b = ein.load %B[%K, %M] : tensor<6x8xf32>
    %p = arith.mulf %a, %b : f32
    ein.yield %p : f32
  }
  func.return %C : tensor<4x8xf32>
}
transform.named_sequence @__transform_main(%root: !transform.any_op) {
  %n = transform.einc.match stmt "C" axis "N" in %root
  transform.einc.parallelize %n
  transform.yield
}

// -----

// CHECK-LABEL: func.func @vectorize_innermost_init_loop(
// CHECK:         } {einc.stmt = "C", einc.axis = "M", einc.init, einc.vectorize}
func.func @vectorize_innermost_init_loop(%A: tensor<4x6xf32> {ein.name = "A"}, %B: tensor<6x8xf32> {ein.name = "B"}) -> tensor<4x8xf32> {
  %C = ein.einsum "C" add parallel [N = 4, M = 8] reduce [K = 6] : tensor<4x8xf32> {
  ^bb0(%N : index, %M : index, %K : index):
    %a = ein.load %A[%N, %K] : tensor<4x6xf32>
    %b = ein.load %B[%K, %M] : tensor<6x8xf32>
    %p = arith.mulf %a, %b : f32
    ein.yield %p : f32
  }
  func.return %C : tensor<4x8xf32>
}
transform.named_sequence @__transform_main(%root: !transform.any_op) {
  %m = transform.einc.match stmt "C" axis "M" init in %root
  transform.einc.vectorize %m
  transform.yield
}

// -----

// CHECK-LABEL: func.func @bind_block_and_thread(
// CHECK:         } {einc.stmt = "C", einc.axis = "M", einc.bind_loc = "{{.*}}parallelize.mlir:60:3", einc.bind = "thread.x"}
// CHECK-NEXT:  } {einc.stmt = "C", einc.axis = "N", einc.bind_loc = "{{.*}}parallelize.mlir:59:3", einc.bind = "block.x"}
func.func @bind_block_and_thread(%A: tensor<4x6xf32> {ein.name = "A"}, %B: tensor<6x8xf32> {ein.name = "B"}) -> tensor<4x8xf32> {
  %C = ein.einsum "C" add parallel [N = 4, M = 8] reduce [K = 6] : tensor<4x8xf32> {
  ^bb0(%N : index, %M : index, %K : index):
    %a = ein.load %A[%N, %K] : tensor<4x6xf32>
    %b = ein.load %B[%K, %M] : tensor<6x8xf32>
    %p = arith.mulf %a, %b : f32
    ein.yield %p : f32
  }
  func.return %C : tensor<4x8xf32>
}
transform.named_sequence @__transform_main(%root: !transform.any_op) {
  %n = transform.einc.match stmt "C" axis "N" in %root
  %m = transform.einc.match stmt "C" axis "M" in %root
  transform.einc.bind %n to "block.x"
  transform.einc.bind %m to "thread.x" max_threads 8
  transform.yield
}
