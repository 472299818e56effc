builtin.module {
  transform.named_sequence @__transform_main(%root: !transform.any_op) {
    %f = transform.einc.match stmt "output0" axis "F" in %root
    %b = transform.einc.cache_read "input0" at %f halo
    transform.yield
  }
}
