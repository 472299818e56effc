// RUN: einc-opt %s --split-input-file -p einc-vectorize-shared-loads | filecheck %s

// Eight loads of B_shared[k, j + c] (c = 0..7, j = thread_x * 8: a multiple of 8) between
// the barriers, a store to a private array among them: two aligned 4-wide vector loads and
// their lanes.

// CHECK-LABEL: egpu.func @row(
// CHECK:         %[[J:.*]] = affine.apply affine_map<(d0) -> ((d0 * 8))> (%{{.*}})
// CHECK:         affine.for %[[K:.*]] = 0 to 8 {
// CHECK-NEXT:      arith.constant 0 : index
// CHECK-NEXT:      %[[V0:.*]] = egpu.vload %{{.*}}[%[[K]], %[[J]]] {egpu.align = 16 : i64} : memref<8x128xf32> -> vector<4xf32>
// CHECK-NEXT:      %{{.*}} = egpu.vextract %[[V0]][0 : index] : vector<4xf32> -> f32
// CHECK:           %[[J4:.*]] = affine.apply affine_map<(d0) -> ((d0 + 4))> (%[[J]])
// CHECK-NEXT:      %[[V1:.*]] = egpu.vload %{{.*}}[%[[K]], %[[J4]]] {egpu.align = 16 : i64} : memref<8x128xf32> -> vector<4xf32>
// CHECK:           %{{.*}} = egpu.vextract %[[V1]][3 : index] : vector<4xf32> -> f32
// CHECK-NOT:       affine.load
// CHECK:         egpu.return
builtin.module {
  egpu.func @row(%out: memref<128xf32>) grid [1, 1, 1] block [16, 1, 1] {
    %sh = egpu.alloc_shared : memref<8x128xf32>
    %t = egpu.thread_id x
    %j = affine.apply affine_map<(d0) -> ((d0 * 8))> (%t)
    %acc = memref.alloca() : memref<8xf32>
    egpu.barrier
    affine.for %k = 0 to 8 {
      %c0 = arith.constant 0 : index
      %a0 = affine.load %sh[%k, %j + %c0] : memref<8x128xf32>
      affine.store %a0, %acc[%c0] : memref<8xf32>
      %c1 = arith.constant 1 : index
      %a1 = affine.load %sh[%k, %j + %c1] : memref<8x128xf32>
      affine.store %a1, %acc[%c1] : memref<8xf32>
      %c2 = arith.constant 2 : index
      %a2 = affine.load %sh[%k, %j + %c2] : memref<8x128xf32>
      affine.store %a2, %acc[%c2] : memref<8xf32>
      %c3 = arith.constant 3 : index
      %a3 = affine.load %sh[%k, %j + %c3] : memref<8x128xf32>
      affine.store %a3, %acc[%c3] : memref<8xf32>
      %c4 = arith.constant 4 : index
      %a4 = affine.load %sh[%k, %j + %c4] : memref<8x128xf32>
      affine.store %a4, %acc[%c4] : memref<8xf32>
      %c5 = arith.constant 5 : index
      %a5 = affine.load %sh[%k, %j + %c5] : memref<8x128xf32>
      affine.store %a5, %acc[%c5] : memref<8xf32>
      %c6 = arith.constant 6 : index
      %a6 = affine.load %sh[%k, %j + %c6] : memref<8x128xf32>
      affine.store %a6, %acc[%c6] : memref<8xf32>
      %c7 = arith.constant 7 : index
      %a7 = affine.load %sh[%k, %j + %c7] : memref<8x128xf32>
      affine.store %a7, %acc[%c7] : memref<8xf32>
    }
    egpu.return
  }
}

// -----

// Not combined: j = thread_x * 2 + 1 is odd (no aligned 4- or 2-wide start), and a barrier
// separates the other pair.

// CHECK-LABEL: egpu.func @unaligned(
// CHECK-NOT:     egpu.vload
// CHECK:         egpu.return
builtin.module {
  egpu.func @unaligned(%out: memref<64xf32>) grid [1, 1, 1] block [16, 1, 1] {
    %sh = egpu.alloc_shared : memref<64xf32>
    %t = egpu.thread_id x
    %j = affine.apply affine_map<(d0) -> ((d0 * 2 + 1))> (%t)
    %a0 = affine.load %sh[%j] : memref<64xf32>
    %a1 = affine.load %sh[%j + 1] : memref<64xf32>
    %s = arith.addf %a0, %a1 : f32
    %i = affine.apply affine_map<(d0) -> ((d0 * 4))> (%t)
    %b0 = affine.load %sh[%i] : memref<64xf32>
    egpu.barrier
    %b1 = affine.load %sh[%i + 1] : memref<64xf32>
    %r = arith.addf %b0, %b1 : f32
    %q = arith.addf %r, %s : f32
    affine.store %q, %out[%t] : memref<64xf32>
    egpu.return
  }
}
