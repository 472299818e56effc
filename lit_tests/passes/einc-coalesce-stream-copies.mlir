// RUN: einc-opt %s -p 'convert-ein-to-affine,einc-apply-schedule,einc-init-accumulators,einc-coalesce-stream-copies' | filecheck %s

// einc-coalesce-stream-copies: the streamed tile holds two whole rows of C (2 x 48 of an
// 8 x 48 output), which lie one after the other in C, so its copy-out becomes one loop of
// 96 (vectorized later as whole vectors from the tile's start); the copy-in, the zeros
// einc-init-accumulators left, keeps its two loops.

// CHECK:      affine.for %[[I0:.*]] = 0 to 2 {
// CHECK-NEXT:   affine.for %[[I1:.*]] = 0 to 48 {
// CHECK-NEXT:     affine.store %{{.*}}, %C_local[%[[I0]], %[[I1]]]
// CHECK:      affine.for %[[P:.*]] = 0 to 96 {
// CHECK-NEXT:   %[[V:.*]] = affine.load %C_local[%[[P]] floordiv 48, %[[P]] mod 48]
// CHECK-NEXT:   affine.store %[[V]], %C[%N_o + %[[P]] floordiv 48, %[[P]] mod 48]
// CHECK-NEXT: } {einc.stmt = "C", einc.axis = "C.out0.C.out1", einc.copy, einc.vectorize}
func.func @rows_of_a_tile(%A: tensor<8x6xf32> {ein.name = "A"}, %B: tensor<6x48xf32> {ein.name = "B"}) -> tensor<8x48xf32> {
  %C = ein.einsum "C" add parallel [N = 8, M = 48] reduce [K = 6] : tensor<8x48xf32> {
  ^bb0(%N : index, %M : index, %K : index):
    %a = ein.load %A[%N, %K] : tensor<8x6xf32>
    %b = ein.load %B[%K, %M] : tensor<6x48xf32>
    %p = arith.mulf %a, %b : f32
    ein.yield %p : f32
  }
  func.return %C : tensor<8x48xf32>
}
transform.named_sequence @__transform_main(%root: !transform.any_op) {
  %n = transform.einc.match stmt "C" axis "N" in %root
  %o, %i = transform.einc.tile %n by 2
  %c = transform.einc.cache_write "C" at %o
  transform.einc.stream_stores %c
  transform.yield
}
