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



// -----

// Two phase nests after the fill (a transposed convolution's output phases): each stages a
// compact tile of every other element (C[2 * P + 0/1]); the tiles of both nests are disjoint
// and cover C: every copy-in stores the identity and the fill goes.

// CHECK-LABEL: func.func @kernel(
// CHECK-NEXT:    %[[ZERO:.*]] = arith.constant 0.000000e+00 : f32
// CHECK-NOT:     einc.init
// CHECK-NOT:     affine.load %{{.*}}[%{{.*}}] : memref<8xf32>
// CHECK:         affine.store %[[ZERO]], %{{.*}}[%{{.*}}] : memref<2xf32>
// CHECK-NOT:     affine.load %{{.*}}[%{{.*}}] : memref<8xf32>
// CHECK:         affine.store %[[ZERO]], %{{.*}}[%{{.*}}] : memref<2xf32>
// CHECK-NOT:     affine.load %{{.*}}[%{{.*}}] : memref<8xf32>
// CHECK:         func.return

builtin.module {
  func.func @kernel(%A: memref<5xf32> {ein.name = "A"}, %C: memref<8xf32> {ein.name = "C", ein.output}) {
    %0 = arith.constant 0.000000e+00 : f32
    affine.for %N = 0 to 8 {
      affine.store %0, %C[%N] : memref<8xf32>
    } {einc.stmt = "C", einc.axis = "N", einc.init}
    affine.for %P0 = 0 to 4 step 2 {
      %T0 = memref.alloca() {ein.name = "C_local", alignment = 64 : i64} : memref<2xf32>
      affine.for %i0 = 0 to 2 {
        %l0 = affine.load %C[%P0 * 2 + %i0 * 2] : memref<8xf32>
        affine.store %l0, %T0[%i0] : memref<2xf32>
      } {einc.stmt = "C", einc.axis = "C.in0", einc.copy}
      affine.for %K0 = 0 to 5 {
        affine.for %Q0 = 0 to 2 {
          %a0 = affine.load %A[%K0] : memref<5xf32>
          %s0 = affine.load %T0[%Q0] : memref<2xf32>
          %r0 = arith.addf %s0, %a0 : f32
          affine.store %r0, %T0[%Q0] : memref<2xf32>
        } {einc.stmt = "C", einc.axis = "P0.i"}
      } {einc.stmt = "C", einc.axis = "K"}
      affine.for %o0 = 0 to 2 {
        %m0 = affine.load %T0[%o0] : memref<2xf32>
        affine.store %m0, %C[%P0 * 2 + %o0 * 2] : memref<8xf32>
      } {einc.stmt = "C", einc.axis = "C.out0", einc.copy}
    } {einc.stmt = "C", einc.axis = "P0.o"}
    affine.for %P1 = 0 to 4 step 2 {
      %T1 = memref.alloca() {ein.name = "C_local", alignment = 64 : i64} : memref<2xf32>
      affine.for %i1 = 0 to 2 {
        %l1 = affine.load %C[%P1 * 2 + %i1 * 2 + 1] : memref<8xf32>
        affine.store %l1, %T1[%i1] : memref<2xf32>
      } {einc.stmt = "C", einc.axis = "C.in0", einc.copy}
      affine.for %K1 = 0 to 5 {
        affine.for %Q1 = 0 to 2 {
          %a1 = affine.load %A[%K1] : memref<5xf32>
          %s1 = affine.load %T1[%Q1] : memref<2xf32>
          %r1 = arith.addf %s1, %a1 : f32
          affine.store %r1, %T1[%Q1] : memref<2xf32>
        } {einc.stmt = "C", einc.axis = "P1.i"}
      } {einc.stmt = "C", einc.axis = "K"}
      affine.for %o1 = 0 to 2 {
        %m1 = affine.load %T1[%o1] : memref<2xf32>
        affine.store %m1, %C[%P1 * 2 + %o1 * 2 + 1] : memref<8xf32>
      } {einc.stmt = "C", einc.axis = "C.out0", einc.copy}
    } {einc.stmt = "C", einc.axis = "P1.o"}
    func.return
  }
}

// -----

// Only the even phase: its copy-ins store the identity (nothing wrote its elements since
// the fill), but the odd elements are not covered, so the fill stays.

