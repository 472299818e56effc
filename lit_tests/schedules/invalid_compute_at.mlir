// RUN: einc-opt %s --split-input-file --verify-diagnostics -p convert-ein-to-affine,einc-apply-schedule | filecheck %s
// RUN: not einc-opt %s --split-input-file -p convert-ein-to-affine,einc-apply-schedule 2>&1 >/dev/null | filecheck %s --check-prefix=ERR
// Each section's embedded schedule is refused at the failing op (file:line:col, checked by
// --verify-diagnostics against the expected-error comments), and nothing is printed for it.

// A tiled producer indexes T with N.o + N.i: no invertible map from its loops to T.

func.func @compute_at_of_a_tiled_producer_is_refused(%A: tensor<4x8xf32> {ein.name = "A"}) -> tensor<4x8xf32> {
  %T = ein.einsum "T" max parallel [N = 4] reduce [C = 8] : tensor<4xf32> {
  ^bb0(%N: index, %C: index):
    %0 = ein.load %A[%N, %C] : tensor<4x8xf32>
    ein.yield %0 : f32
  }
  %B = ein.einsum "B" assign parallel [N = 4, C = 8] : tensor<4x8xf32> {
  ^bb0(%N_1: index, %C_1: index):
    %1 = ein.load %A[%N_1, %C_1] : tensor<4x8xf32>
    %2 = ein.load %T[%N_1] : tensor<4xf32>
    %3 = arith.subf %1, %2 : f32
    ein.yield %3 : f32
  }
  func.return %B : tensor<4x8xf32>
}
transform.named_sequence @__transform_main(%root: !transform.any_op) {
  %n = transform.einc.match stmt "B" axis "N" in %root
  %t = transform.einc.match stmt "T" axis "N" in %root
  %o, %i = transform.einc.tile %t by 2
  %p = transform.einc.match stmt "T" in %root
  // expected-error @+1 {{cannot compute_at loop N.o of T: it must index 'T' with one distinct loop variable per dimension (an invertible map from its loops to the elements)}}
  transform.einc.compute_at %p at %n
  transform.yield
}


// -----

// The loop must belong to a later nest than the producer.

func.func @compute_at_at_an_earlier_nest_is_refused(%A: tensor<4x8xf32> {ein.name = "A"}) -> tensor<4x8xf32> {
  %T = ein.einsum "T" assign parallel [N = 4, C = 8] : tensor<4x8xf32> {
  ^bb0(%N: index, %C: index):
    %0 = ein.load %A[%N, %C] : tensor<4x8xf32>
    ein.yield %0 : f32
  }
  %U = ein.einsum "U" assign parallel [N = 4, C = 8] : tensor<4x8xf32> {
  ^bb0(%N_2: index, %C_2: index):
    %4 = ein.load %A[%N_2, %C_2] : tensor<4x8xf32>
    ein.yield %4 : f32
  }
  %B = ein.einsum "B" assign parallel [N = 4, C = 8] : tensor<4x8xf32> {
  ^bb0(%N_1: index, %C_1: index):
    %1 = ein.load %T[%N_1, %C_1] : tensor<4x8xf32>
    %2 = ein.load %U[%N_1, %C_1] : tensor<4x8xf32>
    %3 = arith.addf %1, %2 : f32
    ein.yield %3 : f32
  }
  func.return %B : tensor<4x8xf32>
}
transform.named_sequence @__transform_main(%root: !transform.any_op) {
  %n = transform.einc.match stmt "T" axis "N" in %root
  %p = transform.einc.match stmt "U" in %root
  // expected-error @+1 {{cannot compute loop N of U at loop N of T: the loop must be in a later nest beside the producer}}
  transform.einc.compute_at %p at %n
  transform.yield
}


// -----

// U's nest is later than T's, but does not read T.

func.func @compute_at_of_a_tensor_the_loop_does_not_read_is_refused(%A: tensor<4x8xf32> {ein.name = "A"}) -> tensor<4x8xf32> {
  %T = ein.einsum "T" assign parallel [N = 4, C = 8] : tensor<4x8xf32> {
  ^bb0(%N: index, %C: index):
    %0 = ein.load %A[%N, %C] : tensor<4x8xf32>
    ein.yield %0 : f32
  }
  %U = ein.einsum "U" assign parallel [N = 4, C = 8] : tensor<4x8xf32> {
  ^bb0(%N_2: index, %C_2: index):
    %4 = ein.load %A[%N_2, %C_2] : tensor<4x8xf32>
    ein.yield %4 : f32
  }
  %B = ein.einsum "B" assign parallel [N = 4, C = 8] : tensor<4x8xf32> {
  ^bb0(%N_1: index, %C_1: index):
    %1 = ein.load %T[%N_1, %C_1] : tensor<4x8xf32>
    %2 = ein.load %U[%N_1, %C_1] : tensor<4x8xf32>
    %3 = arith.addf %1, %2 : f32
    ein.yield %3 : f32
  }
  func.return %B : tensor<4x8xf32>
}
transform.named_sequence @__transform_main(%root: !transform.any_op) {
  %n = transform.einc.match stmt "U" axis "N" in %root
  %p = transform.einc.match stmt "T" in %root
  // expected-error @+1 {{cannot compute loop N of T at loop N of U: 'T' is not read inside the loop}}
  transform.einc.compute_at %p at %n
  transform.yield
}


