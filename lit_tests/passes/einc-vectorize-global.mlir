// RUN: einc-opt %s --split-input-file -p 'einc-vectorize-global{target=cuda}' | filecheck %s

// A staging copy of a 16x128 tile of B by 256 threads: e = tid, tid + 256, ... < 2048. The
// global row (k + e floordiv 128, m + e mod 128) and the shared one (e floordiv 128,
// e mod 128) move by one for four consecutive e from a multiple of 4, and m = block_x * 128:
// the loop runs over 512 vectors (e = 4 v), one aligned 16-byte pair each; B's argument
// records the 16 bytes the launch contract must give it.

// CHECK-LABEL: egpu.func @staging(
// CHECK-SAME:    %{{.*}}: memref<512x512xf32> {ein.name = "B", egpu.align = 16 : i64}
// CHECK:         %[[N:.*]] = arith.constant 512 : index
// CHECK:         scf.for %[[V:.*]] = %{{.*}} to %[[N]] step %{{.*}} {
// CHECK-NEXT:      %[[E:.*]] = affine.apply affine_map<(d0) -> ((d0 * 4))> (%[[V]])
// CHECK:           %[[X:.*]] = egpu.vload %{{.*}}[%{{.*}}, %{{.*}}] {egpu.align = 16 : i64} : memref<512x512xf32> -> vector<4xf32>
// CHECK:           egpu.vstore %[[X]], %{{.*}}[%{{.*}}, %{{.*}}] {egpu.align = 16 : i64} : vector<4xf32>, memref<16x128xf32>
// CHECK-NOT:       affine.load
// CHECK:         egpu.return
builtin.module {
  egpu.func @staging(%B: memref<512x512xf32> {ein.name = "B"}, %C: memref<16x128xf32> {ein.name = "C"}) grid [4, 1, 1] block [16, 16, 1] {
    %sh = egpu.alloc_shared : memref<16x128xf32>
    %tx = egpu.thread_id x
    %ty = egpu.thread_id y
    %tid = affine.apply affine_map<(d0, d1) -> ((d0 + (d1 * 16)))> (%tx, %ty)
    %bx = egpu.block_id x
    %m = affine.apply affine_map<(d0) -> ((d0 * 128))> (%bx)
    %k = arith.constant 32 : index
    %n = arith.constant 2048 : index
    %t = arith.constant 256 : index
    scf.for %e = %tid to %n step %t {
      %r = affine.apply affine_map<(d0) -> ((d0 floordiv 128))> (%e)
      %c = affine.apply affine_map<(d0) -> ((d0 mod 128))> (%e)
      %v = affine.load %B[%k + %r, %m + %c] : memref<512x512xf32>
      affine.store %v, %sh[%r, %c] : memref<16x128xf32>
    }
    egpu.barrier
    egpu.return
  }
}

// -----

// Left scalar: the shared rows are padded to 129 elements (a row's start is no multiple of 4),
// and the other copy's tile column starts at an odd column of the global buffer.

// CHECK-LABEL: egpu.func @unaligned_staging(
// CHECK-NOT:     egpu.align
// CHECK-NOT:     egpu.vload
// CHECK:         egpu.return
builtin.module {
  egpu.func @unaligned_staging(%B: memref<512x512xf32> {ein.name = "B"}) grid [4, 1, 1] block [256, 1, 1] {
    %sh = egpu.alloc_shared : memref<16x129xf32>
    %sh2 = egpu.alloc_shared : memref<16x128xf32>
    %tid = egpu.thread_id x
    %bx = egpu.block_id x
    %m = affine.apply affine_map<(d0) -> ((d0 * 128))> (%bx)
    %n = arith.constant 2048 : index
    %t = arith.constant 256 : index
    scf.for %e = %tid to %n step %t {
      %r = affine.apply affine_map<(d0) -> ((d0 floordiv 128))> (%e)
      %c = affine.apply affine_map<(d0) -> ((d0 mod 128))> (%e)
      %v = affine.load %B[%r, %m + %c] : memref<512x512xf32>
      affine.store %v, %sh[%r, %c] : memref<16x129xf32>
    }
    scf.for %e = %tid to %n step %t {
      %r = affine.apply affine_map<(d0) -> ((d0 floordiv 128))> (%e)
      %c = affine.apply affine_map<(d0) -> ((d0 mod 128))> (%e)
      %v = affine.load %B[%r, %m + %c + 1] : memref<512x512xf32>
      affine.store %v, %sh2[%r, %c] : memref<16x128xf32>
    }
    egpu.barrier
    egpu.return
  }
}

