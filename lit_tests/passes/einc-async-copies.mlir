// RUN: einc-opt %s -p 'einc-async-copies{target=cuda}' | filecheck %s
// RUN: einc-opt %s -p 'einc-async-copies{target=hip}' | filecheck %s --check-prefix=HIP

// CUDA's description compiles for sm_80 at least: the block's copy of a global tile into
// shared memory (a load of a kernel argument whose only use is a store into the tile, in
// the copy loop the threads split) becomes one cp.async per element, its indices explicit,
// and the thread waits for its copies before the barrier that publishes them. The store
// of a computed value stays. HIP has no cp.async: nothing changes.

// CHECK-LABEL: egpu.func @tile(
// CHECK:         scf.for %[[E:.*]] = %{{.*}} to %{{.*}} step %{{.*}} {
// CHECK:           %[[ROW:.*]] = affine.apply affine_map<(d0, d1, d2) -> ((d0 + d1))> (%row0, %r, %c)
// CHECK-NEXT:      egpu.copy_async %x[%[[ROW]], %c] to %tile[%r, %c] : memref<64x8xf32>, memref<16x8xf32>
// CHECK-NEXT:    }
// CHECK:         affine.store %{{.*}}, %sums[%t]
// CHECK:         egpu.async_wait
// CHECK-NEXT:    egpu.barrier
// HIP-NOT:       egpu.copy_async
// HIP-NOT:       egpu.async_wait
egpu.func @tile(%x: memref<64x8xf32>, %out: memref<64xf32>) grid [4, 1, 1] block [16, 1, 1] {
  %tile = egpu.alloc_shared : memref<16x8xf32>
  %sums = egpu.alloc_shared : memref<16xf32>
  %t = egpu.thread_id x
  %b = egpu.block_id x
  %row0 = affine.apply affine_map<(d0) -> (d0 * 16)> (%b)
  %n = arith.constant 128 : index
  %s = arith.constant 16 : index
  scf.for %e = %t to %n step %s {
    %r = affine.apply affine_map<(d0) -> (d0 floordiv 8)> (%e)
    %c = affine.apply affine_map<(d0) -> (d0 mod 8)> (%e)
    %v = affine.load %x[%row0 + %r, %c] : memref<64x8xf32>
    affine.store %v, %tile[%r, %c] : memref<16x8xf32>
  }
  %zero = arith.constant 0.0 : f32
  affine.store %zero, %sums[%t] : memref<16xf32>
  egpu.barrier
  %w = affine.load %tile[%t, 0] : memref<16x8xf32>
  affine.store %w, %out[%row0 + %t] : memref<64xf32>
  egpu.return
}
