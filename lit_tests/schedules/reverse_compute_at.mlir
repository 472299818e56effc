// RUN: einc-opt %s --split-input-file -p convert-ein-to-affine,einc-apply-schedule | filecheck %s

// relu(C + bias) for row N runs at the end of C's row loop, once the row's reduction over K
// is complete; the epilogue's N loop is dropped (one row per iteration), its M loop kept.

// CHECK-LABEL: func.func @epilogue_after_matmul_row(
// CHECK:         } {einc.stmt = "C", einc.axis = "N", einc.init}
// CHECK-NEXT:    affine.for %[[N:.*]] = 0 to 4 {
// CHECK-NEXT:      affine.for %[[M:.*]] = 0 to 8 {
// CHECK-NEXT:        affine.for %[[K:.*]] = 0 to 6 {
// CHECK:             } {einc.stmt = "C", einc.axis = "K"}
// CHECK-NEXT:      } {einc.stmt = "C", einc.axis = "M"}
// CHECK-NEXT:      affine.for %[[M1:.*]] = 0 to 8 {
// CHECK-NEXT:        affine.load %C[%[[N]], %[[M1]]]
// CHECK-NEXT:        affine.load %E[%[[M1]]]
// CHECK-NEXT:        arith.addf
// CHECK-NEXT:        arith.constant
// CHECK-NEXT:        arith.maximumf
// CHECK-NEXT:        affine.store %{{.*}}, %D[%[[N]], %[[M1]]]
// CHECK-NEXT:      } {einc.stmt = "D", einc.axis = "M"}
// CHECK-NEXT:    } {einc.stmt = "C", einc.axis = "N"}
// CHECK-NEXT:    memref.dealloc %C
func.func @epilogue_after_matmul_row(%A: tensor<4x6xf32> {ein.name = "A"}, %B: tensor<6x8xf32> {ein.name = "B"}, %E: tensor<8xf32> {ein.name = "E"}) -> tensor<4x8xf32> {
  %C = ein.einsum "C" add parallel [N = 4, M = 8] reduce [K = 6] : tensor<4x8xf32> {
  ^bb0(%N: index, %M: index, %K: index):
    %0 = ein.load %A[%N, %K] : tensor<4x6xf32>
    %1 = ein.load %B[%K, %M] : tensor<6x8xf32>
    %2 = arith.mulf %0, %1 : f32
    ein.yield %2 : f32
  }
  %D = ein.einsum "D" assign parallel [N = 4, M = 8] : tensor<4x8xf32> {
  ^bb0(%N_1: index, %M_1: index):
    %3 = ein.load %C[%N_1, %M_1] : tensor<4x8xf32>
    %4 = ein.load %E[%M_1] : tensor<8xf32>
    %5 = arith.addf %3, %4 : f32
    %6 = arith.constant 0.000000e+00 : f32
    %7 = arith.maximumf %5, %6 : f32
    ein.yield %7 : f32
  }
  func.return %D : tensor<4x8xf32>
}
transform.named_sequence @__transform_main(%root: !transform.any_op) {
  %n = transform.einc.match stmt "C" axis "N" in %root
  %d = transform.einc.match stmt "D" in %root
  transform.einc.reverse_compute_at %d at %n
  transform.yield
}

// -----

// At a tile of two rows the epilogue's N loop runs over the tile.

