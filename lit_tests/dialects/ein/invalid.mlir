// RUN: einc-opt %s --split-input-file --verify-diagnostics | filecheck %s

// CHECK: Operation does not verify: ein.load: 1 indices for a tensor of rank 2
func.func @load_rank_mismatch(%a: tensor<4x3xf32>) -> tensor<4xf32> {
  %0 = ein.einsum "o" assign parallel [N = 4] : tensor<4xf32> {
  ^bb0(%n: index):
    %x = ein.load %a[%n] : tensor<4x3xf32>
    ein.yield %x : f32
  }
  func.return %0 : tensor<4xf32>
}

// -----

// CHECK: Operation does not verify: ein.einsum: axes ['K'] are not in the output; only a reduction (+=!, >=!, ...) may sum over them
func.func @assign_with_reduction_axis(%a: tensor<4x3xf32>) -> tensor<4xf32> {
  %0 = ein.einsum "o" assign parallel [N = 4] reduce [K = 3] : tensor<4xf32> {
  ^bb0(%n: index, %k: index):
    %x = ein.load %a[%n, %k] : tensor<4x3xf32>
    ein.yield %x : f32
  }
  func.return %0 : tensor<4xf32>
}

// -----

// CHECK: Operation does not verify: ein.einsum: result shape [5] differs from the output axes' extents [4]
func.func @result_shape_mismatch(%a: tensor<4xf32>) -> tensor<5xf32> {
  %0 = ein.einsum "o" assign parallel [N = 4] : tensor<5xf32> {
  ^bb0(%n: index):
    %x = ein.load %a[%n] : tensor<4xf32>
    ein.yield %x : f32
  }
  func.return %0 : tensor<5xf32>
}

// -----

// CHECK: Operation does not verify: ein.einsum: yields f64 into a tensor of f32
func.func @yield_type_mismatch(%a: tensor<4xf64>) -> tensor<4xf32> {
  %0 = ein.einsum "o" assign parallel [N = 4] : tensor<4xf32> {
  ^bb0(%n: index):
    %x = ein.load %a[%n] : tensor<4xf64>
    ein.yield %x : f64
  }
  func.return %0 : tensor<4xf32>
}

// -----

// CHECK: Operation does not verify: ein.einsum: repeated axis name in ['N', 'N']
func.func @repeated_axis(%a: tensor<4x4xf32>) -> tensor<4x4xf32> {
  %0 = ein.einsum "o" assign parallel [N = 4, N = 4] : tensor<4x4xf32> {
  ^bb0(%n: index, %m: index):
    %x = ein.load %a[%n, %m] : tensor<4x4xf32>
    ein.yield %x : f32
  }
  func.return %0 : tensor<4x4xf32>
}

// -----

// CHECK: Operation does not verify: ein.einsum: the body takes one index argument per axis (2), got 1
func.func @missing_block_argument(%a: tensor<4x3xf32>) -> tensor<4xf32> {
  %0 = ein.einsum "o" add parallel [N = 4] reduce [K = 3] : tensor<4xf32> {
  ^bb0(%n: index):
    %x = ein.load %a[%n, %n] : tensor<4x3xf32>
    ein.yield %x : f32
  }
  func.return %0 : tensor<4xf32>
}
