// RUN: einc-opt %s --split-input-file | filecheck %s
// RUN: einc-opt %s --split-input-file | einc-opt --split-input-file | filecheck %s

// CHECK-LABEL: func.func @matmul
// CHECK:         %[[OUT:.*]] = ein.einsum "output0" add parallel [N = 4, M = 5] reduce [K = 3] : tensor<4x5xf32> {
// CHECK-NEXT:    ^bb0(%[[N:.*]]: index, %[[M:.*]]: index, %[[K:.*]]: index):
// CHECK-NEXT:      %[[A:.*]] = ein.load %{{.*}}[%[[N]], %[[K]]] : tensor<4x3xf32>
// CHECK-NEXT:      %[[B:.*]] = ein.load %{{.*}}[%[[K]], %[[M]]] : tensor<3x5xf32>
// CHECK-NEXT:      %[[P:.*]] = arith.mulf %[[A]], %[[B]] : f32
// CHECK-NEXT:      ein.yield %[[P]] : f32
// CHECK-NEXT:    }
func.func @matmul(%a: tensor<4x3xf32> {ein.name = "input0"}, %b: tensor<3x5xf32> {ein.name = "input1"}) -> tensor<4x5xf32> {
  %0 = ein.einsum "output0" add parallel [N = 4, M = 5] reduce [K = 3] : tensor<4x5xf32> {
  ^bb0(%n: index, %m: index, %k: index):
    %x = ein.load %a[%n, %k] : tensor<4x3xf32>
    %y = ein.load %b[%k, %m] : tensor<3x5xf32>
    %p = arith.mulf %x, %y : f32
    ein.yield %p : f32
  }
  func.return %0 : tensor<4x5xf32>
}

// -----

// CHECK-LABEL: func.func @scalar_assign
// CHECK:         ein.einsum "output0" assign parallel [] : tensor<f32> {
// CHECK:           ein.load %{{.*}}[] : tensor<f32>
func.func @scalar_assign(%a: tensor<f32> {ein.name = "input0"}) -> tensor<f32> {
  %0 = ein.einsum "output0" assign parallel [] : tensor<f32> {
  ^bb0:
    %x = ein.load %a[] : tensor<f32>
    ein.yield %x : f32
  }
  func.return %0 : tensor<f32>
}

// -----

// CHECK-LABEL: func.func @max_reduction_to_scalar
// CHECK:         ein.einsum "m" max parallel [] reduce [I = 8] : tensor<i32>
func.func @max_reduction_to_scalar(%a: tensor<8xi32> {ein.name = "input0"}) -> tensor<i32> {
  %0 = ein.einsum "m" max parallel [] reduce [I = 8] : tensor<i32> {
  ^bb0(%i: index):
    %x = ein.load %a[%i] : tensor<8xi32>
    ein.yield %x : i32
  }
  func.return %0 : tensor<i32>
}

// -----

// CHECK-LABEL: func.func @guarded_shifted_access
// CHECK:         %[[S:.*]] = affine.apply affine_map<(d0) -> ((d0 + -1))> (%{{.*}})
// CHECK:         scf.if
// CHECK:           ein.load %{{.*}}[%[[S]]] : tensor<4xf64>
func.func @guarded_shifted_access(%a: tensor<4xf64> {ein.name = "input0"}) -> tensor<6xf64> {
  %0 = ein.einsum "output0" assign parallel [N = 6] : tensor<6xf64> {
  ^bb0(%n: index):
    %s = affine.apply affine_map<(d0) -> (d0 - 1)>(%n)
    %c0 = arith.constant 0 : index
    %c4 = arith.constant 4 : index
    %lo = arith.cmpi sge, %s, %c0 : index
    %hi = arith.cmpi slt, %s, %c4 : index
    %ok = arith.andi %lo, %hi : i1
    %v = scf.if %ok -> (f64) {
      %x = ein.load %a[%s] : tensor<4xf64>
      scf.yield %x : f64
    } else {
      %z = arith.constant 0.0 : f64
      scf.yield %z : f64
    }
    ein.yield %v : f64
  }
  func.return %0 : tensor<6xf64>
}
