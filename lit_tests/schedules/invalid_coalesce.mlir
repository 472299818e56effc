// RUN: not einc-opt %s --split-input-file -p convert-ein-to-affine,einc-apply-schedule 2>&1 | filecheck %s

// A reduction loop whose body is the loads and the store, not a loop: no nest of two loops
// to coalesce; refused at the op, and the module is not printed.

// CHECK: invalid_coalesce.mlir:[[# @LINE + 14]]:{{[0-9]+}}: error: cannot coalesce loop K of C: loop K of C is not a perfect nest of 2 loops (its body is not a single loop)
// CHECK-NOT: func.func
func.func @matmul(%A: tensor<4x6xf32> {ein.name = "A"}, %B: tensor<6x8xf32> {ein.name = "B"}) -> tensor<4x8xf32> {
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
  %k = transform.einc.match stmt "C" axis "K" in %root
  %p = transform.einc.coalesce %k by 2
  transform.yield
}

// -----

// A tile loop's `min` bound (8 by 3): the trip count of the inner loop changes with the outer
// one, so no product of trip counts is the coalesced loop's.

// CHECK: invalid_coalesce.mlir:[[# @LINE + 14]]:{{[0-9]+}}: error: cannot coalesce loop M.i of C: its bounds are not constants
func.func @tail(%A: tensor<4x6xf32> {ein.name = "A"}, %B: tensor<6x8xf32> {ein.name = "B"}) -> tensor<4x8xf32> {
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
  %m = transform.einc.match stmt "C" axis "M" in %root
  %o, %i = transform.einc.tile %m by 3
  %p = transform.einc.coalesce %o by 2
  transform.yield
}

// -----

// A loop already marked parallel: coalesce comes first.

// CHECK: invalid_coalesce.mlir:[[# @LINE + 14]]:{{[0-9]+}}: error: cannot coalesce loop N of C: it is already marked einc.parallel (coalesce before)
func.func @marked(%A: tensor<4x6xf32> {ein.name = "A"}, %B: tensor<6x8xf32> {ein.name = "B"}) -> tensor<4x8xf32> {
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
  %p = transform.einc.coalesce %n by 2
  transform.yield
}