// -----

// After fusing T's and U's nests the producer writes two tensors.

func.func @compute_at_of_a_nest_writing_two_tensors_is_refused(%A: tensor<4x8xf32> {ein.name = "A"}) -> tensor<4x8xf32> {
  %T = ein.einsum "T" assign parallel [N = 4, C = 8] : tensor<4x8xf32> {
  ^bb0(%N: index, %C: index):
    %0 = ein.load %A[%N, %C] : tensor<4x8xf32>
    ein.yield %0 : f32
  }
  %U = ein.einsum "U" assign parallel [N = 4, C = 8] : tensor<4x8xf32> {
  ^bb0(%N_2: index, %C_2: index):
    %4 = ein.load %A[%N_2, %C_2] : tensor<4x8xf32>
    ein.yield %4 : f32
  }
  %B = ein.einsum "B" assign parallel [N = 4, C = 8] : tensor<4x8xf32> {
  ^bb0(%N_1: index, %C_1: index):
    %1 = ein.load %T[%N_1, %C_1] : tensor<4x8xf32>
    %2 = ein.load %U[%N_1, %C_1] : tensor<4x8xf32>
    %3 = arith.addf %1, %2 : f32
    ein.yield %3 : f32
  }
  func.return %B : tensor<4x8xf32>
}
transform.named_sequence @__transform_main(%root: !transform.any_op) {
  %b = transform.einc.match stmt "B" axis "N" in %root
  %t = transform.einc.match stmt "T" axis "N" in %root
  %u = transform.einc.match stmt "U" axis "N" in %root
  %f = transform.einc.fuse %t into %u
  // expected-error @+1 {{cannot compute_at loop N of U: its nest must write exactly one tensor, it writes 2}}
  transform.einc.compute_at %f at %b
  transform.yield
}


// -----

// At the K loop an element of C is not final after an iteration.

func.func @reverse_compute_at_inside_the_reduction_loop_is_refused(%A: tensor<4x4xf32> {ein.name = "A"}, %B: tensor<4x4xf32> {ein.name = "B"}) -> tensor<4x4xf32> {
  %C = ein.einsum "C" add parallel [N = 4, M = 4] reduce [K = 4] : tensor<4x4xf32> {
  ^bb0(%N: index, %M: index, %K: index):
    %0 = ein.load %A[%N, %K] : tensor<4x4xf32>
    %1 = ein.load %B[%K, %M] : tensor<4x4xf32>
    %2 = arith.mulf %0, %1 : f32
    ein.yield %2 : f32
  }
  %D = ein.einsum "D" assign parallel [N = 4, M = 4] : tensor<4x4xf32> {
  ^bb0(%N_1: index, %M_1: index):
    %3 = ein.load %C[%N_1, %M_1] : tensor<4x4xf32>
    %4 = ein.load %C[%N_1, %M_1] : tensor<4x4xf32>
    %5 = arith.addf %3, %4 : f32
    ein.yield %5 : f32
  }
  func.return %D : tensor<4x4xf32>
}
transform.named_sequence @__transform_main(%root: !transform.any_op) {
  %k = transform.einc.match stmt "C" axis "K" in %root
  %d = transform.einc.match stmt "D" in %root
  // expected-error @+1 {{cannot compute loop N of D at loop K of C: an element of 'C' the consumer needs is not final after an iteration (loop K of C revisits elements: a reduction around the loop)}}
  transform.einc.reverse_compute_at %d at %k
  transform.yield
}


// -----

// With K outermost, row N of C is only final after the last K iteration.

