// RUN: einc-opt %s --split-input-file -p convert-ein-to-affine,einc-apply-schedule | filecheck %s

// CHECK-LABEL: func.func @reorder_matmul_to_ikj(
// CHECK:         } {einc.stmt = "C", einc.axis = "N", einc.init}
// CHECK:         affine.for %{{.*}} = 0 to 4 {
// CHECK-NEXT:      affine.for %{{.*}} = 0 to 6 {
// CHECK-NEXT:        affine.for %{{.*}} = 0 to 8 {
// CHECK:             } {einc.stmt = "C", einc.axis = "M"}
// CHECK-NEXT:      } {einc.stmt = "C", einc.axis = "K"}
// CHECK-NEXT:    } {einc.stmt = "C", einc.axis = "N"}
func.func @reorder_matmul_to_ikj(%A: tensor<4x6xf32> {ein.name = "A"}, %B: tensor<6x8xf32> {ein.name = "B"}) -> tensor<4x8xf32> {
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
  %k = transform.einc.match stmt "C" axis "K" in %root
  %a, %b, %c = transform.einc.reorder %n, %k, %m
  transform.yield
}
