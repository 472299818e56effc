// RUN: einc-opt %s --split-input-file -p "einc-vectorize-loops{target=c}" | filecheck %s

// A constant trip count the width divides: one vector loop (16 f32 lanes on C), no remainder,
// the mark dropped; the invariant constant is broadcast.

func.func @divisible_trip_count(%A: memref<64xf32>, %B: memref<64xf32>) {
  %two = arith.constant 2.000000e+00 : f32
  affine.for %i = 0 to 64 {
    %a = affine.load %A[%i] : memref<64xf32>
    %b = arith.mulf %a, %two : f32
    affine.store %b, %B[%i] : memref<64xf32>
  } {einc.vectorize}
  func.return
}

// CHECK-LABEL: func.func @divisible_trip_count(
// CHECK:         affine.for %[[I:.*]] = 0 to 64 step 16 {
// CHECK-NEXT:      %[[A:.*]] = egpu.vload %{{.*}}[%[[I]]] : memref<64xf32> -> vector<16xf32>
// CHECK-NEXT:      %[[T:.*]] = egpu.vbroadcast %{{.*}} : f32 -> vector<16xf32>
// CHECK-NEXT:      %[[B:.*]] = arith.mulf %[[A]], %[[T]] : vector<16xf32>
// CHECK-NEXT:      egpu.vstore %[[B]], %{{.*}}[%[[I]]] : vector<16xf32>, memref<64xf32>
// CHECK-NEXT:    }
// CHECK-NEXT:    func.return

// -----

// 45 = 2 * 16 + 13: a vector loop to 32, the remainder in narrower vectors (8, then 4: the
// width is capped by a constant trip count) and the last element scalar (unmarked).

func.func @remainder_tail(%A: memref<3x45xf32>, %B: memref<3x45xf32>) {
  affine.for %n = 0 to 3 {
    affine.for %m = 0 to 45 {
      %a = affine.load %A[%n, %m] : memref<3x45xf32>
      %b = arith.addf %a, %a : f32
      affine.store %b, %B[%n, %m] : memref<3x45xf32>
    } {einc.vectorize, einc.axis = "M"}
  }
  func.return
}

// CHECK-LABEL: func.func @remainder_tail(
// CHECK:           affine.for %[[M:.*]] = 0 to 32 step 16 {
// CHECK-NEXT:        %[[A:.*]] = egpu.vload %{{.*}}[%{{.*}}, %[[M]]] : memref<3x45xf32> -> vector<16xf32>
// CHECK-NEXT:        %[[B:.*]] = arith.addf %[[A]], %[[A]] : vector<16xf32>
// CHECK-NEXT:        egpu.vstore %[[B]], %{{.*}}[%{{.*}}, %[[M]]] : vector<16xf32>, memref<3x45xf32>
// CHECK-NEXT:      } {einc.axis = "M"}
// CHECK-NEXT:      affine.for %[[R8:.*]] = 32 to 40 step 8 {
// CHECK-NEXT:        egpu.vload %{{.*}}[%{{.*}}, %[[R8]]] : memref<3x45xf32> -> vector<8xf32>
// CHECK:           } {einc.axis = "M"}
// CHECK-NEXT:      affine.for %[[R4:.*]] = 40 to 44 step 4 {
// CHECK-NEXT:        egpu.vload %{{.*}}[%{{.*}}, %[[R4]]] : memref<3x45xf32> -> vector<4xf32>
// CHECK:           } {einc.axis = "M"}
// CHECK-NEXT:      affine.for %[[R:.*]] = 44 to 45 {
// CHECK-NEXT:        %{{.*}} = affine.load %{{.*}}[%{{.*}}, %[[R]]] : memref<3x45xf32>
// CHECK-NEXT:        %{{.*}} = arith.addf %{{.*}}, %{{.*}} : f32
// CHECK-NEXT:        affine.store
// CHECK-NEXT:      } {einc.axis = "M"}

// -----

// A tile's upper bound is a min (a partial last tile): the main loop ends at
// lb + 16 * floor((ub - lb) / 16), the remainder starts at max(lb, that).

func.func @min_bound_from_tiling(%A: memref<100xf32>, %B: memref<100xf32>) {
  affine.for %o = 0 to 100 step 32 {
    affine.for %i = %o to min affine_map<(d0) -> (d0 + 32, 100)>(%o) {
      %a = affine.load %A[%i] : memref<100xf32>
      affine.store %a, %B[%i] : memref<100xf32>
    } {einc.vectorize}
  }
  func.return
}

