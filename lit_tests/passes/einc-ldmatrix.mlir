// RUN: einc-opt %s --split-input-file -p einc-ldmatrix | filecheck %s

// A warp's float16 tiles in shared memory, rows of 40 elements (80 bytes: 16-byte aligned),
// the tile bases multiples of 8 elements: A [m, k] (k contiguous) is read with ldmatrix.x4,
// B [k, n] (n contiguous) with ldmatrix.x4.trans. A tile in global memory, or one whose
// base is not provably a multiple of 8 (a thread id), keeps the element-wise gathers.

// CHECK-LABEL: egpu.func @tiles(
// CHECK:         egpu.mma {{.*}} {egpu.ldmatrix = {a = "x4", b = "x4.trans"}, {{.*}}}
// CHECK:         egpu.mma
// CHECK-NOT:     egpu.ldmatrix
// CHECK:         egpu.return
builtin.module {
  egpu.func @tiles(%g: memref<64x64xf16>, %c: memref<64x64xf32>) grid [1, 1, 1] block [32, 2, 1] {
    %a = egpu.alloc_shared : memref<32x40xf16>
    %b = egpu.alloc_shared : memref<32x40xf16>
    %f = memref.alloca() : memref<8xf32>
    %lane = egpu.thread_id x
    %w = egpu.thread_id y
    %row = affine.apply affine_map<(d0) -> ((d0 * 16))> (%w)
    %z = arith.constant 0 : index
    egpu.mma %a[%row, %z], %b[%z, %row], %f[%z] lane %lane {lanes = 32 : i64, k = 32 : i64, a_dims = [0 : i64, 1 : i64], b_dims = [0 : i64, 1 : i64], c_dims = []} : memref<32x40xf16>, memref<32x40xf16>, memref<8xf32>
    egpu.mma %g[%w, %z], %b[%z, %w], %f[%z] lane %lane {lanes = 32 : i64, k = 32 : i64, a_dims = [0 : i64, 1 : i64], b_dims = [0 : i64, 1 : i64], c_dims = []} : memref<64x64xf16>, memref<32x40xf16>, memref<8xf32>
    egpu.return
  }
}

// -----

// HIP's MFMA (64 lanes): a lane's 4 consecutive k elements. A [m, k] with k contiguous, rows
// of 24 elements and a base a multiple of 4: one 8-byte vector ("v4"); B [k, n] (k not
// contiguous) keeps the gathers; a base 2 elements into a row of A (4 bytes) is not 8-byte
// aligned: gathers.

// CHECK-LABEL: egpu.func @wavefront(
// CHECK:         egpu.mma {{.*}} {egpu.ldmatrix = {a = "v4"}, {{.*}}}
// CHECK:         egpu.mma
// CHECK-NOT:     egpu.ldmatrix
// CHECK:         egpu.return
builtin.module {
  egpu.func @wavefront(%c: memref<16x16xf32>) grid [1, 1, 1] block [64, 2, 1] {
    %a = egpu.alloc_shared : memref<32x24xf16>
    %b = egpu.alloc_shared : memref<16x40xf16>
    %f = memref.alloca() : memref<4xf32>
    %lane = egpu.thread_id x
    %w = egpu.thread_id y
    %row = affine.apply affine_map<(d0) -> ((d0 * 16))> (%w)
    %z = arith.constant 0 : index
    %two = arith.constant 2 : index
    egpu.mma %a[%row, %z], %b[%z, %row], %f[%z] lane %lane {lanes = 64 : i64, k = 16 : i64, a_dims = [0 : i64, 1 : i64], b_dims = [0 : i64, 1 : i64], c_dims = []} : memref<32x24xf16>, memref<16x40xf16>, memref<4xf32>
    egpu.mma %a[%row, %two], %b[%z, %row], %f[%z] lane %lane {lanes = 64 : i64, k = 16 : i64, a_dims = [0 : i64, 1 : i64], b_dims = [0 : i64, 1 : i64], c_dims = []} : memref<32x24xf16>, memref<16x40xf16>, memref<4xf32>
    egpu.return
  }
}
