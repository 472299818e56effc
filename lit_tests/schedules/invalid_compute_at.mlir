// RUN: awk -v k=1 '/^\/\/ -----$/ { s++; print ""; next } { print (s == k - 1 ? $0 : "") }' %s > %t.1.mlir
// RUN: not einc-opt %t.1.mlir -p 'convert-ein-to-affine,einc-apply-schedule{file="%t.1.mlir"}' 2>&1 | filecheck %s --check-prefix=S1
// RUN: awk -v k=2 '/^\/\/ -----$/ { s++; print ""; next } { print (s == k - 1 ? $0 : "") }' %s > %t.2.mlir
// RUN: not einc-opt %t.2.mlir -p 'convert-ein-to-affine,einc-apply-schedule{file="%t.2.mlir"}' 2>&1 | filecheck %s --check-prefix=S2
// RUN: awk -v k=3 '/^\/\/ -----$/ { s++; print ""; next } { print (s == k - 1 ? $0 : "") }' %s > %t.3.mlir
// RUN: not einc-opt %t.3.mlir -p 'convert-ein-to-affine,einc-apply-schedule{file="%t.3.mlir"}' 2>&1 | filecheck %s --check-prefix=S3
// RUN: awk -v k=4 '/^\/\/ -----$/ { s++; print ""; next } { print (s == k - 1 ? $0 : "") }' %s > %t.4.mlir
// RUN: not einc-opt %t.4.mlir -p 'convert-ein-to-affine,einc-apply-schedule{file="%t.4.mlir"}' 2>&1 | filecheck %s --check-prefix=S4
// RUN: awk -v k=5 '/^\/\/ -----$/ { s++; print ""; next } { print (s == k - 1 ? $0 : "") }' %s > %t.5.mlir
// RUN: not einc-opt %t.5.mlir -p 'convert-ein-to-affine,einc-apply-schedule{file="%t.5.mlir"}' 2>&1 | filecheck %s --check-prefix=S5
// RUN: awk -v k=6 '/^\/\/ -----$/ { s++; print ""; next } { print (s == k - 1 ? $0 : "") }' %s > %t.6.mlir
// RUN: not einc-opt %t.6.mlir -p 'convert-ein-to-affine,einc-apply-schedule{file="%t.6.mlir"}' 2>&1 | filecheck %s --check-prefix=S6
// RUN: awk -v k=7 '/^\/\/ -----$/ { s++; print ""; next } { print (s == k - 1 ? $0 : "") }' %s > %t.7.mlir
// RUN: not einc-opt %t.7.mlir -p 'convert-ein-to-affine,einc-apply-schedule{file="%t.7.mlir"}' 2>&1 | filecheck %s --check-prefix=S7
// RUN: awk -v k=8 '/^\/\/ -----$/ { s++; print ""; next } { print (s == k - 1 ? $0 : "") }' %s > %t.8.mlir
// RUN: not einc-opt %t.8.mlir -p 'convert-ein-to-affine,einc-apply-schedule{file="%t.8.mlir"}' 2>&1 | filecheck %s --check-prefix=S8

// Each section's schedule is refused at the failing op (file:line:col), and nothing is
// printed. Section k is run alone: the other sections are blanked, so lines keep their numbers.

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
  transform.einc.compute_at %p at %n
  transform.yield
}

// S1: .mlir:43:3: error: cannot compute_at loop N.o of T: it must index 'T' with one distinct loop variable per dimension (an invertible map from its loops to the elements)
// S1-NEXT: transform.einc.compute_at %p at %n
// S1-NOT: func.func

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
  transform.einc.compute_at %p at %n
  transform.yield
}

// S2: .mlir:78:3: error: cannot compute loop N of U at loop N of T: the loop must be in a later nest beside the producer
// S2-NEXT: transform.einc.compute_at %p at %n
// S2-NOT: func.func

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
  transform.einc.compute_at %p at %n
  transform.yield
}

// S3: .mlir:113:3: error: cannot compute loop N of T at loop N of U: 'T' is not read inside the loop
// S3-NEXT: transform.einc.compute_at %p at %n
// S3-NOT: func.func

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
  transform.einc.compute_at %f at %b
  transform.yield
}

// S4: .mlir:150:3: error: cannot compute_at loop N of U: its nest must write exactly one tensor, it writes 2
// S4-NEXT: transform.einc.compute_at %f at %b
// S4-NOT: func.func

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
  transform.einc.reverse_compute_at %d at %k
  transform.yield
}

// S5: .mlir:182:3: error: cannot compute loop N of D at loop K of C: an element of 'C' the consumer needs is not final after an iteration (loop K of C revisits elements: a reduction around the loop)
// S5-NEXT: transform.einc.reverse_compute_at %d at %k
// S5-NOT: func.func

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
  transform.einc.reverse_compute_at %d at %b
  transform.yield
}

// S6: .mlir:217:3: error: cannot compute loop N of D at loop N of C: an element of 'C' the consumer needs is not final after an iteration (loop K of C revisits elements: a reduction around the loop)
// S6-NEXT: transform.einc.reverse_compute_at %d at %b
// S6-NOT: func.func

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
  transform.einc.reverse_compute_at %d at %n
  transform.yield
}

// S7: .mlir:249:3: error: cannot compute loop N of D at loop N of C: the consumer must read 'C' at its own loop variables, one per dimension (its reads reach other elements)
// S7-NEXT: transform.einc.reverse_compute_at %d at %n
// S7-NOT: func.func

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
  transform.einc.reverse_compute_at %d at %n
  transform.yield
}

// S8: .mlir:279:3: error: cannot compute loop N of D at loop N of C: the consumer must be elementwise (its output indexed by each of its loops, no reduction, not read)
// S8-NEXT: transform.einc.reverse_compute_at %d at %n
// S8-NOT: func.func