// CHECK-LABEL: func.func @epilogue_after_a_tile_of_rows(
// CHECK:         affine.for %[[NO:.*]] = 0 to 4 step 2 {
// CHECK:           } {einc.stmt = "C", einc.axis = "N.i"}
// CHECK-NEXT:      affine.for %[[NI:.*]] = 0 to 2 {
// CHECK-NEXT:        affine.for %[[M:.*]] = 0 to 8 {
// CHECK-NEXT:          affine.load %C[%[[NO]] + %[[NI]], %[[M]]]
// CHECK:               affine.store %{{.*}}, %D[%[[NO]] + %[[NI]], %[[M]]]
// CHECK-NEXT:        } {einc.stmt = "D", einc.axis = "M"}
// CHECK-NEXT:      } {einc.stmt = "D", einc.axis = "N"}
// CHECK-NEXT:    } {einc.stmt = "C", einc.axis = "N.o"}
func.func @epilogue_after_a_tile_of_rows(%A: tensor<4x6xf32> {ein.name = "A"}, %B: tensor<6x8xf32> {ein.name = "B"}, %E: tensor<8xf32> {ein.name = "E"}) -> tensor<4x8xf32> {
  %C = ein.einsum "C" add parallel [N = 4, M = 8] reduce [K = 6] : tensor<4x8xf32> {
  ^bb0(%N: index, %M: index, %K: index):
    %0 = ein.load %A[%N, %K] : tensor<4x6xf32>
    %1 = ein.load %B[%K, %M] : tensor<6x8xf32>
    %2 = arith.mulf %0, %1 : f32
    ein.yield %2 : f32
  }
  %D = ein.einsum "D" assign parallel [N = 4, M = 8] : tensor<4x8xf32> {
  ^bb0(%N_1: index, %M_1: index):
    %3 = ein.load %C[%N_1, %M_1] : tensor<4x8xf32>
    %4 = ein.load %E[%M_1] : tensor<8xf32>
    %5 = arith.addf %3, %4 : f32
    %6 = arith.constant 0.000000e+00 : f32
    %7 = arith.maximumf %5, %6 : f32
    ein.yield %7 : f32
  }
  func.return %D : tensor<4x8xf32>
}
transform.named_sequence @__transform_main(%root: !transform.any_op) {
  %n = transform.einc.match stmt "C" axis "N" in %root
  %o, %i = transform.einc.tile %n by 2
  %d = transform.einc.match stmt "D" in %root
  transform.einc.reverse_compute_at %d at %o
  transform.yield
}

// -----

// At the M loop each iteration completes one element: the epilogue has no loop left.

// CHECK-LABEL: func.func @epilogue_per_element_after_the_reduction(
// CHECK:         } {einc.stmt = "C", einc.axis = "N", einc.init}
// CHECK-NEXT:    affine.for %[[N:.*]] = 0 to 4 {
// CHECK-NEXT:      affine.for %[[M:.*]] = 0 to 8 {
// CHECK-NEXT:        affine.for %[[K:.*]] = 0 to 6 {
// CHECK:             } {einc.stmt = "C", einc.axis = "K"}
// CHECK-NEXT:        affine.load %C[%[[N]], %[[M]]]
// CHECK-NEXT:        affine.load %E[%[[M]]]
// CHECK:             affine.store %{{.*}}, %D[%[[N]], %[[M]]]
// CHECK-NEXT:      } {einc.stmt = "C", einc.axis = "M"}
// CHECK-NEXT:    } {einc.stmt = "C", einc.axis = "N"}
func.func @epilogue_per_element_after_the_reduction(%A: tensor<4x6xf32> {ein.name = "A"}, %B: tensor<6x8xf32> {ein.name = "B"}, %E: tensor<8xf32> {ein.name = "E"}) -> tensor<4x8xf32> {
  %C = ein.einsum "C" add parallel [N = 4, M = 8] reduce [K = 6] : tensor<4x8xf32> {
  ^bb0(%N: index, %M: index, %K: index):
    %0 = ein.load %A[%N, %K] : tensor<4x6xf32>
    %1 = ein.load %B[%K, %M] : tensor<6x8xf32>
    %2 = arith.mulf %0, %1 : f32
    ein.yield %2 : f32
  }
  %D = ein.einsum "D" assign parallel [N = 4, M = 8] : tensor<4x8xf32> {
  ^bb0(%N_1: index, %M_1: index):
    %3 = ein.load %C[%N_1, %M_1] : tensor<4x8xf32>
    %4 = ein.load %E[%M_1] : tensor<8xf32>
    %5 = arith.addf %3, %4 : f32
    %6 = arith.constant 0.000000e+00 : f32
    %7 = arith.maximumf %5, %6 : f32
    ein.yield %7 : f32
  }
  func.return %D : tensor<4x8xf32>
}
transform.named_sequence @__transform_main(%root: !transform.any_op) {
  %m = transform.einc.match stmt "C" axis "M" in %root
  %d = transform.einc.match stmt "D" in %root
  transform.einc.reverse_compute_at %d at %m
  transform.yield
}
