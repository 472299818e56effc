// RUN: einc-opt %s --split-input-file -p convert-ein-to-affine,einc-apply-schedule | filecheck %s

// CHECK-LABEL: func.func @cache_write_output_row_across_reduction(
// CHECK:         } {einc.stmt = "C", einc.axis = "N", einc.init}
// CHECK-NEXT:    affine.for %[[N:.*]] = 0 to 4 {
// CHECK-NEXT:      %[[L:.*]] = memref.alloca() {ein.name = "C_local"{{.*}}, alignment = 64 : i64} : memref<1x8xf32>
// CHECK-NEXT:      affine.for %[[C0:.*]] = 0 to 1 {
// CHECK-NEXT:        affine.for %[[C1:.*]] = 0 to 8 {
// CHECK-NEXT:          %[[V:.*]] = affine.load %C[%[[N]] + %[[C0]], %[[C1]]]
// CHECK-NEXT:          affine.store %[[V]], %[[L]][%[[C0]], %[[C1]]]
// CHECK:           affine.for %[[M:.*]] = 0 to 8 {
// CHECK-NEXT:        affine.for %[[K:.*]] = 0 to 6 {
// CHECK:               %[[ACC:.*]] = affine.load %[[L]][0, %[[M]]]
// CHECK-NEXT:          %[[SUM:.*]] = arith.addf %[[ACC]], %{{.*}} : f32
// CHECK-NEXT:          affine.store %[[SUM]], %[[L]][0, %[[M]]]
// CHECK:           affine.for %[[D0:.*]] = 0 to 1 {
// CHECK-NEXT:        affine.for %[[D1:.*]] = 0 to 8 {
// CHECK-NEXT:          %[[W:.*]] = affine.load %[[L]][%[[D0]], %[[D1]]]
// CHECK-NEXT:          affine.store %[[W]], %C[%[[N]] + %[[D0]], %[[D1]]]
// CHECK-NEXT:        } {einc.stmt = "C", einc.axis = "C.out1", einc.copy, einc.vectorize}
// CHECK-NEXT:      } {einc.stmt = "C", einc.axis = "C.out0", einc.copy}
// CHECK-NEXT:    } {einc.stmt = "C", einc.axis = "N"}
func.func @cache_write_output_row_across_reduction(%A: tensor<4x6xf32> {ein.name = "A"}, %B: tensor<6x8xf32> {ein.name = "B"}) -> tensor<4x8xf32> {
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
  %c = transform.einc.cache_write "C" at %n
  transform.yield
}

// -----

// CHECK-LABEL: func.func @cache_write_tile_of_a_tiled_loop(
// CHECK:         affine.for %[[NO:N_o]] = 0 to 8 step 2 {
// CHECK-NEXT:      %[[L:.*]] = memref.alloca() {ein.name = "C_local"{{.*}}, alignment = 64 : i64} : memref<2x8xf32>
// CHECK:               affine.store %{{.*}}, %[[L]][%[[NI:.*]], %[[M:.*]]] : memref<2x8xf32>
// CHECK:             } {einc.stmt = "C", einc.axis = "N.i"}
// CHECK:               affine.store %{{.*}}, %C[%[[NO]] + %{{.*}}, %{{.*}}] : memref<8x8xf32>
// CHECK:         } {einc.stmt = "C", einc.axis = "N.o"}
func.func @cache_write_tile_of_a_tiled_loop(%A: tensor<8x6xf32> {ein.name = "A"}, %B: tensor<6x8xf32> {ein.name = "B"}) -> tensor<8x8xf32> {
  %C = ein.einsum "C" add parallel [N = 8, M = 8] reduce [K = 6] : tensor<8x8xf32> {
  ^bb0(%N : index, %M : index, %K : index):
    %a = ein.load %A[%N, %K] : tensor<8x6xf32>
    %b = ein.load %B[%K, %M] : tensor<6x8xf32>
    %p = arith.mulf %a, %b : f32
    ein.yield %p : f32
  }
  func.return %C : tensor<8x8xf32>
}
transform.named_sequence @__transform_main(%root: !transform.any_op) {
  %n = transform.einc.match stmt "C" axis "N" in %root
  %o, %i = transform.einc.tile %n by 2
  %c = transform.einc.cache_write "C" at %o
  transform.yield
}
