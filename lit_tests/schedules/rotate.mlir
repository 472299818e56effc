// RUN: einc-opt %s --split-input-file -p convert-ein-to-affine,einc-apply-schedule | filecheck %s

// A convolution's reduction band `C, KH, KW` rotated by 1: `KH, KW, C` (the input channels
// innermost; the sum reassociated), the output loops above it in place.

// CHECK-LABEL: func.func @conv(
// CHECK:         } {einc.stmt = "O", einc.axis = "N", einc.init}
// CHECK-NEXT:    affine.for %[[N:.*]] = 0 to 2 {
// CHECK-NEXT:      affine.for %[[F:.*]] = 0 to 3 {
// CHECK-NEXT:        affine.for %[[W:.*]] = 0 to 4 {
// CHECK-NEXT:          affine.for %[[KH:.*]] = 0 to 2 {
// CHECK-NEXT:            affine.for %[[KW:.*]] = 0 to 3 {
// CHECK-NEXT:              affine.for %[[C:.*]] = 0 to 5 {
// CHECK:                     affine.load %{{.*}}[%[[N]], %[[C]], %[[KH]], %[[W]] + %[[KW]]]
// CHECK:                   } {einc.stmt = "O", einc.axis = "C"}
// CHECK-NEXT:            } {einc.stmt = "O", einc.axis = "KW"}
// CHECK-NEXT:          } {einc.stmt = "O", einc.axis = "KH"}
func.func @conv(%X: tensor<2x5x2x6xf32> {ein.name = "X"}, %Wt: tensor<3x5x2x3xf32> {ein.name = "Wt"}) -> tensor<2x3x4xf32> {
  %O = ein.einsum "O" add parallel [N = 2, F = 3, WO = 4] reduce [C = 5, KH = 2, KW = 3] : tensor<2x3x4xf32> {
  ^bb0(%N : index, %F : index, %WO : index, %C : index, %KH : index, %KW : index):
    %i = affine.apply affine_map<(d0, d1) -> (d0 + d1)> (%WO, %KW)
    %x = ein.load %X[%N, %C, %KH, %i] : tensor<2x5x2x6xf32>
    %w = ein.load %Wt[%F, %C, %KH, %KW] : tensor<3x5x2x3xf32>
    %p = arith.mulf %x, %w : f32
    ein.yield %p : f32
  }
  func.return %O : tensor<2x3x4xf32>
}
transform.named_sequence @__transform_main(%root: !transform.any_op) {
  %c = transform.einc.match stmt "O" axis "C" in %root
  %kh = transform.einc.match stmt "O" axis "KH" in %root
  %kw = transform.einc.match stmt "O" axis "KW" in %root
  %r = transform.einc.knob "order" = 1 from [0, 1, 2]
  %a, %b, %d = transform.einc.rotate %c, %kh, %kw by %r
  transform.yield
}

// -----

// By 0 nothing moves; an output loop and a reduction loop rotated (`M, K` by 1: `K, M`, a
// matmul's i-k-j) is a plain interchange.

// CHECK-LABEL: func.func @matmul(
// CHECK:         } {einc.stmt = "C", einc.axis = "N", einc.init}
// CHECK-NEXT:    affine.for %{{.*}} = 0 to 4 {
// CHECK-NEXT:      affine.for %{{.*}} = 0 to 6 {
// CHECK-NEXT:        affine.for %{{.*}} = 0 to 8 {
// CHECK:             } {einc.stmt = "C", einc.axis = "M"}
// CHECK-NEXT:      } {einc.stmt = "C", einc.axis = "K"}
func.func @matmul(%A: tensor<4x6xf32> {ein.name = "A"}, %B: tensor<6x8xf32> {ein.name = "B"}) -> tensor<4x8xf32> {
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
  %m = transform.einc.match stmt "C" axis "M" in %root
  %k = transform.einc.match stmt "C" axis "K" in %root
  %n2, %m2 = transform.einc.rotate %n, %m by 0
  %m3, %k3 = transform.einc.rotate %m2, %k by 1
  transform.yield
}
