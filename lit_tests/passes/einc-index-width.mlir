// RUN: einc-opt %s --split-input-file -p einc-index-width | filecheck %s

// Every index of the kernel (the global id up to 16, the flat index up to 15) fits 32 bits:
// the kernel is marked.

// CHECK-LABEL: egpu.func @small(
// CHECK-SAME:    attributes {egpu.index_bits = 32 : i64}
builtin.module {
  egpu.func @small(%out: memref<8x2xf32>) grid [1, 1, 1] block [16, 1, 1] {
    %0 = arith.constant 0.000000e+00 : f32
    %gid = egpu.global_id x
    %n = affine.apply affine_map<(d0) -> ((d0 floordiv 2))> (%gid)
    %m = affine.apply affine_map<(d0) -> ((d0 mod 2))> (%gid)
    affine.store %0, %out[%n, %m] : memref<8x2xf32>
    egpu.return
  }
}

// -----

// A 50000 x 50000 buffer: its flat index reaches 2.5e9, past 2^31 - 1. Unmarked (64-bit).

// CHECK-LABEL: egpu.func @big(
// CHECK-NOT:     egpu.index_bits
// CHECK:         egpu.return
builtin.module {
  egpu.func @big(%out: memref<50000x50000xf32>) grid [50000, 1, 1] block [1, 1, 1] {
    %0 = arith.constant 0.000000e+00 : f32
    %b = egpu.block_id x
    affine.for %j = 0 to 50000 {
      affine.store %0, %out[%b, %j] : memref<50000x50000xf32>
    }
    egpu.return
  }
}

// -----

// An index read from memory (a gather) is not bounded: unmarked.

// CHECK-LABEL: egpu.func @gather(
// CHECK-NOT:     egpu.index_bits
// CHECK:         egpu.return
builtin.module {
  egpu.func @gather(%idx: memref<4xi64>, %x: memref<16xf32>, %out: memref<4xf32>) grid [1, 1, 1] block [4, 1, 1] {
    %t = egpu.thread_id x
    %i = affine.load %idx[%t] : memref<4xi64>
    %k = arith.index_cast %i : i64 to index
    %v = memref.load %x[%k] : memref<16xf32>
    affine.store %v, %out[%t] : memref<4xf32>
    egpu.return
  }
}

// -----

// A loop whose variable after the last increment (2^31 - 8 + 16) overflows 32 bits: unmarked.

// CHECK-LABEL: egpu.func @increment(
// CHECK-NOT:     egpu.index_bits
// CHECK:         egpu.return
builtin.module {
  egpu.func @increment(%out: memref<16xf32>) grid [1, 1, 1] block [1, 1, 1] {
    %0 = arith.constant 0.000000e+00 : f32
    affine.for %i = 2147483632 to 2147483640 step 16 {
      %k = affine.apply affine_map<(d0) -> ((d0 - 2147483632))> (%i)
      affine.store %0, %out[%k] : memref<16xf32>
    }
    egpu.return
  }
}