// CHECK-LABEL: func.func @kernel(
// CHECK:         einc.init
// CHECK-NOT:     affine.load %{{.*}}[%{{.*}}] : memref<8xf32>
// CHECK:         func.return

builtin.module {
  func.func @kernel(%A: memref<5xf32> {ein.name = "A"}, %C: memref<8xf32> {ein.name = "C", ein.output}) {
    %0 = arith.constant 0.000000e+00 : f32
    affine.for %N = 0 to 8 {
      affine.store %0, %C[%N] : memref<8xf32>
    } {einc.stmt = "C", einc.axis = "N", einc.init}
    affine.for %P0 = 0 to 4 step 2 {
      %T0 = memref.alloca() {ein.name = "C_local", alignment = 64 : i64} : memref<2xf32>
      affine.for %i0 = 0 to 2 {
        %l0 = affine.load %C[%P0 * 2 + %i0 * 2] : memref<8xf32>
        affine.store %l0, %T0[%i0] : memref<2xf32>
      } {einc.stmt = "C", einc.axis = "C.in0", einc.copy}
      affine.for %K0 = 0 to 5 {
        affine.for %Q0 = 0 to 2 {
          %a0 = affine.load %A[%K0] : memref<5xf32>
          %s0 = affine.load %T0[%Q0] : memref<2xf32>
          %r0 = arith.addf %s0, %a0 : f32
          affine.store %r0, %T0[%Q0] : memref<2xf32>
        } {einc.stmt = "C", einc.axis = "P0.i"}
      } {einc.stmt = "C", einc.axis = "K"}
      affine.for %o0 = 0 to 2 {
        %m0 = affine.load %T0[%o0] : memref<2xf32>
        affine.store %m0, %C[%P0 * 2 + %o0 * 2] : memref<8xf32>
      } {einc.stmt = "C", einc.axis = "C.out0", einc.copy}
    } {einc.stmt = "C", einc.axis = "P0.o"}
    func.return
  }
}

// -----

// The second nest stages the even elements again: its copy-in must read what the first
// wrote back. Unchanged (both loads stay, and the fill).

// CHECK-LABEL: func.func @kernel(
// CHECK:         einc.init
// CHECK:         affine.load %{{.*}}[%{{.*}}] : memref<8xf32>
// CHECK:         affine.load %{{.*}}[%{{.*}}] : memref<8xf32>
// CHECK:         func.return

builtin.module {
  func.func @kernel(%A: memref<5xf32> {ein.name = "A"}, %C: memref<8xf32> {ein.name = "C", ein.output}) {
    %0 = arith.constant 0.000000e+00 : f32
    affine.for %N = 0 to 8 {
      affine.store %0, %C[%N] : memref<8xf32>
    } {einc.stmt = "C", einc.axis = "N", einc.init}
    affine.for %P0 = 0 to 4 step 2 {
      %T0 = memref.alloca() {ein.name = "C_local", alignment = 64 : i64} : memref<2xf32>
      affine.for %i0 = 0 to 2 {
        %l0 = affine.load %C[%P0 * 2 + %i0 * 2] : memref<8xf32>
        affine.store %l0, %T0[%i0] : memref<2xf32>
      } {einc.stmt = "C", einc.axis = "C.in0", einc.copy}
      affine.for %K0 = 0 to 5 {
        affine.for %Q0 = 0 to 2 {
          %a0 = affine.load %A[%K0] : memref<5xf32>
          %s0 = affine.load %T0[%Q0] : memref<2xf32>
          %r0 = arith.addf %s0, %a0 : f32
          affine.store %r0, %T0[%Q0] : memref<2xf32>
        } {einc.stmt = "C", einc.axis = "P0.i"}
      } {einc.stmt = "C", einc.axis = "K"}
      affine.for %o0 = 0 to 2 {
        %m0 = affine.load %T0[%o0] : memref<2xf32>
        affine.store %m0, %C[%P0 * 2 + %o0 * 2] : memref<8xf32>
      } {einc.stmt = "C", einc.axis = "C.out0", einc.copy}
    } {einc.stmt = "C", einc.axis = "P0.o"}
    affine.for %P1 = 0 to 4 step 2 {
      %T1 = memref.alloca() {ein.name = "C_local", alignment = 64 : i64} : memref<2xf32>
      affine.for %i1 = 0 to 2 {
        %l1 = affine.load %C[%P1 * 2 + %i1 * 2] : memref<8xf32>
        affine.store %l1, %T1[%i1] : memref<2xf32>
      } {einc.stmt = "C", einc.axis = "C.in0", einc.copy}
      affine.for %K1 = 0 to 5 {
        affine.for %Q1 = 0 to 2 {
          %a1 = affine.load %A[%K1] : memref<5xf32>
          %s1 = affine.load %T1[%Q1] : memref<2xf32>
          %r1 = arith.addf %s1, %a1 : f32
          affine.store %r1, %T1[%Q1] : memref<2xf32>
        } {einc.stmt = "C", einc.axis = "P1.i"}
      } {einc.stmt = "C", einc.axis = "K"}
      affine.for %o1 = 0 to 2 {
        %m1 = affine.load %T1[%o1] : memref<2xf32>
        affine.store %m1, %C[%P1 * 2 + %o1 * 2] : memref<8xf32>
      } {einc.stmt = "C", einc.axis = "C.out0", einc.copy}
    } {einc.stmt = "C", einc.axis = "P1.o"}
    func.return
  }
}

