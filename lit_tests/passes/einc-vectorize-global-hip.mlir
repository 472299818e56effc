// RUN: einc-opt %s --split-input-file -p 'einc-vectorize-global{target=hip}' | filecheck %s

// Shape 5 where the target keeps float16 itself (HIP's `_Float16`: plain affine loads and
// stores, each float32 op between an `arith.extf` and an `arith.truncf`), every op an add or
// mul rounded once: packed float16 arithmetic (gfx90a's v_pk_mul_f16 / v_pk_add_f16, the
// same bits), the constant 1.0 a float32 splat narrowed exactly, no lane unrolled.

// CHECK-LABEL: egpu.func @packed_half_hip(
// CHECK:         %[[X:.*]] = egpu.vload %{{.*}}[%{{.*}}] {egpu.align = 8 : i64} : memref<1024xf16> -> vector<4xf16>
// CHECK:         %[[Y:.*]] = egpu.vload %{{.*}}[%{{.*}}] {egpu.align = 8 : i64} : memref<1024xf16> -> vector<4xf16>
// CHECK-NEXT:    %[[P:.*]] = arith.mulf %[[X]], %[[Y]] : vector<4xf16>
// CHECK:         %[[C:.*]] = egpu.vconvert %{{.*}} : vector<4xf32> -> vector<4xf16>
// CHECK-NEXT:    %[[S:.*]] = arith.addf %[[P]], %[[C]] : vector<4xf16>
// CHECK:         egpu.vstore %[[S]], %{{.*}}[%{{.*}}] {egpu.align = 8 : i64} : vector<4xf16>, memref<1024xf16>
// CHECK-NOT:     arith.extf
// CHECK:         egpu.return
builtin.module {
  egpu.func @packed_half_hip(%x: memref<1024xf16> {ein.name = "x"}, %y: memref<1024xf16> {ein.name = "y"}, %z: memref<1024xf16> {ein.name = "z"}) grid [1, 1, 1] block [256, 1, 1] {
    %tid = egpu.thread_id x
    %base = affine.apply affine_map<(d0) -> ((d0 * 4))> (%tid)
    %one = arith.constant 1.0 : f32
    affine.for %i = 0 to 4 {
      %a = affine.load %x[%base + %i] : memref<1024xf16>
      %b = affine.load %y[%base + %i] : memref<1024xf16>
      %wa = arith.extf %a : f16 to f32
      %wb = arith.extf %b : f16 to f32
      %p = arith.mulf %wa, %wb : f32
      %pr = arith.truncf %p : f32 to f16
      %pw = arith.extf %pr : f16 to f32
      %s = arith.addf %pw, %one : f32
      %sr = arith.truncf %s : f32 to f16
      affine.store %sr, %z[%base + %i] : memref<1024xf16>
    }
    egpu.return
  }
}

// -----

// A product kept in float32 and rounded once, by the store's `arith.truncf`, after an add
// (a fused expression the language rounds once): not every op rounded, so the float32 lanes
// (the loads packed, the body unrolled per lane, the store packed).

// CHECK-LABEL: egpu.func @unrounded_half_hip(
// CHECK:         egpu.vload %{{.*}}[%{{.*}}] {egpu.align = 8 : i64} : memref<1024xf16> -> vector<4xf16>
// CHECK-NOT:     vector<4xf16>, vector<4xf16>
// CHECK:         arith.mulf %{{.*}}, %{{.*}} : f32
// CHECK:         egpu.vstore %{{.*}}, %{{.*}}[%{{.*}}] {egpu.align = 8 : i64} : vector<4xf16>, memref<1024xf16>
builtin.module {
  egpu.func @unrounded_half_hip(%x: memref<1024xf16> {ein.name = "x"}, %z: memref<1024xf16> {ein.name = "z"}) grid [1, 1, 1] block [256, 1, 1] {
    %tid = egpu.thread_id x
    %base = affine.apply affine_map<(d0) -> ((d0 * 4))> (%tid)
    %c = arith.constant 0.1 : f32
    affine.for %i = 0 to 4 {
      %a = affine.load %x[%base + %i] : memref<1024xf16>
      %wa = arith.extf %a : f16 to f32
      %p = arith.mulf %wa, %wa : f32
      %s = arith.addf %p, %c : f32
      %sr = arith.truncf %s : f32 to f16
      affine.store %sr, %z[%base + %i] : memref<1024xf16>
    }
    egpu.return
  }
}

// -----

// bfloat16 on HIP (storage only: egpu.load_extf / round / store_truncf): gfx90a has no packed
// bfloat16 arithmetic, so the float32 lanes, each op rounded as it was.

