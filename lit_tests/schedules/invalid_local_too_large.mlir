// RUN: printf 'input input0: float32[4, 128]\ninput input1: float32[128, 128]\noutput0[N, M] +=! input0[N, K] * input1[K, M]\n' > %t.ein
// RUN: not einc compile %t.ein -t cuda --schedule %s 2>&1 | filecheck %s

// Each thread (one row) stages all of input1 (128 x 128 float32: 64 KiB) and its row of
// input0 (512 bytes) in local arrays: more than the 64 KiB of local arrays a CUDA work-item
// may hold (targets/descriptions.py `private_memory`). Refused before any code is printed, at
// the cache op that made the largest local array.

builtin.module {
  transform.named_sequence @__transform_main(%root: !transform.any_op) {
    %n = transform.einc.match stmt "output0" axis "N" in %root
    transform.einc.bind %n to "thread.x"
    %r = transform.einc.cache_read "input0" at %n in "local"
    %s = transform.einc.cache_read "input1" at %n in "local"
    transform.yield
  }
}

// CHECK: invalid_local_too_large.mlir:14:5: error: cuda target: kernel kernel_output0_1 cannot be launched: 66048 bytes of local arrays per work-item (at most 65536)
// CHECK-NOT: __global__
