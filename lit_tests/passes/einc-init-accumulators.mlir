// RUN: einc-opt %s --split-input-file -p einc-init-accumulators | filecheck %s

// C = A @ B with C's 4x4 tile staged at M.o (cache_write "C" at M.o in "local"), partial
// tiles along N (10 by 4): the copy-in stores the identity instead of loading C, and the
// tiles of N.o x M.o cover C, so the fill nest goes.

// CHECK-LABEL: func.func @kernel(
// CHECK-NEXT:    %[[ZERO:.*]] = arith.constant 0.000000e+00 : f32
// CHECK-NEXT:    affine.for %[[NO:.*]] = 0 to 10 step 4 {
// CHECK-NEXT:      affine.for %[[MO:.*]] = 0 to 8 step 4 {
// CHECK-NEXT:        %[[T:.*]] = memref.alloca()
// CHECK:               scf.if
// CHECK-NEXT:            affine.store %[[ZERO]], %[[T]][%{{.*}}, %{{.*}}] : memref<4x4xf32>
// CHECK-NEXT:          }
// CHECK-NOT:     affine.load %{{.*}}[%[[NO]] + %{{.*}}, %[[MO]] + %{{.*}}] : memref<10x8xf32>
// CHECK:         affine.store %{{.*}}, %{{.*}}[%[[NO]] + %{{.*}}, %[[MO]] + %{{.*}}] : memref<10x8xf32>

builtin.module {
  func.func @kernel(%A: memref<10x6xf32> {ein.name = "A"}, %B: memref<6x8xf32> {ein.name = "B"}, %C: memref<10x8xf32> {ein.name = "C", ein.output}) {
    %0 = arith.constant 0.000000e+00 : f32
    affine.for %N = 0 to 10 {
      affine.for %M = 0 to 8 {
        affine.store %0, %C[%N, %M] : memref<10x8xf32>
      } {einc.stmt = "C", einc.axis = "M", einc.init}
    } {einc.stmt = "C", einc.axis = "N", einc.init}
    affine.for %N_o = 0 to 10 step 4 {
      affine.for %M_o = 0 to 8 step 4 {
        %C_local = memref.alloca() {ein.name = "C_local", einc.staged_loc = "s.mlir:8:3", alignment = 64 : i64} : memref<4x4xf32>
        affine.for %C_c0 = 0 to 4 {
          affine.for %C_c1 = 0 to 4 {
            %1 = affine.apply affine_map<(d0, d1, d2, d3) -> ((d0 + d2))> (%N_o, %M_o, %C_c0, %C_c1)
            %2 = arith.constant 10 : index
            %3 = arith.cmpi slt, %1, %2 : index
            scf.if %3 {
              %4 = affine.load %C[%N_o + %C_c0, %M_o + %C_c1] : memref<10x8xf32>
              affine.store %4, %C_local[%C_c0, %C_c1] : memref<4x4xf32>
            }
          } {einc.stmt = "C", einc.axis = "C.in1", einc.copy}
        } {einc.stmt = "C", einc.axis = "C.in0", einc.copy}
        affine.for %K = 0 to 6 {
          affine.for %N_i = 0 to min affine_map<(d0) -> (4, ((d0 * -1) + 10))>(%N_o) {
            affine.for %M_i = 0 to 4 {
              %5 = affine.load %A[%N_o + %N_i, %K] : memref<10x6xf32>
              %6 = affine.load %B[%K, %M_o + %M_i] : memref<6x8xf32>
              %7 = arith.mulf %5, %6 : f32
              %8 = affine.load %C_local[%N_i, %M_i] : memref<4x4xf32>
              %9 = arith.addf %8, %7 : f32
              affine.store %9, %C_local[%N_i, %M_i] : memref<4x4xf32>
            } {einc.stmt = "C", einc.axis = "M.i"}
          } {einc.stmt = "C", einc.axis = "N.i"}
        } {einc.stmt = "C", einc.axis = "K"}
        affine.for %C_c0_1 = 0 to 4 {
          affine.for %C_c1_1 = 0 to 4 {
            %10 = affine.apply affine_map<(d0, d1, d2, d3) -> ((d0 + d2))> (%N_o, %M_o, %C_c0_1, %C_c1_1)
            %11 = arith.constant 10 : index
            %12 = arith.cmpi slt, %10, %11 : index
            scf.if %12 {
              %13 = affine.load %C_local[%C_c0_1, %C_c1_1] : memref<4x4xf32>
              affine.store %13, %C[%N_o + %C_c0_1, %M_o + %C_c1_1] : memref<10x8xf32>
            }
          } {einc.stmt = "C", einc.axis = "C.out1", einc.copy}
        } {einc.stmt = "C", einc.axis = "C.out0", einc.copy}
      } {einc.stmt = "C", einc.axis = "M.o"}
    } {einc.stmt = "C", einc.axis = "N.o"}
    func.return
  }
}


