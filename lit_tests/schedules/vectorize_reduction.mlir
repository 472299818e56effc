// RUN: einc-opt %s --split-input-file -p convert-ein-to-affine,einc-apply-schedule | filecheck %s
// RUN: einc-opt %s --split-input-file -p "convert-ein-to-affine,einc-apply-schedule,einc-vectorize-loops{target=c},canonicalize,cse" | filecheck %s --check-prefix=VEC

// transform.einc.vectorize_reduction marks an innermost reduction loop; einc-vectorize-loops
// turns it into a vector accumulator carried by the main loop, one egpu.vreduce after it.

// CHECK-LABEL: func.func @row_sum(
// CHECK:         } {einc.stmt = "C", einc.axis = "K", einc.vectorize_reduction}
// VEC-LABEL: func.func @row_sum(
// VEC:         %[[ACC:.*]] = affine.for %{{.*}} = 0 to 64 step 16 iter_args(%[[V:.*]] = %{{.*}}) -> (vector<16xf32>) {
// VEC:           %[[X:.*]] = egpu.vload
// VEC:           %[[S:.*]] = arith.addf %[[V]], %[[X]] : vector<16xf32>
// VEC:           affine.yield %[[S]] : vector<16xf32>
// VEC:         egpu.vreduce add %[[ACC]]
func.func @row_sum(%A: tensor<4x64xf32> {ein.name = "A"}) -> tensor<4xf32> {
  %C = ein.einsum "C" add parallel [N = 4] reduce [K = 64] : tensor<4xf32> {
  ^bb0(%N : index, %K : index):
    %a = ein.load %A[%N, %K] : tensor<4x64xf32>
    ein.yield %a : f32
  }
  func.return %C : tensor<4xf32>
}
transform.named_sequence @__transform_main(%root: !transform.any_op) {
  %k = transform.einc.match stmt "C" axis "K" in %root
  transform.einc.vectorize_reduction %k
  transform.yield
}
