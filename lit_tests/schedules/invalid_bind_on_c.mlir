// RUN: not einc compile %S/../frontend/matmul.ein -t c --schedule %s 2>&1 | filecheck %s

// C has no GPU blocks or threads: a bind is refused at the op before the schedule runs
// (it used to be ignored).

builtin.module {
  transform.named_sequence @__transform_main(%root: !transform.any_op) {
    %n = transform.einc.match stmt "output0" axis "N" in %root
    transform.einc.parallelize %n
    %m = transform.einc.match stmt "output0" axis "M" in %root
    transform.einc.bind %m to "thread.x"
    transform.yield
  }
}

// CHECK: invalid_bind_on_c.mlir:11:5: error: the c target has no GPU blocks or threads to bind a loop to ("thread.x"); parallelize the loop instead
// CHECK-NEXT: transform.einc.bind %m to "thread.x"
// CHECK-NOT: void kernel
