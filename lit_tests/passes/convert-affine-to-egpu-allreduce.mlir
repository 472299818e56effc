// RUN: einc-opt %s --split-input-file -p "convert-affine-to-egpu{target=opencl}" | filecheck %s
// RUN: einc-opt %s --split-input-file -p "convert-affine-to-egpu{target=cuda}" | filecheck %s --check-prefix=CUDA

// A reduction loop bound to thread.x (K.i, a partial tile of 30 by 16) below a sequential
// K.o: each work-item carries a private partial from the identity through K.o (iter_args),
// adding only where its K.i is inside the tile; then the block's 16 partials meet in a
// shared-memory tree (OpenCL: PoCL has no sub-groups), halving with a barrier after each
// step but the last, and work-item 0 runs the fused fill and adds the total to C[N].
// On CUDA 16 threads are a power-of-two cluster of a warp: one egpu.subgroup_reduce.

// CHECK-LABEL: egpu.func @row_sum_partial_tiles_C(
// CHECK-SAME:      grid [5, 1, 1] block [16, 1, 1] {
// CHECK-NEXT:    %[[SH:.*]] = egpu.alloc_shared : memref<16xf32>
// CHECK-NEXT:    %[[ZERO:.*]] = arith.constant 0.000000e+00 : f32
// CHECK-NEXT:    %[[N:.*]] = egpu.block_id x
// CHECK-NEXT:    %[[T:.*]] = egpu.thread_id x
// CHECK-NEXT:    %[[ID:.*]] = arith.constant 0.000000e+00 : f32
// CHECK-NEXT:    %[[P:.*]] = affine.for %[[KO:.*]] = 0 to 30 step 16 iter_args(%[[ACC:.*]] = %[[ID]]) -> (f32) {
// CHECK-NEXT:      %[[UB:.*]] = affine.min affine_map<(d0) -> (16, ((d0 * -1) + 30))> (%[[KO]])
// CHECK-NEXT:      %[[IN:.*]] = arith.cmpi slt, %[[T]], %[[UB]] : index
// CHECK-NEXT:      %[[V:.*]] = scf.if %[[IN]] -> (f32) {
// CHECK-NEXT:        %[[A:.*]] = affine.load %{{.*}}[%[[N]], %[[KO]] + %[[T]]] : memref<5x30xf32>
// CHECK-NEXT:        %[[S:.*]] = arith.addf %[[ACC]], %[[A]] : f32
// CHECK-NEXT:        scf.yield %[[S]] : f32
// CHECK-NEXT:      } else {
// CHECK-NEXT:        scf.yield %[[ACC]] : f32
// CHECK-NEXT:      }
// CHECK-NEXT:      affine.yield %[[V]] : f32
// CHECK-NEXT:    }
// CHECK-NEXT:    affine.store %[[P]], %[[SH]][%[[T]]] : memref<16xf32>
// CHECK-NEXT:    egpu.barrier
// CHECK-NEXT:    %[[EIGHT:.*]] = arith.constant 8 : index
// CHECK-NEXT:    %[[ACTIVE:.*]] = arith.cmpi slt, %[[T]], %[[EIGHT]] : index
// CHECK-NEXT:    scf.if %[[ACTIVE]] {
// CHECK-NEXT:      %[[X:.*]] = affine.load %[[SH]][%[[T]]] : memref<16xf32>
// CHECK-NEXT:      %[[Y:.*]] = affine.load %[[SH]][%[[T]] + 8] : memref<16xf32>
// CHECK-NEXT:      %[[XY:.*]] = arith.addf %[[X]], %[[Y]] : f32
// CHECK-NEXT:      affine.store %[[XY]], %[[SH]][%[[T]]] : memref<16xf32>
// CHECK-NEXT:    }
// CHECK-NEXT:    egpu.barrier
// CHECK:         affine.load %[[SH]][%[[T]] + 4] : memref<16xf32>
// CHECK:         egpu.barrier
// CHECK:         affine.load %[[SH]][%[[T]] + 2] : memref<16xf32>
// CHECK:         egpu.barrier
// CHECK:         affine.load %[[SH]][%[[T]] + 1] : memref<16xf32>
// CHECK-NOT:     egpu.barrier
// CHECK:         %[[FIRST:.*]] = arith.cmpi eq, %[[T]], %{{.*}} : index
// CHECK-NEXT:    scf.if %[[FIRST]] {
// CHECK-NEXT:      %[[TOTAL:.*]] = affine.load %[[SH]][%[[T]]] : memref<16xf32>
// CHECK-NEXT:      affine.store %[[ZERO]], %{{.*}}[%[[N]]] : memref<5xf32>
// CHECK-NEXT:      %[[C:.*]] = affine.load %{{.*}}[%[[N]]] : memref<5xf32>
// CHECK-NEXT:      %[[R:.*]] = arith.addf %[[C]], %[[TOTAL]] : f32
// CHECK-NEXT:      affine.store %[[R]], %{{.*}}[%[[N]]] : memref<5xf32>
// CHECK-NEXT:    }
// CHECK-NEXT:    egpu.return

