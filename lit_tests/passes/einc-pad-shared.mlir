// RUN: einc-opt %s -p 'einc-pad-shared{target=cuda}' | filecheck %s

// Lane x reads row x of a 32x32 tile (a column: with rows of 32 words, all in one of the
// 32 banks). The pass pads each row by 4 elements (rows stay 16-byte aligned): the column
// then spreads over 8 banks. The indices are unchanged; only the buffer's type grows.

// CHECK-LABEL: egpu.func @columns(
// CHECK:         %[[T:.*]] = egpu.alloc_shared : memref<32x36xf32>
// CHECK:         affine.store %{{.*}}, %[[T]][%{{.*}}, %{{.*}}] : memref<32x36xf32>
// CHECK:         affine.load %[[T]][%x, %{{.*}}] : memref<32x36xf32>
egpu.func @columns(%in: memref<32x32xf32>, %out: memref<32xf32>) grid [1, 1, 1] block [32, 1, 1] {
  %tile = egpu.alloc_shared : memref<32x32xf32>
  %x = egpu.thread_id x
  affine.for %r = 0 to 32 {
    %v = affine.load %in[%r, %x] : memref<32x32xf32>
    affine.store %v, %tile[%r, %x] : memref<32x32xf32>
  }
  egpu.barrier
  affine.for %k = 0 to 32 {
    %w = affine.load %tile[%x, %k] : memref<32x32xf32>
    affine.store %w, %out[%x] : memref<32xf32>
  }
  egpu.return
}

// A row read by the lanes (`tile[k][x]`) has no conflict: no pad. The schedule's pad
// (`einc.pad`, from `cache_read ... pad N`) is taken as it is, 0 included, and dropped.

// CHECK-LABEL: egpu.func @rows(
// CHECK:         egpu.alloc_shared : memref<32x32xf32>
// CHECK-NEXT:    egpu.alloc_shared : memref<32x33xf32>
// CHECK-NOT:     einc.pad
egpu.func @rows(%in: memref<32x32xf32>, %out: memref<32xf32>) grid [1, 1, 1] block [32, 1, 1] {
  %tile = egpu.alloc_shared : memref<32x32xf32>
  %other = egpu.alloc_shared {einc.pad = 1 : i64} : memref<32x32xf32>
  %x = egpu.thread_id x
  affine.for %r = 0 to 32 {
    %v = affine.load %in[%r, %x] : memref<32x32xf32>
    affine.store %v, %tile[%r, %x] : memref<32x32xf32>
    affine.store %v, %other[%r, %x] : memref<32x32xf32>
  }
  egpu.barrier
  affine.for %k = 0 to 32 {
    %w = affine.load %tile[%k, %x] : memref<32x32xf32>
    %u = affine.load %other[%k, %x] : memref<32x32xf32>
    %s = arith.addf %w, %u : f32
    affine.store %s, %out[%x] : memref<32xf32>
  }
  egpu.return
}
