// RUN: not einc-opt %s --split-input-file -p 'convert-ein-to-affine,einc-apply-schedule,einc-init-accumulators,einc-vectorize-loops{target=c},einc-stream-stores' 2>&1 | filecheck %s

// stream_stores is refused at the op: on a cache_read tile (nothing written back), on an
// output the kernel reads back (a tile staged inside the reduction loop is copied in from C
// at every K tile), and on a copy-out of vectors no non-temporal store takes (rows of 2 float32: 8 bytes).

// CHECK: invalid_stream_stores.mlir:[[# @LINE + 14]]:3: error: cannot stream the stores of 'A_local': no copy-out writes it back
func.func @stream_a_cache_read(%A: tensor<8x6xf32> {ein.name = "A"}, %B: tensor<6x16xf32> {ein.name = "B"}) -> tensor<8x16xf32> {
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
  %a = transform.einc.cache_read "A" at %n
  transform.einc.stream_stores %a
  transform.yield
}

// -----

// CHECK: invalid_stream_stores.mlir:[[# @LINE + 17]]:3: error: stream_stores: the kernel reads 'C' back
func.func @stream_a_tile_copied_in(%A: tensor<8x6xf32> {ein.name = "A"}, %B: tensor<6x16xf32> {ein.name = "B"}) -> tensor<8x16xf32> {
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
  %m = transform.einc.match stmt "C" axis "M" in %root
  %k = transform.einc.match stmt "C" axis "K" in %root
  %k2, %n2, %m2 = transform.einc.reorder %k, %n, %m
  %c = transform.einc.cache_write "C" at %n2
  transform.einc.stream_stores %c
  transform.yield
}

// -----

// CHECK: invalid_stream_stores.mlir:[[# @LINE + 14]]:3: error: stream_stores: a store into 'C' writes a vector of 8 bytes
func.func @stream_rows_of_two(%A: tensor<8x6xf32> {ein.name = "A"}, %B: tensor<6x2xf32> {ein.name = "B"}) -> tensor<8x2xf32> {
  %C = ein.einsum "C" add parallel [N = 8, M = 2] reduce [K = 6] : tensor<8x2xf32> {
  ^bb0(%N : index, %M : index, %K : index):
    %a = ein.load %A[%N, %K] : tensor<8x6xf32>
    %b = ein.load %B[%K, %M] : tensor<6x2xf32>
    %p = arith.mulf %a, %b : f32
    ein.yield %p : f32
  }
  func.return %C : tensor<8x2xf32>
}
transform.named_sequence @__transform_main(%root: !transform.any_op) {
  %n = transform.einc.match stmt "C" axis "N" in %root
  %c = transform.einc.cache_write "C" at %n
  transform.einc.stream_stores %c
  transform.yield
}
