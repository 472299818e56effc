// RUN: einc-opt %s --split-input-file -p convert-ein-to-affine,einc-apply-schedule | filecheck %s

// CHECK-LABEL: func.func @unroll_with_tail_loop(
// CHECK:         %[[C0:.*]] = arith.constant 0 : index
// CHECK-NEXT:    affine.load %{{.*}}[%{{.*}}, %[[C0]]]
// CHECK:         %[[C3:.*]] = arith.constant 3 : index
// CHECK:         affine.for %{{.*}} = 4 to 6 {
// CHECK:         } {einc.stmt = "C", einc.axis = "K", einc.tail}
func.func @unroll_with_tail_loop(%A: tensor<4x6xf32> {ein.name = "A"}, %B: tensor<6x8xf32> {ein.name = "B"}) -> tensor<4x8xf32> {
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
  %r = transform.einc.unroll %k by 4
  transform.yield
}

// -----

// CHECK-LABEL: func.func @unroll_fully(
// CHECK:         arith.constant 5 : index
// CHECK-NOT:     einc.axis = "K"
// CHECK:       func.return
func.func @unroll_fully(%A: tensor<4x6xf32> {ein.name = "A"}, %B: tensor<6x8xf32> {ein.name = "B"}) -> tensor<4x8xf32> {
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
  %r = transform.einc.unroll %k by 6
  transform.yield
}