// CUDA-LABEL: egpu.func @row_sum_partial_tiles_C(
// CUDA-SAME:      grid [5, 1, 1] block [16, 1, 1] {
// CUDA-NOT:      egpu.alloc_shared
// CUDA:          %[[P:.*]] = affine.for
// CUDA:          %[[TOTAL:.*]] = egpu.subgroup_reduce add %[[P]] cluster 16 : f32
// CUDA-NOT:      egpu.barrier
// CUDA:          scf.if
// CUDA:            arith.addf %{{.*}}, %[[TOTAL]] : f32
func.func @row_sum_partial_tiles(%A: memref<5x30xf32> {ein.name = "A"}, %C: memref<5xf32> {ein.name = "C", ein.output}) {
  %zero = arith.constant 0.000000e+00 : f32
  affine.for %N = 0 to 5 {
    affine.store %zero, %C[%N] : memref<5xf32>
  }
  affine.for %N_1 = 0 to 5 {
    affine.for %K_o = 0 to 30 step 16 {
      affine.for %K_i = 0 to min affine_map<(d0) -> (16, ((d0 * -1) + 30))>(%K_o) {
        %a = affine.load %A[%N_1, %K_o + %K_i] : memref<5x30xf32>
        %c = affine.load %C[%N_1] : memref<5xf32>
        %s = arith.addf %c, %a : f32
        affine.store %s, %C[%N_1] : memref<5xf32>
      } {einc.bind = "thread.x"}
    }
  } {einc.bind = "block.x"}
  func.return
}

// -----

// Rows on thread.y (a partial tile: 9 rows by 4) and K bound directly to thread.x (20
// threads, not a power of two): the tree's slots are the linear thread ids x + 20 y, a
// step of n partials combines ceil(n / 2) ahead (20 -> 10 -> 5 -> 3 -> 2 -> 1), work-items
// of a row past the tile contribute the identity (INT32_MIN for max) and never store, but
// reach every barrier. On CUDA too (20 threads are not a power of two).

// CHECK-LABEL: egpu.func @row_max_rows_on_thread_y_C(
// CHECK-SAME:      grid [3, 1, 1] block [20, 4, 1] {
// CHECK-NEXT:    %[[SH:.*]] = egpu.alloc_shared : memref<80xi32>
// CHECK:         %[[NI:.*]] = egpu.thread_id y
// CHECK-NEXT:    %[[UB:.*]] = affine.min affine_map<(d0) -> (4, ((d0 * -1) + 9))> (%{{.*}})
// CHECK-NEXT:    %[[ROW:.*]] = arith.cmpi slt, %[[NI]], %[[UB]] : index
// CHECK-NEXT:    %[[T:.*]] = egpu.thread_id x
// CHECK-NEXT:    %[[ID:.*]] = arith.constant -2147483648 : i32
// CHECK-NEXT:    %[[P:.*]] = scf.if %[[ROW]] -> (i32) {
// CHECK-NEXT:      %[[A:.*]] = affine.load %{{.*}}[%{{.*}} + %[[NI]], %[[T]]] : memref<9x20xi32>
// CHECK-NEXT:      %[[M:.*]] = arith.maxsi %[[ID]], %[[A]] : i32
// CHECK-NEXT:      scf.yield %[[M]] : i32
// CHECK-NEXT:    } else {
// CHECK-NEXT:      scf.yield %[[ID]] : i32
// CHECK-NEXT:    }
// CHECK:         %[[TID:.*]] = affine.apply affine_map<(d0, d1) -> ((d0 + (d1 * 20)))> (%{{.*}}, %{{.*}})
// CHECK-NEXT:    affine.store %[[P]], %[[SH]][%[[TID]]] : memref<80xi32>
// CHECK-NEXT:    egpu.barrier
// CHECK:         arith.constant 10 : index
// CHECK:         affine.load %[[SH]][%[[TID]] + 10] : memref<80xi32>
// CHECK:         arith.constant 5 : index
// CHECK:         affine.load %[[SH]][%[[TID]] + 5] : memref<80xi32>
// CHECK:         arith.constant 2 : index
// CHECK:         affine.load %[[SH]][%[[TID]] + 3] : memref<80xi32>
// CHECK:         arith.constant 1 : index
// CHECK:         affine.load %[[SH]][%[[TID]] + 2] : memref<80xi32>
// CHECK:         arith.constant 1 : index
// CHECK:         affine.load %[[SH]][%[[TID]] + 1] : memref<80xi32>
// CHECK:         %[[FIRST:.*]] = arith.cmpi eq, %[[T]], %{{.*}} : index
// CHECK-NEXT:    %[[STORE:.*]] = arith.andi %[[FIRST]], %[[ROW]] : i1
// CHECK-NEXT:    scf.if %[[STORE]] {
// CHECK-NEXT:      %[[TOTAL:.*]] = affine.load %[[SH]][%[[TID]]] : memref<80xi32>
// CHECK-NEXT:      %[[C:.*]] = affine.load %{{.*}}[%{{.*}} + %[[NI]]] : memref<9xi32>
// CHECK-NEXT:      %[[R:.*]] = arith.maxsi %[[C]], %[[TOTAL]] : i32
// CHECK-NEXT:      affine.store %[[R]], %{{.*}}[%{{.*}} + %[[NI]]] : memref<9xi32>
// CHECK-NEXT:    }