// -----

// An elementwise loop: four consecutive elements per work-item from thread_x * 4: one
// aligned vector iteration; the store's buffer is read nowhere else.

// CHECK-LABEL: egpu.func @elementwise(
// CHECK:         affine.for %{{.*}} = 0 to 4 step 4 {
// CHECK:           %[[A:.*]] = egpu.vload %{{.*}}[%{{.*}}, %{{.*}}] {egpu.align = 16 : i64} : memref<64x512xf32> -> vector<4xf32>
// CHECK:           %[[S:.*]] = arith.addf %[[A]], %{{.*}} : vector<4xf32>
// CHECK:           egpu.vstore %[[S]], %{{.*}}[%{{.*}}, %{{.*}}] {egpu.align = 16 : i64} : vector<4xf32>, memref<64x512xf32>
// CHECK-NOT:     affine.for
// CHECK:         egpu.return
builtin.module {
  egpu.func @elementwise(%A: memref<64x512xf32> {ein.name = "A"}, %C: memref<64x512xf32> {ein.name = "C"}) grid [1, 64, 1] block [128, 1, 1] {
    %n = egpu.block_id y
    %tx = egpu.thread_id x
    %j = affine.apply affine_map<(d0) -> ((d0 * 4))> (%tx)
    affine.for %i = 0 to 4 {
      %a = affine.load %A[%n, %j + %i] : memref<64x512xf32>
      %s = arith.addf %a, %a : f32
      affine.store %s, %C[%n, %j + %i] : memref<64x512xf32>
    }
    egpu.return
  }
}

// -----

// Left scalar: a row of 37 elements (the row start n * 37 is no multiple of 4), and a loop
// whose stored buffer is read at another index (D[n, i] = D[n, i + 4]: the pass proves no
// independence of iterations beyond "every access of a stored buffer is at the store's index").

// CHECK-LABEL: egpu.func @elementwise_scalar(
// CHECK-NOT:     egpu.v
// CHECK:         egpu.return
builtin.module {
  egpu.func @elementwise_scalar(%A: memref<64x37xf32> {ein.name = "A"}, %C: memref<64x36xf32> {ein.name = "C"}, %D: memref<64x36xf32> {ein.name = "D"}) grid [1, 64, 1] block [1, 1, 1] {
    %n = egpu.block_id y
    affine.for %i = 0 to 36 {
      %a = affine.load %A[%n, %i] : memref<64x37xf32>
      affine.store %a, %C[%n, %i] : memref<64x36xf32>
    }
    affine.for %i = 0 to 32 {
      %d = affine.load %D[%n, %i + 4] : memref<64x36xf32>
      affine.store %d, %D[%n, %i] : memref<64x36xf32>
    }
    egpu.return
  }
}

// -----

// A register tile's vector store (einc-vectorize-loops made it) at column thread_x * 8 + c1,
// c1 in steps of 4: marked aligned; one at thread_x * 6 + c1 is not.

