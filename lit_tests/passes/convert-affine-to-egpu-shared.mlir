// RUN: einc-opt %s --split-input-file -p "convert-affine-to-egpu{target=opencl}" | filecheck %s

// A tile of A staged in shared memory at K.o (marked by cache_read "shared"): the buffer
// becomes an egpu.alloc_shared at the kernel's top level, the copy nest one loop in which
// the block's 16 threads (linear id x + 4 y) split the 8 elements, with a barrier after the
// copy-in and one after the compute (before the next iteration overwrites the buffer).

func.func @shared_tile(%A: memref<8x8xf32> {ein.name = "A"}, %B: memref<8x8xf32> {ein.name = "B"}, %C: memref<8x8xf32> {ein.name = "C", ein.output}) {
  affine.for %N_o = 0 to 8 step 4 {
    affine.for %M_o = 0 to 8 step 4 {
      affine.for %N_i = 0 to 4 {
        affine.for %M_i = 0 to 4 {
          affine.for %K_o = 0 to 8 step 2 {
            %A_shared = memref.alloca() {ein.name = "A_shared", einc.memory = "shared", alignment = 64 : i64} : memref<4x2xf32>
            affine.for %A_c0 = 0 to 4 {
              affine.for %A_c1 = 0 to 2 {
                %1 = affine.load %A[%N_o + %A_c0, %K_o + %A_c1] : memref<8x8xf32>
                affine.store %1, %A_shared[%A_c0, %A_c1] : memref<4x2xf32>
              } {einc.copy}
            } {einc.copy, einc.shared = "in"}
            affine.for %K_i = 0 to 2 {
              %a = affine.load %A_shared[%N_i, %K_i] : memref<4x2xf32>
              %b = affine.load %B[%K_o + %K_i, %M_o + %M_i] : memref<8x8xf32>
              %p = arith.mulf %a, %b : f32
              %2 = affine.load %C[%N_o + %N_i, %M_o + %M_i] : memref<8x8xf32>
              %3 = arith.addf %2, %p : f32
              affine.store %3, %C[%N_o + %N_i, %M_o + %M_i] : memref<8x8xf32>
            }
          }
        } {einc.bind = "thread.x"}
      } {einc.bind = "thread.y"}
    } {einc.bind = "block.x"}
  } {einc.bind = "block.y"}
  func.return
}

// CHECK-LABEL: egpu.func @shared_tile_C(
// CHECK-SAME:      grid [2, 2, 1] block [4, 4, 1] {
// CHECK-NEXT:    %[[S:.*]] = egpu.alloc_shared : memref<4x2xf32>
// CHECK-NEXT:    %[[TX:.*]] = egpu.thread_id x
// CHECK-NEXT:    %[[TY:.*]] = egpu.thread_id y
// CHECK-NEXT:    %[[TID:.*]] = affine.apply affine_map<(d0, d1) -> ((d0 + (d1 * 4)))> (%[[TX]], %[[TY]])
// CHECK:         affine.for %[[KO:.*]] = 0 to 8 step 2 {
// CHECK-NEXT:      %[[N:.*]] = arith.constant 8 : index
// CHECK-NEXT:      %[[T:.*]] = arith.constant 16 : index
// CHECK-NEXT:      scf.for %[[E:.*]] = %[[TID]] to %[[N]] step %[[T]] {
// CHECK-NEXT:        %[[C0:.*]] = affine.apply affine_map<(d0) -> ((d0 floordiv 2))> (%[[E]])
// CHECK-NEXT:        %[[C1:.*]] = affine.apply affine_map<(d0) -> ((d0 mod 2))> (%[[E]])
// CHECK-NEXT:        %[[V:.*]] = affine.load %{{.*}}[%{{.*}} + %[[C0]], %[[KO]] + %[[C1]]] : memref<8x8xf32>
// CHECK-NEXT:        affine.store %[[V]], %[[S]][%[[C0]], %[[C1]]] : memref<4x2xf32>
// CHECK-NEXT:      }
// CHECK-NEXT:      egpu.barrier
// CHECK-NEXT:      affine.for %{{.*}} = 0 to 2 {
// CHECK-NEXT:        affine.load %[[S]][%{{.*}}, %{{.*}}] : memref<4x2xf32>
// CHECK:           }
// CHECK-NEXT:      egpu.barrier
// CHECK-NEXT:    }
// CHECK-NEXT:    egpu.return

// -----

// A partial tile (10 rows by 4): the out-of-range threads of the last block still copy and
// reach both barriers; only the compute is guarded.

func.func @shared_partial_tile(%A: memref<10x6xf32> {ein.name = "A"}, %C: memref<10xf32> {ein.name = "C", ein.output}) {
  affine.for %N_o = 0 to 10 step 4 {
    affine.for %N_i = 0 to min affine_map<(d0) -> (4, ((d0 * -1) + 10))>(%N_o) {
      affine.for %K_o = 0 to 6 step 4 {
        %A_shared = memref.alloca() {ein.name = "A_shared", einc.memory = "shared", alignment = 64 : i64} : memref<4x4xf32>
        affine.for %A_c0 = 0 to 4 {
          affine.for %A_c1 = 0 to 4 {
            %1 = affine.apply affine_map<(d0, d1, d2, d3) -> ((d0 + d2))> (%N_o, %K_o, %A_c0, %A_c1)
            %2 = arith.constant 10 : index
            %3 = arith.cmpi slt, %1, %2 : index
            scf.if %3 {
              %8 = affine.load %A[%N_o + %A_c0, %K_o + %A_c1] : memref<10x6xf32>
              affine.store %8, %A_shared[%A_c0, %A_c1] : memref<4x4xf32>
            }
          } {einc.copy}
        } {einc.copy, einc.shared = "in"}
        affine.for %K_i = 0 to min affine_map<(d0) -> (4, ((d0 * -1) + 6))>(%K_o) {
          %a = affine.load %A_shared[%N_i, %K_i] : memref<4x4xf32>
          %9 = affine.load %C[%N_o + %N_i] : memref<10xf32>
          %10 = arith.addf %9, %a : f32
          affine.store %10, %C[%N_o + %N_i] : memref<10xf32>
        }
      }
    } {einc.bind = "thread.x"}
  } {einc.bind = "block.x"}
  func.return
}

// CHECK-LABEL: egpu.func @shared_partial_tile_C(
// CHECK-SAME:      grid [3, 1, 1] block [4, 1, 1] {
// CHECK-NEXT:    %[[S:.*]] = egpu.alloc_shared : memref<4x4xf32>
// CHECK:         %[[IN:.*]] = arith.cmpi slt, %{{.*}}, %{{.*}} : index
// CHECK-NEXT:    affine.for %{{.*}} = 0 to 6 step 4 {
// CHECK:           scf.for
// CHECK:             scf.if
// CHECK:               affine.store %{{.*}}, %[[S]]
// CHECK:           egpu.barrier
// CHECK-NEXT:      scf.if %[[IN]] {
// CHECK-NEXT:        affine.for
// CHECK:             }
// CHECK-NEXT:      }
// CHECK-NEXT:      egpu.barrier
// CHECK-NEXT:    }
// CHECK-NEXT:    egpu.return

