// RUN: einc-opt %s -p 'convert-ein-to-affine,einc-apply-schedule,convert-affine-to-egpu{target="opencl"}' | filecheck %s

// double_buffer of the A tile staged at the reduction loop K.o (3 tiles of 2): the buffer
// has two slots; tile 0 is copied into slot 0 before the loop, then one barrier; each
// iteration prefetches tile K.o + 2 into the other slot while the compute reads slot
// (K.o / 2) % 2; one barrier per iteration, at its end.

// CHECK-LABEL: egpu.func @double_buffered_C_1(
// CHECK:         %[[S:.*]] = egpu.alloc_shared : memref<2x4x2xf32>
// CHECK:         scf.for
// CHECK:           affine.store {{.*}}, %[[S]][%{{.*}}, %A_c0, %A_c1]
// CHECK:         egpu.barrier
// CHECK-NEXT:    affine.for %[[KO:K_o]] = 0 to 6 step 2 {
// CHECK-NEXT:      %[[NEXT:.*]] = affine.apply affine_map<(d0) -> ((d0 + 2))> (%[[KO]])
// CHECK-NEXT:      %[[CUR:.*]] = affine.apply affine_map<(d0) -> (((d0 floordiv 2) mod 2))> (%[[KO]])
// CHECK-NEXT:      %[[OTHER:.*]] = affine.apply affine_map<(d0) -> ((((d0 floordiv 2) + 1) mod 2))> (%[[KO]])
// CHECK-NEXT:      %[[END:.*]] = arith.constant 6 : index
// CHECK-NEXT:      %[[MORE:.*]] = arith.cmpi slt, %[[NEXT]], %[[END]] : index
// CHECK-NEXT:      scf.if %[[MORE]] {
// CHECK:             affine.load %A[{{.*}}%[[NEXT]]
// CHECK:             affine.store {{.*}}, %[[S]][%[[OTHER]],
// CHECK:           }
// CHECK-NOT:       egpu.barrier
// CHECK:           affine.load %[[S]][%[[CUR]],
// CHECK:           egpu.barrier
// CHECK-NEXT:    } {einc.stmt = "C", einc.axis = "K.o"}
func.func @double_buffered(%A: tensor<8x6xf32> {ein.name = "A"}, %B: tensor<6x8xf32> {ein.name = "B"}) -> tensor<8x8xf32> {
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
  %w = transform.einc.cache_write "C" at %d in "local"
  %s = transform.einc.cache_read "A" at %e in "shared"
  transform.einc.double_buffer %s
  transform.yield
}
