// RUN: einc-opt %s --split-input-file -p convert-ein-to-affine,einc-apply-schedule | filecheck %s
// RUN: einc-opt %s --split-input-file -p convert-ein-to-affine,einc-apply-schedule,einc-init-accumulators | filecheck %s --check-prefix=INIT

// Then einc-init-accumulators: the fragments' copies cover C (each warp's lanes its 16 x 16
// tile): the fill nest goes and each fragment starts at the fill's zero, in registers.
// INIT-LABEL: func.func @matmul_f16(
// INIT-NEXT:    %[[ZERO:.*]] = arith.constant 0.000000e+00 : f32
// INIT-NEXT:    affine.for %{{.*}} = 0 to 32 step 16 {
// INIT:           %[[F:.*]] = memref.alloca() {ein.name = "C_frag", einc.fragment, {{.*}}} : memref<8xf32>
// INIT-NEXT:      affine.for %[[E:.*]] = 0 to 8 {
// INIT-NEXT:        affine.store %[[ZERO]], %[[F]][%[[E]]] : memref<8xf32>
// INIT-NEXT:      } {einc.copy, einc.axis = "C.infrag", einc.stmt = "C"}
// INIT-NEXT:      egpu.mma

// A 16 x 16 tile of a float16 matmul accumulating in float32 (the inputs cast to float32),
// its reduction loop K whole, becomes one loop over a warp's 32 lanes bound to thread.x
// holding egpu.mma; the tile's base indices are computed before it. B is read transposed
// (Bt[J, K]): its k dimension is 1, its column dimension 0. The accumulator is each lane's
// fragment (8 registers: its elements of the tile, mma.m16n8k16's layout), copied in from C
// before the mma and out after it (einc-init-accumulators later starts it at zero).

// CHECK-LABEL: func.func @matmul_f16(
// CHECK:         affine.for %[[IO:.*]] = 0 to 32 step 16 {
// CHECK-NEXT:      affine.for %[[JO:.*]] = 0 to 48 step 16 {
// CHECK-NEXT:        %[[A0:.*]] = affine.apply affine_map<(d0) -> (d0)> (%[[IO]])
// CHECK-NEXT:        %[[A1:.*]] = affine.apply affine_map<(d0) -> (0)> (%[[IO]])
// CHECK-NEXT:        %[[B0:.*]] = affine.apply affine_map<(d0) -> (d0)> (%[[JO]])
// CHECK-NEXT:        %[[B1:.*]] = affine.apply affine_map<(d0) -> (0)> (%[[JO]])
// CHECK-NEXT:        %[[Z:.*]] = arith.constant 0 : index
// CHECK-NEXT:        affine.for %[[L:.*]] = 0 to 32 {
// CHECK-NEXT:          %[[F:.*]] = memref.alloca() {ein.name = "C_frag", einc.fragment, {{.*}}} : memref<8xf32>
// CHECK-NEXT:          affine.for %[[E:.*]] = 0 to 8 {
// CHECK-NEXT:            %[[X:.*]] = affine.load %C[%[[IO]] + %[[L]] floordiv 4 + %[[E]] floordiv 2 mod 2 * 8, %[[JO]] + %[[E]] floordiv 4 * 8 + %[[L]] mod 4 * 2 + %[[E]] mod 2] : memref<32x48xf32>
// CHECK-NEXT:            affine.store %[[X]], %[[F]][%[[E]]] : memref<8xf32>
// CHECK-NEXT:          } {einc.copy, einc.axis = "C.infrag", einc.stmt = "C"}
// CHECK-NEXT:          egpu.mma %{{.*}}[%[[A0]], %[[A1]]], %{{.*}}[%[[B0]], %[[B1]]], %[[F]][%[[Z]]] lane %[[L]] {lanes = 32 : i64, k = 64 : i64, a_dims = [0 : i64, 1 : i64], b_dims = [1 : i64, 0 : i64], c_dims = []} : memref<32x64xf16>, memref<48x64xf16>, memref<8xf32>
// CHECK-NEXT:          affine.for %{{.*}} = 0 to 8 {
// CHECK:               } {einc.copy, einc.axis = "C.outfrag", einc.stmt = "C"}
// CHECK-NEXT:        } {einc.bind = "thread.x", einc.stmt = "C"}
func.func @matmul_f16(%A: tensor<32x64xf16> {ein.name = "A"}, %Bt: tensor<48x64xf16> {ein.name = "Bt"}) -> tensor<32x48xf32> {
  %C = ein.einsum "C" add parallel [I = 32, J = 48] reduce [K = 64] : tensor<32x48xf32> {
  ^bb0(%I : index, %J : index, %K : index):
    %a = ein.load %A[%I, %K] : tensor<32x64xf16>
    %b = ein.load %Bt[%J, %K] : tensor<48x64xf16>
    %x = arith.extf %a : f16 to f32
    %y = arith.extf %b : f16 to f32
    %p = arith.mulf %x, %y : f32
    ein.yield %p : f32
  }
  func.return %C : tensor<32x48xf32>
}
transform.named_sequence @__transform_main(%root: !transform.any_op) {
  %i = transform.einc.match stmt "C" axis "I" in %root
  %j = transform.einc.match stmt "C" axis "J" in %root
  %io, %ii = transform.einc.tile %i by 16
  %jo, %ji = transform.einc.tile %j by 16
  %r:4 = transform.einc.reorder %io, %jo, %ii, %ji
  %lanes = transform.einc.tensorize %r#2 "mma.m16n8k16"
  transform.yield
}

