// RUN: not einc-opt %s -p verify-egpu 2>&1 | filecheck %s

// A private (work-item) buffer filled in one kernel and read in another: each kernel has
// its own copy, the reader's is never written.

func.func @host(%x: memref<f32>, %out: memref<f32>) {
  egpu.launch @fill(%x) : memref<f32>
  egpu.launch @use(%out) : memref<f32>
  func.return
}
egpu.func @fill(%x: memref<f32>) grid [1, 1, 1] block [1, 1, 1] {
  %tile = memref.alloca() {ein.name = "x_local"} : memref<f32>
  %v = affine.load %x[] : memref<f32>
  affine.store %v, %tile[] : memref<f32>
  egpu.return
}
egpu.func @use(%out: memref<f32>) grid [1, 1, 1] block [1, 1, 1] {
  %tile = memref.alloca() {ein.name = "x_local"} : memref<f32>
  %v = affine.load %tile[] : memref<f32>
  affine.store %v, %out[] : memref<f32>
  egpu.return
}

// CHECK: internal compiler error in stage 'verify-egpu': egpu.func @fill: private buffer 'x_local' %tile (result 0 of memref.alloca) is written but never read in the kernel