// -----

// The same tile staged at K, inside the reduction loop: each K iteration copies the tile
// in again and must read what the previous one wrote back. Unchanged.

// CHECK-LABEL: func.func @kernel(
// CHECK:         affine.store %{{.*}}, %{{.*}}[%{{.*}}, %{{.*}}] : memref<10x8xf32>
// CHECK-NEXT:    } {einc.stmt = "C", einc.axis = "M", einc.init}
// CHECK:         affine.for %{{.*}} = 0 to 6 {
// CHECK-NEXT:      %[[T:.*]] = memref.alloca()
// CHECK:               %[[V:.*]] = affine.load %{{.*}}[%{{.*}}, %{{.*}}] : memref<10x8xf32>
// CHECK-NEXT:          affine.store %[[V]], %[[T]][%{{.*}}, %{{.*}}] : memref<4x4xf32>

builtin.module {
  func.func @kernel(%A: memref<10x6xf32> {ein.name = "A"}, %B: memref<6x8xf32> {ein.name = "B"}, %C: memref<10x8xf32> {ein.name = "C", ein.output}) {
    %0 = arith.constant 0.000000e+00 : f32
    affine.for %N = 0 to 10 {
      affine.for %M = 0 to 8 {
        affine.store %0, %C[%N, %M] : memref<10x8xf32>
      } {einc.stmt = "C", einc.axis = "M", einc.init}
    } {einc.stmt = "C", einc.axis = "N", einc.init}
    affine.for %N_o = 0 to 10 step 4 {
      affine.for %M_o = 0 to 8 step 4 {
        affine.for %K = 0 to 6 {
          %C_local = memref.alloca() {ein.name = "C_local", einc.staged_loc = "s.mlir:8:3", alignment = 64 : i64} : memref<4x4xf32>
          affine.for %C_c0 = 0 to 4 {
            affine.for %C_c1 = 0 to 4 {
              %1 = affine.apply affine_map<(d0, d1, d2, d3) -> ((d0 + d2))> (%N_o, %M_o, %C_c0, %C_c1)
              %2 = arith.constant 10 : index
              %3 = arith.cmpi slt, %1, %2 : index
              scf.if %3 {
                %4 = affine.load %C[%N_o + %C_c0, %M_o + %C_c1] : memref<10x8xf32>
                affine.store %4, %C_local[%C_c0, %C_c1] : memref<4x4xf32>
              }
            } {einc.stmt = "C", einc.axis = "C.in1", einc.copy}
          } {einc.stmt = "C", einc.axis = "C.in0", einc.copy}
          affine.for %N_i = 0 to min affine_map<(d0) -> (4, ((d0 * -1) + 10))>(%N_o) {
            affine.for %M_i = 0 to 4 {
              %5 = affine.load %A[%N_o + %N_i, %K] : memref<10x6xf32>
              %6 = affine.load %B[%K, %M_o + %M_i] : memref<6x8xf32>
              %7 = arith.mulf %5, %6 : f32
              %8 = affine.load %C_local[%N_i, %M_i] : memref<4x4xf32>
              %9 = arith.addf %8, %7 : f32
              affine.store %9, %C_local[%N_i, %M_i] : memref<4x4xf32>
            } {einc.stmt = "C", einc.axis = "M.i"}
          } {einc.stmt = "C", einc.axis = "N.i"}
          affine.for %C_c0_1 = 0 to 4 {
            affine.for %C_c1_1 = 0 to 4 {
              %10 = affine.apply affine_map<(d0, d1, d2, d3) -> ((d0 + d2))> (%N_o, %M_o, %C_c0_1, %C_c1_1)
              %11 = arith.constant 10 : index
              %12 = arith.cmpi slt, %10, %11 : index
              scf.if %12 {
                %13 = affine.load %C_local[%C_c0_1, %C_c1_1] : memref<4x4xf32>
                affine.store %13, %C[%N_o + %C_c0_1, %M_o + %C_c1_1] : memref<10x8xf32>
              }
            } {einc.stmt = "C", einc.axis = "C.out1", einc.copy}
          } {einc.stmt = "C", einc.axis = "C.out0", einc.copy}
        } {einc.stmt = "C", einc.axis = "K"}
      } {einc.stmt = "C", einc.axis = "M.o"}
    } {einc.stmt = "C", einc.axis = "N.o"}
    func.return
  }
}