// CHECK-LABEL: func.func @min_bound_from_tiling(
// CHECK:         affine.for %[[O:.*]] = 0 to 100 step 32 {
// CHECK-NEXT:      %[[UB:.*]] = affine.min affine_map<(d0) -> ((d0 + 32), 100)> (%[[O]])
// CHECK-NEXT:      %[[END:.*]] = affine.apply affine_map<(d0, d1) -> ((d0 + (((d1 + (d0 * -1)) floordiv 16) * 16)))> (%[[O]], %[[UB]])
// CHECK-NEXT:      affine.for %[[I:.*]] = affine_map<(d0) -> (d0)>(%[[O]]) to affine_map<(d0) -> (d0)>(%[[END]]) step 16 {
// CHECK-NEXT:        %[[V:.*]] = egpu.vload %{{.*}}[%[[I]]] : memref<100xf32> -> vector<16xf32>
// CHECK-NEXT:        egpu.vstore %[[V]], %{{.*}}[%[[I]]] : vector<16xf32>, memref<100xf32>
// CHECK-NEXT:      }
// CHECK-NEXT:      affine.for %{{.*}} = max affine_map<(d0, d1) -> (d0, d1)>(%[[O]], %[[END]]) to min affine_map<(d0) -> ((d0 + 32), 100)>(%[[O]]) {
// CHECK-NEXT:        affine.load
// CHECK-NEXT:        affine.store
// CHECK-NEXT:      }

// -----

// A load that does not depend on the loop variable stays a scalar load, broadcast once.

func.func @broadcast_invariant_load(%A: memref<8x32xf32>, %x: memref<8xf32>, %B: memref<8x32xf32>) {
  affine.for %n = 0 to 8 {
    affine.for %m = 0 to 32 {
      %a = affine.load %A[%n, %m] : memref<8x32xf32>
      %s = affine.load %x[%n] : memref<8xf32>
      %b = arith.mulf %a, %s : f32
      affine.store %b, %B[%n, %m] : memref<8x32xf32>
    } {einc.vectorize}
  }
  func.return
}

// CHECK-LABEL: func.func @broadcast_invariant_load(
// CHECK:           affine.for %[[M:.*]] = 0 to 32 step 16 {
// CHECK-NEXT:        %[[A:.*]] = egpu.vload %{{.*}}[%[[N:.*]], %[[M]]] : memref<8x32xf32> -> vector<16xf32>
// CHECK-NEXT:        %[[S:.*]] = affine.load %{{.*}}[%[[N]]] : memref<8xf32>
// CHECK-NEXT:        %[[SV:.*]] = egpu.vbroadcast %[[S]] : f32 -> vector<16xf32>
// CHECK-NEXT:        %[[B:.*]] = arith.mulf %[[A]], %[[SV]] : vector<16xf32>
// CHECK-NEXT:        egpu.vstore %[[B]], %{{.*}}[%[[N]], %[[M]]] : vector<16xf32>, memref<8x32xf32>
// CHECK-NEXT:      }
// CHECK-NOT:       affine.for

// -----

// A reduction into an invariant element: a vector accumulator from the identity (-0.0 for
// add), the lanes reduced after the loop and combined into the element once; the remainder
// (40 = 32 + 8) continues from there, as a reduction of 8 lanes.

func.func @reduction(%A: memref<40xf32>, %S: memref<1xf32>) {
  %c0 = arith.constant 0 : index
  affine.for %k = 0 to 40 {
    %a = affine.load %A[%k] : memref<40xf32>
    %s = affine.load %S[%c0] : memref<1xf32>
    %t = arith.addf %s, %a : f32
    affine.store %t, %S[%c0] : memref<1xf32>
  } {einc.vectorize}
  func.return
}

// CHECK-LABEL: func.func @reduction(
// CHECK:         %[[ID:.*]] = arith.constant -0.000000e+00 : f32
// CHECK-NEXT:    %[[INIT:.*]] = egpu.vbroadcast %[[ID]] : f32 -> vector<16xf32>
// CHECK-NEXT:    %[[ACC:.*]] = affine.for %[[K:.*]] = 0 to 32 step 16 iter_args(%[[P:.*]] = %[[INIT]]) -> (vector<16xf32>) {
// CHECK-NEXT:      %[[A:.*]] = egpu.vload %{{.*}}[%[[K]]] : memref<40xf32> -> vector<16xf32>
// CHECK-NEXT:      %[[Q:.*]] = arith.addf %[[P]], %[[A]] : vector<16xf32>
// CHECK-NEXT:      affine.yield %[[Q]] : vector<16xf32>
// CHECK-NEXT:    }
// CHECK-NEXT:    %[[R:.*]] = egpu.vreduce add %[[ACC]] : vector<16xf32> -> f32
// CHECK-NEXT:    %[[OLD:.*]] = affine.load %[[S:.*]][%[[C0:.*]]] : memref<1xf32>
// CHECK-NEXT:    %[[NEW:.*]] = arith.addf %[[OLD]], %[[R]] : f32
// CHECK-NEXT:    affine.store %[[NEW]], %[[S]][%[[C0]]] : memref<1xf32>
// CHECK-NEXT:    %{{.*}} = arith.constant -0.000000e+00 : f32
// CHECK-NEXT:    %{{.*}} = egpu.vbroadcast %{{.*}} : f32 -> vector<8xf32>
// CHECK-NEXT:    %{{.*}} = affine.for %{{.*}} = 32 to 40 step 8 iter_args(%{{.*}} = %{{.*}}) -> (vector<8xf32>) {

