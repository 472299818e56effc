// A schedule for examples/matmul.ein with one wrong step in it, for --check-numerics
// (docs/RESEARCH.md): the plugin pass `shorten-reduction` (examples/plugins/wrong_pass.py)
// applied from inside the schedule, between two correct transform ops.
//   einc compile examples/matmul.ein --load-pass-plugin examples/plugins/wrong_pass.py \
//       --schedule examples/plugins/wrong_schedule.mlir --check-numerics
transform.named_sequence @__transform_main(%root: !transform.any_op) {
  %n = transform.einc.match stmt "output0" axis "N" in %root
  %m = transform.einc.match stmt "output0" axis "M" in %root
  %mo, %mi = transform.einc.tile %m by 4
  %r = transform.apply_registered_pass "shorten-reduction" to %root : (!transform.any_op) -> !transform.any_op
  transform.einc.parallelize %n
  transform.yield
}
