// RUN: printf 'input input0: float32[100000]\noutput0[N] = input0[N] * 2.0\n' > %t.ein
// RUN: not einc compile %t.ein -t c --schedule %s 2>&1 | filecheck %s

// An unroll makes at most 1024 copies of the body (and 65536 ops): unrolling by a million
// is refused at the op at once, instead of running for ever.

builtin.module {
  transform.named_sequence @__transform_main(%root: !transform.any_op) {
    %n = transform.einc.match stmt "output0" axis "N" in %root
    %left = transform.einc.unroll %n by 1000000
    transform.yield
  }
}

// CHECK: invalid_unroll_too_large.mlir:10:5: error: unrolling loop N of output0 by 100000 would make 100000 copies of its {{[0-9]+}} ops ({{[0-9]+}} ops); the limit is 1024 copies and 65536 ops (unroll by a smaller factor, or tile first)
// CHECK-NEXT: %left = transform.einc.unroll %n by 1000000
