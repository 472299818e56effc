// RUN: einc-opt %s --split-input-file -p convert-ein-to-affine,einc-apply-schedule | filecheck %s

// CHECK-LABEL: func.func @fuse_init_into_reduction(
// CHECK:         affine.for %[[N:.*]] = 0 to 4 {
// CHECK-NEXT:      affine.for %{{.*}} = 0 to 8 {
// CHECK-NEXT:        affine.store %{{.*}}, %{{.*}}[%[[N]], %{{.*}}]
// CHECK-NEXT:      } {einc.stmt = "C", einc.axis = "M", einc.init}
// CHECK-NEXT:      affine.for %{{.*}} = 0 to 8 {
// CHECK-NEXT:        affine.for %{{.*}} = 0 to 6 {
// CHECK:         } {einc.stmt = "C", einc.axis = "N"}
// CHECK-NOT:     affine.for
func.func @fuse_init_into_reduction(%A: tensor<4x6xf32> {ein.name = "A"}, %B: tensor<6x8xf32> {ein.name = "B"}) -> tensor<4x8xf32> {
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
  %i = transform.einc.match stmt "C" axis "N" init in %root
  %n = transform.einc.match stmt "C" axis "N" in %root
  %f = transform.einc.fuse %i into %n
  transform.yield
}
