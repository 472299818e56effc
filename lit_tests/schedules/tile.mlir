// RUN: einc-opt %s --split-input-file -p convert-ein-to-affine,einc-apply-schedule | filecheck %s

// CHECK-LABEL: func.func @tile_loop_with_dividing_size(
// CHECK:         affine.for %[[MO:.*]] = 0 to 8 step 4 {
// CHECK-NEXT:      affine.for %[[MI:.*]] = 0 to 4 {
// CHECK:             affine.store %{{.*}}, %{{.*}}[%{{.*}}, %[[MO]] + %[[MI]]]
// CHECK:           } {einc.stmt = "C", einc.axis = "M.i"}
// CHECK-NEXT:    } {einc.stmt = "C", einc.axis = "M.o"}
func.func @tile_loop_with_dividing_size(%A: tensor<4x6xf32> {ein.name = "A"}, %B: tensor<6x8xf32> {ein.name = "B"}) -> tensor<4x8xf32> {
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
  %o, %i = transform.einc.tile %m by 4
  transform.yield
}

// -----

// CHECK-LABEL: func.func @tile_loop_with_tail_uses_min_bound(
// CHECK:         affine.for %[[MO:.*]] = 0 to 8 step 3 {
// CHECK-NEXT:      affine.for %{{.*}} = 0 to min affine_map<(d0) -> (3, ((d0 * -1) + 8))>(%[[MO]]) {
func.func @tile_loop_with_tail_uses_min_bound(%A: tensor<4x6xf32> {ein.name = "A"}, %B: tensor<6x8xf32> {ein.name = "B"}) -> tensor<4x8xf32> {
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
  transform.yield
}

// -----

// CHECK-LABEL: func.func @tile_size_from_knob(
// CHECK:         affine.for %{{.*}} = 0 to 8 step 2 {
// CHECK-NEXT:      affine.for %{{.*}} = 0 to 2 {
func.func @tile_size_from_knob(%A: tensor<4x6xf32> {ein.name = "A"}, %B: tensor<6x8xf32> {ein.name = "B"}) -> tensor<4x8xf32> {
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
  %t = transform.einc.knob "t" = 2 from [2, 4]
  %m = transform.einc.match stmt "C" axis "M" in %root
  %o, %i = transform.einc.tile %m by %t
  transform.yield
}
