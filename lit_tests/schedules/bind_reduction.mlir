// RUN: einc-opt %s --split-input-file -p convert-ein-to-affine,einc-apply-schedule | filecheck %s

// A reduction loop (K.i of a max) bound to thread.x: legal, the threads combine partials
// (convert-affine-to-egpu); the output loop N on block.x, K.o stays sequential.

// CHECK-LABEL: func.func @bind_reduction_tile_to_threads(
// CHECK:         } {einc.stmt = "C", einc.axis = "N", einc.init}
// CHECK-NEXT:    affine.for %[[N:.*]] = 0 to 4 {
// CHECK-NEXT:      affine.for %[[KO:.*]] = 0 to 40 step 16 {
// CHECK-NEXT:        affine.for %[[KI:.*]] = 0 to min affine_map<(d0) -> (16, ((d0 * -1) + 40))>(%[[KO]]) {
// CHECK-NEXT:          %[[A:.*]] = affine.load %{{.*}}[%[[N]], %[[KO]] + %[[KI]]] : memref<4x40xf32>
// CHECK-NEXT:          %[[C:.*]] = affine.load %[[OUT:.*]][%[[N]]] : memref<4xf32>
// CHECK-NEXT:          %[[M:.*]] = arith.maximumf %[[C]], %[[A]] : f32
// CHECK-NEXT:          affine.store %[[M]], %[[OUT]][%[[N]]] : memref<4xf32>
// CHECK-NEXT:        } {einc.stmt = "C", einc.axis = "K.i", einc.bind_loc = "{{.*}}bind_reduction.mlir:31:3", einc.bind = "thread.x"}
// CHECK-NEXT:      } {einc.stmt = "C", einc.axis = "K.o"}
// CHECK-NEXT:    } {einc.stmt = "C", einc.axis = "N", einc.bind_loc = "{{.*}}bind_reduction.mlir:30:3", einc.bind = "block.x"}
func.func @bind_reduction_tile_to_threads(%A: tensor<4x40xf32> {ein.name = "A"}) -> tensor<4xf32> {
  %C = ein.einsum "C" max parallel [N = 4] reduce [K = 40] : tensor<4xf32> {
  ^bb0(%N : index, %K : index):
    %a = ein.load %A[%N, %K] : tensor<4x40xf32>
    ein.yield %a : f32
  }
  func.return %C : tensor<4xf32>
}
transform.named_sequence @__transform_main(%root: !transform.any_op) {
  %n = transform.einc.match stmt "C" axis "N" in %root
  %k = transform.einc.match stmt "C" axis "K" in %root
  %ko, %ki = transform.einc.tile %k by 16
  transform.einc.bind %n to "block.x"
  transform.einc.bind %ki to "thread.x"
  transform.yield
}

// -----

// The whole reduction loop on threads (40 iterations, within the thread limit): each
// thread one element, then the block combines.

// CHECK-LABEL: func.func @bind_whole_reduction_to_threads(
// CHECK:           } {einc.stmt = "C", einc.axis = "K", einc.bind_loc = "{{.*}}bind_reduction.mlir:55:3", einc.bind = "thread.x"}
// CHECK-NEXT:    } {einc.stmt = "C", einc.axis = "N", einc.bind_loc = "{{.*}}bind_reduction.mlir:54:3", einc.bind = "block.x"}
func.func @bind_whole_reduction_to_threads(%A: tensor<4x40xi32> {ein.name = "A"}) -> tensor<4xi32> {
  %C = ein.einsum "C" add parallel [N = 4] reduce [K = 40] : tensor<4xi32> {
  ^bb0(%N : index, %K : index):
    %a = ein.load %A[%N, %K] : tensor<4x40xi32>
    ein.yield %a : i32
  }
  func.return %C : tensor<4xi32>
}
transform.named_sequence @__transform_main(%root: !transform.any_op) {
  %n = transform.einc.match stmt "C" axis "N" in %root
  %k = transform.einc.match stmt "C" axis "K" in %root
  transform.einc.bind %n to "block.x"
  transform.einc.bind %k to "thread.x" max_threads 64
  transform.yield
}