// -----

// An 8192 x 8192 output (2^26 elements: past the enumeration), its 64 x 64 tiles staged at
// N.o and M.o, both from 0 by 64 to 8192: per dimension the tile's 64 elements and the loop's
// stride 64 times 128 iterations number 0 .. 8192 exactly once (a regular grid), so the
// copy-in stores the identity and the fill goes.

// CHECK-LABEL: func.func @large(
// CHECK-NEXT:    %[[ZERO:.*]] = arith.constant 0.000000e+00 : f32
// CHECK-NEXT:    affine.for %{{.*}} = 0 to 8192 step 64 {
// CHECK-NOT:     einc.init
// CHECK:             affine.store %[[ZERO]], %{{.*}}[%{{.*}}, %{{.*}}] : memref<64x64xf32>
// CHECK-NOT:     affine.load %{{.*}} : memref<8192x8192xf32>
// CHECK:             affine.store %{{.*}}, %{{.*}}[%{{.*}} + %{{.*}}, %{{.*}} + %{{.*}}] : memref<8192x8192xf32>

builtin.module {
  func.func @large(%A: memref<8192xf32> {ein.name = "A"}, %C: memref<8192x8192xf32> {ein.name = "C", ein.output}) {
    %0 = arith.constant 0.000000e+00 : f32
    affine.for %N = 0 to 8192 {
      affine.for %M = 0 to 8192 {
        affine.store %0, %C[%N, %M] : memref<8192x8192xf32>
      } {einc.stmt = "C", einc.axis = "M", einc.init}
    } {einc.stmt = "C", einc.axis = "N", einc.init}
    affine.for %N_o = 0 to 8192 step 64 {
      affine.for %M_o = 0 to 8192 step 64 {
        %C_local = memref.alloca() {ein.name = "C_local", alignment = 64 : i64} : memref<64x64xf32>
        affine.for %c0 = 0 to 64 {
          affine.for %c1 = 0 to 64 {
            %1 = affine.load %C[%N_o + %c0, %M_o + %c1] : memref<8192x8192xf32>
            affine.store %1, %C_local[%c0, %c1] : memref<64x64xf32>
          } {einc.stmt = "C", einc.axis = "C.in1", einc.copy}
        } {einc.stmt = "C", einc.axis = "C.in0", einc.copy}
        affine.for %N_i = 0 to 64 {
          affine.for %M_i = 0 to 64 {
            %2 = affine.load %A[%N_o + %N_i] : memref<8192xf32>
            %3 = affine.load %C_local[%N_i, %M_i] : memref<64x64xf32>
            %4 = arith.addf %3, %2 : f32
            affine.store %4, %C_local[%N_i, %M_i] : memref<64x64xf32>
          } {einc.stmt = "C", einc.axis = "M.i"}
        } {einc.stmt = "C", einc.axis = "N.i"}
        affine.for %d0 = 0 to 64 {
          affine.for %d1 = 0 to 64 {
            %5 = affine.load %C_local[%d0, %d1] : memref<64x64xf32>
            affine.store %5, %C[%N_o + %d0, %M_o + %d1] : memref<8192x8192xf32>
          } {einc.stmt = "C", einc.axis = "C.out1", einc.copy}
        } {einc.stmt = "C", einc.axis = "C.out0", einc.copy}
      } {einc.stmt = "C", einc.axis = "M.o"}
    } {einc.stmt = "C", einc.axis = "N.o"}
    func.return
  }
}

