// RUN: printf 'input input0: float32[4, 6]\ninput input1: float32[6, 8]\noutput0[N, M] +=! input0[N, K] * input1[K, M]\n' > %t.ein
// RUN: not einc compile %t.ein -t c --schedule %s 2>&1 | filecheck %s

// A layout must be a permutation of the staged tensor's dimensions: [0, 0] is not, refused
// with its location before anything runs.

builtin.module {
  transform.named_sequence @__transform_main(%root: !transform.any_op) {
    %n = transform.einc.match stmt "output0" axis "N" in %root
    %r = transform.einc.cache_read "input1" at %n in "local" layout [0, 0]
    transform.yield
  }
}

// CHECK: invalid_cache_layout.mlir:10:{{[0-9]+}}: error: {{.*}}layout [0, 0] is not a permutation

// RUN: sed 's/layout \[0, 0\]/layout [0, 1, 2]/' %s > %t.mlir
// RUN: not einc compile %t.ein -t c --schedule %t.mlir 2>&1 | filecheck %s --check-prefix=RANK
// A permutation of more dimensions than the tensor has: refused at the op when it runs.
// RANK: error: cannot cache_read 'input1' at loop N of output0: layout [0, 1, 2] is not a permutation of its 2 dimensions
