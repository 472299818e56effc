// RUN: not einc-opt %s -p verify-egpu 2>&1 | filecheck %s

// Without the barrier at the end of the iteration, the slot written in iteration k is the
// one read in iteration k + 1: a race (the write is carried around the loop's back edge).

// CHECK: egpu.func @no_barrier_at_the_end: shared buffer %tile (result 0 of egpu.alloc_shared) is written by affine.store and read by affine.load at an element of another work-item with no egpu.barrier between
egpu.func @no_barrier_at_the_end(%x: memref<4x64xf32>, %out: memref<64xf32>) grid [1, 1, 1] block [64, 1, 1] {
  %tile = egpu.alloc_shared : memref<2x64xf32>
  %t = egpu.thread_id x
  %zero = arith.constant 0 : index
  %v0 = affine.load %x[0, %t] : memref<4x64xf32>
  affine.store %v0, %tile[%zero, %t] : memref<2x64xf32>
  egpu.barrier
  affine.for %k = 0 to 4 {
    %next = affine.apply affine_map<(d0) -> (d0 + 1)> (%k)
    %cur = affine.apply affine_map<(d0) -> (d0 mod 2)> (%k)
    %other = affine.apply affine_map<(d0) -> ((d0 + 1) mod 2)> (%k)
    %v = affine.load %x[%next mod 4, %t] : memref<4x64xf32>
    affine.store %v, %tile[%other, %t] : memref<2x64xf32>
    %w = affine.load %tile[%cur, 63 - %t] : memref<2x64xf32>
    affine.store %w, %out[%t] : memref<64xf32>
  }
  egpu.return
}
