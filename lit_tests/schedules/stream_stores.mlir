// RUN: einc-opt %s -p 'convert-ein-to-affine,einc-apply-schedule,einc-init-accumulators,einc-vectorize-loops{target=c},einc-stream-stores' | filecheck %s

// stream_stores marks the copy-out stores of a cache_write tile (einc.stream, with the op's
// location), which einc-vectorize-loops keeps on the vector store and einc-stream-stores
// accepts (whole vectors, C never read back: the tile starts at zero); the tile's
// initialisation and the compute's stores stay unmarked.

// CHECK-LABEL: func.func @stream_stores_of_a_row_tile(
// CHECK:         affine.for %[[NO:N_o]] = 0 to 8 step 2 {
// CHECK-NEXT:      %[[L:.*]] = memref.alloca() {ein.name = "C_local"{{.*}}} : memref<2x16xf32>
// CHECK-NOT:       einc.stream
// CHECK:           %[[W:.*]] = egpu.vload %[[L]][%{{.*}}, %{{.*}}]
// CHECK-NEXT:      %[[R:.*]] = affine.apply
// CHECK-NEXT:      egpu.vstore %[[W]], %C[%[[R]], %{{.*}}] {einc.stream = "{{.*}}stream_stores.mlir:31:3"} : vector<{{[0-9]+}}xf32>, memref<8x16xf32>
// CHECK-NOT:       einc.stream
// CHECK:         } {einc.stmt = "C", einc.axis = "N.o"}
func.func @stream_stores_of_a_row_tile(%A: tensor<8x6xf32> {ein.name = "A"}, %B: tensor<6x16xf32> {ein.name = "B"}) -> tensor<8x16xf32> {
  %C = ein.einsum "C" add parallel [N = 8, M = 16] reduce [K = 6] : tensor<8x16xf32> {
  ^bb0(%N : index, %M : index, %K : index):
    %a = ein.load %A[%N, %K] : tensor<8x6xf32>
    %b = ein.load %B[%K, %M] : tensor<6x16xf32>
    %p = arith.mulf %a, %b : f32
    ein.yield %p : f32
  }
  func.return %C : tensor<8x16xf32>
}
transform.named_sequence @__transform_main(%root: !transform.any_op) {
  %n = transform.einc.match stmt "C" axis "N" in %root
  %o, %i = transform.einc.tile %n by 2
  %c = transform.einc.cache_write "C" at %o
  transform.einc.stream_stores %c
  transform.yield
}
