// RUN: einc-opt %s --split-input-file -p convert-ein-to-affine,einc-apply-schedule | filecheck %s

// CHECK-LABEL: func.func @rfactor_reduction_into_partials(
// CHECK:         %[[RF:.*]] = memref.alloc() {ein.name = "C_rf"} : memref<2x4x8xf32>
// CHECK:         affine.for %[[KRF:K_rf]] = 0 to 2 {
// CHECK-NEXT:      affine.for %[[KI:.*]] = 0 to 3 {
// CHECK:             affine.load %{{.*}}[%{{.*}}, %[[KRF]] * 3 + %[[KI]]]
// CHECK:             affine.store %{{.*}}, %[[RF]][%[[KRF]], %{{.*}}, %{{.*}}]
// CHECK:         } {einc.stmt = "C", einc.axis = "K.rf", einc.rfactor}
// CHECK:         affine.for
// CHECK:         } {einc.stmt = "C", einc.axis = "rf2", einc.combine}
// CHECK:         memref.dealloc %[[RF]]
func.func @rfactor_reduction_into_partials(%A: tensor<4x6xf32> {ein.name = "A"}, %B: tensor<6x8xf32> {ein.name = "B"}) -> tensor<4x8xf32> {
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
  %p, %c = transform.einc.rfactor %k by 2
  transform.yield
}
