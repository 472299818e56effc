// RUN: einc-opt %s -p 'convert-ein-to-affine,einc-apply-schedule,einc-init-accumulators,einc-vectorize-loops{target=c},einc-stream-stores' -t c | filecheck %s

// einc-stream-stores accepts the marked copy-out (whole vectors, the output never read back)
// and the C printer stores it through the streaming helper (vmovntps where the address is
// aligned to the vector, a plain store where not), the function ending with a fence.

// CHECK:      static inline void einc_vstream{{[0-9]+}}_f32x{{[0-9]+}}(float* a, einc_f32x{{[0-9]+}} v) {
// CHECK-NEXT: #if defined(__clang__) && defined(__{{[A-Z0-9]+}}__)
// CHECK-NEXT:   if (((uintptr_t)a & {{[0-9]+}}) == 0) { __builtin_nontemporal_store(v, (einc_f32x{{[0-9]+}}*)a); return; }
// CHECK-NEXT: #elif defined(__GNUC__) && defined(__{{[A-Z0-9]+}}__)
// CHECK:        if (((uintptr_t)a & {{[0-9]+}}) == 0) { __builtin_ia32_movntps{{[0-9]*}}((float*)a, (f_t)v); return; }
// CHECK-NEXT: #endif
// CHECK-NEXT:   *(einc_f32x{{[0-9]+}}_mem*)a = v;
// CHECK:      static inline void einc_sfence(void) {
// CHECK:      void stream_stores_of_a_row_tile(
// CHECK:        einc_vstream{{[0-9]+}}_f32x{{[0-9]+}}(&C[
// CHECK:        einc_sfence();
// CHECK-NEXT: }
func.func @stream_stores_of_a_row_tile(%A: tensor<8x6xf32> {ein.name = "A"}, %B: tensor<6x16xf32> {ein.name = "B"}) -> tensor<8x16xf32> {
  %C = ein.einsum "C" add parallel [N = 8, M = 16] reduce [K = 6] : tensor<8x16xf32> {
  ^bb0(%N : index, %M : index, %K : index):
    %a = ein.load %A[%N, %K] : tensor<8x6xf32>
    %b = ein.load %B[%K, %M] : tensor<6x16xf32>
    %p = arith.mulf %a, %b : f32
    ein.yield %p : f32
  }
  func.return %C : tensor<8x16xf32>
}
transform.named_sequence @__transform_main(%root: !transform.any_op) {
  %n = transform.einc.match stmt "C" axis "N" in %root
  %o, %i = transform.einc.tile %n by 2
  %c = transform.einc.cache_write "C" at %o
  transform.einc.stream_stores %c
  transform.yield
}