// -----

// A gather (an index that is not unit-stride in the loop variable) has no vector form: the
// loop stays scalar and keeps its mark (C prints `#pragma omp simd`).

func.func @fallback_for_a_gather(%A: memref<64xf32>, %B: memref<32xf32>) {
  affine.for %i = 0 to 32 {
    %a = affine.load %A[%i * 2] : memref<64xf32>
    affine.store %a, %B[%i] : memref<32xf32>
  } {einc.vectorize}
  func.return
}

// CHECK-LABEL: func.func @fallback_for_a_gather(
// CHECK-NEXT:    affine.for %{{.*}} = 0 to 32 {
// CHECK-NEXT:      %{{.*}} = affine.load %{{.*}}[%{{.*}} * 2] : memref<64xf32>
// CHECK-NEXT:      affine.store
// CHECK-NEXT:    } {einc.vectorize}

// -----

// f16 has no vectors on C (it is storage only there): the loop stays scalar with its mark.

func.func @fallback_for_f16(%A: memref<64xf16>, %B: memref<64xf16>) {
  affine.for %i = 0 to 64 {
    %a = affine.load %A[%i] : memref<64xf16>
    affine.store %a, %B[%i] : memref<64xf16>
  } {einc.vectorize}
  func.return
}

// CHECK-LABEL: func.func @fallback_for_f16(
// CHECK-NOT:     egpu.
// CHECK:         } {einc.vectorize}

// -----

// f64 lanes are half as many (8 on C); integer max reductions use the type's minimum.

func.func @f64_and_integer_reduction(%A: memref<16xf64>, %B: memref<16xf64>, %I: memref<16xi32>, %M: memref<1xi32>) {
  %c0 = arith.constant 0 : index
  affine.for %i = 0 to 16 {
    %a = affine.load %A[%i] : memref<16xf64>
    %n = arith.negf %a : f64
    affine.store %n, %B[%i] : memref<16xf64>
    %x = affine.load %I[%i] : memref<16xi32>
    %m = affine.load %M[%c0] : memref<1xi32>
    %y = arith.maxsi %m, %x : i32
    affine.store %y, %M[%c0] : memref<1xi32>
  } {einc.vectorize}
  func.return
}

// CHECK-LABEL: func.func @f64_and_integer_reduction(
// CHECK:         %[[ID:.*]] = arith.constant -2147483648 : i32
// CHECK-NEXT:    %[[INIT:.*]] = egpu.vbroadcast %[[ID]] : i32 -> vector<8xi32>
// CHECK-NEXT:    %[[ACC:.*]] = affine.for %[[I:.*]] = 0 to 16 step 8 iter_args(%[[P:.*]] = %[[INIT]]) -> (vector<8xi32>) {
// CHECK-NEXT:      %[[A:.*]] = egpu.vload %{{.*}}[%[[I]]] : memref<16xf64> -> vector<8xf64>
// CHECK-NEXT:      %[[N:.*]] = arith.negf %[[A]] : vector<8xf64>
// CHECK-NEXT:      egpu.vstore %[[N]], %{{.*}}[%[[I]]] : vector<8xf64>, memref<16xf64>
// CHECK-NEXT:      %[[X:.*]] = egpu.vload %{{.*}}[%[[I]]] : memref<16xi32> -> vector<8xi32>
// CHECK-NEXT:      %[[Y:.*]] = arith.maxsi %[[P]], %[[X]] : vector<8xi32>
// CHECK-NEXT:      affine.yield %[[Y]] : vector<8xi32>
// CHECK-NEXT:    }
// CHECK-NEXT:    %[[R:.*]] = egpu.vreduce max %[[ACC]] : vector<8xi32> -> i32
// CHECK-NEXT:    %[[OLD:.*]] = affine.load
// CHECK-NEXT:    %{{.*}} = arith.maxsi %[[OLD]], %[[R]] : i32
// CHECK-NEXT:    affine.store
// CHECK-NEXT:    func.return

// -----

// A partial tile of at most 6 iterations: the width is clamped to 4 lanes (the largest trip
// count bounds it, as a constant trip count does).

