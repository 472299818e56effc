// RUN: einc-opt %s --split-input-file --verify-diagnostics | filecheck %s

// CHECK-LABEL: func.func @scatter_rows
// CHECK: %[[R:.*]] = ein.scatter "data_out" assign %data over [B = 2, M = 5] : tensor<4x5xf32> {
// CHECK-NEXT: ^bb0(%[[B:.*]]: index, %[[M:.*]]: index):
// CHECK: ein.scatter_yield[%{{.*}}, %[[M]]], %{{.*}} : f32
// CHECK: func.return %[[R]]
func.func @scatter_rows(%data: tensor<4x5xf32>, %idx: tensor<2xi32>, %upd: tensor<2x5xf32>) -> tensor<4x5xf32> {
  %0 = ein.scatter "data_out" assign %data over [B = 2, M = 5] : tensor<4x5xf32> {
  ^bb0(%b: index, %m: index):
    %i = ein.load %idx[%b] : tensor<2xi32>
    %row = arith.index_cast %i : i32 to index
    %v = ein.load %upd[%b, %m] : tensor<2x5xf32>
    ein.scatter_yield[%row, %m], %v : f32
  }
  func.return %0 : tensor<4x5xf32>
}

// -----

// CHECK: Operation does not verify: ein.scatter: 1 indices for a tensor of rank 2
func.func @scatter_rank_mismatch(%data: tensor<4x5xf32>, %upd: tensor<2xf32>) -> tensor<4x5xf32> {
  %0 = ein.scatter "data_out" add %data over [B = 2] : tensor<4x5xf32> {
  ^bb0(%b: index):
    %v = ein.load %upd[%b] : tensor<2xf32>
    ein.scatter_yield[%b], %v : f32
  }
  func.return %0 : tensor<4x5xf32>
}
