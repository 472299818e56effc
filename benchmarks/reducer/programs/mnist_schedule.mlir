// examples/mnist.ein's default schedule on C, with a wrong plugin pass applied at its end
// (benchmarks/reducer/passes/truncate_reduction.py): a failure at a schedule op.
builtin.module {
  transform.named_sequence @__transform_main(%0: !transform.any_op) {
    %1 = transform.einc.match stmt "data_0" axis "N" init in %0
    transform.einc.parallelize %1
    %2 = transform.einc.match stmt "data_0" axis "M" init in %0
    transform.einc.vectorize %2
    %3 = transform.einc.match stmt "data_0" axis "N" in %0
    %4 = transform.einc.match stmt "data_0" axis "K" in %0
    %5 = transform.einc.match stmt "data_0" axis "M" in %0
    %6, %7, %8 = transform.einc.reorder %3, %4, %5
    transform.einc.parallelize %6
    transform.einc.vectorize %8
    %9 = transform.einc.match stmt "data_1" axis "N" in %0
    transform.einc.parallelize %9
    %10 = transform.einc.match stmt "data_1" axis "K" in %0
    transform.einc.vectorize %10
    %11 = transform.einc.match stmt "data_2" axis "N" init in %0
    transform.einc.parallelize %11
    %12 = transform.einc.match stmt "data_2" axis "M" init in %0
    transform.einc.vectorize %12
    %13 = transform.einc.match stmt "data_2" axis "N" in %0
    %14 = transform.einc.match stmt "data_2" axis "K" in %0
    %15 = transform.einc.match stmt "data_2" axis "M" in %0
    %16, %17, %18 = transform.einc.reorder %13, %14, %15
    %19 = transform.einc.knob "data_2.tile_j" = 64 from [16, 32, 64, 128]
    %20 = transform.einc.knob "data_2.tile_i" = 8 from [1, 2, 4, 6, 8]
    %21 = transform.einc.knob "data_2.tile_k" = 256 from [64, 128, 256, 512]
    %22, %23 = transform.einc.tile %16 by %20
    %24, %25 = transform.einc.tile %17 by %21
    %26, %27 = transform.einc.tile %18 by %19
    %28, %29, %30, %31, %32, %33 = transform.einc.reorder %26, %24, %22, %25, %23, %27
    %34, %35 = transform.einc.peel %30 by 1
    %36 = transform.einc.unroll %32 by %20
    %37 = transform.einc.match stmt "data_2" axis "M.i" in %0
    transform.einc.vectorize %37
    %38 = transform.einc.cache_write "data_2" at %30 in "local"
    %39 = transform.einc.cache_read "weight" at %29 in "local"
    transform.einc.parallelize %28
    %40 = transform.einc.match stmt "data_3" axis "N" in %0
    transform.einc.parallelize %40
    %41 = transform.einc.match stmt "data_3" axis "K" in %0
    transform.einc.vectorize %41
    %42 = transform.einc.match stmt "data_4" axis "M" init in %0
    transform.einc.vectorize %42
    %43 = transform.einc.match stmt "data_4" axis "N" in %0
    %44 = transform.einc.match stmt "data_4" axis "K" in %0
    %45 = transform.einc.match stmt "data_4" axis "M" in %0
    %46, %47, %48 = transform.einc.reorder %43, %44, %45
    transform.einc.parallelize %46
    transform.einc.vectorize %48
    %49 = transform.einc.match stmt "data_5" axis "K" in %0
    transform.einc.vectorize %49
    %50 = transform.apply_registered_pass "truncate-reduction" to %0 : (!transform.any_op) -> !transform.any_op
    transform.yield
  }
}