// RUN: einc-opt %s --split-input-file -p "convert-ein-to-affine,einc-apply-schedule,legalize-f16-for-c,convert-affine-to-egpu{target=sycl},einc-vectorize-loops{target=sycl},canonicalize,cse" -t sycl | filecheck %s

// Row dot products with K.i (16) bound to thread.x: the partials meet in a work_group_static
// tree with group barriers (Intel's CPU device picks its sub-group size: the tree is always
// right).

// CHECK-LABEL: void row_dot_C(
// CHECK-NEXT:  syclexp::work_group_static<float[16]> partials;
// CHECK:         float partial = 0.0f;
// CHECK-NEXT:    for (int64_t K_o = 0; K_o < 200; K_o += 16) {
// CHECK:             v = partial + A[N * 200 + K_o + thread_x] * B[N * 200 + K_o + thread_x];
// CHECK:         partials[thread_x] = partial;
// CHECK-NEXT:    sycl::group_barrier(syclext::this_work_item::get_work_group<3>());
// CHECK-NEXT:    if (thread_x < 8) {
// CHECK-NEXT:      partials[thread_x] = partials[thread_x] + partials[thread_x + 8];
// CHECK-NEXT:    }
// CHECK-NEXT:    sycl::group_barrier(syclext::this_work_item::get_work_group<3>());
// CHECK-NEXT:    if (thread_x < 4) {
// CHECK-NEXT:      partials[thread_x] = partials[thread_x] + partials[thread_x + 4];
// CHECK-NEXT:    }
// CHECK-NEXT:    sycl::group_barrier(syclext::this_work_item::get_work_group<3>());
// CHECK-NEXT:    if (thread_x < 2) {
// CHECK-NEXT:      partials[thread_x] = partials[thread_x] + partials[thread_x + 2];
// CHECK-NEXT:    }
// CHECK-NEXT:    sycl::group_barrier(syclext::this_work_item::get_work_group<3>());
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
