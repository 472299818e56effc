// RUN: einc-opt %s --split-input-file -p einc-unswitch | filecheck %s
// RUN: einc-opt %s --split-input-file -p 'einc-unswitch{max-versions=2}' | filecheck %s --check-prefix=TWO
// RUN: einc-opt %s --split-input-file -p 'einc-unswitch{when=false}' | filecheck %s --check-prefix=OLD

// A partial tile's rows unrolled inside K (13 rows in tiles of 4: `v = 13 - N_o` rows left,
// rows 1 and 2 guarded): the guards depend on N_o only, so they are tested before K. The
// strongest (`2 < v`, which makes `1 < v` true) first: its true version is the whole tile's
// loop with no condition. In its false version N_o >= 11, so N_o = 12 (N_o's iterates), and
// `1 < v` is false there too: two versions, neither with a condition.

// CHECK-LABEL: func.func @unswitch_partial_tile_rows(
// CHECK:         affine.for %[[NO:.*]] = 0 to 13 step 4 {
// CHECK-NEXT:      %[[V:.*]] = affine.apply affine_map<(d0) -> (((d0 * -1) + 13))> (%[[NO]])
// CHECK-NEXT:      %[[C2:.*]] = arith.constant 2 : index
// CHECK-NEXT:      %[[G2:.*]] = arith.cmpi slt, %[[C2]], %[[V]] : index
// CHECK-NEXT:      scf.if %[[G2]] {
// CHECK-NEXT:        affine.for %{{.*}} = 0 to 11 {
// CHECK-NOT:           scf.if
// CHECK-COUNT-3:       affine.store
// CHECK-NEXT:        } {einc.stmt = "T", einc.axis = "K"}
// CHECK-NEXT:      } else {
// CHECK-NEXT:        affine.for %{{.*}} = 0 to 11 {
// CHECK-NOT:           scf.if
// CHECK-COUNT-1:       affine.store
// CHECK-NEXT:        } {einc.stmt = "T", einc.axis = "K"}
// CHECK-NEXT:      }

// TWO-LABEL: func.func @unswitch_partial_tile_rows(
// TWO:         scf.if
// TWO-NOT:     scf.if
// TWO-LABEL: func.func @unswitch_on_an_argument(

builtin.module {
  func.func @unswitch_partial_tile_rows(%A: memref<13x11xf32>, %T: memref<4xf32>) {
    affine.for %N_o = 0 to 13 step 4 {
      affine.for %K = 0 to 11 {
        %v = affine.apply affine_map<(d0) -> (((d0 * -1) + 13))> (%N_o)
        %c0 = arith.constant 0 : index
        %a0 = affine.load %A[%N_o + %c0, %K] : memref<13x11xf32>
        affine.store %a0, %T[%c0] : memref<4xf32>
        %c1 = arith.constant 1 : index
        %g1 = arith.cmpi slt, %c1, %v : index
        scf.if %g1 {
          %a1 = affine.load %A[%N_o + %c1, %K] : memref<13x11xf32>
          affine.store %a1, %T[%c1] : memref<4xf32>
        }
        %c2 = arith.constant 2 : index
        %g2 = arith.cmpi slt, %c2, %v : index
        scf.if %g2 {
          %a2 = affine.load %A[%N_o + %c2, %K] : memref<13x11xf32>
          affine.store %a2, %T[%c2] : memref<4xf32>
        }
      } {einc.stmt = "T", einc.axis = "K"}
    } {einc.stmt = "T", einc.axis = "N.o"}
    func.return
  }
}

// -----

// The same guards on a value of unknown range (an argument `%v`): `2 < v` false leaves
// `1 < v` open, so the false version is unswitched on it in turn (three versions). With at
// most two versions (TWO) only the strongest is hoisted: the other stays inside K.

