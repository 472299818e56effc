// RUN: einc-opt %s --split-input-file -p verify-egpu | filecheck %s

// verify-egpu accepts well-formed kernels and changes nothing.

// A shared-memory tree: each work-item stores its partial, a barrier, then reads a
// neighbour's slot; the last step's total is read by work-item 0 from its own slot.

// CHECK-LABEL: egpu.func @tree_with_barriers(
// CHECK:         egpu.barrier
// CHECK:         egpu.return
egpu.func @tree_with_barriers(%x: memref<4xf32>, %out: memref<f32>) grid [1, 1, 1] block [2, 1, 1] {
  %partials = egpu.alloc_shared : memref<2xf32>
  %t = egpu.thread_id x
  %v = affine.load %x[%t] : memref<4xf32>
  affine.store %v, %partials[%t] : memref<2xf32>
  egpu.barrier
  %c1 = arith.constant 1 : index
  %first = arith.cmpi slt, %t, %c1 : index
  scf.if %first {
    %mine = affine.load %partials[%t] : memref<2xf32>
    %other = affine.load %partials[%t + 1] : memref<2xf32>
    %sum = arith.addf %mine, %other : f32
    affine.store %sum, %partials[%t] : memref<2xf32>
    %total = affine.load %partials[%t] : memref<2xf32>
    affine.store %total, %out[] : memref<f32>
  }
  egpu.return
}

// -----

// A private buffer filled and read in one kernel.

// CHECK-LABEL: egpu.func @private_in_one_kernel(
// CHECK:         memref.alloca
egpu.func @private_in_one_kernel(%x: memref<4xf32>, %out: memref<4xf32>) grid [1, 1, 1] block [1, 1, 1] {
  %row = memref.alloca() : memref<4xf32>
  affine.for %i = 0 to 4 {
    %v = affine.load %x[%i] : memref<4xf32>
    affine.store %v, %row[%i] : memref<4xf32>
  }
  affine.for %i = 0 to 4 {
    %v = affine.load %row[3 - %i] : memref<4xf32>
    affine.store %v, %out[%i] : memref<4xf32>
  }
  egpu.return
}
