// RUN: not einc-opt %s -p 'convert-ein-to-affine,einc-apply-schedule{target="poplar"}' 2>&1 | filecheck %s

// The Poplar target has no float64 arrays: a float64 staging buffer is refused at the
// cache_read that made it, also when the schedule is embedded in the module (einc-opt
// remembers where it parsed each op).

func.func @f64_local_array_on_poplar(%A: tensor<4x6xf64> {ein.name = "A"}) -> tensor<4xf64> {
  %C = ein.einsum "C" add parallel [N = 4] reduce [K = 6] : tensor<4xf64> {
  ^bb0(%N : index, %K : index):
    %a = ein.load %A[%N, %K] : tensor<4x6xf64>
    ein.yield %a : f64
  }
  func.return %C : tensor<4xf64>
}
transform.named_sequence @__transform_main(%root: !transform.any_op) {
  %k = transform.einc.match stmt "C" axis "K" in %root
  %s = transform.einc.cache_read "A" at %k
  transform.yield
}

// CHECK: invalid_local_f64_on_poplar_embedded.mlir:17:3: error: the local buffer 'A_local': the poplar target has no local arrays of float64 (it computes float64 in a wider type)
// CHECK-NEXT: %s = transform.einc.cache_read "A" at %k
// CHECK-NEXT: ^~~~~~~~~~~~~~~~~~~~~~~~~
