// RUN: not einc compile %S/../frontend/matmul.ein -t c --schedule %s 2>&1 | filecheck %s

// A knob's selected value must be one of its options, in the script text as in
// Schedule.with_values: refused at the value.

builtin.module {
  transform.named_sequence @__transform_main(%root: !transform.any_op) {
    %t = transform.einc.knob "tile_n" = 3 from [2, 4, 8]
    %n = transform.einc.match stmt "output0" axis "N" in %root
    %no, %ni = transform.einc.tile %n by %t
    transform.yield
  }
}

// CHECK: invalid_knob_value.mlir:8:41: error: malformed schedule: knob 'tile_n': 3 is not one of [2, 4, 8]
// CHECK-NEXT: %t = transform.einc.knob "tile_n" = 3 from [2, 4, 8]