// -----

// A fill inside the staging point (fuse_fill_rows: a depthwise convolution's row zeroed in
// its local array): the first tile's fill writes all 8 of its elements, so its copy-in,
// overwritten unread, goes; the second's fill writes 4 of 8, so its copy-in stays.

// CHECK-LABEL: func.func @kernel(
// CHECK:         %[[T0:.*]] = memref.alloca()
// CHECK-NOT:     einc.copy
// CHECK:         affine.store %{{.*}}, %[[T0]][%{{.*}}] : memref<8xf32>
// CHECK-NEXT:    } {einc.stmt = "C", einc.axis = "W", einc.init}
// CHECK:         %[[T1:.*]] = memref.alloca()
// CHECK-NEXT:    affine.for
// CHECK-NEXT:      affine.load %{{.*}}[%{{.*}}, %{{.*}}] : memref<2x8xf32>
// CHECK-NEXT:      affine.store %{{.*}}, %[[T1]][%{{.*}}] : memref<8xf32>
// CHECK-NEXT:    } {einc.stmt = "C", einc.axis = "C.in0", einc.copy}

builtin.module {
  func.func @kernel(%A: memref<2x10xf32> {ein.name = "A"}, %C: memref<2x8xf32> {ein.name = "C", ein.output}) {
    %0 = arith.constant 0.000000e+00 : f32
    affine.for %H = 0 to 1 {
      %T0 = memref.alloca() {ein.name = "C_local", alignment = 64 : i64} : memref<8xf32>
      affine.for %i0 = 0 to 8 {
        %l0 = affine.load %C[%H, %i0] : memref<2x8xf32>
        affine.store %l0, %T0[%i0] : memref<8xf32>
      } {einc.stmt = "C", einc.axis = "C.in0", einc.copy}
      affine.for %W0 = 0 to 8 {
        affine.store %0, %T0[%W0] : memref<8xf32>
      } {einc.stmt = "C", einc.axis = "W", einc.init}
      affine.for %K0 = 0 to 3 {
        affine.for %Q0 = 0 to 8 {
          %a0 = affine.load %A[%H, %Q0 + %K0] : memref<2x10xf32>
          %s0 = affine.load %T0[%Q0] : memref<8xf32>
          %r0 = arith.addf %s0, %a0 : f32
          affine.store %r0, %T0[%Q0] : memref<8xf32>
        } {einc.stmt = "C", einc.axis = "W"}
      } {einc.stmt = "C", einc.axis = "K"}
      affine.for %o0 = 0 to 8 {
        %m0 = affine.load %T0[%o0] : memref<8xf32>
        affine.store %m0, %C[%H, %o0] : memref<2x8xf32>
      } {einc.stmt = "C", einc.axis = "C.out0", einc.copy}
    } {einc.stmt = "C", einc.axis = "H"}
    affine.for %H1 = 1 to 2 {
      %T1 = memref.alloca() {ein.name = "C_local", alignment = 64 : i64} : memref<8xf32>
      affine.for %i1 = 0 to 8 {
        %l1 = affine.load %C[%H1, %i1] : memref<2x8xf32>
        affine.store %l1, %T1[%i1] : memref<8xf32>
      } {einc.stmt = "C", einc.axis = "C.in0", einc.copy}
      affine.for %W1 = 0 to 4 {
        affine.store %0, %T1[%W1] : memref<8xf32>
      } {einc.stmt = "C", einc.axis = "W", einc.init}
      affine.for %K1 = 0 to 3 {
        affine.for %Q1 = 0 to 8 {
          %a1 = affine.load %A[%H1, %Q1 + %K1] : memref<2x10xf32>
          %s1 = affine.load %T1[%Q1] : memref<8xf32>
          %r1 = arith.addf %s1, %a1 : f32
          affine.store %r1, %T1[%Q1] : memref<8xf32>
        } {einc.stmt = "C", einc.axis = "W"}
      } {einc.stmt = "C", einc.axis = "K"}
      affine.for %o1 = 0 to 8 {
        %m1 = affine.load %T1[%o1] : memref<8xf32>
        affine.store %m1, %C[%H1, %o1] : memref<2x8xf32>
      } {einc.stmt = "C", einc.axis = "C.out0", einc.copy}
    } {einc.stmt = "C", einc.axis = "H1"}
    func.return
  }
}