// -----

// A wavefront of 64 lanes for HIP's MFMA.

// CHECK-LABEL: func.func @matmul_bf16_mfma(
// CHECK:         affine.for %[[L:.*]] = 0 to 64 {
// CHECK-NEXT:      %[[F:.*]] = memref.alloca() {{.*}} : memref<4xf32>
// CHECK-NEXT:      affine.for %[[E:.*]] = 0 to 4 {
// CHECK-NEXT:        affine.load %C[%[[L]] floordiv 16 * 4 + %[[E]], %[[L]] mod 16] : memref<16x16xf32>
// CHECK:           egpu.mma {{.*}}, %[[F]][%{{.*}}] lane %[[L]] {lanes = 64 : i64, k = 16 : i64, {{.*}}} : memref<16x16xbf16>, memref<16x16xbf16>, memref<4xf32>
func.func @matmul_bf16_mfma(%A: tensor<16x16xbf16> {ein.name = "A"}, %B: tensor<16x16xbf16> {ein.name = "B"}) -> tensor<16x16xf32> {
  %C = ein.einsum "C" add parallel [I = 16, J = 16] reduce [K = 16] : tensor<16x16xf32> {
  ^bb0(%I : index, %J : index, %K : index):
    %a = ein.load %A[%I, %K] : tensor<16x16xbf16>
    %b = ein.load %B[%K, %J] : tensor<16x16xbf16>
    %x = arith.extf %a : bf16 to f32
    %y = arith.extf %b : bf16 to f32
    %p = arith.mulf %x, %y : f32
    ein.yield %p : f32
  }
  func.return %C : tensor<16x16xf32>
}
transform.named_sequence @__transform_main(%root: !transform.any_op) {
  %i = transform.einc.match stmt "C" axis "I" in %root
  %lanes = transform.einc.tensorize %i "mfma.16x16x16"
  transform.yield
}

// -----

// Below a loop bound to thread.y (a block's warps), the sequential reduction-tile loop K.o
// with its shared copy of A goes inside the lane loop (every lane runs the copy, which copies
// the same elements whoever runs it), the mma reading A's tile from shared memory and
// accumulating in the lane's fragment, held across the K.o loop (copied in before, out after).

// CHECK-LABEL: func.func @staged(
// CHECK:         affine.for %[[IW:.*]] = 0 to 32 step 16 {
// CHECK-NEXT:      arith.constant 0 : index
// CHECK-NEXT:      affine.for %[[L:.*]] = 0 to 32 {
// CHECK-NEXT:        %[[F:.*]] = memref.alloca() {ein.name = "C_frag", einc.fragment, {{.*}}} : memref<8xf32>
// CHECK-NEXT:        affine.for
// CHECK:             } {einc.copy, einc.axis = "C.infrag", einc.stmt = "C"}
// CHECK-NEXT:        affine.for %[[KO:.*]] = 0 to 64 step 32 {
// CHECK-NEXT:          %[[S:.*]] = memref.alloca() {{.*}}einc.memory = "shared"{{.*}} : memref<32x32xf16>
// CHECK:               egpu.mma %[[S]][%{{.*}}, %{{.*}}], %{{.*}}, %[[F]][%{{.*}}] lane %[[L]] {lanes = 32 : i64, k = 32 : i64
// CHECK-NEXT:        } {einc.stmt = "C", einc.axis = "K.o"}
// CHECK-NEXT:        affine.for
// CHECK:             } {einc.copy, einc.axis = "C.outfrag", einc.stmt = "C"}
// CHECK-NEXT:      } {einc.bind = "thread.x", einc.stmt = "C"}
// CHECK-NEXT:    } {{.*}}einc.bind = "thread.y"}
func.func @staged(%A: tensor<32x64xf16> {ein.name = "A"}, %B: tensor<64x16xf16> {ein.name = "B"}) -> tensor<32x16xf32> {
  %C = ein.einsum "C" add parallel [I = 32, J = 16] reduce [K = 64] : tensor<32x16xf32> {
  ^bb0(%I : index, %J : index, %K : index):
    %a = ein.load %A[%I, %K] : tensor<32x64xf16>
    %b = ein.load %B[%K, %J] : tensor<64x16xf16>
    %x = arith.extf %a : f16 to f32
    %y = arith.extf %b : f16 to f32
    %p = arith.mulf %x, %y : f32
    ein.yield %p : f32
  }
  func.return %C : tensor<32x16xf32>
}
transform.named_sequence @__transform_main(%root: !transform.any_op) {
  %i = transform.einc.match stmt "C" axis "I" in %root
  %j = transform.einc.match stmt "C" axis "J" in %root
  %k = transform.einc.match stmt "C" axis "K" in %root
  %iw, %i16 = transform.einc.tile %i by 16
  %ko, %ki = transform.einc.tile %k by 32
  %r:5 = transform.einc.reorder %iw, %ko, %i16, %j, %ki
  transform.einc.bind %r#0 to "thread.y"
  %a = transform.einc.cache_read "A" at %r#1 in "shared" pad 8
  %lanes = transform.einc.tensorize %r#2 "mma.m16n8k16"
  transform.yield
}