func.func @tile_narrower_than_the_width(%A: memref<100xf32>, %B: memref<100xf32>) {
  affine.for %o = 0 to 100 step 6 {
    affine.for %i = %o to min affine_map<(d0) -> (d0 + 6, 100)>(%o) {
      %a = affine.load %A[%i] : memref<100xf32>
      affine.store %a, %B[%i] : memref<100xf32>
    } {einc.vectorize}
  }
  func.return
}

// CHECK-LABEL: func.func @tile_narrower_than_the_width(
// CHECK:         affine.for %[[I:.*]] = affine_map<(d0) -> (d0)>(%{{.*}}) to affine_map<(d0) -> (d0)>(%{{.*}}) step 4 {
// CHECK-NEXT:      %[[V:.*]] = egpu.vload %{{.*}}[%[[I]]] : memref<100xf32> -> vector<4xf32>

// -----

// Casts become egpu.vconvert (C-cast semantics; xDSL's arith casts take scalars only); the
// width follows the widest element (f64: 8 lanes), so the f32 and i32 vectors have 8 too.

func.func @casts(%A: memref<16xi32>, %B: memref<16xf64>, %C: memref<16xf32>) {
  affine.for %i = 0 to 16 {
    %a = affine.load %A[%i] : memref<16xi32>
    %f = arith.sitofp %a : i32 to f64
    %b = affine.load %B[%i] : memref<16xf64>
    %s = arith.addf %f, %b : f64
    %t = arith.truncf %s : f64 to f32
    affine.store %t, %C[%i] : memref<16xf32>
  } {einc.vectorize}
  func.return
}

// CHECK-LABEL: func.func @casts(
// CHECK:         affine.for %[[I:.*]] = 0 to 16 step 8 {
// CHECK-NEXT:      %[[A:.*]] = egpu.vload %{{.*}}[%[[I]]] : memref<16xi32> -> vector<8xi32>
// CHECK-NEXT:      %[[F:.*]] = egpu.vconvert %[[A]] : vector<8xi32> -> vector<8xf64>
// CHECK-NEXT:      %[[B:.*]] = egpu.vload %{{.*}}[%[[I]]] : memref<16xf64> -> vector<8xf64>
// CHECK-NEXT:      %[[S:.*]] = arith.addf %[[F]], %[[B]] : vector<8xf64>
// CHECK-NEXT:      %[[T:.*]] = egpu.vconvert %[[S]] : vector<8xf64> -> vector<8xf32>
// CHECK-NEXT:      egpu.vstore %[[T]], %{{.*}}[%[[I]]] : vector<8xf32>, memref<16xf32>

// -----

// Ops that do not depend on the loop variable stay scalar (casts included) and are
// broadcast where a vector op or store uses them.

func.func @invariant_scalar_ops(%B: memref<4xf64>) {
  affine.for %i = 0 to 4 {
    %c = arith.constant 1.000000e+00 : f32
    %e = arith.extf %c : f32 to f64
    affine.store %e, %B[%i] : memref<4xf64>
  } {einc.vectorize}
  func.return
}

// CHECK-LABEL: func.func @invariant_scalar_ops(
// CHECK:         affine.for %[[I:.*]] = 0 to 4 step 4 {
// CHECK-NEXT:      %[[C:.*]] = arith.constant 1.000000e+00 : f32
// CHECK-NEXT:      %[[E:.*]] = arith.extf %[[C]] : f32 to f64
// CHECK-NEXT:      %[[V:.*]] = egpu.vbroadcast %[[E]] : f64 -> vector<4xf64>
// CHECK-NEXT:      egpu.vstore %[[V]], %{{.*}}[%[[I]]] : vector<4xf64>, memref<4xf64>

// -----

// A load whose last index is `i mod 2` (lane 2 f + g over two groups, the input staged with
// the groups innermost): the run of 2 elements from the vector's first lane repeated over
// the lanes (egpu.vload_repeat), the other accesses unit-stride.

func.func @repeated_pair(%X: memref<4x2xf32>, %W: memref<4x16xf32>, %Y: memref<4x16xf32>) {
  affine.for %c = 0 to 4 {
    affine.for %l = 0 to 16 {
      %x = affine.load %X[%c, %l mod 2] : memref<4x2xf32>
      %w = affine.load %W[%c, %l] : memref<4x16xf32>
      %p = arith.mulf %x, %w : f32
      affine.store %p, %Y[%c, %l] : memref<4x16xf32>
    } {einc.vectorize}
  }
  func.return
}

// CHECK-LABEL: func.func @repeated_pair(
// CHECK:         affine.for %[[L:.*]] = 0 to 16 step 16 {
// CHECK:           %{{.*}} = egpu.vload_repeat %{{.*}}[%{{.*}}, %{{.*}}] run 2 : memref<4x2xf32> -> vector<16xf32>
// CHECK:           %{{.*}} = egpu.vload %{{.*}}[%{{.*}}, %[[L]]] : memref<4x16xf32> -> vector<16xf32>
