// RUN: not einc-opt %s --split-input-file -p convert-ein-to-affine,einc-apply-schedule 2>&1 | filecheck %s

// hoist_fill is refused at the op: where the staging loop runs in parallel (each thread
// needs its own buffer) and where the buffer has no constant fill (a cache_read without a
// halo); prefetch ... spread where the spread loop is not inside the prefetch's loop.

// CHECK: invalid_hoist_fill.mlir:[[# @LINE + 15]]:3: error: cannot hoist the fill of 'A_local' out of {{.*}}: the loop runs in parallel
func.func @parallel(%A: tensor<8x6xf32> {ein.name = "A"}, %B: tensor<6x16xf32> {ein.name = "B"}) -> tensor<8x16xf32> {
  %C = ein.einsum "C" add parallel [N = 8, M = 16] reduce [K = 6] : tensor<8x16xf32> {
  ^bb0(%N : index, %M : index, %K : index):
    %a = ein.load %A[%N, %K] : tensor<8x6xf32>
    %b = ein.load %B[%K, %M] : tensor<6x16xf32>
    %p = arith.mulf %a, %b : f32
    ein.yield %p : f32
  }
  func.return %C : tensor<8x16xf32>
}
transform.named_sequence @__transform_main(%root: !transform.any_op) {
  %n = transform.einc.match stmt "C" axis "N" in %root
  transform.einc.parallelize %n
  %a = transform.einc.cache_read "A" at %n
  transform.einc.hoist_fill %a
  transform.yield
}

// -----

// CHECK: invalid_hoist_fill.mlir:[[# @LINE + 14]]:3: error: cannot hoist the fill of 'A_local' out of {{.*}}: no nest of it stores only a constant
func.func @no_fill(%A: tensor<8x6xf32> {ein.name = "A"}, %B: tensor<6x16xf32> {ein.name = "B"}) -> tensor<8x16xf32> {
  %C = ein.einsum "C" add parallel [N = 8, M = 16] reduce [K = 6] : tensor<8x16xf32> {
  ^bb0(%N : index, %M : index, %K : index):
    %a = ein.load %A[%N, %K] : tensor<8x6xf32>
    %b = ein.load %B[%K, %M] : tensor<6x16xf32>
    %p = arith.mulf %a, %b : f32
    ein.yield %p : f32
  }
  func.return %C : tensor<8x16xf32>
}
transform.named_sequence @__transform_main(%root: !transform.any_op) {
  %n = transform.einc.match stmt "C" axis "N" in %root
  %a = transform.einc.cache_read "A" at %n
  transform.einc.hoist_fill %a
  transform.yield
}

// -----

// CHECK: invalid_hoist_fill.mlir:[[# @LINE + 14]]:3: error: prefetch of 'A' at {{.*}}: {{.*}} to spread it over is not a loop inside it
func.func @spread_outside(%A: tensor<8x6xf32> {ein.name = "A"}, %B: tensor<6x16xf32> {ein.name = "B"}) -> tensor<8x16xf32> {
  %C = ein.einsum "C" add parallel [N = 8, M = 16] reduce [K = 6] : tensor<8x16xf32> {
  ^bb0(%N : index, %M : index, %K : index):
    %a = ein.load %A[%N, %K] : tensor<8x6xf32>
    %b = ein.load %B[%K, %M] : tensor<6x16xf32>
    %p = arith.mulf %a, %b : f32
    ein.yield %p : f32
  }
  func.return %C : tensor<8x16xf32>
}
transform.named_sequence @__transform_main(%root: !transform.any_op) {
  %n = transform.einc.match stmt "C" axis "N" in %root
  %m = transform.einc.match stmt "C" axis "M" in %root
  %p = transform.einc.prefetch "A" at %m by 1 spread %n
  transform.yield
}
