// RUN: einc-opt %s -p einc-apply-schedule | filecheck %s

// A 1D convolution padded by 1 (the loops of `output0[N] +=! input0[N + K - 1].when([N + K - 1 >= 0, N + K - 1 < 8], 0.0) * input1[K] where N in 8`).
// N is cut where `N + K - 1 >= 0` (for every K in 0..3) starts to hold and where
// `N + K - 1 < 8` stops holding for every K: 0..1 keeps the first test (the second is true
// there, folded), 1..7 reads no condition, 7..8 keeps the second.

// CHECK:       affine.for %[[A:.*]] = 0 to 1 {
// CHECK:         arith.cmpi sge
// CHECK-NOT:     arith.cmpi
// CHECK:         scf.if
// CHECK:       } {einc.stmt = "output0", einc.axis = "N"}
// CHECK-NEXT:  affine.for %[[B:.*]] = 1 to 7 {
// CHECK-NEXT:    affine.for %[[K:.*]] = 0 to 3 {
// CHECK-NEXT:      affine.load %input0[%[[B]] + %[[K]] + -1]
// CHECK-NOT:       scf.if
// CHECK:       } {einc.stmt = "output0", einc.axis = "N"}
// CHECK-NEXT:  affine.for %{{.*}} = 7 to 8 {
// CHECK:         arith.cmpi slt
// CHECK:         scf.if
// CHECK:       } {einc.stmt = "output0", einc.axis = "N"}
// CHECK-NEXT:  func.return

builtin.module {
  func.func @kernel(%input0: memref<8xf32> {ein.name = "input0"}, %input1: memref<3xf32> {ein.name = "input1"}, %output0: memref<8xf32> {ein.name = "output0", ein.output}) {
    %0 = arith.constant 0.000000e+00 : f32
    affine.for %N = 0 to 8 {
      affine.store %0, %output0[%N] : memref<8xf32>
    } {einc.stmt = "output0", einc.axis = "N", einc.init}
    affine.for %N_1 = 0 to 8 {
      affine.for %K = 0 to 3 {
        %1 = affine.apply affine_map<(d0, d1) -> (((d0 + d1) + -1))> (%N_1, %K)
        %2 = arith.index_cast %1 : index to i32
        %3 = arith.constant 0 : i32
        %4 = arith.cmpi sge, %2, %3 : i32
        %5 = affine.apply affine_map<(d0, d1) -> (((d0 + d1) + -1))> (%N_1, %K)
        %6 = arith.index_cast %5 : index to i32
        %7 = arith.constant 8 : i32
        %8 = arith.cmpi slt, %6, %7 : i32
        %9 = arith.andi %4, %8 : i1
        %10 = scf.if %9 -> (f32) {
          %11 = affine.load %input0[%N_1 + %K + -1] : memref<8xf32>
          scf.yield %11 : f32
        } else {
          %12 = arith.constant 0.000000e+00 : f32
          scf.yield %12 : f32
        }
        %13 = affine.load %input1[%K] : memref<3xf32>
        %14 = arith.mulf %10, %13 : f32
        %15 = affine.load %output0[%N_1] : memref<8xf32>
        %16 = arith.addf %15, %14 : f32
        affine.store %16, %output0[%N_1] : memref<8xf32>
      } {einc.stmt = "output0", einc.axis = "K"}
    } {einc.stmt = "output0", einc.axis = "N"}
    func.return
  }
  transform.named_sequence @__transform_main(%root: !transform.any_op) {
    %n = transform.einc.match stmt "output0" axis "N" in %root
    %pieces = transform.einc.split_conditions %n
    transform.yield
  }
}
