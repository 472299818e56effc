// RUN: einc-opt %s -p "convert-ein-to-affine,einc-apply-schedule,legalize-f16-for-c,convert-affine-to-egpu{target=sycl},canonicalize,cse" -t sycl | filecheck %s

// A loop that holds a barrier, and every loop inside one, is printed with
// `#pragma clang loop unroll(disable)`: Intel's runtime compiler (intel-sycl-rt 2026.2) lost
// the stores of this staged reduction when it unrolled them (tests/test_opencl_isolation.py).
// The zeroing kernel, without barriers, gets no pragma.

// CHECK-LABEL: void conv_y(
// CHECK-NOT:   #pragma
// CHECK-LABEL: void conv_y_1(
// CHECK:         #pragma clang loop unroll(disable)
// CHECK-NEXT:    for (int64_t N_i = 0; N_i < 5; N_i++) {
// CHECK-NEXT:      #pragma clang loop unroll(disable)
// CHECK-NEXT:      for (int64_t K = 0; K < 3; K++) {
// CHECK-NEXT:        #pragma clang loop unroll(disable)
// CHECK-NEXT:        for (int64_t
// CHECK:             sycl::group_barrier(
// CHECK:             sycl::group_barrier(
// CHECK-NEXT:        #pragma clang loop unroll(disable)
// CHECK-NEXT:        for (int64_t
func.func @conv(%x: tensor<7xf32> {ein.name = "x"}, %w: tensor<3xf32> {ein.name = "w"}) -> tensor<5xf32> {
  %y = ein.einsum "y" add parallel [N = 5] reduce [K = 3] : tensor<5xf32> {
  ^bb0(%N : index, %K : index):
    %i = affine.apply affine_map<(d0, d1) -> (d0 + d1)>(%N, %K)
    %a = ein.load %x[%i] : tensor<7xf32>
    %b = ein.load %w[%K] : tensor<3xf32>
    %p = arith.mulf %a, %b : f32
    ein.yield %p : f32
  }
  func.return %y : tensor<5xf32>
}
transform.named_sequence @__transform_main(%root: !transform.any_op) {
  %n = transform.einc.match stmt "y" axis "N" in %root
  transform.einc.bind %n to "thread.z"
  %k = transform.einc.match stmt "y" axis "K" in %root
  %c = transform.einc.cache_write "y" at %k in "shared"
  %n2 = transform.einc.match stmt "y" axis "N" in %root
  %no, %ni = transform.einc.tile %n2 by 5
  transform.yield
}