// CHECK-LABEL: egpu.func @bf16_hip(
// CHECK:         %[[X:.*]] = egpu.vload %{{.*}}[%{{.*}}] {egpu.align = 8 : i64} : memref<1024xbf16> -> vector<4xbf16>
// CHECK-NEXT:    egpu.vconvert %[[X]] : vector<4xbf16> -> vector<4xf32>
// CHECK:         arith.mulf %{{.*}}, %{{.*}} : f32
// CHECK-NEXT:    egpu.round %{{.*}} as bf16 : f32
// CHECK-NOT:     arith.mulf {{.*}} : vector<4xbf16>
// CHECK:         egpu.vstore %{{.*}}, %{{.*}}[%{{.*}}] {egpu.align = 8 : i64} : vector<4xbf16>, memref<1024xbf16>
builtin.module {
  egpu.func @bf16_hip(%x: memref<1024xbf16> {ein.name = "x"}, %y: memref<1024xbf16> {ein.name = "y"}) grid [1, 1, 1] block [256, 1, 1] {
    %tid = egpu.thread_id x
    %base = affine.apply affine_map<(d0) -> ((d0 * 4))> (%tid)
    affine.for %i = 0 to 4 {
      %e = affine.apply affine_map<(d0, d1) -> ((d0 + d1))> (%base, %i)
      %v = egpu.load_extf %x[%e] : memref<1024xbf16> -> f32
      %p = arith.mulf %v, %v : f32
      %r = egpu.round %p as bf16 : f32
      egpu.store_truncf %r, %y[%e] : f32, memref<1024xbf16>
    }
    egpu.return
  }
}

// -----

// A float16 tile staged transposed for MFMA (B[K, M]'s 64x32 tile as [M, K], rows padded to
// 68): HIP's copies are plain ones (`plain_vector_copies`), so the 16-bit bits too are
// aligned 16-byte loads of 8 consecutive columns; each thread takes two consecutive k rows
// (the loop over 128 chunks, `row_pairs_plan`) and writes each column's pair as one aligned
// 32-bit word down the tile (8 `vector<2xf16>` stores), the chunks ordered 16 row pairs
// before the next 8 columns: a wavefront's first 32 threads' words in 32 different banks
// (CUDA keeps such a copy scalar: its 16-bit vector copies are cp.async pairs).

// CHECK-LABEL: egpu.func @transposed_half_staging(
// CHECK:         %[[N:.*]] = arith.constant 128 : index
// CHECK:         scf.for %[[V:.*]] = %{{.*}} to %[[N]] step %{{.*}} {
// CHECK-NEXT:      %[[E:.*]] = affine.apply affine_map<(d0) -> ((((((d0 floordiv 16) floordiv 4) * 1024) + ((d0 mod 16) * 64)) + (((d0 floordiv 16) mod 4) * 8)))> (%[[V]])
// CHECK:           %[[X:.*]] = egpu.vload %{{.*}}[%{{.*}}, %{{.*}}] {egpu.align = 16 : i64} : memref<128x96xf16> -> vector<8xf16>
// CHECK-NEXT:      %[[E1:.*]] = affine.apply affine_map<(d0) -> ((d0 + 32))> (%[[E]])
// CHECK:           %[[Y:.*]] = egpu.vload %{{.*}}[%{{.*}}, %{{.*}}] {egpu.align = 16 : i64} : memref<128x96xf16> -> vector<8xf16>
// CHECK-NEXT:      %[[X0:.*]] = egpu.vextract %[[X]][0 : index]
// CHECK-NEXT:      %[[Y0:.*]] = egpu.vextract %[[Y]][0 : index]
// CHECK:           %[[P0:.*]] = egpu.vshuffle %{{.*}}, %{{.*}} [0, 2] : vector<2xf16>, vector<2xf16> -> vector<2xf16>
// CHECK-NEXT:      egpu.vstore %[[P0]], %{{.*}}[%[[C:.*]], %[[R:.*]]] {egpu.align = 4 : i64} : vector<2xf16>, memref<32x68xf16>
// CHECK-COUNT-6:   egpu.vstore %{{.*}}, %{{.*}}[%{{.*}}, %[[R]]] {egpu.align = 4 : i64} : vector<2xf16>, memref<32x68xf16>
// CHECK:           %[[X7:.*]] = egpu.vextract %[[X]][7 : index]
// CHECK-NEXT:      %[[Y7:.*]] = egpu.vextract %[[Y]][7 : index]
// CHECK:           egpu.vstore %{{.*}}, %{{.*}}[%{{.*}}, %[[R]]] {egpu.align = 4 : i64} : vector<2xf16>, memref<32x68xf16>
// CHECK-NOT:       affine.store
// CHECK-NOT:       affine.load
// CHECK:         egpu.return
builtin.module {
  egpu.func @transposed_half_staging(%B: memref<128x96xf16> {ein.name = "B"}) grid [3, 1, 1] block [64, 4, 1] {
    %sh = egpu.alloc_shared : memref<32x68xf16>
    %tx = egpu.thread_id x
    %ty = egpu.thread_id y
    %tid = affine.apply affine_map<(d0, d1) -> ((d0 + (d1 * 64)))> (%tx, %ty)
    %bx = egpu.block_id x
    %m = affine.apply affine_map<(d0) -> ((d0 * 32))> (%bx)
    %size = arith.constant 2048 : index
    %t = arith.constant 256 : index
    scf.for %e = %tid to %size step %t {
      %r = affine.apply affine_map<(d0) -> ((d0 floordiv 32))> (%e)
      %c = affine.apply affine_map<(d0) -> ((d0 mod 32))> (%e)
      %v = affine.load %B[%r, %m + %c] : memref<128x96xf16>
      affine.store %v, %sh[%c, %r] : memref<32x68xf16>
    }
    egpu.barrier
    egpu.return
  }
}
