// RUN: einc-opt %s --split-input-file -p convert-ein-to-affine,einc-apply-schedule | filecheck %s

// A 1x1 convolution `O[N, F, HO, WO] +=! X[N, C, HO, WO] * W[F, C]`: HO and WO coalesced into
// one loop of 12 iterations (axis HO.WO), each old variable `p floordiv 4`, `p mod 4`;
// the output's and the input's indices stay in bounds per dimension (their row-major flat
// position is `p`, which the printers write without a division).

// CHECK-LABEL: func.func @conv1x1(
// CHECK:         } {einc.stmt = "O", einc.axis = "N", einc.init}
// CHECK-NEXT:    affine.for %[[N:.*]] = 0 to 2 {
// CHECK-NEXT:      affine.for %[[F:.*]] = 0 to 3 {
// CHECK-NEXT:        affine.for %[[P:.*]] = 0 to 12 {
// CHECK-NEXT:          affine.for %[[C:.*]] = 0 to 5 {
// CHECK:                 affine.load %{{.*}}[%[[N]], %[[C]], %[[P]] floordiv 4, %[[P]] mod 4]
// CHECK:                 affine.store %{{.*}}, %{{.*}}[%[[N]], %[[F]], %[[P]] floordiv 4, %[[P]] mod 4]
// CHECK:               } {einc.stmt = "O", einc.axis = "C"}
// CHECK-NEXT:        } {einc.stmt = "O", einc.axis = "HO.WO"}
func.func @conv1x1(%X: tensor<2x5x3x4xf32> {ein.name = "X"}, %W: tensor<3x5xf32> {ein.name = "W"}) -> tensor<2x3x3x4xf32> {
  %O = ein.einsum "O" add parallel [N = 2, F = 3, HO = 3, WO = 4] reduce [C = 5] : tensor<2x3x3x4xf32> {
  ^bb0(%N : index, %F : index, %HO : index, %WO : index, %C : index):
    %x = ein.load %X[%N, %C, %HO, %WO] : tensor<2x5x3x4xf32>
    %w = ein.load %W[%F, %C] : tensor<3x5xf32>
    %p = arith.mulf %x, %w : f32
    ein.yield %p : f32
  }
  func.return %O : tensor<2x3x3x4xf32>
}
transform.named_sequence @__transform_main(%root: !transform.any_op) {
  %ho = transform.einc.match stmt "O" axis "HO" in %root
  %p = transform.einc.coalesce %ho by 2
  transform.yield
}

// -----

// Three loops from the outermost (F, HO, WO: 36 iterations), then the coalesced loop tiled
// like any other: its variable's pieces are `p floordiv 12`, `(p floordiv 4) mod 3`, `p mod 4`.

// CHECK-LABEL: func.func @three(
// CHECK:         affine.for %[[PO:.*]] = 0 to 36 step 6 {
// CHECK-NEXT:      affine.for %[[PI:.*]] = 0 to 6 {
// CHECK:             affine.store %{{.*}}, %{{.*}}[(%[[PO]] + %[[PI]]) floordiv 12, (%[[PO]] + %[[PI]]) floordiv 4 mod 3, (%[[PO]] + %[[PI]]) mod 4]
// CHECK:           } {einc.stmt = "O", einc.axis = "F.HO.WO.i"}
// CHECK-NEXT:    } {einc.stmt = "O", einc.axis = "F.HO.WO.o"}
func.func @three(%X: tensor<3x3x4xf32> {ein.name = "X"}) -> tensor<3x3x4xf32> {
  %O = ein.einsum "O" assign parallel [F = 3, HO = 3, WO = 4] : tensor<3x3x4xf32> {
  ^bb0(%F : index, %HO : index, %WO : index):
    %x = ein.load %X[%F, %HO, %WO] : tensor<3x3x4xf32>
    %y = arith.addf %x, %x : f32
    ein.yield %y : f32
  }
  func.return %O : tensor<3x3x4xf32>
}
transform.named_sequence @__transform_main(%root: !transform.any_op) {
  %f = transform.einc.match stmt "O" axis "F" in %root
  %p = transform.einc.coalesce %f by 3
  %o, %i = transform.einc.tile %p by 6
  transform.yield
}
