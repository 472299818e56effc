// RUN: not einc compile %S/../frontend/matmul.ein -t c --schedule %s 2>&1 | filecheck %s

// A handle no op defines is reported at its first use, not after the last op.

builtin.module {
  transform.named_sequence @__transform_main(%root: !transform.any_op) {
    %n = transform.einc.match stmt "output0" axis "N" in %root
    %no, %ni = transform.einc.tile %m by 4
    transform.einc.parallelize %m
    transform.yield
  }
}

// CHECK: invalid_undefined_handle.mlir:8:36: error: undefined handle %m: no op before its use defines it
// CHECK-NEXT: %no, %ni = transform.einc.tile %m by 4
// CHECK-NEXT: {{^ +\^~$}}