// CHECK-LABEL: func.func @unswitch_on_an_argument(
// CHECK:         %[[G2:.*]] = arith.cmpi slt, %{{.*}}, %[[V:.*]] : index
// CHECK-NEXT:    scf.if %[[G2]] {
// CHECK-NEXT:      affine.for %{{.*}} = 0 to 11 {
// CHECK-NOT:         scf.if
// CHECK-COUNT-3:     affine.store
// CHECK-NEXT:      } {einc.stmt = "T", einc.axis = "K"}
// CHECK-NEXT:    } else {
// CHECK:           %[[G1:.*]] = arith.cmpi slt, %{{.*}}, %[[V]] : index
// CHECK-NEXT:      scf.if %[[G1]] {
// CHECK-NEXT:        affine.for %{{.*}} = 0 to 11 {
// CHECK-NOT:           scf.if
// CHECK-COUNT-2:       affine.store
// CHECK-NEXT:        } {einc.stmt = "T", einc.axis = "K"}
// CHECK-NEXT:      } else {
// CHECK-NEXT:        affine.for %{{.*}} = 0 to 11 {
// CHECK-NOT:           scf.if
// CHECK-COUNT-1:       affine.store
// CHECK-NEXT:        } {einc.stmt = "T", einc.axis = "K"}

// TWO:         scf.if %{{.*}} {
// TWO-NEXT:      affine.for %{{.*}} = 0 to 11 {
// TWO-NOT:         scf.if
// TWO:           } {einc.stmt = "T", einc.axis = "K"}
// TWO-NEXT:    } else {
// TWO-NEXT:      affine.for %{{.*}} = 0 to 11 {
// TWO:             scf.if
// TWO:           } {einc.stmt = "T", einc.axis = "K"}
// TWO-NEXT:    }

builtin.module {
  func.func @unswitch_on_an_argument(%A: memref<13x11xf32>, %T: memref<4xf32>, %v: index) {
    affine.for %K = 0 to 11 {
      %c0 = arith.constant 0 : index
      %a0 = affine.load %A[%c0, %K] : memref<13x11xf32>
      affine.store %a0, %T[%c0] : memref<4xf32>
      %c1 = arith.constant 1 : index
      %g1 = arith.cmpi slt, %c1, %v : index
      scf.if %g1 {
        %a1 = affine.load %A[%c1, %K] : memref<13x11xf32>
        affine.store %a1, %T[%c1] : memref<4xf32>
      }
      %c2 = arith.constant 2 : index
      %g2 = arith.cmpi slt, %c2, %v : index
      scf.if %g2 {
        %a2 = affine.load %A[%c2, %K] : memref<13x11xf32>
        affine.store %a2, %T[%c2] : memref<4xf32>
      }
    } {einc.stmt = "T", einc.axis = "K"}
    func.return
  }
}

// -----

// A guard on K itself changes in the loop: it stays, the loop is not versioned.

// CHECK-LABEL: func.func @guard_on_the_loop_variable_stays(
// CHECK:         affine.for %[[K:.*]] = 0 to 11 {
// CHECK-NEXT:      %[[C:.*]] = arith.constant 5 : index
// CHECK-NEXT:      %[[G:.*]] = arith.cmpi slt, %[[K]], %[[C]] : index
// CHECK-NEXT:      scf.if %[[G]] {
// CHECK-NOT:     scf.if

builtin.module {
  func.func @guard_on_the_loop_variable_stays(%A: memref<11xf32>, %T: memref<1xf32>) {
    affine.for %K = 0 to 11 {
      %c = arith.constant 5 : index
      %g = arith.cmpi slt, %K, %c : index
      scf.if %g {
        %a = affine.load %A[%K] : memref<11xf32>
        affine.store %a, %T[0] : memref<1xf32>
      }
    } {einc.stmt = "T", einc.axis = "K"}
    func.return
  }
}

// -----

// A guard whose condition is computed with an op that may trap (a division by the outer
// variable) is not hoisted: before a loop that runs no iteration it could trap.

// CHECK-LABEL: func.func @trapping_condition_stays(
// CHECK:         affine.for %{{.*}} = 0 to %{{.*}} {
// CHECK-NEXT:      arith.divsi
// CHECK-NEXT:      arith.cmpi
// CHECK-NEXT:      scf.if

