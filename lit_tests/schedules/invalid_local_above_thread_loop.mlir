// RUN: not einc compile %S/../frontend/matmul.ein -t opencl --schedule %s 2>&1 | filecheck %s
// RUN: not einc-opt %S/../frontend/matmul.ein -p 'convert-ein-to-affine,einc-apply-schedule{file="%s" target="opencl"}' 2>&1 | filecheck %s

// A local buffer is private to one work-item: output0's tile staged at the block loop, with
// the rows inside bound to threads afterwards, would give each thread its own copy of the
// block's tile. Refused after the schedule, at the cache op (file:line:col of this file).

builtin.module {
  transform.named_sequence @__transform_main(%root: !transform.any_op) {
    %n = transform.einc.match stmt "output0" axis "N" in %root
    %no, %ni = transform.einc.tile %n by 4
    transform.einc.bind %no to "block.x"
    %w = transform.einc.cache_write "output0" at %no in "local"
    transform.einc.bind %ni to "thread.x"
    transform.yield
  }
}

// CHECK: invalid_local_above_thread_loop.mlir:13:5: error: the local buffer 'output0_local' at loop N.o of output0 lies outside loop N.i of output0, which is bound to thread.x: a local buffer is private to one work-item (stage at a loop inside the bound loops, or use "shared" for a tile shared by the block's threads)
// CHECK-NEXT: %w = transform.einc.cache_write "output0" at %no in "local"
