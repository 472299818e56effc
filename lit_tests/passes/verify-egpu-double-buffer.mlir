// RUN: einc-opt %s -p verify-egpu | filecheck %s

// A double-buffered tile (einc.transforms.double_buffer): in one iteration of K the copy
// writes slot (K + 1) % 2 while the block reads slot K % 2, with no barrier between them:
// the slots differ at every iteration, so no work-item reads what another is writing.

// CHECK-LABEL: egpu.func @double_buffered(
egpu.func @double_buffered(%x: memref<4x64xf32>, %out: memref<64xf32>) grid [1, 1, 1] block [64, 1, 1] {
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
    egpu.barrier
  }
  egpu.return
}
