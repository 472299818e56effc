// RUN: not einc compile %S/../frontend/matmul.ein -t c --schedule %s 2>&1 | filecheck %s

// Sizes are signed 64-bit integers: a larger literal is refused at the literal, with its
// value (not wrapped to a negative number).

builtin.module {
  transform.named_sequence @__transform_main(%root: !transform.any_op) {
    %n = transform.einc.match stmt "output0" axis "N" in %root
    %no, %ni = transform.einc.tile %n by 18446744073709551000
    transform.yield
  }
}

// CHECK: invalid_size_beyond_64_bits.mlir:9:42: error: malformed schedule: tile size 18446744073709551000 does not fit in a signed 64-bit integer (at most 9223372036854775807)
// CHECK-NEXT: %no, %ni = transform.einc.tile %n by 18446744073709551000
// CHECK-NEXT: {{^ +\^~{19}$}}
