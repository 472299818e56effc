// RUN: not einc-opt %s -p verify-egpu 2>&1 | filecheck %s

// A work-item reads a neighbour's shared slot that the neighbour wrote, with no barrier
// between the write and the read.

egpu.func @neighbour(%x: memref<64xf32>, %out: memref<64xf32>) grid [1, 1, 1] block [64, 1, 1] {
  %partials = egpu.alloc_shared : memref<65xf32>
  %t = egpu.thread_id x
  %v = affine.load %x[%t] : memref<64xf32>
  affine.store %v, %partials[%t] : memref<65xf32>
  %w = affine.load %partials[%t + 1] : memref<65xf32>
  affine.store %w, %out[%t] : memref<64xf32>
  egpu.return
}

// CHECK: internal compiler error in stage 'verify-egpu': egpu.func @neighbour: shared buffer %partials (result 0 of egpu.alloc_shared) is written by affine.store and read by affine.load at an element of another work-item with no egpu.barrier between
