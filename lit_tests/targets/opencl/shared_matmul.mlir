// RUN: einc compile %S/../../frontend/matmul.ein -t opencl --schedule %s | filecheck %s

// The schedule of this file (the matmul of frontend/matmul.ein, 8x4 by 4x2): rows tiled by 4
// on blocks, each row and column of a tile on a thread, A's and B's tiles staged at the
// reduction-tile loop in work-group memory (__local): the block's threads split each copy
// (linear thread id, strided by the 8 threads; the rows of 2 elements copied as one 8-byte
// vector each, einc-vectorize-global), a barrier after the copies and one after
// the compute.

builtin.module {
  transform.named_sequence @__transform_main(%root: !transform.any_op) {
    %n = transform.einc.match stmt "output0" axis "N" in %root
    %m = transform.einc.match stmt "output0" axis "M" in %root
    %k = transform.einc.match stmt "output0" axis "K" in %root
    %no, %ni = transform.einc.tile %n by 4
    %ko, %ki = transform.einc.tile %k by 2
    %a, %b, %c, %d, %e = transform.einc.reorder %no, %ni, %m, %ko, %ki
    transform.einc.bind %a to "block.x"
    transform.einc.bind %b to "thread.y"
    transform.einc.bind %c to "thread.x"
    %s0 = transform.einc.cache_read "input0" at %d in "shared"
    %s1 = transform.einc.cache_read "input1" at %d in "shared"
    transform.yield
  }
}

// CHECK-LABEL: void kernel_output0_1(
// CHECK-NEXT:  __local float input0_shared[8];
// CHECK-NEXT:  __local float input1_shared[4];
// CHECK-NEXT:  int thread_x = (int)get_local_id(0);
// CHECK:       int tid = thread_x + thread_y * 2;
// CHECK:       for (int K_o = 0; K_o < 4; K_o += 2) {
// CHECK-NEXT:    for (int v = tid; v < 2; v += 8) {
// CHECK-NEXT:      int e = v * 2;
// CHECK:           float2 v_1 = vload2(0, &input1[(K_o + input1_c0) * 2 + input1_c1]);
// CHECK-NEXT:      vstore2(v_1, 0, &input1_shared[input1_c0 * 2 + input1_c1]);
// CHECK:         for (int v = tid; v < 4; v += 8) {
// CHECK-NEXT:      int e = v * 2;
// CHECK:           float2 v_1 = vload2(0, &input0[(N_o + input0_c0) * 4 + (K_o + input0_c1)]);
// CHECK-NEXT:      vstore2(v_1, 0, &input0_shared[input0_c0 * 2 + input0_c1]);
// CHECK-NEXT:    }
// CHECK-NEXT:    barrier(CLK_LOCAL_MEM_FENCE);
// CHECK-NEXT:    for (int K_i = 0; K_i < 2; K_i++) {
// CHECK-NEXT:      output0[N_o * 2 + thread_y * 2 + thread_x] = output0[N_o * 2 + thread_y * 2 + thread_x] + input0_shared[thread_y * 2 + K_i] * input1_shared[K_i * 2 + thread_x];
// CHECK-NEXT:    }
// CHECK-NEXT:    barrier(CLK_LOCAL_MEM_FENCE);
// CHECK-NEXT:  }
// CHECK-NEXT: }
