// RUN: einc-opt %s --split-input-file -p "convert-ein-to-affine,einc-apply-schedule,legalize-f16-for-c,convert-affine-to-egpu{target=hlsl},legalize-storage-dtypes{target=hlsl},legalize-narrow-ints{target=hlsl},legalize-f16-storage,einc-vectorize-loops{target=hlsl},canonicalize,cse" -t hlsl | filecheck %s

// Row dot products with K.i (16) bound to thread.x: a groupshared tree. No WaveActiveSum:
// lavapipe's wave may be as narrow as 4 lanes, and wgpu's naga (29) panicked translating
// glslang's OpGroupNonUniformFAdd of a value carried out of a loop (a block of 4 threads).

// CHECK: groupshared float partials[16];
// CHECK-LABEL: void row_dot_C(
// CHECK:         float partial = 0.0f;
// CHECK-NEXT:    for (int K_o = 0; K_o < 200; K_o += 16) {
// CHECK:             v = partial + A[N * 200 + K_o + thread_x] * B[N * 200 + K_o + thread_x];
// CHECK:         partials[thread_x] = partial;
// CHECK-NEXT:    GroupMemoryBarrierWithGroupSync();
// CHECK-NEXT:    if (thread_x < 8) {
// CHECK-NEXT:      partials[thread_x] = partials[thread_x] + partials[thread_x + 8];
// CHECK-NEXT:    }
// CHECK-NEXT:    GroupMemoryBarrierWithGroupSync();
// CHECK-NEXT:    if (thread_x < 4) {
// CHECK-NEXT:      partials[thread_x] = partials[thread_x] + partials[thread_x + 4];
// CHECK-NEXT:    }
// CHECK-NEXT:    GroupMemoryBarrierWithGroupSync();
// CHECK-NEXT:    if (thread_x < 2) {
// CHECK-NEXT:      partials[thread_x] = partials[thread_x] + partials[thread_x + 2];
// CHECK-NEXT:    }
// CHECK-NEXT:    GroupMemoryBarrierWithGroupSync();
// CHECK-NEXT:    if (thread_x < 1) {
// CHECK-NEXT:      partials[thread_x] = partials[thread_x] + partials[thread_x + 1];
// CHECK-NEXT:    }
// CHECK-NEXT:    if (thread_x == 0) {
// CHECK-NEXT:      float total = partials[thread_x];
// CHECK-NEXT:      C[N] = 0.0f;
// CHECK-NEXT:      C[N] = C[N] + total;
// CHECK-NEXT:    }
func.func @row_dot(%A: tensor<8x200xf32> {ein.name = "A"}, %B: tensor<8x200xf32> {ein.name = "B"}) -> tensor<8xf32> {
  %C = ein.einsum "C" add parallel [N = 8] reduce [K = 200] : tensor<8xf32> {
  ^bb0(%N : index, %K : index):
    %a = ein.load %A[%N, %K] : tensor<8x200xf32>
    %b = ein.load %B[%N, %K] : tensor<8x200xf32>
    %p = arith.mulf %a, %b : f32
    ein.yield %p : f32
  }
  func.return %C : tensor<8xf32>
}
transform.named_sequence @__transform_main(%root: !transform.any_op) {
  %n = transform.einc.match stmt "C" axis "N" in %root
  %k = transform.einc.match stmt "C" axis "K" in %root
  %ko, %ki = transform.einc.tile %k by 16
  transform.einc.bind %n to "block.x"
  transform.einc.bind %ki to "thread.x"
  transform.yield
}
