// RUN: not einc compile %S/../frontend/matmul.ein -t c --schedule %s 2>&1 | filecheck %s

// The C target has no GPU work-group memory: staging in "shared" is refused at the cache
// op (file:line:col of this schedule), before the schedule runs.

builtin.module {
  transform.named_sequence @__transform_main(%root: !transform.any_op) {
    %k = transform.einc.match stmt "output0" axis "K" in %root
    %s = transform.einc.cache_read "input1" at %k in "shared"
    transform.yield
  }
}

// CHECK: invalid_shared_on_c.mlir:9:5: error: the c target has no GPU shared memory: transform.einc.cache_read of 'input1' in "shared" needs a device target (stage in "local" memory on C)
// CHECK-NEXT: %s = transform.einc.cache_read "input1" at %k in "shared"
