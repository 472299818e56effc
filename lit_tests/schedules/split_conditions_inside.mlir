// RUN: einc-opt %s -p einc-apply-schedule | filecheck %s

// `split_conditions ... inside` on the chunk loop of a 1D convolution padded by 1 (16
// outputs in chunks of 4, as a parallel row-chunk loop): the chunk loop keeps its 4
// iterations and its body becomes the pieces' bodies, branches of `N.o < 4` and `N.o < 12`.
// Inside each branch the range of N.o is the branch's (0; 4..8; 12): the first chunk's
// N.i is then cut at 1 (its padding test kept only there), the interior reads no test,
// the last chunk's N.i is cut at 3.

// CHECK:       affine.for %[[O:.*]] = 0 to 16 step 4 {
// CHECK-NEXT:    %[[C4:.*]] = arith.constant 4 : index
// CHECK-NEXT:    %[[T4:.*]] = arith.cmpi slt, %[[O]], %[[C4]] : index
// CHECK-NEXT:    scf.if %[[T4]] {
// CHECK-NEXT:      affine.for %{{.*}} = 0 to 1 {
// CHECK:             arith.cmpi sge
// CHECK:           } {einc.stmt = "output0", einc.axis = "N.i"}
// CHECK-NEXT:      affine.for %{{.*}} = 1 to 4 {
// CHECK-NOT:         arith.cmpi
// CHECK:           } {einc.stmt = "output0", einc.axis = "N.i"}
// CHECK-NEXT:    } else {
// CHECK-NEXT:      %[[C12:.*]] = arith.constant 12 : index
// CHECK-NEXT:      %[[T12:.*]] = arith.cmpi slt, %[[O]], %[[C12]] : index
// CHECK-NEXT:      scf.if %[[T12]] {
// CHECK-NEXT:        affine.for %{{.*}} = 0 to 4 {
// CHECK-NOT:           arith.cmpi
// CHECK:             } {einc.stmt = "output0", einc.axis = "N.i"}
// CHECK-NEXT:      } else {
// CHECK-NEXT:        affine.for %{{.*}} = 0 to 3 {
// CHECK-NOT:           arith.cmpi
// CHECK:             } {einc.stmt = "output0", einc.axis = "N.i"}
// CHECK-NEXT:        affine.for %{{.*}} = 3 to 4 {
// CHECK:               arith.cmpi slt
// CHECK:             } {einc.stmt = "output0", einc.axis = "N.i"}
// CHECK-NEXT:      }
// CHECK-NEXT:    }
// CHECK-NEXT:  } {einc.stmt = "output0", einc.axis = "N.o"}

builtin.module {
  func.func @kernel(%input0: memref<16xf32> {ein.name = "input0"}, %input1: memref<3xf32> {ein.name = "input1"}, %output0: memref<16xf32> {ein.name = "output0", ein.output}) {
    %0 = arith.constant 0.000000e+00 : f32
    affine.for %N = 0 to 16 {
      affine.store %0, %output0[%N] : memref<16xf32>
    } {einc.stmt = "output0", einc.axis = "N", einc.init}
    affine.for %N_1 = 0 to 16 {
      affine.for %K = 0 to 3 {
        %1 = affine.apply affine_map<(d0, d1) -> (((d0 + d1) + -1))> (%N_1, %K)
        %2 = arith.index_cast %1 : index to i32
        %3 = arith.constant 0 : i32
        %4 = arith.cmpi sge, %2, %3 : i32
        %5 = affine.apply affine_map<(d0, d1) -> (((d0 + d1) + -1))> (%N_1, %K)
        %6 = arith.index_cast %5 : index to i32
        %7 = arith.constant 16 : i32
        %8 = arith.cmpi slt, %6, %7 : i32
        %9 = arith.andi %4, %8 : i1
        %10 = scf.if %9 -> (f32) {
          %11 = affine.load %input0[%N_1 + %K + -1] : memref<16xf32>
          scf.yield %11 : f32
        } else {
          %12 = arith.constant 0.000000e+00 : f32
          scf.yield %12 : f32
        }
        %13 = affine.load %input1[%K] : memref<3xf32>
        %14 = arith.mulf %10, %13 : f32
        %15 = affine.load %output0[%N_1] : memref<16xf32>
        %16 = arith.addf %15, %14 : f32
        affine.store %16, %output0[%N_1] : memref<16xf32>
      } {einc.stmt = "output0", einc.axis = "K"}
    } {einc.stmt = "output0", einc.axis = "N"}
    func.return
  }
  transform.named_sequence @__transform_main(%root: !transform.any_op) {
    %n = transform.einc.match stmt "output0" axis "N" in %root
    %o, %i = transform.einc.tile %n by 4
    %pieces = transform.einc.split_conditions %o inside
    %ii = transform.einc.match stmt "output0" axis "N.i" in %root
    %p2 = transform.einc.split_conditions %ii
    transform.yield
  }
}
