// RUN: not einc-opt %s --split-input-file -p 'convert-ein-to-affine,einc-apply-schedule' 2>&1 | filecheck %s

// unswitch is refused at the op where the loop has no guard to hoist: K of a plain matmul
// (no guard at all), and N.o of a tile unrolled under guards (they test N.o itself).

// CHECK: invalid_unswitch.mlir:[[# @LINE + 13]]:3: error: cannot unswitch loop K of C: no guard in its body (an if outside any inner loop) has a condition the loop does not change, in whole or in a conjunct: nothing to hoist
func.func @unswitch_without_a_guard(%A: tensor<8x6xf32> {ein.name = "A"}, %B: tensor<6x16xf32> {ein.name = "B"}) -> tensor<8x16xf32> {
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
  %k = transform.einc.match stmt "C" axis "K" in %root
  %v = transform.einc.unswitch %k
  transform.yield
}

// -----

// CHECK: invalid_unswitch.mlir:[[# @LINE + 15]]:3: error: cannot unswitch loop N.o of C: no guard in its body
func.func @unswitch_the_loop_the_guards_test(%A: tensor<10x6xf32> {ein.name = "A"}, %B: tensor<6x16xf32> {ein.name = "B"}) -> tensor<10x16xf32> {
  %C = ein.einsum "C" add parallel [N = 10, M = 16] reduce [K = 6] : tensor<10x16xf32> {
  ^bb0(%N : index, %M : index, %K : index):
    %a = ein.load %A[%N, %K] : tensor<10x6xf32>
    %b = ein.load %B[%K, %M] : tensor<6x16xf32>
    %p = arith.mulf %a, %b : f32
    ein.yield %p : f32
  }
  func.return %C : tensor<10x16xf32>
}
transform.named_sequence @__transform_main(%root: !transform.any_op) {
  %n = transform.einc.match stmt "C" axis "N" in %root
  %no, %ni = transform.einc.tile %n by 4
  %u = transform.einc.unroll %ni by 4
  %v = transform.einc.unswitch %no
  transform.yield
}

// -----

// CHECK: invalid_unswitch.mlir:[[# @LINE + 13]]:51: error: unswitch max_versions 1 is not in 2..64
func.func @unswitch_into_one_version(%A: tensor<8x6xf32> {ein.name = "A"}, %B: tensor<6x16xf32> {ein.name = "B"}) -> tensor<8x16xf32> {
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
  %k = transform.einc.match stmt "C" axis "K" in %root
  %v = transform.einc.unswitch %k {max_versions = 1}
  transform.yield
}
