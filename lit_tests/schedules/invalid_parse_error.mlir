// RUN: not einc compile %S/../frontend/matmul.ein -t c --schedule %s 2>&1 | filecheck %s

// A malformed schedule is reported where the parser stopped (line 10, column 42 of this
// file), not at the start of the file.

builtin.module {
  transform.named_sequence @__transform_main(%root: !transform.any_op) {
    %n = transform.einc.match stmt "output0" axis "N" in %root
    transform.einc.parallelize %n
    %no, %ni = transform.einc.tile %n by ,
    transform.yield
  }
}

// CHECK: invalid_parse_error.mlir:10:42: error: malformed schedule: Expected integer literal
// CHECK-NEXT: %no, %ni = transform.einc.tile %n by ,
// CHECK-NEXT: {{^ +\^$}}