func.func @reverse_compute_at_with_the_reduction_outside_is_refused(%A: tensor<4x4xf32> {ein.name = "A"}, %B: tensor<4x4xf32> {ein.name = "B"}) -> tensor<4x4xf32> {
  %C = ein.einsum "C" add parallel [N = 4, M = 4] reduce [K = 4] : tensor<4x4xf32> {
  ^bb0(%N: index, %M: index, %K: index):
    %0 = ein.load %A[%N, %K] : tensor<4x4xf32>
    %1 = ein.load %B[%K, %M] : tensor<4x4xf32>
    %2 = arith.mulf %0, %1 : f32
    ein.yield %2 : f32
  }
  %D = ein.einsum "D" assign parallel [N = 4, M = 4] : tensor<4x4xf32> {
  ^bb0(%N_1: index, %M_1: index):
    %3 = ein.load %C[%N_1, %M_1] : tensor<4x4xf32>
    %4 = ein.load %C[%N_1, %M_1] : tensor<4x4xf32>
    %5 = arith.addf %3, %4 : f32
    ein.yield %5 : f32
  }
  func.return %D : tensor<4x4xf32>
}
transform.named_sequence @__transform_main(%root: !transform.any_op) {
  %n = transform.einc.match stmt "C" axis "N" in %root
  %k = transform.einc.match stmt "C" axis "K" in %root
  %m = transform.einc.match stmt "C" axis "M" in %root
  %a, %b, %c = transform.einc.reorder %k, %n, %m
  %d = transform.einc.match stmt "D" in %root
  // expected-error @+1 {{cannot compute loop N of D at loop N of C: an element of 'C' the consumer needs is not final after an iteration (loop K of C revisits elements: a reduction around the loop)}}
  transform.einc.reverse_compute_at %d at %b
  transform.yield
}


// -----

// D reads C[M, N] too: an element of another row, not completed by the iteration.

func.func @reverse_compute_at_reading_other_rows_is_refused(%A: tensor<4x4xf32> {ein.name = "A"}, %B: tensor<4x4xf32> {ein.name = "B"}) -> tensor<4x4xf32> {
  %C = ein.einsum "C" add parallel [N = 4, M = 4] reduce [K = 4] : tensor<4x4xf32> {
  ^bb0(%N: index, %M: index, %K: index):
    %0 = ein.load %A[%N, %K] : tensor<4x4xf32>
    %1 = ein.load %B[%K, %M] : tensor<4x4xf32>
    %2 = arith.mulf %0, %1 : f32
    ein.yield %2 : f32
  }
  %D = ein.einsum "D" assign parallel [N = 4, M = 4] : tensor<4x4xf32> {
  ^bb0(%N_1: index, %M_1: index):
    %3 = ein.load %C[%N_1, %M_1] : tensor<4x4xf32>
    %4 = ein.load %C[%M_1, %N_1] : tensor<4x4xf32>
    %5 = arith.addf %3, %4 : f32
    ein.yield %5 : f32
  }
  func.return %D : tensor<4x4xf32>
}
transform.named_sequence @__transform_main(%root: !transform.any_op) {
  %n = transform.einc.match stmt "C" axis "N" in %root
  %d = transform.einc.match stmt "D" in %root
  // expected-error @+1 {{cannot compute loop N of D at loop N of C: the consumer must read 'C' at its own loop variables, one per dimension (its reads reach other elements)}}
  transform.einc.reverse_compute_at %d at %n
  transform.yield
}


// -----

// The consumer must be elementwise.

func.func @reverse_compute_at_of_a_reduction_is_refused(%A: tensor<4x4xf32> {ein.name = "A"}, %B: tensor<4x4xf32> {ein.name = "B"}) -> tensor<4xf32> {
  %C = ein.einsum "C" add parallel [N = 4, M = 4] reduce [K = 4] : tensor<4x4xf32> {
  ^bb0(%N: index, %M: index, %K: index):
    %0 = ein.load %A[%N, %K] : tensor<4x4xf32>
    %1 = ein.load %B[%K, %M] : tensor<4x4xf32>
    %2 = arith.mulf %0, %1 : f32
    ein.yield %2 : f32
  }
  %D = ein.einsum "D" add parallel [N = 4] reduce [M = 4] : tensor<4xf32> {
  ^bb0(%N_1: index, %M_1: index):
    %3 = ein.load %C[%N_1, %M_1] : tensor<4x4xf32>
    ein.yield %3 : f32
  }
  func.return %D : tensor<4xf32>
}
transform.named_sequence @__transform_main(%root: !transform.any_op) {
  %n = transform.einc.match stmt "C" axis "N" in %root
  %d = transform.einc.match stmt "D" in %root
  // expected-error @+1 {{cannot compute loop N of D at loop N of C: the consumer must be elementwise (its output indexed by each of its loops, no reduction, not read)}}
  transform.einc.reverse_compute_at %d at %n
  transform.yield
}

// No chunk prints a module: every schedule fails.
// CHECK-NOT: func.func

// Without --verify-diagnostics, every chunk's error is reported (not only the first).
// ERR-COUNT-8: error: cannot compute
