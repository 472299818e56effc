transform.named_sequence @__transform_main(%root: !transform.any_op) {
  %n = transform.einc.match stmt "c" axis "i" in %root
  %no, %ni = transform.einc.tile %n by 4
  %l = transform.einc.cache_read "a" at %no
  transform.yield
}
