// RUN: einc-opt %s --split-input-file -p convert-ein-to-affine,einc-apply-schedule | filecheck %s

// A register tile by hand: N (10 rows) tiled by 4, K moved between N.o and N.i, N.i
// unrolled completely: rows 1..3 of the tile each under `k < 10 - N_o` inside K. unswitch
// of K tests the strongest (`3 < 10 - N_o`) once before it: its true version is the whole
// tile's K with no condition; in its false version N_o = 8, the other guards decided (row 1
// kept, rows 2 and 3 gone). The result handle holds the two versions, in program order:
// their M loops are matched in it and vectorized.

// CHECK-LABEL: func.func @unswitch_a_register_tile(
// CHECK:         affine.for %[[NO:.*]] = 0 to 10 step 4 {
// CHECK-NEXT:      %[[V:.*]] = affine.apply affine_map<(d0) -> (((d0 * -1) + 10))> (%[[NO]])
// CHECK-NEXT:      %[[C3:.*]] = arith.constant 3 : index
// CHECK-NEXT:      %[[G:.*]] = arith.cmpi slt, %[[C3]], %[[V]] : index
// CHECK-NEXT:      scf.if %[[G]] {
// CHECK-NEXT:        affine.for %{{.*}} = 0 to 6 {
// CHECK-NOT:           scf.if
// CHECK-COUNT-4:       } {einc.stmt = "C", einc.axis = "M", einc.vectorize}
// CHECK-NEXT:        } {einc.stmt = "C", einc.axis = "K"}
// CHECK-NEXT:      } else {
// CHECK-NEXT:        affine.for %{{.*}} = 0 to 6 {
// CHECK-NOT:           scf.if
// CHECK-COUNT-2:       } {einc.stmt = "C", einc.axis = "M", einc.vectorize}
// CHECK-NEXT:        } {einc.stmt = "C", einc.axis = "K"}
// CHECK-NEXT:      }
// CHECK-NEXT:    } {einc.stmt = "C", einc.axis = "N.o"}
func.func @unswitch_a_register_tile(%A: tensor<10x6xf32> {ein.name = "A"}, %B: tensor<6x8xf32> {ein.name = "B"}) -> tensor<10x8xf32> {
  %C = ein.einsum "C" add parallel [N = 10, M = 8] reduce [K = 6] : tensor<10x8xf32> {
  ^bb0(%N : index, %M : index, %K : index):
    %a = ein.load %A[%N, %K] : tensor<10x6xf32>
    %b = ein.load %B[%K, %M] : tensor<6x8xf32>
    %p = arith.mulf %a, %b : f32
    ein.yield %p : f32
  }
  func.return %C : tensor<10x8xf32>
}
transform.named_sequence @__transform_main(%root: !transform.any_op) {
  %n = transform.einc.match stmt "C" axis "N" in %root
  %k = transform.einc.match stmt "C" axis "K" in %root
  %m = transform.einc.match stmt "C" axis "M" in %root
  %no, %ni = transform.einc.tile %n by 4
  %a, %b, %c, %d = transform.einc.reorder %no, %k, %ni, %m
  %u = transform.einc.unroll %c by 4
  %versions = transform.einc.unswitch %b
  %mv = transform.einc.match stmt "C" axis "M" in %versions
  transform.einc.vectorize %mv
  transform.yield
}

// -----

// The same guards on N (11 rows in tiles of 4: the last tile has 3, v = 11 - N_o): with
// `{max_versions = 2}` only the strongest is hoisted; in the false version (N_o = 8) the
// others are decided anyway, so no guard is left in either.

// CHECK-LABEL: func.func @unswitch_at_most_two_versions(
// CHECK:         scf.if %{{.*}} {
// CHECK-NEXT:      affine.for %{{.*}} = 0 to 6 {
// CHECK-NOT:         scf.if
// CHECK:           } {einc.stmt = "C", einc.axis = "K"}
// CHECK-NEXT:    } else {
// CHECK-NEXT:      affine.for %{{.*}} = 0 to 6 {
// CHECK-NOT:         scf.if
// CHECK:           } {einc.stmt = "C", einc.axis = "K"}
// CHECK-NEXT:    }
// CHECK-NOT:     scf.if
// CHECK:         func.return
func.func @unswitch_at_most_two_versions(%A: tensor<11x6xf32> {ein.name = "A"}, %B: tensor<6x8xf32> {ein.name = "B"}) -> tensor<11x8xf32> {
  %C = ein.einsum "C" add parallel [N = 11, M = 8] reduce [K = 6] : tensor<11x8xf32> {
  ^bb0(%N : index, %M : index, %K : index):
    %a = ein.load %A[%N, %K] : tensor<11x6xf32>
    %b = ein.load %B[%K, %M] : tensor<6x8xf32>
    %p = arith.mulf %a, %b : f32
    ein.yield %p : f32
  }
  func.return %C : tensor<11x8xf32>
}
transform.named_sequence @__transform_main(%root: !transform.any_op) {
  %n = transform.einc.match stmt "C" axis "N" in %root
  %k = transform.einc.match stmt "C" axis "K" in %root
  %m = transform.einc.match stmt "C" axis "M" in %root
  %no, %ni = transform.einc.tile %n by 4
  %a, %b, %c, %d = transform.einc.reorder %no, %k, %ni, %m
  %u = transform.einc.unroll %c by 4
  %versions = transform.einc.unswitch %b {max_versions = 2}
  transform.yield
}
