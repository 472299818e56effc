// RUN: einc-opt %s -p einc-apply-schedule | filecheck %s

// A 1D transposed convolution, stride 2 (the loops of `output0[N] +=! (input0[(N + 1 - K) // 2] * input1[K]).when([(N + 1 - K) % 2 == 0, (N + 1 - K) // 2 >= 0, (N + 1 - K) // 2 < 4]) where N in 7`).
// N = 2 * N_p0 + r: the stride test becomes `(r + 1 - K) mod 2 == 0`; K = 2 * K_p + q then
// makes it the constant `(r + 1 - q) mod 2 == 0`: each output phase keeps the one phase of
// K whose points are not skipped (the other's sum updates add +0.0 to an accumulator that
// never holds -0.0: erased, and the loop with them). The `// 2` indices become affine in
// the phase variables and the range tests hold everywhere: no condition is left.

// CHECK:       affine.for %[[N0:.*]] = 0 to 4 {
// CHECK-NEXT:    affine.for %[[K1:.*]] = 0 to 1 {
// CHECK-NEXT:      affine.load %input0[%[[N0]] + %[[K1]] * -1]
// CHECK-NEXT:      affine.load %input1[%[[K1]] * 2 + 1]
// CHECK:           affine.store %{{.*}}, %output0[%[[N0]] * 2]
// CHECK-NEXT:    } {einc.stmt = "output0", einc.axis = "K"}
// CHECK-NEXT:  } {einc.stmt = "output0", einc.axis = "N"}
// CHECK-NEXT:  affine.for %[[N1:.*]] = 0 to 3 {
// CHECK-NEXT:    affine.for %[[K0:.*]] = 0 to 2 {
// CHECK-NEXT:      affine.load %input0[%[[N1]] + %[[K0]] * -1 + 1]
// CHECK-NEXT:      affine.load %input1[%[[K0]] * 2]
// CHECK:           affine.store %{{.*}}, %output0[%[[N1]] * 2 + 1]
// CHECK-NOT:   scf.if
// CHECK:       func.return

builtin.module {
  func.func @kernel(%input0: memref<4xf32> {ein.name = "input0"}, %input1: memref<3xf32> {ein.name = "input1"}, %output0: memref<7xf32> {ein.name = "output0", ein.output}) {
    %0 = arith.constant 0.000000e+00 : f32
    affine.for %N = 0 to 7 {
      affine.store %0, %output0[%N] : memref<7xf32>
    } {einc.stmt = "output0", einc.axis = "N", einc.init}
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
          %16 = affine.load %input0[(%N_1 + 1 + %K * -1) floordiv 2] : memref<4xf32>
          %17 = affine.load %input1[%K] : memref<3xf32>
          %18 = arith.mulf %16, %17 : f32
          scf.yield %18 : f32
        } else {
          %19 = arith.constant 0.000000e+00 : f32
          scf.yield %19 : f32
        }
        %20 = affine.load %output0[%N_1] : memref<7xf32>
        %21 = arith.addf %20, %15 : f32
        affine.store %21, %output0[%N_1] : memref<7xf32>
      } {einc.stmt = "output0", einc.axis = "K"}
    } {einc.stmt = "output0", einc.axis = "N"}
    func.return
  }
  transform.named_sequence @__transform_main(%root: !transform.any_op) {
    %n = transform.einc.match stmt "output0" axis "N" in %root
    %np = transform.einc.split_phases %n by 2
    %k = transform.einc.match stmt "output0" axis "K" in %root
    %kp = transform.einc.split_phases %k by 2
    transform.yield
  }
}