// CHECK-LABEL: egpu.func @tile_store(
// CHECK:         egpu.vstore %{{.*}}, %{{.*}}[%{{.*}}, %{{.*}}] {egpu.align = 16 : i64} : vector<4xf32>, memref<64x512xf32>
// CHECK:         egpu.vstore %{{.*}}, %{{.*}}[%{{.*}}, %{{.*}}] : vector<4xf32>, memref<64x512xf32>
builtin.module {
  egpu.func @tile_store(%C: memref<64x512xf32> {ein.name = "C"}) grid [1, 64, 1] block [64, 1, 1] {
    %n = egpu.block_id y
    %tx = egpu.thread_id x
    %zero = arith.constant 0.0 : f32
    %v = egpu.vbroadcast %zero : f32 -> vector<4xf32>
    affine.for %c1 = 0 to 8 step 4 {
      %j = affine.apply affine_map<(d0, d1) -> ((d0 * 8) + d1)> (%tx, %c1)
      egpu.vstore %v, %C[%n, %j] : vector<4xf32>, memref<64x512xf32>
    }
    affine.for %c1 = 0 to 4 step 4 {
      %j = affine.apply affine_map<(d0, d1) -> ((d0 * 6) + d1)> (%tx, %c1)
      egpu.vstore %v, %C[%n, %j] : vector<4xf32>, memref<64x512xf32>
    }
    egpu.return
  }
}

// -----

// A register tile reading four consecutive elements of an input row from global memory
// (unrolled, column thread_x * 4 + c): one aligned vector load and its lanes.

// CHECK-LABEL: egpu.func @input_row(
// CHECK:         %[[V:.*]] = egpu.vload %{{.*}}[%{{.*}}, %{{.*}}] {egpu.align = 16 : i64} : memref<64x256xf32> -> vector<4xf32>
// CHECK:         egpu.vextract %[[V]][3 : index] : vector<4xf32> -> f32
// CHECK-NOT:     affine.load %B
// CHECK:         egpu.return
builtin.module {
  egpu.func @input_row(%B: memref<64x256xf32> {ein.name = "B"}, %C: memref<64x256xf32> {ein.name = "C"}) grid [1, 1, 1] block [64, 1, 1] {
    %tx = egpu.thread_id x
    %j = affine.apply affine_map<(d0) -> ((d0 * 4))> (%tx)
    affine.for %k = 0 to 64 {
      %c0 = arith.constant 0 : index
      %b0 = affine.load %B[%k, %j + %c0] : memref<64x256xf32>
      %c1 = arith.constant 1 : index
      %b1 = affine.load %B[%k, %j + %c1] : memref<64x256xf32>
      %c2 = arith.constant 2 : index
      %b2 = affine.load %B[%k, %j + %c2] : memref<64x256xf32>
      %c3 = arith.constant 3 : index
      %b3 = affine.load %B[%k, %j + %c3] : memref<64x256xf32>
      %s0 = arith.addf %b0, %b1 : f32
      %s1 = arith.addf %b2, %b3 : f32
      %s = arith.addf %s0, %s1 : f32
      affine.store %s, %C[%k, %j] : memref<64x256xf32>
    }
    egpu.return
  }
}

// -----

// A transposed staging copy (A[N, K]'s 128x8 tile staged as [K, N], rows padded to 132): the
// global row (n + e floordiv 8, k + e mod 8) moves by one for four consecutive e from a
// multiple of 4, the shared element (e mod 8, e floordiv 8) by one row (132 elements): one
// aligned 16-byte load and four scalar stores down the shared column (cp.async cannot
// transpose: the copy goes through registers).