// -----

// A pair form's output tile (cache_write ... split 0 by 4 layout [1, 2, 0]): the channel
// F = 4 g + f of a pair of groups (g.o step 2) staged as [W, f, g], so the copy loops move
// C's first dimension by two loops, f (coefficient 1, 4 of them) and g (coefficient 4, 2):
// one box of 8 channels (a mixed radix), the tiles of g.o cover C, the copy-in stores the
// identity and the fill goes.

// CHECK-LABEL: func.func @split_channel(
// CHECK-NEXT:    %[[ZERO:.*]] = arith.constant 0.000000e+00 : f32
// CHECK-NEXT:    affine.for %[[GO:.*]] = 0 to 4 step 2 {
// CHECK-NEXT:      %[[T:.*]] = memref.alloca()
// CHECK:                 affine.store %[[ZERO]], %[[T]][%{{.*}}, %{{.*}}, %{{.*}}] : memref<3x4x2xf32>
// CHECK-NOT:     affine.load %{{.*}} : memref<16x3xf32>
// CHECK:         affine.store %{{.*}}, %{{.*}}[%{{.*}}, %{{.*}}] : memref<16x3xf32>

builtin.module {
  func.func @split_channel(%A: memref<16x5xf32> {ein.name = "A"}, %C: memref<16x3xf32> {ein.name = "C", ein.output}) {
    %0 = arith.constant 0.000000e+00 : f32
    affine.for %F = 0 to 16 {
      affine.for %W = 0 to 3 {
        affine.store %0, %C[%F, %W] : memref<16x3xf32>
      } {einc.stmt = "C", einc.axis = "W", einc.init}
    } {einc.stmt = "C", einc.axis = "F", einc.init}
    affine.for %g_o = 0 to 4 step 2 {
      %T = memref.alloca() {ein.name = "C_local", alignment = 64 : i64} : memref<3x4x2xf32>
      affine.for %c_w = 0 to 3 {
        affine.for %c_f = 0 to 4 {
          affine.for %c_g = 0 to 2 {
            %1 = affine.load %C[%g_o * 4 + %c_g * 4 + %c_f, %c_w] : memref<16x3xf32>
            affine.store %1, %T[%c_w, %c_f, %c_g] : memref<3x4x2xf32>
          } {einc.stmt = "C", einc.axis = "C.in2", einc.copy}
        } {einc.stmt = "C", einc.axis = "C.in1", einc.copy}
      } {einc.stmt = "C", einc.axis = "C.in0", einc.copy}
      affine.for %K = 0 to 5 {
        affine.for %w = 0 to 3 {
          affine.for %l = 0 to 8 {
            %2 = affine.load %A[%g_o * 4 + (%l mod 2) * 4 + %l floordiv 2, %K] : memref<16x5xf32>
            %3 = affine.load %T[%w, %l floordiv 2, %l mod 2] : memref<3x4x2xf32>
            %4 = arith.addf %3, %2 : f32
            affine.store %4, %T[%w, %l floordiv 2, %l mod 2] : memref<3x4x2xf32>
          } {einc.stmt = "C", einc.axis = "l"}
        } {einc.stmt = "C", einc.axis = "W"}
      } {einc.stmt = "C", einc.axis = "K"}
      affine.for %c_w_1 = 0 to 3 {
        affine.for %c_f_1 = 0 to 4 {
          affine.for %c_g_1 = 0 to 2 {
            %5 = affine.load %T[%c_w_1, %c_f_1, %c_g_1] : memref<3x4x2xf32>
            affine.store %5, %C[%g_o * 4 + %c_g_1 * 4 + %c_f_1, %c_w_1] : memref<16x3xf32>
          } {einc.stmt = "C", einc.axis = "C.out2", einc.copy}
        } {einc.stmt = "C", einc.axis = "C.out1", einc.copy}
      } {einc.stmt = "C", einc.axis = "C.out0", einc.copy}
    } {einc.stmt = "C", einc.axis = "g.o"}
    func.return
  }
}

