// A schedule for examples/matmul.ein:
//   einc run examples/matmul.ein --schedule examples/matmul_schedule.mlir
// i-k-j order, j tiled by a knob (8, 32 or 64), parallel rows, vectorized inner tile.
transform.named_sequence @__transform_main(%root: !transform.any_op) {
  %t = transform.einc.knob "tile_m" = 64 from [8, 32, 64]
  %n = transform.einc.match stmt "output0" axis "N" in %root
  %m = transform.einc.match stmt "output0" axis "M" in %root
  %k = transform.einc.match stmt "output0" axis "K" in %root
  %n2, %k2, %m2 = transform.einc.reorder %n, %k, %m
  %mo, %mi = transform.einc.tile %m2 by %t
  transform.einc.parallelize %n2
  transform.einc.vectorize %mi
  transform.yield
}