// CHECK-LABEL: egpu.func @transposed_staging(
// CHECK-SAME:    %{{.*}}: memref<512x512xf32> {ein.name = "A", egpu.align = 16 : i64}
// CHECK:         scf.for %[[V:.*]] = %{{.*}} to %{{.*}} step %{{.*}} {
// CHECK-NEXT:      %[[E:.*]] = affine.apply affine_map<(d0) -> ((d0 * 4))> (%[[V]])
// CHECK-NEXT:      %[[R:.*]] = affine.apply affine_map<(d0) -> ((d0 floordiv 8))> (%[[E]])
// CHECK-NEXT:      %[[C:.*]] = affine.apply affine_map<(d0) -> ((d0 mod 8))> (%[[E]])
// CHECK:           %[[X:.*]] = egpu.vload %{{.*}}[%{{.*}}, %{{.*}}] {egpu.align = 16 : i64} : memref<512x512xf32> -> vector<4xf32>
// CHECK-NEXT:      %[[X0:.*]] = egpu.vextract %[[X]][0 : index]
// CHECK-NEXT:      affine.store %[[X0]], %{{.*}}[%[[C]], %[[R]]] : memref<8x132xf32>
// CHECK-NEXT:      %[[C1:.*]] = affine.apply affine_map<(d0) -> ((d0 + 1))> (%[[C]])
// CHECK-NEXT:      %[[X1:.*]] = egpu.vextract %[[X]][1 : index]
// CHECK-NEXT:      affine.store %[[X1]], %{{.*}}[%[[C1]], %[[R]]] : memref<8x132xf32>
// CHECK:           %[[X3:.*]] = egpu.vextract %[[X]][3 : index]
// CHECK-NEXT:      affine.store %[[X3]], %{{.*}}[%{{.*}}, %[[R]]] : memref<8x132xf32>
// CHECK-NOT:       affine.load
// CHECK:         egpu.return
builtin.module {
  egpu.func @transposed_staging(%A: memref<512x512xf32> {ein.name = "A"}) grid [4, 1, 1] block [16, 16, 1] {
    %sh = egpu.alloc_shared : memref<8x132xf32>
    %tx = egpu.thread_id x
    %ty = egpu.thread_id y
    %tid = affine.apply affine_map<(d0, d1) -> ((d0 + (d1 * 16)))> (%tx, %ty)
    %bx = egpu.block_id x
    %n = affine.apply affine_map<(d0) -> ((d0 * 128))> (%bx)
    %k = arith.constant 32 : index
    %size = arith.constant 1024 : index
    %t = arith.constant 256 : index
    scf.for %e = %tid to %size step %t {
      %r = affine.apply affine_map<(d0) -> ((d0 floordiv 8))> (%e)
      %c = affine.apply affine_map<(d0) -> ((d0 mod 8))> (%e)
      %v = affine.load %A[%n + %r, %k + %c] : memref<512x512xf32>
      affine.store %v, %sh[%c, %r] : memref<8x132xf32>
    }
    egpu.barrier
    egpu.return
  }
}

// -----

// Shape 5: four consecutive float16 elements per work-item kept only in memory (CUDA's
// egpu.load_extf / store_truncf) and a division, which has no packed 16-bit instruction: one
// aligned 8-byte vector load per input widened to float32 lanes, the body unrolled on the lanes
// with its rounding as it was, the results packed and narrowed into one aligned vector store. The second loop starts at an odd element (the offset
// 1 is no multiple of 4): left scalar.

