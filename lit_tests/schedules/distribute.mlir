// RUN: einc-opt %s -p einc-apply-schedule | filecheck %s

// A 2D transposed convolution's output split by row phase (the loops of
// `output0[B, N] +=! (input0[B, (N + 1 - K) // 2] * input1[K]).when([(N + 1 - K) % 2 == 0, ...])`):
// split_phases on N leaves the two phase loops side by side in B; distributing B makes each
// phase a nest of its own (B copied, same tags, the index arithmetic each copy uses with it),
// each then a dense loop nest: no condition, no `mod`, no `floordiv` is left.

// CHECK:       einc.axis = "B", einc.init}
// CHECK-NEXT:  affine.for %[[B0:.*]] = 0 to 3 {
// CHECK-NEXT:    affine.for %[[N0:.*]] = 0 to 4 {
// CHECK-NEXT:      affine.for %[[K1:.*]] = 0 to 1 {
// CHECK-NEXT:        affine.load %input0[%[[B0]], %[[N0]] + %[[K1]] * -1]
// CHECK:             affine.store %{{.*}}, %output0[%[[B0]], %[[N0]] * 2]
// CHECK:           } {einc.stmt = "output0", einc.axis = "K"}
// CHECK-NEXT:    } {einc.stmt = "output0", einc.axis = "N"}
// CHECK-NEXT:  } {einc.stmt = "output0", einc.axis = "B"}
// CHECK-NEXT:  affine.for %[[B1:.*]] = 0 to 3 {
// CHECK-NEXT:    affine.for %[[N1:.*]] = 0 to 3 {
// CHECK-NEXT:      affine.for %[[K0:.*]] = 0 to 2 {
// CHECK-NEXT:        affine.load %input0[%[[B1]], %[[N1]] + %[[K0]] * -1 + 1]
// CHECK:             affine.store %{{.*}}, %output0[%[[B1]], %[[N1]] * 2 + 1]
// CHECK:           } {einc.stmt = "output0", einc.axis = "K"}
// CHECK-NEXT:    } {einc.stmt = "output0", einc.axis = "N"}
// CHECK-NEXT:  } {einc.stmt = "output0", einc.axis = "B"}
// CHECK-NOT:   scf.if
// CHECK-NOT:   mod
// CHECK-NOT:   floordiv
// CHECK:       func.return

builtin.module {
  func.func @kernel(%input0: memref<3x4xf32> {ein.name = "input0"}, %input1: memref<3xf32> {ein.name = "input1"}, %output0: memref<3x7xf32> {ein.name = "output0", ein.output}) {
    %0 = arith.constant 0.000000e+00 : f32
    affine.for %B = 0 to 3 {
      affine.for %N = 0 to 7 {
        affine.store %0, %output0[%B, %N] : memref<3x7xf32>
      } {einc.stmt = "output0", einc.axis = "N", einc.init}
    } {einc.stmt = "output0", einc.axis = "B", einc.init}
    affine.for %B_1 = 0 to 3 {
      affine.for %N_1 = 0 to 7 {
        affine.for %K = 0 to 3 {
          %1 = affine.apply affine_map<(d0, d1) -> ((((d0 + 1) + (d1 * -1)) mod 2))> (%N_1, %K)
          %2 = arith.index_cast %1 : index to i32
          %3 = arith.constant 0 : i32
          %4 = arith.cmpi eq, %2, %3 : i32
          %5 = affine.apply affine_map<(d0, d1) -> ((((d0 + 1) + (d1 * -1)) floordiv 2))> (%N_1, %K)
          %6 = arith.index_cast %5 : index to i32
          %7 = arith.constant 0 : i32
          %8 = arith.cmpi sge, %6, %7 : i32
          %9 = arith.andi %4, %8 : i1
          %10 = affine.apply affine_map<(d0, d1) -> ((((d0 + 1) + (d1 * -1)) floordiv 2))> (%N_1, %K)
          %11 = arith.index_cast %10 : index to i32
          %12 = arith.constant 4 : i32
          %13 = arith.cmpi slt, %11, %12 : i32
          %14 = arith.andi %9, %13 : i1
          %15 = scf.if %14 -> (f32) {
            %16 = affine.load %input0[%B_1, (%N_1 + 1 + %K * -1) floordiv 2] : memref<3x4xf32>
            %17 = affine.load %input1[%K] : memref<3xf32>
            %18 = arith.mulf %16, %17 : f32
            scf.yield %18 : f32
          } else {
            %19 = arith.constant 0.000000e+00 : f32
            scf.yield %19 : f32
          }
          %20 = affine.load %output0[%B_1, %N_1] : memref<3x7xf32>
          %21 = arith.addf %20, %15 : f32
          affine.store %21, %output0[%B_1, %N_1] : memref<3x7xf32>
        } {einc.stmt = "output0", einc.axis = "K"}
      } {einc.stmt = "output0", einc.axis = "N"}
    } {einc.stmt = "output0", einc.axis = "B"}
    func.return
  }
  transform.named_sequence @__transform_main(%root: !transform.any_op) {
    %n = transform.einc.match stmt "output0" axis "N" in %root
    %np = transform.einc.split_phases %n by 2
    %b = transform.einc.match stmt "output0" axis "B" in %root
    %b0, %b1 = transform.einc.distribute %b into 2
    %k0 = transform.einc.match stmt "output0" axis "K" in %b0
    %k0p = transform.einc.split_phases %k0 by 2
    %k1 = transform.einc.match stmt "output0" axis "K" in %b1
    %k1p = transform.einc.split_phases %k1 by 2
    transform.yield
  }
}