// -----

// The same with f over 5 channels (coefficient 4 on g): g's and f's positions overlap (4 g
// + f reaches channel 4 twice), no box: the copy-in still reads C, the fill stays.

// CHECK-LABEL: func.func @split_overlap(
// CHECK:         affine.store %{{.*}}, %{{.*}}[%{{.*}}, %{{.*}}] : memref<20x3xf32>
// CHECK:         } {einc.stmt = "C", einc.axis = "F", einc.init}
// CHECK:         %[[V:.*]] = affine.load %{{.*}}[%{{.*}} * 4 + %{{.*}} * 4 + %{{.*}}, %{{.*}}] : memref<20x3xf32>
// CHECK-NEXT:    affine.store %[[V]], %{{.*}} : memref<3x5x2xf32>

builtin.module {
  func.func @split_overlap(%A: memref<20x5xf32> {ein.name = "A"}, %C: memref<20x3xf32> {ein.name = "C", ein.output}) {
    %0 = arith.constant 0.000000e+00 : f32
    affine.for %F = 0 to 20 {
      affine.for %W = 0 to 3 {
        affine.store %0, %C[%F, %W] : memref<20x3xf32>
      } {einc.stmt = "C", einc.axis = "W", einc.init}
    } {einc.stmt = "C", einc.axis = "F", einc.init}
    affine.for %g_o = 0 to 4 step 2 {
      %T = memref.alloca() {ein.name = "C_local", alignment = 64 : i64} : memref<3x5x2xf32>
      affine.for %c_w = 0 to 3 {
        affine.for %c_f = 0 to 5 {
          affine.for %c_g = 0 to 2 {
            %1 = affine.load %C[%g_o * 4 + %c_g * 4 + %c_f, %c_w] : memref<20x3xf32>
            affine.store %1, %T[%c_w, %c_f, %c_g] : memref<3x5x2xf32>
          } {einc.stmt = "C", einc.axis = "C.in2", einc.copy}
        } {einc.stmt = "C", einc.axis = "C.in1", einc.copy}
      } {einc.stmt = "C", einc.axis = "C.in0", einc.copy}
      affine.for %K = 0 to 5 {
        affine.for %w = 0 to 3 {
          affine.for %f = 0 to 5 {
            %2 = affine.load %A[%g_o * 4 + %f, %K] : memref<20x5xf32>
            %3 = affine.load %T[%w, %f, 0] : memref<3x5x2xf32>
            %4 = arith.addf %3, %2 : f32
            affine.store %4, %T[%w, %f, 0] : memref<3x5x2xf32>
          } {einc.stmt = "C", einc.axis = "f"}
        } {einc.stmt = "C", einc.axis = "W"}
      } {einc.stmt = "C", einc.axis = "K"}
      affine.for %c_w_1 = 0 to 3 {
        affine.for %c_f_1 = 0 to 5 {
          affine.for %c_g_1 = 0 to 2 {
            %5 = affine.load %T[%c_w_1, %c_f_1, %c_g_1] : memref<3x5x2xf32>
            affine.store %5, %C[%g_o * 4 + %c_g_1 * 4 + %c_f_1, %c_w_1] : memref<20x3xf32>
          } {einc.stmt = "C", einc.axis = "C.out2", einc.copy}
        } {einc.stmt = "C", einc.axis = "C.out1", einc.copy}
      } {einc.stmt = "C", einc.axis = "C.out0", einc.copy}
    } {einc.stmt = "C", einc.axis = "g.o"}
    func.return
  }
}


// -----

// A row tile T staged inside a larger tile P of the same output (the CPU policy's grouped
// convolution: its channel tile's whole planes staged to be streamed out, the rows' register
// tiles inside): the fill of C goes and P's copy-in stores the identity; that copy-in is then
// a fill of P (`_init_within_tiles`): T's copy-in stores the identity instead of reading P,
// and, T's tiles covering P, P's copy-in goes too. P's copy-out is unchanged.