// CHECK-LABEL: egpu.func @packed_half(
// CHECK-SAME:    %{{.*}}: memref<1024xf16> {ein.name = "x", egpu.align = 8 : i64}
// CHECK:         %[[X:.*]] = egpu.vload %{{.*}}[%{{.*}}] {egpu.align = 8 : i64} : memref<1024xf16> -> vector<4xf16>
// CHECK-NEXT:    %[[W:.*]] = egpu.vconvert %[[X]] : vector<4xf16> -> vector<4xf32>
// CHECK:         egpu.vextract %[[W]][0 : index]
// CHECK:         egpu.round
// CHECK:         egpu.vextract %[[W]][3 : index]
// CHECK:         %[[P:.*]] = egpu.vconvert %{{.*}} : vector<4xf32> -> vector<4xf16>
// CHECK-NEXT:    egpu.vstore %[[P]], %{{.*}}[%{{.*}}] {egpu.align = 8 : i64} : vector<4xf16>, memref<1024xf16>
// CHECK:         affine.for
// CHECK:           egpu.load_extf
// CHECK:           egpu.store_truncf
// CHECK:         egpu.return
builtin.module {
  egpu.func @packed_half(%x: memref<1024xf16> {ein.name = "x"}, %y: memref<1024xf16> {ein.name = "y"}) grid [1, 1, 1] block [256, 1, 1] {
    %tid = egpu.thread_id x
    %base = affine.apply affine_map<(d0) -> ((d0 * 4))> (%tid)
    affine.for %i = 0 to 4 {
      %e = affine.apply affine_map<(d0, d1) -> ((d0 + d1))> (%base, %i)
      %v = egpu.load_extf %x[%e] : memref<1024xf16> -> f32
      %p = arith.divf %v, %v : f32
      %r = egpu.round %p as f16 : f32
      egpu.store_truncf %r, %y[%e] : f32, memref<1024xf16>
    }
    affine.for %i = 0 to 4 {
      %e = affine.apply affine_map<(d0, d1) -> ((d0 + d1 + 1))> (%base, %i)
      %v = egpu.load_extf %x[%e] : memref<1024xf16> -> f32
      egpu.store_truncf %v, %y[%e] : f32, memref<1024xf16>
    }
    egpu.return
  }
}

// -----

// Shape 5, a chunk cut short at the extent's end: 4 elements per work-item over 1002, the
// last work-item's loop runs to min(4, 1002 - base). Versioned: when the chunk is whole, the
// packed vector accesses (a product rounded once to float16: packed float16 arithmetic, the
// same bits); else the loop as it was (the scalar tail).

// CHECK-LABEL: egpu.func @partial_half(
// CHECK:         %[[B:.*]] = affine.apply affine_map<(d0) -> (((d0 * -1) + 1002))> (%{{.*}})
// CHECK-NEXT:    %[[F:.*]] = arith.constant 4 : index
// CHECK-NEXT:    %[[C:.*]] = arith.cmpi sge, %[[B]], %[[F]] : index
// CHECK-NEXT:    scf.if %[[C]] {
// CHECK:           %[[X:.*]] = egpu.vload %{{.*}}[%{{.*}}] {egpu.align = 8 : i64} : memref<1002xf16> -> vector<4xf16>
// CHECK-NEXT:      arith.mulf %[[X]], %[[X]] : vector<4xf16>
// CHECK-NOT:       affine.for
// CHECK:           egpu.vstore %{{.*}}, %{{.*}}[%{{.*}}] {egpu.align = 8 : i64} : vector<4xf16>, memref<1002xf16>
// CHECK-NEXT:    } else {
// CHECK-NEXT:      affine.for %{{.*}} = 0 to min affine_map<(d0) -> (4, ((d0 * -1) + 1002))>(%{{.*}}) {
// CHECK:             egpu.load_extf
// CHECK:             egpu.store_truncf
// CHECK:         egpu.return
builtin.module {
  egpu.func @partial_half(%x: memref<1002xf16> {ein.name = "x"}, %y: memref<1002xf16> {ein.name = "y"}) grid [1, 1, 1] block [256, 1, 1] {
    %tid = egpu.thread_id x
    %base = affine.apply affine_map<(d0) -> ((d0 * 4))> (%tid)
    affine.for %i = 0 to min affine_map<(d0) -> (4, ((d0 * -1) + 1002))>(%base) {
      %e = affine.apply affine_map<(d0, d1) -> ((d0 + d1))> (%base, %i)
      %v = egpu.load_extf %x[%e] : memref<1002xf16> -> f32
      %p = arith.mulf %v, %v : f32
      %r = egpu.round %p as f16 : f32
      egpu.store_truncf %r, %y[%e] : f32, memref<1002xf16>
    }
    egpu.return
  }
}
