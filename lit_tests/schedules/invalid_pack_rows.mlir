// RUN: not einc-opt %s --split-input-file -p convert-ein-to-affine,einc-apply-schedule 2>&1 | filecheck %s

// pack_rows is refused at the op: where the staged buffer's reads do not slide with the loop
// (a matmul's A rows staged at N and read whole in every M: no dimension moves with M) and
// where the loop is not beside the buffer's copy-in (the staging loop itself).

// CHECK: invalid_pack_rows.mlir:[[# @LINE + 15]]:3: error: pack_rows: a read of the buffer inside {{.*}} moves 0 dimensions with it, not one
func.func @rows_that_do_not_slide(%A: tensor<8x6xf32> {ein.name = "A"}, %B: tensor<6x16xf32> {ein.name = "B"}) -> tensor<8x16xf32> {
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
  %a = transform.einc.cache_read "A" at %n
  transform.einc.pack_rows %a at %m
  transform.yield
}

// -----

// CHECK: invalid_pack_rows.mlir:[[# @LINE + 14]]:3: error: pack_rows: {{.*}} is not in the block of the staged buffer
func.func @the_staging_loop(%A: tensor<8x6xf32> {ein.name = "A"}, %B: tensor<6x16xf32> {ein.name = "B"}) -> tensor<8x16xf32> {
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
  transform.einc.pack_rows %a at %n
  transform.yield
}