// CHECK-LABEL: func.func @kernel(
// CHECK-NEXT:    %[[ZERO:.*]] = arith.constant 0.000000e+00 : f32
// CHECK-NEXT:    affine.for %[[N:.*]] = 0 to 2 {
// CHECK-NEXT:      %[[P:.*]] = memref.alloca() {{.*}} : memref<1x8xf32>
// CHECK-NEXT:      affine.for %[[MO:.*]] = 0 to 8 step 4 {
// CHECK-NEXT:        %[[T:.*]] = memref.alloca() {{.*}} : memref<1x4xf32>
// CHECK-NEXT:        affine.for
// CHECK-NEXT:          affine.for
// CHECK-NEXT:            affine.store %[[ZERO]], %[[T]][%{{.*}}, %{{.*}}] : memref<1x4xf32>
// CHECK-NOT:     affine.load %[[P]]
// CHECK:                 affine.store %{{.*}}, %[[P]][%{{.*}}, %[[MO]] + %{{.*}}] : memref<1x8xf32>
// CHECK:               %[[V:.*]] = affine.load %[[P]][%{{.*}}, %{{.*}}] : memref<1x8xf32>
// CHECK-NEXT:          affine.store %[[V]], %{{.*}}[%[[N]] + %{{.*}}, %{{.*}}] : memref<2x8xf32>

builtin.module {
  func.func @kernel(%A: memref<2x8xf32> {ein.name = "A"}, %C: memref<2x8xf32> {ein.name = "C", ein.output}) {
    %0 = arith.constant 0.000000e+00 : f32
    affine.for %N = 0 to 2 {
      affine.for %M = 0 to 8 {
        affine.store %0, %C[%N, %M] : memref<2x8xf32>
      } {einc.stmt = "C", einc.axis = "M", einc.init}
    } {einc.stmt = "C", einc.axis = "N", einc.init}
    affine.for %N = 0 to 2 {
      %P = memref.alloca() {ein.name = "C_local", alignment = 64 : i64} : memref<1x8xf32>
      affine.for %p0 = 0 to 1 {
        affine.for %p1 = 0 to 8 {
          %1 = affine.load %C[%N + %p0, %p1] : memref<2x8xf32>
          affine.store %1, %P[%p0, %p1] : memref<1x8xf32>
        } {einc.stmt = "C", einc.axis = "C.in1", einc.copy}
      } {einc.stmt = "C", einc.axis = "C.in0", einc.copy}
      affine.for %M_o = 0 to 8 step 4 {
        %T = memref.alloca() {ein.name = "C_local_local", alignment = 64 : i64} : memref<1x4xf32>
        affine.for %t0 = 0 to 1 {
          affine.for %t1 = 0 to 4 {
            %2 = affine.load %P[%t0, %M_o + %t1] : memref<1x8xf32>
            affine.store %2, %T[%t0, %t1] : memref<1x4xf32>
          } {einc.stmt = "C", einc.axis = "C_local.in1", einc.copy}
        } {einc.stmt = "C", einc.axis = "C_local.in0", einc.copy}
        affine.for %M_i = 0 to 4 {
          %3 = affine.load %A[%N, %M_o + %M_i] : memref<2x8xf32>
          %4 = affine.load %T[0, %M_i] : memref<1x4xf32>
          %5 = arith.addf %4, %3 : f32
          affine.store %5, %T[0, %M_i] : memref<1x4xf32>
        } {einc.stmt = "C", einc.axis = "M.i"}
        affine.for %u0 = 0 to 1 {
          affine.for %u1 = 0 to 4 {
            %6 = affine.load %T[%u0, %u1] : memref<1x4xf32>
            affine.store %6, %P[%u0, %M_o + %u1] : memref<1x8xf32>
          } {einc.stmt = "C", einc.axis = "C_local.out1", einc.copy}
        } {einc.stmt = "C", einc.axis = "C_local.out0", einc.copy}
      } {einc.stmt = "C", einc.axis = "M.o"}
      affine.for %q0 = 0 to 1 {
        affine.for %q1 = 0 to 8 {
          %7 = affine.load %P[%q0, %q1] : memref<1x8xf32>
          affine.store %7, %C[%N + %q0, %q1] : memref<2x8xf32>
        } {einc.stmt = "C", einc.axis = "C.out1", einc.copy}
      } {einc.stmt = "C", einc.axis = "C.out0", einc.copy}
    } {einc.stmt = "C", einc.axis = "N"}
    func.return
  }
}
