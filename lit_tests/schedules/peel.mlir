// RUN: einc-opt %s --split-input-file -p convert-ein-to-affine,einc-apply-schedule | filecheck %s

// N (10 iterations) peeled by 4: the loop keeps 0..8, a copy runs 8..10 (einc.tail); then
// the main loop is tiled by 4 without a `min` bound and its tile loop unrolls.

// CHECK-LABEL: func.func @peel_then_tile_and_unroll(
// CHECK:         affine.for %[[NO:.*]] = 0 to 8 step 4 {
// CHECK-NEXT:      %[[C0:.*]] = arith.constant 0 : index
// CHECK-NEXT:      affine.for %{{.*}} = 0 to 8 {
// CHECK-NEXT:        affine.for %{{.*}} = 0 to 6 {
// CHECK-NEXT:          affine.load %{{.*}}[%[[NO]] + %[[C0]], %{{.*}}]
// CHECK:         } {einc.stmt = "C", einc.axis = "N.o"}
// CHECK-NEXT:    affine.for %{{.*}} = 8 to 10 {
// CHECK:         } {einc.stmt = "C", einc.axis = "N", einc.tail}
// CHECK-NEXT:    func.return
func.func @peel_then_tile_and_unroll(%A: tensor<10x6xf32> {ein.name = "A"}, %B: tensor<6x8xf32> {ein.name = "B"}) -> tensor<10x8xf32> {
  %C = ein.einsum "C" add parallel [N = 10, M = 8] reduce [K = 6] : tensor<10x8xf32> {
  ^bb0(%N : index, %M : index, %K : index):
    %a = ein.load %A[%N, %K] : tensor<10x6xf32>
    %b = ein.load %B[%K, %M] : tensor<6x8xf32>
    %p = arith.mulf %a, %b : f32
    ein.yield %p : f32
  }
  func.return %C : tensor<10x8xf32>
}
transform.named_sequence @__transform_main(%root: !transform.any_op) {
  %n = transform.einc.match stmt "C" axis "N" in %root
  %main, %rest = transform.einc.peel %n by 4
  %no, %ni = transform.einc.tile %main by 4
  %u = transform.einc.unroll %ni by 4
  transform.yield
}

// -----

// A size dividing the trip count leaves the loop whole: the remainder handle is empty.

// CHECK-LABEL: func.func @peel_dividing(
// CHECK:         affine.for %{{.*}} = 0 to 8 {
// CHECK-NOT:     einc.tail
// CHECK:         func.return
func.func @peel_dividing(%A: tensor<8xf32> {ein.name = "A"}) -> tensor<8xf32> {
  %C = ein.einsum "C" assign parallel [N = 8] : tensor<8xf32> {
  ^bb0(%N : index):
    %a = ein.load %A[%N] : tensor<8xf32>
    ein.yield %a : f32
  }
  func.return %C : tensor<8xf32>
}
transform.named_sequence @__transform_main(%root: !transform.any_op) {
  %n = transform.einc.match stmt "C" axis "N" in %root
  %main, %rest = transform.einc.peel %n by 4
  transform.yield
}

// -----

// Tile first (10 by 4: the inner loop gets a min), then peel the tile loop by 1 (MLIR's
// loop.peel): the whole tiles keep 0..8 and their inner loop's min, decided there, becomes
// 4, so it unrolls; the partial tile 8..10 keeps its min.

// CHECK-LABEL: func.func @tile_then_peel_the_partial_tile(
// CHECK:         affine.for %{{.*}} = 0 to 8 step 4 {
// CHECK-NOT:       min
// CHECK:         } {einc.stmt = "C", einc.axis = "N.o"}
// CHECK-NEXT:    affine.for %[[R:.*]] = 8 to 10 step 4 {
// CHECK-NEXT:      affine.for %{{.*}} = 0 to min affine_map<(d0) -> (4, ((d0 * -1) + 10))>(%[[R]]) {
// CHECK:         } {einc.stmt = "C", einc.axis = "N.o", einc.tail}
func.func @tile_then_peel_the_partial_tile(%A: tensor<10x6xf32> {ein.name = "A"}, %B: tensor<6x8xf32> {ein.name = "B"}) -> tensor<10x8xf32> {
  %C = ein.einsum "C" add parallel [N = 10, M = 8] reduce [K = 6] : tensor<10x8xf32> {
  ^bb0(%N : index, %M : index, %K : index):
    %a = ein.load %A[%N, %K] : tensor<10x6xf32>
    %b = ein.load %B[%K, %M] : tensor<6x8xf32>
    %p = arith.mulf %a, %b : f32
    ein.yield %p : f32
  }
  func.return %C : tensor<10x8xf32>
}
transform.named_sequence @__transform_main(%root: !transform.any_op) {
  %n = transform.einc.match stmt "C" axis "N" in %root
  %no, %ni = transform.einc.tile %n by 4
  %main, %rest = transform.einc.peel %no by 1
  %u = transform.einc.unroll %ni by 4
  transform.yield
}
