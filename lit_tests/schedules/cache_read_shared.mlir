// RUN: einc-opt %s --split-input-file -p convert-ein-to-affine,einc-apply-schedule | filecheck %s

// cache_read in "shared" at the reduction-tile loop K.o, inside the block- and thread-bound
// tile loops: the box is A's footprint over all threads of the block (N.i ranges over it,
// not only K.i), offset by the block's row N.o and by K.o; the alloca and the copy nest are
// marked for convert-affine-to-egpu, every load of A reads the buffer.

// CHECK-LABEL: func.func @cache_read_shared_tile_of_all_threads(
// CHECK:         affine.for %[[NO:N_o]] = 0 to 8 step 4 {
// CHECK:             affine.for %[[NI:N_i]] = 0 to 4 {
// CHECK:                 affine.for %[[KO:K_o]] = 0 to 8 step 2 {
// CHECK-NEXT:              %[[S:.*]] = memref.alloca() {ein.name = "A_shared", einc.memory = "shared"{{.*}}, alignment = 64 : i64} : memref<4x2xf32>
// CHECK-NEXT:              affine.for %[[C0:.*]] = 0 to 4 {
// CHECK-NEXT:                affine.for %[[C1:.*]] = 0 to 2 {
// CHECK-NEXT:                  %[[V:.*]] = affine.load %A[%[[NO]] + %[[C0]], %[[KO]] + %[[C1]]] : memref<8x8xf32>
// CHECK-NEXT:                  affine.store %[[V]], %[[S]][%[[C0]], %[[C1]]] : memref<4x2xf32>
// CHECK-NEXT:                } {einc.stmt = "C", einc.axis = "A.in1", einc.copy}
// CHECK-NEXT:              } {einc.stmt = "C", einc.axis = "A.in0", einc.copy, einc.shared = "in"}
// CHECK-NEXT:              affine.for %[[KI:K_i]] = 0 to 2 {
// CHECK-NEXT:                affine.load %[[S]][%[[NI]], %[[KI]]] : memref<4x2xf32>
// CHECK-NOT:               affine.load %A
// CHECK:                 } {einc.stmt = "C", einc.axis = "K.o"}
func.func @cache_read_shared_tile_of_all_threads(%A: tensor<8x8xf32> {ein.name = "A"}, %B: tensor<8x8xf32> {ein.name = "B"}) -> tensor<8x8xf32> {
  %C = ein.einsum "C" add parallel [N = 8, M = 8] reduce [K = 8] : tensor<8x8xf32> {
  ^bb0(%N : index, %M : index, %K : index):
    %a = ein.load %A[%N, %K] : tensor<8x8xf32>
    %b = ein.load %B[%K, %M] : tensor<8x8xf32>
    %p = arith.mulf %a, %b : f32
    ein.yield %p : f32
  }
  func.return %C : tensor<8x8xf32>
}
transform.named_sequence @__transform_main(%root: !transform.any_op) {
  %n = transform.einc.match stmt "C" axis "N" in %root
  %m = transform.einc.match stmt "C" axis "M" in %root
  %k = transform.einc.match stmt "C" axis "K" in %root
  %no, %ni = transform.einc.tile %n by 4
  %mo, %mi = transform.einc.tile %m by 4
  %ko, %ki = transform.einc.tile %k by 2
  %a, %b, %c, %d, %e, %f = transform.einc.reorder %no, %mo, %ni, %mi, %ko, %ki
  transform.einc.bind %a to "block.y"
  transform.einc.bind %b to "block.x"
  transform.einc.bind %c to "thread.y"
  transform.einc.bind %d to "thread.x"
  %s = transform.einc.cache_read "A" at %e in "shared"
  transform.yield
}

// -----

// Partial tiles (10 rows by 4, 6 columns by 4): the box may overhang the tensor, so the copy
// skips elements past its end (no in-range thread reads them).

// CHECK-LABEL: func.func @cache_read_shared_partial_tiles(
// CHECK:         affine.for %[[KO:K_o]] = 0 to 6 step 4 {
// CHECK-NEXT:      %[[S:.*]] = memref.alloca() {ein.name = "A_shared", einc.memory = "shared"{{.*}}, alignment = 64 : i64} : memref<4x4xf32>
// CHECK-NEXT:      affine.for %[[C0:.*]] = 0 to 4 {
// CHECK-NEXT:        affine.for %[[C1:.*]] = 0 to 4 {
// CHECK-NEXT:          %[[R:.*]] = affine.apply affine_map<(d0, d1, d2, d3) -> ((d0 + d2))> (%[[NO:.*]], %[[KO]], %[[C0]], %[[C1]])
// CHECK-NEXT:          %[[TEN:.*]] = arith.constant 10 : index
// CHECK-NEXT:          %[[IN0:.*]] = arith.cmpi slt, %[[R]], %[[TEN]] : index
// CHECK-NEXT:          %[[COL:.*]] = affine.apply affine_map<(d0, d1, d2, d3) -> ((d1 + d3))> (%[[NO]], %[[KO]], %[[C0]], %[[C1]])
// CHECK-NEXT:          %[[SIX:.*]] = arith.constant 6 : index
// CHECK-NEXT:          %[[IN1:.*]] = arith.cmpi slt, %[[COL]], %[[SIX]] : index
// CHECK-NEXT:          %[[IN:.*]] = arith.andi %[[IN0]], %[[IN1]] : i1
// CHECK-NEXT:          scf.if %[[IN]] {
// CHECK-NEXT:            %[[V:.*]] = affine.load %A[%[[NO]] + %[[C0]], %[[KO]] + %[[C1]]] : memref<10x6xf32>
// CHECK-NEXT:            affine.store %[[V]], %[[S]][%[[C0]], %[[C1]]] : memref<4x4xf32>
// CHECK-NEXT:          }

