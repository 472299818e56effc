// RUN: einc compile %S/../../frontend/matmul.ein -t sycl --schedule %s | filecheck %s

// A register-blocked matmul (frontend/matmul.ein, 8x4 by 4x2): rows tiled by 4, one tile per
// thread; each thread accumulates its 4x2 tile of output0 in a local array, set to the
// identity before the reduction (einc-init-accumulators: no fill kernel, no read-back of
// output0) and copied out after it; the 4x2 loops unrolled (the two elements of input1 a K step reads: one 8-byte vector load, einc-vectorize-global). The array is the
// work-item's own: an automatic array of the free-function kernel.

builtin.module {
  transform.named_sequence @__transform_main(%root: !transform.any_op) {
    %n = transform.einc.match stmt "output0" axis "N" in %root
    %m = transform.einc.match stmt "output0" axis "M" in %root
    %k = transform.einc.match stmt "output0" axis "K" in %root
    %no, %ni = transform.einc.tile %n by 4
    %a, %b, %c, %d = transform.einc.reorder %no, %k, %ni, %m
    transform.einc.bind %a to "thread.x"
    %w = transform.einc.cache_write "output0" at %a in "local"
    transform.einc.unroll %d by 2
    transform.einc.unroll %c by 4
    transform.yield
  }
}

// CHECK-LABEL: void kernel_output0(
// CHECK-NEXT:    int32_t thread_x = (int)syclext::this_work_item::get_nd_item<3>().get_local_id(2);
// CHECK-NEXT:    int32_t N_o = thread_x * 4;
// CHECK-NEXT:    float output0_local[8];
// CHECK-NEXT:    for (int32_t output0_c0 = 0; output0_c0 < 4; output0_c0++) {
// CHECK-NEXT:      for (int32_t output0_c1 = 0; output0_c1 < 2; output0_c1 += 2) {
// CHECK-NEXT:        einc_f32x2 v = einc_vbroadcast_f32x2(0.0f);
// CHECK-NEXT:        output0_local[output0_c0 * 2 + output0_c1] = v.v[0];
// CHECK-NEXT:        output0_local[output0_c0 * 2 + output0_c1 + 1] = v.v[1];
// CHECK-NEXT:      }
// CHECK-NEXT:    }
// CHECK-NEXT:    for (int32_t K = 0; K < 4; K++) {
// CHECK-NEXT:      einc_f32x2 v = einc_f32x2{{[{][{]}}input1[K * 2 + 0], input1[K * 2 + 0 + 1]}};
// CHECK-NEXT:      float v_1 = v.v[0];
// CHECK-NEXT:      output0_local[0 * 2 + 0] = output0_local[0 * 2 + 0] + input0[N_o * 4 + 0 * 4 + K] * v_1;
// CHECK-NEXT:      float v_2 = v.v[1];
// CHECK-NEXT:      output0_local[0 * 2 + 1] = output0_local[0 * 2 + 1] + input0[N_o * 4 + 0 * 4 + K] * v_2;
// CHECK-NEXT:      output0_local[1 * 2 + 0] = output0_local[1 * 2 + 0] + input0[N_o * 4 + 1 * 4 + K] * v_1;
// CHECK-NEXT:      output0_local[1 * 2 + 1] = output0_local[1 * 2 + 1] + input0[N_o * 4 + 1 * 4 + K] * v_2;
// CHECK-NEXT:      output0_local[2 * 2 + 0] = output0_local[2 * 2 + 0] + input0[N_o * 4 + 2 * 4 + K] * v_1;
// CHECK-NEXT:      output0_local[2 * 2 + 1] = output0_local[2 * 2 + 1] + input0[N_o * 4 + 2 * 4 + K] * v_2;
// CHECK-NEXT:      output0_local[3 * 2 + 0] = output0_local[3 * 2 + 0] + input0[N_o * 4 + 3 * 4 + K] * v_1;
// CHECK-NEXT:      output0_local[3 * 2 + 1] = output0_local[3 * 2 + 1] + input0[N_o * 4 + 3 * 4 + K] * v_2;
// CHECK-NEXT:    }
// CHECK-NEXT:    for (int32_t output0_c0 = 0; output0_c0 < 4; output0_c0++) {
// CHECK-NEXT:      for (int32_t output0_c1 = 0; output0_c1 < 2; output0_c1 += 2) {
// CHECK-NEXT:        einc_f32x2 v = einc_f32x2{{[{][{]}}output0_local[output0_c0 * 2 + output0_c1], output0_local[output0_c0 * 2 + output0_c1 + 1]}};
// CHECK-NEXT:        output0[(thread_x * 4 + output0_c0) * 2 + output0_c1] = v.v[0];
// CHECK-NEXT:        output0[(thread_x * 4 + output0_c0) * 2 + output0_c1 + 1] = v.v[1];
// CHECK-NEXT:      }
// CHECK-NEXT:    }
// CHECK-NEXT:  }
