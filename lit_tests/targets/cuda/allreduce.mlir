// RUN: einc-opt %s --split-input-file -p "convert-ein-to-affine,einc-apply-schedule,legalize-f16-for-c,convert-affine-to-egpu{target=cuda},legalize-f16-storage,einc-vectorize-loops{target=cuda},canonicalize,cse" -t cuda | filecheck %s

// Row dot products with K tiled by 16 and K.i bound to thread.x: each thread's partial
// over K.o in a register, then one warp-shuffle reduction over its cluster of 16 lanes
// (mask: the cluster's lanes; the xor offsets stay inside it), thread 0 stores.

// CHECK:       static __device__ inline float einc_warp_add_f32(float a, int w) { unsigned lane = (threadIdx.x + blockDim.x * (threadIdx.y + blockDim.y * threadIdx.z)) & 31u; unsigned m = w == 32 ? 0xffffffffu : ((1u << w) - 1u) << (lane & ~(unsigned)(w - 1)); for (int o = w / 2; o > 0; o >>= 1) { float b = __shfl_xor_sync(m, a, o, w); a = a + b; } return a; }
// CHECK-LABEL: extern "C" __global__ void __launch_bounds__({{[0-9]+}}) row_dot_C(
// CHECK-NOT:   __shared__
// CHECK:         float partial = 0.0f;
// CHECK-NEXT:    for (long long K_o = 0; K_o < 200; K_o += 16) {
// CHECK-NEXT:      float v;
// CHECK-NEXT:      if (thread_x < einc_minsi_i64(16, K_o * -1 + 200)) {
// CHECK-NEXT:        v = partial + A[N * 200 + K_o + thread_x] * B[N * 200 + K_o + thread_x];
// CHECK-NEXT:      } else {
// CHECK-NEXT:        v = partial;
// CHECK-NEXT:      }
// CHECK-NEXT:      partial = v;
// CHECK-NEXT:    }
// CHECK-NEXT:    float total = einc_warp_add_f32(partial, 16);
// CHECK-NEXT:    if (thread_x == 0) {
// CHECK-NEXT:      C[N] = 0.0f;
// CHECK-NEXT:      C[N] = C[N] + total;
// CHECK-NEXT:    }
// CHECK-NOT:   __syncthreads
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
