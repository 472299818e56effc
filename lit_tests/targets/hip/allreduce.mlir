// RUN: einc-opt %s --split-input-file -p "convert-ein-to-affine,einc-apply-schedule,legalize-f16-for-c,convert-affine-to-egpu{target=hip},einc-vectorize-loops{target=hip},canonicalize,cse" -t hip | filecheck %s

// Row dot products with K.i (16) bound to thread.x: one __shfl_xor reduction of width 16
// (a 16-lane segment of a wave of 64 on gfx90a or 32 on gfx1030).

// CHECK:       static __device__ inline float einc_warp_add_f32(float a, int w) { for (int o = w / 2; o > 0; o >>= 1) { float b = __shfl_xor(a, o, w); a = a + b; } return a; }
// CHECK-LABEL: extern "C" __global__ void __launch_bounds__({{[0-9]+}}) row_dot_C(
// CHECK-NOT:   __shared__
// CHECK:         for (int64_t K_o = 0; K_o < 200; K_o += 16) {
// CHECK:         float total = einc_warp_add_f32(partial, 16);
// CHECK-NEXT:    if (thread_x == 0) {
// CHECK-NEXT:      C[N] = 0.0f;
// CHECK-NEXT:      C[N] = C[N] + total;
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