func.func @cache_read_shared_partial_tiles(%A: tensor<10x6xf32> {ein.name = "A"}) -> tensor<10xf32> {
  %C = ein.einsum "C" add parallel [N = 10] reduce [K = 6] : tensor<10xf32> {
  ^bb0(%N : index, %K : index):
    %a = ein.load %A[%N, %K] : tensor<10x6xf32>
    ein.yield %a : f32
  }
  func.return %C : tensor<10xf32>
}
transform.named_sequence @__transform_main(%root: !transform.any_op) {
  %n = transform.einc.match stmt "C" axis "N" in %root
  %k = transform.einc.match stmt "C" axis "K" in %root
  %no, %ni = transform.einc.tile %n by 4
  %ko, %ki = transform.einc.tile %k by 4
  transform.einc.bind %no to "block.x"
  transform.einc.bind %ni to "thread.x"
  %s = transform.einc.cache_read "A" at %ko in "shared"
  transform.yield
}

// -----

// A shared tile with a layout (the device defaults' transposed staging): A[N, K] held as
// [K, N] — the copy reads A in its own order and writes the buffer transposed, and the
// compute reads it with K first.

// CHECK-LABEL: func.func @cache_read_shared_transposed(
// CHECK:                 affine.for %[[KO:K_o]] = 0 to 8 step 2 {
// CHECK-NEXT:              %[[S:.*]] = memref.alloca() {ein.name = "A_shared", einc.memory = "shared"{{.*}}, alignment = 64 : i64} : memref<2x4xf32>
// CHECK-NEXT:              affine.for %[[C0:.*]] = 0 to 4 {
// CHECK-NEXT:                affine.for %[[C1:.*]] = 0 to 2 {
// CHECK-NEXT:                  %[[V:.*]] = affine.load %A[%{{.*}} + %[[C0]], %[[KO]] + %[[C1]]] : memref<8x8xf32>
// CHECK-NEXT:                  affine.store %[[V]], %[[S]][%[[C1]], %[[C0]]] : memref<2x4xf32>
// CHECK-NEXT:                } {einc.stmt = "C", einc.axis = "A.in1", einc.copy}
// CHECK-NEXT:              } {einc.stmt = "C", einc.axis = "A.in0", einc.copy, einc.shared = "in"}
// CHECK-NEXT:              affine.for %[[KI:K_i]] = 0 to 2 {
// CHECK-NEXT:                affine.load %[[S]][%[[KI]], %{{.*}}] : memref<2x4xf32>
// CHECK-NOT:               affine.load %A
// CHECK:                 } {einc.stmt = "C", einc.axis = "K.o"}
func.func @cache_read_shared_transposed(%A: tensor<8x8xf32> {ein.name = "A"}, %B: tensor<8x8xf32> {ein.name = "B"}) -> tensor<8x8xf32> {
  %C = ein.einsum "C" add parallel [N = 8, M = 8] reduce [K = 8] : tensor<8x8xf32> {
  ^bb0(%N : index, %M : index, %K : index):
    %a = ein.load %A[%N, %K] : tensor<8x8xf32>
    %b = ein.load %B[%K, %M] : tensor<8x8xf32>
    %p = arith.mulf %a, %b : f32
    ein.yield %p : f32
  }
  func.return %C : tensor<8x8xf32>
}
transform.named_sequence @__transform_main(%root: !transform.any_op) {
  %n = transform.einc.match stmt "C" axis "N" in %root
  %m = transform.einc.match stmt "C" axis "M" in %root
  %k = transform.einc.match stmt "C" axis "K" in %root
  %no, %ni = transform.einc.tile %n by 4
  %mo, %mi = transform.einc.tile %m by 4
  %ko, %ki = transform.einc.tile %k by 2
  %a, %b, %c, %d, %e, %f = transform.einc.reorder %no, %mo, %ni, %mi, %ko, %ki
  transform.einc.bind %a to "block.y"
  transform.einc.bind %b to "block.x"
  transform.einc.bind %c to "thread.y"
  transform.einc.bind %d to "thread.x"
  %s = transform.einc.cache_read "A" at %e in "shared" layout [1, 0]
  transform.yield
}
