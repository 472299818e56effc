// RUN: not einc compile %S/../frontend/matmul.ein -t poplar --schedule %s 2>&1 | filecheck %s

// Poplar's workers share no memory: staging in "shared" is refused at the cache op (here a
// cache_write under loops bound to blocks and threads), before the schedule runs; it used to
// pass the schedule checks and be refused at launch, at the tile op.

builtin.module {
  transform.named_sequence @__transform_main(%root: !transform.any_op) {
    %n = transform.einc.match stmt "output0" axis "N" in %root
    %k = transform.einc.match stmt "output0" axis "K" in %root
    %no, %ni = transform.einc.tile %n by 4
    transform.einc.bind %no to "block.x"
    transform.einc.bind %ni to "thread.x"
    %s = transform.einc.cache_write "output0" at %k in "shared"
    transform.yield
  }
}

// CHECK: invalid_shared_on_poplar.mlir:14:5: error: the poplar target has no shared memory: transform.einc.cache_write of 'output0' in "shared" cannot be staged there; stage it in "local" memory (a copy per work-item)
// CHECK-NEXT: %s = transform.einc.cache_write "output0" at %k in "shared"