builtin.module {
  func.func @trapping_condition_stays(%A: memref<11xf32>, %T: memref<1xf32>, %n: index, %d: index) {
    affine.for %K = 0 to %n {
      %q = arith.divsi %n, %d : index
      %g = arith.cmpi slt, %q, %n : index
      scf.if %g {
        %a = affine.load %A[%K] : memref<11xf32>
        affine.store %a, %T[0] : memref<1xf32>
      }
    } {einc.stmt = "T", einc.axis = "K"}
    func.return
  }
}

// -----

// A padded read's `.when` (an `scf.if` that yields the element or 0.0) inside the loop over
// output columns W: its row test `0 <= r < 4` (r = %h - 1) is invariant in W, its column test
// is not. W is versioned on the row part: the row-inside version keeps only the column test
// (the `andi` with the row part folded away), the other multiplies the padding, with no
// read and no condition.

// Without `when` (prefix OLD, what the pass did before), the `.when` stays in W.

// OLD-LABEL: func.func @when_row_guard(
// OLD-NEXT:    affine.for
// OLD:         scf.if %{{.*}} -> (f32) {
// OLD-NOT:     scf.if

// CHECK-LABEL: func.func @when_row_guard(
// CHECK:         %[[R:.*]] = affine.apply
// CHECK:         %[[IN:.*]] = arith.andi
// CHECK-NEXT:    scf.if %[[IN]] {
// CHECK-NEXT:      affine.for %[[W:.*]] = 0 to 5 {
// CHECK:             %[[C0:.*]] = arith.cmpi sge, %[[C:.*]], %{{.*}} : index
// CHECK-NEXT:        %[[C1:.*]] = arith.cmpi slt, %[[C]], %{{.*}} : index
// CHECK-NEXT:        %[[CIN:.*]] = arith.andi %[[C0]], %[[C1]] : i1
// CHECK-NEXT:        %{{.*}} = scf.if %[[CIN]] -> (f32) {
// CHECK-NEXT:          affine.load
// CHECK:             } {einc.stmt = "O", einc.axis = "W"}
// CHECK-NEXT:    } else {
// CHECK-NEXT:      affine.for %{{.*}} = 0 to 5 {
// CHECK-NOT:         scf.if
// CHECK-NOT:         memref<4x5xf32>
// CHECK:             arith.mulf
// CHECK:             arith.addf
// CHECK:           } {einc.stmt = "O", einc.axis = "W"}
// CHECK-NEXT:    }

builtin.module {
  func.func @when_row_guard(%I: memref<4x5xf32>, %O: memref<5xf32>, %h: index, %w: f32) {
    affine.for %W = 0 to 5 {
      %r = affine.apply affine_map<(d0) -> ((d0 - 1))> (%h)
      %c = affine.apply affine_map<(d0) -> ((d0 - 1))> (%W)
      %z = arith.constant 0 : index
      %four = arith.constant 4 : index
      %five = arith.constant 5 : index
      %r0 = arith.cmpi sge, %r, %z : index
      %r1 = arith.cmpi slt, %r, %four : index
      %rin = arith.andi %r0, %r1 : i1
      %c0 = arith.cmpi sge, %c, %z : index
      %rc = arith.andi %rin, %c0 : i1
      %c1 = arith.cmpi slt, %c, %five : index
      %in = arith.andi %rc, %c1 : i1
      %x = scf.if %in -> (f32) {
        %e = affine.load %I[%r, %c] : memref<4x5xf32>
        scf.yield %e : f32
      } else {
        %p = arith.constant 0.0 : f32
        scf.yield %p : f32
      }
      %o = affine.load %O[%W] : memref<5xf32>
      %xw = arith.mulf %x, %w : f32
      %s = arith.addf %o, %xw : f32
      affine.store %s, %O[%W] : memref<5xf32>
    } {einc.stmt = "O", einc.axis = "W"}
    func.return
  }
}
