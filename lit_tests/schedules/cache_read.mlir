// RUN: einc-opt %s --split-input-file -p convert-ein-to-affine,einc-apply-schedule | filecheck %s

// CHECK-LABEL: func.func @cache_read_whole_input_reused_per_row(
// CHECK:         } {einc.stmt = "C", einc.axis = "N", einc.init}
// CHECK-NEXT:    affine.for %[[N:.*]] = 0 to 4 {
// CHECK-NEXT:      %[[L:.*]] = memref.alloca() {ein.name = "B_local"{{.*}}, alignment = 64 : i64} : memref<6x8xf32>
// CHECK-NEXT:      affine.for %[[C0:.*]] = 0 to 6 {
// CHECK-NEXT:        affine.for %[[C1:.*]] = 0 to 8 {
// CHECK-NEXT:          %[[V:.*]] = affine.load %B[%[[C0]], %[[C1]]]
// CHECK-NEXT:          affine.store %[[V]], %[[L]][%[[C0]], %[[C1]]]
// CHECK-NEXT:        } {einc.stmt = "C", einc.axis = "B.in1", einc.copy, einc.vectorize}
// CHECK-NEXT:      } {einc.stmt = "C", einc.axis = "B.in0", einc.copy}
// CHECK:             affine.load %[[L]][%[[K:.*]], %[[M:.*]]] : memref<6x8xf32>
// CHECK-NOT:       affine.load %B
// CHECK:         } {einc.stmt = "C", einc.axis = "N"}
func.func @cache_read_whole_input_reused_per_row(%A: tensor<4x6xf32> {ein.name = "A"}, %B: tensor<6x8xf32> {ein.name = "B"}) -> tensor<4x8xf32> {
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
  %c = transform.einc.cache_read "B" at %n
  transform.yield
}

// -----

// CHECK-LABEL: func.func @cache_read_input_rows_of_a_tile(
// CHECK:         affine.for %[[NO:N_o]] = 0 to 8 step 2 {
// CHECK-NEXT:      %[[L:.*]] = memref.alloca() {ein.name = "A_local"{{.*}}, alignment = 64 : i64} : memref<2x6xf32>
// CHECK-NEXT:      affine.for %[[C0:.*]] = 0 to 2 {
// CHECK-NEXT:        affine.for %[[C1:.*]] = 0 to 6 {
// CHECK-NEXT:          %[[V:.*]] = affine.load %A[%[[NO]] + %[[C0]], %[[C1]]]
// CHECK-NEXT:          affine.store %[[V]], %[[L]][%[[C0]], %[[C1]]]
// CHECK:           affine.for %[[NI:N_i]] = 0 to 2 {
// CHECK:               affine.load %[[L]][%[[NI]], %[[K:.*]]] : memref<2x6xf32>
// CHECK-NOT:       affine.load %A
// CHECK:         } {einc.stmt = "C", einc.axis = "N.o"}
func.func @cache_read_input_rows_of_a_tile(%A: tensor<8x6xf32> {ein.name = "A"}, %B: tensor<6x8xf32> {ein.name = "B"}) -> tensor<8x8xf32> {
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
  %c = transform.einc.cache_read "A" at %o
  transform.yield
}

// -----

// A packed layout: the local buffer's dimensions in the order `layout` gives (B[K, M] is held
// as B_local[M, K]); the copy loops run the buffer's outermost dimension (M) outermost, then
// the tensor's order (each row of the buffer filled whole), and are not vector loops; the
// body's loads index the buffer in its order.
// CHECK-LABEL: func.func @cache_read_packed_layout(
// CHECK:         } {einc.stmt = "C", einc.axis = "N", einc.init}
// CHECK-NEXT:    affine.for %[[N:.*]] = 0 to 4 {
// CHECK-NEXT:      %[[L:.*]] = memref.alloca() {ein.name = "B_local"{{.*}}, alignment = 64 : i64} : memref<8x6xf32>
// CHECK-NEXT:      affine.for %[[C1:.*]] = 0 to 8 {
// CHECK-NEXT:        affine.for %[[C0:.*]] = 0 to 6 {
// CHECK-NEXT:          %[[V:.*]] = affine.load %B[%[[C0]], %[[C1]]]
// CHECK-NEXT:          affine.store %[[V]], %[[L]][%[[C1]], %[[C0]]]
// CHECK-NEXT:        } {einc.stmt = "C", einc.axis = "B.in0", einc.copy}
// CHECK-NEXT:      } {einc.stmt = "C", einc.axis = "B.in1", einc.copy}
// CHECK:             affine.load %[[L]][%[[M:.*]], %[[K:.*]]] : memref<8x6xf32>
// CHECK-NOT:       affine.load %B
func.func @cache_read_packed_layout(%A: tensor<4x6xf32> {ein.name = "A"}, %B: tensor<6x8xf32> {ein.name = "B"}) -> tensor<4x8xf32> {
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
  %c = transform.einc.cache_read "B" at %n in "local" layout [1, 0]
  transform.yield
}

// -----

// A written tile with a layout: copied in and out through the permuted buffer.
// CHECK-LABEL: func.func @cache_write_packed_layout(
// CHECK:         } {einc.stmt = "C", einc.axis = "N", einc.init}
// CHECK-NEXT:    affine.for %[[N:.*]] = 0 to 4 {
// CHECK-NEXT:      %[[L:.*]] = memref.alloca() {ein.name = "C_local"{{.*}}, alignment = 64 : i64} : memref<8x1xf32>
// CHECK:               affine.store %{{.*}}, %[[L]][%[[C1:.*]], %[[C0:.*]]]
// CHECK:             affine.store %{{.*}}, %[[L]][%[[M:.*]], 0]
// CHECK:             %[[V:.*]] = affine.load %[[L]][%[[D1:.*]], %[[D0:.*]]]
// CHECK-NEXT:        affine.store %[[V]], %C[%[[N]] + %[[D0]], %[[D1]]]
func.func @cache_write_packed_layout(%A: tensor<4x6xf32> {ein.name = "A"}, %B: tensor<6x8xf32> {ein.name = "B"}) -> tensor<4x8xf32> {
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
  %c = transform.einc.cache_write "C" at %n in "local" layout [1, 0]
  transform.yield
}
