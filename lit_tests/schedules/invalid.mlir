// RUN: not einc-opt %s -p 'convert-ein-to-affine,einc-apply-schedule{file="%s"}' 2>&1 | filecheck %s

// Parallelizing a reduction loop is refused at the op (file:line:col of the schedule), and
// the module is not printed.

func.func @parallelize_reduction_loop_is_refused(%A: tensor<4x6xf32> {ein.name = "A"}) -> tensor<4xf32> {
  %C = ein.einsum "C" add parallel [N = 4] reduce [K = 6] : tensor<4xf32> {
  ^bb0(%N : index, %K : index):
    %a = ein.load %A[%N, %K] : tensor<4x6xf32>
    ein.yield %a : f32
  }
  func.return %C : tensor<4xf32>
}
transform.named_sequence @__transform_main(%root: !transform.any_op) {
  %k = transform.einc.match stmt "C" axis "K" in %root
  transform.einc.parallelize %k
  transform.yield
}

// CHECK: invalid.mlir:16:3: error: cannot parallelize loop K of C: its iterations both access 'C' (a carried dependence; split a reduction with rfactor first)
// CHECK-NEXT: transform.einc.parallelize %k
// CHECK-NEXT: ^~~~~~~~~~~~~~~~~~~~~~~~~~
// CHECK-NOT: func.func
