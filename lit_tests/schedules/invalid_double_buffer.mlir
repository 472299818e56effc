// RUN: not einc-opt %s -p 'convert-ein-to-affine,einc-apply-schedule{file="%s"}' 2>&1 | filecheck %s

// double_buffer prefetches the tile of the next iteration: only a shared tile staged at a
// reduction loop (one carrying the accumulation) can be double buffered; N.i.o below is a
// loop over output rows.

func.func @double_buffer_outside_a_reduction(%A: tensor<8x8xf32> {ein.name = "A"}, %B: tensor<8x8xf32> {ein.name = "B"}) -> tensor<8x8xf32> {
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
  %no, %ni = transform.einc.tile %n by 4
  %mo, %mi = transform.einc.tile %m by 4
  %nio, %nii = transform.einc.tile %ni by 2
  %a, %b, %c, %d, %e = transform.einc.reorder %no, %mo, %nio, %mi, %nii
  transform.einc.bind %a to "block.y"
  transform.einc.bind %b to "block.x"
  transform.einc.bind %c to "thread.y"
  transform.einc.bind %d to "thread.x"
  %s = transform.einc.cache_read "A" at %e in "shared"
  transform.einc.double_buffer %s
  transform.yield
}

// CHECK: invalid_double_buffer.mlir:29:3: error: cannot double buffer 'A_shared' at loop N.i.i of C: it is not a reduction loop (the tile of the next iteration is prefetched: stage at the reduction's loop)