// CUDA-LABEL: egpu.func @row_max_rows_on_thread_y_C(
// CUDA-NEXT:     egpu.alloc_shared : memref<80xi32>
// CUDA-NOT:      egpu.subgroup_reduce
func.func @row_max_rows_on_thread_y(%A: memref<9x20xi32> {ein.name = "A"}, %C: memref<9xi32> {ein.name = "C", ein.output}) {
  affine.for %N_o = 0 to 9 step 4 {
    affine.for %N_i = 0 to min affine_map<(d0) -> (4, ((d0 * -1) + 9))>(%N_o) {
      affine.for %K = 0 to 20 {
        %a = affine.load %A[%N_o + %N_i, %K] : memref<9x20xi32>
        %c = affine.load %C[%N_o + %N_i] : memref<9xi32>
        %s = arith.maxsi %c, %a : i32
        affine.store %s, %C[%N_o + %N_i] : memref<9xi32>
      } {einc.bind = "thread.x"}
    } {einc.bind = "thread.y"}
  } {einc.bind = "block.x"}
  func.return
}

// -----

// 64 threads for CUDA are more than a warp, and a multiple of it. Each warp reduces its 32 lanes,
// its lane 0 stores the warp's total in shared memory, barrier, and the first two lanes
// reduce the two totals (a cluster of 2; lanes past the totals hold the identity).
// OpenCL: the tree.

// CHECK-LABEL: egpu.func @row_sum_two_warps_C(
// CHECK:         egpu.alloc_shared : memref<64xf32>
// CHECK-NOT:     egpu.subgroup_reduce

// CUDA-LABEL: egpu.func @row_sum_two_warps_C(
// CUDA-SAME:      grid [3, 1, 1] block [64, 1, 1] {
// CUDA-NEXT:     %[[SH:.*]] = egpu.alloc_shared : memref<2xf32>
// CUDA:          %[[T:.*]] = egpu.thread_id x
// CUDA:          %[[ID:.*]] = arith.constant 0.000000e+00 : f32
// CUDA:          %[[P:.*]] = affine.for
// CUDA:          %[[W:.*]] = egpu.subgroup_reduce add %[[P]] cluster 32 : f32
// CUDA:          %[[LANE:.*]] = affine.apply affine_map<(d0) -> ((d0 mod 32))> (%[[T]])
// CUDA-NEXT:     %[[ZERO:.*]] = arith.constant 0 : index
// CUDA-NEXT:     %[[LEADER:.*]] = arith.cmpi eq, %[[LANE]], %[[ZERO]] : index
// CUDA-NEXT:     scf.if %[[LEADER]] {
// CUDA-NEXT:       affine.store %[[W]], %[[SH]][%{{.*}} floordiv 32] : memref<2xf32>
// CUDA-NEXT:     }
// CUDA-NEXT:     egpu.barrier
// CUDA-NEXT:     %[[TWO:.*]] = arith.constant 2 : index
// CUDA-NEXT:     %[[PRESENT:.*]] = arith.cmpi slt, %[[T]], %[[TWO]] : index
// CUDA-NEXT:     %[[V:.*]] = scf.if %[[PRESENT]] -> (f32) {
// CUDA-NEXT:       %[[X:.*]] = affine.load %[[SH]][%[[T]]] : memref<2xf32>
// CUDA-NEXT:       scf.yield %[[X]] : f32
// CUDA-NEXT:     } else {
// CUDA-NEXT:       scf.yield %[[ID]] : f32
// CUDA-NEXT:     }
// CUDA-NEXT:     %[[TOTAL:.*]] = egpu.subgroup_reduce add %[[V]] cluster 2 : f32
// CUDA-NEXT:     %{{.*}} = arith.constant 0 : index
// CUDA-NEXT:     %[[FIRST:.*]] = arith.cmpi eq, %[[T]], %{{.*}} : index
// CUDA-NEXT:     scf.if %[[FIRST]] {
// CUDA-NEXT:       %[[C:.*]] = affine.load %{{.*}}[%{{.*}}] : memref<3xf32>
// CUDA-NEXT:       %[[R:.*]] = arith.addf %[[C]], %[[TOTAL]] : f32
func.func @row_sum_two_warps(%A: memref<3x200xf32> {ein.name = "A"}, %C: memref<3xf32> {ein.name = "C", ein.output}) {
  affine.for %N = 0 to 3 {
    affine.for %K_o = 0 to 200 step 64 {
      affine.for %K_i = 0 to min affine_map<(d0) -> (64, ((d0 * -1) + 200))>(%K_o) {
        %a = affine.load %A[%N, %K_o + %K_i] : memref<3x200xf32>
        %c = affine.load %C[%N] : memref<3xf32>
        %s = arith.addf %c, %a : f32
        affine.store %s, %C[%N] : memref<3xf32>
      } {einc.bind = "thread.x"}
    }
  } {einc.bind = "block.x"}
  func.return
}
